/*
 * fused_load.c - the CUDA-free half of libkplanrt's fusion (see fused_load.h):
 * load and check the fused sources a plan names, then, after each capture,
 * find each planned chain among the captured kernel nodes, check it, and
 * hand the replacements to the ops. The source header format is in
 * fusion/FUSION.md ("Generated kernels"), its limits in plan/fused_limits.h.
 */
#include "fused_load.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "../common/fileio.h"
#include "../common/hash.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../plan/sign.h"

#define MAX_SOURCE_BYTES (4u << 20)
#define MAX_PATTERNS 8
#define MAX_PARAMS 32
#define MAX_GRID (1u << 20)
#define MAX_SAME 512     /* "// same" lines per source */

enum { AC_I = 1, AC_COL = 2, AC_ROW = 4, AC_W = 8, AC_F16 = 16, AC_ZERO = 32, AC_MAT = 64,
       AC_VEC = 128 };

struct term {
	char kind;            /* 'p' parameter, 'c' constant, 'x' grid.x, 'y' grid.y, 'b' block.x */
	long long v;
};

struct shape {
	struct term t[2];
	char op;              /* 0, '/' or '*' */
};

struct fkernel {
	size_t n_match;
	char *match[MAX_PATTERNS];
	uint32_t n_params;
	struct shape rows, cols;
	int flat;             /* only rows x cols matters (no broadcast, no reduction) */
};

struct group {
	const struct kp_plan_fusion *plan;
	int status;           /* enum kp__rt_fx_reason: OK when ready */
	uint32_t logged;      /* reasons logged */
	char kname[64];
	int rows_scheme;
	int warp_scheme;      /* a dot: one output element per warp */
	uint32_t dot_k, dot_w, dot_x;   /* the dot's chain kernel, matrix and vector parameters */
	long long dot_len;    /* columns of the dot (0: no dot) */
	size_t n_const;       /* parameters compiled in: the capture must have these values */
	uint32_t cn_k[KP__RT_FX_MAX_ARGS], cn_p[KP__RT_FX_MAX_ARGS], cn_size[KP__RT_FX_MAX_ARGS];
	uint64_t cn_val[KP__RT_FX_MAX_ARGS];
	size_t n_same;        /* pointer relations compiled in: (k1, p1) == (k2, p2) or not */
	uint8_t sm[MAX_SAME][5];
	uint32_t block;
	long long stride;     /* row stride of [i] tensors; 0: cols */
	long long span;       /* most columns a row may have (one step per thread); 0: any */
	size_t n_chain;
	struct fkernel chain[KP__RT_FX_MAX_CHAIN];
	size_t n_args;
	uint32_t arg_k[KP__RT_FX_MAX_ARGS], arg_p[KP__RT_FX_MAX_ARGS], arg_size[KP__RT_FX_MAX_ARGS];
	size_t n_access;
	uint32_t ac_k[KP__RT_FX_MAX_ARGS], ac_p[KP__RT_FX_MAX_ARGS];
	unsigned ac_mode[KP__RT_FX_MAX_ARGS];   /* AC_* bits */
	void *fn;
};

struct kp__rt_fusion {
	struct kp__rt_fusion_ops ops;
	int have_ops;
	size_t n_groups;
	struct group *groups;
	pthread_mutex_t lock;
	uint64_t applied;
	uint64_t failures[KP__RT_FX__N];
	char *trace_path;
	struct kp_strmap traced;
};

static const char *const reason_names[KP__RT_FX__N] = {
	"none", "fusion-source", "fusion-hash", "fusion-header", "fusion-compile",
	"fusion-chain", "fusion-shape", "fusion-alias", "fusion-rewrite",
};

const char *kp__rt_fusion_reason_name(int reason)
{
	return reason >= 0 && reason < KP__RT_FX__N ? reason_names[reason] : "?";
}

/* Count a failure of g and log it once per group and reason. */
static void gfail(struct kp__rt_fusion *fz, struct group *g, int reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void gfail(struct kp__rt_fusion *fz, struct group *g, int reason, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	__atomic_fetch_add(&fz->failures[reason], 1, __ATOMIC_RELAXED);
	if (g->logged & (1u << reason))
		return;
	g->logged |= 1u << reason;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kp_warn("runtime: fusion %u (region '%s'): %s: %s; region stays an unfused graph",
		g->plan->id, g->plan->region, kp__rt_fusion_reason_name(reason), msg);
}

/* ---------------------------------------------------------------------- */
/* source header */

static int parse_u(const char **s, unsigned long long max, unsigned long long *out)
{
	const char *p = *s;
	unsigned long long v = 0;

	while (*p == ' ')
		p++;
	if (!isdigit((unsigned char)*p))
		return -1;
	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > max)
			return -1;
		p++;
	}
	*s = p;
	*out = v;
	return 0;
}

static int parse_term(const char **s, struct term *t)
{
	const char *p = *s;
	unsigned long long v;

	if (p[0] == 'g' && (p[1] == 'x' || p[1] == 'y')) {
		t->kind = p[1];
		*s = p + 2;
		return 0;
	}
	if (p[0] == 'b' && p[1] == 'x') {
		t->kind = 'b';
		*s = p + 2;
		return 0;
	}
	if (p[0] != 'p' && p[0] != 'c')
		return -1;
	t->kind = p[0];
	p++;
	if (!isdigit((unsigned char)*p) || parse_u(&p, 1ull << 40, &v))
		return -1;
	t->v = (long long)v;
	*s = p;
	return 0;
}

