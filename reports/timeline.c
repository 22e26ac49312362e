/*
 * timeline.c - the report's evidence from the trace itself: one pass over
 * every GPU op of the run (kernels, memcpys, memsets, in stream order)
 * that classifies the idle gap before each op as host-bound (the launch
 * call began after the previous op on the stream ended: the GPU waited for
 * the CPU) or device-side, as the analyzer does, so it also works on a
 * database that was not analyzed. The same pass fills the whole run's
 * timeline (per stream, bins of time at a few zoom levels plus the
 * intervals of a few detail windows), the distribution of gaps, and each
 * region's kernels; the launch calls, NVTX ranges, CPU ops and region
 * occurrences get rows of their own from one iterator each. It reads the
 * database through db/read.h only.
 */
#include "report_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cuda_api.h"
#include "../common/hash.h"
#include "../common/kname.h"
#include "../common/u64map.h"
#include "../db/read.h"

#define DEF(v, d) ((v) > 0 ? (v) : (d))

/*
 * Choose the window: the middle occurrence of the
 * region with the most total time when regions exist, otherwise a stretch
 * of about timeline_kernels kernels from the middle of the run.
 */
static int choose_window(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	int64_t want = DEF(rep->opts.timeline_kernels, 400), t0, t1, mid, w;
	struct kp_db_extent ext;
	char what[320];
	int rc;

	if (rep->regions.len) {
		const struct kp_rep_region *r = &rep->regions.data[0];
		int64_t nth = r->occurrences / 2, seen = 0;
		struct kp_db_region_occ o;
		struct kp_db_rows *it;

		/* the nth occurrence of the region in occIndex order */
		if ((rc = kp_db_region_occs(db, rep->run_id, &it, err)))
			return rc;
		while ((rc = kp_db_region_occ_next(it, &o, err)) > 0) {
			if (o.region_id != r->id || seen++ < nth)
				continue;
			w = (o.end - o.start) / 50;
			rep->tl_begin = o.start - w;
			rep->tl_end = o.end + w;
			snprintf(what, sizeof(what), "occurrence %lld of %lld of region %lld",
				 (long long)o.occ_index + 1, (long long)r->occurrences,
				 (long long)r->id);
			rep->tl_what = kp_arena_strdup(&rep->arena, what);
			rc = 0;
			break;
		}
		kp_db_rows_close(it);
		if (rc < 0)
			return rc;
		if (rep->tl_what)
			return 0;
	}
	if (!rep->n_kernels)
		return 0;
	if ((rc = kp_db_extent(db, rep->run_id, KP_DB_EXTENT_KERNELS, &ext, err)))
		return rc;
	t0 = ext.start;
	t1 = ext.end;
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

/* The launch calls of run; n: about how many it has. */
static int corr_load(struct kp_db *db, int64_t run, int64_t n, struct corr_map *m,
		     struct kp_err *err)
{
	struct kp_db_rows *it;
	struct kp_db_api_corr c;
	size_t cap = 1024, i;
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
	if ((rc = kp_db_api_corrs(db, run, &it, err)))
		return rc;
	while ((rc = kp_db_api_corr_next(it, &c, err)) > 0) {
		uint64_t key = (uint64_t)c.correlation + 1;
		int64_t start = c.start;

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
	kp_db_rows_close(it);
	return rc < 0 ? rc : 0;
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
 * GPU ops (kernels, memcpys, memsets) overlapping [t0, t1), each table in
 * (device, stream, start) order (kp_db_stream_ops), merged here. Kernel ops
 * carry their name id; copies -1, memsets -2.
 */
#define N_OP_TABLES 3

struct scan_op {
	int64_t dev, sid, start, end, name_id, api_start;  /* api_start -1: none */
	int64_t gap_ns;      /* idle before this op on its stream; 0 for the first */
	int gap_kind;        /* enum kp_tl_kind of that gap */
	int first;           /* first op of its stream in the scan */
};

struct cursor {
	struct kp_db_rows *it;
	int live;            /* row holds the iterator's current op */
	struct kp_db_stream_op row;
};

static int cursor_next(struct cursor *c, struct kp_err *err)
{
	int rc = kp_db_stream_op_next(c->it, &c->row, err);

	c->live = rc > 0;
	return rc < 0 ? rc : 0;
}

static int before(const struct cursor *a, const struct cursor *b)
{
	if (a->row.device != b->row.device)
		return a->row.device < b->row.device;
	if (a->row.stream != b->row.stream)
		return a->row.stream < b->row.stream;
	return a->row.start < b->row.start;
}

/* Walk the ops of [t0, t1) in stream order and classify the gap before each. */
static int scan_ops(struct kp_db *db, struct kp_report *rep, int64_t run, struct corr_map *corr,
		    int64_t t0, int64_t t1,
		    int (*fn)(struct kp_report *rep, const struct scan_op *op, void *arg),
		    void *arg, struct kp_err *err)
{
	static const int64_t table_name_id[N_OP_TABLES] = { 0, -1, -2 };
	struct cursor cur[N_OP_TABLES] = {{0}};
	struct scan_op op = { .dev = -1, .sid = -1 };
	int64_t prev_end = 0;
	int i, rc = 0;

	for (i = 0; i < N_OP_TABLES && !rc; i++) {
		rc = kp_db_stream_ops(db, run, (enum kp_db_op_table)i, t0, t1, &cur[i].it, err);
		if (!rc)
			rc = cursor_next(&cur[i], err);
	}
	while (!rc) {
		struct cursor *c = NULL;

		for (i = 0; i < N_OP_TABLES; i++)
			if (cur[i].live && (!c || before(&cur[i], c)))
				c = &cur[i];
		if (!c)
			break;
		op.first = c->row.device != op.dev || c->row.stream != op.sid;
		op.dev = c->row.device;
		op.sid = c->row.stream;
		op.start = c->row.start;
		op.end = c->row.end;
		op.name_id = c == &cur[KP_DB_OPS_KERNELS] ? c->row.name_id
			     : table_name_id[c - cur];
		op.api_start = c->row.has_correlation ? corr_get(corr, c->row.correlation) : -1;
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
		rc = cursor_next(c, err);
	}
	for (i = 0; i < N_OP_TABLES; i++)
		kp_db_rows_close(cur[i].it);
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

/* ---- the whole run's timeline ---- */

/* A region occurrence, to find the regions a launch call falls in. */
struct occ {
	int64_t start, end, stream;        /* stream -1: any (annotated regions) */
	int32_t region, index;
};

#define MAX_STREAM_ROWS 32             /* streams accumulated; the busiest are drawn */
#define MAX_STRS 4000                  /* distinct NVTX texts and API names */
#define OCC_WALK 64                    /* earlier occurrences looked at per launch */

struct tl_build {
	struct kp_report *rep;
	struct kp_tl *tl;
	double bw;                         /* ns per bin of the finest level */
	struct occ *occ;
	int64_t *occ_maxend;               /* max end of occ[0..i] */
	size_t n_occ;
	struct kp_u64map kidx;             /* kernel name id -> index in rep->kernels */
	struct kp_u64map rk;               /* region << 32 | kernel -> index in rep->rkernels */
	struct kp_u64map srow;             /* device << 32 ^ stream -> row index */
	struct kp_strmap strs;             /* text -> index in tl->strs */
	int n_stream_rows;                 /* of the rank being scanned */
	int rank;                          /* the rank whose rows are being made; -1: no job */
	int64_t shift_ns;                  /* added to that rank's times: its clock to this run's */
	int64_t row_cap, total_cap, n_detail;
	struct span_state sp;
	int nvtx_row, cpu_row;             /* row index, -1: none yet */
};

static void row_release(struct kp_tl_row *r)
{
	free(r->ns);
	free(r->count);
	free(r->key);
	free(r->key_ns);
	kp_vec_release(&r->items);
	memset(r, 0, sizeof(*r));
}

/* A new empty row; its index, or -1 when out of memory. */
static int row_new(struct tl_build *tb, int kind, int64_t dev, int64_t sid)
{
	struct kp_tl_row r = { .kind = kind, .device_id = dev, .stream_id = sid, .rank = tb->rank };
	size_t n = (size_t)tb->tl->n_bins, i;

	r.ns = calloc(n * KP_TL_CLS, sizeof(*r.ns));
	r.count = calloc(n, sizeof(*r.count));
	r.key = malloc(n * sizeof(*r.key));
	r.key_ns = calloc(n, sizeof(*r.key_ns));
	if (!r.ns || !r.count || !r.key || !r.key_ns || kp_vec_push(&tb->tl->rows, r)) {
		row_release(&r);
		return -1;
	}
	for (i = 0; i < n; i++)
		r.key[i] = -1;
	return (int)tb->tl->rows.len - 1;
}

/* Start of finest bin b: the same integer for the same b, so overlaps add up exactly. */
static int64_t bin_edge(const struct tl_build *tb, int64_t b)
{
	return tb->tl->t0 + (int64_t)((double)b * tb->bw);
}

/*
 * Add [s, e) of class cls and key to the finest bins of row r; counted:
 * it is an interval of the row (a gap is not).
 */
static void bin_add(struct tl_build *tb, struct kp_tl_row *r, int64_t s, int64_t e, int cls,
		    int32_t key, int counted)
{
	const struct kp_tl *tl = tb->tl;
	int64_t b, n = tl->n_bins;

	if (s < tl->t0)
		s = tl->t0;
	if (e > tl->t1)
		e = tl->t1;
	if (e < s)
		return;
	b = (int64_t)((double)(s - tl->t0) / tb->bw);
	b = b < 0 ? 0 : b >= n ? n - 1 : b;
	while (b > 0 && bin_edge(tb, b) > s)
		b--;
	while (b + 1 < n && bin_edge(tb, b + 1) <= s)
		b++;
	if (counted)
		r->count[b]++;
	for (; b < n; b++) {
		int64_t lo = bin_edge(tb, b), hi = b + 1 < n ? bin_edge(tb, b + 1) : tl->t1;
		int64_t ov = (e < hi ? e : hi) - (s > lo ? s : lo);

		if (lo >= e)
			break;
		if (ov <= 0)
			continue;
		r->ns[b * KP_TL_CLS + cls] += ov;
		if (key < 0)
			continue;
		if (r->key[b] == key) {
			r->key_ns[b] += ov;
		} else if (ov > r->key_ns[b]) {
			r->key[b] = key;
			r->key_ns[b] = ov;
		}
	}
}

/* Keep [s, e) for drawing one by one when it meets a detail window. */
static int item_add(struct tl_build *tb, struct kp_tl_row *r, const struct kp_tl_item *it)
{
	const struct kp_tl *tl = tb->tl;
	size_t i;

	for (i = 0; i < tl->win.len; i += 2)
		if (it->start <= tl->win.data[i + 1] && it->end >= tl->win.data[i])
			break;
	if (i >= tl->win.len)
		return 0;
	if ((int64_t)r->items.len >= tb->row_cap || tb->n_detail >= tb->total_cap) {
		r->capped = 1;
		return 0;
	}
	tb->n_detail++;
	return kp_vec_push(&r->items, *it) ? KP_ENOMEM : 0;
}

/* Index of text in tl->strs (added when new; the last slot takes the overflow). */
static int32_t str_index(struct tl_build *tb, const char *text)
{
	int64_t v;
	const char *copy;

	if (!text)
		text = "";
	if (kp_strmap_get(&tb->strs, text, &v))
		return (int32_t)v;
	if (tb->tl->strs.len >= MAX_STRS)
		text = "(other names)";
	if (kp_strmap_get(&tb->strs, text, &v))
		return (int32_t)v;
	copy = kp_arena_strdup(&tb->rep->arena, text);
	if (!copy || kp_vec_push(&tb->tl->strs, copy) ||
	    kp_strmap_put(&tb->strs, text, (int64_t)tb->tl->strs.len - 1))
		return -1;
	return (int32_t)tb->tl->strs.len - 1;
}

static int by_start(const void *a, const void *b)
{
	const struct occ *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every occurrence of the report's regions, by start. */
static int occ_load(struct kp_db *db, struct tl_build *tb, struct kp_err *err)
{
	struct kp_report *rep = tb->rep;
	struct kp_u64map ridx;
	KP_VEC(struct occ) v = KP_VEC_INIT;
	struct kp_db_region_occ ro;
	struct kp_db_rows *it;
	uint32_t ix;
	size_t i;
	int rc;

	kp_u64map_init(&ridx);
	for (i = 0; i < rep->regions.len; i++)
		if (kp_u64map_put(&ridx, (uint64_t)rep->regions.data[i].id, (uint32_t)i))
			goto out_nomem;
	if ((rc = kp_db_region_occs(db, rep->run_id, &it, err))) {
		kp_u64map_release(&ridx);
		return rc;
	}
	while ((rc = kp_db_region_occ_next(it, &ro, err)) > 0) {
		struct occ o = { .index = (int32_t)ro.occ_index, .start = ro.start, .end = ro.end };

		if (!kp_u64map_get(&ridx, (uint64_t)ro.region_id, &ix))
			continue;
		o.region = (int32_t)ix;
		o.stream = rep->regions.data[ix].stream_id;
		if (o.index == rep->regions.data[ix].occurrences / 2) {
			rep->regions.data[ix].mid_start = o.start;
			rep->regions.data[ix].mid_end = o.end;
		}
		if (kp_vec_push(&v, o)) {
			kp_db_rows_close(it);
			goto out_nomem;
		}
	}
	kp_db_rows_close(it);
	kp_u64map_release(&ridx);
	if (rc < 0) {
		kp_vec_release(&v);
		return rc;
	}
	if (v.len)
		qsort(v.data, v.len, sizeof(*v.data), by_start);
	tb->occ = v.data;
	tb->n_occ = v.len;
	tb->occ_maxend = malloc((v.len ? v.len : 1) * sizeof(*tb->occ_maxend));
	if (!tb->occ_maxend)
		return kp_err_set(err, KP_ENOMEM, "out of memory for region occurrences");
	for (i = 0; i < v.len; i++)
		tb->occ_maxend[i] = i && tb->occ_maxend[i - 1] > v.data[i].end
				    ? tb->occ_maxend[i - 1] : v.data[i].end;
	return 0;
out_nomem:
	kp_u64map_release(&ridx);
	kp_vec_release(&v);
	return kp_err_set(err, KP_ENOMEM, "out of memory for region occurrences");
}

/*
 * The regions whose occurrences hold time t on stream sid, innermost
 * (latest start) first, at most 3 (the walk back stops at OCC_WALK
 * occurrences or where no earlier one reaches t). Returns how many.
 */
static int occ_find(const struct tl_build *tb, int64_t t, int64_t sid, int32_t out[3])
{
	size_t lo = 0, hi = tb->n_occ, steps = 0;
	int n = 0, j;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tb->occ[mid].start <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo > 0 && n < 3 && steps < OCC_WALK; lo--, steps++) {
		const struct occ *o = &tb->occ[lo - 1];

		if (tb->occ_maxend[lo - 1] < t)
			break;
		if (o->end < t || (o->stream >= 0 && o->stream != sid))
			continue;
		for (j = 0; j < n && out[j] != o->region; j++)
			;
		if (j == n)
			out[n++] = o->region;
	}
	return n;
}

static int gap_bucket(int64_t ns)
{
	int b = 0;
	int64_t us = ns / 1000;

	while (us > 0 && b < KP_GAP_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

/* A region's kernel: count it (region << 32 | kernel keys rep->rkernels). */
static int rk_add(struct tl_build *tb, int32_t region, int32_t kernel, int64_t ns)
{
	uint64_t key = (uint64_t)region << 32 | (uint32_t)kernel;
	uint32_t ix;

	if (!kp_u64map_get(&tb->rk, key, &ix)) {
		struct kp_rep_rkernel k = { .region = region, .kernel = kernel };

		if (kp_vec_push(&tb->rep->rkernels, k) ||
		    kp_u64map_put(&tb->rk, key, (uint32_t)tb->rep->rkernels.len - 1))
			return KP_ENOMEM;
		ix = (uint32_t)tb->rep->rkernels.len - 1;
	}
	tb->rep->rkernels.data[ix].count++;
	tb->rep->rkernels.data[ix].total_ns += ns;
	return 0;
}

/* Each GPU op of the run: idle totals, gap lengths, its stream's row, its regions. */
/* A stream row's key: the stream, and the rank whose stream it is. */
static uint64_t stream_key(const struct tl_build *tb, const struct scan_op *op)
{
	return ((uint64_t)op->dev << 32 ^ (uint64_t)op->sid) ^ ((uint64_t)(tb->rank + 1) << 56);
}

/* The stream row of op (made when new); NULL when the rank has its fill of rows. */
static struct kp_tl_row *stream_row(struct tl_build *tb, const struct scan_op *op, int *nomem)
{
	uint64_t skey = stream_key(tb, op);
	uint32_t row;
	int nr;

	*nomem = 0;
	if (!kp_u64map_get(&tb->srow, skey, &row)) {
		if (tb->n_stream_rows >= MAX_STREAM_ROWS)
			return NULL;
		nr = row_new(tb, KP_TL_ROW_STREAM, op->dev, op->sid);
		if (nr < 0 || kp_u64map_put(&tb->srow, skey, (uint32_t)nr)) {
			*nomem = 1;
			return NULL;
		}
		tb->n_stream_rows++;
		row = (uint32_t)nr;
	}
	return &tb->tl->rows.data[row];
}

/*
 * An op of another rank of the job: drawn on that rank's stream row on the
 * same time axis (the processes of one host share CUPTI's clock; an
 * imported rank's times move by the difference of the ranks' clock bases),
 * with the gap before it; the run's totals, regions and kernels are this
 * run's.
 */
static int on_rank_op(struct kp_report *rep, const struct scan_op *raw, void *arg)
{
	struct tl_build *tb = arg;
	struct scan_op shifted = *raw, *op = &shifted;
	struct kp_tl_item it = { .start = raw->start + tb->shift_ns, .end = raw->end + tb->shift_ns,
				 .a = (int32_t)raw->name_id, .b = -1, .cls = KP_TL_KERNEL };
	struct kp_tl_row *r;
	uint32_t k;
	int nomem;

	op->start += tb->shift_ns;
	op->end += tb->shift_ns;
	if (op->api_start >= 0)
		op->api_start += tb->shift_ns;

	if (!(r = stream_row(tb, op, &nomem)))
		return nomem ? KP_ENOMEM : 0;
	r->n_items++;
	if (op->gap_ns > 0) {
		bin_add(tb, r, op->start - op->gap_ns, op->start, op->gap_kind, -1, 0);
		it.cls = op->gap_kind;
	}
	/* the kernel as this run's list names it (the ranks of a job run the same kernels) */
	if (op->name_id >= 0)
		it.a = kp_u64map_get(&tb->kidx, (uint64_t)op->name_id, &k) ? (int32_t)k : -1;
	bin_add(tb, r, op->start, op->end, KP_TL_KERNEL, -1, 1);
	return item_add(tb, r, &it);
}

static int on_op(struct kp_report *rep, const struct scan_op *op, void *arg)
{
	struct tl_build *tb = arg;
	struct kp_tl_item it = { .start = op->start, .end = op->end, .a = (int32_t)op->name_id,
				 .b = -1, .cls = KP_TL_KERNEL };
	struct kp_tl_row *r;
	int32_t regs[3];
	uint32_t k;
	int n, i, c;

	add_gap_totals(rep, op, &tb->sp);
	if (op->gap_ns > 0) {
		c = op->gap_kind == KP_TL_HOST_GAP ? 0 : op->gap_kind == KP_TL_DEVICE_GAP ? 1 : 2;
		rep->gap_n[c][gap_bucket(op->gap_ns)]++;
		rep->gap_ns[c][gap_bucket(op->gap_ns)] += op->gap_ns;
	}
	if (op->first)
		tb->tl->n_streams++;
	if (rep->opts.summary_only)
		return 0;
	if (!(r = stream_row(tb, op, &c)))
		return c ? KP_ENOMEM : 0;
	r->n_items++;
	if (op->gap_ns > 0) {
		bin_add(tb, r, op->start - op->gap_ns, op->start, op->gap_kind, -1, 0);
		it.cls = op->gap_kind;
	}
	n = occ_find(tb, op->api_start >= 0 ? op->api_start : op->start, op->sid, regs);
	it.b = n ? regs[0] : -1;
	if (op->name_id >= 0) {
		it.a = kp_u64map_get(&tb->kidx, (uint64_t)op->name_id, &k) ? (int32_t)k : -1;
		for (i = 0; i < n && it.a >= 0; i++)
			if (rk_add(tb, regs[i], it.a, op->end - op->start))
				return KP_ENOMEM;
	}
	bin_add(tb, r, op->start, op->end, KP_TL_KERNEL, it.b, 1);
	return item_add(tb, r, &it);
}

/* The timeline's colour of a call, from its class (common/cuda_api.def). */
static int api_class(const char *name)
{
	switch (kp_cuda_api_class(name)) {
	case KP_API_LAUNCH:
	case KP_API_GRAPH_LAUNCH:
	case KP_API_HOST_FUNC:
		return KP_TL_API_LAUNCH;
	case KP_API_SYNC:
	case KP_API_QUERY:
	case KP_API_EVENT_QUERY:
	case KP_API_EVENT_WAIT:
	case KP_API_STREAM_MEMOP:
		return KP_TL_API_SYNC;
	case KP_API_COPY:
	case KP_API_COPY_ASYNC:
	case KP_API_MEMSET:
	case KP_API_MEMSET_ASYNC:
		return KP_TL_API_COPY;
	default:
		return KP_TL_API_OTHER;
	}
}

/* The launch-call row: every CUDA API call, by class. */
static int api_pass(struct kp_db *db, struct tl_build *tb, struct kp_err *err)
{
	struct kp_u64map names;
	struct kp_db_api_span c;
	struct kp_db_rows *st;
	int row, rc;

	if (!tb->rep->n_api)
		return 0;
	if ((row = row_new(tb, KP_TL_ROW_API, -1, -1)) < 0)
		return kp_err_set(err, KP_ENOMEM, "out of memory for the timeline");
	if ((rc = kp_db_api_spans(db, tb->rep->run_id, &st, err)))
		return rc;
	kp_u64map_init(&names);
	while ((rc = kp_db_api_span_next(st, &c, err)) > 0) {
		struct kp_tl_row *r = &tb->tl->rows.data[row];
		struct kp_tl_item it = { .start = c.start, .end = c.end, .b = -1 };
		uint64_t id = (uint64_t)c.name_id;
		uint32_t v;

		if (!kp_u64map_get(&names, id, &v)) {
			const char *name = c.name;
			int32_t si = str_index(tb, name);

			if (si < 0 || kp_u64map_put(&names, id, v = (uint32_t)si << 2 | (uint32_t)api_class(name ? name : "")))
				break;
		}
		it.a = (int32_t)(v >> 2);
		it.cls = (int32_t)(v & 3);
		r->n_items++;
		bin_add(tb, r, it.start, it.end, it.cls, it.a, 1);
		if (item_add(tb, r, &it))
			break;
	}
	kp_db_rows_close(st);
	kp_u64map_release(&names);
	if (rc > 0)
		return kp_err_set(err, KP_ENOMEM, "out of memory for the timeline");
	return rc;
}

/*
 * NVTX ranges: the program's own on one row, PyTorch's CPU ops and Python
 * frames (imported from a profiler trace into their own domains) on another.
 */
static int nvtx_pass(struct kp_db *db, struct tl_build *tb, struct kp_err *err)
{
	struct kp_db_nvtx_domain d;
	struct kp_db_nvtx_range nr;
	struct kp_db_rows *st;
	int64_t cpu_dom[2] = { -2, -2 };
	int rc, n = 0;

	/* the first two domains so named (a read error here leaves them unknown) */
	if ((rc = kp_db_nvtx_domains(db, tb->rep->run_id, &st, err)))
		return rc;
	while (n < 2 && kp_db_nvtx_domain_next(st, &d, err) > 0)
		if (d.name && (!strcmp(d.name, "pytorch.cpu_op") || !strcmp(d.name, "pytorch.python")))
			cpu_dom[n++] = d.domain_id;
	kp_db_rows_close(st);
	if ((rc = kp_db_nvtx_ranges(db, tb->rep->run_id, &st, err)))
		return rc;
	while ((rc = kp_db_nvtx_range_next(st, &nr, err)) > 0) {
		int64_t dom = nr.domain_id;
		int cpu = dom == cpu_dom[0] || dom == cpu_dom[1];
		int *row = cpu ? &tb->cpu_row : &tb->nvtx_row;
		struct kp_tl_item it = { .start = nr.start, .end = nr.end, .b = -1 };
		struct kp_tl_row *r;

		if (*row < 0 && (*row = row_new(tb, cpu ? KP_TL_ROW_CPU : KP_TL_ROW_NVTX, -1, -1)) < 0)
			break;
		it.a = str_index(tb, nr.text);
		if (it.a < 0)
			break;
		r = &tb->tl->rows.data[*row];
		r->n_items++;
		bin_add(tb, r, it.start, it.end, 0, it.a, 1);
		if (item_add(tb, r, &it))
			break;
	}
	kp_db_rows_close(st);
	if (rc > 0)
		return kp_err_set(err, KP_ENOMEM, "out of memory for the timeline");
	return rc;
}

/* The region row: each occurrence of each region. */
static int region_pass(struct tl_build *tb, struct kp_err *err)
{
	size_t i;
	int row;

	if (!tb->n_occ)
		return 0;
	if ((row = row_new(tb, KP_TL_ROW_REGIONS, -1, -1)) < 0)
		return kp_err_set(err, KP_ENOMEM, "out of memory for the timeline");
	for (i = 0; i < tb->n_occ; i++) {
		const struct occ *o = &tb->occ[i];
		struct kp_tl_item it = { .start = o->start, .end = o->end, .a = o->region,
					 .b = o->index };
		struct kp_tl_row *r = &tb->tl->rows.data[row];

		r->n_items++;
		bin_add(tb, r, o->start, o->end, 0, o->region, 1);
		if (item_add(tb, r, &it))
			return kp_err_set(err, KP_ENOMEM, "out of memory for the timeline");
	}
	return 0;
}

/*
 * Widen [*lo, *hi] to the extent of one kind of row (range: when asked),
 * and add how many there are to *n (when n is not NULL).
 */
static int query_range(struct kp_db *db, int64_t run, enum kp_db_extent_of of, int range,
		       int64_t *lo, int64_t *hi, int64_t *n, struct kp_err *err)
{
	struct kp_db_extent e;
	int rc = kp_db_extent(db, run, of, &e, err);

	if (rc)
		return rc;
	if (range && e.has_start && e.start < *lo)
		*lo = e.start;
	if (range && e.has_end && e.end > *hi)
		*hi = e.end;
	if (n)
		*n += e.count;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The run's extent, and the detail windows: the whole run when its
 * intervals fit the budget, else 8 windows that together hold about the
 * budget at the run's average density, the first around the typical
 * occurrence the page opens on, the rest spread over the run, plus the
 * middle occurrence of each region with a section of its own.
 */
static int plan_windows(struct kp_db *db, struct tl_build *tb, struct kp_err *err)
{
	struct kp_report *rep = tb->rep;
	struct kp_tl *tl = tb->tl;
	int64_t lo = INT64_MAX, hi = INT64_MIN, n = rep->n_kernels + rep->n_api;
	int64_t budget = rep->opts.detail > 0 ? rep->opts.detail : KP_TL_DETAIL, w, c;
	int64_t pairs[8 + KP_REP_CARDS][2];
	int k = 8, i, m, rc;

	if (rep->t_end_ns > rep->t_begin_ns) {
		lo = rep->t_begin_ns;
		hi = rep->t_end_ns;
	}
	if ((lo == INT64_MAX &&
	     (rc = query_range(db, rep->run_id, KP_DB_EXTENT_KERNELS, 1, &lo, &hi, NULL, err))) ||
	    (rc = query_range(db, rep->run_id, KP_DB_EXTENT_NVTX_RANGES, 1, &lo, &hi, &n, err)) ||
	    (rc = query_range(db, rep->run_id, KP_DB_EXTENT_MEMCPYS, 0, &lo, &hi, &n, err)) ||
	    (rc = query_range(db, rep->run_id, KP_DB_EXTENT_MEMSETS, 0, &lo, &hi, &n, err)))
		return rc;
	for (size_t r = 0; rep->job && r < rep->job->n_ranks; r++)
		if (rep->job->ranks[r].run_id != rep->run_id &&
		    (rc = query_range(db, rep->job->ranks[r].run_id, KP_DB_EXTENT_KERNELS, 0, &lo,
				      &hi, &n, err)))
			return rc;
	if (tb->n_occ && tb->occ[0].start < lo)
		lo = tb->occ[0].start;
	if (tb->n_occ && tb->occ_maxend[tb->n_occ - 1] > hi)
		hi = tb->occ_maxend[tb->n_occ - 1];
	if (lo == INT64_MAX)
		lo = hi = 0;
	tl->t0 = lo;
	tl->t1 = hi > lo ? hi : lo + 1;
	n += (int64_t)tb->n_occ;
	tb->row_cap = budget;
	tb->total_cap = budget + budget / 2;
	if (n <= budget) {
		tl->full = 1;
		tl->n_levels = 1;
		pairs[0][0] = tl->t0;
		pairs[0][1] = tl->t1;
		m = 1;
	} else {
		tl->n_levels = 3;
		w = (int64_t)((double)(tl->t1 - tl->t0) * ((double)budget / (double)n) / k);
		if (w < 1)
			w = 1;
		m = 0;
		if (rep->tl_what) {
			c = rep->tl_begin + (rep->tl_end - rep->tl_begin) / 2;
			pairs[m][0] = rep->tl_begin < c - w / 2 ? rep->tl_begin : c - w / 2;
			pairs[m][1] = rep->tl_end > c + w / 2 ? rep->tl_end : c + w / 2;
			m++;
		}
		for (i = 0; m < k; i++, m++) {
			c = tl->t0 + (int64_t)((double)(tl->t1 - tl->t0) * (i + 0.5) / (k - (rep->tl_what ? 1 : 0)));
			pairs[m][0] = c - w / 2;
			pairs[m][1] = c + w / 2;
		}
		/*
		 * the middle occurrence of each region with a section (its button
		 * shows it), when it holds at most 1/16 of the budget
		 */
		for (i = 0; i < KP_REP_CARDS && (size_t)i < rep->regions.len; i++) {
			const struct kp_rep_region *r = &rep->regions.data[i];
			int64_t len = r->mid_end - r->mid_start;

			if (len <= 0 || (double)n * len / (double)(tl->t1 - tl->t0) > budget / 16.0)
				continue;
			pairs[m][0] = r->mid_start - len / 50 - 1;
			pairs[m][1] = r->mid_end + len / 50 + 1;
			m++;
		}
		qsort(pairs, (size_t)m, sizeof(pairs[0]), cmp_i64);
	}
	for (i = 0; i < m; i++) {
		int64_t s = pairs[i][0] < tl->t0 ? tl->t0 : pairs[i][0];
		int64_t e = pairs[i][1] > tl->t1 ? tl->t1 : pairs[i][1];

		if (e <= s)
			continue;
		if (tl->win.len && s <= tl->win.data[tl->win.len - 1]) {
			if (e > tl->win.data[tl->win.len - 1])
				tl->win.data[tl->win.len - 1] = e;
			continue;
		}
		if (kp_vec_push(&tl->win, s) || kp_vec_push(&tl->win, e))
			return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	tl->n_bins = KP_TL_BINS << (2 * (tl->n_levels - 1));
	tb->bw = (double)(tl->t1 - tl->t0) / tl->n_bins;
	return 0;
}

static int by_item_start(const void *a, const void *b)
{
	const struct kp_tl_item *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* Row order: regions, NVTX, CPU ops, launch calls, then streams by intervals. */
static int by_row(const void *a, const void *b)
{
	const struct kp_tl_row *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->rank != y->rank)            /* a lane group per rank */
		return x->rank < y->rank ? -1 : 1;
	if (x->n_items != y->n_items)
		return x->n_items < y->n_items ? 1 : -1;
	if (x->device_id != y->device_id)
		return x->device_id < y->device_id ? -1 : 1;
	return x->stream_id < y->stream_id ? -1 : x->stream_id > y->stream_id;
}

static int by_rkernel(const void *a, const void *b)
{
	const struct kp_rep_rkernel *x = a, *y = b;

	if (x->region != y->region)
		return x->region < y->region ? -1 : 1;
	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return x->kernel < y->kernel ? -1 : x->kernel > y->kernel;
}

/* Keep the busiest streams, drop empty rows, sort each row's intervals. */
static void finish_rows(struct kp_report *rep)
{
	struct kp_tl *tl = &rep->tl;
	int64_t max_streams = DEF(rep->opts.max_streams, 8), kept = 0;
	size_t i, o = 0;
	int rank = INT32_MIN;

	if (tl->rows.len)
		qsort(tl->rows.data, tl->rows.len, sizeof(*tl->rows.data), by_row);
	for (i = 0; i < tl->rows.len; i++) {
		struct kp_tl_row *r = &tl->rows.data[i];

		if (r->kind == KP_TL_ROW_STREAM && r->rank != rank) {
			rank = r->rank;   /* the busiest streams of each rank */
			kept = 0;
		}

		if (!r->n_items || (r->kind == KP_TL_ROW_STREAM && kept++ >= max_streams)) {
			row_release(r);
			continue;
		}
		if (r->kind != KP_TL_ROW_STREAM && r->items.len > 1)
			qsort(r->items.data, r->items.len, sizeof(*r->items.data), by_item_start);
		tl->rows.data[o++] = *r;
	}
	tl->rows.len = o;
	if (rep->rkernels.len)
		qsort(rep->rkernels.data, rep->rkernels.len, sizeof(*rep->rkernels.data), by_rkernel);
}

/* The clock base of run (kp_runs.clock_base_ns, schema v6): 0 when it has none. */
static int clock_base(struct kp_db *db, int64_t run, int64_t *base_ns, struct kp_err *err)
{
	struct kp_db_rows *it;
	struct kp_db_run r;
	int rc = kp_db_runs(db, run, &it, err);

	*base_ns = 0;
	if (!rc && (rc = kp_db_run_next(it, &r, err)) > 0) {
		*base_ns = r.has_clock_base ? r.clock_base_ns : 0;
		rc = 0;
	}
	kp_db_rows_close(it);
	return rc;
}

/* The stream rows of the job's other ranks, a lane group each, on this run's axis. */
static int other_ranks(struct kp_db *db, struct tl_build *tb, struct kp_err *err)
{
	const struct kp_job *job = tb->rep->job;
	int rc = 0;

	for (size_t i = 0; job && i < job->n_ranks && !rc; i++) {
		const struct kp_rank_sum *rs = &job->ranks[i];
		struct corr_map corr = {0};
		struct kp_db_extent api;
		int64_t base, own_base;

		if (rs->run_id == tb->rep->run_id)
			continue;
		tb->rank = rs->rank;
		tb->n_stream_rows = 0;
		if ((rc = clock_base(db, rs->run_id, &base, err)) ||
		    (rc = clock_base(db, tb->rep->run_id, &own_base, err)))
			break;
		tb->shift_ns = base - own_base;
		if ((rc = kp_db_extent(db, rs->run_id, KP_DB_EXTENT_API_CALLS, &api, err)))
			break;
		rc = corr_load(db, rs->run_id, api.count, &corr, err);
		if (!rc)
			rc = scan_ops(db, tb->rep, rs->run_id, &corr, INT64_MIN, INT64_MAX, on_rank_op,
				      tb, err);
		corr_free(&corr);
	}
	return rc;
}

/*
 * The whole run: idle totals and stream spans, the distribution of gaps,
 * each region's kernels and the timeline (see the file's comment).
 */
int kp__report_timeline(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct tl_build tb = { .rep = rep, .tl = &rep->tl, .nvtx_row = -1, .cpu_row = -1,
			       .rank = -1 };
	size_t i;
	int rc;

	for (i = 0; rep->job && i < rep->job->n_ranks; i++)
		if (rep->job->ranks[i].run_id == rep->run_id)
			tb.rank = rep->job->ranks[i].rank;

	kp_u64map_init(&tb.kidx);
	kp_u64map_init(&tb.rk);
	kp_u64map_init(&tb.srow);
	kp_strmap_init(&tb.strs);
	if (!rep->corr) {
		rep->corr = calloc(1, sizeof(struct corr_map));
		if (!rep->corr) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			goto out;
		}
		if ((rc = corr_load(db, rep->run_id, rep->n_api, rep->corr, err)))
			goto out;
	}
	for (i = 0; i < rep->kernels.len; i++) {
		if (kp_u64map_put(&tb.kidx, (uint64_t)rep->kernels.data[i].name_id, (uint32_t)i)) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			goto out;
		}
	}
	if ((rc = choose_window(db, rep, err)) || (rc = occ_load(db, &tb, err)) ||
	    (rc = plan_windows(db, &tb, err)))
		goto out;
	rep->stream_span_ns = 0;
	rc = scan_ops(db, rep, rep->run_id, rep->corr, INT64_MIN, INT64_MAX, on_op, &tb, err);
	if (rc)
		goto out;
	if (rep->n_ops)
		rep->stream_span_ns += tb.sp.last_end - tb.sp.first_start;
	if (!rep->opts.summary_only &&
	    ((rc = region_pass(&tb, err)) || (rc = nvtx_pass(db, &tb, err)) ||
	     (rc = api_pass(db, &tb, err)) || (rc = other_ranks(db, &tb, err))))
		goto out;
	finish_rows(rep);
out:
	free(tb.occ);
	free(tb.occ_maxend);
	kp_u64map_release(&tb.kidx);
	kp_u64map_release(&tb.rk);
	kp_u64map_release(&tb.srow);
	kp_strmap_release(&tb.strs);
	return rc;
}

void kp__report_tl_release(struct kp_report *rep)
{
	size_t i;

	for (i = 0; i < rep->tl.rows.len; i++)
		row_release(&rep->tl.rows.data[i]);
	kp_vec_release(&rep->tl.rows);
	kp_vec_release(&rep->tl.win);
	kp_vec_release(&rep->tl.strs);
	kp_vec_release(&rep->rkernels);
}

void kp__report_corr_free(struct kp_report *rep)
{
	if (rep->corr) {
		corr_free(rep->corr);
		free(rep->corr);
		rep->corr = NULL;
	}
}
