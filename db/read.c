/*
 * read.c - the typed read API (read.h): one prepared statement per
 * iterator, its columns turned into the fields of a row struct here and
 * nowhere else.
 */
#include "read.h"

#include <stdlib.h>
#include <string.h>

/* Which _next may read an iterator; each has its query's error text. */
enum rows_kind {
	ROWS_RUNS = 1, ROWS_GPUS, ROWS_STREAMS, ROWS_API_CALLS, ROWS_NVTX, ROWS_OVERHEAD,
	ROWS_KERNELS, ROWS_MEMCPYS, ROWS_MEMSETS, ROWS_SYNCS, ROWS_REGION_OCCS, ROWS_HOST_GAPS,
	ROWS_API_CORRS, ROWS_API_SPANS, ROWS_NVTX_RANGES, ROWS_NVTX_DOMAINS, ROWS_STREAM_OPS,
	ROWS_KERNEL_SUMS, ROWS_API_SUMS, ROWS_NVTX_HOLDERS,
};

struct kp_db_rows {
	struct kp_db *db;
	sqlite3_stmt *st;
	int kind;                       /* enum rows_kind */
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
		return kp_err_set(err, KP_EINVAL, "read API: an iterator of another kind");
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
#define IS_NULL(i) (sqlite3_column_type(st, (i)) == SQLITE_NULL)

/* Step it (of kind); on a row, st is its statement. */
#define STEP(kind) \
	sqlite3_stmt *st; \
	int rc_ = rows_step(it, (kind), err); \
	if (rc_ <= 0) \
		return rc_; \
	st = it->st

/* ---- the run ---- */

/* rank and world_size: schema v4, clock_base_ns: v6 (older read-only
 * databases lack the columns) */
#define RUN_SQL(rank) "SELECT runId, created_ns, source, source_path, device_name," \
	" compute_major, compute_minor, sm_count, driver_version, runtime_version," \
	" cupti_version, status, " rank ", command, t_begin_ns, t_end_ns, dropped_records," \
	" dropped_detail, overhead_ns FROM kp_runs"
#define RUN_RANK6 "rank, world_size, clock_base_ns"
#define RUN_RANK4 "rank, world_size, NULL"
#define RUN_RANK0 "NULL, NULL, NULL"

int kp_db_runs(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	int v = db->schema_version;

	return rows_open(db, run > 0 ? (v >= 6 ? RUN_SQL(RUN_RANK6) " WHERE runId = ?1" :
					v >= 4 ? RUN_SQL(RUN_RANK4) " WHERE runId = ?1" :
					RUN_SQL(RUN_RANK0) " WHERE runId = ?1") :
			 (v >= 6 ? RUN_SQL(RUN_RANK6) " ORDER BY runId" :
			  v >= 4 ? RUN_SQL(RUN_RANK4) " ORDER BY runId" :
			  RUN_SQL(RUN_RANK0) " ORDER BY runId"),
			 run, ROWS_RUNS, "reading runs", it, err);
}

int kp_db_run_next(struct kp_db_rows *it, struct kp_db_run *r, struct kp_err *err)
{
	STEP(ROWS_RUNS);
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
	r->has_rank = !IS_NULL(12);
	r->rank = I(12);
	r->has_world_size = !IS_NULL(13);
	r->world_size = I(13);
	r->has_clock_base = !IS_NULL(14);
	r->clock_base_ns = I(14);
	r->command = T(15);
	r->t_begin_ns = I(16);
	r->t_end_ns = I(17);
	r->dropped_records = I(18);
	r->dropped_detail = T(19);
	r->has_overhead = !IS_NULL(20);
	r->overhead_ns = I(20);
	return 1;
}

int kp_db_gpus(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT id, name, totalMemory, computeMajor, computeMinor,"
			 " maxThreadsPerBlock, maxRegistersPerSm, maxShmemPerBlock, maxShmemPerSm,"
			 " threadsPerWarp, smCount, clockRate, l2CacheSize, memoryBandwidth"
			 " FROM TARGET_INFO_GPU WHERE runId = ?1 ORDER BY id",
			 run, ROWS_GPUS, "reading gpus", it, err);
}

