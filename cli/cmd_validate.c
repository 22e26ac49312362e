/*
 * cmd_validate.c - `kplan validate DIR`: the cost model's predicted graph
 * times against the measured ones of a validation corpus (validate/validate.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#include "../validate/validate.h"
#include "../common/log.h"
#include "../db/db.h"

const char kp_usage_validate[] =
	"usage: kplan validate DIR [--calib FILE] [--region LABEL] [--max-median PCT]\n"
	"                      [--max-error PCT] [--max-width RATIO] [--min-coverage PCT]\n"
	"                      [--csv FILE]\n"
	"\n"
	"Checks the cost model on a validation corpus: DIR holds ground_truth.csv\n"
	"(workload,eager_ms,graph_ms: each workload's step measured eagerly and as one\n"
	"CUDA graph on a GPU; an optional label column names the workload's region),\n"
	"one trace per workload (WORKLOAD.json.gz: the PyTorch profiler's, each step in\n"
	"an annotation, or `kplan export --chrome` of a kplan recording, each region\n"
	"an NVTX range) and calib.txt (that GPU's\n"
	"kplan-calibrate output). Each trace is imported and analyzed with that\n"
	"calibration, and the region's predicted graph time - its capturable body; edges\n"
	"a graph leaves outside, such as loss.item(), are shown apart - is compared with\n"
	"the measured one. bench/cost_corpus.py writes such a directory on a GPU; the\n"
	"corpora kept in the repository are bench/cost_corpus/h100 and h200.\n"
	"\n"
	"Prints one line per workload and a summary (median and largest |error|), and\n"
	"for the intervals the analysis puts around each prediction (graph_us_lo,\n"
	"graph_us_hi) whether the measured time lies inside (coverage) and how wide\n"
	"they are (hi/lo); 'path' marks a workload whose trace holds waits the captured\n"
	"path skips (capture_path), whose interval spans the library's two paths.\n"
	"\n"
	"options:\n"
	"  --calib FILE      calibration to use (default DIR/calib.txt when present,\n"
	"                    else the documented defaults)\n"
	"  --region LABEL    the region to compare where ground_truth.csv names none\n"
	"                    (default step)\n"
	"  --max-median PCT  exit 1 when the median |error| is above PCT percent\n"
	"  --max-error PCT   exit 1 when any workload's |error| is above PCT percent\n"
	"                    (or has no prediction); with --max-width, a workload whose\n"
	"                    interval holds the measured time and is at most RATIO wide\n"
	"                    passes too\n"
	"  --max-width RATIO see --max-error (e.g. 1.7: hi/lo at most 1.7)\n"
	"  --min-coverage PCT exit 1 when fewer than PCT percent of the predicted\n"
	"                    workloads have the measured time inside their interval\n"
	"  --csv FILE        also write the table as CSV\n"
	"\n"
	"exit status: 0 done (and within the limits given); 1 a limit exceeded; 2 bad\n"
	"corpus (no ground_truth.csv, bad numbers, unreadable calibration); 64 usage.\n"
	"\n"
	"examples:\n"
	"  kplan validate bench/cost_corpus/h100\n"
	"  kplan validate bench/cost_corpus/h200 --max-median 10 --max-error 20\n";

static int cmp_abs(const void *a, const void *b)
{
	double x = fabs(*(const double *)a), y = fabs(*(const double *)b);

	return (x > y) - (x < y);
}

static int parse_pct(const char *s, double *v)
{
	char *end;

	*v = strtod(s, &end);
	return !*s || *end || !(*v >= 0);
}

/* 1 when the measured graph time lies inside the row's interval. */
static int covers(const struct kp_validate_row *r)
{
	double t = r->graph_ms * 1e6;

	return r->hi_ns > 0 && (double)r->lo_ns <= t && t <= (double)r->hi_ns;
}

static double width(const struct kp_validate_row *r)
{
	return r->hi_ns > 0 && r->lo_ns > 0 ? (double)r->hi_ns / (double)r->lo_ns : NAN;
}

