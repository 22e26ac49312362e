/*
 * kplan/runtime.h - libkplanrt: apply a kplan plan file at run time.
 *
 * The application marks the regions the plan names. For each region and
 * shape key the runtime keeps a small state machine:
 *
 *   warm-up (eager, the plan's count; the last warm-up call before the
 *   first capture is watched with CUPTI: a body a capture could not hold
 *   keeps the region eager for good, reason would-break-capture, and no
 *   capture is ever begun) -> capture (stream capture, captured kernels
 *   checked against the plan's fingerprint and their small arguments
 *   against the watched call's, instantiate) -> replay
 *   (the body is skipped, changed pointer parameters are patched in place,
 *   one graph launch) -> on failure: eager for a back-off period, retried,
 *   and disabled after repeated failures.
 *
 * Anything unexpected (CUDA error, capture invalidated by a sync inside the
 * region, fingerprint mismatch, plan for another GPU, unknown region) makes
 * that region run eagerly, with one log line on stderr naming a stable reason
 * code (kp_rt_reason_name). Nothing here ever exits or aborts.
 *
 * Usage (link -lkplanrt, plus -lcudart):
 *
 *   struct kp_rt_err err;
 *   kp_rt *rt = kp_rt_open("model.kplan", &err);    // NULL path: all eager
 *   ...
 *   kp_region r;
 *   do {
 *       if (kp_region_begin(rt, &r, "decode", shape_key, stream))
 *           launch_the_body(stream);                // eager, or captured
 *       kp_rt_bind(rt, &r, 0, kv_cache, kv_bytes, 0);
 *       kp_rt_bind(rt, &r, 1, logits, logits_bytes, KP_RT_BIND_OUTPUT);
 *   } while (kp_region_end(rt, &r) > 0);            // > 0: run the body again
 *   ...
 *   kp_rt_close(rt);
 *
 * Rules:
 * - Every launch of the body goes to `stream` (or to streams forked from it
 *   with events and joined back), and the body does no synchronisation,
 *   allocation or host copy: those would invalidate the capture, so the
 *   watched warm-up call keeps such a region eager. Stream 0 is the legacy
 *   stream, which is never captured, unless the body runs on the per-thread
 *   default stream (--default-stream per-thread): then the runtime captures
 *   cudaStreamPerThread.
 * - A value passed to kernels by value that changes from call to call (a
 *   seed, a step, a learning rate) is bound with kp_rt_bind_value on every
 *   call; unbound, the watched call and the capture differ and the region
 *   stays eager (unbound-change).
 * - kp_rt_bind is called after kp_region_begin and before kp_region_end on
 *   every call, whatever begin returned, for every buffer whose address may
 *   differ from one call to the next. At capture the runtime scans each
 *   captured kernel's parameter bytes (every 8-byte aligned word, sizes from
 *   cuFuncGetParamInfo) for addresses inside a bound range [base, base+size)
 *   and remembers where they are; at replay it rewrites those words with
 *   new_base + (old_value - old_base) — pointers into a buffer (a KV-cache
 *   slice) are rebased too — for the slots whose base changed, with one
 *   cuGraphExecKernelNodeSetParams per changed node. Pointers that are not
 *   bound are baked into the graph: buffers that never move need no bind.
 *   Overlapping ranges: the smallest range containing the address wins;
 *   when the address is also the base of a larger range, it is ambiguous
 *   (a KV slice at the cache's start): that capture is dropped and retried
 *   on the next call.
 * - kp_region_end returns > 0 when the body's work was NOT done (the capture
 *   failed, or the graph could not be launched after a capture): call begin
 *   again, which then runs the body eagerly. The loop above does that.
 * - Different threads must use different streams; the graphs are kept per
 *   (region, shape key, stream). A region entered while the same thread is
 *   already capturing runs inline inside the outer capture.
 *
 * Environment (read by kp_rt_open; kp_rt_open_ex flags add to them):
 *   KPLAN_RT_DISABLE=1   every region eager (the plan is not even read)
 *   KPLAN_RT_STRICT=1    mismatches are errors (begin/end return < 0): CI
 *   KPLAN_RT_VERIFY=N    the first N replays of each graph run eagerly AND as
 *                        the graph, and the KP_RT_BIND_OUTPUT buffers are
 *                        compared byte for byte (the region must be
 *                        idempotent: re-running it on the same inputs gives
 *                        the same outputs)
 *   KPLAN_RT_STATS=1     print the counters to stderr at kp_rt_close (and at
 *                        exit for handles never closed); also times replays
 *   KPLAN_RT_EXECS=2     when pointers move, alternate two executable graphs of
 *                        the same capture so that the one being patched is not
 *                        the one the GPU may still be running (a second
 *                        instantiation and its device memory); default 1: one
 *                        exec patched in place (measured no slower)
 *   KPLAN_RT_KEY_WARMUP=1 warm up every new shape key eagerly (default: a new
 *                        key of a region that already captured on that stream
 *                        captures on its first call)
 *   KPLAN_RT_WATCH=0     do not watch the last warm-up call before a first
 *                        capture (default: watch it with CUPTI callbacks; a
 *                        region whose body cannot be captured then stays
 *                        eager, reason would-break-capture)
 *   KPLAN_RT_WATCH_DETACH=MS CUPTI is detached when no other watch is coming,
 *                        else MS ms after the last watch (default 200); 0:
 *                        kept attached for the life of the process (every
 *                        later launch then costs ~0.5 us more)
 *   KPLAN_RT_TRUST=K.pub[:K2.pub...] trusted public keys (kplan keygen), added
 *                        to kp_rt_options.trust: the plan must be signed by
 *                        one of them (kplan sign; PLAN.sig next to it, covering
 *                        the plan and every source it references), else every
 *                        region is eager (untrusted-plan; in strict mode open
 *                        fails with -12 EMISMATCH). Unset: signatures are not
 *                        checked
 *   KPLAN_RT_MODEL=ID    the identity of the model the application runs, when
 *                        kp_rt_options.model is NULL: a plan pinned to another
 *                        (kplan plan --for) runs every region eagerly
 *                        (plan-mismatch; strict: open fails). Unset and no
 *                        option: a pinned plan is logged once and applies
 *   KPLAN_CACHE_DIR=DIR  where fused kernels compiled by NVRTC are cached
 *                        (default $XDG_CACHE_HOME/kplan, else ~/.cache/kplan;
 *                        created 0700). Used only when it is a directory, not
 *                        a symbolic link, owned by the effective user and not
 *                        writable by group or others; else kernels are
 *                        compiled in memory each time (one log line says why)
 *   KPLAN_LOG=info|debug more log lines (default: warnings only)
 *
 * Each region call is also an NVTX range named after the region, so that
 * `kplan record -- ./app` run through the runtime without a plan records
 * the regions under the names the plan will use.
 */
