/*
 * report.h - what `kplan report` shows, loaded once from a database, and
 * the writers that turn it into one self-contained HTML page and CSV files.
 *
 *   struct kp_report *rep;
 *   kp_report_load(db, &opts, &rep, &err);     reads the run and its analysis
 *   kp_report_html(rep, f, &err);              the page
 *   kp_report_csv(db, rep, "out/", &err);      kern_sum.csv, api_sum.csv, ...
 *   kp_report_free(rep);
 *
 * Loading reads only aggregates, the run's regions and capped lists (top
 * kernels, fusion candidates, a timeline window), so its cost grows with
 * the number of distinct names and regions, not with the trace; the one
 * exception is gaps.csv, which streams every kp_gaps row of the run.
 *
 * Region families: regions whose labels differ only in their numbers
 * ("Layer 0" ... "Layer 11", see common/family.h) and that share a source
 * form a family; one of at least KP_REP_FAMILY_MIN members is one row of
 * the HTML regions table (its members listed inside it), and regions.csv
 * keeps one row per region with the family's name in a last column,
 * "family" (empty when the region is in no family).
 *
 * A database without analysis results still gives a report (trace summary
 * and timeline); rep->missing then says what is missing and which command
 * fills it.
 */
#ifndef KP_REPORTS_REPORT_H
#define KP_REPORTS_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "../common/arena.h"
#include "../common/vec.h"
#include "../db/db.h"
#include "../analyzer/cost.h"
#include "../plan/planfile.h"

struct kp_report_opts {
	int64_t run_id;        /* 0: the newest run */
	int max_rows;          /* rows per HTML table (and members per family); 0: 200 */
	int top_kernels;       /* rows of the top-kernel tables; 0: 25 */
	int timeline_kernels;  /* kernels per stream in the timeline; 0: 400 */
	int max_streams;       /* streams in the timeline; 0: 8 */
};

struct kp_rep_kernel {
	const char *name, *short_name;
	int64_t count, total_ns, min_ns, max_ns;
};

struct kp_rep_api {
	const char *name;
	int event_class;       /* 0 runtime, 1 driver */
	int64_t count, total_ns, min_ns, max_ns;
};

struct kp_rep_region {
	int64_t id, parent_id;             /* parent_id 0: none */
	const char *label, *source, *blockers, *fingerprint;
	const char *blocker_apis;          /* "kind: api xN; ..." from kp_blockers */
	int64_t stream_id, occurrences, kernels;
	int64_t eager_ns, busy_ns, host_idle_ns, device_idle_ns;
	int64_t graph_ns_pred;             /* -1: not predicted */
	double speedup_pred;               /* 0: not predicted */
	int capturable;
	int64_t one_time_ns, break_even, extra_mem_bytes, shape_keys, patch_slots;  /* -1: NULL */
	int family;                        /* index in rep->families; -1: in none */
	int decision;                      /* enum kp_plan_decision in rep->plan; -1: not planned */
};

/* Fewest regions that make a family row (fewer are shown one by one). */
#define KP_REP_FAMILY_MIN 3

/* Regions of one source whose labels have one family name (common/family.h). */
struct kp_rep_family {
	const char *name;                  /* "Layer #" */
	const char *source;                /* the members' kp_regions.source */
	size_t first;                      /* index in rep->regions of its largest member */
	int64_t stream_id;                 /* shared by every member; -1: none or several */
	int64_t members, occurrences, n_capturable;
	int64_t eager_ns;                  /* summed over members: occurrences x eager_ns */
	int64_t host_idle_ns;              /* summed: occurrences x host_idle_ns */
	int64_t gain_ns;                   /* summed kp_rep_region_gain */
	int64_t decisions[3];              /* members per plan decision (enum kp_plan_decision) */
	int64_t n_unplanned;               /* members the plan does not name (0 without a plan) */
};

struct kp_rep_fusion {
	int64_t id, region_id, stream_id, first_corr, n_kernels;
	const char *kernel_names, *reason;
	int64_t dur_ns, saved_bytes, saved_nodes;  /* -1: NULL */
	double score;
	int feasible;
};

struct kp_rep_plan {
	int64_t id, created_ns;
	const char *path, *checksum, *status, *stale_reason, *body;
	double speedup_pred;               /* 0: unknown */
};


