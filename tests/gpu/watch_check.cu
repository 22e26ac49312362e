/*
 * watch_check.cu - GPU check of the runtime's capture watch (runtime/watch.c).
 *
 *   kplan-watch-check device             print "cc X.Y cuda N driver V sm N gpu NAME"
 *   kplan-watch-check list               the case names, one a line
 *   kplan-watch-check PLAN [CASE...|all] run cases (default: all)
 *   kplan-watch-check PLAN cost          the watch's one-time cost (run it first
 *                                        in a fresh process)
 *
 * Each case runs a small region body once under kp_rt_watch_begin/end (the
 * public API, on a runtime opened with PLAN: planless runtimes have no CUDA
 * backend) and once under the CUDA backend's own hooks (linked statically
 * from libkplanrt.a), which also give the recorded launches: their count,
 * names and parameter bytes are checked against what the body passed. One
 * line per case: "PASS name" or "FAIL name: got verdict V ... msg". Exit 1
 * when a case fails.
 */
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include <kplan/runtime.h>
extern "C" {
#include "runtime/rt_internal.h"
#include "runtime/watch.h"
}

#define CK(x) \
	do { \
		cudaError_t e_ = (x); \
		if (e_ != cudaSuccess) { \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, \
				cudaGetErrorString(e_)); \
			exit(2); \
		} \
	} while (0)

__global__ void k_add(float *x, int n, float v)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] += v;
}

__global__ void k_scale(float *x, int n, float a, int tag)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] = x[i] * a + (float)tag;
}

__global__ void k_noop(void)
{
}

static const int N = 1 << 16;
static const int BLK = 256, GRD = (N + BLK - 1) / BLK;

/* what the bodies use, made before any watch */
static struct {
	cudaStream_t s, s2, s3, s4;
	cudaEvent_t e1, e2;
	float *d, *d2;
	float *hpage, *hpin;
	size_t bytes;
} g;

/* one expected launch: kernel name part and parameter bytes */
struct xlaunch {
	const char *name;
	std::vector<std::vector<unsigned char>> params;
};

template <typename T> static std::vector<unsigned char> B(T v)
{
	std::vector<unsigned char> b(sizeof(T));

	memcpy(b.data(), &v, sizeof(T));
	return b;
}

static std::vector<xlaunch> expect;   /* filled by the bodies */

static void add_launch(float *x, float v, cudaStream_t st, int record = 1)
{
	k_add<<<GRD, BLK, 0, st>>>(x, N, v);
	if (record)
		expect.push_back({ "k_add", { B(x), B(N), B(v) } });
}

static void scale_launch(float *x, float a, int tag, cudaStream_t st)
{
	k_scale<<<GRD, BLK, 0, st>>>(x, N, a, tag);
	expect.push_back({ "k_scale", { B(x), B(N), B(a), B(tag) } });
}

static void CUDART_CB host_fn(void *p)
{
	(void)p;
}

static void CUDART_CB stream_cb(cudaStream_t st, cudaError_t e, void *p)
{
	(void)st;
	(void)e;
	(void)p;
}

/* ---- bodies ---- */

static void b_empty(void)
{
}

static void b_clean(void)
{
	add_launch(g.d, 1.5f, g.s);
	scale_launch(g.d, 2.0f, 7, g.s);
	add_launch(g.d2, -3.25f, g.s);
}

static void b_legacy_launch(void)
{
	add_launch(g.d, 1.0f, g.s);
	k_add<<<GRD, BLK>>>(g.d2, N, 2.0f);   /* stream 0: the legacy stream here */
}

static void b_stream_sync(void)
{
	add_launch(g.d, 1.0f, g.s);
	CK(cudaStreamSynchronize(g.s));
}

static void b_memset_sync(void)
{
	CK(cudaMemset(g.d, 0, g.bytes));
}

static void b_memset_async(void)
{
	CK(cudaMemsetAsync(g.d, 0, g.bytes, g.s));
	add_launch(g.d, 1.0f, g.s);
}