#ifndef KPLAN_RUNTIME_H
#define KPLAN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open runtime: plan, regions, graphs, counters. Thread-safe. */
typedef struct kp_rt kp_rt;

/* Error returned by kp_rt_open (codes are kplan's negative KP_E* values). */
struct kp_rt_err {
	int code;             /* 0 ok; -3 EIO, -5 EFORMAT, -6 EVERSION, -9 ECUDA, -12 EMISMATCH, ... */
	char msg[512];        /* lowercase one-line message */
};

/* Flags of struct kp_rt_options. */
enum kp_rt_flags {
	KP_RT_STRICT = 1 << 0,       /* mismatches are errors (see KPLAN_RT_STRICT) */
	KP_RT_DISABLE = 1 << 1,      /* all eager (see KPLAN_RT_DISABLE) */
	KP_RT_PRINT_STATS = 1 << 2,  /* print counters at close (KPLAN_RT_STATS) */
	KP_RT_TIMING = 1 << 3,       /* time replays (host ns in kp_rt_stats) */
	KP_RT_NO_ENV = 1 << 4,       /* ignore the KPLAN_RT_* environment */
	KP_RT_TWO_EXECS = 1 << 5,    /* two execs per graph alternate when pointers move (KPLAN_RT_EXECS=2) */
	KP_RT_CUDA = 1 << 6,         /* start the CUDA backend without a plan too: for a
					binding that captures by other means and uses
					kp_rt_watch_* / kp_rt_gpatch_* (regions stay eager) */
};

