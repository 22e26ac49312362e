/* cmd_diff.c - `kplan diff` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_diff[] =
	"usage: kplan diff A.db B.db [--fail-on-regression PCT]\n";


KP_CMD(diff)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan diff: not implemented yet\n");
	return KP_EXIT_ERROR;
}
