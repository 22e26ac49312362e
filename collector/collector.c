/*
 * collector.c - libkplan_collect.so, the CUPTI injection library.
 *
 * Loaded by the CUDA driver through CUDA_INJECTION64_PATH, which calls
 * InitializeInjection() from inside cuInit. From there:
 *
 *   app threads --(CUPTI fills activity buffers)--> bufferCompleted
 *        --(bounded queue)--> writer thread: decode.c -> struct kp_writer
 *        --(one transaction per batch of buffers)--> SQLite
 *
 * The application's threads never touch the database: CUPTI's own worker
 * hands completed buffers to us, we queue them, and our writer thread
 * decodes and inserts. When more than KPLAN_MEM_MB of buffers wait, a
 * completed buffer is dropped and its records counted (as are CUPTI's own
 * drops); the counts end up in kp_runs.dropped_records/dropped_detail.
 *
 * Nothing here may exit, abort or crash the host process: every failure is
 * one "kplan: ..." line on stderr and collection stops or degrades, while the
 * program runs on with its own exit code.
 *
 * Environment (set by `kplan record`): KPLAN_OUT, KPLAN_NVTX_RANGE,
 * KPLAN_PROFILER_API, KPLAN_SKIP, KPLAN_DURATION, KPLAN_ARGS, KPLAN_MEM_MB,
 * KPLAN_COMMAND (the command line to store; default /proc/self/cmdline).
 * For overhead studies: KPLAN_DISABLE=kernel,api,sync,marker,copy,overhead,attrs,all
 * (leave those records out), KPLAN_DEVICE_BUFFER_MB (CUPTI's per-context
 * device buffer) and KPLAN_CUPTI_PINNED=1 (CUPTI's buffers in pinned host
 * memory).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>

#include "decode.h"
#include "internal.h"
#include "rank.h"
#include "window.h"
#include "../common/cuda_api.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../db/db.h"
#include "../db/writer.h"

#define KP_EXPORT __attribute__((visibility("default")))
/* Activity kinds we enable (runtime/driver API records are chosen per call). */
const CUpti_ActivityKind kp__col_kinds[KP__COL_N_KINDS] = {
	CUPTI_ACTIVITY_KIND_DEVICE,
	CUPTI_ACTIVITY_KIND_CONTEXT,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMCPY2,
	CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_MARKER,
	CUPTI_ACTIVITY_KIND_MARKER_DATA,
	CUPTI_ACTIVITY_KIND_OVERHEAD,
};

/* Launch calls whose arguments --args records (callback API). */
static const char *const rt_launch_calls[] = { "cudaLaunchKernel", "cudaLaunchCooperativeKernel", NULL };
static const char *const drv_launch_calls[] = { "cuLaunchKernel", "cuLaunchCooperativeKernel", NULL };
struct kp__col_state kp__col = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};

/* ------------------------------------------------------------------------ */
/* small helpers */

const char *kp__col_cupti_msg(CUptiResult r)
{
	const char *s = NULL;

	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown cupti error";
	return s;
}

int64_t kp__col_env_int(const char *name, int64_t def)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0) {
		kp_warn("%s='%s' is not a non-negative integer; using %lld", name, s,
			(long long)def);
		return def;
	}
	return v;
}

static int name_matches(const char *name, const char *const *prefixes)
{
	size_t i;

	while (*name == '_')
		name++;
	for (i = 0; prefixes[i]; i++) {
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return 1;
	}
	return 0;
}

/* fn(d, cbid, name, arg) for every named callback id of the runtime (d 0)
 * and driver (d 1) API domains */
void kp__col_each_callback(void (*fn)(int d, uint32_t cbid, const char *name, void *arg),
			  void *arg)
{
	const char *name;
	uint32_t cbid;
	int d;

	for (d = 0; d < 2; d++) {
		for (cbid = 1; cbid < KP__N_CBIDS; cbid++) {
			if (cuptiGetCallbackName(kp__col_api_domain(d), cbid, &name) == CUPTI_SUCCESS && name)
				fn(d, cbid, name, arg);
		}
	}
}

static char *read_cmdline(void)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	char buf[4096];
	FILE *f = fopen("/proc/self/cmdline", "rb");
	size_t n, i;

	if (!f)
		return kp_strdup("?");
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		for (i = 0; i < n; i++) {
			if (!buf[i])
				buf[i] = ' ';
		}
		kp_strbuf_add(&sb, buf, n);
	}
	fclose(f);
	while (sb.len && sb.buf[sb.len - 1] == ' ')
		sb.buf[--sb.len] = 0;
	return kp_strbuf_detach(&sb, NULL);
}

/* ------------------------------------------------------------------------ */
/* buffers */

static uint8_t *buf_get(void)
{
	uint8_t *p = NULL;

	pthread_mutex_lock(&kp__col.mu);
	if (kp__col.npool)
		p = kp__col.pool[--kp__col.npool];
	pthread_mutex_unlock(&kp__col.mu);
	if (!p)
		p = calloc(1, kp__col.buf_size);   /* zeroed (fresh pages: no stall) */
	return p;
}

/* Back to the pool, zeroed: CUPTI is told our buffers come zeroed so that
 * it does not zero them itself in the application's thread. */
void kp__col_buf_put(uint8_t *p)
{
	if (kp__col.zeroed_buffers)
		memset(p, 0, kp__col.buf_size);
	pthread_mutex_lock(&kp__col.mu);
	if (kp__col.npool < (int)(sizeof(kp__col.pool) / sizeof(kp__col.pool[0]))) {
		kp__col.pool[kp__col.npool++] = p;
		p = NULL;
	}
	pthread_mutex_unlock(&kp__col.mu);
	free(p);
}

int64_t kp__col_count_records(uint8_t *buf, size_t valid)
{
	CUpti_Activity *rec = NULL;
	int64_t n = 0;

	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
		n++;
	return n;
}

void CUPTIAPI kp__col_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*max_records = 0;
	*buffer = buf_get();
	*size = *buffer ? kp__col.buf_size : 0;
}

void CUPTIAPI kp__col_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	size_t dropped = 0;
	int queued = 0;

	if (ctx && cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS
	    && dropped)
		atomic_fetch_add(&kp__col.drop_cupti, (long long)dropped);
	if (!buffer)
		return;
	if (valid) {
		pthread_mutex_lock(&kp__col.mu);
		if (kp__col.have_writer && !kp__col.stop && !atomic_load(&kp__col.db_failed) &&
		    kp__col.queued_bytes + size <= kp__col.mem_bytes) {
			if (kp__col.qlen == kp__col.qcap) {
				size_t cap = kp__col.qcap ? 2 * kp__col.qcap : 64, i;
				struct kp__qbuf *nq = malloc(cap * sizeof(*nq));

				if (nq) {
					for (i = 0; i < kp__col.qlen; i++)
						nq[i] = kp__col.q[(kp__col.qhead + i) % kp__col.qcap];
					free(kp__col.q);
					kp__col.q = nq;
					kp__col.qhead = 0;
					kp__col.qcap = cap;
				}
			}
			if (kp__col.qlen < kp__col.qcap) {
				kp__col.q[(kp__col.qhead + kp__col.qlen) % kp__col.qcap] = (struct kp__qbuf){ buffer, size, valid };
				kp__col.qlen++;
				kp__col.queued_bytes += size;
				queued = 1;
				pthread_cond_signal(&kp__col.cv);
			}
		}
		pthread_mutex_unlock(&kp__col.mu);
		if (!queued) {
			int64_t n = kp__col_count_records(buffer, valid);

			if (atomic_load(&kp__col.db_failed)) {
				atomic_fetch_add(&kp__col.drop_db_records, n);
			} else {
				atomic_fetch_add(&kp__col.drop_queue_records, n);
				atomic_fetch_add(&kp__col.drop_queue_buffers, 1);
			}
		}
	}
	if (!queued)
		kp__col_buf_put(buffer);
}

/* ------------------------------------------------------------------------ */
/* names and versions for the decoder / run row */

