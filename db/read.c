/*
 * read.c - the typed read API (read.h): one prepared statement per
 * iterator, its columns turned into the fields of a row struct here and
 * nowhere else.
 */
#include "read.h"

#include <stdlib.h>

enum rows_kind { ROWS_RUNS = 1, ROWS_KERNELS, ROWS_REGION_OCCS };

struct kp_db_rows {
	struct kp_db *db;
	sqlite3_stmt *st;
	int kind;                       /* enum rows_kind: which _next may read it */
	const char *what;               /* "reading kernels", for errors */
};

static int rows_open(struct kp_db *db, const char *sql, int64_t run, int kind,
		     const char *what, struct kp_db_rows **out, struct kp_err *err)
{
	struct kp_db_rows *it = calloc(1, sizeof(*it));
	int rc;

	*out = NULL;
	if (!it)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	rc = kp_db_prepare_run(db, sql, run, &it->st, err);
	if (rc) {
		free(it);
		return rc;
	}
	it->db = db;
	it->kind = kind;
	it->what = what;
	*out = it;
	return 0;
}

/* 1: a row is ready, 0: done, < 0: an error (in err). */
static int rows_step(struct kp_db_rows *it, int kind, struct kp_err *err)
{
	int rc;

	if (!it || it->kind != kind)
		return kp_err_set(err, KP_EINVAL, "read API: iterator of another kind");
	rc = sqlite3_step(it->st);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return kp_db_error(it->db, err, it->what);
}

void kp_db_rows_close(struct kp_db_rows *it)
{
	if (!it)
		return;
	sqlite3_finalize(it->st);
	free(it);
}

#define I(i) kp_db_col_i64(st, (i), 0)
#define T(i) ((const char *)sqlite3_column_text(st, (i)))

/* ---- runs ---- */

#define RUN_SQL "SELECT runId, created_ns, source, source_path, device_name, compute_major," \
	" compute_minor, sm_count, driver_version, runtime_version, cupti_version, status" \
	" FROM kp_runs"

int kp_db_runs(struct kp_db *db, int64_t run_id, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, run_id > 0 ? RUN_SQL " WHERE runId = ?1" : RUN_SQL " ORDER BY runId",
			 run_id, ROWS_RUNS, "reading runs", it, err);
}

int kp_db_run_next(struct kp_db_rows *it, struct kp_db_run *r, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc = rows_step(it, ROWS_RUNS, err);

	if (rc <= 0)
		return rc;
	st = it->st;
	r->run_id = I(0);
	r->created_ns = I(1);
	r->source = T(2);
	r->source_path = T(3);
	r->device_name = T(4);
	r->compute_major = I(5);
	r->compute_minor = I(6);
	r->sm_count = I(7);
	r->driver_version = I(8);
	r->runtime_version = I(9);
	r->cupti_version = I(10);
	r->status = T(11);
	return 1;
}

/* ---- kernels ---- */

/* The launching call: the run's API row with the kernel's correlation id.
 * kp_launch_attrs is schema v2, absent from older read-only databases. */
#define KERNEL_SQL(pdl) \
	"SELECT x.start, x.end, x.deviceId, x.contextId, x.streamId, x.correlationId," \
	" (SELECT value FROM StringIds WHERE id = x.demangledName)," \
	" x.registersPerThread, x.gridX, x.gridY, x.gridZ, x.blockX, x.blockY, x.blockZ," \
	" x.staticSharedMemory, x.dynamicSharedMemory, x.launchType, x.cacheConfig," \
	" x.localMemoryPerThread, x.localMemoryTotal, x.gridId, x.graphNodeId, x.graphId," \
	" (SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = x.runId" \
	"   AND r.correlationId = x.correlationId LIMIT 1)," \
	" (SELECT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = x.runId" \
	"   AND r.correlationId = x.correlationId LIMIT 1), " pdl \
	" FROM CUPTI_ACTIVITY_KIND_KERNEL x WHERE x.runId = ?1 ORDER BY x.start"

int kp_db_kernels(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, kp_db_has_table(db, "kp_launch_attrs")
			 ? KERNEL_SQL("(SELECT a.pdl FROM kp_launch_attrs a WHERE a.runId = x.runId"
				      " AND a.correlationId = x.correlationId)")
			 : KERNEL_SQL("NULL"), run, ROWS_KERNELS, "reading kernels", it, err);
}

int kp_db_kernel_next(struct kp_db_rows *it, struct kp_db_kernel *k, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc = rows_step(it, ROWS_KERNELS, err);

	if (rc <= 0)
		return rc;
	st = it->st;
	k->start = I(0);
	k->end = I(1);
	k->device = I(2);
	k->context = I(3);
	k->stream = I(4);
	k->correlation = I(5);
	k->name = T(6);
	k->registers_per_thread = I(7);
	for (int d = 0; d < 3; d++) {
		k->grid[d] = I(8 + d);
		k->block[d] = I(11 + d);
	}
	k->static_smem = I(14);
	k->dynamic_smem = I(15);
	k->launch_type = I(16);
	k->cache_config = I(17);
	k->local_mem_per_thread = I(18);
	k->local_mem_total = I(19);
	k->grid_id = I(20);
	k->graph_node_id = I(21);
	k->graph_id = I(22);
	k->has_launch = sqlite3_column_type(st, 23) != SQLITE_NULL;
	k->launch_start = I(23);
	k->launch_gtid = I(24);
	k->pdl = I(25) != 0;
	return 1;
}

/* ---- region occurrences ---- */

int kp_db_region_occs(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err)
{
	return rows_open(db, "SELECT o.regionId, g.label, o.occIndex, o.start, o.end, o.kernels,"
			 " g.source, g.capturable"
			 " FROM kp_region_occurrences o JOIN kp_regions g"
			 " ON g.runId = o.runId AND g.regionId = o.regionId"
			 " WHERE o.runId = ?1 ORDER BY o.regionId, o.occIndex",
			 run, ROWS_REGION_OCCS, "reading region occurrences", it, err);
}

int kp_db_region_occ_next(struct kp_db_rows *it, struct kp_db_region_occ *o,
			  struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc = rows_step(it, ROWS_REGION_OCCS, err);

	if (rc <= 0)
		return rc;
	st = it->st;
	o->region_id = I(0);
	o->label = T(1);
	o->occ_index = I(2);
	o->start = I(3);
	o->end = I(4);
	o->kernels = I(5);
	o->source = T(6);
	o->capturable = (int)I(7);
	return 1;
}
