/*
 * mkplan.c - kplan-mkplan: write a plan file by hand, for the examples and
 * for tests, with the plan writer (plan/planfile.h). The pipeline
 * `kplan record` -> `kplan analyze` -> `kplan plan` makes real plans; this
 * makes a plan that says "graph these regions" without a recording.
 *
 *   kplan-mkplan -o PLAN --cc 9.0 --cuda 13 [--gpu NAME] [--sm N]
 *                [--driver V] REGION[:graph|:eager][:warmup=N][:keys=N]
 *                [:fp=HEX16][:kernels=N] ...
 *
 * Defaults per region: graph, warmup 1, keys 8, fp 0 (not checked), kernels 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "plan/planfile.h"

static int usage(void)
{
	fprintf(stderr, "usage: kplan-mkplan -o PLAN --cc MAJOR.MINOR --cuda N [--gpu NAME] "
		"[--sm N] [--driver V] REGION[:graph|:eager][:warmup=N][:keys=N][:fp=HEX][:kernels=N] ...\n");
	return 64;
}

static int add_region(struct kp_plan *p, char *spec)
{
	struct kp_plan_region *r = &p->regions[p->n_regions];
	char *tok, *save = NULL;

	memset(r, 0, sizeof(*r));
	tok = strtok_r(spec, ":", &save);
	if (!tok || !*tok)
		return -1;
	r->label = kp_strdup(tok);
	r->decision = KP_PLAN_GRAPH;
	r->warmup = 1;
	r->shape_keys = 8;
	r->kernels = 1;
	r->occurrences = 1;
	while ((tok = strtok_r(NULL, ":", &save))) {
		if (!strcmp(tok, "graph"))
			r->decision = KP_PLAN_GRAPH;
		else if (!strcmp(tok, "eager"))
			r->decision = KP_PLAN_EAGER;
		else if (!strncmp(tok, "warmup=", 7))
			r->warmup = (uint32_t)atoi(tok + 7);
		else if (!strncmp(tok, "keys=", 5))
			r->shape_keys = (uint32_t)atoi(tok + 5);
		else if (!strncmp(tok, "fp=", 3))
			r->fingerprint = strtoull(tok + 3, NULL, 16);
		else if (!strncmp(tok, "kernels=", 8))
			r->kernels = (uint32_t)atoi(tok + 8);
		else
			return -1;
	}
	r->reason = r->decision == KP_PLAN_GRAPH ? KP_PLAN_R_LAUNCH_BOUND
		    : KP_PLAN_R_NOT_LAUNCH_BOUND;
	r->reason_text = kp_strdup("hand-written plan (kplan-mkplan)");
	r->mem_budget_bytes = r->decision == KP_PLAN_GRAPH ? (INT64_C(1) << 30) : 0;
	p->n_regions++;
	return 0;
}

int main(int argc, char **argv)
{
	struct kp_plan *p = kp_plan_new();
	struct kp_err err = {0};
	const char *out = NULL;
	FILE *f;
	int i;

	if (!p)
		return 2;
	p->cc_major = -1;
	p->cuda_major = -1;
	p->gpu_name = kp_strdup("");
	p->tool_version = kp_strdup("kplan-mkplan");
	p->source_kind = kp_strdup("synthetic");
	p->date = kp_strdup("");
	p->regions = calloc((size_t)argc, sizeof(*p->regions));
	p->mem_budget_bytes = INT64_C(4) << 30;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(argv[i], "--cc") && i + 1 < argc) {
			if (sscanf(argv[++i], "%d.%d", &p->cc_major, &p->cc_minor) != 2)
				return usage();
		} else if (!strcmp(argv[i], "--cuda") && i + 1 < argc) {
			p->cuda_major = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--gpu") && i + 1 < argc) {
			free(p->gpu_name);
			p->gpu_name = kp_strdup(argv[++i]);
		} else if (!strcmp(argv[i], "--sm") && i + 1 < argc) {
			p->sm_count = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--driver") && i + 1 < argc) {
			p->driver_version = atoi(argv[++i]);
		} else if (argv[i][0] == '-' || add_region(p, argv[i])) {
			return usage();
		}
	}
	if (!out || p->cc_major < 0 || p->cuda_major < 0 || !p->n_regions)
		return usage();
	f = fopen(out, "w");
	if (!f) {
		fprintf(stderr, "kplan-mkplan: cannot write %s\n", out);
		return 2;
	}
	if (kp_plan_write_file(p, f, &err) || fclose(f)) {
		fprintf(stderr, "kplan-mkplan: %s\n", err.msg);
		return 2;
	}
	kp_plan_free(p);
	return 0;
}
