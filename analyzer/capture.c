/*
 * capture.c - capturability of each region, its split into capturable
 * parts, shape keys, patch slots, and the cost model's prediction.
 *
 * Blocking API calls inside an occurrence (sync, query, blocking or
 * pageable copy, synchronous memset, malloc/free, stream callback, a wait
 * on an event recorded outside the region) are fatal. In a runtime region
 * (libkplanrt's own NVTX domain: the application enters it whole) every one
 * is; elsewhere one between two launches splits the region there, and one
 * before the first or after the last launch only bounds the capture
 * (fatal = 0). Stream membership is checked op by op: an op must be on the
 * capture stream or on a stream forked from it and joined back within the
 * occurrence; work on the legacy default stream in a region that runs
 * elsewhere is fatal. Blockers seen only in the first few occurrences
 * become fatal = 2 (warm-up only) when later ones are clean: the planner
 * sets the warm-up to cover them. Shape keys and patch slots (pointers and
 * scalars whose values change) are advisories (fatal = 0): the runtime
 * handles them (one graph per shape key, in-place patching of bound
 * buffers and values).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "internal.h"

#define MAX_BLK_ROWS 2000   /* blocker rows kept per region */

static int add_blk(struct kp__ana *a, struct kp__region *r, int kind, int fatal,
		   const char *api, int64_t start, int64_t corr, int occ, int pos,
		   const char *detail)
{
	struct kp__blk b = {
		.kind = (uint8_t)kind, .fatal = (uint8_t)fatal, .api = api,
		.start = start, .corr = corr, .occ = occ, .pos = pos,
		.detail = detail ? kp_arena_strdup(&a->arena, detail) : NULL,
	};
	if (r->blk.len >= MAX_BLK_ROWS)
		return 0;
	return kp_vec_push(&r->blk, b) ? KP_ENOMEM : 0;
}

