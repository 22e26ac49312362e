/* kname.c - see kname.h. */
#include "kname.h"
#include "hash.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Copy [b, e) into out as a string. */
static char *copy_span(const char *b, const char *e, char *out, size_t n)
{
	size_t len = (size_t)(e - b);

	if (len >= n)
		len = n - 1;
	memcpy(out, b, len);
	out[len] = '\0';
	return out;
}

/* Read a <source-name> length; returns chars consumed by the digits, 0 if none. */
static size_t read_len(const char *p, size_t *len)
{
	size_t i = 0, v = 0;

	while (isdigit((unsigned char)p[i]) && i < 6)
		v = v * 10 + (size_t)(p[i++] - '0');
	*len = v;
	return i;
}

/*
 * Skip one balanced group that starts after an opening 'I' (template args):
 * returns the pointer after its closing 'E', or NULL when malformed.
 * Source names are skipped by their length, since their text may hold 'E'.
 */
static const char *skip_group(const char *p)
{
	int depth = 1;
	size_t len, nd;

	while (*p && depth > 0) {
		if (isdigit((unsigned char)*p)) {
			nd = read_len(p, &len);
			if (strnlen(p + nd, len) < len)
				return NULL;
			p += nd + len;
			continue;
		}
		switch (*p) {
		case 'L':
			/* literal L<builtin type>[n]<digits>E: its digits are no length */
			if (islower((unsigned char)p[1])) {
				p += 2;
				if (*p == 'n')
					p++;
				while (isalnum((unsigned char)*p) && *p != 'E')
					p++;
				if (*p == 'E')
					p++;
				continue;
			}
			depth++;
			break;
		case 'I': case 'N': case 'X': case 'J':
			depth++;
			break;
		case 'E':
			depth--;
			break;
		case 'S': case 'T':
			/* S_, S<seq>_, T_, T<n>_, or two-letter St/Sa/Ss... */
			if (*p == 'S' && islower((unsigned char)p[1])) {
				p += 2;
				continue;
			}
			p++;
			while (*p && *p != '_' && (isdigit((unsigned char)*p) || isupper((unsigned char)*p)))
				p++;
			if (*p == '_')
				p++;
			continue;
		}
		p++;
	}
	return depth == 0 ? p : NULL;
}

/* Identifier of an Itanium-mangled name; NULL when not understood. */
static char *mangled_ident(const char *s, char *out, size_t n)
{
	const char *p = s + 2, *last = NULL;
	size_t last_len = 0, len, nd;

	if (*p == 'L')  /* internal linkage marker */
		p++;
	if (*p != 'N') {
		nd = read_len(p, &len);
		if (!nd || strnlen(p + nd, len) < len)
			return NULL;
		return copy_span(p + nd, p + nd + len, out, n);
	}
	p++;
	while (*p == 'r' || *p == 'V' || *p == 'K')
		p++;
	while (*p && *p != 'E') {
		if (isdigit((unsigned char)*p)) {
			nd = read_len(p, &len);
			if (strnlen(p + nd, len) < len)
				return NULL;
			last = p + nd;
			last_len = len;
			p += nd + len;
		} else if (*p == 'I') {
			p = skip_group(p + 1);
			if (!p)
				return NULL;
		} else if (*p == 'S') {
			if (islower((unsigned char)p[1])) {
				p += 2;
				continue;
			}
			p++;
			while (*p && *p != '_')
				p++;
			if (*p)
				p++;
		} else if (*p == 'L') {
			p++;  /* internal-linkage name inside a nested name */
		} else {
			return NULL;  /* ctor/dtor/operator names etc.: not kernels */
		}
	}
	if (!last || *p != 'E')
		return NULL;
	return copy_span(last, last + last_len, out, n);
}

/*
 * name into buf (n > 0 bytes, NUL-terminated, truncated) without its
 * "(anonymous namespace)::" qualifiers, whose space and parentheses mislead
 * the name parsers below. Returns the length written.
 */
static size_t drop_anon(const char *name, char *buf, size_t n)
{
	static const char anon[] = "(anonymous namespace)::";
	size_t i = 0;

	while (*name && i + 1 < n) {
		if (!strncmp(name, anon, sizeof(anon) - 1)) {
			name += sizeof(anon) - 1;
			continue;
		}
		buf[i++] = *name++;
	}
	buf[i] = '\0';
	return i;
}

