/*
 * aten_view.c - a fusion candidate in ATen terms, for PyTorch profiler
 * traces recorded with record_shapes=True: the CPU op that launched each
 * kernel (the innermost cpu_op around its launch call, the link that names
 * blockers, capture.c) with its inputs as the trace recorded them
 * (kp_cpu_op_args: dtypes, shapes, strides, scalar values), and whether
 * kplan.torch fuses that chain at capture.
 *
 * The verdict follows what kplan.torch defers (python/kplan/aten_fuse.py,
 * Fuser.defer, defer_norm, defer_mean, defer_pad, defer_cat, defer_const,
 * defer_index_copy, defer_arange and aten_ops.recognize):
 * - every op pointwise and in kplan.torch's catalog (python/kplan/aten_ops.py
 *   OPS; the table below is pinned to it by a unit test), out of place, on
 *   one floating dtype (or int64 position arithmetic: an arange, adds and
 *   products by integers), every tensor input broadcasting to the chain's
 *   iteration space (any layout: a strided input is read at its strides); a
 *   scalar_tensor is a value, not an op; a 0-dim double or long tensor is a
 *   Python number (the profiler records the wrapped tensor ATen makes of it,
 *   kplan.torch's dispatch mode sees the number);
 * - one aten::mean over the last dim (dim [-1] or [ndim-1], keepdim, no
 *   dtype) of the chain's f32 value may sit inside the chain (RMSNorm
 *   written as ops), when no op before it reads a strided input, none after
 *   it either (the row kernel reads and writes row-major), and ATen reduces
 *   each row in one block (aten_rms.refusal, ported below); the ops after it
 *   may read its [..., 1] value broadcast;
 * - the last op may instead end the chain in its own kernel: a LayerNorm
 *   over the last dim of a multiple of 4 elements (with a weight wherever it
 *   has a bias, no input strided); a constant_pad_nd of the chain's
 *   row-major value by non-negative pads; a cat along one dim of the chain's
 *   row-major value and tensors of its rank and sizes off that dim; an
 *   index_copy_ of the chain's value into a tensor of its rank (the KV
 *   cache's update) at a 1-D int64 index. None of them after a row mean (one
 *   row kernel per chain).
 * A chain that begins with a _foreach op is read as a run of them
 * (python/kplan/aten_foreach.py, Fuser.defer_foreach): kplan.torch makes
 * one program of at most two kernels of a run of add, sub, mul, div (by a
 * scalar or a list of tensors), neg, reciprocal, sqrt, lerp (a scalar
 * weight), addcmul, addcdiv (a scalar value) and pow of a scalar by a list,
 * over f32 lists; a profiler records a list's shapes, not its dtypes, so
 * the verdict says "when their lists are f32". A _foreach op inside a
 * pointwise chain, or another op inside a run, is named as the break.
 * The first op or input that breaks a rule is named instead.
 *
 * A CPU op runs other ops inside it, and the innermost one around a launch
 * is not always the one kplan.torch's dispatch mode sees: x.to(f32)
 * launches in the aten::copy_ of aten::_to_copy, a constant_pad_nd in its
 * aten::fill_ and aten::copy_. Those inner in-place ops are read as the op
 * around them (lifts[]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/strbuf.h"
#include "internal.h"

#define MAX_IN 16           /* inputs of one op looked at */
#define MAX_LIST 16         /* tensors of a TensorList input (a cat's) looked at */
#define MAX_DIMS 12
#define CHAIN_MAX 2000      /* bytes of aten_chain */

/* kplan.torch's pointwise catalog: the keys of aten_ops.OPS, in its order. */
const char *const kp__aten_catalog[] = {
	"add", "mul", "div", "div_scalar", "neg", "abs", "exp", "log", "tanh", "sqrt",
	"rsqrt", "reciprocal", "sigmoid", "relu", "clamp", "gelu", "silu", "pow", "where",
	"masked_fill", "copy", "fill", "iota",
};
const size_t kp__aten_catalog_n = sizeof(kp__aten_catalog) / sizeof(*kp__aten_catalog);

/* The ATen ops (as a profiler names them: no overload) aten_ops.recognize
 * reads, and the catalog op each becomes. */
static const struct { const char *aten, *op; } aliases[] = {
	{ "add", "add" }, { "sub", "add" }, { "rsub", "add" }, { "mul", "mul" },
	{ "div", "div" }, { "neg", "neg" }, { "abs", "abs" }, { "exp", "exp" },
	{ "log", "log" }, { "tanh", "tanh" }, { "sqrt", "sqrt" }, { "rsqrt", "rsqrt" },
	{ "reciprocal", "reciprocal" }, { "sigmoid", "sigmoid" }, { "relu", "relu" },
	{ "silu", "silu" }, { "gelu", "gelu" }, { "pow", "pow" }, { "clamp", "clamp" },
	{ "clamp_min", "clamp" }, { "clamp_max", "clamp" }, { "where", "where" },
	{ "masked_fill", "masked_fill" }, { "_to_copy", "copy" }, { "clone", "copy" },
	{ "arange", "iota" },
};

/* ATen ops that reduce: named as such rather than "not in the catalog". */
static const char *const reductions[] = {
	"softmax", "_softmax", "log_softmax", "_log_softmax", "sum", "mean", "amax", "amin",
	"max", "min", "argmax", "argmin", "norm", "linalg_vector_norm", "layer_norm",
	"native_layer_norm", "group_norm", "native_group_norm", "batch_norm",
	"native_batch_norm", "rms_norm", "_fused_rms_norm", "var", "std", "var_mean",
	"prod", "cumsum", "cumprod", "logsumexp", "topk", "sort",
};

const char *kp__aten_catalog_op(const char *aten)
{
	if (!strncmp(aten, "aten::", 6))
		aten += 6;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(*aliases); i++)
		if (!strcmp(aliases[i].aten, aten))
			return aliases[i].op;
	return NULL;
}

/* ---- the recorded inputs: JSON arrays as the importer stored them ---- */

/* One element of a top-level JSON array: text [b, e). */
struct elem { const char *b, *e; };

/* Split "[x,y,...]" in [s, end) into its top-level elements (at most max).
 * Returns the count, or -1 when it is not an array the importer wrote. */
static int split_range(const char *s, const char *end, struct elem *out, int max)
{
	int depth = 0, n = 0, instr = 0;
	const char *b;

	if (!s || s >= end || *s != '[')
		return -1;
	b = s + 1;
	for (const char *p = s + 1; p < end; p++) {
		if (instr) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				instr = 0;
			continue;
		}
		if (*p == '"') {
			instr = 1;
		} else if (*p == '[') {
			depth++;
		} else if ((*p == ',' || *p == ']') && depth == 0) {
			if (p > b && n < max)
				out[n++] = (struct elem){ b, p };
			if (*p == ']')
				return p + 1 == end ? n : -1;
			b = p + 1;
		} else if (*p == ']') {
			depth--;
		}
	}
	return -1;
}

