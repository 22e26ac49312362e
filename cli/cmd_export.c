/*
 * cmd_export.c - `kplan export DB --csv TABLE|SQL [-o FILE]` and
 * `kplan export DB --chrome OUT.json [--run N]`.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

#include "../common/fileio.h"
#include "../db/csv.h"
#include "../importers/chrome_export.h"

const char kp_usage_export[] =
	"usage: kplan export DB --csv TABLE|SQL [-o FILE]\n"
	"       kplan export DB --chrome OUT.json [--run N]\n"
	"\n"
	"  --csv TABLE|SQL  write the table (by name) or the result of the SELECT\n"
	"                   statement as RFC 4180 CSV with a header row\n"
	"  -o FILE          write the CSV to FILE instead of standard output\n"
	"  --chrome OUT     write one run as a Chrome trace (JSON) that Perfetto\n"
	"                   (ui.perfetto.dev) and chrome://tracing open: kernels and\n"
	"                   copies per device and stream, CUDA API calls and annotations\n"
	"                   per thread, launch->kernel flow arrows, and the analyzer's\n"
	"                   regions and host-bound gaps (after `kplan analyze`) on a\n"
	"                   \"kplan analysis\" track. Uses the PyTorch profiler's\n"
	"                   categories, so `kplan import OUT` reads it back.\n"
	"                   OUT '-' writes to standard output\n"
	"  --run N          the run to export with --chrome (default: the newest)\n"
	"\n"
	"examples:\n"
	"  kplan export run.db --csv CUPTI_ACTIVITY_KIND_KERNEL -o kernels.csv\n"
	"  kplan export run.db --csv 'SELECT count(*) FROM kp_gaps WHERE host_bound'\n"
	"  kplan export run.db --chrome run.trace.json\n";

/* A query starts with SELECT or WITH; anything else names a table. */
static int is_query(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return !strncasecmp(s, "select", 6) || !strncasecmp(s, "with", 4);
}

static int export_chrome(struct kp_db *db, const char *out, long long run)
{
	struct kp_chrome_export_stats st;
	struct kp_err err = {0};
	struct kp_file_tmp t = { .fd = -1 };
	FILE *f = stdout;
	int rc;

	if (strcmp(out, "-")) {
		/* written beside out and renamed over it (common/fileio.h) */
		if (kp_file_tmp_open(&t, AT_FDCWD, out, 0666, &err) ||
		    !(f = kp_file_tmp_stream(&t, &err))) {
			kp_file_tmp_abort(&t);
			return kp_cli_error(&err);
		}
		setvbuf(f, NULL, _IOFBF, 1 << 20);
	}
	rc = kp_export_chrome(db, run, f, &st, &err);
	if (f != stdout) {
		if (rc)
			kp_file_tmp_abort(&t);
		else
			rc = kp_file_tmp_commit(&t, &err);
	}
	if (rc)
		return kp_cli_error(&err);
	if (f != stdout)
		fprintf(stderr, "kplan: wrote run %lld to %s: %lld events, %lld region occurrences, "
			"%lld host-bound gaps\n", (long long)st.run_id, out, (long long)st.events,
			(long long)st.regions, (long long)st.gaps);
	return KP_EXIT_OK;
}

KP_CMD(export)
{
	static const struct option opts[] = {
		{ "csv", required_argument, NULL, 'c' },
		{ "chrome", required_argument, NULL, 'C' },
		{ "run", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *csv = NULL, *out = NULL, *chrome = NULL;
	struct kp_err err = {0};
	struct kp_db *db;
	long long run = 0;
	FILE *f = stdout;
	char *end;
	int c, rc;

	while ((c = getopt_long(argc, argv, "c:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': csv = optarg; break;
		case 'C': chrome = optarg; break;
		case 'o': out = optarg; break;
		case 'r':
			run = strtoll(optarg, &end, 10);
			if (*end || run <= 0)
				return kp_cli_usage("export", "--run expects a positive run id, got '%s'",
						    optarg);
			break;
		default: return kp_cli_usage("export", "unknown option");
		}
	}
	if (optind != argc - 1)
		return kp_cli_usage("export", "expected one database path");
	if (!csv && !chrome)
		return kp_cli_usage("export", "nothing to export: give --csv TABLE|SQL or --chrome OUT");
	if (csv && chrome)
		return kp_cli_usage("export", "give either --csv or --chrome, not both");
	if (chrome && out)
		return kp_cli_usage("export", "--chrome names its output file; -o is for --csv");
	db = kp_db_open(argv[optind], KP_DB_RDONLY, &err);
	if (!db)
		return kp_cli_error(&err);
	if (chrome) {
		rc = export_chrome(db, chrome, run);
		kp_db_close(db);
		return rc;
	}
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