struct kp_rt_options {
	unsigned flags;       /* enum kp_rt_flags */
	int verify_calls;     /* replays per graph checked against eager (0: off) */
	int warmup;           /* eager calls before capture; < 0: the plan's */
	int max_failures;     /* failures of one graph before it is disabled (0: 3) */
	const char *trust;    /* NULL, or trusted public key files (kplan keygen's KEY.pub),
				 colon-separated: the plan must carry a signature by one
				 of them (see KPLAN_RT_TRUST); appended last so that the
				 struct only grows */
	const char *model;    /* NULL, or the identity of the model the application runs
				 (any string, as given to kplan plan --for; NULL: from
				 KPLAN_RT_MODEL): a plan pinned to another model does not
				 apply (plan-mismatch; strict: open fails naming both); a
				 pinned plan opened without one is logged once and
				 applies. Appended last, as trust */
};

/*
 * Why a call ran eagerly (kp_rt_stats.eager_by_reason) or why a graph
 * failed (kp_rt_stats.failures). The names are stable reason codes.
 */
enum kp_rt_reason {
	KP_RT_R_NONE = 0,         /* "none" */
	KP_RT_R_NO_PLAN,          /* "no-plan": opened without a plan */
	KP_RT_R_DISABLED,         /* "disabled": KPLAN_RT_DISABLE / KP_RT_DISABLE */
	KP_RT_R_PLAN_MISMATCH,    /* "plan-mismatch": plan's hard keys are for another GPU */
	KP_RT_R_UNKNOWN_REGION,   /* "unknown-region": name not in the plan */
	KP_RT_R_PLANNED_EAGER,    /* "planned-eager": the plan says eager (not a failure) */
	KP_RT_R_WARMUP,           /* "warmup": eager warm-up call before capture */
	KP_RT_R_CAPTURE,          /* "capture-failed": capture invalidated (sync, alloc...) */
	KP_RT_R_FINGERPRINT,      /* "fingerprint": captured kernels differ from the plan */
	KP_RT_R_INSTANTIATE,      /* "instantiate": cudaGraphInstantiate failed */
	KP_RT_R_PATCH,            /* "patch": node parameter update failed */
	KP_RT_R_LAUNCH,           /* "launch": cudaGraphLaunch failed */
	KP_RT_R_CUDA,             /* "cuda-error": other CUDA error (node enumeration...) */
	KP_RT_R_BIND,             /* "bad-bind": a slot used by the graph is unbound or too small */
	KP_RT_R_UNPATCHABLE,      /* "unpatchable": bound pointer in a memcpy/memset node moved */
	KP_RT_R_KEY_THRASH,       /* "key-thrash": too many shape keys evicted, region paused */
	KP_RT_R_BACKOFF,          /* "backoff": eager after a failure, until the retry */
	KP_RT_R_GAVE_UP,          /* "gave-up": failed too often, eager for good */
	KP_RT_R_VERIFY,           /* "verify-mismatch": graph output differs from eager */
	KP_RT_R_NESTED,           /* "nested": inside another region's capture (runs inline) */
	KP_RT_R_BUSY,             /* "busy": same region+stream entered by another thread */
	KP_RT_R_AMBIGUOUS,        /* "ambiguous-bind": at capture a pointer was the base of one
				     bound range and inside another (a slice at its buffer's
				     start): capture is retried on the next call */
	KP_RT_R_WOULD_BREAK,      /* "would-break-capture": the watched warm-up call did
				     something a capture cannot hold (a sync, an allocation,
				     a launch on another stream...): eager for good, no
				     capture is ever started */
	KP_RT_R_UNBOUND_CHANGE,   /* "unbound-change": a kernel argument differed between the
				     watched call and the capture and no bind covers it (a
				     seed or step passed by value): a replay would reuse a
				     stale value, so the region stays eager */
	KP_RT_R_UNTRUSTED,        /* "untrusted-plan": a trust key is set and the plan is
				     unsigned, its signature is bad or by an untrusted key, or
				     a source it references changed: every region eager */
	KP_RT_R_COUNT
};

