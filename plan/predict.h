/*
 * predict.h - what a plan is predicted to save: one definition of the
 * saving of a region and of the whole run, behind every figure that says
 * "saves" (the plan's run_pred_ns and reason text, `kplan plan`, `show`,
 * `analyze` and the report's verdict and tables), so they print one number.
 *
 * A region run as a CUDA graph over a run like the measured one: of its
 * occurrences, the first `warmup` calls stay eager, the next is captured
 * (one_time_ns: capture and instantiate) and from it on every call takes
 * graph_ns instead of eager_ns:
 *
 *   saving = (occurrences - warmup) x (eager_ns - graph_ns) - one_time_ns
 *
 * negative when the run is too short to pay for the capture. The run's
 * predicted time is its measured time (kp_runs span) less the savings of the
 * regions the plan graphs.
 *
 * A plan may be for a run longer (or shorter) than the recorded one
 * (`kplan plan --run-length X`): each region is called X times as often,
 * occurrences above become kp_plan_scaled_occ(occurrences, X), and the
 * plan's run-eager-ns is the recorded span times X.
 */
#ifndef KP_PLAN_PREDICT_H
#define KP_PLAN_PREDICT_H

#include <stdint.h>

#include "planfile.h"

/* Warm-up calls before a capture when the planner is not told otherwise. */
#define KP_PLAN_DEFAULT_WARMUP 2

/* Longest and shortest run-length factor kplan plan takes. */
#define KP_PLAN_RUN_LENGTH_MAX 1e6
#define KP_PLAN_RUN_LENGTH_MIN 1e-9

/*
 * The calls of a region recorded occ times in a run X (run_length) times
 * as long: llround(occ x X), at least 1 when occ > 0, at most 10^9 (the
 * plan's bound on occurrences); occ itself when X is 1.
 */
int64_t kp_plan_scaled_occ(int64_t occ, double run_length);

/* The saving above, in ns. */
int64_t kp_plan_saving_ns(int64_t occurrences, int64_t warmup, int64_t eager_ns,
			  int64_t graph_ns, int64_t one_time_ns);

/* The saving of a plan's region: the formula for a graph region, else 0. */
int64_t kp_plan_region_saving_ns(const struct kp_plan_region *r);

/*
 * Set plan->run_pred_ns and speedup_pred from plan->run_eager_ns and the
 * savings of the regions the plan graphs (at least 1 ns of run is left;
 * speedup_pred at most 10^6, the plan file's bound).
 */
void kp_plan_predict_run(struct kp_plan *plan);

/*
 * The same for a plan made for a run run_length times the recorded one:
 * each graph region's saving over kp_plan_scaled_occ(occurrences,
 * run_length) calls; plan->run_eager_ns is taken as already scaled.
 * kp_plan_predict_run is this with run_length 1.
 */
void kp_plan_predict_run_for(struct kp_plan *plan, double run_length);

#endif
