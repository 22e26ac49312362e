/*
 * watch.c - would a stream capture hold a region's body? One eager call of
 * it watched with CUPTI callbacks, before the region's first capture
 * (runtime/watch.h).
 *
 * A capture that meets a synchronisation, an allocation, a query or a
 * launch on a stream outside the capture fails, and the application sees
 * the error. So the runtime first runs the body once eagerly under CUPTI
 * callbacks on every runtime and driver API call, and classifies the calls
 * of the watching thread:
 *
 * - Streams. The capture stream starts the family; an event recorded on a
 *   family stream and waited on by another stream forks that stream into
 *   it. Every launch, copy, memset, host function, stream-ordered
 *   allocation or graph launch must go to a family stream. Joins are
 *   tracked with vector clocks (each family stream knows the latest
 *   operation of every other member that precedes it; events carry a copy):
 *   at the end every forked stream's last work must precede the capture
 *   stream's end. Stream 0 is the legacy stream for the plain entry points
 *   and the per-thread stream for the _ptsz/_ptds ones; a capture stream
 *   given as 0 is settled by the body (per-thread use: w->per_thread).
 * - Calls no capture holds, by name (every flavour, _v2, _ptsz...; the
 *   capture-breaking classes of common/cuda_api.def, watch_calls.h):
 *   synchronisations, queries, allocations (allowed with
 *   KP_RT_WATCH_ALLOW_ALLOC), synchronous copies and memsets, stream
 *   callbacks, device limits, nested captures; asynchronous copies from or
 *   to pageable host memory.
 * - Kernel launches on family streams are recorded in order with their
 *   parameter bytes, laid out by cuFuncGetParamInfo (cuda_backend.c's
 *   layout cache). A runtime launch gets its CUfunction from
 *   cudaGetFuncBySymbol; when that fails (a kernel of another, static,
 *   CUDA runtime) the driver launch the runtime makes inside it supplies
 *   the handle and the parameter array. A driver call made inside a runtime
 *   call is never classified again, so each launch is counted once whether
 *   or not CUPTI reports the nested driver call.
 *
 * Only the first offending call is reported. Past 100000 launches, 64 MiB
 * of parameter bytes or 32 family streams nothing more is recorded, and
 * the verdict is -1 ("could not check: body too large") unless an offence
 * was found. libcupti is loaded with
 * dlopen (libkplanrt does not link it). The subscription outlives a watch,
 * narrowed to a few calls, and CUPTI is detached (cuptiFinalize) once no
 * watch has run for a while (see "the subscription" below): the watches of
 * a start-up share one attachment, and the rest of the process runs with
 * no CUPTI at all. CUPTI takes one subscriber: with another one attached
 * (kplan record), begin fails and the verdict is -1.
 *
 * The CUDA calls made from inside a callback (cudaGetFuncBySymbol,
 * cudaPointerGetAttributes, the layout probe) raise callbacks of their
 * own: a thread-local depth makes the callback ignore them.
 */
#include "watch.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>   /* types, ids and the *_params structs; nothing is linked */

#include "../common/arena.h"
#include "../common/cuda_api.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/u64map.h"
#include "../common/vec.h"
#include "watch_calls.h"

#ifndef KP_CUDA_HOME
#define KP_CUDA_HOME "/usr/local/cuda"
#endif

#define MAX_LAUNCHES 100000
#define MAX_PARAM_BYTES ((size_t)64 << 20)
#define MAX_STREAMS 32
#define N_CLS 2048            /* callback ids with a cached class, per domain */
#define NO_VIEW UINT32_MAX
#define GATE_WAIT_S 10        /* the longest a begin waits for another thread's watch */

/* stream identities: the handle, or one of these for the default streams */
#define ID_LEGACY ((uint64_t)1)   /* cudaStreamLegacy, CU_STREAM_LEGACY */
#define ID_PT ((uint64_t)2)       /* cudaStreamPerThread, CU_STREAM_PER_THREAD */

/* ------------------------------------------------------------------------ */
/* libcupti, loaded once per process */

static struct {
	pthread_once_t once;
	int ok;
	char err[200];
	__typeof__(&cuptiSubscribe) Subscribe;
	__typeof__(&cuptiUnsubscribe) Unsubscribe;
	__typeof__(&cuptiEnableDomain) EnableDomain;
	__typeof__(&cuptiGetResultString) GetResultString;
	__typeof__(&cuptiEnableCallback) EnableCallback;
	__typeof__(&cuptiFinalize) Finalize;    /* NULL: detaching is off */
} cupti = { .once = PTHREAD_ONCE_INIT };

/*
 * The subscription, one per process, kept from one watch to the next.
 *
 * Unsubscribing does not detach CUPTI from the driver: once attached, every
 * later CUDA call of the process paid for it (about 0.5 us a launch:
 * tests/gpu/watch_check.sh's cost case measures it). Only cuptiFinalize
 * detaches, and NVIDIA documents it as safe only from inside a callback at
 * an API exit. So when a watch ends the subscription stays, narrowed to the
 * exits of the launch calls (detach_cbids), and the first such exit
 * DETACH_DELAY_MS after the last
 * watch finalizes. The delay lets the watches of one start-up (every region
 * warms up in the same few steps) share one attachment: each attachment
 * costs CUPTI's initialisation, 12-22 ms. When the caller knows that no
 * other watch is coming (core.c: no region is between its first warm-up
 * call and its watch), kp__rt_watch_release detaches at once. A watch that
 * begins while the subscription is idle widens it again.
 * KPLAN_RT_WATCH_DETACH=0 keeps CUPTI attached for the life of the process
 * instead (as a profiler would), =ms sets the delay.
 */
#define DETACH_DELAY_MS 200

static struct {
	pthread_mutex_t mu;           /* subscribe, widen, narrow, finalize */
	CUpti_SubscriberHandle h;
	int subscribed;               /* 1 while h is valid */
	int idle;                     /* narrowed: waiting to detach (atomic) */
	int64_t idle_since_ns;        /* when it was narrowed (atomic) */
	int64_t delay_ns;             /* < 0: never detach */
	int inflight;                 /* threads in an idle callback (atomic) */
	uint64_t attaches, detaches;
} sub = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* the watch in progress, NULL between watches (the gate orders writes) */
static struct kp__rt_watcher *cur_w;

/* the launch calls whose exits may detach: the calls a busy process makes */
static const struct { CUpti_CallbackDomain dom; CUpti_CallbackId id; } detach_cbids[] = {
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020 },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz },
	/* the call kp__rt_watch_release makes to detach at once */
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 },
};

