/*
 * catalog_read.c - the fusion catalog reader (format: fusion/FUSION.md).
 *
 * Line based; each line is checked as it is read and every error names the
 * line and the field. Expressions are parsed by recursive descent
 * (catalog_expr.c) into a bounded node array per kernel; the generator
 * re-emits them from the tree, so nothing from the input reaches generated
 * code unchecked (identifiers are declared names, numbers are re-validated
 * literals).
 */
#include "catalog.h"
#include "catalog_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fileio.h"

int kp_fx_type_size(int t)
{
	switch (t) {
	case KP_FX_PTR_F32: case KP_FX_PTR_F16: case KP_FX_PTR_I32: case KP_FX_I64: return 8;
	case KP_FX_I32: case KP_FX_F32: return 4;
	default: return 0;
	}
}

const char *kp_fx_type_c(int t)
{
	switch (t) {
	case KP_FX_PTR_F32: return "float *";
	case KP_FX_PTR_F16: return "unsigned short *";
	case KP_FX_PTR_I32: return "int *";
	case KP_FX_I32: return "int ";
	case KP_FX_I64: return "long long ";
	case KP_FX_F32: return "float ";
	default: return "? ";
	}
}

int kp_fx_glob(const char *pattern, const char *name)
{
	return fnmatch(pattern, name, 0) == 0;
}

