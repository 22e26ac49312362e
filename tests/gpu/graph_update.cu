/*
 * graph_update.cu - what does an executable-graph update cost the launches
 * after it? A chain of N tiny dependent kernels (decode-like: every 26th is
 * an "append" whose destination pointer moves every step) is replayed ITER
 * times back to back (GPU-bound, the way a decode loop runs) in variants:
 *
 *   base            no update
 *   setK            K append nodes updated before each launch, new pointers
 *                   (cudaGraphExecKernelNodeSetParams, runtime API)
 *   same12          12 nodes updated with unchanged parameters
 *   once12          12 nodes updated once before the loop, never again
 *   ..._up          + cudaGraphUpload on the launch stream after updating
 *   ..._upside      + cudaGraphUpload on a second stream after updating
 *   ..._x2          two execs of the graph alternate
 *   ..._af          instantiated with AutoFreeOnLaunch
 *   ..._drvfunc     driver cuGraphExecKernelNodeSetParams, CUfunction handle
 *   ..._drvkern     driver, the CUkernel handle the node was captured with
 *   ..._sync        a stream sync after every launch (latency, not throughput)
 *
 * Prints "variant N us_per_iter"; also checks that the last iteration's
 * appends landed where the last update pointed (else "WRONG").
 *
 *   graph_update [ITER]
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
	exit(2); } } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { \
	fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x, (int)e_); exit(2); } } while (0)

#define MAXN 1100
#define SLOT 128          /* floats per append */
#define NSLOTS 4096

__global__ void tick(float *buf, int i)
{
	buf[threadIdx.x] = buf[threadIdx.x] * 0.5f + (float)i;
}

