/*
 * generate.c - generate one stitched CUDA kernel per fusion group: choose
 * its scheme, specialise it on captured arguments, lay out the source file
 * (preludes, header, entry, the body from generate_emit.c), and judge its
 * numerics and predicted gain (schemes: generate.h; format and rules:
 * fusion/FUSION.md). plan_groups.c puts the sources next to the plan.
 */
#include "generate.h"
#include "generate_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyzer/cost.h"
#include "../common/hash.h"

/* penalty per elementwise kernel folded into a row-reduction kernel: its
 * elements are then walked by one block per row instead of the whole grid */
#define ROWS_FOLD_PENALTY_NS 250

static const char prelude[] =
	"#define KP_INF __int_as_float(0x7f800000)\n"
	"__device__ __forceinline__ float kp_gelu_tanh(float v)\n"
	"{\n"
	"\treturn 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));\n"
	"}\n"
	"__device__ __forceinline__ float kp_gelu_erf(float v)\n"
	"{\n"
	"\treturn 0.5f * v * (1.0f + erff(v * 0.70710678f));\n"
	"}\n"
	"__device__ __forceinline__ float kp_sigmoid(float v)\n"
	"{\n"
	"\treturn 1.0f / (1.0f + expf(-v));\n"
	"}\n"
	"__device__ __forceinline__ float kp_relu(float v)\n"
	"{\n"
	"\treturn fmaxf(v, 0.0f);\n"
	"}\n";

/* f16 <-> f32 without cuda_fp16.h (NVRTC needs no include path): the same
 * conversions as __half2float and __float2half_rn */
static const char f16_prelude[] =
	"__device__ __forceinline__ float kp_h2f(unsigned short h)\n"
	"{\n"
	"\tfloat f;\n"
	"\tasm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
	"\treturn f;\n"
	"}\n"
	"__device__ __forceinline__ unsigned short kp_f2h(float f)\n"
	"{\n"
	"\tunsigned short h;\n"
	"\tasm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
	"\treturn h;\n"
	"}\n";

/* warp shuffle, then one value per warp through shared memory: every thread
 * gets the block's result (blockDim.x a multiple of 32, at most 1024) */
static const char block_reduce[] =
	"#define KP_BLOCK_REDUCE(name, comb) \\\n"
	"__device__ __forceinline__ float name(float v, float *sh) \\\n"
	"{ \\\n"
	"\tint o, w; \\\n"
	"\tfor (o = 16; o > 0; o >>= 1) \\\n"
	"\t\tv = comb(v, __shfl_xor_sync(0xffffffffu, v, o)); \\\n"
	"\t__syncthreads(); \\\n"
	"\tif ((threadIdx.x & 31) == 0) \\\n"
	"\t\tsh[threadIdx.x >> 5] = v; \\\n"
	"\t__syncthreads(); \\\n"
	"\tv = sh[0]; \\\n"
	"\tfor (w = 1; w < (int)(blockDim.x >> 5); w++) \\\n"
	"\t\tv = comb(v, sh[w]); \\\n"
	"\treturn v; \\\n"
	"}\n"
	"#define KP_ADD(a, b) ((a) + (b))\n"
	"KP_BLOCK_REDUCE(kp_block_sum, KP_ADD)\n"
	"KP_BLOCK_REDUCE(kp_block_max, fmaxf)\n"
	"KP_BLOCK_REDUCE(kp_block_min, fminf)\n";

/* the dot of the warp scheme: 16 bytes of W and X per lane and step, fmaf
 * in column order (element 0 is a word's low half), as a GEMV kernel with
 * 16-byte loads and __half22float2 sums them */
