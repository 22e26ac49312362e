/*
 * aten_view.c - a fusion candidate in ATen terms, for PyTorch profiler
 * traces recorded with record_shapes=True: the CPU op that launched each
 * kernel (the innermost cpu_op around its launch call, the link that names
 * blockers, capture.c) with its inputs as the trace recorded them
 * (kp_cpu_op_args: dtypes, shapes, strides, scalar values), and whether
 * kplan.torch fuses that chain at capture.
 *
 * The verdict follows what kplan.torch defers (python/kplan/aten_fuse.py,
 * Fuser.defer, defer_norm, defer_const and aten_ops.recognize): every op
 * pointwise and in kplan.torch's catalog (python/kplan/aten_ops.py OPS; the
 * table below is pinned to it by a unit test), out of place, on one
 * floating dtype, every tensor input broadcasting to the chain's iteration
 * space (any layout: a strided input is read at its strides); a
 * scalar_tensor is a value, not an op; the last op may be a LayerNorm over
 * the last dim of a multiple of 4 elements (with a weight wherever it has a
 * bias, no input strided), which ends the chain in its own kernel. The
 * first op or input that breaks a rule is named instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/strbuf.h"
#include "internal.h"

#define MAX_IN 16           /* inputs of one op looked at */
#define MAX_DIMS 12
#define CHAIN_MAX 2000      /* bytes of aten_chain */

/* kplan.torch's pointwise catalog: the keys of aten_ops.OPS, in its order. */
const char *const kp__aten_catalog[] = {
	"add", "mul", "div", "div_scalar", "neg", "abs", "exp", "log", "tanh", "sqrt",
	"rsqrt", "reciprocal", "sigmoid", "relu", "clamp", "gelu", "silu", "pow", "where",
	"masked_fill", "copy", "fill",
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

/* Split "[x,y,...]" into its top-level elements (at most max). Returns the
 * count, or -1 when s is not an array the importer wrote. */
static int split_array(const char *s, struct elem *out, int max)
{
	int depth = 0, n = 0, instr = 0;
	const char *b;

	if (!s || *s != '[')
		return -1;
	b = s + 1;
	for (const char *p = s + 1; *p; p++) {
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
				return p[1] ? -1 : n;
			b = p + 1;
		} else if (*p == ']') {
			depth--;
		}
	}
	return -1;
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
	struct tensor in[MAX_IN];
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

static void shape_text(const struct tensor *t, struct kp_strbuf *sb)
{
	kp_strbuf_addf(sb, "%s[", t->dtype);
	for (int d = 0; d < t->nd; d++)
		kp_strbuf_addf(sb, "%s%lld", d ? "," : "", (long long)t->dims[d]);
	kp_strbuf_addch(sb, ']');
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
		if (t->dtype)
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

/* Why kplan.torch does not fuse op x of a chain over space s (into buf), or NULL. */
static const char *stops(const struct op *x, const struct tensor *s, char *buf, size_t len)
{
	const char *base = strncmp(x->name, "aten::", 6) ? NULL : x->name + 6;
	const char *dt = NULL;
	char why[160];

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
	for (int i = 0; i < x->n_in; i++) {
		const struct tensor *t = &x->in[i];

		if (!t->dtype || !strcmp(t->dtype, "b8"))
			continue;   /* scalars; where's and masked_fill's masks */
		if (!is_float(t->dtype) || (dt && strcmp(dt, t->dtype))) {
			snprintf(buf, len, "%.80s on %s%s%s (kplan.torch fuses one of f32, f16, bf16 "
				 "per op)", x->name, dt ? dt : "", dt ? " and " : "", t->dtype);
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

/*
 * Why a LayerNorm, op `last` of n, does not end the chain in its kernel
 * (aten_fuse.Fuser.defer_norm), or NULL: it must follow the chain, read a
 * floating tensor whose last dim is a multiple of 4 (ATen's vectorized
 * kernel, whose order the fused kernel repeats), have a weight wherever it
 * has a bias, and no op before it may read a strided input.
 */
static const char *norm_stops(const struct op *ops, int last, int n, char *buf, size_t len)
{
	const struct op *x = &ops[last];
	const struct tensor *in = x->n_in > 0 ? &x->in[0] : NULL;

	if (last != n - 1 || !last) {
		snprintf(buf, len, "%.80s ends a chain (kplan.torch fuses the ops before it into "
			 "its kernel; the ops after it start another)", x->name);
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
	for (int i = 0; i < last; i++)
		for (int j = 0; j < ops[i].n_in; j++)
			if (ops[i].in[j].dtype && !contiguous(&ops[i].in[j])) {
				snprintf(buf, len, "%.80s: a chain over strided tensors does not end in "
					 "a LayerNorm", x->name);
				return buf;
			}
	return NULL;
}

int kp__aten_view(struct kp__ana *a, const uint32_t *ch, int k, struct kp__cand *c)
{
	struct op *ops = NULL;
	const struct tensor *space = NULL;
	struct kp_strbuf chain = KP_STRBUF_INIT;
	int n = 0, rc = 0;
	int64_t last_tid = -1, last_start = -1;
	char why[320];
	const char *verdict = NULL;
	int normed = 0;

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
	/* the iteration space: the chain's largest tensor */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < ops[i].n_in; j++) {
			const struct tensor *t = &ops[i].in[j];

			if (t->dtype && (!space || numel(t) > numel(space)))
				space = t;
		}
	for (int i = 0; i < n && !verdict; i++) {
		if (!strcmp(ops[i].name, "aten::scalar_tensor"))
			continue;   /* a value baked into the kernel (defer_const) */
		if (is_layer_norm(ops[i].name)) {
			verdict = norm_stops(ops, i, n, why, sizeof(why));
			normed = !verdict;
			continue;
		}
		if (!space)
			snprintf(why, sizeof(why), "%.80s: no tensor input recorded", ops[i].name);
		verdict = space ? stops(&ops[i], space, why, sizeof(why)) : why;
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
	c->torch_verdict = verdict ? kp_arena_strdup(&a->arena, verdict) :
		normed ? "kplan.torch fuses this chain at capture, ending in the LayerNorm's "
			 "kernel (kt.open(fuse=\"exact\"), bit-identical)" :
		"kplan.torch fuses this chain at capture (kt.open(fuse=\"exact\"), bit-identical)";
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
