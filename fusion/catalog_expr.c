/*
 * catalog_expr.c - the fusion catalog's expressions: their vocabulary
 * (functions with their arity, operators) and a recursive-descent parser
 * into a bounded node array per kernel, with the messages that name the
 * line and the field (format: fusion/FUSION.md).
 */
#include "catalog.h"
#include "catalog_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int arity;
} funcs[] = {
	{ "expf", 1 }, { "logf", 1 }, { "tanhf", 1 }, { "sqrtf", 1 }, { "rsqrtf", 1 },
	{ "fabsf", 1 }, { "erff", 1 }, { "exp2f", 1 }, { "fmaxf", 2 }, { "fminf", 2 },
	{ "powf", 2 }, { "gelu_tanh", 1 }, { "gelu_erf", 1 }, { "sigmoid", 1 }, { "relu", 1 },
};
#define N_FUNCS (int)(sizeof(funcs) / sizeof(funcs[0]))

const char *kp_fx_func_name(int f)
{
	return f >= 0 && f < N_FUNCS ? funcs[f].name : "?";
}

int kp_fx_func_arity(int f)
{
	return f >= 0 && f < N_FUNCS ? funcs[f].arity : 0;
}

const char *kp_fx_op_name(int op)
{
	switch (op) {
	case '+': return "+";
	case '-': return "-";
	case '*': return "*";
	case '/': return "/";
	case '%': return "%";
	case '<': return "<";
	case '>': return ">";
	case 'L': return "<=";
	case 'G': return ">=";
	case 'E': return "==";
	case 'N': return "!=";
	case 'A': return "&&";
	case 'O': return "||";
	case '!': return "!";
	default: return "?";
	}
}

int kp__fx_perr(struct kp__fx_ps *p, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->k)
		return kp_err_set(p->err, KP_EFORMAT, "%s:%d: kernel '%s': field '%s': %s",
				  p->file, p->line, p->k->name, p->field, msg);
	return kp_err_set(p->err, KP_EFORMAT, "%s:%d: field '%s': %s", p->file, p->line,
			  p->field, msg);
}

/* Printable excerpt of untrusted text for messages. */
const char *kp__fx_shown(const char *s, size_t n, char *buf, size_t cap)
{
	size_t i, j = 0;

	for (i = 0; i < n && j + 1 < cap && i < 40; i++)
		buf[j++] = isprint((unsigned char)s[i]) ? s[i] : '?';
	buf[j] = 0;
	return buf;
}

int kp__fx_find_param(const struct kp_fx_kernel *k, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < k->n_params; i++)
		if (k->params[i].type && strlen(k->params[i].name) == n &&
		    !memcmp(k->params[i].name, s, n))
			return (int)i;
	return -1;
}

int kp__fx_find_red(const struct kp_fx_kernel *k, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < k->n_stmts; i++)
		if (k->stmts[i].kind != KP_FX_S_OUT && strlen(k->stmts[i].name) == n &&
		    !memcmp(k->stmts[i].name, s, n))
			return (int)i;
	return -1;
}

/* ---------------------------------------------------------------------- */
/* expressions */

void kp__fx_skip_ws(struct kp__fx_ps *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t'))
		p->s++;
}

static int peek_is(struct kp__fx_ps *p, const char *tok)
{
	size_t n = strlen(tok);

	kp__fx_skip_ws(p);
	return (size_t)(p->end - p->s) >= n && !memcmp(p->s, tok, n);
}

int kp__fx_accept(struct kp__fx_ps *p, const char *tok)
{
	if (!peek_is(p, tok))
		return 0;
	p->s += strlen(tok);
	return 1;
}

