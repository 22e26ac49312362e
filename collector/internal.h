/*
 * internal.h - what the collector's files share: the one per-process state
 * (struct kp__col_state), the records queued for the writer thread, and the
 * kp__col_ functions one file calls in another.
 *
 * Files, from the bottom: settings.c (KPLAN_* environment), cuda_info.c (CUPTI
 * and driver names, versions, device rows), buffers.c (CUPTI's activity
 * buffers and the queue to the writer), callbacks.c (records built from
 * CUPTI callbacks, the live window), enable.c (turning collection on and
 * off), writer_thread.c (the writer thread: decode, insert, finish the run),
 * shutdown.c (atexit, signals, fork), inject.c (InitializeInjection). A file
 * calls only the ones before it (check-layers, scripts/check_cycles.py).
 */
#ifndef KP_COLLECTOR_INTERNAL_H
#define KP_COLLECTOR_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h>
#include <cupti.h>

#include "../common/vec.h"
#include "../db/writer.h"

#define KP__N_CBIDS 2048   /* callback ids looked at in each API domain */
#define KP__COL_N_KINDS 9  /* entries of kp__col_kinds */

struct kp__qbuf {
	uint8_t *p;
	size_t size, valid;
};

/* a launch argument, or with index KP__ARG_PDL the fact that the launch used
 * programmatic dependent launch (a kp_launch_attrs row) */
#define KP__ARG_PDL 0xffff

struct kp__arg_rec {
	uint32_t corr;
	uint16_t index;
	uint32_t size;
	int64_t value;
	int has_value;
};

/* records kplan builds from callbacks, decoded like CUPTI's own */
union kp__synth_rec {
	CUpti_Activity base;
	CUpti_ActivitySynchronization2 sync;
	CUpti_ActivityAPI api;
};

/* The collector's state: one per process (InitializeInjection fills it). */
struct kp__col_state {
	pid_t pid;
	int started;                 /* InitializeInjection got far enough */
	atomic_int shutdown;
	atomic_int sig_flush;        /* a signal handler asks the writer to finish */
	atomic_int finished;         /* the writer closed the database */
	atomic_int db_failed;        /* writer gave up: drop everything */
	int have_writer;
	int thread_created;
	int zeroed_buffers;
	/* config */
	char *out, *nvtx_range, *command;
	int profiler_api, args;
	int64_t skip;
	double duration_s;
	size_t mem_bytes, buf_size;
	int64_t t0_ns;
	/* queue of completed buffers, guarded by mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kp__qbuf *q;
	size_t qhead, qlen, qcap;
	size_t queued_bytes;
	int stop;
	uint8_t *pool[8];
	int npool;
	/* launch arguments (--args), guarded by mu */
	KP_VEC(struct kp__arg_rec) argq;
	int64_t args_dropped;
	/* synchronization records from callbacks, guarded by mu */
	KP_VEC(union kp__synth_rec) syncq;
	int64_t syncs_dropped;
	int sync_activity;           /* KPLAN_SYNC_ACTIVITY=1: CUPTI's own kind instead */
	atomic_int sync_off;         /* collection stopped (--duration) */
	/* live window (--profiler-api alone): tracing on only between
	 * cudaProfilerStart and cudaProfilerStop; guarded by kp__col_gate_mu */
	int live;
	atomic_int live_on;
	int64_t live_starts;
	uint8_t kind_wanted[KP__COL_N_KINDS];   /* not left out by KPLAN_DISABLE */
	int api_wanted;
	int api_cb;                  /* API rows built from callbacks, not CUPTI's records */
	atomic_int gate_gen;         /* live window toggles */
	/* counts */
	atomic_llong drop_queue_records, drop_queue_buffers, drop_cupti, drop_db_records;
	atomic_llong drop_args;
	int duration_hit;
	int flush_timed_out;
	pthread_t writer;
	CUpti_SubscriberHandle sub;
	int subscribed;
	struct sigaction old_term, old_int;
	/* writer-thread side */
	struct kp_db *db;
	int64_t run_id;
	int64_t last_ts;
	uint8_t enabled_rt[KP__N_CBIDS], enabled_drv[KP__N_CBIDS];
};