static int parse_shape(const char **s, struct shape *sh)
{
	while (**s == ' ')
		(*s)++;
	memset(sh, 0, sizeof(*sh));
	if (parse_term(s, &sh->t[0]))
		return -1;
	if (**s == '/' || **s == '*') {
		sh->op = **s;
		(*s)++;
		if (parse_term(s, &sh->t[1]))
			return -1;
	}
	return **s == ' ' || **s == 0 ? 0 : -1;
}

/* The letters of an "access" line (i c r w h z m v, each once) as AC_* bits; 0 when bad. */
static unsigned access_modes(const char *s)
{
	unsigned m = 0;

	for (; *s; s++) {
		unsigned bit = *s == 'i' ? AC_I : *s == 'c' ? AC_COL : *s == 'r' ? AC_ROW :
			*s == 'w' ? AC_W : *s == 'h' ? AC_F16 : *s == 'z' ? AC_ZERO :
			*s == 'm' ? AC_MAT : *s == 'v' ? AC_VEC : 0;

		if (!bit || (m & bit))
			return 0;
		m |= bit;
	}
	return m;
}

/*
 * One header line after the first, buf (which starts with "// "), into g.
 * Returns 1 for "// end", 0 for another line, -1 with msg filled
 * ("line N: ...").
 */
static int parse_header_line(struct group *g, const char *buf, int line, char *msg, size_t mlen)
{
	const char *s = buf + 3, *kw = s;
	unsigned long long k, a, b;

	while (*s && *s != ' ')
		s++;
#define IS(w) ((size_t)(s - kw) == sizeof(w) - 1 && !memcmp(kw, w, sizeof(w) - 1))
	if (IS("end")) {
		return 1;
	} else if (IS("kernel")) {
		s++;
		if (strlen(s) >= sizeof(g->kname) || !*s) {
			snprintf(msg, mlen, "line %d: bad kernel name", line);
			return -1;
		}
		for (kw = s; *kw; kw++)
			if (!isalnum((unsigned char)*kw) && *kw != '_') {
				snprintf(msg, mlen, "line %d: bad kernel name", line);
				return -1;
			}
		strcpy(g->kname, s);
	} else if (IS("scheme")) {
		s++;
		if (!strcmp(s, "rows"))
			g->rows_scheme = 1;
		else if (!strcmp(s, "warp"))
			g->warp_scheme = 1;
		else if (strcmp(s, "elementwise"))
			goto bad;
	} else if (IS("dot")) {
		unsigned long long w, x;

		if (parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || parse_u(&s, MAX_PARAMS - 1, &w) ||
		    parse_u(&s, MAX_PARAMS - 1, &x) || parse_u(&s, 1ull << 20, &a) || *s || !a ||
		    g->dot_len)
			goto bad;
		g->dot_k = (uint32_t)k;
		g->dot_w = (uint32_t)w;
		g->dot_x = (uint32_t)x;
		g->dot_len = (long long)a;
	} else if (IS("span")) {
		if (parse_u(&s, 1ull << 20, &k) || *s || !k)
			goto bad;
		g->span = (long long)k;
	} else if (IS("stride")) {
		if (parse_u(&s, 1ull << 40, &k) || *s || !k)
			goto bad;
		g->stride = (long long)k;
	} else if (IS("block")) {
		if (parse_u(&s, 1024, &k) || *s || !k || k % 32)
			goto bad;
		g->block = (uint32_t)k;
	} else if (IS("chain")) {
		if (parse_u(&s, KP__RT_FX_MAX_CHAIN, &k) || *s || k < 2 || g->n_chain)
			goto bad;
		g->n_chain = (size_t)k;
	} else if (IS("match")) {
		struct fkernel *fk;

		if (parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || k >= g->n_chain || *s != ' ' || !s[1])
			goto bad;
		fk = &g->chain[k];
		if (fk->n_match == MAX_PATTERNS || !(fk->match[fk->n_match] = strdup(s + 1)))
			goto bad;
		fk->n_match++;
	} else if (IS("params")) {
		if (parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || k >= g->n_chain ||
		    parse_u(&s, MAX_PARAMS, &a) || *s)
			goto bad;
		g->chain[k].n_params = (uint32_t)a;
	} else if (IS("shape")) {
		if (parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || k >= g->n_chain ||
		    parse_shape(&s, &g->chain[k].rows) || parse_shape(&s, &g->chain[k].cols))
			goto bad;
		if (!strcmp(s, " flat"))
			g->chain[k].flat = 1;
		else if (*s)
			goto bad;
	} else if (IS("arg")) {
		if (g->n_args == KP__RT_FX_MAX_ARGS - 2 ||
		    parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || k >= g->n_chain ||
		    parse_u(&s, MAX_PARAMS - 1, &a) || parse_u(&s, 8, &b) || *s ||
		    (b != 4 && b != 8))
			goto bad;
		g->arg_k[g->n_args] = (uint32_t)k;
		g->arg_p[g->n_args] = (uint32_t)a;
		g->arg_size[g->n_args++] = (uint32_t)b;
	} else if (IS("const")) {
		unsigned long long v = 0;
		char *e;

		if (g->n_const == KP__RT_FX_MAX_ARGS ||
		    parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || k >= g->n_chain ||
		    parse_u(&s, MAX_PARAMS - 1, &a) || parse_u(&s, 8, &b) || (b != 4 && b != 8) ||
		    strncmp(s, " 0x", 3) || !isxdigit((unsigned char)s[3]))
			goto bad;
		errno = 0;
		v = strtoull(s + 3, &e, 16);
		if (*e || errno || (b == 4 && v > 0xffffffffull))
			goto bad;
		g->cn_k[g->n_const] = (uint32_t)k;
		g->cn_p[g->n_const] = (uint32_t)a;
		g->cn_size[g->n_const] = (uint32_t)b;
		g->cn_val[g->n_const++] = v;
	} else if (IS("same")) {
		unsigned long long v[5];
		int j;

		if (g->n_same == MAX_SAME)
			goto bad;
		for (j = 0; j < 5; j++)
			if (parse_u(&s, j == 4 ? 1 : j % 2 ? MAX_PARAMS - 1 : KP__RT_FX_MAX_CHAIN - 1,
				    &v[j]))
				goto bad;
		if (*s || v[0] >= g->n_chain || v[2] >= g->n_chain)
			goto bad;
		for (j = 0; j < 5; j++)
			g->sm[g->n_same][j] = (uint8_t)v[j];
		g->n_same++;
	} else if (IS("access")) {
		unsigned m;

		if (g->n_access == KP__RT_FX_MAX_ARGS ||
		    parse_u(&s, KP__RT_FX_MAX_CHAIN - 1, &k) || k >= g->n_chain ||
		    parse_u(&s, MAX_PARAMS - 1, &a) || *s++ != ' ' || !*s || !(m = access_modes(s)))
			goto bad;
		g->ac_k[g->n_access] = (uint32_t)k;
		g->ac_p[g->n_access] = (uint32_t)a;
		g->ac_mode[g->n_access++] = m;
	} else {
		goto bad;
	}
#undef IS
	return 0;
bad:
	snprintf(msg, mlen, "line %d: malformed '%.60s'", line, buf);
	return -1;
}

