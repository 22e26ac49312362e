/*
 * sign.c - Ed25519 signatures of plan files: key files, the signed message,
 * sign and verify (sign.h). libsodium does the cryptography; this file
 * only reads and writes the one-line formats and builds the message.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "sign.h"
#include "planfile.h"
#include "bundle.h"
#include "aten_groups.h"
#include "fused_limits.h"
#include "../common/fileio.h"
#include "../common/hash.h"

#define SECRET_TAG "kplan-ed25519-secret"
#define PUBLIC_TAG "kplan-ed25519-public"
#define SIG_TAG "kplan-ed25519-signature"
#define MSG_TAG "kplan-signed-plan 1\n"
#define BUNDLE_TAG "kplan-signed-bundle 1\n"
#define MAX_LINE 512             /* a key or signature file is one short line */

_Static_assert(KP_SIGN_BYTES == crypto_sign_BYTES, "KP_SIGN_BYTES");
_Static_assert(KP_SIGN_PUBLIC_BYTES == crypto_sign_PUBLICKEYBYTES, "KP_SIGN_PUBLIC_BYTES");

int kp_sign_init(struct kp_err *err)
{
	if (sodium_init() < 0)
		return kp_err_set(err, KP_EUNSUPPORTED, "libsodium failed to initialise");
	return 0;
}

static void key_id(const uint8_t *pk, char *id)
{
	uint8_t h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, pk, KP_SIGN_PUBLIC_BYTES);
	sodium_bin2hex(id, KP_SIGN_ID_HEX, h, 8);
}

/*
 * One line of text from buf[0..len) into line[MAX_LINE] (one trailing
 * newline removed). 0 or KP_EFORMAT naming name (too long, several lines,
 * a NUL byte).
 */
static int line_from_buf(const char *buf, size_t len, const char *name, char *line,
			 struct kp_err *err)
{
	if (len && buf[len - 1] == '\n')
		len--;
	if (len > MAX_LINE - 2 || memchr(buf, '\n', len) || memchr(buf, 0, len))
		return kp_err_set(err, KP_EFORMAT, "%s: expected one line of text", name);
	memcpy(line, buf, len);
	line[len] = 0;
	return 0;
}

/*
 * Read a small text file of one line into line[MAX_LINE] (the trailing
 * newline removed) through kp_file_open (a FIFO or a device is refused,
 * not waited on). secret: the file is a secret key, refused (KP_EINVAL)
 * when group or others may access it: the mode checked is the one of the
 * file read. 0, KP_ENOTFOUND, KP_EIO, KP_EFORMAT (too long, several lines).
 */
static int read_line(const char *path, char *line, int secret, struct kp_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc;

	if ((fd = kp_file_open(AT_FDCWD, path, 0, &st, err)) < 0)
		return fd;
	if (secret && (st.st_mode & 077))
		rc = kp_err_set(err, KP_EINVAL, "%s: secret key is accessible by group or "
				"others (mode %03o); chmod 600 it", path,
				(unsigned)(st.st_mode & 0777));
	else   /* a longer file is refused like a longer line */
		rc = kp_file_read_fd(fd, path, MAX_LINE, &buf, &len, err);
	close(fd);
	if (!rc)
		rc = line_from_buf(buf, len, path, line, err);
	if (buf)
		sodium_memzero(buf, len);
	free(buf);
	return rc;
}

/* "TAG <hex>" with exactly len bytes of hex into out. */
static int parse_hex_field(const char *s, const char *tag, uint8_t *out, size_t len)
{
	size_t tl = strlen(tag), got = 0;
	const char *end;

	if (strncmp(s, tag, tl) || s[tl] != ' ')
		return -1;
	s += tl + 1;
	if (strlen(s) < 2 * len)
		return -1;
	if (sodium_hex2bin(out, len, s, 2 * len, NULL, &got, &end) || got != len)
		return -1;
	return *end ? -1 : 0;
}

