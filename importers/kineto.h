/*
 * kineto.h - internal to importers/: the names the PyTorch profiler (Kineto)
 * uses in Chrome traces, shared by the reader (chrome*.c) and the writer
 * (chrome_export.c) so that import(export(db)) gives the same rows.
 */
#ifndef KP_KINETO_H
#define KP_KINETO_H

#include <stddef.h>
#include <stdint.h>

#include "../db/db.h"
#include "import.h"

/* Event categories, as Kineto spells them. */
#define KP_CAT_KERNEL "kernel"
#define KP_CAT_MEMCPY "gpu_memcpy"
#define KP_CAT_MEMSET "gpu_memset"
#define KP_CAT_RUNTIME "cuda_runtime"
#define KP_CAT_DRIVER "cuda_driver"
#define KP_CAT_SYNC "cuda_sync"
#define KP_CAT_ANNOT "user_annotation"
#define KP_CAT_GPU_ANNOT "gpu_user_annotation"
#define KP_CAT_CPU_OP "cpu_op"
#define KP_CAT_PYFUNC "python_function"   /* with_stack=True: one per Python call */
#define KP_CAT_FLOW "ac2g"
#define KP_CAT_OVERHEAD "overhead"
/* kplan's own tracks in exported traces; ignored on import */
#define KP_CAT_REGION "kplan_region"
#define KP_CAT_GAP "kplan_gap"

/* NVTX_EVENTS.category of a GPU-side projection of an annotation. */
#define KP_NVTX_CAT_GPU 1

/* globalTid / globalPid as nsys serializes them. */
#define KP_GLOBAL_TID(pid, tid) ((int64_t)(pid) * (1 << 24) + ((int64_t)(tid) & 0xffffff))
#define KP_GLOBAL_PID(pid) ((int64_t)(pid) * (1 << 24))
#define KP_GTID_PID(g) ((int64_t)(g) >> 24)
#define KP_GTID_TID(g) ((int64_t)(g) & 0xffffff)

/* "HtoD", ... for CUpti_ActivityMemcpyKind; "Unknown" when out of range. */
const char *kp__memcpy_kind_name(int kind);
/* "Pageable", "Device", ... for CUpti_ActivityMemoryKind. */
const char *kp__memory_kind_name(int kind);
/* Inverse lookups over len bytes; -1 when unknown. */
int kp__memcpy_kind_parse(const char *s, size_t len);
int kp__memory_kind_parse(const char *s, size_t len);
/*
 * Parse Kineto's "Memcpy HtoD (Pageable -> Device)" / "Memset (Device)"
 * names. Fields not found are left unchanged. Return 0 when the name had
 * the expected shape, -1 otherwise.
 */
int kp__memcpy_name_parse(const char *name, int *copy_kind, int *src_kind, int *dst_kind);
int kp__memset_name_parse(const char *name, int *mem_kind);
/* "Event Sync", "Stream Wait Event", ... for CUpti_ActivitySynchronizationType. */
const char *kp__sync_name(int type);
int kp__sync_parse(const char *name);

/* The run-row fields an importer learns after the run row exists. */
struct kp__run_update {
	int64_t pid;
	const char *device_name;
	int compute_major, compute_minor, sm_count;
	int driver_version, runtime_version, cupti_version;
	int has_rank, rank, world_size;   /* a trace's distributedInfo; world_size -1 not said */
	int64_t clock_base_ns;            /* baseTimeNanoseconds; 0 not said */
};
int kp__run_update(struct kp_db *db, int64_t run_id, const struct kp__run_update *u,
		   struct kp_err *err);

#endif