static const char dot_f16[] =
	"__device__ __forceinline__ float kp_dot16(uint4 w, uint4 x, float acc)\n"
	"{\n"
	"\tconst unsigned a[4] = { w.x, w.y, w.z, w.w }, b[4] = { x.x, x.y, x.z, x.w };\n"
	"\n"
	"#pragma unroll\n"
	"\tfor (int k = 0; k < 4; k++) {\n"
	"\t\tacc = fmaf(kp_h2f((unsigned short)(a[k] & 0xffffu)), kp_h2f((unsigned short)(b[k] & 0xffffu)), acc);\n"
	"\t\tacc = fmaf(kp_h2f((unsigned short)(a[k] >> 16)), kp_h2f((unsigned short)(b[k] >> 16)), acc);\n"
	"\t}\n"
	"\treturn acc;\n"
	"}\n";
static const char dot_f32[] =
	"__device__ __forceinline__ float kp_dot16(uint4 w, uint4 x, float acc)\n"
	"{\n"
	"\tacc = fmaf(__uint_as_float(w.x), __uint_as_float(x.x), acc);\n"
	"\tacc = fmaf(__uint_as_float(w.y), __uint_as_float(x.y), acc);\n"
	"\tacc = fmaf(__uint_as_float(w.z), __uint_as_float(x.z), acc);\n"
	"\treturn fmaf(__uint_as_float(w.w), __uint_as_float(x.w), acc);\n"
	"}\n";

static void shape_text(struct kp_strbuf *o, const struct kp_fx_shape *sh)
{
	int t;

	for (t = 0; t < (sh->op ? 2 : 1); t++) {
		if (t)
			kp_strbuf_addch(o, (char)sh->op);
		switch (sh->kind[t]) {
		case KP_FX_T_PARAM: kp_strbuf_addf(o, "p%lld", (long long)sh->v[t]); break;
		case KP_FX_T_CONST: kp_strbuf_addf(o, "c%lld", (long long)sh->v[t]); break;
		case KP_FX_T_GRIDX: kp_strbuf_adds(o, "gx"); break;
		case KP_FX_T_GRIDY: kp_strbuf_adds(o, "gy"); break;
		default: kp_strbuf_adds(o, "bx"); break;
		}
	}
}

static void render_file(struct kp__fx_gen *c, const char *kname);

/* One rendering of the file with the given kernel name: the pointer
 * relations the body compiled in join the header, before "// end". */
static void render(struct kp__fx_gen *c, const char *kname)
{
	struct kp_strbuf *o = c->out, tail = KP_STRBUF_INIT;

	kp_strbuf_reset(&c->same);
	render_file(c, kname);
	if (!c->same.len)
		return;
	kp_strbuf_add(&tail, o->buf + c->end_mark, o->len - c->end_mark);
	o->len = c->end_mark;
	kp_strbuf_add(o, c->same.buf, c->same.len);
	kp_strbuf_add(o, tail.buf, tail.len);
	if (tail.oom)
		o->oom = 1;
	kp_strbuf_release(&tail);
}

/* The header the runtime reads (fusion/FUSION.md) and the comment lines
 * after its "// end" (c->end_mark: where "// end" starts). */