static void b_malloc(void)
{
	void *p = NULL;

	add_launch(g.d, 1.0f, g.s);
	CK(cudaMalloc(&p, 4096));
	CK(cudaFree(p));
}

static void b_malloc_async(void)
{
	void *p = NULL;

	CK(cudaMallocAsync(&p, g.bytes, g.s));
	add_launch((float *)p, 1.0f, g.s, 0);   /* its address differs per call */
	expect.push_back({ "k_add", {} });
	CK(cudaFreeAsync(p, g.s));
}

static void b_fork_join(void)
{
	add_launch(g.d, 1.0f, g.s);
	CK(cudaEventRecord(g.e1, g.s));
	CK(cudaStreamWaitEvent(g.s2, g.e1, 0));
	add_launch(g.d2, 2.0f, g.s2);
	CK(cudaEventRecord(g.e2, g.s2));
	CK(cudaStreamWaitEvent(g.s, g.e2, 0));
	scale_launch(g.d, 0.5f, 1, g.s);
}

static void b_fork_no_join(void)
{
	add_launch(g.d, 1.0f, g.s);
	CK(cudaEventRecord(g.e1, g.s));
	CK(cudaStreamWaitEvent(g.s2, g.e1, 0));
	add_launch(g.d2, 2.0f, g.s2);
	scale_launch(g.d, 0.5f, 1, g.s);
}

static void b_other_stream(void)
{
	add_launch(g.d, 1.0f, g.s);
	k_add<<<GRD, BLK, 0, g.s3>>>(g.d2, N, 2.0f);
}

static void b_pageable_copy(void)
{
	CK(cudaMemcpyAsync(g.d, g.hpage, g.bytes, cudaMemcpyHostToDevice, g.s));
	add_launch(g.d, 1.0f, g.s);
}

static void b_pinned_copy(void)
{
	CK(cudaMemcpyAsync(g.d, g.hpin, g.bytes, cudaMemcpyHostToDevice, g.s));
	add_launch(g.d, 1.0f, g.s);
	CK(cudaMemcpyAsync(g.hpin, g.d, g.bytes, cudaMemcpyDeviceToHost, g.s));
}

static void b_host_func(void)
{
	add_launch(g.d, 1.0f, g.s);
	CK(cudaLaunchHostFunc(g.s, host_fn, NULL));
}

static void b_add_callback(void)
{
	add_launch(g.d, 1.0f, g.s);
	CK(cudaStreamAddCallback(g.s, stream_cb, NULL, 0));
}

static void b_event_query(void)
{
	add_launch(g.d, 1.0f, g.s);
	CK(cudaEventRecord(g.e1, g.s));
	(void)cudaEventQuery(g.e1);
	cudaGetLastError();
}

static void other_thread(void)
{
	void *p = NULL;

	k_noop<<<1, 1, 0, g.s4>>>();
	k_noop<<<1, 1>>>();                    /* legacy stream: not this watch's thread */
	CK(cudaMalloc(&p, 4096));
	CK(cudaFree(p));
	CK(cudaStreamSynchronize(g.s4));
}

static void b_other_thread(void)
{
	add_launch(g.d, 1.0f, g.s);
	std::thread t(other_thread);
	t.join();
	scale_launch(g.d, 1.0f, 2, g.s);
}

static void b_per_thread(void)
{
	/* the region is given stream 0 and the body uses the per-thread stream */
	add_launch(g.d, 1.0f, cudaStreamPerThread);
}

static void b_legacy_region(void)
{
	/* given stream 0, the body uses the legacy stream */
	add_launch(g.d, 1.0f, 0);
}

/* cuLaunchKernel through the runtime's entry point query: no -lcuda, so the
 * program starts (and says "no GPU") where the driver is missing */
static CUresult drv_launch(CUfunction f, cudaStream_t st, void **args)
{
	static __typeof__(&cuLaunchKernel) launch;
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	if (!launch) {
		CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, CUDART_VERSION,
						    cudaEnableDefault, &q));
		if (q != cudaDriverEntryPointSuccess || !fn) {
			fprintf(stderr, "no cuLaunchKernel entry point\n");
			exit(2);
		}
		memcpy(&launch, &fn, sizeof(fn));
	}
	return launch(f, GRD, 1, 1, BLK, 1, 1, 0, (CUstream)st, args, NULL);
}

