/*
 * testutil.h - helpers shared by the unit tests.
 */
#ifndef KP_TESTUTIL_H
#define KP_TESTUTIL_H

#include <stddef.h>

struct kp_sign_key;

/*
 * A path named name inside this run's temporary directory (created on first
 * use under $TMPDIR, removed by the runner at exit). The string is owned by
 * the test library and stays valid until kp_test_cleanup_tmp().
 */
const char *kp_test_path(const char *name);
/* Remove the temporary directory and everything in it. */
void kp_test_cleanup_tmp(void);
/* Path of a file in the source tree (KPLAN_SRC or "."). */
const char *kp_test_src(const char *rel);
/* Write len bytes (len < 0: strlen) to path; 0 ok. */
int kp_test_write(const char *path, const void *data, long len);
/* Read a whole file; malloc'd, NUL-terminated; *len set. NULL on error. */
char *kp_test_read(const char *path, size_t *len);
/* Run a shell command; returns its exit status (or -1). */
int kp_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Path of the kplan binary under test (KPLAN_BIN or build/bin/kplan). */
const char *kp_test_kplan(void);

/*
 * The prefix that runs a shell command as a user without privileges: "" when
 * not root, a setpriv command line (nobody) as root, NULL (and a line saying
 * the test is skipped) as root without setpriv. Static storage.
 */
const char *kp_test_unprivileged(void);
/* A new directory under /tmp that such a user can enter (0755); the caller
 * removes it. Owned by the test library; NULL on failure. */
const char *kp_test_public_dir(void);

/*
 * A fresh signing key pair at kp_test_path(name) and name.pub (removed
 * first); the public key loaded into *pub unless pub is NULL. Returns the
 * secret key's path (kp_test_path's storage). A failed keygen ends the test.
 */
const char *kp_test_fresh_key(const char *name, struct kp_sign_key *pub);

#endif
