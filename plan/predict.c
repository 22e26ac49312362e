/* predict.c - see predict.h. */
#include "predict.h"

int64_t kp_plan_scaled_occ(int64_t occ, double run_length)
{
	double v;

	if (run_length == 1.0 || occ <= 0 || !(run_length > 0))
		return occ;
	v = (double)occ * run_length;
	if (!(v < 1e9))
		return 1000000000;
	/* llround for 1 <= v < 10^9, without libm (libkplanrt links none) */
	return v < 1.0 ? 1 : (int64_t)(v + 0.5);
}

int64_t kp_plan_saving_ns(int64_t occurrences, int64_t warmup, int64_t eager_ns,
			  int64_t graph_ns, int64_t one_time_ns)
{
	int64_t calls = occurrences - warmup;

	if (calls < 0)
		calls = 0;
	return calls * (eager_ns - graph_ns) - one_time_ns;
}

int64_t kp_plan_region_saving_ns(const struct kp_plan_region *r)
{
	if (r->decision != KP_PLAN_GRAPH)
		return 0;
	return kp_plan_saving_ns(r->occurrences, r->warmup, r->eager_ns, r->graph_ns,
				 r->one_time_ns);
}

void kp_plan_predict_run(struct kp_plan *plan)
{
	kp_plan_predict_run_for(plan, 1.0);
}

void kp_plan_predict_run_for(struct kp_plan *plan, double run_length)
{
	int64_t saved = 0;
	size_t i;

	for (i = 0; i < plan->n_regions; i++) {
		const struct kp_plan_region *r = &plan->regions[i];

		if (r->decision == KP_PLAN_GRAPH)
			saved += kp_plan_saving_ns(kp_plan_scaled_occ(r->occurrences, run_length),
						   r->warmup, r->eager_ns, r->graph_ns,
						   r->one_time_ns);
	}
	plan->run_pred_ns = plan->run_eager_ns - saved;
	if (plan->run_pred_ns < 1)
		plan->run_pred_ns = plan->run_eager_ns ? 1 : 0;
	if (plan->run_pred_ns > KP_PLAN_MAX_NS)
		plan->run_pred_ns = KP_PLAN_MAX_NS;
	plan->speedup_pred = plan->run_pred_ns ?
			     (double)plan->run_eager_ns / (double)plan->run_pred_ns : 0;
	if (plan->speedup_pred > 1e6)
		plan->speedup_pred = 1e6;
}
