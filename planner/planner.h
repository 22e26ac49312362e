/*
 * planner.h - from an analyzed database to a plan (struct kp_plan).
 *
 * The planner reads the analyzer's results from the database (kp_runs,
 * kp_regions, kp_region_occurrences, kp_blockers, kp_fusion_candidates,
 * kp_launch_args, and the trace's kernel table for launch order) and decides
 * per region: graph, eager (with the reason) or split. It does not run the
 * analyzer. kp_planner_store records a written plan in kp_plans.
 *
 * Decision rules, in order (see docs/DESIGN.md, "Planner"):
 * Regions: the ones the application enters through libkplanrt (source
 * "runtime") by default; its other NVTX ranges and mined regions stay in
 * the analysis (report, CSV) unless no runtime region exists or
 * o->regions asks for them.
 *
 *   not capturable, with parts (kp_regions.parentId)  -> split (blocker)
 *   not capturable                                    -> eager (blocker)
 *   no graph prediction, or graph >= eager            -> eager (predicted-loss)
 *   eager - graph < min_gain * eager                  -> eager (not-launch-bound)
 *   occurrences - warmup < break-even                 -> eager (too-few-replays)
 *     (occurrences of the run the plan is for: the recorded ones times
 *     o->run_length, kplan plan --run-length)
 *   graph memory over the limit (cheapest gain first) -> eager (memory-budget)
 *   otherwise                                         -> graph (launch-bound)
 *
 * A run that is a rank of a job (db/jobs.h) gets a plan that holds for
 * every rank (planner/ranks.c): each rank's run is planned, and a region
 * the ranks do not agree on (another kernel sequence or shape keys, another
 * decision, absent on a rank) is planned eager on all of them
 * (ranks-differ), so that no rank replays a graph whose collectives the
 * others run eagerly.
 */
#ifndef KP_PLANNER_H
#define KP_PLANNER_H

#include <stdint.h>

#include "../common/strbuf.h"
#include "../db/db.h"
#include "../plan/planfile.h"

struct kp_planner_opts {
	int64_t run_id;          /* 0: kp_db_default_run */
	int one_rank;            /* plan the run alone, not every rank of its job */
	int warmup;              /* eager calls before capture; < 0: default 2 */
	double min_gain;         /* least predicted saving, fraction of eager; < 0: 0.05 */
	int64_t mem_limit_bytes; /* cap on the graph memory budget; 0: none */
	/* the run the plan is for calls each region run_length times as often
	 * as the recorded run (a short recording of a long job): break-even,
	 * the savings and the run's predicted time count that run; the plan's
	 * occurrences stay the recorded ones. Not > 0 (or not finite): 1 */
	double run_length;
	/* hard keys of the GPU the plan is for (a described one, or when the
	 * run does not record them); < 0: take from the run */
	int cc_major, cc_minor, cuda_major;
	/* soft keys of a described GPU (a plan for another kind of machine,
	 * for a bundle); NULL / < 0: the run's */
	const char *gpu_name;
	int sm_count, driver_version;
	/* when set: the kernels of each region planned as a graph (its first
	 * occurrence, launch order) are appended as "LABEL<TAB>INDEX<TAB>NAME"
	 * lines, with "<TAB>ARGS" when the run recorded arguments (--args), the
	 * format of KPLAN_FUSION_TRACE (kp_fx_plan_add_trace) */
	struct kp_strbuf *kernel_trace;
	/* which regions the plan holds (enum kp_planner_regions) */
	int regions;
	/* OUT, when set: one line per note the user should see (regions
	 * left out, scalars not checked), appended */
	struct kp_strbuf *notes;
};

enum kp_planner_regions {
	/* runtime regions (libkplanrt's NVTX domain) when the run has any,
	 * else every region (with a note) */
	KP_PLANNER_REGIONS_AUTO = 0,
	KP_PLANNER_REGIONS_RUNTIME = 1,  /* runtime regions only */
	KP_PLANNER_REGIONS_ALL = 2,      /* every region the analyzer found */
};

/* Defaults (all "unset"). */
void kp_planner_opts_init(struct kp_planner_opts *o);

/*
 * Build the plan for o->run_id. Deterministic: the same database gives the
 * same plan. Returns a new plan (kp_plan_free) or NULL with err set:
 * KP_ENOTFOUND (no such run, or the run was not analyzed), KP_EFORMAT (the
 * run lacks the compute capability / CUDA version and no override was
 * given), KP_EDB.
 */
struct kp_plan *kp_planner_run(struct kp_db *db, const struct kp_planner_opts *o,
			       struct kp_err *err);

/*
 * Insert a written plan (text = the whole file, len bytes) into kp_plans as
 * 'current' for plan->source_run, and mark that run's older current plans
 * 'stale' with the reason "superseded by plan N". path may be NULL.
 * OUT: *plan_id (may be NULL). Opens its own transaction.
 */
int kp_planner_store(struct kp_db *db, const struct kp_plan *plan, const char *text,
		     size_t len, const char *path, int64_t *plan_id, struct kp_err *err);

/* One row of kp_plans (kp_planner_list). Strings are owned by the row. */
struct kp_plan_row {
	int64_t plan_id, run_id;
	char *status;            /* current | stale */
	char *stale_reason;      /* NULL when none */
	char *path;              /* where it was written; NULL: stdout */
	struct kp_plan *plan;    /* the stored body parsed; NULL when it does not parse */
	char *error;             /* why it does not parse; NULL when it does */
};

/*
 * Every plan in kp_plans, bodies parsed with plan/'s reader, sorted by
 * model identity, target GPU (name, SM count, compute capability, CUDA
 * major), then newest first: the plans a bundle (kplan bundle) can be made
 * of, per model and GPU (planner/plan_list.c). OUT: *rows (free with
 * kp_plan_rows_free), *n. 0, KP_EDB, KP_ENOMEM.
 */
int kp_planner_list(struct kp_db *db, struct kp_plan_row **rows, size_t *n,
		    struct kp_err *err);
void kp_plan_rows_free(struct kp_plan_row *rows, size_t n);

/*
 * The stored text of plan plan_id (kp_plans.body) into out (appended).
 * 0, KP_ENOTFOUND, KP_EDB, KP_ENOMEM.
 */
int kp_planner_body(struct kp_db *db, int64_t plan_id, struct kp_strbuf *out,
		    struct kp_err *err);

#endif
