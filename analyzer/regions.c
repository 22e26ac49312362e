/*
 * regions.c - regions from NVTX ranges, or mined repeated kernel sequences,
 * and their per-occurrence figures.
 *
 * An NVTX occurrence holds the ops whose launch call began inside the range
 * (CPU time: what the range brackets is the code that launches). Mining
 * works on each stream's signature sequence: candidate periods are the most
 * frequent distances to the 1st..4th previous equal signature (one pass), each is
 * verified by counting positions i with s[i] == s[i+p] (O(n) each), and the
 * smallest period within 2% of the best match wins; occurrences are the
 * periods of the longest matching run, phased so that they start after the
 * largest idle gaps. O(n) expected per candidate, O(n log n) overall.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "internal.h"

struct kp__region *kp__region_new(struct kp__ana *a, const char *label,
				  const char *source, uint32_t n_occ)
{
	struct kp__region *r = kp_arena_alloc(&a->arena, sizeof(*r));

	if (!r)
		return NULL;
	r->occ = kp_arena_alloc(&a->arena, (n_occ ? n_occ : 1) * sizeof(*r->occ));
	r->label = kp_arena_strdup(&a->arena, label);
	if (!r->occ || !r->label || kp_vec_push(&a->regions, r))
		return NULL;
	r->id = (int)a->regions.len;
	r->source = source;
	r->stream_id = -1;
	r->n_occ = n_occ;
	r->capturable = 1;
	r->shape_keys = 1;
	return r;
}

void kp__occ_stats(struct kp__ana *a, struct kp__occ *o)
{
	int64_t g0 = INT64_MAX, g1 = INT64_MIN, c1 = INT64_MIN;
	uint64_t fp = KP_HASH_SEED;

	o->busy = o->hidle = o->didle = 0;
	for (uint32_t i = 0; i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		o->busy += op->end - op->start;
		if (i > 0 && op->gap > 0) {
			if (op->host_bound)
				o->hidle += op->gap;
			else
				o->didle += op->gap;
		}
		if (op->start < g0)
			g0 = op->start;
		if (op->end > g1)
			g1 = op->end;
		if (op->has_api && op->api_start + op->api_dur > c1)
			c1 = op->api_start + op->api_dur;
		/* plan/FORMAT.md: fold of the kernels' signatures, memops excluded */
		if (op->kind == KP__OP_KERNEL)
			fp = kp_hash_mix(fp, a->sigs.data[op->sig].fsig);
	}
	o->fp = fp;
	if (!o->n) {
		o->eager = o->t1 - o->t0;
		return;
	}
	/* wall time: GPU span or CPU span, whichever is longer */
	int64_t first_cpu = a->ops[o->ops[0]].api_start;
	int64_t e = g1 - g0;
	if (c1 != INT64_MIN && c1 - first_cpu > e)
		e = c1 - first_cpu;
	if (o->t1 - o->t0 > e)
		e = o->t1 - o->t0;
	o->eager = e;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* Medians, distributions, template, counts. */
void kp__region_stats(struct kp__ana *a, struct kp__region *r)
{
	uint32_t n = r->n_occ;
	int64_t *v = malloc((n ? n : 1) * sizeof(*v));
	uint64_t *fps = malloc((n ? n : 1) * sizeof(*fps));
	size_t tot = 0;

	for (uint32_t k = 0; k < n; k++) {
		kp__occ_stats(a, &r->occ[k]);
		tot += r->occ[k].n;
	}
	if (!v || !fps || !n)
		goto out;
	/* template: the first occurrence of the most common sequence */
	for (uint32_t k = 0; k < n; k++)
		fps[k] = r->occ[k].fp;
	qsort(fps, n, sizeof(*fps), cmp_u64);
	uint64_t best = fps[0];
	size_t best_n = 0, run = 0, kinds = 0;
	for (uint32_t k = 0; k < n; k++) {
		run = (k > 0 && fps[k] == fps[k - 1]) ? run + 1 : 1;
		if (run == 1)
			kinds++;
		if (run > best_n) {
			best_n = run;
			best = fps[k];
		}
	}
	r->shape_keys = (int64_t)kinds;
	r->tmpl = 0;
	for (uint32_t k = 0; k < n; k++)
		if (r->occ[k].fp == best) {
			r->tmpl = k;
			break;
		}
	r->fingerprint = best;
	const struct kp__occ *t = &r->occ[r->tmpl];
	r->nodes = t->n;
	r->kernels = 0;
	for (uint32_t i = 0; i < t->n; i++)
		r->kernels += a->ops[t->ops[i]].kind == KP__OP_KERNEL;
#define MED(field) do { \
		for (uint32_t k = 0; k < n; k++) v[k] = r->occ[k].field; \
		r->field = kp__median(v, n); } while (0)
	MED(eager);
	MED(busy);
	MED(hidle);
	MED(didle);