static void render_header(struct kp__fx_gen *c, const char *kname)
{
	struct kp_fx_group *g = c->g;
	struct kp_strbuf *o = c->out;
	size_t k, j, p;
	int rows = g->scheme == KP_FX_SCHEME_ROWS, warp = g->scheme == KP_FX_SCHEME_WARP;
	const struct kp_fx_kernel *dk = warp ? g->chain[g->dot] : NULL;

	kp_strbuf_addf(o, "%s\n// kernel %s\n// scheme %s\n// block %d\n// chain %zu\n",
		       KP_FX_HEADER_MAGIC, kname, rows ? "rows" : warp ? "warp" : "elementwise",
		       g->block, g->n_chain);
	for (k = 0; k < g->n_chain; k++) {
		for (j = 0; j < g->chain[k]->n_match; j++)
			kp_strbuf_addf(o, "// match %zu %s\n", k, g->chain[k]->match[j]);
		kp_strbuf_addf(o, "// params %zu %zu\n// shape %zu ", k, g->chain[k]->n_params, k);
		shape_text(o, &g->chain[k]->rows);
		kp_strbuf_addch(o, ' ');
		shape_text(o, &g->chain[k]->cols);
		kp_strbuf_adds(o, kp__fx_flexible(g->chain[k]) ? " flat\n" : "\n");
	}
	if (g->stride)
		kp_strbuf_addf(o, "// stride %lld\n", (long long)g->stride);
	if (rows && g->vec > 1)
		kp_strbuf_addf(o, "// span %d\n", g->block * g->vec);
	if (warp)
		kp_strbuf_addf(o, "// dot %d %d %d %lld\n", g->dot, dk->dot_w, dk->dot_x,
			       (long long)dk->dot_k);
	for (j = 0; j < g->n_args; j++)
		kp_strbuf_addf(o, "// arg %u %u %u\n", g->args[j].kernel, g->args[j].param,
			       g->args[j].size);
	for (j = 0; j < g->n_access; j++)
		kp_strbuf_addf(o, "// access %u %u %s\n", g->access[j].kernel, g->access[j].param,
			       g->access[j].mode);
	for (k = 0; k < g->n_chain; k++)
		for (p = 0; p < g->chain[k]->n_params; p++)
			if (g->spec[k][p])
				kp_strbuf_addf(o, "// const %zu %zu %d 0x%llx\n", k, p,
					       kp_fx_type_size(g->chain[k]->params[p].type),
					       (unsigned long long)g->spec_val[k][p]);
	c->end_mark = o->len;
	kp_strbuf_adds(o, "// end\n// generated by kplan plan from the fusion catalog:");
	for (k = 0; k < g->n_chain; k++)
		kp_strbuf_addf(o, "%s %s", k ? " ->" : "", g->chain[k]->name);
	kp_strbuf_adds(o, "\n// format: fusion/FUSION.md; an edit breaks the plan's source-hash\n\n");
}

/* The helpers the scheme needs, the kernel's signature, and what precedes
 * its loop: a warp's first weights, the programmatic dependent launch. */
static void render_entry(struct kp__fx_gen *c, const char *kname)
{
	struct kp_fx_group *g = c->g;
	struct kp_strbuf *o = c->out;
	size_t j;
	int rows = g->scheme == KP_FX_SCHEME_ROWS, warp = g->scheme == KP_FX_SCHEME_WARP;
	const struct kp_fx_kernel *dk = warp ? g->chain[g->dot] : NULL;

	kp_strbuf_adds(o, prelude);
	if (g->has_f16)
		kp_strbuf_adds(o, f16_prelude);
	if (rows)
		kp_strbuf_adds(o, block_reduce);
	if (warp)
		kp_strbuf_adds(o, dk->params[dk->dot_w].type == KP_FX_PTR_F16 ? dot_f16 : dot_f32);
	kp_strbuf_addf(o, "\nextern \"C\" __global__ void __launch_bounds__(%d) %s(", g->block, kname);
	for (j = 0; j < g->n_args; j++) {
		const struct kp_fx_param *pp = &g->chain[g->args[j].kernel]->params[g->args[j].param];

		kp_strbuf_addf(o, "\n\t%sk%u_%s,", kp_fx_type_c(pp->type), g->args[j].kernel, pp->name);
	}
	if (g->cols_const)
		kp_strbuf_addf(o, "\n\tlong long rows, long long kp_cols)\n{\n"
			       "\tconst long long cols = %lldll;   /* every row kernel's cols */\n\n"
			       "\t(void)kp_cols;\n", (long long)g->cols_const);
	else
		kp_strbuf_adds(o, "\n\tlong long rows, long long cols)\n{\n");
	if (warp) {
		/* one output element per warp; a const W (weights) is loaded
		 * before the wait, so it streams while the producers finish */
		kp_strbuf_addf(o, "\tconst int kp_lane = threadIdx.x & 31;\n"
			       "\tconst long long n = rows * cols, kp_step = (long long)gridDim.x * (blockDim.x >> 5);\n"
			       "\tlong long i = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);\n"
			       "\tuint4 kp_w[%lld];\n\n", (long long)kp__fx_dot_steps(dk));
		if (dk->params[dk->dot_w].is_const) {
			kp_strbuf_adds(o, "\tif (i < n) {\n");
			kp__fx_dot_loads(c, o, "\t\t", "i");
			kp_strbuf_adds(o, "\t}\n");
		}
	}
	/* programmatic dependent launch: the chain's edges keep their type in
	 * the graph, so let consumers launch (they wait for this grid's
	 * completion themselves: its blocks are all resident by then, so they
	 * never hold back an earlier grid), then wait for the producers; no-ops
	 * without PDL. Triggering before the wait lets the consumer start its
	 * own early loads sooner (decode: 4 % per step, PERFORMANCE.md);
	 * KPLAN_FUSION_PDL_EARLY=0 triggers after it. */
	{
		const char *e = getenv("KPLAN_FUSION_PDL_EARLY");
		const char *trig = "\tasm volatile(\"griddepcontrol.launch_dependents;\" :::);\n";
		const char *wait = "\tasm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n";
		/* a GEMV (warp scheme) waits first, as decode's measured best for
		 * its own GEMVs: its successor launching early only competes
		 * for the SMs while the weights stream (PERFORMANCE.md) */
		int early = e ? atoi(e) != 0 : !warp;

		kp_strbuf_addf(o, "#if __CUDA_ARCH__ >= 900\n%s%s#endif\n", early ? trig : wait,
			       early ? wait : trig);
	}
}