extern struct kp__col_state kp__col;

/* Activity kinds we enable (runtime/driver API records are chosen per call). */
extern const CUpti_ActivityKind kp__col_kinds[KP__COL_N_KINDS];

/* Guards the live window's switching (kp__col.live_on, live_starts). */
extern pthread_mutex_t kp__col_gate_mu;

/* --args counts, for the run's note */
extern atomic_llong kp__col_n_rt_cb, kp__col_n_drv_cb, kp__col_n_no_info;

static inline CUpti_CallbackDomain kp__col_api_domain(int d)
{
	return d ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
}

/* What the live window turns on and off: the kinds whose cost is per launch
 * or per copy (device, context, marker and overhead records stay on). */
static inline int kp__col_gated_kind(CUpti_ActivityKind k)
{
	return k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || k == CUPTI_ACTIVITY_KIND_MEMCPY ||
	       k == CUPTI_ACTIVITY_KIND_MEMCPY2 || k == CUPTI_ACTIVITY_KIND_MEMSET;
}

/* settings.c: KPLAN_* as a non-negative integer (def when unset or bad, with
 * a warning); all the settings `kplan record` passes, into kp__col. */
int64_t kp__col_env_int(const char *name, int64_t def);
void kp__col_read_settings(void);

/* cuda_info.c: CUPTI's message for r; fn for every named callback id of the
 * runtime (d 0) and driver (d 1) domains; a driver or runtime symbol; the
 * decoder's hooks (names, demangling; the result of demangle is malloc'ed);
 * versions; device rows from the driver when CUPTI sent none. */
const char *kp__col_cupti_msg(CUptiResult r);
void kp__col_each_callback(void (*fn)(int d, uint32_t cbid, const char *name, void *arg),
			   void *arg);
void *kp__col_cuda_sym(const char *name);
const char *kp__col_api_name(void *ctx, int driver, uint32_t cbid);
char *kp__col_demangle(void *ctx, const char *mangled);
int kp__col_driver_version(void);
int kp__col_runtime_version(void);
void kp__col_devices_from_driver(struct kp_writer *w);

/* buffers.c: CUPTI's buffer callbacks; a buffer back to the pool; the
 * records in a buffer. */
void CUPTIAPI kp__col_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI kp__col_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				       size_t size, size_t valid);
void kp__col_buf_put(uint8_t *p);
int64_t kp__col_count_records(uint8_t *buf, size_t valid);

/* callbacks.c: the subscriber's callback; turning on each family of
 * callbacks (sync records, --args, API rows, launch attributes through
 * kp__col_each_callback(kp__col_ex_one), profiler start/stop); how many
 * records from callbacks the writer takes at a time; forget the cached
 * thread id (a forked child). */
void CUPTIAPI kp__col_on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				  const void *data);
void kp__col_enable_sync_callbacks(void);
void kp__col_enable_arg_callbacks(void);
void kp__col_classify_api_callbacks(void);
void kp__col_enable_api_callbacks(int on);
void kp__col_ex_one(int d, uint32_t cbid, const char *name, void *arg);
void kp__col_enable_profiler_callbacks(void);
size_t kp__col_synth_batch(void);
void kp__col_forget_thread(void);

/* enable.c: turn on what is recorded (once the writer runs); turn it all
 * off (--duration reached, or the database failed). */
void kp__col_enable_recording(void);
void kp__col_disable_all(void);

/* writer_thread.c: the writer thread; flush CUPTI and tell the writer to stop
 * once the queue is drained. */
void *kp__col_writer_main(void *arg);
void kp__col_final_flush(void);

/* shutdown.c: atexit handler, SIGTERM/SIGINT handlers, fork child handler. */
void kp__col_shutdown(void);
void kp__col_install_signals(void);
void kp__col_atfork_child(void);

#endif
