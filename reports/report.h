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
#include "../common/kptime.h"
#include "../common/vec.h"
#include "../db/db.h"
#include "../analyzer/cost.h"
#include "../analyzer/ranks.h"
#include "../plan/aten_groups.h"
#include "../plan/planfile.h"

struct kp_report_opts {
	int64_t run_id;        /* 0: the newest run */
	int max_rows;          /* rows per HTML table (and members per family); 0: 200 */
	int top_kernels;       /* rows of the top-kernel tables; 0: 25 */
	int timeline_kernels;  /* kernels of the typical stretch without regions; 0: 400 */
	int max_streams;       /* streams in the timeline; 0: 8 */
	int detail;            /* intervals drawn one by one; 0: KP_TL_DETAIL */
	int summary_only;      /* totals only: no timeline rows, region kernels or
				* blocker sources (kplan diff) */
};

/* Code points of a kernel label in the page's tables (longer ones are cut). */
#define KP_REP_KNAME_MAX 70

struct kp_rep_kernel {
	const char *name, *short_name;
	const char *label;                 /* kp_kernel_label, with what tells it apart
					    * from kernels of the same label: what the page shows */
	int64_t name_id;                   /* StringIds id of name */
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
	int64_t graph_ns_lo, graph_ns_hi;  /* the interval around it; -1: none */
	double speedup_pred;               /* 0: not predicted */
	int capturable;
	int64_t one_time_ns, break_even, extra_mem_bytes, shape_keys, patch_slots;  /* -1: NULL */
	int64_t mid_start, mid_end;        /* its middle occurrence (0, 0: none) */
	int family;                        /* index in rep->families; -1: in none */
	int decision;                      /* enum kp_plan_decision in rep->plan; -1: not planned */
	int64_t gain_ns;                   /* predicted saving over the run (plan/predict.h): the
					    * plan's when it names the region, else graphing it
					    * after the default warm-up; 0 when none */
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
	int64_t gain_ns;                   /* summed members' gain_ns */
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


/* What a stretch of a stream is: a kernel (or copy), or the idle gap before one, by cause. */
enum kp_tl_kind { KP_TL_KERNEL, KP_TL_HOST_GAP, KP_TL_DEVICE_GAP, KP_TL_UNKNOWN_GAP };
/* Rows of the timeline, top to bottom. */
enum kp_tl_row_kind { KP_TL_ROW_REGIONS, KP_TL_ROW_NVTX, KP_TL_ROW_CPU, KP_TL_ROW_API,
		      KP_TL_ROW_STREAM };
/* Classes of the launch-call row. */
enum kp_tl_api { KP_TL_API_LAUNCH, KP_TL_API_SYNC, KP_TL_API_COPY, KP_TL_API_OTHER };

#define KP_TL_CLS 4                    /* classes per bin */
#define KP_TL_BINS 1024                /* bins of the coarsest level, over the whole run */
#define KP_TL_DETAIL 60000             /* intervals drawn one by one, over all rows */
#define KP_REP_CARDS 12                /* regions with a section of their own */

/*
 * One interval drawn one by one. Stream rows: a = kernel index in
 * rep->kernels (-1 memcpy, -2 memset), b = region index in rep->regions
 * (-1 none), cls = the gap before it (enum kp_tl_kind; KP_TL_KERNEL: none).
 * Region row: a = region index, b = occurrence index. NVTX and CPU rows:
 * a = text index in tl.strs. Launch-call row: a = name index, cls = enum kp_tl_api.
 */
struct kp_tl_item {
	int64_t start, end;
	int32_t a, b, cls;
};

/*
 * A row: for each bin of the finest level, the time covered per class
 * (streams: enum kp_tl_kind; launch calls: enum kp_tl_api; others: class 0),
 * the intervals starting in it and the key that covers most of it
 * (streams and regions: region index; NVTX, CPU, launch calls: text
 * index); and the intervals inside the detail windows.
 */
struct kp_tl_row {
	int kind;                          /* enum kp_tl_row_kind */
	int rank;                          /* the rank whose row it is (rep->job); -1: no job */
	int64_t device_id, stream_id;      /* stream rows */
	int64_t n_items;                   /* intervals in the whole run */
	int64_t *ns;                       /* n_bins x KP_TL_CLS */
	int32_t *count, *key;              /* n_bins; key -1: none */
	int64_t *key_ns;                   /* n_bins: time of key in the bin */
	KP_VEC(struct kp_tl_item) items;   /* by start */
	int capped;                        /* more intervals in the windows than kept */
};

/* Kernels of a region over the whole run (timeline.c, from the same scan). */
struct kp_rep_rkernel {
	int32_t region, kernel;            /* indexes in rep->regions, rep->kernels */
	int64_t count, total_ns;
};

/* A region's blockers of one kind and call, with where the first one was. */
struct kp_rep_blocker {
	int32_t region;                    /* index in rep->regions */
	int fatal;                         /* kp_blockers.fatal */
	const char *kind, *api, *detail;
	const char *where;                 /* user-level source: CPU op, Python frame; NULL unknown */
	int64_t count, occurrences, first_occ, position;
};

/* log2 buckets of gap lengths: [0] < 1 us, [i] 2^(i-1) .. 2^i us */
#define KP_GAP_BUCKETS 24

struct kp_tl {
	int64_t t0, t1;                    /* the run: first to last interval drawn */
	int n_levels;                      /* levels of KP_TL_BINS << 2i bins */
	int n_bins;                        /* bins of the finest level */
	int full;                          /* the windows cover the whole run */
	KP_VEC(int64_t) win;               /* detail windows: start, end, ... by start */
	KP_VEC(struct kp_tl_row) rows;     /* regions, NVTX, CPU ops, launch calls, streams */
	KP_VEC(const char *) strs;         /* NVTX texts and API names */
	int64_t n_streams;                 /* streams with GPU work (rows: the busiest) */
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
	/* predicted saving (plan/predict.h): with a plan its run_eager_ns and
	 * run_eager_ns - run_pred_ns, as `kplan show` prints them; without
	 * one the run's span and the regions' summed gain_ns */
	int64_t run_ns, saved_ns;
	int64_t n_saving;                  /* regions with gain_ns > 0 */
	char plan_error[512];              /* why plans.data[0] did not parse */
	/* kplan.torch's fusion groups beside the plan's file (PLAN.aten), when
	 * the report finds them: at kp_plans.path, else (a relative path) beside
	 * the database; NULL when none */
	struct kp_aten_groups *aten;
	char aten_path[1024];              /* where they were read ("" when not) */
	char aten_error[512];              /* why a file found could not be read */
	struct kp_cost cost;               /* the cost model's constants for this GPU */
	/* the typical stretch the timeline opens on */
	int64_t tl_begin, tl_end;
	const char *tl_what;               /* how it was chosen */
	struct kp_tl tl;                   /* the whole run's timeline */
	KP_VEC(struct kp_rep_rkernel) rkernels;  /* by region, then total time */
	KP_VEC(struct kp_rep_blocker) blockers;  /* by region, fatal first */
	int64_t gap_n[3][KP_GAP_BUCKETS];  /* gaps per cause (host, device, unknown) and length */
	int64_t gap_ns[3][KP_GAP_BUCKETS];
	struct kp_job *job;                /* the job the run is a rank of (analyzer/ranks.h);
					    * NULL when it is none */
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
 * plan.csv into dir (created when missing), and for a rank of a job ranks.csv
 * and collectives.csv (kp_job_write_csv). gaps.csv streams from db;
 * regions.csv is the analyzer's (kp_analyze_write_csv) plus the family
 * column, found through rep->regions.
 */
int kp_report_csv(struct kp_db *db, const struct kp_report *rep, const char *dir,
		  struct kp_err *err);



#endif