char *kp_kernel_short_name(const char *name, char *out, size_t n)
{
	char buf[1024];
	const char *s = buf, *end, *p, *begin;

	if (!n)
		return out;
	drop_anon(name, buf, sizeof(buf));
	/* the qualified identifier ends at the first '<' or '(' */
	for (end = s; *end && *end != '<' && *end != '('; end++)
		;
	/* skip a return type: the last space before end */
	begin = s;
	for (p = s; p < end; p++) {
		if (*p == ' ')
			begin = p + 1;
	}
	/* drop namespace qualifiers */
	for (p = begin; p + 1 < end; p++) {
		if (p[0] == ':' && p[1] == ':')
			begin = p + 2;
	}
	if (end == begin)
		return copy_span(s, s + strlen(s), out, n);
	return copy_span(begin, end, out, n);
}

char *kp_kernel_ident(const char *name, char *out, size_t n)
{
	if (!n)
		return out;
	if (!name)
		name = "";
	if (name[0] == '_' && name[1] == 'Z' && mangled_ident(name, out, n))
		return out;
	if (name[0] == '_' && name[1] == 'Z')
		return copy_span(name, name + strlen(name), out, n);
	return kp_kernel_short_name(name, out, n);
}

uint64_t kp_kernel_sig(const char *name, const uint32_t grid[3],
		       const uint32_t block[3], uint32_t dynamic_smem)
{
	char ident[512], buf[640];
	int len;

	kp_kernel_ident(name, ident, sizeof(ident));
	len = snprintf(buf, sizeof(buf), "%s|%u,%u,%u|%u,%u,%u|%u", ident,
		       grid[0], grid[1], grid[2], block[0], block[1], block[2], dynamic_smem);
	if (len < 0)
		len = 0;
	if ((size_t)len >= sizeof(buf))
		len = sizeof(buf) - 1;
	return kp_hash64(buf, (size_t)len, KP_HASH_SEED);
}

uint64_t kp_fp_add(uint64_t fp, uint64_t kernel_sig)
{
	return kp_hash_mix(fp, kernel_sig);
}

/*
 * kp_kernel_label: a small reader of demangled C++ names. Spans [b, e) of
 * the name are simplified recursively into a fixed buffer; depth counts
 * <>, (), {} and [] so that separators inside arguments are skipped.
 */
#define LB_ARGS 32
#define LB_TEXT 512
#define LB_DEPTH 6

enum lb_class { LB_DROP, LB_NUM, LB_TYPE, LB_FUNCTOR };

struct lb_out {
	char s[LB_TEXT];
	size_t len;
};

static void lb_put(struct lb_out *o, const char *s, size_t n)
{
	if (o->len + n >= sizeof(o->s))
		n = sizeof(o->s) - 1 - o->len;
	memcpy(o->s + o->len, s, n);
	o->len += n;
	o->s[o->len] = '\0';
}

static void lb_puts(struct lb_out *o, const char *s)
{
	lb_put(o, s, strlen(s));
}

static int open_ch(char c)
{
	return c == '<' || c == '(' || c == '{' || c == '[';
}

static int close_ch(char c)
{
	return c == '>' || c == ')' || c == '}' || c == ']';
}

/* First c at depth 0 in [b, e), or NULL ("->" is no bracket). */
static const char *find_top(const char *b, const char *e, char c)
{
	int depth = 0;

	for (; b < e; b++) {
		if (depth == 0 && *b == c)
			return b;
		if (*b == '-' && b + 1 < e && b[1] == '>') {
			b++;
			continue;
		}
		if (open_ch(*b))
			depth++;
		else if (close_ch(*b) && depth > 0)
			depth--;
	}
	return NULL;
}

/* Last "::" at depth 0 in [b, e): the start of the last component. */
static const char *last_component(const char *b, const char *e, const char **prev)
{
	const char *p = b, *last = b;
	int depth = 0;

	*prev = NULL;
	for (; p + 1 < e; p++) {
		if (open_ch(*p))
			depth++;
		else if (close_ch(*p) && depth > 0)
			depth--;
		else if (!depth && p[0] == ':' && p[1] == ':') {
			*prev = last;
			last = p + 2;
			p++;
		}
	}
	return last;
}

static void trim(const char **b, const char **e)
{
	while (*b < *e && isspace((unsigned char)**b))
		(*b)++;
	while (*e > *b && isspace((unsigned char)(*e)[-1]))
		(*e)--;
}

static int word_is(const char *b, const char *e, const char *w)
{
	return (size_t)(e - b) == strlen(w) && !memcmp(b, w, (size_t)(e - b));
}

static int ends_with(const char *b, const char *e, const char *w)
{
	size_t n = strlen(w);

	return (size_t)(e - b) >= n && !memcmp(e - n, w, n);
}

