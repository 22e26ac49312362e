// collector_launch.cu - N one-block kernels launched with <<<>>> (nvcc's
// default static cudart). Used by tests/gpu/collector_check.sh for the
// exactness check and, with REPEATS > 0, as the launch-overhead benchmark:
// it times REPEATS loops of N launches on the host and prints the median
// host time per launch.
//
//   collector_launch N [REPEATS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void tiny(int *p, int v)
{
	if (threadIdx.x == 0 && p)
		p[0] = v;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	int repeats = argc > 2 ? atoi(argv[2]) : 0;
	int *d = nullptr;

	CK(cudaMalloc(&d, sizeof(int)));
	CK(cudaDeviceSynchronize());
	if (repeats <= 0) {
		for (int i = 0; i < n; i++)
			tiny<<<1, 32>>>(d, i);
		CK(cudaGetLastError());
		CK(cudaDeviceSynchronize());
		CK(cudaFree(d));
		printf("launched %d\n", n);
		return 0;
	}
	/* warm-up, then timed loops */
	for (int i = 0; i < 1000; i++)
		tiny<<<1, 32>>>(d, i);
	CK(cudaDeviceSynchronize());
	std::vector<double> per;
	for (int r = 0; r < repeats; r++) {
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < n; i++)
			tiny<<<1, 32>>>(d, i);
		auto t1 = std::chrono::steady_clock::now();
		CK(cudaDeviceSynchronize());
		per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
	}
	std::sort(per.begin(), per.end());
	printf("launches %d repeats %d median_ns_per_launch %.1f min %.1f max %.1f\n", n, repeats,
	       per[per.size() / 2], per.front(), per.back());
	CK(cudaFree(d));
	return 0;
}
