/* cmd_export.c - `kplan export DB --csv TABLE|SQL [-o FILE]`. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

#include "../db/csv.h"

const char kp_usage_export[] =
	"usage: kplan export DB --csv TABLE|SQL [-o FILE]\n"
	"\n"
	"  --csv TABLE|SQL  write the table (by name) or the result of the SELECT\n"
	"                   statement as RFC 4180 CSV with a header row\n"
	"  -o FILE          write to FILE instead of standard output\n";

/* A query starts with SELECT or WITH; anything else names a table. */
static int is_query(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return !strncasecmp(s, "select", 6) || !strncasecmp(s, "with", 4);
}

KP_CMD(export)
{
	static const struct option opts[] = {
		{ "csv", required_argument, NULL, 'c' },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *csv = NULL, *out = NULL;
	struct kp_err err = {0};
	struct kp_db *db;
	FILE *f = stdout;
	int c, rc;

	while ((c = getopt_long(argc, argv, "c:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': csv = optarg; break;
		case 'o': out = optarg; break;
		default: return kp_cli_usage("export", "unknown option");
		}
	}
	if (optind != argc - 1)
		return kp_cli_usage("export", "expected one database path");
	if (!csv)
		return kp_cli_usage("export", "nothing to export: give --csv TABLE|SQL");
	db = kp_db_open(argv[optind], KP_DB_RDONLY, &err);
	if (!db)
		return kp_cli_error(&err);
	if (out && !(f = fopen(out, "w"))) {
		kp_err_set(&err, KP_EIO, "%s: cannot write", out);
		kp_db_close(db);
		return kp_cli_error(&err);
	}
	rc = is_query(csv) ? kp_csv_query(db, csv, f, NULL, &err) :
			     kp_csv_table(db, csv, f, NULL, &err);
	if (f != stdout && fclose(f) && !rc)
		rc = kp_err_set(&err, KP_EIO, "%s: write failed", out);
	kp_db_close(db);
	return rc ? kp_cli_error(&err) : KP_EXIT_OK;
}