static void b_driver_launch(void)
{
	cudaFunction_t f;
	float *x = g.d, v = 4.0f;
	int n = N;
	void *args[] = { &x, &n, &v };

	CK(cudaGetFuncBySymbol(&f, (const void *)k_add));
	if (drv_launch((CUfunction)f, g.s, args)) {
		fprintf(stderr, "cuLaunchKernel failed\n");
		exit(2);
	}
	expect.push_back({ "k_add", { B(x), B(n), B(v) } });
}

static void b_driver_kernel(void)
{
	cudaKernel_t k;
	float *x = g.d2, v = -1.0f;
	int n = N;
	void *args[] = { &x, &n, &v };

	/* a CUkernel cast to CUfunction, as the runtime itself launches */
	CK(cudaGetKernel(&k, (const void *)k_add));
	if (drv_launch((CUfunction)k, g.s, args)) {
		fprintf(stderr, "cuLaunchKernel (CUkernel) failed\n");
		exit(2);
	}
	expect.push_back({ "k_add", { B(x), B(n), B(v) } });
}

static void b_many(void)
{
	for (int i = 0; i < 100; i++)
		add_launch(g.d, (float)i, g.s);
}

/* ---- cases ---- */

struct wcase {
	const char *name;
	void (*body)(void);
	int stream;              /* 0: g.s, 1: stream 0 */
	unsigned flags;
	int verdict;             /* expected */
	const char *call;        /* expected res.call (verdict 1), or NULL */
	const char *want;        /* expected in res.msg or res.kernel, or NULL */
	int nested;              /* run inside a capture of g.s */
	int check_launches;      /* compare the recorded launches with expect */
	int per_thread;          /* expected w.per_thread */
};

static const wcase cases[] = {
	{ "empty", b_empty, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "clean", b_clean, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "legacy-launch", b_legacy_launch, 0, 0, 1, "cudaLaunchKernel", "k_add", 0, 0, 0 },
	{ "stream-sync", b_stream_sync, 0, 0, 1, "cudaStreamSynchronize", NULL, 0, 0, 0 },
	{ "memset-sync", b_memset_sync, 0, 0, 1, "cudaMemset", NULL, 0, 0, 0 },
	{ "memset-async", b_memset_async, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "malloc", b_malloc, 0, 0, 1, "cudaMalloc", NULL, 0, 0, 0 },
	{ "malloc-allowed", b_malloc, 0, KP_RT_WATCH_ALLOW_ALLOC, 0, NULL, NULL, 0, 1, 0 },
	{ "malloc-async", b_malloc_async, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "fork-join", b_fork_join, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "fork-no-join", b_fork_no_join, 0, 0, 1, "cudaStreamWaitEvent", "never joined", 0, 0, 0 },
	{ "other-stream", b_other_stream, 0, 0, 1, "cudaLaunchKernel", "k_add", 0, 0, 0 },
	{ "pageable-copy", b_pageable_copy, 0, 0, 1, "cudaMemcpyAsync", "pageable", 0, 0, 0 },
	{ "pinned-copy", b_pinned_copy, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "host-func", b_host_func, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "add-callback", b_add_callback, 0, 0, 1, "cudaStreamAddCallback", NULL, 0, 0, 0 },
	{ "event-query", b_event_query, 0, 0, 1, "cudaEventQuery", NULL, 0, 0, 0 },
	{ "other-thread", b_other_thread, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "per-thread", b_per_thread, 1, 0, 0, NULL, NULL, 0, 1, 1 },
	{ "legacy-region", b_legacy_region, 1, 0, 1, NULL, "legacy", 0, 0, 0 },
	{ "nested-capture", b_empty, 0, 0, 1, NULL, "nested", 1, 0, 0 },
	{ "many", b_many, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "driver-launch", b_driver_launch, 0, 0, 0, NULL, NULL, 0, 1, 0 },
	{ "driver-kernel-handle", b_driver_kernel, 0, 0, 0, NULL, NULL, 0, 1, 0 },
};