int kp_db_gpu_next(struct kp_db_rows *it, struct kp_db_gpu *g, struct kp_err *err)
{
	STEP(ROWS_GPUS);
	g->id = I(0);
	g->name = T(1);
	g->total_memory = I(2);
	g->compute_major = I(3);
	g->compute_minor = I(4);
	g->max_threads_per_block = I(5);
	g->max_registers_per_sm = I(6);
	g->max_shmem_per_block = I(7);
	g->max_shmem_per_sm = I(8);
	g->threads_per_warp = I(9);
	g->sm_count = I(10);
	g->clock_rate = I(11);
	g->l2_cache_size = I(12);
	g->memory_bandwidth = I(13);
	return 1;
}

int kp_db_streams(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT DISTINCT deviceId, streamId FROM ("
			 " SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1"
			 " UNION SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE runId = ?1"
			 " UNION SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE runId = ?1)"
			 " ORDER BY 1, 2", run, ROWS_STREAMS, "reading streams", it, err);
}

int kp_db_stream_next(struct kp_db_rows *it, struct kp_db_stream *s, struct kp_err *err)
{
	STEP(ROWS_STREAMS);
	s->device = I(0);
	s->stream = I(1);
	return 1;
}

/* ---- host side ---- */

int kp_db_api_calls(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT x.start, x.end, x.eventClass, x.globalTid, x.correlationId,"
			 " (SELECT value FROM StringIds WHERE id = x.nameId), x.returnValue"
			 " FROM CUPTI_ACTIVITY_KIND_RUNTIME x WHERE x.runId = ?1 ORDER BY x.start",
			 run, ROWS_API_CALLS, "reading api calls", it, err);
}

int kp_db_api_call_next(struct kp_db_rows *it, struct kp_db_api_call *c, struct kp_err *err)
{
	STEP(ROWS_API_CALLS);
	c->start = I(0);
	c->end = I(1);
	c->event_class = I(2);
	c->gtid = I(3);
	c->correlation = I(4);
	c->name = T(5);
	c->return_value = I(6);
	return 1;
}

int kp_db_api_corrs(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"
			 " WHERE runId = ?1 AND correlationId IS NOT NULL",
			 run, ROWS_API_CORRS, "reading launch calls", it, err);
}

int kp_db_api_corr_next(struct kp_db_rows *it, struct kp_db_api_corr *c, struct kp_err *err)
{
	STEP(ROWS_API_CORRS);
	c->correlation = I(0);
	c->start = I(1);
	return 1;
}

int kp_db_api_spans(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT r.start, r.end, r.nameId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
			 " LEFT JOIN StringIds s ON s.id = r.nameId WHERE r.runId = ?1",
			 run, ROWS_API_SPANS, "reading API calls", it, err);
}

int kp_db_api_span_next(struct kp_db_rows *it, struct kp_db_api_span *c, struct kp_err *err)
{
	STEP(ROWS_API_SPANS);
	c->start = I(0);
	c->end = I(1);
	c->name_id = I(2);
	c->name = T(3);
	return 1;
}

int kp_db_nvtx(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	/* a domain's name is in its create event (eventType 75): the collector's
	 * domain ids are its own, the importer's are StringIds ids */
	return rows_open(db, "SELECT x.start, x.end, x.eventType, x.category, x.globalTid,"
			 " coalesce(x.text, (SELECT value FROM StringIds WHERE id = x.textId)),"
			 " x.domainId,"
			 " (SELECT coalesce(d.text, s.value) FROM NVTX_EVENTS d"
			 "   LEFT JOIN StringIds s ON s.id = d.textId WHERE d.runId = x.runId"
			 "   AND d.eventType = 75 AND d.domainId = x.domainId LIMIT 1)"
			 " FROM NVTX_EVENTS x WHERE x.runId = ?1 AND x.eventType IN (34, 59, 60)"
			 " ORDER BY x.start", run, ROWS_NVTX, "reading nvtx events", it, err);
}

int kp_db_nvtx_next(struct kp_db_rows *it, struct kp_db_nvtx *e, struct kp_err *err)
{
	STEP(ROWS_NVTX);
	e->start = I(0);
	e->is_mark = IS_NULL(1);
	e->end = I(1);
	e->event_type = I(2);
	e->category = I(3);
	e->gtid = I(4);
	e->text = T(5);
	e->domain_id = I(6);
	e->domain = e->domain_id ? T(7) : NULL;
	return 1;
}

