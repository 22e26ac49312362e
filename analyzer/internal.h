/*
 * internal.h - the analyzer's in-memory model, shared by its .c files.
 *
 * One analysis holds the run's GPU ops in one array (struct kp__op, 56
 * bytes each: no allocation per row), orderings of it as uint32 index
 * arrays, the API calls that can block capture, and the regions found.
 * Strings and per-region arrays come from one arena.
 */
#ifndef KP_ANALYZER_INTERNAL_H
#define KP_ANALYZER_INTERNAL_H

#include <stdint.h>

#include "../common/arena.h"
#include "../common/nccl.h"
#include "../common/u64map.h"
#include "../common/vec.h"
#include "analyzer.h"

enum { KP__OP_KERNEL = 0, KP__OP_MEMSET = 1, KP__OP_MEMCPY = 2 };

/* op flags */
#define KP__F_PAGEABLE 1   /* memcpy from/to pageable host memory */
#define KP__F_PDL 2        /* kernel launched with programmatic dependent launch */
#define KP__F_GRAPH 4      /* a node of a graph the program launched (cudaGraphLaunch) */

/* One GPU op (kernel, memset, memcpy) joined to its launch call. */
struct kp__op {
	int64_t start, end;
	int64_t api_start;       /* launch call start; op start when not joined */
	int64_t gap;             /* idle before it on its stream; -1 first op */
	int32_t api_dur;         /* launch call duration; -1 when not joined */
	uint32_t corr;
	uint32_t sig;            /* index into ana->sigs */
	uint32_t stream;         /* index into ana->streams */
	uint32_t api_name;       /* index into ana->names, or UINT32_MAX */
	uint8_t kind, has_api, host_bound, flags;
};

/* Launch signature: name, grid, block, shared memory (and kind). */
struct kp__sig {
	int64_t name_id;         /* StringIds.id; memops: 0 */
	const char *name;        /* arena */
	int32_t grid[3], block[3];
	int32_t smem, regs;
	int64_t bytes;           /* memops */
	int64_t mangled_id;      /* StringIds.id of the mangled name, 0: none */
	int32_t dyn_smem;        /* dynamic shared memory (part of smem) */
	uint64_t fsig;           /* plan/FORMAT.md kernel signature; 0 for memops */
	uint8_t kind;
	uint8_t mem_class;       /* fusion: 0 unknown, 1 memory-bound, 2 compute-bound */
	uint8_t reduction;       /* fusion: reduces rows */
	uint8_t node_cls;        /* cost model: KP_NODE_* + 1, 0 until known */
	uint8_t coll;            /* an NCCL kernel: enum kp_nccl_coll + 1 (common/nccl.h); 0 not */
};

struct kp__stream {
	int64_t device_id, stream_id;
	uint32_t beg, end;       /* slice of ana->ord */
};

/* API call classes that matter for capture. */
enum kp__cls {
	KP__C_OTHER = 0, KP__C_LAUNCH, KP__C_GRAPH_LAUNCH, KP__C_SYNC,
	KP__C_COPY_SYNC, KP__C_COPY_ASYNC, KP__C_MALLOC, KP__C_FREE,
	KP__C_HOST_FUNC, KP__C_WAIT_EVENT, KP__C_MEMSET, KP__C_EVENT_RECORD,
	KP__C_HOST_NODE,          /* cudaLaunchHostFunc: captures as a host node */
	KP__C_REGISTER,           /* cudaHostRegister and its kin */
	KP__C_LIMIT,              /* cudaDeviceSetLimit */
	KP__C_CAPTURE,            /* cudaStreamBeginCapture: a capture of the body's own */
	KP__C_POLL,               /* cudaEventQuery, cudaStreamQuery: a sync of the thread
				     that launches (load.c drops other threads' polls) */
};

/* Blocker kinds, in the order of kp__blocker_kind_name. */
enum kp__bk {
	KP__B_SYNC = 0, KP__B_BLOCKING_COPY, KP__B_PAGEABLE_COPY, KP__B_MALLOC,
	KP__B_FREE, KP__B_HOST_CALLBACK, KP__B_CROSS_STREAM_EVENT,
	KP__B_LEGACY_STREAM, KP__B_SHAPE_KEY, KP__B_PATCH_SLOT, KP__B_HOST_REGISTER,
	KP__B_DEVICE_LIMIT, KP__B_NESTED_CAPTURE,
	KP__B_GRAPH_REPLAY,       /* the program's own graph: what runs between its replays */
	KP__B_COLLECTIVE,         /* NCCL collectives in the region: what capturing them needs */
	KP__B_CAPTURE_PATH,       /* a wait library code skips while a stream captures (path.c) */
	KP__B__N
};

