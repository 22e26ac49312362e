/*
 * load.c - read one run into the analyzer's arrays: GPU ops with their
 * signatures, launch calls joined by correlation id, the API calls that
 * block capture, per-stream order and the idle gap before every op.
 *
 * Everything is plain prepared SELECTs into preallocated arrays and radix
 * sorts (no allocation per row, no ORDER BY): 10 M kernels load in seconds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return h;
}

static int sig_get(struct kp__ana *a, const struct kp__sig *s, uint32_t *ix,
		   struct kp_err *err)
{
	uint64_t h = mix(0x1234567ULL + s->kind, (uint64_t)s->name_id);

	for (int i = 0; i < 3; i++)
		h = mix(h, ((uint64_t)(uint32_t)s->grid[i] << 32) | (uint32_t)s->block[i]);
	h = mix(h, ((uint64_t)(uint32_t)s->smem << 32) | (uint32_t)s->dyn_smem);
	h = mix(h, (uint64_t)s->bytes);
	h = mix(h, (uint64_t)s->mangled_id);
	if (kp_u64map_get(&a->sigmap, h, ix))
		return 0;
	*ix = (uint32_t)a->sigs.len;
	if (kp_vec_push(&a->sigs, *s) || kp_u64map_put(&a->sigmap, h, *ix))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	return 0;
}

static int stream_get(struct kp__ana *a, struct kp_u64map *m, int64_t dev,
		      int64_t stream, uint32_t *ix, struct kp_err *err)
{
	uint64_t key = ((uint64_t)dev << 40) ^ (uint64_t)stream;
	struct kp__stream s = { .device_id = dev, .stream_id = stream };

	if (kp_u64map_get(m, key, ix))
		return 0;
	*ix = (uint32_t)a->streams.len;
	if (kp_vec_push(&a->streams, s) || kp_u64map_put(m, key, *ix))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	return 0;
}

static int64_t count_rows(struct kp__ana *a, const char *table)
{
	char sql[160];

	if (!kp_db_has_table(a->db, table))
		return 0;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE runId = %lld",
		 table, (long long)a->run);
	return kp_db_int(a->db, sql, 0);
}

/*
 * "NOT INDEXED" when the run holds at least a quarter of the table: walking
 * the table beats an index search plus one row lookup per row (3x on 10 M
 * kernels); a small run in a big database keeps the index.
 */
static const char *scan_hint(struct kp__ana *a, const char *table, int64_t n_run)
{
	char sql[128];
	int64_t n_all;

	snprintf(sql, sizeof(sql), "SELECT max(rowid) FROM %s", table);
	n_all = kp_db_int(a->db, sql, 0);
	return n_run * 4 >= n_all ? " NOT INDEXED" : "";
}

/* Kernel name strings for the signatures, and their fusion classes. */
static int sig_names(struct kp__ana *a, struct kp_err *err)
{
	for (size_t i = 0; i < a->sigs.len; i++) {
		struct kp__sig *s = &a->sigs.data[i];
		uint32_t ix;
		int rc;

		if (s->kind == KP__OP_MEMSET) {
			s->name = "Memset";
			s->mem_class = 1;
			continue;
		}
		if (s->kind == KP__OP_MEMCPY) {
			s->name = "Memcpy";
			s->mem_class = 1;
			continue;
		}
		rc = kp__name_get(a, s->name_id, &ix, err);
		if (rc)
			return rc;
		s->name = a->names.data[ix].s;
		/* plan/FORMAT.md "Fingerprints": the name the runtime sees
		 * (mangled, cuFuncGetName) when the trace has it */
		const char *fname = s->name;
		if (s->mangled_id > 0) {
			rc = kp__name_get(a, s->mangled_id, &ix, err);
			if (rc)
				return rc;
			if (*a->names.data[ix].s)
				fname = a->names.data[ix].s;
		}
		s->fsig = kp__kernel_sig(fname, s->grid, s->block, s->dyn_smem);
		const char *n = s->name;
		struct kp_nccl_kernel nk;

		if (kp_nccl_parse(n, &nk)) {
			/* communication: never part of a fusion chain */
			s->coll = (uint8_t)(nk.coll + 1);
			s->mem_class = 2;
		} else if (strstr(n, "gemm") || strstr(n, "conv") || strstr(n, "cutlass") ||
		    strstr(n, "xmma") || strstr(n, "cublas") || strstr(n, "cudnn") ||
		    strstr(n, "matmul") || strstr(n, "attention") || strstr(n, "flash") ||
		    strstr(n, "sm90_") || strstr(n, "sm80_") || strstr(n, "wgrad") ||
		    strstr(n, "dgrad"))
			s->mem_class = 2;
		else
			s->mem_class = 1;
		s->reduction = strstr(n, "reduce") || strstr(n, "Reduce") ||
			strstr(n, "norm") || strstr(n, "softmax") || strstr(n, "pool") ||
			strstr(n, "sum") || strstr(n, "mean");
	}
	return 0;
}