static kp_rt *rt;                    /* the public API's runtime */
static struct kp__rt_backend be;     /* the backend's own hooks */

/* run c's body once under a watch; public: through kp_rt_watch_*, else the
 * backend hooks (then *w holds the launches) */
static int run(const wcase &c, int pub, struct kp_rt_watch_result *res, struct kp__rt_watch *w)
{
	void *st = c.stream ? NULL : (void *)g.s;
	cudaGraph_t graph = NULL;
	int rc;

	expect.clear();
	memset(res, 0, sizeof(*res));
	memset(w, 0, sizeof(*w));
	if (c.nested)
		CK(cudaStreamBeginCapture(g.s, cudaStreamCaptureModeThreadLocal));
	rc = pub ? kp_rt_watch_begin(rt, st, c.flags) : be.watch_begin(be.ctx, st, c.flags);
	c.body();
	if (pub) {
		kp_rt_watch_end(rt, res);
	} else {
		be.watch_end(be.ctx, w);
		*res = w->res;
	}
	if (c.nested) {
		CK(cudaStreamEndCapture(g.s, &graph));
		if (graph)
			cudaGraphDestroy(graph);
	}
	cudaDeviceSynchronize();
	cudaGetLastError();
	return rc;
}

static std::string check_launches(const struct kp__rt_watch *w)
{
	char buf[256];

	if (w->n_launches != expect.size()) {
		snprintf(buf, sizeof(buf), "%zu launches recorded, %zu made", w->n_launches,
			 expect.size());
		return buf;
	}
	for (size_t i = 0; i < expect.size(); i++) {
		const struct kp__rt_wlaunch *l = &w->launches[i];
		const xlaunch &x = expect[i];

		if (!l->name || !strstr(l->name, x.name)) {
			snprintf(buf, sizeof(buf), "launch %zu is %s, not %s", i,
				 l->name ? l->name : "(null)", x.name);
			return buf;
		}
		if (x.params.empty())
			continue;
		if (l->n_params != x.params.size()) {
			snprintf(buf, sizeof(buf), "launch %zu (%s): %u params, %zu passed", i,
				 x.name, l->n_params, x.params.size());
			return buf;
		}
		for (size_t j = 0; j < x.params.size(); j++) {
			if (l->param_size[j] != x.params[j].size() ||
			    l->param_off[j] + l->param_size[j] > l->params_len ||
			    memcmp(l->params + l->param_off[j], x.params[j].data(), x.params[j].size())) {
				snprintf(buf, sizeof(buf), "launch %zu (%s): param %zu differs "
					 "(off %u size %u len %zu)", i, x.name, j, l->param_off[j],
					 l->param_size[j], l->params_len);
				return buf;
			}
		}
	}
	return "";
}

/* what is wrong with one result, "" when right */
static std::string judge(const wcase &c, int rc, const struct kp_rt_watch_result *res)
{
	char buf[1024];

	if (rc) {
		snprintf(buf, sizeof(buf), "watch_begin failed (verdict %d: %s)", res->verdict,
			 res->msg);
		return buf;
	}
	if (res->verdict != c.verdict ||
	    (c.verdict == 1 && c.call && strcmp(res->call, c.call)) ||
	    (c.want && !strstr(res->msg, c.want) && !strstr(res->kernel, c.want))) {
		snprintf(buf, sizeof(buf), "got verdict %d call '%s' kernel '%s' msg '%s' "
			 "(want %d%s%s%s%s)", res->verdict, res->call, res->kernel, res->msg,
			 c.verdict, c.call ? " call " : "", c.call ? c.call : "",
			 c.want ? " mentioning " : "", c.want ? c.want : "");
		return buf;
	}
	return "";
}

