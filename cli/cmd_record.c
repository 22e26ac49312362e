/* cmd_record.c - `kplan record` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_record[] =
	"usage: kplan record [-o DB] [options] -- CMD [ARGS...]\n";


KP_CMD(record)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan record: not implemented yet\n");
	return KP_EXIT_ERROR;
}
