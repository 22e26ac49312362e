/*
 * calibrate.cu - kplan-calibrate: measure this GPU's launch-cost constants
 * (the quantities of common/cost_quantities.def measured BY(CALIBRATE), by
 * their stable names, which the analyzer's cost model reads back) and print
 * them for `kplan calibrate`, which stores them in kp_calibration:
 *
 *   gpu NAME
 *   driver VERSION
 *   QUANTITY VALUE N_SAMPLES       (VALUE in ns, bytes or bytes/ns)
 *
 * Each quantity is the median of REPS repeats, each repeat an average over a
 * batch of operations (N_SAMPLES = REPS). Runs in about a second. A
 * quantity of the table it did not print is a bug, said on stderr (exit 2).
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include <cuda_runtime.h>

#include "../common/cost_quantities.h"

#define REPS 9
#define BIG 1000
#define SMALL 10

#include <cublas_v2.h>
#include <cupti.h>

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

/* device time of x per replay, from events around `per` back-to-back
 * launches (median of REPS): per 1, one replay alone; more, the replay
 * period when replays queue behind each other */
static double graph_time_ns(cudaGraphExec_t x, int per)
{
	std::vector<double> v;
	cudaEvent_t a, b;
	float ms;
	int r, i;

	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaGraphLaunch(x, s));    /* upload / warm */
	CK(cudaStreamSynchronize(s));
	for (r = 0; r < REPS; r++) {
		CK(cudaEventRecord(a, s));
		for (i = 0; i < per; i++)
			CK(cudaGraphLaunch(x, s));
		CK(cudaEventRecord(b, s));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		v.push_back(ms * 1e6 / per);
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return median(v);
}