/* Warp scheme: one output element per warp, every lane computes it. */
static void render_warp(struct kp__fx_gen *c)
{
	struct kp_fx_group *g = c->g;
	struct kp_strbuf *o = c->out;
	const struct kp_fx_kernel *dk = g->chain[g->dot];
	size_t k, s;

	kp_strbuf_adds(o, "\tfor (; i < n; i += kp_step) {\n");
	if (!dk->params[dk->dot_w].is_const)
		kp__fx_dot_loads(c, o, "\t\t", "i");
	for (k = 0; k < g->n_chain; k++) {
		kp_strbuf_addf(&c->body, "\t\t/* %zu: %s */\n", k, g->chain[k]->name);
		for (s = 0; s < g->chain[k]->n_stmts; s++)
			kp__fx_emit_stmt(c, (uint32_t)k, (uint32_t)s, "\t\t");
	}
	kp_strbuf_add(o, c->body.buf, c->body.len);
	/* every lane computed the element; the first stores it */
	kp_strbuf_adds(o, "\t\tif (kp_lane == 0) {\n");
	kp_strbuf_add(o, c->st.buf, c->st.len);
	kp_strbuf_adds(o, "\t\t}\n");
	if (dk->params[dk->dot_w].is_const) {
		/* the next element's weights (when the grid strides) */
		kp_strbuf_adds(o, "\t\tif (i + kp_step < n) {\n");
		kp__fx_dot_loads(c, o, "\t\t\t", "(i + kp_step)");
		kp_strbuf_adds(o, "\t\t}\n");
	}
	kp_strbuf_adds(o, "\t}\n}\n");
	g->phases = 1;
}

/* Elementwise scheme: one grid-stride loop over the elements. */
static void render_elementwise(struct kp__fx_gen *c)
{
	struct kp_fx_group *g = c->g;
	struct kp_strbuf *o = c->out;
	size_t k, s;

	if (g->stride) {
		kp_strbuf_addf(o, "\tconst long long n = rows * cols;\n\n"
			       "\tfor (long long kp_n = blockIdx.x * (long long)blockDim.x + threadIdx.x; kp_n < n;\n"
			       "\t     kp_n += (long long)gridDim.x * blockDim.x) {\n"
			       "\t\tconst long long row = kp_n / cols, col = kp_n - row * cols;\n"
			       "\t\tconst long long i = row * %lldll + col;\n\n", (long long)g->stride);
	} else {
		kp_strbuf_adds(o, "\tconst long long n = rows * cols;\n\n"
			       "\tfor (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
			       "\t     i += (long long)gridDim.x * blockDim.x) {\n"
			       "\t\tconst long long row = i / cols, col = i - row * cols;\n\n"
			       "\t\t(void)row;\n\t\t(void)col;\n");
	}
	for (k = 0; k < g->n_chain; k++) {
		kp_strbuf_addf(&c->body, "\t\t/* %zu: %s */\n", k, g->chain[k]->name);
		for (s = 0; s < g->chain[k]->n_stmts; s++)
			kp__fx_emit_stmt(c, (uint32_t)k, (uint32_t)s, "\t\t");
	}
	kp_strbuf_add(o, c->body.buf, c->body.len);
	kp_strbuf_add(o, c->st.buf, c->st.len);
	kp_strbuf_adds(o, "\t}\n}\n");
	g->phases = 1;
}

