/*
 * excommon.h - shared by the example workloads: checked CUDA calls, the
 * command line (MODE [PLAN] [--steps N]), timing, the deterministic init and
 * block sum, and the result line that tests/gpu/runtime_check.sh compares
 * between modes.
 *
 *   MODE  eager    plain launches, no runtime
 *         runtime  the same loop inside kp_region_begin/end, plan from PLAN
 *         graph    hand-written cudaStreamBeginCapture/cudaGraphLaunch
 *         device   print "cc MAJOR.MINOR cuda MAJOR gpu NAME" and exit
 *
 * Output, last line: "RESULT <example> <mode> steps <n> us_per_step <t>
 * hash <fnv64 of the outputs>"; equal hashes mean bit-identical outputs.
 * Graph mode prints a "BODY" line before it (ex_body).
 */
#ifndef KP_EXCOMMON_H
#define KP_EXCOMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <kplan/runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
	exit(2); } } while (0)

enum ex_mode { EX_EAGER, EX_RUNTIME, EX_GRAPH };

struct ex_args {
	int mode;
	const char *plan;
	int steps;
};

static inline int64_t ex_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t ex_fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = (const unsigned char *)p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Hash n bytes of device memory. */
static inline uint64_t ex_dev_hash(const void *d, size_t n, uint64_t h)
{
	void *buf = malloc(n);

	CK(cudaMemcpy(buf, d, n, cudaMemcpyDeviceToHost));
	h = ex_fnv(buf, n, h);
	free(buf);
	return h;
}

static inline void ex_usage(const char *prog)
{
	fprintf(stderr, "usage: %s eager|runtime|graph|device [PLAN] [--steps N]\n", prog);
	exit(64);
}

static inline void ex_parse(int argc, char **argv, struct ex_args *a, int def_steps)
{
	int i;

	a->plan = NULL;
	a->steps = def_steps;
	if (argc < 2)
		ex_usage(argv[0]);
	if (!strcmp(argv[1], "device")) {
		struct cudaDeviceProp p;
		int d, v;

		CK(cudaGetDevice(&d));
		CK(cudaGetDeviceProperties(&p, d));
		CK(cudaDriverGetVersion(&v));
		printf("cc %d.%d cuda %d driver %d sm %d gpu %s\n", p.major, p.minor, v / 1000,
		       v, p.multiProcessorCount, p.name);
		exit(0);
	}
	if (!strcmp(argv[1], "eager"))
		a->mode = EX_EAGER;
	else if (!strcmp(argv[1], "runtime"))
		a->mode = EX_RUNTIME;
	else if (!strcmp(argv[1], "graph"))
		a->mode = EX_GRAPH;
	else
		ex_usage(argv[0]);
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			a->steps = atoi(argv[++i]);
		else if (argv[i][0] != '-' && !a->plan)
			a->plan = argv[i];
		else
			ex_usage(argv[0]);
	}
}

static inline kp_rt *ex_open_rt(const struct ex_args *a)
{
	struct kp_rt_err err;
	kp_rt *rt;

	if (a->mode != EX_RUNTIME)
		return NULL;
	rt = kp_rt_open(a->plan, &err);
	if (!rt) {
		fprintf(stderr, "kp_rt_open: %s\n", err.msg);
		exit(2);
	}
	return rt;
}

static const char *const ex_mode_name[] = { "eager", "runtime", "graph" };

static inline void ex_result(const char *ex, const struct ex_args *a, int64_t ns, uint64_t h)
{
	printf("RESULT %s %s steps %d us_per_step %.3f hash %016llx\n", ex,
	       ex_mode_name[a->mode], a->steps, ns / 1e3 / a->steps, (unsigned long long)h);
}

/*
 * Replay period of an executable graph in microseconds: back-to-back
 * launches timed with events, the fastest of 9 batches of 30 (what
 * bench/cost_corpus.py measures for the PyTorch workloads: a replay's period
 * is fixed, what varies is the machine). The graph's writes happen 273 more
 * times: call it after the outputs are hashed.
 */
static inline double ex_replay_us(cudaGraphExec_t x, cudaStream_t s)
{
	cudaEvent_t e0, e1;
	double best = 1e30;
	float ms;
	int b, i;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (i = 0; i < 3; i++)
		CK(cudaGraphLaunch(x, s));
	for (b = 0; b < 9; b++) {
		CK(cudaEventRecord(e0, s));
		for (i = 0; i < 30; i++)
			CK(cudaGraphLaunch(x, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (ms * 1e3 / 30 < best)
			best = ms * 1e3 / 30;
	}
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	return best;
}

/* The graph-mode line beside RESULT: the hand-written graph's replay period
 * per step ("BODY <example> replay_us_per_step <t>"), the step's capturable
 * body alone, without what the example does around each launch. */
static inline void ex_body(const char *ex, double us_per_step)
{
	printf("BODY %s replay_us_per_step %.3f\n", ex, us_per_step);
}

/* deterministic pseudo-random init: value in [-scale, scale) from an index */
__device__ __forceinline__ float ex_rand(uint32_t i, uint32_t seed, float scale)
{
	uint32_t x = i * 2654435761u ^ seed * 0x9e3779b9u;

	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return ((float)(x >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
}

/*
 * The sum of each thread's v over the block into red[0], by a fixed tree (the
 * same order on every run, so outputs hash the same in every mode);
 * blockDim.x a power of two, red[] at least blockDim.x long. Ends with a
 * __syncthreads(): every thread may read red[0].
 */
__device__ __forceinline__ void ex_block_sum(float *red, float v)
{
	int k;

	red[threadIdx.x] = v;
	__syncthreads();
	for (k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
}

__global__ void ex_init_f32(float *p, size_t n, uint32_t seed, float scale, float bias)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = bias + ex_rand((uint32_t)i, seed, scale);
}

static inline void ex_fill(float *p, size_t n, uint32_t seed, float scale, float bias)
{
	ex_init_f32<<<512, 256>>>(p, n, seed, scale, bias);
	CK(cudaGetLastError());
}

#endif