/* Counters since kp_rt_open (a consistent-enough snapshot; never reset). */
struct kp_rt_stats {
	uint64_t calls;           /* kp_region_begin calls */
	uint64_t replays;         /* calls served by one graph launch (body skipped) */
	uint64_t captures;        /* successful captures (graph instantiated) */
	uint64_t eager;           /* calls whose body ran eagerly, all reasons */
	uint64_t eager_by_reason[KP_RT_R_COUNT];
	uint64_t failures[KP_RT_R_COUNT]; /* graph failures (each logged once per graph) */
	uint64_t patched_nodes;   /* kernel nodes updated by SetParams */
	uint64_t patched_words;   /* pointer words rewritten */
	uint64_t evictions;       /* graphs dropped from a full shape-key cache */
	uint64_t verified;        /* replays compared equal to eager in verify mode */
	uint64_t graphs;          /* graphs alive now */
	uint64_t graph_nodes;     /* nodes in the graphs alive now */
	int64_t graph_mem_bytes;  /* device memory held by graph memory pools now */
	int64_t replay_host_ns;   /* KP_RT_TIMING: host time in begin+end of replays */
	int64_t replay_launch_ns; /* KP_RT_TIMING: part of it inside cudaGraphLaunch */
	int64_t replay_patch_ns;  /* KP_RT_TIMING: part of it patching parameters */
	uint64_t watched;         /* warm-up calls watched before a first capture */
	uint64_t unwatched;       /* first captures that could not be checked (another
				     CUPTI client, KPLAN_RT_WATCH=0) */
	int64_t watch_ns;         /* host time spent in watched calls (body included) */
	uint64_t patched_values;  /* scalar words rewritten (kp_rt_bind_value) */
	uint64_t cupti_attaches;  /* process-wide: times the watch attached CUPTI */
	uint64_t cupti_detaches;  /* process-wide: times it detached it (cuptiFinalize)
				     after its watches (KPLAN_RT_WATCH_DETACH) */
	uint64_t cupti_attached;  /* 1 while the watch's CUPTI subscription exists */
	/* opened with a bundle (kplan bundle; appended last, so the struct only grows) */
	uint64_t bundle_entries;  /* entries in the bundle; 0: a plan file (or none) */
	uint64_t bundle_entry;    /* the entry applied, from 1 (kplan show BUNDLE's #N);
				     0: none applies (every region eager, plan-mismatch) */
	uint64_t bundle_match;    /* how it fits the GPU: 1 gpu-name and sm-count, 2
				     gpu-name, 3 sm-count, 4 hard keys only, 5 no entry
				     (kp_rt_plan_choice says it in words) */
	uint64_t agreements;      /* kp_rt_set_agree calls made (appended last) */
};

/* Flags of kp_rt_bind. */
enum kp_rt_bind_flags {
	KP_RT_BIND_OUTPUT = 1 << 0,  /* compared against eager in verify mode */
	KP_RT_BIND_VALUE = 1 << 1,   /* set by kp_rt_bind_value: the slot is a scalar */
};

#define KP_RT_MAX_BINDS 16

/*
 * One call of a region. Caller-owned (on the stack), filled by
 * kp_region_begin; the fields are private to the runtime.
 */