int kp_db_nvtx_ranges(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err)
{
	return rows_open(db, "SELECT n.start, n.end, coalesce(n.text, s.value), coalesce(n.domainId, -1)"
			 " FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
			 " WHERE n.runId = ?1 AND n.eventType IN (59, 60) AND n.end >= n.start",
			 run, ROWS_NVTX_RANGES, "reading NVTX ranges", it, err);
}

int kp_db_nvtx_range_next(struct kp_db_rows *it, struct kp_db_nvtx_range *r,
			  struct kp_err *err)
{
	STEP(ROWS_NVTX_RANGES);
	r->start = I(0);
	r->end = I(1);
	r->text = T(2);
	r->domain_id = I(3);
	return 1;
}

int kp_db_nvtx_domains(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		       struct kp_err *err)
{
	return rows_open(db, "SELECT domainId, text FROM NVTX_EVENTS WHERE runId = ?1"
			 " AND eventType = 75", run, ROWS_NVTX_DOMAINS, "reading NVTX domains",
			 it, err);
}

int kp_db_nvtx_domain_next(struct kp_db_rows *it, struct kp_db_nvtx_domain *d,
			   struct kp_err *err)
{
	STEP(ROWS_NVTX_DOMAINS);
	d->domain_id = I(0);
	d->name = T(1);
	return 1;
}

int kp_db_nvtx_holding(struct kp_db *db, int64_t run, int64_t t, int has_gtid, int64_t gtid,
		       struct kp_db_rows **it, struct kp_err *err)
{
	int rc = rows_open(db, "SELECT coalesce(n.text, s.value), coalesce(d.text, '') FROM NVTX_EVENTS n"
			   " LEFT JOIN StringIds s ON s.id = n.textId"
			   " LEFT JOIN NVTX_EVENTS d ON d.runId = n.runId AND d.eventType = 75"
			   " AND d.domainId = n.domainId"
			   " WHERE n.runId = ?1 AND n.start <= ?2 AND n.end >= ?2 AND n.eventType IN (59, 60)"
			   " AND (n.globalTid IS NULL OR ?3 IS NULL OR n.globalTid = ?3)"
			   " ORDER BY n.start DESC LIMIT 16",
			   run, ROWS_NVTX_HOLDERS, "reading the NVTX ranges around a time", it, err);

	if (!rc) {
		sqlite3_bind_int64((*it)->st, 2, t);
		if (has_gtid)
			sqlite3_bind_int64((*it)->st, 3, gtid);
	}
	return rc;
}

int kp_db_nvtx_holder_next(struct kp_db_rows *it, struct kp_db_nvtx_holder *h,
			   struct kp_err *err)
{
	STEP(ROWS_NVTX_HOLDERS);
	h->text = T(0);
	h->domain = T(1);
	return 1;
}

int kp_db_overheads(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT x.start, x.end, x.globalTid,"
			 " (SELECT value FROM StringIds WHERE id = x.nameId)"
			 " FROM PROFILER_OVERHEAD x WHERE x.runId = ?1 ORDER BY x.start",
			 run, ROWS_OVERHEAD, "reading overhead", it, err);
}

int kp_db_overhead_next(struct kp_db_rows *it, struct kp_db_overhead *o, struct kp_err *err)
{
	STEP(ROWS_OVERHEAD);
	o->start = I(0);
	o->end = I(1);
	o->gtid = I(2);
	o->name = T(3);
	return 1;
}

/* ---- GPU side ---- */

/* Columns 0-5 of every GPU op query, and the launching call after a
 * query's own columns (LAUNCH_COLS at column i: found, start i, gtid i + 1). */
#define OP_COLS "x.start, x.end, x.deviceId, x.contextId, x.streamId, x.correlationId"
#define LAUNCH_COLS \
	", (SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = x.runId" \
	"   AND r.correlationId = x.correlationId LIMIT 1)" \
	", (SELECT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = x.runId" \
	"   AND r.correlationId = x.correlationId LIMIT 1)"

static void read_op(sqlite3_stmt *st, struct kp_db_op *op)
{
	op->start = I(0);
	op->end = I(1);
	op->device = I(2);
	op->context = I(3);
	op->stream = I(4);
	op->correlation = I(5);
}

