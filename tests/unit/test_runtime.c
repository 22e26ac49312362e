/*
 * test_runtime.c - runtime/: the CUDA-free core driven by a fake backend.
 *
 * The fake "GPU" runs kernels on the host: a kernel named "store" takes
 * (uint64_t *dst, uint64_t value) and writes value to *dst, so a stale or
 * mis-patched pointer in a replayed graph shows up as a wrong memory write,
 * exactly as it would on a GPU. Kernels may also carry a struct parameter
 * holding a pointer at an inner offset.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CUnit/CUnit.h>
#include <sodium.h>
#include "common/kname.h"

#include "common/hash.h"
#include "common/log.h"
#include "db/db.h"
#include "fusion/generate.h"
#include "plan/bundle.h"
#include "plan/planfile.h"
#include "plan/sign.h"
#include "runtime/fused_load.h"
#include "runtime/rt_internal.h"
#include "testutil.h"

#define MAXK 16
#define NSTREAM 4

struct fk_kernel {
	char name[32];
	uint32_t grid[3], block[3], smem;
	int memop;                  /* a memset node: words are pointers */
	uint32_t n_params, off[4], size[4];
	unsigned char params[64];
	size_t len;
};

struct fk_graph {
	struct fk_kernel k[MAXK];
	int n;
};

struct fake {
	pthread_mutex_t lock;
	int capturing[NSTREAM], invalid[NSTREAM];
	struct fk_graph cap[NSTREAM];
	int n_eager_kernels, n_graph_kernels, n_launch, n_set, n_instantiate;
	int n_captures, n_graphs_alive;
	int fail_begin, fail_instantiate, fail_launch, fail_set, fail_nodes;
	int corrupt_graph;          /* graph runs write value + 1: verify must see it */
	int cc_major;
	/* watch: launches seen while watching, the verdict to report */
	int watching, watch_fail, watch_verdict, watch_per_thread, n_watch_begin;
	int n_release;            /* watch_release calls */
	char watch_log[64];       /* b: begin, e: end, r: release, in order */
	struct fk_kernel wk[MAXK];
	int n_wk;
	struct kp__rt_wlaunch wl[MAXK];
	void *last_capture_stream;
};

static struct fake fk;

static int sidx(void *stream)
{
	return (int)((uintptr_t)stream % NSTREAM);
}

static void run_kernel(const struct fk_kernel *k, int in_graph)
{
	uint64_t *dst, val;

	if (strcmp(k->name, "store"))
		return;
	memcpy(&dst, k->params, 8);
	memcpy(&val, k->params + 8, 8);
	*dst = val + (in_graph ? (uint64_t)fk.corrupt_graph : 0);
}

/* What the application's body calls: eager, or recorded by a capture. */
static void launch(void *stream, const char *name, uint32_t grid, const void *p0,
		   uint64_t v1, const void *inner)
{
	struct fk_kernel k;
	int s = sidx(stream);

	memset(&k, 0, sizeof(k));
	snprintf(k.name, sizeof(k.name), "%s", name);
	k.grid[0] = grid;
	k.grid[1] = k.grid[2] = 1;
	k.block[0] = 128;
	k.block[1] = k.block[2] = 1;
	k.n_params = inner ? 3 : 2;
	k.off[0] = 0;
	k.size[0] = 8;
	k.off[1] = 8;
	k.size[1] = 8;
	memcpy(k.params, &p0, 8);
	memcpy(k.params + 8, &v1, 8);
	k.len = 16;
	if (inner) {   /* struct { int n; int pad; void *p; int m; } at 16 */
		int n = 3;

		k.off[2] = 16;
		k.size[2] = 24;
		memcpy(k.params + 16, &n, 4);
		memcpy(k.params + 24, &inner, 8);
		k.len = 40;
	}
	pthread_mutex_lock(&fk.lock);
	if (fk.capturing[s]) {
		if (fk.cap[s].n < MAXK)
			fk.cap[s].k[fk.cap[s].n++] = k;
	} else {
		fk.n_eager_kernels++;
		run_kernel(&k, 0);
		if (fk.watching && fk.n_wk < MAXK)
			fk.wk[fk.n_wk++] = k;
	}
	pthread_mutex_unlock(&fk.lock);
}

static void fake_memset_node(void *stream, const void *dst)
{
	struct fk_kernel k;
	int s = sidx(stream);

	memset(&k, 0, sizeof(k));
	k.memop = 1;
	memcpy(k.params, &dst, 8);
	k.len = 8;
	k.n_params = 1;
	k.size[0] = 8;
	if (fk.capturing[s] && fk.cap[s].n < MAXK)
		fk.cap[s].k[fk.cap[s].n++] = k;
}

/* A host sync inside the region: invalidates a capture, as CUDA does. */
static void host_sync(void *stream)
{
	if (fk.capturing[sidx(stream)])
		fk.invalid[sidx(stream)] = 1;
}

static int f_device(void *ctx, struct kp__rt_device *d)
{
	snprintf(d->name, sizeof(d->name), "Fake H100");
	d->cc_major = fk.cc_major;
	d->cc_minor = 0;
	d->sm_count = 132;
	d->driver_version = 13000;
	return 0;
}

static int f_capture_begin(void *ctx, void *stream)
{
	int s = sidx(stream);

	if (fk.fail_begin)
		return 900;
	pthread_mutex_lock(&fk.lock);
	fk.last_capture_stream = stream;
	fk.capturing[s] = 1;
	fk.invalid[s] = 0;
	fk.cap[s].n = 0;
	pthread_mutex_unlock(&fk.lock);
	return 0;
}

static int f_capture_end(void *ctx, void *stream, void **graph)
{
	int s = sidx(stream);
	struct fk_graph *g;

	pthread_mutex_lock(&fk.lock);
	fk.capturing[s] = 0;
	pthread_mutex_unlock(&fk.lock);
	if (fk.invalid[s])
		return 901;
	g = malloc(sizeof(*g));
	*g = fk.cap[s];
	*graph = g;
	__atomic_fetch_add(&fk.n_captures, 1, __ATOMIC_RELAXED);
	return 0;
}

static int f_capturing(void *ctx, void *stream)
{
	return fk.capturing[sidx(stream)];
}

static int f_nodes(void *ctx, void *graph, struct kp__rt_node **out, size_t *n)
{
	struct fk_graph *g = graph;
	struct kp__rt_node *nd;
	int i;

	if (fk.fail_nodes)
		return 902;
	nd = calloc(g->n ? g->n : 1, sizeof(*nd));
	for (i = 0; i < g->n; i++) {
		struct fk_kernel *k = &g->k[i];

		nd[i].kind = k->memop ? KP__RT_NODE_MEMOP : KP__RT_NODE_KERNEL;
		nd[i].handle = (void *)(uintptr_t)i;
		nd[i].name = k->name;
		memcpy(nd[i].grid, k->grid, sizeof(k->grid));
		memcpy(nd[i].block, k->block, sizeof(k->block));
		nd[i].smem = k->smem;
		nd[i].n_params = k->n_params;
		nd[i].param_off = k->off;
		nd[i].param_size = k->size;
		nd[i].params = malloc(64);
		memcpy(nd[i].params, k->params, 64);
		nd[i].params_len = k->len;
	}
	*out = nd;
	*n = (size_t)g->n;
	return 0;
}

static void f_nodes_free(void *ctx, struct kp__rt_node *nd, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(nd[i].params);
	free(nd);
}

static int f_instantiate(void *ctx, void *graph, void **exec)
{
	struct fk_graph *x;

	if (fk.fail_instantiate)
		return 903;
	x = malloc(sizeof(*x));
	*x = *(struct fk_graph *)graph;
	*exec = x;
	__atomic_fetch_add(&fk.n_instantiate, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&fk.n_graphs_alive, 1, __ATOMIC_RELAXED);
	return 0;
}

static int f_set_params(void *ctx, void *exec, struct kp__rt_node *node)
{
	struct fk_graph *x = exec;
	int i = (int)(uintptr_t)node->handle;

	if (fk.fail_set)
		return 904;
	memcpy(x->k[i].params, node->params, node->params_len);
	__atomic_fetch_add(&fk.n_set, 1, __ATOMIC_RELAXED);
	return 0;
}

static int f_launch(void *ctx, void *exec, void *stream)
{
	struct fk_graph *x = exec;
	int i;

	if (fk.fail_launch)
		return 905;
	pthread_mutex_lock(&fk.lock);
	for (i = 0; i < x->n; i++) {
		run_kernel(&x->k[i], 1);
		fk.n_graph_kernels++;
	}
	fk.n_launch++;
	pthread_mutex_unlock(&fk.lock);
	return 0;
}

static void f_graph_free(void *ctx, void *g) { free(g); }

static void f_exec_free(void *ctx, void *x)
{
	__atomic_fetch_sub(&fk.n_graphs_alive, 1, __ATOMIC_RELAXED);
	free(x);
}

static int f_sync(void *ctx, void *stream) { return 0; }

static int f_alloc(void *ctx, void **p, size_t n)
{
	*p = malloc(n);
	return *p ? 0 : 906;
}

static void f_free(void *ctx, void *p) { free(p); }

static int f_copy(void *ctx, void *d, const void *s, size_t n, void *stream)
{
	memcpy(d, s, n);
	return 0;
}

static int f_equal(void *ctx, const void *a, const void *b, size_t n, int *eq)
{
	*eq = !memcmp(a, b, n);
	return 0;
}

static const char *f_strerror(void *ctx, int rc) { return "fake error"; }

/* named ranges: depth must return to 0 after every region call */
static struct { int depth, pushes, max_depth; char last[64]; } rng;

static void f_range_push(void *ctx, const char *name, int kind)
{
	rng.pushes++;
	if (++rng.depth > rng.max_depth)
		rng.max_depth = rng.depth;
	snprintf(rng.last, sizeof(rng.last), "%s", name);
}

static void f_range_pop(void *ctx) { rng.depth--; }

static void f_watch_log(char c)
{
	size_t n = strlen(fk.watch_log);

	if (n + 1 < sizeof(fk.watch_log))
		fk.watch_log[n] = c;
}

static void f_watch_release(void *ctx)
{
	fk.n_release++;
	f_watch_log('r');
}

static int f_watch_begin(void *ctx, void *stream, unsigned flags)
{
	f_watch_log('b');
	fk.n_watch_begin++;
	if (fk.watch_fail)
		return 1;
	fk.watching = 1;
	fk.n_wk = 0;
	return 0;
}

static int f_watch_end(void *ctx, struct kp__rt_watch *w)
{
	f_watch_log('e');
	int i;

	fk.watching = 0;
	w->res.verdict = fk.watch_verdict;
	if (fk.watch_verdict > 0)
		snprintf(w->res.msg, sizeof(w->res.msg), "cudaStreamSynchronize inside the region");
	w->per_thread = fk.watch_per_thread;
	for (i = 0; i < fk.n_wk; i++) {
		fk.wl[i].name = fk.wk[i].name;
		fk.wl[i].n_params = fk.wk[i].n_params;
		fk.wl[i].param_off = fk.wk[i].off;
		fk.wl[i].param_size = fk.wk[i].size;
		fk.wl[i].params = fk.wk[i].params;
		fk.wl[i].params_len = fk.wk[i].len;
	}
	w->n_launches = (size_t)fk.n_wk;
	w->launches = fk.wl;
	return 0;
}

static const struct kp__rt_backend fake_be = {
	.device = f_device, .capture_begin = f_capture_begin,
	.capture_end = f_capture_end, .capturing = f_capturing, .nodes = f_nodes,
	.nodes_free = f_nodes_free, .instantiate = f_instantiate,
	.set_params = f_set_params, .launch = f_launch, .graph_free = f_graph_free,
	.exec_free = f_exec_free, .sync = f_sync, .dev_alloc = f_alloc,
	.dev_free = f_free, .dev_copy = f_copy, .dev_equal = f_equal,
	.strerror = f_strerror, .range_push = f_range_push, .range_pop = f_range_pop,
};

static void fake_reset(void)
{
	memset(&fk, 0, sizeof(fk));
	pthread_mutex_init(&fk.lock, NULL);
	fk.cc_major = 9;
}

/* ---------------------------------------------------------------------- */
/* plans */

struct preg {
	const char *label;
	int decision;
	uint64_t fingerprint;
	uint32_t warmup, shape_keys;
	uint64_t shape;          /* one extra `shape` fingerprint, 0: none */
};

/* scalar patch lines (kernel 0, params 1..n) write_plan gives every region */
static uint32_t wp_scalars;

