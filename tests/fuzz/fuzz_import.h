/*
 * fuzz_import.h - the part the importer harnesses share: one kplan
 * database per process (in memory, schema created once), each input
 * imported inside a transaction that is rolled back afterwards, and the
 * importer's row counts checked against what the database holds.
 */
#ifndef KP_FUZZ_IMPORT_H
#define KP_FUZZ_IMPORT_H

#include "fuzz_util.h"

#include "db/db.h"
#include "db/writer.h"
#include "importers/import.h"

static struct kp_db *fz_db;

static void fz_db_open(void)
{
	struct kp_err err = {0};

	kp_log_set_level(KP_LOG_ERROR);
	fz_db = kp_db_open(":memory:", KP_DB_CREATE, &err);
	if (!fz_db || kp_db_set_bulk(fz_db, 1, &err)) {
		fprintf(stderr, "fuzz: cannot create the database: %s\n", err.msg);
		abort();
	}
}

typedef int (*fz_reader)(struct kp_db *, const char *, const struct kp_import_opts *,
			 struct kp_import_stats *, struct kp_err *);

/* Import path with reader inside a rolled-back transaction; check counts. */
static void fz_import(fz_reader reader, const char *path)
{
	static const int tables[] = { KP_T_KERNEL, KP_T_RUNTIME, KP_T_MEMCPY, KP_T_MEMSET,
				      KP_T_SYNC, KP_T_NVTX, KP_T_OVERHEAD };
	struct kp_import_opts opts = { 0, 0 };
	struct kp_import_stats st;
	struct kp_err err = {0};
	size_t i;
	int rc;

	memset(&st, 0, sizeof(st));
	FZ_CHECK(kp_db_begin(fz_db, &err) == 0, "begin: %s", err.msg);
	rc = reader(fz_db, path, &opts, &st, &err);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "import: rc %d %s; %lld kernels %lld api %lld nvtx\n", rc, err.msg,
			(long long)st.rows[KP_T_KERNEL], (long long)st.rows[KP_T_RUNTIME],
			(long long)st.rows[KP_T_NVTX]);
	if (rc) {
		FZ_CHECK(rc < 0 && err.code == rc && err.msg[0],
			 "failed (rc %d) without a matching error (code %d, '%s')", rc, err.code,
			 err.msg);
	} else {
		FZ_CHECK(st.run_id > 0, "no run id after a successful import");
		for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
			char sql[160];
			int64_t n;

			snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE runId = %lld",
				 kp_table_name(tables[i]), (long long)st.run_id);
			n = kp_db_int(fz_db, sql, -1);
			FZ_CHECK(n == st.rows[tables[i]], "%s: stats say %lld rows, table holds %lld",
				 kp_table_name(tables[i]), (long long)st.rows[tables[i]], (long long)n);
		}
	}
	kp_db_rollback(fz_db);
}

#endif
