/*
 * watch.h - the CUDA backend's watch of one eager region call: would a
 * stream capture hold what the calling thread does? (runtime/watch.c)
 *
 * The backend's watch_begin/watch_end hooks (struct kp__rt_backend) wrap
 * these. Between begin and end, CUPTI callbacks (libcupti loaded with
 * dlopen; detached once no watch has run for a while) classify every
 * runtime and driver API call of the thread that called begin: stream
 * membership (the capture stream and the streams forked from it with
 * events), synchronisations, queries, allocations, pageable copies. The
 * kernel launches on member streams are recorded with their parameter
 * bytes. Calls of other threads are ignored. One watch at a time per
 * process: a second begin waits for the first end (at most 10 s, then it
 * fails: the first body may be waiting for the second thread).
 */
#ifndef KP_RT_WATCH_H
#define KP_RT_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "rt_internal.h"

/* A backend's watch state: launches, streams, events (opaque). */
struct kp__rt_watcher;

/* A kernel's parameter layout, borrowed from the backend's layout cache
 * (valid until the backend is destroyed). */
struct kp__rt_layout_view {
	const char *name;          /* mangled kernel name */
	uint32_t n_params;
	const uint32_t *off, *size;
	size_t len;                /* parameter buffer bytes */
};

/*
 * How the watch learns a kernel's parameter layout: the layout behind
 * handle (a CUkernel when kern, else a CUfunction) into *out, 0 or an error
 * code. The backend passes its own (cuda_backend.c: probed with
 * cuFuncGetParamInfo on first use, cached), so the watch never names the
 * layer above it.
 */
typedef int (*kp__rt_layout_fn)(void *ctx, void *handle, int kern,
				struct kp__rt_layout_view *out);

/*
 * Start watching the calling thread for a capture on stream (a
 * cudaStream_t; 0 and cudaStreamPerThread are resolved by what the body
 * uses). *wp is created on first use (owned by the caller: free it with
 * kp__rt_watch_free). layout(layout_ctx, ...) gives kernels' parameter
 * layouts. Returns 0 when watching (or when
 * the verdict is known already: a nested capture, the legacy stream), -1
 * when it cannot (no libcupti, another CUPTI subscriber): watch_end then
 * reports verdict -1 and why. Waits while another thread watches; -1 at
 * once when this thread watches already.
 */
int kp__rt_watch_begin(struct kp__rt_watcher **wp, kp__rt_layout_fn layout, void *layout_ctx,
		       void *stream, unsigned flags);

/*
 * Stop watching and fill *out (see struct kp__rt_watch). Call it on the
 * thread that called begin. out->launches (and their names and parameter
 * bytes) stay valid until this thread's next begin on w, or w's free, even
 * when other threads watch on w meanwhile. Returns 0 (the verdict is in
 * out->res.verdict). w may be NULL (begin could not allocate it): verdict
 * -1.
 */
int kp__rt_watch_end(struct kp__rt_watcher *w, struct kp__rt_watch *out);

/*
 * How often this process attached CUPTI (subscribed) and detached it
 * (cuptiFinalize), and whether it is attached now: for the counters and
 * the benchmarks.
 */
void kp__rt_watch_counts(uint64_t *attaches, uint64_t *detaches, uint64_t *attached);

/*
 * No other watch is expected soon: detach CUPTI now rather than after the
 * delay (a no-op while a watch runs, or when CUPTI is not attached).
 */
void kp__rt_watch_release(void);

/* Free w (ending a watch still running first); NULL is a no-op. */
void kp__rt_watch_free(struct kp__rt_watcher *w);

#endif
