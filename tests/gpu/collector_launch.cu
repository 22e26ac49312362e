// collector_launch.cu - N one-block kernels launched with <<<>>> (nvcc's
// default static cudart). Used by tests/gpu/collector_check.sh for the
// exactness check and, with REPEATS > 0, as the launch-overhead benchmark:
// it times REPEATS loops of N launches on the host and prints the median
// host time per launch.
//
//   collector_launch N [REPEATS] [window]
//
// window: N launches before cudaProfilerStart, N between it and
// cudaProfilerStop, N after (for `kplan record --profiler-api`); with
// REPEATS > 0 the timed loops alternate outside and inside such a window
// and both medians are printed: what tracing adds, in one process.
#include <cuda_profiler_api.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
	bool window = argc > 3 && !strcmp(argv[3], "window");
	int *d = nullptr;

	CK(cudaMalloc(&d, sizeof(int)));
	CK(cudaDeviceSynchronize());
	if (repeats <= 0 && window) {
		for (int part = 0; part < 3; part++) {
			if (part == 1)
				CK(cudaProfilerStart());
			for (int i = 0; i < n; i++)
				tiny<<<1, 32>>>(d, i);
			CK(cudaGetLastError());
			CK(cudaDeviceSynchronize());
			if (part == 1)
				CK(cudaProfilerStop());
		}
		CK(cudaFree(d));
		printf("launched %d, %d inside the window\n", 3 * n, n);
		return 0;
	}
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
	std::vector<double> per, in;
	for (int r = 0; r < repeats * (window ? 2 : 1); r++) {
		bool inside = window && r % 2;

		if (inside)
			CK(cudaProfilerStart());
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < n; i++)
			tiny<<<1, 32>>>(d, i);
		auto t1 = std::chrono::steady_clock::now();
		CK(cudaDeviceSynchronize());
		if (inside)
			CK(cudaProfilerStop());
		(inside ? in : per).push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
	}
	std::sort(per.begin(), per.end());
	printf("launches %d repeats %d median_ns_per_launch %.1f min %.1f max %.1f\n", n, repeats,
	       per[per.size() / 2], per.front(), per.back());
	if (window) {
		std::sort(in.begin(), in.end());
		printf("inside the window: median_ns_per_launch_in %.1f min %.1f max %.1f\n",
		       in[in.size() / 2], in.front(), in.back());
	}
	CK(cudaFree(d));
	return 0;
}
