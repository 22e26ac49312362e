/*
 * generate.c - generate one stitched CUDA kernel per fusion group and put
 * its source next to the plan (schemes: fusion_gen.h; format and rules:
 * fusion/FUSION.md).
 */
#include "fusion_gen.h"
#include "generate_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../analyzer/cost.h"
#include "../common/fileio.h"
#include "../common/hash.h"
#include "../common/log.h"
#include "../common/printable.h"
#include "../common/vec.h"

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

static const char *pname(const struct kp__fx_gen *c, uint32_t k, uint32_t p)
{
	return c->g->chain[k]->params[p].name;
}

static int ptype(const struct kp__fx_gen *c, uint32_t k, uint32_t p)
{
	return c->g->chain[k]->params[p].type;
}

/* A load from memory of tensor p of kernel k at index ix, widened to f32. */
static void emit_raw_load(struct kp__fx_gen *c, struct kp_strbuf *o, uint32_t k, uint32_t p, const char *ix)
{
	int h16 = ptype(c, k, p) == KP_FX_PTR_F16;

	kp_strbuf_addf(o, "%sk%u_%s[%s]%s", h16 ? "kp_h2f(" : "", k, pname(c, k, p), ix, h16 ? ")" : "");
}

/* Bits of parameter p (size bytes) in a trace's args field: hex of the
 * parameter bytes in memory order, one field per parameter, ':' separated. */
int kp__fx_arg_bits(const char *args, size_t p, int size, uint64_t *v)
{
	const char *s = args;
	size_t j;
	int b;

	for (j = 0; j < p && s; j++)
		if ((s = strchr(s, ':')))
			s++;
	if (!s)
		return -1;
	*v = 0;
	for (b = 0; b < size; b++) {
		unsigned x;

		if (!isxdigit((unsigned char)s[2 * b]) || !isxdigit((unsigned char)s[2 * b + 1]) ||
		    sscanf(s + 2 * b, "%2x", &x) != 1)
			return -1;
		*v |= (uint64_t)x << (8 * b);
	}
	return s[2 * size] == ':' || !s[2 * size] ? 0 : -1;
}

/*
 * Whether tensor p of kernel k and tensor q of kernel j were the same
 * pointer in the traced capture: 1 equal, 0 not, -1 unknown.
 */
static int ptr_relation(const struct kp__fx_gen *c, uint32_t k, uint32_t p, uint32_t j, uint32_t q)
{
	uint64_t a, b;

	if (!c->args || !c->args[k] || !c->args[j] || kp__fx_arg_bits(c->args[k], p, 8, &a) ||
	    kp__fx_arg_bits(c->args[j], q, 8, &b))
		return -1;
	return a == b;
}

/* ptr_relation; a known relation is compiled in and listed for the
 * runtime's guard (once). */
static int same_ptr(struct kp__fx_gen *c, uint32_t k, uint32_t p, uint32_t j, uint32_t q)
{
	char line[64];
	int eq = ptr_relation(c, k, p, j, q);

	if (eq < 0)
		return -1;
	snprintf(line, sizeof(line), "// same %u %u %u %u %d\n", k, p, j, q, eq);
	if (!c->same.buf || !strstr(c->same.buf, line))
		kp_strbuf_adds(&c->same, line);
	return eq;
}

/*
 * Tensor p of kernel k at [i]: the latest known register value when the
 * pointers are equal at run time (a value stored, or loaded, by the chain:
 * tensors of two chain kernels are the same or disjoint, the runtime checks
 * it), else the load. Only values of the same element type qualify.
 */
static void emit_load_i(struct kp__fx_gen *c, struct kp_strbuf *o, uint32_t k, uint32_t p)
{
	int open = 0;
	size_t s;

	for (s = c->n_stores; s-- > 0;) {
		const struct kp__fx_store *st = &c->stores[s];
		int eq;

		if (ptype(c, st->k, st->p) != ptype(c, k, p))
			continue;
		if (st->k == k && st->p == p) {
			kp_strbuf_adds(o, st->var);
			goto close;
		}
		if ((eq = same_ptr(c, k, p, st->k, st->p)) == 1) {
			kp_strbuf_adds(o, st->var);
			goto close;
		}
		if (eq == 0)
			continue;
		kp_strbuf_addf(o, "(k%u_%s == k%u_%s ? %s : ", k, pname(c, k, p), st->k,
			       pname(c, st->k, st->p), st->var);
		open++;
	}
	emit_raw_load(c, o, k, p, "i");
close:
	while (open--)
		kp_strbuf_addch(o, ')');
}

/*
 * Which chain kernel's product tensor p of kernel k at [i] may be, read as
 * emit_load_i reads it: a register holding one (any candidate of a choice
 * made at run time; another kernel's before k's own), or -1.
 */
static int load_from(const struct kp__fx_gen *c, uint32_t k, uint32_t p)
{
	int own = -1, other = -1;
	size_t s;

	if (ptype(c, k, p) != KP_FX_PTR_F32)
		return -1;   /* f16: through kp_h2f, an opaque conversion */
	for (s = c->n_stores; s-- > 0;) {
		const struct kp__fx_store *st = &c->stores[s];
		int eq = -1, from = st->prod_from;

		if (ptype(c, st->k, st->p) != ptype(c, k, p))
			continue;
		if (!(st->k == k && st->p == p) && (eq = ptr_relation(c, k, p, st->k, st->p)) == 0)
			continue;
		if (from >= 0 && (uint32_t)from != k && other < 0)
			other = from;
		else if (from >= 0 && own < 0)
			own = from;
		if ((st->k == k && st->p == p) || eq == 1)
			break;   /* the register for sure: earlier ones are not read */
	}
	return other >= 0 ? other : own;
}

/* Divisor x folds to a constant (a literal, a compiled-in scalar, rows or
 * cols): the compiler may turn the division into a multiplication. */
