/*
 * seed_lr.cu - a per-step random seed and a decaying learning rate passed
 * BY VALUE to kernels inside a region.
 *
 * Exercises: dropout after every hidden layer from a counter-based hash of
 * (seed, layer, index) with `unsigned long long seed` a kernel argument
 * (new every step, recomputed in backward, as Philox dropout does), and SGD
 * with `float lr` a kernel argument decayed every step. A graph replayed
 * with the captured values would reuse a stale seed and learning rate, so
 * the program tells the runtime with kp_rt_bind_value(rt, &r, slot, &seed,
 * sizeof seed) and kp_rt_bind_value(..., &lr, sizeof lr).
 * `--no-value-binds` leaves those two calls out (the mistake).
 *
 * Region: seed.train  8 layers: forward with dropout, MSE, backward through
 *                     dropout, SGD: ~64 launches, 14 take the seed, 16 lr
 *
 * Expected: with the binds, graphed, the values patched at every replay
 * (patched_values > 0), outputs bit-identical to --eager. With
 * --no-value-binds: the runtime keeps the region eager (reason
 * unbound-change) or the analyzer/planner flags it; either way never a
 * replay with stale values: outputs bit-identical to --eager.
 */
#include "corpus.h"

/* cuda-samples style */
template <typename T>
static void check(T result, char const *const func, const char *const file, int const line)
{
	if (result) {
		fprintf(stderr, "CUDA error at %s:%d code=%d(%s) \"%s\"\n", file, line,
			static_cast<unsigned int>(result), cudaGetErrorName(result), func);
		exit(EXIT_FAILURE);
	}
}
#define checkCudaErrors(val) check((val), #val, __FILE__, __LINE__)

#define L 8
#define NB 8
#define P_DROP 0.1f

__device__ __forceinline__ float uniform(unsigned long long seed, int layer, int i)
{
	unsigned long long z = seed + ((unsigned long long)layer << 32 | (unsigned)i) *
		0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (float)(z >> 40) / 16777216.0f;
}

__global__ void dropout_fwd(float *y, int n, float p, unsigned long long seed, int layer)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = uniform(seed, layer, i) < p ? 0.0f : y[i] / (1.0f - p);
}

/* through dropout then tanh: y is the dropped-out tanh output */
__global__ void dropout_tanh_bwd(const float *dy, const float *y, float *dpre, int n, float p,
				 unsigned long long seed, int layer)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float t = y[i] * (1.0f - p);

		dpre[i] = uniform(seed, layer, i) < p ? 0.0f : dy[i] / (1.0f - p) * (1.0f - t * t);
	}
}

static void train_step(struct cp_mlp *m, const float *x, const float *t, float *loss,
		       unsigned long long seed, float lr, cudaStream_t s)
{
	const int G = (CP_N + 127) / 128;
	int l;

	cp_copy<<<G, 128, 0, s>>>(m->act, x, CP_N);
	for (l = 0; l < L; l++) {
		float *y = m->act + (size_t)(l + 1) * CP_N;

		cp_linear_fwd<<<CP_B, CP_D, 0, s>>>(m->act + (size_t)l * CP_N, m->W + (size_t)l * CP_D * CP_D,
						    m->b + (size_t)l * CP_D, m->pre + (size_t)l * CP_N);
		cp_tanh_fwd<<<G, 128, 0, s>>>(m->pre + (size_t)l * CP_N, y, CP_N);
		if (l < L - 1)
			dropout_fwd<<<G, 128, 0, s>>>(y, CP_N, P_DROP, seed, l);
		checkCudaErrors(cudaGetLastError());
	}
	cp_mse<<<1, CP_N, 0, s>>>(m->act + (size_t)L * CP_N, t, m->d0, loss);
	for (l = L - 1; l >= 0; l--) {
		const float *y = m->act + (size_t)(l + 1) * CP_N;

		if (l < L - 1)
			dropout_tanh_bwd<<<G, 128, 0, s>>>(m->d0, y, m->d1, CP_N, P_DROP, seed, l);
		else
			cp_tanh_bwd<<<G, 128, 0, s>>>(m->d0, y, m->d1, CP_N);
		cp_linear_bwd_w<<<CP_D, CP_D, 0, s>>>(m->d1, m->act + (size_t)l * CP_N,
						      m->dW + (size_t)l * CP_D * CP_D,
						      m->db + (size_t)l * CP_D, 0);
		if (l > 0)
			cp_linear_bwd_x<<<CP_B, CP_D, 0, s>>>(m->d1, m->W + (size_t)l * CP_D * CP_D, m->d0);
		checkCudaErrors(cudaGetLastError());
	}
	checkCudaErrors(cp_mlp_update(m, lr, s));
}

static unsigned long long step_seed(unsigned long long base, int step)
{
	unsigned long long z = base + (unsigned long long)step * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdULL;
	return z ^ (z >> 29);
}

int main(int argc, char **argv)
{
	static const char *const extra[] = { "--no-value-binds", NULL };
	struct cp_args a;
	struct cp_mlp m;
	struct cp_region rg = { "seed.train" };
	cudaStream_t s;
	float *x, *t, *losses;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step, value_binds;

	cp_parse(argc, argv, &a, 200, extra);
	value_binds = !(a.flags & 1);
	checkCudaErrors(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	checkCudaErrors(cp_mlp_init(&m, L, 31));
	checkCudaErrors(cp_data(&x, &t, NB, 400));
	checkCudaErrors(cudaMalloc(&losses, a.steps * sizeof(float)));
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		const float *xb = x + (size_t)(step % NB) * CP_N, *tb = t + (size_t)(step % NB) * CP_N;
		unsigned long long seed = step_seed(0x5eedULL, step);
		float lr = 0.05f * powf(0.995f, (float)step);
		kp_region r;

		if (!rt) {
			train_step(&m, xb, tb, losses + step, seed, lr, s);
			continue;
		}
		cp_enter(rt, &rg);
		do {
			if (kp_region_begin(rt, &r, "seed.train", 0, s))
				train_step(&m, xb, tb, losses + step, seed, lr, s);
			kp_rt_bind(rt, &r, 0, xb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, tb, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, losses + step, sizeof(float), KP_RT_BIND_OUTPUT);
			if (value_binds) {
				kp_rt_bind_value(rt, &r, 3, &seed, sizeof seed);
				kp_rt_bind_value(rt, &r, 4, &lr, sizeof lr);
			}
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg);
	}
	checkCudaErrors(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	h = cp_dev_hash(losses, a.steps * sizeof(float), CP_HASH0);
	h = cp_mlp_hash(&m, h);
	if (rt) {
		struct kp_rt_stats st;

		kp_rt_get_stats(rt, &st);
		printf("patched_values %llu\n", (unsigned long long)st.patched_values);
	}
	cp_report(rt, &rg);
	if (a.graph_body) {
		/* seed.train on s, the last step's seed and learning rate */
		step = a.steps - 1;
		checkCudaErrors(cp_body_begin(s));
		train_step(&m, x + (size_t)(step % NB) * CP_N, t + (size_t)(step % NB) * CP_N,
			   losses + step, step_seed(0x5eedULL, step), 0.05f * powf(0.995f, (float)step), s);
		checkCudaErrors(cp_body_end("seed.train", s));
	}
	cp_result("seed_lr", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
