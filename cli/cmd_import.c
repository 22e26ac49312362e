/* cmd_import.c - `kplan import` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_import[] =
	"usage: kplan import TRACE -o DB\n";


KP_CMD(import)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan import: not implemented yet\n");
	return KP_EXIT_ERROR;
}
