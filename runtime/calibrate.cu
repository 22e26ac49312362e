/*
 * calibrate.cu - kplan-calibrate: measure this GPU's launch-cost constants
 * (the quantities of analyzer/cost.h, by their stable names) and print them
 * for `kplan calibrate`, which stores them in kp_calibration:
 *
 *   gpu NAME
 *   driver VERSION
 *   QUANTITY VALUE N_SAMPLES       (VALUE in ns, bytes or bytes/ns)
 *
 * Each quantity is the median of REPS repeats, each repeat an average over a
 * batch of operations (N_SAMPLES = REPS). Runs in about a second.
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include <cuda_runtime.h>

#define REPS 9
#define BIG 1000
#define SMALL 10

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "kplan-calibrate: %s: %s\n", #x, cudaGetErrorString(e_)); \
	exit(2); } } while (0)

__global__ void empty_kernel(int *p) { if (p && threadIdx.x == 12345) *p = 0; }

__global__ void spin_kernel(long long ns, unsigned long long *dur)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while ((long long)(t - t0) < ns);
	if (dur)
		*dur = t - t0;
}

__global__ void copy_kernel(const float4 *a, float4 *b, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t)gridDim.x * blockDim.x)
		b[i] = a[i];
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

static cudaStream_t s;

/* capture n empty kernels (or n memsets) into a graph */
static cudaGraph_t capture(int n, int memset_nodes, void *buf)
{
	cudaGraph_t g;
	int i;

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	for (i = 0; i < n; i++) {
		if (memset_nodes)
			CK(cudaMemsetAsync(buf, 0, 256, s));
		else
			empty_kernel<<<1, 32, 0, s>>>(NULL);
	}
	CK(cudaStreamEndCapture(s, &g));
	return g;
}

static cudaGraphExec_t inst(cudaGraph_t g)
{
	cudaGraphExec_t x;

	CK(cudaGraphInstantiate(&x, g, 0));
	return x;
}

/* device time of one launch of x, from events (median) */
static double graph_device_ns(cudaGraphExec_t x)
{
	std::vector<double> v;
	cudaEvent_t a, b;
	float ms;
	int r;

	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaGraphLaunch(x, s));    /* upload / warm */
	CK(cudaStreamSynchronize(s));
	for (r = 0; r < REPS; r++) {
		CK(cudaEventRecord(a, s));
		CK(cudaGraphLaunch(x, s));
		CK(cudaEventRecord(b, s));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		v.push_back(ms * 1e6);
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return median(v);
}

/* host time of cudaGraphLaunch(x), the queue drained before each call */
static double graph_launch_host_ns(cudaGraphExec_t x)
{
	std::vector<double> v;
	int r;

	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
	for (r = 0; r < REPS * 3; r++) {
		double t0 = now_ns();

		CK(cudaGraphLaunch(x, s));
		v.push_back(now_ns() - t0);
		CK(cudaStreamSynchronize(s));
	}
	return median(v);
}

static void out(const char *q, double v)
{
	printf("%s %.1f %d\n", q, v, REPS);
}

/* launch_host_ns: host time per eager launch (queue drained per batch) */
static void measure_launch_host(void)
{
	std::vector<double> v;
	int r, i;

	for (i = 0; i < 100; i++)
		empty_kernel<<<1, 32, 0, s>>>(NULL);
	CK(cudaStreamSynchronize(s));
	for (r = 0; r < REPS; r++) {
		double t0 = now_ns();

		for (i = 0; i < 200; i++)
			empty_kernel<<<1, 32, 0, s>>>(NULL);
		v.push_back((now_ns() - t0) / 200);
		CK(cudaStreamSynchronize(s));
	}
	out("launch_host_ns", median(v));
}

/* eager_gpu_gap_ns: device period of back-to-back eager kernels with
 * the queue full (a spin kernel holds the GPU while they are queued) */
