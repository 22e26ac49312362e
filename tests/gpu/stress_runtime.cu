// stress_runtime.cu - libkplanrt used by many host threads at once.
//
// Each of T threads owns a stream, two input buffers and an output area,
// and runs ITERS calls of a region: a chain of CHAIN elementwise kernels
// from the current input (alternating between the two, so its pointer
// changes every call and must be patched) into the call's own output slice
// (a new address every call). The region is "t<thread>" (own regions) or
// "shared" for every thread (mode shared: one label, graphs per stream).
// Then the same work runs eagerly (runtime handle NULL) on separate
// buffers, and every call's output must be bit-identical.
//
//   stress_runtime device                       print "cc 9.0 cuda 13 ..."
//   stress_runtime run PLAN [THREADS=8] [ITERS=200] [own|shared]
//
// Exit 0 when every output matches and graphs were replayed; 1 otherwise.
// Meant to run under compute-sanitizer too (stress_check.sh).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <kplan/runtime.h>

#define N 4096
#define CHAIN 12

#define CK(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) { \
		fprintf(stderr, "stress_runtime: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
			cudaGetErrorString(e_)); \
		exit(2); \
	} \
} while (0)

__global__ void step(const float *in, float *out, float a, float b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = in[i] * a + b * (float)(i & 7) - 0.25f * in[(i + 1) % n];
}

/* the region body: in -> tmp0 -> tmp1 -> ... -> out */
static void body(const float *in, float *tmp0, float *tmp1, float *out, int t, cudaStream_t s)
{
	const float *src = in;

	for (int k = 0; k < CHAIN; k++) {
		float *dst = k == CHAIN - 1 ? out : (k & 1) ? tmp1 : tmp0;

		step<<<(N + 255) / 256, 256, 0, s>>>(src, dst, 0.5f + 0.01f * k, 0.1f * (t + 1), N);
		src = dst;
	}
}

struct bufs {
	float *in[2], *tmp0, *tmp1, *out;   /* out: ITERS slices of N floats */
};

/* inputs and the output's fill go through the thread's own stream: it does
 * not wait for the legacy default stream (cudaStreamNonBlocking), so a
 * cudaMemset there could land after the first call's kernels (it did, under
 * racecheck: that call's output was the 0xff fill) */
static void alloc(bufs *b, int t, int iters, cudaStream_t s)
{
	std::vector<float> h(N);

	for (int j = 0; j < 2; j++) {
		CK(cudaMalloc(&b->in[j], N * sizeof(float)));
		for (int i = 0; i < N; i++)
			h[i] = (float)((i * 7 + t * 13 + j * 101) % 97) / 97.0f;
		CK(cudaMemcpyAsync(b->in[j], h.data(), N * sizeof(float), cudaMemcpyHostToDevice, s));
		CK(cudaStreamSynchronize(s));   /* h is refilled next */
	}
	CK(cudaMalloc(&b->tmp0, N * sizeof(float)));
	CK(cudaMalloc(&b->tmp1, N * sizeof(float)));
	CK(cudaMalloc(&b->out, (size_t)iters * N * sizeof(float)));
	CK(cudaMemsetAsync(b->out, 0xff, (size_t)iters * N * sizeof(float), s));
}

static void release(bufs *b)
{
	cudaFree(b->in[0]);
	cudaFree(b->in[1]);
	cudaFree(b->tmp0);
	cudaFree(b->tmp1);
	cudaFree(b->out);
}

/* ITERS calls of the region through rt (NULL: eager); copy outputs to host */
static void run(kp_rt *rt, const char *label, int t, int iters, std::vector<float> *host,
		std::atomic<int> *errors)
{
	cudaStream_t s;
	bufs b;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	alloc(&b, t, iters, s);
	for (int i = 0; i < iters; i++) {
		const float *in = b.in[i & 1];
		float *out = b.out + (size_t)i * N;
		kp_region r;
		int rc;

		do {
			if (kp_region_begin(rt, &r, label, 0, s))
				body(in, b.tmp0, b.tmp1, out, t, s);
			kp_rt_bind(rt, &r, 0, in, N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, out, N * sizeof(float), KP_RT_BIND_OUTPUT);
			rc = kp_region_end(rt, &r);
		} while (rc > 0);
		if (rc < 0)
			errors->fetch_add(1);
	}
	CK(cudaStreamSynchronize(s));
	host->resize((size_t)iters * N);
	CK(cudaMemcpy(host->data(), b.out, (size_t)iters * N * sizeof(float),
		      cudaMemcpyDeviceToHost));
	release(&b);
	CK(cudaStreamDestroy(s));
}

