/*
 * planfile.c - plan file reader, writer and check (see planfile.h and
 * FORMAT.md).
 *
 * One table of fields per section drives both the reader and the writer, so
 * the two cannot drift apart; the writer validates by parsing what it wrote.
 * Depends on libc and common/{err,hash,strbuf}.c only: the runtime compiles
 * this file into libkplanrt.
 */
#include "planfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fileio.h"
#include "../common/hash.h"

/* ---------------------------------------------------------------------- */
/* names */

static const char *const decision_names[] = { "eager", "graph", "split" };
static const char *const reason_names[KP_PLAN_R__N] = {
	"launch-bound", "not-launch-bound", "predicted-loss", "blocker",
	"too-few-replays", "memory-budget", "ranks-differ",
};

const char *kp_plan_decision_name(int d)
{
	return d >= 0 && d < 3 ? decision_names[d] : NULL;
}

const char *kp_plan_reason_name(int r)
{
	return r >= 0 && r < KP_PLAN_R__N ? reason_names[r] : NULL;
}

/* ---------------------------------------------------------------------- */
/* field tables */

enum ftype {
	F_I32,      /* int */
	F_U32,      /* uint32_t */
	F_I64,      /* int64_t */
	F_HEX,      /* uint64_t as 16 lowercase hex digits */
	F_FIX,      /* double as fixed point with 4 decimals, >= 0 */
	F_STR,      /* char *, never NULL; "-" is the empty string */
	F_OSTR,     /* char *, "-" is NULL */
	F_CC,       /* int major at off, int minor right after it: "9.0" */
	F_DECISION, /* int, enum kp_plan_decision */
	F_REASON,   /* int, enum kp_plan_reason */
	F_NUMERICS, /* int, 1 "exact" or 0 "tolerant" */
	F_REAL,     /* double in lo..hi, "2.5e-05" (parse_real) */
};

#define F_OPTIONAL 1   /* may be absent (then as kp_plan_new / the parser leaves it);
			  the writer leaves out a NULL string, a negative int, a 0 real */
#define F_V2       2   /* a key of format version 2: unknown in a version 1 file */
#define F_V3       4   /* a key of format version 3: unknown in a version 1 or 2 file */

struct field {
	const char *key;
	int type;
	size_t off;
	int64_t lo, hi;        /* inclusive range of numbers */
	int flags;
};

#define P(m) offsetof(struct kp_plan, m)
#define R(m) offsetof(struct kp_plan_region, m)
#define U(m) offsetof(struct kp_plan_fusion, m)

static const struct field hard_fields[] = {
	{ "compute-capability", F_CC, P(cc_major), 1, 99, 0 },
	{ "cuda-major", F_I32, P(cuda_major), 1, 99, 0 },
	{ "for", F_OSTR, P(model), 0, 0, F_OPTIONAL | F_V3 },
	{ NULL, 0, 0, 0, 0, 0 },
};

static const struct field soft_fields[] = {
	{ "gpu-name", F_STR, P(gpu_name), 0, 0, 0 },
	{ "sm-count", F_I32, P(sm_count), 0, 100000, 0 },
	{ "driver-version", F_I32, P(driver_version), 0, 10000000, 0 },
	{ NULL, 0, 0, 0, 0, 0 },
};

static const struct field info_fields[] = {
	{ "tool-version", F_STR, P(tool_version), 0, 0, 0 },
	{ "source-run", F_I64, P(source_run), 0, INT64_C(1) << 53, 0 },
	{ "source-kind", F_STR, P(source_kind), 0, 0, 0 },
	{ "date", F_STR, P(date), 0, 0, 0 },
	{ "run-eager-ns", F_I64, P(run_eager_ns), 0, KP_PLAN_MAX_NS, 0 },
	{ "run-pred-ns", F_I64, P(run_pred_ns), 0, KP_PLAN_MAX_NS, 0 },
	{ "speedup-pred", F_FIX, P(speedup_pred), 0, 1000000, 0 },
	{ "graph-mem-budget-bytes", F_I64, P(mem_budget_bytes), 0, KP_PLAN_MAX_BYTES, 0 },
	{ "args-checked", F_I32, P(args_checked), 0, 1, F_OPTIONAL | F_V2 },
	{ NULL, 0, 0, 0, 0, 0 },
};

static const struct field region_fields[] = {
	{ "parent", F_OSTR, R(parent), 0, 0, F_OPTIONAL },
	{ "decision", F_DECISION, R(decision), 0, 0, 0 },
	{ "reason", F_REASON, R(reason), 0, 0, 0 },
	{ "reason-text", F_STR, R(reason_text), 0, 0, 0 },
	{ "fingerprint", F_HEX, R(fingerprint), 0, 0, 0 },
	{ "kernels", F_U32, R(kernels), 1, KP_PLAN_MAX_KERNELS, 0 },
	{ "nodes", F_U32, R(nodes), 1, KP_PLAN_MAX_KERNELS, 0 },
	{ "occurrences", F_U32, R(occurrences), 0, 1000000000, 0 },
	{ "shape-keys", F_U32, R(shape_keys), 1, KP_PLAN_MAX_SHAPES, 0 },
	{ "warmup", F_U32, R(warmup), 0, 1000, 0 },
	{ "break-even", F_U32, R(break_even), 0, 1000000000, 0 },
	{ "eager-ns", F_I64, R(eager_ns), 0, KP_PLAN_MAX_NS, 0 },
	{ "graph-ns", F_I64, R(graph_ns), 0, KP_PLAN_MAX_NS, 0 },
	{ "one-time-ns", F_I64, R(one_time_ns), 0, KP_PLAN_MAX_NS, 0 },
	{ "speedup-pred", F_FIX, R(speedup_pred), 0, 1000000, 0 },
	{ "mem-budget-bytes", F_I64, R(mem_budget_bytes), 0, KP_PLAN_MAX_BYTES, 0 },
	{ NULL, 0, 0, 0, 0, 0 },
};

static const struct field fusion_fields[] = {
	{ "region", F_STR, U(region), 0, 0, 0 },
	{ "first-kernel", F_U32, U(first_kernel), 0, KP_PLAN_MAX_KERNELS - 1, 0 },
	{ "kernels", F_U32, U(kernels), 2, KP_PLAN_MAX_KERNELS, 0 },
	{ "names", F_STR, U(names), 0, 0, 0 },
	{ "gain-ns", F_I64, U(gain_ns), 0, KP_PLAN_MAX_NS, 0 },
	{ "score", F_FIX, U(score), 0, 1000000000, 0 },
	{ "source", F_OSTR, U(source), 0, 0, 0 },
	{ "source-hash", F_HEX, U(source_hash), 0, 0, 0 },
	{ "numerics", F_NUMERICS, U(exact), 0, 0, F_V2 },
	{ "tolerance", F_REAL, U(tolerance), 0, 1, F_OPTIONAL | F_V2 },
	{ NULL, 0, 0, 0, 0, 0 },
};

#define MAX_FIELDS 16  /* bitmask of seen fields per section */

/* ---------------------------------------------------------------------- */
/* lifecycle */

struct kp_plan *kp_plan_new(void)
{
	struct kp_plan *p = calloc(1, sizeof(*p));

	if (p) {
		p->format_version = KP_PLAN_FORMAT_VERSION;
		p->args_checked = -1;
	}
	return p;
}

