// stress_collector.cu - load for the collector: T host threads, each with S
// streams of its own, launch N kernels in total (round-robin over their
// streams), as fast as the host can. Every kernel adds 1 to a device
// counter, so the program itself proves how many kernels ran; the check
// script (stress_check.sh) compares that with the kernel rows the collector
// wrote and the dropped records it reported.
//
//   stress_collector [THREADS=16] [STREAMS=4] [KERNELS=1000000]
//
// Prints one line: "stress: threads T streams S launched N counted M
// wall_s W launches_per_s R vmhwm_kb K" (K: peak RSS, collector included)
// and exits 0 when M == N.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CK(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) { \
		fprintf(stderr, "stress: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
			cudaGetErrorString(e_)); \
		exit(2); \
	} \
} while (0)

__global__ void tick(unsigned long long *count, int *slot, int id)
{
	if (threadIdx.x == 0) {
		atomicAdd(count, 1ULL);
		slot[id & 1023] = id;   // a little memory traffic, in bounds
	}
}

static void worker(int t, int streams, long long n, unsigned long long *count, int *slot,
		   std::atomic<int> *failed)
{
	std::vector<cudaStream_t> s(streams);

	for (int j = 0; j < streams; j++)
		CK(cudaStreamCreateWithFlags(&s[j], cudaStreamNonBlocking));
	for (long long i = 0; i < n; i++) {
		tick<<<1, 32, 0, s[i % streams]>>>(count, slot, (int)(t * 131 + i));
		if ((i & 4095) == 0 && cudaPeekAtLastError() != cudaSuccess) {
			failed->store(1);
			break;
		}
	}
	for (int j = 0; j < streams; j++) {
		CK(cudaStreamSynchronize(s[j]));
		CK(cudaStreamDestroy(s[j]));
	}
}

/* peak resident memory of this process (the collector runs inside it), kB */
static long vm_hwm_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 16;
	int streams = argc > 2 ? atoi(argv[2]) : 4;
	long long total = argc > 3 ? atoll(argv[3]) : 1000000;
	unsigned long long *count, host = 0;
	int *slot;
	std::atomic<int> failed(0);
	std::vector<std::thread> th;

	if (threads < 1 || streams < 1 || total < threads) {
		fprintf(stderr, "usage: stress_collector [THREADS] [STREAMS] [KERNELS >= THREADS]\n");
		return 64;
	}
	CK(cudaMalloc(&count, sizeof(*count)));
	CK(cudaMalloc(&slot, 1024 * sizeof(int)));
	CK(cudaMemset(count, 0, sizeof(*count)));
	CK(cudaDeviceSynchronize());
	auto t0 = std::chrono::steady_clock::now();
	for (int t = 0; t < threads; t++) {
		long long n = total / threads + (t < total % threads ? 1 : 0);

		th.emplace_back(worker, t, streams, n, count, slot, &failed);
	}
	for (auto &x : th)
		x.join();
	CK(cudaDeviceSynchronize());
	double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	CK(cudaMemcpy(&host, count, sizeof(host), cudaMemcpyDeviceToHost));
	printf("stress: threads %d streams %d launched %lld counted %llu wall_s %.3f "
	       "launches_per_s %.0f vmhwm_kb %ld\n", threads, streams, total, host, wall, total / wall,
	       vm_hwm_kb());
	CK(cudaFree(count));
	CK(cudaFree(slot));
	return !failed.load() && host == (unsigned long long)total ? 0 : 1;
}
