// collector_threads.cu - T threads, each with S streams, each stream gets K
// kernels, an async memset and copy, an event record + stream wait + event
// sync. "exit" as 3rd argument: one worker thread calls exit(5) after its work
// (the collector must still flush from that thread).
//
//   collector_threads T S K [exit]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

__global__ void work(float *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = p[i] * 0.5f + 1.0f;
}

static void worker(int id, int streams, int k, bool do_exit)
{
	const int n = 1 << 14;
	std::vector<cudaStream_t> s(streams);
	std::vector<float *> buf(streams);
	float *host;
	cudaEvent_t ev;

	cudaMallocHost(&host, n * sizeof(float));
	cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	for (int j = 0; j < streams; j++) {
		cudaStreamCreateWithFlags(&s[j], cudaStreamNonBlocking);
		cudaMalloc(&buf[j], n * sizeof(float));
		cudaMemsetAsync(buf[j], 0, n * sizeof(float), s[j]);
	}
	for (int i = 0; i < k; i++) {
		for (int j = 0; j < streams; j++)
			work<<<(n + 255) / 256, 256, 0, s[j]>>>(buf[j], n);
	}
	for (int j = 0; j < streams; j++) {
		cudaMemcpyAsync(host, buf[j], n * sizeof(float), cudaMemcpyDeviceToHost, s[j]);
		cudaEventRecord(ev, s[j]);
		cudaStreamWaitEvent(s[(j + 1) % streams], ev, 0);
	}
	cudaEventSynchronize(ev);
	for (int j = 0; j < streams; j++)
		cudaStreamSynchronize(s[j]);
	if (do_exit) {
		printf("thread %d exits the process\n", id);
		fflush(stdout);
		exit(5);
	}
	for (int j = 0; j < streams; j++) {
		cudaFree(buf[j]);
		cudaStreamDestroy(s[j]);
	}
	cudaEventDestroy(ev);
	cudaFreeHost(host);
}

int main(int argc, char **argv)
{
	int t = argc > 1 ? atoi(argv[1]) : 4, s = argc > 2 ? atoi(argv[2]) : 2,
	    k = argc > 3 ? atoi(argv[3]) : 100;
	bool do_exit = argc > 4 && !strcmp(argv[4], "exit");
	std::vector<std::thread> th;

	cudaFree(0);
	for (int i = 0; i < t; i++)
		th.emplace_back(worker, i, s, k, do_exit && i == t - 1);
	for (auto &x : th)
		x.join();
	cudaDeviceSynchronize();
	printf("threads %d streams %d kernels %d\n", t, s, t * s * k);
	return 0;
}