/* Rows scheme: one block per row, the chain in phases split at reductions. */
static void render_rows(struct kp__fx_gen *c)
{
	struct kp_fx_group *g = c->g;
	struct kp_strbuf *o = c->out;
	size_t k, s;

	kp_strbuf_adds(o, "\t__shared__ float kp_sh[32];\n\n"
		       "\tfor (long long row = blockIdx.x; row < rows; row += gridDim.x) {\n");
	/* the phases go to a buffer: their register declarations come first */
	kp_strbuf_reset(&c->decl);
	kp_strbuf_reset(&c->post);
	c->out = &c->post;
	for (k = 0; k < g->n_chain; k++) {
		kp_strbuf_addf(&c->body, "\t\t\t/* %zu: %s */\n", k, g->chain[k]->name);
		for (s = 0; s < g->chain[k]->n_stmts; s++) {
			int pending = 0;

			kp__fx_scan_expr(c, (uint32_t)k, g->chain[k]->stmts[s].expr, &pending);
			if (pending) {
				kp__fx_close_phase(c);
				kp_strbuf_addf(&c->body, "\t\t\t/* %zu: %s (after the reduction) */\n",
					       k, g->chain[k]->name);
			}
			kp__fx_emit_stmt(c, (uint32_t)k, (uint32_t)s, "\t\t\t");
		}
	}
	kp__fx_close_phase(c);
	c->out = o;
	if (g->vec > 1)
		kp_strbuf_addf(o, "\t\tconst long long kp_c0 = threadIdx.x * %dll;\n", g->vec);
	kp_strbuf_add(o, c->decl.buf, c->decl.len);
	kp_strbuf_add(o, c->post.buf, c->post.len);
	kp_strbuf_adds(o, "\t}\n}\n");
}

static void render_file(struct kp__fx_gen *c, const char *kname)
{
	struct kp_fx_group *g = c->g;

	kp_strbuf_reset(c->out);
	g->phases = 0;
	g->fwd_from = g->fwd_to = -1;
	render_header(c, kname);
	render_entry(c, kname);
	c->n_stores = c->n_pend = 0;
	c->n_loads = 0;
	kp_strbuf_reset(&c->pre);
	kp_strbuf_reset(&c->body);
	kp_strbuf_reset(&c->st);
	if (g->scheme == KP_FX_SCHEME_WARP)
		render_warp(c);
	else if (g->scheme == KP_FX_SCHEME_ROWS)
		render_rows(c);
	else
		render_elementwise(c);
}

int kp_fx_generate(const struct kp_fx_kernel *const *chain, size_t n,
		   struct kp_fx_group *g, struct kp_err *err)
{
	return kp_fx_generate_spec(chain, NULL, n, g, err);
}

/*
 * The group's scheme from its kernels (rows with a reduction, warp with a
 * dot, else elementwise) and the parameters its statements use (c->used).
 */
static int choose_scheme(struct kp__fx_gen *c, const struct kp_fx_kernel *const *chain, size_t n,
			 struct kp_err *err)
{
	struct kp_fx_group *g = c->g;
	size_t k, s, p;

