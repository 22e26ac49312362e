/*
 * fileio.h - reading and writing the files kplan trusts, safely.
 *
 * Plans, signatures, keys, fused sources, catalogs and cached kernels are
 * read with kp_file_read: opened O_NONBLOCK (a FIFO or a device planted
 * under the name never blocks the reader), checked with fstat to be a
 * regular file, bounded in size, then read. Files that replace others
 * (plans, signatures, exports, cache entries, fused sources) are written
 * with kp_file_tmp_* / kp_file_write_atomic: a new temporary file created
 * with O_CREAT|O_EXCL|O_NOFOLLOW next to the target (a link planted at any
 * name is never written through), fsync'ed, renamed over the target (which
 * replaces a link rather than following it) and the directory fsync'ed.
 *
 * Every path is taken relative to a directory descriptor (AT_FDCWD for the
 * current directory), so that a caller who checked a directory once (the
 * kernel cache, runtime/fcache.c) keeps working in that very directory.
 */
#ifndef KP_FILEIO_H
#define KP_FILEIO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "err.h"

/* kp_file_open / kp_file_read flags */
#define KP_FILE_NOFOLLOW 0x1   /* refuse a symbolic link as the last component */

/*
 * Open the regular file at path (relative to dirfd) for reading, without
 * blocking and without becoming the controlling terminal. OUT: *st (may be
 * NULL) its fstat. Returns the descriptor (the caller closes it), or
 * KP_ENOTFOUND (no such file), KP_EIO (cannot open; not a regular file: a
 * FIFO, a directory, a device, or with KP_FILE_NOFOLLOW a symbolic link),
 * each with a message naming path and what was found there.
 */
int kp_file_open(int dirfd, const char *path, unsigned flags, struct stat *st,
		 struct kp_err *err);

/*
 * Read the rest of the regular file fd (from kp_file_open; name is the
 * file named in errors) up to EOF. OUT: *out, malloc'd, NUL-terminated
 * after its *len bytes (the caller frees it). 0, or KP_EFORMAT (more than
 * max_bytes), KP_EIO, KP_ENOMEM. fd stays open.
 */
int kp_file_read_fd(int fd, const char *name, size_t max_bytes, char **out, size_t *len,
		    struct kp_err *err);

/* kp_file_open, then kp_file_read_fd, then close. Errors as theirs. */
int kp_file_read(int dirfd, const char *path, unsigned flags, size_t max_bytes, char **out,
		 size_t *len, struct kp_err *err);

/*
 * A file being written under a temporary name beside its target.
 * kp_file_tmp_open fills it; kp_file_tmp_commit or kp_file_tmp_abort
 * releases it (either may be called after the other: a no-op).
 */
struct kp_file_tmp {
	int dirfd;       /* what path and tmp are relative to (borrowed) */
	int fd;          /* the temporary file, open for writing; -1 when released */
	FILE *f;         /* kp_file_tmp_stream's stream over fd, or NULL */
	char *path;      /* the target (a copy) */
	char *tmp;       /* the temporary: DIR/.BASE.tmp-XXXXXX (a copy) */
};

/*
 * Create a new temporary file beside path (relative to dirfd) with mode
 * (less the umask), O_CREAT|O_EXCL|O_NOFOLLOW under a random name. 0, or
 * KP_EIO naming path, KP_ENOMEM.
 */
int kp_file_tmp_open(struct kp_file_tmp *t, int dirfd, const char *path, mode_t mode,
		     struct kp_err *err);

/* A stdio stream over t's file (owned by t: commit or abort closes it), or NULL. */
FILE *kp_file_tmp_stream(struct kp_file_tmp *t, struct kp_err *err);

/*
 * Flush and fsync the temporary file, rename it over the target and fsync
 * the directory; released in any case (on failure the temporary file is
 * removed). 0, or KP_EIO naming the target.
 */
int kp_file_tmp_commit(struct kp_file_tmp *t, struct kp_err *err);

/* Close and remove the temporary file; released. */
void kp_file_tmp_abort(struct kp_file_tmp *t);

/*
 * Replace path (relative to dirfd) with buf[0..len) atomically, through
 * kp_file_tmp_*: readers see the old file or the new one, never a part,
 * and a link planted at path or at a temporary name is never written
 * through. 0, or KP_EIO / KP_ENOMEM naming path.
 */
int kp_file_write_atomic(int dirfd, const char *path, const void *buf, size_t len,
			 mode_t mode, struct kp_err *err);

#endif