static const char *write_plan(const char *name, int cc_major, const struct preg *regs, int n)
{
	struct kp_plan *p = kp_plan_new();
	struct kp_err err = {0};
	const char *path = kp_test_path(name);
	FILE *f;
	int i;

	p->cc_major = cc_major;
	p->cc_minor = 0;
	p->cuda_major = 13;
	p->gpu_name = kp_strdup("Fake H100");
	p->sm_count = 132;
	p->driver_version = 13000;
	p->tool_version = kp_strdup("test");
	p->source_kind = kp_strdup("synthetic");
	p->date = kp_strdup("");
	p->regions = calloc((size_t)n, sizeof(*p->regions));
	p->n_regions = (size_t)n;
	for (i = 0; i < n; i++) {
		struct kp_plan_region *r = &p->regions[i];

		r->label = kp_strdup(regs[i].label);
		r->decision = regs[i].decision;
		r->reason = regs[i].decision == KP_PLAN_GRAPH ? KP_PLAN_R_LAUNCH_BOUND
			    : KP_PLAN_R_NOT_LAUNCH_BOUND;
		r->reason_text = kp_strdup("");
		r->fingerprint = regs[i].fingerprint;
		r->kernels = 2;
		r->occurrences = 10;
		r->shape_keys = regs[i].shape_keys ? regs[i].shape_keys : 1;
		r->warmup = regs[i].warmup;
		if (regs[i].shape) {
			r->shapes = malloc(sizeof(*r->shapes));
			r->shapes[0] = regs[i].shape;
			r->n_shapes = 1;
		}
		if (wp_scalars) {
			uint32_t j;

			r->patches = calloc(wp_scalars, sizeof(*r->patches));
			r->n_patches = wp_scalars;
			for (j = 0; j < wp_scalars; j++)
				r->patches[j] = (struct kp_plan_patch){ 0, j + 1, 8 * (j + 1), 8, 1 };
		}
	}
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	if (kp_plan_write_file(p, f, &err))
		fprintf(stderr, "plan write: %s\n", err.msg);
	fclose(f);
	kp_plan_free(p);
	return path;
}

static int saved_log_level = -1;

/*
 * Open over backend be with options o. The fallbacks the tests provoke are
 * expected: keep their warnings off the output (restored by the last test).
 */
static kp_rt *quiet_open(const struct kp__rt_backend *be, const char *plan,
			 const struct kp_rt_options *o, struct kp_rt_err *err)
{
	if (saved_log_level < 0)
		saved_log_level = kp_log_get_level();
	kp_log_set_level(KP_LOG_ERROR);
	return kp__rt_open_backend(be, plan, o, err);
}

static kp_rt *open_rt(const char *plan, unsigned flags, int verify)
{
	struct kp_rt_options o = { flags | KP_RT_NO_ENV, verify, -1, 0, NULL, NULL };
	struct kp_rt_err err;
	kp_rt *rt = quiet_open(&fake_be, plan, &o, &err);

	if (!rt)
		fprintf(stderr, "open: %s\n", err.msg);
	return rt;
}

/* open_rt over a backend that watches the warm-up call before capture */
static kp_rt *open_rt_watch(const char *plan)
{
	struct kp__rt_backend be = fake_be;
	struct kp_rt_options o = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	struct kp_rt_err err;
	kp_rt *rt;

	be.watch_begin = f_watch_begin;
	be.watch_end = f_watch_end;
	be.watch_release = f_watch_release;
	rt = quiet_open(&be, plan, &o, &err);
	if (!rt)
		fprintf(stderr, "open: %s\n", err.msg);
	return rt;
}

static kp_rt *simple_rt(uint32_t warmup, unsigned flags)
{
	struct preg r[] = { { "step", KP_PLAN_GRAPH, 0, warmup, 1, 0 },
			    { "cold", KP_PLAN_EAGER, 0, 0, 1, 0 } };

	fake_reset();
	return open_rt(write_plan("simple.kplan", 9, r, 2), flags, 0);
}

/*
 * One call of the application's region: store(out + 2, tag) and
 * store(scratch, tag) (scratch never bound: baked in), with the KV-cache-like
 * buffer passed inside a struct. Returns begin's value for the first try.
 */
static int call(kp_rt *rt, const char *name, uint64_t key, void *stream,
		uint64_t *out, size_t out_n, uint64_t *scratch, uint64_t tag, int sync_inside)
{
	kp_region r;
	int first = -100, rc;

	do {
		rc = kp_rt_region_begin(rt, &r, name, key, stream);
		if (first == -100)
			first = rc;
		if (rc) {
			launch(stream, "store", 4, out + 2, tag, NULL);
			if (sync_inside)
				host_sync(stream);
			launch(stream, "store", 8, scratch, tag, out);
		}
		kp_rt_bind(rt, &r, 0, out, out_n * 8, KP_RT_BIND_OUTPUT);
	} while (kp_rt_region_end(rt, &r) > 0);
	return first;
}

static struct kp_rt_stats stats(kp_rt *rt)
{
	struct kp_rt_stats st;

	kp_rt_get_stats(rt, &st);
	return st;
}

/* ---------------------------------------------------------------------- */

static void test_no_plan_and_disable(void)
{
	uint64_t out[8], scratch;
	kp_rt *rt;
	int i;

	fake_reset();
	rt = open_rt(NULL, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, i, 0), 1);
	CU_ASSERT_EQUAL(out[2], 4);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_NO_PLAN], 5);
	CU_ASSERT_EQUAL(fk.n_captures, 0);
	kp_rt_close(rt);
	/* disabled: the plan is not even read (a missing file is fine) */
	rt = open_rt("/nonexistent/plan.kplan", KP_RT_DISABLE, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_DISABLED], 1);
	kp_rt_close(rt);
	/* NULL runtime: body always runs, end does nothing */
	CU_ASSERT_EQUAL(call(NULL, "step", 0, (void *)1, out, 8, &scratch, 9, 0), 1);
	CU_ASSERT_EQUAL(out[2], 9);
}

static void test_bad_plan_file(void)
{
	struct kp_rt_options o = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	struct kp_rt_err err;
	const char *p = kp_test_path("garbage.kplan");

	fake_reset();
	kp_test_write(p, "not a plan\n", -1);
	CU_ASSERT_PTR_NULL(kp__rt_open_backend(&fake_be, p, &o, &err));
	CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "garbage.kplan"));
}

static void test_state_machine(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(2, 0);
	struct kp_rt_stats st;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	/* two warm-up calls run eagerly, the third is captured */
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 2, 0), 1);
	CU_ASSERT_EQUAL(fk.n_eager_kernels, 4);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 3, 0), 1);
	CU_ASSERT_EQUAL(fk.n_eager_kernels, 4);     /* captured, not run eagerly */
	CU_ASSERT_EQUAL(fk.n_launch, 1);            /* ...but launched as the graph */
	CU_ASSERT_EQUAL(out[2], 3);
	/* replays: body skipped, one launch each; the captured tag is baked in */
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 100 + i, 0), 0);
	CU_ASSERT_EQUAL(fk.n_eager_kernels, 4);
	CU_ASSERT_EQUAL(fk.n_launch, 11);
	CU_ASSERT_EQUAL(out[2], 3);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.calls, 13);
	CU_ASSERT_EQUAL(st.captures, 1);
	CU_ASSERT_EQUAL(st.replays, 10);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_WARMUP], 2);
	CU_ASSERT_EQUAL(st.patched_nodes, 0);       /* nothing moved */
	CU_ASSERT_EQUAL(st.graphs, 1);
	CU_ASSERT_EQUAL(st.graph_nodes, 2);
	/* planned-eager region passes through */
	CU_ASSERT_EQUAL(call(rt, "cold", 0, (void *)1, out, 8, &scratch, 5, 0), 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_PLANNED_EAGER], 1);
	kp_rt_close(rt);
	CU_ASSERT_EQUAL(fk.n_graphs_alive, 0);
}

static void test_patch_by_range(void)
{
	uint64_t a[8] = {0}, b[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(0, KP_RT_TWO_EXECS);
	struct kp_rt_stats st;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, a, 8, &scratch, 7, 0), 1);
	CU_ASSERT_EQUAL(a[2], 7);
	/* moved output: the interior pointer out+2 and the struct member are
	 * rebased, the unbound scratch pointer is left alone */
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, b, 8, &scratch, 8, 0), 0);
	CU_ASSERT_EQUAL(b[2], 7);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.patched_nodes, 2);
	CU_ASSERT_EQUAL(st.patched_words, 2);
	CU_ASSERT_EQUAL(fk.n_set, 2);
	/* same buffer again: no update */
	a[2] = 0;
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, b, 8, &scratch, 9, 0), 0);
	CU_ASSERT_EQUAL(fk.n_set, 2);
	/* and back: the first exec still holds a's pointers, no update */
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, a, 8, &scratch, 9, 0), 0);
	CU_ASSERT_EQUAL(a[2], 7);
	CU_ASSERT_EQUAL(fk.n_set, 2);
	CU_ASSERT_EQUAL(stats(rt).graphs, 2);    /* two execs alternate */
	kp_rt_close(rt);
	CU_ASSERT_EQUAL(fk.n_graphs_alive, 0);
}

/* one exec (the default): patched in place every time */
static void test_patch_one_exec(void)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	uint64_t bufs[3][8], scratch = 0;
	kp_rt *rt;
	int i;

	fake_reset();
	rt = open_rt(write_plan("one.kplan", 9, rg, 1), 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	memset(bufs, 0, sizeof(bufs));
	for (i = 0; i < 9; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, bufs[i % 3], 8, &scratch, 5, 0),
				i == 0);
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(bufs[i][2], 5);
	CU_ASSERT_EQUAL(fk.n_set, 16);           /* 8 replays x 2 nodes */
	CU_ASSERT_EQUAL(stats(rt).graphs, 1);
	kp_rt_close(rt);
}

/* two execs, pointers moving every call over three buffers */
static void test_patch_two_execs_rotate(void)
{
	uint64_t bufs[3][8], scratch = 0;
	kp_rt *rt = simple_rt(0, KP_RT_TWO_EXECS);
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 30; i++) {
		memset(bufs[i % 3], 0, sizeof(bufs[0]));
		call(rt, "step", 0, (void *)1, bufs[i % 3], 8, &scratch, 5, 0);
		CU_ASSERT_EQUAL(bufs[i % 3][2], 5);
	}
	CU_ASSERT_EQUAL(stats(rt).replays, 29);
	CU_ASSERT_EQUAL(stats(rt).graphs, 2);
	CU_ASSERT_EQUAL(fk.n_instantiate, 2);
	kp_rt_close(rt);
}

static void test_patch_smallest_range(void)
{
	uint64_t cache[64] = {0}, out[4] = {0}, scratch;
	kp_rt *rt = simple_rt(0, 0);
	kp_region r;
	int t;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	/* a KV-cache-like buffer (slot 0) and the slice written this step
	 * (slot 1, inside slot 0): the slice pointer follows slot 1 */
	for (t = 0; t < 20; t++) {
		uint64_t *slice = cache + 2 * t;

		do {
			if (kp_rt_region_begin(rt, &r, "step", 0, (void *)1)) {
				launch((void *)1, "store", 1, slice + 1, 1000, NULL);
				launch((void *)1, "store", 1, out, 5, cache);
			}
			kp_rt_bind(rt, &r, 0, cache, sizeof(cache), 0);
			kp_rt_bind(rt, &r, 1, slice, 16, 0);
		} while (kp_rt_region_end(rt, &r) > 0);
	}
	for (t = 0; t < 20; t++)
		CU_ASSERT_EQUAL(cache[2 * t + 1], 1000);
	/* step 0: the slice starts where the cache does, ambiguous: captured
	 * at step 1 instead; then only the slice kernel is patched */
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_AMBIGUOUS], 1);
	CU_ASSERT_EQUAL(stats(rt).captures, 1);
	CU_ASSERT_EQUAL(stats(rt).patched_nodes, 18);
	CU_ASSERT_EQUAL(stats(rt).replays, 18);
	(void)scratch;
	kp_rt_close(rt);
}

static void test_capture_failure_backoff(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(0, 0);
	struct kp_rt_stats st;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	/* a sync inside the region invalidates the capture: the body is run
	 * again eagerly, so the work is done anyway */
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 11, 1), 1);
	CU_ASSERT_EQUAL(out[2], 11);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_CAPTURE], 1);
	CU_ASSERT_EQUAL(st.captures, 0);
	/* back-off: 16 calls eager, then retried; 3 failures: given up */
	for (i = 0; i < 200; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 12 + i, 1), 1);
	CU_ASSERT_EQUAL(out[2], 211);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_CAPTURE], 3);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_BACKOFF], 15 + 31);
	CU_ASSERT(st.eager_by_reason[KP_RT_R_GAVE_UP] > 0);
	CU_ASSERT_EQUAL(st.replays, 0);
	kp_rt_close(rt);
}

static void test_backoff_then_recovers(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(0, 0);
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	fk.fail_instantiate = 1;
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(out[2], 1);   /* re-run eagerly */
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_INSTANTIATE], 1);
	fk.fail_instantiate = 0;
	for (i = 0; i < 40; i++)
		call(rt, "step", 0, (void *)1, out, 8, &scratch, 2, 0);
	CU_ASSERT_EQUAL(stats(rt).captures, 1);  /* retried after the back-off */
	CU_ASSERT(stats(rt).replays > 0);
	kp_rt_close(rt);
}

