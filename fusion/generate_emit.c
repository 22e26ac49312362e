/*
 * generate_emit.c - the fused kernel's body, statement by statement: loads
 * (from memory, or a register another kernel of the chain stored), the
 * catalog's expressions re-emitted from their tree, stores, reductions, and
 * the rows scheme's phases. Tracks which values are known in registers and
 * which pointers the captured arguments prove equal (generate_internal.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "generate_internal.h"

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
