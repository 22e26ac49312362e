/*
 * read.h - the typed read API: iterators over one run's rows, which hand a
 * reader named fields instead of the schema's columns, joins and NULL rules
 * (the way to read chosen in docs/DESIGN.md, "Database"). It covers what
 * importers/chrome_export.c and reports/timeline.c read (they hold no SQL
 * of their own) and the trace tables reports/load.c reads. The other
 * readers move to it one table at a time.
 *
 *   struct kp_db_rows *it;
 *   struct kp_db_kernel k;
 *   int rc = kp_db_kernels(db, run, &it, err);
 *   if (!rc)
 *           while ((rc = kp_db_kernel_next(it, &k, err)) > 0)
 *                   use(&k);
 *   kp_db_rows_close(it);      (rc < 0: err says what failed)
 *
 * Each kp_db_<rows>(db, run, OUT it, err) returns 0 or a negative KP_E*;
 * each kp_db_<row>_next returns 1 (the row filled), 0 at the end or a
 * negative KP_E*, and refuses an iterator of another kind (KP_EINVAL).
 * Text fields are borrowed from SQLite: valid until the next call of the
 * iterator or kp_db_rows_close; copy what you keep. A NULL text is NULL, a
 * NULL integer reads 0 unless a field says otherwise.
 */
#ifndef KP_DB_READ_H
#define KP_DB_READ_H

#include <stdint.h>

#include "db.h"

/* One query in progress (opaque); close with kp_db_rows_close. */
struct kp_db_rows;

/* Finish the query and free it; NULL is a no-op. */
void kp_db_rows_close(struct kp_db_rows *it);

/* ---- the run ---- */

/* A row of kp_runs. */
struct kp_db_run {
	int64_t run_id;
	int64_t created_ns;
	const char *source;             /* record | chrome | nsys | synthetic */
	const char *source_path;        /* the trace or program, or NULL */
	const char *device_name;        /* NULL when unknown */
	int64_t compute_major, compute_minor, sm_count;
	int64_t driver_version, runtime_version, cupti_version;   /* 0: unknown */
	const char *status;             /* complete | partial | failed */
	const char *command;            /* the recorded command line, or NULL */
	int64_t t_begin_ns, t_end_ns;   /* first and last record time; 0: unknown */
	int64_t dropped_records;
	const char *dropped_detail;     /* what was dropped and why, or NULL */
	int has_overhead;               /* 0: the collector's time is not known */
	int64_t overhead_ns;
	/* a rank of a multi-process job (schema v4; v6 for clock_base_ns):
	 * has_* 0 when the run does not say */
	int has_rank, has_world_size, has_clock_base;
	int64_t rank, world_size;
	int64_t clock_base_ns;          /* added to the run's times: the job's shared clock */
};

/* The runs of db in runId order; run > 0: only that one (no row when it is
 * not there). */