static int split_array(const char *s, struct elem *out, int max)
{
	return s ? split_range(s, s + strlen(s), out, max) : -1;
}

/* A flat list of integers "[1,1,3072]" into v; count, or -1. */
static int int_list(struct elem x, int64_t *v, int max)
{
	const char *p = x.b;
	int n = 0;

	if (p >= x.e || *p != '[')
		return -1;
	p++;
	while (p < x.e && *p != ']') {
		char *end;
		long long k = strtoll(p, &end, 10);

		if (end == p || n >= max)
			return -1;
		v[n++] = k;
		p = end;
		if (p < x.e && *p == ',')
			p++;
	}
	return p < x.e && *p == ']' ? n : -1;
}

/*
 * The integers of a concrete value as the profiler writes a list of them
 * ("[-1]", "[0, 3]") into v: the count, or -1 when s is no such list.
 */
static int value_ints(const char *s, int64_t *v, int max)
{
	int n = 0;

	if (*s != '[')
		return -1;
	s++;
	for (;;) {
		char *end;
		long long k;

		while (*s == ' ')
			s++;
		if (*s == ']')
			return s[1] ? -1 : n;
		k = strtoll(s, &end, 10);
		if (end == s || n >= max)
			return -1;
		v[n++] = k;
		s = end;
		while (*s == ' ')
			s++;
		if (*s == ',')
			s++;
		else if (*s != ']')
			return -1;
	}
}

/* One integer as the profiler writes a Scalar ("-1"); 0 when s is none. */
static int value_int(const char *s, int64_t *v)
{
	char *end;

	if (!*s)
		return 0;
	*v = strtoll(s, &end, 10);
	return end != s && !*end;
}

/* A JSON string element into buf (escapes kept as written); "" otherwise. */
static void str_elem(struct elem x, char *buf, size_t len)
{
	size_t n = (size_t)(x.e - x.b);

	if (n >= 2 && *x.b == '"' && x.e[-1] == '"')
		snprintf(buf, len, "%.*s", (int)(n - 2), x.b + 1);
	else
		buf[0] = 0;
}

/* kplan's short name of a PyTorch dtype ("c10::Half" -> "f16"), or NULL
 * when t is no tensor's dtype ("Scalar", "", "TensorList", ...). */
static const char *dtype_of(const char *t)
{
	static const struct { const char *torch, *kp; } map[] = {
		{ "c10::Half", "f16" }, { "c10::BFloat16", "bf16" }, { "float", "f32" },
		{ "double", "f64" }, { "long int", "i64" }, { "int", "i32" },
		{ "short int", "i16" }, { "signed char", "i8" }, { "unsigned char", "u8" },
		{ "bool", "b8" }, { "c10::complex<float>", "c64" },
		{ "c10::complex<double>", "c128" }, { "c10::Float8_e4m3fn", "f8e4m3" },
		{ "c10::Float8_e5m2", "f8e5m2" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(*map); i++)
		if (!strcmp(map[i].torch, t))
			return map[i].kp;
	return NULL;
}

struct tensor {
	const char *dtype;       /* NULL: not a tensor */
	int nd, ns;              /* dims; strides (-1 unknown) */
	int64_t dims[MAX_DIMS], strides[MAX_DIMS];
	char value[48];          /* a non-tensor input's value, "" none */
};

struct op {
	const char *name;        /* arena */
	int n_in;                /* -1: no inputs recorded */
	int conc;                /* the trace recorded its concrete inputs */
	struct tensor in[MAX_IN];
	/* its first TensorList input (a cat's tensors): the profiler records
	 * their shapes and strides, not their dtypes (dtype stays NULL) */
	int list_at, n_list;     /* the input's position, -1 none; its tensors */
	struct tensor list[MAX_LIST];
};

static int64_t numel(const struct tensor *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->nd; d++)
		n = t->dims[d] > 0 && n <= INT64_MAX / t->dims[d] ? n * t->dims[d] : n;
	return n;
}

/* PyTorch's is_contiguous: strides of size-1 dims do not count. */
static int contiguous(const struct tensor *t)
{
	int64_t want = 1;

	if (t->ns != t->nd)
		return 1;   /* strides not recorded: assume what eager made */
	for (int d = t->nd - 1; d >= 0; d--) {
		if (t->dims[d] != 1 && t->strides[d] != want)
			return 0;
		want *= t->dims[d];
	}
	return 1;
}

/*
 * A Python number in an ATen call on tensors (x + 1e-6, 0.5 * x): the
 * Python binding wraps it into a 0-dim double (long) tensor, which the
 * profiler records as a tensor; kplan.torch's dispatch mode gets the number
 * back and bakes it into the kernel. A real 0-dim double tensor reads the
 * same offline: taken as a number too.
 */
static int wrapped(const struct tensor *t)
{
	return t->dtype && t->nd == 0 && (!strcmp(t->dtype, "f64") || !strcmp(t->dtype, "i64"));
}

static int same_dims(const struct tensor *t, const struct tensor *s)
{
	if (t->nd != s->nd)
		return 0;
	for (int d = 0; d < t->nd; d++)
		if (t->dims[d] != s->dims[d])
			return 0;
	return 1;
}

static void shape_text(const struct tensor *t, struct kp_strbuf *sb)
{
	kp_strbuf_addf(sb, "%s[", t->dtype ? t->dtype : "");
	for (int d = 0; d < t->nd; d++)
		kp_strbuf_addf(sb, "%s%lld", d ? "," : "", (long long)t->dims[d]);
	kp_strbuf_addch(sb, ']');
}

/* The shapes and strides of the TensorList input at of x: "[[2,64],[2,32]]". */
static void read_list(struct op *x, int at, struct elem dims, const struct elem *strides)
{
	struct elem d[MAX_LIST], s[MAX_LIST];
	int n = split_range(dims.b, dims.e, d, MAX_LIST);
	int ns = strides ? split_range(strides->b, strides->e, s, MAX_LIST) : -1;

	if (n < 0)
		return;
	x->list_at = at;
	x->n_list = n;
	for (int j = 0; j < n; j++) {
		struct tensor *t = &x->list[j];

		memset(t, 0, sizeof(*t));
		t->nd = int_list(d[j], t->dims, MAX_DIMS);
		t->ns = j < ns ? int_list(s[j], t->strides, MAX_DIMS) : -1;
		if (t->nd < 0)
			x->n_list = -1;   /* a member without its shape: the list unknown */
	}
}