static void test_runtime_failures(void)
{
	uint64_t a[8] = {0}, b[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(0, 0);
	kp_region r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	call(rt, "step", 0, (void *)1, a, 8, &scratch, 1, 0);
	/* patch failure: the body runs again eagerly, into b */
	fk.fail_set = 1;
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, b, 8, &scratch, 2, 0), 0);
	CU_ASSERT_EQUAL(b[2], 2);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_PATCH], 1);
	fk.fail_set = 0;
	kp_rt_close(rt);

	/* launch failure */
	rt = simple_rt(0, 0);
	call(rt, "step", 0, (void *)1, a, 8, &scratch, 1, 0);
	fk.fail_launch = 1;
	call(rt, "step", 0, (void *)1, a, 8, &scratch, 3, 0);
	CU_ASSERT_EQUAL(a[2], 3);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_LAUNCH], 1);
	kp_rt_close(rt);

	/* a slot the graph uses is not bound at replay */
	rt = simple_rt(0, 0);
	fk.fail_launch = 0;
	call(rt, "step", 0, (void *)1, a, 8, &scratch, 1, 0);
	do {
		if (kp_rt_region_begin(rt, &r, "step", 0, (void *)1))
			launch((void *)1, "store", 4, a + 2, 4, NULL);
	} while (kp_rt_region_end(rt, &r) > 0);
	CU_ASSERT_EQUAL(a[2], 4);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_BIND], 1);
	kp_rt_close(rt);

	/* capture begin / node enumeration errors */
	rt = simple_rt(0, 0);
	fk.fail_begin = 1;
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, a, 8, &scratch, 5, 0), 1);
	CU_ASSERT_EQUAL(a[2], 5);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_CUDA], 1);
	kp_rt_close(rt);
	rt = simple_rt(0, 0);
	fk.fail_nodes = 1;
	call(rt, "step", 0, (void *)1, a, 8, &scratch, 6, 0);
	CU_ASSERT_EQUAL(a[2], 6);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_CUDA], 1);
	kp_rt_close(rt);
	CU_ASSERT_EQUAL(fk.n_graphs_alive, 0);
}

static void test_unpatchable_memop(void)
{
	uint64_t a[8] = {0}, b[8] = {0};
	kp_rt *rt = simple_rt(0, 0);
	kp_region r;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 2; i++) {
		uint64_t *buf = i ? b : a;

		do {
			if (kp_rt_region_begin(rt, &r, "step", 0, (void *)1)) {
				fake_memset_node((void *)1, buf);
				launch((void *)1, "store", 4, buf + 2, 6, NULL);
			}
			kp_rt_bind(rt, &r, 0, buf, sizeof(a), 0);
		} while (kp_rt_region_end(rt, &r) > 0);
	}
	CU_ASSERT_EQUAL(b[2], 6);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_UNPATCHABLE], 1);
	kp_rt_close(rt);
}

static void test_fingerprint(void)
{
	uint32_t g4[3] = { 4, 1, 1 }, g8[3] = { 8, 1, 1 }, blk[3] = { 128, 1, 1 };
	uint64_t fp = KP_FP_INIT, out[8] = {0}, scratch = 0;
	struct preg bad[] = { { "step", KP_PLAN_GRAPH, 0x1234, 0, 1, 0 } };
	struct preg good[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	kp_rt *rt;

	fp = kp_fp_add(fp, kp_kernel_sig("store", g4, blk, 0));
	fp = kp_fp_add(fp, kp_kernel_sig("store", g8, blk, 0));
	/* documented definition: hash of "name|gx,gy,gz|bx,by,bz|smem" */
	CU_ASSERT_EQUAL(kp_kernel_sig("store", g4, blk, 0),
			kp_hash64("store|4,1,1|128,1,1|0", 21, KP_HASH_SEED));
	good[0].fingerprint = fp;
	fake_reset();
	rt = open_rt(write_plan("fpgood.kplan", 9, good, 1), 0, 0);
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0);
	CU_ASSERT_EQUAL(stats(rt).captures, 1);
	kp_rt_close(rt);

	fake_reset();
	rt = open_rt(write_plan("fpbad.kplan", 9, bad, 1), 0, 0);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 2, 0), 1);
	CU_ASSERT_EQUAL(out[2], 2);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_FINGERPRINT], 1);
	CU_ASSERT_EQUAL(stats(rt).captures, 0);
	kp_rt_close(rt);

	/* another shape's fingerprint in the plan's `shape` list is the workload too */
	bad[0].shape = fp;
	fake_reset();
	rt = open_rt(write_plan("fpshape.kplan", 9, bad, 1), 0, 0);
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 5, 0);
	CU_ASSERT_EQUAL(stats(rt).captures, 1);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_FINGERPRINT], 0);
	kp_rt_close(rt);
	bad[0].shape = fp ^ 1;
	fake_reset();
	rt = open_rt(write_plan("fpshape2.kplan", 9, bad, 1), 0, 0);
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 6, 0);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_FINGERPRINT], 1);
	kp_rt_close(rt);
	bad[0].shape = 0;

	/* strict: the mismatch is an error (the body still ran) */
	fake_reset();
	rt = open_rt(write_plan("fpbad2.kplan", 9, bad, 1), KP_RT_STRICT, 0);
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 3, 0);
	CU_ASSERT_EQUAL(out[2], 3);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 4, 0), KP_EMISMATCH);
	CU_ASSERT_EQUAL(out[2], 4);
	CU_ASSERT_PTR_NOT_NULL(strstr(kp_rt_last_error(), "step"));
	kp_rt_close(rt);
}

static void test_unknown_region_and_plan_mismatch(void)
{
	struct preg regs[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	uint64_t out[8] = {0}, scratch = 0;
	struct kp_rt_options o = { KP_RT_NO_ENV | KP_RT_STRICT, 0, -1, 0, NULL, NULL };
	struct kp_rt_err err;
	const char *p;
	kp_rt *rt;

	fake_reset();
	p = write_plan("u.kplan", 9, regs, 1);
	rt = open_rt(p, 0, 0);
	CU_ASSERT_EQUAL(call(rt, "other", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(call(rt, "other", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_UNKNOWN_REGION], 2);
	kp_rt_close(rt);
	rt = open_rt(p, KP_RT_STRICT, 0);
	CU_ASSERT_EQUAL(call(rt, "other", 0, (void *)1, out, 8, &scratch, 2, 0), KP_EMISMATCH);
	CU_ASSERT_EQUAL(out[2], 2);
	kp_rt_close(rt);

	/* a plan for compute capability 8.0 on a 9.0 GPU */
	p = write_plan("a100.kplan", 8, regs, 1);
	rt = open_rt(p, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 3, 0), 1);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 3, 0), 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_PLAN_MISMATCH], 2);
	CU_ASSERT_EQUAL(fk.n_captures, 0);
	kp_rt_close(rt);
	CU_ASSERT_PTR_NULL(kp__rt_open_backend(&fake_be, p, &o, &err));
	CU_ASSERT_EQUAL(err.code, KP_EMISMATCH);
}

/* open over the fake backend naming model (flags: KP_RT_NO_ENV unless env) */
static kp_rt *open_model(const char *plan, const char *model, unsigned flags,
			 struct kp_rt_err *err)
{
	struct kp_rt_options o = { flags, 0, -1, 0, NULL, model };

	return quiet_open(&fake_be, plan, &o, err);
}

/* eager calls for plan-mismatch after 4 calls of "step" (-1: no runtime) */
static int mismatch_calls(kp_rt *rt)
{
	uint64_t out[8] = {0}, scratch = 0;
	int i, n;

	if (!rt)
		return -1;
	for (i = 0; i < 4; i++)
		call(rt, "step", 0, (void *)1, out, 8, &scratch, (uint64_t)i, 0);
	n = (int)stats(rt).eager_by_reason[KP_RT_R_PLAN_MISMATCH];
	kp_rt_close(rt);
	return n;
}

/*
 * A plan pinned to a model (kplan plan --for): the application's identity
 * (kp_rt_options.model, else KPLAN_RT_MODEL) must match; none given:
 * applies; a plan not pinned ignores it.
 */
static void test_model_pin(void)
{
	struct preg regs[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	struct kp_err err = {0};
	struct kp_rt_err rerr;
	const char *path, *plain;
	struct kp_plan *p;
	FILE *f;

	fake_reset();
	plain = write_plan("unpinned.kplan", 9, regs, 1);
	path = write_plan("pinned.kplan", 9, regs, 1);
	p = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->model = kp_strdup("gpt2-124M@sha256:00ff");
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_plan_write_file(p, f, &err), 0);
	fclose(f);
	kp_plan_free(p);

	/* the same identity: applies (captured, no mismatch) */
	fake_reset();
	CU_ASSERT_EQUAL(mismatch_calls(open_model(path, "gpt2-124M@sha256:00ff",
						  KP_RT_NO_ENV, &rerr)), 0);
	CU_ASSERT(fk.n_captures >= 1);
	/* none given: applies (logged once at open) */
	fake_reset();
	CU_ASSERT_EQUAL(mismatch_calls(open_model(path, NULL, KP_RT_NO_ENV, &rerr)), 0);
	CU_ASSERT(fk.n_captures >= 1);
	/* another model: every call eager, plan-mismatch, nothing captured */
	fake_reset();
	CU_ASSERT_EQUAL(mismatch_calls(open_model(path, "gpt2-355M@sha256:00ff",
						  KP_RT_NO_ENV, &rerr)), 4);
	CU_ASSERT_EQUAL(fk.n_captures, 0);
	/* strict: open fails naming both identities */
	CU_ASSERT_PTR_NULL(open_model(path, "gpt2-355M", KP_RT_NO_ENV | KP_RT_STRICT, &rerr));
	CU_ASSERT_EQUAL(rerr.code, KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "gpt2-124M@sha256:00ff"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "gpt2-355M"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "model"));
	/* KPLAN_RT_MODEL when the option is not set; the option wins over it */
	setenv("KPLAN_RT_MODEL", "gpt2-355M", 1);
	CU_ASSERT_EQUAL(mismatch_calls(open_model(path, NULL, 0, &rerr)), 4);
	CU_ASSERT_EQUAL(mismatch_calls(open_model(path, "gpt2-124M@sha256:00ff", 0, &rerr)), 0);
	/* KP_RT_NO_ENV: not read */
	CU_ASSERT_EQUAL(mismatch_calls(open_model(path, NULL, KP_RT_NO_ENV, &rerr)), 0);
	unsetenv("KPLAN_RT_MODEL");
	/* a plan not pinned: any identity applies */
	CU_ASSERT_EQUAL(mismatch_calls(open_model(plain, "anything", KP_RT_NO_ENV | KP_RT_STRICT,
						  &rerr)), 0);
}

/* open over the fake backend with a trust list (KP_RT_NO_ENV unless env) */
static kp_rt *open_trust(const char *plan, const char *trust, unsigned flags,
			 struct kp_rt_err *err)
{
	struct kp_rt_options o = { flags, 0, -1, 0, trust, NULL };

	return quiet_open(&fake_be, plan, &o, err);
}

/*
 * Open path over the fake backend (its state reset; trusting the keys of
 * trust, NULL: none) and call "step" n times.
 */
static kp_rt *open_calls(const char *path, const char *trust, int n)
{
	struct kp_rt_err rerr;
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt;
	int i;

	fake_reset();
	rt = open_trust(path, trust, KP_RT_NO_ENV, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < n; i++)
		call(rt, "step", 0, (void *)1, out, 8, &scratch, (uint64_t)i + 1, 0);
	return rt;
}

/* eager calls for untrusted-plan after one call of "step" (-1: no runtime) */
static int untrusted_calls(kp_rt *rt)
{
	uint64_t out[8] = {0}, scratch = 0;
	int n;

	if (!rt)
		return -1;
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0);
	n = (int)stats(rt).eager_by_reason[KP_RT_R_UNTRUSTED];
	kp_rt_close(rt);
	return n;
}

/*
 * Signed plans: with a trust key, only a plan signed by it, over the plan
 * and its referenced source as they are, applies; without one, as before.
 */
