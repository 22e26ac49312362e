/*
 * writer.h - batched bulk insert of trace records into a kplan database.
 *
 * The collector and the importers describe records with the structs below
 * and hand them to a struct kp_writer, which keeps one prepared INSERT per
 * table, interns names, and counts rows. Transactions belong to the caller:
 * wrap batches in kp_db_begin/kp_db_commit (one transaction per ~100k rows
 * is what makes the insert rate; see docs/PERFORMANCE.md).
 *
 * String fields are borrowed for the duration of the call only.
 */
#ifndef KP_WRITER_H
#define KP_WRITER_H

#include <stdint.h>
#include "db.h"
#include "../common/vec.h"

/*
 * The seven fields every kind of GPU work shares (the leading columns of the
 * kernel, memcpy, memset and synchronization tables). Each record holds them
 * both by name (r.start) and as one struct (r.op) to fill or bind at once.
 */
#define KP_GPU_OP_FIELDS \
	int64_t start, end; \
	uint32_t device_id, context_id, stream_id, correlation_id; \
	int64_t global_pid

struct kp_gpu_op {
	KP_GPU_OP_FIELDS;
};

#define KP_GPU_OP_MEMBER union { struct { KP_GPU_OP_FIELDS; }; struct kp_gpu_op op; }

struct kp_kernel_rec {
	KP_GPU_OP_MEMBER;
	const char *name;         /* demangled name (required) */
	const char *short_name;   /* NULL: derived from name */
	const char *mangled;      /* may be NULL */
	int launch_type, cache_config, registers;
	int32_t grid[3], block[3];
	int32_t static_smem, dynamic_smem;
	int32_t local_mem_per_thread;
	int64_t local_mem_total;
	int64_t grid_id;
	int32_t shared_mem_executed;
	uint64_t graph_node_id;
	uint32_t graph_id;
};

enum kp_api_class { KP_API_RUNTIME = 0, KP_API_DRIVER = 1 };

struct kp_api_rec {
	int64_t start, end;
	int event_class;          /* enum kp_api_class */
	int64_t global_tid;
	uint32_t correlation_id;
	const char *name;         /* e.g. "cudaLaunchKernel" */
	int return_value;
};

struct kp_memcpy_rec {
	KP_GPU_OP_MEMBER;
	int64_t bytes;
	int copy_kind, src_kind, dst_kind;
	int src_device, dst_device;
	uint64_t graph_node_id;
};

struct kp_memset_rec {
	KP_GPU_OP_MEMBER;
	int64_t bytes;
	int value, mem_kind;
	uint64_t graph_node_id;
};

struct kp_sync_rec {
	KP_GPU_OP_MEMBER;
	int sync_type;
	uint32_t event_id;
};

enum kp_nvtx_type { KP_NVTX_MARK = 34, KP_NVTX_PUSHPOP = 59, KP_NVTX_STARTEND = 60 };

struct kp_nvtx_rec {
	int64_t start, end;       /* end < 0 for marks */
	int event_type;           /* enum kp_nvtx_type */
	int64_t range_id;
	int category;
	uint32_t color;
	const char *text;
	int64_t global_tid, end_global_tid;
	int64_t domain_id;
};

struct kp_overhead_rec {
	int64_t start, end;
	int64_t global_tid;
	const char *name;
};

struct kp_gpu_rec {
	int id;
	const char *name, *bus_location, *uuid;
	int64_t total_memory, memory_bandwidth, l2_cache_size;
	int sm_count, compute_major, compute_minor, clock_rate;
	int max_threads_per_block, max_registers_per_sm;
	int max_shmem_per_block, max_shmem_per_sm, threads_per_warp;
};

/*
 * What a collective kernel moved and on which communicator (kp_collectives),
 * keyed by the kernel's stream and start. Strings may be NULL; counts -1
 * when not said; bytes -1 when unknown.
 */
struct kp_collective_rec {
	uint32_t stream_id;
	int64_t start;
	const char *name, *dtype, *pg_name, *pg_desc, *group_ranks;
	int64_t in_nelems, out_nelems, bytes, group_size, seq;
};

/*
 * The inputs of a PyTorch CPU op (kp_cpu_op_args, schema v7), keyed as its
 * NVTX_EVENTS row: each field the JSON array the trace wrote, or NULL.
 */
struct kp_cpu_op_args_rec {
	int64_t global_tid, start;
	const char *dims, *types, *strides, *concrete;
};

enum kp_table {
	KP_T_KERNEL, KP_T_RUNTIME, KP_T_MEMCPY, KP_T_MEMSET, KP_T_SYNC,
	KP_T_NVTX, KP_T_OVERHEAD, KP_T_GPU, KP_T_LAUNCH_ATTRS, KP_T_COLL, KP_T_CPU_OP_ARGS,
	KP_T__N
};

/* Name of the SQL table behind enum kp_table. */
const char *kp_table_name(int table);

struct kp_writer_name_ids {
	int64_t name_id, short_id;
};

struct kp_writer {
	struct kp_db *db;
	int64_t run_id;
	sqlite3_stmt *st[KP_T__N];
	int64_t rows[KP_T__N];    /* rows inserted per table */
	/* kernel name -> index into kernel_ids: one lookup per kernel row */
	struct kp_strmap kernel_names;
	KP_VEC(struct kp_writer_name_ids) kernel_ids;
};

/* Prepare nothing yet; statements are prepared on first use. */
void kp_writer_init(struct kp_writer *w, struct kp_db *db, int64_t run_id);
void kp_writer_release(struct kp_writer *w);

int kp_writer_kernel(struct kp_writer *w, const struct kp_kernel_rec *r, struct kp_err *err);
int kp_writer_api(struct kp_writer *w, const struct kp_api_rec *r, struct kp_err *err);
int kp_writer_memcpy(struct kp_writer *w, const struct kp_memcpy_rec *r, struct kp_err *err);
int kp_writer_memset(struct kp_writer *w, const struct kp_memset_rec *r, struct kp_err *err);
int kp_writer_sync(struct kp_writer *w, const struct kp_sync_rec *r, struct kp_err *err);
int kp_writer_nvtx(struct kp_writer *w, const struct kp_nvtx_rec *r, struct kp_err *err);
int kp_writer_overhead(struct kp_writer *w, const struct kp_overhead_rec *r, struct kp_err *err);
int kp_writer_gpu(struct kp_writer *w, const struct kp_gpu_rec *r, struct kp_err *err);
/* kp_launch_attrs: the launch with correlation id corr used programmatic
 * dependent launch (a second row for the same launch is ignored). */
int kp_writer_pdl(struct kp_writer *w, int64_t corr, struct kp_err *err);
/* kp_collectives: what the collective kernel at (stream, start) moved; a
 * second row for the same kernel is ignored, so the likelier source goes
 * first. */
int kp_writer_collective(struct kp_writer *w, const struct kp_collective_rec *r,
			 struct kp_err *err);
/* kp_cpu_op_args: the inputs of the CPU op at (globalTid, start); a second
 * row for the same op is ignored. */
int kp_writer_cpu_op_args(struct kp_writer *w, const struct kp_cpu_op_args_rec *r,
			  struct kp_err *err);

#endif