/* Read the inputs of the CPU op at (tid, start); x->n_in = -1 when none. */
static int read_inputs(struct kp__ana *a, int64_t tid, int64_t start, struct op *x)
{
	sqlite3_stmt *st = a->aten_args;
	struct elem dims[MAX_IN], types[MAX_IN], strides[MAX_IN], conc[MAX_IN];
	int nd, nt, ns, nc;

	x->n_in = -1;
	if (!st)
		return 0;
	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int64(st, 3, start);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		return 0;
	}
	nd = split_array((const char *)sqlite3_column_text(st, 0), dims, MAX_IN);
	nt = split_array((const char *)sqlite3_column_text(st, 1), types, MAX_IN);
	ns = split_array((const char *)sqlite3_column_text(st, 2), strides, MAX_IN);
	nc = split_array((const char *)sqlite3_column_text(st, 3), conc, MAX_IN);
	x->conc = nc >= 0;
	x->list_at = -1;
	if (nt >= 0) {
		x->n_in = nt;
		for (int i = 0; i < nt; i++) {
			struct tensor *t = &x->in[i];
			char ty[64];

			memset(t, 0, sizeof(*t));
			str_elem(types[i], ty, sizeof(ty));
			t->dtype = dtype_of(ty);
			t->nd = i < nd ? int_list(dims[i], t->dims, MAX_DIMS) : -1;
			t->ns = i < ns ? int_list(strides[i], t->strides, MAX_DIMS) : -1;
			if (t->dtype && t->nd < 0)
				t->dtype = NULL;   /* a tensor without its shape: shown as unknown */
			if (!t->dtype && i < nc)
				str_elem(conc[i], t->value, sizeof(t->value));
			if (!t->dtype && !t->value[0] && *ty && strcmp(ty, "Scalar"))
				snprintf(t->value, sizeof(t->value), "%.*s", (int)sizeof(t->value) - 1, ty);   /* TensorList, ... */
			if (!strcmp(ty, "TensorList") && x->list_at < 0 && i < nd)
				read_list(x, i, dims[i], i < ns ? &strides[i] : NULL);
		}
	}
	/* text from the database is borrowed until the next step: all copied */
	sqlite3_reset(st);
	return 0;
}

/* "aten::mul(f16[1,1,3072], 0.5)" */
static void op_text(const struct op *x, struct kp_strbuf *sb)
{
	int first = 1;

	kp_strbuf_adds(sb, x->name);
	kp_strbuf_addch(sb, '(');
	for (int i = 0; i < x->n_in; i++) {
		const struct tensor *t = &x->in[i];

		if (!t->dtype && !t->value[0])
			continue;   /* None and defaults */
		kp_strbuf_adds(sb, first ? "" : ", ");
		first = 0;
		if (i == x->list_at && x->n_list >= 0) {
			/* "[[1,8,32,64], [1,8,32,64]]": shapes without dtypes */
			kp_strbuf_addch(sb, '[');
			for (int j = 0; j < x->n_list; j++) {
				kp_strbuf_adds(sb, j ? ", " : "");
				shape_text(&x->list[j], sb);
			}
			kp_strbuf_addch(sb, ']');
		} else if (t->dtype)
			shape_text(t, sb);
		else
			kp_strbuf_adds(sb, t->value);
	}
	kp_strbuf_addch(sb, ')');
}

static int is_float(const char *dt)
{
	return !strcmp(dt, "f32") || !strcmp(dt, "f16") || !strcmp(dt, "bf16");
}

/*
 * How the chain reads tensor t over its iteration space s (aten_fuse.py
 * FuseMode._ext_mode): NULL when it can, else why not (into buf).
 */
static const char *reads(const struct tensor *t, const struct tensor *s, char *buf, size_t len)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	int64_t p[MAX_DIMS];
	int off, lo = -1, hi = -1, same = t->nd == s->nd;

	for (int d = 0; same && d < t->nd; d++)
		same = t->dims[d] == s->dims[d];
	if (!same && numel(t) == 1)
		return NULL;
	shape_text(t, &sb);
	if (same) {
		buf = NULL;
	} else if (t->nd > s->nd) {
		snprintf(buf, len, "input %s does not broadcast", sb.buf ? sb.buf : "");
	} else {
		off = s->nd - t->nd;
		for (int d = 0; d < s->nd; d++) {
			p[d] = d < off ? 1 : t->dims[d - off];
			if (p[d] != 1) {
				if (lo < 0)
					lo = d;
				hi = d + 1;
			}
		}
		for (int d = lo; d >= 0 && d < hi; d++)
			if (p[d] != s->dims[d]) {
				snprintf(buf, len, "input %s does not broadcast", sb.buf ? sb.buf : "");
				lo = -2;
				break;
			}
		if (lo != -2)
			buf = NULL;
	}
	kp_strbuf_release(&sb);
	return buf;
}

/*
 * Why an arange does not begin or join the chain over space s as an int64
 * iota node (Fuser.defer_arange), or NULL: the chain is 1-D and the
 * arange's length is its size, told by an int64 output tensor the trace
 * recorded (the out= op the profiler shows inside) or by its integer
 * start, end and step.
 */
static const char *iota_stops(const struct op *x, const struct tensor *s, char *buf, size_t len)
{
	int64_t v[3], n = -1;
	int k = 0, fl = 0;

	for (int i = 0; i < x->n_in; i++) {
		const struct tensor *t = &x->in[i];

		if (t->dtype && !strcmp(t->dtype, "i64") && t->nd == 1)
			n = t->dims[0];
		else if (!t->dtype && t->value[0] && k < 3)
			fl |= !value_int(t->value, &v[k++]);
	}
	if (n < 0 && k > 0 && !fl) {
		int64_t start = k > 1 ? v[0] : 0, end = k > 1 ? v[1] : v[0], step = k > 2 ? v[2] : 1;

		if (step)
			n = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
	}
	if (fl) {
		snprintf(buf, len, "%.80s of floats (kplan.torch fuses an int64 arange)", x->name);
		return buf;
	}
	if (n < 0) {
		snprintf(buf, len, "%.80s: its arguments were not recorded", x->name);
		return buf;
	}
	if (s->nd != 1 || n != s->dims[0]) {
		snprintf(buf, len, "%.80s over another shape than the chain's", x->name);
		return buf;
	}
	return NULL;
}

/* A Scalar input's recorded value is not an integer (an int64 op's operand
 * would promote the op to float). */
static int float_value(const struct tensor *t)
{
	int64_t v;

	return !t->dtype && t->value[0] && !value_int(t->value, &v) &&
		strcmp(t->value, "True") && strcmp(t->value, "False");
}