/*
 * What no single line shows: the required lines are there and every
 * parameter index is within its kernel's parameters. 0, or -1 with msg filled.
 */
static int check_header(const struct group *g, char *msg, size_t mlen)
{
	if (!g->kname[0] || !g->block || !g->n_chain || !g->n_args) {
		snprintf(msg, mlen, "incomplete header (kernel, block, chain, arg and end are required)");
		return -1;
	}
	for (size_t k = 0; k < g->n_chain; k++) {
		const struct fkernel *fk = &g->chain[k];
		const struct shape *shs[2] = { &fk->rows, &fk->cols };

		if (!fk->n_match || !fk->n_params || !fk->cols.t[0].kind) {
			snprintf(msg, mlen, "chain kernel %zu: match, params and shape are required", k);
			return -1;
		}
		for (int j = 0; j < 2; j++)
			for (int t = 0; t < (shs[j]->op ? 2 : 1); t++)
				if (shs[j]->t[t].kind == 'p' && shs[j]->t[t].v >= fk->n_params) {
					snprintf(msg, mlen, "chain kernel %zu: shape uses parameter %lld of %u",
						 k, shs[j]->t[t].v, fk->n_params);
					return -1;
				}
	}
	if (g->warp_scheme != (g->dot_len > 0) || g->rows_scheme + g->warp_scheme > 1 ||
	    (g->dot_len && (g->dot_k >= g->n_chain || g->dot_w >= g->chain[g->dot_k].n_params ||
			    g->dot_x >= g->chain[g->dot_k].n_params || g->stride))) {
		snprintf(msg, mlen, "the warp scheme needs one 'dot' line within the chain (and no stride)");
		return -1;
	}
	for (size_t j = 0; j < g->n_args; j++)
		if (g->arg_p[j] >= g->chain[g->arg_k[j]].n_params) {
			snprintf(msg, mlen, "arg %zu: parameter %u of a kernel with %u", j, g->arg_p[j],
				 g->chain[g->arg_k[j]].n_params);
			return -1;
		}
	for (size_t j = 0; j < g->n_access; j++)
		if (g->ac_p[j] >= g->chain[g->ac_k[j]].n_params) {
			snprintf(msg, mlen, "access %zu: parameter out of range", j);
			return -1;
		}
	for (size_t j = 0; j < g->n_const; j++)
		if (g->cn_p[j] >= g->chain[g->cn_k[j]].n_params) {
			snprintf(msg, mlen, "const %zu: parameter out of range", j);
			return -1;
		}
	for (size_t j = 0; j < g->n_same; j++)
		if (g->sm[j][1] >= g->chain[g->sm[j][0]].n_params ||
		    g->sm[j][3] >= g->chain[g->sm[j][2]].n_params) {
			snprintf(msg, mlen, "same %zu: parameter out of range", j);
			return -1;
		}
	return 0;
}