#undef MED
	int64_t *q = malloc((tot ? tot : 1) * sizeof(*q));
	int64_t *l = malloc((tot ? tot : 1) * sizeof(*l));
	size_t nq = 0;
	if (q && l) {
		for (uint32_t k = 0; k < n; k++)
			for (uint32_t i = 0; i < r->occ[k].n; i++) {
				const struct kp__op *op = &a->ops[r->occ[k].ops[i]];
				if (!op->has_api)
					continue;
				q[nq] = op->start - op->api_start;
				l[nq++] = op->api_dur;
			}
		kp__dist(q, nq, &r->queue);
		kp__dist(l, nq, &r->launch_api);
	}
	free(q);
	free(l);
out:
	free(v);
	free(fps);
}

struct range { int64_t start, end; int64_t label; int kind; };

static int cmp_range(const void *x, const void *y)
{
	const struct range *a = x, *b = y;
	if (a->label != b->label)
		return (a->label > b->label) - (a->label < b->label);
	return (a->start > b->start) - (a->start < b->start);
}

/*
 * Regions from NVTX ranges. Ranges in libkplanrt's own domain are the
 * regions the application enters through the runtime (source "runtime",
 * category 1: the C API, 2: a language binding): the ones a plan can apply
 * to. The application's own CPU-side ranges (domain 0/NULL, category
 * 0/NULL; the importer stores GPU-side annotations as category 1, cpu ops in
 * a domain) are regions for analysis (source "nvtx"); one with the name of a
 * runtime region is left out.
 */
static int nvtx_pass(struct kp__ana *a, int64_t domain, struct kp_err *err);

int kp__regions_nvtx(struct kp__ana *a, struct kp_err *err)
{
	int64_t dom;
	int rc;

	if (!kp_db_has_table(a->db, "NVTX_EVENTS"))
		return 0;
	dom = kp__nvtx_domain(a, "kplan");   /* libkplanrt's own */
	if (dom > 0 && (rc = nvtx_pass(a, dom, err)))
		return rc;
	return nvtx_pass(a, 0, err);
}

static int runtime_label(struct kp__ana *a, const char *label)
{
	for (size_t i = 0; i < a->regions.len; i++) {
		if (a->regions.data[i]->rt_kind && !strcmp(a->regions.data[i]->label, label))
			return 1;
	}
	return 0;
}

static int nvtx_pass(struct kp__ana *a, int64_t domain, struct kp_err *err)
{
	static const char sql[] =
		"SELECT n.start, n.end, COALESCE(n.text, s.value), COALESCE(n.category, 0)"
		" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
		" WHERE n.runId = ?1 AND n.eventType IN (59, 60) AND n.end IS NOT NULL"
		" AND n.end > n.start AND ((?2 = 0 AND (n.domainId IS NULL OR n.domainId = 0)"
		" AND (n.category IS NULL OR n.category = 0)) OR (?2 > 0 AND n.domainId = ?2))";
	KP_VEC(struct range) rs = KP_VEC_INIT;
	KP_VEC(const char *) labels = KP_VEC_INIT;
	struct kp_strmap lm;
	sqlite3_stmt *st;
	int rc;

	rc = kp_db_prepare(a->db, sql, &st, err);
	if (rc)
		return rc;
	kp_strmap_init(&lm);
	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_int64(st, 2, domain);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 2);
		struct range r = { sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), 0, 0 };
		int64_t ix;

		if (domain > 0)
			r.kind = sqlite3_column_int64(st, 3) == 2 ? 2 : 1;
		if (!t || !*t)
			t = "(unnamed)";
		if (!domain && runtime_label(a, t))
			continue;
		if (!kp_strmap_get(&lm, t, &ix)) {
			ix = (int64_t)labels.len;
			const char *c = kp_arena_strdup(&a->arena, t);
			if (!c || kp_vec_push(&labels, c) || kp_strmap_put(&lm, t, ix)) {
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
		}
		r.label = ix;
		if (kp_vec_push(&rs, r)) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
	}
	sqlite3_finalize(st);
	kp_strmap_release(&lm);
	if (rc || !rs.len)
		goto out;
	qsort(rs.data, rs.len, sizeof(*rs.data), cmp_range);
	for (size_t i = 0; i < rs.len && !rc;) {
		size_t j = i, k, n_occ = 0;
		while (j < rs.len && rs.data[j].label == rs.data[i].label)
			j++;
		for (k = i; k < j; k++) {
			size_t lo = kp__cpu_lower(a, rs.data[k].start);
			size_t hi = kp__cpu_lower(a, rs.data[k].end + 1);
			n_occ += hi > lo;
		}
		if (n_occ) {
			struct kp__region *r = kp__region_new(a, labels.data[rs.data[i].label],
							      domain ? "runtime" : "nvtx",
							      (uint32_t)n_occ);
			if (!r) {
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
			r->rt_kind = rs.data[i].kind;
			n_occ = 0;
			for (k = i; k < j; k++) {
				size_t lo = kp__cpu_lower(a, rs.data[k].start);
				size_t hi = kp__cpu_lower(a, rs.data[k].end + 1);
				if (hi <= lo)
					continue;
				struct kp__occ *o = &r->occ[n_occ++];
				o->ops = &a->by_cpu[lo];
				o->n = (uint32_t)(hi - lo);
				o->t0 = rs.data[k].start;
				o->t1 = rs.data[k].end;
			}
			kp__region_stats(a, r);
		}
		i = j;
	}
out:
	kp_vec_release(&rs);
	kp_vec_release(&labels);
	return rc;
}