/* Why kplan.torch does not fuse op x of a chain over space s (into buf), or NULL. */
static const char *stops(const struct op *x, const struct tensor *s, char *buf, size_t len)
{
	const char *base = strncmp(x->name, "aten::", 6) ? NULL : x->name + 6;
	const char *dt = NULL;
	char why[160];
	int ints, i64 = 0;

	if (!base) {
		snprintf(buf, len, "%.80s is not an ATen op", x->name);
		return buf;
	}
	if (!kp__aten_catalog_op(base)) {
		size_t n = strlen(base);
		char stem[80];

		for (size_t i = 0; i < sizeof(reductions) / sizeof(*reductions); i++)
			if (!strcmp(reductions[i], base)) {
				snprintf(buf, len, "%.80s is a reduction", x->name);
				return buf;
			}
		snprintf(stem, sizeof(stem), "%.*s", (int)(n > 1 ? n - 1 : 0), base);
		if (n > 1 && base[n - 1] == '_' && kp__aten_catalog_op(stem))
			snprintf(buf, len, "%.80s writes in place (kplan.torch fuses out-of-place ops)",
				 x->name);
		else
			snprintf(buf, len, "%.80s is not in kplan.torch's pointwise catalog", x->name);
		return buf;
	}
	if (x->n_in < 0) {
		snprintf(buf, len, "%.80s: its inputs were not recorded", x->name);
		return buf;
	}
	if (!strcmp(kp__aten_catalog_op(base), "iota"))
		return iota_stops(x, s, buf, len);
	/* int64 position arithmetic: add (sub, rsub) and mul by integers */
	ints = !strcmp(kp__aten_catalog_op(base), "add") || !strcmp(kp__aten_catalog_op(base), "mul");
	for (int i = 0; ints && i < x->n_in; i++)
		i64 |= x->in[i].dtype && !wrapped(&x->in[i]) && !strcmp(x->in[i].dtype, "i64");
	for (int i = 0; i64 && i < x->n_in; i++) {
		const struct tensor *t = &x->in[i];

		if (float_value(t) || (wrapped(t) && !strcmp(t->dtype, "f64"))) {
			snprintf(buf, len, "%.80s of i64 by a float (it promotes: kplan.torch fuses "
				 "int64 ops by integers)", x->name);
			return buf;
		}
	}
	for (int i = 0; i < x->n_in; i++) {
		const struct tensor *t = &x->in[i];

		if (!t->dtype || !strcmp(t->dtype, "b8") || wrapped(t))
			continue;   /* scalars; where's and masked_fill's masks */
		if (!(is_float(t->dtype) || (ints && !strcmp(t->dtype, "i64"))) ||
		    (dt && strcmp(dt, t->dtype))) {
			snprintf(buf, len, "%.80s on %s%s%s (kplan.torch fuses one of f32, f16, bf16 "
				 "per op, and i64 in add and mul)", x->name, dt ? dt : "",
				 dt ? " and " : "", t->dtype);
			return buf;
		}
		dt = t->dtype;
		if (reads(t, s, why, sizeof(why))) {
			snprintf(buf, len, "%.80s: %s", x->name, why);
			return buf;
		}
	}
	return NULL;
}

static int is_layer_norm(const char *name)
{
	return !strcmp(name, "aten::native_layer_norm") || !strcmp(name, "aten::layer_norm");
}

/* The first op before `at` that reads a tensor not laid out row-major, or -1. */
static int strided_before(const struct op *ops, int at)
{
	for (int i = 0; i < at; i++)
		for (int j = 0; j < ops[i].n_in; j++)
			if (ops[i].in[j].dtype && !contiguous(&ops[i].in[j]))
				return i;
	return -1;
}

/*
 * Why x, op `at` of n that ends a chain in its own kernel (a LayerNorm, a
 * pad, a cat), is not where this chain ends, or NULL: it must be the last
 * op, after at least one op that began the chain (begun).
 */
static const char *not_last(const struct op *x, int at, int n, int begun, char *buf, size_t len)
{
	if (at == n - 1 && begun)
		return NULL;
	snprintf(buf, len, "%.80s ends a chain (kplan.torch fuses the ops before it into its "
		 "kernel; the ops after it start another)", x->name);
	return buf;
}

/*
 * Why a LayerNorm, op `last` of n, does not end the chain in its kernel
 * (aten_fuse.Fuser.defer_norm), or NULL: it must follow the chain, read a
 * floating tensor whose last dim is a multiple of 4 (ATen's vectorized
 * kernel, whose order the fused kernel repeats), have a weight wherever it
 * has a bias, and no op before it may read a strided input; a chain with a
 * row mean has its row kernel already ("layer-norm-sealed").
 */
static const char *norm_stops(const struct op *ops, int last, int n, int mean_at, char *buf,
			      size_t len)
{
	const struct op *x = &ops[last];
	const struct tensor *in = x->n_in > 0 ? &x->in[0] : NULL;

	if (not_last(x, last, n, last, buf, len))
		return buf;
	if (mean_at >= 0) {
		snprintf(buf, len, "%.80s after a row mean (kplan.torch fuses one reduction per "
			 "chain)", x->name);
		return buf;
	}
	if (!in || !in->dtype || !is_float(in->dtype) || in->nd < 1 || in->dims[in->nd - 1] % 4) {
		snprintf(buf, len, "%.80s: not ATen's vectorized LayerNorm (a floating input whose "
			 "last dim is a multiple of 4)", x->name);
		return buf;
	}
	if (x->n_in > 3 && x->in[3].dtype && !(x->in[2].dtype)) {
		snprintf(buf, len, "%.80s with a bias but no weight", x->name);
		return buf;
	}
	if (strided_before(ops, last) >= 0) {
		snprintf(buf, len, "%.80s: a chain over strided tensors does not end in "
			 "a LayerNorm", x->name);
		return buf;
	}
	return NULL;
}

/* ---- a row mean inside the chain (Fuser.defer_mean, kplan.aten_rms) ---- */

#define RMS_MAX_ELEMS ((INT64_C(1) << 31) / 4)   /* aten_rms.MAX_ELEMS: 32-bit f32 offsets */
#define RMS_MAX_THREADS 512
#define RMS_WARP 32