/*
 * Parse the header of src into g: the magic line, then "// KEYWORD ..." lines
 * up to "// end" (fusion/FUSION.md, "Generated kernels"). Returns 0, or -1
 * with msg filled ("line N: ...").
 */
static int parse_header(struct group *g, const char *src, size_t len, char *msg, size_t mlen)
{
	size_t pos = 0;
	int line = 0, seen_end = 0, rc;
	char buf[512];

	while (pos < len && !seen_end) {
		const char *nl = memchr(src + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (src + pos)) : len - pos;

		line++;
		if (n >= sizeof(buf)) {
			snprintf(msg, mlen, "line %d: header line longer than %zu bytes", line, sizeof(buf) - 1);
			return -1;
		}
		memcpy(buf, src + pos, n);
		buf[n] = 0;
		pos += n + 1;
		if (line == 1) {
			if (strcmp(buf, KP_FX_HEADER_MAGIC)) {
				snprintf(msg, mlen, "line 1: expected '" KP_FX_HEADER_MAGIC "'");
				return -1;
			}
			continue;
		}
		if (strncmp(buf, "// ", 3)) {
			snprintf(msg, mlen, "line %d: header ends without '// end'", line);
			return -1;
		}
		if ((rc = parse_header_line(g, buf, line, msg, mlen)) < 0)
			return -1;
		seen_end = rc;
	}
	if (!seen_end) {
		snprintf(msg, mlen, "incomplete header (kernel, block, chain, arg and end are required)");
		return -1;
	}
	return check_header(g, msg, mlen);
}

/* ---------------------------------------------------------------------- */
/* open / close */

/*
 * sha: the SHA-256 the plan's signature covers for this source (NULL when
 * no signature was checked). The signature was verified over the file as it
 * was then; this read is another one, so it must hash the same.
 */
static void open_group(struct kp__rt_fusion *fz, struct group *g, const char *dir,
		       const uint8_t *sha)
{
	uint8_t got[crypto_hash_sha256_BYTES];
	struct kp_strbuf path = KP_STRBUF_INIT;
	struct kp_err err = {0};
	char msg[512] = "";
	size_t len = 0;
	char *src = NULL;
	uint64_t h;

	kp_strbuf_addf(&path, "%s/%s", dir, g->plan->source);
	/* a FIFO or a device under the name is refused, never waited on (fileio.h) */
	if (kp_file_read(AT_FDCWD, path.buf, 0, MAX_SOURCE_BYTES, &src, &len, &err)) {
		g->status = KP__RT_FX_SOURCE;
		gfail(fz, g, g->status, "cannot read %s", err.msg);
		goto out;
	}
	h = kp_hash64(src, len, KP_HASH_SEED);
	if (h != g->plan->source_hash) {
		g->status = KP__RT_FX_HASH;
		gfail(fz, g, g->status, "%s hashes to %016llx, the plan says %016llx", path.buf,
		      (unsigned long long)h, (unsigned long long)g->plan->source_hash);
		goto out;
	}
	if (sha) {
		crypto_hash_sha256(got, (const unsigned char *)src, len);
		if (sodium_memcmp(got, sha, sizeof(got))) {
			g->status = KP__RT_FX_HASH;
			gfail(fz, g, g->status, "%s changed after its signature was checked "
			      "(its SHA-256 differs from the signed one)", path.buf);
			goto out;
		}
	}
	if (parse_header(g, src, len, msg, sizeof(msg))) {
		g->status = KP__RT_FX_HEADER;
		gfail(fz, g, g->status, "%s: %s", path.buf, msg);
		goto out;
	}
	if (g->n_chain != g->plan->kernels) {
		g->status = KP__RT_FX_HEADER;
		gfail(fz, g, g->status, "%s: chain of %zu kernels, the plan says %u", path.buf,
		      g->n_chain, g->plan->kernels);
		goto out;
	}
	if (!fz->have_ops) {
		g->status = KP__RT_FX_COMPILE;
		gfail(fz, g, g->status, "no compiler in this build");
		goto out;
	}
	if (fz->ops.load(fz->ops.ctx, src, len, h, g->kname, &g->fn, msg, sizeof(msg))) {
		g->status = KP__RT_FX_COMPILE;
		gfail(fz, g, g->status, "%s: %s", path.buf, msg);
		goto out;
	}
	g->status = KP__RT_FX_OK;
	kp_info("runtime: fusion %u (region '%s'): %s loaded (%zu kernels -> %s)", g->plan->id,
		g->plan->region, g->plan->source, g->n_chain, g->kname);
out:
	free(src);
	kp_strbuf_release(&path);
}