/* Write text to path with O_EXCL and mode. */
static int write_new(const char *path, const char *text, mode_t mode, struct kp_err *err)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

	if (fd < 0)
		return kp_err_set(err, KP_EIO, "%s: cannot create: %s", path,
				  errno == EEXIST ? "file exists (kplan never overwrites a key)" :
				  strerror(errno));
	if (write(fd, text, len) != (ssize_t)len || fsync(fd)) {
		int e = errno;

		close(fd);
		unlink(path);
		return kp_err_set(err, KP_EIO, "%s: write failed: %s", path, strerror(e));
	}
	if (close(fd))
		return kp_err_set(err, KP_EIO, "%s: write failed: %s", path, strerror(errno));
	return 0;
}

int kp_sign_keygen(const char *path, char *id, struct kp_err *err)
{
	uint8_t seed[crypto_sign_SEEDBYTES], pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t sk[crypto_sign_SECRETKEYBYTES];
	char hex[2 * crypto_sign_SEEDBYTES + 1], line[MAX_LINE], kid[KP_SIGN_ID_HEX];
	struct kp_strbuf pub = KP_STRBUF_INIT;
	int rc;

	if ((rc = kp_sign_init(err)))
		return rc;
	randombytes_buf(seed, sizeof(seed));
	crypto_sign_seed_keypair(pk, sk, seed);
	sodium_bin2hex(hex, sizeof(hex), seed, sizeof(seed));
	snprintf(line, sizeof(line), "%s %s\n", SECRET_TAG, hex);
	kp_strbuf_addf(&pub, "%s.pub", path);
	/* the public file first: a failure then leaves no orphan secret */
	sodium_bin2hex(hex, sizeof(hex), pk, sizeof(pk));
	{
		char pline[MAX_LINE];

		snprintf(pline, sizeof(pline), "%s %s\n", PUBLIC_TAG, hex);
		rc = pub.oom ? kp_err_set(err, KP_ENOMEM, "out of memory") :
		     write_new(pub.buf, pline, 0644, err);
	}
	if (!rc) {
		rc = write_new(path, line, 0600, err);
		if (rc)
			unlink(pub.buf);
	}
	if (!rc && id) {
		key_id(pk, kid);
		memcpy(id, kid, KP_SIGN_ID_HEX);
	}
	sodium_memzero(seed, sizeof(seed));
	sodium_memzero(sk, sizeof(sk));
	sodium_memzero(line, sizeof(line));
	kp_strbuf_release(&pub);
	return rc;
}

int kp_sign_parse_public(const char *buf, size_t len, const char *name,
			 struct kp_sign_key *key, struct kp_err *err)
{
	char line[MAX_LINE];
	int rc;

	if ((rc = kp_sign_init(err)) || (rc = line_from_buf(buf, len, name, line, err)))
		return rc;
	if (parse_hex_field(line, PUBLIC_TAG, key->pk, sizeof(key->pk)))
		return kp_err_set(err, KP_EFORMAT, "%s: not a kplan public key (expected '%s "
				  "<64 hex digits>')", name, PUBLIC_TAG);
	key_id(key->pk, key->id);
	return 0;
}

int kp_sign_load_public(const char *path, struct kp_sign_key *key, struct kp_err *err)
{
	char line[MAX_LINE];
	int rc;

	if ((rc = kp_sign_init(err)) || (rc = read_line(path, line, 0, err)))
		return rc;
	return kp_sign_parse_public(line, strlen(line), path, key, err);
}

int kp_sign_load_trust(const char *list, struct kp_sign_key *keys, size_t *n,
		       struct kp_err *err)
{
	const char *p = list, *colon;
	char path[4096];
	int rc;