struct kp__name {
	int64_t id;              /* StringIds.id */
	const char *s;
	int cls;                 /* enum kp__cls */
};

/* A non-launch API call that may block capture. */
struct kp__ev {
	int64_t start, end;
	uint32_t corr, name;     /* name: index into ana->names */
	uint8_t kind;            /* enum kp__bk */
	uint8_t pad[3];
	int32_t stream_id;       /* cross_stream_event: the waiting stream; -1 unknown */
};

struct kp__blk {
	uint8_t kind, fatal;
	const char *api;         /* arena or static */
	int64_t start;
	int64_t corr;            /* -1: none */
	int32_t occ, pos;
	const char *detail;      /* arena */
	const char *cpu_op;      /* innermost CPU op around the call (arena), or NULL */
	const char *py_frame;    /* innermost user Python frame, "FILE:LINE" (arena), or NULL */
	int64_t cost_ns;         /* left outside at the region's edge: its eager cost; -1: n/a */
};

struct kp__occ {
	const uint32_t *ops;     /* op indices in launch order (borrowed) */
	uint32_t n;
	uint32_t lead, trail;    /* edge ops left outside the graph (capture.c):
				    ops[-lead..-1] and ops[n..n+trail-1] */
	int64_t edge_ns;         /* eager cost of the edges kept outside */
	int64_t t0, t1;          /* CPU range */
	int64_t eager, busy, hidle, didle;
	uint64_t fp;             /* full signature fingerprint */
};

struct kp__region {
	int id, parent;          /* parent 0: none */
	const char *label, *source;
	int rt_kind;             /* source "runtime": 1 the C API captures its stream,
				    2 a language binding captures on a side stream */
	int warmup_occ;          /* blockers only in occurrences < this: warm-up covers them */
	int graphed;             /* source "graph": the program's own graph launches (graphs.c) */
	int64_t stream_id;       /* -1: any */
	struct kp__occ *occ;
	uint32_t n_occ;
	uint32_t tmpl;           /* occurrence whose sequence is the most common */
	int period;              /* mined */
	double coverage;
	/* results */
	int64_t kernels, nodes, eager, busy, hidle, didle;
	int64_t edge_ns;         /* median of occ[].edge_ns: part of pred.graph_ns */
	struct kp_dist queue, launch_api;
	struct kp_region_pred pred;
	int64_t pred_lo, pred_hi;  /* interval around pred.graph_ns (path.c); 0: none */
	int path_points;         /* capture_path rows: waits the captured path skips */
	int capturable, has_pred;
	int64_t shape_keys, patch_slots, patched_nodes;
	uint64_t fingerprint;
	KP_VEC(struct kp__blk) blk;
};

struct kp__arg {
	uint32_t corr;
	uint16_t idx, size;
	int64_t value;
};

struct kp__cand {
	int region;
	int64_t stream_id;
	uint32_t first_op;
	int n;
	uint64_t key;
	int64_t occurrences;
	const char *names, *pattern, *reason, *dependence;
	const char *aten_chain;   /* the ATen op of each kernel with its inputs (arena);
				     NULL: not every kernel came from a CPU op with shapes */
	const char *torch_verdict;  /* kplan.torch's verdict on aten_chain (arena), or NULL */
	int64_t dur, saved_bytes, saved_nodes, penalty;
	double score;
	int feasible;
};

struct kp__ana {
	struct kp_db *db;
	int64_t run;
	struct kp_analyze_opts o;
	struct kp_cost cost;
	struct kp_arena arena;
	struct kp_analysis_summary *sum;

	struct kp__op *ops;
	size_t n_ops;
	KP_VEC(struct kp__sig) sigs;
	struct kp_u64map sigmap;
	KP_VEC(struct kp__stream) streams;
	uint32_t *ord;           /* ops by (stream, start) */
	uint32_t *by_cpu;        /* ops by launch call start */
	int64_t t_min;

	KP_VEC(struct kp__name) names;
	struct kp_u64map namemap;  /* StringIds.id -> index into names */
	struct kp__ev *ev;         /* by start */
	size_t n_ev;
	int64_t *rec;              /* cudaEventRecord call starts, ascending */
	size_t n_rec;
	int64_t *hostfn;           /* cudaLaunchHostFunc call starts, ascending */
	size_t n_hostfn;
	int wait_streams;          /* the trace says which stream each event wait was on */
	int lang;                  /* advice.c: 0 not known yet, 1 C, 2 Python (a PyTorch trace) */

	struct kp_u64map graph_ids;  /* graph launch's correlation id -> its kernels' graphId */