struct kp__rt_fusion *kp__rt_fusion_open(const struct kp_plan *plan, const char *plan_path,
					 const uint8_t *source_sha,
					 const struct kp__rt_fusion_ops *ops)
{
	struct kp__rt_fusion *fz;
	char *dir;
	const char *slash, *tp;
	size_t i;

	if (!plan)
		return NULL;
	fz = calloc(1, sizeof(*fz));
	if (!fz)
		return NULL;
	pthread_mutex_init(&fz->lock, NULL);
	kp_strmap_init(&fz->traced);
	tp = getenv("KPLAN_FUSION_TRACE");
	if (tp && *tp)
		fz->trace_path = strdup(tp);
	if (!ops && kp__rt_fusion_cuda_ops)
		ops = kp__rt_fusion_cuda_ops();
	if (ops) {
		fz->ops = *ops;
		fz->have_ops = 1;
	}
	if (plan->n_fusions && !(fz->groups = calloc(plan->n_fusions, sizeof(*fz->groups)))) {
		kp__rt_fusion_close(fz);
		return NULL;
	}
	slash = plan_path ? strrchr(plan_path, '/') : NULL;
	dir = slash ? strndup(plan_path, (size_t)(slash - plan_path)) : strdup(".");
	if (slash == plan_path && dir) {
		free(dir);
		dir = strdup("/");
	}
	if (!dir) {
		kp__rt_fusion_close(fz);
		return NULL;
	}
	for (i = 0; i < plan->n_fusions; i++) {
		struct group *g;

		if (!plan->fusions[i].source)
			continue;     /* planned without generated code */
		g = &fz->groups[fz->n_groups++];
		g->plan = &plan->fusions[i];
		open_group(fz, g, dir, source_sha ? source_sha + i * KP_SIGN_SHA256_BYTES : NULL);
	}
	free(dir);
	return fz;
}

void kp__rt_fusion_close(struct kp__rt_fusion *fz)
{
	size_t i, k, j;

	if (!fz)
		return;
	for (i = 0; i < fz->n_groups; i++)
		for (k = 0; k < KP__RT_FX_MAX_CHAIN; k++)
			for (j = 0; j < fz->groups[i].chain[k].n_match; j++)
				free(fz->groups[i].chain[k].match[j]);
	free(fz->groups);
	free(fz->trace_path);
	kp_strmap_release(&fz->traced);
	pthread_mutex_destroy(&fz->lock);
	if (fz->have_ops && fz->ops.destroy)
		fz->ops.destroy(fz->ops.ctx);
	free(fz);
}

/* ---------------------------------------------------------------------- */
/* apply */

/* Full-name match only: an identifier match could take an overload with another element type. */
static int name_matches(const struct fkernel *fk, const char *name)
{
	size_t j;

	for (j = 0; j < fk->n_match; j++)
		if (!fnmatch(fk->match[j], name, 0))
			return 1;
	return 0;
}

/* Value of an integer parameter (4 or 8 bytes, signed). */
static int param_int(const struct kp__rt_node *nd, uint32_t p, long long *v)
{
	if (p >= nd->n_params || nd->param_off[p] + nd->param_size[p] > nd->params_len)
		return -1;
	if (nd->param_size[p] == 4) {
		int32_t x;

		memcpy(&x, nd->params + nd->param_off[p], 4);
		*v = x;
	} else if (nd->param_size[p] == 8) {
		int64_t x;

		memcpy(&x, nd->params + nd->param_off[p], 8);
		*v = x;
	} else {
		return -1;
	}
	return 0;
}

static int eval_term(const struct term *t, const struct kp__rt_node *nd, long long *v)
{
	switch (t->kind) {
	case 'p': return param_int(nd, (uint32_t)t->v, v);
	case 'c': *v = t->v; return 0;
	case 'x': *v = nd->grid[0]; return 0;
	case 'y': *v = nd->grid[1]; return 0;
	case 'b': *v = nd->block[0]; return 0;
	default: return -1;
	}
}

static int eval_shape(const struct shape *sh, const struct kp__rt_node *nd, long long *v)
{
	long long a, b;

	if (eval_term(&sh->t[0], nd, &a))
		return -1;
	if (sh->op) {
		if (eval_term(&sh->t[1], nd, &b))
			return -1;
		if (sh->op == '/') {
			if (b <= 0 || a % b)
				return -1;
			a /= b;
		} else {
			if (a < 0 || b < 0 || (b && a > (1ll << 40) / b))
				return -1;
			a *= b;
		}
	}
	if (a < 1 || a > (1ll << 40))
		return -1;
	*v = a;
	return 0;
}

static uint64_t param_ptr(const struct kp__rt_node *nd, uint32_t p)
{
	uint64_t v = 0;

	if (p < nd->n_params && nd->param_size[p] == 8 && nd->param_off[p] + 8 <= nd->params_len)
		memcpy(&v, nd->params + nd->param_off[p], 8);
	return v;
}