	*n = 0;
	for (; p && *p; p = colon ? colon + 1 : NULL) {
		size_t len;

		colon = strchr(p, ':');
		len = colon ? (size_t)(colon - p) : strlen(p);
		if (!len)
			continue;
		if (len >= sizeof(path))
			return kp_err_set(err, KP_EINVAL, "trust list: path too long");
		if (*n == KP_SIGN_MAX_TRUST)
			return kp_err_set(err, KP_EINVAL, "trust list: more than %d keys",
					  KP_SIGN_MAX_TRUST);
		memcpy(path, p, len);
		path[len] = 0;
		if ((rc = kp_sign_load_public(path, &keys[*n], err)))
			return rc;
		++*n;
	}
	if (!*n)
		return kp_err_set(err, KP_EINVAL, "trust list names no key file");
	return 0;
}

/* SHA-256 of the source file at path; checks kp_hash64 against want. */
static int hash_source(const char *path, uint64_t want, uint8_t *sha, struct kp_err *err)
{
	char *buf;
	size_t len;
	uint64_t h;
	int rc;

	if ((rc = kp_file_read(AT_FDCWD, path, 0, KP_FX_MAX_SOURCE_BYTES, &buf, &len, err))) {
		kp_err_prefix(err, "cannot read the source the plan references");
		return rc;
	}
	h = kp_hash64(buf, len, KP_HASH_SEED);
	crypto_hash_sha256(sha, (const unsigned char *)buf, len);
	free(buf);
	if (h != want)
		return kp_err_set(err, KP_EMISMATCH, "%s: source file changed since the plan was "
				  "written (hashes to %016llx, the plan says %016llx)", path,
				  (unsigned long long)h, (unsigned long long)want);
	return 0;
}

/*
 * The torch fusion groups in the file at aten_path (aten_groups.h: PLAN.aten
 * beside a plan, a bundle entry's plan-<hash>.aten), when it exists,
 * appended to msg: the file's name, a NUL and its SHA-256, then per group
 * its source's name, a NUL and SHA-256 (the file of that name in dir,
 * which must hash to the group's source-hash). The groups must have been
 * found with this very plan (their plan-hash). aten_sha (may be NULL)
 * receives each source's SHA-256 as signed, in group order.
 */
static int aten_message(const char *aten_path, const char *dir, const struct kp_plan *plan,
			struct kp_strbuf *msg, struct kp_strbuf *aten_sha, struct kp_err *err)
{
	struct kp_strbuf src = KP_STRBUF_INIT;
	struct kp_aten_groups *g = NULL;
	uint8_t sha[crypto_hash_sha256_BYTES];
	const char *base;
	char *buf = NULL;
	size_t len = 0, i;
	int rc;

	rc = kp_aten_groups_read(aten_path, &g, &buf, &len, err);
	if (rc == KP_ENOTFOUND)
		return 0;
	if (rc)
		goto out;
	if (g->plan_hash != plan->body_hash) {
		rc = kp_err_set(err, KP_EMISMATCH, "%s: torch fusion groups found with another "
				"plan (plan-hash %016llx, the plan's body-hash is %016llx): run "
				"again with this plan and kt.save_fusion(), or remove the file",
				aten_path, (unsigned long long)g->plan_hash,
				(unsigned long long)plan->body_hash);
		goto out;
	}
	base = strrchr(aten_path, '/');
	base = base ? base + 1 : aten_path;
	crypto_hash_sha256(sha, (const unsigned char *)buf, len);
	kp_strbuf_add(msg, base, strlen(base) + 1);
	kp_strbuf_add(msg, sha, sizeof(sha));
	for (i = 0; i < g->n_groups; i++) {
		const struct kp_aten_group *u = &g->groups[i];

		kp_strbuf_reset(&src);
		kp_strbuf_addf(&src, "%s/%s", dir, u->source);
		if ((rc = hash_source(src.buf, u->source_hash, sha, err))) {
			kp_err_prefix(err, "torch fusion group %u", u->id);
			goto out;
		}
		kp_strbuf_add(msg, u->source, strlen(u->source) + 1);
		kp_strbuf_add(msg, sha, sizeof(sha));
		if (aten_sha)
			kp_strbuf_add(aten_sha, sha, sizeof(sha));
	}
	if (src.oom || (aten_sha && aten_sha->oom))
		rc = kp_err_set(err, KP_ENOMEM, "%s: out of memory", aten_path);
out:
	kp_aten_groups_free(g);
	free(buf);
	kp_strbuf_release(&src);
	return rc;
}

