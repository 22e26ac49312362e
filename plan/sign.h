/*
 * sign.h - Ed25519 signatures of plan files (libsodium).
 *
 * A plan makes the process that loads it compile and run the fused CUDA
 * sources it names, so a shipped plan is code: its checksum catches
 * accidents, a signature catches intent. The signature is detached, in
 * PLAN.sig next to the plan, and covers the plan's bytes and the content
 * (SHA-256) of every source file the plan references (kp_plan_sign_message):
 * editing the plan, swapping a source or moving the signature to another
 * plan all break it. Formats (one line of text each, plan/FORMAT.md,
 * "Signatures"):
 *
 *   KEY        kplan-ed25519-secret <64 hex: the 32-byte seed>      mode 0600
 *   KEY.pub    kplan-ed25519-public <64 hex: the 32-byte public key>
 *   PLAN.sig   kplan-ed25519-signature <16 hex: key id> <128 hex: signature>
 *
 * The key id is the first 8 bytes of SHA-256 of the public key, in hex.
 * Used by the CLI (keygen, sign, check --trust) and by libkplanrt (trusted
 * keys from kp_rt_options.trust / KPLAN_RT_TRUST), so that both build the
 * same message. Nothing here prints; errors name the file at fault.
 */
#ifndef KP_PLAN_SIGN_H
#define KP_PLAN_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"

struct kp_plan;

#define KP_SIGN_PUBLIC_BYTES 32
#define KP_SIGN_ID_HEX 17          /* 16 hex digits and the NUL */
#define KP_SIGN_MAX_TRUST 16       /* keys in one trust list */
#define KP_SIGN_SHA256_BYTES 32
#define KP_SIGN_BYTES 64           /* an Ed25519 signature */

/* A public key and its id. */
struct kp_sign_key {
	uint8_t pk[KP_SIGN_PUBLIC_BYTES];
	char id[KP_SIGN_ID_HEX];
};

/* Initialise libsodium (idempotent, thread-safe). 0 or KP_EUNSUPPORTED. */
int kp_sign_init(struct kp_err *err);

/*
 * Write a new secret key to path (mode 0600) and its public key to
 * path.pub; neither may exist. id (KP_SIGN_ID_HEX bytes, may be NULL)
 * receives the key id. 0, or KP_EIO naming the file.
 */
int kp_sign_keygen(const char *path, char *id, struct kp_err *err);

/* Read a public key file into *key. 0, KP_ENOTFOUND / KP_EIO / KP_EFORMAT. */
int kp_sign_load_public(const char *path, struct kp_sign_key *key, struct kp_err *err);

/*
 * Parse the text of a public key file, buf[0..len) (not NUL-terminated;
 * one line, one trailing newline allowed), into *key; name is the file
 * named in errors. 0 or KP_EFORMAT. kp_sign_load_public reads a file and
 * calls this; tests/fuzz/fuzz_sig.c feeds it arbitrary bytes.
 */
int kp_sign_parse_public(const char *buf, size_t len, const char *name,
			 struct kp_sign_key *key, struct kp_err *err);

/*
 * Read a colon-separated list of public key files (at most
 * KP_SIGN_MAX_TRUST) into keys[]; *n gets the count. Empty entries are
 * skipped; a list with no key is KP_EINVAL. Errors as kp_sign_load_public.
 */
int kp_sign_load_trust(const char *list, struct kp_sign_key *keys, size_t *n,
		       struct kp_err *err);

/*
 * The signed message of the plan at plan_path whose bytes are buf[0..len)
 * and whose parse is plan, appended to msg:
 *
 *   "kplan-signed-plan 1\n", len as 8 bytes little-endian, the plan bytes,
 *   then for each fusion group with a source, in id order: the source's
 *   name, a NUL, and the SHA-256 of the file of that name next to the plan;
 *   then, when the plan ships torch fusion groups (PLAN.aten, aten_groups.h),
 *   that file's name, a NUL and its SHA-256, and for each group in order its
 *   source's name, a NUL and SHA-256.
 *
 * Each source must also hash (kp_hash64) to the plan's source-hash, so that
 * a changed source is named rather than reported as a bad signature.
 * Returns 0, KP_ENOTFOUND / KP_EIO (a source cannot be read), KP_EMISMATCH
 * (a source changed since the plan was written, or PLAN.aten was written for
 * another plan), KP_EFORMAT (PLAN.aten malformed), KP_ENOMEM; the message
 * names the file.
 */
int kp_plan_sign_message(const char *plan_path, const char *buf, size_t len,
			 const struct kp_plan *plan, struct kp_strbuf *msg,
			 struct kp_err *err);

/*
 * Sign the plan at plan_path with the secret key at key_path: writes
 * plan_path.sig (replaced atomically). The key file must not be readable
 * by group or others. id (may be NULL) receives the key id. 0 or an error
 * naming the file (the plan's own parse errors included).
 */