static void test_trust(void)
{
	static const char src_text[] = "// not a real kernel: the fake backend has no compiler\n";
	struct preg regs[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	struct kp_err err = {0};
	struct kp_rt_err rerr;
	const char *key = kp_test_path("rt.key"), *key2 = kp_test_path("rt2.key");
	const char *src = kp_test_path("kpfuse-rt.cu"), *path, *unsigned_plan;
	char pub[4200], pub2[4200], list[8500], *text;
	struct kp_plan *p;
	size_t len;
	FILE *f;

	kp_test_sh("rm -f '%s' '%s.pub' '%s' '%s.pub'", key, key, key2, key2);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key2, NULL, &err), 0);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	snprintf(pub2, sizeof(pub2), "%s.pub", key2);
	unsigned_plan = write_plan("rt-unsigned.kplan", 9, regs, 1);
	path = write_plan("rt-signed.kplan", 9, regs, 1);
	/* one fusion group whose source lies next to the plan */
	kp_test_write(src, src_text, -1);
	p = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->fusions = calloc(1, sizeof(*p->fusions));
	p->n_fusions = 1;
	p->fusions[0].id = 1;
	p->fusions[0].region = kp_strdup("step");
	p->fusions[0].kernels = 2;
	p->fusions[0].names = kp_strdup("store -> store");
	p->fusions[0].source = kp_strdup("kpfuse-rt.cu");
	p->fusions[0].source_hash = kp_hash64(src_text, strlen(src_text), KP_HASH_SEED);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_plan_write_file(p, f, &err), 0);
	fclose(f);
	kp_plan_free(p);
	CU_ASSERT_EQUAL_FATAL(kp_plan_sign(path, key, NULL, &err), 0);

	/* signed by the trusted key: applies (captures) */
	{
		kp_rt *rt = open_calls(path, pub, 2);

		CU_ASSERT_EQUAL(stats(rt).captures, 1);
		CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_UNTRUSTED], 0);
		kp_rt_close(rt);
	}
	/* a list naming it among others; the key from the environment */
	snprintf(list, sizeof(list), "%s:%s", pub2, pub);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, list, KP_RT_NO_ENV, &rerr)), 0);
	setenv("KPLAN_RT_TRUST", pub, 1);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, NULL, 0, &rerr)), 0);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(unsigned_plan, NULL, 0, &rerr)), 1);
	unsetenv("KPLAN_RT_TRUST");
	/* no trust key: signatures are not looked at */
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(unsigned_plan, NULL, KP_RT_NO_ENV, &rerr)), 0);
	/* unsigned, another key, a missing key file: untrusted */
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(unsigned_plan, pub, KP_RT_NO_ENV, &rerr)), 1);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, pub2, KP_RT_NO_ENV, &rerr)), 1);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, "/nonexistent.pub", KP_RT_NO_ENV,
						   &rerr)), 1);
	/* strict: open fails, naming why */
	CU_ASSERT_PTR_NULL(open_trust(unsigned_plan, pub, KP_RT_NO_ENV | KP_RT_STRICT, &rerr));
	CU_ASSERT_EQUAL(rerr.code, KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "untrusted plan"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "unsigned"));
	/* a tampered source: untrusted, even with a valid plan signature */
	kp_test_write(src, "// evil\n", -1);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, pub, KP_RT_NO_ENV, &rerr)), 1);
	CU_ASSERT_PTR_NULL(open_trust(path, pub, KP_RT_NO_ENV | KP_RT_STRICT, &rerr));
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "kpfuse-rt.cu: source file changed"));
	kp_test_write(src, src_text, -1);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, pub, KP_RT_NO_ENV, &rerr)), 0);
	/* a tampered plan: one byte flipped is refused by the checksum already;
	 * the same change with the checksum recomputed is a bad signature */
	text = kp_test_read(path, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	text[len - 2] ^= 0x01;
	kp_test_write(path, text, (long)len);
	CU_ASSERT_PTR_NULL(open_trust(path, pub, KP_RT_NO_ENV, &rerr));
	CU_ASSERT_EQUAL(rerr.code, KP_EFORMAT);
	text[len - 2] ^= 0x01;
	kp_test_write(path, text, (long)len);
	free(text);
	p = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->regions[0].warmup = 7;
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_plan_write_file(p, f, &err), 0);
	fclose(f);
	kp_plan_free(p);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(path, pub, KP_RT_NO_ENV, &rerr)), 1);
	CU_ASSERT_PTR_NULL(open_trust(path, pub, KP_RT_NO_ENV | KP_RT_STRICT, &rerr));
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "bad signature"));
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(KP_RT_R_UNTRUSTED), "untrusted-plan");
}

/*
 * Warm-up is per region and stream: a new shape key of a region that already
 * captured on that stream captures on its first call (an eager warm-up call
 * would drain the GPU queue in front of the capture); another stream warms
 * up again. (KPLAN_RT_KEY_WARMUP=1 restores a warm-up per key; these tests
 * open with KP_RT_NO_ENV.)
 */
static void test_warmup_per_region(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(2, 0);
	struct kp_rt_stats st;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 4; i++)     /* key 1: 2 warm-ups, capture, replay */
		call(rt, "step", 1, (void *)1, out, 8, &scratch, 1, 0);
	CU_ASSERT_EQUAL(call(rt, "step", 2, (void *)1, out, 8, &scratch, 7, 0), 1);
	CU_ASSERT_EQUAL(out[2], 7);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.captures, 2);            /* key 2 captured at once */
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_WARMUP], 2);
	CU_ASSERT_EQUAL(call(rt, "step", 2, (void *)1, out, 8, &scratch, 8, 0), 0);
	/* another stream: its first key warms up */
	call(rt, "step", 1, (void *)2, out, 8, &scratch, 1, 0);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_WARMUP], 3);
	kp_rt_close(rt);
	CU_ASSERT_EQUAL(fk.n_graphs_alive, 0);
}

static void test_shape_keys_and_thrash(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(0, 0);
	struct kp_rt_stats st;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	/* four keys fit (at least 4 kept): one capture each, then replays */
	for (i = 0; i < 40; i++)
		call(rt, "step", (uint64_t)(i % 4), (void *)1, out, 8, &scratch, 1, 0);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.captures, 4);
	CU_ASSERT_EQUAL(st.replays, 36);
	CU_ASSERT_EQUAL(st.evictions, 0);
	/* six keys round robin: evictions, then the region pauses (key-thrash) */
	for (i = 0; i < 60; i++)
		call(rt, "step", (uint64_t)(10 + i % 6), (void *)1, out, 8, &scratch, 1, 0);
	st = stats(rt);
	CU_ASSERT(st.evictions >= 4);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_KEY_THRASH], 1);
	CU_ASSERT(st.eager_by_reason[KP_RT_R_KEY_THRASH] > 0);
	CU_ASSERT(st.graphs <= 4);
	/* after the pause the region is tried again */
	for (i = 0; i < 300; i++)
		call(rt, "step", 99, (void *)1, out, 8, &scratch, 1, 0);
	CU_ASSERT(stats(rt).replays > st.replays);
	kp_rt_close(rt);
	CU_ASSERT_EQUAL(fk.n_graphs_alive, 0);
}

static void test_verify(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt;

	fake_reset();
	{
		struct preg r[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };

		rt = open_rt(write_plan("v.kplan", 9, r, 1), 0, 2);
	}
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0);
	/* two verified calls run the body eagerly and the graph too */
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0), 1);
	CU_ASSERT_EQUAL(stats(rt).verified, 2);
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1, 0), 0);
	kp_rt_close(rt);

	/* a graph that computes something else is caught; eager result kept */
	fake_reset();
	{
		struct preg r[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };

		rt = open_rt(write_plan("v2.kplan", 9, r, 1), 0, 2);
	}
	call(rt, "step", 0, (void *)1, out, 8, &scratch, 5, 0);
	fk.corrupt_graph = 1;
	CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 5, 0), 1);
	CU_ASSERT_EQUAL(out[2], 5);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_VERIFY], 1);
	CU_ASSERT_EQUAL(stats(rt).verified, 0);
	kp_rt_close(rt);
}

static void test_nested(void)
{
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt = simple_rt(0, 0);
	kp_region outer, inner;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(kp_rt_region_begin(rt, &outer, "step", 0, (void *)1), 1);
	CU_ASSERT_EQUAL(kp_rt_region_begin(rt, &inner, "step", 0, (void *)1), 1);
	launch((void *)1, "store", 4, out + 2, 42, NULL);
	CU_ASSERT_EQUAL(kp_rt_region_end(rt, &inner), 0);
	kp_rt_bind(rt, &outer, 0, out, sizeof(out), 0);
	CU_ASSERT_EQUAL(kp_rt_region_end(rt, &outer), 0);
	CU_ASSERT_EQUAL(out[2], 42);   /* inner launches went into the outer graph */
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_NESTED], 1);
	CU_ASSERT_EQUAL(stats(rt).graph_nodes, 1);
	(void)scratch;
	kp_rt_close(rt);
}

struct thr {
	kp_rt *rt;
	void *stream;
	int ok;
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	uint64_t bufs[2][8], scratch;
	int i;

	t->ok = 1;
	for (i = 0; i < 500; i++) {
		uint64_t *b = bufs[i & 1];

		b[2] = 0;
		call(t->rt, "step", 0, t->stream, b, 8, &scratch, 77, 0);
		if (b[2] != 77)
			t->ok = 0;
	}
	return NULL;
}

static void test_threads(void)
{
	kp_rt *rt = simple_rt(1, 0);
	pthread_t th[3];
	struct thr t[3];
	struct kp_rt_stats st;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 3; i++) {
		t[i].rt = rt;
		t[i].stream = (void *)(uintptr_t)(i + 1);
		pthread_create(&th[i], NULL, thread_main, &t[i]);
	}
	for (i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		CU_ASSERT_TRUE(t[i].ok);
	}
	st = stats(rt);
	CU_ASSERT_EQUAL(st.calls, 1500);
	CU_ASSERT_EQUAL(st.captures, 3);          /* one graph per stream */
	CU_ASSERT_EQUAL(st.replays + st.eager + st.captures, 1500);
	kp_rt_close(rt);
}

static void test_reason_names(void)
{
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(KP_RT_R_CAPTURE), "capture-failed");
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(KP_RT_R_FINGERPRINT), "fingerprint");
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(KP_RT_R_BUSY), "busy");
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(KP_RT_R_COUNT), "?");
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(-1), "?");
	if (saved_log_level >= 0)
		kp_log_set_level(saved_log_level);
}

/* `kplan calibrate` runs the measuring program and stores its lines */
static void test_calibrate_cli(void)
{
	const char *prog = kp_test_path("fake-calibrate.sh");
	const char *db = kp_test_path("calib.db");
	const char *bad = kp_test_path("bad-calibrate.sh");

	kp_test_write(prog, "#!/bin/sh\necho 'gpu Fake H100'\necho 'driver 13000'\n"
		      "echo 'launch_host_ns 3800.5 9'\necho 'graph_node_ns 1012.0 9'\n"
		      "echo 'bogus_ns 1 1'\n", -1);
	kp_test_write(bad, "#!/bin/sh\necho 'gpu Fake'\nexit 3\n", -1);
	CU_ASSERT_EQUAL(kp_test_sh("chmod +x %s %s", prog, bad), 0);
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CALIBRATE=%s %s calibrate -o %s >/dev/null 2>&1",
				   prog, kp_test_kplan(), db), 0);
	{
		struct kp_err err = {0};
		struct kp_db *d = kp_db_open(db, KP_DB_RDONLY, &err);

		CU_ASSERT_PTR_NOT_NULL_FATAL(d);
		CU_ASSERT_EQUAL(kp_db_int(d, "SELECT count(*) FROM kp_calibration WHERE "
					  "gpu_name='Fake H100' AND driver_version=13000 AND "
					  "quantity='launch_host_ns' AND value_ns=3800.5 AND n_samples=9", -1), 1);
		CU_ASSERT_EQUAL(kp_db_int(d, "SELECT count(*) FROM kp_calibration", -1), 2);
		kp_db_close(d);
	}
	/* a failing program is an error (2), said once, a missing one too */
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CALIBRATE=%s %s calibrate >/dev/null 2>%s", bad,
				   kp_test_kplan(), kp_test_path("calib.err")), 2);
	{
		char *msg = kp_test_read(kp_test_path("calib.err"), NULL);
		const char *at = msg ? strstr(msg, "failed (exit status 3") : NULL;

		CU_ASSERT_PTR_NOT_NULL(at);
		CU_ASSERT_PTR_NULL(at ? strstr(at + 1, "failed (exit status") : "");
		CU_ASSERT_PTR_NULL(msg ? strstr(msg, "expected 'gpu'") : "");
		free(msg);
	}
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CALIBRATE=/nonexistent %s calibrate 2>/dev/null",
				   kp_test_kplan()), 2);
	/* a warning a test provokes says it is expected (KPLAN_LOG_TAG, set by
	 * the runner); without the tag it is a plain warning */
	kp_test_write(bad, "#!/bin/sh\necho 'gpu Fake'\necho 'driver 1'\necho 'nothing here'\n"
		      "echo 'launch_host_ns 3800 9'\n", -1);
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CALIBRATE=%s %s calibrate 2>&1 >/dev/null | grep -q "
				   "\"^kplan (expected): warning: .*ignoring line 'nothing here'\"", bad,
				   kp_test_kplan()), 0);
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_LOG_TAG= KPLAN_CALIBRATE=%s %s calibrate 2>&1 >/dev/null | "
				   "grep -q \"^kplan: warning: .*ignoring line\"", bad, kp_test_kplan()), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s calibrate --bogus 2>/dev/null", kp_test_kplan()), 64);
}

