/*
 * fcache.c - the checked on-disk cache of compiled fused kernels (fcache.h).
 * CUDA-free: fused_load_cuda.c compiles and loads, this file decides where an
 * entry lives, whether the cache may be used, and whether an entry is
 * intact.
 */
#include "fcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "../common/fileio.h"

#define MAGIC "KPCUBIN1"
#define HDR_BYTES (8 + 8 + crypto_hash_sha256_BYTES)
#define MAX_CUBIN_BYTES (64u << 20)

/* why (may be NULL) gets the message; returns -1 */
static int refuse(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	if (why && n) {
		va_start(ap, fmt);
		vsnprintf(why, n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/*
 * The directory at fd (shown in messages) lies on the way to the cache:
 * only root or the effective user may rearrange it (rename the cache
 * directory away and put another in its place).
 */
static int check_parent(int fd, const char *shown, char *why, size_t n)
{
	struct stat st;

	if (fstat(fd, &st))
		return refuse(why, n, "%s: %s", shown, strerror(errno));
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return refuse(why, n, "%s: a parent of the cache directory owned by another user "
			      "(uid %u)", shown, (unsigned)st.st_uid);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return refuse(why, n, "%s: a parent of the cache directory writable by group or "
			      "others and not sticky (another user could swap the cache directory)",
			      shown);
	return 0;
}

/*
 * The parent directory of the cache, opened component by component from /
 * (O_PATH|O_NOFOLLOW, each checked by check_parent) after resolving links
 * in parent with realpath: a link swapped in during the walk fails the
 * open. Returns the descriptor or -1.
 */
static int open_parent(const char *parent, char *why, size_t n)
{
	char *real = realpath(parent, NULL), *p, *end;
	int fd, nfd;

	if (!real)
		return refuse(why, n, "%s: %s", parent, strerror(errno));
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || check_parent(fd, "/", why, n))
		goto fail;
	/* real is absolute and canonical: "/a/b/c"; each step cuts it after a component */
	for (p = real + 1; *p; p = *end ? end + 1 : end) {
		char save;

		end = strchr(p, '/');
		if (!end)
			end = p + strlen(p);
		save = *end;
		*end = 0;
		nfd = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
		if (fd < 0)
			refuse(why, n, "%s: %s", real, errno == ELOOP ?
			       "became a symbolic link while checked" : strerror(errno));
		if (fd < 0 || check_parent(fd, real, why, n))
			goto fail;
		*end = save;
	}
	free(real);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	free(real);
	return -1;
}

int kp__rt_fcache_open_dir(const char *dir, int create, char *why, size_t why_len)
{
	char path[4096], *slash, *last;
	struct stat st;
	size_t len;
	int pfd, fd;

	len = strlen(dir);
	if (!len || len >= sizeof(path))
		return refuse(why, why_len, "cache directory path empty or too long");
	memcpy(path, dir, len + 1);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = 0;
	slash = strrchr(path, '/');
	last = slash ? slash + 1 : path;
	if (!*last || !strcmp(last, ".") || !strcmp(last, ".."))
		return refuse(why, why_len, "%s: %s", dir, "expected the path of a directory "
			      "ending in its name");
	if (slash == path)
		pfd = open_parent("/", why, why_len);
	else if (slash) {
		*slash = 0;
		pfd = open_parent(path, why, why_len);
		*slash = '/';
	} else {
		pfd = open_parent(".", why, why_len);
	}
	if (pfd < 0)
		return -1;
	if (create && mkdirat(pfd, last, 0700) && errno != EEXIST) {
		refuse(why, why_len, "%s: %s", dir, strerror(errno));
		close(pfd);
		return -1;
	}
	/* once: what is checked below is what every later step uses */
	fd = openat(pfd, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		if (!fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
			refuse(why, why_len, "%s: %s", dir, "a symbolic link, not a directory");
		else if (e == ENOTDIR)
			refuse(why, why_len, "%s: %s", dir, "not a directory");
		else
			refuse(why, why_len, "%s: %s", dir, strerror(e));
		close(pfd);
		return -1;
	}
	close(pfd);
	if (fstat(fd, &st))
		refuse(why, why_len, "%s: %s", dir, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		refuse(why, why_len, "%s: %s", dir, "not a directory");
	else if (st.st_uid != geteuid())
		refuse(why, why_len, "%s: %s", dir, "owned by another user");
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		refuse(why, why_len, "%s: %s", dir, "writable by group or others");
	else
		return fd;
	close(fd);
	return -1;
}

int kp__rt_fcache_open(char *dir, size_t n, char *why, size_t why_len)
{
	const char *e = getenv("KPLAN_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME");
	const char *h = getenv("HOME");
	char path[4096], parent[4096];
	int w;

	if (e && *e) {
		w = snprintf(path, sizeof(path), "%s", e);
	} else if (x && *x) {
		w = snprintf(path, sizeof(path), "%s/kplan", x);
	} else if (h && *h) {
		/* ~/.cache as the XDG specification makes it, 0700 (checked as a parent) */
		if (snprintf(parent, sizeof(parent), "%s/.cache", h) < (int)sizeof(parent))
			mkdir(parent, 0700);
		w = snprintf(path, sizeof(path), "%s/.cache/kplan", h);
	} else {
		return refuse(why, why_len, "no KPLAN_CACHE_DIR, XDG_CACHE_HOME or HOME");
	}
	if (w < 0 || (size_t)w >= sizeof(path))
		return refuse(why, why_len, "cache directory path too long");
	if (dir && n)
		snprintf(dir, n, "%s", path);
	return kp__rt_fcache_open_dir(path, 1, why, why_len);
}

int kp__rt_fcache_name(char *name, size_t n, const void *src, size_t len, int cc_major,
		       int cc_minor, int nvrtc_major, int nvrtc_minor)
{
	uint8_t sha[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	int w;

	crypto_hash_sha256(sha, src, len);
	sodium_bin2hex(hex, sizeof(hex), sha, sizeof(sha));
	w = snprintf(name, n, "%s-sm%d%d-nvrtc%d.%d.cubin", hex, cc_major, cc_minor, nvrtc_major,
		     nvrtc_minor);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

void *kp__rt_fcache_read(int dirfd, const char *name, size_t *len)
{
	uint8_t sha[crypto_hash_sha256_BYTES], *buf, *bin;
	struct kp_err err = {0};
	uint64_t n = 0;
	size_t flen = 0;
	char *raw;
	int i, rc;

	/* not a link, not a FIFO, bounded (common/fileio.h) */
	rc = kp_file_read(dirfd, name, KP_FILE_NOFOLLOW, HDR_BYTES + MAX_CUBIN_BYTES, &raw, &flen,
			  &err);
	if (rc == KP_ENOTFOUND)
		return NULL;
	buf = (uint8_t *)raw;
	if (rc || flen <= HDR_BYTES || memcmp(buf, MAGIC, 8))
		goto bad;
	for (i = 0; i < 8; i++)
		n |= (uint64_t)buf[8 + i] << (8 * i);
	if (n != flen - HDR_BYTES)
		goto bad;
	crypto_hash_sha256(sha, buf + HDR_BYTES, (unsigned long long)n);
	if (sodium_memcmp(sha, buf + 16, sizeof(sha)))
		goto bad;
	bin = malloc((size_t)n);
	if (bin) {
		memcpy(bin, buf + HDR_BYTES, (size_t)n);
		*len = (size_t)n;
	}
	free(buf);
	return bin;
bad:
	/* damaged, not ours or not a file: never load it; the next compile replaces it */
	free(raw);
	unlinkat(dirfd, name, 0);
	return NULL;
}

int kp__rt_fcache_write(int dirfd, const char *name, const void *bin, size_t len)
{
	uint8_t hdr[HDR_BYTES];
	struct kp_file_tmp t;
	FILE *f;
	int i;

	if (!len || len > MAX_CUBIN_BYTES)
		return -1;
	memcpy(hdr, MAGIC, 8);
	for (i = 0; i < 8; i++)
		hdr[8 + i] = (uint8_t)((uint64_t)len >> (8 * i));
	crypto_hash_sha256(hdr + 16, bin, len);
	if (kp_file_tmp_open(&t, dirfd, name, 0600, NULL))
		return -1;
	if (!(f = kp_file_tmp_stream(&t, NULL)) || fwrite(hdr, 1, sizeof(hdr), f) != sizeof(hdr) ||
	    fwrite(bin, 1, len, f) != len) {
		kp_file_tmp_abort(&t);
		return -1;
	}
	return kp_file_tmp_commit(&t, NULL) ? -1 : 0;
}