static int is_ident(const char *s, size_t n)
{
	size_t i;

	if (!n || n > KP_FX_MAX_NAME || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

static int reserved(const char *s, size_t n)
{
	static const char *const words[] = { "i", "row", "col", "rows", "cols", "grid",
					     "block", NULL };
	int w;

	for (w = 0; words[w]; w++)
		if (strlen(words[w]) == n && !memcmp(words[w], s, n))
			return 1;
	/* prefixes the generator uses */
	return (n >= 3 && !memcmp(s, "kp_", 3)) || (n >= 2 && s[0] == 'k' && isdigit((unsigned char)s[1]));
}

/* ---------------------------------------------------------------------- */
/* lines */

static int parse_shape(struct kp__fx_ps *p, const char *s, const char *end, struct kp_fx_shape *sh)
{
	int t = 0;
	char buf[48];

	memset(sh, 0, sizeof(*sh));
	p->s = s;
	p->end = end;
	for (;;) {
		const char *id;
		size_t n;

		kp__fx_skip_ws(p);
		id = p->s;
		while (p->s < p->end && (isalnum((unsigned char)*p->s) || *p->s == '_' || *p->s == '.'))
			p->s++;
		n = (size_t)(p->s - id);
		if (!n)
			return kp__fx_perr(p, "expected a parameter, an integer, grid.x, grid.y or block.x");
		if (n == 6 && !memcmp(id, "grid.x", 6)) {
			sh->kind[t] = KP_FX_T_GRIDX;
		} else if (n == 6 && !memcmp(id, "grid.y", 6)) {
			sh->kind[t] = KP_FX_T_GRIDY;
		} else if (n == 7 && !memcmp(id, "block.x", 7)) {
			sh->kind[t] = KP_FX_T_BLOCKX;
		} else if (isdigit((unsigned char)id[0])) {
			char num[24], *e;

			if (n >= sizeof(num))
				return kp__fx_perr(p, "constant '%s' too long", kp__fx_shown(id, n, buf, sizeof(buf)));
			memcpy(num, id, n);
			num[n] = 0;
			errno = 0;
			sh->v[t] = strtoll(num, &e, 10);
			if (errno || *e || sh->v[t] < 1 || sh->v[t] > (INT64_C(1) << 40))
				return kp__fx_perr(p, "expected an integer 1..2^40, found '%s'", num);
			sh->kind[t] = KP_FX_T_CONST;
		} else {
			int pi = kp__fx_find_param(p->k, id, n);

			if (pi < 0)
				return kp__fx_perr(p, "unknown parameter '%s'", kp__fx_shown(id, n, buf, sizeof(buf)));
			if (p->k->params[pi].type != KP_FX_I32 && p->k->params[pi].type != KP_FX_I64)
				return kp__fx_perr(p, "parameter '%s' is not an integer (i32 or i64)",
					    p->k->params[pi].name);
			sh->kind[t] = KP_FX_T_PARAM;
			sh->v[t] = pi;
		}
		kp__fx_skip_ws(p);
		if (p->s == p->end)
			return 0;
		if (t == 1)
			return kp__fx_perr(p, "at most two terms (A, A / B or A * B)");
		if (*p->s != '/' && *p->s != '*')
			return kp__fx_perr(p, "expected '/' or '*', found '%s'",
				    kp__fx_shown(p->s, (size_t)(p->end - p->s), buf, sizeof(buf)));
		sh->op = *p->s++;
		t = 1;
	}
}

static int parse_type(const char *s, size_t n)
{
	if (n == 4 && !memcmp(s, "f32*", 4))
		return KP_FX_PTR_F32;
	if (n == 4 && !memcmp(s, "f16*", 4))
		return KP_FX_PTR_F16;
	if (n == 4 && !memcmp(s, "i32*", 4))
		return KP_FX_PTR_I32;
	if (n == 3 && !memcmp(s, "i32", 3))
		return KP_FX_I32;
	if (n == 3 && !memcmp(s, "i64", 3))
		return KP_FX_I64;
	if (n == 3 && !memcmp(s, "f32", 3))
		return KP_FX_F32;
	return 0;
}

/* Split off the next whitespace-separated word of s..end. */
static int word(const char **s, const char *end, const char **w, size_t *n)
{
	while (*s < end && (**s == ' ' || **s == '\t'))
		(*s)++;
	*w = *s;
	while (*s < end && **s != ' ' && **s != '\t')
		(*s)++;
	*n = (size_t)(*s - *w);
	return *n > 0;
}

static void kernel_release(struct kp_fx_kernel *k)
{
	size_t i;

	for (i = 0; i < k->n_match; i++)
		free(k->match[i]);
	free(k->nodes);
	memset(k, 0, sizeof(*k));
}

void kp_fx_catalog_free(struct kp_fx_catalog *cat)
{
	size_t i;

	if (!cat)
		return;
	for (i = 0; i < cat->n_kernels; i++)
		kernel_release(&cat->kernels[i]);
	free(cat->kernels);
	free(cat);
}

int kp_fx_expr_any(const struct kp_fx_kernel *k, int x,
		   int (*visit)(const struct kp_fx_node *nd, void *ctx), void *ctx)
{
	const struct kp_fx_node *nd;
	int r;

	if (x < 0)
		return 0;
	nd = &k->nodes[x];
	if (visit(nd, ctx))
		return 1;
	switch (nd->kind) {
	case KP_FX_N_CALL:
		r = kp_fx_expr_any(k, nd->b, visit, ctx);
		r |= kp_fx_expr_any(k, nd->c, visit, ctx);
		return r | kp_fx_expr_any(k, nd->d, visit, ctx);
	case KP_FX_N_UNARY:
		return kp_fx_expr_any(k, nd->a, visit, ctx);
	case KP_FX_N_BINARY:
		r = kp_fx_expr_any(k, nd->a, visit, ctx);
		return r | kp_fx_expr_any(k, nd->b, visit, ctx);
	case KP_FX_N_COND:
		r = kp_fx_expr_any(k, nd->a, visit, ctx);
		r |= kp_fx_expr_any(k, nd->b, visit, ctx);
		return r | kp_fx_expr_any(k, nd->c, visit, ctx);
	default:
		return 0;
	}
}

/* A node that depends on the element (loads at [i] or [col], i, col). */
static int element_node(const struct kp_fx_node *nd, void *ctx)
{
	(void)ctx;
	if (nd->kind == KP_FX_N_LOAD)
		return nd->b == KP_FX_I || nd->b == KP_FX_COL;
	return nd->kind == KP_FX_N_INDEX && (nd->a == KP_FX_I || nd->a == KP_FX_COL);
}

int kp_fx_split_node(const struct kp_fx_node *nd, void *ctx)
{
	(void)ctx;
	if (nd->kind == KP_FX_N_LOAD)
		return nd->b != KP_FX_I && nd->b != KP_FX_ZERO;
	return nd->kind == KP_FX_N_INDEX && nd->a != KP_FX_I;
}

/* End of a kernel block: the rules across lines. */
static int kernel_check(struct kp__fx_ps *p)
{
	struct kp_fx_kernel *k = p->k;
	size_t i, outs = 0;

	p->field = "end";
	if (!k->n_match)
		return kp__fx_perr(p, "no 'match' line");
	for (i = 0; i < k->n_params; i++)
		if (!k->params[i].type)
			return kp__fx_perr(p, "parameter position %zu not declared (positions 0..%zu)",
				    i, k->n_params - 1);
	if (!k->rows.kind[0] || !k->cols.kind[0])
		return kp__fx_perr(p, "'rows' and 'cols' are required");
	for (i = 0; i < k->n_stmts; i++)
		outs += k->stmts[i].kind == KP_FX_S_OUT;
	if (!outs)
		return kp__fx_perr(p, "no 'out' statement");
	if (k->dot_k) {
		/* one output element per warp: the statements are elementwise */
		p->field = "dot";
		if (k->has_reduce || k->stride)
			return kp__fx_perr(p, "a dot kernel has no 'reduce' or 'stride'");
		if (k->layout_vec != (k->params[k->dot_w].type == KP_FX_PTR_F16 ? 8 : 4))
			return kp__fx_perr(p, "a dot kernel needs 'layout BLOCK %d' (BLOCK / 32 output elements "
				    "per block, 16 bytes per lane and step)",
				    k->params[k->dot_w].type == KP_FX_PTR_F16 ? 8 : 4);
		for (i = 1; i < k->n_stmts; i++)
			if (kp_fx_expr_any(k, k->stmts[i].expr, kp_fx_split_node, NULL))
				return kp__fx_perr(p, "a dot kernel's statements use [i] and [0] loads only, "
					    "not [col], [row], row, col, rows or cols");
	}
	return 0;
}

/*
 * The next word of s..end as a decimal number: 0 when there is no word or it
 * does not fit txt (cap bytes with its NUL), 1 when the word (copied to txt)
 * is not a number, 2 when *v holds it.
 */
static int num_word(const char **s, const char *end, char *txt, size_t cap, long long *v)
{
	const char *w;
	char *e;
	size_t wn;

	if (!word(s, end, &w, &wn) || wn >= cap)
		return 0;
	memcpy(txt, w, wn);
	txt[wn] = 0;
	*v = strtoll(txt, &e, 10);
	return *e || !isdigit((unsigned char)txt[0]) ? 1 : 2;
}

/* "kernel NAME": a new kernel, the current one until "end". */
static int kernel_line(struct kp__fx_ps *p, struct kp_fx_catalog *cat, size_t *cap, const char *s,
		       const char *end)
{
	struct kp_fx_kernel *k = p->k;
	const char *kw, *w;
	size_t kn, wn, i;

	p->field = "kernel";
	if (k)
		return kp__fx_perr(p, "'kernel' inside kernel '%s' (missing 'end')", k->name);
	if (!word(&s, end, &w, &wn) || !is_ident(w, wn))
		return kp__fx_perr(p, "expected a name of 1..%d letters, digits and '_'", KP_FX_MAX_NAME);
	if (word(&s, end, &kw, &kn))
		return kp__fx_perr(p, "unexpected text after the name");
	for (i = 0; i < cat->n_kernels; i++)
		if (strlen(cat->kernels[i].name) == wn && !memcmp(cat->kernels[i].name, w, wn))
			return kp__fx_perr(p, "kernel '%.*s' defined twice (first at line %d)", (int)wn,
				    w, cat->kernels[i].line);
	if (cat->n_kernels >= KP_FX_MAX_KERNELS)
		return kp__fx_perr(p, "more than %d kernels", KP_FX_MAX_KERNELS);
	if (cat->n_kernels == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		void *q = realloc(cat->kernels, nc * sizeof(*cat->kernels));

		if (!q)
			return kp_err_set(p->err, KP_ENOMEM, "out of memory");
		cat->kernels = q;
		*cap = nc;
	}
	k = &cat->kernels[cat->n_kernels++];
	memset(k, 0, sizeof(*k));
	memcpy(k->name, w, wn);
	k->line = p->line;
	k->nodes = calloc(KP_FX_MAX_NODES, sizeof(*k->nodes));
	if (!k->nodes)
		return kp_err_set(p->err, KP_ENOMEM, "out of memory");
	p->k = k;
	return 0;
}

/* "match PATTERN": a name or glob the kernel's launches match. */
static int match_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	size_t wn, i;

	p->field = "match";
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	wn = (size_t)(end - s);
	if (!wn || wn > KP_FX_MAX_PATTERN)
		return kp__fx_perr(p, "expected a name or glob pattern of 1..%d characters", KP_FX_MAX_PATTERN);
	if (k->n_match >= KP_FX_MAX_PATTERNS)
		return kp__fx_perr(p, "more than %d match lines", KP_FX_MAX_PATTERNS);
	for (i = 0; i < wn; i++)
		if (!isprint((unsigned char)s[i]) || s[i] == '\\')
			return kp__fx_perr(p, "a tab, non-printable byte or backslash in the pattern");
	if (!(k->match[k->n_match] = malloc(wn + 1)))
		return kp_err_set(p->err, KP_ENOMEM, "out of memory");
	memcpy(k->match[k->n_match], s, wn);
	k->match[k->n_match++][wn] = 0;
	return 0;
}

/* "param POSITION NAME TYPE [const]". */
static int param_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	const char *w;
	size_t wn;
	char buf[48], num[8];
	long long pos;
	int t, r;

	p->field = "param";
	if (!(r = num_word(&s, end, num, sizeof(num), &pos)))
		return kp__fx_perr(p, "expected 'param POSITION NAME TYPE'");
	if (r == 1 || pos < 0 || pos >= KP_FX_MAX_PARAMS)
		return kp__fx_perr(p, "position: expected 0..%d, found '%s'", KP_FX_MAX_PARAMS - 1, num);
	if (pos < (long long)k->n_params && k->params[pos].type)
		return kp__fx_perr(p, "position %lld declared twice", pos);
	if (k->n_stmts || k->rows.kind[0] || k->cols.kind[0])
		return kp__fx_perr(p, "parameters come before rows, cols and statements");
	if (!word(&s, end, &w, &wn) || !is_ident(w, wn) || reserved(w, wn))
		return kp__fx_perr(p, "name: expected an identifier (not i, row, col, rows, cols, grid, block, kp_*, kN*)");
	if (kp__fx_find_param(k, w, wn) >= 0)
		return kp__fx_perr(p, "parameter name '%.*s' used twice", (int)wn, w);
	memcpy(k->params[pos].name, w, wn);
	k->params[pos].name[wn] = 0;
	if (!word(&s, end, &w, &wn) || !(t = parse_type(w, wn)))
		return kp__fx_perr(p, "type: expected f32*, f16*, i32*, f32, i32 or i64, found '%s'",
			    kp__fx_shown(w, wn, buf, sizeof(buf)));
	if (word(&s, end, &w, &wn)) {
		if (wn != 5 || memcmp(w, "const", 5))
			return kp__fx_perr(p, "after the type: expected nothing or 'const', found '%s'",
				    kp__fx_shown(w, wn, buf, sizeof(buf)));
		if (word(&s, end, &w, &wn))
			return kp__fx_perr(p, "unexpected text after 'const'");
		k->params[pos].is_const = 1;
	}
	k->params[pos].type = t;
	if ((size_t)pos + 1 > k->n_params)
		k->n_params = (size_t)pos + 1;
	return 0;
}