/*
 * The signed message of the file whose bytes are buf[0..len) at path, of
 * the n plans in it (one for a plan, every entry for a bundle): tag, len
 * as 8 bytes little-endian, the bytes, then per plan, per fusion group
 * with a source in id order, the source's name, a NUL and the SHA-256 of
 * the file of that name in path's directory; then per plan its torch
 * fusion groups (aten_message: a plan's PLAN.aten, a bundle entry's
 * plan-<hash>.aten in the bundle). source_sha (may be NULL): per plan,
 * plans[i]->n_fusions digests as in kp_plan_verify; aten_sha (may be
 * NULL): per plan, a strbuf receiving its torch sources' digests.
 */
static int sign_message(const char *tag, const char *path, const char *buf, size_t len,
			const struct kp_plan *const *plans, size_t n, struct kp_strbuf *msg,
			uint8_t *const *source_sha, struct kp_strbuf *aten_sha,
			struct kp_err *err)
{
	struct kp_strbuf dir = KP_STRBUF_INIT, src = KP_STRBUF_INIT;
	uint8_t le[8], sha[crypto_hash_sha256_BYTES];
	size_t i, k;
	int rc = 0, bundle = !strcmp(tag, BUNDLE_TAG);

	if ((rc = kp_sign_init(err)))
		return rc;
	for (i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)len >> (8 * i));
	kp_strbuf_adds(msg, tag);
	kp_strbuf_add(msg, le, sizeof(le));
	kp_strbuf_add(msg, buf, len);
	kp_plan_dir(path, &dir);
	for (k = 0; k < n; k++) {
		const struct kp_plan *plan = plans[k];

		for (i = 0; i < plan->n_fusions; i++) {
			const struct kp_plan_fusion *fu = &plan->fusions[i];

			if (!fu->source)
				continue;
			kp_strbuf_reset(&src);
			kp_strbuf_addf(&src, "%s/%s", dir.buf, fu->source);
			if ((rc = hash_source(src.buf, fu->source_hash, sha, err)))
				goto out;
			kp_strbuf_add(msg, fu->source, strlen(fu->source) + 1);
			kp_strbuf_add(msg, sha, sizeof(sha));
			if (source_sha && source_sha[k])
				memcpy(source_sha[k] + i * KP_SIGN_SHA256_BYTES, sha, sizeof(sha));
		}
	}
	/* the torch fusion groups: beside a plan, or each entry's in a bundle */
	for (k = 0; k < n; k++) {
		kp_strbuf_reset(&src);
		if (bundle)
			kp_aten_groups_bundle_path(dir.buf, plans[k]->body_hash, &src);
		else
			kp_aten_groups_path(path, &src);
		if (src.oom)
			break;
		if ((rc = aten_message(src.buf, dir.buf, plans[k], msg,
				       aten_sha ? &aten_sha[k] : NULL, err)))
			goto out;
	}
	if (msg->oom || dir.oom || src.oom)
		rc = kp_err_set(err, KP_ENOMEM, "%s: out of memory", path);
out:
	kp_strbuf_release(&dir);
	kp_strbuf_release(&src);
	return rc;
}

int kp_plan_sign_message(const char *plan_path, const char *buf, size_t len,
			 const struct kp_plan *plan, struct kp_strbuf *msg,
			 struct kp_err *err)
{
	return sign_message(MSG_TAG, plan_path, buf, len, &plan, 1, msg, NULL, NULL, err);
}

