/*
 * path.c - the path the graph will run, as far as an eager trace can tell,
 * and the interval around each region's predicted graph time.
 *
 * Library code runs another path while a stream captures. Hugging Face
 * models test the attention mask on the host (`if torch.all(mask == 1)`:
 * aten::is_nonzero, a device-to-host copy and a cudaStreamSynchronize) only
 * when no stream captures; under capture the test is skipped, the mask is
 * kept, and scaled_dot_product_attention may pick another kernel for it. An
 * eager trace holds the eager path: its wait is not one a graph of the
 * region would meet, so it does not split the region (capture.c reports it
 * as a capture_path row, fatal = 0, named by the op), and the kernels the
 * graph runs may not be the ones traced, so the prediction becomes an
 * interval.
 *
 * The facts live in two tables: the ops whose waits the captured path skips,
 * and the fused attention kernels whose unfused fallback a kept mask can
 * cause, with what that fallback costs in nodes (measured on the validation
 * corpus: docs/DESIGN.md "Path-dependent waits and prediction intervals").
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/*
 * The cost model's validated error: every workload of the validation
 * corpora (bench/cost_corpus/) is predicted within +-20 % (`make test`
 * checks it), so a measured graph time lies in [pred / 1.2, pred / 0.8].
 */
#define KP_PRED_BAND 0.20

#define K(kind) (1u << (kind))
#define K_WAIT (K(KP__B_SYNC) | K(KP__B_PAGEABLE_COPY) | K(KP__B_BLOCKING_COPY))

/*
 * Ops whose host waits library code skips while a stream captures.
 * lib_only: only when the innermost Python frame around the call is
 * library code (a user's own loss.item() would fail capture, not skip it);
 * in a trace without Python frames such ops are not taken as skipped.
 */
static const struct {
	const char *op;
	int lib_only;
	const char *why;
} skipped[] = {
	{ "aten::is_nonzero", 0,
	  "a truth test on a tensor (Hugging Face's attention-mask check, `if torch.all(mask "
	  "== 1)`), which library code skips while a stream captures: the graph keeps the mask "
	  "and may run another attention kernel" },
	{ "aten::item", 1,
	  "a scalar read inside library code, which the captured path avoids (capture would "
	  "fail on it otherwise)" },
	{ "aten::_local_scalar_dense", 1,
	  "a scalar read inside library code, which the captured path avoids (capture would "
	  "fail on it otherwise)" },
};

const char *kp__path_op(int kind, const char *const *ops, size_t n, int lib_frame,
			const char **why)
{
	if (kind < 0 || kind >= KP__B__N || !(K_WAIT & K(kind)))
		return NULL;
	for (size_t i = 0; i < n; i++)
		for (size_t f = 0; ops[i] && f < sizeof(skipped) / sizeof(*skipped); f++) {
			if (strcmp(ops[i], skipped[f].op) || (skipped[f].lib_only && lib_frame != 1))
				continue;
			if (lib_frame == 0)
				return NULL;   /* the user's own test: a real wait */
			if (why)
				*why = skipped[f].why;
			return ops[i];
		}
	return NULL;
}

/*
 * Fused attention kernels. With the mask kept (the captured path) SDPA may
 * leave them for its unfused math path: on BERT-base fp16 b1 s128 (H100,
 * H200, torch 2.11) the graph ran 18 kernels per attention call (two fp32
 * GEMMs, softmax, elementwise and copies) where the eager step ran one, and
 * 376 nodes in all against 165 eagerly: 17.6 more per attention call, the
 * mask's own handling included. UNFUSED_NODES is that, rounded up.
 */
static const char *const fused_attention[] = {
	"flash_fwd", "fmha_cutlass", "fort_native_sdpa", "flash::",
};
#define UNFUSED_NODES 18

static int is_fused_attention(const char *name)
{
	for (size_t i = 0; name && i < sizeof(fused_attention) / sizeof(*fused_attention); i++)
		if (strstr(name, fused_attention[i]))
			return 1;
	return 0;
}

/*
 * What the other path can add to one occurrence o: UNFUSED_NODES nodes per
 * fused attention kernel, each costing the mean traced duration of the
 * region's other kernels that are not GEMMs (cuBLAS's nvjet kernels
 * included among GEMMs), plus the traced gap, at least the node floor. The
 * unfused path's kernels are of that kind and size: on BERT-base fp16 b1
 * s128 they averaged 2.1 us, as the region's other non-GEMM kernels did.
 * The fused kernel itself stays counted (the bound errs high). 0 when o
 * runs no fused attention.
 */
static int64_t unfused_extra(struct kp__ana *a, const struct kp__occ *o)
{
	int64_t n_attn = 0, n = 0, sum = 0, node;

	for (uint32_t i = 0; i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		const char *name = a->sigs.data[op->sig].name;

		if (op->kind != KP__OP_KERNEL)
			continue;
		if (is_fused_attention(name))
			n_attn++;
		else if (!kp_kernel_is_gemm(name) && !(name && strstr(name, "nvjet"))) {
			sum += op->end - op->start;
			n++;
		}
	}
	if (!n_attn)
		return 0;
	node = (n ? sum / n : 0) + llround(a->cost.v[KP_COST_TRACED_GAP]);
	if (node < llround(a->cost.v[KP_COST_GRAPH_NODE]))
		node = llround(a->cost.v[KP_COST_GRAPH_NODE]);
	return n_attn * UNFUSED_NODES * node;
}

void kp__pred_interval(struct kp__ana *a, struct kp__region *r)
{
	int64_t p = r->pred.graph_ns, extra;

	r->pred_lo = r->pred_hi = 0;
	if (!r->has_pred || p <= 0)
		return;
	r->pred_lo = llround((double)p / (1 + KP_PRED_BAND));
	r->pred_hi = llround((double)p / (1 - KP_PRED_BAND));
	/*
	 * The path's range: the captured path runs at least the eager path's
	 * kernels (the mask kept adds work, the skipped wait's 4-byte copy is
	 * one node), so the eager path's prediction is the low end, and every
	 * fused attention call unfused the high end. The model's own error is
	 * not stacked on the path's range (hi/lo would pass 2 on every such
	 * region): the corpus bounds it apart.
	 */
	if (r->path_points && r->n_occ && (extra = unfused_extra(a, &r->occ[r->tmpl])) > 0) {
		r->pred_lo = p;
		r->pred_hi = p + extra;
		if (r->pred_hi < llround((double)p / (1 - KP_PRED_BAND)))
			r->pred_hi = llround((double)p / (1 - KP_PRED_BAND));
	}
}