/* "out BUF[i] = EXPR": an elementwise store. */
static int out_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	struct kp_fx_stmt *st;
	const char *q;
	int pi, x;

	p->field = "out";
	if (k->n_stmts >= KP_FX_MAX_STMTS)
		return kp__fx_perr(p, "more than %d statements", KP_FX_MAX_STMTS);
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	for (q = s; q < end && (isalnum((unsigned char)*q) || *q == '_'); q++)
		;
	if ((pi = kp__fx_find_param(k, s, (size_t)(q - s))) < 0 ||
	    (k->params[pi].type != KP_FX_PTR_F32 && k->params[pi].type != KP_FX_PTR_F16))
		return kp__fx_perr(p, "expected 'out BUF[i] = EXPR' with BUF an f32* or f16* parameter");
	p->s = q;
	p->end = end;
	if (!kp__fx_accept(p, "[") || !kp__fx_accept(p, "i") || !kp__fx_accept(p, "]") || !kp__fx_accept(p, "="))
		return kp__fx_perr(p, "expected 'out %s[i] = EXPR' (stores are elementwise)",
			    k->params[pi].name);
	if (kp__fx_accept(p, "="))
		return kp__fx_perr(p, "expected an expression after '=', found '='");
	x = kp__fx_parse_full(p, p->s, end);
	if (x < 0)
		return KP_EFORMAT;
	st = &k->stmts[k->n_stmts++];
	memset(st, 0, sizeof(*st));
	st->kind = KP_FX_S_OUT;
	st->param = pi;
	st->expr = x;
	return 0;
}

