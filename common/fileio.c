/* fileio.c - see fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "strbuf.h"

/* what a non-regular file is, for messages */
static const char *file_type(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" :
	       S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" :
	       S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

int kp_file_open(int dirfd, const char *path, unsigned flags, struct stat *st,
		 struct kp_err *err)
{
	int oflags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, fd;
	struct stat local, lst;

	if (!st)
		st = &local;
	if (flags & KP_FILE_NOFOLLOW)
		oflags |= O_NOFOLLOW;
	fd = openat(dirfd, path, oflags);
	if (fd < 0) {
		if (errno == ELOOP && (flags & KP_FILE_NOFOLLOW) &&
		    !fstatat(dirfd, path, &lst, AT_SYMLINK_NOFOLLOW) && S_ISLNK(lst.st_mode))
			return kp_err_set(err, KP_EIO, "%s: a symbolic link, expected a regular file",
					  path);
		return kp_err_set(err, errno == ENOENT ? KP_ENOTFOUND : KP_EIO,
				  "%s: cannot open: %s", path, strerror(errno));
	}
	if (fstat(fd, st)) {
		kp_err_set(err, KP_EIO, "%s: cannot stat: %s", path, strerror(errno));
		close(fd);
		return KP_EIO;
	}
	if (!S_ISREG(st->st_mode)) {
		kp_err_set(err, KP_EIO, "%s: %s, expected a regular file", path,
			   file_type(st->st_mode));
		close(fd);
		return KP_EIO;
	}
	return fd;
}

int kp_file_read_fd(int fd, const char *name, size_t max_bytes, char **out, size_t *len,
		    struct kp_err *err)
{
	struct stat st;
	size_t cap, n = 0;
	char *buf, *nb;
	ssize_t r;

	*out = NULL;
	*len = 0;
	if (fstat(fd, &st))
		return kp_err_set(err, KP_EIO, "%s: cannot stat: %s", name, strerror(errno));
	if (st.st_size > 0 && (unsigned long long)st.st_size > max_bytes)
		return kp_err_set(err, KP_EFORMAT, "%s: %lld bytes, larger than the %zu expected",
				  name, (long long)st.st_size, max_bytes);
	/* the size as a first guess (the file may change): one byte more sees EOF */
	cap = (size_t)(st.st_size > 0 ? st.st_size : 0) + 1;
	if (cap < 4096 && max_bytes >= 4096)
		cap = 4096;
	if (!(buf = malloc(cap + 1)))
		return kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
	for (;;) {
		if (n == cap) {
			size_t ncap = cap * 2;

			if (cap > max_bytes) {
				free(buf);
				return kp_err_set(err, KP_EFORMAT, "%s: larger than the %zu bytes "
						  "expected", name, max_bytes);
			}
			if (ncap > max_bytes + 1)
				ncap = max_bytes + 1;
			if (!(nb = realloc(buf, ncap + 1))) {
				free(buf);
				return kp_err_set(err, KP_ENOMEM, "%s: out of memory", name);
			}
			buf = nb;
			cap = ncap;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			kp_err_set(err, KP_EIO, "%s: read failed: %s", name, strerror(errno));
			free(buf);
			return KP_EIO;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	if (n > max_bytes) {
		free(buf);
		return kp_err_set(err, KP_EFORMAT, "%s: larger than the %zu bytes expected", name,
				  max_bytes);
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

int kp_file_read(int dirfd, const char *path, unsigned flags, size_t max_bytes, char **out,
		 size_t *len, struct kp_err *err)
{
	int fd = kp_file_open(dirfd, path, flags, NULL, err), rc;

	*out = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	rc = kp_file_read_fd(fd, path, max_bytes, out, len, err);
	close(fd);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* atomic replacement */

static void tmp_release(struct kp_file_tmp *t)
{
	free(t->path);
	free(t->tmp);
	t->path = t->tmp = NULL;
	t->f = NULL;
	t->fd = -1;
}

/* six characters of the name nobody can guess (a planted name only fails the open) */
static void random_suffix(char *s)
{
	static const char cs[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[6];
	struct timespec ts;
	size_t i;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)((unsigned long)ts.tv_nsec >> (i * 5) ^
					       (unsigned long)getpid() >> i ^ (unsigned long)rand());
	}
	for (i = 0; i < sizeof(r); i++)
		s[i] = cs[r[i] % (sizeof(cs) - 1)];
}

int kp_file_tmp_open(struct kp_file_tmp *t, int dirfd, const char *path, mode_t mode,
		     struct kp_err *err)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) + 1 : 0, at;
	int tries;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	t->dirfd = dirfd;
	kp_strbuf_add(&sb, path, dlen);
	kp_strbuf_addf(&sb, ".%s.tmp-XXXXXX", path + dlen);
	t->path = kp_strdup(path);
	if (sb.oom || !t->path) {
		kp_strbuf_release(&sb);
		tmp_release(t);
		return kp_err_set(err, KP_ENOMEM, "%s: out of memory", path);
	}
	at = sb.len - 6;
	for (tries = 0; tries < 100; tries++) {
		random_suffix(sb.buf + at);
		t->fd = openat(dirfd, sb.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			       mode);
		if (t->fd >= 0 || errno != EEXIST)
			break;
	}
	if (t->fd < 0) {
		kp_err_set(err, KP_EIO, "%s: cannot create a file in its directory: %s", path,
			   strerror(errno));
		kp_strbuf_release(&sb);
		tmp_release(t);
		return KP_EIO;
	}
	t->tmp = kp_strbuf_detach(&sb, NULL);
	return 0;
}

FILE *kp_file_tmp_stream(struct kp_file_tmp *t, struct kp_err *err)
{
	if (!t->f && t->fd >= 0 && !(t->f = fdopen(t->fd, "wb")))
		kp_err_set(err, KP_EIO, "%s: %s", t->path, strerror(errno));
	return t->f;
}

/* fsync the directory holding path (best effort: the rename is done) */
static void sync_dir(int dirfd, const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = NULL;
	int fd;

	if (slash)
		dir = slash == path ? kp_strdup("/") : strndup(path, (size_t)(slash - path));
	fd = openat(dirfd, dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		if (fsync(fd) && errno != EINVAL)
			kp_debug("%s: fsync of its directory: %s", path, strerror(errno));
		close(fd);
	}
	free(dir);
}

int kp_file_tmp_commit(struct kp_file_tmp *t, struct kp_err *err)
{
	int rc = 0, e;

	if (!t->path)
		return 0;
	if (t->f) {
		if (fflush(t->f) || ferror(t->f))
			rc = kp_err_set(err, KP_EIO, "%s: write failed: %s", t->path,
					strerror(errno));
	}
	if (!rc && fsync(t->fd))
		rc = kp_err_set(err, KP_EIO, "%s: write failed: %s", t->path, strerror(errno));
	e = t->f ? fclose(t->f) : close(t->fd);
	if (e && !rc)
		rc = kp_err_set(err, KP_EIO, "%s: write failed: %s", t->path, strerror(errno));
	t->f = NULL;
	t->fd = -1;
	if (!rc && renameat(t->dirfd, t->tmp, t->dirfd, t->path))
		rc = kp_err_set(err, KP_EIO, "%s: cannot rename into place: %s", t->path,
				strerror(errno));
	if (rc)
		unlinkat(t->dirfd, t->tmp, 0);
	else
		sync_dir(t->dirfd, t->path);
	tmp_release(t);
	return rc;
}

void kp_file_tmp_abort(struct kp_file_tmp *t)
{
	if (!t->path)
		return;
	if (t->f)
		fclose(t->f);
	else if (t->fd >= 0)
		close(t->fd);
	unlinkat(t->dirfd, t->tmp, 0);
	tmp_release(t);
}

int kp_file_write_atomic(int dirfd, const char *path, const void *buf, size_t len,
			 mode_t mode, struct kp_err *err)
{
	struct kp_file_tmp t;
	const char *p = buf;
	ssize_t r;
	int rc;

	if ((rc = kp_file_tmp_open(&t, dirfd, path, mode, err)))
		return rc;
	while (len) {
		r = write(t.fd, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = kp_err_set(err, KP_EIO, "%s: write failed: %s", path,
					r < 0 ? strerror(errno) : "nothing written");
			kp_file_tmp_abort(&t);
			return rc;
		}
		p += r;
		len -= (size_t)r;
	}
	return kp_file_tmp_commit(&t, err);
}