/* Number of the occurrence's ops whose launch call began before t. */
static uint32_t pos_in(struct kp__ana *a, const struct kp__occ *o, int64_t t)
{
	uint32_t lo = 0, hi = o->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (a->ops[o->ops[mid]].api_start < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t ev_lower(const struct kp__ana *a, int64_t t)
{
	size_t lo = 0, hi = a->n_ev;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->ev[mid].start < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* 1 when a cudaEventRecord call started in [t0, t1). */
static int recorded_inside(struct kp__ana *a, int64_t t0, int64_t t1)
{
	size_t lo = 0, hi = a->n_rec;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->rec[mid] < t0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n_rec && a->rec[lo] < t1;
}

static const char *op_name(struct kp__ana *a, const struct kp__op *op)
{
	return a->sigs.data[op->sig].name;
}

static int64_t sid(const struct kp__ana *a, const struct kp__op *op)
{
	return a->streams.data[op->stream].stream_id;
}

static const char *api_of(const struct kp__ana *a, const struct kp__op *op)
{
	return op->api_name != UINT32_MAX ? a->names.data[op->api_name].s : NULL;
}

/* The fix, in one sentence, for a blocker kind. */
static const char *fix_of(int kind)
{
	switch (kind) {
	case KP__B_SYNC:
		return "move the synchronisation or query out of the region";
	case KP__B_BLOCKING_COPY:
		return "use the Async variant on the region's stream (pinned host memory)";
	case KP__B_PAGEABLE_COPY:
		return "pin the host buffer (cudaMallocHost or cudaHostRegister)";
	case KP__B_MALLOC:
		return "allocate once before the region, or cudaMallocAsync on the region's stream";
	case KP__B_FREE:
		return "free after the region, or cudaFreeAsync on the region's stream";
	case KP__B_HOST_CALLBACK:
		return "use cudaLaunchHostFunc, which captures";
	case KP__B_CROSS_STREAM_EVENT:
		return "wait only on events recorded inside the region";
	default:
		return "move it out of the region";
	}
}

/*
 * Blocking API calls. In a runtime region every one is fatal: the runtime
 * captures the whole body, so even one before the first launch would be
 * inside the capture. Elsewhere one before the first or after the last
 * launch only bounds the capture.
 */
static int event_blockers(struct kp__ana *a, struct kp__region *r)
{
	char d[512];
	int rc = 0;

	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		const struct kp__occ *o = &r->occ[k];
		for (size_t e = ev_lower(a, o->t0); e < a->n_ev && a->ev[e].start <= o->t1 && !rc; e++) {
			const struct kp__ev *ev = &a->ev[e];
			uint32_t pos = pos_in(a, o, ev->start);
			int edge = pos == 0 || pos >= o->n;
			const char *api = ev->name != UINT32_MAX ? a->names.data[ev->name].s : "memcpy";

			int fork_join = ev->kind == KP__B_CROSS_STREAM_EVENT &&
				recorded_inside(a, o->t0, ev->start);
			if (r->rt_kind)
				edge = 0;
			if (edge)
				snprintf(d, sizeof(d), "%s the region's launches: capture stops short of it",
					 pos == 0 ? "before" : "after");
			else if (!fork_join && !o->n)
				snprintf(d, sizeof(d), "%s cannot be captured: %s", api,
					 fix_of(ev->kind));
			else if (!fork_join && pos >= o->n)
				snprintf(d, sizeof(d), "after node %u (%.80s): %s cannot be captured: %s",
					 o->n - 1, op_name(a, &a->ops[o->ops[o->n - 1]]), api,
					 fix_of(ev->kind));
			else if (!fork_join && pos == 0)
				snprintf(d, sizeof(d), "before node 0 (%.80s): %s cannot be captured: %s",
					 op_name(a, &a->ops[o->ops[0]]), api, fix_of(ev->kind));
			else if (!fork_join && r->rt_kind)
				snprintf(d, sizeof(d), "between node %u (%.80s) and node %u (%.80s): %s "
					 "cannot be captured: %s", pos - 1,
					 op_name(a, &a->ops[o->ops[pos - 1]]), pos,
					 op_name(a, &a->ops[o->ops[pos]]), api, fix_of(ev->kind));
			else if (fork_join)
				snprintf(d, sizeof(d), "before node %u: waits on an event recorded inside"
					 " the region (fork/join): capture both streams", pos);
			else
				snprintf(d, sizeof(d), "between node %u (%s) and node %u (%s): splits the region",
					 pos - 1, op_name(a, &a->ops[o->ops[pos - 1]]), pos,
					 op_name(a, &a->ops[o->ops[pos]]));
			int fatal = !edge && !fork_join;
			rc = add_blk(a, r, ev->kind, fatal, api, ev->start, ev->corr, (int)k,
				     (int)pos, d);
		}
	}
	return rc;
}

static int is_legacy(const struct kp__ana *a, int64_t stream_id)
{
	return a->o.legacy_stream >= 0 && stream_id == a->o.legacy_stream;
}

static int waits_on(const struct kp__ana *a, const struct kp__occ *o, int64_t stream_id,
		    int64_t t0, int64_t t1);

/*
 * The stream a region is captured on: the stream of its template's first op
 * that was not forked (no event wait on that stream before its first op in
 * the occurrence); without wait streams in the trace, where most of its ops
 * run.
 */
static uint32_t capture_stream(const struct kp__ana *a, const struct kp__region *r)
{
	const struct kp__occ *o = &r->occ[r->tmpl];
	uint32_t best = o->n ? a->ops[o->ops[0]].stream : 0, best_n = 0;

	for (uint32_t i = 0; a->wait_streams && i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		int seen = 0;

		for (uint32_t j = 0; j < i && !seen; j++)
			seen = a->ops[o->ops[j]].stream == op->stream;
		if (!seen && !waits_on(a, o, sid(a, op), o->t0, op->api_start))
			return op->stream;
	}
	for (uint32_t i = 0; i < o->n && i < 4096; i++) {
		uint32_t s = a->ops[o->ops[i]].stream, n = 0;

		if (s == best && best_n)
			continue;
		for (uint32_t j = 0; j < o->n; j++)
			n += a->ops[o->ops[j]].stream == s;
		if (n > best_n) {
			best = s;
			best_n = n;
		}
	}
	return best;
}

/* 1 when occurrence o has an event wait on stream_id in [t0, t1]. */
static int waits_on(const struct kp__ana *a, const struct kp__occ *o, int64_t stream_id,
		    int64_t t0, int64_t t1)
{
	for (size_t e = ev_lower(a, t0); e < a->n_ev && a->ev[e].start <= t1; e++) {
		const struct kp__ev *ev = &a->ev[e];

		if (ev->kind == KP__B_CROSS_STREAM_EVENT && ev->stream_id == stream_id &&
		    ev->start >= o->t0 && ev->start <= o->t1)
			return 1;
	}
	return 0;
}

/*
 * Stream membership: every op of an occurrence must be on the capture
 * stream, or on a stream forked from it (an event wait on that stream
 * before the op) and joined back (a wait on the capture stream after that
 * stream's last op in the occurrence). Work on the legacy default stream
 * while the region runs elsewhere is never captured: with a blocking
 * capture stream it invalidates the capture (the application sees the
 * error), with a non-blocking one it silently stays out of the graph.
 * Without wait streams in the trace (imported traces), ops on other
 * streams are advisory unless on the legacy stream.
 */
static int stream_blockers(struct kp__ana *a, struct kp__region *r)
{
	uint32_t cs;
	int64_t cid;
	char d[384];
	int rc = 0;

	if (!r->n_occ || !r->occ[r->tmpl].n)
		return 0;
	cs = capture_stream(a, r);
	cid = a->streams.data[cs].stream_id;
	if (is_legacy(a, cid)) {
		const struct kp__occ *o = &r->occ[r->tmpl];
		const struct kp__op *op = &a->ops[o->ops[0]];

		if (r->rt_kind == 1)
			snprintf(d, sizeof(d), "the region runs on the legacy default stream (stream "
				 "%lld), which cannot be captured: give kp_region_begin a stream you "
				 "created and launch the body on it (or compile with --default-stream "
				 "per-thread)", (long long)cid);
		else
			snprintf(d, sizeof(d), "launches on the legacy default stream, which cannot "
				 "be captured: capture on a side stream (as torch.cuda.graph does)");
		return add_blk(a, r, KP__B_LEGACY_STREAM, r->rt_kind == 1, api_of(a, op),
			       op->api_start, op->corr, (int)r->tmpl, 0, d);
	}
	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		const struct kp__occ *o = &r->occ[k];

		for (uint32_t i = 0; i < o->n && !rc; i++) {
			const struct kp__op *op = &a->ops[o->ops[i]];
			int64_t s = sid(a, op), last = op->api_start;
			int fatal = 1, kind = KP__B_CROSS_STREAM_EVENT, seen = 0;

			if (op->stream == cs)
				continue;
			for (uint32_t j = 0; j < i && !seen; j++)
				seen = a->ops[o->ops[j]].stream == op->stream;
			if (seen)
				continue;   /* one row per stream and occurrence */
			for (uint32_t j = i + 1; j < o->n; j++) {
				if (a->ops[o->ops[j]].stream == op->stream)
					last = a->ops[o->ops[j]].api_start;
			}
			if (is_legacy(a, s)) {
				kind = KP__B_LEGACY_STREAM;
				snprintf(d, sizeof(d), "node %u (%.80s) runs on the legacy default stream "
					 "(stream %lld) while the region runs on stream %lld: launch it "
					 "on stream %lld", i, op_name(a, op), (long long)s,
					 (long long)cid, (long long)cid);
			} else if (!a->wait_streams) {
				fatal = r->rt_kind != 0;
				snprintf(d, sizeof(d), "node %u (%.80s) runs on stream %lld while the "
					 "region runs on stream %lld, and the trace does not say whether "
					 "it is forked and joined: launch it on stream %lld, or fork and "
					 "join it with events", i, op_name(a, op), (long long)s,
					 (long long)cid, (long long)cid);
			} else if (!waits_on(a, o, s, o->t0, op->api_start)) {
				snprintf(d, sizeof(d), "node %u (%.80s) runs on stream %lld, which is not "
					 "forked from the region's stream %lld: record an event on %lld and "
					 "cudaStreamWaitEvent(%lld, it) first, or launch it on %lld", i,
					 op_name(a, op), (long long)s, (long long)cid, (long long)cid,
					 (long long)s, (long long)cid);
			} else if (!waits_on(a, o, cid, last, o->t1)) {
				snprintf(d, sizeof(d), "stream %lld (node %u, %.80s) is forked from the "
					 "region's stream %lld but never joined back: record an event on "
					 "%lld after its last launch and cudaStreamWaitEvent(%lld, it)",
					 (long long)s, i, op_name(a, op), (long long)cid, (long long)s,
					 (long long)cid);
			} else {
				continue;   /* forked and joined: captures */
			}
			rc = add_blk(a, r, kind, fatal, api_of(a, op), op->api_start, op->corr,
				     (int)k, (int)i, d);
		}
	}
	return rc;
}

/*
 * A region a language binding captures (kplan.torch: NVTX category 2) was
 * recorded eagerly, and libraries take other paths while a capture is on
 * (transformers skips its mask checks' host syncs when
 * torch.cuda.is_current_stream_capturing()). A failed torch capture raises
 * inside the binding, which falls back to eager, so nothing here stops the
 * plan from trying: fatal blockers become advisories that say so.
 */
static int binding_advisory(struct kp__ana *a, struct kp__region *r)
{
	char d[640];

	for (size_t b = 0; b < r->blk.len; b++) {
		struct kp__blk *bk = &r->blk.data[b];

		if (bk->fatal != 1)
			continue;
		bk->fatal = 0;
		snprintf(d, sizeof(d), "%s (advisory in a kplan.torch region: libraries may avoid "
			 "it while capturing; the binding tries the capture and falls back)",
			 bk->detail ? bk->detail : "");
		if (!(bk->detail = kp_arena_strdup(&a->arena, d)))
			return KP_ENOMEM;
	}
	return 0;
}

#define MAX_WARMUP_COVER 8   /* most warm-up calls a plan asks for */

/*
 * Steady state: fatal blockers seen only in the first occurrences (a
 * caching allocator's first cudaMalloc, lazy module loading) do not stop a
 * graph when the warm-up covers them and at least two later occurrences
 * were clean: they become fatal = 2 ("warm-up only") and the region asks
 * for that many warm-up calls (r->warmup_occ).
 */
static void steady_state(struct kp__region *r)
{
	int last = -1;

	r->warmup_occ = 0;
	for (size_t b = 0; b < r->blk.len; b++) {
		if (r->blk.data[b].fatal == 1 && r->blk.data[b].occ > last)
			last = r->blk.data[b].occ;
	}
	if (last < 0 || last + 1 > MAX_WARMUP_COVER || r->n_occ < (uint32_t)last + 3)
		return;
	for (size_t b = 0; b < r->blk.len; b++) {
		if (r->blk.data[b].fatal == 1)
			r->blk.data[b].fatal = 2;
	}
	r->warmup_occ = last + 1;
}

/* One advisory row per launch configuration other than the template's. */
static int shape_blockers(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	uint64_t seen[64];
	int n_seen = 0, rc = 0;
	char d[512];

	if (r->shape_keys <= 1)
		return 0;
	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		const struct kp__occ *o = &r->occ[k];
		int dup = o->fp == t->fp;
		for (int s = 0; s < n_seen && !dup; s++)
			dup = seen[s] == o->fp;
		if (dup)
			continue;
		if (n_seen < 64)
			seen[n_seen++] = o->fp;
		uint32_t i = 0, m = o->n < t->n ? o->n : t->n;
		while (i < m && a->ops[o->ops[i]].sig == a->ops[t->ops[i]].sig)
			i++;
		if (i == m) {
			snprintf(d, sizeof(d), "occurrence %u has %u nodes, the common sequence %u",
				 k, o->n, t->n);
		} else {
			const struct kp__sig *sa = &a->sigs.data[a->ops[t->ops[i]].sig];
			const struct kp__sig *sb = &a->sigs.data[a->ops[o->ops[i]].sig];
			snprintf(d, sizeof(d), "occurrence %u node %u: %.80s %s -> %.80s %s",
				 k, i, sa->name, kp__sig_desc(a, sa), sb->name, kp__sig_desc(a, sb));
		}
		const struct kp__op *op = &a->ops[o->ops[i < o->n ? i : 0]];
		rc = add_blk(a, r, KP__B_SHAPE_KEY, 0,
			     op->api_name != UINT32_MAX ? a->names.data[op->api_name].s : NULL,
			     op->api_start, op->corr, (int)k, (int)i, d);
	}
	return rc;
}