/* "reduce NAME sum|mean|max|min EXPR": a reduction over the row. */
static int reduce_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	struct kp_fx_stmt *st;
	const char *w, *op;
	size_t wn, on;
	char buf[48];
	int ro, x;

	p->field = "reduce";
	if (k->n_stmts >= KP_FX_MAX_STMTS)
		return kp__fx_perr(p, "more than %d statements", KP_FX_MAX_STMTS);
	if (!word(&s, end, &w, &wn) || !is_ident(w, wn) || reserved(w, wn))
		return kp__fx_perr(p, "expected 'reduce NAME sum|mean|max|min EXPR'");
	if (kp__fx_find_param(k, w, wn) >= 0 || kp__fx_find_red(k, w, wn) >= 0)
		return kp__fx_perr(p, "name '%.*s' already used", (int)wn, w);
	if (!word(&s, end, &op, &on))
		return kp__fx_perr(p, "expected sum, mean, max or min after the name");
	if (on == 3 && !memcmp(op, "sum", 3))
		ro = KP_FX_R_SUM;
	else if (on == 4 && !memcmp(op, "mean", 4))
		ro = KP_FX_R_MEAN;
	else if (on == 3 && !memcmp(op, "max", 3))
		ro = KP_FX_R_MAX;
	else if (on == 3 && !memcmp(op, "min", 3))
		ro = KP_FX_R_MIN;
	else
		return kp__fx_perr(p, "operation: expected sum, mean, max or min, found '%s'",
			    kp__fx_shown(op, on, buf, sizeof(buf)));
	x = kp__fx_parse_full(p, s, end);
	if (x < 0)
		return KP_EFORMAT;
	st = &k->stmts[k->n_stmts++];
	memset(st, 0, sizeof(*st));
	st->kind = KP_FX_S_REDUCE;
	st->red_op = ro;
	memcpy(st->name, w, wn);
	st->expr = x;
	k->has_reduce = 1;
	return 0;
}

