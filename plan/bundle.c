/*
 * bundle.c - plan bundles (bundle.h): the index reader and writer, adding
 * plans with their duplicates and model checks, saving the directory, and
 * choosing the entry for a GPU. Format: plan/FORMAT.md, "Bundles".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aten_groups.h"
#include "bundle.h"
#include "fused_limits.h"
#include "../common/fileio.h"
#include "../common/hash.h"

#define SIG_SUFFIX ".sig"

static const char *match_names[] = {
	"?", "gpu-name and sm-count", "gpu-name", "sm-count", "hard keys only", "no match",
};

const char *kp_bundle_match_name(int match)
{
	return match >= KP_BUNDLE_M_EXACT && match <= KP_BUNDLE_M_NONE ? match_names[match] : "?";
}

struct kp_bundle *kp_bundle_new(void)
{
	return calloc(1, sizeof(struct kp_bundle));
}

static void entry_release(struct kp_bundle_entry *e)
{
	free(e->bytes);
	kp_plan_free(e->plan);
	free(e->src_dir);
	free(e->aten_from);
	memset(e, 0, sizeof(*e));
}

void kp_bundle_free(struct kp_bundle *b)
{
	size_t i;

	if (!b)
		return;
	for (i = 0; i < b->n_entries; i++)
		entry_release(&b->entries[i]);
	free(b->entries);
	free(b->path);
	free(b);
}

struct kp_plan *kp_bundle_take(struct kp_bundle *b, size_t i)
{
	struct kp_plan *p;

	if (i >= b->n_entries)
		return NULL;
	p = b->entries[i].plan;
	b->entries[i].plan = NULL;
	return p;
}

int kp_bundle_is(const char *path)
{
	static const char magic[] = KP_BUNDLE_MAGIC " ";
	char head[sizeof(magic) - 1];
	struct stat st;
	ssize_t n;
	int fd;

	if (stat(path, &st))
		return 0;
	if (S_ISDIR(st.st_mode)) {
		/* a directory without an index is not a bundle: the plan reader
		 * then says "a directory, expected a regular file" */
		struct kp_strbuf index = KP_STRBUF_INIT;
		int is;

		kp_strbuf_addf(&index, "%s/%s", path, KP_BUNDLE_FILE);
		is = !index.oom && !lstat(index.buf, &st);
		kp_strbuf_release(&index);
		return is;
	}
	fd = kp_file_open(AT_FDCWD, path, 0, NULL, NULL);
	if (fd < 0)
		return 0;
	n = read(fd, head, sizeof(head));
	close(fd);
	return n == (ssize_t)sizeof(head) && !memcmp(head, magic, sizeof(head));
}

void kp_bundle_index_path(const char *path, struct kp_strbuf *out)
{
	struct stat st;

	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		kp_strbuf_addf(out, "%s/%s", path, KP_BUNDLE_FILE);
	else
		kp_strbuf_adds(out, path);
}

