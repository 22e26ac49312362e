/* cmd_check.c - `kplan check` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_check[] =
	"usage: kplan check model.kplan\n";


KP_CMD(check)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan check: not implemented yet\n");
	return KP_EXIT_ERROR;
}
