/*
 * fusion_ew.cu - a pure elementwise chain for tests/gpu/fusion_check.sh:
 * region "ew.chain" = copy_f32 -> bias_residual -> bias_gelu -> copy_f32
 * (the examples/mlp kernels, same names and signatures, so the shipped
 * catalog fusion/catalog/examples.kpcat describes them). Fused, the four
 * become one elementwise kernel whose output must be bit-identical to the
 * eager chain; its input and output move every step (bound, patched).
 *
 *   fusion_ew eager|runtime [PLAN] [--steps N]   (excommon.h conventions)
 */
#include "../../examples/excommon.h"

#define ROWS 64
#define D 1024
#define N (ROWS * D)
#define NIN 16

__global__ void bias_gelu(float *u, const float *b, int n, int h)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float v = u[i] + b[i % h];

		u[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
	}
}

__global__ void bias_residual(float *x, const float *t, const float *b, int n, int d)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] += t[i] + b[i % d];
}

__global__ void copy_f32(float *dst, const float *src, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		dst[i] = src[i];
}

__global__ void fill(float *p, int n, uint32_t seed, float scale)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] = ex_rand((uint32_t)i, seed, scale);
}

static void chain(cudaStream_t s, float *x, const float *in, const float *t, const float *b1,
		  const float *b2, float *out)
{
	copy_f32<<<N / 256, 256, 0, s>>>(x, in, N);
	bias_residual<<<N / 256, 256, 0, s>>>(x, t, b1, N, D);
	bias_gelu<<<N / 256, 256, 0, s>>>(x, b2, N, D);
	copy_f32<<<N / 256, 256, 0, s>>>(out, x, N);
}

int main(int argc, char **argv)
{
	struct ex_args a;
	cudaStream_t s;
	float *x, *t, *b1, *b2, *inputs, *outs;
	kp_rt *rt;
	int64_t t0, t1;
	int k;

	ex_parse(argc, argv, &a, 2000);
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&x, N * sizeof(float)));
	CK(cudaMalloc(&t, N * sizeof(float)));
	CK(cudaMalloc(&b1, D * sizeof(float)));
	CK(cudaMalloc(&b2, D * sizeof(float)));
	CK(cudaMalloc(&inputs, (size_t)NIN * N * sizeof(float)));
	CK(cudaMalloc(&outs, (size_t)a.steps * N * sizeof(float)));
	fill<<<N / 256, 256>>>(t, N, 1, 1.0f);
	fill<<<D / 256, 256>>>(b1, D, 2, 0.5f);
	fill<<<D / 256, 256>>>(b2, D, 3, 0.5f);
	fill<<<NIN * N / 256, 256>>>(inputs, NIN * N, 4, 2.0f);
	CK(cudaDeviceSynchronize());
	rt = ex_open_rt(&a);
	t0 = ex_now_ns();
	for (k = 0; k < a.steps; k++) {
		const float *in = inputs + (size_t)(k % NIN) * N;
		float *out = outs + (size_t)k * N;

		if (a.mode == EX_RUNTIME) {
			kp_region r;

			do {
				if (kp_region_begin(rt, &r, "ew.chain", 0, s))
					chain(s, x, in, t, b1, b2, out);
				kp_rt_bind(rt, &r, 0, in, N * sizeof(float), 0);
				kp_rt_bind(rt, &r, 1, out, N * sizeof(float), KP_RT_BIND_OUTPUT);
			} while (kp_region_end(rt, &r) > 0);
		} else {
			chain(s, x, in, t, b1, b2, out);
		}
	}
	CK(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	CK(cudaGetLastError());
	ex_result("fusion_ew", &a, t1 - t0, ex_dev_hash(outs, (size_t)a.steps * N * sizeof(float),
							0xcbf29ce484222325ULL));
	kp_rt_close(rt);
	return 0;
}
