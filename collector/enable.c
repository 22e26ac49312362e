/*
 * enable.c - turning collection on (once the writer runs: the activity
 * kinds less those KPLAN_DISABLE names, the callbacks, the live window of
 * --profiler-api) and off (--duration reached, the database failed).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "internal.h"
#include "../common/log.h"

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
