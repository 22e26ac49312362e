/*
 * legacy_launch.cu - a launch on the legacy default stream inside a region.
 *
 * Exercises: a training loop on the program's own blocking stream
 * (cudaStreamCreate) where ONE kernel of the step, the gradient clip, is
 * launched `<<<grid, block>>>` without a stream, so it goes to the legacy
 * default stream (the bug that crashed a real program: under stream capture
 * that launch is an implicit synchronisation with the capturing stream, the
 * launch fails, the capture is invalidated, and this program's own error
 * check exits). Eagerly it is correct: a blocking stream and the legacy
 * stream order against each other.
 *
 * Regions:
 *   legacy.train  forward, loss, backward, grad-norm (on s), clip (legacy
 *                 stream), SGD (on s): 10 layers, ~73 launches
 *   legacy.eval   the forward and loss of 4 held-out batches, all on s:
 *                 ~88 launches
 *
 * Expected: never crashes; legacy.train stays eager (the analyzer reports
 * the legacy-stream launch naming clip_grads, or the runtime's watch of the
 * warm-up call catches it: reason would-break-capture); legacy.eval is
 * graphed; outputs bit-identical to --eager.
 */
#include "corpus.h"

/* the program's own check, llm.c style */
static void cudaCheck_(cudaError_t error, const char *file, int line)
{
	if (error != cudaSuccess) {
		printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
		exit(EXIT_FAILURE);
	}
}
#define cudaCheck(err) (cudaCheck_(err, __FILE__, __LINE__))

#define L 10
#define NB 8        /* training batches */
#define NE 4        /* held-out batches per eval step */
#define MAX_NORM 0.5f

/* sum of squares of n gradients into *out (one block of 256, fixed order) */
__global__ void grad_norm_sq(const float *g, int n, float *out)
{
	__shared__ float red[256];
	float s = 0;
	int i, k;

	for (i = threadIdx.x; i < n; i += 256)
		s += g[i] * g[i];
	red[threadIdx.x] = s;
	__syncthreads();
	for (k = 128; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*out = red[0];
}

__global__ void clip_grads(float *g, int n, const float *norm_sq, float max_norm)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float nrm = sqrtf(*norm_sq);

	if (i < n && nrm > max_norm)
		g[i] *= max_norm / nrm;
}

/* legacy.eval: forward and loss of the NE held-out batches, all on s */
static void eval_step(struct cp_mlp *m, const float *ex_, const float *et, float *els, cudaStream_t s)
{
	int k;

	for (k = 0; k < NE; k++) {
		cudaCheck(cp_mlp_forward(m, ex_ + (size_t)k * CP_N, s));
		cp_mse<<<1, CP_N, 0, s>>>(m->act + (size_t)L * CP_N, et + (size_t)k * CP_N, m->d0, els + k);
		cudaCheck(cudaGetLastError());
	}
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_mlp m;
	struct cp_region rg_train = { "legacy.train" }, rg_eval = { "legacy.eval" };
	cudaStream_t s;
	float *x, *t, *ex_, *et, *losses, *eval_losses, *norm;
	const int ng = L * CP_D * CP_D;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step;

	cp_parse(argc, argv, &a, 200, NULL);
	cudaCheck(cudaStreamCreate(&s));                 /* blocking: orders with stream 0 */
	cudaCheck(cp_mlp_init(&m, L, 11));
	cudaCheck(cp_data(&x, &t, NB, 100));
	cudaCheck(cp_data(&ex_, &et, NE, 200));
	cudaCheck(cudaMalloc(&losses, a.steps * sizeof(float)));
	cudaCheck(cudaMalloc(&eval_losses, (size_t)a.steps * NE * sizeof(float)));
	cudaCheck(cudaMalloc(&norm, sizeof(float)));
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		const float *xb = x + (size_t)(step % NB) * CP_N, *tb = t + (size_t)(step % NB) * CP_N;
		float *ls = losses + step, *els = eval_losses + (size_t)step * NE;
		kp_region r;

		/* the training step */
		cp_enter(rt, &rg_train);
		do {
			if (!rt || kp_region_begin(rt, &r, "legacy.train", 0, s)) {
				cudaCheck(cp_mlp_forward(&m, xb, s));
				cudaCheck(cp_mlp_backward(&m, tb, ls, 0, s));
				grad_norm_sq<<<1, 256, 0, s>>>(m.dW, ng, norm);
				cudaCheck(cudaGetLastError());
				/* THE BUG: no stream argument, so the legacy default stream */
				clip_grads<<<(ng + 255) / 256, 256>>>(m.dW, ng, norm, MAX_NORM);
				cudaCheck(cudaGetLastError());
				cudaCheck(cp_mlp_update(&m, 0.05f, s));
			}
			if (!rt)
				break;
			kp_rt_bind(rt, &r, 0, xb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, tb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, ls, sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_train);

		/* evaluation on held-out batches, all on s */
		cp_enter(rt, &rg_eval);
		do {
			if (!rt || kp_region_begin(rt, &r, "legacy.eval", 0, s))
				eval_step(&m, ex_, et, els, s);
			if (!rt)
				break;
			kp_rt_bind(rt, &r, 0, els, NE * sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_eval);
	}
	cudaCheck(cudaDeviceSynchronize());
	t1 = ex_now_ns();
	cudaCheck(cudaGetLastError());
	h = cp_dev_hash(losses, a.steps * sizeof(float), CP_HASH0);
	h = cp_dev_hash(eval_losses, (size_t)a.steps * NE * sizeof(float), h);
	h = cp_mlp_hash(&m, h);
	cp_report(rt, &rg_train);
	cp_report(rt, &rg_eval);
	if (a.graph_body) {
		/* legacy.eval on s (blocking: nothing else runs on the legacy stream
		 * meanwhile); legacy.train is eager by design (its clip_grads launch
		 * on the legacy stream would invalidate the capture) */
		cudaCheck(cp_body_begin(s));
		eval_step(&m, ex_, et, eval_losses + (size_t)(a.steps - 1) * NE, s);
		cudaCheck(cp_body_end("legacy.eval", s));
	}
	cp_result("legacy_launch", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
