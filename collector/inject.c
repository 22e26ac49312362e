/*
 * inject.c - libkplan_collect.so, the CUPTI injection library: its entry point.
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "../common/kptime.h"
#include "../common/log.h"

#define KP_EXPORT __attribute__((visibility("default")))

struct kp__col_state kp__col = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};

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
