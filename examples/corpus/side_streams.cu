/*
 * side_streams.cu - work forked onto side streams inside a region, joined
 * back (capturable) or not (not capturable).
 *
 * Exercises: a frozen trunk on the main stream feeding two heads that
 * train concurrently on two side streams: cudaEventRecord on the main
 * stream, cudaStreamWaitEvent on each side stream (the fork), the heads'
 * forward/backward/SGD there, cudaEventRecord on each side stream and
 * cudaStreamWaitEvent on the main stream (the join), then a kernel on the
 * main stream that combines the heads' losses: stream capture follows the
 * fork into both side streams and the join closes it. The second region
 * forks a metrics job (a head's forward on a snapshot) onto a side stream
 * and does NOT join it before the region ends (the program joins it after
 * the region): a capture would end with unjoined work (an error), so the
 * region must stay eager.
 *
 * Regions:
 *   side.fork_join  trunk forward (s), 2 heads x (forward, MSE, backward,
 *                   SGD) on s1 / s2, combine (s): ~96 launches
 *   side.no_join    trunk forward (s), snapshot (s), fork: metrics on s1 (not
 *                   joined), trunk forward of a second batch (s): ~33 launches
 *
 * Expected: side.fork_join graphed; side.no_join eager (would-break-capture
 * naming the unjoined stream, or a plan blocker), never capture-failed
 * crashes; outputs bit-identical to --eager.
 */
#include "corpus.h"

#define CUDA_CALL(x) do { cudaError_t st_ = (x); if (st_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: CUDA call '%s' failed: %s\n", __FILE__, __LINE__, #x, \
		cudaGetErrorString(st_)); exit(1); } } while (0)

#define NB 8
#define LT 4     /* trunk layers */
#define LH 6     /* layers of each head */

__global__ void combine(const float *a, const float *b, float *out)
{
	*out = 0.5f * (*a + *b);
}

struct ctx {
	struct cp_mlp trunk, ha, hb;
	cudaStream_t s, s1, s2;
	cudaEvent_t fork, ja, jb, fork2;
	float *snap;
};

static void fork_join(struct ctx *c, const float *x, const float *ta, const float *tb, float *ls)
{
	const float *feat = c->trunk.act + (size_t)LT * CP_N;

	CUDA_CALL(cp_mlp_forward(&c->trunk, x, c->s));
	CUDA_CALL(cudaEventRecord(c->fork, c->s));
	CUDA_CALL(cudaStreamWaitEvent(c->s1, c->fork, 0));
	CUDA_CALL(cudaStreamWaitEvent(c->s2, c->fork, 0));
	CUDA_CALL(cp_mlp_forward(&c->ha, feat, c->s1));
	CUDA_CALL(cp_mlp_backward(&c->ha, ta, ls, 0, c->s1));
	CUDA_CALL(cp_mlp_update(&c->ha, 0.05f, c->s1));
	CUDA_CALL(cp_mlp_forward(&c->hb, feat, c->s2));
	CUDA_CALL(cp_mlp_backward(&c->hb, tb, ls + 1, 0, c->s2));
	CUDA_CALL(cp_mlp_update(&c->hb, 0.05f, c->s2));
	CUDA_CALL(cudaEventRecord(c->ja, c->s1));
	CUDA_CALL(cudaEventRecord(c->jb, c->s2));
	CUDA_CALL(cudaStreamWaitEvent(c->s, c->ja, 0));
	CUDA_CALL(cudaStreamWaitEvent(c->s, c->jb, 0));
	combine<<<1, 1, 0, c->s>>>(ls, ls + 1, ls + 2);
	CUDA_CALL(cudaGetLastError());
}

