/* cmd_diff.c - `kplan diff`: compare two runs, exit 1 on a regression. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../reports/diff.h"

const char kp_usage_diff[] =
	"usage: kplan diff A.db B.db [--run-a N] [--run-b M] [--fail-on-regression PCT]\n"
	"                  [--csv FILE] [--html FILE]\n"
	"\n"
	"Compares run B (after) with run A (before). First checks that the runs are\n"
	"comparable (same GPU, driver, compute capability, kernel set and launch\n"
	"count) and says what differs; then prints, per region (matched by label) and\n"
	"per top kernel, the time before and after and the change in percent. The\n"
	"run row is the summed stream time (first to last GPU op per stream).\n"
	"Regions are compared by their median time per occurrence, kernels by total\n"
	"time. A and B may be the same file with different --run-a/--run-b. A run\n"
	"that was not analyzed is analyzed first (one line says so), as 'kplan\n"
	"analyze' would: its regions are compared, not reported as gone.\n"
	"\n"
	"options:\n"
	"  --run-a N, --run-b M      runs to compare (default: the newest of each)\n"
	"  --fail-on-regression PCT  exit 1 when the run or a region is more than PCT\n"
	"                            percent slower in B (default: never fail)\n"
	"  --top N                   kernels compared (default 15)\n"
	"  --csv FILE                also write the rows as CSV\n"
	"  --html FILE               also write a self-contained HTML page of the diff\n"
	"\n"
	"exit status: 0 no regression (or no threshold), 1 regression, 2 error,\n"
	"64 usage.\n"
	"\n"
	"examples:\n"
	"  kplan diff before.db after.db --fail-on-regression 5\n"
	"  kplan diff ab.db ab.db --run-a 1 --run-b 2 --csv diff.csv\n";

static int num(const char *s, double *v)
{
	char *end;

	*v = strtod(s, &end);
	return *s && !*end && *v >= 0;
}

static int write_file(const char *path, const struct kp_diff *d,
		      void (*fn)(const struct kp_diff *d, FILE *f), struct kp_err *err)
{
	FILE *f = fopen(path, "w");
	int bad;

	if (!f)
		return kp_err_set(err, KP_EIO, "%s: cannot write: %s", path, strerror(errno));
	fn(d, f);
	bad = ferror(f);
	if (fclose(f) || bad)
		return kp_err_set(err, KP_EIO, "%s: write failed: %s", path, strerror(errno));
	return 0;
}

KP_CMD(diff)
{
	struct kp_diff_opts o = { .fail_pct = -1 };
	struct kp_err err = {0};
	struct kp_db *a = NULL, *b = NULL;
	struct kp_diff *d = NULL;
	const char *pa = NULL, *pb = NULL, *csv = NULL, *html = NULL;
	int i, rc = 0;
	double v;

	for (i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--run-a") || !strcmp(s, "--run-b") || !strcmp(s, "--top") ||
		    !strcmp(s, "--fail-on-regression")) {
			if (i + 1 >= argc || !num(argv[i + 1], &v))
				return kp_cli_usage("diff", "%s expects a non-negative number", s);
			i++;
			if (!strcmp(s, "--run-a"))
				o.run_a = (int64_t)v;
			else if (!strcmp(s, "--run-b"))
				o.run_b = (int64_t)v;
			else if (!strcmp(s, "--top"))
				o.top_kernels = (int)(v > 10000 ? 10000 : v);
			else
				o.fail_pct = v;
		} else if (!strcmp(s, "--csv") || !strcmp(s, "--html")) {
			if (i + 1 >= argc)
				return kp_cli_usage("diff", "%s expects a path", s);
			if (s[2] == 'c')
				csv = argv[++i];
			else
				html = argv[++i];
		} else if (s[0] == '-' && s[1]) {
			return kp_cli_usage("diff", "unknown option '%s'", s);
		} else if (!pa) {
			pa = s;
		} else if (!pb) {
			pb = s;
		} else {
			return kp_cli_usage("diff", "expected two databases, found a third: '%s'", s);
		}
	}
	if (!pb)
		return kp_cli_usage("diff", "expected two databases (A.db B.db)");
	if (kp_cli_analyze_first("diff", pa, o.run_a, 1, &err) ||
	    kp_cli_analyze_first("diff", pb, o.run_b, 1, &err))
		return kp_cli_error(&err);
	if (!(a = kp_db_open(pa, KP_DB_RDONLY, &err)) || !(b = kp_db_open(pb, KP_DB_RDONLY, &err))) {
		rc = -1;
		goto out;
	}
	if ((rc = kp_diff_compute(a, b, &o, &d, &err)))
		goto out;
	kp_diff_text(d, stdout);
	if (csv && (rc = write_file(csv, d, kp_diff_csv, &err)))
		goto out;
	if (html && (rc = write_file(html, d, kp_diff_html, &err)))
		goto out;
out:
	i = d && d->n_regressed ? KP_EXIT_VERDICT : KP_EXIT_OK;
	kp_diff_free(d);
	kp_db_close(b);
	kp_db_close(a);
	return rc ? kp_cli_error(&err) : i;
}