static void trace(struct kp__rt_fusion *fz, const char *region, const struct kp__rt_node *nodes,
		  size_t n_nodes)
{
	FILE *f;
	size_t i, k = 0;
	int64_t dummy;

	if (kp_strmap_get(&fz->traced, region, &dummy) || kp_strmap_put(&fz->traced, region, 1))
		return;
	f = fopen(fz->trace_path, "a");
	if (!f) {
		kp_warn("runtime: KPLAN_FUSION_TRACE: cannot open %s: %s", fz->trace_path, strerror(errno));
		return;
	}
	for (i = 0; i < n_nodes; i++) {
		const struct kp__rt_node *nd = &nodes[i];
		size_t bytes = 0;
		uint32_t p;

		if (nd->kind != KP__RT_NODE_KERNEL)
			continue;
		fprintf(f, "%s\t%zu\t%s", region, k++, nd->name);
		/* the parameter bytes, hex per parameter (for specialising const
		 * scalars); left out when large or inconsistent */
		for (p = 0; p < nd->n_params; p++) {
			if (nd->param_off[p] + nd->param_size[p] > nd->params_len)
				break;
			bytes += nd->param_size[p];
		}
		if (p == nd->n_params && p && bytes <= 1024) {
			for (p = 0; p < nd->n_params; p++) {
				fputc(p ? ':' : '\t', f);
				for (uint32_t b = 0; b < nd->param_size[p]; b++)
					fprintf(f, "%02x", nd->params[nd->param_off[p] + b]);
			}
		}
		fputc('\n', f);
	}
	fclose(f);
}

/* Bytes of a tensor an access touches (4-byte elements, f16 with AC_F16);
 * [i] rows are stride elements apart (stride >= cols); a dot's matrix has
 * dot_len elements per element i, its vector dot_len. */
static uint64_t extent(unsigned mode, long long rows, long long cols, long long stride,
		       long long dot_len)
{
	uint64_t sz = mode & AC_F16 ? 2 : 4, e = mode & AC_ZERO ? sz : 0;

	if (mode & AC_MAT)
		e = (uint64_t)rows * (uint64_t)cols * (uint64_t)dot_len * sz;
	if ((mode & AC_VEC) && (uint64_t)dot_len * sz > e)
		e = (uint64_t)dot_len * sz;

	if ((mode & (AC_I | AC_W)) && rows > 0)
		e = ((uint64_t)(rows - 1) * (uint64_t)stride + (uint64_t)cols) * sz;
	if ((mode & AC_COL) && (uint64_t)cols * sz > e)
		e = (uint64_t)cols * sz;
	if ((mode & AC_ROW) && (uint64_t)rows * sz > e)
		e = (uint64_t)rows * sz;
	return e;
}

/*
 * The chain's kernels (nd, the first one kernel `first` of the capture)
 * against what g's fused kernel was specialised on: the values compiled in
 * and the pointer relations (same tensor or not). 0 or KP__RT_FX_CHAIN.
 */
static int check_specialised(const struct group *g, const struct kp__rt_node *const *nd,
			     uint32_t first, char *msg, size_t mlen)
{
	size_t j;

	/* the values the fused kernel was specialised on (a guard) */
	for (j = 0; j < g->n_const; j++) {
		const struct kp__rt_node *x = nd[g->cn_k[j]];
		uint32_t p = g->cn_p[j];
		uint64_t v = 0;

		if (x->param_size[p] != g->cn_size[j] || x->param_off[p] + x->param_size[p] > x->params_len) {
			snprintf(msg, mlen, "kernel %u parameter %u is %u bytes, the fused kernel's constant %u",
				 first + g->cn_k[j], p, x->param_size[p], g->cn_size[j]);
			return KP__RT_FX_CHAIN;
		}
		memcpy(&v, x->params + x->param_off[p], g->cn_size[j]);   /* little-endian */
		if (v != g->cn_val[j]) {
			snprintf(msg, mlen, "kernel %u parameter %u is %#llx, the fused kernel was "
				 "specialised for %#llx", first + g->cn_k[j], p, (unsigned long long)v,
				 (unsigned long long)g->cn_val[j]);
			return KP__RT_FX_CHAIN;
		}
	}
	/* the pointer relations it was specialised on (same tensor or not) */
	for (j = 0; j < g->n_same; j++) {
		const uint8_t *q = g->sm[j];
		uint64_t a = param_ptr(nd[q[0]], q[1]), b = param_ptr(nd[q[2]], q[3]);

		if ((a == b) != q[4]) {
			snprintf(msg, mlen, "kernel %u parameter %u and kernel %u parameter %u are %s "
				 "(%#llx, %#llx); the fused kernel was specialised for %s",
				 first + q[0], q[1], first + q[2], q[3], a == b ? "the same" : "different",
				 (unsigned long long)a, (unsigned long long)b,
				 q[4] ? "the same" : "different ones");
			return KP__RT_FX_CHAIN;
		}
	}
	return 0;
}

/*
 * Tensors of two chain kernels, one of them written, must be the same (both
 * used at [i], same element type: the same element in the same thread) or
 * apart; else fusing would race between threads. 0 or KP__RT_FX_ALIAS.
 */
