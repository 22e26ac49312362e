/*
 * db.c - opening, validating and migrating kplan databases.
 *
 * Validation happens before anything is written: a wrong file must stay
 * byte-for-byte as it was. Only after the header, application_id and
 * user_version check out do we switch to WAL and migrate.
 */
#include "db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/vec.h"
#include "../common/version.h"

extern const char kp__schema_sql[];

/* Ordered migrations: entry i upgrades from version i to i + 1. schema.sql
 * only creates what is missing, so it is every step so far (v2: the
 * kp_launch_attrs table; v3 to v5: columns, see added_columns; v6: the
 * kp_collectives table and a column; v7: kp_cpu_op_args and two columns). */
static const char *const migrations[KP_DB_SCHEMA_VERSION] = {
	kp__schema_sql,
	kp__schema_sql,
	kp__schema_sql,
	kp__schema_sql,
	kp__schema_sql,
	kp__schema_sql,
	kp__schema_sql,
};

/* Columns schema.sql declares that tables created by an older version lack
 * (CREATE TABLE IF NOT EXISTS cannot add them): each migration step adds
 * the missing ones, so every step stays idempotent. v3: blockers named in
 * the user's terms, the cost of a region's edges. */
static const struct { const char *table, *column, *decl; } added_columns[] = {
	{ "kp_blockers", "cpu_op", "TEXT" },
	{ "kp_blockers", "py_frame", "TEXT" },
	{ "kp_blockers", "cost_ns", "INTEGER" },
	{ "kp_regions", "edge_ns", "INTEGER NOT NULL DEFAULT 0" },
	/* v4: which rank of a multi-process job a recorded run was */
	{ "kp_runs", "rank", "INTEGER" },
	{ "kp_runs", "local_rank", "INTEGER" },
	{ "kp_runs", "world_size", "INTEGER" },
	/* v5: the interval around a region's predicted graph time */
	{ "kp_regions", "graph_ns_lo", "INTEGER" },
	{ "kp_regions", "graph_ns_hi", "INTEGER" },
	/* v6: an imported rank's offset to the job's shared clock */
	{ "kp_runs", "clock_base_ns", "INTEGER" },
	/* v7: a fusion candidate's ATen ops and kplan.torch's verdict on them */
	{ "kp_fusion_candidates", "aten_chain", "TEXT" },
	{ "kp_fusion_candidates", "torch_verdict", "TEXT" },
};

static int add_columns(struct kp_db *db, struct kp_err *err)
{
	char sql[256];
	int rc = 0;

	for (size_t i = 0; i < sizeof(added_columns) / sizeof(*added_columns) && !rc; i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM pragma_table_info('%s')"
			 " WHERE name = '%s'", added_columns[i].table, added_columns[i].column);
		if (kp_db_int(db, sql, -1) != 0)
			continue;
		snprintf(sql, sizeof(sql), "ALTER TABLE %s ADD COLUMN %s %s", added_columns[i].table,
			 added_columns[i].column, added_columns[i].decl);
		rc = kp_db_exec(db, sql, err);
	}
	return rc;
}

#define BUSY_TIMEOUT_MS 30000

