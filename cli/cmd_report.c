/* cmd_report.c - `kplan report` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_report[] =
	"usage: kplan report DB [-o report.html] [--csv DIR]\n";


KP_CMD(report)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan report: not implemented yet\n");
	return KP_EXIT_ERROR;
}
