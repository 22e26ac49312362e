/*
 * bench_planfile.c - plan file write and parse speed on a large plan
 * (1000 graph regions x 64 patch slots, 4 shapes each), the start-up cost
 * the runtime pays in kp_plan_load. Figures in docs/PERFORMANCE.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kptime.h"
#include "common/strbuf.h"
#include "plan/planfile.h"

int main(void)
{
	struct kp_plan *p = kp_plan_new();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	int64_t t0, t_write, t_parse;
	size_t i, j;
	int it, n_iter = 20;
	char lab[32];

	p->cc_major = 9;
	p->cuda_major = 13;
	p->gpu_name = strdup("NVIDIA H200");
	p->tool_version = strdup("bench");
	p->source_kind = strdup("synthetic");
	p->date = strdup("");
	p->n_regions = 1000;
	p->regions = calloc(p->n_regions, sizeof(*p->regions));
	for (i = 0; i < p->n_regions; i++) {
		struct kp_plan_region *r = &p->regions[i];

		snprintf(lab, sizeof(lab), "region-%05zu", i);
		r->label = strdup(lab);
		r->decision = KP_PLAN_GRAPH;
		r->reason = KP_PLAN_R_LAUNCH_BOUND;
		r->reason_text = strdup("host-bound idle is 80 pct of 1.000 ms; graph 0.200 ms predicted");
		r->fingerprint = 0x1234567890abcdefULL + i;
		r->kernels = r->nodes = 500;
		r->occurrences = 100;
		r->shape_keys = 4;
		r->warmup = 2;
		r->eager_ns = 1000000;
		r->graph_ns = 200000;
		r->speedup_pred = 5;
		r->n_shapes = 4;
		r->shapes = calloc(4, sizeof(*r->shapes));
		for (j = 0; j < 4; j++)
			r->shapes[j] = (uint64_t)(i * 4 + j + 1);
		r->n_patches = 64;
		r->patches = calloc(64, sizeof(*r->patches));
		for (j = 0; j < 64; j++)
			r->patches[j] = (struct kp_plan_patch){ (uint32_t)j * 7, 0, 0, 8, 0 };
	}
	t0 = kp_now_ns();
	for (it = 0; it < n_iter; it++) {
		kp_strbuf_reset(&sb);
		if (kp_plan_write(p, &sb, &err)) {
			fprintf(stderr, "write: %s\n", err.msg);
			return 1;
		}
	}
	t_write = (kp_now_ns() - t0) / n_iter;
	t0 = kp_now_ns();
	for (it = 0; it < n_iter; it++) {
		struct kp_plan *q = kp_plan_parse(sb.buf, sb.len, "bench", &err);

		if (!q) {
			fprintf(stderr, "parse: %s\n", err.msg);
			return 1;
		}
		kp_plan_free(q);
	}
	t_parse = (kp_now_ns() - t0) / n_iter;
	printf("plan file: %zu regions, %zu bytes; write+verify %.2f ms, parse %.2f ms (%.0f MB/s)\n",
	       p->n_regions, sb.len, t_write / 1e6, t_parse / 1e6,
	       (double)sb.len / (double)t_parse * 1e3);
	kp_strbuf_release(&sb);
	kp_plan_free(p);
	return 0;
}