typedef struct kp_region {
	void *entry_;          /* the graph entry, NULL when eager */
	void *stream_;         /* the stream given to begin */
	int mode_;             /* what begin decided */
	int n_binds_;          /* highest bound slot + 1 */
	int64_t t0_;           /* KP_RT_TIMING start */
	int ranged_;           /* begin pushed a named range that end pops */
	struct {
		const void *base;
		size_t size;
		unsigned flags;
		uint64_t value;   /* KP_RT_BIND_VALUE: the value's bytes, zero-padded */
	} bind_[KP_RT_MAX_BINDS];
} kp_region;

/*
 * Open the runtime with the plan at plan_path (NULL: every region eager).
 * plan_path may also name a bundle (kplan bundle: a directory holding one
 * model's plans for several GPUs): the entry whose hard keys match this
 * GPU and whose soft keys match best is applied (first same GPU name and
 * SM count, then same name, then same SM count, then only compute
 * capability and CUDA major), logged with why and kept in
 * kp_rt_stats.bundle_* and kp_rt_plan_choice; no entry: as a plan for
 * another GPU. With a trust key the bundle's one signature must hold over
 * every entry. Options come from the KPLAN_RT_* environment. Initialises CUDA on the
 * current device and checks the plan's hard keys (compute capability, CUDA
 * major version) and, when the plan is pinned to a model (kplan plan
 * --for) and the application names its own (KPLAN_RT_MODEL), the model
 * identity: a plan for another GPU or model is logged once and every region
 * runs eagerly (in strict mode open fails with -12 EMISMATCH). Returns NULL
 * with *err filled when the plan cannot be read or CUDA cannot start; err
 * may be NULL. Close with kp_rt_close.
 */
kp_rt *kp_rt_open(const char *plan_path, struct kp_rt_err *err);

/* kp_rt_open with explicit options (opt NULL: defaults). */
kp_rt *kp_rt_open_ex(const char *plan_path, const struct kp_rt_options *opt,
		     struct kp_rt_err *err);

/*
 * Free every graph and the plan; prints the counters first when stats
 * printing is on. No region may be between begin and end. NULL is a no-op.
 */
void kp_rt_close(kp_rt *rt);

/*
 * Enter region `name` (a label of the plan) with shape key shape_key (the
 * application's hash of whatever changes the launch configuration; calls
 * with different keys get different graphs) on stream (a cudaStream_t).
 * Returns 1 when the body must run (eager, warm-up or captured), 0 when it
 * must be skipped (the graph is replayed at kp_region_end), or, in strict
 * mode, a negative KP_E* code on a mismatch: the body must run then too,
 * so `if (kp_region_begin(...))` is right in every mode. rt NULL: returns 1.
 */
int kp_rt_region_begin(kp_rt *rt, kp_region *r, const char *name,
		       uint64_t shape_key, void *stream);

/*
 * Declare that slot (0..KP_RT_MAX_BINDS-1) is the buffer [base, base+size)
 * for this call (see the rules above). Returns 0, or -1 (EINVAL) for a bad
 * slot. rt NULL: returns 0.
 */
int kp_rt_bind(kp_rt *rt, kp_region *r, int slot, const void *base,
	       size_t size, unsigned flags);

/*
 * Declare that slot holds a scalar kernel argument passed by value whose
 * value may change from call to call (a random seed, a step counter, a
 * learning rate): size bytes (1..8) at value, copied. At capture the
 * runtime finds the kernel parameters of exactly that size holding exactly
 * those bytes (restricted to the plan's `patch ... scalar` lines when it
 * has them, and confirmed against the watched warm-up call); at replay it
 * rewrites them with the call's value, like a moved pointer. Same calling
 * rules as kp_rt_bind. Returns 0, or -1 (EINVAL) for a bad slot or size.
 */
int kp_rt_bind_value(kp_rt *rt, kp_region *r, int slot, const void *value,
		     size_t size);