static int64_t last_pow2(int64_t n)
{
	int64_t p = 1;

	while (p * 2 <= n)
		p *= 2;
	return p;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * Why kplan.aten_rms does not generate the mean of a contiguous f32
 * [rows, n] over its last dim (aten_rms.refusal, with config's
 * setReduceConfig at its default variant, VECTORIZE_AT_128): the fused
 * kernel repeats ATen's order within a block, so a row ATen may reduce
 * across blocks (global_reduce) or through sub-iterators is left to ATen.
 */
static const char *rms_refusal(int64_t rows, int64_t n, char *buf, size_t len)
{
	int64_t dim0 = n, d0, d1, bw, bh, step;
	int split;

	if (n < 2 || rows < 1) {
		snprintf(buf, len, "a row of %lld", (long long)n);
		return buf;
	}
	if (rows > RMS_MAX_ELEMS / n) {
		snprintf(buf, len, "ATen splits the iterator");
		return buf;
	}
	if (dim0 >= 128)
		dim0 /= 4;   /* vec4 loads */
	d0 = dim0 < RMS_MAX_THREADS ? last_pow2(dim0) : RMS_MAX_THREADS;
	d1 = rows < RMS_MAX_THREADS ? last_pow2(rows) : RMS_MAX_THREADS;
	bw = min64(d0, RMS_WARP);
	bh = min64(d1, RMS_MAX_THREADS / bw);
	bw = min64(d0, RMS_MAX_THREADS / bh);
	step = bw;
	split = (n + step - 1) / step >= min64(bh * 16, 256);   /* the warps split a row */
	if (split)
		step *= bh;
	if (split && (n + step - 1) / step >= 256) {
		snprintf(buf, len, "ATen may reduce a row across blocks");
		return buf;
	}
	return NULL;
}

/*
 * Why aten::mean, op `at` of the chain over space s, does not join the
 * chain as its row mean (Fuser.defer_mean), or NULL. begun: an op of the
 * chain came before it (the mean reads a value of the pending chain);
 * mean_at: the chain's row mean so far, -1 none. The profiler names
 * mean.dim (self, dim, keepdim, dtype) and mean (self, dtype) alike; only
 * mean.dim over the last dim with keepdim and no dtype is deferred.
 */
static const char *mean_stops(const struct op *ops, int at, int begun, int mean_at,
			      const struct tensor *s, char *buf, size_t len)
{
	const struct op *x = &ops[at];
	const struct tensor *in = x->n_in > 0 ? &x->in[0] : NULL;
	const char *dim = x->n_in > 1 ? x->in[1].value : "", *keep = x->n_in > 2 ? x->in[2].value : "";
	int64_t dims[MAX_DIMS];
	char why[96];
	int nd;

	if (mean_at >= 0) {
		snprintf(buf, len, "a second %.80s (kplan.torch fuses one row mean per chain)", x->name);
		return buf;
	}
	if (!begun) {
		snprintf(buf, len, "%.80s does not read a value of the chain (kplan.torch fuses a "
			 "mean into the chain before it)", x->name);
		return buf;
	}
	if (!in || !in->dtype) {
		snprintf(buf, len, "%.80s: its input was not recorded", x->name);
		return buf;
	}
	if (x->n_in == 2 || (x->conc && x->n_in > 2 && !dim[0])) {
		snprintf(buf, len, "%.80s over all elements (kplan.torch fuses a mean over the last "
			 "dim)", x->name);
		return buf;
	}
	if (!x->conc || x->n_in < 3 || (nd = value_ints(dim, dims, MAX_DIMS)) < 0 ||
	    (strcmp(keep, "True") && strcmp(keep, "False"))) {
		snprintf(buf, len, "%.80s: its arguments were not recorded (not fused: kplan.torch "
			 "fuses a mean over the last dim with keepdim)", x->name);
		return buf;
	}
	if (nd != 1 || in->nd < 1 || (dims[0] != -1 && dims[0] != in->nd - 1)) {
		snprintf(buf, len, "%.80s over another dim than the last (kplan.torch fuses a mean "
			 "over the last dim)", x->name);
		return buf;
	}
	if (strcmp(keep, "True")) {
		snprintf(buf, len, "%.80s without keepdim (kplan.torch fuses a mean that keeps the "
			 "dim)", x->name);
		return buf;
	}
	if (x->n_in > 3 && (x->in[3].dtype || x->in[3].value[0])) {
		snprintf(buf, len, "%.80s with a dtype (kplan.torch fuses a mean without one)", x->name);
		return buf;
	}
	if (strcmp(in->dtype, "f32")) {
		snprintf(buf, len, "%.80s on %s (kplan.torch fuses a mean of f32)", x->name, in->dtype);
		return buf;
	}
	if (!same_dims(in, s)) {
		snprintf(buf, len, "%.80s of a tensor of other sizes than the chain's (kplan.torch "
			 "fuses a mean of the chain's value)", x->name);
		return buf;
	}
	if (strided_before(ops, at) >= 0) {
		snprintf(buf, len, "%.80s: a chain over strided tensors does not take a row mean "
			 "(kplan.torch's row kernel reads and writes row-major)", x->name);
		return buf;
	}
	if (in->dims[in->nd - 1] < 1 ||
	    rms_refusal(numel(in) / in->dims[in->nd - 1], in->dims[in->nd - 1], why, sizeof(why))) {
		struct kp_strbuf sb = KP_STRBUF_INIT;

		shape_text(in, &sb);
		snprintf(buf, len, "%.80s of %.80s: %s (kplan.torch fuses a mean ATen reduces in "
			 "one block per row)", x->name, sb.buf ? sb.buf : "",
			 in->dims[in->nd - 1] < 1 ? "an empty row" : why);
		kp_strbuf_release(&sb);
		return buf;
	}
	return NULL;
}

/* ---- the last op ending the chain in its kernel: a pad, a cat ---- */

/* Why op `at` of n, a pad or a cat, is not where the chain ends, or NULL. */
static const char *ends_stops(const struct op *ops, int at, int n, int begun, int mean_at,
			      char *buf, size_t len)
{
	const struct op *x = &ops[at];

	if (not_last(x, at, n, begun, buf, len))
		return buf;
	if (mean_at >= 0) {
		snprintf(buf, len, "%.80s after a row mean (kplan.torch's row kernel does not end "
			 "in a pad, a cat or an index_copy_)", x->name);
		return buf;
	}
	return NULL;
}

/*
 * Why constant_pad_nd(input, pad, value), the last op, does not end the
 * chain over space s in its kernel (Fuser.defer_pad), or NULL: the input is
 * the chain's value laid out row-major (then ATen's padded tensor is
 * too: it follows the input's memory format), pads (pairs from the last
 * dim) not negative, the value a number.
 */
static const char *pad_stops(const struct op *ops, int at, int n, int begun, int mean_at,
			     const struct tensor *s, char *buf, size_t len)
{
	const struct op *x = &ops[at];
	const struct tensor *in = x->n_in > 0 ? &x->in[0] : NULL;
	int64_t pads[2 * MAX_DIMS];
	int np = -1;
	char *end;

	if (ends_stops(ops, at, n, begun, mean_at, buf, len))
		return buf;
	if (x->n_in >= 3 && x->conc)
		np = value_ints(x->in[1].value, pads, 2 * MAX_DIMS);
	if (!in || !in->dtype || np < 0 || !x->in[2].value[0]) {
		snprintf(buf, len, "%.80s: its arguments were not recorded", x->name);
		return buf;
	}
	if (np % 2 || np / 2 > in->nd) {
		snprintf(buf, len, "%.80s: %d pads for %d dims", x->name, np, in->nd);
		return buf;
	}
	for (int i = 0; i < np; i++)
		if (pads[i] < 0) {
			snprintf(buf, len, "%.80s with a negative pad (a crop; kplan.torch fuses "
				 "non-negative pads)", x->name);
			return buf;
		}
	(void)strtod(x->in[2].value, &end);
	if (end == x->in[2].value || *end) {
		snprintf(buf, len, "%.80s: a pad value of %s (kplan.torch fuses a number)", x->name,
			 x->in[2].value);
		return buf;
	}
	if (!same_dims(in, s)) {
		snprintf(buf, len, "%.80s does not pad the chain's value", x->name);
		return buf;
	}
	if (!contiguous(in)) {
		snprintf(buf, len, "%.80s: the chain's value is not row-major (kplan.torch ends a "
			 "chain in a pad of a row-major value)", x->name);
		return buf;
	}
	return NULL;
}

/*
 * Why cat(tensors, dim), the last op, does not end the chain over space s
 * in its kernel (Fuser.defer_cat), or NULL. kplan.torch wants one of the
 * tensors to be the chain's value, of its shape and row-major, the others
 * of its dtype and rank, sizes equal off the cat dim, and the cat's output
 * row-major as eager lays it out. Offline: the profiler records the
 * tensors' shapes and strides, not which is the chain's nor their dtypes
 * (taken as the chain's). The closest rule: a tensor of the chain's shape
 * laid out row-major is the chain's value (the strides the profiler
 * recorded are those ATen gave the op before); and one row-major tensor
 * makes ATen's cat output row-major (cat_compute_output_memory_format: an
 * input whose suggested memory format is contiguous makes the output
 * contiguous), so the output needs no rule of its own.
 */
static const char *cat_stops(const struct op *ops, int at, int n, int begun, int mean_at,
			     const struct tensor *s, char *buf, size_t len)
{
	const struct op *x = &ops[at];
	int64_t dim;
	int mine = -1, shaped = 0;

	if (ends_stops(ops, at, n, begun, mean_at, buf, len))
		return buf;
	if (x->list_at < 0 || x->n_list < 1) {
		snprintf(buf, len, "%.80s: its tensors were not recorded", x->name);
		return buf;
	}
	if (x->list_at + 1 >= x->n_in || !value_int(x->in[x->list_at + 1].value, &dim)) {
		snprintf(buf, len, "%.80s: its dim was not recorded", x->name);
		return buf;
	}
	if (dim < 0)
		dim += s->nd;
	if (dim < 0 || dim >= s->nd) {
		snprintf(buf, len, "%.80s along a dim the chain's value does not have", x->name);
		return buf;
	}
	for (int j = 0; j < x->n_list; j++)
		if (same_dims(&x->list[j], s)) {
			shaped = 1;
			if (mine < 0 && contiguous(&x->list[j]))
				mine = j;
		}
	if (!shaped) {
		snprintf(buf, len, "%.80s: none of its tensors has the chain's shape", x->name);
		return buf;
	}
	if (mine < 0) {
		snprintf(buf, len, "%.80s: the chain's value is not row-major (kplan.torch ends a "
			 "chain in a cat of a row-major value)", x->name);
		return buf;
	}
	for (int j = 0; j < x->n_list; j++) {
		const struct tensor *t = &x->list[j];
		int ok = t->nd == s->nd && t->dims[dim] > 0;

		for (int d = 0; ok && d < s->nd; d++)
			ok = d == dim || t->dims[d] == s->dims[d];
		if (j != mine && !ok) {
			snprintf(buf, len, "%.80s: a tensor of other sizes than the chain's off the "
				 "cat dim", x->name);
			return buf;
		}
	}
	return NULL;
}

/*
 * Why dst.index_copy_(dim, index, source), the last op, does not end the
 * chain over space s in its kernel (Fuser.defer_index_copy), or NULL: source
 * the chain's value (its shape), index a 1-D int64 tensor of
 * source.shape[dim] entries, dst of the source's dtype and rank, sizes
 * equal off dim, no broadcast dim (an expand: writes would overlap).
 * Offline the index cannot be told pending or not (kplan.torch launches an
 * index a chain computes first), nor dst shared with what the chain reads.
 */
static const char *index_copy_stops(const struct op *ops, int at, int n, int begun,
				    int mean_at, const struct tensor *s, char *buf, size_t len)
{
	const struct op *x = &ops[at];
	const struct tensor *dst = &x->in[0], *idx = &x->in[2], *src = &x->in[3];
	int64_t dim;

	if (ends_stops(ops, at, n, begun, mean_at, buf, len))
		return buf;
	if (x->n_in < 4 || !dst->dtype || !idx->dtype || !src->dtype ||
	    !value_int(x->in[1].value, &dim)) {
		snprintf(buf, len, "%.80s: its arguments were not recorded", x->name);
		return buf;
	}
	if (dim < 0)
		dim += s->nd;
	if (!same_dims(src, s) || dim < 0 || dim >= s->nd) {
		snprintf(buf, len, "%.80s does not copy the chain's value", x->name);
		return buf;
	}
	if (strcmp(idx->dtype, "i64") || idx->nd != 1 || idx->dims[0] != s->dims[dim] ||
	    !contiguous(idx)) {
		snprintf(buf, len, "%.80s: the index is not a contiguous int64 vector of the "
			 "value's size along dim %lld", x->name, (long long)dim);
		return buf;
	}
	if (strcmp(dst->dtype, src->dtype) || !is_float(src->dtype) || dst->nd != s->nd) {
		snprintf(buf, len, "%.80s into a tensor of another dtype or rank", x->name);
		return buf;
	}
	for (int d = 0; d < s->nd; d++) {
		if (d != dim && dst->dims[d] != s->dims[d]) {
			snprintf(buf, len, "%.80s into a tensor of other sizes off dim %lld", x->name,
				 (long long)dim);
			return buf;
		}
		if (dst->ns == dst->nd && dst->dims[d] > 1 && dst->strides[d] <= 0) {
			snprintf(buf, len, "%.80s into a broadcast tensor (its writes would "
				 "overlap)", x->name);
			return buf;
		}
	}
	return NULL;
}

/* After the row mean: an op reading a strided input starts another chain
 * (Fuser.defer: the row kernel reads and writes row-major). */
static const char *after_mean_stops(const struct op *x, char *buf, size_t len)
{
	for (int j = 0; j < x->n_in; j++)
		if (x->in[j].dtype && !contiguous(&x->in[j])) {
			snprintf(buf, len, "%.80s reads a strided input after the row mean "
				 "(kplan.torch's row kernel reads row-major: the chain ends before it)",
				 x->name);
			return buf;
		}
	return NULL;
}

/*
 * Inner ops read as the op around them: the in-place op that launches the
 * kernel inside an op kplan.torch's dispatch mode sees whole (it does not
 * see what runs inside an op's implementation).
 */
static const struct { const char *inner, *outer; } lifts[] = {
	{ "aten::copy_", "aten::_to_copy" },         /* x.to(dtype), x.float() */
	{ "aten::copy_", "aten::clone" },            /* x.clone(), x.contiguous() */
	{ "aten::copy_", "aten::constant_pad_nd" },  /* the input copied into the padded tensor */
	{ "aten::fill_", "aten::constant_pad_nd" },  /* the padded tensor filled */
	{ "aten::copy_", "aten::cat" },              /* a cat copying input by input */
};

/* ---- runs of _foreach ops (python/kplan/aten_foreach.py) ---- */

/* "aten::_foreach_add_" -> "add_"; NULL for other ops */
static const char *foreach_name(const char *name)
{
	return strncmp(name, "aten::_foreach_", 15) ? NULL : name + 15;
}

/* What input i of a _foreach op is: 'L' a list of tensors, 'T' one tensor,
 * 'V' a list of scalars, 'S' a scalar, 0 nothing recorded (a default, or a
 * scalar without its value). */
static int foreach_arg(const struct op *x, int i)
{
	const struct tensor *t = i < x->n_in ? &x->in[i] : NULL;

	if (!t)
		return 0;
	if (t->dtype)
		return 'T';
	if (!strcmp(t->value, "TensorList"))
		return 'L';
	if (t->value[0] == '[' || !strcmp(t->value, "ScalarList"))
		return 'V';
	return t->value[0] ? 'S' : 0;
}

/* aten_foreach._OPS: each op's leading list inputs, then the input that
 * is a scalar (-1: none), where add, sub, mul and div also take a list of
 * tensors (their .List overloads). pow is apart: a scalar by a list. */
static const struct { const char *op; int lists, scalar, list_ok; } foreach_ops[] = {
	{ "add", 1, 1, 1 }, { "sub", 1, 1, 1 }, { "mul", 1, 1, 1 }, { "div", 1, 1, 1 },
	{ "neg", 1, -1, 0 }, { "reciprocal", 1, -1, 0 }, { "sqrt", 1, -1, 0 },
	{ "lerp", 2, 2, 0 }, { "addcmul", 3, 3, 0 }, { "addcdiv", 3, 3, 0 },
};

/* Why kplan.torch does not take _foreach op x into its program, or NULL. */
static const char *foreach_stops(const struct op *x, char *buf, size_t len)
{
	const char *f = foreach_name(x->name);
	size_t n = strlen(f), k = n && f[n - 1] == '_' ? n - 1 : n;   /* in place or not */
	int e = -1;

	if (x->n_in < 0) {
		snprintf(buf, len, "%.80s: its inputs were not recorded", x->name);
		return buf;
	}
	if (k == 3 && !strncmp(f, "pow", 3)) {
		if (foreach_arg(x, 0) == 'S' && foreach_arg(x, 1) == 'L')
			return NULL;
		snprintf(buf, len, "%.80s of a list (kplan.torch fuses the power of a scalar by "
			 "a list)", x->name);
		return buf;
	}
	for (int i = 0; i < (int)(sizeof(foreach_ops) / sizeof(*foreach_ops)); i++)
		if (strlen(foreach_ops[i].op) == k && !strncmp(f, foreach_ops[i].op, k))
			e = i;
	if (e < 0) {
		snprintf(buf, len, "%.80s is not among the _foreach ops kplan.torch fuses (add, "
			 "sub, mul, div, neg, reciprocal, sqrt, lerp, addcmul, addcdiv, pow of a "
			 "scalar)", x->name);
		return buf;
	}
	for (int i = 0; i < foreach_ops[e].lists; i++)
		if (foreach_arg(x, i) != 'L') {
			snprintf(buf, len, "%.80s: input %d is not a list of tensors", x->name, i + 1);
			return buf;
		}
	if (foreach_ops[e].scalar < 0)
		return NULL;
	switch (foreach_arg(x, foreach_ops[e].scalar)) {
	case 'V':
		snprintf(buf, len, "%.80s by a list of scalars (kplan.torch fuses a scalar, or "
			 "a list of tensors where the op takes one)", x->name);
		return buf;
	case 'T':
		snprintf(buf, len, "%.80s by one tensor (kplan.torch fuses a scalar, or a list "
			 "of tensors where the op takes one)", x->name);
		return buf;
	case 'L':
		if (foreach_ops[e].list_ok)
			return NULL;
		snprintf(buf, len, "%.80s with a list where kplan.torch takes a scalar", x->name);
		return buf;
	default:
		return NULL;   /* a scalar, or the default (alpha, value) */
	}
}

/* The verdict on a chain that begins with a _foreach op. */
static const char *foreach_run(const struct op *ops, int n, char *buf, size_t len)
{
	const char *v;

	for (int i = 0; i < n; i++) {
		if (!foreach_name(ops[i].name)) {
			snprintf(buf, len, "%.80s ends the run of _foreach ops (kplan.torch fuses "
				 "the run as one program of its own)", ops[i].name);
			return buf;
		}
		if ((v = foreach_stops(&ops[i], buf, len)))
			return v;
	}
	snprintf(buf, len, "kplan.torch runs these %d _foreach ops as one program of at most "
		 "two kernels at capture, when their lists are f32 (a trace does not record a "
		 "list's dtypes; kt.open(fuse=\"exact\"), bit-identical)", n);
	return buf;
}

static int ends_chain(const char *name)
{
	return is_layer_norm(name) || !strcmp(name, "aten::constant_pad_nd") ||
		!strcmp(name, "aten::cat") || !strcmp(name, "aten::index_copy_");
}

static int lifted(const struct kp__cpu_op *co)
{
	if (!co->outer_name)
		return 0;
	for (size_t i = 0; i < sizeof(lifts) / sizeof(*lifts); i++)
		if (!strcmp(co->name, lifts[i].inner) && !strcmp(co->outer_name, lifts[i].outer))
			return 1;
	return 0;
}

int kp__aten_view(struct kp__ana *a, const uint32_t *ch, int k, struct kp__cand *c)
{
	struct op *ops = NULL;
	const struct tensor *space = NULL;
	struct kp_strbuf chain = KP_STRBUF_INIT;
	int n = 0, rc = 0;
	int64_t last_tid = -1, last_start = -1;
	char why[320];
	const char *verdict = NULL, *ends = NULL, *foreach_verdict = NULL;
	int begun = 0, mean_at = -1, n_checked;

	if (a->aten_state < 0)
		return 0;
	if (!a->aten_state) {
		a->aten_state = -1;
		if (!kp_db_has_table(a->db, "kp_cpu_op_args") ||
		    kp_db_int(a->db, "SELECT count(*) FROM (SELECT 1 FROM kp_cpu_op_args"
			      " LIMIT 1)", 0) <= 0 ||
		    kp_db_prepare(a->db, "SELECT dims, types, strides, concrete FROM kp_cpu_op_args"
				  " WHERE runId = ?1 AND globalTid = ?2 AND start = ?3",
				  &a->aten_args, NULL))
			return 0;
		a->aten_state = 1;
	}
	if (!(ops = calloc((size_t)k, sizeof(*ops))))
		return KP_ENOMEM;
	for (int i = 0; i < k && !rc; i++) {
		const struct kp__op *op = &a->ops[ch[i]];
		struct kp__cpu_op co;

		if ((rc = kp__cpu_op_of(a, op->corr, op->api_start, &co)))
			break;
		if (!co.name || !op->has_api)
			goto none;
		if (lifted(&co)) {
			co.tid = co.outer_tid;
			co.start = co.outer_start;
			co.name = co.outer_name;
		}
		if (co.tid == last_tid && co.start == last_start)
			continue;   /* one op launched two kernels of the chain */
		last_tid = co.tid;
		last_start = co.start;
		ops[n].name = co.name;
		if ((rc = read_inputs(a, co.tid, co.start, &ops[n])))
			break;
		if (ops[n].n_in < 0)
			goto none;   /* a CPU op without shapes: the trace has none to say */
		n++;
	}
	if (rc)
		goto out;
	n_checked = n;
	/* the iteration space: the chain's largest tensor, up to the op that
	 * ends it (the ops after a LayerNorm, a pad or a cat are another chain,
	 * over another shape maybe); of an index_copy_, its source (its
	 * destination, the whole KV cache, is no tensor the chain runs over) */
	for (int i = 0; i < n && (!i || !ends_chain(ops[i - 1].name)); i++)
		for (int j = 0; j < ops[i].n_in; j++) {
			const struct tensor *t = &ops[i].in[j];

			if (!strcmp(ops[i].name, "aten::index_copy_") && j != 3)
				continue;

			if (t->dtype && (!space || numel(t) > numel(space)))
				space = t;
		}
	if (n && foreach_name(ops[0].name)) {
		foreach_verdict = foreach_run(ops, n, why, sizeof(why));
		n_checked = 0;   /* not the pointwise rules */
	}
	for (int i = 0; i < n_checked && !verdict; i++) {
		const char *name = ops[i].name;

		if (foreach_name(name)) {
			snprintf(why, sizeof(why), "%.80s is a multi-tensor op (kplan.torch fuses a "
				 "run of _foreach ops as one program, apart from pointwise chains)",
				 name);
			verdict = why;
			break;
		}
		if (!strcmp(name, "aten::scalar_tensor"))
			continue;   /* a value baked into the kernel (defer_const) */
		if (is_layer_norm(name)) {
			verdict = norm_stops(ops, i, n, mean_at, why, sizeof(why));
			ends = "the LayerNorm's";
		} else if (!space) {
			snprintf(why, sizeof(why), "%.80s: no tensor input recorded", name);
			verdict = why;
		} else if (!strcmp(name, "aten::constant_pad_nd")) {
			verdict = pad_stops(ops, i, n, begun, mean_at, space, why, sizeof(why));
			ends = "the pad's";
		} else if (!strcmp(name, "aten::cat")) {
			verdict = cat_stops(ops, i, n, begun, mean_at, space, why, sizeof(why));
			ends = "the cat's";
		} else if (!strcmp(name, "aten::index_copy_")) {
			verdict = index_copy_stops(ops, i, n, begun, mean_at, space, why,
						   sizeof(why));
			ends = "the KV cache update's";
		} else if (!strcmp(name, "aten::mean")) {
			verdict = mean_stops(ops, i, begun, mean_at, space, why, sizeof(why));
			mean_at = i;
		} else {
			verdict = stops(&ops[i], space, why, sizeof(why));
			if (!verdict && mean_at >= 0)
				verdict = after_mean_stops(&ops[i], why, sizeof(why));
		}
		begun = 1;
	}
	for (int i = 0; i < n; i++) {
		if (i)
			kp_strbuf_adds(&chain, " > ");
		op_text(&ops[i], &chain);
	}
	if (chain.oom) {
		rc = KP_ENOMEM;
		goto out;
	}
	if (chain.len > CHAIN_MAX) {
		chain.len = CHAIN_MAX - 3;
		memcpy(chain.buf + chain.len, "...", 4);
		chain.len += 3;
	}
	c->aten_chain = kp_arena_strdup(&a->arena, chain.buf);
	if (foreach_verdict)
		c->torch_verdict = kp_arena_strdup(&a->arena, foreach_verdict);
	else if (verdict)
		c->torch_verdict = kp_arena_strdup(&a->arena, verdict);
	else if (ends) {
		snprintf(why, sizeof(why), "kplan.torch fuses this chain at capture, ending in %s "
			 "kernel (kt.open(fuse=\"exact\"), bit-identical)", ends);
		c->torch_verdict = kp_arena_strdup(&a->arena, why);
	} else if (mean_at >= 0) {
		c->torch_verdict = "kplan.torch fuses this chain at capture, the row mean (RMSNorm) "
			"inside its kernel (kt.open(fuse=\"exact\"), bit-identical)";
	} else {
		c->torch_verdict = "kplan.torch fuses this chain at capture "
			"(kt.open(fuse=\"exact\"), bit-identical)";
	}
	if (!c->aten_chain || !c->torch_verdict)
		rc = KP_ENOMEM;
	goto out;
none:
	c->aten_chain = c->torch_verdict = NULL;
out:
	kp_strbuf_release(&chain);
	free(ops);
	return rc;
}

void kp__aten_view_done(struct kp__ana *a)
{
	sqlite3_finalize(a->aten_args);
	a->aten_args = NULL;
	a->aten_state = 0;
}