static void measure_eager_gap(void)
{
	std::vector<double> v;
	int r, i;

	for (r = 0; r < REPS; r++) {
		cudaEvent_t a, b;
		float ms;

		CK(cudaEventCreate(&a));
		CK(cudaEventCreate(&b));
		spin_kernel<<<1, 1, 0, s>>>(2000000, NULL);
		CK(cudaEventRecord(a, s));
		for (i = 0; i < 500; i++)
			empty_kernel<<<1, 32, 0, s>>>(NULL);
		CK(cudaEventRecord(b, s));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		v.push_back(ms * 1e6 / 500);
		cudaEventDestroy(a);
		cudaEventDestroy(b);
	}
	out("eager_gpu_gap_ns", median(v));
}

/* capture_ns, instantiate_ns, exec_update_ns, per node */
static void measure_graph_build(void *buf)
{
	std::vector<double> cap, ins, upd;
	int r;

	for (r = 0; r < REPS; r++) {
		cudaGraph_t g, g2;
		cudaGraphExec_t x;
		cudaGraphExecUpdateResultInfo info;
		double t0 = now_ns();

		g = capture(BIG, 0, buf);
		cap.push_back((now_ns() - t0) / BIG);
		t0 = now_ns();
		x = inst(g);
		ins.push_back((now_ns() - t0) / BIG);
		g2 = capture(BIG, 0, buf);
		t0 = now_ns();
		CK(cudaGraphExecUpdate(x, g2, &info));
		upd.push_back((now_ns() - t0) / BIG);
		cudaGraphExecDestroy(x);
		cudaGraphDestroy(g);
		cudaGraphDestroy(g2);
	}
	out("capture_ns", median(cap));
	out("instantiate_ns", median(ins));
	out("exec_update_ns", median(upd));
}

/* set_params_ns: cudaGraphExecKernelNodeSetParams per node */
static void measure_set_params(void *buf)
{
	cudaGraph_t g = capture(BIG, 0, buf);
	cudaGraphExec_t x = inst(g);
	std::vector<cudaGraphNode_t> nodes(BIG);
	std::vector<cudaKernelNodeParams> kp(BIG);
	std::vector<double> v;
	size_t n = BIG;
	int *p = (int *)buf;
	void *args[1] = { &p };
	int r, i;

	CK(cudaGraphGetNodes(g, nodes.data(), &n));
	for (i = 0; i < (int)n; i++) {
		CK(cudaGraphKernelNodeGetParams(nodes[i], &kp[i]));
		kp[i].kernelParams = args;
		kp[i].extra = NULL;
	}
	for (r = 0; r < REPS; r++) {
		double t0 = now_ns();

		for (i = 0; i < (int)n; i++)
			CK(cudaGraphExecKernelNodeSetParams(x, nodes[i], &kp[i]));
		v.push_back((now_ns() - t0) / n);
	}
	out("set_params_ns", median(v));
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
}

/* graph launch host cost = base + per node; graph node device cost */
static void measure_graph_launch(void *buf)
{
	cudaGraph_t gb = capture(BIG, 0, buf), gs = capture(SMALL, 0, buf);
	cudaGraph_t mb = capture(BIG, 1, buf), ms = capture(SMALL, 1, buf);
	cudaGraphExec_t xb = inst(gb), xs = inst(gs), yb = inst(mb), ys = inst(ms);
	double hb = graph_launch_host_ns(xb), hs = graph_launch_host_ns(xs);
	double db = graph_device_ns(xb), ds = graph_device_ns(xs);
	double node = (hb - hs) / (BIG - SMALL);

	out("graph_launch_node_ns", node);
	out("graph_launch_base_ns", hs - SMALL * node);
	out("graph_node_ns", (db - ds) / (BIG - SMALL));
	out("graph_memop_node_ns",
	    (graph_device_ns(yb) - graph_device_ns(ys)) / (BIG - SMALL));
	cudaGraphExecDestroy(xb);
	cudaGraphExecDestroy(xs);
	cudaGraphExecDestroy(yb);
	cudaGraphExecDestroy(ys);
	cudaGraphDestroy(gb);
	cudaGraphDestroy(gs);
	cudaGraphDestroy(mb);
	cudaGraphDestroy(ms);
}