/*
 * Arguments (up to 8 bytes) whose value changes between occurrences: 8-byte
 * ones that look like device addresses are pointers, the rest scalars (a
 * seed, a step, a learning rate) that a replay would reuse stale unless the
 * application binds them with kp_rt_bind_value.
 */
static int patch_slots(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	char d[256];
	int rc = 0;

	r->patch_slots = r->patched_nodes = 0;
	if (!a->n_args)
		return 0;
	for (uint32_t i = 0; i < t->n && !rc; i++) {
		const struct kp__op *top = &a->ops[t->ops[i]];
		size_t na, nb;
		const struct kp__arg *ta = kp__args_of(a, top->corr, &na);
		int node_patched = 0;

		if (top->kind != KP__OP_KERNEL || !ta)
			continue;
		for (size_t j = 0; j < na && !rc; j++) {
			uint32_t changed = 0, compared = 0;
			int ptr = ta[j].size == 8;
			if (ta[j].size == 0 || ta[j].size > 8)
				continue;
			for (uint32_t k = 0; k < r->n_occ; k++) {
				const struct kp__occ *o = &r->occ[k];
				if (k == r->tmpl || o->n != t->n)
					continue;
				const struct kp__arg *b = kp__args_of(a, a->ops[o->ops[i]].corr, &nb);
				for (size_t x = 0; b && x < nb; x++) {
					if (b[x].idx != ta[j].idx)
						continue;
					compared++;
					if (b[x].value != ta[j].value) {
						changed++;
						uint64_t v = (uint64_t)b[x].value;
						if (v < (1ULL << 32) || (v & 0x3))
							ptr = 0;
					}
				}
			}
			if (!changed)
				continue;
			uint64_t v0 = (uint64_t)ta[j].value;
			if (v0 < (1ULL << 32) || (v0 & 0x3))
				ptr = 0;
			r->patch_slots++;
			node_patched = 1;
			snprintf(d, sizeof(d), "node %u (%.80s) arg %u: %s changes in %u of %u "
				 "occurrences%s", i, op_name(a, top), ta[j].idx,
				 ptr ? "pointer" : "scalar", changed, compared,
				 ptr ? "" : ": a replay would reuse the captured value; bind it with "
				 "kp_rt_bind_value");
			rc = add_blk(a, r, KP__B_PATCH_SLOT, 0,
				     top->api_name != UINT32_MAX ? a->names.data[top->api_name].s : NULL,
				     top->api_start, top->corr, (int)r->tmpl, (int)i, d);
		}
		r->patched_nodes += node_patched;
	}
	return rc;
}