/* "dot NAME W X K": a GEMV's dot product, the kernel's first statement. */
static int dot_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	struct kp_fx_stmt *st;
	const char *w;
	size_t wn;
	char buf[48], num[16];
	int pw = 0, px = 0, j, r;
	long long v;

	p->field = "dot";
	if (k->n_stmts || k->dot_k)
		return kp__fx_perr(p, "'dot' is the kernel's first statement, and its only dot");
	if (!word(&s, end, &w, &wn) || !is_ident(w, wn) || reserved(w, wn))
		return kp__fx_perr(p, "expected 'dot NAME W X K'");
	if (kp__fx_find_param(k, w, wn) >= 0)
		return kp__fx_perr(p, "name '%.*s' already used", (int)wn, w);
	st = &k->stmts[0];
	memset(st, 0, sizeof(*st));
	memcpy(st->name, w, wn);
	for (j = 0; j < 2; j++) {
		const char *q;
		size_t qn;
		int pi, t;

		if (!word(&s, end, &q, &qn) || (pi = kp__fx_find_param(k, q, qn)) < 0)
			return kp__fx_perr(p, "%s: expected a tensor parameter, found '%s'", j ? "X" : "W",
				    kp__fx_shown(q, qn, buf, sizeof(buf)));
		t = k->params[pi].type;
		if (t != KP_FX_PTR_F32 && t != KP_FX_PTR_F16)
			return kp__fx_perr(p, "%s: '%s' is not an f32* or f16* parameter", j ? "X" : "W",
				    k->params[pi].name);
		*(j ? &px : &pw) = pi;
	}
	if (k->params[pw].type != k->params[px].type)
		return kp__fx_perr(p, "W and X must have the same element type");
	if (!(r = num_word(&s, end, num, sizeof(num), &v)))
		return kp__fx_perr(p, "expected 'dot NAME W X K' (K a constant)");
	/* each lane loads 16 bytes per step: K a whole number of warp steps */
	j = 32 * (k->params[pw].type == KP_FX_PTR_F16 ? 8 : 4);
	if (r == 1 || v < j || v > (1 << 20) || v % j)
		return kp__fx_perr(p, "K: expected a multiple of %d (32 lanes x 16 bytes) up to 2^20, found '%s'",
			    j, num);
	if (word(&s, end, &w, &wn))
		return kp__fx_perr(p, "unexpected text after 'dot NAME W X K'");
	st->kind = KP_FX_S_DOT;
	st->param = pw;
	st->expr = -1;
	k->dot_w = pw;
	k->dot_x = px;
	k->dot_k = v;
	k->n_stmts = 1;
	return 0;
}