static double graph_device_ns(cudaGraphExec_t x)
{
	return graph_time_ns(x, 1);
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

/* The table's names and who measures each, by enum kp_cost_q. */
static const char *const q_name[KP_COST__N] = {
#define KP_COST_Q(id, name, unit, by, def, doc) name,
#include "../common/cost_quantities.def"
};
static const int q_by[KP_COST__N] = {
#define KP_COST_Q(id, name, unit, by, def, doc) KP_COST_BY_##by,
#include "../common/cost_quantities.def"
};
static bool q_done[KP_COST__N];

/* One "QUANTITY VALUE N_SAMPLES" line. */
static void out_n(enum kp_cost_q q, double v, long long n)
{
	printf("%s %.1f %lld\n", q_name[q], v, n);
	q_done[q] = true;
}

static void out(enum kp_cost_q q, double v)
{
	out_n(q, v, REPS);
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
	out(KP_COST_LAUNCH_HOST, median(v));
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
	out(KP_COST_EAGER_GPU_GAP, median(v));
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
	out(KP_COST_CAPTURE, median(cap));
	out(KP_COST_INSTANTIATE, median(ins));
	out(KP_COST_EXEC_UPDATE, median(upd));
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
	out(KP_COST_SET_PARAMS, median(v));
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
}

static void CUDART_CB host_noop(void *p)
{
	(void)p;
}

/*
 * graph_host_node_ns: what one host node (cudaLaunchHostFunc under capture,
 * a per-step hook) adds to the replay period of back-to-back replays: a
 * chain of 40 tiny kernels with one host node in the middle against the
 * same chain without. The GPU waits while the driver's callback thread runs
 * the function and signals back, and the next replay's work queues behind
 * it (stderr also shows what a replay timed alone pays).
 */
static void measure_host_node(void *buf)
{
	cudaGraph_t g[2];
	double t[2], lone[2];
	int j, i;

	for (j = 0; j < 2; j++) {
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		for (i = 0; i < 40; i++) {
			empty_kernel<<<1, 32, 0, s>>>((int *)buf);
			if (j && i == 20)
				CK(cudaLaunchHostFunc(s, host_noop, NULL));
		}
		CK(cudaStreamEndCapture(s, &g[j]));
		cudaGraphExec_t x = inst(g[j]);
		t[j] = graph_time_ns(x, 30);
		lone[j] = graph_device_ns(x);
		cudaGraphExecDestroy(x);
		cudaGraphDestroy(g[j]);
	}
	fprintf(stderr, "kplan-calibrate: host node: %.0f ns per replay back to back, %.0f ns "
		"in a replay timed alone\n", t[1] - t[0], lone[1] - lone[0]);
	out(KP_COST_GRAPH_HOST_NODE, t[1] - t[0]);
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

	out(KP_COST_GRAPH_LAUNCH_NODE, node);
	out(KP_COST_GRAPH_LAUNCH_BASE, hs - SMALL * node);
	out(KP_COST_GRAPH_NODE, (db - ds) / (BIG - SMALL));
	out(KP_COST_GRAPH_MEMOP_NODE,
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
	out(KP_COST_GRAPH_DEP_GAP, (t[1] - t[0]) / (cnt[1] - cnt[0]) - (double)hdur);
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
	out_n(KP_COST_GRAPH_NODE_BYTES, (double)(f0 - f1) / (20.0 * BIG), 1);
	out_n(KP_COST_GRAPH_BASE_BYTES, (double)(f1 - f2) / 200.0, 1);
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
	out(KP_COST_DRAM_BW, median(v));
	cudaFree(a);
	cudaFree(b);
}

/*
 * graph_traced_gap_ns, graph_traced_gap_gemm_ns: what a dependent graph node
 * costs beyond the kernel's duration *as a CUPTI trace records it* (the
 * durations the analyzer reads from kplan record, nsys and PyTorch profiler
 * traces). For a sequence of kernels: the graph replay period per kernel
 * node, measured with events and no tracing, minus the mean duration CUPTI
 * reports for the same kernels run eagerly. Plain kernels: 64 kernels with
 * code of their own, large parameter blocks and varied grids, each reading
 * what the one before wrote, as a model's graph runs (chains of one kernel
 * repeated cost less per node: 20-60 ns against ~100 ns on an H100, printed
 * to stderr for reference); GEMM: cuBLAS SGEMMs (cuBLAS and CUTLASS nodes
 * cost more per node, ~350 ns); PDL: the 64 kernels again, launched with
 * programmatic dependent launch, their traced durations taken alone on the
 * stream (a synchronisation after each, as a host-bound eager run records
 * them), where the graph overlaps each with its predecessor: graph_traced_
 * gap_pdl_ns is negative. Run last: tracing stays on once enabled.
 */
enum { C_SPIN, C_COPY, C_PARAM, C_MIX, C_MANY, C_GEMM, C_PDL, C__N };
static const char *const case_name[C__N] = { "spin", "copy", "param", "mix", "many", "gemm",
					     "pdl" };
static std::vector<double> traced[C__N];
static int cur_case = -1;

static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *max_records)
{
	*size = 1 << 22;
	*buf = (uint8_t *)aligned_alloc(8, *size);
	*max_records = 0;
}

static void CUPTIAPI buf_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
			      size_t valid)
{
	CUpti_Activity *rec = NULL;

	(void)ctx;
	(void)stream;
	(void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || cur_case < 0)
			continue;
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
		traced[cur_case].push_back((double)(k->end - k->start));
	}
	free(buf);
}

__global__ void smem_kernel(float *out, int n)
{
	extern __shared__ float sh[];
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	sh[threadIdx.x] = (float)i;
	__syncthreads();
	if (i < n)
		out[i] = sh[(threadIdx.x + 1) % blockDim.x] * 0.5f;
}

/* a kernel with a large parameter block, as TensorIterator kernels have
 * (offset calculators, strides of every operand) */
struct big_params {
	int v[192];
};

__global__ void param_kernel(big_params p, const float *in, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = in[i] * (float)p.v[i % 192] + 1.0f;
}

/* 64 kernels with code of their own (a model's graph runs hundreds of
 * different kernels, not one repeated) */
template <int K>
__global__ void many_kernel(big_params p, const float *in, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v = i < n ? in[i] : 0.0f;

#pragma unroll
	for (int r = 0; r < (K % 8) + 1; r++)
		v = v * (1.0f + K * 0.001f) + (float)p.v[(i + K * 7 + r) % 192];
	if (i < n)
		out[i] = v;
}

/* the same with programmatic dependent launch, as PDL kernels are written
 * (CUTLASS, TensorRT-LLM): wait for the predecessor's writes, let the
 * successor launch, then work */
