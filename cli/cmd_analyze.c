/* cmd_analyze.c - `kplan analyze` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_analyze[] =
	"usage: kplan analyze DB [--run N] [--csv DIR]\n";


KP_CMD(analyze)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan analyze: not implemented yet\n");
	return KP_EXIT_ERROR;
}