/* CUPTI's name for a callback id, as nsys shows it ("cudaLaunchKernel_v7000");
 * cached per id (only the writer thread calls this). */
const char *kp__col_api_name(void *ctx, int driver, uint32_t cbid)
{
	static const char *cache[2][KP__N_CBIDS];
	const char *name = NULL;

	(void)ctx;
	if (cbid < KP__N_CBIDS && cache[driver != 0][cbid])
		return cache[driver != 0][cbid];
	if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
				 cbid, &name) != CUPTI_SUCCESS)
		return NULL;
	if (cbid < KP__N_CBIDS)
		cache[driver != 0][cbid] = name;
	return name;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

char *kp__col_demangle(void *ctx, const char *mangled)
{
	static demangle_fn fn;
	static int looked;
	int status = 0;
	char *s;

	(void)ctx;
	if (mangled[0] != '_' || mangled[1] != 'Z')
		return NULL;
	if (!looked) {
		looked = 1;
		fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!fn) {
			void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

			if (h)
				fn = (demangle_fn)dlsym(h, "__cxa_demangle");
		}
	}
	if (!fn)
		return NULL;
	s = fn(mangled, NULL, NULL, &status);
	if (status) {
		free(s);
		return NULL;
	}
	return s;
}

/* A driver or runtime symbol: the driver is often dlopen'ed RTLD_LOCAL (by
 * static cudart, by PyTorch), so RTLD_DEFAULT alone does not find it. */
