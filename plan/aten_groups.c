/*
 * aten_groups.c - the reader of PLAN.aten, the torch fusion groups shipped
 * with a plan (aten_groups.h; spec: plan/FORMAT.md, "Torch fusion groups").
 * The writer is the binding's (python/kplan/aten_plan.py).
 */
#include "aten_groups.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "planfile.h"
#include "../common/fileio.h"

#define MAX_LINE 4096
#define MAX_STR 4096

void kp_aten_groups_free(struct kp_aten_groups *g)
{
	size_t i;

	if (!g)
		return;
	for (i = 0; i < g->n_groups; i++) {
		struct kp_aten_group *u = &g->groups[i];

		free(u->region);
		free(u->ops);
		free(u->shape);
		free(u->inputs);
		free(u->kernel);
		free(u->source);
	}
	free(g->groups);
	free(g);
}

void kp_aten_groups_path(const char *plan_path, struct kp_strbuf *out)
{
	kp_strbuf_reset(out);
	kp_strbuf_adds(out, plan_path);
	kp_strbuf_adds(out, KP_ATEN_SUFFIX);
}

void kp_aten_groups_bundle_path(const char *dir, uint64_t plan_hash, struct kp_strbuf *out)
{
	kp_strbuf_addf(out, "%s/plan-%016llx" KP_ATEN_SUFFIX, dir, (unsigned long long)plan_hash);
}

/* A string value (%XX escapes a byte) into a new NUL-terminated string, or
 * NULL (*bad set: malformed or a control byte; else out of memory). */
static char *decode(const char *s, size_t n, int *bad)
{
	char *d = malloc(n + 1);
	size_t i, k = 0;

	*bad = 0;
	if (!d)
		return NULL;
	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			if (i + 3 > n || kp__plan_hexval(s[i + 1]) < 0 || kp__plan_hexval(s[i + 2]) < 0)
				goto bad;
			c = kp__plan_hexval(s[i + 1]) * 16 + kp__plan_hexval(s[i + 2]);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f)
			goto bad;
		d[k++] = (char)c;
	}
	d[k] = 0;
	return d;
bad:
	free(d);
	*bad = 1;
	return NULL;
}

enum field {
	F_REGION, F_KEY, F_NUMERICS, F_OPS, F_SHAPE, F_INPUTS, F_OUTPUTS, F_KERNEL,
	F_SOURCE, F_SOURCE_HASH,
	F_V2,                              /* version 2 added the fields from here */
	F_SAVED_KERNELS = F_V2, F_SAVED_BYTES, F_GAIN_NS, F_PER_CALL, F__N
};

/* The fields a group of a file of version v must have: every one it knows. */
#define ALL_FIELDS(v) ((v) >= 2 ? (1u << F__N) - 1 : (1u << F_V2) - 1)

static const char *const field_names[F__N] = {
	"region", "key", "numerics", "ops", "shape", "inputs", "outputs", "kernel",
	"source", "source-hash", "saved-kernels", "saved-bytes", "gain-ns", "per-call",
};

/* A decimal 0..max without sign or leading zeros into *v: 0 or -1. */
static int parse_count(const char *s, size_t n, int64_t max, int64_t *v)
{
	size_t i;

	if (!n || n > 19 || (n > 1 && s[0] == '0'))
		return -1;
	*v = 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || *v > (max - (s[i] - '0')) / 10)
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