static void read_launch(sqlite3_stmt *st, int i, struct kp_db_launch *l)
{
	l->found = !IS_NULL(i);
	l->start = I(i);
	l->gtid = I(i + 1);
	l->has_gtid = !IS_NULL(i + 1);
}

int kp_db_launch_of(struct kp_db *db, int64_t run, int64_t corr, struct kp_db_launch *l,
		    struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc = kp_db_prepare_run(db, "SELECT start, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"
				   " WHERE runId = ?1 AND correlationId = ?2 LIMIT 1", run, &st, err);

	memset(l, 0, sizeof(*l));
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 2, corr);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		read_launch(st, 0, l);
		l->found = 1;
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = kp_db_error(db, err, "reading the API call of a correlation id");
	}
	sqlite3_finalize(st);
	return rc;
}

/* kp_launch_attrs is schema v2, absent from older read-only databases */
const char *const kp_db_coll_keys[KP_DB_COLL__N] = {
	"Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size",
	"Process Group Name", "Process Group Description", "Process Group Ranks", "Seq",
};

#define KERNEL_SQL(pdl, coll, join) \
	"SELECT " OP_COLS "," \
	" (SELECT value FROM StringIds WHERE id = x.demangledName)," \
	" x.registersPerThread, x.gridX, x.gridY, x.gridZ, x.blockX, x.blockY, x.blockZ," \
	" x.staticSharedMemory, x.dynamicSharedMemory, x.launchType, x.cacheConfig," \
	" x.localMemoryPerThread, x.localMemoryTotal, x.gridId, x.graphNodeId, x.graphId" \
	LAUNCH_COLS ", " pdl ", " coll \
	" FROM CUPTI_ACTIVITY_KIND_KERNEL x" join " WHERE x.runId = ?1 ORDER BY x.start"
/* in enum kp_db_coll_field's order */
#define COLL_COLS "c.name, c.dtype, c.in_nelems, c.out_nelems, c.group_size, c.pg_name," \
	" c.pg_desc, c.group_ranks, c.seq"
#define COLL_NONE "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
#define COLL_JOIN " LEFT JOIN kp_collectives c ON c.runId = x.runId" \
	" AND c.streamId = x.streamId AND c.start = x.start"
#define PDL "(SELECT a.pdl FROM kp_launch_attrs a WHERE a.runId = x.runId" \
	" AND a.correlationId = x.correlationId)"

int kp_db_kernels(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	/* kp_launch_attrs: schema v2, kp_collectives: v6; absent from older
	 * read-only databases */
	return rows_open(db, db->schema_version >= 6 ? KERNEL_SQL(PDL, COLL_COLS, COLL_JOIN) :
			 kp_db_has_table(db, "kp_launch_attrs") ? KERNEL_SQL(PDL, COLL_NONE, "") :
			 KERNEL_SQL("NULL", COLL_NONE, ""), run, ROWS_KERNELS, "reading kernels",
			 it, err);
}

int kp_db_kernel_next(struct kp_db_rows *it, struct kp_db_kernel *k, struct kp_err *err)
{
	STEP(ROWS_KERNELS);
	read_op(st, &k->op);
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
	read_launch(st, 23, &k->launch);
	k->pdl = I(25) != 0;
	for (int i = 0; i < KP_DB_COLL__N; i++) {
		int t = sqlite3_column_type(st, 26 + i);
		struct kp_db_value *v = &k->coll[i];

		v->type = t == SQLITE_NULL ? 0 : t == SQLITE_INTEGER ? 1 : 2;
		v->i = v->type == 1 ? I(26 + i) : 0;
		v->t = v->type == 2 ? T(26 + i) : NULL;
	}
	return 1;
}

int kp_db_memcpys(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT " OP_COLS ", x.bytes, x.copyKind, x.srcKind, x.dstKind"
			 LAUNCH_COLS " FROM CUPTI_ACTIVITY_KIND_MEMCPY x WHERE x.runId = ?1"
			 " ORDER BY x.start", run, ROWS_MEMCPYS, "reading memcpys", it, err);
}

int kp_db_memcpy_next(struct kp_db_rows *it, struct kp_db_memcpy *c, struct kp_err *err)
{
	STEP(ROWS_MEMCPYS);
	read_op(st, &c->op);
	c->bytes = I(6);
	c->copy_kind = I(7);
	c->src_kind = I(8);
	c->dst_kind = I(9);
	read_launch(st, 10, &c->launch);
	return 1;
}