/* `make` builds kplan-calibrate where nvcc is found, and only there. */
static void test_calibrate_built(void)
{
	const char *mk = "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -n -C %s BUILD=%s %s all "
			 "2>/dev/null | grep -q 'bin/kplan-calibrate'";
	const char *build = kp_test_path("build-n");

	if (kp_test_sh("command -v make >/dev/null && test -x /usr/local/cuda/bin/nvcc"))
		return;  /* the check needs make and the toolkit's nvcc */
	CU_ASSERT_EQUAL(kp_test_sh(mk, kp_test_src("."), build, "NVCC=/usr/local/cuda/bin/nvcc"), 0);
	CU_ASSERT_NOT_EQUAL(kp_test_sh(mk, kp_test_src("."), build, "NVCC=/nonexistent/nvcc"), 0);
}

/* Every region call is one named range, balanced on every path. */
static void test_named_ranges(void)
{
	uint64_t out[16] = {0}, scratch = 0;
	int i, pushes;
	kp_rt *rt = simple_rt(1, 0);

	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	memset(&rng, 0, sizeof(rng));
	for (i = 0; i < 6; i++) {  /* warm-up, capture, replays */
		call(rt, "step", 0, (void *)0x5, out, 16, &scratch, (uint64_t)i, 0);
		CU_ASSERT_EQUAL(rng.depth, 0);
	}
	CU_ASSERT_STRING_EQUAL(rng.last, "step");
	CU_ASSERT_EQUAL(rng.pushes, 6);
	CU_ASSERT_EQUAL(rng.max_depth, 1);
	call(rt, "cold", 0, (void *)0x5, out, 16, &scratch, 9, 0);      /* planned eager */
	CU_ASSERT_STRING_EQUAL(rng.last, "cold");
	pushes = rng.pushes;
	call(rt, "step", 7, (void *)0x6, out, 16, &scratch, 10, 1);     /* capture fails, re-run */
	CU_ASSERT_EQUAL(rng.depth, 0);
	CU_ASSERT(rng.pushes >= pushes + 1);
	kp_rt_close(rt);
	/* no runtime at all: nothing to mark */
	memset(&rng, 0, sizeof(rng));
	call(NULL, "step", 0, (void *)0x5, out, 16, &scratch, 1, 0);
	CU_ASSERT_EQUAL(rng.pushes, 0);
}

/* ---------------------------------------------------------------------- */
/* fused graphs: the capture's aliasing of bound buffers must hold */

static int fx_load(void *ctx, const char *src, size_t len, uint64_t hash, const char *name,
		   void **fn, char *msg, size_t mlen)
{
	(void)ctx; (void)src; (void)len; (void)hash; (void)name; (void)msg; (void)mlen;
	*fn = (void *)0x1;
	return 0;
}

/* the fake graph keeps its nodes (the stores still run): only the fact that
 * the chain was fused matters here */
static int fx_replace(void *ctx, void *graph, struct kp__rt_fx_repl *r, size_t n, char *msg,
		      size_t mlen)
{
	size_t i;

	(void)ctx; (void)graph; (void)msg; (void)mlen;
	for (i = 0; i < n; i++)
		r[i].rc = 0;
	return (int)n;
}

/*
 * Write plan name: region "step" with one fusion group over its two stores,
 * whose generated source lies next to the plan (its path into src).
 */
static const char *write_fused_plan(const char *name, char *src, size_t src_len)
{
	static const char cat_text[] = "kernel st\nmatch store\nparam 0 dst f32*\nparam 1 v i64\n"
				       "rows 1\ncols 1\nout dst[i] = v\nend\n";
	struct preg reg[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	struct kp_err err = {0};
	struct kp_fx_catalog *cat;
	const struct kp_fx_kernel *chain[2];
	struct kp_fx_group g;
	struct kp_plan *p;
	char dir[512];
	const char *path;
	FILE *f;

	path = write_plan(name, 9, reg, 1);
	cat = kp_fx_catalog_parse(cat_text, sizeof(cat_text) - 1, "t", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	chain[0] = chain[1] = &cat->kernels[0];
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g, &err), 0);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = 0;
	snprintf(src, src_len, "%s/%s", dir, g.file);
	CU_ASSERT_EQUAL(kp_test_write(src, g.source.buf, (long)g.source.len), 0);
	p = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->fusions = calloc(1, sizeof(*p->fusions));
	p->n_fusions = 1;
	p->fusions[0].id = 1;
	p->fusions[0].region = kp_strdup("step");
	p->fusions[0].first_kernel = 0;
	p->fusions[0].kernels = 2;
	p->fusions[0].names = kp_strdup("store -> store");
	p->fusions[0].gain_ns = 1000;
	p->fusions[0].source = kp_strdup(g.file);
	p->fusions[0].source_hash = g.source_hash;
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_plan_write_file(p, f, &err), 0);
	fclose(f);
	kp_plan_free(p);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(cat);
	return path;
}

static void test_fused_bind_overlap(void)
{
	static const struct kp__rt_fusion_ops fops = { NULL, fx_load, fx_replace, NULL };
	uint64_t a[4] = {0}, b[4] = {0}, c[4] = {0}, d[4] = {0};
	struct kp__rt_backend be = fake_be;
	struct kp_rt_options o = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	struct kp_rt_err rerr;
	char src[600];
	const char *path;
	kp_rt *rt;
	int i;

	fake_reset();
	path = write_fused_plan("fused.kplan", src, sizeof(src));
	be.fusion_ops = &fops;
	kp_log_set_level(KP_LOG_ERROR);
	rt = kp__rt_open_backend(&be, path, &o, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	/* store(x, tag); store(y, tag) with x, y bound to slots 0 and 1 */
	for (i = 0; i < 4; i++) {
		uint64_t *x = i < 2 ? (i ? c : a) : c, *y = i < 2 ? (i ? d : b) : i == 2 ? d : c;
		kp_region r;

		do {
			if (kp_rt_region_begin(rt, &r, "step", 0, (void *)1)) {
				launch((void *)1, "store", 1, x, 10 + (uint64_t)i, NULL);
				launch((void *)1, "store", 1, y, 10 + (uint64_t)i, NULL);
			}
			kp_rt_bind(rt, &r, 0, x, sizeof(a), 0);
			kp_rt_bind(rt, &r, 1, y, sizeof(b), 0);
		} while (kp_rt_region_end(rt, &r) > 0);
	}
	/* 0: captured and fused; 1: both moved, still apart: patched replay
	 * (the graph keeps the captured tag, 10); 2: the same again; 3: both
	 * slots on one buffer: fused kernels would assume they are apart, so
	 * that call runs eagerly (its own tag, 13) */
	CU_ASSERT_EQUAL(a[0], 10);
	CU_ASSERT_EQUAL(b[0], 10);
	CU_ASSERT_EQUAL(d[0], 10);
	CU_ASSERT_EQUAL(c[0], 13);
	CU_ASSERT_EQUAL(stats(rt).replays, 2);
	CU_ASSERT_EQUAL(stats(rt).failures[KP_RT_R_BIND], 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_BACKOFF], 1);   /* that call, rerun */
	kp_rt_close(rt);
}


/* a fake load that counts its calls in *ctx */
static int fx_count_load(void *ctx, const char *src, size_t len, uint64_t hash, const char *name,
			 void **fn, char *msg, size_t mlen)
{
	++*(int *)ctx;
	return fx_load(NULL, src, len, hash, name, fn, msg, mlen);
}

/*
 * A signed plan's sources are compiled only as signed: the runtime hands
 * the digests the signature covered to the fusion loader, which checks the
 * bytes it reads against them (the file may be replaced between the
 * signature check and that read).
 */
static void test_fused_verified_sources(void)
{
	struct kp_rt_options o = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	struct kp__rt_fusion_ops fops = { NULL, fx_count_load, fx_replace, NULL };
	struct kp__rt_backend be = fake_be;
	const char *key = kp_test_path("vs.key"), *path;
	struct kp_sign_key tk;
	struct kp_err err = {0};
	struct kp_rt_err rerr;
	struct kp__rt_fusion *fz;
	struct kp_plan *p;
	uint8_t sha[KP_SIGN_SHA256_BYTES];
	char src[600], pub[600], *buf;
	size_t len;
	int loads = 0;
	kp_rt *rt;

	fake_reset();
	fops.ctx = &loads;
	be.fusion_ops = &fops;
	kp_log_set_level(KP_LOG_ERROR);
	path = write_fused_plan("verified.kplan", src, sizeof(src));
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_plan_sign(path, key, NULL, &err), 0);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	o.trust = pub;

	/* signed and trusted: the source as verified is compiled */
	rt = kp__rt_open_backend(&be, path, &o, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(loads, 1);
	kp_rt_close(rt);

	/* the digests kp_plan_verify hands out are those of the sources */
	CU_ASSERT_EQUAL_FATAL(kp_sign_load_public(pub, &tk, &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_plan_read(path, &buf, &len, &err), 0);
	p = kp_plan_parse(buf, len, path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(kp_plan_verify(path, buf, len, p, &tk, 1, NULL, sha, NULL, &err), 0);
	free(buf);
	buf = kp_test_read(src, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	{
		uint8_t want[KP_SIGN_SHA256_BYTES];

		crypto_hash_sha256(want, (const unsigned char *)buf, len);
		CU_ASSERT_EQUAL(memcmp(want, sha, sizeof(sha)), 0);
	}
	free(buf);

	/* the loader compiles what matches the verified digest... */
	loads = 0;
	fz = kp__rt_fusion_open(p, path, sha, &fops);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	CU_ASSERT_EQUAL(loads, 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_HASH), 0);
	kp__rt_fusion_close(fz);
	/* ...and not a file that differs from it (as if swapped after the
	 * check: same kp_hash64, another SHA-256), counted as fusion-hash */
	sha[0] ^= 1;
	loads = 0;
	fz = kp__rt_fusion_open(p, path, sha, &fops);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	CU_ASSERT_EQUAL(loads, 0);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_HASH), 1);
	kp__rt_fusion_close(fz);
	/* no digests (no trust key): as before, the 64-bit hash only */
	fz = kp__rt_fusion_open(p, path, NULL, &fops);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	CU_ASSERT_EQUAL(loads, 1);
	kp__rt_fusion_close(fz);
	kp_plan_free(p);
}

/*
 * Torch fusion sources under a trust key (kp__rt_source_trusted, the check
 * of kp_rt_kernel_load): only the bytes of a source the plan's signature
 * covered (PLAN.aten's groups) are compiled; without a trust key any.
 */
static void test_torch_sources_trusted(void)
{
	static const char src[] = "extern \"C\" __global__ void kp_aten_t(float *y) {}\n";
	static const char other[] = "extern \"C\" __global__ void kp_aten_u(float *y) {}\n";
	struct kp_rt_options o = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	const char *key = kp_test_path("ts.key"), *path = kp_test_path("ts.kplan");
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_rt_err rerr;
	struct kp_plan *p;
	char pub[600], *text;
	uint64_t h = kp_hash64(src, strlen(src), KP_HASH_SEED);
	kp_rt *rt;

	kp_log_set_level(KP_LOG_ERROR);
	text = kp_test_read(kp_test_src("tests/golden/planner_fixture.kplan"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	kp_test_write(path, text, -1);
	free(text);
	p = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	kp_strbuf_addf(&sb, "kpaten-%016llx.cu", (unsigned long long)h);
	kp_test_write(kp_test_path(sb.buf), src, -1);
	kp_strbuf_reset(&sb);
	kp_strbuf_addf(&sb, "kplan-aten-groups 1\nplan-hash %016llx\n\n[group 1]\nregion step\n"
		       "key 0000000000000001\nnumerics exact\nops aten::tanh -> aten::mul.Tensor\n"
		       "shape 8\ninputs f32 full 8 s1\noutputs 1\nkernel kp_aten_t\n"
		       "source kpaten-%016llx.cu\nsource-hash %016llx\n",
		       (unsigned long long)p->body_hash, (unsigned long long)h,
		       (unsigned long long)h);
	kp_plan_free(p);
	snprintf(pub, sizeof(pub), "%s.aten", path);
	kp_test_write(pub, sb.buf, (long)sb.len);
	kp_strbuf_release(&sb);
	unlink(key);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	unlink(pub);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_plan_sign(path, key, NULL, &err), 0);

	/* no trust key: anything */
	rt = kp__rt_open_backend(&fake_be, path, &o, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, other, strlen(other)), 1);
	kp_rt_close(rt);
	/* trusted: the signed source only */
	o.trust = pub;
	rt = kp__rt_open_backend(&fake_be, path, &o, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, src, strlen(src)), 1);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, other, strlen(other)), 0);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, src, strlen(src) - 1), 0);
	kp_rt_close(rt);
	/* the source changed after signing: the plan is untrusted, nothing compiles */
	kp_strbuf_addf(&sb, "kpaten-%016llx.cu", (unsigned long long)h);
	kp_test_write(kp_test_path(sb.buf), other, -1);
	kp_strbuf_release(&sb);
	rt = kp__rt_open_backend(&fake_be, path, &o, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, src, strlen(src)), 0);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, other, strlen(other)), 0);
	kp_rt_close(rt);
	kp_log_set_level(KP_LOG_WARN);
}