/*
 * Leave the region: finish the capture (verify, instantiate, launch) or
 * patch and launch the graph, or nothing for an eager call. Returns 0 when
 * the region's work is enqueued, 1 when the body must run again (begin
 * again: it will run eagerly), or in strict mode a negative KP_E* code on a
 * mismatch (the work was done eagerly). rt NULL: returns 0.
 */
int kp_rt_region_end(kp_rt *rt, kp_region *r);

/* Copy the counters into *st. */
void kp_rt_get_stats(kp_rt *rt, struct kp_rt_stats *st);

/* Print the counters, one "kplan-rt: name value" line each, to f. */
void kp_rt_print_stats(kp_rt *rt, FILE *f);

/* Stable name of a reason ("capture-failed"); "?" when out of range. */
const char *kp_rt_reason_name(int reason);

/*
 * Last strict-mode error message of this thread ("" when none). The string
 * is thread-local and valid until the next runtime call of this thread.
 */
const char *kp_rt_last_error(void);

/* What the plan says about one region (kp_rt_region_plan). */
struct kp_rt_region_info {
	int decision;             /* 0 eager, 1 graph, 2 split */
	int warmup;               /* eager calls before capture */
	uint32_t kernels;         /* kernels per occurrence */
	uint32_t n_patches;       /* patch lines (pointer and scalar) */
	uint32_t n_scalar_patches;/* of which scalars passed by value */
	uint64_t fingerprint;     /* hash of the kernel signature sequence */
	char reason[64];          /* the plan's reason token ("launch-bound") */
	uint32_t bundle_entry;    /* the plan is entry N (from 1) of a bundle; 0: a plan
				     file (appended last, as kp_rt_stats' bundle fields) */
	uint32_t bundle_match;    /* kp_rt_stats.bundle_match */
};

/*
 * Look region `name` up in the open plan. Returns 0 and fills *info when
 * the plan has it, 1 when it does not (or there is no plan, or the plan does
 * not apply on this GPU: then every region is eager), -1 for bad arguments.
 * For callers that capture by other means (the PyTorch package).
 */
int kp_rt_region_plan(kp_rt *rt, const char *name, struct kp_rt_region_info *info);

/*
 * Opened with a bundle: which entry applies and why ("entry #2 NVIDIA H200,
 * 132 SMs, cc 9.0, CUDA 13: gpu-name and sm-count match"), or why none does
 * ("no entry applies: #1 compute-capability: plan wants 8.0, gpu has
 * 9.0"). "" for a plan file or no plan. Owned by rt, valid until
 * kp_rt_close.
 */
const char *kp_rt_plan_choice(kp_rt *rt);

/*
 * The torch fusion groups of the plan applied (kplan.torch's, plan/FORMAT.md,
 * "Torch fusion groups"): the path of their file, whether or not it exists
 * (PLAN.aten beside a plan file; for a bundle, the chosen entry's
 * plan-<body-hash>.aten in the bundle, its sources beside it), and that
 * plan's body-hash in *plan_hash (may be NULL), which the file's plan-hash
 * must equal. NULL (and *plan_hash 0) when no plan was read or no bundle
 * entry applies. With a trust list, kp_rt_kernel_load compiles only the
 * sources of these groups that the signature covered. Owned by rt, valid
 * until kp_rt_close.
 */
const char *kp_rt_aten_groups(kp_rt *rt, uint64_t *plan_hash);

/*
 * Open / close a named range in NVTX domain "kplan" (the runtime's own
 * domain: `kplan analyze` plans only regions found there). kind: 1 for a
 * region the C API captures on its stream, 2 for a region captured by a
 * language binding (PyTorch). kp_rt_region_begin/end do this themselves.
 * No-ops without a CUDA backend. rt may be NULL.
 */
void kp_rt_range_push(kp_rt *rt, const char *name, int kind);
void kp_rt_range_pop(kp_rt *rt);

/* Flags of kp_rt_watch_begin. */
enum kp_rt_watch_flags {
	KP_RT_WATCH_ALLOW_ALLOC = 1 << 0, /* allocations are not blockers (a caching
					     allocator that captures into a pool) */
};