static int new_node(struct kp__fx_ps *p, int kind, int op, int a, int b, int c)
{
	struct kp_fx_kernel *k = p->k;
	struct kp_fx_node *nd;

	if (k->n_nodes >= KP_FX_MAX_NODES) {
		kp__fx_perr(p, "expression too large: more than %d nodes in the kernel", KP_FX_MAX_NODES);
		return -1;
	}
	nd = &k->nodes[k->n_nodes];
	memset(nd, 0, sizeof(*nd));
	nd->kind = kind;
	nd->op = op;
	nd->a = a;
	nd->b = b;
	nd->c = c;
	nd->d = -1;
	return (int)k->n_nodes++;
}

static int parse_expr(struct kp__fx_ps *p);

static int parse_number(struct kp__fx_ps *p)
{
	const char *s = p->s, *q = s;
	int is_float = 0, n;
	char buf[48];

	while (q < p->end && isdigit((unsigned char)*q))
		q++;
	if (q < p->end && *q == '.') {
		is_float = 1;
		q++;
		while (q < p->end && isdigit((unsigned char)*q))
			q++;
	}
	if (q < p->end && (*q == 'e' || *q == 'E')) {
		const char *e = q + 1;

		if (e < p->end && (*e == '+' || *e == '-'))
			e++;
		if (e >= p->end || !isdigit((unsigned char)*e)) {
			/* the offending byte, when there is one (e may be the end) */
			kp__fx_perr(p, "bad number '%s'", kp__fx_shown(s, (size_t)(e - s) + (e < p->end),
							 buf, sizeof(buf)));
			return -1;
		}
		while (e < p->end && isdigit((unsigned char)*e))
			e++;
		q = e;
		is_float = 1;
	}
	if (q < p->end && (*q == 'f' || *q == 'F')) {
		q++;
		is_float = 1;
	}
	if (q < p->end && (isalnum((unsigned char)*q) || *q == '_' || *q == '.')) {
		kp__fx_perr(p, "bad number '%s'", kp__fx_shown(s, (size_t)(q - s) + 1, buf, sizeof(buf)));
		return -1;
	}
	if (q - s > 20) {
		kp__fx_perr(p, "number '%s' longer than 20 characters", kp__fx_shown(s, (size_t)(q - s), buf, sizeof(buf)));
		return -1;
	}
	n = new_node(p, KP_FX_N_NUM, 0, -1, -1, -1);
	if (n < 0)
		return -1;
	/* a float literal always carries its f suffix: float arithmetic, like the kernels */
	snprintf(p->k->nodes[n].text, sizeof(p->k->nodes[n].text), "%.*s%s",
		 (int)(q - s - (q[-1] == 'f' || q[-1] == 'F')), s, is_float ? "f" : "");
	p->s = q;
	return n;
}

