/*
 * malloc_async.cu - stream-ordered allocation of temporaries inside a
 * region.
 *
 * Exercises: every step allocates its scratch buffers with cudaMallocAsync
 * on the step's stream, uses them, and frees them with cudaFreeAsync before
 * the step ends (the pattern of code that avoids a caching allocator): a
 * per-layer gradient-norm buffer for global-norm gradient clipping and a
 * scaled copy of the input batch. Under stream capture these become graph
 * memory nodes (alloc / free); the addresses a replay uses are the graph's,
 * not the ones an eager call got, and nothing binds them (they do not exist
 * outside the body).
 *
 * Region: ma.train  mallocAsync x2, input scaling, forward, MSE, backward,
 *                   per-layer grad norms, clip factor, clip, SGD, freeAsync
 *                   x2: 8 layers, ~76 launches
 *
 * Expected: graphed (graph memory nodes; graph_mem_bytes > 0), outputs
 * bit-identical to --eager.
 */
#include "corpus.h"

#define CUDA_TRY(expr) do { cudaError_t e__ = (expr); if (e__ != cudaSuccess) { \
	fprintf(stderr, "error: %s returned %d (%s) at %s:%d\n", #expr, (int)e__, \
		cudaGetErrorString(e__), __FILE__, __LINE__); exit(1); } } while (0)

#define L 8
#define NB 8
#define MAX_NORM 1.0f

__global__ void scale_input(float *dst, const float *src, int n, float s)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		dst[i] = s * src[i];
}

/* norms[l] = sum of squares of layer l's weight gradient (block l, fixed order) */
__global__ void layer_norm_sq(const float *dW, float *norms)
{
	__shared__ float red[CP_D];
	const float *g = dW + (size_t)blockIdx.x * CP_D * CP_D;
	float s = 0;
	int i, k;

	for (i = threadIdx.x; i < CP_D * CP_D; i += CP_D)
		s += g[i] * g[i];
	red[threadIdx.x] = s;
	__syncthreads();
	for (k = CP_D / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		norms[blockIdx.x] = red[0];
}

/* norms[L] = clip factor from the global norm */
__global__ void clip_factor(float *norms, int nl, float max_norm)
{
	float s = 0, n;
	int l;

	for (l = 0; l < nl; l++)
		s += norms[l];
	n = sqrtf(s);
	norms[nl] = n > max_norm ? max_norm / n : 1.0f;
}

__global__ void clip(float *g, int n, const float *factor)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		g[i] *= *factor;
}

static void train_step(struct cp_mlp *m, const float *x, const float *t, float *loss,
		       cudaStream_t s)
{
	float *norms, *xs;
	int l;

	CUDA_TRY(cudaMallocAsync((void **)&norms, (L + 1) * sizeof(float), s));
	CUDA_TRY(cudaMallocAsync((void **)&xs, CP_N * sizeof(float), s));
	scale_input<<<(CP_N + 255) / 256, 256, 0, s>>>(xs, x, CP_N, 0.8f);
	CUDA_TRY(cudaGetLastError());
	CUDA_TRY(cp_mlp_forward(m, xs, s));
	CUDA_TRY(cp_mlp_backward(m, t, loss, 0, s));
	layer_norm_sq<<<L, CP_D, 0, s>>>(m->dW, norms);
	clip_factor<<<1, 1, 0, s>>>(norms, L, MAX_NORM);
	for (l = 0; l < L; l++) {
		clip<<<(CP_D * CP_D + 255) / 256, 256, 0, s>>>(m->dW + (size_t)l * CP_D * CP_D,
							      CP_D * CP_D, norms + L);
		clip<<<1, CP_D, 0, s>>>(m->db + (size_t)l * CP_D, CP_D, norms + L);
	}
	CUDA_TRY(cudaGetLastError());
	CUDA_TRY(cp_mlp_update(m, 0.1f, s));
	CUDA_TRY(cudaFreeAsync(xs, s));
	CUDA_TRY(cudaFreeAsync(norms, s));
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_mlp m;
	struct cp_region rg = { "ma.train" };
	cudaStream_t s;
	float *x, *t, *losses;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step;

	cp_parse(argc, argv, &a, 200, NULL);
	CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA_TRY(cp_mlp_init(&m, L, 71));
	CUDA_TRY(cp_data(&x, &t, NB, 900));
	CUDA_TRY(cudaMalloc(&losses, a.steps * sizeof(float)));
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		const float *xb = x + (size_t)(step % NB) * CP_N, *tb = t + (size_t)(step % NB) * CP_N;
		kp_region r;

		if (!rt) {
			train_step(&m, xb, tb, losses + step, s);
			continue;
		}
		cp_enter(rt, &rg);
		do {
			if (kp_region_begin(rt, &r, "ma.train", 0, s))
				train_step(&m, xb, tb, losses + step, s);
			kp_rt_bind(rt, &r, 0, xb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, tb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, losses + step, sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg);
	}
	CUDA_TRY(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	if (rt) {
		struct kp_rt_stats st;

		kp_rt_get_stats(rt, &st);
		printf("graph_mem_bytes %lld\n", (long long)st.graph_mem_bytes);
	}
	h = cp_dev_hash(losses, a.steps * sizeof(float), CP_HASH0);
	h = cp_mlp_hash(&m, h);
	cp_report(rt, &rg);
	if (a.graph_body) {
		/* ma.train on s: cudaMallocAsync / cudaFreeAsync become graph memory
		 * alloc / free nodes */
		step = a.steps - 1;
		CUDA_TRY(cp_body_begin(s));
		train_step(&m, x + (size_t)(step % NB) * CP_N, t + (size_t)(step % NB) * CP_N,
			   losses + step, s);
		CUDA_TRY(cp_body_end("ma.train", s));
	}
	cp_result("malloc_async", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
