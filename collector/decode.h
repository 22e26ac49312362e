/*
 * decode.h - CUPTI activity records -> kplan trace rows.
 *
 * The decoder turns CUPTI activity records (the structs of cupti_activity.h:
 * CUpti_ActivityKernel10, Memcpy6, MemcpyPtoP4, Memset4, Synchronization2,
 * Marker2, MarkerData2, API, Overhead3, Device5, Context3) into the
 * kp_*_rec structs of db/writer.h and hands them to a struct kp_writer.
 *
 * It makes no CUPTI call: names of API callback ids and kernel demangling
 * come through hooks, and a buffer is walked with a caller-given iterator
 * (cuptiActivityGetNextRecord in the collector, a fixed-stride walk in the
 * unit tests). That keeps the decoding testable on a machine with no GPU
 * and lets the unit-test binary link without libcupti.
 *
 * One decoder serves one writer thread; it is not thread-safe.
 */
#ifndef KP_COLLECT_DECODE_H
#define KP_COLLECT_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <cupti_activity.h>

#include "../common/hash.h"
#include "../common/vec.h"
#include "../db/writer.h"

struct kp_decode_hooks {
	void *ctx;
	/*
	 * Name of an API callback id (driver: 1 for the driver API, 0 for the
	 * runtime API), or NULL when unknown. The string must stay valid for
	 * the life of the process (CUPTI's names do).
	 */
	const char *(*api_name)(void *ctx, int driver, uint32_t cbid);
	/* Demangled copy of a mangled kernel name (malloc'd) or NULL. */
	char *(*demangle)(void *ctx, const char *mangled);
};

/* Per-kind counters: what the decoder has seen, written and skipped. */
struct kp_decode_stats {
	int64_t kernels, memcpys, memsets, syncs, apis, overheads;
	int64_t nvtx_ranges, nvtx_marks, devices, contexts, marker_data;
	int64_t unknown;          /* records of a kind the decoder does not handle */
	int64_t unmatched_ends;   /* NVTX range ends with no start seen */
	int64_t failed;           /* records the writer rejected */
};

struct kp_decode_range {        /* an NVTX range whose end is not seen yet */
	uint32_t id;
	int64_t start, tid, domain_id;
	int pushpop;
	int category;
	uint32_t color;
	char *name;
};

struct kp_decoder {
	struct kp_writer *w;
	int64_t pid;               /* for globalPid / globalTid: pid << 24 */
	struct kp_decode_hooks hooks;
	struct kp_decode_stats st;
	/* kernel names: CUPTI name pointer -> demangled name, direct-mapped in
	 * front of a map keyed by the mangled string */
	struct { const char *key; const char *val; } name_cache[1024];
	struct kp_strmap names;    /* mangled -> index into demangled */
	KP_VEC(char *) demangled;
	/* NVTX */
	KP_VEC(struct kp_decode_range) open;
	struct kp_strmap domains;  /* domain name -> domainId (1, 2, ...) */
	int64_t next_domain;
	/* contextId -> deviceId (from CONTEXT and kernel records) */
	KP_VEC(uint32_t) ctx_dev;
	/* first DEVICE record goes into the run row too */
	int run_device_set;
};

/* pid: the traced process id. hooks may be NULL (no names, no demangling). */
void kp_decode_init(struct kp_decoder *d, struct kp_writer *w, int64_t pid,
		    const struct kp_decode_hooks *hooks);
void kp_decode_release(struct kp_decoder *d);

/*
 * Decode one record into the writer. Returns 0 when written (or absorbed,
 * e.g. an NVTX range start waiting for its end), 1 when the kind is not
 * handled (counted in st.unknown), negative KP_E* when the writer failed
 * (counted in st.failed, err filled).
 */
int kp_decode_record(struct kp_decoder *d, const CUpti_Activity *rec, struct kp_err *err);

/*
 * Walk a buffer with next (returns 0 and sets *rec for each record, any
 * other value at the end) and decode every record. Writer failures do not
 * stop the walk; the first one is reported in err. Returns the number of
 * records seen (decoded, skipped or failed).
 */
typedef int (*kp_decode_next_fn)(uint8_t *buf, size_t valid, CUpti_Activity **rec);
int64_t kp_decode_buffer(struct kp_decoder *d, uint8_t *buf, size_t valid,
			 kp_decode_next_fn next, struct kp_err *err);

/*
 * At the end of a recording: NVTX ranges still open are written with
 * end = end_ns (the end of the recording). Returns how many.
 */
int64_t kp_decode_finish(struct kp_decoder *d, int64_t end_ns, struct kp_err *err);

/* nsys-style global ids. */
static inline int64_t kp_global_tid(int64_t pid, int64_t tid)
{
	return (pid << 24) | (tid & 0xffffff);
}

/*
 * For an API callback name: the CUpti_ActivitySynchronizationType of a call
 * that synchronizes (cudaStreamSynchronize, cuEventSynchronize,
 * cudaStreamWaitEvent_ptsz, ...; common/cuda_api.def, SYNC), with 1 << 4
 * added for a per-thread-stream (_ptsz) flavour; 0 for any other call. The
 * collector records those calls' synchronization records from callbacks.
 */
int kp_decode_sync_code(const char *name);

/*
 * 1 when the collector stores an API row for the call named name (any
 * flavour) of the runtime (driver 0) or driver (driver 1) API: the
 * calls common/cuda_api.def marks RECORD. CUPTI's API records are enabled
 * for exactly these callback ids.
 */
int kp_decode_api_recorded(const char *name, int driver);

/*
 * Whether a launch's attributes (n entries, stride bytes apart: a
 * cudaLaunchAttribute array, or the driver's CUlaunchAttribute, which has
 * the same layout) ask for programmatic dependent launch: programmatic
 * stream serialization allowed, or a programmatic event. At most 64 are read.
 */
int kp_decode_launch_pdl(const void *attrs, unsigned n, size_t stride);

/* Name of an overhead kind ("cupti buffer flush", ...); never NULL. */
const char *kp_decode_overhead_name(int overhead_kind);

#endif
