/*
 * ranks.c - kp_planner_run: the run's plan (planner.c), made to hold for
 * every rank of the job the run is a rank of (planner.h).
 *
 * One plan file serves every process of the job, and a region with a
 * collective inside must be replayed by all of the ranks or by none: a
 * rank replaying its graph while another runs the same collectives eagerly
 * still works, but a rank capturing while another has not reached the
 * collective deadlocks the capture, and the ranks' warm-ups must end at the
 * same call. So each rank's run is planned as the asked one is, and every
 * region of the asked rank's plan is compared with the same label on every
 * other rank: the same kernels (fingerprint, kernels, nodes), the same
 * shape keys, the same decision and split. Where they agree the section
 * stands for all ranks (with the largest warm-up and memory budget any rank
 * needs); where they do not, a graph region goes eager with the reason
 * ranks-differ, and an eager or split one says why in its reason text.
 */
#include "planner_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../db/jobs.h"
#include "../plan/predict.h"

/* Why rank b's region differs from a's, into why; 0 when they agree. */
static int differs(const struct kp_plan_region *a, const struct kp_plan_region *b, char *why,
		   size_t n)
{
	if (!b) {
		snprintf(why, n, "has no region '%.100s'", a->label);
	} else if (a->fingerprint != b->fingerprint || a->kernels != b->kernels ||
		   a->nodes != b->nodes) {
		snprintf(why, n, "launches other kernels in it (%u kernels, fingerprint %016llx)",
			 b->kernels, (unsigned long long)b->fingerprint);
	} else if (a->shape_keys != b->shape_keys || a->n_shapes != b->n_shapes ||
		   (a->n_shapes && memcmp(a->shapes, b->shapes, a->n_shapes * sizeof(*a->shapes)))) {
		snprintf(why, n, "launches it with other shapes (%u shape keys)", b->shape_keys);
	} else if (a->decision != b->decision) {
		snprintf(why, n, "plans it %s (%s)", kp_plan_decision_name(b->decision),
			 kp_plan_reason_name(b->reason));
	} else if (!a->parent != !b->parent || (a->parent && strcmp(a->parent, b->parent))) {
		snprintf(why, n, "makes it a part of '%.100s'", b->parent ? b->parent : "nothing");
	} else {
		return 0;
	}
	return 1;
}

/* The ranks were found to differ on r (disagree() said so). */
static int differed(const struct kp_plan_region *r)
{
	return r->reason == KP_PLAN_R_RANKS_DIFFER ||
	       (r->reason_text && strstr(r->reason_text, "ranks differ: "));
}

/* Drop the fusion groups of region label: they live in its graph. */
static void drop_fusions(struct kp_plan *plan, const char *label)
{
	size_t i, j = 0;

	for (i = 0; i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];

		if (strcmp(u->region, label)) {
			plan->fusions[j++] = *u;
			continue;
		}
		free(u->region);
		free(u->names);
		free(u->source);
		free(u->args);
		free(u->inexact_why);
	}
	plan->n_fusions = j;
}

/*
 * Region r differs on rank `rank` (why): a graph goes eager for every
 * rank; an eager or split region keeps its decision and says so.
 */
static int disagree(struct kp_plan *plan, struct kp_plan_region *r, int rank, int64_t run,
		    const char *why, struct kp_err *err)
{
	char *text;
	int graph = r->decision == KP_PLAN_GRAPH;

	const char *had = graph || !r->reason_text ? "" : r->reason_text;

	if (asprintf(&text, "%s%sranks differ: rank %d (run %lld) %s; %s", had, had[0] ? "; " : "", rank, (long long)run, why,
		     graph ? "every rank runs it eagerly, so none replays a graph whose collectives"
			     " another runs eagerly" : "it stays eager on every rank") < 0)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	if (strlen(text) >= KP_PLAN_MAX_STR)
		text[KP_PLAN_MAX_STR - 1] = '\0';
	free(r->reason_text);
	r->reason_text = text;
	if (!graph)
		return 0;
	kp__planner_demote(r, KP_PLAN_R_RANKS_DIFFER);
	drop_fusions(plan, r->label);
	return 0;
}