static void cupti_load(void)
{
	static const char *const libs[] = {
		"libcupti.so.13", "libcupti.so",
		KP_CUDA_HOME "/lib64/libcupti.so.13", KP_CUDA_HOME "/lib64/libcupti.so",
		KP_CUDA_HOME "/extras/CUPTI/lib64/libcupti.so.13",
		KP_CUDA_HOME "/extras/CUPTI/lib64/libcupti.so",
		"/usr/local/cuda/lib64/libcupti.so",
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
	};
	const char *why = "not found";
	void *h = NULL, *fn;
	size_t i;

	for (i = 0; i < sizeof(libs) / sizeof(libs[0]) && !h; i++) {
		h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
		if (!h && i == 0)
			why = dlerror();
	}
	if (!h) {
		snprintf(cupti.err, sizeof(cupti.err), "cannot load libcupti.so.13 (%s)",
			 why ? why : "?");
		return;
	}
#define SYM(name, field) \
	if (!(fn = dlsym(h, #name))) { \
		snprintf(cupti.err, sizeof(cupti.err), "libcupti has no %s", #name); \
		return; \
	} \
	memcpy(&cupti.field, &fn, sizeof(fn));
	SYM(cuptiSubscribe, Subscribe)
	SYM(cuptiUnsubscribe, Unsubscribe)
	SYM(cuptiEnableDomain, EnableDomain)
	SYM(cuptiGetResultString, GetResultString)
	SYM(cuptiEnableCallback, EnableCallback)
#undef SYM
	sub.delay_ns = (int64_t)DETACH_DELAY_MS * 1000000;
	if ((fn = dlsym(h, "cuptiFinalize"))) {
		const char *e = getenv("KPLAN_RT_WATCH_DETACH");
		char *end;
		long ms = e && *e ? strtol(e, &end, 10) : -1;

		if (e && *e && (*end || ms < 0))
			kp_warn("runtime: KPLAN_RT_WATCH_DETACH=%s is not a number of milliseconds; "
				"%d used", e, DETACH_DELAY_MS);
		else if (ms == 0)
			sub.delay_ns = -1;
		else if (ms > 0)
			sub.delay_ns = (int64_t)ms * 1000000;
		if (sub.delay_ns >= 0)
			memcpy(&cupti.Finalize, &fn, sizeof(fn));
	}
	cupti.ok = 1;           /* never unloaded: CUPTI does not support it */
}

static const char *cupti_str(CUptiResult r)
{
	const char *s = NULL;

	if (cupti.GetResultString(r, &s) != CUPTI_SUCCESS || !s)
		s = "unknown CUPTI error";
	return s;
}

/* ------------------------------------------------------------------------ */
/* one watch at a time per process */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_busy;
static pthread_t gate_owner;

/*
 * 0 once this thread holds the gate; -1 when it holds it already, or when
 * another thread's watch has not ended after GATE_WAIT_S (its body may be
 * waiting for this thread: better unchecked than deadlocked).
 */
static int gate_enter(void)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GATE_WAIT_S;
	pthread_mutex_lock(&gate_mu);
	if (gate_busy && pthread_equal(gate_owner, pthread_self()))
		rc = -1;
	while (!rc && gate_busy)
		rc = pthread_cond_timedwait(&gate_cv, &gate_mu, &until) ? -1 : 0;
	if (!rc) {
		gate_busy = 1;
		gate_owner = pthread_self();
	}
	pthread_mutex_unlock(&gate_mu);
	return rc;
}

static void gate_leave(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_busy = 0;
	pthread_cond_signal(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

/* ------------------------------------------------------------------------ */
/* the watch state */

/* a stream of the family: index 0 is the capture stream */
struct wstream {
	uint64_t id;
	uint64_t last_work;           /* seq of its last work (0: none) */
	uint64_t vc[MAX_STREAMS];     /* per member: last seq known to precede it */
	const char *last_kernel;      /* stable name, or NULL */
	const char *fork_kernel;      /* last kernel launched before the fork */
};

struct wevent {
	int family;                   /* last recorded on a family stream */
	int stream;                   /* which */
	uint64_t vc[MAX_STREAMS];     /* that stream's clock at the record */
};

/* a recorded launch; parameters at an offset of w->params (it moves) */
struct wrec {
	const char *name;
	uint32_t n_params;
	const uint32_t *off, *size;
	size_t params_off, params_len;
};

/*
 * The launches of one ended watch, handed to the thread that ended it: they
 * stay valid until that thread begins again on the same backend (or the
 * backend is destroyed), whatever other threads watch meanwhile.
 */
struct wresult {
	struct wresult *next;
	pthread_t owner;
	struct kp__rt_wlaunch *launches;
	unsigned char *params;        /* what launches[i].params point into */
	struct kp_arena arena;        /* the kernel names CUPTI gave */
};

enum { W_IDLE, W_ACTIVE, W_DONE, W_FAILED };

struct kp__rt_watcher {
	kp__rt_layout_fn layout;      /* kernels' parameter layouts (the backend's) */
	void *cx;                     /* its context */
	pthread_t thread;             /* the watched thread */
	int state;
	int on;                       /* callbacks count (atomic) */
	unsigned flags;
	char fail[256];               /* W_FAILED: why */

	struct kp_rt_watch_result res;/* verdict 1 once an offence is found */
	char cant[96];                /* could not check (bounds): why */
	int per_thread;
	int cap_open;                 /* capture stream given as 0: not settled yet */
	int cap_blocking;             /* capture stream waits for legacy-stream work */
	uint64_t seq;
	const char *last_kernel;
	size_t pending;               /* recs index + 1 of a runtime launch whose
					 parameters the nested driver launch gives */

	struct wstream streams[MAX_STREAMS];
	size_t n_streams;

	KP_VEC(struct wevent) events;
	struct kp_u64map ev_idx;      /* event handle -> events index */

	KP_VEC(struct wrec) recs;
	KP_VEC(unsigned char) params;
	struct wresult *results;      /* one per thread, latest watch */

	/* layouts: host stub (runtime) or driver handle -> views index */
	struct kp_u64map rt_fn, drv_fn;
	KP_VEC(struct kp__rt_layout_view) views;

	/* kernel names CUPTI gave (symbolName pointer -> names index) */
	struct kp_u64map name_idx;
	KP_VEC(const char *) names;
	struct kp_arena arena;
};

/* CUDA calls of our own (inside a callback) and the runtime call depth */
static _Thread_local int tl_self;
static _Thread_local int tl_rt_depth;

static uint64_t stream_id(const void *s, int pt)
{
	uintptr_t h = (uintptr_t)s;

	return h ? (uint64_t)h : pt ? ID_PT : ID_LEGACY;
}

static const char *sname(uint64_t id, char *buf, size_t n)
{
	if (id == ID_LEGACY)
		return "the legacy default stream";
	if (id == ID_PT)
		return "the per-thread default stream";
	snprintf(buf, n, "stream 0x%llx", (unsigned long long)id);
	return buf;
}

static const char *cap_name(struct kp__rt_watcher *w, char *buf, size_t n)
{
	return w->cap_open ? "the default stream (0)" : sname(w->streams[0].id, buf, n);
}

/* the API name without its _vNNNN / _ptsz / _ptds suffixes */
static void call_name(char *dst, size_t n, const char *fn)
{
	size_t len;
	int again = 2;

	snprintf(dst, n, "%s", fn ? fn : "?");
	while (again--) {
		char *u = strrchr(dst, '_');

		if (!u)
			break;
		if (u[1] == 'v' && (len = strspn(u + 2, "0123456789")) && !u[2 + len])
			*u = 0;
		else if (!strcmp(u, "_ptsz") || !strcmp(u, "_ptds"))
			*u = 0;
		else
			break;
	}
}

static void offend(struct kp__rt_watcher *w, const CUpti_CallbackData *cb,
		   const char *kernel, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* the first call that would break the capture */
static void offend(struct kp__rt_watcher *w, const CUpti_CallbackData *cb,
		   const char *kernel, const char *fmt, ...)
{
	va_list ap;

	if (w->res.verdict > 0)
		return;
	w->res.verdict = 1;
	if (cb)
		call_name(w->res.call, sizeof(w->res.call), cb->functionName);
	snprintf(w->res.kernel, sizeof(w->res.kernel), "%s", kernel ? kernel : "");
	va_start(ap, fmt);
	vsnprintf(w->res.msg, sizeof(w->res.msg), fmt, ap);
	va_end(ap);
	kp_debug("runtime: watch: would break a capture: %s", w->res.msg);
}

static void cant(struct kp__rt_watcher *w, const char *why)
{
	if (!w->cant[0]) {
		snprintf(w->cant, sizeof(w->cant), "could not check: %s", why);
		kp_debug("runtime: watch: %s", w->cant);
	}
}

/* " (after kernel K)", or "" before the first kernel */
static const char *after(struct kp__rt_watcher *w, char *buf, size_t n)
{
	if (!w->last_kernel)
		return "";
	snprintf(buf, n, " (after kernel %.100s)", w->last_kernel);
	return buf;
}

/* a stable copy of a name CUPTI gave */
static const char *intern(struct kp__rt_watcher *w, const char *s)
{
	uint32_t ix;
	char *c;

	if (!s)
		return "?";
	if (kp_u64map_get(&w->name_idx, (uint64_t)(uintptr_t)s, &ix) &&
	    !strcmp(w->names.data[ix], s))
		return w->names.data[ix];
	if (!(c = kp_arena_strdup(&w->arena, s)) || kp_vec_push(&w->names, c))
		return "?";
	kp_u64map_put(&w->name_idx, (uint64_t)(uintptr_t)s, (uint32_t)(w->names.len - 1));
	return c;
}

/* ------------------------------------------------------------------------ */
/* streams and events */

/* The family index of stream id (settling a capture stream given as 0 at its
 * first per-thread use), or -1. */
static int member(struct kp__rt_watcher *w, uint64_t id)
{
	size_t i;

	for (i = 0; i < w->n_streams; i++) {
		if (w->streams[i].id == id) {
			if (!i && id == ID_PT)
				w->per_thread = 1;
			return (int)i;
		}
	}
	if (w->cap_open && id == ID_PT) {
		w->cap_open = 0;
		w->streams[0].id = ID_PT;
		w->per_thread = 1;
		return 0;
	}
	return -1;
}

/*
 * Work on stream s (what: the kernel, or NULL for another operation): its
 * family index, or -1 after an offence.
 */
static int stream_op(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, const void *s,
		     int pt, const char *what)
{
	uint64_t id = stream_id(s, pt);
	char call[64], b1[40], b2[40], k[128];
	const char *x, *y;
	int i;

	if (id != ID_LEGACY && (i = member(w, id)) >= 0)
		return i;
	call_name(call, sizeof(call), cb->functionName);
	if (what)
		snprintf(k, sizeof(k), "kernel %.100s launched", what);
	else
		snprintf(k, sizeof(k), "%s", call);
	x = sname(id, b1, sizeof(b1));
	y = cap_name(w, b2, sizeof(b2));
	if (id == ID_LEGACY && w->cap_open)
		offend(w, cb, what ? what : w->last_kernel, "%s on the legacy default stream, which "
		       "a capture cannot hold: pass the region a created stream (or compile with "
		       "--default-stream per-thread)", k);
	else if (id == ID_LEGACY)
		offend(w, cb, what ? what : w->last_kernel, "%s on the legacy default stream inside "
		       "a region captured on %s: pass %s (or compile with --default-stream "
		       "per-thread)", k, y, y);
	else
		offend(w, cb, what ? what : w->last_kernel, "%s on %s while the region captures "
		       "%s: %s it on %s or fork %s from %s with an event", k, x, y,
		       what ? "launch" : "issue", y, x, y);
	return -1;
}

static void work(struct kp__rt_watcher *w, int i)
{
	uint64_t q = ++w->seq;

	w->streams[i].vc[i] = q;
	w->streams[i].last_work = q;
}

static struct wevent *event_get(struct kp__rt_watcher *w, const void *ev, int create)
{
	struct wevent e;
	uint32_t ix;

	if (kp_u64map_get(&w->ev_idx, (uint64_t)(uintptr_t)ev, &ix))
		return &w->events.data[ix];
	if (!create)
		return NULL;
	memset(&e, 0, sizeof(e));
	if (kp_vec_push(&w->events, e) ||
	    kp_u64map_put(&w->ev_idx, (uint64_t)(uintptr_t)ev, (uint32_t)(w->events.len - 1))) {
		cant(w, "out of memory");
		return NULL;
	}
	return &w->events.data[w->events.len - 1];
}

static void ev_record(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, const void *ev,
		      const void *s, int pt)
{
	uint64_t id = stream_id(s, pt);
	struct wevent *e;
	char call[64], b[40];
	int i;

	if (id == ID_LEGACY) {
		/* it waits for every blocking stream: the capture one too */
		if (w->cap_blocking || w->cap_open) {
			call_name(call, sizeof(call), cb->functionName);
			offend(w, cb, w->last_kernel, "%s on the legacy default stream inside a region "
			       "captured on %s: the legacy stream waits for the captured one, which a "
			       "capture cannot hold: record the event on that stream", call,
			       cap_name(w, b, sizeof(b)));
		}
		if ((e = event_get(w, ev, 0)))
			e->family = 0;
		return;
	}
	i = member(w, id);
	if (!(e = event_get(w, ev, i >= 0)))
		return;
	if (i < 0) {
		e->family = 0;
		return;
	}
	e->family = 1;
	e->stream = i;
	memcpy(e->vc, w->streams[i].vc, w->n_streams * sizeof(e->vc[0]));
}

static void ev_wait(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, const void *s,
		    int pt, const void *ev)
{
	uint64_t id = stream_id(s, pt);
	struct wevent *e = event_get(w, ev, 0);
	struct wstream *st;
	char call[64], b[40];
	size_t j;
	int i;

	if (!e || !e->family)
		return;       /* recorded before the region or outside the family */
	if (id == ID_LEGACY) {
		call_name(call, sizeof(call), cb->functionName);
		offend(w, cb, w->last_kernel, "%s makes the legacy default stream wait for work of "
		       "the region captured on %s: the legacy stream cannot be captured: wait on a "
		       "created stream", call, cap_name(w, b, sizeof(b)));
		return;
	}
	if ((i = member(w, id)) < 0) {
		if (w->n_streams == MAX_STREAMS) {
			cant(w, "more than 32 streams forked");
			return;
		}
		i = (int)w->n_streams++;
		st = &w->streams[i];
		memset(st, 0, sizeof(*st));
		st->id = id;
		st->fork_kernel = w->streams[e->stream].last_kernel;
	}
	st = &w->streams[i];
	for (j = 0; j < w->n_streams; j++) {
		if (e->vc[j] > st->vc[j])
			st->vc[j] = e->vc[j];
	}
}

/* every forked stream's last work must precede the capture stream's end */
static void check_joined(struct kp__rt_watcher *w)
{
	char b1[40], b2[40];
	size_t i;

	for (i = 1; i < w->n_streams && w->res.verdict <= 0; i++) {
		const struct wstream *st = &w->streams[i];

		if (!st->last_work || w->streams[0].vc[i] >= st->last_work)
			continue;
		w->res.verdict = 1;
		snprintf(w->res.call, sizeof(w->res.call), "cudaStreamWaitEvent");
		snprintf(w->res.kernel, sizeof(w->res.kernel), "%s",
			 st->last_kernel ? st->last_kernel : "");
		snprintf(w->res.msg, sizeof(w->res.msg), "%s forked %s%.80s never joined back: "
			 "record an event on it after its last launch and cudaStreamWaitEvent(%s, "
			 "that event)", sname(st->id, b1, sizeof(b1)),
			 st->fork_kernel ? "after kernel " : "at the start of the region",
			 st->fork_kernel ? st->fork_kernel : "", cap_name(w, b2, sizeof(b2)));
		kp_debug("runtime: watch: would break a capture: %s", w->res.msg);
	}
}

/* ------------------------------------------------------------------------ */
/* copies and kernel launches */

/* 1 when p is pageable (unregistered) host memory */
static int pageable(const void *p)
{
	struct cudaPointerAttributes a;
	cudaError_t e;

	if (!p)
		return 0;
	tl_self++;
	memset(&a, 0, sizeof(a));
	e = cudaPointerGetAttributes(&a, p);
	if (e != cudaSuccess)
		cudaGetLastError();
	tl_self--;
	return e == cudaSuccess && a.type == cudaMemoryTypeUnregistered;
}

/* an asynchronous copy: dst/src NULL for sides that are arrays or symbols */
static void copy_op(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, const void *s,
		    int pt, const void *dst, const void *src, int kind)
{
	int i = stream_op(w, cb, s, pt, NULL), host_src, host_dst;
	const char *dir = NULL;
	char call[64];

	if (i < 0)
		return;
	host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost ||
		   kind == cudaMemcpyDefault;
	host_dst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost ||
		   kind == cudaMemcpyDefault;
	if (host_src && pageable(src))
		dir = "from";
	else if (host_dst && pageable(dst))
		dir = "to";
	if (dir) {
		call_name(call, sizeof(call), cb->functionName);
		offend(w, cb, w->last_kernel, "%s %s pageable host memory: use cudaMallocHost / "
		       "cudaHostRegister for that buffer", call, dir);
		return;
	}
	work(w, i);
}

/* a driver copy side: the pointer to check for pageable memory, or NULL */
static const void *drv_side(CUmemorytype t, const void *host, CUdeviceptr dev)
{
	return t == CU_MEMORYTYPE_HOST ? host :
	       t == CU_MEMORYTYPE_UNIFIED ? (const void *)(uintptr_t)dev : NULL;
}

/* a driver 2D/3D copy (CUDA_MEMCPY2D and CUDA_MEMCPY3D name their sides alike) */
#define DRV_COPY_ND(w, cb, c, s, pt) \
	do { \
		if (c) \
			copy_op(w, cb, s, pt, \
				drv_side((c)->dstMemoryType, (c)->dstHost, (c)->dstDevice), \
				drv_side((c)->srcMemoryType, (c)->srcHost, (c)->srcDevice), \
				cudaMemcpyDefault); \
		else \
			other_op(w, cb, s, pt); \
	} while (0)

static void other_op(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, const void *s,
		     int pt)
{
	int i = stream_op(w, cb, s, pt, NULL);

	if (i >= 0)
		work(w, i);
}

/* the layout behind a driver handle (a CUkernel, or a CUfunction), cached */
static const struct kp__rt_layout_view *drv_layout(struct kp__rt_watcher *w, void *f)
{
	struct kp__rt_layout_view v;
	uint32_t ix;
	int rc;

	if (!f)
		return NULL;
	if (kp_u64map_get(&w->drv_fn, (uint64_t)(uintptr_t)f, &ix))
		return ix == NO_VIEW ? NULL : &w->views.data[ix];
	/*
	 * The runtime launches CUkernel handles cast to CUfunction; modules
	 * loaded with cuModuleLoad give CUfunctions. A CUkernel is resolved to
	 * the current context's function first, so that a function handle is
	 * never probed as a CUkernel's.
	 */
	tl_self++;
	rc = w->layout(w->cx, f, 1, &v);
	if (rc)
		rc = w->layout(w->cx, f, 0, &v);
	tl_self--;
	if (rc || kp_vec_push(&w->views, v)) {
		kp_debug("runtime: watch: no parameter layout for kernel handle %p", f);
		kp_u64map_put(&w->drv_fn, (uint64_t)(uintptr_t)f, NO_VIEW);
		return NULL;
	}
	kp_u64map_put(&w->drv_fn, (uint64_t)(uintptr_t)f, (uint32_t)(w->views.len - 1));
	return &w->views.data[w->views.len - 1];
}

/* the layout behind a runtime host stub, cached */
static const struct kp__rt_layout_view *rt_layout(struct kp__rt_watcher *w, const void *func)
{
	struct kp__rt_layout_view v;
	cudaFunction_t f = NULL;
	cudaError_t pre, e;
	uint32_t ix;
	int rc = -1;

	if (kp_u64map_get(&w->rt_fn, (uint64_t)(uintptr_t)func, &ix))
		return ix == NO_VIEW ? NULL : &w->views.data[ix];
	tl_self++;
	pre = cudaPeekAtLastError();
	e = cudaGetFuncBySymbol(&f, func);
	if (e != cudaSuccess && pre == cudaSuccess)
		cudaGetLastError();   /* ours, not the application's */
	if (e == cudaSuccess && f)
		rc = w->layout(w->cx, f, 0, &v);
	tl_self--;
	if (rc || kp_vec_push(&w->views, v)) {
		kp_u64map_put(&w->rt_fn, (uint64_t)(uintptr_t)func, NO_VIEW);
		return NULL;
	}
	kp_u64map_put(&w->rt_fn, (uint64_t)(uintptr_t)func, (uint32_t)(w->views.len - 1));
	return &w->views.data[w->views.len - 1];
}

/* a new launch record (index + 1), 0 past the bounds */
static size_t add_rec(struct kp__rt_watcher *w, const char *name)
{
	struct wrec r;

	if (w->recs.len >= MAX_LAUNCHES) {
		cant(w, "body too large");
		return 0;
	}
	memset(&r, 0, sizeof(r));
	r.name = name;
	if (kp_vec_push(&w->recs, r)) {
		cant(w, "out of memory");
		return 0;
	}
	return w->recs.len;
}

/* the parameter bytes of record ri from kp (the launch's array) or extra */
static void fill_params(struct kp__rt_watcher *w, size_t ri, const struct kp__rt_layout_view *v,
			void **kp, void **extra)
{
	struct wrec *r = &w->recs.data[ri - 1];
	const unsigned char *buf = NULL;
	size_t bsz = 0, len, i;
	unsigned char *p;

	if (!kp && extra) {
		for (i = 0; extra[i] && extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
				bsz = *(const size_t *)extra[i + 1];
		}
	}
	len = v ? v->len : buf ? bsz : 0;
	if (!len && !v)
		return;
	if (w->params.len + len > MAX_PARAM_BYTES) {
		cant(w, "body too large");
		return;
	}
	if (kp_vec_reserve(&w->params, w->params.len + len)) {
		cant(w, "out of memory");
		return;
	}
	p = w->params.data + w->params.len;
	memset(p, 0, len);
	if (kp && v) {
		for (i = 0; i < v->n_params; i++) {
			if (kp[i])
				memcpy(p + v->off[i], kp[i], v->size[i]);
		}
	} else if (buf) {
		memcpy(p, buf, bsz < len ? bsz : len);
	}
	if (v) {
		r->name = v->name;
		r->n_params = v->n_params;
		r->off = v->off;
		r->size = v->size;
	}
	r->params_off = w->params.len;
	r->params_len = len;
	w->params.len += len;
}

static void rt_launch(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, const void *func,
		      void **args, const void *s, int pt)
{
	const struct kp__rt_layout_view *v;
	const char *name;
	size_t ri;
	int i;

	if ((i = stream_op(w, cb, s, pt, cb->symbolName ? cb->symbolName : "?")) < 0)
		return;
	work(w, i);
	v = rt_layout(w, func);
	name = v ? v->name : intern(w, cb->symbolName);
	w->last_kernel = w->streams[i].last_kernel = name;
	if (w->cant[0] || !(ri = add_rec(w, name)))
		return;
	if (v)
		fill_params(w, ri, v, args, NULL);
	else
		w->pending = ri;   /* the nested driver launch may give them */
}

/* the driver launch a runtime launch makes: its handle and parameters */
static void rt_launch_nested(struct kp__rt_watcher *w, void *f, void **kp, void **extra)
{
	size_t ri = w->pending;
	const struct kp__rt_layout_view *v;

	w->pending = 0;
	if ((v = drv_layout(w, f)))
		fill_params(w, ri, v, kp, extra);
	else if (extra)
		fill_params(w, ri, NULL, NULL, extra);
}

static void drv_launch(struct kp__rt_watcher *w, const CUpti_CallbackData *cb, void *f,
		       const void *s, int pt, void **kp, void **extra)
{
	const struct kp__rt_layout_view *v;
	const char *name;
	size_t ri;
	int i;

	if ((i = stream_op(w, cb, s, pt, cb->symbolName ? cb->symbolName : "?")) < 0)
		return;
	work(w, i);
	v = drv_layout(w, f);
	name = v ? v->name : intern(w, cb->symbolName);
	w->last_kernel = w->streams[i].last_kernel = name;
	if (w->cant[0] || !(ri = add_rec(w, name)))
		return;
	if (v || extra)
		fill_params(w, ri, v, v ? kp : NULL, extra);
}

/* ------------------------------------------------------------------------ */
/* calls no capture holds, classified by name (watch_calls.h: every flavour
 * of each, from common/cuda_api.def) */

static uint8_t cls_tab[2][N_CLS];   /* class + 1; 0: not classified yet */

static void blocker(struct kp__rt_watcher *w, int drv, CUpti_CallbackId id,
		    const CUpti_CallbackData *cb)
{
	uint8_t k = id < N_CLS ? cls_tab[drv][id] : 0;
	char c[64], ab[128], b[40], tail[192];
	const char *af, *cap;

	if (!k) {
		k = (uint8_t)(kp__rt_watch_breaker(cb->functionName) + 1);
		if (id < N_CLS)
			cls_tab[drv][id] = k;
	}
	/*
	 * A caching allocator (PyTorch's) allocates, frees and queries the
	 * events of blocks used on other streams; inside its own graph capture
	 * it switches to the graph's pool and stops querying, so with
	 * KP_RT_WATCH_ALLOW_ALLOC none of that is a blocker.
	 */
	if (k == KP_API_OTHER + 1 || kp__rt_watch_allowed(k - 1, w->flags))
		return;
	call_name(c, sizeof(c), cb->functionName);
	af = after(w, ab, sizeof(ab));
	cap = cap_name(w, b, sizeof(b));
	/* the tail of the message; a fix on the capture stream names it (%s) */
	snprintf(tail, sizeof(tail), kp__rt_watch_offence(k - 1), cap);
	offend(w, cb, w->last_kernel, "%s inside the region%s%s", c, af, tail);
}

/* ------------------------------------------------------------------------ */
/* the callbacks */

#define RT(x) CUPTI_RUNTIME_TRACE_CBID_##x
#define DRV(x) CUPTI_DRIVER_TRACE_CBID_##x
/* the parameters, as struct T (the _ptsz flavour has the same layout) */
#define PRM(T) ((const T##_params *)cb->functionParams)

/* runtime async copies and their _ptsz twins: the stream and the sides to check */
#define RCOPY(T, dst, src) \
	case RT(T##_v3020): \
	case RT(T##_ptsz_v7000): { \
		const T##_v3020_params *P = cb->functionParams; \
		copy_op(w, cb, P->stream, id == RT(T##_ptsz_v7000), dst, src, P->kind); \
		break; \
	}

static void on_runtime(struct kp__rt_watcher *w, CUpti_CallbackId id,
		       const CUpti_CallbackData *cb)
{
	int pt;

	if (!cb->functionParams)
		return;
	switch (id) {
	case RT(cudaLaunchKernel_v7000):
	case RT(cudaLaunchKernel_ptsz_v7000):
		rt_launch(w, cb, PRM(cudaLaunchKernel_v7000)->func, PRM(cudaLaunchKernel_v7000)->args,
			  PRM(cudaLaunchKernel_v7000)->stream, id == RT(cudaLaunchKernel_ptsz_v7000));
		break;
	case RT(cudaLaunchCooperativeKernel_v9000):
	case RT(cudaLaunchCooperativeKernel_ptsz_v9000):
		pt = id == RT(cudaLaunchCooperativeKernel_ptsz_v9000);
		rt_launch(w, cb, PRM(cudaLaunchCooperativeKernel_v9000)->func,
			  PRM(cudaLaunchCooperativeKernel_v9000)->args,
			  PRM(cudaLaunchCooperativeKernel_v9000)->stream, pt);
		break;
	case RT(cudaLaunchKernelExC_v11060):
	case RT(cudaLaunchKernelExC_ptsz_v11060): {
		const cudaLaunchKernelExC_v11060_params *p = cb->functionParams;

		if (p->config)
			rt_launch(w, cb, p->func, p->args, p->config->stream,
				  id == RT(cudaLaunchKernelExC_ptsz_v11060));
		break;
	}
	case RT(cudaLaunchHostFunc_v10000):
	case RT(cudaLaunchHostFunc_ptsz_v10000):
		other_op(w, cb, PRM(cudaLaunchHostFunc_v10000)->stream,
			 id == RT(cudaLaunchHostFunc_ptsz_v10000));
		break;
	case RT(cudaGraphLaunch_v10000):
	case RT(cudaGraphLaunch_ptsz_v10000):
		other_op(w, cb, PRM(cudaGraphLaunch_v10000)->stream,
			 id == RT(cudaGraphLaunch_ptsz_v10000));
		break;
	RCOPY(cudaMemcpyAsync, P->dst, P->src)
	RCOPY(cudaMemcpy2DAsync, P->dst, P->src)
	RCOPY(cudaMemcpyToSymbolAsync, NULL, P->src)
	RCOPY(cudaMemcpyFromSymbolAsync, P->dst, NULL)
	case RT(cudaMemcpy3DAsync_v3020):
	case RT(cudaMemcpy3DAsync_ptsz_v7000): {
		const cudaMemcpy3DAsync_v3020_params *p = cb->functionParams;

		if (p->p)
			copy_op(w, cb, p->stream, id == RT(cudaMemcpy3DAsync_ptsz_v7000),
				p->p->dstArray ? NULL : p->p->dstPtr.ptr,
				p->p->srcArray ? NULL : p->p->srcPtr.ptr, p->p->kind);
		else
			other_op(w, cb, p->stream, id == RT(cudaMemcpy3DAsync_ptsz_v7000));
		break;
	}
	RCOPY(cudaMemcpyToArrayAsync, NULL, P->src)
	RCOPY(cudaMemcpyFromArrayAsync, P->dst, NULL)
	RCOPY(cudaMemcpy2DToArrayAsync, NULL, P->src)
	RCOPY(cudaMemcpy2DFromArrayAsync, P->dst, NULL)
	case RT(cudaMemcpyPeerAsync_v4000):
		other_op(w, cb, PRM(cudaMemcpyPeerAsync_v4000)->stream, 0);
		break;
	case RT(cudaMemcpy3DPeerAsync_v4000):
	case RT(cudaMemcpy3DPeerAsync_ptsz_v7000):
		other_op(w, cb, PRM(cudaMemcpy3DPeerAsync_v4000)->stream,
			 id == RT(cudaMemcpy3DPeerAsync_ptsz_v7000));
		break;
	case RT(cudaMemcpyBatchAsync_v13000):
	case RT(cudaMemcpyBatchAsync_ptsz_v13000):
		other_op(w, cb, PRM(cudaMemcpyBatchAsync_v13000)->stream,
			 id == RT(cudaMemcpyBatchAsync_ptsz_v13000));
		break;
	case RT(cudaMemcpy3DBatchAsync_v13000):
	case RT(cudaMemcpy3DBatchAsync_ptsz_v13000):
		other_op(w, cb, PRM(cudaMemcpy3DBatchAsync_v13000)->stream,
			 id == RT(cudaMemcpy3DBatchAsync_ptsz_v13000));
		break;
	case RT(cudaMemsetAsync_v3020):
	case RT(cudaMemsetAsync_ptsz_v7000):
		other_op(w, cb, PRM(cudaMemsetAsync_v3020)->stream,
			 id == RT(cudaMemsetAsync_ptsz_v7000));
		break;
	case RT(cudaMemset2DAsync_v3020):
	case RT(cudaMemset2DAsync_ptsz_v7000):
		other_op(w, cb, PRM(cudaMemset2DAsync_v3020)->stream,
			 id == RT(cudaMemset2DAsync_ptsz_v7000));
		break;
	case RT(cudaMemset3DAsync_v3020):
	case RT(cudaMemset3DAsync_ptsz_v7000):
		other_op(w, cb, PRM(cudaMemset3DAsync_v3020)->stream,
			 id == RT(cudaMemset3DAsync_ptsz_v7000));
		break;
	case RT(cudaMallocAsync_v11020):
	case RT(cudaMallocAsync_ptsz_v11020):
		other_op(w, cb, PRM(cudaMallocAsync_v11020)->hStream,
			 id == RT(cudaMallocAsync_ptsz_v11020));
		break;
	case RT(cudaMallocFromPoolAsync_v11020):
	case RT(cudaMallocFromPoolAsync_ptsz_v11020):
		other_op(w, cb, PRM(cudaMallocFromPoolAsync_v11020)->stream,
			 id == RT(cudaMallocFromPoolAsync_ptsz_v11020));
		break;
	case RT(cudaFreeAsync_v11020):
	case RT(cudaFreeAsync_ptsz_v11020):
		other_op(w, cb, PRM(cudaFreeAsync_v11020)->hStream,
			 id == RT(cudaFreeAsync_ptsz_v11020));
		break;
	case RT(cudaEventRecord_v3020):
	case RT(cudaEventRecord_ptsz_v7000):
		ev_record(w, cb, PRM(cudaEventRecord_v3020)->event, PRM(cudaEventRecord_v3020)->stream,
			  id == RT(cudaEventRecord_ptsz_v7000));
		break;
	case RT(cudaEventRecordWithFlags_v11010):
	case RT(cudaEventRecordWithFlags_ptsz_v11010):
		ev_record(w, cb, PRM(cudaEventRecordWithFlags_v11010)->event,
			  PRM(cudaEventRecordWithFlags_v11010)->stream,
			  id == RT(cudaEventRecordWithFlags_ptsz_v11010));
		break;
	case RT(cudaStreamWaitEvent_v3020):
	case RT(cudaStreamWaitEvent_ptsz_v7000):
		ev_wait(w, cb, PRM(cudaStreamWaitEvent_v3020)->stream,
			id == RT(cudaStreamWaitEvent_ptsz_v7000), PRM(cudaStreamWaitEvent_v3020)->event);
		break;
	default:
		blocker(w, 0, id, cb);
	}
}

/* driver copies: the stream and the sides to check */
#define DCOPY(T, TP, dst, src, kind) \
	case DRV(T): \
	case DRV(TP): \
		copy_op(w, cb, PRM(T)->hStream, id == DRV(TP), dst, src, kind); \
		break;
/* driver operations on a stream that need no more than the stream */
#define DOTHER(T, TP) \
	case DRV(T): \
	case DRV(TP): \
		other_op(w, cb, PRM(T)->hStream, id == DRV(TP)); \
		break;

static void on_driver(struct kp__rt_watcher *w, CUpti_CallbackId id,
		      const CUpti_CallbackData *cb)
{
	if (!cb->functionParams)
		return;
	switch (id) {
	case DRV(cuLaunchKernel):
	case DRV(cuLaunchKernel_ptsz):
		drv_launch(w, cb, PRM(cuLaunchKernel)->f, PRM(cuLaunchKernel)->hStream,
			   id == DRV(cuLaunchKernel_ptsz), PRM(cuLaunchKernel)->kernelParams,
			   PRM(cuLaunchKernel)->extra);
		break;
	case DRV(cuLaunchCooperativeKernel):
	case DRV(cuLaunchCooperativeKernel_ptsz):
		drv_launch(w, cb, PRM(cuLaunchCooperativeKernel)->f,
			   PRM(cuLaunchCooperativeKernel)->hStream,
			   id == DRV(cuLaunchCooperativeKernel_ptsz),
			   PRM(cuLaunchCooperativeKernel)->kernelParams, NULL);
		break;
	case DRV(cuLaunchKernelEx):
	case DRV(cuLaunchKernelEx_ptsz):
		if (PRM(cuLaunchKernelEx)->config)
			drv_launch(w, cb, PRM(cuLaunchKernelEx)->f,
				   PRM(cuLaunchKernelEx)->config->hStream,
				   id == DRV(cuLaunchKernelEx_ptsz), PRM(cuLaunchKernelEx)->kernelParams,
				   PRM(cuLaunchKernelEx)->extra);
		break;
	DOTHER(cuLaunchHostFunc, cuLaunchHostFunc_ptsz)
	DOTHER(cuGraphLaunch, cuGraphLaunch_ptsz)
	DCOPY(cuMemcpyAsync, cuMemcpyAsync_ptsz,
	      (const void *)(uintptr_t)PRM(cuMemcpyAsync)->dst,
	      (const void *)(uintptr_t)PRM(cuMemcpyAsync)->src, cudaMemcpyDefault)
	DCOPY(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, NULL,
	      PRM(cuMemcpyHtoDAsync_v2)->srcHost, cudaMemcpyHostToDevice)
	DCOPY(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, PRM(cuMemcpyDtoHAsync_v2)->dstHost,
	      NULL, cudaMemcpyDeviceToHost)
	DCOPY(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz, NULL,
	      PRM(cuMemcpyHtoAAsync_v2)->srcHost, cudaMemcpyHostToDevice)
	DCOPY(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz, PRM(cuMemcpyAtoHAsync_v2)->dstHost,
	      NULL, cudaMemcpyDeviceToHost)
	case DRV(cuMemcpy2DAsync_v2):
	case DRV(cuMemcpy2DAsync_v2_ptsz):
		DRV_COPY_ND(w, cb, PRM(cuMemcpy2DAsync_v2)->pCopy, PRM(cuMemcpy2DAsync_v2)->hStream,
			    id == DRV(cuMemcpy2DAsync_v2_ptsz));
		break;
	case DRV(cuMemcpy3DAsync_v2):
	case DRV(cuMemcpy3DAsync_v2_ptsz):
		DRV_COPY_ND(w, cb, PRM(cuMemcpy3DAsync_v2)->pCopy, PRM(cuMemcpy3DAsync_v2)->hStream,
			    id == DRV(cuMemcpy3DAsync_v2_ptsz));
		break;
	DOTHER(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)
	DOTHER(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz)
	DOTHER(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz)
	DOTHER(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz)
	DOTHER(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz)
	DOTHER(cuMemsetD8Async, cuMemsetD8Async_ptsz)
	DOTHER(cuMemsetD16Async, cuMemsetD16Async_ptsz)
	DOTHER(cuMemsetD32Async, cuMemsetD32Async_ptsz)
	DOTHER(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz)
	DOTHER(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz)
	DOTHER(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz)
	DOTHER(cuMemAllocAsync, cuMemAllocAsync_ptsz)
	DOTHER(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)
	DOTHER(cuMemFreeAsync, cuMemFreeAsync_ptsz)
	case DRV(cuEventRecord):
	case DRV(cuEventRecord_ptsz):
		ev_record(w, cb, PRM(cuEventRecord)->hEvent, PRM(cuEventRecord)->hStream,
			  id == DRV(cuEventRecord_ptsz));
		break;
	case DRV(cuEventRecordWithFlags):
	case DRV(cuEventRecordWithFlags_ptsz):
		ev_record(w, cb, PRM(cuEventRecordWithFlags)->hEvent,
			  PRM(cuEventRecordWithFlags)->hStream,
			  id == DRV(cuEventRecordWithFlags_ptsz));
		break;
	case DRV(cuStreamWaitEvent):
	case DRV(cuStreamWaitEvent_ptsz):
		ev_wait(w, cb, PRM(cuStreamWaitEvent)->hStream, id == DRV(cuStreamWaitEvent_ptsz),
			PRM(cuStreamWaitEvent)->hEvent);
		break;
	default:
		blocker(w, 1, id, cb);
	}
}

/* a driver launch inside a runtime call: the runtime launch's parameters */
static void on_driver_nested(struct kp__rt_watcher *w, CUpti_CallbackId id,
			     const CUpti_CallbackData *cb)
{
	if (!cb->functionParams)
		return;
	switch (id) {
	case DRV(cuLaunchKernel):
	case DRV(cuLaunchKernel_ptsz):
		rt_launch_nested(w, PRM(cuLaunchKernel)->f, PRM(cuLaunchKernel)->kernelParams,
				 PRM(cuLaunchKernel)->extra);
		break;
	case DRV(cuLaunchCooperativeKernel):
	case DRV(cuLaunchCooperativeKernel_ptsz):
		rt_launch_nested(w, PRM(cuLaunchCooperativeKernel)->f,
				 PRM(cuLaunchCooperativeKernel)->kernelParams, NULL);
		break;
	case DRV(cuLaunchKernelEx):
	case DRV(cuLaunchKernelEx_ptsz):
		rt_launch_nested(w, PRM(cuLaunchKernelEx)->f, PRM(cuLaunchKernelEx)->kernelParams,
				 PRM(cuLaunchKernelEx)->extra);
		break;
	}
}

/* ------------------------------------------------------------------------ */
/* the subscription: attach, widen, narrow, detach */

/*
 * In an idle subscription's callback, at an API exit: past the delay, and
 * unless a watch is starting (the lock is busy), finalize CUPTI. Any thread
 * may get here; trylock keeps application threads from ever waiting. Only
 * the one thread in an idle callback finalizes: with several (a training
 * step launches from the main thread and autograd's device threads at once)
 * the teardown would run under another thread's callback, a race Kineto
 * found to crash in CUPTI; the next launch exit tries again.
 */
static void maybe_detach(void)
{
	if (!__atomic_load_n(&sub.idle, __ATOMIC_ACQUIRE) || !cupti.Finalize ||
	    kp_now_ns() - __atomic_load_n(&sub.idle_since_ns, __ATOMIC_RELAXED) < sub.delay_ns)
		return;
	if (__atomic_load_n(&sub.inflight, __ATOMIC_ACQUIRE) != 1)
		return;
	if (pthread_mutex_trylock(&sub.mu))
		return;
	if (sub.idle && sub.subscribed && !__atomic_load_n(&cur_w, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&sub.inflight, __ATOMIC_ACQUIRE) == 1) {
		__atomic_store_n(&sub.idle, 0, __ATOMIC_RELEASE);
		sub.subscribed = 0;
		sub.detaches++;
		cupti.Finalize();    /* the handle goes with it */
	}
	pthread_mutex_unlock(&sub.mu);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id,
				 const void *data);

/* Callbacks on every runtime and driver call (the gate is held). */
static CUptiResult sub_widen(void)
{
	CUptiResult r = CUPTI_SUCCESS;

	pthread_mutex_lock(&sub.mu);
	__atomic_store_n(&sub.idle, 0, __ATOMIC_RELEASE);
	if (!sub.subscribed) {
		if ((r = cupti.Subscribe(&sub.h, on_callback, NULL)) != CUPTI_SUCCESS)
			goto out;
		sub.subscribed = 1;
		sub.attaches++;
	}
	if ((r = cupti.EnableDomain(1, sub.h, CUPTI_CB_DOMAIN_RUNTIME_API)) != CUPTI_SUCCESS ||
	    (r = cupti.EnableDomain(1, sub.h, CUPTI_CB_DOMAIN_DRIVER_API)) != CUPTI_SUCCESS) {
		cupti.Unsubscribe(sub.h);
		sub.subscribed = 0;
	}
out:
	pthread_mutex_unlock(&sub.mu);
	return r;
}

/*
 * After a watch: callbacks only at the launch calls' exits, where the
 * detach will happen; or, with detaching off, no subscription (CUPTI stays
 * attached regardless).
 */
static void sub_narrow(void)
{
	size_t i;

	pthread_mutex_lock(&sub.mu);
	if (!sub.subscribed)
		goto out;
	if (!cupti.Finalize) {
		cupti.Unsubscribe(sub.h);
		sub.subscribed = 0;
		goto out;
	}
	cupti.EnableDomain(0, sub.h, CUPTI_CB_DOMAIN_RUNTIME_API);
	cupti.EnableDomain(0, sub.h, CUPTI_CB_DOMAIN_DRIVER_API);
	for (i = 0; i < sizeof(detach_cbids) / sizeof(detach_cbids[0]); i++)
		cupti.EnableCallback(1, sub.h, detach_cbids[i].dom, detach_cbids[i].id);
	__atomic_store_n(&sub.idle_since_ns, kp_now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&sub.idle, 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&sub.mu);
}

void kp__rt_watch_release(void)
{
	int dev;

	if (!__atomic_load_n(&sub.idle, __ATOMIC_ACQUIRE) || !cupti.Finalize)
		return;
	/* due now; the exit of this call's callback detaches */
	__atomic_store_n(&sub.idle_since_ns, kp_now_ns() - sub.delay_ns, __ATOMIC_RELAXED);
	if (cudaGetDevice(&dev) != cudaSuccess)
		cudaGetLastError();
}

/* libkplanrt unloaded (dlclose) while subscribed: no callback may reach it */
__attribute__((destructor)) static void sub_unload(void)
{
	pthread_mutex_lock(&sub.mu);
	if (sub.subscribed)
		cupti.Unsubscribe(sub.h);
	sub.subscribed = 0;
	__atomic_store_n(&sub.idle, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&sub.mu);
}

void kp__rt_watch_counts(uint64_t *attaches, uint64_t *detaches, uint64_t *attached)
{
	pthread_mutex_lock(&sub.mu);
	*attaches = sub.attaches;
	*detaches = sub.detaches;
	*attached = sub.subscribed;
	pthread_mutex_unlock(&sub.mu);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id,
				 const void *data)
{
	struct kp__rt_watcher *w = __atomic_load_n(&cur_w, __ATOMIC_ACQUIRE);
	const CUpti_CallbackData *cb = data;

	(void)ud;
	if (!w) {
		if (cb && cb->callbackSite == CUPTI_API_EXIT) {
			__atomic_add_fetch(&sub.inflight, 1, __ATOMIC_ACQ_REL);
			maybe_detach();
			__atomic_sub_fetch(&sub.inflight, 1, __ATOMIC_ACQ_REL);
		}
		return;
	}
	if (!cb || !pthread_equal(w->thread, pthread_self()) ||
	    !__atomic_load_n(&w->on, __ATOMIC_ACQUIRE) || tl_self)
		return;
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
		if (cb->callbackSite == CUPTI_API_ENTER) {
			if (!tl_rt_depth++ && w->res.verdict <= 0)
				on_runtime(w, id, cb);
		} else if (tl_rt_depth > 0 && !--tl_rt_depth && w->pending) {
			kp_debug("runtime: watch: no parameters for a launch of %s",
				 w->recs.data[w->pending - 1].name);
			w->pending = 0;
		}
	} else if (dom == CUPTI_CB_DOMAIN_DRIVER_API && cb->callbackSite == CUPTI_API_ENTER) {
		if (!tl_rt_depth && w->res.verdict <= 0)
			on_driver(w, id, cb);
		else if (tl_rt_depth && w->pending)
			on_driver_nested(w, id, cb);
	}
}

/* ------------------------------------------------------------------------ */
/* begin / end */

static void reset(struct kp__rt_watcher *w)
{
	memset(&w->res, 0, sizeof(w->res));
	w->cant[0] = 0;
	w->fail[0] = 0;
	w->per_thread = 0;
	w->cap_open = 0;
	w->cap_blocking = 1;
	w->seq = 0;
	w->last_kernel = NULL;
	w->pending = 0;
	memset(&w->streams[0], 0, sizeof(w->streams[0]));
	w->n_streams = 1;
	w->events.len = 0;
	w->recs.len = 0;
	w->params.len = 0;
	w->views.len = 0;
	w->names.len = 0;
	kp_u64map_release(&w->ev_idx);
	kp_u64map_release(&w->rt_fn);
	kp_u64map_release(&w->drv_fn);
	kp_u64map_release(&w->name_idx);
	kp_u64map_init(&w->ev_idx);
	kp_u64map_init(&w->rt_fn);
	kp_u64map_init(&w->drv_fn);
	kp_u64map_init(&w->name_idx);
	kp_arena_release(&w->arena);
	kp_arena_init(&w->arena);
}

static void stop(struct kp__rt_watcher *w)
{
	__atomic_store_n(&w->on, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&cur_w, NULL, __ATOMIC_RELEASE);
	sub_narrow();
}

static void result_free(struct wresult *r)
{
	free(r->launches);
	free(r->params);
	kp_arena_release(&r->arena);
	free(r);
}

/* free what this thread's previous watch on w handed out */
static void results_drop_mine(struct kp__rt_watcher *w)
{
	struct wresult **pp = &w->results, *r;

	while ((r = *pp)) {
		if (pthread_equal(r->owner, pthread_self())) {
			*pp = r->next;
			result_free(r);
		} else {
			pp = &r->next;
		}
	}
}

/* move the recorded launches into a result of this thread's (NULL: no memory) */
static struct wresult *result_take(struct kp__rt_watcher *w)
{
	struct wresult *r = calloc(1, sizeof(*r));
	size_t i;

	if (!r || !(r->launches = calloc(w->recs.len ? w->recs.len : 1, sizeof(*r->launches)))) {
		free(r);
		return NULL;
	}
	for (i = 0; i < w->recs.len; i++) {
		const struct wrec *c = &w->recs.data[i];
		struct kp__rt_wlaunch *l = &r->launches[i];

		l->name = c->name;
		l->n_params = c->n_params;
		l->param_off = c->off;
		l->param_size = c->size;
		l->params = c->params_len ? w->params.data + c->params_off : NULL;
		l->params_len = c->params_len;
	}
	r->owner = pthread_self();
	r->params = w->params.data;
	w->params.data = NULL;
	w->params.len = w->params.cap = 0;
	r->arena = w->arena;          /* the names move with it */
	kp_arena_init(&w->arena);
	kp_u64map_release(&w->name_idx);
	kp_u64map_init(&w->name_idx);
	w->names.len = 0;
	r->next = w->results;
	w->results = r;
	return r;
}

/* the verdict is known before the body runs (the gate is held until end) */
static int decided(struct kp__rt_watcher *w)
{
	w->state = W_DONE;
	return 0;
}

static int failed(struct kp__rt_watcher *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int failed(struct kp__rt_watcher *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->fail, sizeof(w->fail), fmt, ap);
	va_end(ap);
	kp_debug("runtime: watch: %s", w->fail);
	w->state = W_FAILED;
	gate_leave();
	return -1;
}

int kp__rt_watch_begin(struct kp__rt_watcher **wp, kp__rt_layout_fn layout, void *layout_ctx,
		       void *stream, unsigned flags)
{
	struct kp__rt_watcher *w = *wp;
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	uintptr_t h = (uintptr_t)stream;
	unsigned sflags = 0;
	CUptiResult r;
	char b[40];

	if (!w) {
		if (!(w = calloc(1, sizeof(*w))))
			return -1;
		kp_u64map_init(&w->ev_idx);
		kp_u64map_init(&w->rt_fn);
		kp_u64map_init(&w->drv_fn);
		kp_u64map_init(&w->name_idx);
		kp_arena_init(&w->arena);
		*wp = w;
	}
	if (w->state == W_ACTIVE && pthread_equal(w->thread, pthread_self()))
		return -1;    /* begin twice: the first watch goes on */
	if (gate_enter()) {
		/* w may be another thread's watch now: left as it is */
		kp_debug("runtime: watch: could not check: another watch is still running");
		return -1;
	}
	results_drop_mine(w);
	reset(w);
	w->layout = layout;
	w->cx = layout_ctx;
	w->flags = flags;
	w->thread = pthread_self();
	w->streams[0].id = h;   /* 0: settled by the body */
	w->cap_open = h == 0;
	if (h == ID_LEGACY) {
		offend(w, NULL, NULL, "the region's stream is the legacy default stream, which a "
		       "capture cannot hold: pass the region a created stream (or compile with "
		       "--default-stream per-thread)");
		snprintf(w->res.call, sizeof(w->res.call), "cudaStreamBeginCapture");
		return decided(w);
	}
	if (cudaStreamIsCapturing(h == 0 ? cudaStreamPerThread : (cudaStream_t)stream, &cs) !=
	    cudaSuccess)
		cudaGetLastError();
	if (cs != cudaStreamCaptureStatusNone) {
		offend(w, NULL, NULL, "nested capture: %s is already being captured when the region "
		       "starts: leave it to the outer capture", h == 0 ? "the default stream" :
		       sname(h, b, sizeof(b)));
		snprintf(w->res.call, sizeof(w->res.call), "cudaStreamBeginCapture");
		return decided(w);
	}
	if (h != 0 && h != ID_PT) {
		if (cudaStreamGetFlags((cudaStream_t)stream, &sflags) != cudaSuccess)
			cudaGetLastError();
		w->cap_blocking = !(sflags & cudaStreamNonBlocking);
	}
	pthread_once(&cupti.once, cupti_load);
	if (!cupti.ok)
		return failed(w, "could not check: %s", cupti.err);
	__atomic_store_n(&w->on, 1, __ATOMIC_RELEASE);
	tl_rt_depth = 0;
	tl_self = 0;
	__atomic_store_n(&cur_w, w, __ATOMIC_RELEASE);
	if ((r = sub_widen()) != CUPTI_SUCCESS) {
		__atomic_store_n(&w->on, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&cur_w, NULL, __ATOMIC_RELEASE);
		return failed(w, "could not check: %s", cupti_str(r));
	}
	w->state = W_ACTIVE;
	return 0;
}

int kp__rt_watch_end(struct kp__rt_watcher *w, struct kp__rt_watch *out)
{
	struct wresult *r;
	int mine;

	memset(out, 0, sizeof(*out));
	out->res.verdict = -1;
	if (!w) {
		snprintf(out->res.msg, sizeof(out->res.msg), "could not check: out of memory");
		return 0;
	}
	mine = pthread_equal(w->thread, pthread_self());
	if (w->state == W_FAILED || w->state == W_IDLE || !mine) {
		snprintf(out->res.msg, sizeof(out->res.msg), "%s",
			 w->state == W_FAILED && mine && w->fail[0] ? w->fail :
			 "could not check: no watch was started on this thread");
		if (w->state == W_FAILED && mine)
			w->state = W_IDLE;
		return 0;
	}
	if (w->state == W_ACTIVE)
		stop(w);
	w->state = W_IDLE;
	w->pending = 0;
	if (w->res.verdict <= 0)
		check_joined(w);
	if (w->res.verdict <= 0 && w->cap_open && !w->cant[0]) {
		/* given 0 and never settled on the per-thread stream: legacy */
		offend(w, NULL, NULL, "the region's stream is the legacy default stream, which a "
		       "capture cannot hold: pass the region a created stream (or compile with "
		       "--default-stream per-thread)");
		snprintf(w->res.call, sizeof(w->res.call), "cudaStreamBeginCapture");
	}
	out->res = w->res;
	if (w->res.verdict <= 0) {
		out->res.verdict = w->cant[0] ? -1 : 0;
		snprintf(out->res.msg, sizeof(out->res.msg), "%s", w->cant);
	}
	out->per_thread = w->per_thread;
	if (!(r = result_take(w))) {
		if (out->res.verdict == 0) {
			out->res.verdict = -1;
			snprintf(out->res.msg, sizeof(out->res.msg), "could not check: out of memory");
		}
	} else {
		out->n_launches = w->recs.len;
		out->launches = r->launches;
	}
	kp_debug("runtime: watch: verdict %d, %zu launches on %zu streams%s%s",
		 out->res.verdict, out->n_launches, w->n_streams, out->res.msg[0] ? ": " : "",
		 out->res.msg);
	gate_leave();
	return 0;
}

void kp__rt_watch_free(struct kp__rt_watcher *w)
{
	if (!w)
		return;
	if (w->state == W_ACTIVE || w->state == W_DONE) {
		if (w->state == W_ACTIVE)
			stop(w);
		gate_leave();
	}
	while (w->results) {
		struct wresult *r = w->results;

		w->results = r->next;
		result_free(r);
	}
	kp_vec_release(&w->events);
	kp_vec_release(&w->recs);
	kp_vec_release(&w->params);
	kp_vec_release(&w->views);
	kp_vec_release(&w->names);
	kp_u64map_release(&w->ev_idx);
	kp_u64map_release(&w->rt_fn);
	kp_u64map_release(&w->drv_fn);
	kp_u64map_release(&w->name_idx);
	kp_arena_release(&w->arena);
	free(w);
}