/* what fifo_child opens, and how */
struct fifo_case {
	const char *plan, *trust;
	int use_env, strict;
	const struct kp__rt_backend *be;
};

/*
 * Open the runtime as c says and check the outcome: opened with the fused
 * group failing (or refused under strict or for a FIFO plan), never stuck.
 * 0 when as expected. Runs in a child process under alarm(10).
 */
static int fifo_child(const struct fifo_case *c)
{
	struct kp_rt_options o = { c->use_env ? 0 : KP_RT_NO_ENV, 0, -1, 0, c->trust, NULL };
	struct kp_rt_err rerr;
	kp_rt *rt;

	if (c->strict)
		o.flags |= KP_RT_STRICT;
	if (c->use_env)
		setenv("KPLAN_RT_TRUST", c->trust, 1);
	o.trust = c->use_env ? NULL : c->trust;
	kp_log_set_level(KP_LOG_ERROR);
	rt = kp__rt_open_backend(c->be, c->plan, &o, &rerr);
	if (!rt)
		return c->strict || strstr(c->plan, "fifo-plan") ? !strstr(rerr.msg, "FIFO") : 1;
	kp_rt_close(rt);
	return c->strict;
}

/* fifo_child(c) in a child process: 1 when it returned as expected within 10 s */
static int returns_in_time(const struct fifo_case *c)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		alarm(10);
		_exit(fifo_child(c));
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st);
}

/*
 * Issue 30, defect 2: a FIFO planted beside a plan under a fused source's
 * name (or as the plan) blocked kp_rt_open forever in fopen, with or
 * without KPLAN_RT_TRUST. It is refused at once now (common/fileio.h): the
 * group stays unfused (fusion-source), or without the source the
 * signature cannot be checked (untrusted-plan; strict: open fails).
 */
static void test_fifo_no_hang(void)
{
	struct kp__rt_fusion_ops fops = { NULL, fx_count_load, fx_replace, NULL };
	struct kp__rt_backend be = fake_be;
	const char *key = kp_test_path("fifo-rt.key"), *fplan = kp_test_path("fifo-plan.kplan");
	struct kp_err err = {0};
	char src[600], pub[600], *saved;
	size_t saved_len;
	int loads = 0;
	const char *path;

	fops.ctx = &loads;
	be.fusion_ops = &fops;
	path = write_fused_plan("fifo-rt.kplan", src, sizeof(src));
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_plan_sign(path, key, NULL, &err), 0);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	saved = kp_test_read(src, &saved_len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(saved);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("rm -f '%s' && mkfifo '%s'", src, src), 0);
	{
		struct fifo_case no_trust = { path, NULL, 0, 0, &be };
		struct fifo_case trust = { path, pub, 0, 0, &be };
		struct fifo_case env = { path, pub, 1, 0, &be };
		struct fifo_case strict = { path, pub, 0, 1, &be };

		CU_ASSERT(returns_in_time(&no_trust));
		CU_ASSERT(returns_in_time(&trust));
		CU_ASSERT(returns_in_time(&env));
		CU_ASSERT(returns_in_time(&strict));
	}
	CU_ASSERT_EQUAL(unlink(src), 0);
	CU_ASSERT_EQUAL(kp_test_write(src, saved, (long)saved_len), 0);
	free(saved);
	/* the plan itself */
	CU_ASSERT_EQUAL(mkfifo(fplan, 0600), 0);
	{
		struct fifo_case plan = { fplan, NULL, 0, 0, &be };

		CU_ASSERT(returns_in_time(&plan));
	}
	unlink(fplan);
}

/*
 * The call before the first capture is watched: a body that would break a
 * capture never gets one (the application never sees a capture error).
 */
static void test_watch_would_break(void)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 2, 1, 0 } };
	uint64_t out[8] = {0}, scratch = 0;
	struct kp_rt_stats st;
	kp_rt *rt;
	int i;

	fake_reset();
	fk.watch_verdict = 1;
	rt = open_rt_watch(write_plan("watch.kplan", 9, rg, 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 1 + i, 0), 1);
	CU_ASSERT_EQUAL(out[2], 10);
	CU_ASSERT_EQUAL(fk.n_watch_begin, 1);        /* the second warm-up call only */
	CU_ASSERT_PTR_NULL(fk.last_capture_stream);  /* no capture was ever begun */
	st = stats(rt);
	CU_ASSERT_EQUAL(st.watched, 1);
	CU_ASSERT_EQUAL(st.captures, 0);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_WOULD_BREAK], 8);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_WOULD_BREAK], 1);
	CU_ASSERT_STRING_EQUAL(kp_rt_reason_name(KP_RT_R_WOULD_BREAK), "would-break-capture");
	kp_rt_close(rt);

	/* another CUPTI client: could not check, captures as before */
	fake_reset();
	fk.watch_fail = 1;
	rt = open_rt_watch(write_plan("watch.kplan", 9, rg, 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 5; i++)
		call(rt, "step", 0, (void *)1, out, 8, &scratch, 7, 0);
	st = stats(rt);
	CU_ASSERT_EQUAL(st.unwatched, 1);
	CU_ASSERT_EQUAL(st.captures, 1);
	CU_ASSERT_EQUAL(st.replays, 2);
	kp_rt_close(rt);
}

/*
 * A value that changes per call (the tag: a seed, a step) is stale in a
 * replay unless bound: unbound, the watched call and the capture differ and
 * the region stays eager; bound with kp_rt_bind_value, each replay writes
 * the call's value.
 */
static int call_value(kp_rt *rt, void *stream, uint64_t *out, uint64_t tag, int bind)
{
	kp_region r;
	int first = -100, rc;

	do {
		rc = kp_rt_region_begin(rt, &r, "step", 0, stream);
		if (first == -100)
			first = rc;
		if (rc) {
			launch(stream, "store", 4, out + 2, tag, NULL);
			launch(stream, "store", 8, out + 3, 77, NULL);
		}
		kp_rt_bind(rt, &r, 0, out, 64, KP_RT_BIND_OUTPUT);
		if (bind)
			kp_rt_bind_value(rt, &r, 1, &tag, sizeof(tag));
	} while (kp_rt_region_end(rt, &r) > 0);
	return first;
}

static void test_value_binds(void)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 1, 1, 0 } };
	uint64_t out[8] = {0};
	struct kp_rt_stats st;
	kp_region r;
	kp_rt *rt;
	int i, bind;

	for (bind = 0; bind < 2; bind++) {
		fake_reset();
		rt = open_rt_watch(write_plan("value.kplan", 9, rg, 1));
		CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
		for (i = 0; i < 12; i++) {
			call_value(rt, (void *)1, out, 1000 + i, bind);
			CU_ASSERT_EQUAL(out[2], 1000 + (uint64_t)i);   /* never stale */
			CU_ASSERT_EQUAL(out[3], 77);
		}
		st = stats(rt);
		if (bind) {
			CU_ASSERT_EQUAL(st.captures, 1);
			CU_ASSERT_EQUAL(st.replays, 10);
			CU_ASSERT_EQUAL(st.patched_values, 10);
			CU_ASSERT_EQUAL(st.patched_nodes, 10);   /* the first store only */
		} else {
			CU_ASSERT_EQUAL(st.captures, 0);
			CU_ASSERT_EQUAL(st.failures[KP_RT_R_UNBOUND_CHANGE], 1);
			/* the capture's call re-ran eagerly, then every call after it */
			CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_UNBOUND_CHANGE], 11);
		}
		kp_rt_close(rt);
	}
	/* bad sizes are refused; a NULL runtime accepts anything */
	CU_ASSERT_EQUAL(kp_rt_bind_value(NULL, &r, 0, out, 8), 0);
	CU_ASSERT_EQUAL(kp_rt_bind_value(NULL, &r, 0, out, 9), KP_EINVAL);
	CU_ASSERT_EQUAL(kp_rt_bind_value(NULL, &r, 16, out, 4), KP_EINVAL);
}

/*
 * A capture that fails after a clean watch (the watch missed what breaks
 * it) is not retried: the region is eager for good after the first failure.
 */
static void test_capture_failure_after_clean_watch(void)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 1, 1, 0 } };
	uint64_t out[8] = {0}, scratch = 0;
	struct kp_rt_stats st;
	kp_rt *rt;
	int i;

	fake_reset();
	rt = open_rt_watch(write_plan("cleanwatch.kplan", 9, rg, 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, (void *)1, out, 8, &scratch, 20 + i, 1), 1);
	CU_ASSERT_EQUAL(out[2], 119);
	st = stats(rt);
	CU_ASSERT_EQUAL(fk.n_watch_begin, 1);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_CAPTURE], 1);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_BACKOFF], 0);
	/* call 1 watched, call 2's capture fails and its body re-runs eagerly,
	 * then every call: 99 eager for capture-failed */
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_CAPTURE], 99);
	CU_ASSERT_EQUAL(st.captures, 0);
	kp_rt_close(rt);
}

/*
 * A plan whose scalars change per call, run by a program that binds no
 * value: eager for good after one plain warm-up call, before any watch or
 * capture is paid for. With the binds, the watch and the capture follow.
 */
static void test_unbound_scalars_decided_before_the_watch(void)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 1, 1, 0 } };
	uint64_t out[8] = {0};
	struct kp_rt_stats st;
	const char *plan;
	kp_rt *rt;
	int i;

	wp_scalars = 2;
	plan = write_plan("scalars.kplan", 9, rg, 1);
	wp_scalars = 0;
	fake_reset();
	rt = open_rt_watch(plan);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(call_value(rt, (void *)1, out, 500 + i, 0), 1);
		CU_ASSERT_EQUAL(out[2], 500 + (uint64_t)i);
	}
	st = stats(rt);
	CU_ASSERT_EQUAL(fk.n_watch_begin, 0);
	CU_ASSERT_EQUAL(fk.n_captures, 0);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_UNBOUND_CHANGE], 1);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_WARMUP], 1);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_UNBOUND_CHANGE], 5);
	kp_rt_close(rt);

	/* bound: one plain warm-up call, the watched one, then the capture */
	fake_reset();
	rt = open_rt_watch(plan);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 6; i++)
		call_value(rt, (void *)1, out, 500 + i, 1);
	st = stats(rt);
	CU_ASSERT_EQUAL(fk.n_watch_begin, 1);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_UNBOUND_CHANGE], 0);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_WARMUP], 2);
	kp_rt_close(rt);
}

/*
 * CUPTI is released after a watch unless another region has begun its
 * warm-up and waits for its own watch (one attachment for both).
 */
static void test_watch_release_after_the_last_watch(void)
{
	struct preg rg[] = { { "a", KP_PLAN_GRAPH, 0, 2, 1, 0 },
			     { "b", KP_PLAN_GRAPH, 0, 2, 1, 0 } };
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt;
	int i;

	fake_reset();
	rt = open_rt_watch(write_plan("release.kplan", 9, rg, 2));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 4; i++) {
		call(rt, "a", 0, (void *)1, out, 8, &scratch, 3, 0);
		call(rt, "b", 0, (void *)2, out, 8, &scratch, 4, 0);
	}
	CU_ASSERT_STRING_EQUAL(fk.watch_log, "beber");
	CU_ASSERT_EQUAL(fk.n_release, 1);
	CU_ASSERT_EQUAL(stats(rt).captures, 2);
	kp_rt_close(rt);
}

