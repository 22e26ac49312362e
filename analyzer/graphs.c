/*
 * graphs.c - the program's own CUDA graphs: regions of source "graph" and
 * what runs between their replays.
 *
 * A program that captures its loop by hand and replays it with
 * cudaGraphLaunch needs no graph from kplan: every op one launch ran shares
 * the launch call's correlation id (and, for kernels, the graph's graphId),
 * so the launches are grouped into one region per graph, its replays the
 * occurrences. Such ops are never mined into regions to graph again, and
 * their copy nodes are not blockers. What is left to gain lies between the
 * replays: launches the host still makes eagerly, syncs and copies after
 * each replay, and the GPU's idle time while the host does them. That is
 * the region's one graph_replay row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "internal.h"

struct launch {
	uint64_t key;            /* graphId, else the node sequence's hash (top bit set) */
	int64_t t;               /* first node's start */
	uint32_t beg, n;         /* slice of the graph ops, ordered by (corr, start) */
};

static int cmp_launch(const void *x, const void *y)
{
	const struct launch *a = x, *b = y;

	if (a->key != b->key)
		return (a->key > b->key) - (a->key < b->key);
	return (a->t > b->t) - (a->t < b->t);
}

int kp__regions_graphs(struct kp__ana *a, struct kp_err *err)
{
	KP_VEC(struct launch) ls = KP_VEC_INIT;
	struct kp__kv *kv, *tmp;
	uint32_t *ids, m = 0;
	int rc = 0;

	for (size_t i = 0; i < a->n_ops; i++)
		m += (a->ops[i].flags & KP__F_GRAPH) && a->ops[i].corr;
	if (!m)
		return 0;
	ids = kp_arena_alloc(&a->arena, m * sizeof(*ids));
	kv = malloc(m * sizeof(*kv));
	tmp = malloc(m * sizeof(*tmp));
	if (!ids || !kv || !tmp) {
		free(kv);
		free(tmp);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	/* by correlation id, each launch's ops by start (two stable radix sorts) */
	m = 0;
	for (size_t i = 0; i < a->n_ops; i++)
		if ((a->ops[i].flags & KP__F_GRAPH) && a->ops[i].corr)
			kv[m++] = (struct kp__kv){ .key = (uint64_t)(a->ops[i].start - a->t_min),
						   .idx = (uint32_t)i };
	kp__radix_sort(kv, tmp, m);
	for (uint32_t i = 0; i < m; i++)
		kv[i].key = a->ops[kv[i].idx].corr;
	kp__radix_sort(kv, tmp, m);
	for (uint32_t i = 0; i < m; i++)
		ids[i] = kv[i].idx;
	free(kv);
	free(tmp);
	/* one launch per correlation id */
	for (uint32_t i = 0; i < m && !rc;) {
		uint32_t j = i, gid = 0;
		uint64_t h = KP_HASH_SEED;

		while (j < m && a->ops[ids[j]].corr == a->ops[ids[i]].corr)
			h = kp_hash_mix(h, a->ops[ids[j++]].sig);
		struct launch l = { .t = a->ops[ids[i]].start, .beg = i, .n = j - i };
		l.key = kp_u64map_get(&a->graph_ids, a->ops[ids[i]].corr, &gid) && gid ?
			gid : h | (1ULL << 63);
		if (kp_vec_push(&ls, l))
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		i = j;
	}
	if (ls.len)
		qsort(ls.data, ls.len, sizeof(*ls.data), cmp_launch);
	/* one region per graph, its launches in time order */
	for (size_t i = 0; i < ls.len && !rc;) {
		size_t j = i;
		char label[64];

		while (j < ls.len && ls.data[j].key == ls.data[i].key)
			j++;
		if (ls.data[i].key >> 63)
			snprintf(label, sizeof(label), "graph:c%u", a->ops[ids[ls.data[i].beg]].corr);
		else
			snprintf(label, sizeof(label), "graph:%llu", (unsigned long long)ls.data[i].key);
		struct kp__region *r = kp__region_new(a, label, "graph", (uint32_t)(j - i));
		if (!r) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
		r->graphed = 1;
		for (size_t k = i; k < j; k++) {
			struct kp__occ *o = &r->occ[k - i];

			o->ops = &ids[ls.data[k].beg];
			o->n = ls.data[k].n;
			o->t0 = o->t1 = a->ops[o->ops[0]].api_start;
		}
		r->stream_id = a->streams.data[a->ops[r->occ[0].ops[0]].stream].stream_id;
		kp__region_stats(a, r);
		i = j;
	}
	kp_vec_release(&ls);
	return rc;
}

/* ---- between replays ---- */

/* OUT: the first start and the last end of occurrence o's ops. */
static void occ_gpu_span(const struct kp__ana *a, const struct kp__occ *o, int64_t *s,
			 int64_t *e)
{
	*s = INT64_MAX;
	*e = INT64_MIN;
	for (uint32_t i = 0; i < o->n; i++) {
		if (a->ops[o->ops[i]].start < *s)
			*s = a->ops[o->ops[i]].start;
		if (a->ops[o->ops[i]].end > *e)
			*e = a->ops[o->ops[i]].end;
	}
}

#define MAX_CALLS 4   /* distinct blocking calls named in the finding */

struct between {
	int64_t *period, *idle, *eager;   /* per interval */
	uint32_t n;
	int host_bound;                    /* intervals whose replay waited for the host */
	int64_t other_graphs;              /* launches of other graphs, all intervals */
	uint32_t calls[MAX_CALLS];         /* names of blocking calls between replays */
	int64_t call_n[MAX_CALLS];
	int n_calls, has_sync;
};

/* What runs between replay o and the next one, p. */
static void between_one(const struct kp__ana *a, const struct kp__occ *o,
			const struct kp__occ *p, struct between *b)
{
	int64_t call0 = a->ops[o->ops[0]].api_start, call1 = a->ops[p->ops[0]].api_start;
	int64_t start0, end0, start1, end1, busy = 0, eager = 0;
	uint32_t stream = a->ops[p->ops[0]].stream, last_graph = 0;
	const struct kp__op *first = &a->ops[p->ops[0]];

	occ_gpu_span(a, o, &start0, &end0);
	occ_gpu_span(a, p, &start1, &end1);

	for (size_t i = kp__cpu_lower(a, call0 + 1); i < a->n_ops; i++) {
		const struct kp__op *op = &a->ops[a->by_cpu[i]];

		if (op->api_start >= call1)
			break;
		if (op->flags & KP__F_GRAPH) {
			b->other_graphs += op->corr != last_graph;
			last_graph = op->corr;
			continue;
		}
		eager++;
		if (op->stream == stream && op->start >= end0 && op->end <= start1)
			busy += op->end - op->start;
	}
	for (size_t e = kp__ev_lower(a, call0 + 1); e < a->n_ev && a->ev[e].start < call1; e++) {
		const struct kp__ev *ev = &a->ev[e];
		int k;

		if (ev->name == UINT32_MAX)
			continue;
		b->has_sync |= ev->kind == KP__B_SYNC;
		for (k = 0; k < b->n_calls && b->calls[k] != ev->name; k++)
			;
		if (k == b->n_calls && k < MAX_CALLS)
			b->calls[b->n_calls++] = ev->name;
		if (k < b->n_calls)
			b->call_n[k]++;
	}
	int64_t idle = start1 - end0 - busy;
	b->period[b->n] = call1 - call0;
	b->idle[b->n] = idle > 0 ? idle : 0;
	b->eager[b->n] = eager;
	b->host_bound += first->host_bound;
	b->n++;
}

/* The finding's text for the intervals in b, into d. */
static void between_text(struct kp__ana *a, const struct kp__region *r,
			 struct between *b, char *d, size_t len)
{
	int py = kp__is_python(a);
	int64_t period = kp__median(b->period, b->n), idle = kp__median(b->idle, b->n);
	int64_t eager = kp__median(b->eager, b->n);
	size_t at;

	at = (size_t)snprintf(d, len, "the program replays this graph itself (cudaGraphLaunch): "
			      "%u replays of %lld nodes, %.1f us each on the GPU, one every %.1f us "
			      "(median, launch to launch); no re-graphing predicted. Between replays "
			      "the GPU idles %.1f us (%u of %u replays waited for the host)",
			      r->n_occ, (long long)r->nodes, (double)r->eager / 1e3,
			      (double)period / 1e3, (double)idle / 1e3, (unsigned)b->host_bound, b->n);
	if (at < len && eager)
		at += (size_t)snprintf(d + at, len - at, ", the host launches %lld op%s eagerly",
				       (long long)eager, eager > 1 ? "s" : "");
	if (at < len && b->other_graphs)
		at += (size_t)snprintf(d + at, len - at, ", %lld launches of other graphs run",
				       (long long)b->other_graphs);
	for (int k = 0; k < b->n_calls && at < len; k++)
		at += (size_t)snprintf(d + at, len - at, "%s%.60s x%lld", k ? ", " : ", and calls ",
				       a->names.data[b->calls[k]].s, (long long)b->call_n[k]);
	if (at < len && b->has_sync)
		at += (size_t)snprintf(d + at, len - at, ": the sync after each replay waits for it "
				       "and the next launch waits for the host; %s",
				       py ? "read the results (.item(), .cpu()) every few replays, not "
				       "after each g.replay()" : "test the result every few replays, or "
				       "keep the loop's test on the GPU (a conditional node, CUDA 12.4)");
	else if (at < len && eager)
		at += (size_t)snprintf(d + at, len - at, ": %s", py ? "capture that work into the "
				       "torch.cuda.graph too" : "capture those launches into the graph");
	if (at < len)
		snprintf(d + at, len - at, "; that time is what is left to gain");
}

/* The region's graph_replay row, at op (the launch it names), detail d. */
static int finding_row(struct kp__ana *a, struct kp__region *r, const struct kp__op *op,
		       uint32_t occ, const char *d, int64_t cost_ns)
{
	struct kp__blk bk = {
		.kind = KP__B_GRAPH_REPLAY, .fatal = 0,
		.api = op->api_name != UINT32_MAX ? a->names.data[op->api_name].s : NULL,
		.start = op->api_start, .corr = op->corr, .occ = (int)occ,
		.detail = kp_arena_strdup(&a->arena, d), .cost_ns = cost_ns,
	};

	return !bk.detail || kp_vec_push(&r->blk, bk) ? KP_ENOMEM : 1;
}

int kp__graph_finding(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = r->n_occ ? &r->occ[r->tmpl] : NULL;
	struct between b;
	char d[1536];
	uint32_t n = r->n_occ;
	int rc;

	if (!t || !t->n)
		return 0;
	for (uint32_t i = 0; !r->graphed && i < t->n; i++)
		if (!(a->ops[t->ops[i]].flags & KP__F_GRAPH))
			return 0;
	r->has_pred = 0;
	if (!r->graphed) {
		/* a range around the program's own graph launches */
		snprintf(d, sizeof(d), "its %lld nodes run from the program's own graph launches "
			 "(cudaGraphLaunch): it is a graph already, see the graph:... region; no "
			 "re-graphing predicted", (long long)r->nodes);
		return finding_row(a, r, &a->ops[t->ops[0]], r->tmpl, d, -1);
	}
	memset(&b, 0, sizeof(b));
	b.period = malloc(n * sizeof(int64_t));
	b.idle = malloc(n * sizeof(int64_t));
	b.eager = malloc(n * sizeof(int64_t));
	rc = !b.period || !b.idle || !b.eager ? KP_ENOMEM : 0;
	for (uint32_t k = 0; !rc && k + 1 < n; k++)
		between_one(a, &r->occ[k], &r->occ[k + 1], &b);
	if (!rc && b.n)
		between_text(a, r, &b, d, sizeof(d));
	else if (!rc)
		snprintf(d, sizeof(d), "the program launches this graph itself (cudaGraphLaunch), "
			 "once in the trace: %lld nodes, %.1f us on the GPU; no re-graphing predicted",
			 (long long)r->nodes, (double)r->eager / 1e3);
	if (!rc)
		rc = finding_row(a, r, &a->ops[r->occ[n > 1].ops[0]], n > 1, d,
				 b.n ? kp__median(b.idle, b.n) : -1);
	free(b.period);
	free(b.idle);
	free(b.eager);
	return rc;
}
