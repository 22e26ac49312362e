/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CUnit/CUnit.h>

#include "plan/sign.h"

static char tmpdir[256];
static char *paths[4096];
static int n_paths;

static const char *keep(char *p)
{
	if (n_paths < (int)(sizeof(paths) / sizeof(paths[0])))
		paths[n_paths++] = p;
	return p;
}

const char *kp_test_path(const char *name)
{
	char *p;

	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

		snprintf(tmpdir, sizeof(tmpdir), "%s/kplan-test-XXXXXX", base);
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			abort();
		}
	}
	if (asprintf(&p, "%s/%s", tmpdir, name) < 0)
		abort();
	return keep(p);
}

void kp_test_cleanup_tmp(void)
{
	int i;

	if (tmpdir[0] && !getenv("KPLAN_TEST_KEEP"))
		kp_test_sh("rm -rf '%s'", tmpdir);
	for (i = 0; i < n_paths; i++)
		free(paths[i]);
	n_paths = 0;
}

const char *kp_test_src(const char *rel)
{
	const char *base = getenv("KPLAN_SRC") ? getenv("KPLAN_SRC") : ".";
	char *p;

	if (asprintf(&p, "%s/%s", base, rel) < 0)
		abort();
	return keep(p);
}

const char *kp_test_kplan(void)
{
	return getenv("KPLAN_BIN") ? getenv("KPLAN_BIN") : "build/bin/kplan";
}

int kp_test_write(const char *path, const void *data, long len)
{
	FILE *f = fopen(path, "wb");
	size_t n = len < 0 ? strlen(data) : (size_t)len;
	int rc;

	if (!f)
		return -1;
	rc = fwrite(data, 1, n, f) == n ? 0 : -1;
	if (fclose(f))
		rc = -1;
	return rc;
}

char *kp_test_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0, r;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - n < 65536) {
			char *p = realloc(buf, cap = cap * 2 + 65536);

			if (!p) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = p;
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

int kp_test_sh(const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&cmd, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = system(cmd);
	free(cmd);
	if (rc == -1 || !WIFEXITED(rc))
		return -1;
	return WEXITSTATUS(rc);
}

const char *kp_test_unprivileged(void)
{
	if (geteuid() != 0)
		return "";
	if (kp_test_sh("command -v setpriv > /dev/null 2>&1") == 0)
		return "setpriv --reuid=65534 --regid=65534 --clear-groups ";
	fprintf(stderr, "read-only tests skipped: running as root without setpriv\n");
	return NULL;
}

const char *kp_test_public_dir(void)
{
	char *dir = strdup("/tmp/kplan-pub-XXXXXX");

	if (!dir)
		abort();
	if (!mkdtemp(dir) || chmod(dir, 0755)) {
		free(dir);
		return NULL;
	}
	return keep(dir);
}

const char *kp_test_fresh_key(const char *name, struct kp_sign_key *pub)
{
	struct kp_err err = {0};
	char pubpath[4200];
	const char *path = kp_test_path(name);

	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	unlink(path);
	unlink(pubpath);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(path, NULL, &err), 0);
	if (pub)
		CU_ASSERT_EQUAL(kp_sign_load_public(pubpath, pub, &err), 0);
	return path;
}