int kp_db_runs(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_run_next(struct kp_db_rows *it, struct kp_db_run *r, struct kp_err *err);

/* A GPU of the run (TARGET_INFO_GPU), by device ordinal. */
struct kp_db_gpu {
	int64_t id;                     /* device ordinal */
	const char *name;
	int64_t total_memory;           /* bytes */
	int64_t compute_major, compute_minor;
	int64_t max_threads_per_block, max_registers_per_sm;
	int64_t max_shmem_per_block, max_shmem_per_sm;   /* bytes */
	int64_t threads_per_warp, sm_count;
	int64_t clock_rate;             /* kHz; 0: unknown */
	int64_t l2_cache_size;          /* bytes; 0: unknown */
	int64_t memory_bandwidth;       /* bytes/s; 0: unknown */
};

int kp_db_gpus(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_gpu_next(struct kp_db_rows *it, struct kp_db_gpu *g, struct kp_err *err);

/* A stream that ran GPU work (a kernel, copy or memset), by device, stream. */
struct kp_db_stream {
	int64_t device, stream;
};

int kp_db_streams(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_stream_next(struct kp_db_rows *it, struct kp_db_stream *s, struct kp_err *err);

/* ---- host side ---- */

/* A CUDA runtime or driver API call (CUPTI_ACTIVITY_KIND_RUNTIME), by start. */
struct kp_db_api_call {
	int64_t start, end;
	int64_t event_class;            /* 0 runtime, 1 driver (KP_API_DRIVER) */
	int64_t gtid;                   /* globalTid: (pid << 24) | tid */
	int64_t correlation;
	const char *name;               /* cudaLaunchKernel, ... */
	int64_t return_value;
};

int kp_db_api_calls(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_api_call_next(struct kp_db_rows *it, struct kp_db_api_call *c, struct kp_err *err);

/* An API call's correlation id and start, in the order SQLite reads them
 * (no sort: one pass over a big table); calls without a correlation id are
 * left out. A reader maps each GPU op to its launch call from these
 * instead of a lookup per op. */
struct kp_db_api_corr {
	int64_t correlation, start;
};

int kp_db_api_corrs(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_api_corr_next(struct kp_db_rows *it, struct kp_db_api_corr *c, struct kp_err *err);

/* An API call's span and name, in the order SQLite reads them (no sort). */
struct kp_db_api_span {
	int64_t start, end;
	int64_t name_id;                /* StringIds id: the same id, the same name */
	const char *name;               /* NULL when the id has no string */
};

int kp_db_api_spans(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_api_span_next(struct kp_db_rows *it, struct kp_db_api_span *s, struct kp_err *err);

/* An NVTX range or mark (NVTX_EVENTS, event types 34, 59, 60), by start. */
struct kp_db_nvtx {
	int64_t start;
	int64_t end;                    /* 0 for a mark */
	int is_mark;                    /* no end: a mark */
	int64_t event_type;             /* 34 mark, 59 push/pop, 60 start/end */
	int64_t category;
	int64_t gtid;
	const char *text;               /* its own or interned text */
	int64_t domain_id;              /* 0: the default domain */
	const char *domain;             /* the domain's name (from its create
					   event), NULL for the default domain */
};

int kp_db_nvtx(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_nvtx_next(struct kp_db_rows *it, struct kp_db_nvtx *e, struct kp_err *err);

/* An NVTX range (event types 59, 60) whose end is not before its start, in
 * the order SQLite reads them (no sort). */
struct kp_db_nvtx_range {
	int64_t start, end;
	const char *text;               /* its own or interned text */
	int64_t domain_id;              /* -1: no domain */
};

int kp_db_nvtx_ranges(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err);
int kp_db_nvtx_range_next(struct kp_db_rows *it, struct kp_db_nvtx_range *r,
			  struct kp_err *err);

/* An NVTX domain's create event (event type 75), in the order SQLite
 * reads them. */
struct kp_db_nvtx_domain {
	int64_t domain_id;
	const char *name;               /* the event's own text; NULL when interned */
};

int kp_db_nvtx_domains(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		       struct kp_err *err);
int kp_db_nvtx_domain_next(struct kp_db_rows *it, struct kp_db_nvtx_domain *d,
			   struct kp_err *err);

/* The NVTX ranges (event types 59, 60) that hold time t, latest start
 * first, at most 16: those of thread gtid (has_gtid) or of every thread;
 * a range without a thread holds t on every thread. */
struct kp_db_nvtx_holder {
	const char *text;               /* its own or interned text */
	const char *domain;             /* the domain's create event's own text;
					   "" when it has none */
};

int kp_db_nvtx_holding(struct kp_db *db, int64_t run, int64_t t, int has_gtid, int64_t gtid,
		       struct kp_db_rows **it, struct kp_err *err);
int kp_db_nvtx_holder_next(struct kp_db_rows *it, struct kp_db_nvtx_holder *h,
			   struct kp_err *err);

/* An interval of profiler overhead (PROFILER_OVERHEAD), by start. */
struct kp_db_overhead {
	int64_t start, end, gtid;
	const char *name;               /* NULL when unnamed */
};

int kp_db_overheads(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_overhead_next(struct kp_db_rows *it, struct kp_db_overhead *o, struct kp_err *err);

/* ---- GPU side ---- */

/* Where and when a GPU operation ran: what every activity table holds. */
struct kp_db_op {
	int64_t start, end;             /* ns */
	int64_t device, context, stream, correlation;
};

/* The API call that launched a GPU operation (same correlation id). */
struct kp_db_launch {
	int found;                      /* the call is in the run: */
	int64_t start;                  /* its start (ns) */
	int64_t gtid;                   /* and its thread */
	int has_gtid;                   /* 0: the call has no thread */
};

/* The API call with correlation id corr (the first the table holds) as a
 * GPU op's launch, into *l (OUT); l->found 0 when the run has none. */
int kp_db_launch_of(struct kp_db *db, int64_t run, int64_t corr, struct kp_db_launch *l,
		    struct kp_err *err);

/* A kernel execution (CUPTI_ACTIVITY_KIND_KERNEL) with its name, its
 * launching call and its launch attributes. */
/* A value that may be NULL: type 0 NULL, 1 integer (i), 2 text (t). */
struct kp_db_value {
	int type;
	int64_t i;
	const char *t;
};

/* A collective kernel's metadata (kp_collectives, schema v6: imported
 * PyTorch traces), in the order Kineto writes it on the kernel (see
 * kp_db_coll_keys); each field NULL where the trace did not say. */
enum kp_db_coll_field {
	KP_DB_COLL_NAME, KP_DB_COLL_DTYPE, KP_DB_COLL_IN_NELEMS, KP_DB_COLL_OUT_NELEMS,
	KP_DB_COLL_GROUP_SIZE, KP_DB_COLL_PG_NAME, KP_DB_COLL_PG_DESC, KP_DB_COLL_RANKS,
	KP_DB_COLL_SEQ, KP_DB_COLL__N
};

/* Kineto's key of each field ("Collective name", "dtype", "In msg nelems"...). */
extern const char *const kp_db_coll_keys[KP_DB_COLL__N];

struct kp_db_kernel {
	struct kp_db_op op;
	const char *name;               /* demangled */
	int64_t registers_per_thread;
	int64_t grid[3], block[3];
	int64_t static_smem, dynamic_smem;   /* bytes */
	int64_t launch_type, cache_config;
	int64_t local_mem_per_thread, local_mem_total;
	int64_t grid_id, graph_node_id, graph_id;
	struct kp_db_launch launch;
	int pdl;                        /* programmatic dependent launch
					   (kp_launch_attrs; 0 in databases before it) */
	struct kp_db_value coll[KP_DB_COLL__N];   /* all NULL: not a known collective */
};

/* The kernels of run in start order. */
int kp_db_kernels(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_kernel_next(struct kp_db_rows *it, struct kp_db_kernel *k, struct kp_err *err);

/* A copy (CUPTI_ACTIVITY_KIND_MEMCPY), by start. */
struct kp_db_memcpy {
	struct kp_db_op op;
	int64_t bytes;
	int64_t copy_kind;              /* CUpti_ActivityMemcpyKind */
	int64_t src_kind, dst_kind;     /* CUpti_ActivityMemoryKind */
	struct kp_db_launch launch;
};

int kp_db_memcpys(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_memcpy_next(struct kp_db_rows *it, struct kp_db_memcpy *c, struct kp_err *err);

/* A memset (CUPTI_ACTIVITY_KIND_MEMSET), by start. */
struct kp_db_memset {
	struct kp_db_op op;
	int64_t bytes, value;
	int64_t mem_kind;               /* CUpti_ActivityMemoryKind */
	struct kp_db_launch launch;
};

int kp_db_memsets(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_memset_next(struct kp_db_rows *it, struct kp_db_memset *m, struct kp_err *err);

/* A synchronisation (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), by start. */
struct kp_db_sync {
	struct kp_db_op op;
	int64_t sync_type;              /* CUpti_ActivitySynchronizationType */
	int64_t event_id;               /* 0: none */
};

int kp_db_syncs(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_sync_next(struct kp_db_rows *it, struct kp_db_sync *s, struct kp_err *err);

/* The GPU ops of one table (enum kp_db_op_table) that overlap [t0, t1), in
 * (device, stream, start) order without joins: kernels through their
 * (runId, deviceId, streamId, start) index, so the big table is never
 * sorted. A reader merges the tables' iterators into one stream order. */
enum kp_db_op_table { KP_DB_OPS_KERNELS, KP_DB_OPS_MEMCPYS, KP_DB_OPS_MEMSETS };

struct kp_db_stream_op {
	int64_t device, stream, start, end;
	int has_correlation;            /* 0: the op has no correlation id */
	int64_t correlation;
	int64_t name_id;                /* a kernel's demangled name (StringIds
					   id); 0 for copies and memsets */
};

int kp_db_stream_ops(struct kp_db *db, int64_t run, enum kp_db_op_table table, int64_t t0,
		     int64_t t1, struct kp_db_rows **it, struct kp_err *err);
int kp_db_stream_op_next(struct kp_db_rows *it, struct kp_db_stream_op *o, struct kp_err *err);

/* The extent of one kind of row of a run: the first start, the last end
 * and how many. */
enum kp_db_extent_of {
	KP_DB_EXTENT_KERNELS, KP_DB_EXTENT_MEMCPYS, KP_DB_EXTENT_MEMSETS,
	KP_DB_EXTENT_API_CALLS,
	KP_DB_EXTENT_NVTX_RANGES,       /* as kp_db_nvtx_ranges reads them */
	KP_DB_EXTENT_OVERHEAD,          /* PROFILER_OVERHEAD */
};

struct kp_db_extent {
	int has_start, has_end;         /* 0: no rows */
	int64_t start, end;             /* ns; 0 without rows */
	int64_t count;
	int64_t sum_ns;                 /* the sum of end - start; 0 without rows */
};

/* Fill *e (OUT) for the rows of run; 0 or a negative KP_E*. */
int kp_db_extent(struct kp_db *db, int64_t run, enum kp_db_extent_of of,
		 struct kp_db_extent *e, struct kp_err *err);

/* ---- per-name summaries ---- */

/* The kernels of a run grouped by demangled name, by total time (most
 * first), then count, then name; a kernel whose name id has no string is
 * left out. */
struct kp_db_kernel_sum {
	int64_t name_id;                /* StringIds id of the demangled name */
	const char *name;               /* demangled */
	const char *short_name;         /* NULL when unknown */
	int64_t count;
	int64_t total_ns, min_ns, max_ns;
};

int kp_db_kernel_sums(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err);
int kp_db_kernel_sum_next(struct kp_db_rows *it, struct kp_db_kernel_sum *k,
			  struct kp_err *err);

/* The API calls of a run grouped by name and event class, by total time
 * (most first), then count, name, class; a call whose name id has no string
 * is left out. */
struct kp_db_api_sum {
	const char *name;
	int64_t event_class;            /* 0 runtime, 1 driver */
	int64_t count;
	int64_t total_ns, min_ns, max_ns;
};

int kp_db_api_sums(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
int kp_db_api_sum_next(struct kp_db_rows *it, struct kp_db_api_sum *a, struct kp_err *err);

/* ---- the analysis ---- */

/* One occurrence of an analyzed region (kp_region_occurrences with its
 * kp_regions row), by region, then occurrence. */
struct kp_db_region_occ {
	int64_t region_id;
	const char *label;
	int64_t occ_index;              /* 0, 1, ... per region */
	int64_t start, end;             /* ns */
	int64_t kernels;
	const char *source;             /* nvtx | mined | split | runtime | graph */
	int capturable;
};

int kp_db_region_occs(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err);
int kp_db_region_occ_next(struct kp_db_rows *it, struct kp_db_region_occ *o,
			  struct kp_err *err);

/* A host-bound gap before a kernel (kp_gaps with host_bound = 1 and a
 * positive gap), by device, stream, then kernel start. */
struct kp_db_host_gap {
	int64_t device, stream, correlation;
	int64_t kernel_start;           /* the gap ends there */
	int64_t gap_ns, queue_ns, launch_api_ns;
};

int kp_db_host_gaps(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		    struct kp_err *err);
int kp_db_host_gap_next(struct kp_db_rows *it, struct kp_db_host_gap *g,
			struct kp_err *err);

#endif
