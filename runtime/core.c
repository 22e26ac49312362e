/*
 * core.c - libkplanrt's CUDA-free core: regions, the per-(region, shape key,
 * stream) state machine, the shape-key cache with its hysteresis, patch
 * sites found by address range, fallbacks with stable reason codes, and
 * counters. Every CUDA call goes through struct kp__rt_backend, so the unit
 * tests drive all of this with a fake backend.
 *
 * Locking: rt->lock guards the region table and each region's entry list
 * (held only for the lookup); an entry's own mutex is held from begin to end
 * of one call, so two threads never drive one graph at once (the second runs
 * eagerly, reason "busy"). Counters are relaxed atomics.
 */
#include "rt_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "../common/hash.h"
#include "../common/kname.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/vec.h"
#include "../plan/aten_groups.h"
#include "../plan/bundle.h"
#include "../plan/planfile.h"
#include "../plan/sign.h"
#include "fused_load.h"

enum state { S_WARMUP, S_READY, S_BACKOFF, S_DISABLED };
enum mode { M_EAGER, M_NESTED, M_CAPTURE, M_REPLAY, M_VERIFY, M_WATCH, M_BINDS, M_AGREE };

#define BACKOFF_BASE 16       /* calls of eager after the first failure, doubled per failure */
#define THRASH_WINDOW 64      /* region calls per thrash window */
#define THRASH_EVICTIONS 4    /* evictions in one window that pause the region */
#define THRASH_PAUSE 256      /* first pause in region calls, doubled each time */
#define MIN_KEYS 4            /* shape keys kept per region and stream, at least */

struct site {
	uint32_t node;            /* index in entry->nodes */
	uint32_t off;             /* byte offset in the node's parameter buffer */
	uint32_t slot;
	uint32_t size;            /* value sites: the scalar's bytes; 0: a pointer word */
	uint64_t delta;           /* captured value - captured slot base */
};

/* One kernel launch of the watched warm-up call, copied (one allocation). */
struct wlaunch {
	char *name;
	uint32_t n_params;
	uint32_t *off, *size;
	unsigned char *params;
	size_t len;
};

struct region;

struct entry {
	struct region *reg;
	uint64_t key;
	void *stream;
	pthread_mutex_t lock;
	struct entry *next;
	int state;
	int strict_err;           /* strict mode: a mismatch made this graph fail */
	uint64_t calls, retry_at, last_use;
	uint32_t warm_done, fails;
	uint32_t captured;        /* successful captures (atomic: read under rt->lock) */
	uint32_t logged;          /* reasons already logged (bit per reason) */
	int watched;              /* the warm-up call before the first capture was watched
				     (or could not be, or needs not be) */
	int per_thread;           /* stream 0 means the per-thread default stream */
	int binds_seen;           /* a warm-up call made the value binds the plan's
				     scalar patch lines need (see M_BINDS) */
	int w_clean;              /* the watch saw the body and found nothing a
				     capture cannot hold */
	int agreed;               /* this capture's ranks_agree is done */
	struct wlaunch *wl;       /* what the watched call launched, NULL: unknown */
	size_t n_kernels;         /* kernel nodes of the capture (before fusion) */
	size_t n_wl;
	uint64_t w_value[KP_RT_MAX_BINDS];  /* value binds during the watched call */
	uint32_t w_values;        /* slots with a value bind then */
	void *graph;
	void *exec[2];            /* two execs alternate when pointers move (see patch_and_launch) */
	int cur;                  /* exec launched last */
	struct kp__rt_node *nodes;
	size_t n_nodes;
	struct site *sites;
	size_t n_sites;
	uint32_t slot_mask;       /* slots with sites in kernel nodes */
	uint32_t memop_mask;      /* slots with words in memcpy/memset nodes */
	uint32_t value_mask;      /* slots bound as values at capture */
	uintptr_t cap_base[KP_RT_MAX_BINDS];   /* bases at capture (the graph's params) */
	uintptr_t base[2][KP_RT_MAX_BINDS];    /* bases each exec's params hold */
	uint64_t max_delta[KP_RT_MAX_BINDS];
	/* fused kernels in the graph: they assume the capture's aliasing, so
	 * which bound buffers overlap must stay as it was (bit b of cap_ov[a]) */
	int fused;
	uint16_t cap_ov[KP_RT_MAX_BINDS];
	unsigned char *dirty;
	int verify_left;
	void *vbuf[KP_RT_MAX_BINDS];
	size_t vbuf_size[KP_RT_MAX_BINDS];
};

struct region {
	char *name;
	const struct kp_plan_region *plan;
	int static_reason;        /* nonzero: every call eager for this reason */
	int logged;
	uint32_t warmup, max_keys;
	uint64_t calls, eager_until, pause, win_calls, win_evict;
	struct entry *entries;
	size_t n_entries;
};

struct kp_rt {
	struct kp__rt_backend be;
	kp_rt_agree_fn agree;     /* the job's all-reduce of a verdict (kp_rt_set_agree) */
	void *agree_ctx;
	struct kp_rt_options opt;
	struct kp_plan *plan;
	int global_reason;
	char choice[320];         /* a bundle: which entry applies and why, or why none */
	struct kp__rt_fusion *fusion;   /* fused kernels (runtime/fused_load.c), NULL: none */
	int trusted;              /* a trust list is set: kp_rt_kernel_load compiles
				     only the torch sources whose signature held */
	struct kp_strbuf aten_sha;/* their SHA-256 as signed (kp_plan_verify) */
	char *aten_path;          /* the applied plan's torch fusion groups file (PLAN.aten,
				     a bundle entry's plan-<hash>.aten); NULL: no plan */
	uint64_t aten_plan_hash;  /* that plan's body-hash */
	pthread_mutex_t lock;
	struct kp_strmap names;   /* region name -> index in regions */
	KP_VEC(struct region *) regions;
	int n_execs;              /* 1 or 2 execs per graph (KPLAN_RT_EXECS) */
	int key_warmup;           /* KPLAN_RT_KEY_WARMUP=1: warm up every shape key */
	int watch;                /* watch the last warm-up call (backend can, KPLAN_RT_WATCH) */
	int watch_logged;         /* "could not check" said once */
	uint64_t tick;
	struct kp_rt_stats st;
	struct kp_rt *next_open;
};

static int plan_scalars(const struct kp_plan_region *pr);

static _Thread_local int tl_capture_depth;
static _Thread_local char tl_err[512];

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kp_rt *open_list;

#define ADD(rt, field, v) __atomic_fetch_add(&(rt)->st.field, (v), __ATOMIC_RELAXED)

static const char *const reason_names[KP_RT_R_COUNT] = {
	"none", "no-plan", "disabled", "plan-mismatch", "unknown-region",
	"planned-eager", "warmup", "capture-failed", "fingerprint", "instantiate",
	"patch", "launch", "cuda-error", "bad-bind", "unpatchable", "key-thrash",
	"backoff", "gave-up", "verify-mismatch", "nested", "busy", "ambiguous-bind",
	"would-break-capture", "unbound-change", "untrusted-plan",
};

KP_RT_API const char *kp_rt_reason_name(int reason)
{
	if (reason < 0 || reason >= KP_RT_R_COUNT)
		return "?";
	return reason_names[reason];
}

KP_RT_API const char *kp_rt_last_error(void)
{
	return tl_err;
}

/* A reason that strict mode turns into an error. */
static int strict_reason(int reason)
{
	switch (reason) {
	case KP_RT_R_NONE: case KP_RT_R_NO_PLAN: case KP_RT_R_DISABLED:
	case KP_RT_R_PLANNED_EAGER: case KP_RT_R_WARMUP: case KP_RT_R_NESTED:
	case KP_RT_R_BUSY: case KP_RT_R_BACKOFF: case KP_RT_R_KEY_THRASH:
	case KP_RT_R_AMBIGUOUS:
		return 0;
	default:
		return 1;
	}
}

/* One eager call for reason; in strict mode a mismatch becomes an error. */
static int eager(kp_rt *rt, int reason)
{
	ADD(rt, eager, 1);
	ADD(rt, eager_by_reason[reason], 1);
	return 1;
}

static int strict_error(kp_rt *rt, int reason, const char *region)
{
	snprintf(tl_err, sizeof(tl_err), "region '%s': %s (strict mode)", region,
		 kp_rt_reason_name(reason));
	return KP_EMISMATCH;
}

/* ---------------------------------------------------------------------- */
/* entries */

static void entry_drop_graph(kp_rt *rt, struct entry *e)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (!e->exec[i])
			continue;
		rt->be.exec_free(rt->be.ctx, e->exec[i]);
		ADD(rt, graphs, (uint64_t)-1);
		ADD(rt, graph_nodes, (uint64_t)0 - e->n_nodes);
		e->exec[i] = NULL;
	}
	if (e->graph)
		rt->be.graph_free(rt->be.ctx, e->graph);
	if (e->nodes)
		rt->be.nodes_free(rt->be.ctx, e->nodes, e->n_nodes);
	for (i = 0; i < KP_RT_MAX_BINDS; i++) {
		if (e->vbuf[i])
			rt->be.dev_free(rt->be.ctx, e->vbuf[i]);
		e->vbuf[i] = NULL;
		e->vbuf_size[i] = 0;
	}
	free(e->sites);
	free(e->dirty);
	e->graph = NULL;
	e->nodes = NULL;
	e->sites = NULL;
	e->dirty = NULL;
	e->n_nodes = e->n_sites = 0;
	e->slot_mask = e->memop_mask = 0;
}

static void wl_free(struct entry *e)
{
	size_t i;

	for (i = 0; i < e->n_wl; i++)
		free(e->wl[i].off);   /* the block holding all of it */
	free(e->wl);
	e->wl = NULL;
	e->n_wl = 0;
}