void *kp__col_cuda_sym(const char *name)
{
	static const char *const libs[] = { "libcuda.so.1", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so", NULL };
	void *p = dlsym(RTLD_DEFAULT, name), *h;
	size_t i;

	for (i = 0; !p && libs[i]; i++) {
		if ((h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD))) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	return p;
}

typedef CUresult (*drv_int_fn)(int *);
typedef int (*rt_int_fn)(int *);

int kp__col_driver_version(void)
{
	drv_int_fn fn = (drv_int_fn)kp__col_cuda_sym("cuDriverGetVersion");
	int v = 0;

	if (fn && fn(&v) != CUDA_SUCCESS)
		v = 0;
	return v;
}

int kp__col_runtime_version(void)
{
	/* only visible when the app links libcudart dynamically */
	rt_int_fn fn = (rt_int_fn)kp__col_cuda_sym("cudaRuntimeGetVersion");
	int v = 0;

	if (fn && fn(&v) != 0)
		v = 0;
	return v;
}

/* Device rows from the driver, for when CUPTI sent no DEVICE record. */
void kp__col_devices_from_driver(struct kp_writer *w)
{
	CUresult (*get_count)(int *) = (CUresult (*)(int *))kp__col_cuda_sym("cuDeviceGetCount");
	CUresult (*get_name)(char *, int, CUdevice) =
		(CUresult (*)(char *, int, CUdevice))kp__col_cuda_sym("cuDeviceGetName");
	CUresult (*get_attr)(int *, CUdevice_attribute, CUdevice) =
		(CUresult (*)(int *, CUdevice_attribute, CUdevice))kp__col_cuda_sym("cuDeviceGetAttribute");
	CUresult (*total_mem)(size_t *, CUdevice) =
		(CUresult (*)(size_t *, CUdevice))kp__col_cuda_sym("cuDeviceTotalMem_v2");
	int n = 0, i;

	if (!get_count || !get_name || !get_attr || get_count(&n) != CUDA_SUCCESS)
		return;
	for (i = 0; i < n && i < 64; i++) {
		struct kp_gpu_rec r;
		char name[256] = "";
		size_t mem = 0;
		int v;

		memset(&r, 0, sizeof(r));
		get_name(name, sizeof(name), i);
		r.id = i;
		r.name = name;
#define ATTR(field, a) do { v = 0; get_attr(&v, a, i); r.field = v; } while (0)
		ATTR(sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
		ATTR(compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
		ATTR(compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
		ATTR(clock_rate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
		ATTR(l2_cache_size, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
		ATTR(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
		ATTR(max_registers_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
		ATTR(max_shmem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
		ATTR(max_shmem_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
		ATTR(threads_per_warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
#undef ATTR
		if (total_mem && total_mem(&mem, i) == CUDA_SUCCESS)
			r.total_memory = (int64_t)mem;
		kp_writer_gpu(w, &r, NULL);
		if (i == 0) {
			sqlite3_stmt *st;

			if (!kp_db_prepare(w->db, "UPDATE kp_runs SET device_name = ?,"
					   " compute_major = ?, compute_minor = ?, sm_count = ?"
					   " WHERE runId = ? AND device_name IS NULL", &st, NULL)) {
				sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
				sqlite3_bind_int(st, 2, r.compute_major);
				sqlite3_bind_int(st, 3, r.compute_minor);
				sqlite3_bind_int(st, 4, r.sm_count);
				sqlite3_bind_int64(st, 5, w->run_id);
				sqlite3_step(st);
				sqlite3_finalize(st);
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* enabling / disabling collection */

/* Turn CUPTI's API records for the calls that matter (common/cuda_api.def,
 * RECORD) on or off. */
static void api_record_one(int d, uint32_t cbid, const char *name, void *arg)
{
	uint8_t on = (uint8_t)*(const int *)arg, *en = d ? kp__col.enabled_drv : kp__col.enabled_rt;

	if (en[cbid] != on && kp_decode_api_recorded(name, d) &&
	    (d ? cuptiActivityEnableDriverApi(cbid, on)
	       : cuptiActivityEnableRuntimeApi(cbid, on)) == CUPTI_SUCCESS)
		en[cbid] = on;
}

static void enable_api_records(int on)
{
	kp__col_each_callback(api_record_one, &on);
}

pthread_mutex_t kp__col_gate_mu = PTHREAD_MUTEX_INITIALIZER;

void kp__col_disable_all(void)
{
	size_t i;

	pthread_mutex_lock(&kp__col_gate_mu);
	for (i = 0; i < KP__COL_N_KINDS; i++)
		cuptiActivityDisable(kp__col_kinds[i]);
	if (kp__col.sync_activity)
		cuptiActivityDisable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
	atomic_store(&kp__col.sync_off, 1);
	enable_api_records(0);
	if (kp__col.api_cb)
		kp__col_enable_api_callbacks(0);
	pthread_mutex_unlock(&kp__col_gate_mu);
}

/*
 * The live window: tracing on at cudaProfilerStart's exit, off at
 * cudaProfilerStop's entry (the runtime call and the driver call inside it
 * both come here; the second is a no-op). Launches before Stop keep their
 * records: CUPTI completes the records of kernels it instrumented. The
 * window is still applied to the rows at the end (window.c), so what is
 * kept does not depend on this; this only saves the cost outside it.
 */
static void live_gate(int on)
{
	size_t i;

	pthread_mutex_lock(&kp__col_gate_mu);
	if (on == atomic_load(&kp__col.live_on) || (on && atomic_load(&kp__col.sync_off))) {
		pthread_mutex_unlock(&kp__col_gate_mu);
		return;
	}
	for (i = 0; i < KP__COL_N_KINDS; i++) {
		if (kp__col_gated_kind(kp__col_kinds[i]) && kp__col.kind_wanted[i])
			(on ? cuptiActivityEnable : cuptiActivityDisable)(kp__col_kinds[i]);
	}
	if (kp__col.sync_activity)
		(on ? cuptiActivityEnable : cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
	if (kp__col.api_wanted)
		kp__col_enable_api_callbacks(on);   /* CUPTI's API records cannot start mid-run */
	atomic_fetch_add(&kp__col.gate_gen, 1);
	kp__col.live_starts += on;
	atomic_store(&kp__col.live_on, on);
	pthread_mutex_unlock(&kp__col_gate_mu);
}

/* profiler start/stop callback ids: 1 start, 2 stop */
static uint8_t prof_rt[KP__N_CBIDS], prof_drv[KP__N_CBIDS];

static void profiler_one(int d, uint32_t cbid, const char *name, void *arg)
{
	(void)arg;
	if (kp_cuda_api_class(name) == KP_API_PROFILER &&
	    cuptiEnableCallback(1, kp__col.sub, kp__col_api_domain(d), cbid) == CUPTI_SUCCESS)
		(d ? prof_drv : prof_rt)[cbid] = strstr(name, "Start") ? 1 : 2;
}

void kp__col_enable_profiler_callbacks(void)
{
	kp__col_each_callback(profiler_one, NULL);
}

/* ------------------------------------------------------------------------ */
/* --args: the callback API on launch calls */

static __thread uint32_t tls_rt_corr;
atomic_llong kp__col_n_no_info;
typedef CUresult (*param_info_fn)(CUfunction, size_t, size_t *, size_t *);
static param_info_fn param_info;

typedef CUresult (*kparam_info_fn)(CUkernel, size_t, size_t *, size_t *);
static kparam_info_fn kernel_param_info;

/* Parameter layout per launched handle (CUfunction, or a CUkernel cast to
 * one, which is what the CUDA 12+ runtime passes to cuLaunchKernel). */
struct param_layout {
	const void *f;
	int n;
	uint32_t off[64], size[64];
};
static struct param_layout layouts[256];
static pthread_mutex_t layout_mu = PTHREAD_MUTEX_INITIALIZER;

static int get_layout(CUfunction f, struct param_layout *out)
{
	struct param_layout *l = &layouts[((uintptr_t)f >> 4) % 256];
	size_t off, size, i;
	int kernel = 0;

	pthread_mutex_lock(&layout_mu);
	if (l->f == f) {
		*out = *l;
		pthread_mutex_unlock(&layout_mu);
		return 0;
	}
	pthread_mutex_unlock(&layout_mu);
	out->f = f;
	out->n = 0;
	if (param_info(f, 0, &off, &size) != CUDA_SUCCESS) {
		if (!kernel_param_info ||
		    kernel_param_info((CUkernel)f, 0, &off, &size) != CUDA_SUCCESS) {
			/* no parameters, or a handle we cannot query */
			atomic_fetch_add(&kp__col_n_no_info, 1);
			return -1;
		}
		kernel = 1;
	}
	for (i = 0; i < 64; i++) {
		CUresult r = kernel ? kernel_param_info((CUkernel)f, i, &off, &size)
				    : param_info(f, i, &off, &size);

		if (r != CUDA_SUCCESS)
			break;
		out->off[i] = (uint32_t)off;
		out->size[i] = (uint32_t)size;
		out->n++;
	}
	pthread_mutex_lock(&layout_mu);
	*l = *out;
	pthread_mutex_unlock(&layout_mu);
	return 0;
}

/* Per-launch facts for the writer: argument values (--args) and launch
 * attributes (KP__ARG_PDL rows), bounded at KPLAN_MEM_MB / 4, overflow counted. */
static void queue_launch_facts(const struct kp__arg_rec *a, size_t n)
{
	size_t i;

	pthread_mutex_lock(&kp__col.mu);
	if (kp__col.argq.len + n > (size_t)(kp__col.mem_bytes / sizeof(struct kp__arg_rec) / 4)) {
		kp__col.args_dropped += (int64_t)n;
	} else {
		for (i = 0; i < n; i++) {
			if (kp_vec_push(&kp__col.argq, a[i]))
				kp__col.args_dropped++;
		}
	}
	pthread_mutex_unlock(&kp__col.mu);
}

static void record_args(uint32_t corr, CUfunction f, void **params, void **extra)
{
	static __thread struct param_layout lay;
	struct kp__arg_rec a[64];
	uint8_t *argbuf = NULL;
	size_t i, n = 0;

	if (!f || !param_info || get_layout(f, &lay))
		return;
	if (!params && extra) {
		for (i = 0; extra[i] && extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				argbuf = extra[i + 1];
		}
	}
	for (i = 0; i < (size_t)lay.n; i++) {
		const void *src = params ? params[i] : argbuf ? argbuf + lay.off[i] : NULL;

		a[n].corr = corr;
		a[n].index = (uint16_t)i;
		a[n].size = lay.size[i];
		a[n].value = 0;
		a[n].has_value = 0;
		if (src && lay.size[i] <= 8) {
			memcpy(&a[n].value, src, lay.size[i]);
			a[n].has_value = 1;
		}
		n++;
	}
	queue_launch_facts(a, n);
}

/*
 * Runtime launch callbacks only remember the runtime call's correlation id:
 * the driver launch that the runtime makes inside it (CUPTI reports it as a
 * nested driver callback) carries the CUfunction, and its arguments are
 * recorded under the runtime id, which is the one the kernel record has.
 * (Calling back into the runtime from here, e.g. cudaGetFuncBySymbol, would
 * change the application's cudaGetLastError state: never do that.)
 */
atomic_llong kp__col_n_rt_cb, kp__col_n_drv_cb;

/*
 * Synchronization records come from callbacks on the calls that synchronize
 * (the runtime's and the driver's), not from CUPTI's SYNCHRONIZATION
 * activity kind: with that kind enabled every launch of a PyTorch GPT-2 step
 * paid ~4 us more (bench/gpt2_overhead.sh); a callback costs only the calls
 * it is enabled for. The record is CUPTI's own struct, so the decoder writes
 * it like an activity record. KPLAN_SYNC_ACTIVITY=1 uses the activity kind.
 */
static uint8_t sync_rt[KP__N_CBIDS], sync_drv[KP__N_CBIDS];   /* type | per-thread << 4 */
static __thread uint64_t tls_sync_t0;
static __thread int tls_in_rt_sync;   /* the runtime call's nested driver call is not another */

/* Records built from callbacks queue for the writer, at most KPLAN_MEM_MB/16
 * of them (more are counted as dropped); the writer takes them a batch at a
 * time (4096, or half the bound if smaller), else within 50 ms. */
static size_t synth_cap(void)
{
	return kp__col.mem_bytes / sizeof(union kp__synth_rec) / 16;
}

size_t kp__col_synth_batch(void)
{
	size_t half = synth_cap() / 2;

	return half < 4096 ? (half ? half : 1) : 4096;
}

static void synth_push(const union kp__synth_rec *src)
{
	union kp__synth_rec r;

	memset(&r, 0, sizeof(r));
	memcpy(&r, src, src->base.kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION ? sizeof(r.sync)
								       : sizeof(r.api));
	pthread_mutex_lock(&kp__col.mu);
	if (kp__col.syncq.len >= synth_cap() || kp_vec_push(&kp__col.syncq, r))
		kp__col.syncs_dropped++;
	else if (kp__col.syncq.len == kp__col_synth_batch())
		pthread_cond_signal(&kp__col.cv);
	pthread_mutex_unlock(&kp__col.mu);
}

/*
 * API rows from callbacks (the live window, or KPLAN_API_CALLBACKS=1): the
 * calls that matter get ENTER/EXIT callbacks and the row is CUPTI's own
 * CUpti_ActivityAPI struct, decoded like an activity record. A driver call
 * made inside a runtime call gets no row of its own, as in CUPTI's records.
 */
static uint8_t api_rt[KP__N_CBIDS], api_drv[KP__N_CBIDS];
static __thread int tls_rt_depth, tls_gen;
static __thread uint64_t tls_api_t0[2];
static __thread uint32_t tls_tid;

static uint32_t thread_id(void)
{
	if (!tls_tid)
		tls_tid = (uint32_t)syscall(SYS_gettid);
	return tls_tid;
}

void kp__col_forget_thread(void)
{
	tls_tid = 0;
}

static void api_row(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
		    const CUpti_CallbackData *cb, uint64_t t0)
{
	union kp__synth_rec r;
	uint64_t now = 0;

	cuptiGetTimestamp(&now);
	memset(&r, 0, sizeof(r));
	r.api.kind = domain == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_ACTIVITY_KIND_DRIVER
							   : CUPTI_ACTIVITY_KIND_RUNTIME;
	r.api.cbid = cbid;
	r.api.start = t0 && t0 <= now ? t0 : now;
	r.api.end = now;
	r.api.processId = (uint32_t)kp__col.pid;
	r.api.threadId = thread_id();
	r.api.correlationId = cb->correlationId;
	if (cb->functionReturnValue)
		r.api.returnValue = *(const uint32_t *)cb->functionReturnValue;
	if (!atomic_load(&kp__col.sync_off))
		synth_push(&r);
}

static void on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
		   const CUpti_CallbackData *cb)
{
	int d = domain == CUPTI_CB_DOMAIN_DRIVER_API, gen = atomic_load(&kp__col.gate_gen);
	uint64_t t0;

	if (tls_gen != gen) {   /* the window opened or closed: forget half-seen calls */
		tls_gen = gen;
		tls_rt_depth = 0;
		tls_api_t0[0] = tls_api_t0[1] = 0;
	}
	if (kp__col.live && !atomic_load(&kp__col.live_on))
		return;   /* a kept callback (sync, --args) outside the window */
	if (cb->callbackSite == CUPTI_API_ENTER) {
		if (!d)
			tls_rt_depth++;
		else if (tls_rt_depth)
			return;
		cuptiGetTimestamp(&tls_api_t0[d]);
		return;
	}
	if (!d && tls_rt_depth > 0)
		tls_rt_depth--;
	else if (d && tls_rt_depth)
		return;
	t0 = tls_api_t0[d];
	tls_api_t0[d] = 0;
	api_row(domain, cbid, cb, t0);
}

/*
 * The calls that get API rows from callbacks, classified once (the window
 * toggles them at every cudaProfilerStart/Stop): api_rt/api_drv hold
 * API_CB_ROW for a call that gets a row and API_CB_KEEP for one whose
 * callback stays on for its sync or --args records.
 */
#define API_CB_ROW 1
#define API_CB_KEEP 2

static void classify_one(int d, uint32_t cbid, const char *name, void *arg)
{
	uint8_t *tab = d ? api_drv : api_rt, *sync = d ? sync_drv : sync_rt;

	(void)arg;
	/* cudaProfilerStart/Stop and cuProfilerStart/Stop: in the live window
	 * their API rows come from callbacks while the others are turned on
	 * and off */
	if (!kp_decode_api_recorded(name, d) ||
	    (kp__col.live && kp_cuda_api_class(name) == KP_API_PROFILER))
		return;
	tab[cbid] = API_CB_ROW;
	if (sync[cbid] || (kp__col.args && name_matches(name, d ? drv_launch_calls : rt_launch_calls)))
		tab[cbid] |= API_CB_KEEP;
}

void kp__col_classify_api_callbacks(void)
{
	kp__col_each_callback(classify_one, NULL);
}

/* Turn the API callbacks on or off (those kept stay on). */
void kp__col_enable_api_callbacks(int on)
{
	uint32_t cbid;
	int d;

	for (d = 0; d < 2; d++) {
		uint8_t *tab = d ? api_drv : api_rt;

		for (cbid = 1; cbid < KP__N_CBIDS; cbid++) {
			if (tab[cbid] && (on || !(tab[cbid] & API_CB_KEEP)))
				cuptiEnableCallback((uint32_t)on, kp__col.sub, kp__col_api_domain(d), cbid);
		}
	}
}

static void on_sync(CUpti_CallbackDomain domain, const CUpti_CallbackData *cb, int code)
{
	CUpti_ActivitySynchronization2 r;
	int type = code & 0xf;
	uint64_t now = 0;

	if ((domain == CUPTI_CB_DOMAIN_DRIVER_API && tls_in_rt_sync) || atomic_load(&kp__col.sync_off))
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
			tls_in_rt_sync = 1;
		tls_sync_t0 = 0;   /* 0: outside the live window, no record */
		if (!kp__col.live || atomic_load(&kp__col.live_on))
			cuptiGetTimestamp(&tls_sync_t0);
		return;
	}
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		tls_in_rt_sync = 0;
	if (!tls_sync_t0)
		return;
	cuptiGetTimestamp(&now);
	memset(&r, 0, sizeof(r));
	r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	r.type = (CUpti_ActivitySynchronizationType)type;
	r.start = tls_sync_t0;
	r.end = now > tls_sync_t0 ? now : tls_sync_t0;
	r.correlationId = cb->correlationId;
	r.streamId = (uint32_t)-1;
	r.cudaEventId = (uint32_t)-1;
	if (cb->context)
		cuptiGetContextId(cb->context, &r.contextId);
	/* the stream is the first parameter of the stream calls */
	if (cb->context && cb->functionParams &&
	    (type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ||
	     type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT)) {
		uint32_t sid;

		if (cuptiGetStreamIdEx(cb->context, *(CUstream const *)cb->functionParams,
				       (uint8_t)(code >> 4), &sid) == CUPTI_SUCCESS)
			r.streamId = sid;
	}
	synth_push((const union kp__synth_rec *)&r);
}

static void sync_one(int d, uint32_t cbid, const char *name, void *arg)
{
	int c = kp_decode_sync_code(name);

	(void)arg;
	if (c && cuptiEnableCallback(1, kp__col.sub, kp__col_api_domain(d), cbid) == CUPTI_SUCCESS)
		(d ? sync_drv : sync_rt)[cbid] = (uint8_t)c;
}

void kp__col_enable_sync_callbacks(void)
{
	kp__col_each_callback(sync_one, NULL);
}

/*
 * cudaProfilerStart/Stop (and the driver's) in the live window: their API
 * rows are built here (CUPTI's API records are off outside the window, and
 * the window is read from these rows at the end), and tracing is turned on
 * at Start's exit and off at Stop's entry.
 */
static __thread uint64_t tls_prof_t0[2];

static void on_profiler_call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			     const CUpti_CallbackData *cb, int start)
{
	int d = domain == CUPTI_CB_DOMAIN_DRIVER_API;

	if (cb->callbackSite == CUPTI_API_ENTER) {
		cuptiGetTimestamp(&tls_prof_t0[d]);
		if (!start)
			live_gate(0);
		return;
	}
	api_row(domain, cbid, cb, tls_prof_t0[d]);
	if (start)
		live_gate(1);
}

/*
 * Programmatic dependent launch: the launch calls that take attributes
 * (cudaLaunchKernelExC, cuLaunchKernelEx) get a callback, and a launch with
 * programmatic stream serialization or a programmatic event gets a
 * kp_launch_attrs row (the analyzer's graph model hides the dependency gap
 * for it). The runtime call's nested driver call is not another launch.
 */
static uint8_t ex_rt[KP__N_CBIDS], ex_drv[KP__N_CBIDS];
static __thread int tls_in_rt_ex;

static void on_ex_launch(CUpti_CallbackDomain domain, const CUpti_CallbackData *cb)
{
	struct kp__arg_rec r = { .index = KP__ARG_PDL };
	int pdl = 0;

	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		const cudaLaunchKernelExC_v11060_params *p = cb->functionParams;

		tls_in_rt_ex = cb->callbackSite == CUPTI_API_ENTER;
		if (cb->callbackSite != CUPTI_API_ENTER || !p || !p->config)
			return;
		pdl = kp_decode_launch_pdl(p->config->attrs, p->config->numAttrs,
					   sizeof(cudaLaunchAttribute));
	} else {
		const cuLaunchKernelEx_params *p = cb->functionParams;

		if (cb->callbackSite != CUPTI_API_ENTER || tls_in_rt_ex || !p || !p->config)
			return;
		pdl = kp_decode_launch_pdl(p->config->attrs, p->config->numAttrs,
					   sizeof(CUlaunchAttribute));
	}
	if (!pdl || atomic_load(&kp__col.sync_off) || (kp__col.live && !atomic_load(&kp__col.live_on)))
		return;
	r.corr = cb->correlationId;
	queue_launch_facts(&r, 1);
}

static const char *const rt_ex_calls[] = { "cudaLaunchKernelExC", NULL };
static const char *const drv_ex_calls[] = { "cuLaunchKernelEx", NULL };

void kp__col_ex_one(int d, uint32_t cbid, const char *name, void *arg)
{
	(void)arg;
	if (name_matches(name, d ? drv_ex_calls : rt_ex_calls) &&
	    cuptiEnableCallback(1, kp__col.sub, kp__col_api_domain(d), cbid) == CUPTI_SUCCESS)
		(d ? ex_drv : ex_rt)[cbid] = 1;
}

/* The entry of a per-domain table (runtime, driver) for a callback; 0 for
 * other domains and ids past the tables. */
static uint8_t cb_flag(const uint8_t *rt, const uint8_t *drv, CUpti_CallbackDomain domain,
		       CUpti_CallbackId cbid)
{
	if (cbid >= KP__N_CBIDS)
		return 0;
	return domain == CUPTI_CB_DOMAIN_RUNTIME_API ? rt[cbid] :
	       domain == CUPTI_CB_DOMAIN_DRIVER_API ? drv[cbid] : 0;
}

void CUPTIAPI kp__col_on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				 const void *data)
{
	const CUpti_CallbackData *cb = data;
	const char *name;
	uint32_t corr;
	uint8_t c;

	(void)ud;
	if (atomic_load(&kp__col.shutdown))
		return;
	if (kp__col.live && (c = cb_flag(prof_rt, prof_drv, domain, cbid))) {
		on_profiler_call(domain, cbid, cb, c == 1);
		return;
	}
	if (kp__col.api_cb && cb_flag(api_rt, api_drv, domain, cbid))
		on_api(domain, cbid, cb);
	if ((c = cb_flag(sync_rt, sync_drv, domain, cbid))) {
		on_sync(domain, cb, c);
		return;
	}
	if (cb_flag(ex_rt, ex_drv, domain, cbid))
		on_ex_launch(domain, cb);
	if (!kp__col.args)
		return;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		if (cb->callbackSite == CUPTI_API_ENTER) {
			atomic_fetch_add(&kp__col_n_rt_cb, 1);
			tls_rt_corr = cb->correlationId;
		} else {
			tls_rt_corr = 0;
		}
		return;
	}
	if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER)
		return;
	atomic_fetch_add(&kp__col_n_drv_cb, 1);
	/* a driver launch inside a runtime launch carries the runtime's id */
	corr = tls_rt_corr ? tls_rt_corr : cb->correlationId;
	name = cb->functionName ? cb->functionName : "";
	if (!strncmp(name, "cuLaunchKernelEx", 16)) {
		const cuLaunchKernelEx_params *p = cb->functionParams;

		record_args(corr, p->f, p->kernelParams, p->extra);
	} else if (!strncmp(name, "cuLaunchKernel", 14)) {
		const cuLaunchKernel_params *p = cb->functionParams;

		record_args(corr, p->f, p->kernelParams, p->extra);
	} else if (!strncmp(name, "cuLaunchCooperativeKernel", 25) &&
		   !strstr(name, "Multi")) {
		const cuLaunchCooperativeKernel_params *p = cb->functionParams;

		record_args(corr, p->f, p->kernelParams, NULL);
	}
}

static void arg_one(int d, uint32_t cbid, const char *name, void *arg)
{
	(void)arg;
	if (name_matches(name, d ? drv_launch_calls : rt_launch_calls))
		cuptiEnableCallback(1, kp__col.sub, kp__col_api_domain(d), cbid);
}

void kp__col_enable_arg_callbacks(void)
{
	param_info = (param_info_fn)kp__col_cuda_sym("cuFuncGetParamInfo");
	kernel_param_info = (kparam_info_fn)kp__col_cuda_sym("cuKernelGetParamInfo");
	if (!param_info) {
		kp_warn("--args: cuFuncGetParamInfo not found in the driver; launch arguments not recorded");
		kp__col.args = 0;
		return;
	}
	kp__col_each_callback(arg_one, NULL);
}

static int write_args(struct kp_db *db, int64_t run_id, struct kp__arg_rec *a, size_t n)
{
	static sqlite3_stmt *st, *pdl;
	size_t i;

	if (!db) {
		sqlite3_finalize(st);
		sqlite3_finalize(pdl);
		st = pdl = NULL;
		return 0;
	}
	if (!st && kp_db_prepare(db, "INSERT OR IGNORE INTO kp_launch_args(runId, correlationId,"
				 " argIndex, size, value) VALUES (?,?,?,?,?)", &st, NULL))
		return -1;
	if (!pdl && kp_db_prepare(db, "INSERT OR IGNORE INTO kp_launch_attrs(runId, correlationId,"
				  " pdl) VALUES (?,?,1)", &pdl, NULL))
		return -1;
	for (i = 0; i < n; i++) {
		if (a[i].index == KP__ARG_PDL) {
			sqlite3_bind_int64(pdl, 1, run_id);
			sqlite3_bind_int64(pdl, 2, a[i].corr);
			if (sqlite3_step(pdl) != SQLITE_DONE) {
				sqlite3_reset(pdl);
				return -1;
			}
			sqlite3_reset(pdl);
			continue;
		}
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int64(st, 2, a[i].corr);
		sqlite3_bind_int(st, 3, a[i].index);
		sqlite3_bind_int(st, 4, (int)a[i].size);
		if (a[i].has_value)
			sqlite3_bind_int64(st, 5, a[i].value);
		else
			sqlite3_bind_null(st, 5);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_reset(st);
			return -1;
		}
		sqlite3_reset(st);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* the writer thread */

static void writer_fail(const char *what, const struct kp_err *err)
{
	if (!atomic_exchange(&kp__col.db_failed, 1))
		kp_warn("%s: %s; recording stops, the program runs on", what,
			err && err->msg[0] ? err->msg : "failed");
}

static const char *getenv_const(const char *name)
{
	return getenv(name);
}

static struct kp_db *open_db(struct kp_err *err)
{
	struct kp_rank rank = { 0, -1, -1, NULL };
	struct kp_run_info ri;
	struct kp_db *db;
	char host[256] = "";
	uint32_t cupti_v = 0;

	db = kp_db_open(kp__col.out, KP_DB_CREATE, err);
	if (!db)
		return NULL;
	if (kp_db_set_bulk(db, 1, err))
		goto fail;
	gethostname(host, sizeof(host) - 1);
	cuptiGetVersion(&cupti_v);
	memset(&ri, 0, sizeof(ri));
	ri.source = "record";
	ri.source_path = kp__col.out;
	ri.command = kp__col.command;
	ri.host = host;
	ri.pid = kp__col.pid;
	ri.driver_version = kp__col_driver_version();
	ri.runtime_version = kp__col_runtime_version();
	ri.cupti_version = (int)cupti_v;
	ri.has_rank = kp_rank_from_env(getenv_const, &rank);
	ri.rank = rank.rank;
	ri.local_rank = rank.local_rank;
	ri.world_size = rank.world_size;
	if (kp_db_run_insert(db, &ri, &kp__col.run_id, err))
		goto fail;
	return db;
fail:
	kp_db_close(db);
	return NULL;
}

static void finish_run(struct kp_db *db, struct kp_decoder *dec, struct kp_writer *w)
{
	struct kp_err err = {0};
	struct kp_strbuf detail = KP_STRBUF_INIT;
	struct kp_window win = { kp__col.nvtx_range, kp__col.profiler_api, kp__col.skip };
	const char *note = NULL;
	int64_t dropped, q = atomic_load(&kp__col.drop_queue_records),
		c = atomic_load(&kp__col.drop_cupti), a = atomic_load(&kp__col.drop_args) + kp__col.args_dropped;
	const char *status = "complete";

	if (kp_db_begin(db, &err) == 0) {
		kp_decode_finish(dec, kp__col.last_ts, &err);
		if (dec->st.devices == 0)
			kp__col_devices_from_driver(w);
		kp_db_commit(db, &err);
	}
	if (kp_window_apply(db, kp__col.run_id, &win, NULL, &note, &err))
		kp_warn("capture window: %s", err.msg);
	if (note)
		kp_db_run_note(db, kp__col.run_id, note, NULL);
	else if (kp_window_active(&win))
		kp_db_run_note(db, kp__col.run_id, "capture window: part of the run kept", NULL);
	if (atomic_load(&kp__col.sig_flush)) {
		kp_db_run_note(db, kp__col.run_id, kp__col.flush_timed_out ?
			    "ended by a signal; the final CUPTI flush did not finish in 3 s, records"
			    " still buffered by CUPTI were lost" : "ended by a signal", NULL);
		if (kp__col.flush_timed_out)
			status = "partial";
	}
	if (kp__col.live) {
		char buf[128];
		int64_t n;

		pthread_mutex_lock(&kp__col_gate_mu);
		n = kp__col.live_starts;
		pthread_mutex_unlock(&kp__col_gate_mu);
		snprintf(buf, sizeof(buf), "--profiler-api: traced live, %lld start/stop window%s",
			 (long long)n, n == 1 ? "" : "s");
		kp_db_run_note(db, kp__col.run_id, buf, NULL);
	}
	if (kp__col.duration_hit) {
		char buf[96];

		snprintf(buf, sizeof(buf), "capture stopped after %g s (--duration)", kp__col.duration_s);
		kp_db_run_note(db, kp__col.run_id, buf, NULL);
	}
	if (dec->st.kernels + dec->st.apis + dec->st.memcpys + dec->st.memsets == 0 &&
	    !note)
		kp_db_run_note(db, kp__col.run_id, "no GPU work was seen", NULL);
	dropped = q + c;
	if (q)
		kp_strbuf_addf(&detail, "%lld records in %lld buffers dropped by kplan (queue over"
			       " KPLAN_MEM_MB=%zu)", (long long)q,
			       (long long)atomic_load(&kp__col.drop_queue_buffers), kp__col.mem_bytes >> 20);
	if (c)
		kp_strbuf_addf(&detail, "%s%lld records dropped by CUPTI", detail.len ? "; " : "",
			       (long long)c);
	if (kp__col.args) {
		char buf[256];

		snprintf(buf, sizeof(buf), "--args: %lld runtime launch calls, %lld driver launch"
			 " calls, %lld launches of functions without parameter info",
			 (long long)atomic_load(&kp__col_n_rt_cb), (long long)atomic_load(&kp__col_n_drv_cb),
			 (long long)atomic_load(&kp__col_n_no_info));
		kp_db_run_note(db, kp__col.run_id, buf, NULL);
	}
	if (a)
		kp_strbuf_addf(&detail, "%s%lld launch arguments dropped", detail.len ? "; " : "",
			       (long long)a);
	if (kp__col.syncs_dropped) {
		kp_strbuf_addf(&detail, "%s%lld records built from callbacks (synchronization, API)"
			       " dropped (queue over KPLAN_MEM_MB=%zu / 16)", detail.len ? "; " : "",
			       (long long)kp__col.syncs_dropped, kp__col.mem_bytes >> 20);
		dropped += kp__col.syncs_dropped;
	}
	if (dec->st.unknown)
		kp_strbuf_addf(&detail, "%s%lld records of unhandled kinds skipped",
			       detail.len ? "; " : "", (long long)dec->st.unknown);
	if (dec->st.failed)
		kp_strbuf_addf(&detail, "%s%lld records failed to insert", detail.len ? "; " : "",
			       (long long)dec->st.failed);
	if (dropped || dec->st.failed)
		status = "partial";
	if (kp_db_run_finish(db, kp__col.run_id, dropped, detail.len ? detail.buf : NULL, status, &err))
		kp_warn("finishing the run row in %s: %s", kp__col.out, err.msg);
	kp_strbuf_release(&detail);
	/* a dying process (signal) has no time to index; readers index later */
	if (!atomic_load(&kp__col.sig_flush) && kp_db_create_indexes(db, &err))
		kp_warn("indexing %s: %s", kp__col.out, err.msg);
}

/* Flush CUPTI's buffers into our queue and tell the writer to stop once
 * the queue is drained. */
void kp__col_final_flush(void)
{
	size_t dropped = 0;

	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&kp__col.drop_cupti, (long long)dropped);
	pthread_mutex_lock(&kp__col.mu);
	kp__col.stop = 1;
	pthread_cond_signal(&kp__col.cv);
	pthread_mutex_unlock(&kp__col.mu);
}

static atomic_int flush_done;

static void *flush_thread(void *arg)
{
	(void)arg;
	kp__col_final_flush();
	atomic_store(&flush_done, 1);
	return NULL;
}

/*
 * The process is dying by a signal. The interrupted thread may hold a lock
 * that cuptiActivityFlushAll needs, so flush from a helper thread and give
 * up after 3 s: the run is finished with what was delivered so far.
 */
static void signal_flush(void)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	pthread_attr_t attr;
	pthread_t t;
	int i;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, flush_thread, NULL) == 0) {
		for (i = 0; i < 300 && !atomic_load(&flush_done); i++)
			nanosleep(&tick, NULL);
	}
	pthread_attr_destroy(&attr);
	if (!atomic_load(&flush_done))
		kp__col.flush_timed_out = 1;
	pthread_mutex_lock(&kp__col.mu);
	kp__col.stop = 1;
	pthread_mutex_unlock(&kp__col.mu);
}

/* remember the latest timestamp seen: the end for ranges left open */
static void note_time(const CUpti_Activity *rec)
{
	int64_t t = 0;

	if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		t = (int64_t)((const CUpti_ActivityKernel10 *)rec)->end;
	else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
		t = (int64_t)((const CUpti_ActivityAPI *)rec)->end;
	else if (rec->kind == CUPTI_ACTIVITY_KIND_MARKER)
		t = (int64_t)((const CUpti_ActivityMarker2 *)rec)->timestamp;
	if (t > kp__col.last_ts)
		kp__col.last_ts = t;
}

/* What the writer takes from the queues in one round. */
struct wbatch {
	struct kp__qbuf bufs[16];          /* CUPTI activity buffers */
	size_t n;
	KP_VEC(struct kp__arg_rec) args;   /* launch arguments (--args) */
	KP_VEC(union kp__synth_rec) syncs; /* records built from callbacks */
};

/*
 * Wait for work (records built from callbacks are taken a batch at a time,
 * or within 50 ms of the first), then take it from the queues into b.
 * Returns whether the writer stops after this batch.
 */
static int take_batch(struct wbatch *b)
{
	int stop, waited;

	pthread_mutex_lock(&kp__col.mu);
	for (waited = 0; !kp__col.qlen && !kp__col.stop && !kp__col.argq.len &&
	     (!kp__col.syncq.len || (kp__col.syncq.len < kp__col_synth_batch() && !waited)) &&
	     atomic_load(&kp__col.sig_flush) != 1;) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (kp__col.syncq.len ? 50 : 250) * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&kp__col.cv, &kp__col.mu, &ts) == ETIMEDOUT && kp__col.syncq.len)
			waited = 1;
		if (kp__col.duration_s > 0 && !kp__col.duration_hit &&
		    kp_now_ns() - kp__col.t0_ns >= (int64_t)(kp__col.duration_s * 1e9))
			break;
	}
	while (kp__col.qlen && b->n < sizeof(b->bufs) / sizeof(b->bufs[0])) {
		b->bufs[b->n++] = kp__col.q[kp__col.qhead];
		kp__col.qhead = (kp__col.qhead + 1) % kp__col.qcap;
		kp__col.qlen--;
	}
	if (kp__col.argq.len) {
		b->args.data = kp__col.argq.data;
		b->args.len = kp__col.argq.len;
		b->args.cap = kp__col.argq.cap;
		memset(&kp__col.argq, 0, sizeof(kp__col.argq));
	}
	if (kp__col.syncq.len) {
		b->syncs.data = kp__col.syncq.data;
		b->syncs.len = kp__col.syncq.len;
		b->syncs.cap = kp__col.syncq.cap;
		memset(&kp__col.syncq, 0, sizeof(kp__col.syncq));
	}
	stop = kp__col.stop && !kp__col.qlen;
	pthread_mutex_unlock(&kp__col.mu);
	return stop;
}

/* Decode and write b in one transaction; a failure stops all writing (writer_fail). */
static void write_batch(struct kp_decoder *dec, struct wbatch *b)
{
	struct kp_err err = {0};
	size_t i;

	if (kp_db_begin(kp__col.db, &err)) {
		writer_fail("writing the database", &err);
		return;
	}
	for (i = 0; i < b->n; i++) {
		CUpti_Activity *rec = NULL;

		while (cuptiActivityGetNextRecord(b->bufs[i].p, b->bufs[i].valid, &rec) == CUPTI_SUCCESS) {
			struct kp_err e2 = {0};

			note_time(rec);
			if (kp_decode_record(dec, rec, &e2) < 0 && !err.code)
				err = e2;
		}
	}
	for (i = 0; i < b->syncs.len; i++) {
		struct kp_err e2 = {0};
		CUpti_Activity *rec = (CUpti_Activity *)&b->syncs.data[i];

		note_time(rec);
		if (kp_decode_record(dec, rec, &e2) < 0 && !err.code)
			err = e2;
	}
	if (b->args.len && write_args(kp__col.db, kp__col.run_id, b->args.data, b->args.len))
		atomic_fetch_add(&kp__col.drop_args, (long long)b->args.len);
	if (err.code) {
		kp_db_rollback(kp__col.db);
		writer_fail("writing the database", &err);
	} else if (kp_db_commit(kp__col.db, &err)) {
		kp_db_rollback(kp__col.db);
		writer_fail("writing the database", &err);
	}
}

/* Give b's buffers back (counted as dropped when the database failed). */
static void release_batch(struct wbatch *b)
{
	size_t i;

	if (atomic_load(&kp__col.db_failed)) {
		for (i = 0; i < b->n; i++)
			atomic_fetch_add(&kp__col.drop_db_records, kp__col_count_records(b->bufs[i].p, b->bufs[i].valid));
	}
	kp_vec_release(&b->args);
	kp_vec_release(&b->syncs);
	pthread_mutex_lock(&kp__col.mu);
	for (i = 0; i < b->n; i++)
		kp__col.queued_bytes -= b->bufs[i].size;
	pthread_mutex_unlock(&kp__col.mu);
	for (i = 0; i < b->n; i++)
		kp__col_buf_put(b->bufs[i].p);
}

void *kp__col_writer_main(void *arg)
{
	struct kp_err err = {0};
	struct kp_writer w;
	struct kp_decoder dec;
	struct kp_decode_hooks hooks = { NULL, kp__col_api_name, kp__col_demangle };
	sigset_t all;

	(void)arg;
	/* signals belong to the application's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	kp__col.db = open_db(&err);
	if (!kp__col.db) {
		writer_fail("cannot record", &err);
		pthread_mutex_lock(&kp__col.mu);
		kp__col.have_writer = 0;
		pthread_mutex_unlock(&kp__col.mu);
		kp__col_disable_all();
		atomic_store(&kp__col.finished, 1);
		return NULL;
	}
	kp_writer_init(&w, kp__col.db, kp__col.run_id);
	kp_decode_init(&dec, &w, kp__col.pid, &hooks);
	for (;;) {
		struct wbatch b;
		int stop;

		memset(&b, 0, sizeof(b));
		if (atomic_load(&kp__col.sig_flush) == 1) {
			/* asked from a signal handler, which cannot flush itself */
			atomic_store(&kp__col.sig_flush, 2);
			signal_flush();
		}
		stop = take_batch(&b);
		if (kp__col.duration_s > 0 && !kp__col.duration_hit &&
		    kp_now_ns() - kp__col.t0_ns >= (int64_t)(kp__col.duration_s * 1e9)) {
			kp__col.duration_hit = 1;
			kp__col_disable_all();
		}
		if ((b.n || b.args.len || b.syncs.len) && !atomic_load(&kp__col.db_failed))
			write_batch(&dec, &b);
		release_batch(&b);
		if (stop)
			break;
	}
	if (!atomic_load(&kp__col.db_failed))
		finish_run(kp__col.db, &dec, &w);
	else if (atomic_load(&kp__col.drop_db_records))
		kp_warn("%lld records not written to %s", (long long)atomic_load(&kp__col.drop_db_records),
			kp__col.out);
	write_args(NULL, 0, NULL, 0);
	kp_decode_release(&dec);
	kp_writer_release(&w);
	kp_db_close(kp__col.db);
	kp__col.db = NULL;
	atomic_store(&kp__col.finished, 1);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* shutdown: atexit, signals */

void kp__col_shutdown(void)
{
	struct timespec ts;

	if (!kp__col.started || getpid() != kp__col.pid || atomic_exchange(&kp__col.shutdown, 1))
		return;
	kp__col_final_flush();
	if (kp__col.thread_created) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 120;
		if (pthread_timedjoin_np(kp__col.writer, NULL, &ts))
			kp_warn("the writer did not finish within 120 s; %s may miss its last records",
				kp__col.out);
	}
	pthread_mutex_lock(&kp__col.mu);
	kp__col.have_writer = 0;
	pthread_mutex_unlock(&kp__col.mu);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *old = sig == SIGTERM ? &kp__col.old_term : &kp__col.old_int;

	if (old->sa_flags & SA_SIGINFO) {
		if (old->sa_sigaction) {
			old->sa_sigaction(sig, si, uc);
			return;
		}
	} else if (old->sa_handler == SIG_IGN) {
		return;
	} else if (old->sa_handler != SIG_DFL) {
		old->sa_handler(sig);
		return;
	}
	/*
	 * The default action ends the process: have the writer thread flush
	 * and finish the run first (this thread may have been interrupted
	 * inside CUDA or holding a lock, so it does no CUDA, CUPTI or SQLite
	 * work itself), waiting at most 20 s, then die by the signal.
	 */
	if (kp__col.started && getpid() == kp__col.pid && kp__col.thread_created &&
	    !atomic_exchange(&kp__col.shutdown, 1)) {
		struct timespec tick = { 0, 10 * 1000 * 1000 };
		int i;

		atomic_store(&kp__col.sig_flush, 1);
		for (i = 0; i < 2000 && !atomic_load(&kp__col.finished); i++)
			nanosleep(&tick, NULL);
	}
	sigaction(sig, old, NULL);
	raise(sig);
}

void kp__col_install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, &kp__col.old_term);
	sigaction(SIGINT, &sa, &kp__col.old_int);
}