static int load_ops(struct kp__ana *a, struct kp_err *err)
{
	static const char *const sqls[3] = {
		"SELECT start, end, deviceId, streamId, correlationId, demangledName,"
		" gridX, gridY, gridZ, blockX, blockY, blockZ,"
		" staticSharedMemory + dynamicSharedMemory, registersPerThread,"
		" dynamicSharedMemory, mangledName, COALESCE(graphNodeId, 0), COALESCE(graphId, 0)"
		" FROM CUPTI_ACTIVITY_KIND_KERNEL%s WHERE runId = ?1",
		"SELECT start, end, deviceId, streamId, correlationId, bytes, COALESCE(graphNodeId, 0)"
		" FROM CUPTI_ACTIVITY_KIND_MEMSET%s WHERE runId = ?1",
		"SELECT start, end, deviceId, streamId, correlationId, bytes,"
		" copyKind, srcKind, dstKind, COALESCE(graphNodeId, 0)"
		" FROM CUPTI_ACTIVITY_KIND_MEMCPY%s WHERE runId = ?1",
	};
	static const char *const tables[3] = {
		"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMSET",
		"CUPTI_ACTIVITY_KIND_MEMCPY",
	};
	struct kp_u64map smap;
	int64_t total = 0, cnt[3];
	int rc = 0;

	for (int t = 0; t < 3; t++) {
		cnt[t] = count_rows(a, tables[t]);
		total += cnt[t];
	}
	if (total == 0)
		return kp_err_set(err, KP_ENOTFOUND, "%s: run %lld has no kernels, memsets or memcpys",
				  a->db->path, (long long)a->run);
	if (total >= (int64_t)UINT32_MAX)
		return kp_err_set(err, KP_EUNSUPPORTED, "run has %lld gpu ops; at most 4 G supported",
				  (long long)total);
	a->ops = calloc((size_t)total, sizeof(*a->ops));
	if (!a->ops)
		return kp_err_set(err, KP_ENOMEM, "out of memory for %lld ops", (long long)total);
	kp_u64map_init(&smap);
	for (int t = 0; t < 3 && !rc; t++) {
		sqlite3_stmt *st;
		char sql[512];

		if (!cnt[t])
			continue;
		snprintf(sql, sizeof(sql), sqls[t], scan_hint(a, tables[t], cnt[t]));
		rc = kp_db_prepare(a->db, sql, &st, err);
		if (rc)
			break;
		sqlite3_bind_int64(st, 1, a->run);
		while (!rc && sqlite3_step(st) == SQLITE_ROW && a->n_ops < (size_t)total) {
			struct kp__op *op = &a->ops[a->n_ops];
			struct kp__sig s;

			memset(&s, 0, sizeof(s));
			op->start = sqlite3_column_int64(st, 0);
			op->end = sqlite3_column_int64(st, 1);
			if (op->end < op->start)
				op->end = op->start;
			op->corr = (uint32_t)sqlite3_column_int64(st, 4);
			op->kind = (uint8_t)t;
			op->api_name = UINT32_MAX;
			op->api_dur = -1;
			s.kind = (uint8_t)t;
			if (t == KP__OP_KERNEL) {
				s.name_id = sqlite3_column_int64(st, 5);
				for (int i = 0; i < 3; i++) {
					s.grid[i] = sqlite3_column_int(st, 6 + i);
					s.block[i] = sqlite3_column_int(st, 9 + i);
				}
				s.smem = sqlite3_column_int(st, 12);
				s.regs = sqlite3_column_int(st, 13);
				s.dyn_smem = sqlite3_column_int(st, 14);
				s.mangled_id = sqlite3_column_int64(st, 15);
				if (sqlite3_column_int64(st, 16))
					op->flags |= KP__F_GRAPH;
				/* one graph's launches share its id: graphs.c groups by it */
				int64_t gid = sqlite3_column_int64(st, 17);
				if (gid > 0 && op->corr &&
				    kp_u64map_put(&a->graph_ids, op->corr, (uint32_t)gid))
					rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			} else {
				s.bytes = sqlite3_column_int64(st, 5);
				if (sqlite3_column_int64(st, t == KP__OP_MEMCPY ? 9 : 6))
					op->flags |= KP__F_GRAPH;
				if (t == KP__OP_MEMCPY) {
					s.name_id = -sqlite3_column_int64(st, 6) - 1;
					if (sqlite3_column_int(st, 7) == 1 || sqlite3_column_int(st, 8) == 1)
						op->flags |= KP__F_PAGEABLE;
				}
			}
			if (!rc)
				rc = sig_get(a, &s, &op->sig, err);
			if (!rc)
				rc = stream_get(a, &smap, sqlite3_column_int64(st, 2),
						sqlite3_column_int64(st, 3), &op->stream, err);
			a->n_ops++;
		}
		sqlite3_finalize(st);
	}
	kp_u64map_release(&smap);
	if (!rc)
		rc = sig_names(a, err);
	return rc;
}