enum kp_tl_kind { KP_TL_KERNEL, KP_TL_HOST_GAP, KP_TL_DEVICE_GAP, KP_TL_UNKNOWN_GAP };

struct kp_tl_item {
	int64_t start, end;
	int kind;                          /* enum kp_tl_kind */
	const char *name;                  /* kernels: short name */
};

struct kp_tl_stream {
	int64_t device_id, stream_id, n_kernels;
	KP_VEC(struct kp_tl_item) items;
};

struct kp_report {
	struct kp_arena arena;             /* every string below */
	const char *db_path;
	int64_t run_id;
	/* run row */
	const char *source, *source_path, *command, *device_name, *status, *dropped_detail;
	int compute_major, compute_minor, sm_count, driver_version, runtime_version;
	int64_t t_begin_ns, t_end_ns, dropped_records;
	int64_t overhead_ns;               /* kp_runs.overhead_ns, -1 unknown */
	int64_t profiler_overhead_ns;      /* sum of PROFILER_OVERHEAD, -1 none */
	/* trace aggregates */
	int64_t n_kernels, kernel_ns, stream_span_ns, n_api;
	/* idle time before each GPU op, classified from the trace (whole run) */
	int64_t n_ops, n_host_gaps, host_gap_ns, device_gap_ns, unknown_gap_ns;
	int64_t n_gaps;                    /* kp_gaps rows (the analyzer's evidence) */
	int has_gaps, has_regions;
	char missing[256];                 /* "" when analysis results exist */
	KP_VEC(struct kp_rep_kernel) kernels;    /* by total time, descending */
	KP_VEC(struct kp_rep_api) apis;          /* by total time, descending */
	KP_VEC(struct kp_rep_region) regions;    /* all of them, by occurrences * eager, descending */
	int64_t n_regions_total;
	KP_VEC(struct kp_rep_family) families;   /* >= KP_REP_FAMILY_MIN members, by eager_ns, descending */
	KP_VEC(struct kp_rep_fusion) fusion;     /* by score, descending */
	int64_t n_fusion_total;
	KP_VEC(struct kp_rep_plan) plans;        /* current first, then newest */
	struct kp_plan *plan;              /* plans.data[0] parsed; NULL when none or bad */
	char plan_error[512];              /* why plans.data[0] did not parse */
	struct kp_cost cost;               /* the cost model's constants for this GPU */
	/* timeline window */
	int64_t tl_begin, tl_end;
	const char *tl_what;               /* how the window was chosen */
	int tl_capped;                     /* a stream had more kernels than shown */
	KP_VEC(struct kp_tl_stream) streams;
	struct kp_report_opts opts;
	struct corr_map *corr;             /* internal, only while loading */
};

/* Load run opts->run_id (0: newest) of db. OUT: *out, free with kp_report_free. */
int kp_report_load(struct kp_db *db, const struct kp_report_opts *opts,
		   struct kp_report **out, struct kp_err *err);
void kp_report_free(struct kp_report *rep);

/*
 * The headline: one sentence with numbers (how launch-bound, what a plan
 * would save). Written into buf as plain text (not escaped). Returns buf.
 */
char *kp_report_verdict(const struct kp_report *rep, char *buf, size_t n);

/* Write the whole HTML page to f. */
int kp_report_html(const struct kp_report *rep, FILE *f, struct kp_err *err);

/*
 * Write kern_sum.csv, api_sum.csv, gaps.csv, regions.csv, fusion.csv and
 * plan.csv into dir (created when missing). gaps.csv streams from db;
 * regions.csv is the analyzer's (kp_analyze_write_csv) plus the family
 * column, found through rep->regions.
 */
int kp_report_csv(struct kp_db *db, const struct kp_report *rep, const char *dir,
		  struct kp_err *err);

/*
 * Predicted saving of one region over the run: occurrences x (eager -
 * graphed) when it is capturable and predicted faster as a CUDA graph,
 * else 0. The verdict sums it over regions, the family rows over members.
 */
int64_t kp_rep_region_gain(const struct kp_rep_region *r);

/* Format ns as a human duration ("412 ns", "3.50 us", "2.25 ms", "1.20 s"). */
char *kp_fmt_dur(int64_t ns, char *buf, size_t n);

#endif