void kp__col_atfork_child(void)
{
	/* a forked child has no writer thread and must not flush our run */
	kp__col_forget_thread();
	kp__col.started = 0;
	kp__col.have_writer = 0;
}

/* Who holds CUPTI, for the message when we cannot subscribe. */
static void describe_holder(char *out, size_t n)
{
	static const struct { const char *lib, *who; } known[] = {
		{ "libkineto", "the PyTorch profiler (kineto)" },
		{ "libtorch_cuda", "PyTorch (kineto, torch.profiler)" },
		{ "libToolsInjection", "Nsight Systems" },
		{ "libnvperf", "an Nsight/perfworks tool" },
		{ "libcupti", "another CUPTI client" },
	};
	char line[1024];
	FILE *f = fopen("/proc/self/maps", "r");
	size_t i;

	snprintf(out, n, "another tool");
	if (!f)
		return;
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			if (strstr(line, known[i].lib)) {
				snprintf(out, n, "%s", known[i].who);
				fclose(f);
				return;
			}
		}
	}
	fclose(f);
}

static void set_nvtx_injection(void)
{
	Dl_info info;

	/* NVTX must load the same libcupti as ours, or its markers go elsewhere */
	if (dladdr((void *)cuptiSubscribe, &info) && info.dli_fname && info.dli_fname[0] == '/')
		setenv("NVTX_INJECTION64_PATH", info.dli_fname, 1);
}