/* graph_dep_gap_ns: gap between dependent nodes whose kernels are long */
static void measure_dep_gap(void)
{
	unsigned long long *dur, hdur;
	cudaGraph_t g[2];
	cudaGraphExec_t x[2];
	int i, k, cnt[2] = { 10, 50 };
	double t[2];

	CK(cudaMalloc(&dur, sizeof(*dur)));
	for (k = 0; k < 2; k++) {
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		for (i = 0; i < cnt[k]; i++)
			spin_kernel<<<1, 1, 0, s>>>(10000, dur);
		CK(cudaStreamEndCapture(s, &g[k]));
		x[k] = inst(g[k]);
		t[k] = graph_device_ns(x[k]);
	}
	CK(cudaMemcpy(&hdur, dur, sizeof(hdur), cudaMemcpyDeviceToHost));
	out("graph_dep_gap_ns", (t[1] - t[0]) / (cnt[1] - cnt[0]) - (double)hdur);
	for (k = 0; k < 2; k++) {
		cudaGraphExecDestroy(x[k]);
		cudaGraphDestroy(g[k]);
	}
	cudaFree(dur);
}

/* graph_node_bytes / graph_base_bytes: device memory of executable graphs */
static void measure_graph_memory(void *buf)
{
	size_t f0, f1, f2, tot;
	std::vector<cudaGraphExec_t> xs;
	cudaGraph_t gb = capture(BIG, 0, buf), g1 = capture(1, 0, buf);
	int i;

	CK(cudaDeviceSynchronize());
	CK(cudaMemGetInfo(&f0, &tot));
	for (i = 0; i < 20; i++) {
		xs.push_back(inst(gb));
		CK(cudaGraphUpload(xs.back(), s));
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaMemGetInfo(&f1, &tot));
	for (i = 0; i < 200; i++) {
		xs.push_back(inst(g1));
		CK(cudaGraphUpload(xs.back(), s));
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaMemGetInfo(&f2, &tot));
	printf("graph_node_bytes %.1f %d\n", (double)(f0 - f1) / (20.0 * BIG), 1);
	printf("graph_base_bytes %.1f %d\n", (double)(f1 - f2) / 200.0, 1);
	for (auto x : xs)
		cudaGraphExecDestroy(x);
	cudaGraphDestroy(gb);
	cudaGraphDestroy(g1);
}

/* dram_bytes_per_ns: device-to-device copy kernel over 512 MiB */
static void measure_dram(const struct cudaDeviceProp *prop)
{
	size_t n = (size_t)256 << 20;   /* bytes per buffer */
	std::vector<double> v;
	float4 *a, *b;
	cudaEvent_t e0, e1;
	float ms;
	int r;

	CK(cudaMalloc(&a, n));
	CK(cudaMalloc(&b, n));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (r = 0; r < REPS; r++) {
		CK(cudaEventRecord(e0, s));
		copy_kernel<<<prop->multiProcessorCount * 8, 256, 0, s>>>(a, b, n / 16);
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		v.push_back(2.0 * n / (ms * 1e6));
	}
	out("dram_bytes_per_ns", median(v));
	cudaFree(a);
	cudaFree(b);
}

int main(void)
{
	struct cudaDeviceProp prop;
	int dev, drv;
	void *buf;

	CK(cudaGetDevice(&dev));
	CK(cudaGetDeviceProperties(&prop, dev));
	CK(cudaDriverGetVersion(&drv));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&buf, 1 << 20));
	printf("gpu %s\ndriver %d\n", prop.name, drv);

	measure_launch_host();
	measure_eager_gap();
	measure_graph_build(buf);
	measure_set_params(buf);
	measure_graph_launch(buf);
	measure_dep_gap();
	measure_graph_memory(buf);
	measure_dram(&prop);
	CK(cudaGetLastError());
	return 0;
}