static int check_aliases(const struct group *g, const struct kp__rt_node *const *nd,
			 uint32_t first, long long rows, long long cols, long long stride,
			 char *msg, size_t mlen)
{
	for (size_t j = 0; j < g->n_access; j++) {
		for (size_t m = j + 1; m < g->n_access; m++) {
			unsigned ma = g->ac_mode[j], mb = g->ac_mode[m];
			uint64_t a, b, ea, eb;

			if (g->ac_k[j] == g->ac_k[m] || !((ma | mb) & AC_W))
				continue;
			a = param_ptr(nd[g->ac_k[j]], g->ac_p[j]);
			b = param_ptr(nd[g->ac_k[m]], g->ac_p[m]);
			if (!a || !b)
				continue;
			/* the same element in the same thread: same pointer, [i] only, same type */
			if (a == b && !((ma | mb) & (AC_COL | AC_ROW | AC_ZERO | AC_MAT | AC_VEC)) &&
			    (ma & AC_F16) == (mb & AC_F16))
				continue;
			ea = a + extent(ma, rows, cols, stride, g->dot_len);
			eb = b + extent(mb, rows, cols, stride, g->dot_len);
			if (ea <= b || eb <= a)
				continue;
			snprintf(msg, mlen, "kernel %u parameter %u and kernel %u parameter %u overlap "
				 "(%#llx, %#llx), one is written",
				 first + g->ac_k[j], g->ac_p[j], first + g->ac_k[m], g->ac_p[m],
				 (unsigned long long)a, (unsigned long long)b);
			return KP__RT_FX_ALIAS;
		}
	}
	return 0;
}

/* Check group g against the capture; fill r. 0 or a reason. */
static int prepare(struct group *g, const struct kp__rt_node *nodes, size_t n_nodes,
		   const size_t *kidx, size_t n_kernels, struct kp__rt_fx_repl *r, char *msg, size_t mlen)
{
	const struct kp__rt_node *nd[KP__RT_FX_MAX_CHAIN];
	uint32_t first = g->plan->first_kernel;
	size_t k, j;
	long long rows = 0, cols = 0, n, stride;
	int reason;

	(void)n_nodes;
	if ((size_t)first + g->n_chain > n_kernels) {
		snprintf(msg, mlen, "kernels %u..%zu planned, the capture has %zu", first,
			 first + g->n_chain - 1, n_kernels);
		return KP__RT_FX_CHAIN;
	}
	memset(r, 0, sizeof(*r));
	for (k = 0; k < g->n_chain; k++) {
		r->idx[k] = kidx[first + k];
		nd[k] = &nodes[r->idx[k]];
		if (!name_matches(&g->chain[k], nd[k]->name)) {
			snprintf(msg, mlen, "kernel %u is '%.100s', which does not match '%.60s'",
				 first + (uint32_t)k, nd[k]->name, g->chain[k].match[0]);
			return KP__RT_FX_CHAIN;
		}
		if (nd[k]->n_params != g->chain[k].n_params) {
			snprintf(msg, mlen, "kernel %u ('%.100s') has %u parameters, the catalog %u",
				 first + (uint32_t)k, nd[k]->name, nd[k]->n_params, g->chain[k].n_params);
			return KP__RT_FX_CHAIN;
		}
	}
	r->n = g->n_chain;
	if ((reason = check_specialised(g, nd, first, msg, mlen)))
		return reason;
	/* the split into rows comes from the kernels that depend on it; the
	 * others (flat elementwise) only need the same element count */
	for (int pass = 0; pass < 2; pass++) {
		for (k = 0; k < g->n_chain; k++) {
			long long rr, cc;

			if (g->chain[k].flat != pass)
				continue;
			if (eval_shape(&g->chain[k].rows, nd[k], &rr) ||
			    eval_shape(&g->chain[k].cols, nd[k], &cc) || rr > (1ll << 40) / cc) {
				snprintf(msg, mlen, "kernel %u: its shape cannot be computed from its arguments",
					 first + (uint32_t)k);
				return KP__RT_FX_SHAPE;
			}
			if (!rows) {
				rows = rr;
				cols = cc;
			} else if (pass ? rr * cc != rows * cols : rr != rows || cc != cols) {
				snprintf(msg, mlen, "kernel %u is %lld x %lld, the chain is %lld x %lld",
					 first + (uint32_t)k, rr, cc, rows, cols);
				return KP__RT_FX_SHAPE;
			}
		}
	}
	if (g->span && cols > g->span) {
		snprintf(msg, mlen, "rows of %lld columns, the fused kernel takes at most %lld", cols,
			 g->span);
		return KP__RT_FX_SHAPE;
	}
	stride = g->stride ? g->stride : cols;
	if (cols > stride) {
		snprintf(msg, mlen, "rows of %lld columns do not fit the row stride %lld", cols, stride);
		return KP__RT_FX_SHAPE;
	}
	/* the dot loads 16 bytes per lane: its matrix and vector must be aligned
	 * (rows of the matrix are, K being a multiple of 32 x 16 bytes) */
	if (g->dot_len) {
		uint64_t w = param_ptr(nd[g->dot_k], g->dot_w), x = param_ptr(nd[g->dot_k], g->dot_x);

		if ((w | x) % 16) {
			snprintf(msg, mlen, "kernel %u: the dot's matrix %#llx or vector %#llx is not "
				 "16-byte aligned", first + g->dot_k, (unsigned long long)w,
				 (unsigned long long)x);
			return KP__RT_FX_SHAPE;
		}
	}
	if ((reason = check_aliases(g, nd, first, rows, cols, stride, msg, mlen)))
		return reason;
	for (j = 0; j < g->n_args; j++) {
		const struct kp__rt_node *x = nd[g->arg_k[j]];
		uint32_t p = g->arg_p[j];

		if (x->param_size[p] != g->arg_size[j] || x->param_off[p] + x->param_size[p] > x->params_len) {
			snprintf(msg, mlen, "kernel %u parameter %u is %u bytes, the catalog says %u",
				 first + g->arg_k[j], p, x->param_size[p], g->arg_size[j]);
			return KP__RT_FX_CHAIN;
		}
		r->args[j] = x->params + x->param_off[p];
	}
	r->rows = rows;
	r->cols = cols;
	r->args[g->n_args] = &r->rows;
	r->args[g->n_args + 1] = &r->cols;
	r->n_args = g->n_args + 2;
	r->fn = g->fn;
	r->block[0] = g->block;
	r->block[1] = r->block[2] = 1;
	r->grid[1] = r->grid[2] = 1;
	if (g->warp_scheme)   /* a warp per element */
		n = (rows * cols + g->block / 32 - 1) / (g->block / 32);
	else
		n = g->rows_scheme ? rows : (rows * cols + g->block - 1) / g->block;
	r->grid[0] = (uint32_t)(n > MAX_GRID ? MAX_GRID : n);
	r->smem = 0;
	return 0;
}