/* The plans of bundle b, in entry order, into a new array (NULL: no memory). */
static const struct kp_plan **bundle_plans(const struct kp_bundle *b)
{
	const struct kp_plan **plans = calloc(b->n_entries ? b->n_entries : 1, sizeof(*plans));
	size_t i;

	for (i = 0; plans && i < b->n_entries; i++)
		plans[i] = b->entries[i].plan;
	return plans;
}

static int bundle_message(const struct kp_bundle *b, const char *buf, size_t len,
			  struct kp_strbuf *msg, uint8_t *const *source_sha,
			  struct kp_strbuf *aten_sha, struct kp_err *err)
{
	const struct kp_plan **plans = bundle_plans(b);
	size_t i;
	int rc;

	if (!plans)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	for (i = 0; i < b->n_entries; i++)
		if (!plans[i]) {
			free(plans);
			return kp_err_set(err, KP_EINVAL, "%s: entry %zu was taken out", b->path,
					  i + 1);
		}
	rc = sign_message(BUNDLE_TAG, b->path, buf, len, plans, b->n_entries, msg, source_sha,
			  aten_sha, err);
	free(plans);
	return rc;
}

int kp_bundle_sign_message(const struct kp_bundle *b, const char *buf, size_t len,
			   struct kp_strbuf *msg, struct kp_err *err)
{
	return bundle_message(b, buf, len, msg, NULL, NULL, err);
}

/* Read and check the secret key file (private to its owner). */
static int load_secret(const char *path, uint8_t *pk, uint8_t *sk, struct kp_err *err)
{
	uint8_t seed[crypto_sign_SEEDBYTES];
	char line[MAX_LINE];
	int rc;

	if ((rc = read_line(path, line, 1, err)))
		return rc;
	rc = parse_hex_field(line, SECRET_TAG, seed, sizeof(seed));
	sodium_memzero(line, sizeof(line));
	if (rc)
		return kp_err_set(err, KP_EFORMAT, "%s: not a kplan secret key (expected '%s "
				  "<64 hex digits>')", path, SECRET_TAG);
	crypto_sign_seed_keypair(pk, sk, seed);
	sodium_memzero(seed, sizeof(seed));
	return 0;
}