/* Verdict of one watched call. */
struct kp_rt_watch_result {
	int verdict;              /* 0 capturable, 1 would break, -1 could not check */
	char call[64];            /* the offending API call ("cudaStreamSynchronize") */
	char kernel[160];         /* the last kernel launched before it ("" when none) */
	char msg[320];            /* one line: what, which stream, the fix */
};

/*
 * Watch what the calling thread does between begin and end (one eager call
 * of a region body) and tell whether a stream capture on `stream` would
 * hold it: every launch and copy on stream or on a stream forked from it
 * and joined back, no synchronisation, query, allocation or pageable copy.
 * Uses CUPTI callbacks inside the process; only one CUPTI client can be
 * attached, so with a profiler attached the verdict is -1 (could not check).
 * begin returns 0 when watching, -1 when it cannot (end then reports -1).
 * One watch at a time per process: a second begin waits for the first end.
 */
int kp_rt_watch_begin(kp_rt *rt, void *stream, unsigned flags);
int kp_rt_watch_end(kp_rt *rt, struct kp_rt_watch_result *res);

/*
 * After a watch CUPTI stays attached, narrowed to a few calls, and is
 * detached once no watch has run for 200 ms (KPLAN_RT_WATCH_DETACH=ms; 0:
 * never), so that the watches of one start-up share one attachment (each
 * costs CUPTI's initialisation, 12-22 ms) and the rest of the process runs
 * without CUPTI (attached, every launch costs ~0.5 us more). A binding that
 * knows no other watch is coming calls this to detach at once; the C
 * regions do it themselves. No-op when nothing is attached.
 */
void kp_rt_watch_release(kp_rt *rt);

/*
 * Ranks of one job (the processes of an NCCL or MPI program, each applying
 * the same plan) must decide every region alike: a rank that replays a
 * graph holding collectives that another rank runs eagerly, or that waits
 * in a replay while another's capture failed, hangs the job. agree(ctx, ok)
 * is the job's all-reduce of one verdict: it returns the minimum of ok (0
 * or 1) over every rank (an ncclAllReduce with ncclMin of one int and a
 * copy back, or MPI_Allreduce with MPI_MIN), or a negative value when it
 * cannot (taken as 0). The runtime calls it on every rank at the same two
 * points of each graph (region and shape key): at the end of its watched
 * warm-up call (ok: the watch found nothing a capture cannot hold) and
 * after its capture, before its first replay (ok: the capture succeeded);
 * outside any capture, on the calling thread, inside kp_rt_region_end. A 0
 * anywhere makes the region eager for good on every rank
 * (would-break-capture, or capture-failed "another rank's capture
 * failed"), and no rank retries it. Every rank must run with the same plan
 * and KPLAN_RT_* settings; failures after the first replay (verify mode,
 * launch errors) are not agreed. Set it after kp_rt_open, before the first
 * region; fn NULL: no agreement (one process). kp_rt_stats.agreements
 * counts the calls.
 */
typedef int (*kp_rt_agree_fn)(void *ctx, int ok);
void kp_rt_set_agree(kp_rt *rt, kp_rt_agree_fn fn, void *ctx);

/*
 * Pointer patching in a graph captured by other means (the PyTorch package:
 * torch.cuda.CUDAGraph(keep_graph=True)), PyGraph's indirection: instead of
 * copying each call's argument into the buffer the graph was captured with,
 * point the graph at the argument.
 *
 * kp_rt_gpatch_open reads `graph` (a cudaGraph_t) and finds every aligned
 * 8-byte word of every kernel-node parameter that points into
 * [ptr, ptr + bytes). It returns how many (>= 0, the handle in *out), or:
 *   -1  bad arguments, or no CUDA backend (KPLAN_RT_DISABLE, no GPU)
 *   -2  a memcpy or memset node reads or writes the range: not patchable
 *   -3  a kernel's parameter layout cannot be read
 *   -4  a CUDA error reading the graph
 *   -5  out of memory
 * kp_rt_gpatch_set rewrites those words in `exec` (the graph's
 * cudaGraphExec_t, instantiated from `graph`, which must outlive the
 * handle) to new_ptr + (word - ptr): the next launch reads new_ptr's
 * buffer, launches already queued keep what they had. Only nodes whose
 * words change are updated. 0, -4 on a CUDA error (the exec then holds a
 * mix: patch again or stop replaying it). Pointers the kernels find in
 * device memory rather than in their parameters are not seen: a caller
 * checks a patched replay against an unpatched one before relying on it.
 * Close every handle before kp_rt_close(rt); one handle is not for two
 * threads at once.
 */