/* Element types: arguments that say what a kernel computes on. */
static int builtin_type(const char *b, const char *e)
{
	static const char *const t[] = {
		"void", "bool", "char", "short", "int", "long", "unsigned", "signed", "float",
		"double", "half", "__half", "__half2", "half2", "__nv_half", "__nv_bfloat16",
		"__nv_bfloat162", "nv_bfloat16", "Half", "BFloat16", "bfloat16", "half_t",
		"bfloat16_t", "tfloat32_t", "float_e4m3_t", "float_e5m2_t", "__nv_fp8_e4m3",
		"__nv_fp8_e5m2", "Float8_e4m3fn", "Float8_e5m2", "int8_t", "uint8_t", "int16_t",
		"uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t", "complex",
		"float2", "float4", "int2", "int4", "char4", "double2",
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (word_is(b, e, t[i]))
			return 1;
	return 0;
}

/* Arguments every kernel of a library carries: they tell nothing apart. */
static int boilerplate(const char *b, const char *e)
{
	static const char *const t[] = {
		"array", "Array", "OffsetCalculator", "TrivialOffsetCalculator",
		"LoadWithoutCast", "StoreWithoutCast", "LoadWithCast", "StoreWithCast",
		"integral_constant",
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (word_is(b, e, t[i]))
			return 1;
	return ends_with(b, e, "Params") || ends_with(b, e, "ParamsEx") ||
	       ends_with(b, e, "params") || ends_with(b, e, "params_t") ||
	       ends_with(b, e, "Params_t") || ends_with(b, e, "Struct");
}

static int lb_name(const char *b, const char *e, int depth, struct lb_out *o, int *cls);

/* One template argument: its simplified text into o, its class returned. */
static int lb_arg(const char *b, const char *e, int depth, struct lb_out *o)
{
	const char *paren, *p;
	int cls = LB_FUNCTOR;

	trim(&b, &e);
	while (e - b > 6 && !memcmp(b, "const ", 6))
		b += 6;
	while (e - b > 9 && !memcmp(b, "volatile ", 9))
		b += 9;
	while (ends_with(b, e, " const") || ends_with(b, e, "&"))
		e -= ends_with(b, e, "&") ? 1 : 6;
	trim(&b, &e);
	if (b >= e)
		return LB_DROP;
	if (*b == '(') {
		/* a cast literal "(cudnnKernelDataType_t)2": the value */
		p = find_top(b + 1, e, ')');
		if (p && p + 1 < e) {
			b = p + 1;
			trim(&b, &e);
		}
	}
	if (isdigit((unsigned char)*b) || (*b == '-' && e - b > 1 && isdigit((unsigned char)b[1]))) {
		for (p = b + 1; p < e && isdigit((unsigned char)*p); p++)
			;
		lb_put(o, b, (size_t)(p - b));   /* "3ul" -> "3" */
		return LB_NUM;
	}
	if (word_is(b, e, "true") || word_is(b, e, "false")) {
		lb_put(o, b, (size_t)(e - b));
		return LB_NUM;
	}
	/* a lambda: "ns::f<T>(args)::{lambda(int)#1}..." is f's lambda */
	paren = find_top(b, e, '(');
	if (paren && paren > b) {
		struct lb_out f = { .len = 0 };

		const char *fe = paren;

		for (p = paren; p + 7 <= e && memcmp(p, "{lambda", 7); p++)
			;
		/* a lambda in "C<T>::operator()(...)" belongs to C<T> */
		if (fe - b > 10 && !memcmp(fe - 10, "::operator", 10))
			fe -= 10;
		lb_name(b, fe, depth, &f, &cls);
		lb_puts(o, f.s);
		if (p + 7 <= e && cls != LB_FUNCTOR + 1)
			lb_puts(o, "::lambda");
		return LB_FUNCTOR;
	}
	p = find_top(b, e, ' ');
	if (!find_top(b, e, '<') && builtin_type(b, p ? p : e)) {
		/* "unsigned int", "float const*": as written, without const */
		for (p = b; p < e; p++) {
			if (e - p >= 6 && !memcmp(p, " const", 6)) {
				p += 5;
				continue;
			}
			lb_put(o, p, 1);
		}
		return LB_TYPE;
	}
	lb_name(b, e, depth, o, &cls);
	return cls == LB_FUNCTOR + 1 ? LB_FUNCTOR : cls;
}

/*
 * A qualified name, maybe with template arguments: its last component,
 * with the arguments worth keeping. *cls: LB_DROP for boilerplate,
 * LB_TYPE for element types, LB_FUNCTOR + 1 when (below the kernel
 * itself) the name only wrapped one functor and was replaced by it.
 */
static int lb_name(const char *b, const char *e, int depth, struct lb_out *o, int *cls)
{
	struct lb_out args[LB_ARGS];
	int kind[LB_ARGS], n = 0, functors = 0, kept = 0, last = -1, i;
	const char *prev, *c, *lt, *ab, *ae, *comma;

	trim(&b, &e);
	if (depth > LB_DEPTH) {
		/* bounded recursion (each level holds LB_ARGS buffers) */
		lb_puts(o, "...");
		*cls = LB_FUNCTOR;
		return 0;
	}
	c = last_component(b, e, &prev);
	lt = find_top(c, e, '<');
	*cls = LB_FUNCTOR;
	if (boilerplate(c, lt ? lt : e)) {
		*cls = LB_DROP;
		return 0;
	}
	if (builtin_type(c, lt ? lt : e))
		*cls = LB_TYPE;
	if (lt) {
		ab = lt + 1;
		ae = find_top(ab, e, '>');
		if (!ae)
			ae = e;
		while (ab < ae && n < LB_ARGS) {
			comma = find_top(ab, ae, ',');
			args[n].len = 0;
			args[n].s[0] = '\0';
			kind[n] = lb_arg(ab, comma ? comma : ae, depth + 1, &args[n]);
			functors += kind[n] == LB_FUNCTOR;
			n++;
			if (!comma)
				break;
			ab = comma + 1;
		}
	}
	/*
	 * functors tell kernels apart, with the kernel's element types; without
	 * any functor, the types and sizes do
	 */
	for (i = 0; i < n; i++) {
		int keep = kind[i] == LB_FUNCTOR || (kind[i] == LB_TYPE && (!functors || !depth)) ||
			   (kind[i] == LB_NUM && !functors);

		/* "MeanOps<float, float, float, float>" -> "MeanOps<float>" */
		if (keep && kind[i] == LB_TYPE && last >= 0 && kind[last] == LB_TYPE &&
		    !strcmp(args[i].s, args[last].s))
			keep = 0;
		if (!keep)
			kind[i] = -1;
		else
			last = i;
		kept += keep;
	}
	if (depth > 0 && functors == 1 && kept == 1 && *cls == LB_FUNCTOR) {
		for (i = 0; kind[i] != LB_FUNCTOR; i++)
			;
		lb_puts(o, args[i].s);
		*cls = LB_FUNCTOR + 1;
		return 0;
	}
	/* "kernel" alone says little: keep its class or namespace */
	if (depth == 0 && prev && (word_is(c, lt ? lt : e, "kernel") || word_is(c, lt ? lt : e, "Kernel"))) {
		const char *pl = find_top(prev, c, '<');

		lb_put(o, prev, (size_t)((pl ? pl : c - 2) - prev));
		lb_puts(o, "::");
	}
	lb_put(o, c, (size_t)((lt ? lt : e) - c));
	if (kept) {
		const char *sep = "<";

		for (i = 0; i < n; i++) {
			if (kind[i] < 0)
				continue;
			lb_puts(o, sep);
			lb_puts(o, args[i].s);
			sep = ",";
		}
		lb_puts(o, ">");
	}
	return 0;
}

char *kp_kernel_label(const char *name, char *out, size_t n)
{
	char buf[2048];
	struct lb_out o = { .len = 0 };
	const char *b = buf, *e, *paren, *p;
	size_t i, len;
	int cls;

	if (!n)
		return out;
	if (!name)
		name = "";
	if (name[0] == '_' && name[1] == 'Z')
		return kp_kernel_ident(name, out, n);
	i = drop_anon(name, buf, sizeof(buf));
	e = buf + i;
	/* not a C++ name (no identifier first): shown as it is */
	if (!isalpha((unsigned char)buf[0]) && buf[0] != '_' && buf[0] != ':') {
		lb_put(&o, buf, i);
		b = e;
	}
	/* the function name ends at the parameter list; a return type before it */
	paren = find_top(b, e, '(');
	if (paren && paren > b)
		e = paren;
	for (p = b; b < e && (p = find_top(p, e, ' ')); p++)
		b = p + 1;
	if (b < e)
		lb_name(b, e, 0, &o, &cls);
	if (!o.len)
		lb_put(&o, buf, i);
	len = o.len;
	if (len < n)
		return memcpy(out, o.s, len + 1);
	if (n < 8)
		return copy_span(o.s, o.s + len, out, n);
	p = strchr(o.s, '<');
	if (p && (size_t)(p - o.s) + 5 < n) {
		/* drop trailing arguments: cut after the last separator that fits */
		size_t cut = n - 5;

		while (cut > (size_t)(p - o.s) + 1 && o.s[cut - 1] != ',' && o.s[cut - 1] != '<')
			cut--;
		memcpy(out, o.s, cut);
		memcpy(out + cut, "...>", 5);
		return out;
	}
	/* a plain name: its head and its tail */
	i = (n - 4) / 2;
	memcpy(out, o.s, i);
	memcpy(out + i, "...", 3);
	memcpy(out + i + 3, o.s + len - (n - 4 - i), n - 4 - i);
	out[n - 1] = '\0';
	return out;
}

char *kp_kernel_chain_label(const char *chain, char *out, size_t n)
{
	static const char sep[] = " -> ";
	char name[2048], label[KP_KNAME_LABEL_MAX];
	size_t len = 0, k, l;
	const char *p, *e;

	if (!n)
		return out;
	out[0] = '\0';
	for (p = chain ? chain : ""; ; p = e + sizeof(sep) - 1) {
		e = strstr(p, sep);
		k = e ? (size_t)(e - p) : strlen(p);
		copy_span(p, p + k, name, sizeof(name));
		kp_kernel_label(name, label, sizeof(label));
		l = strlen(label) + (len ? sizeof(sep) - 1 : 0);
		if (len + l >= n) {
			if (n > 4) {
				len = len + 3 < n ? len : n - 4;
				memcpy(out + len, "...", 4);
			}
			return out;
		}
		snprintf(out + len, n - len, "%s%s", len ? sep : "", label);
		len += l;
		if (!e)
			return out;
	}
}

/* The next identifier or number in *p (advanced past it); NULL at the end. */
static const char *next_tok(const char **p, size_t *len)
{
	const char *s = *p, *b;

	while (*s && !isalnum((unsigned char)*s) && *s != '_')
		s++;
	if (!*s) {
		*p = s;
		return NULL;
	}
	for (b = s; isalnum((unsigned char)*s) || *s == '_'; s++)
		;
	*len = (size_t)(s - b);
	*p = s;
	return b;
}

/*
 * Index of the first token in which a and b differ, with a's token there
 * (*at NULL when a ends first); -1 when their tokens are the same.
 */
static long first_diff(const char *a, const char *b, const char **at, size_t *len)
{
	const char *ta, *tb;
	size_t la = 0, lb = 0;
	long i;

	for (i = 0; ; i++) {
		ta = next_tok(&a, &la);
		tb = next_tok(&b, &lb);
		if (!ta && !tb)
			return -1;
		if (!ta || !tb || la != lb || memcmp(ta, tb, la)) {
			*at = ta;
			*len = ta ? la : 0;
			return i;
		}
	}
}

char *kp_kernel_label_apart(const char *name, const char *const *others, size_t n_others,
			    char *out, size_t n)
{
	enum { MAX_TOKS = 3, TOK_MAX = 24 };
	char x[2048], y[2048], buf[3 * (TOK_MAX + 2) + 8] = "";
	long idx[MAX_TOKS];
	const char *tok[MAX_TOKS];
	size_t tlen[MAX_TOKS], k = 0, i, j, len = 0;

	if (!n)
		return out;
	out[0] = '\0';
	drop_anon(name ? name : "", x, sizeof(x));
	for (i = 0; i < n_others; i++) {
		const char *at;
		size_t l;
		long d;

		drop_anon(others[i] ? others[i] : "", y, sizeof(y));
		d = first_diff(x, y, &at, &l);
		if (d < 0 || !at)
			continue;  /* the same tokens, or a prefix of the other: nothing of its own */
		for (j = 0; j < k && idx[j] != d; j++)
			;
		if (j < k || k == MAX_TOKS)
			continue;
		/* in token order */
		for (j = k++; j > 0 && idx[j - 1] > d; j--) {
			idx[j] = idx[j - 1];
			tok[j] = tok[j - 1];
			tlen[j] = tlen[j - 1];
		}
		idx[j] = d;
		tok[j] = at;
		tlen[j] = l;
	}
	for (i = 0; i < k; i++) {
		size_t l = tlen[i];

		/* "3ul" -> "3"; long tokens (a mangled tail) are cut */
		if (isdigit((unsigned char)tok[i][0]))
			while (l > 1 && (tok[i][l - 1] == 'u' || tok[i][l - 1] == 'l'))
				l--;
		if (l > TOK_MAX)
			l = TOK_MAX;
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%.*s", i ? ", " : " [",
					(int)l, tok[i]);
	}
	if (k)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "]");
	if (len < n)
		memcpy(out, buf, len + 1);  /* else nothing rather than half of it */
	return out;
}