/* The settings `kplan record` passes in the environment (KPLAN_*). */
void kp__col_read_settings(void)
{
	const char *s;
	int64_t mb;

	s = getenv("KPLAN_OUT");
	if (s && *s) {
		kp__col.out = kp_strdup(s);
	} else {
		char buf[64];

		snprintf(buf, sizeof(buf), "kplan-%d.db", (int)kp__col.pid);
		kp__col.out = kp_strdup(buf);
	}
	s = getenv("KPLAN_NVTX_RANGE");
	kp__col.nvtx_range = s && *s ? kp_strdup(s) : NULL;
	kp__col.profiler_api = kp__col_env_int("KPLAN_PROFILER_API", 0) != 0;
	kp__col.skip = kp__col_env_int("KPLAN_SKIP", 0);
	kp__col.args = kp__col_env_int("KPLAN_ARGS", 0) != 0;
	s = getenv("KPLAN_DURATION");
	if (s && *s) {
		char *end;

		kp__col.duration_s = strtod(s, &end);
		if (*end || kp__col.duration_s < 0) {
			kp_warn("KPLAN_DURATION='%s' is not a number of seconds; ignored", s);
			kp__col.duration_s = 0;
		}
	}
	mb = kp__col_env_int("KPLAN_MEM_MB", 64);
	if (mb < 1)
		mb = 1;
	kp__col.mem_bytes = (size_t)mb << 20;
	kp__col.buf_size = kp__col.mem_bytes / 8;
	if (kp__col.buf_size > (4u << 20))
		kp__col.buf_size = 4u << 20;
	if (kp__col.buf_size < (128u << 10))
		kp__col.buf_size = 128u << 10;
	s = getenv("KPLAN_COMMAND");
	kp__col.command = s && *s ? kp_strdup(s) : read_cmdline();
}

