/*
 * fcache.h - the on-disk cache of fused kernels compiled by NVRTC
 * (runtime/fused_load_cuda.c), in its CUDA-free part so that the unit tests can
 * check it: where the cache lives and whether it may be used, how an entry
 * is named, and the checked format of an entry.
 *
 * A cached CUBIN is code the process will run, so the cache is used only
 * when nobody else can write it or swap it: a directory (not a symbolic
 * link) owned by the effective user and writable by nobody else (created
 * 0700), under parents nobody else can rearrange, opened once and used
 * through that descriptor only. An entry is
 * named by what it was compiled from and with: the source's SHA-256, the
 * GPU's compute capability and the NVRTC version. Each entry carries the
 * SHA-256 of its CUBIN, checked at every read: a truncated or damaged entry
 * is removed and the source compiled again, never loaded.
 *
 * Entry format: the 8 bytes "KPCUBIN1", the CUBIN's length as 8 bytes
 * little-endian, its SHA-256 (32 bytes), then the CUBIN. Written to a
 * temporary file (mode 0600) and renamed into place (common/fileio.h).
 */
#ifndef KP_RT_FCACHE_H
#define KP_RT_FCACHE_H

#include <stddef.h>

/*
 * Open the cache directory: KPLAN_CACHE_DIR, else $XDG_CACHE_HOME/kplan,
 * else $HOME/.cache/kplan, created (mode 0700) when missing, through
 * kp__rt_fcache_open_dir. dir (may be NULL) receives its path. Returns the
 * descriptor (the caller closes it), or -1 when there is no usable cache
 * (why, may be NULL, says why).
 */
int kp__rt_fcache_open(char *dir, size_t n, char *why, size_t why_len);

/*
 * Open dir for the cache, once: every later step (kp__rt_fcache_read,
 * kp__rt_fcache_write) goes through the returned descriptor (openat,
 * renameat, unlinkat), so a directory swapped in or renamed after this
 * check is never used. Refused (-1, why filled; why may be NULL):
 *
 * - a parent that another user could rearrange: each directory from / down
 *   to dir's parent (links in the path resolved first, then every
 *   component opened O_NOFOLLOW from the one above) must be owned by root
 *   or the effective user and not writable by group or others, unless it
 *   is sticky (/tmp: others cannot rename what is not theirs);
 * - dir itself unless it is a directory (opened O_DIRECTORY|O_NOFOLLOW: a
 *   symbolic link is refused) owned by the effective user and not writable
 *   by group or others (fstat of the open descriptor).
 *
 * create: make dir (mode 0700) when it is missing. Returns the descriptor
 * (the caller closes it).
 */
int kp__rt_fcache_open_dir(const char *dir, int create, char *why, size_t why_len);

/*
 * The name of the entry for src[0..len) compiled for compute capability
 * cc_major.cc_minor by NVRTC nvrtc_major.nvrtc_minor, in the cache
 * directory: "<64 hex: SHA-256 of src>-sm<CC>-nvrtc<MAJOR>.<MINOR>.cubin".
 * 0, or -1 when it does not fit in n bytes.
 */
int kp__rt_fcache_name(char *name, size_t n, const void *src, size_t len, int cc_major,
		       int cc_minor, int nvrtc_major, int nvrtc_minor);

/*
 * The CUBIN of the entry name in the cache directory dirfd (malloc'd, the
 * caller frees; *len its size), or NULL: no entry, or an entry that is not
 * a regular file (a link, a FIFO: opened O_NOFOLLOW|O_NONBLOCK), is
 * malformed or whose CUBIN does not hash to its recorded SHA-256 (such an
 * entry is removed).
 */
void *kp__rt_fcache_read(int dirfd, const char *name, size_t *len);

/* Store bin[0..len) as the entry name in dirfd (atomically, mode 0600). 0 or -1. */
int kp__rt_fcache_write(int dirfd, const char *name, const void *bin, size_t len);

#endif