	g->fwd_from = g->fwd_to = -1;
	g->n_chain = n;
	g->scheme = KP_FX_SCHEME_ELEMENTWISE;
	g->block = KP_FX_BLOCK;
	g->vec = 1;
	g->stride = chain[0]->stride;
	for (k = 0; k < n; k++) {
		if (chain[k]->stride != g->stride)
			return kp_err_set(err, KP_EUNSUPPORTED,
					  "kernels '%s' and '%s' declare different row strides",
					  chain[0]->name, chain[k]->name);
	}
	g->dot = -1;
	for (k = 0; k < n; k++) {
		g->chain[k] = chain[k];
		if (chain[k]->has_reduce)
			g->scheme = KP_FX_SCHEME_ROWS;
		if (chain[k]->dot_k) {
			if (g->dot >= 0)
				return kp_err_set(err, KP_EUNSUPPORTED,
						  "kernels '%s' and '%s' both have a dot: one per chain",
						  chain[g->dot]->name, chain[k]->name);
			g->dot = (int)k;
		}
		for (p = 0; p < chain[k]->n_params; p++)
			if (chain[k]->params[p].type == KP_FX_PTR_F16)
				g->has_f16 = 1;
		for (s = 0; s < chain[k]->n_stmts; s++) {
			kp__fx_scan_expr(c, (uint32_t)k, chain[k]->stmts[s].expr, NULL);
			if (chain[k]->stmts[s].kind == KP_FX_S_OUT)
				c->used[k][chain[k]->stmts[s].param] = 1;
		}
	}
	if (g->dot >= 0) {
		/* warp scheme: a GEMV and the elementwise kernels around it, one
		 * output element per warp */
		for (k = 0; k < n; k++)
			if ((int)k != g->dot && !kp__fx_flexible(chain[k]))
				return kp_err_set(err, KP_EUNSUPPORTED,
						  "kernel '%s' is not elementwise over flat elements: it cannot "
						  "join dot kernel '%s'", chain[k]->name, chain[g->dot]->name);
		g->scheme = KP_FX_SCHEME_WARP;
		g->block = chain[g->dot]->layout_block;
		c->used[g->dot][chain[g->dot]->dot_w] = 1;
		c->used[g->dot][chain[g->dot]->dot_x] = 1;
	}
	return 0;
}

/*
 * Specialisation: const scalars with a captured value (args) are compiled
 * in instead of passed, and so is a row length every row kernel gives as
 * the same constant.
 */
static void compile_in(struct kp__fx_gen *c, const struct kp_fx_kernel *const *chain,
		       const char *const *args, size_t n)
{
	struct kp_fx_group *g = c->g;
	size_t k, p;

	/* const scalars with a captured value are compiled in (not passed) */
	for (k = 0; args && k < n; k++) {
		for (p = 0; args[k] && p < chain[k]->n_params; p++) {
			const struct kp_fx_param *pp = &chain[k]->params[p];
			uint64_t v;

			if (!pp->is_const || KP_FX_IS_TENSOR(pp->type) || !c->used[k][p] ||
			    kp__fx_arg_bits(args[k], p, kp_fx_type_size(pp->type), &v))
				continue;
			g->spec[k][p] = 1;
			g->spec_val[k][p] = v;
			g->n_spec++;
			c->used[k][p] = 0;
		}
	}
	/* a constant row length (every row kernel says the same constant) is
	 * compiled in: 1.0f / cols then folds as it does in the kernel */
	for (k = 0; k < n; k++) {
		const struct kp_fx_shape *cs = &chain[k]->cols;

		if (kp__fx_flexible(chain[k]))
			continue;
		if (cs->op || cs->kind[0] != KP_FX_T_CONST || (g->cols_const && g->cols_const != cs->v[0])) {
			g->cols_const = 0;
			break;
		}
		g->cols_const = cs->v[0];
	}
}

/* Rows scheme: the block and vector width the kernels' layouts declare. */
static int take_layout(struct kp_fx_group *g, const struct kp_fx_kernel *const *chain, size_t n,
		       struct kp_err *err)
{
	const struct kp_fx_kernel *lay;
	size_t k;