static int const_expr(const struct kp__fx_gen *c, uint32_t k, int x)
{
	const struct kp_fx_node *nd = &c->g->chain[k]->nodes[x];

	switch (nd->kind) {
	case KP_FX_N_NUM:
		return 1;
	case KP_FX_N_SCALAR:
		return c->g->spec[k][nd->a];
	case KP_FX_N_INDEX:
		return nd->a == KP_FX_ROWS || nd->a == KP_FX_COLS;
	case KP_FX_N_UNARY:
		return const_expr(c, k, nd->a);
	case KP_FX_N_BINARY:
		return const_expr(c, k, nd->a) && const_expr(c, k, nd->b);
	default:
		return 0;
	}
}

/* Functions that are one instruction (or a comparison) on their argument:
 * the compiler cannot contract a product through them. */
static int opaque_call(const struct kp_fx_node *nd)
{
	static const char *const names[] = { "fmaxf", "fminf", "fabsf", "relu", "sqrtf", "rsqrtf" };
	const char *fn = kp_fx_func_name(nd->a);
	size_t j;

	for (j = 0; j < sizeof(names) / sizeof(names[0]); j++)
		if (!strcmp(fn, names[j]))
			return 1;
	return 0;
}

/*
 * Which chain kernel's product the value of node x of kernel k may be (an
 * fmul the compiler can contract with an addition that uses the value into
 * one FMA), or -1: k for a product, a quotient by a constant, a mean (sum /
 * cols), gelu (0.5f * v * ...), sigmoid and the library functions whose
 * last operation is not visible (expf, tanhf, ...); for a load at [i], the
 * register it may read (load_from); through negations and both branches of
 * ?:. Not: sums and differences, comparisons, other loads, fmaxf, fminf,
 * fabsf, relu, sqrtf, rsqrtf (single instructions).
 */
static int expr_from(const struct kp__fx_gen *c, uint32_t k, int x)
{
	const struct kp_fx_kernel *kk = c->g->chain[k];
	const struct kp_fx_node *nd = &kk->nodes[x];
	const struct kp_fx_stmt *st;
	int fb, fc;

	switch (nd->kind) {
	case KP_FX_N_LOAD:
		return nd->b == KP_FX_I ? load_from(c, k, (uint32_t)nd->a) : -1;
	case KP_FX_N_RED:
		st = &kk->stmts[nd->a];
		if (st->kind == KP_FX_S_LET)
			return expr_from(c, k, st->expr);
		return st->kind == KP_FX_S_REDUCE && st->red_op == KP_FX_R_MEAN ? (int)k : -1;
	case KP_FX_N_CALL:
		return opaque_call(nd) ? -1 : (int)k;
	case KP_FX_N_UNARY:
		return nd->op == '-' ? expr_from(c, k, nd->a) : -1;
	case KP_FX_N_BINARY:
		return nd->op == '*' || (nd->op == '/' && const_expr(c, k, nd->b)) ? (int)k : -1;
	case KP_FX_N_COND:
		/* another kernel's product first, as load_from */
		fb = expr_from(c, k, nd->b);
		fc = expr_from(c, k, nd->c);
		return fb >= 0 && (uint32_t)fb != k ? fb : fc >= 0 ? fc : fb;
	default:
		return -1;   /* literals, scalars, indices */
	}
}

/*
 * Node x of kernel k, whose value an addition uses when add is set: the
 * first load at [i] that may read another chain kernel's product from a
 * register in such a place is noted in g->fwd_from/fwd_to. NVRTC may
 * contract that product and the addition into one FMA, which the memory
 * between the two kernels prevents in the chain (kp_fx_numerics). The
 * additions: + and - (either side), a sum's accumulation, and what gelu,
 * sigmoid and the library functions do with their argument (unseen).
 */
static void note_contract(struct kp__fx_gen *c, uint32_t k, int x, int add)
{
	const struct kp_fx_node *nd;
	int f;

	if (x < 0 || c->g->fwd_from >= 0)
		return;
	nd = &c->g->chain[k]->nodes[x];
	switch (nd->kind) {
	case KP_FX_N_LOAD:
		if (add && nd->b == KP_FX_I && (f = load_from(c, k, (uint32_t)nd->a)) >= 0 &&
		    (uint32_t)f != k) {
			c->g->fwd_from = f;
			c->g->fwd_to = (int)k;
		}
		break;
	case KP_FX_N_CALL:
		add = !opaque_call(nd);
		note_contract(c, k, nd->b, add);
		note_contract(c, k, nd->c, add);
		note_contract(c, k, nd->d, add);
		break;
	case KP_FX_N_UNARY:
		note_contract(c, k, nd->a, nd->op == '-' && add);
		break;
	case KP_FX_N_BINARY:
		add = nd->op == '+' || nd->op == '-';
		note_contract(c, k, nd->a, add);
		note_contract(c, k, nd->b, add);
		break;
	case KP_FX_N_COND:
		note_contract(c, k, nd->a, 0);
		note_contract(c, k, nd->b, add);
		note_contract(c, k, nd->c, add);
		break;
	default:
		break;
	}
}