/*
 * What each op of occurrence o adds to the model: its duration, except where
 * it overlaps the op before it on the same stream (programmatic dependent
 * launch lets a kernel start while its predecessor finishes): then only the
 * time past the predecessor's end counts, and no dependency gap is added on
 * top (kp_cost_predict adds graph_dep_gap_ns to every duration, so it is
 * taken off here; the node cost stays the floor). A kernel recorded as
 * launched with programmatic dependent launch (kp_launch_attrs) after an op
 * on its stream pays no dependency gap either: in a graph its blocks are
 * resident before its predecessor ends (measured on decode, H200: the PDL
 * graph runs at the sum of its kernels' durations).
 */
static void node_durations(const struct kp__ana *a, const struct kp_cost *c,
			   const struct kp__occ *o, int64_t *dur, uint8_t *mem)
{
	int64_t gap = llround(c->v[KP_COST_GRAPH_DEP_GAP]);

	for (uint32_t i = 0; i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		const struct kp__op *prev = i ? &a->ops[o->ops[i - 1]] : NULL;

		dur[i] = op->end - op->start;
		mem[i] = op->kind != KP__OP_KERNEL;
		if (prev && prev->stream == op->stream && op->start < prev->end)
			dur[i] = (op->end > prev->end ? op->end - prev->end : 0) - gap;
		else if (prev && prev->stream == op->stream && (op->flags & KP__F_PDL))
			dur[i] -= gap;
	}
}