/* Make plan hold for rank's plan (other) too. */
static int reconcile(struct kp_plan *plan, const struct kp_plan *other, int rank, int64_t run,
		     struct kp_err *err)
{
	char why[256];
	int rc;

	for (size_t i = 0; i < plan->n_regions; i++) {
		struct kp_plan_region *r = &plan->regions[i];
		const struct kp_plan_region *b = kp_plan_find(other, r->label);

		if (r->reason == KP_PLAN_R_RANKS_DIFFER)
			continue;   /* another rank differed already */
		if (!differs(r, b, why, sizeof(why))) {
			/* one section for every rank: what the neediest needs */
			if (r->decision == KP_PLAN_GRAPH) {
				if (b->warmup > r->warmup)
					r->warmup = b->warmup;
				if (b->mem_budget_bytes > r->mem_budget_bytes)
					r->mem_budget_bytes = b->mem_budget_bytes;
			}
			continue;
		}
		if ((rc = disagree(plan, r, rank, run, why, err)))
			return rc;
	}
	/* a split region's parts go as their parent goes: a part of a region
	 * the ranks split differently stays eager */
	for (size_t i = 0; i < plan->n_regions; i++) {
		struct kp_plan_region *r = &plan->regions[i];
		const struct kp_plan_region *par = r->parent ? kp_plan_find(plan, r->parent) : NULL;

		if (par && r->decision == KP_PLAN_GRAPH && differed(par)) {
			snprintf(why, sizeof(why), "splits '%.100s' otherwise", r->parent);
			if ((rc = disagree(plan, r, rank, run, why, err)))
				return rc;
		}
	}
	return 0;
}

/*
 * When plan's source run is a rank of a job, plan every other rank's run
 * and make plan hold for all of them, with a note in o->notes. 0 or
 * negative KP_E* (a rank's run could not be planned).
 */
static int plan_ranks(struct kp_db *db, const struct kp_planner_opts *o, struct kp_plan *plan,
		      struct kp_err *err)
{
	struct kp_planner_opts one = *o;
	struct kp_job_run *runs = NULL;
	size_t n = 0;
	int rc;

	if ((rc = kp_db_job_runs(db, plan->source_run, NULL, &runs, &n, err)) || n < 2)
		goto out;
	/* the other ranks' plans add no notes and no kernel lines */
	one.notes = NULL;
	one.kernel_trace = NULL;
	for (size_t k = 0; k < n && !rc; k++) {
		struct kp_plan *other;

		if (runs[k].run_id == plan->source_run)
			continue;
		if (!(other = kp__planner_one(db, &one, runs[k].run_id, err))) {
			kp_err_prefix(err, "planning rank %d (run %lld) of the job", runs[k].rank,
				      (long long)runs[k].run_id);
			rc = err->code;
			break;
		}
		rc = reconcile(plan, other, runs[k].rank, runs[k].run_id, err);
		kp_plan_free(other);
	}
	if (rc)
		goto out;
	kp_plan_predict_run_for(plan, kp__planner_run_length(o));
	if (o->notes) {
		size_t same = plan->n_regions;

		for (size_t i = 0; i < plan->n_regions; i++)
			if (differed(&plan->regions[i]))
				same--;
		kp_strbuf_addf(o->notes, "the plan holds for the %zu ranks of the job (runs", n);
		for (size_t k = 0; k < n; k++)
			kp_strbuf_addf(o->notes, "%s %lld", k ? "," : "", (long long)runs[k].run_id);
		kp_strbuf_addf(o->notes, "): %zu region(s) agree on every rank, %zu differ (eager"
			       " on every rank where planned as a graph: ranks-differ)\n", same,
			       plan->n_regions - same);
	}
out:
	free(runs);
	return rc;
}

struct kp_plan *kp_planner_run(struct kp_db *db, const struct kp_planner_opts *o,
			       struct kp_err *err)
{
	struct kp_planner_opts def;
	struct kp_plan *plan;

	if (!o) {
		kp_planner_opts_init(&def);
		o = &def;
	}
	plan = kp__planner_one(db, o, o->run_id > 0 ? o->run_id : kp_db_default_run(db), err);
	if (plan && !o->one_rank && plan_ranks(db, o, plan, err)) {
		kp_plan_free(plan);
		return NULL;
	}
	return plan;
}