int kp_db_memsets(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT " OP_COLS ", x.bytes, x.value, x.memKind" LAUNCH_COLS
			 " FROM CUPTI_ACTIVITY_KIND_MEMSET x WHERE x.runId = ?1 ORDER BY x.start",
			 run, ROWS_MEMSETS, "reading memsets", it, err);
}

int kp_db_memset_next(struct kp_db_rows *it, struct kp_db_memset *m, struct kp_err *err)
{
	STEP(ROWS_MEMSETS);
	read_op(st, &m->op);
	m->bytes = I(6);
	m->value = I(7);
	m->mem_kind = I(8);
	read_launch(st, 9, &m->launch);
	return 1;
}

int kp_db_syncs(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT " OP_COLS ", x.syncType, x.eventId"
			 " FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION x WHERE x.runId = ?1"
			 " ORDER BY x.start", run, ROWS_SYNCS, "reading syncs", it, err);
}

int kp_db_sync_next(struct kp_db_rows *it, struct kp_db_sync *s, struct kp_err *err)
{
	STEP(ROWS_SYNCS);
	read_op(st, &s->op);
	s->sync_type = I(6);
	s->event_id = I(7);
	return 1;
}

/* ?2, ?3: the window; no joins, so a pass over a 1M-kernel run stays one
 * index walk (the launch call is the reader's lookup, kp_db_api_corrs) */
static const char *const stream_ops_sql[] = {
	[KP_DB_OPS_KERNELS] = "SELECT deviceId, streamId, start, end, demangledName, correlationId"
	" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1 AND start < ?3 AND end > ?2"
	" ORDER BY deviceId, streamId, start",
	[KP_DB_OPS_MEMCPYS] = "SELECT deviceId, streamId, start, end, 0, correlationId"
	" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE runId = ?1 AND start < ?3 AND end > ?2"
	" ORDER BY deviceId, streamId, start",
	[KP_DB_OPS_MEMSETS] = "SELECT deviceId, streamId, start, end, 0, correlationId"
	" FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE runId = ?1 AND start < ?3 AND end > ?2"
	" ORDER BY deviceId, streamId, start",
};

int kp_db_stream_ops(struct kp_db *db, int64_t run, enum kp_db_op_table table, int64_t t0,
		     int64_t t1, struct kp_db_rows **it, struct kp_err *err)
{
	int rc;

	if ((unsigned)table > KP_DB_OPS_MEMSETS) {
		*it = NULL;
		return kp_err_set(err, KP_EINVAL, "read API: no GPU op table %d", (int)table);
	}
	rc = rows_open(db, stream_ops_sql[table], run, ROWS_STREAM_OPS,
		       "reading the GPU ops of the run", it, err);
	if (!rc) {
		sqlite3_bind_int64((*it)->st, 2, t0);
		sqlite3_bind_int64((*it)->st, 3, t1);
	}
	return rc;
}

int kp_db_stream_op_next(struct kp_db_rows *it, struct kp_db_stream_op *o, struct kp_err *err)
{
	STEP(ROWS_STREAM_OPS);
	o->device = I(0);
	o->stream = I(1);
	o->start = I(2);
	o->end = I(3);
	o->name_id = I(4);
	o->has_correlation = !IS_NULL(5);
	o->correlation = I(5);
	return 1;
}

static const char *const extent_sql[] = {
	[KP_DB_EXTENT_KERNELS] = "SELECT min(start), max(end), count(*), sum(end - start)"
	" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1",
	[KP_DB_EXTENT_MEMCPYS] = "SELECT min(start), max(end), count(*), sum(end - start)"
	" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE runId = ?1",
	[KP_DB_EXTENT_MEMSETS] = "SELECT min(start), max(end), count(*), sum(end - start)"
	" FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE runId = ?1",
	[KP_DB_EXTENT_API_CALLS] = "SELECT min(start), max(end), count(*), sum(end - start)"
	" FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE runId = ?1",
	[KP_DB_EXTENT_NVTX_RANGES] = "SELECT min(start), max(end), count(*), sum(end - start)"
	" FROM NVTX_EVENTS WHERE runId = ?1 AND eventType IN (59, 60) AND end >= start",
	[KP_DB_EXTENT_OVERHEAD] = "SELECT min(start), max(end), count(*), sum(end - start)"
	" FROM PROFILER_OVERHEAD WHERE runId = ?1",
};