static int run_case(const wcase &c)
{
	struct kp_rt_watch_result res;
	struct kp__rt_watch w;
	std::string why;
	int rc;

	if (rt) {
		rc = run(c, 1, &res, &w);
		why = judge(c, rc, &res);
		if (!why.empty())
			why = "public api: " + why;
	}
	if (why.empty()) {
		rc = run(c, 0, &res, &w);
		why = judge(c, rc, &res);
		if (why.empty() && c.check_launches)
			why = check_launches(&w);
		if (why.empty() && w.per_thread != c.per_thread)
			why = "per_thread " + std::to_string(w.per_thread) + ", want " +
			      std::to_string(c.per_thread);
		if (!why.empty())
			why = "backend: " + why;
	}
	if (why.empty()) {
		if (res.verdict > 0)
			printf("PASS %s (%s: %s)\n", c.name, res.call, res.msg);
		else
			printf("PASS %s\n", c.name);
		return 0;
	}
	printf("FAIL %s: %s\n", c.name, why.c_str());
	return 1;
}

static double us_since(std::chrono::steady_clock::time_point t0)
{
	return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
		.count();
}

/* host time of the 100-kernel body, unwatched (best of 5) */
static double eager_many(void)
{
	double best = 1e30;

	for (int i = 0; i < 20; i++) {
		auto t0 = std::chrono::steady_clock::now();
		b_many();
		double us = us_since(t0);

		CK(cudaStreamSynchronize(g.s));
		best = us < best ? us : best;
	}
	return best;
}

/*
 * Launch eagerly until the watch has detached CUPTI (its delay past), at
 * most 3 s: the ms it took, or -1 when it stayed attached.
 */
static double wait_detached(void)
{
	uint64_t a, d, on = 1;
	auto t0 = std::chrono::steady_clock::now();

	while (us_since(t0) < 3e6) {
		kp__rt_watch_counts(&a, &d, &on);
		if (!on)
			return us_since(t0) / 1000;
		b_many();
		CK(cudaStreamSynchronize(g.s));
		usleep(2000);
	}
	return -1;
}

/*
 * The watch's cost: the first watch of the process (libcupti loaded, CUPTI
 * initialised and subscribed), a later empty one, a watched 100-kernel body;
 * the same body unwatched before and after (what CUPTI leaves behind while
 * attached, and once the watch has detached it); a watch that attaches
 * again after a detach.
 */
static int cost(void)
{
	struct kp__rt_watch w;
	double first, empty, many, before, again, after, detach_ms, detached = -1, reattach = -1;
	uint64_t na, nd, on;
	int rc;

	b_many();   /* modules loaded */
	CK(cudaStreamSynchronize(g.s));
	before = eager_many();
	again = eager_many();   /* the control: no watch in between */
	auto t0 = std::chrono::steady_clock::now();
	rc = be.watch_begin(be.ctx, g.s, 0);
	be.watch_end(be.ctx, &w);
	first = us_since(t0);
	if (rc || w.res.verdict) {
		printf("FAIL cost: first watch: verdict %d %s\n", w.res.verdict, w.res.msg);
		return 1;
	}
	t0 = std::chrono::steady_clock::now();
	be.watch_begin(be.ctx, g.s, 0);
	be.watch_end(be.ctx, &w);
	empty = us_since(t0);
	t0 = std::chrono::steady_clock::now();
	be.watch_begin(be.ctx, g.s, 0);
	b_many();
	be.watch_end(be.ctx, &w);
	many = us_since(t0);
	CK(cudaStreamSynchronize(g.s));
	after = eager_many();
	detach_ms = wait_detached();
	if (detach_ms >= 0) {
		struct kp__rt_watch w2;

		detached = eager_many();
		t0 = std::chrono::steady_clock::now();
		be.watch_begin(be.ctx, g.s, 0);
		be.watch_end(be.ctx, &w2);
		reattach = us_since(t0);
		/* released: detached at once, without the delay */
		if (be.watch_release)
			be.watch_release(be.ctx);
		kp__rt_watch_counts(&na, &nd, &on);
		if (on) {
			printf("FAIL cost: still attached after watch_release\n");
			return 1;
		}
	}
	kp__rt_watch_counts(&na, &nd, &on);
	printf("watch-cost-first-us %.1f\n", first);       /* empty body, first watch */
	printf("watch-cost-empty-us %.1f\n", empty);       /* empty body, later watch */
	printf("watch-cost-100k-us %.1f\n", many);         /* 100-kernel body, watched */
	printf("eager-100k-us %.1f\n", before);            /* same body, unwatched, before */
	printf("eager-100k-again-us %.1f\n", again);      /* ... measured again, no watch */
	printf("eager-100k-after-watch-us %.1f\n", after); /* ... and after the watches */
	printf("watch-detach-ms %.1f\n", detach_ms);      /* until CUPTI was detached (-1: never) */
	printf("eager-100k-after-detach-us %.1f\n", detached); /* ... once detached */
	printf("watch-cost-reattach-us %.1f\n", reattach); /* empty body, attaching again */
	printf("watch-attaches %llu detaches %llu\n", (unsigned long long)na,
	       (unsigned long long)nd);
	if (w.res.verdict || w.n_launches != 100) {
		printf("FAIL cost: 100-kernel watch: verdict %d, %zu launches\n", w.res.verdict,
		       w.n_launches);
		return 1;
	}
	printf("PASS cost\n");
	return 0;
}