static int parse_primary(struct kp__fx_ps *p)
{
	const char *id;
	size_t n;
	int x, f, pi;
	char buf[48];

	kp__fx_skip_ws(p);
	if (p->s >= p->end) {
		kp__fx_perr(p, "expression ends early");
		return -1;
	}
	if (isdigit((unsigned char)*p->s) || (*p->s == '.' && p->s + 1 < p->end &&
					       isdigit((unsigned char)p->s[1])))
		return parse_number(p);
	if (kp__fx_accept(p, "(")) {
		x = parse_expr(p);
		if (x < 0)
			return -1;
		if (!kp__fx_accept(p, ")")) {
			kp__fx_perr(p, "expected ')', found '%s'", kp__fx_shown(p->s, (size_t)(p->end - p->s), buf, sizeof(buf)));
			return -1;
		}
		return x;
	}
	if (!(isalpha((unsigned char)*p->s) || *p->s == '_')) {
		kp__fx_perr(p, "unexpected '%s'", kp__fx_shown(p->s, (size_t)(p->end - p->s), buf, sizeof(buf)));
		return -1;
	}
	id = p->s;
	while (p->s < p->end && (isalnum((unsigned char)*p->s) || *p->s == '_'))
		p->s++;
	n = (size_t)(p->s - id);
	if (n > KP_FX_MAX_NAME) {
		kp__fx_perr(p, "name '%s' longer than %d characters", kp__fx_shown(id, n, buf, sizeof(buf)), KP_FX_MAX_NAME);
		return -1;
	}
	if (peek_is(p, "(")) {
		int args[3] = { -1, -1, -1 }, na = 0;

		for (f = 0; f < N_FUNCS; f++)
			if (strlen(funcs[f].name) == n && !memcmp(funcs[f].name, id, n))
				break;
		if (f == N_FUNCS) {
			kp__fx_perr(p, "unknown function '%s'", kp__fx_shown(id, n, buf, sizeof(buf)));
			return -1;
		}
		kp__fx_accept(p, "(");
		for (;;) {
			if (na == 3) {
				kp__fx_perr(p, "too many arguments to %s", funcs[f].name);
				return -1;
			}
			if ((args[na++] = parse_expr(p)) < 0)
				return -1;
			if (kp__fx_accept(p, ","))
				continue;
			if (kp__fx_accept(p, ")"))
				break;
			kp__fx_perr(p, "expected ',' or ')' in the arguments of %s", funcs[f].name);
			return -1;
		}
		if (na != funcs[f].arity) {
			kp__fx_perr(p, "%s takes %d argument%s, found %d", funcs[f].name, funcs[f].arity,
			     funcs[f].arity == 1 ? "" : "s", na);
			return -1;
		}
		/* a: the function; b, c, d: its arguments (-1 when absent) */
		x = new_node(p, KP_FX_N_CALL, 0, f, args[0], args[1]);
		if (x >= 0)
			p->k->nodes[x].d = args[2];
		return x;
	}
	if ((pi = kp__fx_find_param(p->k, id, n)) >= 0) {
		int t = p->k->params[pi].type;

		if (!KP_FX_IS_TENSOR(t))
			return new_node(p, KP_FX_N_SCALAR, 0, pi, -1, -1);
		if (!kp__fx_accept(p, "[")) {
			kp__fx_perr(p, "tensor '%.*s' must be indexed: %.*s[i], [col], [row] or [0]", (int)n, id,
			     (int)n, id);
			return -1;
		}
		if (kp__fx_accept(p, "0"))
			x = KP_FX_ZERO;
		else if (t == KP_FX_PTR_I32)
			x = -2;
		else if (kp__fx_accept(p, "i"))
			x = KP_FX_I;
		else if (kp__fx_accept(p, "col"))
			x = KP_FX_COL;
		else if (kp__fx_accept(p, "row"))
			x = KP_FX_ROW;
		else
			x = -1;
		if (x == -2) {
			kp__fx_perr(p, "index of '%.*s': an i32* tensor is read as %.*s[0] only", (int)n, id,
			     (int)n, id);
			return -1;
		}
		if (x < 0 || !kp__fx_accept(p, "]")) {
			kp__fx_perr(p, "index of '%.*s': expected i, col, row or 0", (int)n, id);
			return -1;
		}
		return new_node(p, KP_FX_N_LOAD, 0, pi, x, -1);
	}
	if ((x = kp__fx_find_red(p->k, id, n)) >= 0)
		return new_node(p, KP_FX_N_RED, 0, x, -1, -1);
	{
		static const char *const ix[] = { "i", "row", "col", "rows", "cols" };
		int j;

		for (j = 0; j < 5; j++)
			if (strlen(ix[j]) == n && !memcmp(ix[j], id, n))
				return new_node(p, KP_FX_N_INDEX, 0, j, -1, -1);
	}
	kp__fx_perr(p, "unknown name '%s' (not a parameter, an earlier reduction or i/row/col/rows/cols)",
	     kp__fx_shown(id, n, buf, sizeof(buf)));
	return -1;
}