/* "stride N": rows of [i] tensors N elements apart. */
static int stride_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	const char *w;
	size_t wn;
	char num[16];
	long long v;
	int r;

	p->field = "stride";
	if (k->stride)
		return kp__fx_perr(p, "given twice");
	if (!(r = num_word(&s, end, num, sizeof(num), &v)))
		return kp__fx_perr(p, "expected 'stride N' (a constant)");
	if (r == 1 || v < 1 || v > (1ll << 40))
		return kp__fx_perr(p, "expected a constant 1..2^40, found '%s'", num);
	if (word(&s, end, &w, &wn))
		return kp__fx_perr(p, "unexpected text after 'stride N'");
	k->stride = v;
	return 0;
}

/* "layout BLOCK VEC": the block and columns per thread a reduction sums in. */
static int layout_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	const char *w;
	size_t wn;
	long long v[2];
	int j, r;

	p->field = "layout";
	if (k->layout_block)
		return kp__fx_perr(p, "given twice");
	for (j = 0; j < 2; j++) {
		char num[8];

		if (!(r = num_word(&s, end, num, sizeof(num), &v[j])))
			return kp__fx_perr(p, "expected 'layout BLOCK VEC'");
		if (r == 1)
			return kp__fx_perr(p, "expected 'layout BLOCK VEC', found '%s'", num);
	}
	if (word(&s, end, &w, &wn))
		return kp__fx_perr(p, "unexpected text after 'layout BLOCK VEC'");
	if (v[0] < 32 || v[0] > 1024 || v[0] % 32)
		return kp__fx_perr(p, "BLOCK: expected a multiple of 32 in 32..1024, found %lld", v[0]);
	if (v[1] < 1 || v[1] > KP_FX_MAX_LAYOUT_VEC)
		return kp__fx_perr(p, "VEC: expected 1..%d, found %lld", KP_FX_MAX_LAYOUT_VEC, v[1]);
	k->layout_block = (int)v[0];
	k->layout_vec = (int)v[1];
	return 0;
}

