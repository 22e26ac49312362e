/*
 * timeline.c - the timeline window of the report: which stretch of the run
 * to draw, and per stream its kernels and the gaps between them, each gap
 * told host-bound (the launch call began after the previous kernel ended:
 * the GPU waited for the CPU) or device-side. The classification is made
 * here from the trace, with the analyzer's definition, so the strip also
 * works on a database that has not been analyzed.
 */
#include "report_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"

#define DEF(v, d) ((v) > 0 ? (v) : (d))

/*
 * Choose the window: the middle occurrence of the
 * region with the most total time when regions exist, otherwise a stretch
 * of about timeline_kernels kernels from the middle of the run.
 */
static int choose_window(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	sqlite3_stmt *st;
	int64_t want = DEF(rep->opts.timeline_kernels, 400), t0, t1, mid, w;
	char what[320];
	int rc;

	if (rep->regions.len) {
		const struct kp_rep_region *r = &rep->regions.data[0];

		rc = kp_db_prepare(db,
			"SELECT start, end, occIndex FROM kp_region_occurrences"
			" WHERE runId = ?1 AND regionId = ?2 ORDER BY occIndex LIMIT 1 OFFSET ?3",
			&st, err);
		if (rc)
			return rc;
		sqlite3_bind_int64(st, 1, rep->run_id);
		sqlite3_bind_int64(st, 2, r->id);
		sqlite3_bind_int64(st, 3, r->occurrences / 2);
		if (sqlite3_step(st) == SQLITE_ROW) {
			t0 = sqlite3_column_int64(st, 0);
			t1 = sqlite3_column_int64(st, 1);
			w = (t1 - t0) / 50;
			rep->tl_begin = t0 - w;
			rep->tl_end = t1 + w;
			snprintf(what, sizeof(what), "occurrence %lld of %lld of region %lld",
				 (long long)sqlite3_column_int64(st, 2) + 1,
				 (long long)r->occurrences, (long long)r->id);
			rep->tl_what = kp_arena_strdup(&rep->arena, what);
		}
		sqlite3_finalize(st);
		if (rep->tl_what)
			return 0;
	}
	if (!rep->n_kernels)
		return 0;
	rc = kp_db_prepare(db, "SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL"
			   " WHERE runId = ?1", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, rep->run_id);
	t0 = t1 = 0;
	if (sqlite3_step(st) == SQLITE_ROW) {
		t0 = sqlite3_column_int64(st, 0);
		t1 = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	mid = t0 + (t1 - t0) / 2;
	/* about want kernels at the run's average rate, started mid-run */
	w = (int64_t)((double)(t1 - t0) * want / (double)rep->n_kernels);
	if (w <= 0 || w > t1 - t0) {
		rep->tl_begin = t0;
		rep->tl_end = t1;
		rep->tl_what = "the whole run";
	} else {
		rep->tl_begin = mid - w / 2;
		rep->tl_end = mid + w / 2;
		rep->tl_what = "a stretch from the middle of the run (no regions to pick from)";
	}
	return 0;
}

static int by_kernels_desc(const void *a, const void *b)
{
	const struct kp_tl_stream *x = a, *y = b;

	if (x->n_kernels != y->n_kernels)
		return x->n_kernels < y->n_kernels ? 1 : -1;
	if (x->device_id != y->device_id)
		return x->device_id < y->device_id ? -1 : 1;
	return x->stream_id < y->stream_id ? -1 : x->stream_id > y->stream_id;
}

/*
 * Launch call start per correlation id (the earliest API record with it),
 * read once per report in one sequential pass: a lookup per GPU op through
 * SQL (a correlated subquery) cost three times as much on a 1M-kernel run.
 * Open addressing on the 32-bit id; slot key 0 is empty, so ids are stored
 * plus one.
 */
struct corr_map {
	uint64_t *keys;
	int64_t *start;
	size_t mask;
};

static void corr_free(struct corr_map *m)
{
	free(m->keys);
	free(m->start);
	memset(m, 0, sizeof(*m));
}

static int corr_load(struct kp_db *db, struct kp_report *rep, struct corr_map *m,
		     struct kp_err *err)
{
	sqlite3_stmt *st;
	size_t cap = 1024, i;
	int64_t n = rep->n_api;
	int rc;

	while ((int64_t)cap < 2 * n)
		cap <<= 1;
	m->keys = calloc(cap, sizeof(*m->keys));
	m->start = malloc(cap * sizeof(*m->start));
	m->mask = cap - 1;
	if (!m->keys || !m->start) {
		corr_free(m);
		return kp_err_set(err, KP_ENOMEM, "out of memory for %lld launch calls", (long long)n);
	}
	rc = kp_db_prepare(db, "SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"
			   " WHERE runId = ?1 AND correlationId IS NOT NULL", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, rep->run_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t key = (uint64_t)sqlite3_column_int64(st, 0) + 1;
		int64_t start = sqlite3_column_int64(st, 1);

		for (i = kp_hash_mix(0, key) & m->mask; m->keys[i] && m->keys[i] != key;
		     i = (i + 1) & m->mask)
			;
		if (!m->keys[i]) {
			m->keys[i] = key;
			m->start[i] = start;
		} else if (start < m->start[i]) {
			m->start[i] = start;
		}
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return kp_db_error(db, err, "reading launch calls");
	return 0;
}

/* Launch call start of corr, -1 when none. */
static int64_t corr_get(const struct corr_map *m, int64_t corr)
{
	uint64_t key = (uint64_t)corr + 1;
	size_t i;

	if (!m->keys)
		return -1;
	for (i = kp_hash_mix(0, key) & m->mask; m->keys[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key)
			return m->start[i];
	return -1;
}

/*
 * GPU ops (kernels, memcpys, memsets) overlapping [?2, ?3), each table in
 * (device, stream, start) order; kernels through the (runId, deviceId,
 * streamId, start) index, so the big table is never sorted. The three are
 * merged in C. Kernel rows carry their short name id; copies -1, memsets -2.
 */
static const char *const sql_ops[] = {
	"SELECT deviceId, streamId, start, end, shortName, correlationId"
	" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1 AND start < ?3 AND end > ?2"
	" ORDER BY deviceId, streamId, start",
	"SELECT deviceId, streamId, start, end, -1, correlationId"
	" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE runId = ?1 AND start < ?3 AND end > ?2"
	" ORDER BY deviceId, streamId, start",
	"SELECT deviceId, streamId, start, end, -2, correlationId"
	" FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE runId = ?1 AND start < ?3 AND end > ?2"
	" ORDER BY deviceId, streamId, start",
};
#define N_OPS_SQL 3

struct scan_op {
	int64_t dev, sid, start, end, name_id, api_start;  /* api_start -1: none */
	int64_t gap_ns;      /* idle before this op on its stream; 0 for the first */
	int gap_kind;        /* enum kp_tl_kind of that gap */
	int first;           /* first op of its stream in the scan */
};

struct cursor {
	sqlite3_stmt *st;
	int live;            /* st is on a row */
	int64_t dev, sid, start;
};

static int cursor_next(struct cursor *c)
{
	int rc = sqlite3_step(c->st);

	c->live = rc == SQLITE_ROW;
	if (c->live) {
		c->dev = sqlite3_column_int64(c->st, 0);
		c->sid = sqlite3_column_int64(c->st, 1);
		c->start = sqlite3_column_int64(c->st, 2);
		return 0;
	}
	return rc == SQLITE_DONE ? 0 : -1;
}

static int before(const struct cursor *a, const struct cursor *b)
{
	if (a->dev != b->dev)
		return a->dev < b->dev;
	if (a->sid != b->sid)
		return a->sid < b->sid;
	return a->start < b->start;
}

/* Walk the ops of [t0, t1) in stream order and classify the gap before each. */
static int scan_ops(struct kp_db *db, struct kp_report *rep, int64_t t0, int64_t t1,
		    int (*fn)(struct kp_report *rep, const struct scan_op *op, void *arg),
		    void *arg, struct kp_err *err)
{
	struct cursor cur[N_OPS_SQL] = {{0}};
	struct scan_op op = { .dev = -1, .sid = -1 };
	struct corr_map *corr = rep->corr;
	int64_t prev_end = 0;
	int i, rc = 0;

	for (i = 0; i < N_OPS_SQL && !rc; i++) {
		rc = kp_db_prepare(db, sql_ops[i], &cur[i].st, err);
		if (rc)
			break;
		sqlite3_bind_int64(cur[i].st, 1, rep->run_id);
		sqlite3_bind_int64(cur[i].st, 2, t0);
		sqlite3_bind_int64(cur[i].st, 3, t1);
		if (cursor_next(&cur[i]))
			rc = kp_db_error(db, err, "reading the GPU ops of the run");
	}
	while (!rc) {
		struct cursor *c = NULL;
		sqlite3_stmt *st;

		for (i = 0; i < N_OPS_SQL; i++)
			if (cur[i].live && (!c || before(&cur[i], c)))
				c = &cur[i];
		if (!c)
			break;
		st = c->st;
		op.first = c->dev != op.dev || c->sid != op.sid;
		op.dev = c->dev;
		op.sid = c->sid;
		op.start = c->start;
		op.end = sqlite3_column_int64(st, 3);
		op.name_id = sqlite3_column_int64(st, 4);
		op.api_start = sqlite3_column_type(st, 5) == SQLITE_NULL ? -1
			       : corr_get(corr, sqlite3_column_int64(st, 5));
		op.gap_ns = 0;
		op.gap_kind = KP_TL_DEVICE_GAP;
		if (!op.first && op.start > prev_end) {
			op.gap_ns = op.start - prev_end;
			if (op.api_start < 0)
				op.gap_kind = KP_TL_UNKNOWN_GAP;
			else
				op.gap_kind = op.api_start > prev_end ? KP_TL_HOST_GAP : KP_TL_DEVICE_GAP;
		}
		if (op.first || op.end > prev_end)
			prev_end = op.end;
		if ((rc = fn(rep, &op, arg))) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory reading GPU ops");
			break;
		}
		if (cursor_next(c))
			rc = kp_db_error(db, err, "reading the GPU ops of the run");
	}
	for (i = 0; i < N_OPS_SQL; i++)
		sqlite3_finalize(cur[i].st);
	return rc;
}

struct span_state {
	int64_t first_start, last_end;
};

static int add_gap_totals(struct kp_report *rep, const struct scan_op *op, void *arg)
{
	struct span_state *sp = arg;

	if (op->first) {
		if (rep->n_ops)
			rep->stream_span_ns += sp->last_end - sp->first_start;
		sp->first_start = op->start;
		sp->last_end = op->end;
	} else if (op->end > sp->last_end) {
		sp->last_end = op->end;
	}
	rep->n_ops++;
	if (op->gap_kind == KP_TL_HOST_GAP) {
		rep->host_gap_ns += op->gap_ns;
		rep->n_host_gaps++;
	} else if (op->gap_kind == KP_TL_UNKNOWN_GAP) {
		rep->unknown_gap_ns += op->gap_ns;
	} else {
		rep->device_gap_ns += op->gap_ns;
	}
	return 0;
}

/*
 * The whole run's host-bound / device-side idle time and the summed stream
 * spans (first op start to last op end per stream), from the trace.
 */
int kp__report_gap_totals(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct span_state sp = {0};
	int rc;

	if (!rep->corr) {
		rep->corr = calloc(1, sizeof(struct corr_map));
		if (!rep->corr)
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		if ((rc = corr_load(db, rep, rep->corr, err)))
			return rc;
	}
	rep->stream_span_ns = 0;
	rc = scan_ops(db, rep, INT64_MIN, INT64_MAX, add_gap_totals, &sp, err);
	if (!rc && rep->n_ops)
		rep->stream_span_ns += sp.last_end - sp.first_start;
	return rc;
}

struct tl_state {
	struct kp_tl_stream *s;
	int64_t cap;
	sqlite3_stmt *name;
};

static int add_tl_op(struct kp_report *rep, const struct scan_op *op, void *arg)
{
	struct tl_state *ts = arg;
	struct kp_tl_item k = { .start = op->start, .end = op->end, .kind = KP_TL_KERNEL };

	if (op->first) {
		struct kp_tl_stream s = { .device_id = op->dev, .stream_id = op->sid };

		if (kp_vec_push(&rep->streams, s))
			return KP_ENOMEM;
		ts->s = &rep->streams.data[rep->streams.len - 1];
	}
	ts->s->n_kernels++;
	if (ts->s->n_kernels > ts->cap) {
		rep->tl_capped = 1;
		return 0;
	}
	if (op->gap_ns > 0) {
		struct kp_tl_item g = { .start = op->start - op->gap_ns, .end = op->start,
					.kind = op->gap_kind };

		if (kp_vec_push(&ts->s->items, g))
			return KP_ENOMEM;
	}
	if (op->name_id == -1) {
		k.name = "[memcpy]";
	} else if (op->name_id == -2) {
		k.name = "[memset]";
	} else {
		sqlite3_reset(ts->name);
		sqlite3_bind_int64(ts->name, 1, op->name_id);
		if (sqlite3_step(ts->name) == SQLITE_ROW && sqlite3_column_text(ts->name, 0))
			k.name = kp_arena_strdup(&rep->arena, (const char *)sqlite3_column_text(ts->name, 0));
	}
	return kp_vec_push(&ts->s->items, k) ? KP_ENOMEM : 0;
}

int kp__report_timeline(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct tl_state ts = { .cap = DEF(rep->opts.timeline_kernels, 400) * 2 };
	int64_t max_streams = DEF(rep->opts.max_streams, 8);
	size_t i;
	int rc;

	if ((rc = choose_window(db, rep, err)) || !rep->tl_what)
		return rc;
	rc = kp_db_prepare(db, "SELECT value FROM StringIds WHERE id = ?1", &ts.name, err);
	if (rc)
		return rc;
	rc = scan_ops(db, rep, rep->tl_begin, rep->tl_end, add_tl_op, &ts, err);
	sqlite3_finalize(ts.name);
	if (rc)
		return rc;
	/* keep the busiest streams (a window with no GPU work has none: no
	 * qsort of a NULL array) */
	if (rep->streams.len)
		qsort(rep->streams.data, rep->streams.len, sizeof(*rep->streams.data),
		      by_kernels_desc);
	for (i = (size_t)max_streams; i < rep->streams.len; i++)
		kp_vec_release(&rep->streams.data[i].items);
	if (rep->streams.len > (size_t)max_streams)
		rep->streams.len = (size_t)max_streams;
	return 0;
}

void kp__report_corr_free(struct kp_report *rep)
{
	if (rep->corr) {
		corr_free(rep->corr);
		free(rep->corr);
		rep->corr = NULL;
	}
}