int kp_db_extent(struct kp_db *db, int64_t run, enum kp_db_extent_of of,
		 struct kp_db_extent *e, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	memset(e, 0, sizeof(*e));
	if ((unsigned)of > KP_DB_EXTENT_OVERHEAD)
		return kp_err_set(err, KP_EINVAL, "read API: no extent %d", (int)of);
	rc = kp_db_prepare_run(db, extent_sql[of], run, &st, err);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		e->has_start = !IS_NULL(0);
		e->start = I(0);
		e->has_end = !IS_NULL(1);
		e->end = I(1);
		e->count = I(2);
		e->sum_ns = I(3);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = kp_db_error(db, err, "reading the extent of a table");
	}
	sqlite3_finalize(st);
	return rc;
}

/* ---- per-name summaries ---- */

int kp_db_kernel_sums(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err)
{
	/* group by the interned id first (cheap), then resolve the names */
	return rows_open(db, "SELECT n.value, s.value, g.c, g.t, g.mn, g.mx, g.d FROM"
			 " (SELECT demangledName AS d, min(shortName) AS sh, count(*) AS c,"
			 "   sum(end - start) AS t, min(end - start) AS mn, max(end - start) AS mx"
			 "  FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1 GROUP BY demangledName) g"
			 " JOIN StringIds n ON n.id = g.d LEFT JOIN StringIds s ON s.id = g.sh"
			 " ORDER BY g.t DESC, g.c DESC, n.value",
			 run, ROWS_KERNEL_SUMS, "reading the kernel summary", it, err);
}

int kp_db_kernel_sum_next(struct kp_db_rows *it, struct kp_db_kernel_sum *k,
			  struct kp_err *err)
{
	STEP(ROWS_KERNEL_SUMS);
	k->name = T(0);
	k->short_name = T(1);
	k->count = I(2);
	k->total_ns = I(3);
	k->min_ns = I(4);
	k->max_ns = I(5);
	k->name_id = I(6);
	return 1;
}

int kp_db_api_sums(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err)
{
	return rows_open(db, "SELECT n.value, g.ec, g.c, g.t, g.mn, g.mx FROM"
			 " (SELECT nameId AS id, eventClass AS ec, count(*) AS c, sum(end - start) AS t,"
			 "   min(end - start) AS mn, max(end - start) AS mx"
			 "  FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE runId = ?1 GROUP BY nameId, eventClass) g"
			 " JOIN StringIds n ON n.id = g.id ORDER BY g.t DESC, g.c DESC, n.value, g.ec",
			 run, ROWS_API_SUMS, "reading the API summary", it, err);
}

int kp_db_api_sum_next(struct kp_db_rows *it, struct kp_db_api_sum *a, struct kp_err *err)
{
	STEP(ROWS_API_SUMS);
	a->name = T(0);
	a->event_class = I(1);
	a->count = I(2);
	a->total_ns = I(3);
	a->min_ns = I(4);
	a->max_ns = I(5);
	return 1;
}

/* ---- the analysis ---- */

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
	STEP(ROWS_REGION_OCCS);
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

int kp_db_host_gaps(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		    struct kp_err *err)
{
	return rows_open(db, "SELECT deviceId, streamId, correlationId, kernel_start, gap_ns,"
			 " queue_ns, launch_api_ns FROM kp_gaps"
			 " WHERE runId = ?1 AND host_bound = 1 AND gap_ns > 0"
			 " ORDER BY deviceId, streamId, kernel_start",
			 run, ROWS_HOST_GAPS, "reading gaps", it, err);
}

int kp_db_host_gap_next(struct kp_db_rows *it, struct kp_db_host_gap *g,
			struct kp_err *err)
{
	STEP(ROWS_HOST_GAPS);
	g->device = I(0);
	g->stream = I(1);
	g->correlation = I(2);
	g->kernel_start = I(3);
	g->gap_ns = I(4);
	g->queue_ns = I(5);
	g->launch_api_ns = I(6);
	return 1;
}