/* "let NAME EXPR": one value per row. */
static int let_line(struct kp__fx_ps *p, struct kp_fx_kernel *k, const char *s, const char *end)
{
	struct kp_fx_stmt *st;
	const char *w;
	size_t wn;
	int x;

	p->field = "let";
	if (k->n_stmts >= KP_FX_MAX_STMTS)
		return kp__fx_perr(p, "more than %d statements", KP_FX_MAX_STMTS);
	if (!word(&s, end, &w, &wn) || !is_ident(w, wn) || reserved(w, wn))
		return kp__fx_perr(p, "expected 'let NAME EXPR'");
	if (kp__fx_find_param(k, w, wn) >= 0 || kp__fx_find_red(k, w, wn) >= 0)
		return kp__fx_perr(p, "name '%.*s' already used", (int)wn, w);
	x = kp__fx_parse_full(p, s, end);
	if (x < 0)
		return KP_EFORMAT;
	if (kp_fx_expr_any(k, x, element_node, NULL))
		return kp__fx_perr(p, "a let is one value per row: no BUF[i] or BUF[col] loads, no i or col");
	st = &k->stmts[k->n_stmts++];
	memset(st, 0, sizeof(*st));
	st->kind = KP_FX_S_LET;
	memcpy(st->name, w, wn);
	st->expr = x;
	return 0;
}

static int parse_line(struct kp__fx_ps *p, struct kp_fx_catalog *cat, size_t *cap,
		      const char *s, const char *end)
{
	const char *kw, *w;
	size_t kn, wn;
	char buf[48];
	struct kp_fx_kernel *k = p->k;

	if (!word(&s, end, &kw, &kn) || kw[0] == '#')
		return 0;
#define KW(x) (kn == sizeof(x) - 1 && !memcmp(kw, x, kn))
	p->field = "keyword";
	if (KW("kernel"))
		return kernel_line(p, cat, cap, s, end);
	if (!k)
		return kp__fx_perr(p, "expected 'kernel NAME', found '%s'", kp__fx_shown(kw, kn, buf, sizeof(buf)));
	if (KW("end")) {
		if (word(&s, end, &w, &wn))
			return kp__fx_perr(p, "unexpected text after 'end'");
		if (kernel_check(p))
			return KP_EFORMAT;
		p->k = NULL;
		return 0;
	}
	if (KW("match"))
		return match_line(p, k, s, end);
	if (KW("param"))
		return param_line(p, k, s, end);
	if (KW("rows") || KW("cols")) {
		struct kp_fx_shape *sh = KW("rows") ? &k->rows : &k->cols;

		p->field = KW("rows") ? "rows" : "cols";
		if (sh->kind[0])
			return kp__fx_perr(p, "given twice");
		return parse_shape(p, s, end, sh);
	}
	if (KW("out"))
		return out_line(p, k, s, end);
	if (KW("reduce"))
		return reduce_line(p, k, s, end);
	if (KW("dot"))
		return dot_line(p, k, s, end);
	if (KW("stride"))
		return stride_line(p, k, s, end);
	if (KW("layout"))
		return layout_line(p, k, s, end);
	if (KW("let"))
		return let_line(p, k, s, end);
	return kp__fx_perr(p, "unknown keyword '%s' (kernel, match, param, rows, cols, stride, layout, out, reduce, let, dot, end)",
		    kp__fx_shown(kw, kn, buf, sizeof(buf)));
#undef KW
}