/* Stream 0: the legacy stream is never captured; the per-thread one is. */
static void test_default_streams(void)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 1, 1, 0 } };
	uint64_t out[8] = {0}, scratch = 0;
	kp_rt *rt;
	int i;

	fake_reset();
	rt = open_rt(write_plan("legacy.kplan", 9, rg, 1), 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(call(rt, "step", 0, NULL, out, 8, &scratch, 3, 0), 1);
	CU_ASSERT_EQUAL(fk.n_captures, 0);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_WOULD_BREAK], 4);
	kp_rt_close(rt);

	fake_reset();
	fk.watch_per_thread = 1;
	rt = open_rt_watch(write_plan("legacy.kplan", 9, rg, 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	for (i = 0; i < 5; i++)
		call(rt, "step", 0, NULL, out, 8, &scratch, 3, 0);
	CU_ASSERT_EQUAL(fk.n_captures, 1);
	CU_ASSERT_PTR_EQUAL(fk.last_capture_stream, KP__RT_STREAM_PER_THREAD);
	CU_ASSERT_EQUAL(stats(rt).replays, 3);
	kp_rt_close(rt);
}

/*
 * Pointer patching in a graph captured by other means (kp_rt_gpatch_*):
 * every word pointing into the buffer, top-level or inside a struct
 * parameter, follows the new base; values and other pointers stay; a
 * memset of the buffer makes it unpatchable; errors are reported.
 */
static void test_gpatch(void)
{
	struct kp_rt_options o = { KP_RT_NO_ENV, 0, -1, 0, NULL, NULL };
	struct kp_rt_err err = {0};
	uint64_t a[4] = {0}, b[4] = {0}, other = 0;
	void *graph = NULL, *exec = NULL, *st = (void *)5;
	kp_rt_gpatch *g = NULL;
	kp_rt *rt;

	fake_reset();
	rt = quiet_open(&fake_be, NULL, &o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	/* captured with buffer a: store 7 to a[1], 8 to other (inner: a + 2) */
	CU_ASSERT_EQUAL_FATAL(f_capture_begin(NULL, st), 0);
	launch(st, "store", 1, &a[1], 7, NULL);
	launch(st, "store", 1, &other, 8, &a[2]);
	launch(st, "other", 1, &other, (uint64_t)(uintptr_t)&a[3], NULL);
	CU_ASSERT_EQUAL_FATAL(f_capture_end(NULL, st, &graph), 0);
	CU_ASSERT_EQUAL_FATAL(f_instantiate(NULL, graph, &exec), 0);

	CU_ASSERT_EQUAL(kp_rt_gpatch_open(NULL, graph, exec, a, sizeof(a), &g), -1);
	CU_ASSERT_EQUAL(kp_rt_gpatch_open(rt, graph, exec, a, 0, &g), -1);
	CU_ASSERT_PTR_NULL(g);
	/* a[1] (kernel 0), a + 2 inside kernel 1's struct, a + 3 as kernel
	 * 2's second parameter (a value that is an address: patched too) */
	CU_ASSERT_EQUAL_FATAL(kp_rt_gpatch_open(rt, graph, exec, a, sizeof(a), &g), 3);
	CU_ASSERT_EQUAL(kp_rt_gpatch_set(g, b), 0);
	CU_ASSERT_EQUAL(fk.n_set, 3);
	CU_ASSERT_EQUAL(f_launch(NULL, exec, st), 0);
	CU_ASSERT_EQUAL(b[1], 7);
	CU_ASSERT_EQUAL(a[1], 0);
	CU_ASSERT_EQUAL(other, 8);
	struct fk_graph *x = exec;
	uint64_t w;
	memcpy(&w, x->k[1].params + 24, 8);
	CU_ASSERT_EQUAL(w, (uint64_t)(uintptr_t)&b[2]);
	memcpy(&w, x->k[2].params + 8, 8);
	CU_ASSERT_EQUAL(w, (uint64_t)(uintptr_t)&b[3]);
	memcpy(&w, x->k[1].params, 8);
	CU_ASSERT_EQUAL(w, (uint64_t)(uintptr_t)&other);
	/* the same base again: nothing to update */
	CU_ASSERT_EQUAL(kp_rt_gpatch_set(g, b), 0);
	CU_ASSERT_EQUAL(fk.n_set, 3);
	/* a failed update is reported; the next one rewrites all */
	fk.fail_set = 1;
	CU_ASSERT_EQUAL(kp_rt_gpatch_set(g, a), -4);
	fk.fail_set = 0;
	CU_ASSERT_EQUAL(kp_rt_gpatch_set(g, a), 0);
	CU_ASSERT_EQUAL(f_launch(NULL, exec, st), 0);
	CU_ASSERT_EQUAL(a[1], 7);
	kp_rt_gpatch_close(g);
	kp_rt_gpatch_close(NULL);
	/* nothing points into an unrelated range: 0 sites, set is a no-op */
	CU_ASSERT_EQUAL(kp_rt_gpatch_open(rt, graph, exec, b, 8, &g), 0);
	CU_ASSERT_EQUAL(kp_rt_gpatch_set(g, a), 0);
	kp_rt_gpatch_close(g);
	/* the backend cannot read the graph */
	fk.fail_nodes = 1;
	CU_ASSERT_EQUAL(kp_rt_gpatch_open(rt, graph, exec, a, sizeof(a), &g), -3);
	fk.fail_nodes = 0;
	f_exec_free(NULL, exec);
	f_graph_free(NULL, graph);

	/* a memset of the buffer in the graph: not patchable */
	CU_ASSERT_EQUAL_FATAL(f_capture_begin(NULL, st), 0);
	fake_memset_node(st, &a[0]);
	launch(st, "store", 1, &a[1], 7, NULL);
	CU_ASSERT_EQUAL_FATAL(f_capture_end(NULL, st, &graph), 0);
	CU_ASSERT_EQUAL_FATAL(f_instantiate(NULL, graph, &exec), 0);
	CU_ASSERT_EQUAL(kp_rt_gpatch_open(rt, graph, exec, a, sizeof(a), &g), -2);
	CU_ASSERT_PTR_NULL(g);
	f_exec_free(NULL, exec);
	f_graph_free(NULL, graph);
	kp_rt_close(rt);
}

/* ---------------------------------------------------------------------- */
/* bundles */

/* Rewrite the plan at path for GPU name (a soft key). */
static void set_gpu(const char *path, const char *name)
{
	struct kp_err err = {0};
	struct kp_plan *p = kp_plan_load(path, &err);
	FILE *f;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	free(p->gpu_name);
	p->gpu_name = kp_strdup(name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_plan_write_file(p, f, &err), 0);
	fclose(f);
	kp_plan_free(p);
}

/* A new bundle at dir of the n plan files, added in that order. */
static void make_bundle(const char *dir, const char *const *plans, int n)
{
	struct kp_bundle *b = kp_bundle_new();
	struct kp_err err = {0};
	size_t len;
	char *text;
	int i;

	kp_test_sh("rm -rf '%s'", dir);
	for (i = 0; i < n; i++) {
		text = kp_test_read(plans[i], &len);
		CU_ASSERT_PTR_NOT_NULL_FATAL(text);
		CU_ASSERT_EQUAL(kp_bundle_add(b, text, len, plans[i], 0, NULL, &err), 0);
		free(text);
	}
	CU_ASSERT_EQUAL(kp_bundle_save(b, dir, NULL, &err), 0);
	kp_bundle_free(b);
}

/* The bundle fields of rt's stats, and words of kp_rt_plan_choice */
static void expect_choice(kp_rt *rt, uint64_t entries, uint64_t entry, uint64_t match,
			  const char *why)
{
	struct kp_rt_stats st = stats(rt);

	CU_ASSERT_EQUAL(st.bundle_entries, entries);
	CU_ASSERT_EQUAL(st.bundle_entry, entry);
	CU_ASSERT_EQUAL(st.bundle_match, match);
	CU_ASSERT_PTR_NOT_NULL(strstr(kp_rt_plan_choice(rt), why));
}

/*
 * The runtime opens a bundle like a plan and applies the entry of its GPU
 * (the fake one: "Fake H100", cc 9.0, 132 SMs), whatever order the plans
 * were given in; says which in its stats, region info and
 * kp_rt_plan_choice; no entry: eager (plan-mismatch), strict: open fails;
 * with a trust key one tampered entry, even not the chosen one, makes the
 * whole bundle untrusted.
 */
static void test_bundle(void)
{
	struct preg graph[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	struct preg eager[] = { { "step", KP_PLAN_EAGER, 0, 0, 1, 0 } };
	const char *dir = kp_test_path("rt.kplanb"), *key = kp_test_path("bundle-rt.key");
	const char *plans[3], *rev[3], *a100[1];
	struct kp_rt_options o = { KP_RT_NO_ENV | KP_RT_STRICT, 0, -1, 0, NULL, NULL };
	struct kp_rt_region_info info;
	struct kp_rt_err rerr;
	struct kp_bundle *b;
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_err err = {0};
	char pub[4200], *t, *printed;
	size_t len, n_printed;
	kp_rt *rt;
	FILE *mf;
	int order;

	plans[0] = kp_test_path("b-h100.kplan");
	plans[1] = kp_test_path("b-h200.kplan");
	plans[2] = kp_test_path("b-a100.kplan");
	write_plan("b-h100.kplan", 9, graph, 1);
	write_plan("b-h200.kplan", 9, eager, 1);
	set_gpu(plans[1], "Fake H200");
	write_plan("b-a100.kplan", 8, eager, 1);
	set_gpu(plans[2], "Fake A100");
	rev[0] = plans[2];
	rev[1] = plans[1];
	rev[2] = plans[0];
	for (order = 0; order < 2; order++) {
		make_bundle(dir, order ? rev : plans, 3);
		rt = open_calls(dir, NULL, 2);
		CU_ASSERT_EQUAL(stats(rt).captures, 1);
		/* entries sorted by GPU name: Fake A100, Fake H100, Fake H200 */
		expect_choice(rt, 3, 2, KP_BUNDLE_M_EXACT, "entry #2 Fake H100");
		mf = open_memstream(&printed, &n_printed);
		CU_ASSERT_PTR_NOT_NULL_FATAL(mf);
		kp_rt_print_stats(rt, mf);
		fclose(mf);
		CU_ASSERT_PTR_NOT_NULL(strstr(printed, "kplan-rt: bundle_choice entry #2 Fake H100"));
		free(printed);
		CU_ASSERT_PTR_NOT_NULL(strstr(kp_rt_plan_choice(rt), "gpu-name and sm-count match"));
		CU_ASSERT_EQUAL(kp_rt_region_plan(rt, "step", &info), 0);
		CU_ASSERT_EQUAL(info.bundle_entry, 2);
		CU_ASSERT_EQUAL(info.decision, KP_PLAN_GRAPH);
		kp_rt_close(rt);
	}
	/* a plan file says nothing of bundles */
	rt = open_rt(plans[0], 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(stats(rt).bundle_entries, 0);
	CU_ASSERT_STRING_EQUAL(kp_rt_plan_choice(rt), "");
	kp_rt_close(rt);

	/* no entry for this GPU: every region eager, with the reason */
	a100[0] = plans[2];
	make_bundle(kp_test_path("a100.kplanb"), a100, 1);
	rt = open_calls(kp_test_path("a100.kplanb"), NULL, 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_PLAN_MISMATCH], 1);
	expect_choice(rt, 1, 0, KP_BUNDLE_M_NONE, "no entry applies");
	CU_ASSERT_PTR_NOT_NULL(strstr(kp_rt_plan_choice(rt), "plan wants 8.0, gpu has 9.0"));
	CU_ASSERT_EQUAL(kp_rt_region_plan(rt, "step", &info), 1);
	CU_ASSERT_EQUAL(fk.n_captures, 0);
	kp_rt_close(rt);
	CU_ASSERT_PTR_NULL(quiet_open(&fake_be, kp_test_path("a100.kplanb"), &o, &rerr));
	CU_ASSERT_EQUAL(rerr.code, KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "bundle has no plan for this gpu"));

	/* signed: applies under a trust key */
	make_bundle(dir, plans, 3);
	kp_test_sh("rm -f '%s' '%s.pub'", key, key);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(dir, pub, KP_RT_NO_ENV, &rerr)), 1);
	CU_ASSERT_EQUAL(kp_bundle_sign(dir, key, NULL, &err), 0);
	rt = open_calls(dir, pub, 2);
	CU_ASSERT_EQUAL(stats(rt).captures, 1);
	CU_ASSERT_EQUAL(stats(rt).eager_by_reason[KP_RT_R_UNTRUSTED], 0);
	kp_rt_close(rt);
	/* entry #3 (the H200's, not the one chosen) re-made with another warm-up:
	 * its checksum holds, the bundle is untrusted as a whole */
	b = kp_bundle_load(dir, NULL, NULL, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	{
		struct preg eager5[] = { { "step", KP_PLAN_EAGER, 0, 5, 1, 0 } };

		write_plan("b-h200x.kplan", 9, eager5, 1);
		set_gpu(kp_test_path("b-h200x.kplan"), "Fake H200");
	}
	t = kp_test_read(kp_test_path("b-h200x.kplan"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	free(b->entries[2].bytes);
	b->entries[2].bytes = t;
	b->entries[2].len = len;
	CU_ASSERT_EQUAL(kp_bundle_write(b, &text, &err), 0);
	kp_bundle_free(b);
	kp_test_write(kp_test_path("rt.kplanb/bundle"), text.buf, (long)text.len);
	kp_strbuf_release(&text);
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(dir, pub, KP_RT_NO_ENV, &rerr)), 1);
	CU_ASSERT_PTR_NULL(open_trust(dir, pub, KP_RT_NO_ENV | KP_RT_STRICT, &rerr));
	CU_ASSERT_EQUAL(rerr.code, KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "untrusted bundle"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "bad signature"));
	/* without a trust key the same bundle applies */
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(dir, NULL, KP_RT_NO_ENV, &rerr)), 0);
}

/*
 * The ranks of a job agree (kp_rt_set_agree). The fake job: this process is
 * one rank, ag.other the other rank's verdict at each agreement in turn.
 */
static struct {
	int n, ok[8], other[8], fail_at;
} ag;

static int f_agree(void *ctx, int ok)
{
	int i = ag.n++, o;

	(void)ctx;
	if (i < 8)
		ag.ok[i] = ok;
	if (ag.fail_at == i + 1)
		return -1;
	o = i < 8 ? ag.other[i] : 1;
	return ok < o ? ok : o;
}