static void emit_expr(struct kp__fx_gen *c, struct kp_strbuf *o, uint32_t k, int x)
{
	const struct kp_fx_kernel *kk = c->g->chain[k];
	const struct kp_fx_node *nd = &kk->nodes[x];
	static const char *const ix[] = { "i", "row", "col", "rows", "cols", "0" };

	switch (nd->kind) {
	case KP_FX_N_NUM:
		kp_strbuf_adds(o, nd->text);
		break;
	case KP_FX_N_SCALAR:
		if (c->g->spec[k][nd->a]) {
			uint64_t v = c->g->spec_val[k][nd->a];

			switch (ptype(c, k, (uint32_t)nd->a)) {
			case KP_FX_F32: kp_strbuf_addf(o, "__int_as_float(0x%08x)", (unsigned)v); break;
			case KP_FX_I64: kp_strbuf_addf(o, "(%lldll)", (long long)v); break;
			default: kp_strbuf_addf(o, "(%d)", (int)(int32_t)(uint32_t)v); break;
			}
		} else {
			kp_strbuf_addf(o, "k%u_%s", k, pname(c, k, (uint32_t)nd->a));
		}
		break;
	case KP_FX_N_LOAD:
		if (nd->b != KP_FX_I)
			emit_raw_load(c, o, k, (uint32_t)nd->a, ix[nd->b]);
		else
			emit_load_i(c, o, k, (uint32_t)nd->a);
		break;
	case KP_FX_N_RED:
		kp_strbuf_addf(o, "k%u_%s", k, kk->stmts[nd->a].name);
		break;
	case KP_FX_N_INDEX:
		kp_strbuf_adds(o, ix[nd->a]);
		break;
	case KP_FX_N_CALL: {
		const char *fn = kp_fx_func_name(nd->a);
		int args[3] = { nd->b, nd->c, nd->d }, j;

		if (!strcmp(fn, "gelu_tanh") || !strcmp(fn, "gelu_erf") || !strcmp(fn, "sigmoid") ||
		    !strcmp(fn, "relu"))
			kp_strbuf_adds(o, "kp_");
		kp_strbuf_adds(o, fn);
		kp_strbuf_addch(o, '(');
		for (j = 0; j < 3 && args[j] >= 0; j++) {
			if (j)
				kp_strbuf_adds(o, ", ");
			emit_expr(c, o, k, args[j]);
		}
		kp_strbuf_addch(o, ')');
		break;
	}
	case KP_FX_N_UNARY:
		kp_strbuf_addf(o, "(%s", kp_fx_op_name(nd->op));
		emit_expr(c, o, k, nd->a);
		kp_strbuf_addch(o, ')');
		break;
	case KP_FX_N_BINARY:
		kp_strbuf_addch(o, '(');
		emit_expr(c, o, k, nd->a);
		kp_strbuf_addf(o, " %s ", kp_fx_op_name(nd->op));
		emit_expr(c, o, k, nd->b);
		kp_strbuf_addch(o, ')');
		break;
	case KP_FX_N_COND:
		kp_strbuf_addch(o, '(');
		emit_expr(c, o, k, nd->a);
		kp_strbuf_adds(o, " ? ");
		emit_expr(c, o, k, nd->b);
		kp_strbuf_adds(o, " : ");
		emit_expr(c, o, k, nd->c);
		kp_strbuf_addch(o, ')');
		break;
	}
}

struct scan {
	struct kp__fx_gen *c;
	uint32_t k;
	int *uses_pending;
};

static int scan_node(const struct kp_fx_node *nd, void *ctx)
{
	struct scan *sc = ctx;
	size_t j;

	if (nd->kind == KP_FX_N_SCALAR || nd->kind == KP_FX_N_LOAD)
		sc->c->used[sc->k][nd->a] = 1;
	if (nd->kind == KP_FX_N_RED && sc->uses_pending)
		for (j = 0; j < sc->c->n_pend; j++)
			if (sc->c->pend_k[j] == sc->k && sc->c->pend_s[j] == (uint32_t)nd->a)
				*sc->uses_pending = 1;
	return 0;
}

/* Mark the parameters an expression uses; note whether it needs a reduction
 * of the open phase. */
void kp__fx_scan_expr(struct kp__fx_gen *c, uint32_t k, int x, int *uses_pending)
{
	struct scan sc = { c, k, uses_pending };

	kp_fx_expr_any(c->g->chain[k], x, scan_node, &sc);
}

/* Index kinds each tensor parameter is loaded with (bit per enum kp_fx_index). */
int kp__fx_note_load(const struct kp_fx_node *nd, void *kinds)
{
	if (nd->kind == KP_FX_N_LOAD)
		((unsigned *)kinds)[nd->a] |= 1u << nd->b;
	return 0;
}

/* A node that depends on the row/column split, or a reduction (which does). */
static int split_node(const struct kp_fx_node *nd, void *ctx)
{
	return kp_fx_split_node(nd, ctx) || nd->kind == KP_FX_N_RED;
}

/* A kernel whose result does not depend on how its elements split into rows. */
int kp__fx_flexible(const struct kp_fx_kernel *kk)
{
	size_t s;

	if (kk->dot_k)
		return 1;   /* one output per element (the catalog checked its statements) */
	if (kk->has_reduce || kk->stride)
		return 0;
	for (s = 0; s < kk->n_stmts; s++)
		if (kp_fx_expr_any(kk, kk->stmts[s].expr, split_node, NULL))
			return 0;
	return 1;
}

/* Steps of 32 lanes x 16 bytes of a dot kernel's row. */
int64_t kp__fx_dot_steps(const struct kp_fx_kernel *kk)
{
	return kk->dot_k / (32 * (kk->params[kk->dot_w].type == KP_FX_PTR_F16 ? 8 : 4));
}

/* The loads of the warp's row of W into kp_w (warp scheme). */
void kp__fx_dot_loads(struct kp__fx_gen *c, struct kp_strbuf *o, const char *ind, const char *idx)
{
	const struct kp_fx_kernel *kk = c->g->chain[c->g->dot];

	kp_strbuf_addf(o, "#pragma unroll\n%sfor (int kp_c = 0; kp_c < %lld; kp_c++)\n"
		       "%s\tkp_w[kp_c] = __ldcs((const uint4 *)(k%d_%s + %s * %lldll) + kp_lane + 32 * kp_c);\n",
		       ind, (long long)kp__fx_dot_steps(kk), ind, c->g->dot, pname(c, (uint32_t)c->g->dot,
									(uint32_t)kk->dot_w),
		       idx, (long long)kk->dot_k);
}

/* Elements between rows of the [i] tensors. */
static void row_stride(const struct kp_fx_group *g, struct kp_strbuf *o)
{
	if (g->stride)
		kp_strbuf_addf(o, "%lldll", (long long)g->stride);
	else
		kp_strbuf_adds(o, "cols");
}

/* The thread's VEC consecutive columns (one step, unrolled) around code. */
static void vec_loop(struct kp__fx_gen *c, const struct kp_strbuf *code)
{
	kp_strbuf_addf(c->out, "#pragma unroll\n"
		       "\t\tfor (int kp_e = 0; kp_e < %d; kp_e++) {\n"
		       "\t\t\tconst long long col = kp_c0 + kp_e, i = row * ", c->g->vec);
	row_stride(c->g, c->out);
	kp_strbuf_adds(c->out, " + col;\n\n\t\t\tif (col < cols) {\n");
	kp_strbuf_add(c->out, code->buf, code->len);
	kp_strbuf_adds(c->out, "\t\t\t}\n\t\t}\n");
}

