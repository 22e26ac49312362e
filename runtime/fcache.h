/*
 * fcache.h - the on-disk cache of fused kernels compiled by NVRTC
 * (runtime/fusion_cuda.c), in its CUDA-free part so that the unit tests can
 * check it: where the cache lives and whether it may be used, how an entry
 * is named, and the checked format of an entry.
 *
 * A cached CUBIN is code the process will run, so the cache is used only
 * when nobody else can write it: a directory (not a symbolic link) owned by
 * the effective user and writable by nobody else (created 0700). An entry is
 * named by what it was compiled from and with: the source's SHA-256, the
 * GPU's compute capability and the NVRTC version. Each entry carries the
 * SHA-256 of its CUBIN, checked at every read: a truncated or damaged entry
 * is removed and the source compiled again, never loaded.
 *
 * Entry format: the 8 bytes "KPCUBIN1", the CUBIN's length as 8 bytes
 * little-endian, its SHA-256 (32 bytes), then the CUBIN. Written to a
 * temporary file (mode 0600) and renamed into place.
 */
#ifndef KP_RT_FCACHE_H
#define KP_RT_FCACHE_H

#include <stddef.h>

/*
 * The cache directory: KPLAN_CACHE_DIR, else $XDG_CACHE_HOME/kplan, else
 * $HOME/.cache/kplan, created (mode 0700) when missing and checked
 * (kp__rt_fcache_check_dir). 0 with dir filled, or -1 when there is no
 * usable cache (why, may be NULL, says why).
 */
int kp__rt_fcache_dir(char *dir, size_t n, char *why, size_t why_len);

/*
 * 0 when dir may hold the cache: lstat says it is a directory (a symbolic
 * link is refused), owned by the effective uid, not writable by group or
 * others. Else -1 with why (may be NULL) filled.
 */
int kp__rt_fcache_check_dir(const char *dir, char *why, size_t why_len);

/*
 * The path of the entry for src[0..len) compiled for compute capability
 * cc_major.cc_minor by NVRTC nvrtc_major.nvrtc_minor, in dir:
 * "DIR/<64 hex: SHA-256 of src>-sm<CC>-nvrtc<MAJOR>.<MINOR>.cubin".
 * 0, or -1 when it does not fit in n bytes.
 */
int kp__rt_fcache_path(char *path, size_t n, const char *dir, const void *src, size_t len,
		       int cc_major, int cc_minor, int nvrtc_major, int nvrtc_minor);

/*
 * The CUBIN of the entry at path (malloc'd, the caller frees; *len its
 * size), or NULL: no entry, or an entry that is not a regular file, is
 * malformed or whose CUBIN does not hash to its recorded SHA-256 (such an
 * entry is removed).
 */
void *kp__rt_fcache_read(const char *path, size_t *len);

/* Store bin[0..len) as the entry at path (atomically). 0 or -1. */
int kp__rt_fcache_write(const char *path, const void *bin, size_t len);

#endif