static void setup(void)
{
	g.bytes = N * sizeof(float);
	CK(cudaStreamCreate(&g.s));
	CK(cudaStreamCreate(&g.s2));
	CK(cudaStreamCreate(&g.s3));
	CK(cudaStreamCreate(&g.s4));
	CK(cudaEventCreateWithFlags(&g.e1, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&g.e2, cudaEventDisableTiming));
	CK(cudaMalloc(&g.d, g.bytes));
	CK(cudaMalloc(&g.d2, g.bytes));
	CK(cudaMemset(g.d, 0, g.bytes));
	CK(cudaMemset(g.d2, 0, g.bytes));
	CK(cudaMallocHost(&g.hpin, g.bytes));
	g.hpage = (float *)calloc(N, sizeof(float));
	CK(cudaDeviceSynchronize());
}

int main(int argc, char **argv)
{
	struct kp_rt_options opt = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	struct kp_rt_err err;
	struct kp_err kerr;
	int fail = 0, all = argc < 3;

	if (argc < 2) {
		fprintf(stderr, "usage: %s device | list | PLAN [CASE...|all|cost]\n", argv[0]);
		return 64;
	}
	if (!strcmp(argv[1], "list")) {
		for (const wcase &c : cases)
			printf("%s\n", c.name);
		return 0;
	}
	if (!strcmp(argv[1], "device")) {
		struct cudaDeviceProp p;
		int d, v;

		CK(cudaGetDevice(&d));
		CK(cudaGetDeviceProperties(&p, d));
		CK(cudaDriverGetVersion(&v));
		printf("cc %d.%d cuda %d driver %d sm %d gpu %s\n", p.major, p.minor, v / 1000, v,
		       p.multiProcessorCount, p.name);
		return 0;
	}
	setup();
	memset(&kerr, 0, sizeof(kerr));
	if (kp__rt_cuda_backend(&be, &kerr)) {
		printf("FAIL setup: cuda backend: %s\n", kerr.msg);
		return 2;
	}
	if (!be.watch_begin || !be.watch_end) {
		printf("FAIL setup: the cuda backend has no watch hooks\n");
		return 2;
	}
	if (argc >= 3 && !strcmp(argv[2], "cost")) {
		fail = cost();
		be.destroy(be.ctx);
		return fail;
	}
	rt = kp_rt_open_ex(argv[1], &opt, &err);
	if (!rt)
		printf("SKIP public-api: kp_rt_open_ex(%s): %s\n", argv[1], err.msg);
	for (int i = 2; i < argc; i++)
		all |= !strcmp(argv[i], "all");
	for (const wcase &c : cases) {
		int want = all;

		for (int i = 2; i < argc && !want; i++)
			want = !strcmp(argv[i], c.name);
		if (want)
			fail |= run_case(c);
	}
	kp_rt_close(rt);
	be.destroy(be.ctx);
	return fail;
}
