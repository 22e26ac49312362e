/*
 * callbacks.c - the collector's CUPTI callbacks and the records built from
 * them: launch arguments (--args), synchronization records, API rows (the
 * live window, KPLAN_API_CALLBACKS=1), programmatic dependent launch, and
 * the live window itself, opened and closed by cudaProfilerStart/Stop.
 * What they build is queued for the writer thread (writer_thread.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "decode.h"
#include "internal.h"
#include "../common/cuda_api.h"
#include "../common/log.h"

/* Launch calls whose arguments --args records (callback API). */
static const char *const rt_launch_calls[] = { "cudaLaunchKernel", "cudaLaunchCooperativeKernel", NULL };
static const char *const drv_launch_calls[] = { "cuLaunchKernel", "cuLaunchCooperativeKernel", NULL };

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