int kp__rt_fusion_apply(struct kp__rt_fusion *fz, const char *region, void *graph,
			const struct kp__rt_node *nodes, size_t n_nodes)
{
	struct kp__rt_fx_repl *reps = NULL;
	struct group **who = NULL;
	size_t *kidx = NULL, n_kernels = 0, i, k, n_reps = 0;
	uint8_t *taken = NULL;    /* kernels of the chains already taken */
	int done = 0;
	char msg[384];

	if (!fz)
		return 0;
	pthread_mutex_lock(&fz->lock);
	if (fz->trace_path)
		trace(fz, region, nodes, n_nodes);
	for (i = 0; i < fz->n_groups; i++)
		if (fz->groups[i].status == KP__RT_FX_OK && !strcmp(fz->groups[i].plan->region, region))
			n_reps++;
	if (!n_reps)
		goto out;
	kidx = malloc(n_nodes * sizeof(*kidx) + 1);
	taken = calloc(n_nodes + 1, 1);
	reps = calloc(n_reps, sizeof(*reps));
	who = calloc(n_reps, sizeof(*who));
	if (!kidx || !taken || !reps || !who)
		goto out;
	for (i = 0; i < n_nodes; i++)
		if (nodes[i].kind == KP__RT_NODE_KERNEL)
			kidx[n_kernels++] = i;
	n_reps = 0;
	/* chains are taken in plan (id) order; one that overlaps a chain taken
	 * before is skipped */
	for (i = 0; i < fz->n_groups; i++) {
		struct group *g = &fz->groups[i];
		size_t first = g->plan->first_kernel, end = first + g->n_chain;
		int reason;

		if (g->status != KP__RT_FX_OK || strcmp(g->plan->region, region))
			continue;
		for (k = first; k < end && k < n_kernels && !taken[k]; k++)
			;
		if (k < end && k < n_kernels) {
			gfail(fz, g, KP__RT_FX_CHAIN, "overlaps the chain of another group");
			continue;
		}
		reason = prepare(g, nodes, n_nodes, kidx, n_kernels, &reps[n_reps], msg, sizeof(msg));
		if (reason) {
			gfail(fz, g, reason, "%s", msg);
			continue;
		}
		for (k = first; k < end && k < n_kernels; k++)
			taken[k] = 1;
		who[n_reps++] = g;
	}
	if (n_reps) {
		msg[0] = 0;
		done = fz->ops.replace(fz->ops.ctx, graph, reps, n_reps, msg, sizeof(msg));
		for (i = 0; i < n_reps; i++) {
			if (!reps[i].rc)
				continue;
			gfail(fz, who[i], KP__RT_FX_REWRITE, "%s", msg[0] ? msg : "graph edit failed");
		}
		if (done > 0)
			__atomic_fetch_add(&fz->applied, (uint64_t)done, __ATOMIC_RELAXED);
	}
out:
	pthread_mutex_unlock(&fz->lock);
	free(kidx);
	free(taken);
	free(reps);
	free(who);
	return done;   /* < 0: the graph may be damaged (ops said so) */
}

uint64_t kp__rt_fusion_applied(struct kp__rt_fusion *fz)
{
	return fz ? __atomic_load_n(&fz->applied, __ATOMIC_RELAXED) : 0;
}

uint64_t kp__rt_fusion_failures(struct kp__rt_fusion *fz, int reason)
{
	if (!fz || reason < 0 || reason >= KP__RT_FX__N)
		return 0;
	return __atomic_load_n(&fz->failures[reason], __ATOMIC_RELAXED);
}

void kp__rt_fusion_print(struct kp__rt_fusion *fz, FILE *f)
{
	int i;

	if (!fz || !fz->n_groups)
		return;
	fprintf(f, "kplan-rt: fusion.groups %zu\nkplan-rt: fusion.applied %llu\n", fz->n_groups,
		(unsigned long long)kp__rt_fusion_applied(fz));
	for (i = 1; i < KP__RT_FX__N; i++)
		if (kp__rt_fusion_failures(fz, i))
			fprintf(f, "kplan-rt: fusion.failures.%s %llu\n", kp__rt_fusion_reason_name(i),
				(unsigned long long)kp__rt_fusion_failures(fz, i));
}