static void free_strings(void *obj, const struct field *f)
{
	for (; f->key; f++) {
		if (f->type == F_STR || f->type == F_OSTR) {
			char **s = (char **)((char *)obj + f->off);

			free(*s);
			*s = NULL;
		}
	}
}

void kp_plan_free(struct kp_plan *plan)
{
	size_t i;

	if (!plan)
		return;
	for (i = 0; i < plan->n_regions; i++) {
		free(plan->regions[i].label);
		free_strings(&plan->regions[i], region_fields);
		free(plan->regions[i].patches);
		free(plan->regions[i].shapes);
	}
	for (i = 0; i < plan->n_fusions; i++) {
		free_strings(&plan->fusions[i], fusion_fields);
		free(plan->fusions[i].args);
		free(plan->fusions[i].inexact_why);
	}
	free(plan->regions);
	free(plan->fusions);
	free_strings(plan, hard_fields);
	free_strings(plan, soft_fields);
	free_strings(plan, info_fields);
	free(plan);
}

const struct kp_plan_region *kp_plan_find(const struct kp_plan *plan, const char *label)
{
	size_t lo = 0, hi = plan ? plan->n_regions : 0;

	/* regions are sorted by label (the reader enforces it) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(plan->regions[mid].label, label);

		if (!c)
			return &plan->regions[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* string values: '%XX' escapes for '%', ']', control bytes and edge spaces */

static int needs_escape(const char *s, size_t i, size_t n)
{
	unsigned char c = (unsigned char)s[i];

	return c < 0x20 || c == 0x7f || c == '%' || c == ']' ||
	       (c == ' ' && (i == 0 || i + 1 == n));
}

/* Escaped s; raw: no "-" convention (region labels, never empty). */
static void put_str_as(struct kp_strbuf *sb, const char *s, int raw)
{
	size_t i, n;

	if (!raw && (!s || !*s)) {
		kp_strbuf_addch(sb, '-');
		return;
	}
	n = s ? strlen(s) : 0;
	if (!raw && !strcmp(s, "-")) {
		kp_strbuf_adds(sb, "%2D");
		return;
	}
	for (i = 0; i < n; i++) {
		if (needs_escape(s, i, n))
			kp_strbuf_addf(sb, "%%%02X", (unsigned char)s[i]);
		else
			kp_strbuf_addch(sb, s[i]);
	}
}

static void put_str(struct kp_strbuf *sb, const char *s)
{
	put_str_as(sb, s, 0);
}

int kp__plan_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int kp__plan_parse_hex64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n != 16)
		return -1;
	for (i = 0; i < 16; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return -1;
		v = v << 4 | (uint64_t)kp__plan_hexval(s[i]);
	}
	*out = v;
	return 0;
}

/*
 * Decode an escaped value of n bytes into a new string. NULL with *why set
 * on a bad escape, a control character or an over-long value.
 */
static char *decode_str(const char *s, size_t n, const char **why, int *oom)
{
	char *out;
	size_t i, o = 0;

	if (n > 3 * KP_PLAN_MAX_STR) {
		*why = "string longer than 1024 bytes";
		return NULL;
	}
	out = malloc(n + 1);
	if (!out) {
		*oom = 1;
		*why = "out of memory";
		return NULL;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n) {
				*why = "'%' escape cut short";
				goto bad;
			}
			h = kp__plan_hexval(s[i + 1]);
			l = kp__plan_hexval(s[i + 2]);
			if (h < 0 || l < 0) {
				*why = "'%' not followed by two hex digits";
				goto bad;
			}
			c = (unsigned char)(h * 16 + l);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f) {
			*why = "control character in string";
			goto bad;
		}
		out[o++] = (char)c;
	}
	out[o] = '\0';
	if (o > KP_PLAN_MAX_STR) {
		*why = "string longer than 1024 bytes";
		goto bad;
	}
	return out;
bad:
	free(out);
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* numbers (locale-independent) */

/* Whole of s[0..n) as a decimal int64 with optional '-'; 0 ok, -1 bad. */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	int neg = 0;

	if (n && s[0] == '-') {
		neg = 1;
		i = 1;
	}
	if (i >= n || n - i > 19)
		return -1;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return -1;
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* "123.4567" (1..4 decimals optional), >= 0; value in ten-thousandths. */
static int parse_fix(const char *s, size_t n, int64_t *out)
{
	size_t i = 0, dot = n;
	int64_t ip, frac = 0;
	int nd;

	for (i = 0; i < n; i++) {
		if (s[i] == '.') {
			dot = i;
			break;
		}
	}
	if (dot == 0 || dot > 12 || s[0] == '-' || parse_i64(s, dot, &ip))
		return -1;
	if (dot < n) {
		nd = (int)(n - dot - 1);
		if (nd < 1 || nd > 4)
			return -1;
		for (i = dot + 1; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			frac = frac * 10 + (s[i] - '0');
		}
		for (; nd < 4; nd++)
			frac *= 10;
	}
	*out = ip * 10000 + frac;
	return 0;
}

static void put_fix(struct kp_strbuf *sb, double v)
{
	long long t;

	if (!(v >= 0))  /* NaN or negative: the range check reports it */
		v = -1;
	t = v >= 9e17 ? (long long)9e17 : (long long)(v * 10000.0 + (v >= 0 ? 0.5 : -0.5));
	if (t < 0)
		kp_strbuf_addf(sb, "-%lld.%04lld", -t / 10000, -t % 10000);
	else
		kp_strbuf_addf(sb, "%lld.%04lld", t / 10000, t % 10000);
}

/* 10^0 .. 10^22: every one exact in a double */
static const double pow10_exact[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};
#define POW10_MAX 22
#define KP_REAL_MIN 1e-15   /* smallest non-zero F_REAL value */

/*
 * "DIGITS[.DIGITS][e[+-]DIGITS]" (>= 0, no locale): at most 15 significant
 * digits M and a decimal scale X with |X| <= 22, so that the value M * 10^X
 * is one correctly rounded operation on exact doubles: the same bits on
 * every machine. 0 ok, -1 bad.
 */
static int parse_real(const char *s, size_t n, double *out)
{
	uint64_t m = 0;
	size_t i = 0;
	int digits = 0, scale = 0, any = 0, ex = 0, eneg = 0, nd = 0;

	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, any = 1) {
		if (!m && s[i] == '0')
			continue;    /* leading zeros are not significant */
		if (++digits > 15)
			return -1;
		m = m * 10 + (uint64_t)(s[i] - '0');
	}
	if (!any)
		return -1;
	if (i < n && s[i] == '.') {
		for (i++, any = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++, any = 1) {
			scale--;
			if (!m && s[i] == '0')
				continue;
			if (++digits > 15)
				return -1;
			m = m * 10 + (uint64_t)(s[i] - '0');
		}
		if (!any)
			return -1;
	}
	if (i < n && s[i] == 'e') {
		if (++i < n && (s[i] == '-' || s[i] == '+'))
			eneg = s[i++] == '-';
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
			if (++nd > 3)
				return -1;
			ex = ex * 10 + (s[i] - '0');
		}
		if (!nd)
			return -1;
		scale += eneg ? -ex : ex;
	}
	if (i != n)
		return -1;
	if (!m) {
		*out = 0;
		return 0;
	}
	if (scale < -POW10_MAX || scale > POW10_MAX)
		return -1;
	*out = scale < 0 ? (double)m / pow10_exact[-scale] : (double)m * pow10_exact[scale];
	return 0;
}

