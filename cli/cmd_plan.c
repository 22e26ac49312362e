/* cmd_plan.c - `kplan plan` (not implemented yet). */
#include <stdio.h>

#include "cli.h"

const char kp_usage_plan[] =
	"usage: kplan plan DB [--run N] -o model.kplan\n";


KP_CMD(plan)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kplan plan: not implemented yet\n");
	return KP_EXIT_ERROR;
}
