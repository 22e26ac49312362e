/*
 * db.h - kplan's SQLite database: open/validate/migrate, transactions,
 * interned strings, runs.
 *
 * A kplan database is one SQLite file (WAL mode) whose application_id is
 * KP_DB_APPLICATION_ID and whose user_version is the schema version. Opening
 * validates the file before anything is written to it: a file that is not
 * SQLite, a truncated file, a foreign SQLite database or a newer schema give
 * a clear error and leave the file untouched (a newer schema may still be
 * opened read-only).
 */
#ifndef KP_DB_H
#define KP_DB_H

#include <stdint.h>
#include <sqlite3.h>

#include "../common/err.h"
#include "../common/hash.h"

#define KP_DB_APPLICATION_ID 0x4b504c4e  /* "KPLN" */
#define KP_DB_SCHEMA_VERSION 7

enum kp_db_flags {
	KP_DB_RDONLY = 1 << 0,  /* reading command: never writes */
	KP_DB_CREATE = 1 << 1,  /* create the file and schema if missing */
};

struct kp_db {
	sqlite3 *h;
	char *path;
	int flags;
	int schema_version;     /* user_version found on open */
	int newer;              /* schema newer than this kplan: read-only */
	int txn_depth;
	struct kp_strmap strings;   /* interned string -> StringIds.id cache */
	sqlite3_stmt *st_intern;
};

/*
 * Open (and with KP_DB_CREATE create or migrate) the database at path.
 * Returns NULL and fills err (KP_ENOTFOUND, KP_EFORMAT, KP_EVERSION, KP_EDB,
 * KP_EBUSY) on failure. Free with kp_db_close().
 */
struct kp_db *kp_db_open(const char *path, int flags, struct kp_err *err);
void kp_db_close(struct kp_db *db);
/* Delete the database file at path with its -wal and -shm files (a closed,
 * scratch database); missing files are not an error. */
void kp_db_remove(const char *path);

/* Run SQL with no results (may hold several statements). */
int kp_db_exec(struct kp_db *db, const char *sql, struct kp_err *err);
/* Prepare one statement; *st is owned by the caller (sqlite3_finalize). */
int kp_db_prepare(struct kp_db *db, const char *sql, sqlite3_stmt **st,
		  struct kp_err *err);

/* kp_db_prepare, then ?1 bound to run when the statement has parameters. */
int kp_db_prepare_run(struct kp_db *db, const char *sql, int64_t run, sqlite3_stmt **st,
		      struct kp_err *err);

/* Column i of the current row as an integer, def when it is NULL. */
int64_t kp_db_col_i64(sqlite3_stmt *st, int i, int64_t def);
/* Fill err from the connection's last error: "what: sqlite message". */
int kp_db_error(struct kp_db *db, struct kp_err *err, const char *what);

/*
 * Transactions nest by depth; the outermost kp_db_begin issues
 * BEGIN IMMEDIATE (waiting up to the busy timeout for other writers) and the
 * matching kp_db_commit issues COMMIT. kp_db_rollback aborts all levels.
 */
int kp_db_begin(struct kp_db *db, struct kp_err *err);
int kp_db_commit(struct kp_db *db, struct kp_err *err);
void kp_db_rollback(struct kp_db *db);

/*
 * Return the StringIds.id of s, inserting it when new (inside the caller's
 * transaction if one is open). Returns a positive id or a negative KP_E*.
 */
int64_t kp_db_intern(struct kp_db *db, const char *s, struct kp_err *err);

/* Create the query indexes (idempotent). Call after bulk loads. */
int kp_db_create_indexes(struct kp_db *db, struct kp_err *err);

/* 1 when the table exists, 0 otherwise. */
int kp_db_has_table(struct kp_db *db, const char *table);
/* 1 when table has the column (a database opened read-only keeps the
 * version it was written with: columns added later may be missing). */
int kp_db_has_column(struct kp_db *db, const char *table, const char *column);
/* Single integer result of sql (e.g. a count); def when no row or NULL. */
int64_t kp_db_int(struct kp_db *db, const char *sql, int64_t def);

/*
 * The first column of the first row of sql, with ?1 bound to arg, as text
 * into out (always terminated; "" when there is no row or it is NULL).
 * 0 or a negative KP_E* when the query fails.
 */
int kp_db_text(struct kp_db *db, const char *sql, int64_t arg, char *out, size_t n,
	       struct kp_err *err);

/* What a run row holds; strings are borrowed by kp_db_run_insert. */
struct kp_run_info {
	const char *source;        /* record | chrome | nsys | synthetic */
	const char *source_path;
	const char *command;
	const char *host;
	int64_t pid;
	const char *device_name;
	int compute_major, compute_minor, sm_count;
	int driver_version, runtime_version, cupti_version;
	int64_t created_ns;        /* 0: now */
	int has_rank;              /* a rank of a multi-process job (record): */
	int rank, local_rank, world_size;   /* local_rank, world_size: -1 unknown */
};

/* Insert a run row; OUT: *run_id. */
int kp_db_run_insert(struct kp_db *db, const struct kp_run_info *ri,
		     int64_t *run_id, struct kp_err *err);
/*
 * Finish a run: record time span from its trace rows, dropped-record count
 * and detail (may be NULL) and status ("complete", "partial", "failed").
 */
int kp_db_run_finish(struct kp_db *db, int64_t run_id, int64_t dropped,
		     const char *dropped_detail, const char *status,
		     struct kp_err *err);
/*
 * Bulk-load mode on/off. On: commits skip fsync (synchronous=OFF), which
 * keeps every committed transaction across a crash of this process (the
 * data is in the OS page cache) but not across power loss or an OS crash;
 * that trade is right for traces being recorded or imported. Off restores
 * synchronous=NORMAL.
 */
int kp_db_set_bulk(struct kp_db *db, int on, struct kp_err *err);

/* The newest run id, or 0 when there are none. */
int64_t kp_db_last_run(struct kp_db *db);
/*
 * The run a command means when it names none: the newest, unless that is a
 * launcher's (torchrun's agent records a run with no rank and no kernels)
 * in a database with ranks; then the newest rank's run. 0 when there are
 * no runs. Every verb that defaults to a run takes this one.
 */
int64_t kp_db_default_run(struct kp_db *db);

/* Append note to the run's note ("; " between notes). */
int kp_db_run_note(struct kp_db *db, int64_t run_id, const char *note, struct kp_err *err);

/*
 * The runs kplan record's collector added since t_ns (created_ns >= t_ns,
 * source 'record'), in order. OUT: *runs (malloc'd, the caller frees; NULL
 * when none), *n. 0, or an error.
 */
int kp_db_recorded_since(struct kp_db *db, int64_t t_ns, int64_t **runs, size_t *n,
			 struct kp_err *err);

/* What a recorded run holds, for `kplan record`'s one-line summary. */
struct kp_run_summary {
	int64_t kernels, api_calls, copies, nvtx, dropped;  /* copies: memcpys + memsets */
	char status[32];         /* complete | partial | failed */
	char note[256];          /* "" when none */
};

/* Fill *out for run (zeros and "?" for a run that is not there). */
void kp_db_run_summary(struct kp_db *db, int64_t run, struct kp_run_summary *out);

#endif