/* Close the open phase of the rows scheme: loop + block reductions. */
void kp__fx_close_phase(struct kp__fx_gen *c)
{
	size_t j;

	if (!c->body.len && !c->n_pend)
		return;
	kp_strbuf_add(c->out, c->pre.buf, c->pre.len);
	if (c->g->vec == 1) {
		kp_strbuf_adds(c->out, "\t\tfor (long long col = threadIdx.x; col < cols; col += blockDim.x) {\n"
				       "\t\t\tconst long long i = row * ");
		row_stride(c->g, c->out);
		kp_strbuf_adds(c->out, " + col;\n\n");
		kp_strbuf_add(c->out, c->body.buf, c->body.len);
		kp_strbuf_add(c->out, c->st.buf, c->st.len);
	} else {
		/* the original kernel's order: VEC consecutive columns per thread,
		 * one step (the runtime checks cols <= span): values stay in
		 * registers across phases, as in the original kernel */
		kp_strbuf_adds(c->out, "\t\tif (kp_c0 < cols) {\n");
		vec_loop(c, &c->body);
		if (c->st.len)
			vec_loop(c, &c->st);
	}
	kp_strbuf_adds(c->out, "\t\t}\n");
	for (j = 0; j < c->n_pend; j++) {
		const struct kp_fx_stmt *st = &c->g->chain[c->pend_k[j]]->stmts[c->pend_s[j]];
		const char *fn = st->red_op == KP_FX_R_MAX ? "kp_block_max" :
			st->red_op == KP_FX_R_MIN ? "kp_block_min" : "kp_block_sum";

		kp_strbuf_addf(c->out, "\t\tconst float k%u_%s = %s(kp_acc%u_%s, kp_sh)%s;\n",
			       c->pend_k[j], st->name, fn, c->pend_k[j], st->name,
			       st->red_op == KP_FX_R_MEAN ? " / (float)cols" : "");
	}
	kp_strbuf_adds(c->out, "\n");
	c->g->phases++;
	kp_strbuf_reset(&c->pre);
	kp_strbuf_reset(&c->body);
	kp_strbuf_reset(&c->st);
	c->n_pend = 0;
	if (c->g->vec == 1) {
		c->n_stores = 0;
	} else {
		/* single step: stored values stay valid in their arrays; the
		 * loads were registers of the phase's loop */
		size_t a, b;

		for (a = b = 0; a < c->n_stores; a++)
			if (!c->stores[a].is_load)
				c->stores[b++] = c->stores[a];
		c->n_stores = b;
	}
}

/* 1 when evaluating node x always loads tensor p at [i], whichever branch runs. */
static int must_load(const struct kp_fx_kernel *kk, int x, int p)
{
	const struct kp_fx_node *nd;

	if (x < 0)
		return 0;
	nd = &kk->nodes[x];
	switch (nd->kind) {
	case KP_FX_N_LOAD:
		return nd->a == p && nd->b == KP_FX_I;
	case KP_FX_N_CALL:
		return must_load(kk, nd->b, p) || must_load(kk, nd->c, p) || must_load(kk, nd->d, p);
	case KP_FX_N_UNARY:
		return must_load(kk, nd->a, p);
	case KP_FX_N_BINARY:
		if (nd->op == 'A' || nd->op == 'O')   /* short-circuit: the left side only */
			return must_load(kk, nd->a, p);
		return must_load(kk, nd->a, p) || must_load(kk, nd->b, p);
	case KP_FX_N_COND:
		return must_load(kk, nd->a, p) || (must_load(kk, nd->b, p) && must_load(kk, nd->c, p));
	default:
		return 0;
	}
}

/*
 * Before a statement of kernel k: read each tensor it always loads at [i]
 * into a register, once (a later statement or kernel reading the same
 * pointer uses the register). Loads only an expression would do anyway: a
 * tensor under a branch that may not run can be an invalid pointer.
 */
static void bind_loads(struct kp__fx_gen *c, uint32_t k, int expr, const char *ind)
{
	const struct kp_fx_kernel *kk = c->g->chain[k];
	size_t s;
	uint32_t p;

	for (p = 0; p < kk->n_params; p++) {
		struct kp__fx_store *sv;

		if ((kk->params[p].type != KP_FX_PTR_F32 && kk->params[p].type != KP_FX_PTR_F16) ||
		    !must_load(kk, expr, (int)p) || c->n_stores >= KP__FX_MAX_KNOWN)
			continue;
		for (s = 0; s < c->n_stores; s++)
			if (c->stores[s].k == k && c->stores[s].p == p)
				break;
		if (s < c->n_stores)
			continue;   /* known already */
		sv = &c->stores[c->n_stores];
		sv->k = k;
		sv->p = p;
		sv->is_load = 1;
		sv->prod_from = load_from(c, k, p);
		snprintf(sv->var, sizeof(sv->var), "kp_l%u", c->n_loads++);
		kp_strbuf_addf(&c->body, "%sconst float %s = ", ind, sv->var);
		emit_load_i(c, &c->body, k, p);
		kp_strbuf_adds(&c->body, ";\n");
		c->n_stores++;
	}
}

