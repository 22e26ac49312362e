/* cmd_calibrate.c - `kplan calibrate` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_calibrate[] =
	"usage: kplan calibrate [-o DB]\n";


KP_CMD(calibrate)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan calibrate: not implemented yet\n");
	return KP_EXIT_ERROR;
}