/*
 * v with 6 significant digits, trailing zeros dropped: "2.5e-05"; 0 is "0";
 * outside KP_REAL_MIN..1e15 (or NaN) "nan", which the reader refuses.
 * Integer digits, no locale; what parse_real reads back of it prints the
 * same text again.
 */
static void put_real(struct kp_strbuf *sb, double v)
{
	long long m;
	int e = 0, k;
	char d[8];

	if (v == 0) {
		kp_strbuf_addch(sb, '0');
		return;
	}
	if (!(v >= KP_REAL_MIN && v <= 1e15)) {
		kp_strbuf_adds(sb, "nan");
		return;
	}
	/* v = m * 10^(e - 5), 100000 <= m < 1000000 */
	if (v >= 1)
		while (v >= pow10_exact[e + 1])
			e++;
	else
		while (v < 1.0 / pow10_exact[-e])
			e--;
	for (;;) {
		k = 5 - e;   /* -10..21 */
		m = (long long)((k >= 0 ? v * pow10_exact[k] : v / pow10_exact[-k]) + 0.5);
		if (m >= 1000000)
			e++;
		else if (m < 100000)
			e--;
		else
			break;
	}
	snprintf(d, sizeof(d), "%06lld", m);
	for (k = 5; k > 0 && d[k] == '0'; k--)
		d[k] = '\0';
	kp_strbuf_addch(sb, d[0]);
	if (d[1]) {
		kp_strbuf_addch(sb, '.');
		kp_strbuf_adds(sb, d + 1);
	}
	kp_strbuf_addf(sb, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

/* ---------------------------------------------------------------------- */
/* parser */

struct parser {
	const char *name;          /* for messages */
	const char *p, *end;       /* unread body */
	int line;                  /* current line number in the file */
	const char *ln;            /* current line */
	size_t ln_len;
	char ctx[160];             /* "region 'step': " or "" */
	struct kp_err *err;
	struct kp_plan *plan;
	size_t cap_regions, cap_fusions, cap_patches, cap_shapes;
};

static int perr(struct parser *ps, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int perr(struct parser *ps, int code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kp_err_set(ps->err, code, "%s:%d: %s%s", ps->name, ps->line, ps->ctx, msg);
}

/* Next line into ps->ln (without '\n'); 0 ok, 1 at end, <0 error. */
static int next_line(struct parser *ps)
{
	const char *nl;
	size_t n;

	if (ps->p >= ps->end)
		return 1;
	ps->line++;
	n = (size_t)(ps->end - ps->p);
	nl = memchr(ps->p, '\n', n);
	if (!nl)
		return perr(ps, KP_EFORMAT, "last line has no newline (file truncated?)");
	ps->ln = ps->p;
	ps->ln_len = (size_t)(nl - ps->p);
	ps->p = nl + 1;
	if (ps->ln_len > KP_PLAN_MAX_LINE)
		return perr(ps, KP_EFORMAT, "line longer than %d bytes", KP_PLAN_MAX_LINE);
	if (memchr(ps->ln, '\0', ps->ln_len))
		return perr(ps, KP_EFORMAT, "NUL byte in line");
	if (ps->ln_len && ps->ln[ps->ln_len - 1] == '\r')
		return perr(ps, KP_EFORMAT, "carriage return at end of line (CRLF line endings)");
	return 0;
}

static int skippable(const struct parser *ps)
{
	return ps->ln_len == 0 || ps->ln[0] == '#';
}

/* Store one value of field f into obj. */
static int set_field(struct parser *ps, void *obj, const struct field *f,
		     const char *v, size_t n)
{
	char *base = (char *)obj + f->off;
	const char *why = NULL;
	int64_t x;
	int oom = 0;

	switch (f->type) {
	case F_I32:
	case F_U32:
	case F_I64:
		if (parse_i64(v, n, &x))
			return perr(ps, KP_EFORMAT, "field '%s': expected an integer, found '%.*s'",
				    f->key, (int)(n > 40 ? 40 : n), v);
		if (x < f->lo || x > f->hi)
			return perr(ps, KP_EFORMAT, "field '%s': expected %lld..%lld, found %.*s",
				    f->key, (long long)f->lo, (long long)f->hi, (int)n, v);
		if (f->type == F_I32)
			*(int *)base = (int)x;
		else if (f->type == F_U32)
			*(uint32_t *)base = (uint32_t)x;
		else
			*(int64_t *)base = x;
		return 0;
	case F_FIX:
		if (parse_fix(v, n, &x))
			return perr(ps, KP_EFORMAT, "field '%s': expected a number like 1.2345, found '%.*s'",
				    f->key, (int)(n > 40 ? 40 : n), v);
		if (x < f->lo * 10000 || x > f->hi * 10000)
			return perr(ps, KP_EFORMAT, "field '%s': expected %lld..%lld, found %.*s",
				    f->key, (long long)f->lo, (long long)f->hi, (int)n, v);
		*(double *)base = (double)x / 10000.0;
		return 0;
	case F_REAL: {
		double d;

		if (parse_real(v, n, &d))
			return perr(ps, KP_EFORMAT, "field '%s': expected a number like 2.5e-05, found '%.*s'",
				    f->key, (int)(n > 40 ? 40 : n), v);
		if (d < (double)f->lo || d > (double)f->hi || (d > 0 && d < KP_REAL_MIN))
			return perr(ps, KP_EFORMAT, "field '%s': expected 0 or 1e-15..%lld, found %.*s",
				    f->key, (long long)f->hi, (int)(n > 40 ? 40 : n), v);
		*(double *)base = d;
		return 0;
	}
	case F_NUMERICS:
		if (n == 5 && !memcmp(v, "exact", 5)) {
			*(int *)base = 1;
			return 0;
		}
		if (n == 8 && !memcmp(v, "tolerant", 8)) {
			*(int *)base = 0;
			return 0;
		}
		return perr(ps, KP_EFORMAT, "field '%s': expected 'exact' or 'tolerant', found '%.*s'",
			    f->key, (int)(n > 40 ? 40 : n), v);
	case F_HEX:
		if (!kp__plan_parse_hex64(v, n, (uint64_t *)base))
			return 0;
		return perr(ps, KP_EFORMAT, "field '%s': expected 16 lowercase hex digits, found '%.*s'",
			    f->key, (int)(n > 40 ? 40 : n), v);
	case F_STR:
	case F_OSTR: {
		char **s = (char **)base, *d;

		if (n == 1 && v[0] == '-') {
			d = f->type == F_STR ? calloc(1, 1) : NULL;
			if (f->type == F_STR && !d)
				return perr(ps, KP_ENOMEM, "out of memory");
		} else {
			d = decode_str(v, n, &why, &oom);
			if (!d)
				return perr(ps, oom ? KP_ENOMEM : KP_EFORMAT, "field '%s': %s",
					    f->key, why);
		}
		free(*s);
		*s = d;
		return 0;
	}
	case F_CC: {
		int *cc = (int *)base;
		int64_t maj, min;
		const char *dot = memchr(v, '.', n);

		if (!dot || parse_i64(v, (size_t)(dot - v), &maj) || v[0] == '-' ||
		    parse_i64(dot + 1, n - (size_t)(dot - v) - 1, &min) || dot[1] == '-' ||
		    maj < f->lo || maj > f->hi || min < 0 || min > 9)
			return perr(ps, KP_EFORMAT, "field '%s': expected MAJOR.MINOR like 9.0, found '%.*s'",
				    f->key, (int)(n > 40 ? 40 : n), v);
		cc[0] = (int)maj;
		/* cc_minor follows cc_major in struct kp_plan */
		cc[1] = (int)min;
		return 0;
	}
	case F_DECISION:
	case F_REASON: {
		int k, lim = f->type == F_DECISION ? 3 : KP_PLAN_R__N;

		for (k = 0; k < lim; k++) {
			const char *nm = f->type == F_DECISION ? decision_names[k] : reason_names[k];

			if (strlen(nm) == n && !memcmp(nm, v, n)) {
				*(int *)base = k;
				return 0;
			}
		}
		return perr(ps, KP_EFORMAT, "field '%s': unknown value '%.*s'", f->key,
			    (int)(n > 40 ? 40 : n), v);
	}
	}
	return perr(ps, KP_EFORMAT, "internal: bad field type");
}

static int add_shape(struct parser *ps, struct kp_plan_region *r, const char *v, size_t n)
{
	static const struct field f = { "shape", F_HEX, 0, 0, 0, 0 };
	uint64_t h, *p;
	int rc;

	if (r->n_patches)
		return perr(ps, KP_EFORMAT, "field 'shape' after the patch lines (shape lines come first)");
	if ((rc = set_field(ps, &h, &f, v, n)))
		return rc;
	if (r->n_shapes && h <= r->shapes[r->n_shapes - 1])
		return perr(ps, KP_EFORMAT, "field 'shape': %016llx not after the previous shape "
			    "(ascending, no duplicates)", (unsigned long long)h);
	if (r->n_shapes >= r->shape_keys)
		return perr(ps, KP_EFORMAT, "field 'shape': more shape lines than shape-keys (%u)",
			    r->shape_keys);
	if (r->n_shapes == ps->cap_shapes) {
		size_t cap = ps->cap_shapes ? ps->cap_shapes * 2 : 4;

		p = realloc(r->shapes, cap * sizeof(*p));
		if (!p)
			return perr(ps, KP_ENOMEM, "out of memory");
		r->shapes = p;
		ps->cap_shapes = cap;
	}
	r->shapes[r->n_shapes++] = h;
	return 0;
}

static int add_patch(struct parser *ps, struct kp_plan_region *r, const char *v, size_t n)
{
	int64_t x[4];
	size_t i, s = 0, k = 0;
	struct kp_plan_patch *pp;
	int v2 = ps->plan->format_version >= 2, scalar = 0;
	const char *kind = NULL;

	for (i = 0; i <= n && k < 4; i++) {
		if (i == n || v[i] == ' ') {
			if (parse_i64(v + s, i - s, &x[k]) || x[k] < 0 || x[k] > KP_PLAN_MAX_KERNELS)
				break;
			k++;
			s = i + 1;
		}
	}
	/* version 2: then the kind, the rest of the line */
	if (k == 4 && v2 && i <= n) {
		kind = v + i;
		if ((size_t)(v + n - kind) == 7 && !memcmp(kind, "pointer", 7))
			scalar = 0;
		else if ((size_t)(v + n - kind) == 6 && !memcmp(kind, "scalar", 6))
			scalar = 1;
		else
			return perr(ps, KP_EFORMAT, "field 'patch': expected 'pointer' or 'scalar' after "
				    "the four integers, found '%.*s'", (int)(v + n - kind > 40 ? 40 : v + n - kind),
				    kind);
	}
	if (k != 4 || (i <= n && !kind) || (v2 && !kind))
		return perr(ps, KP_EFORMAT, "field 'patch': expected 'KERNEL PARAM OFFSET SIZE%s', "
			    "four non-negative integers%s, found '%.*s'", v2 ? " pointer|scalar" : "",
			    v2 ? " and the kind" : "", (int)(n > 60 ? 60 : n), v);
	if (x[0] >= r->kernels)
		return perr(ps, KP_EFORMAT, "field 'patch': kernel index %lld not below the "
			    "region's %u kernels", (long long)x[0], r->kernels);
	if (x[1] >= KP_PLAN_MAX_PARAM_BYTES / 4 + 1 || x[3] < 1 ||
	    x[2] + x[3] > KP_PLAN_MAX_PARAM_BYTES)
		return perr(ps, KP_EFORMAT, "field 'patch': parameter %lld at offset %lld size %lld "
			    "outside the %d-byte parameter buffer", (long long)x[1], (long long)x[2],
			    (long long)x[3], KP_PLAN_MAX_PARAM_BYTES);
	if (scalar && x[3] > 8)
		return perr(ps, KP_EFORMAT, "field 'patch': a scalar is 1..8 bytes, found size %lld",
			    (long long)x[3]);
	if (r->n_patches) {
		const struct kp_plan_patch *l = &r->patches[r->n_patches - 1];

		if ((uint64_t)x[0] < l->kernel || ((uint64_t)x[0] == l->kernel && (uint64_t)x[1] <= l->param))
			return perr(ps, KP_EFORMAT, "field 'patch': '%.*s' not after the previous slot "
				    "(slots are sorted by kernel and parameter, no duplicates)",
				    (int)(n > 60 ? 60 : n), v);
	}
	if (r->n_patches >= KP_PLAN_MAX_PATCHES)
		return perr(ps, KP_EFORMAT, "field 'patch': more than %d patch slots",
			    KP_PLAN_MAX_PATCHES);
	if (r->n_patches == ps->cap_patches) {
		size_t cap = ps->cap_patches ? ps->cap_patches * 2 : 8;

		pp = realloc(r->patches, cap * sizeof(*pp));
		if (!pp)
			return perr(ps, KP_ENOMEM, "out of memory");
		r->patches = pp;
		ps->cap_patches = cap;
	}
	pp = &r->patches[r->n_patches++];
	pp->kernel = (uint32_t)x[0];
	pp->param = (uint32_t)x[1];
	pp->offset = (uint32_t)x[2];
	pp->size = (uint32_t)x[3];
	pp->scalar = scalar;
	return 0;
}

/*
 * Read "key value" lines of one section into obj until the next section
 * header (left in ps->ln, returns 0) or the end (returns 1). region is set
 * for region sections (to collect 'patch' lines).
 */
static int read_section(struct parser *ps, void *obj, const struct field *fields,
			struct kp_plan_region *region)
{
	unsigned seen = 0;
	int head_line = ps->line, rc, i;

	for (;;) {
		const char *sp;
		size_t klen;
		const struct field *f;

		rc = next_line(ps);
		if (rc < 0)
			return rc;
		if (rc == 1 || (!skippable(ps) && ps->ln[0] == '['))
			break;
		if (skippable(ps))
			continue;
		sp = memchr(ps->ln, ' ', ps->ln_len);
		if (!sp || sp + 1 == ps->ln + ps->ln_len)
			return perr(ps, KP_EFORMAT, "expected 'key value', found '%.*s'",
				    (int)(ps->ln_len > 60 ? 60 : ps->ln_len), ps->ln);
		klen = (size_t)(sp - ps->ln);
		if (region && klen == 5 && !memcmp(ps->ln, "patch", 5)) {
			rc = add_patch(ps, region, sp + 1, ps->ln_len - klen - 1);
			if (rc)
				return rc;
			continue;
		}
		if (region && klen == 5 && !memcmp(ps->ln, "shape", 5)) {
			/* shape-keys bounds the count: it must come first */
			if (!region->shape_keys)
				return perr(ps, KP_EFORMAT, "field 'shape' before 'shape-keys'");
			rc = add_shape(ps, region, sp + 1, ps->ln_len - klen - 1);
			if (rc)
				return rc;
			continue;
		}
		for (f = fields, i = 0; f->key; f++, i++) {
			if (strlen(f->key) == klen && !memcmp(f->key, ps->ln, klen))
				break;
		}
		if (f->key && (f->flags & F_V2) && ps->plan->format_version < 2)
			return perr(ps, KP_EFORMAT, "unknown field '%s' (format version %d has none; "
				    "it came with version 2)", f->key, ps->plan->format_version);
		if (f->key && (f->flags & F_V3) && ps->plan->format_version < 3)
			return perr(ps, KP_EFORMAT, "unknown field '%s' (format version %d has none; "
				    "it came with version 3)", f->key, ps->plan->format_version);
		if (!f->key)
			return perr(ps, KP_EFORMAT, "unknown field '%.*s'",
				    (int)(klen > 60 ? 60 : klen), ps->ln);
		if (region && (region->n_patches || region->n_shapes))
			return perr(ps, KP_EFORMAT, "field '%s' after the shape/patch lines "
				    "(those come last)", f->key);
		if (seen & (1u << i))
			return perr(ps, KP_EFORMAT, "field '%s' given twice", f->key);
		seen |= 1u << i;
		rc = set_field(ps, obj, f, sp + 1, ps->ln_len - klen - 1);
		if (rc)
			return rc;
	}
	for (i = 0; fields[i].key; i++) {
		if (!(seen & (1u << i)) && !(fields[i].flags & F_OPTIONAL) &&
		    (!(fields[i].flags & F_V2) || ps->plan->format_version >= 2)) {
			int cur = ps->line;

			ps->line = head_line;
			perr(ps, KP_EFORMAT, "missing field '%s'", fields[i].key);
			ps->line = cur;
			return KP_EFORMAT;
		}
	}
	return rc;
}

/* ps->ln is "[name]" or "[name arg]": 0 when it matches name, arg returned. */
static int section_is(const struct parser *ps, const char *name, const char **arg, size_t *alen)
{
	size_t n = strlen(name);

	if (ps->ln_len < n + 2 || ps->ln[0] != '[' || ps->ln[ps->ln_len - 1] != ']' ||
	    memcmp(ps->ln + 1, name, n))
		return -1;
	if (ps->ln_len == n + 2) {
		*arg = NULL;
		*alen = 0;
		return 0;
	}
	if (ps->ln[n + 1] != ' ' || ps->ln_len < n + 4)
		return -1;
	*arg = ps->ln + n + 2;
	*alen = ps->ln_len - n - 3;
	return 0;
}

static int expect_section(struct parser *ps, int at_end, const char *name)
{
	const char *arg;
	size_t alen;

	if (at_end)
		return perr(ps, KP_EFORMAT, "missing section [%s]", name);
	if (section_is(ps, name, &arg, &alen) || arg)
		return perr(ps, KP_EFORMAT, "expected section [%s], found '%.*s'", name,
			    (int)(ps->ln_len > 60 ? 60 : ps->ln_len), ps->ln);
	return 0;
}

static int grow(struct parser *ps, void **arr, size_t *cap, size_t len, size_t esz,
		size_t max, const char *what)
{
	void *p;
	size_t ncap;

	if (len >= max)
		return perr(ps, KP_EFORMAT, "more than %zu %s", max, what);
	if (len < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	if (ncap > max)
		ncap = max;
	p = realloc(*arr, ncap * esz);
	if (!p)
		return perr(ps, KP_ENOMEM, "out of memory");
	memset((char *)p + *cap * esz, 0, (ncap - *cap) * esz);
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Rules that span fields or sections. */
static int cross_check(struct parser *ps)
{
	struct kp_plan *pl = ps->plan;
	size_t i;

	ps->ctx[0] = '\0';
	for (i = 0; i < pl->n_regions; i++) {
		const struct kp_plan_region *r = &pl->regions[i], *par;

		snprintf(ps->ctx, sizeof(ps->ctx), "region '%.100s': ", r->label);
		if (r->decision == KP_PLAN_GRAPH && r->reason != KP_PLAN_R_LAUNCH_BOUND)
			return perr(ps, KP_EFORMAT, "decision 'graph' needs reason 'launch-bound', found '%s'",
				    reason_names[r->reason]);
		if (r->decision != KP_PLAN_GRAPH && r->reason == KP_PLAN_R_LAUNCH_BOUND)
			return perr(ps, KP_EFORMAT, "reason 'launch-bound' only goes with decision 'graph'");
		if (r->decision == KP_PLAN_SPLIT && r->reason != KP_PLAN_R_BLOCKER)
			return perr(ps, KP_EFORMAT, "decision 'split' needs reason 'blocker'");
		if (r->reason == KP_PLAN_R_RANKS_DIFFER && pl->format_version < 4)
			return perr(ps, KP_EFORMAT, "reason 'ranks-differ' in a version %d plan (it"
				    " came with version 4)", pl->format_version);
		if (r->nodes < r->kernels)
			return perr(ps, KP_EFORMAT, "field 'nodes': %u is less than the %u kernels",
				    r->nodes, r->kernels);
		if (r->decision != KP_PLAN_GRAPH && r->n_patches)
			return perr(ps, KP_EFORMAT, "patch slots on a region that is not a graph");
		if (!r->parent)
			continue;
		par = kp_plan_find(pl, r->parent);
		if (!par || par == r)
			return perr(ps, KP_EFORMAT, "field 'parent': no other region is labelled '%.100s'",
				    r->parent);
		if (par->decision != KP_PLAN_SPLIT)
			return perr(ps, KP_EFORMAT, "field 'parent': region '%.100s' is not split",
				    r->parent);
		if (par->parent)
			return perr(ps, KP_EFORMAT, "field 'parent': region '%.100s' is itself a part "
				    "(one level of splitting only)", r->parent);
	}
	for (i = 0; i < pl->n_fusions; i++) {
		const struct kp_plan_fusion *u = &pl->fusions[i];
		const struct kp_plan_region *r = kp_plan_find(pl, u->region);

		snprintf(ps->ctx, sizeof(ps->ctx), "fusion %u: ", u->id);
		if (!r)
			return perr(ps, KP_EFORMAT, "field 'region': no region is labelled '%.100s'",
				    u->region);
		if ((uint64_t)u->first_kernel + u->kernels > r->kernels)
			return perr(ps, KP_EFORMAT, "kernels %u..%u outside region '%.100s' (%u kernels)",
				    u->first_kernel, u->first_kernel + u->kernels - 1, u->region, r->kernels);
		if (!u->source != !u->source_hash)
			return perr(ps, KP_EFORMAT, "field 'source-hash': must be 0000000000000000 "
				    "exactly when source is '-'");
		if (u->source && (strchr(u->source, '/') || u->source[0] == '.'))
			return perr(ps, KP_EFORMAT, "field 'source': '%.100s' must be a plain file name "
				    "next to the plan (no '/', no leading '.')", u->source);
		if (u->exact && u->tolerance != 0)
			return perr(ps, KP_EFORMAT, "field 'tolerance': only with 'numerics tolerant' "
				    "(an exact group's output is the chain's, bit for bit)");
		if (!u->exact && !(u->tolerance > 0))
			return perr(ps, KP_EFORMAT, "field 'tolerance': missing or 0, and 'numerics "
				    "tolerant' needs one, 1e-15..1");
	}
	ps->ctx[0] = '\0';
	return 0;
}

static int parse_body(struct parser *ps)
{
	struct kp_plan *pl = ps->plan;
	const char *arg;
	size_t alen;
	int rc, at_end;

	/* first section header */
	do {
		rc = next_line(ps);
	} while (rc == 0 && skippable(ps));
	if (rc < 0)
		return rc;
	if ((rc = expect_section(ps, rc == 1, "hard")))
		return rc;
	strcpy(ps->ctx, "[hard] ");
	if ((at_end = read_section(ps, pl, hard_fields, NULL)) < 0)
		return at_end;
	ps->ctx[0] = '\0';
	if ((rc = expect_section(ps, at_end, "soft")))
		return rc;
	strcpy(ps->ctx, "[soft] ");
	if ((at_end = read_section(ps, pl, soft_fields, NULL)) < 0)
		return at_end;
	ps->ctx[0] = '\0';
	if ((rc = expect_section(ps, at_end, "info")))
		return rc;
	strcpy(ps->ctx, "[info] ");
	if ((at_end = read_section(ps, pl, info_fields, NULL)) < 0)
		return at_end;
	ps->ctx[0] = '\0';

	while (!at_end) {
		if (!section_is(ps, "region", &arg, &alen) && arg) {
			struct kp_plan_region *r;
			const char *why = NULL;
			char *label;
			int oom = 0;

			if (pl->n_fusions)
				return perr(ps, KP_EFORMAT, "[region] after [fusion] sections");
			if ((rc = grow(ps, (void **)&pl->regions, &ps->cap_regions, pl->n_regions,
				       sizeof(*pl->regions), KP_PLAN_MAX_REGIONS, "regions")))
				return rc;
			label = decode_str(arg, alen, &why, &oom);
			if (!label)
				return perr(ps, oom ? KP_ENOMEM : KP_EFORMAT, "region label: %s", why);
			r = &pl->regions[pl->n_regions++];
			r->label = label;
			ps->cap_patches = ps->cap_shapes = 0;
			if (pl->n_regions > 1 && strcmp(pl->regions[pl->n_regions - 2].label, label) >= 0)
				return perr(ps, KP_EFORMAT, "region '%.100s' not after '%.100s' (regions are "
					    "sorted by label, each label once)", label,
					    pl->regions[pl->n_regions - 2].label);
			snprintf(ps->ctx, sizeof(ps->ctx), "region '%.100s': ", label);
			at_end = read_section(ps, r, region_fields, r);
		} else if (!section_is(ps, "fusion", &arg, &alen) && arg) {
			struct kp_plan_fusion *u;
			int64_t id;

			if (parse_i64(arg, alen, &id) || id < 1 || id > UINT32_MAX)
				return perr(ps, KP_EFORMAT, "fusion id: expected a positive integer, found '%.*s'",
					    (int)(alen > 40 ? 40 : alen), arg);
			if ((rc = grow(ps, (void **)&pl->fusions, &ps->cap_fusions, pl->n_fusions,
				       sizeof(*pl->fusions), KP_PLAN_MAX_FUSIONS, "fusion groups")))
				return rc;
			u = &pl->fusions[pl->n_fusions++];
			u->id = (uint32_t)id;
			u->exact = 1;   /* version 1 has no 'numerics': its groups are exact */
			if (pl->n_fusions > 1 && pl->fusions[pl->n_fusions - 2].id >= u->id)
				return perr(ps, KP_EFORMAT, "fusion %u not after fusion %u (ascending ids)",
					    u->id, pl->fusions[pl->n_fusions - 2].id);
			snprintf(ps->ctx, sizeof(ps->ctx), "fusion %u: ", u->id);
			at_end = read_section(ps, u, fusion_fields, NULL);
		} else {
			return perr(ps, KP_EFORMAT, "expected [region LABEL] or [fusion ID], found '%.*s'",
				    (int)(ps->ln_len > 60 ? 60 : ps->ln_len), ps->ln);
		}
		if (at_end < 0)
			return at_end;
		ps->ctx[0] = '\0';
	}
	return cross_check(ps);
}

/* Header line "key value\n" at *p; value returned. 0 ok. */
static int header_line(struct parser *ps, const char *key, const char **val, size_t *vlen)
{
	size_t kl = strlen(key);
	int rc;

	if (ps->p < ps->end && !memchr(ps->p, '\n', (size_t)(ps->end - ps->p))) {
		ps->line++;
		return perr(ps, KP_EFORMAT, "file truncated in the header, at '%s'", key);
	}
	rc = next_line(ps);

	if (rc == 1)
		return perr(ps, KP_EFORMAT, "file truncated in the header: missing '%s'", key);
	if (rc < 0)
		return rc;
	if (ps->ln_len <= kl + 1 || memcmp(ps->ln, key, kl) || ps->ln[kl] != ' ')
		return perr(ps, KP_EFORMAT, "header: expected '%s ...', found '%.*s'", key,
			    (int)(ps->ln_len > 60 ? 60 : ps->ln_len), ps->ln);
	*val = ps->ln + kl + 1;
	*vlen = ps->ln_len - kl - 1;
	return 0;
}

struct kp_plan *kp_plan_parse(const char *buf, size_t len, const char *name,
			      struct kp_err *err)
{
	struct parser ps;
	const char *v;
	size_t vn;
	int64_t x, body_len;
	uint64_t want = 0, got;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.name = name ? name : "plan";
	ps.err = err;
	ps.p = buf;
	ps.end = buf + len;
	if (!buf || len == 0) {
		kp_err_set(err, KP_EFORMAT, "%s: empty file, expected a kplan plan", ps.name);
		return NULL;
	}
	if (len > KP_PLAN_MAX_FILE_BYTES) {
		kp_err_set(err, KP_EFORMAT, "%s: %zu bytes, larger than the %u-byte limit of a plan file",
			   ps.name, len, KP_PLAN_MAX_FILE_BYTES);
		return NULL;
	}
	ps.plan = kp_plan_new();
	if (!ps.plan) {
		kp_err_set(err, KP_ENOMEM, "%s: out of memory", ps.name);
		return NULL;
	}
	/* header: magic and version first, so a future format is named as such */
	if ((rc = header_line(&ps, KP_PLAN_MAGIC, &v, &vn))) {
		if (ps.line == 1 && (len < sizeof(KP_PLAN_MAGIC) ||
				     memcmp(buf, KP_PLAN_MAGIC " ", sizeof(KP_PLAN_MAGIC))))
			kp_err_set(err, KP_EFORMAT, "%s:1: not a kplan plan file (expected "
				   "'" KP_PLAN_MAGIC " %d' on the first line)", ps.name,
				   KP_PLAN_FORMAT_BASE);
		goto fail;
	}
	if (parse_i64(v, vn, &x) || x < 1) {
		perr(&ps, KP_EFORMAT, "header: format version: expected a positive integer, found '%.*s'",
		     (int)(vn > 40 ? 40 : vn), v);
		goto fail;
	}
	if (x > KP_PLAN_FORMAT_VERSION) {
		perr(&ps, KP_EVERSION, "unknown plan format version %lld (this kplan reads versions "
		     "1 to %d)", (long long)x, KP_PLAN_FORMAT_VERSION);
		goto fail;
	}
	/* the fields version x has, with version 1's defaults for the rest */
	ps.plan->format_version = (int)x;
	if (header_line(&ps, "body-bytes", &v, &vn))
		goto fail;
	if (parse_i64(v, vn, &body_len) || body_len < 1 || body_len > (int64_t)KP_PLAN_MAX_FILE_BYTES) {
		perr(&ps, KP_EFORMAT, "header: field 'body-bytes': expected 1..%u, found '%.*s'",
		     KP_PLAN_MAX_FILE_BYTES, (int)(vn > 40 ? 40 : vn), v);
		goto fail;
	}
	if (header_line(&ps, "body-hash", &v, &vn))
		goto fail;
	if (kp__plan_parse_hex64(v, vn, &want)) {
		perr(&ps, KP_EFORMAT, "header: field 'body-hash': expected 16 lowercase hex digits, found '%.*s'",
		     (int)(vn > 40 ? 40 : vn), v);
		goto fail;
	}
	if ((int64_t)(ps.end - ps.p) < body_len) {
		perr(&ps, KP_EFORMAT, "file truncated: header says the body has %lld bytes, found %zu",
		     (long long)body_len, (size_t)(ps.end - ps.p));
		goto fail;
	}
	if ((int64_t)(ps.end - ps.p) > body_len) {
		perr(&ps, KP_EFORMAT, "%zu bytes after the %lld-byte body the header announces "
		     "(file appended to or edited)", (size_t)(ps.end - ps.p) - (size_t)body_len,
		     (long long)body_len);
		goto fail;
	}
	got = kp_hash64(ps.p, (size_t)body_len, KP_HASH_SEED);
	if (got != want) {
		perr(&ps, KP_EFORMAT, "body checksum mismatch: header says %016llx, body hashes to "
		     "%016llx (file corrupted, or edited by hand: regenerate it with 'kplan plan')",
		     (unsigned long long)want, (unsigned long long)got);
		goto fail;
	}
	ps.plan->body_hash = want;
	if (parse_body(&ps))
		goto fail;
	/* version 3 is a pinned plan: a flipped version digit is not a no-op */
	if (ps.plan->format_version == 3 && !ps.plan->model) {
		kp_err_set(err, KP_EFORMAT, "%s: [hard] field 'for' missing or '-': format "
			   "version 3 is written only for a plan pinned to a model", ps.name);
		goto fail;
	}
	return ps.plan;
fail:
	kp_plan_free(ps.plan);
	return NULL;
}

int kp_plan_read(const char *path, char **out, size_t *out_len, struct kp_err *err)
{
	/* a link to a plan is fine; a FIFO or a device is not (fileio.h) */
	return kp_file_read(AT_FDCWD, path, 0, KP_PLAN_MAX_FILE_BYTES, out, out_len, err);
}

void kp_plan_dir(const char *plan_path, struct kp_strbuf *dir)
{
	const char *slash = strrchr(plan_path, '/');

	if (!slash)
		kp_strbuf_adds(dir, ".");
	else if (slash == plan_path)
		kp_strbuf_adds(dir, "/");
	else
		kp_strbuf_add(dir, plan_path, (size_t)(slash - plan_path));
}

struct kp_plan *kp_plan_load(const char *path, struct kp_err *err)
{
	struct kp_plan *plan;
	char *buf;
	size_t n;

	if (kp_plan_read(path, &buf, &n, err))
		return NULL;
	plan = kp_plan_parse(buf, n, path, err);
	free(buf);
	return plan;
}

/* ---------------------------------------------------------------------- */
/* writer */

static void put_fields(struct kp_strbuf *sb, const void *obj, const struct field *f)
{
	const char *base;

	for (; f->key; f++) {
		base = (const char *)obj + f->off;
		if ((f->flags & F_OPTIONAL) &&
		    ((f->type == F_OSTR && !*(char *const *)base) ||
		     (f->type == F_I32 && *(const int *)base < 0) ||
		     (f->type == F_REAL && *(const double *)base == 0)))
			continue;
		kp_strbuf_adds(sb, f->key);
		kp_strbuf_addch(sb, ' ');
		switch (f->type) {
		case F_I32:
			kp_strbuf_addf(sb, "%d", *(const int *)base);
			break;
		case F_U32:
			kp_strbuf_addf(sb, "%u", *(const uint32_t *)base);
			break;
		case F_I64:
			kp_strbuf_addf(sb, "%lld", (long long)*(const int64_t *)base);
			break;
		case F_HEX:
			kp_strbuf_addf(sb, "%016llx", (unsigned long long)*(const uint64_t *)base);
			break;
		case F_FIX:
			put_fix(sb, *(const double *)base);
			break;
		case F_REAL:
			put_real(sb, *(const double *)base);
			break;
		case F_NUMERICS:
			kp_strbuf_adds(sb, *(const int *)base ? "exact" : "tolerant");
			break;
		case F_STR:
		case F_OSTR:
			put_str(sb, *(char *const *)base);
			break;
		case F_CC:
			kp_strbuf_addf(sb, "%d.%d", ((const int *)base)[0], ((const int *)base)[1]);
			break;
		case F_DECISION: {
			const char *nm = kp_plan_decision_name(*(const int *)base);

			kp_strbuf_adds(sb, nm ? nm : "?");
			break;
		}
		case F_REASON: {
			const char *nm = kp_plan_reason_name(*(const int *)base);

			kp_strbuf_adds(sb, nm ? nm : "?");
			break;
		}
		}
		kp_strbuf_addch(sb, '\n');
	}
}

static int cmp_region(const void *a, const void *b)
{
	const struct kp_plan_region *x = a, *y = b;

	return strcmp(x->label ? x->label : "", y->label ? y->label : "");
}

static int cmp_patch(const void *a, const void *b)
{
	const struct kp_plan_patch *x = a, *y = b;

	if (x->kernel != y->kernel)
		return x->kernel < y->kernel ? -1 : 1;
	return x->param < y->param ? -1 : x->param > y->param;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_fusion(const void *a, const void *b)
{
	const struct kp_plan_fusion *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* The oldest version that holds what the plan says: 4 for a region eager
 * because the ranks differ, 3 for a pinned plan, else the base. */
static int write_version(const struct kp_plan *plan)
{
	for (size_t i = 0; i < plan->n_regions; i++)
		if (plan->regions[i].reason == KP_PLAN_R_RANKS_DIFFER)
			return 4;
	return plan->model && plan->model[0] ? 3 : KP_PLAN_FORMAT_BASE;
}

int kp_plan_write(struct kp_plan *plan, struct kp_strbuf *out, struct kp_err *err)
{
	struct kp_strbuf body = KP_STRBUF_INIT, all = KP_STRBUF_INIT;
	struct kp_plan *check;
	size_t i, j;
	int rc = 0;

	if (plan->n_regions > KP_PLAN_MAX_REGIONS || plan->n_fusions > KP_PLAN_MAX_FUSIONS)
		return kp_err_set(err, KP_EINVAL, "plan has %zu regions and %zu fusion groups, "
				  "more than the format allows (%d, %d)", plan->n_regions,
				  plan->n_fusions, KP_PLAN_MAX_REGIONS, KP_PLAN_MAX_FUSIONS);
	if (plan->n_regions)
		qsort(plan->regions, plan->n_regions, sizeof(*plan->regions), cmp_region);
	if (plan->n_fusions)
		qsort(plan->fusions, plan->n_fusions, sizeof(*plan->fusions), cmp_fusion);

	kp_strbuf_addf(&body, "# kplan plan: generated by 'kplan plan'; edits break the body-hash.\n"
		       "# spec: plan/FORMAT.md\n\n");
	kp_strbuf_adds(&body, "[hard]\n");
	put_fields(&body, plan, hard_fields);
	kp_strbuf_adds(&body, "\n[soft]\n");
	put_fields(&body, plan, soft_fields);
	kp_strbuf_adds(&body, "\n[info]\n");
	put_fields(&body, plan, info_fields);
	for (i = 0; i < plan->n_regions; i++) {
		struct kp_plan_region *r = &plan->regions[i];

		if (!r->nodes)
			r->nodes = r->kernels;  /* not set by the caller: kernels only */
		if (r->n_patches)
			qsort(r->patches, r->n_patches, sizeof(*r->patches), cmp_patch);
		kp_strbuf_adds(&body, "\n[region ");
		put_str_as(&body, r->label, 1);  /* empty: the reader rejects it */
		kp_strbuf_adds(&body, "]\n");
		put_fields(&body, r, region_fields);
		if (r->n_shapes)
			qsort(r->shapes, r->n_shapes, sizeof(*r->shapes), cmp_u64);
		for (j = 0; j < r->n_shapes; j++)
			kp_strbuf_addf(&body, "shape %016llx\n", (unsigned long long)r->shapes[j]);
		for (j = 0; j < r->n_patches; j++)
			kp_strbuf_addf(&body, "patch %u %u %u %u %s\n", r->patches[j].kernel,
				       r->patches[j].param, r->patches[j].offset, r->patches[j].size,
				       r->patches[j].scalar ? "scalar" : "pointer");
	}
	for (i = 0; i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];

		if (!u->exact && u->tolerance == 0)
			u->exact = 1;   /* not set (a zeroed group): exact, as the chain */
		kp_strbuf_addf(&body, "\n[fusion %u]\n", u->id);
		put_fields(&body, u, fusion_fields);
	}
	if (body.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory writing the plan");
		goto out;
	}
	plan->body_hash = kp_hash64(body.buf, body.len, KP_HASH_SEED);
	kp_strbuf_addf(&all, KP_PLAN_MAGIC " %d\nbody-bytes %zu\nbody-hash %016llx\n",
		       write_version(plan), body.len, (unsigned long long)plan->body_hash);
	kp_strbuf_add(&all, body.buf, body.len);
	if (all.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory writing the plan");
		goto out;
	}
	/* what we write must read back: the reader's checks are the writer's */
	check = kp_plan_parse(all.buf, all.len, "plan being written", err);
	if (!check) {
		rc = err ? (err->code = KP_EINVAL) : KP_EINVAL;
		goto out;
	}
	kp_plan_free(check);
	kp_strbuf_add(out, all.buf, all.len);
	if (out->oom)
		rc = kp_err_set(err, KP_ENOMEM, "out of memory writing the plan");
out:
	kp_strbuf_release(&body);
	kp_strbuf_release(&all);
	return rc;
}

int kp_plan_write_file(struct kp_plan *plan, FILE *f, struct kp_err *err)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	int rc = kp_plan_write(plan, &sb, err);

	if (!rc && (fwrite(sb.buf, 1, sb.len, f) != sb.len || fflush(f)))
		rc = kp_err_set(err, KP_EIO, "writing the plan failed: %s", strerror(errno));
	kp_strbuf_release(&sb);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* check */

void kp_gpu_desc_init(struct kp_gpu_desc *gpu)
{
	gpu->name = NULL;
	gpu->cc_major = gpu->cc_minor = -1;
	gpu->sm_count = -1;
	gpu->driver_version = -1;
	gpu->cuda_major = -1;
	gpu->model = NULL;
}

static void item(struct kp_plan_report *rep, int sev, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void item(struct kp_plan_report *rep, int sev, const char *key, const char *fmt, ...)
{
	struct kp_plan_check_item *it;
	va_list ap;

	if (sev > rep->verdict)
		rep->verdict = sev;
	if (rep->n_items >= KP_PLAN_CHECK_MAX_ITEMS)
		return;
	it = &rep->items[rep->n_items++];
	it->severity = sev;
	snprintf(it->key, sizeof(it->key), "%s", key);
	va_start(ap, fmt);
	vsnprintf(it->msg, sizeof(it->msg), fmt, ap);
	va_end(ap);
}

int kp_plan_check(const struct kp_plan *plan, const struct kp_gpu_desc *gpu,
		  struct kp_plan_report *rep)
{
	const int HARD = KP_PLAN_NOT_APPLICABLE, SOFT = KP_PLAN_SOFT_MISMATCH;
	int cuda_major;

	memset(rep, 0, sizeof(*rep));
	/* hard keys */
	if (gpu->cc_major < 0 || gpu->cc_minor < 0)
		item(rep, HARD, "compute-capability", "plan wants %d.%d, gpu's is unknown",
		     plan->cc_major, plan->cc_minor);
	else if (gpu->cc_major != plan->cc_major || gpu->cc_minor != plan->cc_minor)
		item(rep, HARD, "compute-capability", "plan wants %d.%d, gpu has %d.%d",
		     plan->cc_major, plan->cc_minor, gpu->cc_major, gpu->cc_minor);
	cuda_major = gpu->cuda_major >= 0 ? gpu->cuda_major :
		     gpu->driver_version > 0 ? gpu->driver_version / 1000 : -1;
	if (cuda_major < 0)
		item(rep, HARD, "cuda-major", "plan wants CUDA %d, gpu's CUDA version is unknown",
		     plan->cuda_major);
	else if (cuda_major != plan->cuda_major)
		item(rep, HARD, "cuda-major", "plan wants CUDA %d, gpu has CUDA %d",
		     plan->cuda_major, cuda_major);
	if (plan->model && plan->model[0]) {
		if (!gpu->model || !gpu->model[0])
			item(rep, 0, "for", "plan was made for model '%.80s', the application's "
			     "is not given (not compared)", plan->model);
		else if (strcmp(gpu->model, plan->model))
			item(rep, HARD, "for", "plan was made for model '%.80s', the application "
			     "runs '%.80s'", plan->model, gpu->model);
	}
	/* soft keys; a key the plan does not know (empty / 0) is not compared */
	if (plan->gpu_name && plan->gpu_name[0]) {
		if (!gpu->name)
			item(rep, 0, "gpu-name", "plan was made on '%.80s', gpu's name is unknown",
			     plan->gpu_name);
		else if (strcmp(gpu->name, plan->gpu_name))
			item(rep, SOFT, "gpu-name", "plan was made on '%.80s', gpu is '%.80s'",
			     plan->gpu_name, gpu->name);
	}
	if (plan->sm_count > 0) {
		if (gpu->sm_count < 0)
			item(rep, 0, "sm-count", "plan was made with %d SMs, gpu's count is unknown",
			     plan->sm_count);
		else if (gpu->sm_count != plan->sm_count)
			item(rep, SOFT, "sm-count", "plan was made with %d SMs, gpu has %d",
			     plan->sm_count, gpu->sm_count);
	}
	if (plan->driver_version > 0) {
		if (gpu->driver_version < 0)
			item(rep, 0, "driver-version", "plan was made with driver %d, gpu's is unknown",
			     plan->driver_version);
		else if (gpu->driver_version != plan->driver_version)
			item(rep, SOFT, "driver-version", "plan was made with driver %d, gpu has %d",
			     plan->driver_version, gpu->driver_version);
	}
	return rep->verdict;
}