struct lrow { int64_t start, end, tid; uint32_t name, corr; };

/* API calls: launch calls kept for the join, blocking calls as events. */
/*
 * The launch-call rows are read on a second connection in a second thread
 * while the main thread reads the ops (the two biggest tables, about the
 * same cost each); classification happens afterwards on the main thread.
 */
struct api_job {
	sqlite3 *h;              /* the connection the thread reads with */
	int own;                 /* h is ours to close */
	char sql[256];
	int64_t run;
	struct lrow *rows;       /* name holds StringIds.id until classified */
	size_t cap, n;
	int rc;
	char msg[256];
};

static void *api_fetch(void *arg)
{
	struct api_job *j = arg;
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(j->h, j->sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(j->msg, sizeof(j->msg), "reading CUPTI_ACTIVITY_KIND_RUNTIME: %s",
			 sqlite3_errmsg(j->h));
		j->rc = KP_EDB;
		return NULL;
	}
	sqlite3_bind_int64(st, 1, j->run);
	while (j->n < j->cap && sqlite3_step(st) == SQLITE_ROW) {
		struct lrow *l = &j->rows[j->n++];
		l->start = sqlite3_column_int64(st, 0);
		l->end = sqlite3_column_int64(st, 1);
		l->corr = (uint32_t)sqlite3_column_int64(st, 2);
		l->name = (uint32_t)sqlite3_column_int64(st, 3);
		l->tid = sqlite3_column_int64(st, 4);
	}
	sqlite3_finalize(st);
	return NULL;
}

static int api_start(struct kp__ana *a, struct api_job *j, pthread_t *th, int *threaded,
		     struct kp_err *err)
{
	int64_t n = count_rows(a, "CUPTI_ACTIVITY_KIND_RUNTIME");