	struct kp__arg *args;      /* by (corr, idx) */
	size_t n_args;

	KP_VEC(struct kp__region *) regions;
	KP_VEC(struct kp__cand) cands;
	int64_t smem_limit;
	struct kp__srcix *src;     /* PyTorch CPU ops and Python frames (capture.c), loaded
				      on first use; kp__src_free */
	struct sqlite3_stmt *aten_args;  /* aten_view.c: a CPU op's kp_cpu_op_args row */
	int aten_state;            /* aten_view.c: 0 not looked, 1 shapes, -1 none */
};

/* util.c */
/* The id of the run's NVTX domain named name (the collector numbers domains
 * 1, 2, ... and names each with an eventType 75 row; the importer does the
 * same for PyTorch's cpu_op and python_function events), or -1. */
int64_t kp__nvtx_domain(struct kp__ana *a, const char *name);
struct kp__kv { uint64_t key; uint32_t idx; uint32_t pad; };
/* Sort a by key (LSD radix, stable); tmp holds n elements. */
void kp__radix_sort(struct kp__kv *a, struct kp__kv *tmp, size_t n);
/* Distribution of v[0..n) (reorders v). */
void kp__dist(int64_t *v, size_t n, struct kp_dist *d);
/* k-th smallest of v[0..n), n > 0 (reorders v). */
int64_t kp__nth(int64_t *v, size_t n, size_t k);
/* Median of v[0..n) (reorders v); 0 when n == 0. */
int64_t kp__median(int64_t *v, size_t n);
/* Index of the name with StringIds id, loading and classifying it. */
int kp__name_get(struct kp__ana *a, int64_t id, uint32_t *ix, struct kp_err *err);
/* The capture class (enum kp__cls) of an API call, from common/cuda_api.def. */
int kp__classify_api(const char *name);
/* The blocker kind (enum kp__bk) a call of class c makes, or -1 for none. */
int kp__api_blocker(int c);
const char *kp__blocker_kind_name(int kind);
/*
 * A kernel's signature as plan/FORMAT.md "Fingerprints" defines it (the
 * runtime recomputes it from captured nodes): kp_hash64 of
 * "NAME|GX,GY,GZ|BX,BY,BZ|DYNSMEM".
 */
uint64_t kp__kernel_sig(const char *name, const int32_t grid[3], const int32_t block[3],
			int32_t dyn_smem);
/* The first i < n with at(ctx, i) >= t (at ascending in i), else n. */
size_t kp__lower_bound(const void *ctx, size_t n, int64_t t,
		       int64_t (*at)(const void *ctx, size_t i));
/* The first index of a->by_cpu whose launch call starts at or after t. */
size_t kp__cpu_lower(const struct kp__ana *a, int64_t t);
/* The first index of a->ev (by start) whose call starts at or after t. */
size_t kp__ev_lower(const struct kp__ana *a, int64_t t);
/* Describe a signature's launch configuration into an arena string. */
const char *kp__sig_desc(struct kp__ana *a, const struct kp__sig *s);

/* load.c: ops, launch calls, blocking calls, streams, gaps, launch args */
int kp__load(struct kp__ana *a, struct kp_err *err);
int kp__load_args(struct kp__ana *a, struct kp_err *err);
int kp__load_attrs(struct kp__ana *a, struct kp_err *err);

/* regions.c */
int kp__regions_nvtx(struct kp__ana *a, struct kp_err *err);
int kp__regions_mine(struct kp__ana *a, struct kp_err *err);
/* Mine one sequence: OUT period, first index and count of occurrences. */
int kp__mine_period(const uint32_t *s, size_t n, int min_period,
		    const int64_t *gap, size_t *period, size_t *first,
		    size_t *count, struct kp_err *err);
void kp__occ_stats(struct kp__ana *a, struct kp__occ *o);
void kp__region_stats(struct kp__ana *a, struct kp__region *r);
struct kp__region *kp__region_new(struct kp__ana *a, const char *label,
				  const char *source, uint32_t n_occ);

/* capture.c */
int kp__capturability(struct kp__ana *a, struct kp_err *err);
/* The innermost PyTorch CPU op (Kineto cpu_op) around a launch. */
struct kp__cpu_op {
	int64_t tid, start;      /* its NVTX_EVENTS row's globalTid and start */
	const char *name;        /* arena; NULL: none (no CPU ops in the trace) */
	/* the CPU op around it (aten::_to_copy around an aten::copy_): the
	 * same fields, outer_name NULL when none */
	int64_t outer_tid, outer_start;
	const char *outer_name;
};
/*
 * The CPU op around the launch call with correlation id corr that started
 * at start (the runtime table gives its thread and end), through the ranges
 * that name blockers (loaded once into a->src). *out is cleared first.
 * 0 or KP_ENOMEM.
 */