struct cand { uint64_t d; uint32_t count; };

static int cmp_cand(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;
	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	return (a->d > b->d) - (a->d < b->d);
}

#define MAX_CANDS 32
#define RING 4

int kp__mine_period(const uint32_t *s, size_t n, int min_period,
		    const int64_t *gap, size_t *period, size_t *first,
		    size_t *count, struct kp_err *err)
{
	struct kp_u64map hist;
	struct cand *cs = NULL;
	uint32_t *last = NULL, max_s = 0;
	size_t n_c = 0, i, best_p = 0;
	double best_m = 0;
	int rc = 1;

	if (min_period < 1)
		min_period = 1;
	if (n < 2 * (size_t)min_period)
		return 1;
	kp_u64map_init(&hist);
	for (i = 0; i < n; i++)
		if (s[i] > max_s)
			max_s = s[i];
	/* the last RING positions of each signature (UINT32_MAX: none) */
	last = malloc(((size_t)max_s + 1) * RING * sizeof(*last));
	if (!last)
		goto nomem;
	memset(last, 0xff, ((size_t)max_s + 1) * RING * sizeof(*last));
	/* distances to the 1st..RING-th previous equal signature: a kernel that
	 * occurs m <= RING times per step gives the step length at the m-th */
	for (i = 0; i < n; i++) {
		uint32_t *r = &last[(size_t)s[i] * RING];
		for (int k = 0; k < RING && r[k] != UINT32_MAX; k++) {
			uint64_t d = i - r[k];
			uint32_t c = 0;
			if (d < (uint64_t)min_period || d > n / 2)
				continue;
			kp_u64map_get(&hist, d, &c);
			if (kp_u64map_put(&hist, d, c + 1))
				goto nomem;
		}
		memmove(r + 1, r, (RING - 1) * sizeof(*r));
		r[0] = (uint32_t)i;
	}
	cs = malloc((hist.len + 1) * sizeof(*cs));
	if (!cs)
		goto nomem;
	for (i = 0; i < hist.cap; i++)
		if (hist.keys[i])
			cs[n_c++] = (struct cand){ hist.keys[i], hist.vals[i] };
	qsort(cs, n_c, sizeof(*cs), cmp_cand);
	if (n_c > MAX_CANDS)
		n_c = MAX_CANDS;
	/* verify: share of positions with s[i] == s[i + p] */
	double m[MAX_CANDS];
	for (size_t c = 0; c < n_c; c++) {
		size_t p = cs[c].d, eq = 0;
		for (i = 0; i + p < n; i++)
			eq += s[i] == s[i + p];
		m[c] = (double)eq / (double)(n - p);
		if (m[c] > best_m)
			best_m = m[c];
	}
	if (best_m < 0.5)
		goto out;
	for (size_t c = 0; c < n_c; c++)
		if (m[c] >= best_m - 0.02 && (!best_p || cs[c].d < best_p))
			best_p = cs[c].d;
	/* longest run of positions matching one period later */
	size_t p = best_p, run_a = 0, run_len = 0, cur_a = 0;
	for (i = 0; i + p <= n; i++) {
		if (i + p < n && s[i] == s[i + p])
			continue;
		if (i - cur_a > run_len) {
			run_len = i - cur_a;
			run_a = cur_a;
		}
		cur_a = i + 1;
	}
	/* run [run_a, run_a + run_len) matches: [run_a, run_a + run_len + p) is periodic */
	size_t span = run_len + p;
	if (span < 2 * p)
		goto out;
	/* phase: the offset whose boundary gaps are largest, among the
	 * offsets that lose at most one occurrence */
	size_t best_phi = 0, n0 = span / p;
	double best_g = -1;
	for (size_t phi = 0; phi < p && phi < span; phi++) {
		size_t cnt = (span - phi) / p;
		double g = 0;
		if (cnt + 1 < n0 || cnt < 2)
			continue;
		for (size_t k = 0; k < cnt; k++) {
			int64_t gg = gap ? gap[run_a + phi + k * p] : 0;
			g += (double)(gg > 0 ? gg : 0);
		}
		g /= (double)cnt;
		if (g > best_g) {
			best_g = g;
			best_phi = phi;
		}
	}
	*period = p;
	*first = run_a + best_phi;
	*count = (span - best_phi) / p;
	rc = 0;
out:
	free(cs);
	free(last);
	kp_u64map_release(&hist);
	return rc;
nomem:
	rc = kp_err_set(err, KP_ENOMEM, "out of memory");
	goto out;
}