void kp__fx_emit_stmt(struct kp__fx_gen *c, uint32_t k, uint32_t si, const char *ind)
{
	const struct kp_fx_stmt *st = &c->g->chain[k]->stmts[si];

	if (st->kind == KP_FX_S_DOT) {
		/* the warp's dot product (warp scheme): W is in kp_w already */
		const struct kp_fx_kernel *kk = c->g->chain[k];

		kp_strbuf_addf(&c->body, "%sfloat kp_dot = 0.0f;\n\n#pragma unroll\n"
			       "%sfor (int kp_c = 0; kp_c < %lld; kp_c++)\n"
			       "%s\tkp_dot = kp_dot16(kp_w[kp_c], ((const uint4 *)k%u_%s)[kp_lane + 32 * kp_c], kp_dot);\n"
			       "#pragma unroll\n"
			       "%sfor (int kp_o = 16; kp_o > 0; kp_o >>= 1)\n"
			       "%s\tkp_dot += __shfl_xor_sync(0xffffffffu, kp_dot, kp_o);\n"
			       "%sconst float k%u_%s = kp_dot;\n",
			       ind, ind, (long long)kp__fx_dot_steps(kk), ind, k, pname(c, k, (uint32_t)kk->dot_x),
			       ind, ind, ind, k, st->name);
		return;
	}
	if (st->kind != KP_FX_S_LET)
		bind_loads(c, k, st->expr, ind);

	if (st->kind == KP_FX_S_OUT) {
		struct kp__fx_store *sv = &c->stores[c->n_stores++];

		sv->k = k;
		sv->p = (uint32_t)st->param;
		sv->is_load = 0;
		if (c->g->vec > 1) {
			/* one register per column of the thread, declared per row */
			snprintf(sv->var, sizeof(sv->var), "kp_v%u_%u[kp_e]", k, si);
			kp_strbuf_addf(&c->decl, "\t\tfloat kp_v%u_%u[%d];\n", k, si, c->g->vec);
		} else {
			snprintf(sv->var, sizeof(sv->var), "kp_v%u_%u", k, si);
		}
		if (ptype(c, k, sv->p) == KP_FX_PTR_F16)
			kp_strbuf_addf(&c->body, "%sconst unsigned short kp_h%u_%u = kp_f2h(", ind, k, si);
		else
			kp_strbuf_addf(&c->body, "%s%s%s = ", ind, c->g->vec > 1 ? "" : "const float ",
				       sv->var);
		/* the store is not visible to its own expression */
		c->n_stores--;
		sv->prod_from = ptype(c, k, sv->p) == KP_FX_PTR_F32 ? expr_from(c, k, st->expr) : -1;
		note_contract(c, k, st->expr, 0);
		emit_expr(c, &c->body, k, st->expr);
		c->n_stores++;
		/* the memory store comes after the phase's compute: no load
		 * waits behind a store it cannot alias (two chain kernels'
		 * tensors are the same, element by element, or disjoint) */
		if (ptype(c, k, sv->p) == KP_FX_PTR_F16) {
			/* later loads see the rounded value, as they would through memory */
			if (c->g->vec > 1) {
				kp_strbuf_addf(&c->decl, "\t\tunsigned short kp_s%u_%u[%d];\n", k, si,
					       c->g->vec);
				kp_strbuf_addf(&c->body, ");\n%skp_s%u_%u[kp_e] = kp_h%u_%u;\n", ind, k, si,
					       k, si);
				kp_strbuf_addf(&c->st, "\t\t\t\tk%u_%s[i] = kp_s%u_%u[kp_e];\n", k,
					       pname(c, k, sv->p), k, si);
			} else {
				kp_strbuf_adds(&c->body, ");\n");
				kp_strbuf_addf(&c->st, "%sk%u_%s[i] = kp_h%u_%u;\n", ind, k,
					       pname(c, k, sv->p), k, si);
			}
			kp_strbuf_addf(&c->body, "%s%s%s = kp_h2f(kp_h%u_%u);\n", ind,
				       c->g->vec > 1 ? "" : "const float ", sv->var, k, si);
		} else {
			kp_strbuf_adds(&c->body, ";\n");
			kp_strbuf_addf(&c->st, "%sk%u_%s[i] = %s;\n", c->g->vec > 1 ? "\t\t\t\t" : ind, k,
				       pname(c, k, sv->p), sv->var);
		}
		return;
	}
	if (st->kind == KP_FX_S_LET) {
		/* once per row, before the phase's column loop (rows scheme):
		 * outside the loop as in the original kernel, so the compiler
		 * contracts the same operations into FMAs */
		struct kp_strbuf *o = c->g->scheme == KP_FX_SCHEME_ROWS ? &c->pre : &c->body;

		kp_strbuf_addf(o, "%sconst float k%u_%s = ", c->g->scheme == KP_FX_SCHEME_ROWS ?
			       "\t\t" : ind, k, st->name);
		emit_expr(c, o, k, st->expr);
		kp_strbuf_adds(o, ";\n");
		return;
	}
	/* reduction: accumulate in this phase, reduce when it closes; a sum
	 * adds the value */
	note_contract(c, k, st->expr, st->red_op == KP_FX_R_SUM || st->red_op == KP_FX_R_MEAN);
	kp_strbuf_addf(&c->pre, "\t\tfloat kp_acc%u_%s = %s;\n", k, st->name,
		       st->red_op == KP_FX_R_MAX ? "-KP_INF" : st->red_op == KP_FX_R_MIN ? "KP_INF" : "0.0f");
	if (st->red_op == KP_FX_R_MAX || st->red_op == KP_FX_R_MIN) {
		kp_strbuf_addf(&c->body, "%skp_acc%u_%s = %s(kp_acc%u_%s, ", ind, k, st->name,
			       st->red_op == KP_FX_R_MAX ? "fmaxf" : "fminf", k, st->name);
		emit_expr(c, &c->body, k, st->expr);
		kp_strbuf_adds(&c->body, ");\n");
	} else {
		kp_strbuf_addf(&c->body, "%skp_acc%u_%s += ", ind, k, st->name);
		emit_expr(c, &c->body, k, st->expr);
		kp_strbuf_adds(&c->body, ";\n");
	}
	c->pend_k[c->n_pend] = k;
	c->pend_s[c->n_pend++] = si;
}

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

/* ---------------------------------------------------------------------- */
/* plans */

/* A fused source beside the plan: atomically, never through a planted link. */
static int write_file(const char *dir, const struct kp_fx_group *g, struct kp_err *err)
{
	struct kp_strbuf path = KP_STRBUF_INIT;
	int rc;

	kp_strbuf_addf(&path, "%s/%s", dir, g->file);
	rc = path.oom ? kp_err_set(err, KP_ENOMEM, "out of memory") :
	     kp_file_write_atomic(AT_FDCWD, path.buf, g->source.buf, g->source.len, 0666, err);
	kp_strbuf_release(&path);
	return rc;
}