static void no_join(struct ctx *c, const float *x0, const float *x1, const float *t0, float *ls)
{
	CUDA_CALL(cp_mlp_forward(&c->trunk, x0, c->s));
	cp_copy<<<(CP_N + 255) / 256, 256, 0, c->s>>>(c->snap, c->trunk.act + (size_t)LT * CP_N, CP_N);
	CUDA_CALL(cudaGetLastError());
	CUDA_CALL(cudaEventRecord(c->fork2, c->s));
	CUDA_CALL(cudaStreamWaitEvent(c->s1, c->fork2, 0));
	CUDA_CALL(cp_mlp_forward(&c->ha, c->snap, c->s1));         /* metrics: not joined here */
	cp_mse<<<1, CP_N, 0, c->s1>>>(c->ha.act + (size_t)LH * CP_N, t0, c->ha.d1, ls);
	CUDA_CALL(cudaGetLastError());
	CUDA_CALL(cp_mlp_forward(&c->trunk, x1, c->s));
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_region rg_fj = { "side.fork_join" }, rg_nj = { "side.no_join" };
	struct ctx c;
	cudaEvent_t done;
	float *x, *t, *losses, *mlosses;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step;

	cp_parse(argc, argv, &a, 200, NULL);
	CUDA_CALL(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
	CUDA_CALL(cudaStreamCreateWithFlags(&c.s1, cudaStreamNonBlocking));
	CUDA_CALL(cudaStreamCreateWithFlags(&c.s2, cudaStreamNonBlocking));
	CUDA_CALL(cudaEventCreateWithFlags(&c.fork, cudaEventDisableTiming));
	CUDA_CALL(cudaEventCreateWithFlags(&c.ja, cudaEventDisableTiming));
	CUDA_CALL(cudaEventCreateWithFlags(&c.jb, cudaEventDisableTiming));
	CUDA_CALL(cudaEventCreateWithFlags(&c.fork2, cudaEventDisableTiming));
	CUDA_CALL(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
	CUDA_CALL(cp_mlp_init(&c.trunk, LT, 51));
	CUDA_CALL(cp_mlp_init(&c.ha, LH, 52));
	CUDA_CALL(cp_mlp_init(&c.hb, LH, 53));
	CUDA_CALL(cp_data(&x, &t, NB, 700));
	CUDA_CALL(cudaMalloc(&c.snap, CP_N * sizeof(float)));
	CUDA_CALL(cudaMalloc(&losses, 3 * a.steps * sizeof(float)));
	CUDA_CALL(cudaMalloc(&mlosses, a.steps * sizeof(float)));
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		const float *xb = x + (size_t)(step % NB) * CP_N, *x2 = x + (size_t)((step + 5) % NB) * CP_N;
		const float *ta = t + (size_t)(step % NB) * CP_N, *tb = t + (size_t)((step + 3) % NB) * CP_N;
		float *ls = losses + 3 * step, *ms = mlosses + step;
		kp_region r;

		cp_enter(rt, &rg_fj);
		do {
			if (!rt || kp_region_begin(rt, &r, "side.fork_join", 0, c.s))
				fork_join(&c, xb, ta, tb, ls);
			if (!rt)
				break;
			kp_rt_bind(rt, &r, 0, xb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, ta, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, tb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 3, ls, 3 * sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_fj);

		cp_enter(rt, &rg_nj);
		do {
			if (!rt || kp_region_begin(rt, &r, "side.no_join", 0, c.s))
				no_join(&c, x2, xb, tb, ms);
			if (!rt)
				break;
			kp_rt_bind(rt, &r, 0, x2, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, xb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, tb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 3, ms, sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_nj);
		/* the metrics job is joined only here, after the region */
		CUDA_CALL(cudaEventRecord(done, c.s1));
		CUDA_CALL(cudaStreamWaitEvent(c.s, done, 0));
	}
	CUDA_CALL(cudaDeviceSynchronize());
	t1 = ex_now_ns();
	h = cp_dev_hash(losses, 3 * a.steps * sizeof(float), CP_HASH0);
	h = cp_dev_hash(mlosses, a.steps * sizeof(float), h);
	h = cp_mlp_hash(&c.ha, h);
	h = cp_mlp_hash(&c.hb, h);
	cp_report(rt, &rg_fj);
	cp_report(rt, &rg_nj);
	if (a.graph_body) {
		/* side.fork_join on c.s: the capture follows the events into s1 and
		 * s2 and the join closes it; side.no_join is eager by design (its
		 * unjoined fork would fail the capture's end) */
		step = a.steps - 1;
		CUDA_CALL(cp_body_begin(c.s));
		fork_join(&c, x + (size_t)(step % NB) * CP_N, t + (size_t)(step % NB) * CP_N,
			  t + (size_t)((step + 3) % NB) * CP_N, losses + 3 * step);
		CUDA_CALL(cp_body_end("side.fork_join", c.s));
	}
	cp_result("side_streams", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
