/*
 * cost.h - the launch cost model's constants, per GPU and driver.
 *
 * `kplan calibrate` measures each quantity below on a GPU and stores it in
 * kp_calibration (gpu_name, driver_version, quantity, value_ns) under the
 * quantity's stable string name (kp_cost_name). The analyzer and the planner
 * load the constants for a run's GPU with kp_cost_load / kp_cost_load_run;
 * what is not calibrated comes from the documented defaults (measured on
 * H100/H200, CUDA 13.0, driver 580: ../shared/design/ARCHITECTURE.md).
 *
 * The names and the enum order are stable: they are stored in databases.
 * New quantities are appended before KP_COST__N. All values are doubles;
 * quantities whose name ends in _ns are nanoseconds, _bytes bytes,
 * _bytes_per_ns bytes per nanosecond (GB/s), the value stored in
 * kp_calibration.value_ns either way.
 */
#ifndef KP_ANALYZER_COST_H
#define KP_ANALYZER_COST_H

#include <stdint.h>
#include <stdio.h>
#include "../db/db.h"

enum kp_cost_q {
	/* host time of one eager launch call (cudaLaunchKernel et al.) */
	KP_COST_LAUNCH_HOST = 0,      /* "launch_host_ns" */
	/* device time one graph kernel node costs when the kernels are shorter
	 * than it (replay overlaps node launch with the previous node's work) */
	KP_COST_GRAPH_NODE,           /* "graph_node_ns" */
	/* host time to record one kernel launch under stream capture */
	KP_COST_CAPTURE,              /* "capture_ns" */
	/* cudaGraphInstantiate, per node */
	KP_COST_INSTANTIATE,          /* "instantiate_ns" */
	/* cudaGraphExecUpdate (same topology), per node */
	KP_COST_EXEC_UPDATE,          /* "exec_update_ns" */
	/* cudaGraphExecKernelNodeSetParams, per patched node */
	KP_COST_SET_PARAMS,           /* "set_params_ns" */
	/* host cost of cudaGraphLaunch = base + per_node * nodes */
	KP_COST_GRAPH_LAUNCH_BASE,    /* "graph_launch_base_ns" */
	KP_COST_GRAPH_LAUNCH_NODE,    /* "graph_launch_node_ns" */
	/* minimum device-side gap between back-to-back eager kernels on one
	 * stream (launch queue full, GPU never waits for the CPU) */
	KP_COST_EAGER_GPU_GAP,        /* "eager_gpu_gap_ns" */
	/* device time of one graph memset / memcpy node (non-kernel node) */
	KP_COST_GRAPH_MEMOP_NODE,     /* "graph_memop_node_ns" */
	/* extra device memory per instantiated graph node (executable graph) */
	KP_COST_GRAPH_NODE_BYTES,     /* "graph_node_bytes" */
	/* fixed extra device memory per instantiated graph */
	KP_COST_GRAPH_BASE_BYTES,     /* "graph_base_bytes" */
	/* sustained DRAM bandwidth, for memory-bound tests and fusion gains */
	KP_COST_DRAM_BW,              /* "dram_bytes_per_ns" */
	/* a kernel shorter than this is "short" (fusion, launch-bound tests) */
	KP_COST_SHORT_KERNEL,         /* "short_kernel_ns" */
	/* device-side gap between a graph kernel node and its dependent
	 * successor once the predecessor is long enough to hide the node's
	 * launch processing: node period = max(dur + dep_gap, graph_node_ns) */
	KP_COST_GRAPH_DEP_GAP,        /* "graph_dep_gap_ns" */
	/* what the model adds to a kernel's *traced* duration (the durations
	 * in traces come from CUPTI and are longer than the kernel's own time):
	 * graph replay period per dependent node minus the traced eager
	 * duration of the same kernel; plain kernels and GEMM library kernels
	 * (cuBLAS, CUTLASS), which cost more per node */
	KP_COST_TRACED_GAP,           /* "graph_traced_gap_ns" */
	KP_COST_TRACED_GAP_GEMM,      /* "graph_traced_gap_gemm_ns" */
	/* the same for a kernel launched with programmatic dependent launch
	 * after a kernel on its stream, against the duration CUPTI records for
	 * it when it starts on an idle stream (a host-bound eager run): in a
	 * graph its launch and block start-up overlap its predecessor, so the
	 * value is negative */
	KP_COST_TRACED_GAP_PDL,       /* "graph_traced_gap_pdl_ns" */
	/* device time a host node (cudaLaunchHostFunc captured) adds to a
	 * replay: the GPU waits for the host callback's round trip */
	KP_COST_GRAPH_HOST_NODE,      /* "graph_host_node_ns" */
	/* the runtime's check of one eager call before its first capture
	 * (runtime/watch.c): attaching CUPTI, once per process; part of every
	 * region's one-time cost, so that a run too short to repay it is
	 * planned eager */
	KP_COST_WATCH,                /* "watch_ns" */
	KP_COST__N
};