int kp__cpu_op_of(struct kp__ana *a, uint32_t corr, int64_t start, struct kp__cpu_op *out);
/* Free a->src (NULL after). */
void kp__src_free(struct kp__ana *a);

/* advice.c */
/* 1 when the run is a PyTorch trace (its CPU ops or Python frames were
 * imported): advice in Python; else C. */
int kp__is_python(struct kp__ana *a);
/*
 * The fix for a blocker of kind (enum kp__bk) whose call started at t, in
 * the terms of the library that made the call: by the CPU op around it (op,
 * outer: innermost and outermost, from a PyTorch trace; then the fix is
 * Python), else by the kernels launched just before and after it (cuBLAS
 * reductions in host pointer mode, cuSPARSE and thrust/CUB temporary
 * buffers; C). Static text, or NULL when no library pattern matches.
 */
const char *kp__advice(struct kp__ana *a, int kind, int64_t t, const char *op,
		       const char *outer);
/*
 * The fix for a region launching on the legacy default stream, occurrence
 * o: the libraries whose kernels it runs there get their SetStream call
 * (C), a PyTorch trace a side stream (Python). Static or arena text.
 */
const char *kp__advice_legacy(struct kp__ana *a, const struct kp__occ *o);

/* graphs.c */
/*
 * Regions of source "graph": one per graph the program launched itself
 * (cudaGraphLaunch), its replays the occurrences, the ops each launch ran
 * (one correlation id) their nodes; the graph is its kernels' graphId, else
 * the launch's node sequence.
 */
int kp__regions_graphs(struct kp__ana *a, struct kp_err *err);
/*
 * The finding of region r when its body is the program's own graph
 * launches (r->graphed, or every node of its template graph-launched): no
 * prediction (it is a graph already) and one graph_replay row (fatal 0)
 * that says what runs between its replays, costed by the GPU's idle time
 * there. Returns 1 when r was such a region (done), 0 when not, or a
 * negative KP_E*.
 */
int kp__graph_finding(struct kp__ana *a, struct kp__region *r);

/* path.c */
/*
 * The CPU op of ops[0..n) (innermost first, the ops around a blocking call)
 * that makes a wait of blocker kind `kind` one library code skips while a
 * stream captures (a mask check, a truth test on a tensor), or NULL.
 * lib_frame: the innermost Python frame around the call is library code
 * (1), the user's (0), or unknown (-1: the trace has no Python frames).
 * OUT: *why (may be NULL) the reason, static text.
 */
const char *kp__path_op(int kind, const char *const *ops, size_t n, int lib_frame,
			const char **why);
/*
 * r->pred_lo and r->pred_hi around r->pred.graph_ns: the range the cost
 * model's validated error allows (KP_PRED_BAND); for a region holding waits
 * the captured path skips (r->path_points) and fused attention, the range
 * of the two paths instead: the eager path's prediction to what the
 * library's other path adds (attention run unfused). Nothing when r has no
 * prediction.
 */
void kp__pred_interval(struct kp__ana *a, struct kp__region *r);

/* fuse_candidates.c */
int kp__fusion(struct kp__ana *a, struct kp_err *err);

/* aten_view.c */
/*
 * The ATen view of candidate c, whose chain is the ops ch[0..k): when each
 * kernel was launched from a PyTorch CPU op with recorded inputs
 * (kp_cpu_op_args), c->aten_chain names each op with its inputs and
 * c->torch_verdict says whether kplan.torch fuses the chain, or what stops
 * it; both stay NULL otherwise. 0 or KP_ENOMEM.
 */
int kp__aten_view(struct kp__ana *a, const uint32_t *ch, int k, struct kp__cand *c);
/* Release what kp__aten_view prepared (called once after the candidates). */
void kp__aten_view_done(struct kp__ana *a);
/* kplan.torch's pointwise catalog: the keys of python/kplan/aten_ops.py
 * OPS (a unit test keeps them equal). */
extern const char *const kp__aten_catalog[];
extern const size_t kp__aten_catalog_n;
/* The catalog op a profiler's ATen op name ("aten::sub", "rsub") becomes,
 * as aten_ops.recognize reads it, or NULL. */
const char *kp__aten_catalog_op(const char *aten);

/* store.c */
int kp__store(struct kp__ana *a, struct kp_err *err);

/* The recorded launch arguments of launch corr (a->args sorted by corr); OUT: *n. */
const struct kp__arg *kp__args_of(struct kp__ana *a, uint32_t corr, size_t *n);

#endif
