/*
 * diff.h - compare two runs (`kplan diff`): are they comparable, and per
 * region and per top kernel, how did the time change.
 *
 * Regions are matched by label (the first region of each label), kernels
 * by demangled name. The "run" row is the summed stream time (first to last
 * GPU op per stream), the quantity the launch-bound verdict divides by.
 * Only the run row and the region rows decide a regression; kernel rows are
 * shown for diagnosis.
 */
#ifndef KP_REPORTS_DIFF_H
#define KP_REPORTS_DIFF_H

#include <stdio.h>

#include "report.h"

enum kp_diff_kind { KP_DIFF_RUN, KP_DIFF_REGION, KP_DIFF_KERNEL };

struct kp_diff_row {
	int kind;                 /* enum kp_diff_kind */
	const char *name;         /* borrowed from the reports */
	const char *label;        /* kernels: kp_kernel_label of name; else name */
	int64_t a_ns, b_ns;       /* -1: absent on that side */
	int64_t a_count, b_count; /* occurrences / calls; -1 absent */
	double change_pct;        /* (b - a) / a * 100; 0 when a side is absent */
	int regressed;            /* change_pct > threshold (run and region rows) */
};

struct kp_diff_opts {
	int64_t run_a, run_b;     /* 0: the newest run of each database */
	double fail_pct;          /* regression threshold in percent; < 0: never */
	int top_kernels;          /* kernels compared; 0: 15 */
};

struct kp_diff {
	struct kp_report *a, *b;
	int comparable;           /* 1: same GPU, driver, compute capability, kernel set */
	struct kp_strbuf why;     /* what differs, "; "-separated ("" when comparable) */
	int64_t only_a, only_b;   /* kernel names found on one side only */
	KP_VEC(struct kp_diff_row) rows;   /* run, regions, kernels in that order */
	int n_regressed;
	double fail_pct;
};

/* Load both runs and compare. OUT: *out, free with kp_diff_free. */
int kp_diff_compute(struct kp_db *a, struct kp_db *b, const struct kp_diff_opts *opts,
		    struct kp_diff **out, struct kp_err *err);
void kp_diff_free(struct kp_diff *d);

/* The comparison as aligned text (stdout of `kplan diff`). */
void kp_diff_text(const struct kp_diff *d, FILE *f);
/* As CSV: kind,name,a_us,b_us,a_count,b_count,change_pct,regressed. */
void kp_diff_csv(const struct kp_diff *d, FILE *f);
/*
 * As one self-contained HTML page holding the diff section: a chart of the
 * run and each region before and after, then the table.
 */
void kp_diff_html(const struct kp_diff *d, FILE *f);

#endif