/* Where a loaded constant came from. */
enum kp_cost_src {
	KP_COST_SRC_DEFAULT = 0,      /* documented default */
	KP_COST_SRC_EXACT = 1,        /* kp_calibration, same GPU and driver */
	KP_COST_SRC_GPU = 2,          /* kp_calibration, same GPU, other driver */
};

struct kp_cost {
	double v[KP_COST__N];         /* index with enum kp_cost_q */
	unsigned char src[KP_COST__N];/* enum kp_cost_src per quantity */
	int n_calibrated;             /* quantities not from defaults */
	char gpu_name[128];           /* what was looked up ("" when unknown) */
	int driver_version;
};

/* Stable name of q ("launch_host_ns"), NULL when q is out of range. */
const char *kp_cost_name(int q);
/* Quantity for a stored name, or -1 when unknown. */
int kp_cost_from_name(const char *name);
/* One-line description of q (for reports and --help). */
const char *kp_cost_doc(int q);
/* The documented default of q. */
double kp_cost_default(int q);

/*
 * Short kernels (fusion candidates) reach about this share of the DRAM
 * bandwidth: the bandwidth a fusion's saved traffic is valued at.
 */
#define KP_COST_SHORT_BW_SHARE 0.5

/*
 * The predicted saving of fusing memory-bound kernels, per occurrence, in
 * ns: saved_bytes of DRAM traffic (intermediates no longer written and read
 * back, inputs read once) at KP_COST_SHORT_BW_SHARE of dram_bytes_per_ns,
 * plus graph_node_ns per kernel saved. The score of the analyzer's fusion
 * candidates (without their occupancy penalty) and the gain of kplan.torch's
 * fusion groups (python/kplan/aten_plan.py computes it with the defaults).
 */
double kp_cost_fusion_gain_ns(const struct kp_cost *c, double saved_bytes,
			      double saved_kernels);

/* Fill c with the defaults (src all KP_COST_SRC_DEFAULT). */
void kp_cost_defaults(struct kp_cost *c);

/*
 * Load the constants for gpu_name + driver_version from kp_calibration:
 * rows for the exact GPU name and driver first; for quantities still
 * missing, the newest driver's rows for the same GPU name; the rest stay at
 * their defaults. gpu_name NULL or "" gives the defaults. A database without
 * kp_calibration (or read-only) is not an error. Returns 0 or a negative
 * KP_E* (sqlite failure).
 */
int kp_cost_load(struct kp_db *db, const char *gpu_name, int driver_version,
		 struct kp_cost *c, struct kp_err *err);

/* kp_cost_load for the GPU and driver recorded in run_id's kp_runs row. */
int kp_cost_load_run(struct kp_db *db, int64_t run_id, struct kp_cost *c,
		     struct kp_err *err);

/*
 * Store one measured constant (insert or replace) for gpu_name +
 * driver_version under kp_cost_name(q). n_samples may be 0. For
 * `kplan calibrate`; the caller owns the transaction.
 */
int kp_cost_store(struct kp_db *db, const char *gpu_name, int driver_version,
		  int q, double value, int64_t n_samples, struct kp_err *err);

/*
 * The text kplan-calibrate prints (and that a calibration file keeps):
 * "gpu NAME", "driver VERSION", then "QUANTITY VALUE N_SAMPLES" lines with
 * the names above. Unknown quantities and other lines are skipped with a
 * warning on stderr naming `what` (the program or file).
 */
struct kp_cost_file {
	char gpu[512];
	int driver;                   /* -1 until read */
	int n;                        /* rows */
	struct {
		int q;
		double value;
		long long n_samples;
	} row[KP_COST__N];
};

/* Read f to its end into cf. KP_EFORMAT when the gpu or driver line or
 * every quantity is missing. */
int kp_cost_read(FILE *f, const char *what, struct kp_cost_file *cf, struct kp_err *err);

/* kp_cost_read of the file at path. */
int kp_cost_read_path(const char *path, struct kp_cost_file *cf, struct kp_err *err);

/* Store every row of cf (kp_cost_store; the caller owns the transaction). */
int kp_cost_store_file(struct kp_db *db, const struct kp_cost_file *cf, struct kp_err *err);

/* Store cf in the database at db_path (created if missing), one transaction. */
int kp_cost_store_at(const char *db_path, const struct kp_cost_file *cf, struct kp_err *err);

#endif
