/*
 * model.c - the graphed-time cost model (docs/DESIGN.md "Analyzer").
 *
 * Eager: every op pays a host launch call, and the GPU idles whenever the
 * CPU is slower than the kernels. Graph replay: one cudaGraphLaunch on the
 * host; on the device the executor processes node i+1 while node i runs, so
 * a node costs its own duration plus the dependency gap, or the node cost
 * when the kernel is shorter than that (then the executor is the limit).
 */
#include <math.h>
#include <string.h>

#include "analyzer.h"

/*
 * The kernel durations the model reads come from CUPTI traces, which record
 * each kernel somewhat longer than it runs; graph_traced_gap_ns is measured
 * against traced durations (kplan calibrate), so it carries that excess and
 * no separate correction is applied. GEMM library kernels pay more per node
 * (their own gap, also calibrated).
 */
int kp_kernel_is_gemm(const char *name)
{
	static const char *const marks[] = { "gemm", "gemv", "cutlass", "xmma", "cublas" };

	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof(marks) / sizeof(*marks); i++)
		if (strcasestr(name, marks[i]))
			return 1;
	return 0;
}

double kp_cost_node_gap(const struct kp_cost *c, int cls)
{
	return c->v[cls == KP_NODE_GEMM ? KP_COST_TRACED_GAP_GEMM : KP_COST_TRACED_GAP];
}

/* Per-stream finish times of the critical path (kp_cost_predict). */
#define MAX_BRANCHES 16

void kp_cost_predict(const struct kp_cost *c, const int64_t *dur_ns,
		     const uint8_t *cls, const uint32_t *stream, int64_t host_nodes,
		     size_t n_nodes, int64_t eager_ns, int64_t patched_nodes,
		     int64_t shape_keys, struct kp_region_pred *out)
{
	/* branch b: stream sb[b], finish time fin[b], main-stream epoch of its
	 * last node (a branch that ran since the main stream's last node is
	 * joined by the main stream's next node; one that did not is forked
	 * anew from the main stream's finish) */
	uint32_t sb[MAX_BRANCHES];
	double fin[MAX_BRANCHES] = {0}, dev = 0, host;
	int64_t ep[MAX_BRANCHES] = {0}, epoch = 0;
	int nb = 1;

	if (shape_keys < 1)
		shape_keys = 1;
	sb[0] = stream && n_nodes ? stream[0] : 0;
	for (size_t i = 0; i < n_nodes; i++) {
		int k = cls ? cls[i] : KP_NODE_KERNEL, b = 0;
		double node = c->v[k == KP_NODE_MEMOP ? KP_COST_GRAPH_MEMOP_NODE
						       : KP_COST_GRAPH_NODE];
		double t = (double)dur_ns[i] + kp_cost_node_gap(c, k), start;

		if (t < node)
			t = node;
		if (stream)
			while (b < nb && sb[b] != stream[i])
				b++;
		if (b == nb && nb == MAX_BRANCHES)
			b = 0;            /* beyond the branches followed: the main chain */
		else if (b == nb)
			sb[nb++] = stream[i];
		start = fin[b];
		if (b == 0) {
			for (int j = 1; j < nb; j++)
				if (ep[j] == epoch && fin[j] > start)
					start = fin[j];   /* join */
			epoch++;
		} else if (ep[b] != epoch && fin[0] > start) {
			start = fin[0];           /* fork */
		}
		ep[b] = epoch;
		fin[b] = start + t;
	}
	for (int j = 0; j < nb; j++)
		if (fin[j] > dev)
			dev = fin[j];
	dev += c->v[KP_COST_GRAPH_HOST_NODE] * (double)host_nodes;
	host = c->v[KP_COST_GRAPH_LAUNCH_BASE] +
		c->v[KP_COST_GRAPH_LAUNCH_NODE] * (double)n_nodes +
		c->v[KP_COST_SET_PARAMS] * (double)patched_nodes;
	out->device_ns = llround(dev);
	out->host_ns = llround(host);
	out->graph_ns = out->device_ns > out->host_ns ? out->device_ns : out->host_ns;
	out->speedup = out->graph_ns > 0 ? (double)eager_ns / (double)out->graph_ns : 1.0;
	out->one_time_ns = llround((c->v[KP_COST_CAPTURE] + c->v[KP_COST_INSTANTIATE]) *
				   (double)n_nodes * (double)shape_keys + c->v[KP_COST_WATCH]);
	if (eager_ns > out->graph_ns)
		out->break_even = (out->one_time_ns + (eager_ns - out->graph_ns) - 1) /
			(eager_ns - out->graph_ns);
	else
		out->break_even = -1;
	out->extra_mem_bytes = llround((c->v[KP_COST_GRAPH_BASE_BYTES] +
					c->v[KP_COST_GRAPH_NODE_BYTES] * (double)n_nodes) *
				       (double)shape_keys);
}