int kp_db_error(struct kp_db *db, struct kp_err *err, const char *what)
{
	int rc = sqlite3_errcode(db->h);
	int code = (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) ? KP_EBUSY :
		   (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) ? KP_EFORMAT :
		   (rc == SQLITE_FULL || rc == SQLITE_IOERR || rc == SQLITE_CANTOPEN ||
		    rc == SQLITE_READONLY) ? KP_EIO : KP_EDB;

	return kp_err_set(err, code, "%s: %s: %s", db->path, what,
			  sqlite3_errmsg(db->h));
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Check the 100-byte SQLite header and the file size it implies, so that a
 * non-SQLite or truncated file is named as such instead of surfacing later
 * as an obscure query error.
 */
static int check_header(const char *path, int *wal, struct kp_err *err)
{
	unsigned char h[100];
	struct stat st;
	uint32_t page_size, pages;
	FILE *f;
	size_t n;

	*wal = 0;
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return kp_err_set(err, KP_EFORMAT, "%s: is a directory, not a kplan database "
				  "(expected the .db file that 'kplan record' or 'kplan import' writes)",
				  path);
	f = fopen(path, "rb");
	if (!f)
		return kp_err_set(err, errno == ENOENT ? KP_ENOTFOUND : KP_EIO,
				  "%s: cannot open: %s", path, strerror(errno));
	n = fread(h, 1, sizeof(h), f);
	if (fstat(fileno(f), &st)) {
		fclose(f);
		return kp_err_set(err, KP_EIO, "%s: cannot stat: %s", path, strerror(errno));
	}
	fclose(f);
	if (st.st_size == 0)
		return 1;  /* empty file: sqlite treats it as a new database */
	if (n < sizeof(h) || memcmp(h, "SQLite format 3", 16))
		return kp_err_set(err, KP_EFORMAT,
				  "%s: not a kplan database (expected an SQLite 3 file, found %s)",
				  path, n < 16 ? "a file shorter than the SQLite header" :
				  "other data");
	page_size = (uint32_t)h[16] << 8 | h[17];
	if (page_size == 1)
		page_size = 65536;
	pages = be32(h + 28);
	if (page_size < 512 || (page_size & (page_size - 1)))
		return kp_err_set(err, KP_EFORMAT, "%s: corrupt SQLite header (page size %u)",
				  path, page_size);
	/* the in-header size is valid only when the change counters agree */
	if (pages && be32(h + 24) == be32(h + 92) &&
	    (uint64_t)st.st_size < (uint64_t)pages * page_size)
		return kp_err_set(err, KP_EFORMAT,
				  "%s: truncated database (header says %llu bytes, file has %lld)",
				  path, (unsigned long long)pages * page_size,
				  (long long)st.st_size);
	if (st.st_size % page_size)
		return kp_err_set(err, KP_EFORMAT,
				  "%s: truncated database (%lld bytes is not a whole number of %u-byte pages)",
				  path, (long long)st.st_size, page_size);
	*wal = h[18] == 2 && h[19] == 2;  /* file format read/write versions: WAL */
	return 0;
}

/*
 * Before a writing command opens path: a file or directory it cannot write
 * is named with the OS's reason, instead of SQLite's "attempt to write a
 * readonly database" from the first write. (Root passes access(); SQLite
 * still reports a read-only mount.)
 */
static int check_writable(const char *path, int exists, struct kp_err *err)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');

	if (exists && access(path, W_OK))
		return kp_err_set(err, KP_EIO, "%s: cannot write to this database (%s): this command "
				  "stores its results in it; make it writable or work on a copy",
				  path, strerror(errno));
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path), path);
	if (!access(dir, W_OK))
		return 0;
	if (errno == ENOENT)
		return kp_err_set(err, KP_ENOTFOUND, "%s: no directory %s (create it first)", path, dir);
	return kp_err_set(err, KP_EIO, "%s: cannot write in the directory %s (%s): SQLite "
				  "keeps its journal (%s-wal) beside the database; use a writable "
				  "directory or work on a copy", path, dir, strerror(errno), path);
}

int64_t kp_db_int(struct kp_db *db, const char *sql, int64_t def)
{
	sqlite3_stmt *st;
	int64_t v = def;

	if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
		return def;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

int kp_db_text(struct kp_db *db, const char *sql, int64_t arg, char *out, size_t n,
	       struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc = kp_db_prepare(db, sql, &st, err);

	if (n)
		out[0] = '\0';
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, arg);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);

		if (s && n)
			snprintf(out, n, "%s", s);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? 0 : kp_db_error(db, err, "query failed");
	}
	sqlite3_finalize(st);
	return rc;
}

