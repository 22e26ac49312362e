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

void kp_cost_predict(const struct kp_cost *c, const int64_t *dur_ns,
		     const uint8_t *cls, size_t n_nodes, int64_t eager_ns,
		     int64_t patched_nodes, int64_t shape_keys,
		     struct kp_region_pred *out)
{
	double dev = 0, host;

	if (shape_keys < 1)
		shape_keys = 1;
	for (size_t i = 0; i < n_nodes; i++) {
		int k = cls ? cls[i] : KP_NODE_KERNEL;
		double node = c->v[k == KP_NODE_MEMOP ? KP_COST_GRAPH_MEMOP_NODE
						       : KP_COST_GRAPH_NODE];
		double t = (double)dur_ns[i] + kp_cost_node_gap(c, k);
		dev += t > node ? t : node;
	}
	host = c->v[KP_COST_GRAPH_LAUNCH_BASE] +
		c->v[KP_COST_GRAPH_LAUNCH_NODE] * (double)n_nodes +
		c->v[KP_COST_SET_PARAMS] * (double)patched_nodes;
	out->device_ns = llround(dev);
	out->host_ns = llround(host);
	out->graph_ns = out->device_ns > out->host_ns ? out->device_ns : out->host_ns;
	out->speedup = out->graph_ns > 0 ? (double)eager_ns / (double)out->graph_ns : 1.0;
	out->one_time_ns = llround((c->v[KP_COST_CAPTURE] + c->v[KP_COST_INSTANTIATE]) *
				   (double)n_nodes * (double)shape_keys);
	if (eager_ns > out->graph_ns)
		out->break_even = (out->one_time_ns + (eager_ns - out->graph_ns) - 1) /
			(eager_ns - out->graph_ns);
	else
		out->break_even = -1;
	out->extra_mem_bytes = llround((c->v[KP_COST_GRAPH_BASE_BYTES] +
					c->v[KP_COST_GRAPH_NODE_BYTES] * (double)n_nodes) *
				       (double)shape_keys);
}
