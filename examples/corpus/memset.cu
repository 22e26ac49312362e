/*
 * memset.cu - cudaMemsetAsync (capturable) and a synchronous cudaMemset
 * (not capturable) inside regions.
 *
 * Exercises: gradient accumulation over two micro-batches with the
 * gradients zeroed by cudaMemsetAsync on the step's stream (memset nodes in
 * the graph); and an activation-statistics pass that resets its histogram
 * with a plain cudaMemset in the middle of the region (the legacy default
 * stream: ordered with the program's blocking stream eagerly, an implicit
 * synchronisation under capture, which this program's error check would
 * turn into exit(1)).
 *
 * Regions:
 *   memset.train  cudaMemsetAsync(dW), cudaMemsetAsync(db), 2 x (forward,
 *                 backward accumulating), SGD: 8 layers, ~98 launches + 2
 *                 memsets
 *   memset.stats  forward of 2 batches, cudaMemset(hist), histogram of
 *                 every layer's activations, fold into running stats:
 *                 ~39 launches around one cudaMemset
 *
 * Expected: memset.train graphed, identical; memset.stats eager, its reason
 * naming cudaMemset (the plan's blocker, or the runtime's watch:
 * would-break-capture); never crashes; outputs bit-identical to --eager.
 */
#include "corpus.h"

#define CUDA_CHECK(call) do { \
	cudaError_t err_ = (call); \
	if (err_ != cudaSuccess) { \
		fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, \
			__LINE__, cudaGetErrorString(err_)); \
		exit(1); \
	} \
} while (0)

#define L 8
#define NB 8
#define NBINS 32

/* hist[l][k]: how many of layer l's activations fall into bin k of [-1, 1) */
__global__ void act_hist(const float *act, unsigned *hist)
{
	int l = blockIdx.x, k = threadIdx.x, i;
	unsigned c = 0;

	for (i = 0; i < CP_N; i++) {
		int bin = (int)((act[(size_t)(l + 1) * CP_N + i] + 1.0f) * 0.5f * NBINS);

		c += min(max(bin, 0), NBINS - 1) == k;
	}
	hist[l * NBINS + k] += c;
}

/* running[i] = 0.9 running[i] + 0.1 hist[i] / samples */
__global__ void fold_stats(float *running, const unsigned *hist, int n, float samples)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		running[i] = 0.9f * running[i] + 0.1f * (float)hist[i] / samples;
}

/* memset.train: zero the gradients, accumulate over batches b0 and b1, SGD */
static void train_step(struct cp_mlp *m, const float *x, const float *t, int b0, int b1, float *ls,
		       cudaStream_t s)
{
	int k;

	CUDA_CHECK(cudaMemsetAsync(m->dW, 0, L * CP_D * CP_D * sizeof(float), s));
	CUDA_CHECK(cudaMemsetAsync(m->db, 0, L * CP_D * sizeof(float), s));
	for (k = 0; k < 2; k++) {
		int bb = k ? b1 : b0;

		CUDA_CHECK(cp_mlp_forward(m, x + (size_t)bb * CP_N, s));
		CUDA_CHECK(cp_mlp_backward(m, t + (size_t)bb * CP_N, ls + k, 1, s));
	}
	CUDA_CHECK(cp_mlp_update(m, 0.05f, s));
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_mlp m;
	struct cp_region rg_train = { "memset.train" }, rg_stats = { "memset.stats" };
	cudaStream_t s;
	float *x, *t, *losses, *running;
	unsigned *hist;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step, k, l;

	cp_parse(argc, argv, &a, 200, NULL);
	CUDA_CHECK(cudaStreamCreate(&s));    /* blocking: cudaMemset's stream orders with it */
	CUDA_CHECK(cp_mlp_init(&m, L, 21));
	CUDA_CHECK(cp_data(&x, &t, NB, 300));
	CUDA_CHECK(cudaMalloc(&losses, 2 * a.steps * sizeof(float)));
	CUDA_CHECK(cudaMalloc(&hist, L * NBINS * sizeof(unsigned)));
	CUDA_CHECK(cudaMalloc(&running, L * NBINS * sizeof(float)));
	CUDA_CHECK(cudaMemset(running, 0, L * NBINS * sizeof(float)));
	CUDA_CHECK(cudaDeviceSynchronize());
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		int b0 = (2 * step) % NB, b1 = (2 * step + 1) % NB;
		float *ls = losses + 2 * step;
		kp_region r;

		cp_enter(rt, &rg_train);
		do {
			if (!rt || kp_region_begin(rt, &r, "memset.train", 0, s))
				train_step(&m, x, t, b0, b1, ls, s);
			if (!rt)
				break;
			kp_rt_bind(rt, &r, 0, x + (size_t)b0 * CP_N, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, x + (size_t)b1 * CP_N, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, t + (size_t)b0 * CP_N, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 3, t + (size_t)b1 * CP_N, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 4, ls, 2 * sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_train);

		cp_enter(rt, &rg_stats);
		do {
			if (!rt || kp_region_begin(rt, &r, "memset.stats", 0, s)) {
				for (k = 0; k < 2; k++) {
					CUDA_CHECK(cp_mlp_forward(&m, x + (size_t)((b0 + 4 + k) % NB) * CP_N, s));
					if (k == 0)   /* reset the histogram: a synchronous memset */
						CUDA_CHECK(cudaMemset(hist, 0, L * NBINS * sizeof(unsigned)));
					for (l = 0; l < L; l += 4) {
						act_hist<<<4, NBINS, 0, s>>>(m.act + (size_t)l * CP_N,
									    hist + l * NBINS);
						CUDA_CHECK(cudaGetLastError());
					}
				}
				fold_stats<<<(L * NBINS + 127) / 128, 128, 0, s>>>(running, hist, L * NBINS,
										 2.0f * CP_N);
				CUDA_CHECK(cudaGetLastError());
			}
			if (!rt)
				break;
			kp_rt_bind(rt, &r, 0, x + (size_t)((b0 + 4) % NB) * CP_N, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, x + (size_t)((b0 + 5) % NB) * CP_N, CP_N * sizeof(float), 0);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_stats);
	}
	CUDA_CHECK(cudaDeviceSynchronize());
	t1 = ex_now_ns();
	h = cp_dev_hash(losses, 2 * a.steps * sizeof(float), CP_HASH0);
	h = cp_dev_hash(running, L * NBINS * sizeof(float), h);
	h = cp_mlp_hash(&m, h);
	cp_report(rt, &rg_train);
	cp_report(rt, &rg_stats);
	if (a.graph_body) {
		/* memset.train on s (memset nodes); memset.stats is eager by design
		 * (its synchronous cudaMemset would invalidate the capture) */
		step = a.steps - 1;
		CUDA_CHECK(cp_body_begin(s));
		train_step(&m, x, t, (2 * step) % NB, (2 * step + 1) % NB, losses + 2 * step, s);
		CUDA_CHECK(cp_body_end("memset.train", s));
	}
	cp_result("memset", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
