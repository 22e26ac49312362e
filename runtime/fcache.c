/*
 * fcache.c - the checked on-disk cache of compiled fused kernels (fcache.h).
 * CUDA-free: fusion_cuda.c compiles and loads, this file decides where an
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

static int write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	ssize_t r;

	while (len) {
		r = write(fd, c, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		len -= (size_t)r;
	}
	return 0;
}

int kp__rt_fcache_check_dir(const char *dir, char *why, size_t why_len)
{
	struct stat st;

	if (lstat(dir, &st))
		return refuse(why, why_len, "%s: %s", dir, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return refuse(why, why_len, "%s: %s", dir, "a symbolic link, not a directory");
	if (!S_ISDIR(st.st_mode))
		return refuse(why, why_len, "%s: %s", dir, "not a directory");
	if (st.st_uid != geteuid())
		return refuse(why, why_len, "%s: %s", dir, "owned by another user");
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return refuse(why, why_len, "%s: %s", dir, "writable by group or others");
	return 0;
}

int kp__rt_fcache_dir(char *dir, size_t n, char *why, size_t why_len)
{
	const char *e = getenv("KPLAN_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME");
	const char *h = getenv("HOME");
	char parent[4096];
	int w;

	if (e && *e) {
		w = snprintf(dir, n, "%s", e);
	} else if (x && *x) {
		w = snprintf(dir, n, "%s/kplan", x);
	} else if (h && *h) {
		/* ~/.cache as the XDG specification makes it, 0700 */
		if (snprintf(parent, sizeof(parent), "%s/.cache", h) < (int)sizeof(parent))
			mkdir(parent, 0700);
		w = snprintf(dir, n, "%s/.cache/kplan", h);
	} else {
		return refuse(why, why_len, "no KPLAN_CACHE_DIR, XDG_CACHE_HOME or HOME");
	}
	if (w < 0 || (size_t)w >= n)
		return refuse(why, why_len, "cache directory path too long");
	if (mkdir(dir, 0700) && errno != EEXIST)
		return refuse(why, why_len, "%s: %s", dir, strerror(errno));
	return kp__rt_fcache_check_dir(dir, why, why_len);
}

int kp__rt_fcache_path(char *path, size_t n, const char *dir, const void *src, size_t len,
		       int cc_major, int cc_minor, int nvrtc_major, int nvrtc_minor)
{
	uint8_t sha[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	int w;

	crypto_hash_sha256(sha, src, len);
	sodium_bin2hex(hex, sizeof(hex), sha, sizeof(sha));
	w = snprintf(path, n, "%s/%s-sm%d%d-nvrtc%d.%d.cubin", dir, hex, cc_major, cc_minor,
		     nvrtc_major, nvrtc_minor);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* The whole regular file at path, at most max bytes; NULL when not so. */
static uint8_t *read_regular(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;
	ssize_t r;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > max || !(buf = malloc((size_t)st.st_size)))
		goto fail;
	while (got < (size_t)st.st_size) {
		r = read(fd, buf + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto fail;
		got += (size_t)r;
	}
	close(fd);
	*len = got;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

void *kp__rt_fcache_read(const char *path, size_t *len)
{
	uint8_t sha[crypto_hash_sha256_BYTES], *buf, *bin;
	uint64_t n = 0;
	size_t flen = 0;
	int i;

	buf = read_regular(path, HDR_BYTES + MAX_CUBIN_BYTES, &flen);
	if (!buf)
		return NULL;
	if (flen <= HDR_BYTES || memcmp(buf, MAGIC, 8))
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
	/* damaged or not ours: never load it; the next compile replaces it */
	free(buf);
	unlink(path);
	return NULL;
}

int kp__rt_fcache_write(const char *path, const void *bin, size_t len)
{
	uint8_t hdr[HDR_BYTES];
	char tmp[4200];
	int fd, i, ok;

	if (!len || len > MAX_CUBIN_BYTES)
		return -1;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
		return -1;   /* no cache rather than a truncated name */
	memcpy(hdr, MAGIC, 8);
	for (i = 0; i < 8; i++)
		hdr[8 + i] = (uint8_t)((uint64_t)len >> (8 * i));
	crypto_hash_sha256(hdr + 16, bin, len);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	ok = !write_all(fd, hdr, sizeof(hdr)) && !write_all(fd, bin, len);
	if (close(fd))
		ok = 0;
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}
