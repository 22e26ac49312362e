/*
 * window.h - the capture window of `kplan record`, applied to a finished run.
 *
 * The collector records the whole run (buffers are cheap; deciding per
 * launch inside the application's threads is not) and, when the run ends,
 * keeps only the API calls whose start lies inside the window and the GPU
 * work they issued (matched by correlation id). Window parts:
 *   - nvtx_range: inside NVTX ranges with this text (any domain);
 *   - profiler_api: between cudaProfilerStart/cuProfilerStart and the next
 *     cudaProfilerStop/cuProfilerStop (open to the end when never stopped);
 *   - skip: the first `skip` launches inside the above are dropped too.
 * No SQL here touches CUPTI; the unit tests exercise it on a built database.
 */
#ifndef KP_COLLECT_WINDOW_H
#define KP_COLLECT_WINDOW_H

#include <stdint.h>
#include "../db/db.h"

struct kp_window {
	const char *nvtx_range;   /* NULL: no NVTX condition */
	int profiler_api;         /* 1: cudaProfilerStart/Stop bound the window */
	int64_t skip;             /* launches to drop at the start of the window */
};

/* 1 when w restricts anything. */
int kp_window_active(const struct kp_window *w);

/*
 * Delete the rows of run_id outside the window from the trace tables.
 * OUT: *kept_launches (launch calls left), *note (static text or NULL: why
 * nothing was kept, e.g. the range never appeared). Runs in one transaction.
 */
int kp_window_apply(struct kp_db *db, int64_t run_id, const struct kp_window *w,
		    int64_t *kept_launches, const char **note, struct kp_err *err);

#endif
