/*
 * host_callback.cu - host code enqueued on the stream inside a region.
 *
 * Exercises: cudaLaunchHostFunc between the backward pass and the optimizer
 * step (a "step done" hook that counts steps and folds them into a host
 * tally, as training loops do for logging): under stream capture it becomes
 * a host node that runs at every replay. The second region does the same
 * with the older cudaStreamAddCallback, which stream capture does not
 * support (the capture would be invalidated and the call would fail).
 * Both tallies are part of the final hash, so a host node that ran too
 * often or not at all changes it.
 *
 * Regions (two separate 8-layer models):
 *   cb.hostfunc  forward, MSE, backward, cudaLaunchHostFunc, SGD: ~57
 *                launches + 1 host node
 *   cb.callback  the same with cudaStreamAddCallback: ~57 launches
 *
 * Expected: cb.hostfunc graphed (host node), tally identical; cb.callback
 * eager (plan blocker host_callback naming cudaStreamAddCallback, or the
 * runtime's would-break-capture); outputs and tallies bit-identical to
 * --eager.
 */
#include "corpus.h"

static void die_cuda(cudaError_t e, const char *what, int line)
{
	fprintf(stderr, "host_callback.cu:%d: %s: %s\n", line, what, cudaGetErrorString(e));
	exit(1);
}
#define CUCHK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) die_cuda(e_, #x, __LINE__); } while (0)

#define L 8
#define NB 8

struct tally {
	unsigned long long n, h, errors;
};

static void CUDART_CB on_step_done(void *p)
{
	struct tally *t = (struct tally *)p;

	t->n++;
	t->h = (t->h ^ t->n) * 0x100000001b3ULL;
}

static void CUDART_CB on_step_done_cb(cudaStream_t s, cudaError_t status, void *p)
{
	struct tally *t = (struct tally *)p;

	(void)s;
	if (status != cudaSuccess)
		t->errors++;
	on_step_done(p);
}

static void step_hostfunc(struct cp_mlp *m, const float *x, const float *t, float *loss,
			  struct tally *ty, cudaStream_t s)
{
	CUCHK(cp_mlp_forward(m, x, s));
	CUCHK(cp_mlp_backward(m, t, loss, 0, s));
	CUCHK(cudaLaunchHostFunc(s, on_step_done, ty));
	CUCHK(cp_mlp_update(m, 0.05f, s));
}

static void step_callback(struct cp_mlp *m, const float *x, const float *t, float *loss,
			  struct tally *ty, cudaStream_t s)
{
	CUCHK(cp_mlp_forward(m, x, s));
	CUCHK(cp_mlp_backward(m, t, loss, 0, s));
	CUCHK(cudaStreamAddCallback(s, on_step_done_cb, ty, 0));
	CUCHK(cp_mlp_update(m, 0.05f, s));
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_mlp ma, mb;
	struct cp_region rg_hf = { "cb.hostfunc" }, rg_cb = { "cb.callback" };
	struct tally ta = { 0, 0xcbf29ce484222325ULL, 0 }, tb = { 0, 0xcbf29ce484222325ULL, 0 };
	cudaStream_t s;
	float *x, *t, *losses;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step;

	cp_parse(argc, argv, &a, 200, NULL);
	CUCHK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUCHK(cp_mlp_init(&ma, L, 61));
	CUCHK(cp_mlp_init(&mb, L, 62));
	CUCHK(cp_data(&x, &t, NB, 800));
	CUCHK(cudaMalloc(&losses, 2 * a.steps * sizeof(float)));
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		const float *xa = x + (size_t)(step % NB) * CP_N, *tta = t + (size_t)(step % NB) * CP_N;
		const float *xb = x + (size_t)((step + 1) % NB) * CP_N;
		const float *ttb = t + (size_t)((step + 1) % NB) * CP_N;
		float *ls = losses + 2 * step;
		kp_region r;

		if (!rt) {
			step_hostfunc(&ma, xa, tta, ls, &ta, s);
			step_callback(&mb, xb, ttb, ls + 1, &tb, s);
			continue;
		}
		cp_enter(rt, &rg_hf);
		do {
			if (kp_region_begin(rt, &r, "cb.hostfunc", 0, s))
				step_hostfunc(&ma, xa, tta, ls, &ta, s);
			kp_rt_bind(rt, &r, 0, xa, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, tta, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, ls, sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_hf);

		cp_enter(rt, &rg_cb);
		do {
			if (kp_region_begin(rt, &r, "cb.callback", 0, s))
				step_callback(&mb, xb, ttb, ls + 1, &tb, s);
			kp_rt_bind(rt, &r, 0, xb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, ttb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, ls + 1, sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_cb);
	}
	CUCHK(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	printf("tally hostfunc %llu callback %llu errors %llu\n", ta.n, tb.n, ta.errors + tb.errors);
	h = cp_dev_hash(losses, 2 * a.steps * sizeof(float), CP_HASH0);
	h = cp_mlp_hash(&ma, h);
	h = cp_mlp_hash(&mb, h);
	h = ex_fnv(&ta, sizeof(ta), h);
	h = ex_fnv(&tb, sizeof(tb), h);
	cp_report(rt, &rg_hf);
	cp_report(rt, &rg_cb);
	if (a.graph_body) {
		/* cb.hostfunc on s: cudaLaunchHostFunc becomes a host node (the
		 * replays advance ta, already hashed); cb.callback is eager by design
		 * (cudaStreamAddCallback cannot be captured) */
		step = a.steps - 1;
		CUCHK(cp_body_begin(s));
		step_hostfunc(&ma, x + (size_t)(step % NB) * CP_N, t + (size_t)(step % NB) * CP_N,
			      losses + 2 * step, &ta, s);
		CUCHK(cp_body_end("cb.hostfunc", s));
	}
	cp_result("host_callback", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