/* Graphed time: the model on each occurrence (up to ~1000), median. */
static int predict(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	uint32_t n = t->n, step = r->n_occ > 1000 ? r->n_occ / 1000 : 1, nv = 0;
	int64_t *dur = calloc(n ? n : 1, sizeof(*dur));
	uint8_t *mem = calloc(n ? n : 1, 1);
	int64_t *v = malloc((r->n_occ / step + 2) * sizeof(*v));
	struct kp_region_pred p;

	if (!dur || !mem || !v) {
		free(dur);
		free(mem);
		free(v);
		return KP_ENOMEM;
	}
	for (uint32_t k = 0; k < r->n_occ; k += step) {
		const struct kp__occ *o = &r->occ[k];
		if (o->n != n)
			continue;
		node_durations(a, &a->cost, o, dur, mem);
		kp_cost_predict(&a->cost, dur, mem, n, o->eager, r->patched_nodes,
				r->shape_keys, &p);
		v[nv++] = p.graph_ns;
	}
	/* the template itself fixes one-time cost and memory */
	node_durations(a, &a->cost, t, dur, mem);
	kp_cost_predict(&a->cost, dur, mem, n, r->eager, r->patched_nodes,
			r->shape_keys, &r->pred);
	if (nv)
		r->pred.graph_ns = kp__median(v, nv);
	if (r->pred.graph_ns > 0)
		r->pred.speedup = (double)r->eager / (double)r->pred.graph_ns;
	r->pred.break_even = r->eager > r->pred.graph_ns
		? (r->pred.one_time_ns + (r->eager - r->pred.graph_ns) - 1) / (r->eager - r->pred.graph_ns)
		: -1;
	r->has_pred = 1;
	free(dur);
	free(mem);
	free(v);
	return 0;
}

