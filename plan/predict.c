/* predict.c - see predict.h. */
#include "predict.h"

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
	int64_t saved = 0;
	size_t i;

	for (i = 0; i < plan->n_regions; i++)
		saved += kp_plan_region_saving_ns(&plan->regions[i]);
	plan->run_pred_ns = plan->run_eager_ns - saved;
	if (plan->run_pred_ns < 1)
		plan->run_pred_ns = plan->run_eager_ns ? 1 : 0;
	if (plan->run_pred_ns > KP_PLAN_MAX_NS)
		plan->run_pred_ns = KP_PLAN_MAX_NS;
	plan->speedup_pred = plan->run_pred_ns ?
			     (double)plan->run_eager_ns / (double)plan->run_pred_ns : 0;
}