static int device(void)
{
	cudaDeviceProp p;
	int drv = 0, dev = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
		printf("no CUDA device\n");
		return 2;
	}
	cudaDriverGetVersion(&drv);
	printf("cc %d.%d cuda %d driver %d sm %d gpu %s\n", p.major, p.minor, drv / 1000, drv,
	       p.multiProcessorCount, p.name);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "device"))
		return device();
	if (argc < 3 || strcmp(argv[1], "run")) {
		fprintf(stderr, "usage: stress_runtime device | run PLAN [THREADS] [ITERS] [own|shared]"
			" [any]\n(any: under a sanitizer, results must match but calls may stay eager)\n");
		return 64;
	}
	const char *plan = argv[2];
	int threads = argc > 3 ? atoi(argv[3]) : 8;
	int iters = argc > 4 ? atoi(argv[4]) : 200;
	bool shared = argc > 5 && !strcmp(argv[5], "shared");
	bool any = argc > 6 && !strcmp(argv[6], "any");
	struct kp_rt_err err;
	struct kp_rt_stats st;
	std::vector<std::vector<float>> got(threads), want(threads);
	std::vector<std::string> labels(threads);
	std::atomic<int> errors(0);
	std::vector<std::thread> th;

	kp_rt *rt = kp_rt_open(plan, &err);
	if (!rt) {
		fprintf(stderr, "stress_runtime: %s\n", err.msg);
		return 2;
	}
	for (int t = 0; t < threads; t++)
		labels[t] = shared ? "shared" : "t" + std::to_string(t);
	for (int t = 0; t < threads; t++)
		th.emplace_back(run, rt, labels[t].c_str(), t, iters, &got[t], &errors);
	for (auto &x : th)
		x.join();
	th.clear();
	kp_rt_get_stats(rt, &st);
	/* the reference: the same calls, eager, on other buffers */
	for (int t = 0; t < threads; t++)
		th.emplace_back(run, nullptr, labels[t].c_str(), t, iters, &want[t], &errors);
	for (auto &x : th)
		x.join();

	long long mismatched = 0;
	for (int t = 0; t < threads; t++) {
		for (int i = 0; i < iters; i++) {
			if (memcmp(got[t].data() + (size_t)i * N, want[t].data() + (size_t)i * N,
				   N * sizeof(float))) {
				if (!mismatched)
					fprintf(stderr, "stress_runtime: thread %d call %d differs from eager\n",
						t, i);
				mismatched++;
			}
		}
	}
	printf("stress_runtime: threads %d iters %d mode %s calls %llu replays %llu captures %llu "
	       "eager %llu patched_nodes %llu mismatched_calls %lld errors %d\n", threads, iters,
	       shared ? "shared" : "own", (unsigned long long)st.calls,
	       (unsigned long long)st.replays, (unsigned long long)st.captures,
	       (unsigned long long)st.eager, (unsigned long long)st.patched_nodes, mismatched,
	       errors.load());
	for (int k = 0; k < KP_RT_R_COUNT; k++)
		if (st.failures[k] || st.eager_by_reason[k])
			printf("stress_runtime:   %-16s eager %llu failures %llu\n", kp_rt_reason_name(k),
			       (unsigned long long)st.eager_by_reason[k],
			       (unsigned long long)st.failures[k]);
	kp_rt_close(rt);
	/* every thread's calls after warm-up should be replays */
	bool replayed = any || st.replays >= (unsigned long long)threads * (iters / 2);
	return !mismatched && !errors.load() && replayed ? 0 : 1;
}