static void write_csv(FILE *f, const struct kp_validate_row *r, int n)
{
	fprintf(f, "workload,nodes,eager_profiled_us,graph_measured_us,graph_predicted_us,"
		"error_pct,edge_us,graph_lo_us,graph_hi_us,covered,path_points,note\n");
	for (int i = 0; i < n; i++) {
		if (!r[i].found) {
			fprintf(f, "%s,,,%.1f,,,,\"%s\"\n", r[i].workload, r[i].graph_ms * 1e3,
				r[i].note);
			continue;
		}
		fprintf(f, "%s,%lld,%.1f,%.1f,%.1f,%.2f,%.1f,%.1f,%.1f,%d,%d,\n", r[i].workload,
			(long long)r[i].nodes, r[i].eager_ns / 1e3, r[i].graph_ms * 1e3,
			r[i].pred_ns / 1e3, 100 * r[i].error, r[i].edge_ns / 1e3, r[i].lo_ns / 1e3,
			r[i].hi_ns / 1e3, covers(&r[i]), r[i].path_points);
	}
}

KP_CMD(validate)
{
	struct kp_err err = {0};
	const char *dir = NULL, *calib = NULL, *label = "step", *csv = NULL;
	double max_median = -1, max_error = -1, max_width = -1, min_cover = -1;
	struct kp_validate_row *rows = NULL;
	char scratch[4096], dflt[4200];
	int n = 0, i, rc = KP_EXIT_OK, n_ok = 0, missing = 0;
	int n_iv = 0, n_cov = 0, n_w = 0, n_by_iv = 0, n_miss = 0;
	double *widths = NULL;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--calib") || !strcmp(a, "--region") || !strcmp(a, "--csv") ||
		    !strcmp(a, "--max-median") || !strcmp(a, "--max-error") ||
		    !strcmp(a, "--max-width") || !strcmp(a, "--min-coverage")) {
			if (!v)
				return kp_cli_usage("validate", "%s needs a value", a);
			i++;
			if (!strcmp(a, "--calib"))
				calib = v;
			else if (!strcmp(a, "--region"))
				label = v;
			else if (!strcmp(a, "--csv"))
				csv = v;
			else if (!strcmp(a, "--max-width")) {
				if (parse_pct(v, &max_width) || max_width < 1)
					return kp_cli_usage("validate", "%s: '%s' is not a ratio >= 1", a, v);
			} else if (parse_pct(v, !strcmp(a, "--max-median") ? &max_median :
					     !strcmp(a, "--max-error") ? &max_error : &min_cover))
				return kp_cli_usage("validate", "%s: '%s' is not a percentage", a, v);
		} else if (a[0] == '-') {
			return kp_cli_usage("validate", "unknown option '%s'", a);
		} else if (!dir) {
			dir = a;
		} else {
			return kp_cli_usage("validate", "unexpected argument '%s'", a);
		}
	}
	if (!dir)
		return kp_cli_usage("validate", "needs the corpus directory");
	if (!calib) {
		snprintf(dflt, sizeof(dflt), "%s/calib.txt", dir);
		if (access(dflt, R_OK) == 0)
			calib = dflt;
	}
	if (kp_validate_read_truth(dir, &rows, &n, &err))
		return kp_cli_error(&err);
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof(scratch), "%s/kplan-validate-%ld.db", tmp && *tmp ? tmp : "/tmp",
		 (long)getpid());
	printf("corpus %s, calibration %s, region '%s'\n", dir, calib ? calib : "(defaults)", label);
	printf("%-20s %6s %12s %12s %12s %8s %10s %17s %6s\n", "workload", "nodes", "eager us",
	       "graph us", "predicted", "error", "edge us", "interval us", "hi/lo");
	double *errs = calloc((size_t)n + 1, sizeof(*errs));
	widths = calloc((size_t)n + 1, sizeof(*widths));
	if (!errs || !widths) {
		free(errs);
		free(widths);
		free(rows);
		kp_err_set(&err, KP_ENOMEM, "out of memory");
		return kp_cli_error(&err);
	}
	for (i = 0; i < n; i++) {
		struct kp_validate_row *r = &rows[i];
		kp_progress("validate", i + 1, n);
		if (kp_validate_one(dir, calib, r->label[0] ? r->label : label, scratch, r, &err)) {
			rc = kp_cli_error(&err);
			goto out;
		}
		if (!r->found) {
			missing++;
			printf("%-20s %6s %12s %12.1f %12s %8s %10s  %s\n", r->workload, "-", "-",
			       r->graph_ms * 1e3, "-", "-", "-", r->note);
			continue;
		}
		errs[n_ok++] = r->error;
		char iv[40] = "-", wd[16] = "-";
		if (r->hi_ns > 0) {
			snprintf(iv, sizeof(iv), "%.0f-%.0f%s", r->lo_ns / 1e3, r->hi_ns / 1e3,
				 covers(r) ? "" : "!");
			snprintf(wd, sizeof(wd), "%.2f", width(r));
			n_iv++;
			n_cov += covers(r);
			widths[n_w++] = width(r);
		}
		/* a miss the interval answers for: held inside, and narrow enough */
		if (max_width >= 1 && max_error >= 0 && fabs(r->error) * 100 > max_error &&
		    covers(r) && width(r) <= max_width)
			n_by_iv++;
		else if (max_error >= 0 && fabs(r->error) * 100 > max_error)
			n_miss++;
		printf("%-20s %6lld %12.1f %12.1f %12.1f %+7.1f%% %10.1f %17s %6s%s%s\n", r->workload,
		       (long long)r->nodes, r->eager_ns / 1e3, r->graph_ms * 1e3, r->pred_ns / 1e3,
		       100 * r->error, r->edge_ns / 1e3, iv, wd, r->path_points ? "  path" : "",
		       r->capturable ? "" : "  (not capturable)");
	}
	kp_progress_done();
	qsort(errs, (size_t)n_ok, sizeof(*errs), cmp_abs);
	double med = n_ok ? (n_ok % 2 ? fabs(errs[n_ok / 2])
			     : (fabs(errs[n_ok / 2 - 1]) + fabs(errs[n_ok / 2])) / 2) : NAN;
	double worst = n_ok ? fabs(errs[n_ok - 1]) : NAN;
	int within = 0;
	for (i = 0; i < n_ok; i++)
		within += fabs(errs[i]) <= 0.20;
	qsort(widths, (size_t)n_w, sizeof(*widths), cmp_abs);
	if (n_iv)
		printf("intervals: %d of %d hold the measured time (! marks a miss), hi/lo median "
		       "%.2f, largest %.2f\n", n_cov, n_iv, n_w % 2 ? widths[n_w / 2] :
		       (widths[n_w / 2 - 1] + widths[n_w / 2]) / 2, widths[n_w - 1]);
	if (n_by_iv)
		printf("  %d workload(s) beyond --max-error pass by their interval (inside, hi/lo <= "
		       "%.2f)\n", n_by_iv, max_width);
	printf("%d workloads, %d predicted: median |error| %.1f%%, largest %.1f%%, %d within "
	       "+-20%%\n", n, n_ok, 100 * med, 100 * worst, within);
	if (csv) {
		FILE *f = fopen(csv, "w");
		if (!f || (write_csv(f, rows, n), fclose(f))) {
			kp_err_set(&err, KP_EIO, "%s: cannot write: %s", csv, strerror(errno));
			rc = kp_cli_error(&err);
			goto out;
		}
	}
	if (max_median >= 0 && !(100 * med <= max_median)) {
		printf("validate: median |error| %.1f%% is above %.1f%%\n", 100 * med, max_median);
		rc = KP_EXIT_VERDICT;
	}
	if (min_cover >= 0 && (!n_iv || 100.0 * n_cov < min_cover * n_iv)) {
		printf("validate: %d of %d intervals hold the measured time, below %.1f%%\n", n_cov,
		       n_iv, min_cover);
		rc = KP_EXIT_VERDICT;
	}
	if (max_error >= 0 && (missing || n_miss)) {
		printf("validate: %s\n", missing ? "workloads without a prediction"
		       : "a workload's |error| is above the limit");
		rc = KP_EXIT_VERDICT;
	}
out:
	kp_db_remove(scratch);
	free(widths);
	free(errs);
	free(rows);
	return rc;
}