int kp_plan_sign(const char *plan_path, const char *key_path, char *id,
		 struct kp_err *err);

/*
 * Read plan_path.sig's key id without verifying anything: 0 (signed, id
 * filled), KP_ENOTFOUND (unsigned: no .sig), KP_EIO, KP_EFORMAT.
 */
int kp_plan_sig_read(const char *plan_path, char *id, struct kp_err *err);

/*
 * Parse the text of a signature file, buf[0..len) (as kp_sign_parse_public),
 * into its key id (id: KP_SIGN_ID_HEX bytes) and signature (sig:
 * KP_SIGN_BYTES bytes); name is the file named in errors. 0 or KP_EFORMAT.
 * The parser under kp_plan_sig_read and kp_plan_verify.
 */
int kp_plan_sig_parse(const char *buf, size_t len, const char *name, char *id,
		      uint8_t *sig, struct kp_err *err);

/*
 * Verify the signature of the plan at plan_path (bytes buf[0..len), parsed
 * as plan: check the very bytes that are used) against the trusted keys.
 * 0 when a trusted key signed exactly these bytes and sources (signer, may
 * be NULL, gets its id). Otherwise: KP_ENOTFOUND (no .sig: unsigned, or a
 * referenced source is missing), KP_EFORMAT (malformed .sig), KP_EMISMATCH
 * (signed by an untrusted key, bad signature, or a source changed), each
 * with a message naming the file.
 *
 * source_sha (may be NULL): plan->n_fusions * KP_SIGN_SHA256_BYTES bytes
 * that receive, at i * KP_SIGN_SHA256_BYTES, the SHA-256 of fusion i's
 * source as signed (zeros for a group without a source); meaningful only
 * when 0 is returned. Whoever reads a source again after this (libkplanrt,
 * to compile it) must check it against these digests: the file may have
 * been replaced in between. aten_sha (may be NULL) receives, appended, the
 * SHA-256 of each torch fusion group's source as signed (PLAN.aten's groups
 * in order; nothing when the plan has none), for the same check by
 * kp_rt_kernel_load.
 */
int kp_plan_verify(const char *plan_path, const char *buf, size_t len,
		   const struct kp_plan *plan, const struct kp_sign_key *keys,
		   size_t n_keys, char *signer, uint8_t *source_sha, struct kp_strbuf *aten_sha,
		   struct kp_err *err);

/* ---------------------------------------------------------------------- */
/* Bundles (plan/bundle.h): one signature, DIR/bundle.sig, over the index
 * and every source any entry references. */

struct kp_bundle;

/*
 * The signed message of bundle b (parsed from its index bytes
 * buf[0..len), b->path the index file), appended to msg:
 *
 *   "kplan-signed-bundle 1\n", len as 8 bytes little-endian, the index
 *   bytes (every entry's plan file in them), then for each entry in order,
 *   for each fusion group with a source in id order: its name, a NUL and
 *   the SHA-256 of the file of that name in the bundle's directory; then
 *   for each entry in order that ships torch fusion groups (its
 *   plan-<body-hash>.aten in the bundle, kp_bundle_aten_path): the file's
 *   name, a NUL and its SHA-256, and per group its source's name, a NUL and
 *   SHA-256, as for a plan. A bundle without such files: the message of
 *   format 1's first bundles, byte for byte.
 *
 * Errors as kp_plan_sign_message.
 */
int kp_bundle_sign_message(const struct kp_bundle *b, const char *buf, size_t len,
			   struct kp_strbuf *msg, struct kp_err *err);

/*
 * Sign the bundle at path (its directory or index) with the secret key at
 * key_path: writes INDEX.sig (DIR/bundle.sig) atomically. As kp_plan_sign.
 */
int kp_bundle_sign(const char *path, const char *key_path, char *id, struct kp_err *err);

/*
 * Verify the bundle's signature over the index bytes buf[0..len) that b
 * was parsed from and every source of every entry: one tampered entry or
 * source makes the whole bundle untrusted. Returns as kp_plan_verify
 * ("bundle is unsigned", ...). source_sha (may be NULL): per entry i, NULL
 * or b->entries[i].plan->n_fusions * KP_SIGN_SHA256_BYTES bytes that
 * receive the signed SHA-256 of its sources, as kp_plan_verify's.
 * aten_sha (may be NULL): b->n_entries strbufs; entry i's receives,
 * appended, the signed SHA-256 of each of its torch fusion groups' sources
 * (kp_plan_verify's aten_sha).
 */
int kp_bundle_verify(const struct kp_bundle *b, const char *buf, size_t len,
		     const struct kp_sign_key *keys, size_t n_keys, char *signer,
		     uint8_t *const *source_sha, struct kp_strbuf *aten_sha,
		     struct kp_err *err);

/* The key id of the bundle's signature, not verified: as kp_plan_sig_read. */
int kp_bundle_sig_read(const struct kp_bundle *b, char *id, struct kp_err *err);

#endif /* KP_PLAN_SIGN_H */