/*
 * 1 when a graph launch's call falls inside one of the cnt occurrences of
 * period p at ids (between its first and last launch call): such a
 * sequence is the eager work around a program's own graph replays, and
 * graphing it would have to hold the graph launch too.
 */
static int straddles_graph(struct kp__ana *a, const uint32_t *ids, size_t p, size_t cnt)
{
	for (size_t c = 0; c < cnt; c++) {
		int64_t t0 = a->ops[ids[c * p]].api_start, t1 = a->ops[ids[c * p + p - 1]].api_start;

		for (size_t i = kp__cpu_lower(a, t0); i < a->n_ops; i++) {
			const struct kp__op *op = &a->ops[a->by_cpu[i]];

			if (op->api_start > t1)
				break;
			if (op->flags & KP__F_GRAPH)
				return 1;
		}
	}
	return 0;
}

int kp__regions_mine(struct kp__ana *a, struct kp_err *err)
{
	size_t maxn = 0;
	uint32_t *s;
	int64_t *g;
	int rc = 0;

	for (size_t k = 0; k < a->streams.len; k++) {
		size_t n = a->streams.data[k].end - a->streams.data[k].beg;
		if (n > maxn)
			maxn = n;
	}
	s = malloc((maxn ? maxn : 1) * sizeof(*s));
	g = malloc((maxn ? maxn : 1) * sizeof(*g));
	if (!s || !g) {
		free(s);
		free(g);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	for (size_t k = 0; k < a->streams.len && !rc; k++) {
		const struct kp__stream *ss = &a->streams.data[k];
		size_t n = 0, p, first, cnt;
		const uint32_t *ids = &a->ord[ss->beg];
		uint32_t *own = NULL;
		char label[96];

		/* the program's own graph launches are graph regions (graphs.c),
		 * not sequences to graph again: mine the eager ops around them */
		for (size_t i = ss->beg; i < ss->end; i++)
			n += !(a->ops[a->ord[i]].flags & KP__F_GRAPH);
		if (n < ss->end - ss->beg) {
			own = kp_arena_alloc(&a->arena, (n ? n : 1) * sizeof(*own));
			if (!own) {
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
			n = 0;
			for (size_t i = ss->beg; i < ss->end; i++)
				if (!(a->ops[a->ord[i]].flags & KP__F_GRAPH))
					own[n++] = a->ord[i];
			ids = own;
		}
		for (size_t i = 0; i < n; i++) {
			const struct kp__op *op = &a->ops[ids[i]];
			s[i] = op->sig;
			g[i] = op->gap;
		}
		rc = kp__mine_period(s, n, a->o.min_period, g, &p, &first, &cnt, err);
		if (rc) {
			rc = rc > 0 ? 0 : rc;
			continue;
		}
		/* eager work between graph replays is the graph region's finding */
		if (own && straddles_graph(a, ids + first, p, cnt))
			continue;
		snprintf(label, sizeof(label), "mined:s%lld:p%zu",
			 (long long)ss->stream_id, p);
		struct kp__region *r = kp__region_new(a, label, "mined", (uint32_t)cnt);
		if (!r) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
		r->stream_id = ss->stream_id;
		r->period = (int)p;
		r->coverage = (double)(cnt * p) / (double)n;
		for (size_t c = 0; c < cnt; c++) {
			struct kp__occ *o = &r->occ[c];
			o->ops = &ids[first + c * p];
			o->n = (uint32_t)p;
			o->t0 = a->ops[o->ops[0]].api_start;
			o->t1 = a->ops[o->ops[p - 1]].api_start;
		}
		kp__region_stats(a, r);
	}
	free(s);
	free(g);
	return rc;
}