/* Generate group u, specialised on its captured arguments when it has them. */
static int gen_group(const struct kp_plan_fusion *u, const struct kp_fx_kernel *const *chain,
		     size_t n, struct kp_fx_group *g, struct kp_err *err)
{
	char *buf = u->args ? kp_strdup(u->args) : NULL, *save = NULL, *t;
	const char *args[KP_FX_MAX_CHAIN] = { 0 };
	size_t k = 0;
	int rc;

	for (t = buf ? strtok_r(buf, " ", &save) : NULL; t && k < n; t = strtok_r(NULL, " ", &save))
		args[k++] = strcmp(t, "-") ? t : NULL;
	rc = kp_fx_generate_spec(chain, buf ? args : NULL, n, g, err);
	free(buf);
	return rc;
}

int kp_fx_plan_sources(struct kp_plan *plan, const struct kp_fx_catalog *cat,
		       const char *dir, struct kp_fx_plan_stats *st, struct kp_err *err)
{
	if (st)
		memset(st, 0, sizeof(*st));
	return kp_fx_plan_sources_from(plan, 0, cat, dir, st, err);
}

int kp_fx_plan_sources_from(struct kp_plan *plan, size_t first, const struct kp_fx_catalog *cat,
			    const char *dir, struct kp_fx_plan_stats *st, struct kp_err *err)
{
	return kp_fx_plan_sources_range(plan, first, plan->n_fusions, cat, dir, st, err);
}

int kp_fx_plan_sources_range(struct kp_plan *plan, size_t first, size_t end,
			     const struct kp_fx_catalog *cat, const char *dir,
			     struct kp_fx_plan_stats *st, struct kp_err *err)
{
	return kp_fx_plan_sources_keep(plan, first, end, KP_FX_KEEP_TOLERANT, cat, dir, st, err);
}

int kp_fx_plan_sources_keep(struct kp_plan *plan, size_t first, size_t end, int keep,
			    const struct kp_fx_catalog *cat, const char *dir,
			    struct kp_fx_plan_stats *st, struct kp_err *err)
{
	struct kp_fx_plan_stats local;
	size_t i;

	if (!st) {
		st = &local;
		memset(st, 0, sizeof(*st));
	}
	if (keep == KP_FX_KEEP_NONE)
		return 0;
	for (i = first; i < end && i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];
		const struct kp_fx_kernel *chain[KP_FX_MAX_CHAIN];
		struct kp_fx_group g;
		struct kp_err gerr = {0};
		const char *s = u->names, *e;
		size_t n = 0;
		int64_t gain;
		int rc;

		if (u->source)
			continue;
		st->groups++;
		while (s && *s && n <= KP_FX_MAX_CHAIN) {
			char name[1100];
			size_t len;

			e = strstr(s, " -> ");
			len = e ? (size_t)(e - s) : strlen(s);
			snprintf(name, sizeof(name), "%.*s", (int)(len < 1024 ? len : 1024), s);
			if (n == KP_FX_MAX_CHAIN) {
				n++;
				break;
			}
			if (!(chain[n++] = kp_fx_catalog_find(cat, name))) {
				kp_info("fusion %u: kernel '%s' is not in the catalog; not generated",
					u->id, name);
				n = 0;
				break;
			}
			s = e ? e + 4 : NULL;
		}
		if (!n) {
			st->not_in_catalog++;
			continue;
		}
		if (n != u->kernels) {
			kp_info("fusion %u: %zu names for %u kernels; not generated", u->id, n, u->kernels);
			st->infeasible++;
			continue;
		}
		rc = gen_group(u, chain, n, &g, &gerr);
		if (rc == KP_ENOMEM)
			return kp_err_set(err, rc, "%s", gerr.msg);
		if (rc) {
			kp_info("fusion %u: %s; not generated", u->id, gerr.msg);
			st->infeasible++;
			continue;
		}
		gain = kp_fx_predicted_gain(&g, u->gain_ns > 0 ? u->gain_ns : -1);
		if (gain <= 0) {
			kp_info("fusion %u: predicted gain %lld ns after the penalty; not fused",
				u->id, (long long)gain);
			st->unprofitable++;
			kp_fx_group_release(&g);
			continue;
		}
		/* numerics: what the generated kernel computes */
		u->exact = g.exact;
		u->tolerance = g.tolerance;
		free(u->inexact_why);
		u->inexact_why = NULL;
		if (!g.exact && !(u->inexact_why = kp_strdup(g.why))) {
			kp_fx_group_release(&g);
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		}
		if (!g.exact && keep == KP_FX_KEEP_EXACT) {
			kp_info("fusion %u: not bit-exact (%s); not fused (--fusion tolerant fuses it)",
				u->id, g.why);
			st->inexact++;
			kp_fx_group_release(&g);
			continue;
		}
		if (dir && (rc = write_file(dir, &g, err))) {
			kp_fx_group_release(&g);
			return rc;
		}
		u->source = kp_strdup(g.file);
		u->source_hash = g.source_hash;
		u->gain_ns = gain;
		kp_fx_group_release(&g);
		if (!u->source)
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		st->generated++;
	}
	return 0;
}

static int is_dot(const struct kp_fx_catalog *cat, const char *name)
{
	const struct kp_fx_kernel *k = kp_fx_catalog_find(cat, name);

	return k && k->dot_k;
}

/* Kernel x of the list is free and a flat elementwise catalog kernel. */
static int chain_flat(const struct kp_fx_catalog *cat, const char *const *names, size_t n,
		      const char *taken, size_t x)
{
	const struct kp_fx_kernel *k = x < n && !taken[x] ? kp_fx_catalog_find(cat, names[x]) : NULL;

	return k && !k->dot_k && kp__fx_flexible(k);
}

/* Bytes of names[a..j) joined by " -> " (a group's names field). */
static size_t names_len(const char *const *names, size_t a, size_t j)
{
	size_t n = 0, k;

	for (k = a; k < j; k++)
		n += strlen(names[k]) + (k > a ? 4 : 0);
	return n;
}

/* Append a group of kernels names[a..j) of region to plan (their names fit
 * a plan string). 0 or KP_E*. */