struct kp_fx_catalog *kp_fx_catalog_parse(const char *buf, size_t len, const char *name,
					  struct kp_err *err)
{
	struct kp_fx_catalog *cat;
	struct kp__fx_ps p;
	size_t pos = 0, cap = 0;
	int rc = 0;

	memset(&p, 0, sizeof(p));
	p.file = name ? name : "catalog";
	p.err = err;
	p.field = "file";
	if (len > KP_FX_MAX_FILE_BYTES) {
		kp_err_set(err, KP_EFORMAT, "%s: %zu bytes, more than the %u allowed", p.file, len,
			   KP_FX_MAX_FILE_BYTES);
		return NULL;
	}
	if (!(cat = calloc(1, sizeof(*cat)))) {
		kp_err_set(err, KP_ENOMEM, "out of memory");
		return NULL;
	}
	while (pos < len && !rc) {
		const char *s = buf + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		size_t i;

		p.line++;
		pos += n + (nl != NULL);
		if (n && s[n - 1] == '\r')
			n--;
		p.field = "line";
		if (n > KP_FX_MAX_LINE) {
			rc = kp__fx_perr(&p, "line longer than %d bytes", KP_FX_MAX_LINE);
			break;
		}
		for (i = 0; i < n; i++) {
			if (s[i] == '\t' || isprint((unsigned char)s[i]))
				continue;
			rc = kp__fx_perr(&p, "control or non-ASCII byte 0x%02x at column %zu",
				  (unsigned char)s[i], i + 1);
			break;
		}
		if (!rc)
			rc = parse_line(&p, cat, &cap, s, s + n);
	}
	if (!rc && p.k) {
		p.field = "end";
		rc = kp__fx_perr(&p, "file ends inside the kernel (missing 'end')");
	}
	if (rc) {
		kp_fx_catalog_free(cat);
		return NULL;
	}
	return cat;
}

struct kp_fx_catalog *kp_fx_catalog_load(const char *path, struct kp_err *err)
{
	struct kp_fx_catalog *cat;
	char *buf;
	size_t n;

	/* a FIFO or a device is refused, never waited on (common/fileio.h) */
	if (kp_file_read(AT_FDCWD, path, 0, KP_FX_MAX_FILE_BYTES, &buf, &n, err))
		return NULL;
	cat = kp_fx_catalog_parse(buf, n, path, err);
	free(buf);
	return cat;
}

int kp_fx_catalog_merge(struct kp_fx_catalog *dst, struct kp_fx_catalog *src,
			struct kp_err *err)
{
	void *q;

	if (!src->n_kernels)
		return 0;
	q = realloc(dst->kernels, (dst->n_kernels + src->n_kernels) * sizeof(*dst->kernels));
	if (!q)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	dst->kernels = q;
	memcpy(dst->kernels + dst->n_kernels, src->kernels, src->n_kernels * sizeof(*src->kernels));
	dst->n_kernels += src->n_kernels;
	free(src->kernels);
	src->kernels = NULL;
	src->n_kernels = 0;
	return 0;
}

const struct kp_fx_kernel *kp_fx_catalog_find(const struct kp_fx_catalog *cat,
					      const char *name)
{
	size_t i, j;

	if (!cat || !name)
		return NULL;
	for (i = 0; i < cat->n_kernels; i++)
		for (j = 0; j < cat->kernels[i].n_match; j++)
			if (kp_fx_glob(cat->kernels[i].match[j], name))
				return &cat->kernels[i];
	return NULL;
}