	memset(j, 0, sizeof(*j));
	*threaded = 0;
	a->sum->n_api = n;
	if (!n)
		return 0;
	snprintf(j->sql, sizeof(j->sql), "SELECT start, end, correlationId, nameId,"
		 " COALESCE(globalTid, 0)"
		 " FROM CUPTI_ACTIVITY_KIND_RUNTIME%s WHERE runId = ?1",
		 scan_hint(a, "CUPTI_ACTIVITY_KIND_RUNTIME", n));
	j->run = a->run;
	j->cap = (size_t)n;
	j->rows = malloc((size_t)n * sizeof(*j->rows));
	if (!j->rows)
		return kp_err_set(err, KP_ENOMEM, "out of memory for %lld api rows", (long long)n);
	j->h = a->db->h;
	if (n >= 100000 && sqlite3_open_v2(a->db->path, &j->h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		j->own = 1;
		sqlite3_busy_timeout(j->h, 30000);
		if (pthread_create(th, NULL, api_fetch, j) == 0) {
			*threaded = 1;
			return 0;
		}
		sqlite3_close(j->h);
		j->own = 0;
	} else if (n >= 100000) {
		sqlite3_close(j->h);   /* a failed open still allocates a handle */
	}
	j->h = a->db->h;
	return 0;
}

/* Classify fetched calls: launch calls stay in rows, blocking ones become events. */
static int api_classify(struct kp__ana *a, struct api_job *j, size_t *n_l, struct kp_err *err)
{
	KP_VEC(struct kp__ev) ev = KP_VEC_INIT;
	KP_VEC(int64_t) rec = KP_VEC_INIT, hostfn = KP_VEC_INIT, poll_tid = KP_VEC_INIT;
	struct kp_u64map launchers;   /* threads that made launch calls */
	int64_t last_id = -1;
	uint32_t last_ix = 0;
	int rc = 0;

	*n_l = 0;
	if (j->rc)
		return kp_err_set(err, j->rc, "%s: %s", a->db->path, j->msg);
	kp_u64map_init(&launchers);
	for (size_t i = 0; i < j->n; i++) {
		struct lrow l = j->rows[i];
		uint32_t ix;
		int cls, kind;

		if ((int64_t)l.name == last_id) {
			ix = last_ix;
		} else {
			rc = kp__name_get(a, (int64_t)l.name, &ix, err);
			if (rc)
				break;
			last_id = (int64_t)l.name;
			last_ix = ix;
		}
		cls = a->names.data[ix].cls;
		if (cls == KP__C_LAUNCH || cls == KP__C_MEMSET || cls == KP__C_COPY_ASYNC ||
		    cls == KP__C_COPY_SYNC || cls == KP__C_GRAPH_LAUNCH) {
			l.name = ix;
			j->rows[(*n_l)++] = l;
			if (kp_u64map_put(&launchers, (uint64_t)l.tid, 1)) {
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
		}
		if ((cls == KP__C_EVENT_RECORD && kp_vec_push(&rec, l.start)) ||
		    (cls == KP__C_HOST_NODE && kp_vec_push(&hostfn, l.start))) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
		if ((kind = kp__api_blocker(cls)) >= 0) {
			struct kp__ev e = {
				.start = l.start, .end = l.end, .corr = l.corr,
				.name = ix, .kind = (uint8_t)kind,
				.stream_id = -1,
			};
			if (kp_vec_push(&ev, e) ||
			    kp_vec_push(&poll_tid, cls == KP__C_POLL ? l.tid : INT64_MIN)) {
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
		}
	}
	/*
	 * A query polls: it waits for nothing, and only the thread whose work
	 * it asks about can be stopped from capturing by it. A thread that
	 * launches nothing (PyTorch's NCCL watchdog, NCCL's proxy thread)
	 * polling an event is no sync of the launching thread.
	 */
	if (!rc && (launchers.len || launchers.has_zero)) {
		size_t k = 0;
		uint32_t one;

		for (size_t i = 0; i < ev.len; i++) {
			if (poll_tid.data[i] != INT64_MIN &&
			    !kp_u64map_get(&launchers, (uint64_t)poll_tid.data[i], &one)) {
				a->sum->n_other_polls++;
				continue;
			}
			ev.data[k++] = ev.data[i];
		}
		ev.len = k;
	}
	kp_vec_release(&poll_tid);
	kp_u64map_release(&launchers);
	a->ev = ev.data;
	a->n_ev = ev.len;
	a->rec = rec.data;
	a->n_rec = rec.len;
	a->hostfn = hostfn.data;
	a->n_hostfn = hostfn.len;
	return rc;
}

/*
 * The stream each cudaStreamWaitEvent made wait (the collector's
 * STREAM_WAIT_EVENT synchronization rows, joined by correlation id): what
 * tells a fork or join from a wait on someone else's event. Traces without
 * such rows keep stream_id -1.
 */
static int wait_streams(struct kp__ana *a, struct kp_err *err)
{
	static const char sql[] = "SELECT correlationId, streamId FROM "
		"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE runId = ?1 AND syncType = 2 "
		"AND correlationId IS NOT NULL AND streamId IS NOT NULL";
	struct kp_u64map m;
	sqlite3_stmt *st;
	size_t i;
	int rc;

	if (!kp_db_has_table(a->db, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"))
		return 0;
	if ((rc = kp_db_prepare(a->db, sql, &st, err)))
		return rc;
	kp_u64map_init(&m);
	sqlite3_bind_int64(st, 1, a->run);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t s = sqlite3_column_int64(st, 1);

		if (s < 0 || s > INT32_MAX)
			continue;
		if (kp_u64map_put(&m, (uint64_t)sqlite3_column_int64(st, 0), (uint32_t)s)) {
			sqlite3_finalize(st);
			kp_u64map_release(&m);
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		}
		a->wait_streams = 1;
	}
	sqlite3_finalize(st);
	for (i = 0; i < a->n_ev && a->wait_streams; i++) {
		uint32_t s;

		if (a->ev[i].kind == KP__B_CROSS_STREAM_EVENT &&
		    kp_u64map_get(&m, a->ev[i].corr, &s))
			a->ev[i].stream_id = (int32_t)s;
	}
	kp_u64map_release(&m);
	return 0;
}

static int cmp_t(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

static int cmp_ev(const void *x, const void *y)
{
	const struct kp__ev *a = x, *b = y;
	return (a->start > b->start) - (a->start < b->start);
}

/*
 * Join op to launch call l (index li of the rows). A graph launch's call
 * is joined by every op its graph ran: hit[li] counts the call once, and
 * the op is marked as launched from a graph.
 */
static void join_one(struct kp__ana *a, struct kp__op *op, const struct lrow *l, size_t li,
		     uint8_t *hit)
{
	int64_t d = l->end - l->start;

	op->api_start = l->start;
	op->api_dur = d > INT32_MAX ? INT32_MAX : (int32_t)(d < 0 ? 0 : d);
	op->api_name = l->name;
	op->has_api = 1;
	if (a->names.data[l->name].cls == KP__C_GRAPH_LAUNCH)
		op->flags |= KP__F_GRAPH;
	if (!hit[li]) {
		hit[li] = 1;
		a->sum->n_joined++;
		a->sum->n_graph_launches += a->names.data[l->name].cls == KP__C_GRAPH_LAUNCH;
	}
}

/*
 * Join ops to launch calls by correlation id: a direct index when the ids
 * are dense (CUPTI numbers every call of the process, so they usually are),
 * else two radix sorts and a merge. A call recorded twice under one id (a
 * runtime call and the driver call it made) is one launch call: the
 * summary counts distinct ids, launched and joined.
 */
static int join(struct kp__ana *a, const struct lrow *lrows, size_t n_l,
		struct kp_err *err)
{
	size_t n = a->n_ops, i, j = 0;
	uint32_t lo = UINT32_MAX, hi = 0;
	uint8_t *hit;

	if (!n_l)
		return 0;
	if (!(hit = calloc(n_l, 1)))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	for (i = 0; i < n_l; i++) {
		if (lrows[i].corr < lo)
			lo = lrows[i].corr;
		if (lrows[i].corr > hi)
			hi = lrows[i].corr;
	}
	if ((uint64_t)(hi - lo) <= 2 * (uint64_t)(n + n_l) + 4096) {
		size_t range = (size_t)(hi - lo) + 1;
		uint32_t *map = malloc(range * sizeof(*map));
		if (!map) {
			free(hit);
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		}
		memset(map, 0xff, range * sizeof(*map));
		for (i = 0; i < n_l; i++) {
			a->sum->n_launch_calls += map[lrows[i].corr - lo] == UINT32_MAX;
			map[lrows[i].corr - lo] = (uint32_t)i;
		}
		for (i = 0; i < n; i++) {
			struct kp__op *op = &a->ops[i];
			uint32_t li;

			if (op->corr && op->corr >= lo && op->corr <= hi &&
			    (li = map[op->corr - lo]) != UINT32_MAX)
				join_one(a, op, &lrows[li], li, hit);
		}
		free(map);
		free(hit);
		return 0;
	}
	struct kp__kv *okv = malloc(n * sizeof(*okv));
	struct kp__kv *lkv = malloc(n_l * sizeof(*lkv));
	struct kp__kv *tmp = malloc((n > n_l ? n : n_l) * sizeof(*tmp));
	if (!okv || !lkv || !tmp) {
		free(okv);
		free(lkv);
		free(tmp);
		free(hit);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	for (i = 0; i < n; i++) {
		okv[i].key = a->ops[i].corr;
		okv[i].idx = (uint32_t)i;
	}
	for (i = 0; i < n_l; i++) {
		lkv[i].key = lrows[i].corr;
		lkv[i].idx = (uint32_t)i;
	}
	kp__radix_sort(okv, tmp, n);
	kp__radix_sort(lkv, tmp, n_l);
	for (i = 0; i < n_l; i++)
		a->sum->n_launch_calls += !i || lkv[i].key != lkv[i - 1].key;
	for (i = 0; i < n; i++) {
		uint64_t c = okv[i].key;

		if (c == 0)
			continue;
		while (j < n_l && lkv[j].key < c)
			j++;
		if (j < n_l && lkv[j].key == c)
			join_one(a, &a->ops[okv[i].idx], &lrows[lkv[j].idx], lkv[j].idx, hit);
	}
	free(okv);
	free(lkv);
	free(tmp);
	free(hit);
	return 0;
}

/* Per-stream order, CPU order, gaps and run totals. */
static int timeline(struct kp__ana *a, struct kp_err *err)
{
	size_t n = a->n_ops, i;
	struct kp__kv *kv = malloc(n * sizeof(*kv));
	struct kp__kv *tmp = malloc(n * sizeof(*tmp));
	int64_t *q = NULL, *l = NULL, t_max = INT64_MIN;
	size_t nq = 0;
	int rc = 0;

	a->ord = malloc(n * sizeof(*a->ord));
	a->by_cpu = malloc(n * sizeof(*a->by_cpu));
	if (!kv || !tmp || !a->ord || !a->by_cpu) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	a->t_min = INT64_MAX;
	for (i = 0; i < n; i++) {
		struct kp__op *op = &a->ops[i];
		if (!op->has_api)
			op->api_start = op->start;
		if (op->api_start < a->t_min)
			a->t_min = op->api_start;
		if (op->start < a->t_min)
			a->t_min = op->start;
		if (op->end > t_max)
			t_max = op->end;
	}
	for (i = 0; i < n; i++) {
		uint64_t t = (uint64_t)(a->ops[i].start - a->t_min);
		if (t >= (1ULL << 44))
			t = (1ULL << 44) - 1;
		kv[i].key = ((uint64_t)a->ops[i].stream << 44) | t;
		kv[i].idx = (uint32_t)i;
	}
	kp__radix_sort(kv, tmp, n);
	for (i = 0; i < n; i++)
		a->ord[i] = kv[i].idx;
	for (i = 0; i < n; i++) {
		kv[i].key = (uint64_t)(a->ops[i].api_start - a->t_min);
		kv[i].idx = (uint32_t)i;
	}
	kp__radix_sort(kv, tmp, n);
	for (i = 0; i < n; i++)
		a->by_cpu[i] = kv[i].idx;

	/* stream slices and gaps */
	for (size_t s = 0; s < a->streams.len; s++)
		a->streams.data[s].beg = a->streams.data[s].end = 0;
	q = malloc(n * sizeof(*q));
	l = malloc(n * sizeof(*l));
	if (!q || !l) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	struct kp_analysis_summary *sum = a->sum;
	int64_t prev_end = 0;
	uint32_t prev_stream = UINT32_MAX;
	for (i = 0; i < n; i++) {
		struct kp__op *op = &a->ops[a->ord[i]];
		if (op->stream != prev_stream) {
			if (prev_stream != UINT32_MAX)
				a->streams.data[prev_stream].end = (uint32_t)i;
			a->streams.data[op->stream].beg = (uint32_t)i;
			prev_stream = op->stream;
			op->gap = -1;
			op->host_bound = 0;
			prev_end = op->end;
		} else {
			int64_t g = op->start - prev_end;
			op->gap = g > 0 ? g : 0;
			op->host_bound = op->has_api && op->api_start > prev_end;
			if (op->host_bound)
				sum->host_idle_ns += op->gap;
			else
				sum->device_idle_ns += op->gap;
			if (op->end > prev_end)
				prev_end = op->end;
		}
		sum->busy_ns += op->end - op->start;
		if (op->kind == KP__OP_KERNEL)
			sum->n_kernels++;
		else
			sum->n_memops++;
		if (op->has_api) {
			q[nq] = op->start - op->api_start;
			l[nq++] = op->api_dur;
		}
	}
	if (prev_stream != UINT32_MAX)
		a->streams.data[prev_stream].end = (uint32_t)n;
	sum->n_ops = (int64_t)n;
	sum->n_streams = (int64_t)a->streams.len;
	sum->span_ns = t_max - a->t_min;
	kp__dist(q, nq, &sum->queue);
	kp__dist(l, nq, &sum->launch_api);
out:
	free(kv);
	free(tmp);
	free(q);
	free(l);
	return rc;
}

int kp__load(struct kp__ana *a, struct kp_err *err)
{
	struct api_job j;
	pthread_t th;
	size_t n_l = 0;
	int threaded = 0, rc;

	rc = api_start(a, &j, &th, &threaded, err);
	if (!rc)
		rc = load_ops(a, err);
	if (threaded)
		pthread_join(th, NULL);
	else if (!rc && j.rows)
		api_fetch(&j);
	if (j.own)
		sqlite3_close(j.h);
	if (!rc)
		rc = api_classify(a, &j, &n_l, err);
	if (!rc)
		rc = join(a, j.rows, n_l, err);
	free(j.rows);
	if (rc)
		return rc;
	/* pageable copies are blockers at their launch call; a graph's own
	 * copy nodes are not (the graph holds them: the call is cudaGraphLaunch) */
	size_t ev_cap = a->n_ev;
	for (size_t i = 0; i < a->n_ops; i++) {
		struct kp__op *op = &a->ops[i];
		struct kp__ev e;

		a->sum->n_graph_ops += (op->flags & KP__F_GRAPH) != 0;
		a->sum->n_collectives += a->sigs.data[op->sig].coll != 0;
		if (!(op->flags & KP__F_PAGEABLE) || (op->flags & KP__F_GRAPH))
			continue;
		memset(&e, 0, sizeof(e));
		e.stream_id = -1;
		e.start = op->has_api ? op->api_start : op->start;
		e.end = op->end;
		e.corr = op->corr;
		e.name = op->api_name;
		e.kind = KP__B_PAGEABLE_COPY;
		if (a->n_ev == ev_cap) {
			ev_cap = ev_cap ? ev_cap * 2 : 64;
			struct kp__ev *ne = realloc(a->ev, ev_cap * sizeof(*ne));
			if (!ne)
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			a->ev = ne;
		}
		a->ev[a->n_ev++] = e;
	}
	if ((rc = wait_streams(a, err)))
		return rc;
	if (a->n_ev)
		qsort(a->ev, a->n_ev, sizeof(*a->ev), cmp_ev);
	if (a->n_rec)
		qsort(a->rec, a->n_rec, sizeof(*a->rec), cmp_t);
	if (a->n_hostfn)
		qsort(a->hostfn, a->n_hostfn, sizeof(*a->hostfn), cmp_t);
	return timeline(a, err);
}

static int cmp_arg(const void *x, const void *y)
{
	const struct kp__arg *a = x, *b = y;
	if (a->corr != b->corr)
		return (a->corr > b->corr) - (a->corr < b->corr);
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/*
 * A run's rows of a side table: *buf gets room for all of them (n elements
 * of elem bytes) and *st the query, bound to the run. *n = 0 (and nothing
 * else) when the table is missing or has none for the run.
 */
static int run_rows(struct kp__ana *a, const char *table, const char *sql, size_t elem,
		    void **buf, int64_t *n, sqlite3_stmt **st, struct kp_err *err)
{
	int rc;

	*buf = NULL;
	*n = count_rows(a, table);
	if (!*n)
		return 0;
	*buf = malloc((size_t)*n * elem);
	if (!*buf)
		return kp_err_set(err, KP_ENOMEM, "out of memory for %s", table);
	rc = kp_db_prepare(a->db, sql, st, err);
	if (rc) {
		free(*buf);
		*buf = NULL;
		*n = 0;
		return rc;
	}
	sqlite3_bind_int64(*st, 1, a->run);
	return 0;
}

int kp__load_args(struct kp__ana *a, struct kp_err *err)
{
	static const char sql[] = "SELECT correlationId, argIndex, size, value"
		" FROM kp_launch_args WHERE runId = ?1";
	sqlite3_stmt *st = NULL;
	int64_t n;
	int sorted = 1, rc;

	rc = run_rows(a, "kp_launch_args", sql, sizeof(*a->args), (void **)&a->args, &n, &st, err);
	if (rc || !n)
		return rc;
	while (sqlite3_step(st) == SQLITE_ROW && a->n_args < (size_t)n) {
		struct kp__arg *g = &a->args[a->n_args++];
		g->corr = (uint32_t)sqlite3_column_int64(st, 0);
		g->idx = (uint16_t)sqlite3_column_int(st, 1);
		g->size = (uint16_t)sqlite3_column_int(st, 2);
		g->value = sqlite3_column_int64(st, 3);
		if (a->n_args > 1 && cmp_arg(g - 1, g) > 0)
			sorted = 0;
	}
	sqlite3_finalize(st);
	if (!sorted)
		qsort(a->args, a->n_args, sizeof(*a->args), cmp_arg);
	return 0;
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return (a > b) - (a < b);
}

/* Kernels launched with programmatic dependent launch (kp_launch_attrs,
 * schema v2; none in older databases or imported traces): KP__F_PDL. */
int kp__load_attrs(struct kp__ana *a, struct kp_err *err)
{
	static const char sql[] = "SELECT correlationId FROM kp_launch_attrs"
		" WHERE runId = ?1 AND pdl != 0";
	uint32_t *corr;
	size_t m = 0, i;
	sqlite3_stmt *st = NULL;
	int64_t n;
	int rc;

	rc = run_rows(a, "kp_launch_attrs", sql, sizeof(*corr), (void **)&corr, &n, &st, err);
	if (rc || !n)
		return rc;
	while (sqlite3_step(st) == SQLITE_ROW && m < (size_t)n)
		corr[m++] = (uint32_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	qsort(corr, m, sizeof(*corr), cmp_u32);
	for (i = 0; m && i < a->n_ops; i++) {
		struct kp__op *op = &a->ops[i];

		if (op->kind == KP__OP_KERNEL && op->corr &&
		    bsearch(&op->corr, corr, m, sizeof(*corr), cmp_u32)) {
			op->flags |= KP__F_PDL;
			a->sum->n_pdl++;
		}
	}
	free(corr);
	return 0;
}