	/* a reduction sums in the order of the layout its kernels declare */
	for (k = 0, lay = NULL; g->scheme == KP_FX_SCHEME_ROWS && k < n; k++) {
		if (!chain[k]->layout_block)
			continue;
		if (lay) {
			if (chain[k]->layout_block != g->block || chain[k]->layout_vec != g->vec)
				return kp_err_set(err, KP_EUNSUPPORTED,
						  "kernels '%s' and '%s' declare different layouts",
						  lay->name, chain[k]->name);
			continue;
		}
		lay = chain[k];
		g->block = chain[k]->layout_block;
		g->vec = chain[k]->layout_vec;
	}
	return 0;
}

/* The fused kernel's parameters: each used one, in kernel then position order. */
static int map_args(struct kp__fx_gen *c, const struct kp_fx_kernel *const *chain, size_t n,
		    struct kp_err *err)
{
	struct kp_fx_group *g = c->g;
	size_t k, p;

	for (k = 0; k < n; k++) {
		for (p = 0; p < chain[k]->n_params; p++) {
			if (!c->used[k][p])
				continue;
			if (g->n_args == KP_FX_MAX_ARGS)
				return kp_err_set(err, KP_EUNSUPPORTED,
						  "the chain uses more than %d parameters", KP_FX_MAX_ARGS);
			g->args[g->n_args].kernel = (uint32_t)k;
			g->args[g->n_args].param = (uint32_t)p;
			g->args[g->n_args++].size = (uint32_t)kp_fx_type_size(chain[k]->params[p].type);
		}
	}
	return 0;
}

/* How each tensor is used ("// access" lines), for the runtime's alias checks. */
static int map_access(struct kp_fx_group *g, const struct kp_fx_kernel *const *chain, size_t n,
		      struct kp_err *err)
{
	size_t k, s, p;

	for (k = 0; k < n; k++) {
		unsigned kinds[KP_FX_MAX_PARAMS] = { 0 };

		for (s = 0; s < chain[k]->n_stmts; s++) {
			kp_fx_expr_any(chain[k], chain[k]->stmts[s].expr, kp__fx_note_load, kinds);
			if (chain[k]->stmts[s].kind == KP_FX_S_OUT)
				kinds[chain[k]->stmts[s].param] |= 1u << 8;
		}
		if ((int)k == g->dot) {
			kinds[chain[k]->dot_w] |= 1u << 9;
			kinds[chain[k]->dot_x] |= 1u << 10;
		}
		for (p = 0; p < chain[k]->n_params; p++) {
			struct kp_fx_access *ac;
			char *m;

			if (!kinds[p])
				continue;
			if (g->n_access == KP_FX_MAX_ARGS)
				return kp_err_set(err, KP_EUNSUPPORTED, "more than %d tensors", KP_FX_MAX_ARGS);
			ac = &g->access[g->n_access++];
			ac->kernel = (uint32_t)k;
			ac->param = (uint32_t)p;
			m = ac->mode;
			if (kinds[p] & (1u << KP_FX_I))
				*m++ = 'i';
			if (kinds[p] & (1u << KP_FX_COL))
				*m++ = 'c';
			if (kinds[p] & (1u << KP_FX_ROW))
				*m++ = 'r';
			if (kinds[p] & (1u << KP_FX_ZERO))
				*m++ = 'z';
			if (kinds[p] & (1u << 8))
				*m++ = 'w';
			if (kinds[p] & (1u << 9))
				*m++ = 'm';
			if (kinds[p] & (1u << 10))
				*m++ = 'v';
			if (chain[k]->params[p].type == KP_FX_PTR_F16)
				*m++ = 'h';
			*m = 0;
		}
	}
	return 0;
}

