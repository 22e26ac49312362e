/*
 * rt_internal.h - libkplanrt's CUDA-free core and its backend interface.
 *
 * The core (runtime/core.c: state machine, shape-key cache, patch sites,
 * fallbacks, counters) never calls CUDA: it drives a struct kp__rt_backend.
 * runtime/cuda_backend.c is the real one; tests/unit/test_runtime.c has a
 * fake one that records what would have happened.
 */
#ifndef KP_RT_INTERNAL_H
#define KP_RT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../include/kplan/runtime.h"
#include "../common/err.h"

struct kp__rt_fusion_ops;

#define KP_RT_API __attribute__((visibility("default")))

enum kp__rt_node_kind {
	KP__RT_NODE_KERNEL = 0,   /* patchable through set_params */
	KP__RT_NODE_MEMOP = 1,    /* memset/memcpy: words = its pointers, not patchable */
	KP__RT_NODE_OTHER = 2,    /* alloc/free/event/empty... ignored */
};

/*
 * One node of a captured graph as the backend describes it. For kernels,
 * params holds the kernel's parameter buffer (param i at param_off[i], size
 * param_size[i], as cuFuncGetParamInfo lays it out); the core rewrites words
 * in it and hands the node back to set_params. Owned by the backend's node
 * array (free with nodes_free).
 */
struct kp__rt_node {
	int kind;                 /* enum kp__rt_node_kind */
	void *handle;             /* backend node handle */
	const char *name;         /* kernel (mangled) name; "" for non-kernels */
	uint32_t grid[3], block[3];
	uint32_t smem;            /* dynamic shared memory bytes */
	uint32_t n_params;
	const uint32_t *param_off, *param_size;
	unsigned char *params;    /* parameter buffer */
	size_t params_len;
	/* KP__RT_NODE_OTHER memory-allocation nodes: the graph's own buffer
	 * [alloc_ptr, alloc_ptr + alloc_size) (0 for other nodes) */
	uint64_t alloc_ptr, alloc_size;
};

/* cudaStreamPerThread, for a CUDA-free core */
#define KP__RT_STREAM_PER_THREAD ((void *)0x2)

/*
 * One kernel launch a watch saw on the capture stream (or a stream forked
 * from it), in launch order; params laid out like struct kp__rt_node's.
 */
struct kp__rt_wlaunch {
	const char *name;         /* mangled kernel name */
	uint32_t n_params;
	const uint32_t *param_off, *param_size;
	const unsigned char *params;
	size_t params_len;
};

/* What a watched call did (watch_end). */
struct kp__rt_watch {
	struct kp_rt_watch_result res;  /* verdict, offending call, kernel, message */
	int per_thread;           /* the body launched on the per-thread default
				     stream (compiled --default-stream per-thread,
				     or cudaStreamPerThread): a stream 0 given to
				     the runtime means that stream */
	size_t n_launches;
	const struct kp__rt_wlaunch *launches;  /* owned by the backend, valid
				     until the next watch_begin or destroy */
};

/* Device identity for the plan's hard and soft keys. */
struct kp__rt_device {
	char name[256];
	int cc_major, cc_minor, sm_count;
	int driver_version;       /* cuDriverGetVersion form */
};

/*
 * The backend. Every int-returning call gives 0 or a backend error code
 * (nonzero), described by strerror. Streams, graphs and execs are opaque.
 */
struct kp__rt_backend {
	void *ctx;
	int (*device)(void *ctx, struct kp__rt_device *dev);
	/* begin/end a thread-local stream capture; end fails when invalidated */
	int (*capture_begin)(void *ctx, void *stream);
	int (*capture_end)(void *ctx, void *stream, void **graph);
	/* 1 when stream is being captured now (nested regions) */
	int (*capturing)(void *ctx, void *stream);
	/* nodes of graph in creation order; *nodes owned by the backend */
	int (*nodes)(void *ctx, void *graph, struct kp__rt_node **nodes, size_t *n);
	void (*nodes_free)(void *ctx, struct kp__rt_node *nodes, size_t n);
	int (*instantiate)(void *ctx, void *graph, void **exec);
	/* write node->params into the instantiated exec */
	int (*set_params)(void *ctx, void *exec, struct kp__rt_node *node);
	int (*launch)(void *ctx, void *exec, void *stream);
	void (*graph_free)(void *ctx, void *graph);
	void (*exec_free)(void *ctx, void *exec);
	int (*sync)(void *ctx, void *stream);
	/* device memory for verify mode: alloc/free, device-to-device copy on
	 * stream, and compare (after sync): *equal = 1 when identical */
	int (*dev_alloc)(void *ctx, void **p, size_t n);
	void (*dev_free)(void *ctx, void *p);
	int (*dev_copy)(void *ctx, void *dst, const void *src, size_t n, void *stream);
	int (*dev_equal)(void *ctx, const void *a, const void *b, size_t n, int *equal);
	/* device memory held by graph pools now (0 when unknown) */
	int64_t (*graph_mem)(void *ctx);
	const char *(*strerror)(void *ctx, int rc);
	/*
	 * Optional (may be NULL): mark each region call as a named range
	 * (NVTX on CUDA), so that `kplan record` of a run through the runtime
	 * finds the regions under the names the plan will use.
	 */
	void (*range_push)(void *ctx, const char *name, int kind);
	void (*range_pop)(void *ctx);
	/*
	 * Optional (may be NULL: nothing is checked): watch the calling
	 * thread's CUDA calls between watch_begin and watch_end (one eager
	 * call of a region body, before its first capture). watch_begin
	 * returns 0 when watching, nonzero when it cannot (another CUPTI
	 * client); watch_end then fills w->res.verdict = -1. See struct
	 * kp__rt_watch.
	 */
	int (*watch_begin)(void *ctx, void *stream, unsigned flags);
	int (*watch_end)(void *ctx, struct kp__rt_watch *w);
	/* Optional: no other watch is expected soon (detach CUPTI now). */
	void (*watch_release)(void *ctx);
	/* Optional: process-wide CUPTI attachments, detachments, attached now. */
	void (*watch_counts)(uint64_t *attaches, uint64_t *detaches, uint64_t *attached);
	void (*destroy)(void *ctx);
	/* Optional: the fused kernels' ops (runtime/fused_load.h); NULL: CUDA's
	 * (NVRTC), when linked in. A test's fake backend gives its own. */
	const struct kp__rt_fusion_ops *fusion_ops;
};

/* rt's backend (runtime/gpatch.c); NULL when rt is NULL. */
const struct kp__rt_backend *kp__rt_backend_of(const kp_rt *rt);

/*
 * Open a runtime over backend be (copied; destroy is called at close) with
 * plan_path (NULL: all eager). The CUDA-free entry point kp_rt_open_ex
 * wraps. On failure be->destroy is called and NULL returned.
 */
kp_rt *kp__rt_open_backend(const struct kp__rt_backend *be, const char *plan_path,
			   const struct kp_rt_options *opt, struct kp_rt_err *err);

/* The CUDA backend (cuda_backend.c); fills *be; 0 or KP_ECUDA. */
int kp__rt_cuda_backend(struct kp__rt_backend *be, struct kp_err *err);

/*
 * Whether kp_rt_kernel_load (kfuse.c) may compile src[0..len): 1 without a
 * trust list; with one, only a torch fusion source whose SHA-256 the plan's
 * signature covered (PLAN.aten, plan/aten_groups.h), read again after the
 * check, so a source swapped in between is refused. 0: refused.
 */
int kp__rt_source_trusted(kp_rt *rt, const char *src, size_t len);

#endif
