/* cmd_show.c - `kplan show model.kplan`: a human summary of a plan file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#include "../common/kname.h"
#include "../plan/planfile.h"

const char kp_usage_show[] =
	"usage: kplan show model.kplan\n"
	"\n"
	"Prints what a plan file says: the GPU it was made for (hard and soft keys),\n"
	"where it came from, the predicted speedup of the whole run, and per region\n"
	"the decision (graph / eager / split) with its reason, then the fusion groups.\n"
	"The file is verified first (header, checksum, every field); an invalid file\n"
	"exits 2 with the line and field at fault.\n"
	"\n"
	"example:\n"
	"  kplan show model.kplan\n";

static void ms(char *buf, size_t n, int64_t ns)
{
	snprintf(buf, n, "%.3f ms", (double)ns / 1e6);
}

static void mib(char *buf, size_t n, int64_t bytes)
{
	snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

KP_CMD(show)
{
	struct kp_err err = {0};
	struct kp_plan *p;
	char a[32], b[32], t1[256], t2[256], t3[256], t4[256];
	size_t i, w = 6;
	int n[3] = {0, 0, 0};

	if (argc != 2)
		return kp_cli_usage("show", "expected one plan file");
	p = kp_plan_load(argv[1], &err);
	if (!p)
		return kp_cli_error(&err);
	printf("plan %s (format %d, body-hash %016llx)\n", argv[1], p->format_version,
	       (unsigned long long)p->body_hash);
	printf("  made for    compute capability %d.%d, CUDA %d (hard keys)\n",
	       p->cc_major, p->cc_minor, p->cuda_major);
	/* every text field may come from a trace or a hand edit: printable (common/printable.h) */
	if (p->model)
		printf("              model '%s' (hard key: kplan plan --for)\n",
		       kp_printable(t1, sizeof(t1), p->model));
	printf("              %s, %d SMs, driver %d (soft keys)\n",
	       p->gpu_name[0] ? kp_printable(t1, sizeof(t1), p->gpu_name) : "unknown GPU",
	       p->sm_count, p->driver_version);
	printf("  source      run %lld (%s%s%s), kplan %s\n", (long long)p->source_run,
	       p->source_kind[0] ? kp_printable(t2, sizeof(t2), p->source_kind) : "unknown",
	       p->date[0] ? ", " : "", kp_printable(t3, sizeof(t3), p->date),
	       kp_printable(t4, sizeof(t4), p->tool_version));
	ms(a, sizeof(a), p->run_eager_ns);
	ms(b, sizeof(b), p->run_pred_ns);
	printf("  predicted   %s -> %s for the run (%.2fx)\n", a, b, p->speedup_pred);
	mib(a, sizeof(a), p->mem_budget_bytes);
	printf("  graph mem   %s budget\n", a);
	for (i = 0; i < p->n_regions; i++) {
		n[p->regions[i].decision]++;
		if (strlen(p->regions[i].label) + (p->regions[i].parent ? 2 : 0) > w)
			w = strlen(p->regions[i].label) + (p->regions[i].parent ? 2 : 0);
	}
	if (w > 40)
		w = 40;
	printf("\nregions: %zu (%d graph, %d eager, %d split)\n", p->n_regions,
	       n[KP_PLAN_GRAPH], n[KP_PLAN_EAGER], n[KP_PLAN_SPLIT]);
	if (p->n_regions)
		printf("  %-*s  %-5s  %7s  %6s  %10s  %10s  %7s  %s\n", (int)w, "region", "plan",
		       "kernels", "occ", "eager", "graph", "speedup", "reason");
	for (i = 0; i < p->n_regions; i++) {
		const struct kp_plan_region *r = &p->regions[i];
		char lab[64], why[1024];

		snprintf(lab, sizeof(lab), "%s%s", r->parent ? "  " : "",
			 kp_printable(t1, sizeof(t1), r->label));
		ms(a, sizeof(a), r->eager_ns);
		ms(b, sizeof(b), r->graph_ns);
		printf("  %-*.*s  %-5s  %7u  %6u  %10s  %10s  %6.2fx  %s\n", (int)w, (int)w, lab,
		       kp_plan_decision_name(r->decision), r->kernels, r->occurrences, a, b,
		       r->speedup_pred, kp_plan_reason_name(r->reason));
		if (r->reason_text[0])
			printf("  %-*s  %s\n", (int)w, "",
			       kp_printable(why, sizeof(why), r->reason_text));
		if (r->decision == KP_PLAN_GRAPH) {
			mib(a, sizeof(a), r->mem_budget_bytes);
			size_t j, scalars = 0;

			for (j = 0; j < r->n_patches; j++)
				scalars += r->patches[j].scalar != 0;
			printf("  %-*s  warm-up %u, shape keys %u, %zu patch slots (%zu scalars: "
			       "bind them with kp_rt_bind_value), memory %s, fingerprint %016llx\n",
			       (int)w, "", r->warmup, r->shape_keys, r->n_patches, scalars, a,
			       (unsigned long long)r->fingerprint);
		}
	}
	printf("\nfusion groups: %zu\n", p->n_fusions);
	for (i = 0; i < p->n_fusions; i++) {
		const struct kp_plan_fusion *u = &p->fusions[i];
		char num[48], chain[400], shown[1600];

		if (u->exact || !u->tolerance)
			snprintf(num, sizeof(num), "bit-exact");
		else
			snprintf(num, sizeof(num), "within %g of eager", u->tolerance);
		printf("  %u  %s kernels %u..%u, gain %.1f us per occurrence, %s, %s\n", u->id,
		       kp_printable(t1, sizeof(t1), u->region), u->first_kernel,
		       u->first_kernel + u->kernels - 1, (double)u->gain_ns / 1e3, num,
		       u->source ? kp_printable(t2, sizeof(t2), u->source) : "source not generated");
		/* the kernels' labels (common/kname.h), as the report shows them */
		printf("     %s\n", kp_printable(shown, sizeof(shown),
					      kp_kernel_chain_label(u->names, chain, sizeof(chain))));
	}
	kp_plan_free(p);
	return KP_EXIT_OK;
}
