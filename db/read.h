/*
 * read.h - the typed read API: iterators over one run's rows, which hand a
 * reader named fields instead of the schema's columns, joins and NULL rules
 * (the way to read chosen in docs/DESIGN.md, "Database"). It covers runs,
 * kernels and region occurrences so far, with importers/chrome_export.c as
 * its first reader; the other readers move to it one table at a time.
 *
 *   struct kp_db_rows *it;
 *   struct kp_db_kernel k;
 *   int rc = kp_db_kernels(db, run, &it, err);
 *   while (!rc && (rc = kp_db_kernel_next(it, &k, err)) > 0)
 *           use(&k);
 *   kp_db_rows_close(it);      (rc < 0: err says what failed)
 *
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
};

/* The runs of db in runId order; run_id > 0: only that one (no row when it
 * is not there). OUT: *it. 0 or KP_E*. */
int kp_db_runs(struct kp_db *db, int64_t run_id, struct kp_db_rows **it, struct kp_err *err);
/* The next run: 1 (filled *r), 0 at the end, or a negative KP_E*. */
int kp_db_run_next(struct kp_db_rows *it, struct kp_db_run *r, struct kp_err *err);

/* A kernel execution (CUPTI_ACTIVITY_KIND_KERNEL) with what readers join to
 * it: its name, the API call that launched it, its launch attributes. */
struct kp_db_kernel {
	int64_t start, end;             /* ns */
	int64_t device, context, stream, correlation;
	const char *name;               /* demangled */
	int64_t registers_per_thread;
	int64_t grid[3], block[3];
	int64_t static_smem, dynamic_smem;   /* bytes */
	int64_t launch_type, cache_config;
	int64_t local_mem_per_thread, local_mem_total;
	int64_t grid_id, graph_node_id, graph_id;
	int has_launch;                 /* the launching API call is in the run: */
	int64_t launch_start;           /* its start (ns) */
	int64_t launch_gtid;            /* and its thread (globalTid) */
	int pdl;                        /* launched with programmatic dependent launch
					   (kp_launch_attrs; 0 in databases before it) */
};

/* The kernels of run in start order. OUT: *it. 0 or KP_E*. */
int kp_db_kernels(struct kp_db *db, int64_t run, struct kp_db_rows **it, struct kp_err *err);
/* The next kernel: 1 (filled *k), 0 at the end, or a negative KP_E*. */
int kp_db_kernel_next(struct kp_db_rows *it, struct kp_db_kernel *k, struct kp_err *err);

/* One occurrence of an analyzed region (kp_region_occurrences with its
 * kp_regions row). */
struct kp_db_region_occ {
	int64_t region_id;
	const char *label;
	int64_t occ_index;              /* 0, 1, ... per region */
	int64_t start, end;             /* ns */
	int64_t kernels;
	const char *source;             /* nvtx | mined | split | runtime | graph */
	int capturable;
};

/* The region occurrences of run, by region, then occurrence. OUT: *it. */
int kp_db_region_occs(struct kp_db *db, int64_t run, struct kp_db_rows **it,
		      struct kp_err *err);
/* The next occurrence: 1 (filled *o), 0 at the end, or a negative KP_E*. */
int kp_db_region_occ_next(struct kp_db_rows *it, struct kp_db_region_occ *o,
			  struct kp_err *err);

#endif