static kp_rt *agreeing_rt(const char *name, int o1, int o2)
{
	struct preg rg[] = { { "step", KP_PLAN_GRAPH, 0, 2, 1, 0 } };
	kp_rt *rt;

	memset(&ag, 0, sizeof(ag));
	ag.other[0] = o1;
	ag.other[1] = o2;
	rt = open_rt_watch(write_plan(name, 9, rg, 1));
	if (rt)
		kp_rt_set_agree(rt, f_agree, NULL);
	return rt;
}

/* n calls of "step" (sync: a host sync inside each body), then closed */
static struct kp_rt_stats agree_calls(kp_rt *rt, int n, int sync)
{
	uint64_t out[8] = {0}, scratch = 0;
	struct kp_rt_stats st;
	int i;

	for (i = 0; i < n; i++)
		CU_ASSERT(call(rt, "step", 0, (void *)1, out, 8, &scratch, 7, sync) >= 0);
	CU_ASSERT_EQUAL(out[2], 7);     /* every call's work was done */
	st = stats(rt);
	kp_rt_close(rt);
	return st;
}

static void test_ranks_agree(void)
{
	struct kp_rt_stats st;
	kp_rt *rt;

	/* every rank clean: agreed at the watched call and after the capture */
	fake_reset();
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree1.kplan", 1, 1));
	st = agree_calls(rt, 10, 0);
	CU_ASSERT_EQUAL(ag.n, 2);
	CU_ASSERT_EQUAL(ag.ok[0], 1);
	CU_ASSERT_EQUAL(ag.ok[1], 1);
	CU_ASSERT_EQUAL(st.agreements, 2);
	CU_ASSERT_EQUAL(st.captures, 1);
	CU_ASSERT_EQUAL(st.replays, 7);

	/* the other rank's watch objects: no capture here either */
	fake_reset();
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree2.kplan", 0, 1));
	st = agree_calls(rt, 10, 0);
	CU_ASSERT_EQUAL(ag.n, 1);
	CU_ASSERT_EQUAL(ag.ok[0], 1);
	CU_ASSERT_PTR_NULL(fk.last_capture_stream);
	CU_ASSERT_EQUAL(st.captures, 0);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_WOULD_BREAK], 1);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_WOULD_BREAK], 8);

	/* this rank's watch objects: it says so at the agreement */
	fake_reset();
	fk.watch_verdict = 1;
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree3.kplan", 1, 1));
	st = agree_calls(rt, 10, 0);
	CU_ASSERT_EQUAL(ag.n, 1);
	CU_ASSERT_EQUAL(ag.ok[0], 0);
	CU_ASSERT_EQUAL(st.captures, 0);

	/* the other rank's capture failed: this one's graph is dropped before
	 * its first replay, the call's body runs again eagerly, no retry */
	fake_reset();
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree4.kplan", 1, 0));
	st = agree_calls(rt, 10, 0);
	CU_ASSERT_EQUAL(ag.n, 2);
	CU_ASSERT_EQUAL(ag.ok[1], 1);
	CU_ASSERT_EQUAL(st.replays, 0);
	CU_ASSERT_EQUAL(st.captures, 0);
	CU_ASSERT_EQUAL(st.graphs, 0);
	CU_ASSERT_EQUAL(st.failures[KP_RT_R_CAPTURE], 1);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_CAPTURE], 8);   /* call 3's re-run, 4..10 */
	CU_ASSERT_EQUAL(fk.n_graphs_alive, 0);

	/* this rank's capture fails (a sync the watch missed): it tells the
	 * others at the same agreement, and never retries */
	fake_reset();
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree5.kplan", 1, 1));
	st = agree_calls(rt, 40, 1);
	CU_ASSERT_EQUAL(ag.n, 2);
	CU_ASSERT_EQUAL(ag.ok[1], 0);
	CU_ASSERT_EQUAL(st.captures, 0);
	CU_ASSERT_EQUAL(st.eager_by_reason[KP_RT_R_BACKOFF], 0);

	/* the watch cannot begin here: this rank still agrees at that call */
	fake_reset();
	fk.watch_fail = 1;
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree6.kplan", 1, 1));
	st = agree_calls(rt, 10, 0);
	CU_ASSERT_EQUAL(ag.n, 2);
	CU_ASSERT_EQUAL(st.captures, 1);
	CU_ASSERT_EQUAL(st.unwatched, 1);

	/* the all-reduce itself fails: eager, as an objection */
	fake_reset();
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt = agreeing_rt("agree7.kplan", 1, 1));
	ag.fail_at = 1;
	st = agree_calls(rt, 10, 0);
	CU_ASSERT_EQUAL(ag.n, 1);
	CU_ASSERT_EQUAL(st.captures, 0);
}

/*
 * Torch fusion groups beside the plan at path (PLAN.aten, one group) with
 * source src, named by its hash beside it.
 */
static void write_aten(const char *path, const char *src)
{
	struct kp_strbuf sb = KP_STRBUF_INIT, name = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p = kp_plan_load(path, &err);
	uint64_t h = kp_hash64(src, strlen(src), KP_HASH_SEED);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	kp_plan_dir(path, &name);
	kp_strbuf_addf(&name, "/kpaten-%016llx.cu", (unsigned long long)h);
	kp_test_write(name.buf, src, -1);
	kp_strbuf_addf(&sb, "kplan-aten-groups 2\nplan-hash %016llx\n\n[group 1]\nregion step\n"
		       "key 0000000000000001\nnumerics exact\nops aten::tanh -> aten::mul.Tensor\n"
		       "shape 8\ninputs f32 full 8 s1\noutputs 1\nkernel kp_aten_t\n"
		       "source kpaten-%016llx.cu\nsource-hash %016llx\nsaved-kernels 1\n"
		       "saved-bytes 64\ngain-ns 1000\nper-call 1\n", (unsigned long long)p->body_hash,
		       (unsigned long long)h, (unsigned long long)h);
	kp_strbuf_reset(&name);
	kp_strbuf_addf(&name, "%s.aten", path);
	kp_test_write(name.buf, sb.buf, (long)sb.len);
	kp_plan_free(p);
	kp_strbuf_release(&sb);
	kp_strbuf_release(&name);
}

/*
 * A bundle carries each entry's torch fusion groups: the runtime names the
 * chosen entry's file (kp_rt_aten_groups) and, under a trust key, compiles
 * only that entry's signed sources; a group source changed in the bundle
 * makes the whole bundle untrusted. A plan file names its PLAN.aten.
 */
static void test_bundle_torch_groups(void)
{
	static const char src_h100[] = "extern \"C\" __global__ void kp_aten_t(float *y) {}\n";
	static const char src_h200[] = "extern \"C\" __global__ void kp_aten_t(double *y) {}\n";
	struct preg graph[] = { { "step", KP_PLAN_GRAPH, 0, 0, 1, 0 } };
	const char *dir = kp_test_path("tg.kplanb"), *key = kp_test_path("tg.key");
	const char *plans[2];
	struct kp_rt_err rerr;
	struct kp_err err = {0};
	struct kp_plan *p;
	char pub[4200], want[64], *path;
	uint64_t h = 0;
	kp_rt *rt;

	kp_log_set_level(KP_LOG_ERROR);
	plans[0] = kp_test_path("tg-h100.kplan");
	plans[1] = kp_test_path("tg-h200.kplan");
	write_plan("tg-h100.kplan", 9, graph, 1);
	write_plan("tg-h200.kplan", 9, graph, 1);
	set_gpu(plans[1], "Fake H200");
	write_aten(plans[0], src_h100);
	write_aten(plans[1], src_h200);
	/* a plan file: its PLAN.aten, its body-hash */
	rt = open_rt(plans[0], 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	p = kp_plan_load(plans[0], &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	path = kp_strdup(kp_rt_aten_groups(rt, &h));
	CU_ASSERT_EQUAL(h, p->body_hash);
	CU_ASSERT(path && strlen(path) > 5 && !strcmp(path + strlen(path) - 18, "tg-h100.kplan.aten"));
	free(path);
	kp_rt_close(rt);
	/* the bundle: the chosen entry's file in the bundle */
	make_bundle(dir, plans, 2);
	snprintf(want, sizeof(want), "/plan-%016llx.aten", (unsigned long long)p->body_hash);
	rt = open_calls(dir, NULL, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	path = kp_strdup(kp_rt_aten_groups(rt, &h));
	CU_ASSERT_EQUAL(h, p->body_hash);
	CU_ASSERT(path && strstr(path, "tg.kplanb/") && strstr(path, want));
	CU_ASSERT_EQUAL(path ? access(path, R_OK) : -1, 0);
	free(path);
	kp_rt_close(rt);
	/* signed, trusted: the chosen entry's source only */
	kp_test_sh("rm -f '%s' '%s.pub'", key, key);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	CU_ASSERT_EQUAL(kp_bundle_sign(dir, key, NULL, &err), 0);
	rt = open_trust(dir, pub, KP_RT_NO_ENV, &rerr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, src_h100, strlen(src_h100)), 1);
	CU_ASSERT_EQUAL(kp__rt_source_trusted(rt, src_h200, strlen(src_h200)), 0);
	CU_ASSERT_EQUAL(untrusted_calls(rt), 0);     /* closes rt */
	/* the other entry's group source changed in the bundle: all untrusted */
	{
		struct kp_strbuf s = KP_STRBUF_INIT;

		kp_strbuf_addf(&s, "%s/kpaten-%016llx.cu", dir, (unsigned long long)
			       kp_hash64(src_h200, strlen(src_h200), KP_HASH_SEED));
		kp_test_write(s.buf, "// evil\n", -1);
		CU_ASSERT_EQUAL(untrusted_calls(open_trust(dir, pub, KP_RT_NO_ENV, &rerr)), 1);
		CU_ASSERT_PTR_NULL(open_trust(dir, pub, KP_RT_NO_ENV | KP_RT_STRICT, &rerr));
		CU_ASSERT_PTR_NOT_NULL(strstr(rerr.msg, "source file changed"));
		kp_test_write(s.buf, src_h200, -1);
		kp_strbuf_release(&s);
	}
	CU_ASSERT_EQUAL(untrusted_calls(open_trust(dir, pub, KP_RT_NO_ENV, &rerr)), 0);
	kp_plan_free(p);
	kp_log_set_level(KP_LOG_WARN);
}

CU_TestInfo kp_tests_runtime[] = {
	{ "ranks agree: at the watch and after the capture", test_ranks_agree },
	{ "torch fusion sources: under trust only the signed ones compile",
	  test_torch_sources_trusted },
	{ "bundle: the entry of this GPU, none, one signature", test_bundle },
	{ "bundle: the chosen entry's torch fusion groups, signed", test_bundle_torch_groups },
	{ "watched warm-up: would break, could not check", test_watch_would_break },
	{ "unbound scalars: eager before the watch", test_unbound_scalars_decided_before_the_watch },
	{ "capture failed after a clean watch: decided once", test_capture_failure_after_clean_watch },
	{ "watch: CUPTI released after the last watch", test_watch_release_after_the_last_watch },
	{ "values bound per call, or eager when unbound", test_value_binds },
	{ "stream 0: legacy never captured, per-thread is", test_default_streams },
	{ "fused graph: bound buffers keep the capture's overlaps", test_fused_bind_overlap },
	{ "fused graph: a signed plan's sources compile only as verified",
	  test_fused_verified_sources },
	{ "a FIFO as the plan or a fused source: kp_rt_open does not block", test_fifo_no_hang },
	{ "named ranges per region call", test_named_ranges },
	{ "kplan calibrate (fake program)", test_calibrate_cli },
	{ "make builds kplan-calibrate where nvcc is", test_calibrate_built },
	{ "no plan, disabled, NULL runtime", test_no_plan_and_disable },
	{ "bad plan file", test_bad_plan_file },
	{ "warm-up, capture, replay", test_state_machine },
	{ "warm-up once per region and stream", test_warmup_per_region },
	{ "patch by address range", test_patch_by_range },
	{ "patch with one exec", test_patch_one_exec },
	{ "patch, two execs, rotating buffers", test_patch_two_execs_rotate },
	{ "smallest range wins (kv slice)", test_patch_smallest_range },
	{ "capture failure, back-off, give up", test_capture_failure_backoff },
	{ "back-off then recovery", test_backoff_then_recovers },
	{ "patch/launch/bind/cuda failures", test_runtime_failures },
	{ "memcpy/memset node unpatchable", test_unpatchable_memop },
	{ "foreign graph: pointer patching", test_gpatch },
	{ "fingerprint check and strict", test_fingerprint },
	{ "unknown region, plan for another gpu", test_unknown_region_and_plan_mismatch },
	{ "signed plans: trusted, untrusted, tampered", test_trust },
	{ "plan pinned to a model: match, none, mismatch, strict, env", test_model_pin },
	{ "shape-key cache and thrash hysteresis", test_shape_keys_and_thrash },
	{ "verify mode", test_verify },
	{ "nested region", test_nested },
	{ "threads with own streams", test_threads },
	{ "reason names", test_reason_names },
	CU_TEST_INFO_NULL,
};
