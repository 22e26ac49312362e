/*
 * fake_kplanrt.c - a stand-in libkplanrt.so for tests/python: the functions
 * kplan._rt binds, compiled against the real include/kplan/runtime.h (so a
 * signature that drifts from the header fails to compile), with canned
 * answers and a log of what the binding passed in (kpfake_log).
 *
 *   cc -shared -fPIC -Iinclude -o libkplanrt.so tests/python/fake_kplanrt.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kplan/runtime.h"

#define KP_API __attribute__((visibility("default")))

struct kp_rt {
	char path[256];
	int has_plan;
	struct kp_rt_options opt;
	int bundle_entry;   /* a path with ".kplanb": 2, or 0 when it has "none" */
	char choice[128];
};

static char log_buf[65536];

static void logf_(const char *fmt, const char *s, long long a, long long b, long long c,
		  long long d)
{
	size_t n = strlen(log_buf);

	if (n + 512 < sizeof(log_buf))
		snprintf(log_buf + n, sizeof(log_buf) - n, fmt, s, a, b, c, d);
}

KP_API const char *kpfake_log(void)
{
	return log_buf;
}

KP_API void kpfake_clear(void)
{
	log_buf[0] = 0;
}

KP_API kp_rt *kp_rt_open_ex(const char *plan_path, const struct kp_rt_options *opt,
			    struct kp_rt_err *err)
{
	kp_rt *rt;

	if (plan_path && strstr(plan_path, "bad")) {
		if (err) {
			err->code = -5;
			snprintf(err->msg, sizeof(err->msg), "%s: line 1: not a plan", plan_path);
		}
		return NULL;
	}
	rt = calloc(1, sizeof(*rt));
	if (plan_path) {
		snprintf(rt->path, sizeof(rt->path), "%s", plan_path);
		rt->has_plan = 1;
		if (strstr(plan_path, ".kplanb")) {
			rt->bundle_entry = strstr(plan_path, "none") ? 0 : 2;
			rt->has_plan = rt->bundle_entry != 0;
			snprintf(rt->choice, sizeof(rt->choice), rt->bundle_entry ?
				 "entry #2 Fake H200: gpu-name and sm-count match" :
				 "no entry applies: #1 compute-capability: plan wants 8.0");
		}
	}
	if (opt)
		rt->opt = *opt;
	logf_("open %s flags %lld verify %lld warmup %lld max_failures %lld\n",
	      plan_path ? plan_path : "-", (long long)rt->opt.flags, rt->opt.verify_calls,
	      rt->opt.warmup, rt->opt.max_failures);
	if (err) {
		err->code = 0;
		err->msg[0] = 0;
	}
	return rt;
}

KP_API kp_rt *kp_rt_open(const char *plan_path, struct kp_rt_err *err)
{
	return kp_rt_open_ex(plan_path, NULL, err);
}

KP_API void kp_rt_close(kp_rt *rt)
{
	logf_("close%s\n", "", 0, 0, 0, 0);
	free(rt);
}

/* every counter a distinct value, so a field read at the wrong offset shows */
KP_API void kp_rt_get_stats(kp_rt *rt, struct kp_rt_stats *st)
{
	int i;

	memset(st, 0, sizeof(*st));
	st->calls = 1;
	st->replays = 2;
	st->captures = 3;
	st->eager = 4;
	for (i = 0; i < KP_RT_R_COUNT; i++) {
		st->eager_by_reason[i] = 100 + i;
		st->failures[i] = 200 + i;
	}
	st->patched_nodes = 5;
	st->patched_words = 6;
	st->evictions = 7;
	st->verified = 8;
	st->graphs = 9;
	st->graph_nodes = 10;
	st->graph_mem_bytes = -11;
	st->replay_host_ns = 12;
	st->replay_launch_ns = 13;
	st->replay_patch_ns = 14;
	st->watched = 15;
	st->unwatched = 16;
	st->watch_ns = -17;
	st->patched_values = 18;
	if (rt->choice[0]) {
		st->bundle_entries = 2;
		st->bundle_entry = (uint64_t)rt->bundle_entry;
		st->bundle_match = rt->bundle_entry ? 1 : 5;
	}
}

KP_API const char *kp_rt_plan_choice(kp_rt *rt)
{
	return rt ? rt->choice : "";
}

/* a bundle's entry 2: its groups file in the bundle, named by a made-up
 * body-hash; a plan file: none (the binding then looks beside the plan) */
KP_API const char *kp_rt_aten_groups(kp_rt *rt, uint64_t *plan_hash)
{
	static char path[300];

	if (plan_hash)
		*plan_hash = 0;
	if (!rt || !rt->bundle_entry)
		return NULL;
	if (plan_hash)
		*plan_hash = 0x2222222222222222ull;
	snprintf(path, sizeof(path), "%s/plan-2222222222222222.aten", rt->path);
	return path;
}

KP_API const char *kp_rt_reason_name(int reason)
{
	static char names[KP_RT_R_COUNT][16];

	if (reason < 0 || reason >= KP_RT_R_COUNT)
		return "?";
	snprintf(names[reason], sizeof(names[reason]), "reason%d", reason);
	return names[reason];
}

KP_API int kp_rt_region_plan(kp_rt *rt, const char *name, struct kp_rt_region_info *info)
{
	if (!rt || !name || !info)
		return -1;
	if (!rt->has_plan)
		return 1;
	memset(info, 0, sizeof(*info));
	if (!strcmp(name, "step")) {
		info->decision = 1;
		info->warmup = 3;
		info->kernels = 42;
		info->n_patches = 2;
		info->n_scalar_patches = 1;
		info->fingerprint = 0x0123456789abcdefULL;
		info->bundle_entry = (uint32_t)rt->bundle_entry;
		snprintf(info->reason, sizeof(info->reason), "launch-bound");
		return 0;
	}
	if (!strcmp(name, "cold")) {
		info->decision = 0;
		info->warmup = 0;
		info->kernels = 7;
		snprintf(info->reason, sizeof(info->reason), "not-launch-bound");
		return 0;
	}
	return 1;
}

KP_API void kp_rt_range_push(kp_rt *rt, const char *name, int kind)
{
	(void)rt;
	logf_("push %s %lld\n", name, kind, 0, 0, 0);
}

KP_API void kp_rt_range_pop(kp_rt *rt)
{
	(void)rt;
	logf_("pop%s\n", "", 0, 0, 0, 0);
}

KP_API int kp_rt_watch_begin(kp_rt *rt, void *stream, unsigned flags)
{
	(void)rt;
	logf_("watch%s %lld %lld\n", "", (long long)(size_t)stream, (long long)flags, 0, 0);
	return 0;
}

KP_API int kp_rt_watch_end(kp_rt *rt, struct kp_rt_watch_result *res)
{
	const char *v = getenv("KPFAKE_VERDICT");

	(void)rt;
	memset(res, 0, sizeof(*res));
	res->verdict = v ? atoi(v) : 0;
	if (res->verdict == 1) {
		snprintf(res->call, sizeof(res->call), "cudaStreamSynchronize");
		snprintf(res->kernel, sizeof(res->kernel), "vectorized_elementwise_kernel");
		snprintf(res->msg, sizeof(res->msg),
			 "cudaStreamSynchronize on the capture stream after vectorized_elementwise_kernel");
	}
	logf_("unwatch%s\n", "", 0, 0, 0, 0);
	return 0;
}
