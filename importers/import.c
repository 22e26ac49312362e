/*
 * import.c - kp_import(): format detection and the all-or-nothing write.
 *
 * A new database is built under a temporary name in the target directory
 * (same file system, so the final rename is atomic) with the journal off -
 * the file is thrown away on failure, so it needs no journal - and renamed
 * into place once complete. An existing kplan database receives the run in
 * one transaction, rolled back on any error.
 */
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fileio.h"
#include "../common/log.h"

const char *kp_import_format_name(int format)
{
	return format == KP_IMPORT_CHROME ? "chrome" : format == KP_IMPORT_NSYS ? "nsys" : "auto";
}

int kp_import_detect(const char *path, int *format, struct kp_err *err)
{
	unsigned char h[4096];
	size_t n, i = 0;
	FILE *f = fopen(path, "rb");

	if (!f)
		return kp_err_set(err, errno == ENOENT ? KP_ENOTFOUND : KP_EIO,
				  "%s: cannot open: %s", path, strerror(errno));
	n = fread(h, 1, sizeof(h), f);
	fclose(f);
	if (n == 0)
		return kp_err_set(err, KP_EFORMAT, "%s: empty file (expected a trace)", path);
	if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b) {
		*format = KP_IMPORT_CHROME;
		return 0;
	}
	if (n >= 16 && !memcmp(h, "SQLite format 3", 16)) {
		uint32_t app = n >= 72 ? (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 |
					 (uint32_t)h[70] << 8 | h[71] : 0;

		if (app == KP_DB_APPLICATION_ID)
			return kp_err_set(err, KP_EFORMAT,
					  "%s: this is already a kplan database, not a trace to import",
					  path);
		*format = KP_IMPORT_NSYS;
		return 0;
	}
	if (n >= 3 && h[0] == 0xef && h[1] == 0xbb && h[2] == 0xbf)
		i = 3;   /* UTF-8 byte order mark */
	while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\n' || h[i] == '\r'))
		i++;
	if (i < n && (h[i] == '{' || h[i] == '[')) {
		*format = KP_IMPORT_CHROME;
		return 0;
	}
	return kp_err_set(err, KP_EFORMAT,
			  "%s: not a trace: expected gzip, a JSON object or an Nsight Systems "
			  "SQLite export, found %s", path,
			  i == n ? "only white space" : "other data");
}

static int run_reader(struct kp_db *db, const char *trace, int format,
		      const struct kp_import_opts *opts, struct kp_import_stats *st,
		      struct kp_err *err)
{
	return format == KP_IMPORT_NSYS ? kp_import_nsys(db, trace, opts, st, err) :
					 kp_import_chrome(db, trace, opts, st, err);
}

/*
 * Index creation sorts every row; with kp_db_open's temp_store=MEMORY the
 * sorter's spill would live in memory and grow with the trace, so it goes to
 * temporary files here (bounded memory for any trace size).
 */
static int create_indexes(struct kp_db *db, struct kp_err *err)
{
	int rc = kp_db_exec(db, "PRAGMA temp_store=FILE", err);

	if (!rc)
		rc = kp_db_create_indexes(db, err);
	if (!rc)
		rc = kp_db_exec(db, "PRAGMA temp_store=MEMORY", err);
	return rc;
}

/* Append a run to an existing kplan database in one transaction. */
static int import_existing(const char *trace, const char *db_path, int format,
			   const struct kp_import_opts *opts, struct kp_import_stats *st,
			   struct kp_err *err)
{
	struct kp_db *db = kp_db_open(db_path, KP_DB_CREATE, err);
	int rc;

	if (!db)
		return err ? err->code : KP_EDB;
	st->appended = 1;
	rc = kp_db_set_bulk(db, 1, err);
	if (!rc)
		rc = kp_db_begin(db, err);
	if (rc)
		goto out;
	rc = run_reader(db, trace, format, opts, st, err);
	if (rc) {
		kp_db_rollback(db);
		goto out;
	}
	rc = kp_db_commit(db, err);
	if (!rc)
		rc = create_indexes(db, err);
out:
	kp_db_close(db);
	return rc;
}

static void unlink_db(const char *path)
{
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
	char p[4096];
	size_t i;

	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		unlink(p);
	}
}

/*
 * Build a new database under a temporary name and rename it into place
 * (common/fileio.h: created O_EXCL|O_NOFOLLOW, fsync'ed, renamed).
 */
static int import_new(const char *trace, const char *db_path, int format,
		      const struct kp_import_opts *opts, struct kp_import_stats *st,
		      struct kp_err *err)
{
	struct kp_file_tmp t;
	struct kp_db *db = NULL;
	int rc;

	if ((rc = kp_file_tmp_open(&t, AT_FDCWD, db_path, 0666, err)))
		return rc;
	/* SQLite writes the file by name; t keeps it open for the fsync */
	db = kp_db_open(t.tmp, KP_DB_CREATE, err);
	if (!db) {
		rc = err ? err->code : KP_EDB;
		goto out_unlink;
	}
	/* a throw-away file needs no journal; WAL is switched on again below */
	rc = kp_db_exec(db, "PRAGMA journal_mode=OFF", err);
	if (!rc)
		rc = kp_db_set_bulk(db, 1, err);
	if (!rc)
		rc = kp_db_begin(db, err);
	if (rc)
		goto out_unlink;
	rc = run_reader(db, trace, format, opts, st, err);
	if (rc)
		goto out_unlink;
	rc = kp_db_commit(db, err);
	if (!rc)
		rc = create_indexes(db, err);
	if (!rc)
		rc = kp_db_exec(db, "PRAGMA journal_mode=WAL", err);
	if (rc)
		goto out_unlink;
	kp_db_close(db);
	return kp_file_tmp_commit(&t, err);

out_unlink:
	kp_db_close(db);
	unlink_db(t.tmp);   /* its -wal, -shm, -journal */
	kp_err_rename(err, t.tmp, db_path);  /* the user knows the file by its real name */
	kp_file_tmp_abort(&t);
	return rc;
}

int kp_import(const char *trace_path, const char *db_path,
	      const struct kp_import_opts *opts, struct kp_import_stats *stats,
	      struct kp_err *err)
{
	struct kp_import_stats local;
	struct stat sb;
	int format = opts ? opts->format : KP_IMPORT_AUTO, rc;

	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (format == KP_IMPORT_AUTO) {
		rc = kp_import_detect(trace_path, &format, err);
		if (rc)
			return rc;
	}
	stats->format = format;
	if (!stat(db_path, &sb) && sb.st_size > 0)
		return import_existing(trace_path, db_path, format, opts, stats, err);
	return import_new(trace_path, db_path, format, opts, stats, err);
}
