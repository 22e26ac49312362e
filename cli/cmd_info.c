/* cmd_info.c - `kplan info DB`. */
#include <stdio.h>

#include "cli.h"

#include "../db/info.h"

const char kp_usage_info[] =
	"usage: kplan info DB\n"
	"\n"
	"Prints each run (where it came from, GPU, driver/runtime/CUPTI versions,\n"
	"command line, rank, dropped records, and what CUPTI said its own work cost\n"
	"the run, by kind: the stalls recording caused) and the row count of every\n"
	"table.\n";

KP_CMD(info)
{
	struct kp_err err = {0};
	struct kp_db *db;
	int rc;

	if (argc != 2)
		return kp_cli_usage("info", "expected one database path");
	db = kp_db_open(argv[1], KP_DB_RDONLY, &err);
	if (!db)
		return kp_cli_error(&err);
	rc = kp_db_info(db, stdout, &err);
	kp_db_close(db);
	return rc ? kp_cli_error(&err) : KP_EXIT_OK;
}