typedef struct kp_rt_gpatch kp_rt_gpatch;

int kp_rt_gpatch_open(kp_rt *rt, void *graph, void *exec, const void *ptr, size_t bytes,
		      kp_rt_gpatch **out);
int kp_rt_gpatch_set(kp_rt_gpatch *p, const void *new_ptr);
void kp_rt_gpatch_close(kp_rt_gpatch *p);

/*
 * Fused kernels built outside a plan (kplan.torch's ATen chains,
 * python/kplan/aten_gen.py): kp_rt_kernel_load compiles CUDA source `src`
 * (len bytes) with NVRTC, through the same options and the same on-disk
 * CUBIN cache (keyed by the source's SHA-256) as a plan's fused sources,
 * and loads kernel `name` into *fn. The module stays loaded for the life of
 * the process: graphs that captured a launch of it may outlive rt. Safe
 * while the calling thread captures a stream (the load runs in relaxed
 * capture mode). 0 with msg saying where the CUBIN came from ("cache": the
 * on-disk cache, no NVRTC; "nvrtc": compiled now), or -1 with msg (msg_len
 * bytes) filled. With a trust list (kp_rt_options.trust, KPLAN_RT_TRUST)
 * only a source whose SHA-256 the plan's signature covered is compiled (a
 * torch fusion group shipped beside the plan, plan/FORMAT.md); another is
 * refused, msg beginning "untrusted-source".
 * kp_rt_kernel_launch launches fn on `stream` (a cudaStream_t: a kernel
 * node when the stream captures) with grid x block threads; args holds one
 * pointer per kernel parameter, as for cuLaunchKernel. 0, or the CUresult.
 */
int kp_rt_kernel_load(kp_rt *rt, const char *src, size_t len, const char *name, void **fn,
		      char *msg, size_t msg_len);
int kp_rt_kernel_launch(void *fn, unsigned grid, unsigned block, void *stream, void **args);

/*
 * Compile CUDA source `src` (len bytes) with NVRTC for compute capability
 * cc_major.cc_minor and store the CUBIN in the kernel cache (KPLAN_CACHE_DIR,
 * else $XDG_CACHE_HOME/kplan, else ~/.cache/kplan) under the entry that
 * kp_rt_kernel_load looks up on such a GPU with the same NVRTC version. Needs
 * no GPU and no runtime: the cache entries can be made on a build machine and
 * shipped (kplan.aten_plan's precompile for a plan's torch fusion groups). 0
 * with msg "nvrtc" (compiled and stored) or "cache" (already there), or -1
 * with msg filled (no NVRTC, no usable cache directory, a compile error).
 */
int kp_rt_kernel_precompile(const char *src, size_t len, int cc_major, int cc_minor, char *msg,
			    size_t msg_len);

/* The region-marking names of ARCHITECTURE.md, as inline aliases. */
static inline int kp_region_begin(kp_rt *rt, kp_region *r, const char *name,
				  uint64_t shape_key, void *stream)
{
	return kp_rt_region_begin(rt, r, name, shape_key, stream);
}

static inline int kp_region_end(kp_rt *rt, kp_region *r)
{
	return kp_rt_region_end(rt, r);
}

#ifdef __cplusplus
}
#endif

#endif