__global__ void put(float *slot, const float *buf)
{
	slot[threadIdx.x] = buf[threadIdx.x];
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

struct bench {
	int n, n_put;
	cudaGraph_t g;
	cudaGraphNode_t put_node[MAXN];
	float *buf, *slots;
};

static void build(struct bench *b, int n, cudaStream_t s)
{
	cudaGraphNode_t nodes[MAXN + 8];
	size_t nn = MAXN + 8, i;
	int k = 0;

	b->n = n;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	for (i = 0; i < (size_t)n; i++) {
		if (i % 26 == 4)
			put<<<1, SLOT, 0, s>>>(b->slots, b->buf);
		else
			tick<<<1, SLOT, 0, s>>>(b->buf, (int)i);
	}
	CK(cudaStreamEndCapture(s, &b->g));
	CK(cudaGraphGetNodes(b->g, nodes, &nn));
	for (i = 0; i < nn; i++) {
		cudaKernelNodeParams p;

		CK(cudaGraphKernelNodeGetParams(nodes[i], &p));
		if (p.func == (void *)put)
			b->put_node[k++] = nodes[i];
	}
	if (k == 0) {   /* func not mapped back: by creation order */
		for (i = 0; i < nn; i++)
			if (i % 26 == 4)
				b->put_node[k++] = nodes[i];
	}
	b->n_put = k;
}

enum { V_RT, V_DRV_FUNC, V_DRV_KERN };

/* one variant: returns us per iteration; *ok = last appends in place */
static double run(struct bench *b, cudaStream_t s, cudaStream_t side, int iters, int k_set,
		  int change, int once, int upload, int two, int autofree, int api, int sync,
		  int *ok, double *set_us, double *launch_us)
{
	cudaGraphExec_t x[2] = { 0, 0 };
	cudaKernelNodeParams p;
	CUDA_KERNEL_NODE_PARAMS dp[MAXN];
	float *dst, *src;
	void *args[2] = { &dst, &src };
	int it, j, cur = 0, last_slot = 0;
	unsigned long long fl = autofree ? cudaGraphInstantiateFlagAutoFreeOnLaunch : 0;
	double t0 = 0, ts = 0, tl = 0, a;
	float host[SLOT], ref[SLOT];

	CK(cudaGraphInstantiateWithFlags(&x[0], b->g, fl));
	if (two)
		CK(cudaGraphInstantiateWithFlags(&x[1], b->g, fl));
	memset(&p, 0, sizeof(p));
	p.func = (void *)put;
	p.gridDim = dim3(1);
	p.blockDim = dim3(SLOT);
	p.kernelParams = args;
	src = b->buf;
	for (j = 0; j < b->n_put && api != V_RT; j++) {
		CD(cuGraphKernelNodeGetParams((CUgraphNode)b->put_node[j], &dp[j]));
		if (api == V_DRV_FUNC && !dp[j].func) {
			CD(cuKernelGetFunction(&dp[j].func, dp[j].kern));
		} else if (api == V_DRV_KERN && dp[j].kern) {
			dp[j].func = NULL;
		}
		dp[j].kernelParams = args;
		dp[j].extra = NULL;
	}
	for (it = -20; it < iters; it++) {
		int upd = once ? it == -20 : k_set > 0;

		if (it == 0) {
			CK(cudaStreamSynchronize(s));
			t0 = now_us();
		}
		if (two)
			cur = 1 - cur;
		a = now_us();
		if (upd) {
			int sl = change ? (it + 40) % NSLOTS : 1;

			for (j = 0; j < (once ? b->n_put : k_set) && j < b->n_put; j++) {
				dst = b->slots + (size_t)((sl + j * 97) % NSLOTS) * SLOT;
				if (api == V_RT)
					CK(cudaGraphExecKernelNodeSetParams(x[cur], b->put_node[j], &p));
				else
					CD(cuGraphExecKernelNodeSetParams((CUgraphExec)x[cur],
									 (CUgraphNode)b->put_node[j], &dp[j]));
			}
			last_slot = sl;
			if (upload)
				CK(cudaGraphUpload(x[cur], upload == 2 ? side : s));
		}
		if (it >= 0)
			ts += now_us() - a;
		a = now_us();
		CK(cudaGraphLaunch(x[cur], s));
		if (it >= 0)
			tl += now_us() - a;
		if (sync)
			CK(cudaStreamSynchronize(s));
	}
	CK(cudaStreamSynchronize(s));
	t0 = (now_us() - t0) / iters;
	*set_us = ts / iters;
	*launch_us = tl / iters;
	/* the first put node's last destination holds buf's value at that
	 * point; just check it was written this run (marker cleared first) */
	CK(cudaMemcpy(host, b->slots + (size_t)(last_slot % NSLOTS) * SLOT, sizeof(host),
		      cudaMemcpyDeviceToHost));
	memset(ref, 0xff, sizeof(ref));
	*ok = k_set == 0 || memcmp(host, ref, sizeof(host)) != 0;
	CK(cudaMemset(b->slots, 0xff, (size_t)NSLOTS * SLOT * sizeof(float)));
	CK(cudaDeviceSynchronize());   /* the streams do not wait for the legacy one */
	CK(cudaGraphExecDestroy(x[0]));
	if (x[1])
		CK(cudaGraphExecDestroy(x[1]));
	return t0;
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 400, ok, i, ns[3] = { 316, 100, 1000 }, ni;
	cudaStream_t s, side;
	static struct bench b[3];
	struct { const char *name; int k, change, once, up, two, af, api, sync; } v[] = {
		{ "base", 0, 0, 0, 0, 0, 0, V_RT, 0 },
		{ "set12", 12, 1, 0, 0, 0, 0, V_RT, 0 },
		{ "set1", 1, 1, 0, 0, 0, 0, V_RT, 0 },
		{ "same12", 12, 0, 0, 0, 0, 0, V_RT, 0 },
		{ "once12", 12, 1, 1, 0, 0, 0, V_RT, 0 },
		{ "set12_up", 12, 1, 0, 1, 0, 0, V_RT, 0 },
		{ "set12_upside", 12, 1, 0, 2, 0, 0, V_RT, 0 },
		{ "set12_x2", 12, 1, 0, 0, 1, 0, V_RT, 0 },
		{ "set12_x2_upside", 12, 1, 0, 2, 1, 0, V_RT, 0 },
		{ "base_af", 0, 0, 0, 0, 0, 1, V_RT, 0 },
		{ "set12_af", 12, 1, 0, 0, 0, 1, V_RT, 0 },
		{ "set12_drvfunc", 12, 1, 0, 0, 0, 0, V_DRV_FUNC, 0 },
		{ "set12_drvkern", 12, 1, 0, 0, 0, 0, V_DRV_KERN, 0 },
		{ "base_sync", 0, 0, 0, 0, 0, 0, V_RT, 1 },
		{ "set12_sync", 12, 1, 0, 0, 0, 0, V_RT, 1 },
	};

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	for (ni = 0; ni < 3; ni++) {
		CK(cudaMalloc(&b[ni].buf, SLOT * sizeof(float)));
		CK(cudaMemset(b[ni].buf, 0, SLOT * sizeof(float)));
		CK(cudaMalloc(&b[ni].slots, (size_t)NSLOTS * SLOT * sizeof(float)));
		CK(cudaMemset(b[ni].slots, 0xff, (size_t)NSLOTS * SLOT * sizeof(float)));
		CK(cudaDeviceSynchronize());   /* s is non-blocking: the fills first */
		build(&b[ni], ns[ni], s);
	}
	printf("%-18s %5s %5s %10s %10s %10s\n", "variant", "nodes", "puts", "us/iter",
	       "host_set", "host_launch");
	for (ni = 0; ni < 3; ni++) {
		for (i = 0; i < (int)(sizeof(v) / sizeof(v[0])); i++) {
			double us, su, lu;

			if (ni > 0 && strcmp(v[i].name, "base") && strcmp(v[i].name, "set12") &&
			    strcmp(v[i].name, "set12_x2_upside") && strcmp(v[i].name, "set12_upside"))
				continue;
			us = run(&b[ni], s, side, iters, v[i].k, v[i].change, v[i].once, v[i].up,
				 v[i].two, v[i].af, v[i].api, v[i].sync, &ok, &su, &lu);
			printf("%-18s %5d %5d %10.2f %10.2f %10.2f%s\n", v[i].name, b[ni].n,
			       b[ni].n_put, us, su, lu, ok ? "" : "  WRONG");
		}
	}
	return 0;
}
