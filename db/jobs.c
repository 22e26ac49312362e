/* jobs.c - which runs are the ranks of one job (jobs.h). */
#include "jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kp_runs.clock_base_ns exists (schema v6; an older database opened
 * read-only is not migrated). */
static int has_clock_base(const struct kp_db *db)
{
	return db->schema_version >= 6;
}

/* The asked run's place in a job. */
struct run_key {
	int64_t run;
	int has_rank, world_size;
	int64_t t_begin, t_end;        /* -1 unknown */
	char host[256], command[1024];
	int has_host, has_command;
};

static int run_key_load(struct kp_db *db, int64_t run, struct run_key *k, struct kp_err *err)
{
	sqlite3_stmt *st;
	char sql[512];
	int rc;

	memset(k, 0, sizeof(*k));
	k->run = run;

	/* an imported rank's times move onto the job's clock (schema v6) */
	snprintf(sql, sizeof(sql), "SELECT rank, COALESCE(world_size, -1), COALESCE(t_begin_ns%s, -1),"
		 " COALESCE(t_end_ns%s, -1), host, command FROM kp_runs WHERE runId = ?1",
		 has_clock_base(db) ? " + COALESCE(clock_base_ns, 0)" : "",
		 has_clock_base(db) ? " + COALESCE(clock_base_ns, 0)" : "");
	rc = kp_db_prepare_run(db, sql, run, &st, err);
	if (rc)
		return rc;
	if (sqlite3_step(st) == SQLITE_ROW) {
		k->has_rank = sqlite3_column_type(st, 0) != SQLITE_NULL;
		k->world_size = (int)sqlite3_column_int64(st, 1);
		k->t_begin = sqlite3_column_int64(st, 2);
		k->t_end = sqlite3_column_int64(st, 3);
		if ((k->has_host = sqlite3_column_type(st, 4) != SQLITE_NULL))
			snprintf(k->host, sizeof(k->host), "%s", (const char *)sqlite3_column_text(st, 4));
		if ((k->has_command = sqlite3_column_type(st, 5) != SQLITE_NULL))
			snprintf(k->command, sizeof(k->command), "%s",
				 (const char *)sqlite3_column_text(st, 5));
	}
	sqlite3_finalize(st);
	return 0;
}

/* The job's runs, one per rank (the nearest by run id), by rank. */
static int job_runs(struct kp_db *db, const struct run_key *k, struct kp_job_run **runs,
		    size_t *n, struct kp_err *err)
{
	/* overlapping in time when both spans are known (a launcher may give
	 * each rank its own arguments), else the same command */
	const char *base = has_clock_base(db) ? " + COALESCE(clock_base_ns, 0)" : "";
	char sql[1024];
	sqlite3_stmt *st;
	size_t cap = 0;
	int rc;

	snprintf(sql, sizeof(sql), "SELECT runId, rank FROM kp_runs WHERE rank IS NOT NULL"
		 " AND COALESCE(world_size, -1) = ?2 AND host IS ?3"
		 " AND (CASE WHEN ?5 >= 0 AND t_begin_ns IS NOT NULL"
		 "  THEN t_begin_ns%s <= (CASE WHEN ?6 < 0 THEN 9223372036854775807 ELSE ?6 END)"
		 "       AND COALESCE(t_end_ns%s, 9223372036854775807) >= ?5"
		 "  ELSE command IS ?4 END)"
		 " ORDER BY rank, abs(runId - ?1), runId", base, base);
	rc = kp_db_prepare_run(db, sql, k->run, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int(st, 2, k->world_size);
	if (k->has_host)
		sqlite3_bind_text(st, 3, k->host, -1, SQLITE_STATIC);
	if (k->has_command)
		sqlite3_bind_text(st, 4, k->command, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, k->t_begin);
	sqlite3_bind_int64(st, 6, k->t_end);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int rank = sqlite3_column_int(st, 1);

		if (*n && (*runs)[*n - 1].rank == rank)
			continue;   /* a rank recorded again: the nearest run is kept */
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct kp_job_run *p = realloc(*runs, nc * sizeof(*p));

			if (!p) {
				sqlite3_finalize(st);
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			}
			*runs = p;
			cap = nc;
		}
		(*runs)[*n].run_id = sqlite3_column_int64(st, 0);
		(*runs)[*n].rank = rank;
		(*n)++;
	}
	rc = rc == SQLITE_DONE ? 0 : kp_db_error(db, err, "reading the job's runs");
	sqlite3_finalize(st);
	return rc;
}

int kp_db_job_runs(struct kp_db *db, int64_t run_id, int *world_size, struct kp_job_run **runs,
		   size_t *n, struct kp_err *err)
{
	struct run_key key;
	int rc;

	*runs = NULL;
	*n = 0;
	if (world_size)
		*world_size = -1;
	if (run_id <= 0)
		run_id = kp_db_default_run(db);
	if (run_id <= 0)
		return 0;
	if ((rc = run_key_load(db, run_id, &key, err)) || !key.has_rank)
		return rc;
	if (world_size)
		*world_size = key.world_size;
	if ((rc = job_runs(db, &key, runs, n, err))) {
		free(*runs);
		*runs = NULL;
		*n = 0;
	}
	return rc;
}