/*
 * Once the writer runs, turn on what is recorded: the activity kinds (less
 * those KPLAN_DISABLE names), the callbacks for syncs, launch arguments,
 * launch attributes and API rows, and the live window of --profiler-api.
 */
void kp__col_enable_recording(void)
{
	CUptiResult r;
	const char *s;
	size_t i;
	int64_t mb;

	/* diagnostics for the overhead benchmark: KPLAN_DISABLE=kernel,api,... */
	s = getenv("KPLAN_DISABLE");
	if (!s)
		s = "";
	if (kp__col_env_int("KPLAN_CUPTI_PINNED", 0) > 0) {
		uint8_t one = 1;
		size_t len = sizeof(one);

		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &len, &one);
	}
	mb = kp__col_env_int("KPLAN_DEVICE_BUFFER_MB", 0);
	if (mb > 0) {
		size_t sz = (size_t)mb << 20, len = sizeof(sz);

		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &len, &sz);
	}
	/* --profiler-api alone: trace only between cudaProfilerStart and Stop
	 * (KPLAN_LIVE_WINDOW=0 traces everything and only filters at the end) */
	kp__col.live = kp__col.profiler_api && !kp__col.nvtx_range && kp__col.skip <= 0 && kp__col.subscribed &&
		 kp__col_env_int("KPLAN_LIVE_WINDOW", 1) != 0;
	for (i = 0; i < KP__COL_N_KINDS; i++) {
		if (strstr(s, "all") || (strstr(s, "kernel") &&
					 kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
		    (strstr(s, "sync") && kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) ||
		    (strstr(s, "marker") && (kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_MARKER ||
					     kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_MARKER_DATA)) ||
		    (strstr(s, "copy") && (kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_MEMCPY ||
					   kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_MEMCPY2 ||
					   kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_MEMSET)) ||
		    (strstr(s, "overhead") && kp__col_kinds[i] == CUPTI_ACTIVITY_KIND_OVERHEAD))
			continue;
		kp__col.kind_wanted[i] = 1;
		if (kp__col.live && kp__col_gated_kind(kp__col_kinds[i]))
			continue;
		r = cuptiActivityEnable(kp__col_kinds[i]);
		if (r != CUPTI_SUCCESS && kp__col_kinds[i] != CUPTI_ACTIVITY_KIND_DEVICE &&
		    kp__col_kinds[i] != CUPTI_ACTIVITY_KIND_MARKER_DATA)
			kp_warn("cannot enable CUPTI activity kind %d: %s", (int)kp__col_kinds[i],
				kp__col_cupti_msg(r));
	}
	if (!strstr(s, "sync") && !strstr(s, "all")) {
		kp__col.sync_activity = kp__col_env_int("KPLAN_SYNC_ACTIVITY", 0) > 0 || !kp__col.subscribed;
		if (!kp__col.sync_activity)
			kp__col_enable_sync_callbacks();
		else if (!kp__col.live)
			cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
	}
	if (kp__col.args)
		kp__col_enable_arg_callbacks();
	if (kp__col.subscribed && !strstr(s, "attrs") && !strstr(s, "all"))
		kp__col_each_callback(kp__col_ex_one, NULL);   /* launch attributes: PDL */
	/* API rows: CUPTI's records, or built from callbacks in the live window
	 * (CUPTI's API records cannot be turned on mid-run) or when asked
	 * (KPLAN_API_CALLBACKS=1, diagnostic: no cheaper on Hopper) */
	kp__col.api_wanted = !strstr(s, "api") && !strstr(s, "all");
	kp__col.api_cb = kp__col.live || (kp__col.subscribed && kp__col_env_int("KPLAN_API_CALLBACKS", 0) > 0);
	if (kp__col.api_wanted && kp__col.api_cb)
		kp__col_classify_api_callbacks();   /* after the sync and --args callbacks */
	if (kp__col.api_wanted && !kp__col.live) {
		if (kp__col.api_cb)
			kp__col_enable_api_callbacks(1);
		else
			enable_api_records(1);
	}
	if (kp__col.live)
		kp__col_enable_profiler_callbacks();   /* and their API rows, from the callbacks */
}