template <int K>
__global__ void pdl_kernel(big_params p, const float *in, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v;

	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" :::);
	v = i < n ? in[i] : 0.0f;
#pragma unroll
	for (int r = 0; r < (K % 8) + 1; r++)
		v = v * (1.0f + K * 0.001f) + (float)p.v[(i + K * 7 + r) % 192];
	if (i < n)
		out[i] = v;
}

typedef void (*many_fn)(big_params, const float *, float *, int);
template <int K>
struct many_table {
	static void fill(many_fn *t, many_fn *tp)
	{
		t[K - 1] = many_kernel<K - 1>;
		tp[K - 1] = pdl_kernel<K - 1>;
		many_table<K - 1>::fill(t, tp);
	}
};
template <>
struct many_table<0> {
	static void fill(many_fn *, many_fn *) {}
};
static many_fn many_fns[64], pdl_fns[64];

__global__ void scale_kernel(float *x, int n, float a)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] = x[i] * a + 1.0f;
}

struct bufs {
	cublasHandle_t h;
	float *a, *b, *c;
	big_params p;
};

/* one unit of case k: the kernels a trace of it would show */
static void launch_case(int k, const bufs &m)
{
	const float one = 1.0f, zero = 0.0f;

	switch (k) {
	case C_SPIN:
		spin_kernel<<<1, 1, 0, s>>>(2000, NULL);
		break;
	case C_COPY:
		copy_kernel<<<264, 256, 0, s>>>((const float4 *)m.a, (float4 *)m.b, (size_t)1 << 17);
		break;
	case C_PARAM:
		param_kernel<<<512, 256, 0, s>>>(m.p, m.a, m.b, 1 << 17);
		param_kernel<<<512, 256, 0, s>>>(m.p, m.b, m.a, 1 << 17);
		break;
	case C_MIX:
		spin_kernel<<<1, 1, 0, s>>>(1000, NULL);
		copy_kernel<<<264, 256, 0, s>>>((const float4 *)m.a, (float4 *)m.b, (size_t)1 << 16);
		param_kernel<<<512, 256, 0, s>>>(m.p, m.b, m.c, 1 << 17);
		smem_kernel<<<132, 128, 64 << 10, s>>>(m.c, 132 * 128);
		scale_kernel<<<1024, 1024, 0, s>>>(m.b, 1 << 20, 0.5f);
		param_kernel<<<64, 256, 0, s>>>(m.p, m.c, m.a, 1 << 14);
		empty_kernel<<<1, 32, 0, s>>>(NULL);
		break;
	case C_MANY:
		for (int j = 0; j < 64; j++)
			many_fns[j]<<<(j % 4 + 1) * 16, 256, 0, s>>>(m.p, j & 1 ? m.b : m.a,
								   j & 1 ? m.a : m.b, 1 << 14);
		break;
	case C_PDL:
		for (int j = 0; j < 64; j++) {
			cudaLaunchConfig_t c = {};
			cudaLaunchAttribute at[1];
			const float *in = j & 1 ? m.b : m.a;
			float *out = j & 1 ? m.a : m.b;
			int n = 1 << 14;

			c.gridDim = dim3((j % 4 + 1) * 16);
			c.blockDim = dim3(256);
			c.stream = s;
			at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			at[0].val.programmaticStreamSerializationAllowed = 1;
			c.attrs = at;
			c.numAttrs = 1;
			CK(cudaLaunchKernelEx(&c, pdl_fns[j], m.p, in, out, n));
			/* traced: alone on the stream, as a host-bound eager run
			 * records them (queued back to back they would overlap) */
			if (cur_case == C_PDL)
				CK(cudaStreamSynchronize(s));
		}
		break;
	default:
		if (cublasSgemm(m.h, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 32, 1024, &one, m.a, 1024,
				m.b, 1024, &zero, m.c, 1024) != CUBLAS_STATUS_SUCCESS) {
			fprintf(stderr, "kplan-calibrate: cublasSgemm failed\n");
			exit(2);
		}
	}
}

/* replay period per unit of case k (5 and 25 units); *knodes: kernel
 * nodes per unit in the graph */
