/*
 * watch_calls.h - the calls the runtime's watch (watch.c) refuses by name,
 * whatever their arguments: a capture cannot hold them. Derived from the
 * one table of CUDA calls (common/cuda_api.def) that the collector and the
 * analyzer use too, so that the runtime and the offline verdict agree.
 * CUDA-free (tests/unit/test_collector.c checks the three users against
 * each other). The calls the watch judges by stream and arguments
 * (launches, asynchronous copies and memsets, events, stream-ordered
 * allocation) are handled by callback id in watch.c.
 */
#ifndef KP_RT_WATCH_CALLS_H
#define KP_RT_WATCH_CALLS_H

/*
 * The class (enum kp_cuda_api_class) of the call named fn (any flavour:
 * _v2, _ptsz, ...) when a capture cannot hold it, else KP_API_OTHER (0).
 */
int kp__rt_watch_breaker(const char *fn);

/*
 * 1 when a watch begun with flags lets a call of class cls pass:
 * KP_RT_WATCH_ALLOW_ALLOC forgives allocations, frees and event queries (a
 * caching allocator's, which inside its own capture uses the graph's pool).
 */
int kp__rt_watch_allowed(int cls, unsigned flags);

/*
 * What a call of class cls does wrong and the fix, the tail of "CALL
 * inside the region (after kernel K)"; a %s in it is the capture stream.
 */
const char *kp__rt_watch_offence(int cls);

#endif