int kp_fx_generate_spec(const struct kp_fx_kernel *const *chain, const char *const *args,
			size_t n, struct kp_fx_group *g, struct kp_err *err)
{
	struct kp__fx_gen c;
	struct kp_strbuf probe = KP_STRBUF_INIT;
	uint64_t h;
	int rc;

	memset(g, 0, sizeof(*g));
	kp_strbuf_init(&g->source);
	if (n < 2 || n > KP_FX_MAX_CHAIN)
		return kp_err_set(err, KP_EUNSUPPORTED, "chain of %zu kernels: expected 2..%d", n,
				  KP_FX_MAX_CHAIN);
	memset(&c, 0, sizeof(c));
	c.g = g;
	c.args = args;
	kp_strbuf_init(&c.same);
	if ((rc = choose_scheme(&c, chain, n, err)))
		return rc;
	compile_in(&c, chain, args, n);
	if ((rc = take_layout(g, chain, n, err)) || (rc = map_args(&c, chain, n, err)) ||
	    (rc = map_access(g, chain, n, err)))
		return rc;
	/* the kernel's name is a hash of the file rendered without it */
	c.out = &probe;
	render(&c, "kp_fused");
	h = kp_hash64(probe.buf, probe.len, KP_HASH_SEED);
	kp_strbuf_release(&probe);
	snprintf(g->kernel_name, sizeof(g->kernel_name), "kp_fused_%016llx", (unsigned long long)h);
	c.out = &g->source;
	render(&c, g->kernel_name);
	kp_strbuf_release(&c.pre);
	kp_strbuf_release(&c.body);
	kp_strbuf_release(&c.post);
	kp_strbuf_release(&c.decl);
	kp_strbuf_release(&c.st);
	kp_strbuf_release(&c.same);
	if (g->source.oom) {
		kp_fx_group_release(g);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	g->source_hash = kp_hash64(g->source.buf, g->source.len, KP_HASH_SEED);
	snprintf(g->file, sizeof(g->file), "kpfuse-%016llx.cu", (unsigned long long)g->source_hash);
	g->exact = kp_fx_numerics(g, &g->tolerance, g->why, sizeof(g->why));
	return 0;
}

static const char *const red_names[] = { "?", "sum", "mean", "max", "min" };

int kp_fx_numerics(const struct kp_fx_group *g, double *tolerance, char *why, size_t n)
{
	char buf[sizeof(g->why)] = "";
	int f16 = 0;
	size_t k, s;

	for (k = 0; k < g->n_chain; k++) {
		const struct kp_fx_kernel *kk = g->chain[k];

		for (s = 0; s < kk->n_stmts; s++) {
			const struct kp_fx_stmt *st = &kk->stmts[s];

			if (st->kind == KP_FX_S_OUT && kk->params[st->param].type == KP_FX_PTR_F16)
				f16 = 1;
			/* a sum in the kernel's own order only where it declares it */
			if (!buf[0] && st->kind == KP_FX_S_REDUCE && !kk->layout_block &&
			    (st->red_op == KP_FX_R_SUM || st->red_op == KP_FX_R_MEAN))
				snprintf(buf, sizeof(buf), "'%s' sums its %s '%s' in another order than "
					 "the kernel: no layout in the catalog", kk->name,
					 red_names[st->red_op], st->name);
		}
	}
	if (!buf[0] && g->fwd_from >= 0)
		snprintf(buf, sizeof(buf), "'%s' passes a product to '%s' in a register: FMA "
			 "contraction", g->chain[g->fwd_from]->name, g->chain[g->fwd_to]->name);
	if (why && n)
		snprintf(why, n, "%s", buf);
	*tolerance = !buf[0] ? 0 : f16 ? KP_FX_TOL_F16 : KP_FX_TOL_F32;
	return !buf[0];
}

void kp_fx_group_release(struct kp_fx_group *g)
{
	kp_strbuf_release(&g->source);
	memset(g, 0, sizeof(*g));
}

int64_t kp_fx_predicted_gain(const struct kp_fx_group *g, int64_t analyzer_gain_ns)
{
	int64_t gain = analyzer_gain_ns, pen = 0;
	size_t k;

	if (gain < 0)
		gain = (int64_t)((double)(g->n_chain - 1) * kp_cost_default(KP_COST_GRAPH_NODE));
	if (g->scheme == KP_FX_SCHEME_ROWS) {
		for (k = 0; k < g->n_chain; k++)
			if (!g->chain[k]->has_reduce)
				pen += ROWS_FOLD_PENALTY_NS;
	}
	return gain - pen;
}