static int add_group(struct kp_plan *plan, const char *region, const char *const *names,
		     const char *const *args, size_t a, size_t j, uint32_t id, struct kp_err *err)
{
	struct kp_strbuf nm = KP_STRBUF_INIT, ar = KP_STRBUF_INIT;
	struct kp_plan_fusion *u;
	size_t k;
	void *q;

	if (plan->n_fusions >= KP_PLAN_MAX_FUSIONS)
		return kp_err_set(err, KP_EINVAL, "more than %d fusion groups", KP_PLAN_MAX_FUSIONS);
	q = realloc(plan->fusions, (plan->n_fusions + 1) * sizeof(*plan->fusions));
	if (!q)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	plan->fusions = q;
	u = &plan->fusions[plan->n_fusions];
	memset(u, 0, sizeof(*u));
	for (k = a; k < j; k++) {
		if (k > a)
			kp_strbuf_adds(&nm, " -> ");
		kp_strbuf_adds(&nm, names[k]);
		if (args)
			kp_strbuf_addf(&ar, "%s%s", k > a ? " " : "", args[k] && *args[k] ? args[k] : "-");
	}
	u->id = id;
	u->exact = 1;   /* until a generated kernel says otherwise */
	u->region = kp_strdup(region);
	u->first_kernel = (uint32_t)a;
	u->kernels = (uint32_t)(j - a);
	u->names = kp_strbuf_detach(&nm, NULL);
	u->args = args ? kp_strbuf_detach(&ar, NULL) : NULL;
	kp_strbuf_release(&ar);
	u->gain_ns = (int64_t)((double)(j - a - 1) * kp_cost_default(KP_COST_GRAPH_NODE));
	u->score = (double)u->gain_ns;
	if (!u->region || !u->names || (args && !u->args)) {
		free(u->region);
		free(u->names);
		free(u->args);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	plan->n_fusions++;
	return 0;
}

/* Free what group u owns (it is being removed from its plan). */
static void fusion_release(struct kp_plan_fusion *u)
{
	free(u->region);
	free(u->names);
	free(u->source);
	free(u->args);
	free(u->inexact_why);
	memset(u, 0, sizeof(*u));
}

size_t kp_fx_plan_drop_covered(struct kp_plan *plan, size_t first)
{
	size_t i, j, out = 0, dropped = 0;

	for (i = 0; i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];
		int covered = 0;

		for (j = first; i < first && !u->source && j < plan->n_fusions && !covered; j++) {
			const struct kp_plan_fusion *t = &plan->fusions[j];

			covered = t->source && u->region && t->region && !strcmp(u->region, t->region) &&
				u->first_kernel < t->first_kernel + t->kernels &&
				t->first_kernel < u->first_kernel + u->kernels;
		}
		if (covered) {
			kp_info("fusion %u: kernels %u..%u are in a generated group already; dropped",
				u->id, u->first_kernel, u->first_kernel + u->kernels - 1);
			fusion_release(u);
			dropped++;
			continue;
		}
		plan->fusions[out++] = *u;
	}
	plan->n_fusions = out;
	return dropped;
}

size_t kp_fx_plan_filter(struct kp_plan *plan, int keep, FILE *note)
{
	size_t i, out = 0, dropped = 0;

	if (keep == KP_FX_KEEP_TOLERANT)
		return 0;
	if (keep == KP_FX_KEEP_NONE && plan->n_fusions && note)
		fprintf(note, "fusion: %zu group%s dropped: --fusion off\n", plan->n_fusions,
			plan->n_fusions == 1 ? "" : "s");
	for (i = 0; i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];
		const char *nm = u->names ? u->names : "";

		if (!u->exact && u->tolerance == 0)
			u->exact = 1;   /* not set (a zeroed group): exact, as kp_plan_write says */
		if (keep != KP_FX_KEEP_NONE && u->exact) {
			plan->fusions[out++] = *u;
			continue;
		}
		if (keep != KP_FX_KEEP_NONE && note) {
			char tol[32], shown[201], why[512];

			snprintf(tol, sizeof(tol), "tolerance %g", u->tolerance);
			fprintf(note, "fusion group %u (%s%s) dropped: not bit-exact (%s); use "
				"--fusion tolerant\n", u->id, kp_printable(shown, sizeof(shown), nm),
				strlen(nm) > 200 ? "..." : "",
				kp_printable(why, sizeof(why), u->inexact_why ? u->inexact_why : tol));
		}
		fusion_release(u);
		dropped++;
	}
	plan->n_fusions = out;
	return dropped;
}

int kp_fx_plan_add_chains(struct kp_plan *plan, const char *region, const char *const *names,
			  size_t n, const struct kp_fx_catalog *cat, struct kp_err *err)
{
	return kp_fx_plan_add_chains_args(plan, region, names, NULL, n, cat, err);
}

int kp_fx_plan_add_chains_args(struct kp_plan *plan, const char *region, const char *const *names,
			       const char *const *args, size_t n, const struct kp_fx_catalog *cat,
			       struct kp_err *err)
{
	const struct kp_plan_region *r = kp_plan_find(plan, region);
	uint32_t next_id = 1;
	size_t i, k, added = 0;
	int pass, rc = 0;
	char *taken;