/* Sign msg with the secret key at key_path into signed_path.sig. */
static int sign_detached(const char *signed_path, const struct kp_strbuf *msg,
			 const char *key_path, char *id, struct kp_err *err)
{
	uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
	uint8_t sig[crypto_sign_BYTES];
	char sighex[2 * crypto_sign_BYTES + 1], kid[KP_SIGN_ID_HEX];
	struct kp_strbuf out = KP_STRBUF_INIT, path = KP_STRBUF_INIT;
	int rc;

	if ((rc = kp_sign_init(err)) || (rc = load_secret(key_path, pk, sk, err)))
		return rc;
	crypto_sign_detached(sig, NULL, (const unsigned char *)msg->buf, msg->len, sk);
	sodium_memzero(sk, sizeof(sk));
	key_id(pk, kid);
	sodium_bin2hex(sighex, sizeof(sighex), sig, sizeof(sig));
	kp_strbuf_addf(&out, "%s %s %s\n", SIG_TAG, kid, sighex);
	kp_strbuf_addf(&path, "%s.sig", signed_path);
	if (out.oom || path.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	/* never through a link planted at PLAN.sig or a temporary name (fileio.h) */
	if ((rc = kp_file_write_atomic(AT_FDCWD, path.buf, out.buf, out.len, 0666, err)))
		goto out;
	if (id)
		memcpy(id, kid, KP_SIGN_ID_HEX);
out:
	kp_strbuf_release(&out);
	kp_strbuf_release(&path);
	return rc;
}

int kp_plan_sign(const char *plan_path, const char *key_path, char *id,
		 struct kp_err *err)
{
	struct kp_strbuf msg = KP_STRBUF_INIT;
	struct kp_plan *plan = NULL;
	char *buf = NULL;
	size_t len;
	int rc;

	if ((rc = kp_plan_read(plan_path, &buf, &len, err)))
		goto out;
	plan = kp_plan_parse(buf, len, plan_path, err);
	if (!plan) {
		rc = err ? err->code : KP_EFORMAT;
		goto out;
	}
	if ((rc = kp_plan_sign_message(plan_path, buf, len, plan, &msg, err)))
		goto out;
	rc = sign_detached(plan_path, &msg, key_path, id, err);
out:
	kp_plan_free(plan);
	free(buf);
	kp_strbuf_release(&msg);
	return rc;
}

int kp_bundle_sign(const char *path, const char *key_path, char *id, struct kp_err *err)
{
	struct kp_strbuf msg = KP_STRBUF_INIT;
	struct kp_bundle *b;
	char *buf = NULL;
	size_t len;
	int rc;

	b = kp_bundle_load(path, &buf, &len, err);
	if (!b)
		return err && err->code ? err->code : KP_EFORMAT;
	if (!(rc = bundle_message(b, buf, len, &msg, NULL, NULL, err)))
		rc = sign_detached(b->path, &msg, key_path, id, err);
	kp_bundle_free(b);
	free(buf);
	kp_strbuf_release(&msg);
	return rc;
}

int kp_plan_sig_parse(const char *buf, size_t len, const char *name, char *id,
		      uint8_t *sig, struct kp_err *err)
{
	char line[MAX_LINE];
	size_t tl = strlen(SIG_TAG), got = 0;
	const char *end;
	int rc;

	if ((rc = kp_sign_init(err)) || (rc = line_from_buf(buf, len, name, line, err)))
		return rc;
	/* TAG SP 16-hex SP 128-hex */
	if (strncmp(line, SIG_TAG, tl) || line[tl] != ' ' ||
	    strlen(line) != tl + 1 + 16 + 1 + 2 * crypto_sign_BYTES ||
	    line[tl + 17] != ' ' ||
	    strspn(line + tl + 1, "0123456789abcdef") != 16 ||
	    sodium_hex2bin(sig, crypto_sign_BYTES, line + tl + 18, 2 * crypto_sign_BYTES,
			   NULL, &got, &end) || got != crypto_sign_BYTES || *end)
		return kp_err_set(err, KP_EFORMAT, "%s: not a kplan signature (expected '%s "
				  "<key id> <128 hex digits>')", name, SIG_TAG);
	memcpy(id, line + tl + 1, 16);
	id[16] = 0;
	return 0;
}

/* Read and parse signed_path.sig; what ("plan", "bundle") names it in errors. */
static int read_sig(const char *signed_path, const char *what, char *id, uint8_t *sig,
		    struct kp_err *err)
{
	struct kp_strbuf path = KP_STRBUF_INIT;
	char line[MAX_LINE];
	int rc;

	kp_strbuf_addf(&path, "%s.sig", signed_path);
	if (path.oom) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	rc = read_line(path.buf, line, 0, err);
	if (rc == KP_ENOTFOUND)
		kp_err_set(err, rc, "%s: %s is unsigned (no %s)", signed_path, what, path.buf);
	if (!rc)
		rc = kp_plan_sig_parse(line, strlen(line), path.buf, id, sig, err);
out:
	kp_strbuf_release(&path);
	return rc;
}

int kp_plan_sig_read(const char *plan_path, char *id, struct kp_err *err)
{
	uint8_t sig[crypto_sign_BYTES];
	int rc;

	if ((rc = kp_sign_init(err)))
		return rc;
	return read_sig(plan_path, "plan", id, sig, err);
}

/* The trusted key that signed_path.sig names, into *key, and its signature. */
static int trusted_signer(const char *signed_path, const char *what,
			  const struct kp_sign_key *keys, size_t n_keys, uint8_t *sig,
			  const struct kp_sign_key **key, char *id, struct kp_err *err)
{
	size_t i;
	int rc;

	*key = NULL;
	if ((rc = kp_sign_init(err)) || (rc = read_sig(signed_path, what, id, sig, err)))
		return rc;
	for (i = 0; i < n_keys && !*key; i++)
		if (!strcmp(keys[i].id, id))
			*key = &keys[i];
	if (!*key)
		return kp_err_set(err, KP_EMISMATCH, "%s: signed by key %s, which is not a "
				  "trusted key", signed_path, id);
	return 0;
}

static int check_signature(const char *signed_path, const char *what,
			   const struct kp_strbuf *msg, const uint8_t *sig,
			   const struct kp_sign_key *key, struct kp_err *err)
{
	if (crypto_sign_verify_detached(sig, (const unsigned char *)msg->buf, msg->len, key->pk))
		return kp_err_set(err, KP_EMISMATCH, "%s: bad signature (the %s or a source it "
				  "references changed after signing, or the signature is another "
				  "%s's)", signed_path, what, what);
	return 0;
}

int kp_plan_verify(const char *plan_path, const char *buf, size_t len,
		   const struct kp_plan *plan, const struct kp_sign_key *keys,
		   size_t n_keys, char *signer, uint8_t *source_sha, struct kp_strbuf *aten_sha,
		   struct kp_err *err)
{
	struct kp_strbuf msg = KP_STRBUF_INIT;
	const struct kp_sign_key *key;
	uint8_t sig[crypto_sign_BYTES];
	char id[KP_SIGN_ID_HEX];
	int rc;

	if ((rc = trusted_signer(plan_path, "plan", keys, n_keys, sig, &key, id, err)))
		return rc;
	if (source_sha && plan->n_fusions)
		memset(source_sha, 0, plan->n_fusions * KP_SIGN_SHA256_BYTES);
	if ((rc = sign_message(MSG_TAG, plan_path, buf, len, &plan, 1, &msg, &source_sha, aten_sha,
				 err)) ||
	    (rc = check_signature(plan_path, "plan", &msg, sig, key, err)))
		goto out;
	if (signer)
		memcpy(signer, id, KP_SIGN_ID_HEX);
out:
	kp_strbuf_release(&msg);
	return rc;
}

int kp_bundle_verify(const struct kp_bundle *b, const char *buf, size_t len,
		     const struct kp_sign_key *keys, size_t n_keys, char *signer,
		     uint8_t *const *source_sha, struct kp_strbuf *aten_sha, struct kp_err *err)
{
	struct kp_strbuf msg = KP_STRBUF_INIT;
	const struct kp_sign_key *key;
	uint8_t sig[crypto_sign_BYTES];
	char id[KP_SIGN_ID_HEX];
	size_t i;
	int rc;

	if ((rc = trusted_signer(b->path, "bundle", keys, n_keys, sig, &key, id, err)))
		return rc;
	for (i = 0; source_sha && i < b->n_entries; i++)
		if (source_sha[i] && b->entries[i].plan && b->entries[i].plan->n_fusions)
			memset(source_sha[i], 0,
			       b->entries[i].plan->n_fusions * KP_SIGN_SHA256_BYTES);
	if ((rc = bundle_message(b, buf, len, &msg, source_sha, aten_sha, err)) ||
	    (rc = check_signature(b->path, "bundle", &msg, sig, key, err)))
		goto out;
	if (signer)
		memcpy(signer, id, KP_SIGN_ID_HEX);
out:
	kp_strbuf_release(&msg);
	return rc;
}

int kp_bundle_sig_read(const struct kp_bundle *b, char *id, struct kp_err *err)
{
	uint8_t sig[crypto_sign_BYTES];
	int rc;

	if ((rc = kp_sign_init(err)))
		return rc;
	return read_sig(b->path, "bundle", id, sig, err);
}