/* A kernel name: an identifier. */
static int is_ident(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

/* The field of group u named by line (key, value v[0..n)): 0 or a message. */
static const char *set_field(struct kp_aten_group *u, int f, const char *v, size_t n)
{
	char **str = NULL;
	int bad = 0;

	switch (f) {
	case F_KEY:
		return kp__plan_parse_hex64(v, n, &u->key) ? "expected 16 lowercase hex digits" : NULL;
	case F_SOURCE_HASH:
		return kp__plan_parse_hex64(v, n, &u->source_hash) ?
			"expected 16 lowercase hex digits" : NULL;
	case F_NUMERICS:
		if (n == 5 && !memcmp(v, "exact", 5))
			u->exact = 1;
		else if (n == 8 && !memcmp(v, "tolerant", 8))
			u->exact = 0;
		else
			return "expected 'exact' or 'tolerant'";
		return NULL;
	case F_SAVED_KERNELS:
		return parse_count(v, n, 64, &u->saved_kernels) ? "expected an integer 0..64" : NULL;
	case F_SAVED_BYTES:
		return parse_count(v, n, INT64_C(1) << 50, &u->saved_bytes) ?
			"expected an integer 0..2^50" : NULL;
	case F_GAIN_NS:
		return parse_count(v, n, INT64_C(1) << 50, &u->gain_ns) ?
			"expected an integer 0..2^50" : NULL;
	case F_PER_CALL:
		return parse_count(v, n, 1000000, &u->per_call) || !u->per_call ?
			"expected an integer 1..1000000" : NULL;
	case F_OUTPUTS: {
		uint32_t x = 0;
		size_t i;

		if (!n || n > 2)
			return "expected an integer 1..64";
		for (i = 0; i < n; i++) {
			if (v[i] < '0' || v[i] > '9')
				return "expected an integer 1..64";
			x = x * 10 + (uint32_t)(v[i] - '0');
		}
		if (x < 1 || x > 64)
			return "expected an integer 1..64";
		u->outputs = x;
		return NULL;
	}
	case F_REGION: str = &u->region; break;
	case F_OPS: str = &u->ops; break;
	case F_SHAPE: str = &u->shape; break;
	case F_INPUTS: str = &u->inputs; break;
	case F_KERNEL: str = &u->kernel; break;
	case F_SOURCE: str = &u->source; break;
	default: return "unknown field";
	}
	if (n > MAX_STR)
		return "value too long";
	*str = decode(v, n, &bad);
	if (!*str)
		return bad ? "malformed %XX escape or a control character" : "out of memory";
	if (f == F_KERNEL && !is_ident(*str))
		return "expected an identifier";
	if (f == F_SOURCE && (!**str || strchr(*str, '/') || **str == '.' || strlen(*str) > 255))
		return "expected a plain file name (no '/', no leading '.')";
	if (f == F_REGION && !**str)
		return "empty region label";
	return NULL;
}

struct kp_aten_groups *kp_aten_groups_parse(const char *buf, size_t len, const char *name,
					    struct kp_err *err)
{
	struct kp_aten_groups *g = calloc(1, sizeof(*g));
	struct kp_aten_group *u = NULL;
	unsigned seen = 0;
	int have_plan_hash = 0;
	size_t pos = 0, cap = 0, lineno = 0;
	const char *why = NULL;

	if (!g) {
		kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
		return NULL;
	}
	if (len > KP_ATEN_MAX_FILE_BYTES) {
		kp_err_set(err, KP_EFORMAT, "%s: larger than %u bytes", name,
			   KP_ATEN_MAX_FILE_BYTES);
		goto fail;
	}
	while (pos < len) {
		const char *line = buf + pos, *nl = memchr(line, '\n', len - pos);
		size_t n, kn;
		const char *sp;
		int f;

		lineno++;
		if (!nl) {
			why = "no newline at the end of the file";
			goto bad;
		}
		n = (size_t)(nl - line);
		pos += n + 1;
		if (n > MAX_LINE) {
			why = "line longer than 4096 bytes";
			goto bad;
		}
		if (memchr(line, 0, n) || (n && line[n - 1] == '\r')) {
			why = "a NUL byte or a \\r at the end of the line";
			goto bad;
		}
		if (lineno == 1) {
			size_t ml = strlen(KP_ATEN_MAGIC);

			if (n <= ml + 1 || memcmp(line, KP_ATEN_MAGIC " ", ml + 1)) {
				why = "not a torch fusion group file (expected '" KP_ATEN_MAGIC
				      " N')";
				goto bad;
			}
			if (n != ml + 2 || line[ml + 1] < '1' ||
			    line[ml + 1] > '0' + KP_ATEN_FORMAT_VERSION) {
				kp_err_set(err, KP_EVERSION, "%s:1: unknown format version "
					   "'%.*s' (this kplan reads versions 1 to %d)", name,
					   (int)(n > 64 ? 64 : n), line, KP_ATEN_FORMAT_VERSION);
				goto fail;
			}
			g->format_version = line[ml + 1] - '0';
			continue;
		}
		if (!n || line[0] == '#')
			continue;
		if (line[0] == '[') {
			uint32_t id = 0;
			size_t i;

			if (u && seen != ALL_FIELDS(g->format_version))
				goto missing;
			if (!have_plan_hash) {
				why = "a group before 'plan-hash'";
				goto bad;
			}
			if (n < 9 || memcmp(line, "[group ", 7) || line[n - 1] != ']') {
				why = "expected '[group ID]'";
				goto bad;
			}
			for (i = 7; i < n - 1; i++) {
				if (line[i] < '0' || line[i] > '9' || i > 15) {
					why = "expected '[group ID]'";
					goto bad;
				}
				id = id * 10 + (uint32_t)(line[i] - '0');
			}
			if (id != g->n_groups + 1) {
				why = "group ids go 1, 2, ... in order";
				goto bad;
			}
			if (g->n_groups == KP_ATEN_MAX_GROUPS) {
				why = "more than 4096 groups";
				goto bad;
			}
			if (g->n_groups == cap) {
				size_t nc = cap ? cap * 2 : 8;
				struct kp_aten_group *ng = realloc(g->groups, nc * sizeof(*ng));

				if (!ng)
					goto oom;
				g->groups = ng;
				cap = nc;
			}
			u = &g->groups[g->n_groups++];
			memset(u, 0, sizeof(*u));
			u->id = id;
			u->saved_kernels = u->saved_bytes = u->gain_ns = u->per_call = -1;
			seen = 0;
			continue;
		}
		sp = memchr(line, ' ', n);
		if (!sp || sp == line || sp + 1 == line + n) {
			why = "expected 'key value'";
			goto bad;
		}
		kn = (size_t)(sp - line);
		if (!u) {
			if (kn == 9 && !memcmp(line, "plan-hash", 9) && !have_plan_hash) {
				if (kp__plan_parse_hex64(sp + 1, n - kn - 1, &g->plan_hash)) {
					why = "plan-hash: expected 16 lowercase hex digits";
					goto bad;
				}
				have_plan_hash = 1;
				continue;
			}
			why = "expected 'plan-hash HASH' before the groups";
			goto bad;
		}
		for (f = 0; f < F__N; f++)
			if (strlen(field_names[f]) == kn && !memcmp(line, field_names[f], kn))
				break;
		if (f == F__N || (f >= F_V2 && g->format_version < 2)) {
			kp_err_set(err, KP_EFORMAT, "%s:%zu: unknown field '%.*s'%s", name, lineno,
				   (int)(kn > 64 ? 64 : kn), line, f == F__N ? "" :
				   " (format version 1 has none)");
			goto fail;
		}
		if (seen & (1u << f)) {
			kp_err_set(err, KP_EFORMAT, "%s:%zu: field '%s' given twice", name, lineno,
				   field_names[f]);
			goto fail;
		}
		seen |= 1u << f;
		if ((why = set_field(u, f, sp + 1, n - kn - 1))) {
			kp_err_set(err, KP_EFORMAT, "%s:%zu: %s: %s", name, lineno, field_names[f],
				   why);
			goto fail;
		}
	}
	if (!lineno) {
		why = "empty file";
		goto bad;
	}
	if (!have_plan_hash) {
		why = "no 'plan-hash' line";
		goto bad;
	}
	if (u && seen != ALL_FIELDS(g->format_version))
		goto missing;
	return g;
missing:
	{
		int f;

		for (f = 0; f < F__N && (seen & (1u << f)); f++)
			;
		kp_err_set(err, KP_EFORMAT, "%s: group %u: missing field '%s'", name, u->id,
			   field_names[f]);
	}
	goto fail;
oom:
	kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
	goto fail;
bad:
	kp_err_set(err, KP_EFORMAT, "%s:%zu: %s", name, lineno, why);
fail:
	kp_aten_groups_free(g);
	return NULL;
}

int kp_aten_groups_read(const char *aten_path, struct kp_aten_groups **out, char **buf,
			size_t *len, struct kp_err *err)
{
	struct kp_err e2 = {0};
	char *b = NULL;
	size_t n = 0;
	int rc;

	*out = NULL;
	if (buf)
		*buf = NULL;
	rc = kp_file_read(AT_FDCWD, aten_path, 0, KP_ATEN_MAX_FILE_BYTES, &b, &n, &e2);
	if (rc == KP_ENOTFOUND)
		goto out;
	if (rc) {
		*err = e2;
		goto out;
	}
	if (!(*out = kp_aten_groups_parse(b, n, aten_path, err))) {
		rc = err->code ? err->code : KP_EFORMAT;
		goto out;
	}
	if (buf) {
		*buf = b;
		*len = n;
		b = NULL;
	}
out:
	free(b);
	return rc;
}

int kp_aten_groups_load(const char *plan_path, struct kp_aten_groups **out, char **buf,
			size_t *len, struct kp_err *err)
{
	struct kp_strbuf path = KP_STRBUF_INIT;
	int rc;

	*out = NULL;
	if (buf)
		*buf = NULL;
	kp_aten_groups_path(plan_path, &path);
	if (path.oom)
		rc = kp_err_set(err, KP_ENOMEM, "%s: out of memory", plan_path);
	else
		rc = kp_aten_groups_read(path.buf, out, buf, len, err);
	kp_strbuf_release(&path);
	return rc;
}