static double case_period(int k, const bufs &m, double *knodes)
{
	int units[2] = { 5, 25 }, i, j;
	double t[2];
	size_t kn[2];

	for (j = 0; j < 2; j++) {
		cudaGraph_t g;
		cudaGraphExec_t x;
		size_t n = 0;

		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		for (i = 0; i < units[j]; i++)
			launch_case(k, m);
		CK(cudaStreamEndCapture(s, &g));
		CK(cudaGraphGetNodes(g, NULL, &n));
		std::vector<cudaGraphNode_t> nodes(n);
		CK(cudaGraphGetNodes(g, nodes.data(), &n));
		kn[j] = 0;
		for (size_t q = 0; q < n; q++) {
			cudaGraphNodeType ty;
			CK(cudaGraphNodeGetType(nodes[q], &ty));
			kn[j] += ty == cudaGraphNodeTypeKernel;
		}
		x = inst(g);
		t[j] = graph_device_ns(x);
		cudaGraphExecDestroy(x);
		cudaGraphDestroy(g);
	}
	*knodes = (double)(kn[1] - kn[0]) / (units[1] - units[0]);
	return (t[1] - t[0]) / (units[1] - units[0]);
}

static double mean(const std::vector<double> &v)
{
	double sum = 0;

	for (double x : v)
		sum += x;
	return v.empty() ? 0 : sum / (double)v.size();
}

static void measure_traced_gap(void)
{
	bufs m;
	double per[C__N], kn[C__N], gap[C__N];
	const int runs = 40;
	int k, i;

	for (i = 0; i < 192; i++)
		m.p.v[i] = i;
	many_table<64>::fill(many_fns, pdl_fns);
	CK(cudaMalloc(&m.a, 4 << 20));
	CK(cudaMalloc(&m.b, 4 << 20));
	CK(cudaMalloc(&m.c, 4 << 20));
	CK(cudaMemset(m.a, 0, 4 << 20));
	CK(cudaMemset(m.b, 0, 4 << 20));
	CK(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
	if (cublasCreate(&m.h) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetStream(m.h, s) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "kplan-calibrate: cuBLAS cannot start\n");
		exit(2);
	}
	for (k = 0; k < C__N; k++) {
		for (i = 0; i < 5; i++)      /* warm: module loads, cuBLAS workspace */
			launch_case(k, m);
		CK(cudaStreamSynchronize(s));
		per[k] = case_period(k, m, &kn[k]);
	}
	if (cuptiActivityRegisterCallbacks(buf_req, buf_done) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
		fprintf(stderr, "kplan-calibrate: CUPTI activity tracing unavailable; "
			"graph_traced_gap_* not measured\n");
		cublasDestroy(m.h);
		return;
	}
	for (k = 0; k < C__N; k++) {
		cur_case = k;
		for (i = 0; i < runs; i++)
			launch_case(k, m);
		CK(cudaStreamSynchronize(s));
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	cur_case = -1;
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	for (k = 0; k < C__N; k++) {
		if (traced[k].size() < 20) {
			fprintf(stderr, "kplan-calibrate: CUPTI recorded %zu kernels of case %s; "
				"graph_traced_gap_* not measured\n", traced[k].size(), case_name[k]);
			cublasDestroy(m.h);
			return;
		}
		/* per unit: period minus everything traced, over its kernel nodes */
		double tr_unit = mean(traced[k]) * (double)traced[k].size() / runs;
		gap[k] = (per[k] - tr_unit) / kn[k];
		fprintf(stderr, "kplan-calibrate: traced gap %s: %.0f ns per kernel node (period "
			"%.0f and traced %.0f ns per unit of %.1f kernel nodes)\n", case_name[k],
			gap[k], per[k], tr_unit, kn[k]);
	}
	out_n(KP_COST_TRACED_GAP, gap[C_MANY], (long long)traced[C_MANY].size());
	out_n(KP_COST_TRACED_GAP_GEMM, gap[C_GEMM], (long long)traced[C_GEMM].size());
	out_n(KP_COST_TRACED_GAP_PDL, gap[C_PDL], (long long)traced[C_PDL].size());
	cublasDestroy(m.h);
	cudaFree(m.a);
	cudaFree(m.b);
	cudaFree(m.c);
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
	measure_host_node(buf);
	measure_graph_memory(buf);
	measure_dram(&prop);
	measure_traced_gap();
	CK(cudaGetLastError());
	for (int q = 0; q < KP_COST__N; q++)
		if (q_by[q] == KP_COST_BY_CALIBRATE && !q_done[q]) {
			fprintf(stderr, "kplan-calibrate: %s was not measured\n", q_name[q]);
			return 2;
		}
	return 0;
}