static void entry_free(kp_rt *rt, struct entry *e)
{
	entry_drop_graph(rt, e);
	wl_free(e);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/*
 * A graph failed: drop it, count, log once per reason, back off (doubling)
 * or give up. Returns 1: "the body's work was not done, run it again".
 */
static int fail(kp_rt *rt, struct entry *e, int reason, const char *detail)
{
	int gave_up, decided;

	entry_drop_graph(rt, e);
	ADD(rt, failures[reason], 1);
	if (reason == KP_RT_R_AMBIGUOUS) {
		/* not the graph's fault: the re-run is eager, the call after
		 * it captures again (pointers have moved by then) */
		e->state = S_BACKOFF;
		e->retry_at = e->calls + 2;
		kp_debug("runtime: region '%s' key %#llx: %s: %s; capture retried",
			 e->reg->name, (unsigned long long)e->key,
			 kp_rt_reason_name(reason), detail);
		return 1;
	}
	e->fails++;
	/*
	 * A capture that fails after a clean watch would fail again (what
	 * breaks it is what the watch missed) and each try may hand the
	 * application an error from its own call: decided once, for the
	 * region.
	 */
	decided = reason == KP_RT_R_CAPTURE && e->w_clean;
	gave_up = decided || e->fails >= (uint32_t)rt->opt.max_failures;
	if (decided) {
		pthread_mutex_lock(&rt->lock);
		if (!e->reg->static_reason)
			e->reg->static_reason = reason;
		pthread_mutex_unlock(&rt->lock);
	}
	if (gave_up) {
		e->state = S_DISABLED;
	} else {
		e->state = S_BACKOFF;
		e->retry_at = e->calls + ((uint64_t)BACKOFF_BASE << (e->fails - 1));
	}
	if (rt->opt.flags & KP_RT_STRICT && strict_reason(reason)) {
		e->strict_err = 1;
		strict_error(rt, reason, e->reg->name);
	}
	if (!(e->logged & (1u << reason)) || gave_up) {
		e->logged |= 1u << reason;
		kp_warn("runtime: region '%s' key %#llx: %s: %s; eager %s", e->reg->name,
			(unsigned long long)e->key, kp_rt_reason_name(reason), detail,
			decided ? "for the life of the process (the watch saw nothing a capture "
			"cannot hold: the next capture would fail alike)" :
			gave_up ? "for good (gave-up)" : "for a while, then retried");
	}
	return 1;
}

static int fail_rc(kp_rt *rt, struct entry *e, int reason, const char *what, int rc)
{
	char buf[384];

	snprintf(buf, sizeof(buf), "%s failed: %s", what,
		 rt->be.strerror ? rt->be.strerror(rt->be.ctx, rc) : "error");
	return fail(rt, e, reason, buf);
}

/* Evict the least recently used idle entry of reg (rt->lock held). */
static int evict_lru(kp_rt *rt, struct region *reg, void *stream)
{
	struct entry **pp, **victim = NULL;

	for (pp = &reg->entries; *pp; pp = &(*pp)->next) {
		if ((*pp)->stream != stream)
			continue;
		if (!victim || (*pp)->last_use < (*victim)->last_use)
			victim = pp;
	}
	if (!victim || pthread_mutex_trylock(&(*victim)->lock))
		return 0;
	{
		struct entry *e = *victim;

		*victim = e->next;
		pthread_mutex_unlock(&e->lock);
		entry_free(rt, e);
	}
	reg->n_entries--;
	ADD(rt, evictions, 1);
	return 1;
}

static struct entry *entry_new(kp_rt *rt, struct region *reg, uint64_t key, void *stream)
{
	struct entry *e, *x;
	size_t same = 0;

	for (x = reg->entries; x; x = x->next)
		same += x->stream == stream;
	if (same >= reg->max_keys && evict_lru(rt, reg, stream)) {
		if (++reg->win_evict >= THRASH_EVICTIONS) {
			reg->eager_until = reg->calls + reg->pause;
			if (!reg->logged)
				kp_warn("runtime: region '%s': %s: %llu shape keys evicted within %d calls; eager for %llu calls, then retried",
					reg->name, kp_rt_reason_name(KP_RT_R_KEY_THRASH),
					(unsigned long long)reg->win_evict, THRASH_WINDOW,
					(unsigned long long)reg->pause);
			reg->logged = 1;
			ADD(rt, failures[KP_RT_R_KEY_THRASH], 1);
			if (reg->pause < (1u << 20))
				reg->pause *= 2;
			reg->win_evict = 0;
		}
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->reg = reg;
	e->key = key;
	e->stream = stream;
	pthread_mutex_init(&e->lock, NULL);
	e->next = reg->entries;
	reg->entries = e;
	reg->n_entries++;
	return e;
}

/* Region by name, created on first use (rt->lock held). */
static struct region *region_get(kp_rt *rt, const char *name)
{
	struct region *reg;
	int64_t idx;

	if (kp_strmap_get(&rt->names, name, &idx))
		return rt->regions.data[idx];
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return NULL;
	reg->name = kp_strdup(name);
	if (!reg->name || kp_vec_push(&rt->regions, reg) ||
	    kp_strmap_put(&rt->names, name, (int64_t)rt->regions.len - 1)) {
		if (reg->name && rt->regions.len && rt->regions.data[rt->regions.len - 1] == reg)
			rt->regions.len--;
		free(reg->name);
		free(reg);
		return NULL;
	}
	reg->pause = THRASH_PAUSE;
	reg->plan = kp_plan_find(rt->plan, name);
	if (!reg->plan) {
		reg->static_reason = KP_RT_R_UNKNOWN_REGION;
		kp_warn("runtime: region '%s': %s: the plan has no region of that name; eager",
			name, kp_rt_reason_name(KP_RT_R_UNKNOWN_REGION));
	} else if (reg->plan->decision != KP_PLAN_GRAPH) {
		reg->static_reason = KP_RT_R_PLANNED_EAGER;
		kp_info("runtime: region '%s': planned %s", name,
			kp_plan_decision_name(reg->plan->decision));
	} else {
		reg->warmup = rt->opt.warmup >= 0 ? (uint32_t)rt->opt.warmup : reg->plan->warmup;
		reg->max_keys = reg->plan->shape_keys > MIN_KEYS ? reg->plan->shape_keys : MIN_KEYS;
	}
	return reg;
}

/* ---------------------------------------------------------------------- */
/* begin / bind / end */

static int region_begin(kp_rt *rt, kp_region *r, const char *name,
			uint64_t shape_key, void *stream);
static int region_end(kp_rt *rt, kp_region *r);

/*
 * 1 when fp is one of the launch configurations the plan saw for the region
 * (its `shape` lines, sorted ascending): a region whose grids depend on the
 * shape key has one fingerprint per shape.
 */
static int plan_has_shape(const struct kp_plan_region *pr, uint64_t fp)
{
	size_t lo = 0, hi = pr->n_shapes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pr->shapes[mid] == fp)
			return 1;
		if (pr->shapes[mid] < fp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* The stream the entry's graph is captured on and launched to. */
static void *stream_of(const struct entry *e)
{
	return !e->stream && e->per_thread ? KP__RT_STREAM_PER_THREAD : e->stream;
}

/*
 * The region's body cannot be captured or replayed right: eager for the
 * life of the process, said once (rt->lock not held).
 */
static void region_off(kp_rt *rt, struct region *reg, int reason, const char *why)
{
	int first;

	pthread_mutex_lock(&rt->lock);
	first = !reg->static_reason;
	if (first)
		reg->static_reason = reason;
	pthread_mutex_unlock(&rt->lock);
	if (!first)
		return;
	ADD(rt, failures[reason], 1);
	kp_warn("runtime: region '%s': %s: %s; eager for the life of the process",
		reg->name, kp_rt_reason_name(reason), why);
}

static void would_break(kp_rt *rt, struct region *reg, const char *why)
{
	region_off(rt, reg, KP_RT_R_WOULD_BREAK, why);
}

/* A first capture goes ahead unchecked: counted, said once per runtime. */
static void unwatched(kp_rt *rt, const char *why)
{
	ADD(rt, unwatched, 1);
	if (!__atomic_exchange_n(&rt->watch_logged, 1, __ATOMIC_RELAXED))
		kp_warn("runtime: %s; capturing unchecked", why);
}

/*
 * The job's verdict (kp_rt_set_agree): every rank calls this at the same
 * points, so the ranks decide each graph alike. 1 only when every rank's ok
 * is 1; a failing all-reduce (negative) is a 0. Without an agreement: ok.
 */
static int ranks_agree(kp_rt *rt, int ok)
{
	int all;

	if (!rt->agree)
		return ok;
	all = rt->agree(rt->agree_ctx, ok ? 1 : 0);
	ADD(rt, agreements, 1);
	if (all < 0)
		kp_warn("runtime: the ranks could not agree (the agree callback returned %d): "
			"eager", all);
	return ok && all > 0;
}

/*
 * The ranks agree after each capture, before its first replay (ok: this
 * rank's capture succeeded). 0 when any rank's failed: every rank runs the
 * region eagerly for good (a rank retrying later would meet no partner).
 * capture_disagree: this rank's capture failed (or never began) before it
 * agreed; the others learn it at the agreement they wait in.
 */
static int capture_agreed(kp_rt *rt, struct entry *e, int ok)
{
	e->agreed = 1;
	if (ranks_agree(rt, ok))
		return 1;
	entry_drop_graph(rt, e);
	e->state = S_DISABLED;
	region_off(rt, e->reg, KP_RT_R_CAPTURE, ok ?
		   "another rank's capture failed; every rank runs the region eagerly (the "
		   "ranks agree: kp_rt_set_agree)" :
		   "this rank's capture failed; every rank runs the region eagerly (the ranks "
		   "agree: kp_rt_set_agree)");
	return 0;
}

static void capture_disagree(kp_rt *rt, struct entry *e)
{
	if (rt->agree && !e->agreed)
		capture_agreed(rt, e, 0);
}

/*
 * The ranks agree at the end of the watched warm-up call (ok: this rank's
 * watch found nothing a capture cannot hold, or could not check). 0 when
 * another rank objected: the region is eager for good here too.
 */
static int watch_agreed(kp_rt *rt, struct entry *e, int ok)
{
	if (ranks_agree(rt, ok) || !ok)
		return 1;
	would_break(rt, e->reg, "another rank's watch objected (the ranks decide together: "
		    "kp_rt_set_agree); not tried as a capture");
	return 0;
}

/*
 * The last warm-up call before a first capture runs eagerly under the
 * backend's watch (CUPTI callbacks on CUDA): region_end learns whether a
 * capture would hold the body, before any capture starts. e->lock stays
 * held until then.
 */
static int watch_begin(kp_rt *rt, struct entry *e, kp_region *r, void *stream)
{
	int rc = rt->be.watch_begin(rt->be.ctx, stream, 0);

	if (rc) {
		e->watched = 1;
		unwatched(rt, "could not check region bodies before capture (another CUPTI "
			  "client, such as a profiler, is attached?)");
		if (rt->agree) {
			/* the other ranks agree at this call's end: so does this one */
			r->entry_ = e;
			r->mode_ = M_AGREE;
			return eager(rt, KP_RT_R_WARMUP);   /* e->lock held until end */
		}
		pthread_mutex_unlock(&e->lock);
		return eager(rt, KP_RT_R_WARMUP);
	}
	r->entry_ = e;
	r->mode_ = M_WATCH;
	r->t0_ = kp_now_ns();
	return eager(rt, KP_RT_R_WARMUP);
}

/* Keep a copy of the watched launches (for the capture's argument check). */
static void wl_keep(struct entry *e, const struct kp__rt_watch *w)
{
	size_t i;

	wl_free(e);
	if (!w->n_launches || !(e->wl = calloc(w->n_launches, sizeof(*e->wl))))
		return;
	for (i = 0; i < w->n_launches; i++) {
		const struct kp__rt_wlaunch *l = &w->launches[i];
		size_t nl = strlen(l->name ? l->name : "") + 1;
		size_t ab = (size_t)l->n_params * sizeof(uint32_t);
		/* one block: offsets, sizes, parameter bytes, name */
		uint32_t *m = malloc(2 * ab + l->params_len + nl);
		struct wlaunch *d = &e->wl[i];

		if (!m) {
			e->n_wl = i;
			wl_free(e);
			return;
		}
		d->off = m;
		d->size = m + l->n_params;
		d->params = (unsigned char *)(d->size + l->n_params);
		d->name = (char *)d->params + l->params_len;
		if (ab) {
			memcpy(d->off, l->param_off, ab);
			memcpy(d->size, l->param_size, ab);
		}
		if (l->params_len)
			memcpy(d->params, l->params, l->params_len);
		memcpy(d->name, l->name ? l->name : "", nl);
		d->n_params = l->n_params;
		d->len = l->params_len;
		e->n_wl = i + 1;
	}
}

/*
 * Another entry has begun its warm-up and not yet been watched: a watch is
 * coming (every region of a loop warms up in its first steps), so CUPTI
 * stays attached for it rather than being detached and attached again.
 */
static int watch_coming(kp_rt *rt, const struct entry *self)
{
	size_t i;
	int coming = 0;

	pthread_mutex_lock(&rt->lock);
	for (i = 0; i < rt->regions.len && !coming; i++) {
		const struct region *reg = rt->regions.data[i];
		const struct entry *x;

		if (reg->static_reason)
			continue;
		for (x = reg->entries; x && !coming; x = x->next)
			coming = x != self && x->state == S_WARMUP && !x->watched &&
				 __atomic_load_n(&x->warm_done, __ATOMIC_RELAXED) > 0;
	}
	pthread_mutex_unlock(&rt->lock);
	return coming;
}

static void watch_end(kp_rt *rt, struct entry *e, kp_region *r)
{
	struct kp__rt_watch w;
	int i;

	memset(&w, 0, sizeof(w));
	rt->be.watch_end(rt->be.ctx, &w);
	e->watched = 1;
	if (rt->be.watch_release && !watch_coming(rt, e))
		rt->be.watch_release(rt->be.ctx);
	ADD(rt, watched, 1);
	ADD(rt, watch_ns, kp_now_ns() - r->t0_);
	if (!watch_agreed(rt, e, w.res.verdict <= 0))
		return;
	if (w.res.verdict > 0) {
		char buf[512];

		snprintf(buf, sizeof(buf), "%s", w.res.msg[0] ? w.res.msg : w.res.call);
		would_break(rt, e->reg, buf);
		return;
	}
	if (w.res.verdict < 0) {
		char buf[512];

		snprintf(buf, sizeof(buf), "region '%s': %s", e->reg->name,
			 w.res.msg[0] ? w.res.msg : "could not check");
		unwatched(rt, buf);
		return;
	}
	e->per_thread = w.per_thread;
	e->w_clean = 1;
	wl_keep(e, &w);
	e->w_values = 0;
	for (i = 0; i < r->n_binds_; i++) {
		if (r->bind_[i].flags & KP_RT_BIND_VALUE) {
			e->w_values |= 1u << i;
			e->w_value[i] = r->bind_[i].value;
		}
	}
}

/*
 * Every region call is a named range for tracing tools (the backend's
 * range_push/pop: NVTX on CUDA), whatever the runtime decides: recording a
 * run through the runtime without a plan finds the regions by these names.
 */
KP_RT_API int kp_rt_region_begin(kp_rt *rt, kp_region *r, const char *name,
				 uint64_t shape_key, void *stream)
{
	r->ranged_ = rt && rt->be.range_push;
	if (r->ranged_)
		rt->be.range_push(rt->be.ctx, name ? name : "", 1);
	return region_begin(rt, r, name, shape_key, stream);
}

KP_RT_API int kp_rt_region_end(kp_rt *rt, kp_region *r)
{
	int rc = region_end(rt, r);

	if (r->ranged_ && rt->be.range_pop)
		rt->be.range_pop(rt->be.ctx);
	r->ranged_ = 0;
	return rc;
}

static int region_begin(kp_rt *rt, kp_region *r, const char *name,
			uint64_t shape_key, void *stream)
{
	struct region *reg;
	struct entry *e;
	int reason, rc;

	r->entry_ = NULL;
	r->stream_ = stream;
	r->mode_ = M_EAGER;
	r->n_binds_ = 0;
	if (!rt)
		return 1;
	ADD(rt, calls, 1);
	if (rt->global_reason)
		return eager(rt, rt->global_reason);
	if (tl_capture_depth > 0) {
		/* inside another region's capture this body is part of that
		 * graph already: a capture of its own would nest captures on
		 * one stream, a replay would launch a graph into the capture */
		r->mode_ = M_NESTED;
		return eager(rt, KP_RT_R_NESTED);
	}
	pthread_mutex_lock(&rt->lock);
	reg = region_get(rt, name ? name : "");
	if (!reg) {
		pthread_mutex_unlock(&rt->lock);
		return eager(rt, KP_RT_R_CUDA);
	}
	reg->calls++;
	if (reg->static_reason) {
		/* decided for good (planned eager, a blocker the watch saw, a
		 * capture that cannot succeed): the cheapest path, no entry */
		reason = reg->static_reason;
		pthread_mutex_unlock(&rt->lock);
		eager(rt, reason);
		if (rt->opt.flags & KP_RT_STRICT && strict_reason(reason))
			return strict_error(rt, reason, reg->name);
		return 1;
	}
	if (++reg->win_calls >= THRASH_WINDOW)
		reg->win_calls = reg->win_evict = 0;
	if (reg->calls < reg->eager_until) {
		/* keys were evicted faster than their captures could pay off:
		 * eager for a while (the pause doubles each time) rather than a
		 * capture per call */
		pthread_mutex_unlock(&rt->lock);
		return eager(rt, KP_RT_R_KEY_THRASH);
	}
	for (e = reg->entries; e; e = e->next) {
		if (e->key == shape_key && e->stream == stream)
			break;
	}
	if (!e) {
		/*
		 * Warm-up is for first-use effects (module loading, library
		 * workspaces, first allocations): a new shape key of a region
		 * that already captured cleanly on this stream captures at once.
		 * An eager warm-up call would also drain the GPU's queue, so the
		 * capture's host time would be GPU idle time.
		 */
		struct entry *x, *warm = NULL;

		for (x = reg->entries; x && !rt->key_warmup && !warm; x = x->next) {
			if (x->stream == stream && __atomic_load_n(&x->captured, __ATOMIC_RELAXED))
				warm = x;
		}
		if (!(e = entry_new(rt, reg, shape_key, stream))) {
			pthread_mutex_unlock(&rt->lock);
			return eager(rt, KP_RT_R_CUDA);
		}
		if (warm) {
			/* the body was watched and captured on this stream */
			e->warm_done = reg->warmup;
			e->watched = 1;
			e->per_thread = warm->per_thread;
		}
	}
	e->last_use = ++rt->tick;
	if (pthread_mutex_trylock(&e->lock)) {
		/* another thread is in this entry (capturing, replaying with its
		 * patched arguments, verifying): waiting would queue this thread
		 * behind it, and one graph's state serves one call at a time, so
		 * this call runs eagerly instead */
		pthread_mutex_unlock(&rt->lock);
		return eager(rt, KP_RT_R_BUSY);
	}
	pthread_mutex_unlock(&rt->lock);

	e->calls++;
	switch (e->state) {
	case S_DISABLED:
		rc = e->strict_err ? KP_EMISMATCH : 1;
		if (e->strict_err)
			strict_error(rt, KP_RT_R_GAVE_UP, reg->name);
		pthread_mutex_unlock(&e->lock);
		eager(rt, KP_RT_R_GAVE_UP);
		return rc;
	case S_BACKOFF:
		if (e->calls < e->retry_at) {
			rc = e->strict_err ? KP_EMISMATCH : 1;
			if (e->strict_err)
				strict_error(rt, KP_RT_R_BACKOFF, reg->name);
			pthread_mutex_unlock(&e->lock);
			eager(rt, KP_RT_R_BACKOFF);
			return rc;
		}
		e->state = S_WARMUP;
		e->warm_done = reg->warmup;
		/* capture now: this key was warmed and watched before its
		 * failure, and what failed (an allocation, a transient error)
		 * is what the retry is for */
		__attribute__((fallthrough));
	case S_WARMUP:
		if (!rt->watch)
			e->watched = 1;   /* no watch (KPLAN_RT_WATCH=0, or no CUPTI): unchecked */
		if (!e->binds_seen && reg->plan && plan_scalars(reg->plan)) {
			/*
			 * The plan lists scalars that change per call: replays
			 * are right only if the application binds them. A
			 * plain warm-up call first shows whether it does; if
			 * not, the region is eager for good before the watch
			 * (CUPTI's 12-22 ms) or a capture is paid for.
			 */
			if (e->warm_done < reg->warmup)
				e->warm_done++;
			r->entry_ = e;
			r->mode_ = M_BINDS;
			return eager(rt, KP_RT_R_WARMUP);   /* e->lock held until end */
		}
		if (e->warm_done < reg->warmup || !e->watched) {
			e->warm_done++;
			if (e->warm_done >= reg->warmup && !e->watched)
				return watch_begin(rt, e, r, stream);
			pthread_mutex_unlock(&e->lock);
			return eager(rt, KP_RT_R_WARMUP);
		}
		if (!stream && !e->per_thread) {
			/* cudaStreamBeginCapture refuses the legacy stream */
			pthread_mutex_unlock(&e->lock);
			would_break(rt, reg, "the region runs on the legacy default stream (stream 0), "
				    "which cannot be captured: pass a stream you created, or compile "
				    "with --default-stream per-thread");
			return eager(rt, KP_RT_R_WOULD_BREAK);
		}
		stream = stream_of(e);
		r->stream_ = stream;
		rc = rt->be.capture_begin(rt->be.ctx, stream);
		if (rc) {
			fail_rc(rt, e, KP_RT_R_CUDA, "stream capture begin", rc);
			e->agreed = 0;
			capture_disagree(rt, e);
			pthread_mutex_unlock(&e->lock);
			return eager(rt, KP_RT_R_CUDA);
		}
		tl_capture_depth++;
		r->entry_ = e;
		r->mode_ = M_CAPTURE;
		r->t0_ = kp_now_ns();
		return 1;
	default: /* S_READY */
		r->entry_ = e;
		r->stream_ = stream_of(e);
		if (e->verify_left > 0) {
			/* KPLAN_RT_VERIFY: the first calls after the capture run
			 * the body eagerly, then the graph on the same inputs, and
			 * compare the bound outputs (verify()); a graph that gives
			 * other bytes is dropped and eager's result kept */
			r->mode_ = M_VERIFY;
			return 1;
		}
		r->mode_ = M_REPLAY;
		if (rt->opt.flags & KP_RT_TIMING)
			r->t0_ = kp_now_ns();
		return 0;
	}
}

KP_RT_API int kp_rt_bind(kp_rt *rt, kp_region *r, int slot, const void *base,
			 size_t size, unsigned flags)
{
	int i;

	if (slot < 0 || slot >= KP_RT_MAX_BINDS)
		return KP_EINVAL;
	if (!rt)
		return 0;
	for (i = r->n_binds_; i < slot; i++) {
		r->bind_[i].base = NULL;
		r->bind_[i].size = 0;
		r->bind_[i].flags = 0;
	}
	r->bind_[slot].base = base;
	r->bind_[slot].size = size;
	r->bind_[slot].flags = flags & ~(unsigned)KP_RT_BIND_VALUE;
	r->bind_[slot].value = 0;
	if (slot >= r->n_binds_)
		r->n_binds_ = slot + 1;
	return 0;
}

KP_RT_API int kp_rt_bind_value(kp_rt *rt, kp_region *r, int slot, const void *value,
			       size_t size)
{
	int rc;

	if (!value || size < 1 || size > 8)
		return KP_EINVAL;
	if ((rc = kp_rt_bind(rt, r, slot, NULL, size, 0)) || !rt)
		return rc;
	r->bind_[slot].flags = KP_RT_BIND_VALUE;
	memcpy(&r->bind_[slot].value, value, size);
	return 0;
}

static int is_value(const kp_region *r, int slot)
{
	return (r->bind_[slot].flags & KP_RT_BIND_VALUE) != 0;
}

/* The slots this call bound as values (kp_rt_bind_value), a bit each. */
static uint32_t value_slots(const kp_region *r)
{
	uint32_t mask = 0;
	int i;

	for (i = 0; i < r->n_binds_; i++)
		mask |= (uint32_t)is_value(r, i) << i;
	return mask;
}

/* What a slot's "base" is for moves: the address, or the scalar's bytes. */
static uintptr_t bind_key(const kp_region *r, int slot)
{
	return is_value(r, slot) ? (uintptr_t)r->bind_[slot].value
				 : (uintptr_t)r->bind_[slot].base;
}

/*
 * The bound slot whose range holds v, the smallest such; -1 when none; -2
 * when ambiguous: v is also the base of a larger range holding it.
 */
static int slot_of(const kp_region *r, uint64_t v)
{
	int i, best = -1;

	for (i = 0; i < r->n_binds_; i++) {
		uintptr_t b = (uintptr_t)r->bind_[i].base;
		size_t n = r->bind_[i].size;

		if (!n || is_value(r, i) || v < b || v - b >= n)
			continue;
		if (best < 0 || n < r->bind_[best].size)
			best = i;
	}
	for (i = 0; best >= 0 && i < r->n_binds_; i++) {
		/* v is where another bound buffer starts too: a slice at its
		 * buffer's start, or one buffer bound twice */
		if (i != best && r->bind_[i].size && !is_value(r, i) &&
		    v == (uintptr_t)r->bind_[i].base)
			return -2;
	}
	return best;
}

/* Which of the bound buffers in mask overlap which: bit b of ov[a]. */
static void bind_overlaps(const kp_region *r, uint32_t mask, uint16_t *ov)
{
	int a, b;

	memset(ov, 0, KP_RT_MAX_BINDS * sizeof(*ov));
	for (a = 0; a < KP_RT_MAX_BINDS && a < r->n_binds_; a++) {
		uintptr_t a0 = (uintptr_t)r->bind_[a].base, a1 = a0 + r->bind_[a].size;

		if (!(mask & (1u << a)) || is_value(r, a))
			continue;
		for (b = a + 1; b < KP_RT_MAX_BINDS && b < r->n_binds_; b++) {
			uintptr_t b0 = (uintptr_t)r->bind_[b].base, b1 = b0 + r->bind_[b].size;

			if ((mask & (1u << b)) && !is_value(r, b) && a0 < b1 && b0 < a1)
				ov[a] |= (uint16_t)(1u << b);
		}
	}
}

/* 1 when the plan lists (kernel k, byte offset off) as a scalar patch. */
static int plan_scalar_at(const struct kp_plan_region *pr, uint32_t k, uint32_t off)
{
	size_t i;

	for (i = 0; i < pr->n_patches; i++) {
		if (pr->patches[i].scalar && pr->patches[i].kernel == k &&
		    pr->patches[i].offset == off)
			return 1;
	}
	return 0;
}

static int plan_scalars(const struct kp_plan_region *pr)
{
	size_t i;

	for (i = 0; i < pr->n_patches; i++) {
		if (pr->patches[i].scalar)
			return 1;
	}
	return 0;
}

/* The watched launch k when it is the same kernel as node nd, else NULL. */
static const struct wlaunch *watched_as(const struct entry *e, size_t k,
					const struct kp__rt_node *nd)
{
	const struct wlaunch *w;

	if (k >= e->n_wl || e->n_wl != e->n_kernels)
		return NULL;
	w = &e->wl[k];
	if (strcmp(w->name, nd->name) || w->n_params != nd->n_params)
		return NULL;
	return w;
}

/*
 * 1 when value slot s is parameter j of kernel node nd (the k-th kernel):
 * same size, same bytes at capture; where the plan lists scalar patches,
 * only at those; where the watched call launched the same kernel, it held
 * the value bound then too.
 */
static int value_site(const struct entry *e, const kp_region *r, int s, size_t k,
		      const struct kp__rt_node *nd, uint32_t j)
{
	const struct kp_plan_region *pr = e->reg->plan;
	uint32_t off = nd->param_off[j], n = nd->param_size[j];
	const struct wlaunch *w;

	if (n != r->bind_[s].size || (size_t)off + n > nd->params_len ||
	    memcmp(nd->params + off, &r->bind_[s].value, n))
		return 0;
	if (plan_scalars(pr))
		return plan_scalar_at(pr, (uint32_t)k, off);
	w = watched_as(e, k, nd);
	if (w && (e->w_values & (1u << s)) && w->off[j] == off && w->size[j] == n &&
	    (size_t)off + n <= w->len && memcmp(w->params + off, &e->w_value[s], n))
		return 0;
	return 1;
}

/*
 * Find the patch sites: every aligned 8-byte word of every parameter that
 * points into a bound buffer, and every parameter holding a bound value.
 * 0, 1 (ambiguous pointer), KP_ENOMEM.
 */
static int find_sites(struct entry *e, const kp_region *r)
{
	KP_VEC(struct site) v = KP_VEC_INIT;
	size_t i, k = 0;
	uint32_t j, w;

	for (i = 0; i < e->n_nodes; i++) {
		const struct kp__rt_node *nd = &e->nodes[i];
		int kern = nd->kind == KP__RT_NODE_KERNEL;

		if (nd->kind == KP__RT_NODE_OTHER)
			continue;
		for (j = 0; j < nd->n_params; j++) {
			int s2;

			for (s2 = 0; kern && s2 < r->n_binds_; s2++) {
				struct site s;

				if (!is_value(r, s2) || !value_site(e, r, s2, k, nd, j))
					continue;
				s.node = (uint32_t)i;
				s.off = nd->param_off[j];
				s.slot = (uint32_t)s2;
				s.size = nd->param_size[j];
				s.delta = 0;
				e->slot_mask |= 1u << s2;
				if (kp_vec_push(&v, s)) {
					kp_vec_release(&v);
					return KP_ENOMEM;
				}
			}
			uint32_t off = nd->param_off[j], end = off + nd->param_size[j];

			if (end > nd->params_len)
				end = (uint32_t)nd->params_len;
			for (w = (off + 7) & ~7u; w + 8 <= end; w += 8) {
				uint64_t val;
				struct site s;
				int slot;

				memcpy(&val, nd->params + w, 8);
				slot = slot_of(r, val);
				if (slot == -2) {
					kp_vec_release(&v);
					return 1;
				}
				if (slot < 0)
					continue;
				if (nd->kind == KP__RT_NODE_MEMOP) {
					e->memop_mask |= 1u << slot;
					continue;
				}
				s.node = (uint32_t)i;
				s.off = w;
				s.slot = (uint32_t)slot;
				s.size = 0;
				s.delta = val - (uintptr_t)r->bind_[slot].base;
				if (s.delta > e->max_delta[slot])
					e->max_delta[slot] = s.delta;
				e->slot_mask |= 1u << slot;
				if (kp_vec_push(&v, s)) {
					kp_vec_release(&v);
					return KP_ENOMEM;
				}
			}
		}
		k += kern;
	}
	e->sites = v.data;
	e->n_sites = v.len;
	return 0;
}

static void take_bases(struct entry *e, const kp_region *r)
{
	int i;

	for (i = 0; i < KP_RT_MAX_BINDS; i++)
		e->cap_base[i] = e->base[0][i] = i < r->n_binds_ ? bind_key(r, i) : 0;
	e->cur = 0;
}

/* 1 when v lies in a buffer the graph allocates itself (cudaMallocAsync). */
static int in_graph_alloc(const struct entry *e, uint64_t v)
{
	size_t i;

	for (i = 0; i < e->n_nodes; i++) {
		const struct kp__rt_node *nd = &e->nodes[i];

		if (nd->alloc_size && v >= nd->alloc_ptr && v - nd->alloc_ptr < nd->alloc_size)
			return 1;
	}
	return 0;
}

/*
 * 1 when parameter j of kernel node nd may differ from one call to the
 * next without harm: a bound pointer (or a pointer into the graph's own
 * allocation), or a bound value of that size holding those bytes.
 */
static int arg_covered(const struct entry *e, const kp_region *r,
		       const struct kp__rt_node *nd, uint32_t j)
{
	uint32_t off = nd->param_off[j], n = nd->param_size[j], w;
	int s;

	for (s = 0; s < r->n_binds_; s++) {
		if (is_value(r, s) && r->bind_[s].size == n &&
		    !memcmp(nd->params + off, &r->bind_[s].value, n))
			return 1;
	}
	if (n < 8)
		return 0;
	for (w = off; w + 8 <= off + n; w += 8) {
		uint64_t v;

		memcpy(&v, nd->params + w, 8);
		if (slot_of(r, v) == -1 && !in_graph_alloc(e, v))
			return 0;
	}
	return 1;
}

/*
 * Compare the captured kernels' arguments with the watched warm-up call's:
 * an argument that changed and that no bind covers (a seed or a step passed
 * by value, a buffer that moves unbound) would be stale in every replay.
 * Also every scalar the plan lists must be bound. 0, or 1 with why filled.
 */
static int check_args(const struct entry *e, const kp_region *r, char *why, size_t n_why)
{
	const struct kp_plan_region *pr = e->reg->plan;
	size_t i, k = 0;
	uint32_t j;

	for (i = 0; i < e->n_nodes; i++) {
		const struct kp__rt_node *nd = &e->nodes[i];
		const struct wlaunch *w;

		if (nd->kind != KP__RT_NODE_KERNEL)
			continue;
		for (j = 0; j < nd->n_params; j++) {
			uint32_t off = nd->param_off[j], n = nd->param_size[j];

			if ((size_t)off + n > nd->params_len)
				continue;
			if (plan_scalar_at(pr, (uint32_t)k, off) && !arg_covered(e, r, nd, j)) {
				snprintf(why, n_why, "kernel %zu (%s) argument %u is a scalar that "
					 "changes between calls (plan) and no kp_rt_bind_value "
					 "covers it", k, nd->name, j);
				return 1;
			}
			/*
			 * Only arguments of up to 8 bytes (scalars, pointers):
			 * a library's struct parameter (cuBLAS's 360-byte
			 * Params) legitimately holds other internal pointers
			 * while the library knows it is being captured.
			 */
			w = n <= 8 ? watched_as(e, k, nd) : NULL;
			if (!w || w->off[j] != off || w->size[j] != n || (size_t)off + n > w->len ||
			    !memcmp(w->params + off, nd->params + off, n))
				continue;
			if (!arg_covered(e, r, nd, j)) {
				snprintf(why, n_why, "kernel %zu (%s) argument %u (%u bytes) differs "
					 "between the warm-up call and the capture and no bind covers "
					 "it: bind it (kp_rt_bind for a buffer, kp_rt_bind_value for a "
					 "value)", k, nd->name, j, n);
				return 1;
			}
		}
		k++;
	}
	return 0;
}

static int finish_capture(kp_rt *rt, struct entry *e, kp_region *r)
{
	const struct kp_plan_region *pr = e->reg->plan;
	uint64_t fp = KP_FP_INIT;
	size_t i, n_kernels = 0;
	int64_t t1, t2, t3;
	int rc;

	rc = rt->be.capture_end(rt->be.ctx, r->stream_, &e->graph);
	t1 = kp_now_ns();
	if (rc) {
		e->graph = NULL;
		return fail_rc(rt, e, KP_RT_R_CAPTURE,
			       "stream capture (a sync, allocation or host copy inside the region?)", rc);
	}
	rc = rt->be.nodes(rt->be.ctx, e->graph, &e->nodes, &e->n_nodes);
	if (rc) {
		e->nodes = NULL;
		e->n_nodes = 0;
		return fail_rc(rt, e, KP_RT_R_CUDA, "graph node enumeration", rc);
	}
	for (i = 0; i < e->n_nodes; i++) {
		const struct kp__rt_node *nd = &e->nodes[i];

		if (nd->kind != KP__RT_NODE_KERNEL)
			continue;
		n_kernels++;
		fp = kp_fp_add(fp, kp_kernel_sig(nd->name, nd->grid,
								   nd->block, nd->smem));
	}
	if (pr->fingerprint && fp != pr->fingerprint && !plan_has_shape(pr, fp)) {
		/* the body captured other kernels (or launch shapes) than the
		 * run the plan was made from: its patch sites, fusion chains and
		 * prediction are about another program, so none of it applies */
		char buf[256];

		snprintf(buf, sizeof(buf),
			 "captured %zu kernels with fingerprint %016llx, plan has %u kernels, %016llx",
			 n_kernels, (unsigned long long)fp, pr->kernels,
			 (unsigned long long)pr->fingerprint);
		return fail(rt, e, KP_RT_R_FINGERPRINT, buf);
	}
	e->n_kernels = n_kernels;
	e->value_mask = value_slots(r);
	{
		char why[512];

		/* an argument no bind covers that changed between the watched
		 * call and the capture, or that the plan says changes per call,
		 * would be frozen into the graph: every replay would reuse the
		 * capture's value. No retry can make that right: eager for good */
		if (check_args(e, r, why, sizeof(why))) {
			entry_drop_graph(rt, e);
			e->state = S_DISABLED;
			region_off(rt, e->reg, KP_RT_R_UNBOUND_CHANGE, why);
			return 1;
		}
	}
	/*
	 * fusion hook (runtime/fused_load.c): planned chains -> fused kernel
	 * nodes. The generator specialises a chain's scalars into the fused
	 * code, so a region whose scalars change per call is not fused.
	 */
	if (e->value_mask || plan_scalars(pr))
		rc = 0;
	else
		rc = kp__rt_fusion_apply(rt->fusion, e->reg->name, e->graph, e->nodes,
					 e->n_nodes);
	e->fused = rc > 0;
	if (rc < 0)
		return fail(rt, e, KP_RT_R_CUDA, "a fusion graph edit failed half way");
	if (rc > 0) {
		rt->be.nodes_free(rt->be.ctx, e->nodes, e->n_nodes);
		e->nodes = NULL;
		e->n_nodes = 0;
		if ((rc = rt->be.nodes(rt->be.ctx, e->graph, &e->nodes, &e->n_nodes))) {
			e->nodes = NULL;
			e->n_nodes = 0;
			return fail_rc(rt, e, KP_RT_R_CUDA, "graph node enumeration after fusion", rc);
		}
	}
	memset(e->max_delta, 0, sizeof(e->max_delta));
	rc = find_sites(e, r);
	if (rc == 1)
		return fail(rt, e, KP_RT_R_AMBIGUOUS,
			    "a kernel parameter is the base of one bound buffer and inside another");
	if (rc || !(e->dirty = calloc(e->n_nodes ? e->n_nodes : 1, 1)))
		return fail(rt, e, KP_RT_R_CUDA, "out of memory");
	if (e->fused)
		bind_overlaps(r, e->slot_mask, e->cap_ov);
	t2 = kp_now_ns();
	rc = rt->be.instantiate(rt->be.ctx, e->graph, &e->exec[0]);
	if (rc) {
		e->exec[0] = NULL;
		return fail_rc(rt, e, KP_RT_R_INSTANTIATE, "graph instantiate", rc);
	}
	t3 = kp_now_ns();
	ADD(rt, graphs, 1);
	ADD(rt, graph_nodes, e->n_nodes);
	if (rt->agree && !capture_agreed(rt, e, 1))
		return 1;      /* another rank's capture failed: none replays */
	/* a capture runs nothing: this call's work is done by launching the
	 * graph now (the first replay) */
	rc = rt->be.launch(rt->be.ctx, e->exec[0], r->stream_);
	if (rc)
		return fail_rc(rt, e, KP_RT_R_LAUNCH, "graph launch", rc);
	take_bases(e, r);
	e->state = S_READY;
	e->verify_left = rt->opt.verify_calls;
	__atomic_store_n(&e->captured, e->captured + 1, __ATOMIC_RELAXED);
	ADD(rt, captures, 1);
	if (rt->be.graph_mem)
		__atomic_store_n(&rt->st.graph_mem_bytes, rt->be.graph_mem(rt->be.ctx),
				 __ATOMIC_RELAXED);
	kp_info("runtime: region '%s' key %#llx: captured %zu nodes (%zu kernels), %zu patch sites; "
		"host us: body %.0f, nodes+checks %.0f, instantiate %.0f, launch %.0f",
		e->reg->name, (unsigned long long)e->key, e->n_nodes, n_kernels, e->n_sites,
		(t1 - r->t0_) / 1e3, (t2 - t1) / 1e3, (t3 - t2) / 1e3, (kp_now_ns() - t3) / 1e3);
	return 0;
}

/* Slots in mask whose bound base differs from base[] */
static uint32_t moved_slots(const kp_region *r, const uintptr_t *base, uint32_t mask)
{
	uint32_t moved = 0;
	int s;

	for (s = 0; s < KP_RT_MAX_BINDS && mask >> s; s++) {
		if (mask & (1u << s) && bind_key(r, s) != base[s])
			moved |= 1u << s;
	}
	return moved;
}

/*
 * Bring exec k up to the current bindings: every node with a site in a
 * moved slot gets all its sites rewritten (new_base + delta; the node's
 * parameter buffer is shared scratch between the two execs) and one
 * set_params.
 */
static int patch_exec(kp_rt *rt, struct entry *e, kp_region *r, int k, uint32_t moved)
{
	size_t i, words = 0, values = 0, nodes = 0;
	int s, rc;

	for (i = 0; i < e->n_sites; i++) {
		if (moved & (1u << e->sites[i].slot))
			e->dirty[e->sites[i].node] = 1;
	}
	for (i = 0; i < e->n_sites; i++) {
		const struct site *st = &e->sites[i];
		uint64_t v;

		if (!e->dirty[st->node])
			continue;
		if (st->size) {
			memcpy(e->nodes[st->node].params + st->off, &r->bind_[st->slot].value,
			       st->size);
			values++;
			continue;
		}
		v = (uintptr_t)r->bind_[st->slot].base + st->delta;
		memcpy(e->nodes[st->node].params + st->off, &v, 8);
		words++;
	}
	for (i = 0; i < e->n_nodes; i++) {
		if (!e->dirty[i])
			continue;
		e->dirty[i] = 0;
		rc = rt->be.set_params(rt->be.ctx, e->exec[k], &e->nodes[i]);
		if (rc) {
			memset(e->dirty, 0, e->n_nodes);
			return fail_rc(rt, e, KP_RT_R_PATCH, "kernel node parameter update", rc);
		}
		nodes++;
	}
	for (s = 0; s < KP_RT_MAX_BINDS; s++) {
		if (moved & (1u << s))
			e->base[k][s] = bind_key(r, s);
	}
	ADD(rt, patched_words, words);
	ADD(rt, patched_values, values);
	ADD(rt, patched_nodes, nodes);
	return 0;
}

/*
 * Check the bindings, patch, launch. By default one exec is patched in
 * place. With two execs (KPLAN_RT_EXECS=2) the runtime alternates two
 * instantiations of the same graph when pointers move, so that the one
 * patched was launched two replays ago; measured on an H200 this did not
 * change throughput and made each update dearer (docs/PERFORMANCE.md), so it
 * is opt-in. Bindings that do not move need no update at all.
 */
static int patch_and_launch(kp_rt *rt, struct entry *e, kp_region *r)
{
	uint32_t used = e->slot_mask | e->memop_mask, moved;
	int64_t t1 = 0;
	int s, rc, k = e->cur;

	for (s = 0; s < KP_RT_MAX_BINDS && used >> s; s++) {
		if (!(used & (1u << s)))
			continue;
		if (s >= r->n_binds_ || !r->bind_[s].size)
			return fail(rt, e, KP_RT_R_BIND, "a slot the graph uses was not bound");
		if (is_value(r, s) != !!(e->value_mask & (1u << s)))
			return fail(rt, e, KP_RT_R_BIND, "a slot bound as a value at capture is "
				    "bound as a buffer now, or the other way round");
		if (bind_key(r, s) == e->cap_base[s] || is_value(r, s))
			continue;
		if (e->memop_mask & (1u << s))
			return fail(rt, e, KP_RT_R_UNPATCHABLE,
				    "a moved bound buffer is used by a memcpy/memset node");
		if (r->bind_[s].size <= e->max_delta[s])
			return fail(rt, e, KP_RT_R_BIND,
				    "a bound buffer shrank below an offset the graph uses");
	}
	if (e->fused && moved_slots(r, e->cap_base, e->slot_mask)) {
		uint16_t ov[KP_RT_MAX_BINDS];

		bind_overlaps(r, e->slot_mask, ov);
		if (memcmp(ov, e->cap_ov, sizeof(ov)))
			return fail(rt, e, KP_RT_R_BIND, "bound buffers overlap differently than at "
				    "capture, which the graph's fused kernels assume");
	}
	moved = moved_slots(r, e->base[k], e->slot_mask);
	if (moved) {
		if (rt->opt.flags & KP_RT_TIMING)
			t1 = kp_now_ns();
		if (rt->n_execs > 1) {
			k = 1 - k;
			if (!e->exec[k]) {
				rc = rt->be.instantiate(rt->be.ctx, e->graph, &e->exec[k]);
				if (rc) {
					e->exec[k] = NULL;
					return fail_rc(rt, e, KP_RT_R_INSTANTIATE,
						       "second graph instantiate", rc);
				}
				memcpy(e->base[k], e->cap_base, sizeof(e->cap_base));
				ADD(rt, graphs, 1);
				ADD(rt, graph_nodes, e->n_nodes);
			}
			moved = moved_slots(r, e->base[k], e->slot_mask);
		}
		if (moved && patch_exec(rt, e, r, k, moved))
			return 1;
		e->cur = k;
		if (t1)
			ADD(rt, replay_patch_ns, kp_now_ns() - t1);
	}
	if (rt->opt.flags & KP_RT_TIMING) {
		t1 = kp_now_ns();
		rc = rt->be.launch(rt->be.ctx, e->exec[k], r->stream_);
		ADD(rt, replay_launch_ns, kp_now_ns() - t1);
	} else {
		rc = rt->be.launch(rt->be.ctx, e->exec[k], r->stream_);
	}
	if (rc)
		return fail_rc(rt, e, KP_RT_R_LAUNCH, "graph launch", rc);
	return 0;
}

/* Verify mode: the body ran eagerly; run the graph too and compare outputs. */
static int verify(kp_rt *rt, struct entry *e, kp_region *r)
{
	int s, rc, equal = 1, n_out = 0;

	for (s = 0; s < r->n_binds_; s++) {
		size_t n = r->bind_[s].size;

		if (!(r->bind_[s].flags & KP_RT_BIND_OUTPUT) || !n)
			continue;
		if (e->vbuf_size[s] < n) {
			if (e->vbuf[s])
				rt->be.dev_free(rt->be.ctx, e->vbuf[s]);
			e->vbuf[s] = NULL;
			e->vbuf_size[s] = 0;
			if ((rc = rt->be.dev_alloc(rt->be.ctx, &e->vbuf[s], n))) {
				fail_rc(rt, e, KP_RT_R_CUDA, "verify buffer allocation", rc);
				return 0;
			}
			e->vbuf_size[s] = n;
		}
		if ((rc = rt->be.dev_copy(rt->be.ctx, e->vbuf[s], r->bind_[s].base, n,
					  r->stream_))) {
			fail_rc(rt, e, KP_RT_R_CUDA, "verify copy", rc);
			return 0;
		}
		n_out++;
	}
	if (patch_and_launch(rt, e, r))
		return 0;     /* the eager run did the work */
	if ((rc = rt->be.sync(rt->be.ctx, r->stream_))) {
		fail_rc(rt, e, KP_RT_R_CUDA, "verify sync", rc);
		return 0;
	}
	for (s = 0; s < r->n_binds_ && equal; s++) {
		size_t n = r->bind_[s].size;

		if (!(r->bind_[s].flags & KP_RT_BIND_OUTPUT) || !n)
			continue;
		if ((rc = rt->be.dev_equal(rt->be.ctx, e->vbuf[s], r->bind_[s].base, n, &equal))) {
			fail_rc(rt, e, KP_RT_R_CUDA, "verify compare", rc);
			return 0;
		}
		if (!equal) {
			char buf[128];

			/* put the eager result back: it is the reference */
			rt->be.dev_copy(rt->be.ctx, (void *)r->bind_[s].base, e->vbuf[s], n,
					r->stream_);
			snprintf(buf, sizeof(buf), "bound output slot %d differs from eager", s);
			fail(rt, e, KP_RT_R_VERIFY, buf);
			return rt->opt.flags & KP_RT_STRICT ? KP_EMISMATCH : 0;
		}
	}
	(void)n_out;
	e->verify_left--;
	ADD(rt, verified, 1);
	return 0;
}

static int region_end(kp_rt *rt, kp_region *r)
{
	struct entry *e = r->entry_;
	int rc = 0;

	if (!rt || !e)
		return 0;
	switch (r->mode_) {
	case M_CAPTURE:
		tl_capture_depth--;
		e->agreed = 0;
		rc = finish_capture(rt, e, r);
		if (rc)
			capture_disagree(rt, e);
		break;
	case M_REPLAY:
		rc = patch_and_launch(rt, e, r);
		if (!rc) {
			ADD(rt, replays, 1);
			if (rt->opt.flags & KP_RT_TIMING)
				ADD(rt, replay_host_ns, kp_now_ns() - r->t0_);
		}
		break;
	case M_VERIFY:
		ADD(rt, eager, 1);
		rc = verify(rt, e, r);
		break;
	case M_WATCH:
		watch_end(rt, e, r);
		break;
	case M_AGREE:
		/* unwatched (the watch could not begin): nothing to object */
		watch_agreed(rt, e, 1);
		break;
	case M_BINDS:
		if (value_slots(r)) {
			e->binds_seen = 1;
			break;
		}
		e->state = S_DISABLED;
		region_off(rt, e->reg, KP_RT_R_UNBOUND_CHANGE, "the plan lists kernel arguments "
			   "that change between calls (a seed, a step) and the call bound no value "
			   "with kp_rt_bind_value: no replay could be right");
		break;
	default:
		break;
	}
	r->entry_ = NULL;
	pthread_mutex_unlock(&e->lock);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* open / close / stats */

static int env_int(const char *name, int def)
{
	const char *s = getenv(name);

	return s && *s ? atoi(s) : def;
}

/*
 * The trust list: kp_rt_options.trust and KPLAN_RT_TRUST together (either
 * may be unset); NULL when neither names anything, else malloc'd.
 */
static char *trust_list(const struct kp_rt_options *opt)
{
	const char *o = opt->trust, *e = NULL;
	struct kp_strbuf sb = KP_STRBUF_INIT;

	if (!(opt->flags & KP_RT_NO_ENV))
		e = getenv("KPLAN_RT_TRUST");
	if (o && *o)
		kp_strbuf_adds(&sb, o);
	if (e && *e) {
		if (sb.len)
			kp_strbuf_addch(&sb, ':');
		kp_strbuf_adds(&sb, e);
	}
	if (!sb.len || sb.oom) {
		kp_strbuf_release(&sb);
		return NULL;
	}
	return kp_strbuf_detach(&sb, NULL);
}

/*
 * Per entry of bundle b, room for the SHA-256 of its sources as signed
 * (kp_bundle_verify): the pointers, then the digests, in one block the
 * caller frees. NULL: out of memory.
 */
static uint8_t **bundle_digests(const struct kp_bundle *b)
{
	size_t i, n = 0, at = 0;
	uint8_t **sha;

	for (i = 0; i < b->n_entries; i++)
		n += b->entries[i].plan->n_fusions;
	sha = calloc(1, b->n_entries * sizeof(*sha) + n * KP_SIGN_SHA256_BYTES);
	for (i = 0; sha && i < b->n_entries; i++) {
		sha[i] = (uint8_t *)(sha + b->n_entries) + at * KP_SIGN_SHA256_BYTES;
		at += b->entries[i].plan->n_fusions;
	}
	return sha;
}

/* Release the n strbufs of a bundle's torch source digests, and the array. */
static void bundle_aten_free(struct kp_strbuf *batn, size_t n)
{
	size_t i;

	for (i = 0; batn && i < n; i++)
		kp_strbuf_release(&batn[i]);
	free(batn);
}

/*
 * Read and parse the plan, or with *bundle non-NULL on return the bundle
 * (is_bundle: plan/bundle.h, every entry parsed); with a trust list, check
 * its signature over the very bytes parsed (a bundle's: over every entry
 * and source). 0 with rt->plan or *bundle set and *untrusted 0 or 1 (the
 * check failed: kerr says why), or an error (unreadable, invalid). When the
 * signature holds, *source_sha (a plan) or *bundle_sha (a bundle: per
 * entry, from bundle_digests) has the signed SHA-256 of each fusion
 * group's source (kp_plan_verify): the fusion loader reads the sources
 * again and must compile those bytes only; a bundle's *bundle_aten (per
 * entry) the signed SHA-256 of its torch fusion groups' sources (a plan's
 * go to rt->aten_sha). The caller frees them (bundle_aten_free).
 */
static int load_plan(kp_rt *rt, const char *plan_path, int is_bundle, struct kp_bundle **bundle,
		     int *untrusted, uint8_t **source_sha, uint8_t ***bundle_sha,
		     struct kp_strbuf **bundle_aten, struct kp_err *kerr)
{
	struct kp_strbuf *batn = NULL;
	struct kp_sign_key keys[KP_SIGN_MAX_TRUST];
	char *buf = NULL, *trust = trust_list(&rt->opt);
	char signer[KP_SIGN_ID_HEX];
	size_t len, n_keys;
	uint8_t *sha = NULL, **bsha = NULL;
	int rc = 0;

	*untrusted = 0;
	*source_sha = NULL;
	*bundle_sha = NULL;
	*bundle_aten = NULL;
	if (is_bundle) {
		if (!(*bundle = kp_bundle_load(plan_path, &buf, &len, kerr))) {
			rc = kerr->code ? kerr->code : KP_EFORMAT;
			goto out;
		}
	} else {
		if ((rc = kp_plan_read(plan_path, &buf, &len, kerr)))
			goto out;
		if (!(rt->plan = kp_plan_parse(buf, len, plan_path, kerr))) {
			rc = kerr->code ? kerr->code : KP_EFORMAT;
			goto out;
		}
	}
	if (!trust)
		goto out;
	if (is_bundle ? !(bsha = bundle_digests(*bundle)) ||
			!(batn = calloc((*bundle)->n_entries, sizeof(*batn))) :
	    rt->plan->n_fusions && !(sha = malloc(rt->plan->n_fusions * KP_SIGN_SHA256_BYTES))) {
		rc = kp_err_set(kerr, KP_ENOMEM, "%s: out of memory", plan_path);
		goto out;
	}
	rt->trusted = 1;
	if (kp_sign_load_trust(trust, keys, &n_keys, kerr) ||
	    (is_bundle ? kp_bundle_verify(*bundle, buf, len, keys, n_keys, signer, bsha, batn,
					  kerr) :
	     kp_plan_verify(plan_path, buf, len, rt->plan, keys, n_keys, signer, sha,
			    &rt->aten_sha, kerr))) {
		kp_strbuf_reset(&rt->aten_sha);
		*untrusted = 1;
		goto out;
	}
	kp_info("runtime: %s: signed by %s, signature ok", plan_path, signer);
	*source_sha = sha;
	*bundle_sha = bsha;
	*bundle_aten = batn;
	sha = NULL;
	bsha = NULL;
	batn = NULL;
out:
	bundle_aten_free(batn, is_bundle && *bundle ? (*bundle)->n_entries : 0);
	free(sha);
	free(bsha);
	free(trust);
	free(buf);
	return rc;
}

/*
 * Take the entry of the bundle b that fits gpu as rt->plan (kp_bundle_choose),
 * its digests from sha (may be NULL) into *source_sha (malloc'd), its torch
 * fusion groups' file into rt->aten_path and their sources' digests from
 * aten (may be NULL) into rt->aten_sha, and say
 * which and why in rt->choice, the log and the stats. No entry fits: 1
 * (rt->choice says why), rt->plan stays NULL.
 */
static int choose_entry(kp_rt *rt, struct kp_bundle *b, const struct kp_gpu_desc *gpu,
			uint8_t **sha, struct kp_strbuf *aten, uint8_t **source_sha)
{
	struct kp_strbuf path = KP_STRBUF_INIT;
	struct kp_bundle_choice c;
	size_t nf;

	kp_bundle_choose(b, gpu, &c);
	snprintf(rt->choice, sizeof(rt->choice), "%s", c.why);
	rt->st.bundle_entries = b->n_entries;
	rt->st.bundle_match = (uint64_t)c.match;
	if (c.entry < 0)
		return 1;
	rt->st.bundle_entry = (uint64_t)c.entry + 1;
	kp_info("runtime: %s: %zu entries; %s", b->path, b->n_entries, c.why);
	/* the entry's torch fusion groups, and the digests of their sources as signed */
	kp_bundle_aten_path(b, (size_t)c.entry, &path);
	if (!path.oom)
		rt->aten_path = kp_strbuf_detach(&path, NULL);
	kp_strbuf_release(&path);
	kp_strbuf_reset(&rt->aten_sha);
	if (aten)
		kp_strbuf_add(&rt->aten_sha, aten[c.entry].buf, aten[c.entry].len);
	rt->plan = kp_bundle_take(b, (size_t)c.entry);
	nf = rt->plan->n_fusions;
	if (sha && nf && (*source_sha = malloc(nf * KP_SIGN_SHA256_BYTES)))
		memcpy(*source_sha, sha[c.entry], nf * KP_SIGN_SHA256_BYTES);
	return 0;
}

kp_rt *kp__rt_open_backend(const struct kp__rt_backend *be, const char *plan_path,
			   const struct kp_rt_options *opt, struct kp_rt_err *err)
{
	struct kp_err kerr = {0};
	struct kp_strbuf index = KP_STRBUF_INIT;
	struct kp_bundle *bundle = NULL;
	struct kp_strbuf *bundle_aten = NULL;
	uint8_t *source_sha = NULL, **bundle_sha = NULL;
	int untrusted = 0;
	kp_rt *rt;

	if (err) {
		err->code = 0;
		err->msg[0] = 0;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		if (err) {
			err->code = KP_ENOMEM;
			snprintf(err->msg, sizeof(err->msg), "out of memory");
		}
		if (be->destroy)
			be->destroy(be->ctx);
		return NULL;
	}
	kp_strbuf_init(&rt->aten_sha);
	rt->be = *be;
	if (opt)
		rt->opt = *opt;
	else
		rt->opt.warmup = -1;
	if (!(rt->opt.flags & KP_RT_NO_ENV)) {
		if (env_int("KPLAN_RT_DISABLE", 0))
			rt->opt.flags |= KP_RT_DISABLE;
		if (env_int("KPLAN_RT_STRICT", 0))
			rt->opt.flags |= KP_RT_STRICT;
		if (env_int("KPLAN_RT_STATS", 0))
			rt->opt.flags |= KP_RT_PRINT_STATS | KP_RT_TIMING;
		rt->opt.verify_calls = env_int("KPLAN_RT_VERIFY", rt->opt.verify_calls);
	}
	if (rt->opt.max_failures <= 0)
		rt->opt.max_failures = 3;
	rt->n_execs = rt->opt.flags & KP_RT_TWO_EXECS ? 2 : 1;
	if (!(rt->opt.flags & KP_RT_NO_ENV) && env_int("KPLAN_RT_EXECS", 1) == 2)
		rt->n_execs = 2;
	if (!(rt->opt.flags & KP_RT_NO_ENV))
		rt->key_warmup = env_int("KPLAN_RT_KEY_WARMUP", 0);
	rt->watch = be->watch_begin && be->watch_end &&
		    ((rt->opt.flags & KP_RT_NO_ENV) || env_int("KPLAN_RT_WATCH", 1));
	pthread_mutex_init(&rt->lock, NULL);
	kp_strmap_init(&rt->names);

	if (rt->opt.flags & KP_RT_DISABLE) {
		rt->global_reason = KP_RT_R_DISABLED;
	} else if (!plan_path) {
		rt->global_reason = KP_RT_R_NO_PLAN;
	} else {
		struct kp__rt_device dev;
		struct kp_gpu_desc gpu;
		struct kp_plan_report rep;
		int rc, is_bundle = kp_bundle_is(plan_path);

		if (is_bundle) {
			/* fused sources and the signature are the index's neighbours */
			kp_bundle_index_path(plan_path, &index);
			if (index.oom) {
				kp_err_set(&kerr, KP_ENOMEM, "out of memory");
				goto out_err;
			}
			plan_path = index.buf;
		}
		if (load_plan(rt, plan_path, is_bundle, &bundle, &untrusted, &source_sha,
			      &bundle_sha, &bundle_aten, &kerr))
			goto out_err;
		if (rt->plan) {
			/* a plan file: its torch fusion groups are its neighbour */
			struct kp_strbuf ap = KP_STRBUF_INIT;

			kp_aten_groups_path(plan_path, &ap);
			if (!ap.oom)
				rt->aten_path = kp_strbuf_detach(&ap, NULL);
			kp_strbuf_release(&ap);
		}
		if (untrusted) {
			if (rt->opt.flags & KP_RT_STRICT) {
				kp_err_prefix(&kerr, bundle ? "untrusted bundle" : "untrusted plan");
				kerr.code = KP_EMISMATCH;
				goto out_err;
			}
			kp_warn("runtime: %s: %s: %s; every region eager", plan_path,
				kp_rt_reason_name(KP_RT_R_UNTRUSTED), kerr.msg);
			rt->global_reason = KP_RT_R_UNTRUSTED;
			goto opened;
		}
		memset(&dev, 0, sizeof(dev));
		rc = be->device(be->ctx, &dev);
		if (rc) {
			kp_err_set(&kerr, KP_ECUDA, "cannot query the gpu: %s",
				   be->strerror ? be->strerror(be->ctx, rc) : "error");
			goto out_err;
		}
		kp_gpu_desc_init(&gpu);
		gpu.name = dev.name;
		gpu.cc_major = dev.cc_major;
		gpu.cc_minor = dev.cc_minor;
		gpu.sm_count = dev.sm_count;
		gpu.driver_version = dev.driver_version;
		gpu.cuda_major = dev.driver_version / 1000;
		gpu.model = rt->opt.model && *rt->opt.model ? rt->opt.model :
			    !(rt->opt.flags & KP_RT_NO_ENV) ? getenv("KPLAN_RT_MODEL") : NULL;
		if (bundle && choose_entry(rt, bundle, &gpu, bundle_sha, bundle_aten, &source_sha)) {
			if (rt->opt.flags & KP_RT_STRICT) {
				kp_err_set(&kerr, KP_EMISMATCH, "%s: bundle has no plan for this "
					   "gpu: %s", plan_path, rt->choice);
				goto out_err;
			}
			kp_warn("runtime: %s: %s: %s; every region eager", plan_path,
				kp_rt_reason_name(KP_RT_R_PLAN_MISMATCH), rt->choice);
			rt->global_reason = KP_RT_R_PLAN_MISMATCH;
			goto opened;
		}
		if (kp_plan_check(rt->plan, &gpu, &rep) == KP_PLAN_NOT_APPLICABLE) {
			const char *why = rep.n_items ? rep.items[0].msg : "hard key mismatch";
			int is_model = 0;
			size_t i;

			for (i = 0; i < rep.n_items; i++) {
				if (rep.items[i].severity == KP_PLAN_NOT_APPLICABLE) {
					why = rep.items[i].msg;
					is_model = !strcmp(rep.items[i].key, "for");
					break;
				}
			}
			if (rt->opt.flags & KP_RT_STRICT) {
				kp_err_set(&kerr, KP_EMISMATCH, "%s: plan does not apply to this %s: %s",
					   plan_path, is_model ? "model" : "gpu", why);
				goto out_err;
			}
			kp_warn("runtime: %s: %s: plan does not apply to this %s (%s); every region eager",
				plan_path, kp_rt_reason_name(KP_RT_R_PLAN_MISMATCH),
				is_model ? "model" : "gpu", why);
			rt->global_reason = KP_RT_R_PLAN_MISMATCH;
		} else if (rep.verdict == KP_PLAN_SOFT_MISMATCH) {
			kp_info("runtime: %s: applies with soft-key differences (%s)", plan_path,
				rep.n_items ? rep.items[0].msg : "");
		}
		/* pinned to a model, and the application named none: the pin is not
		 * checked; say so once (at open), then apply */
		if (!rt->global_reason && rt->plan->model && rt->plan->model[0] &&
		    (!gpu.model || !gpu.model[0]))
			kp_warn("runtime: %s: plan is pinned to model '%s' and the application "
				"names none (kp_rt_options.model, KPLAN_RT_MODEL): not checked, "
				"applied", plan_path, rt->plan->model);
	}
opened:
	/* fusion hook: compile the plan's fused kernels (runtime/fused_load.c) */
	if (rt->plan && !rt->global_reason)
		rt->fusion = kp__rt_fusion_open(rt->plan, plan_path, source_sha, rt->be.fusion_ops);
	if (rt->plan)
		rt->aten_plan_hash = rt->plan->body_hash;
	free(source_sha);
	free(bundle_sha);
	bundle_aten_free(bundle_aten, bundle ? bundle->n_entries : 0);
	kp_bundle_free(bundle);
	kp_strbuf_release(&index);
	pthread_mutex_lock(&open_lock);
	rt->next_open = open_list;
	open_list = rt;
	pthread_mutex_unlock(&open_lock);
	return rt;

out_err:
	free(source_sha);
	free(bundle_sha);
	bundle_aten_free(bundle_aten, bundle ? bundle->n_entries : 0);
	kp_bundle_free(bundle);
	kp_strbuf_release(&rt->aten_sha);
	free(rt->aten_path);
	if (err) {
		err->code = kerr.code;
		snprintf(err->msg, sizeof(err->msg), "%s", kerr.msg);
	}
	kp_strbuf_release(&index);
	kp_plan_free(rt->plan);
	kp_strmap_release(&rt->names);
	pthread_mutex_destroy(&rt->lock);
	if (be->destroy)
		be->destroy(be->ctx);
	free(rt);
	return NULL;
}

KP_RT_API void kp_rt_get_stats(kp_rt *rt, struct kp_rt_stats *st)
{
	const uint64_t *src = (const uint64_t *)&rt->st;
	uint64_t *dst = (uint64_t *)st;
	size_t i;

	for (i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	if (rt->be.watch_counts)
		rt->be.watch_counts(&st->cupti_attaches, &st->cupti_detaches, &st->cupti_attached);
}

KP_RT_API void kp_rt_print_stats(kp_rt *rt, FILE *f)
{
	struct kp_rt_stats st;
	int i;

	if (!rt)
		return;
	kp_rt_get_stats(rt, &st);
	fprintf(f, "kplan-rt: calls %llu\nkplan-rt: replays %llu\nkplan-rt: captures %llu\n"
		"kplan-rt: eager %llu\nkplan-rt: patched_nodes %llu\nkplan-rt: patched_words %llu\n"
		"kplan-rt: evictions %llu\nkplan-rt: verified %llu\nkplan-rt: graphs %llu\n"
		"kplan-rt: graph_nodes %llu\nkplan-rt: graph_mem_bytes %lld\n",
		(unsigned long long)st.calls, (unsigned long long)st.replays,
		(unsigned long long)st.captures, (unsigned long long)st.eager,
		(unsigned long long)st.patched_nodes, (unsigned long long)st.patched_words,
		(unsigned long long)st.evictions, (unsigned long long)st.verified,
		(unsigned long long)st.graphs, (unsigned long long)st.graph_nodes,
		(long long)st.graph_mem_bytes);
	fprintf(f, "kplan-rt: watched %llu\nkplan-rt: unwatched %llu\nkplan-rt: watch_ns %lld\n"
		"kplan-rt: patched_values %llu\nkplan-rt: cupti_attaches %llu\n"
		"kplan-rt: cupti_detaches %llu\nkplan-rt: cupti_attached %llu\n",
		(unsigned long long)st.watched,
		(unsigned long long)st.unwatched, (long long)st.watch_ns,
		(unsigned long long)st.patched_values, (unsigned long long)st.cupti_attaches,
		(unsigned long long)st.cupti_detaches, (unsigned long long)st.cupti_attached);
	if (st.agreements)
		fprintf(f, "kplan-rt: agreements %llu\n", (unsigned long long)st.agreements);
	if (st.bundle_entries)
		fprintf(f, "kplan-rt: bundle_entries %llu\nkplan-rt: bundle_entry %llu\n"
			"kplan-rt: bundle_match %s\nkplan-rt: bundle_choice %s\n",
			(unsigned long long)st.bundle_entries, (unsigned long long)st.bundle_entry,
			kp_bundle_match_name((int)st.bundle_match), rt->choice);
	for (i = 1; i < KP_RT_R_COUNT; i++) {
		if (st.eager_by_reason[i])
			fprintf(f, "kplan-rt: eager.%s %llu\n", kp_rt_reason_name(i),
				(unsigned long long)st.eager_by_reason[i]);
		if (st.failures[i])
			fprintf(f, "kplan-rt: failures.%s %llu\n", kp_rt_reason_name(i),
				(unsigned long long)st.failures[i]);
	}
	if (st.replays && (rt->opt.flags & KP_RT_TIMING))
		fprintf(f, "kplan-rt: replay_host_ns_avg %.0f\nkplan-rt: replay_launch_ns_avg %.0f\n"
			"kplan-rt: replay_patch_ns_avg %.0f\n",
			(double)st.replay_host_ns / st.replays,
			(double)st.replay_launch_ns / st.replays,
			(double)st.replay_patch_ns / st.replays);
	kp__rt_fusion_print(rt->fusion, f);   /* fusion hook */
}

KP_RT_API void kp_rt_close(kp_rt *rt)
{
	struct kp_rt **pp;
	size_t i;

	if (!rt)
		return;
	pthread_mutex_lock(&open_lock);
	for (pp = &open_list; *pp; pp = &(*pp)->next_open) {
		if (*pp == rt) {
			*pp = rt->next_open;
			break;
		}
	}
	pthread_mutex_unlock(&open_lock);
	if (rt->opt.flags & KP_RT_PRINT_STATS)
		kp_rt_print_stats(rt, stderr);
	for (i = 0; i < rt->regions.len; i++) {
		struct region *reg = rt->regions.data[i];

		while (reg->entries) {
			struct entry *e = reg->entries;

			reg->entries = e->next;
			entry_free(rt, e);
		}
		free(reg->name);
		free(reg);
	}
	kp_vec_release(&rt->regions);
	kp_strmap_release(&rt->names);
	kp__rt_fusion_close(rt->fusion);      /* fusion hook; before the plan it points into */
	kp_plan_free(rt->plan);
	kp_strbuf_release(&rt->aten_sha);
	free(rt->aten_path);
	pthread_mutex_destroy(&rt->lock);
	if (rt->be.destroy)
		rt->be.destroy(rt->be.ctx);
	free(rt);
}

/* ---------------------------------------------------------------------- */
/* for callers that capture by other means (the PyTorch package) */

KP_RT_API int kp_rt_region_plan(kp_rt *rt, const char *name, struct kp_rt_region_info *info)
{
	const struct kp_plan_region *pr;
	size_t i;

	if (!name || !info)
		return -1;
	memset(info, 0, sizeof(*info));
	if (!rt || !rt->plan || rt->global_reason || !(pr = kp_plan_find(rt->plan, name)))
		return 1;
	info->decision = pr->decision;
	info->warmup = rt->opt.warmup >= 0 ? rt->opt.warmup : (int)pr->warmup;
	info->kernels = pr->kernels;
	info->n_patches = (uint32_t)pr->n_patches;
	for (i = 0; i < pr->n_patches; i++)
		info->n_scalar_patches += pr->patches[i].scalar != 0;
	info->fingerprint = pr->fingerprint;
	snprintf(info->reason, sizeof(info->reason), "%s", kp_plan_reason_name(pr->reason) ?
		 kp_plan_reason_name(pr->reason) : "?");
	info->bundle_entry = (uint32_t)rt->st.bundle_entry;
	info->bundle_match = (uint32_t)rt->st.bundle_match;
	return 0;
}

KP_RT_API const char *kp_rt_plan_choice(kp_rt *rt)
{
	return rt ? rt->choice : "";
}

KP_RT_API const char *kp_rt_aten_groups(kp_rt *rt, uint64_t *plan_hash)
{
	if (plan_hash)
		*plan_hash = rt && rt->aten_path ? rt->aten_plan_hash : 0;
	return rt && rt->aten_path ? rt->aten_path : NULL;
}

const struct kp__rt_backend *kp__rt_backend_of(const kp_rt *rt)
{
	return rt ? &rt->be : NULL;
}

KP_RT_API void kp_rt_range_push(kp_rt *rt, const char *name, int kind)
{
	if (rt && rt->be.range_push)
		rt->be.range_push(rt->be.ctx, name ? name : "", kind);
}

KP_RT_API void kp_rt_range_pop(kp_rt *rt)
{
	if (rt && rt->be.range_pop)
		rt->be.range_pop(rt->be.ctx);
}

/* One public watch at a time; its launches are not kept (no entry). */
static pthread_mutex_t pub_watch_lock = PTHREAD_MUTEX_INITIALIZER;
static int pub_watching;

KP_RT_API int kp_rt_watch_begin(kp_rt *rt, void *stream, unsigned flags)
{
	int rc;

	if (!rt || !rt->be.watch_begin || !rt->be.watch_end)
		return -1;
	pthread_mutex_lock(&pub_watch_lock);
	rc = rt->be.watch_begin(rt->be.ctx, stream, flags);
	if (rc) {
		pthread_mutex_unlock(&pub_watch_lock);
		ADD(rt, unwatched, 1);
		return -1;
	}
	pub_watching = 1;
	return 0;   /* pub_watch_lock held until kp_rt_watch_end */
}

KP_RT_API int kp_rt_watch_end(kp_rt *rt, struct kp_rt_watch_result *res)
{
	struct kp__rt_watch w;

	memset(&w, 0, sizeof(w));
	if (!rt || !pub_watching) {
		if (res) {
			memset(res, 0, sizeof(*res));
			res->verdict = -1;
			snprintf(res->msg, sizeof(res->msg), "could not check: no watch running");
		}
		return -1;
	}
	rt->be.watch_end(rt->be.ctx, &w);
	pub_watching = 0;
	pthread_mutex_unlock(&pub_watch_lock);
	ADD(rt, watched, 1);
	if (res)
		*res = w.res;
	return w.res.verdict;
}

KP_RT_API void kp_rt_watch_release(kp_rt *rt)
{
	if (rt && rt->be.watch_release)
		rt->be.watch_release(rt->be.ctx);
}

KP_RT_API void kp_rt_set_agree(kp_rt *rt, kp_rt_agree_fn fn, void *ctx)
{
	if (!rt)
		return;
	rt->agree = fn;
	rt->agree_ctx = ctx;
}

/* Print the counters of handles never closed (KPLAN_RT_STATS=1). */
__attribute__((destructor)) static void print_open_at_exit(void)
{
	struct kp_rt *rt;

	for (rt = open_list; rt; rt = rt->next_open) {
		if (rt->opt.flags & KP_RT_PRINT_STATS)
			kp_rt_print_stats(rt, stderr);
	}
}

/*
 * Whether kp_rt_kernel_load may compile src[0..len) (rt_internal.h): with a
 * trust list only a torch fusion source whose SHA-256 is one the plan's
 * signature covered, so that a source swapped after the check is refused.
 */
int kp__rt_source_trusted(kp_rt *rt, const char *src, size_t len)
{
	uint8_t sha[crypto_hash_sha256_BYTES];
	size_t i;

	if (!rt->trusted)
		return 1;
	crypto_hash_sha256(sha, (const unsigned char *)src, len);
	for (i = 0; i + sizeof(sha) <= rt->aten_sha.len; i += sizeof(sha))
		if (!memcmp(rt->aten_sha.buf + i, sha, sizeof(sha)))
			return 1;
	return 0;
}