static int same_str(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

int kp_bundle_target_cmp(const struct kp_plan *a, const struct kp_plan *b)
{
	int c = strcmp(a->gpu_name ? a->gpu_name : "", b->gpu_name ? b->gpu_name : "");

	if (c)
		return c;
	if (a->sm_count != b->sm_count)
		return a->sm_count < b->sm_count ? -1 : 1;
	if (a->cc_major != b->cc_major)
		return a->cc_major < b->cc_major ? -1 : 1;
	if (a->cc_minor != b->cc_minor)
		return a->cc_minor < b->cc_minor ? -1 : 1;
	if (a->cuda_major != b->cuda_major)
		return a->cuda_major < b->cuda_major ? -1 : 1;
	return 0;
}

void kp_bundle_target_name(const struct kp_plan *p, char *buf, size_t n)
{
	char name[128];
	size_t i, j = 0;

	/* printable: a hand-edited plan may carry anything in its strings */
	for (i = 0; p->gpu_name && p->gpu_name[i] && j + 1 < sizeof(name); i++)
		name[j++] = (unsigned char)p->gpu_name[i] < 0x20 ||
			    (unsigned char)p->gpu_name[i] == 0x7f ? '?' : p->gpu_name[i];
	name[j] = 0;
	snprintf(buf, n, "%s, %d SMs, cc %d.%d, CUDA %d", j ? name : "unknown GPU",
		 p->sm_count, p->cc_major, p->cc_minor, p->cuda_major);
}

void kp_bundle_entry_name(const struct kp_bundle *b, size_t i, char *buf, size_t n)
{
	char t[224];

	if (i >= b->n_entries || !b->entries[i].plan) {
		snprintf(buf, n, "#%zu", i + 1);
		return;
	}
	kp_bundle_target_name(b->entries[i].plan, t, sizeof(t));
	snprintf(buf, n, "#%zu %s", i + 1, t);
}

/* The model identity for messages. */
static const char *model_name(const struct kp_plan *p)
{
	return p->model && *p->model ? p->model : "(not pinned)";
}

/*
 * Check plan p (from name) against the entries of b other than skip: same
 * model, another target. *dup gets the index of an entry for the same
 * target (-1: none). 0, or KP_EMISMATCH (another model).
 */
static int fits(const struct kp_bundle *b, const struct kp_plan *p, const char *name,
		size_t skip, long *dup, struct kp_err *err)
{
	size_t i;

	*dup = -1;
	for (i = 0; i < b->n_entries; i++) {
		const struct kp_plan *q = b->entries[i].plan;

		if (i == skip || !q)
			continue;
		if (!same_str(p->model, q->model))
			return kp_err_set(err, KP_EMISMATCH, "%s: made for model '%.200s', the "
					  "bundle's entries for '%.200s': one bundle holds one "
					  "model (kplan plan --for)", name, model_name(p),
					  model_name(q));
		if (!kp_bundle_target_cmp(p, q) && *dup < 0)
			*dup = (long)i;
	}
	return 0;
}

static int push_entry(struct kp_bundle *b, char *bytes, size_t len, struct kp_plan *p,
		      char *src_dir, char *aten_from)
{
	struct kp_bundle_entry *e;

	e = realloc(b->entries, (b->n_entries + 1) * sizeof(*e));
	if (!e)
		return KP_ENOMEM;
	b->entries = e;
	e = &b->entries[b->n_entries++];
	e->bytes = bytes;
	e->len = len;
	e->plan = p;
	e->src_dir = src_dir;
	e->aten_from = aten_from;
	return 0;
}

void kp_bundle_aten_path(const struct kp_bundle *b, size_t i, struct kp_strbuf *out)
{
	struct kp_strbuf dir = KP_STRBUF_INIT;

	if (i >= b->n_entries || !b->entries[i].plan)
		return;
	kp_plan_dir(b->path ? b->path : KP_BUNDLE_FILE, &dir);
	kp_aten_groups_bundle_path(dir.buf, b->entries[i].plan->body_hash, out);
	if (dir.oom)
		out->oom = 1;
	kp_strbuf_release(&dir);
}

int kp_bundle_add(struct kp_bundle *b, const char *buf, size_t len, const char *name,
		  int replace, struct kp_strbuf *notes, struct kp_err *err)
{
	struct kp_strbuf dir = KP_STRBUF_INIT, aten = KP_STRBUF_INIT;
	struct kp_plan *p;
	char *bytes = NULL, t[224];
	struct stat st;
	long dup;
	size_t i;
	int rc;

	p = kp_plan_parse(buf, len, name, err);
	if (!p)
		return err && err->code ? err->code : KP_EFORMAT;
	kp_bundle_target_name(p, t, sizeof(t));
	kp_aten_groups_path(name, &aten);
	if (aten.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	for (i = 0; i < b->n_entries; i++) {
		struct kp_bundle_entry *e = &b->entries[i];

		if (e->len == len && !memcmp(e->bytes, buf, len)) {
			if (notes)
				kp_strbuf_addf(notes, "%s: the same plan as the entry for %s: kept "
					       "once\n", name, t);
			/* groups saved again beside the plan are the newer ones */
			if (!stat(aten.buf, &st) && (!e->aten_from || strcmp(e->aten_from, aten.buf))) {
				free(e->aten_from);
				e->aten_from = kp_strbuf_detach(&aten, NULL);
				if (notes)
					kp_strbuf_addf(notes, "%s: its torch fusion groups (%s) replace "
						       "the entry's\n", name, e->aten_from);
			}
			kp_strbuf_release(&aten);
			kp_plan_free(p);
			return 0;
		}
	}
	if (b->n_entries >= KP_BUNDLE_MAX_ENTRIES) {
		rc = kp_err_set(err, KP_EINVAL, "%s: a bundle holds at most %d plans", name,
				KP_BUNDLE_MAX_ENTRIES);
		goto fail;
	}
	if ((rc = fits(b, p, name, (size_t)-1, &dup, err)))
		goto fail;
	if (dup >= 0 && !replace) {
		rc = kp_err_set(err, KP_EMISMATCH, "%s: another plan for the same GPU (%s) is "
				"there already: give one plan per GPU", name, t);
		goto fail;
	}
	kp_plan_dir(name, &dir);
	if (!(bytes = malloc(len + 1)) || dir.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	memcpy(bytes, buf, len);
	bytes[len] = 0;
	if (dup >= 0) {
		struct kp_bundle_entry *e = &b->entries[dup];

		if (notes)
			kp_strbuf_addf(notes, "%s: replaces the bundle's plan for the same GPU "
				       "(%s)\n", name, t);
		entry_release(e);
		e->bytes = bytes;
		e->len = len;
		e->plan = p;
		e->src_dir = kp_strbuf_detach(&dir, NULL);
		e->aten_from = kp_strbuf_detach(&aten, NULL);
		return 0;
	}
	if (push_entry(b, bytes, len, p, dir.buf, aten.buf)) {
		rc = kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	return 0;
fail:
	free(bytes);
	kp_strbuf_release(&dir);
	kp_strbuf_release(&aten);
	kp_plan_free(p);
	return rc;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct kp_bundle_entry *x = a, *y = b;
	int c = kp_bundle_target_cmp(x->plan, y->plan);

	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->bytes, y->bytes, x->len);
}

int kp_bundle_write(struct kp_bundle *b, struct kp_strbuf *out, struct kp_err *err)
{
	size_t i;

	if (!b->n_entries)
		return kp_err_set(err, KP_EINVAL, "a bundle needs at least one plan");
	qsort(b->entries, b->n_entries, sizeof(*b->entries), entry_cmp);
	kp_strbuf_addf(out, "%s %d\n", KP_BUNDLE_MAGIC, KP_BUNDLE_FORMAT_VERSION);
	kp_strbuf_addf(out, "entries %zu\n", b->n_entries);
	for (i = 0; i < b->n_entries; i++) {
		kp_strbuf_addf(out, "entry %zu bytes %zu\n", i + 1, b->entries[i].len);
		kp_strbuf_add(out, b->entries[i].bytes, b->entries[i].len);
	}
	kp_strbuf_adds(out, "end\n");
	if (out->oom)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	return 0;
}

/* ---------------------------------------------------------------------- */
/* reader */

/*
 * The line at *pos in buf[0..len) into line[n] (without its newline);
 * *pos moves past it. 0, or -1 when there is no complete line or it is
 * longer than n - 1.
 */
static int next_line(const char *buf, size_t len, size_t *pos, char *line, size_t n)
{
	const char *nl = *pos < len ? memchr(buf + *pos, '\n', len - *pos) : NULL;
	size_t l;

	if (!nl)
		return -1;
	l = (size_t)(nl - (buf + *pos));
	if (l >= n || memchr(buf + *pos, 0, l))
		return -1;
	memcpy(line, buf + *pos, l);
	line[l] = 0;
	*pos += l + 1;
	return 0;
}

/* A decimal without sign or leading zeros, at most max. */
static int parse_count(const char *s, size_t max, size_t *out)
{
	size_t v = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > max / 10)
			return -1;
		v = v * 10 + (size_t)(*s - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

struct kp_bundle *kp_bundle_parse(const char *buf, size_t len, const char *name,
				  struct kp_err *err)
{
	struct kp_bundle *b = kp_bundle_new();
	char line[128], ename[64];
	size_t pos = 0, n = 0, i, v;
	long dup;
	int ver;

	if (!b || !(b->path = kp_strdup(name))) {
		kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	if (len > KP_BUNDLE_MAX_FILE_BYTES) {
		kp_err_set(err, KP_EFORMAT, "%s: larger than %u bytes", name,
			   KP_BUNDLE_MAX_FILE_BYTES);
		goto fail;
	}
	if (next_line(buf, len, &pos, line, sizeof(line)) ||
	    strncmp(line, KP_BUNDLE_MAGIC " ", sizeof(KP_BUNDLE_MAGIC))) {
		kp_err_set(err, KP_EFORMAT, "%s:1: not a kplan bundle (expected '%s %d')", name,
			   KP_BUNDLE_MAGIC, KP_BUNDLE_FORMAT_VERSION);
		goto fail;
	}
	if (sscanf(line + sizeof(KP_BUNDLE_MAGIC), "%d", &ver) != 1 ||
	    ver != KP_BUNDLE_FORMAT_VERSION) {
		kp_err_set(err, KP_EVERSION, "%s:1: unknown bundle format version '%.20s' "
			   "(this kplan reads version %d)", name, line + sizeof(KP_BUNDLE_MAGIC),
			   KP_BUNDLE_FORMAT_VERSION);
		goto fail;
	}
	if (next_line(buf, len, &pos, line, sizeof(line)) || strncmp(line, "entries ", 8) ||
	    parse_count(line + 8, KP_BUNDLE_MAX_ENTRIES, &n) || !n) {
		kp_err_set(err, KP_EFORMAT, "%s:2: expected 'entries N' with N 1..%d", name,
			   KP_BUNDLE_MAX_ENTRIES);
		goto fail;
	}
	for (i = 0; i < n; i++) {
		char want[48], *bytes;
		struct kp_plan *p;

		snprintf(want, sizeof(want), "entry %zu bytes ", i + 1);
		if (next_line(buf, len, &pos, line, sizeof(line)) ||
		    strncmp(line, want, strlen(want)) ||
		    parse_count(line + strlen(want), KP_PLAN_MAX_FILE_BYTES, &v)) {
			kp_err_set(err, KP_EFORMAT, "%s: entry %zu: expected 'entry %zu bytes N' (the bundle says "
				   "%zu entries; truncated?)", name, i + 1, i + 1, n);
			goto fail;
		}
		if (v > len - pos) {
			kp_err_set(err, KP_EFORMAT, "%s: entry %zu: %zu bytes announced, %zu left "
				   "(truncated)", name, i + 1, v, len - pos);
			goto fail;
		}
		snprintf(ename, sizeof(ename), "%s: entry %zu", name, i + 1);
		p = kp_plan_parse(buf + pos, v, ename, err);
		if (!p)
			goto fail;
		if (!(bytes = malloc(v + 1))) {
			kp_plan_free(p);
			kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
			goto fail;
		}
		memcpy(bytes, buf + pos, v);
		bytes[v] = 0;
		pos += v;
		if (push_entry(b, bytes, v, p, NULL, NULL)) {
			free(bytes);
			kp_plan_free(p);
			kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
			goto fail;
		}
		if (fits(b, p, ename, b->n_entries - 1, &dup, err))
			goto fail;
		if (dup >= 0) {
			kp_err_set(err, KP_EMISMATCH, "%s: the same GPU as entry %ld: a bundle "
				   "holds one plan per GPU", ename, dup + 1);
			goto fail;
		}
	}
	if (next_line(buf, len, &pos, line, sizeof(line)) || strcmp(line, "end")) {
		kp_err_set(err, KP_EFORMAT, "%s: expected 'end' after entry %zu (truncated?)",
			   name, n);
		goto fail;
	}
	if (pos != len) {
		kp_err_set(err, KP_EFORMAT, "%s: %zu bytes after 'end' (appended to?)", name,
			   len - pos);
		goto fail;
	}
	return b;
fail:
	kp_bundle_free(b);
	return NULL;
}

struct kp_bundle *kp_bundle_load(const char *path, char **bytes, size_t *len,
				 struct kp_err *err)
{
	struct kp_strbuf index = KP_STRBUF_INIT, dir = KP_STRBUF_INIT;
	struct kp_bundle *b = NULL;
	char *buf = NULL;
	size_t n = 0, i;

	kp_bundle_index_path(path, &index);
	if (index.oom) {
		kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	/* a FIFO or a device planted under the name is refused, never waited on */
	if (kp_file_read(AT_FDCWD, index.buf, 0, KP_BUNDLE_MAX_FILE_BYTES, &buf, &n, err))
		goto out;
	if (!(b = kp_bundle_parse(buf, n, index.buf, err)))
		goto out;
	kp_plan_dir(index.buf, &dir);
	for (i = 0; i < b->n_entries; i++) {
		struct kp_strbuf aten = KP_STRBUF_INIT;

		kp_bundle_aten_path(b, i, &aten);
		b->entries[i].aten_from = kp_strbuf_detach(&aten, NULL);
		if (!(b->entries[i].src_dir = kp_strdup(dir.buf)) || !b->entries[i].aten_from) {
			kp_err_set(err, KP_ENOMEM, "out of memory");
			kp_bundle_free(b);
			b = NULL;
			goto out;
		}
	}
	if (bytes) {
		*bytes = buf;
		*len = n;
		buf = NULL;
	}
out:
	free(buf);
	kp_strbuf_release(&index);
	kp_strbuf_release(&dir);
	return b;
}

/* ---------------------------------------------------------------------- */
/* saving */

/*
 * Copy the fused source `name` of an entry from src_dir into dir, checking
 * it against the plan's source-hash; a file of that name already in dir
 * must hold the same bytes.
 */
static int copy_source(const char *src_dir, const char *dir, const char *name, uint64_t hash,
		       struct kp_err *err)
{
	struct kp_strbuf from = KP_STRBUF_INIT, to = KP_STRBUF_INIT;
	char *buf = NULL, *old = NULL;
	size_t n, on;
	int rc;

	kp_strbuf_addf(&from, "%s/%s", src_dir, name);
	kp_strbuf_addf(&to, "%s/%s", dir, name);
	if (from.oom || to.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = kp_file_read(AT_FDCWD, from.buf, 0, KP_FX_MAX_SOURCE_BYTES, &buf, &n,
			       err))) {
		kp_err_prefix(err, "cannot read a fused source a plan names");
		goto out;
	}
	if (kp_hash64(buf, n, KP_HASH_SEED) != hash) {
		rc = kp_err_set(err, KP_EMISMATCH, "%s: source file changed since the plan was "
				"written (its source-hash is %016llx)", from.buf,
				(unsigned long long)hash);
		goto out;
	}
	rc = kp_file_read(AT_FDCWD, to.buf, KP_FILE_NOFOLLOW, KP_FX_MAX_SOURCE_BYTES, &old,
			  &on, err);
	if (!rc) {
		if (on != n || memcmp(old, buf, n))
			rc = kp_err_set(err, KP_EMISMATCH, "%s: already in the bundle with other "
					"bytes than %s", to.buf, from.buf);
		goto out;
	}
	if (rc != KP_ENOTFOUND)
		goto out;
	kp_err_clear(err);
	rc = kp_file_write_atomic(AT_FDCWD, to.buf, buf, n, 0666, err);
out:
	free(buf);
	free(old);
	kp_strbuf_release(&from);
	kp_strbuf_release(&to);
	return rc;
}

/*
 * Copy entry e's torch fusion groups (e->aten_from, when it exists) into
 * dir as plan-<body-hash>.aten, their sources first (copy_source). The
 * groups must have been found with the entry's plan. 0 or an error naming
 * the file.
 */
static int copy_aten(struct kp_bundle_entry *e, const char *dir, struct kp_err *err)
{
	struct kp_strbuf from_dir = KP_STRBUF_INIT, to = KP_STRBUF_INIT;
	struct kp_aten_groups *g = NULL;
	char *buf = NULL, *old = NULL;
	size_t n = 0, on, i;
	int rc;

	if (!e->aten_from || !e->plan)
		return 0;
	rc = kp_aten_groups_read(e->aten_from, &g, &buf, &n, err);
	if (rc == KP_ENOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (g->plan_hash != e->plan->body_hash) {
		rc = kp_err_set(err, KP_EMISMATCH, "%s: torch fusion groups found with another "
				"plan (plan-hash %016llx, the plan's body-hash is %016llx): run "
				"again with this plan and kt.save_fusion(), or remove the file",
				e->aten_from, (unsigned long long)g->plan_hash,
				(unsigned long long)e->plan->body_hash);
		goto out;
	}
	kp_plan_dir(e->aten_from, &from_dir);
	kp_aten_groups_bundle_path(dir, e->plan->body_hash, &to);
	if (from_dir.oom || to.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < g->n_groups; i++) {
		if ((rc = copy_source(from_dir.buf, dir, g->groups[i].source,
				      g->groups[i].source_hash, err))) {
			kp_err_prefix(err, "%s: torch fusion group %u", e->aten_from, g->groups[i].id);
			goto out;
		}
	}
	/* the same file (a bundle saved again): nothing to write */
	rc = kp_file_read(AT_FDCWD, to.buf, KP_FILE_NOFOLLOW, KP_ATEN_MAX_FILE_BYTES, &old, &on,
			  err);
	if (!rc && on == n && !memcmp(old, buf, n))
		goto out;
	if (rc && rc != KP_ENOTFOUND)
		goto out;
	kp_err_clear(err);
	rc = kp_file_write_atomic(AT_FDCWD, to.buf, buf, n, 0666, err);
out:
	kp_aten_groups_free(g);
	free(buf);
	free(old);
	kp_strbuf_release(&from_dir);
	kp_strbuf_release(&to);
	return rc;
}

int kp_bundle_save(struct kp_bundle *b, const char *dir, int *unsigned_now,
		   struct kp_err *err)
{
	struct kp_strbuf out = KP_STRBUF_INIT, path = KP_STRBUF_INIT;
	struct stat st;
	size_t i, j;
	int rc;

	if (unsigned_now)
		*unsigned_now = 0;
	if (mkdir(dir, 0777) && errno != EEXIST)
		return kp_err_set(err, KP_EIO, "%s: cannot create the bundle directory: %s", dir,
				  strerror(errno));
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return kp_err_set(err, KP_EIO, "%s: exists and is not a directory (a bundle is "
				  "a directory)", dir);
	if ((rc = kp_bundle_write(b, &out, err)))
		goto out;
	for (i = 0; i < b->n_entries; i++) {
		const struct kp_plan *p = b->entries[i].plan;

		for (j = 0; p && j < p->n_fusions; j++) {
			if (!p->fusions[j].source)
				continue;
			if ((rc = copy_source(b->entries[i].src_dir ? b->entries[i].src_dir : ".",
					      dir, p->fusions[j].source, p->fusions[j].source_hash,
					      err)))
				goto out;
		}
		if ((rc = copy_aten(&b->entries[i], dir, err)))
			goto out;
	}
	kp_strbuf_addf(&path, "%s/%s", dir, KP_BUNDLE_FILE);
	if (path.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = kp_file_write_atomic(AT_FDCWD, path.buf, out.buf, out.len, 0666, err)))
		goto out;
	for (i = 0; i < b->n_entries; i++) {
		struct kp_bundle_entry *e = &b->entries[i];
		char *d = kp_strdup(dir);

		if (!d) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			goto out;
		}
		free(e->src_dir);
		e->src_dir = d;
		free(e->aten_from);
		e->aten_from = NULL;
		if (e->plan) {
			struct kp_strbuf a = KP_STRBUF_INIT;

			kp_aten_groups_bundle_path(dir, e->plan->body_hash, &a);
			e->aten_from = kp_strbuf_detach(&a, NULL);
		}
	}
	free(b->path);
	b->path = kp_strdup(path.buf);
	/* the old signature signs the old index: fail closed, and say so */
	kp_strbuf_adds(&path, SIG_SUFFIX);
	if (!path.oom && !unlink(path.buf) && unsigned_now)
		*unsigned_now = 1;
out:
	kp_strbuf_release(&out);
	kp_strbuf_release(&path);
	return rc;
}

size_t kp_bundle_prune_aten(const struct kp_bundle *b, const char *dir)
{
	static const char pre[] = "plan-";
	const size_t pl = sizeof(pre) - 1, sl = sizeof(KP_ATEN_SUFFIX) - 1;
	struct dirent *de;
	size_t removed = 0, i;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		unsigned long long h;
		char *end;
		int kept = 0;

		/* exactly plan-<16 hex>.aten: nothing else is touched */
		if (strlen(n) != pl + 16 + sl || strncmp(n, pre, pl) ||
		    strcmp(n + pl + 16, KP_ATEN_SUFFIX) ||
		    strspn(n + pl, "0123456789abcdef") != 16)
			continue;
		h = strtoull(n + pl, &end, 16);
		for (i = 0; i < b->n_entries && !kept; i++)
			kept = b->entries[i].plan && b->entries[i].plan->body_hash == h;
		if (!kept && !unlinkat(dirfd(d), n, 0))
			removed++;
	}
	closedir(d);
	return removed;
}

/* ---------------------------------------------------------------------- */
/* choosing */

static void verdict(const struct kp_plan *p, const struct kp_gpu_desc *gpu,
		    struct kp_bundle_verdict *v)
{
	struct kp_plan_report rep;
	int name_eq, sms_eq;
	size_t i;

	memset(v, 0, sizeof(*v));
	if (kp_plan_check(p, gpu, &rep) == KP_PLAN_NOT_APPLICABLE) {
		v->match = KP_BUNDLE_M_NONE;
		for (i = 0; i < rep.n_items; i++) {
			if (rep.items[i].severity == KP_PLAN_NOT_APPLICABLE) {
				snprintf(v->why, sizeof(v->why), "%s: %s", rep.items[i].key,
					 rep.items[i].msg);
				break;
			}
		}
		return;
	}
	name_eq = p->gpu_name && p->gpu_name[0] && gpu->name && !strcmp(p->gpu_name, gpu->name);
	sms_eq = p->sm_count > 0 && gpu->sm_count > 0 && p->sm_count == gpu->sm_count;
	v->driver_match = p->driver_version > 0 && p->driver_version == gpu->driver_version;
	if (name_eq && sms_eq) {
		v->match = KP_BUNDLE_M_EXACT;
		snprintf(v->why, sizeof(v->why), "gpu-name and sm-count match (%d SMs)",
			 p->sm_count);
	} else if (name_eq) {
		v->match = KP_BUNDLE_M_NAME;
		snprintf(v->why, sizeof(v->why), "gpu-name matches, sm-count does not (plan %d, "
			 "gpu %d)", p->sm_count, gpu->sm_count);
	} else if (sms_eq) {
		v->match = KP_BUNDLE_M_SMS;
		snprintf(v->why, sizeof(v->why), "sm-count matches (%d), gpu-name does not",
			 p->sm_count);
	} else {
		v->match = KP_BUNDLE_M_HARD;
		snprintf(v->why, sizeof(v->why), "only the hard keys match (cc %d.%d, CUDA %d)",
			 p->cc_major, p->cc_minor, p->cuda_major);
	}
}

int kp_bundle_choose(const struct kp_bundle *b, const struct kp_gpu_desc *gpu,
		     struct kp_bundle_choice *c)
{
	char t[256];
	size_t i, k;
	int best = -1;

	memset(c, 0, sizeof(*c));
	c->entry = -1;
	c->match = KP_BUNDLE_M_NONE;
	for (i = 0; i < b->n_entries && i < KP_BUNDLE_MAX_ENTRIES; i++) {
		struct kp_bundle_verdict *v = &c->v[i];

		if (!b->entries[i].plan) {
			v->match = KP_BUNDLE_M_NONE;
			snprintf(v->why, sizeof(v->why), "taken");
			continue;
		}
		verdict(b->entries[i].plan, gpu, v);
		if (v->match == KP_BUNDLE_M_NONE)
			continue;
		if (best < 0 || v->match < c->v[best].match ||
		    (v->match == c->v[best].match && v->driver_match && !c->v[best].driver_match))
			best = (int)i;
	}
	if (best >= 0) {
		c->entry = best;
		c->match = c->v[best].match;
		kp_bundle_entry_name(b, (size_t)best, t, sizeof(t));
		snprintf(c->why, sizeof(c->why), "entry %.200s: %s", t, c->v[best].why);
		return best;
	}
	k = (size_t)snprintf(c->why, sizeof(c->why), "no entry applies");
	for (i = 0; i < b->n_entries && i < KP_BUNDLE_MAX_ENTRIES && k < sizeof(c->why); i++)
		k += (size_t)snprintf(c->why + k, sizeof(c->why) - k, "%s #%zu %s",
				      i ? ";" : ":", i + 1, c->v[i].why);
	return -1;
}
