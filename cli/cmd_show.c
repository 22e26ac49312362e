/* cmd_show.c - `kplan show` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_show[] =
	"usage: kplan show model.kplan\n";


KP_CMD(show)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan show: not implemented yet\n");
	return KP_EXIT_ERROR;
}
