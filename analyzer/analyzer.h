/*
 * analyzer.h - `kplan analyze`: timeline and gaps, regions, capturability,
 * cost model, fusion candidates; results stored in the run's kp_* tables.
 *
 * kp_analyze() reads one run's trace tables into compact arrays, builds the
 * per-stream timeline (each GPU op joined to its launch call by correlation
 * id), attributes every idle gap (host-bound or device-side), finds regions
 * (NVTX ranges, else mined repeated sequences), checks capturability,
 * predicts graphed time with the calibrated cost model (cost.h) and scores
 * fusion chains. It then replaces the run's rows in kp_regions,
 * kp_region_occurrences, kp_blockers, kp_gaps and kp_fusion_candidates in
 * one transaction, so running it twice gives the same tables.
 *
 * The model and rules are described in docs/DESIGN.md "Analyzer".
 */
#ifndef KP_ANALYZER_H
#define KP_ANALYZER_H

#include <stdint.h>
#include <stdio.h>

#include "../db/db.h"
#include "cost.h"

/* The stream id CUPTI, nsys and PyTorch traces give the legacy default stream. */
#define KP_LEGACY_STREAM_ID 7

struct kp_analyze_opts {
	int64_t run_id;          /* 0: the newest run */
	int no_nvtx;             /* ignore annotations: mine sequences instead */
	int mine;                /* mine sequences even when annotations exist */
	int64_t legacy_stream;   /* legacy default stream id; -1: none (default KP_LEGACY_STREAM_ID) */
	int64_t gap_rows_max;    /* kp_gaps keeps at most this many (largest) gaps; 0: 1,000,000 */
	int min_period;          /* mining: shortest period in nodes (default 2) */
	int max_chain;           /* fusion: longest chain (default 8) */
	int dry_run;             /* analyze but store nothing */
};

/* Fill o with the defaults above. */
void kp_analyze_opts_init(struct kp_analyze_opts *o);

/* Distribution of a per-op quantity (ns). */
struct kp_dist {
	int64_t n, p50, p90, p99, max;
	double mean;
};

/* What kp_analyze found, for the CLI's summary. */
struct kp_analysis_summary {
	int64_t run_id;
	int64_t n_ops, n_kernels, n_memops, n_streams;
	int64_t n_api;            /* API rows of the run */
	int64_t n_launch_calls;   /* launch calls (kernel, copy, memset, graph): distinct ids */
	int64_t n_joined;         /* launch calls joined to the ops they made */
	int64_t n_graph_launches; /* graph launch calls joined (each ran a graph's nodes) */
	int64_t n_graph_ops;      /* ops run by the program's own graph launches */
	int64_t n_pdl;            /* kernels launched with programmatic dependent launch */
	int64_t n_other_polls;    /* cudaEventQuery/cudaStreamQuery calls on threads that
				     launch nothing (a watchdog, NCCL's proxy): not syncs */
	int64_t n_collectives;    /* NCCL kernels (common/nccl.h) */
	int64_t busy_ns;          /* summed GPU op time over all streams */
	int64_t host_idle_ns;     /* idle gaps the GPU spent waiting for launches */
	int64_t device_idle_ns;   /* idle gaps with the launch already issued */
	int64_t span_ns;          /* first op start to last op end */
	struct kp_dist queue, launch_api;
	int64_t n_regions, n_capturable, n_split, n_blockers;
	int64_t n_fusion, n_fusion_feasible;
	int64_t n_gap_rows;
	int regions_from;         /* 0 none, 1 nvtx, 2 mined */
	struct kp_cost cost;      /* constants used */
	double seconds;           /* analysis wall time */
};

/*
 * Analyze one run of db (opened KP_DB_CREATE, or RDONLY with dry_run) and
 * store the results. OUT: *sum (may be NULL). Returns 0 or negative KP_E*
 * (KP_ENOTFOUND: no such run or no GPU work in it).
 */
int kp_analyze(struct kp_db *db, const struct kp_analyze_opts *o,
	       struct kp_analysis_summary *sum, struct kp_err *err);

/*
 * 1 when run run_id (0: the newest) has analysis results stored (rows in
 * kp_regions or kp_gaps), 0 when it has none or does not exist.
 */
int kp_analysis_stored(struct kp_db *db, int64_t run_id);

/*
 * Write regions.csv, gaps.csv and fusion.csv for run_id into directory dir
 * (created when missing) from the stored tables. regions.csv columns: label,
 * occurrences, kernels, nodes, eager_us, graph_us_pred, graph_us_lo,
 * graph_us_hi (its interval), speedup_pred,
 * capturable, blockers, ... (times per occurrence).
 */
int kp_analyze_write_csv(struct kp_db *db, int64_t run_id, const char *dir,
			 struct kp_err *err);

/* Print the stored regions of run_id as an aligned table (the CLI summary). */
int kp_analyze_print_regions(struct kp_db *db, int64_t run_id, FILE *f,
			     int max_rows, struct kp_err *err);

/* Print the best max stored fusion candidates of run_id, by the kernels'
 * labels (common/kname.h); nothing when the table cannot be read. */
void kp_analyze_print_fusion(struct kp_db *db, int64_t run_id, FILE *f, int max);

/*
 * The cost model for one region occurrence (docs/DESIGN.md): graph replay
 * overlaps each node's launch processing with the previous node's work, so
 * a node costs max(dur + gap, floor) on the device, where dur is the
 * kernel's duration as the trace recorded it, gap graph_traced_gap_ns
 * (graph_traced_gap_gemm_ns for GEMM library kernels) and floor
 * graph_node_ns (graph_memop_node_ns for memset/memcpy nodes); the host
 * side is cudaGraphLaunch (base + per node) plus set_params_ns per patched
 * node; the graphed time is the larger of the two.
 */
struct kp_region_pred {
	int64_t device_ns, host_ns, graph_ns;
	double speedup;           /* eager_ns / graph_ns */
	int64_t one_time_ns;      /* (capture + instantiate) * nodes * shape_keys */
	int64_t break_even;       /* replays to amortise one_time_ns; -1: never */
	int64_t extra_mem_bytes;
};

/* Node classes for kp_cost_predict. */
enum { KP_NODE_KERNEL = 0, KP_NODE_MEMOP = 1, KP_NODE_GEMM = 2 };

/* Whether a kernel name is a GEMM library kernel (cuBLAS, cuBLASLt,
 * CUTLASS, cuDNN's xmma GEMMs): KP_NODE_GEMM. */
int kp_kernel_is_gemm(const char *name);

/* The gap kp_cost_predict adds to a node of class cls. */
double kp_cost_node_gap(const struct kp_cost *c, int cls);

/*
 * dur_ns[i]: traced device time of node i; cls[i] (may be NULL: all
 * kernels): KP_NODE_*; stream[i] (may be NULL: one chain): the stream node
 * i ran on, node 0's being the region's (nodes on other streams are forked
 * from it and joined back, and run beside it: the device time is the longest
 * chain; up to 16 streams are followed, further ones count on the region's
 * chain). host_nodes: captured cudaLaunchHostFunc calls. patched_nodes:
 * nodes needing parameter updates per replay; shape_keys >= 1 graphs are
 * instantiated.
 */
void kp_cost_predict(const struct kp_cost *c, const int64_t *dur_ns,
		     const uint8_t *cls, const uint32_t *stream, int64_t host_nodes,
		     size_t n_nodes, int64_t eager_ns, int64_t patched_nodes,
		     int64_t shape_keys, struct kp_region_pred *out);

#endif