	if (!r)
		return kp_err_set(err, KP_ENOTFOUND, "region '%s' is not in the plan", region);
	if (n > r->kernels)
		return kp_err_set(err, KP_EMISMATCH, "region '%s': %zu kernels listed, the plan has %u",
				  region, n, r->kernels);
	if (plan->n_fusions)
		next_id = plan->fusions[plan->n_fusions - 1].id + 1;
	/* kernels of the region's generated groups are taken */
	if (!(taken = calloc(n ? n : 1, 1)))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	for (k = 0; k < plan->n_fusions; k++) {
		const struct kp_plan_fusion *f = &plan->fusions[k];

		if (f->source && f->region && !strcmp(f->region, region))
			for (size_t x = f->first_kernel; x < (size_t)f->first_kernel + f->kernels && x < n; x++)
				taken[x] = 1;
	}
	/*
	 * First the dot kernels (GEMVs): each takes the flat elementwise kernel
	 * just before it (its output's initialisation, a bias broadcast) and
	 * the flat ones after it (its epilogue), except one that directly
	 * precedes the next dot kernel (that one's prologue). Then every other
	 * maximal run of catalog kernels, dot kernels excluded.
	 */
	for (pass = 0; pass < 2 && !rc; pass++) {
		for (i = 0; i < n; i++) {
			const struct kp_fx_kernel *ki = kp_fx_catalog_find(cat, names[i]);
			size_t a = i, j = i;

			if (taken[i] || !ki || (pass == 0) != (ki->dot_k != 0))
				continue;
			if (pass == 0) {
				if (i > 0 && chain_flat(cat, names, n, taken, i - 1))
					a = i - 1;
				for (j = i + 1; j < n && j - a < KP_FX_MAX_CHAIN &&
				     chain_flat(cat, names, n, taken, j) &&
				     !(j + 1 < n && !taken[j + 1] && is_dot(cat, names[j + 1])); j++)
					;
			} else {
				while (j < n && j - a < KP_FX_MAX_CHAIN && !taken[j] &&
				       (ki = kp_fx_catalog_find(cat, names[j])) && !ki->dot_k)
					j++;
			}
			/* the names must fit one plan string: a shorter chain */
			while (j - a >= 2 && names_len(names, a, j) > KP_PLAN_MAX_STR)
				j--;
			if (j - a < 2 || (pass == 0 && j <= i))
				continue;
			if ((rc = add_group(plan, region, names, args, a, j, next_id++, err)))
				break;
			memset(taken + a, 1, j - a);
			added++;
			i = j - 1;
		}
	}
	free(taken);
	return rc ? rc : (int)added;
}

struct tregion {
	char *label;
	KP_VEC(char *) names;
	KP_VEC(char *) args;     /* the optional 4th column (NULL when absent) */
};

static void tregion_clear(struct tregion *tr)
{
	size_t j;

	for (j = 0; j < tr->names.len; j++)
		free(tr->names.data[j]);
	for (j = 0; j < tr->args.len; j++)
		free(tr->args.data[j]);
	tr->names.len = tr->args.len = 0;
}

int kp_fx_plan_add_trace(struct kp_plan *plan, const char *buf, size_t len, const char *name,
			 const struct kp_fx_catalog *cat, struct kp_err *err)
{
	KP_VEC(struct tregion) regs = KP_VEC_INIT;
	size_t pos = 0, i;
	int line = 0, rc = 0, added = 0;

	while (pos < len && !rc) {
		const char *s = buf + pos, *nl = memchr(s, '\n', len - pos), *t1, *t2, *t3;
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		struct tregion *tr = NULL;
		char *end, idxs[24], *nm, *ar = NULL;
		long long idx;

		line++;
		pos += n + (nl != NULL);
		if (!n)
			continue;
		t1 = memchr(s, '\t', n);
		t2 = t1 ? memchr(t1 + 1, '\t', n - (size_t)(t1 + 1 - s)) : NULL;
		if (!t1 || !t2 || t1 == s || t2 == t1 + 1 || t2 + 1 == s + n ||
		    (size_t)(t2 - t1 - 1) >= sizeof(idxs) || n > 16384) {
			rc = kp_err_set(err, KP_EFORMAT, "%s:%d: expected REGION<tab>INDEX<tab>NAME", name, line);
			break;
		}
		memcpy(idxs, t1 + 1, (size_t)(t2 - t1 - 1));
		idxs[t2 - t1 - 1] = 0;
		idx = strtoll(idxs, &end, 10);
		for (i = 0; i < regs.len; i++)
			if (strlen(regs.data[i].label) == (size_t)(t1 - s) &&
			    !memcmp(regs.data[i].label, s, (size_t)(t1 - s)))
				tr = &regs.data[i];
		if (*end || idx < 0 || idx > KP_PLAN_MAX_KERNELS ||
		    (size_t)idx > (tr ? tr->names.len : 0)) {
			rc = kp_err_set(err, KP_EFORMAT, "%s:%d: index '%s': expected the next kernel index",
					name, line, idxs);
			break;
		}
		if (!tr) {
			struct tregion z;

			memset(&z, 0, sizeof(z));
			if (!(z.label = strndup(s, (size_t)(t1 - s))) || kp_vec_push(&regs, z)) {
				free(z.label);
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
			tr = &regs.data[regs.len - 1];
		}
		if (idx == 0) {   /* listed again: the last listing wins */
			tregion_clear(tr);
		} else if ((size_t)idx != tr->names.len) {
			rc = kp_err_set(err, KP_EFORMAT, "%s:%d: index %lld after %zu kernels", name, line,
					idx, tr->names.len);
			break;
		}
		/* NAME, then optionally TAB and the kernel's parameter bytes */
		t3 = memchr(t2 + 1, '\t', (size_t)(s + n - t2 - 1));
		nm = strndup(t2 + 1, (size_t)((t3 ? t3 : s + n) - t2 - 1));
		if (t3 && !(ar = strndup(t3 + 1, (size_t)(s + n - t3 - 1)))) {
			free(nm);
			nm = NULL;
		}
		if (!nm || kp_vec_push(&tr->names, nm)) {
			free(nm);
			free(ar);
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		} else if (kp_vec_push(&tr->args, ar)) {
			free(ar);
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		}
	}
	for (i = 0; i < regs.len; i++) {
		const struct kp_plan_region *r = kp_plan_find(plan, regs.data[i].label);

		if (!rc && r && r->decision == KP_PLAN_GRAPH) {
			int x = kp_fx_plan_add_chains_args(plan, regs.data[i].label,
							   (const char *const *)regs.data[i].names.data,
							   (const char *const *)regs.data[i].args.data,
							   regs.data[i].names.len, cat, err);
			if (x < 0)
				rc = x;
			else
				added += x;
		} else if (!rc) {
			kp_info("%s: region '%s' is not a graph region of the plan; skipped", name,
				regs.data[i].label);
		}
		tregion_clear(&regs.data[i]);
		kp_vec_release(&regs.data[i].names);
		kp_vec_release(&regs.data[i].args);
		free(regs.data[i].label);
	}
	kp_vec_release(&regs);
	return rc ? rc : added;
}
