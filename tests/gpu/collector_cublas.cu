// collector_cublas.cu - cuBLAS SGEMMs (cuBLAS launches through driver entry
// points) plus copies. Prints how many GEMMs it ran.
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <vector>

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 50, n = 512;
	float *a, *b, *c, alpha = 1.f, beta = 0.f;
	std::vector<float> h((size_t)n * n, 1.0f);
	cublasHandle_t handle;

	if (cudaMalloc(&a, sizeof(float) * n * n) || cudaMalloc(&b, sizeof(float) * n * n) ||
	    cudaMalloc(&c, sizeof(float) * n * n))
		return 1;
	cudaMemcpy(a, h.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice);
	cudaMemcpy(b, h.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice);
	if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS)
		return 2;
	for (int i = 0; i < iters; i++)
		cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n);
	cudaMemcpy(h.data(), c, sizeof(float) * n * n, cudaMemcpyDeviceToHost);
	cublasDestroy(handle);
	printf("gemms %d c[0]=%g\n", iters, h[0]);
	return h[0] == (float)n ? 0 : 3;
}