int kp_db_has_table(struct kp_db *db, const char *table)
{
	sqlite3_stmt *st;
	int found = 0;

	if (sqlite3_prepare_v2(db->h,
			       "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return found;
}

int kp_db_has_column(struct kp_db *db, const char *table, const char *column)
{
	sqlite3_stmt *st;
	int found = 0;

	if (sqlite3_prepare_v2(db->h, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return found;
}

int kp_db_exec(struct kp_db *db, const char *sql, struct kp_err *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db->h, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		int ret = kp_db_error(db, err, "query failed");

		sqlite3_free(msg);
		return ret;
	}
	return 0;
}

int kp_db_prepare(struct kp_db *db, const char *sql, sqlite3_stmt **st,
		  struct kp_err *err)
{
	if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK) {
		*st = NULL;
		return kp_db_error(db, err, "prepare failed");
	}
	return 0;
}

int kp_db_prepare_run(struct kp_db *db, const char *sql, int64_t run, sqlite3_stmt **st,
		      struct kp_err *err)
{
	int rc = kp_db_prepare(db, sql, st, err);

	if (!rc && sqlite3_bind_parameter_count(*st) >= 1)
		sqlite3_bind_int64(*st, 1, run);
	return rc;
}

int64_t kp_db_col_i64(sqlite3_stmt *st, int i, int64_t def)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL ? def : sqlite3_column_int64(st, i);
}

int kp_db_begin(struct kp_db *db, struct kp_err *err)
{
	int rc;

	if (db->txn_depth++ > 0)
		return 0;
	rc = kp_db_exec(db, "BEGIN IMMEDIATE", err);
	if (rc)
		db->txn_depth = 0;
	return rc;
}

int kp_db_commit(struct kp_db *db, struct kp_err *err)
{
	int rc;

	if (db->txn_depth <= 0)
		return kp_err_set(err, KP_EINVAL, "%s: commit without begin", db->path);
	if (--db->txn_depth > 0)
		return 0;
	rc = kp_db_exec(db, "COMMIT", err);
	if (rc)
		kp_db_rollback(db);
	return rc;
}

void kp_db_rollback(struct kp_db *db)
{
	if (!db)
		return;
	db->txn_depth = 0;
	if (!sqlite3_get_autocommit(db->h))
		sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	/* inserted StringIds rows are gone: forget them */
	kp_strmap_release(&db->strings);
}

static int migrate(struct kp_db *db, struct kp_err *err)
{
	int64_t v;
	int rc;

	rc = kp_db_begin(db, err);
	if (rc)
		return rc;
	/* re-read inside the write lock: another process may have migrated */
	v = kp_db_int(db, "PRAGMA user_version", 0);
	for (; v < KP_DB_SCHEMA_VERSION; v++) {
		char pragma[64];

		rc = kp_db_exec(db, migrations[v], err);
		if (!rc)
			rc = add_columns(db, err);
		if (rc) {
			kp_err_prefix(err, "migrating schema to version %lld", (long long)v + 1);
			goto out_rollback;
		}
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %lld", (long long)v + 1);
		rc = kp_db_exec(db, pragma, err);
		if (rc)
			goto out_rollback;
	}
	rc = kp_db_exec(db, "PRAGMA application_id = " KP_STR(KP_DB_APPLICATION_ID), err);
	if (rc)
		goto out_rollback;
	rc = kp_db_commit(db, err);
	db->schema_version = KP_DB_SCHEMA_VERSION;
	return rc;
out_rollback:
	kp_db_rollback(db);
	return rc;
}

/*
 * A WAL database in a place this process cannot write (a read-only
 * directory or mount, another user's file) cannot be read the normal way:
 * SQLite must create the -shm index next to it. When no -wal file exists
 * every committed page is in the main file, so a read-only opener may read
 * it as immutable instead. 0 when reopened.
 */
static int reopen_immutable(struct kp_db *db, const char *path, int force)
{
	int rc = sqlite3_errcode(db->h);
	struct kp_strbuf uri = KP_STRBUF_INIT;
	char wal[4096];
	const char *c;

	if (!force && rc != SQLITE_READONLY && rc != SQLITE_CANTOPEN)
		return -1;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (!access(wal, F_OK))
		return -1;
	kp_strbuf_adds(&uri, "file:");
	for (c = path; *c; c++) {
		if (*c == '%' || *c == '?' || *c == '#' || (unsigned char)*c < 0x20)
			kp_strbuf_addf(&uri, "%%%02X", (unsigned char)*c);
		else
			kp_strbuf_addch(&uri, *c);
	}
	kp_strbuf_adds(&uri, "?immutable=1");
	sqlite3_close_v2(db->h);
	db->h = NULL;
	rc = uri.oom ? SQLITE_NOMEM :
	     sqlite3_open_v2(uri.buf, &db->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI |
			     SQLITE_OPEN_NOMUTEX, NULL);
	kp_strbuf_release(&uri);
	if (rc == SQLITE_OK)
		sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
	if (rc == SQLITE_OK)
		kp_debug("%s: read-only location: reading it as immutable", path);
	return rc == SQLITE_OK ? 0 : -1;
}

/*
 * kp_db_exec, retried while another connection holds the lock it needs, up
 * to BUSY_TIMEOUT_MS. Turning a new file to WAL takes an exclusive lock and
 * SQLite answers "database is locked" at once instead of calling the busy
 * handler: the ranks of a job opening one new database together met it
 * (tests/unit/test_reliability.c, sigkill_one_rank).
 */
static int exec_when_free(struct kp_db *db, const char *sql, struct kp_err *err)
{
	int64_t until = kp_now_ns() + (int64_t)BUSY_TIMEOUT_MS * 1000000;
	long wait_us = 1000;
	int rc;

	while ((rc = kp_db_exec(db, sql, err)) == KP_EBUSY && kp_now_ns() < until) {
		kp_err_clear(err);
		usleep((useconds_t)wait_us);
		if (wait_us < 50000)
			wait_us *= 2;
	}
	return rc;
}

struct kp_db *kp_db_open(const char *path, int flags, struct kp_err *err)
{
	struct kp_db *db;
	int64_t app_id, version, n_tables;
	int oflags, rc, is_new, wal, clean_reader, ro_file;
	char wal_path[4200];

	rc = check_header(path, &wal, err);
	if (rc < 0 && !(rc == KP_ENOTFOUND && (flags & KP_DB_CREATE)))
		return NULL;
	kp_err_clear(err);
	is_new = rc != 0;  /* missing or empty */
	if (!(flags & KP_DB_RDONLY) && check_writable(path, rc != KP_ENOTFOUND, err))
		return NULL;
	/*
	 * A read-only SQLite connection to a WAL database creates -wal and -shm
	 * files and cannot remove them on close. A reader of a database with
	 * no -wal file (nobody is writing it) connects read-write instead, with
	 * query_only on: it still writes nothing, and the last connection to
	 * close removes both files, as after a writer.
	 */
	snprintf(wal_path, sizeof(wal_path), "%s-wal", path);
	clean_reader = (flags & KP_DB_RDONLY) && wal && access(wal_path, F_OK);

	db = calloc(1, sizeof(*db));
	if (!db) {
		kp_err_set(err, KP_ENOMEM, "out of memory");
		return NULL;
	}
	kp_strmap_init(&db->strings);
	db->path = strdup(path);
	db->flags = flags;
	oflags = clean_reader ? SQLITE_OPEN_READWRITE :
		 (flags & KP_DB_RDONLY) ? SQLITE_OPEN_READONLY :
		 SQLITE_OPEN_READWRITE | ((flags & KP_DB_CREATE) ? SQLITE_OPEN_CREATE : 0);
	if (sqlite3_open_v2(path, &db->h, oflags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		kp_db_error(db, err, "cannot open");
		goto out_close;
	}
	sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(db->h, 0);
	if (clean_reader && kp_db_exec(db, "PRAGMA query_only=1", err))
		goto out_close;

	/* a clean reader of a file it cannot write (SQLite opened it read-only)
	 * would leave -wal and -shm behind: read it as immutable */
	ro_file = clean_reader && sqlite3_db_readonly(db->h, "main") == 1;
	app_id = ro_file ? -1 : kp_db_int(db, "PRAGMA application_id", -1);
	if (app_id < 0 && (flags & KP_DB_RDONLY) && db->h && !reopen_immutable(db, path, ro_file))
		app_id = kp_db_int(db, "PRAGMA application_id", -1);
	version = kp_db_int(db, "PRAGMA user_version", -1);
	n_tables = kp_db_int(db, "SELECT count(*) FROM sqlite_master", -1);
	if (app_id < 0 || version < 0 || n_tables < 0) {
		kp_db_error(db, err, "cannot read database");
		if (err && err->code == KP_EDB)
			err->code = KP_EFORMAT;
		goto out_close;
	}
	if (app_id != KP_DB_APPLICATION_ID) {
		if (n_tables == 0 && (flags & KP_DB_CREATE)) {
			is_new = 1;
		} else if (kp_db_has_table(db, "TARGET_INFO_SESSION_START_TIME") ||
			   (kp_db_has_table(db, "StringIds") && !kp_db_has_table(db, "kp_runs"))) {
			kp_err_set(err, KP_EFORMAT,
				   "%s: this is an Nsight Systems export, not a kplan database "
				   "(run 'kplan import %s -o NEW.db' first)", path, path);
			goto out_close;
		} else {
			kp_err_set(err, KP_EFORMAT,
				   "%s: not a kplan database but an SQLite database of another program "
				   "(application_id 0x%llx where kplan writes 0x%x; %lld table%s): "
				   "give the .db that 'kplan record' or 'kplan import' writes", path,
				   (unsigned long long)app_id, KP_DB_APPLICATION_ID, (long long)n_tables,
				   n_tables == 1 ? "" : "s");
			goto out_close;
		}
	}
	db->schema_version = (int)version;
	if (version > KP_DB_SCHEMA_VERSION) {
		if (!(flags & KP_DB_RDONLY)) {
			kp_err_set(err, KP_EVERSION,
				   "%s: schema version %lld is newer than this kplan supports (%d); "
				   "upgrade kplan to write to it", path, (long long)version,
				   KP_DB_SCHEMA_VERSION);
			goto out_close;
		}
		db->newer = 1;
		kp_warn("%s: schema version %lld is newer than %d; reading what this version knows",
			path, (long long)version, KP_DB_SCHEMA_VERSION);
	}
	if (flags & KP_DB_RDONLY) {
		if (is_new || version < 1) {
			kp_err_set(err, KP_EFORMAT, "%s: empty database (no kplan schema)", path);
			goto out_close;
		}
		return db;
	}
	/* validated: now it is safe to write; page size only takes on a new file */
	if (is_new && exec_when_free(db, "PRAGMA page_size=16384", err))
		goto out_close;
	if (exec_when_free(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
			   "PRAGMA cache_size=-16384", err))
		goto out_close;
	if (version < KP_DB_SCHEMA_VERSION && migrate(db, err))
		goto out_close;
	return db;

out_close:
	kp_db_close(db);
	return NULL;
}

void kp_db_close(struct kp_db *db)
{
	if (!db)
		return;
	if (db->txn_depth)
		kp_db_rollback(db);
	sqlite3_finalize(db->st_intern);
	if (db->h)
		sqlite3_close_v2(db->h);
	kp_strmap_release(&db->strings);
	free(db->path);
	free(db);
}

int64_t kp_db_intern(struct kp_db *db, const char *s, struct kp_err *err)
{
	int64_t id;
	int rc;

	if (!s)
		s = "";
	if (kp_strmap_get(&db->strings, s, &id))
		return id;
	if (!db->st_intern) {
		rc = kp_db_prepare(db, "INSERT INTO StringIds(value) VALUES (?)",
				   &db->st_intern, err);
		if (rc)
			return rc;
	}
	sqlite3_bind_text(db->st_intern, 1, s, -1, SQLITE_STATIC);
	rc = sqlite3_step(db->st_intern);
	sqlite3_reset(db->st_intern);
	sqlite3_clear_bindings(db->st_intern);
	if (rc != SQLITE_DONE)
		return kp_db_error(db, err, "interning a string");
	id = sqlite3_last_insert_rowid(db->h);
	if (kp_strmap_put(&db->strings, s, id))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	return id;
}

int kp_db_create_indexes(struct kp_db *db, struct kp_err *err)
{
	return kp_db_exec(db,
		"CREATE INDEX IF NOT EXISTS kp_ix_kernel_run ON CUPTI_ACTIVITY_KIND_KERNEL(runId, deviceId, streamId, start);"
		"CREATE INDEX IF NOT EXISTS kp_ix_kernel_corr ON CUPTI_ACTIVITY_KIND_KERNEL(runId, correlationId);"
		"CREATE INDEX IF NOT EXISTS kp_ix_runtime_corr ON CUPTI_ACTIVITY_KIND_RUNTIME(runId, correlationId);"
		"CREATE INDEX IF NOT EXISTS kp_ix_runtime_start ON CUPTI_ACTIVITY_KIND_RUNTIME(runId, start);"
		"CREATE INDEX IF NOT EXISTS kp_ix_nvtx_run ON NVTX_EVENTS(runId, start);",
		err);
}

int kp_db_run_insert(struct kp_db *db, const struct kp_run_info *ri,
		     int64_t *run_id, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc, i = 1;

	rc = kp_db_prepare(db,
		"INSERT INTO kp_runs(created_ns, source, source_path, command, host, pid,"
		" device_name, compute_major, compute_minor, sm_count, driver_version,"
		" runtime_version, cupti_version, kplan_version, rank, local_rank, world_size,"
		" status) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'partial')", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, i++, ri->created_ns ? ri->created_ns : kp_wall_ns());
	sqlite3_bind_text(st, i++, ri->source ? ri->source : "unknown", -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, i++, ri->source_path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, i++, ri->command, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, i++, ri->host, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, i++, ri->pid);
	sqlite3_bind_text(st, i++, ri->device_name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, i++, ri->compute_major);
	sqlite3_bind_int(st, i++, ri->compute_minor);
	sqlite3_bind_int(st, i++, ri->sm_count);
	sqlite3_bind_int(st, i++, ri->driver_version);
	sqlite3_bind_int(st, i++, ri->runtime_version);
	sqlite3_bind_int(st, i++, ri->cupti_version);
	sqlite3_bind_text(st, i++, KP_VERSION, -1, SQLITE_STATIC);
	if (ri->has_rank) {     /* else NULL: not a rank of a job */
		sqlite3_bind_int(st, i, ri->rank);
		if (ri->local_rank >= 0)
			sqlite3_bind_int(st, i + 1, ri->local_rank);
		if (ri->world_size >= 0)
			sqlite3_bind_int(st, i + 2, ri->world_size);
	}
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kp_db_error(db, err, "inserting run");
	if (!rc && run_id)
		*run_id = sqlite3_last_insert_rowid(db->h);
	sqlite3_finalize(st);
	return rc;
}

int kp_db_run_note(struct kp_db *db, int64_t run_id, const char *note, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = kp_db_prepare(db, "UPDATE kp_runs SET note = CASE WHEN note IS NULL OR note = ''"
			   " THEN ?2 ELSE note || '; ' || ?2 END WHERE runId = ?1", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_text(st, 2, note, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kp_db_error(db, err, "noting the run");
	sqlite3_finalize(st);
	return rc;
}

int kp_db_recorded_since(struct kp_db *db, int64_t t_ns, int64_t **runs, size_t *n,
			 struct kp_err *err)
{
	KP_VEC(int64_t) v = KP_VEC_INIT;
	sqlite3_stmt *st;
	int rc;

	*runs = NULL;
	*n = 0;
	rc = kp_db_prepare(db, "SELECT runId FROM kp_runs WHERE source = 'record'"
			   " AND created_ns >= ?1 ORDER BY runId", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, t_ns);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (kp_vec_push(&v, sqlite3_column_int64(st, 0))) {
			rc = -1;
			break;
		}
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		kp_vec_release(&v);
		return rc == -1 ? kp_err_set(err, KP_ENOMEM, "out of memory") :
			kp_db_error(db, err, "listing the recorded runs");
	}
	*runs = v.data;
	*n = v.len;
	return 0;
}

void kp_db_run_summary(struct kp_db *db, int64_t run, struct kp_run_summary *out)
{
	static const char *const tables[] = {
		"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
		"CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS",
	};
	int64_t c[5];
	sqlite3_stmt *st;
	char sql[160];
	size_t i;

	memset(out, 0, sizeof(*out));
	snprintf(out->status, sizeof(out->status), "?");
	for (i = 0; i < 5; i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE runId = %lld", tables[i],
			 (long long)run);
		c[i] = kp_db_int(db, sql, 0);
	}
	out->kernels = c[0];
	out->api_calls = c[1];
	out->copies = c[2] + c[3];
	out->nvtx = c[4];
	if (kp_db_prepare(db, "SELECT dropped_records, status, note FROM kp_runs WHERE runId = ?1",
			  &st, NULL))
		return;
	sqlite3_bind_int64(st, 1, run);
	if (sqlite3_step(st) == SQLITE_ROW) {
		out->dropped = sqlite3_column_int64(st, 0);
		if (sqlite3_column_text(st, 1))
			snprintf(out->status, sizeof(out->status), "%s",
				 (const char *)sqlite3_column_text(st, 1));
		if (sqlite3_column_text(st, 2))
			snprintf(out->note, sizeof(out->note), "%s",
				 (const char *)sqlite3_column_text(st, 2));
	}
	sqlite3_finalize(st);
}

int kp_db_run_finish(struct kp_db *db, int64_t run_id, int64_t dropped,
		     const char *dropped_detail, const char *status,
		     struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = kp_db_prepare(db,
		"UPDATE kp_runs SET dropped_records = ?2, dropped_detail = ?3, status = ?4,"
		" t_begin_ns = (SELECT min(s) FROM ("
		"   SELECT min(start) s FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1"
		"   UNION ALL SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE runId = ?1)),"
		" t_end_ns = (SELECT max(e) FROM ("
		"   SELECT max(end) e FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1"
		"   UNION ALL SELECT max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE runId = ?1))"
		" WHERE runId = ?1", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, dropped);
	sqlite3_bind_text(st, 3, dropped_detail, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, status ? status : "complete", -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kp_db_error(db, err, "finishing run");
	sqlite3_finalize(st);
	return rc;
}

int kp_db_set_bulk(struct kp_db *db, int on, struct kp_err *err)
{
	return kp_db_exec(db, on ? "PRAGMA synchronous=OFF" : "PRAGMA synchronous=NORMAL", err);
}

int64_t kp_db_last_run(struct kp_db *db)
{
	return kp_db_int(db, "SELECT max(runId) FROM kp_runs", 0);
}

int64_t kp_db_default_run(struct kp_db *db)
{
	int64_t last = kp_db_last_run(db);
	char sql[256];

	if (last <= 0)
		return last;
	/* a launcher's run (torchrun's agent) has no rank and no GPU work */
	snprintf(sql, sizeof(sql), "SELECT rank IS NULL AND NOT EXISTS (SELECT 1 FROM"
		 " CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = %lld) FROM kp_runs WHERE runId = %lld",
		 (long long)last, (long long)last);
	if (kp_db_int(db, sql, 0) != 1)
		return last;
	return kp_db_int(db, "SELECT max(runId) FROM kp_runs WHERE rank IS NOT NULL", last);
}

void kp_db_remove(const char *path)
{
	static const char *const sfx[] = { "", "-wal", "-shm" };
	char p[4200];

	for (size_t i = 0; i < sizeof(sfx) / sizeof(*sfx); i++) {
		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		unlink(p);
	}
}