static int parse_unary(struct kp__fx_ps *p)
{
	int x;

	if (++p->depth > KP_FX_MAX_DEPTH) {
		kp__fx_perr(p, "expression nested deeper than %d", KP_FX_MAX_DEPTH);
		return -1;
	}
	if (kp__fx_accept(p, "-"))
		x = (x = parse_unary(p)) < 0 ? -1 : new_node(p, KP_FX_N_UNARY, '-', x, -1, -1);
	else if (peek_is(p, "!") && !peek_is(p, "!="))
		x = (kp__fx_accept(p, "!"), (x = parse_unary(p)) < 0) ? -1 : new_node(p, KP_FX_N_UNARY, '!', x, -1, -1);
	else
		x = parse_primary(p);
	p->depth--;
	return x;
}

/* Binary levels, lowest precedence first. */
static const struct {
	const char *tok[3];
	int op[3];
} levels[] = {
	{ { "||" }, { 'O' } },
	{ { "&&" }, { 'A' } },
	{ { "==", "!=" }, { 'E', 'N' } },
	{ { "<=", ">=" }, { 'L', 'G' } },   /* also < and >, below */
	{ { "+", "-" }, { '+', '-' } },
	{ { "*", "/", "%" }, { '*', '/', '%' } },
};
#define N_LEVELS (int)(sizeof(levels) / sizeof(levels[0]))

static int parse_level(struct kp__fx_ps *p, int lv)
{
	int x, y, j, op;

	if (lv == N_LEVELS)
		return parse_unary(p);
	if (++p->depth > KP_FX_MAX_DEPTH) {
		kp__fx_perr(p, "expression nested deeper than %d", KP_FX_MAX_DEPTH);
		return -1;
	}
	x = parse_level(p, lv + 1);
	while (x >= 0) {
		op = 0;
		for (j = 0; j < 3 && levels[lv].tok[j]; j++) {
			if (peek_is(p, levels[lv].tok[j])) {
				/* "||" and "&&" are never prefixes of other tokens here */
				op = levels[lv].op[j];
				p->s += strlen(levels[lv].tok[j]);
				break;
			}
		}
		if (!op && lv == 3) {
			if (peek_is(p, "<") && !peek_is(p, "<<"))
				op = '<', p->s++;
			else if (peek_is(p, ">") && !peek_is(p, ">>"))
				op = '>', p->s++;
		}
		if (!op)
			break;
		y = parse_level(p, lv + 1);
		if (y < 0) {
			x = -1;
			break;
		}
		x = new_node(p, KP_FX_N_BINARY, op, x, y, -1);
	}
	p->depth--;
	return x;
}

static int parse_expr(struct kp__fx_ps *p)
{
	int c, a, b;

	if (++p->depth > KP_FX_MAX_DEPTH) {
		kp__fx_perr(p, "expression nested deeper than %d", KP_FX_MAX_DEPTH);
		return -1;
	}
	c = parse_level(p, 0);
	if (c >= 0 && kp__fx_accept(p, "?")) {
		a = parse_expr(p);
		if (a >= 0 && !kp__fx_accept(p, ":")) {
			kp__fx_perr(p, "expected ':' of '?:'");
			a = -1;
		}
		b = a >= 0 ? parse_expr(p) : -1;
		c = b >= 0 ? new_node(p, KP_FX_N_COND, 0, c, a, b) : -1;
	}
	p->depth--;
	return c;
}

/* A whole expression: s..end, nothing left over. */
int kp__fx_parse_full(struct kp__fx_ps *p, const char *s, const char *end)
{
	char buf[48];
	int x;

	p->s = s;
	p->end = end;
	p->depth = 0;
	x = parse_expr(p);
	if (x < 0)
		return -1;
	kp__fx_skip_ws(p);
	if (p->s != p->end) {
		kp__fx_perr(p, "unexpected '%s' after the expression",
		     kp__fx_shown(p->s, (size_t)(p->end - p->s), buf, sizeof(buf)));
		return -1;
	}
	return x;
}
