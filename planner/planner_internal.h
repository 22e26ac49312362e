/*
 * planner_internal.h - what the planner's files share: one run's plan
 * (planner.c), which ranks.c makes hold for every rank of a job.
 */
#ifndef KP_PLANNER_INTERNAL_H
#define KP_PLANNER_INTERNAL_H

#include "planner.h"

/* The plan of run alone (o->run_id ignored). NULL with err set. */
struct kp_plan *kp__planner_one(struct kp_db *db, const struct kp_planner_opts *o, int64_t run,
				struct kp_err *err);

/*
 * Region o, planned as a graph, goes eager after all (reason): no warm-up,
 * no memory budget, no patches (freed). The caller sets the reason text.
 */
void kp__planner_demote(struct kp_plan_region *o, int reason);

/* o->run_length, or 1 when it is not a factor kplan plan takes. */
double kp__planner_run_length(const struct kp_planner_opts *o);

#endif
