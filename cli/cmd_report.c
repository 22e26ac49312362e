/* cmd_report.c - `kplan report`: one self-contained HTML page and CSV files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../reports/report.h"

const char kp_usage_report[] =
	"usage: kplan report DB [--run N] [-o report.html] [--csv DIR]\n"
	"\n"
	"Writes one self-contained HTML page (inline CSS, SVG and script; no network)\n"
	"with the verdict; where each region's time goes now and with the plan; a\n"
	"timeline of the whole run to zoom, pan and click (a row per stream, plus\n"
	"regions, NVTX ranges, CPU ops and CUDA API calls; summaries per bin when\n"
	"zoomed out, so a run of millions of kernels stays a few MB); the regions,\n"
	"and a section per region with its kernels, its blockers and where in the\n"
	"code they were, and the plan's decision; the idle gaps by length and\n"
	"cause; the top kernels (short names that keep the distinguishing template\n"
	"argument, the full name on hover), fusion candidates, the plan, the\n"
	"cost-model constants and the collection quality. With --csv also writes\n"
	"kern_sum.csv, api_sum.csv, gaps.csv, regions.csv, fusion.csv and plan.csv\n"
	"(full kernel names).\n"
	"\n"
	"The database is only read. A run that was not analyzed still gets a report\n"
	"(trace summary and timeline) and a note saying to run 'kplan analyze DB'.\n"
	"\n"
	"options:\n"
	"  --run N         the run to report (default: the newest)\n"
	"  -o FILE         the HTML file (default: report.html; '-' for stdout)\n"
	"  --csv DIR       also write the CSV files into DIR (created when missing)\n"
	"  --no-html       write only the CSV files\n"
	"  --rows N        rows of the regions and fusion tables (default 200; the\n"
	"                  CSV files are never capped)\n"
	"\n"
	"examples:\n"
	"  kplan report run.db -o report.html --csv report-csv\n"
	"  kplan report ab.db --run 2 -o after.html\n";

static int parse_int(const char *s, long long *v)
{
	char *end;

	*v = strtoll(s, &end, 10);
	return *s && !*end && *v > 0;
}

KP_CMD(report)
{
	struct kp_report_opts opts = {0};
	struct kp_err err = {0};
	struct kp_report *rep = NULL;
	struct kp_db *db;
	const char *dbpath = NULL, *out = "report.html", *csv = NULL;
	int i, rc, html = 1;
	long long v;
	char verdict[1024];
	FILE *f;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--run") || !strcmp(a, "--rows")) {
			if (i + 1 >= argc || !parse_int(argv[i + 1], &v))
				return kp_cli_usage("report", "%s expects a positive number", a);
			if (!strcmp(a, "--run"))
				opts.run_id = v;
			else
				opts.max_rows = (int)(v > 100000 ? 100000 : v);
			i++;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--csv")) {
			if (i + 1 >= argc)
				return kp_cli_usage("report", "%s expects a path", a);
			if (!strcmp(a, "-o"))
				out = argv[++i];
			else
				csv = argv[++i];
		} else if (!strcmp(a, "--no-html")) {
			html = 0;
		} else if (a[0] == '-' && a[1]) {
			return kp_cli_usage("report", "unknown option '%s'", a);
		} else if (!dbpath) {
			dbpath = a;
		} else {
			return kp_cli_usage("report", "expected one database, found '%s' too", a);
		}
	}
	if (!dbpath)
		return kp_cli_usage("report", "expected a database path");
	if (!html && !csv)
		return kp_cli_usage("report", "--no-html without --csv writes nothing");
	db = kp_db_open(dbpath, KP_DB_RDONLY, &err);
	if (!db)
		return kp_cli_error(&err);
	rc = kp_report_load(db, &opts, &rep, &err);
	if (rc)
		goto out;
	if (rep->missing[0])
		fprintf(stderr, "kplan report: note: %s; the report shows the trace only\n", rep->missing);
	if (html) {
		f = strcmp(out, "-") ? fopen(out, "w") : stdout;
		if (!f) {
			rc = kp_err_set(&err, KP_EIO, "%s: cannot write the report", out);
			goto out;
		}
		rc = kp_report_html(rep, f, &err);
		if (f != stdout && fclose(f) && !rc)
			rc = kp_err_set(&err, KP_EIO, "%s: write failed", out);
		if (rc)
			goto out;
	}
	if (csv && (rc = kp_report_csv(db, rep, csv, &err)))
		goto out;
	if (!html || strcmp(out, "-")) {
		char shown[4 * sizeof(verdict)];

		/* it names the top region, whose label comes from the trace */
		printf("%s\n", kp_printable(shown, sizeof(shown),
					     kp_report_verdict(rep, verdict, sizeof(verdict))));
		if (html)
			printf("report: %s\n", out);
		if (csv)
			printf("csv:    %s/{kern_sum,api_sum,gaps,regions,fusion,plan}.csv\n", csv);
	}
out:
	kp_report_free(rep);
	kp_db_close(db);
	return rc ? kp_cli_error(&err) : KP_EXIT_OK;
}