KP_EXPORT int InitializeInjection(void)
{
	CUptiResult r;
	int rc;

	if (kp__col.started)
		return 1;
	kp__col.pid = getpid();
	kp__col.t0_ns = kp_now_ns();
	kp__col_read_settings();

	/* KPLAN_SUBSCRIBE=0 (diagnostic): no callback subscriber, activity only */
	kp__col.subscribed = kp__col.args || kp__col_env_int("KPLAN_SUBSCRIBE", 1);
	r = kp__col.subscribed ? cuptiSubscribe(&kp__col.sub, kp__col_on_callback, NULL) : CUPTI_SUCCESS;
	if (r != CUPTI_SUCCESS) {
		char who[128];

		describe_holder(who, sizeof(who));
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
			kp_warn("CUPTI is already in use by %s; kplan records nothing, the program"
				" runs on", who);
		else
			kp_warn("cannot subscribe to CUPTI: %s; kplan records nothing", kp__col_cupti_msg(r));
		return 1;
	}
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	{
		uint8_t one = 1;
		size_t len = sizeof(one);

		kp__col.zeroed_buffers = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
							     &len, &one) == CUPTI_SUCCESS;
	}
	r = cuptiActivityRegisterCallbacks(kp__col_buffer_requested, kp__col_buffer_completed);
	if (r != CUPTI_SUCCESS) {
		kp_warn("cannot register CUPTI activity buffers: %s; kplan records nothing",
			kp__col_cupti_msg(r));
		if (kp__col.subscribed)
			cuptiUnsubscribe(kp__col.sub);
		return 1;
	}
	kp__col.have_writer = 1;
	rc = pthread_create(&kp__col.writer, NULL, kp__col_writer_main, NULL);
	if (rc) {
		kp__col.have_writer = 0;
		kp_warn("cannot start the writer thread: %s; kplan records nothing", strerror(rc));
		if (kp__col.subscribed)
			cuptiUnsubscribe(kp__col.sub);
		return 1;
	}
	kp__col.thread_created = 1;
	kp__col.started = 1;
	kp__col_enable_recording();
	set_nvtx_injection();
	pthread_atfork(NULL, NULL, kp__col_atfork_child);
	atexit(kp__col_shutdown);
	kp__col_install_signals();
	return 1;
}