static int examine(struct kp__ana *a, struct kp__region *r, uint8_t *cut)
{
	uint32_t tn = r->n_occ ? r->occ[r->tmpl].n : 0;
	size_t n_calls;
	int rc = 0;

	if (cut)
		rc = event_blockers(a, r);
	n_calls = r->blk.len;
	if (!rc)
		rc = stream_blockers(a, r);
	if (!rc)
		steady_state(r);
	if (!rc && r->rt_kind == 2)
		rc = binding_advisory(a, r);
	/* the parts a split would keep: cut before each fatal call between
	 * two launches (runtime regions are entered whole: never split) */
	for (size_t b = 0; cut && !r->rt_kind && b < n_calls; b++) {
		const struct kp__blk *bk = &r->blk.data[b];

		if (bk->fatal == 1 && bk->pos > 0 &&
		    (uint32_t)bk->pos < tn && r->occ[bk->occ].n == tn)
			cut[bk->pos] = 1;
	}
	if (!rc)
		rc = shape_blockers(a, r);
	if (!rc)
		rc = patch_slots(a, r);
	if (!rc)
		rc = predict(a, r);
	return rc;
}

static int split(struct kp__ana *a, struct kp__region *r, const uint8_t *cut,
		 struct kp_err *err)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	uint32_t n = t->n, beg = 0, n_occ = 0;
	int64_t benefit = 0;
	char label[256];

	for (uint32_t k = 0; k < r->n_occ; k++)
		n_occ += r->occ[k].n == n;
	r->capturable = 0;
	for (uint32_t i = 1; i <= n; i++) {
		if (i < n && !cut[i])
			continue;
		uint32_t len = i - beg;
		if (len >= 2) {
			snprintf(label, sizeof(label), "%.200s[%u:%u]", r->label, beg, i);
			struct kp__region *c = kp__region_new(a, label, "split", n_occ);
			if (!c)
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			c->parent = r->id;
			c->stream_id = r->stream_id;
			uint32_t m = 0;
			for (uint32_t k = 0; k < r->n_occ; k++) {
				const struct kp__occ *o = &r->occ[k];
				if (o->n != n)
					continue;
				struct kp__occ *co = &c->occ[m++];
				co->ops = o->ops + beg;
				co->n = len;
				co->t0 = a->ops[co->ops[0]].api_start;
				co->t1 = a->ops[co->ops[len - 1]].api_start;
			}
			kp__region_stats(a, c);
			if (examine(a, c, NULL))
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			if (c->eager > c->pred.graph_ns)
				benefit += c->eager - c->pred.graph_ns;
		}
		beg = i;
	}
	/* the parent runs its capturable parts as graphs, the rest eagerly */
	r->pred.graph_ns = r->eager - benefit;
	r->pred.speedup = r->pred.graph_ns > 0 ? (double)r->eager / (double)r->pred.graph_ns : 1;
	r->pred.break_even = -1;
	return 0;
}

int kp__capturability(struct kp__ana *a, struct kp_err *err)
{
	size_t n_top = a->regions.len;
	int rc = 0;

	for (size_t i = 0; i < n_top && !rc; i++) {
		struct kp__region *r = a->regions.data[i];
		uint32_t n = r->n_occ ? r->occ[r->tmpl].n : 0;
		uint8_t *cut = calloc(n + 1, 1);
		int any = 0;

		if (!cut)
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		if (examine(a, r, cut)) {
			free(cut);
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		}
		for (uint32_t p = 1; p < n; p++)
			any |= cut[p];
		if (any)
			rc = split(a, r, cut, err);
		free(cut);
	}
	return rc;
}
