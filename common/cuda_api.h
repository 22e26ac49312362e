/*
 * cuda_api.h - what each CUDA runtime and driver API call is, from the one
 * table in cuda_api.def: the collector (which calls get API rows and
 * synchronisation records), the analyzer (call classes, blocker kinds) and
 * the runtime watch (capture breakers) all look calls up here. CUDA-free:
 * calls are known by name, as CUPTI, nsys and PyTorch traces spell them.
 */
#ifndef KP_CUDA_API_H
#define KP_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* The classes of cuda_api.def, KP_API_OTHER (0) first. */
enum kp_cuda_api_class {
#define KP_CUDA_API_CLASS(cls, breaks, what) KP_API_##cls,
#include "cuda_api.def"
	KP_API__N
};

/* The synchronisation record a call's callback gives (cuda_api.def, SYNC). */
enum kp_cuda_api_sync {
	KP_API_SYNC_NONE = 0, KP_API_SYNC_CONTEXT, KP_API_SYNC_STREAM, KP_API_SYNC_EVENT,
	KP_API_SYNC_WAIT,
};

/* One row of cuda_api.def. */
struct kp_cuda_api {
	const char *name;       /* base name: no _v2 / _ptsz / _ptds suffixes */
	uint8_t driver;         /* 1: driver API (cu*), 0: runtime API (cuda*) */
	uint8_t cls;            /* enum kp_cuda_api_class */
	uint8_t record;         /* the collector stores an API row for it */
	uint8_t sync;           /* enum kp_cuda_api_sync */
};

/*
 * The row of the call named name, in any of its flavours: leading
 * underscores, then trailing _v<N>, _ptsz and _ptds suffixes are ignored
 * ("__cudaLaunchKernel", "cuMemcpyHtoDAsync_v2_ptsz"). NULL when the table
 * does not name it. The row is static.
 */
const struct kp_cuda_api *kp_cuda_api_find(const char *name);

/* The class of the call named name (KP_API_OTHER when not in the table). */
int kp_cuda_api_class(const char *name);

/* 1 when a capture cannot hold a call of class cls, whatever its arguments. */
int kp_cuda_api_breaks(int cls);

/* The class's name ("EVENT_QUERY"), "?" out of range. */
const char *kp_cuda_api_class_name(int cls);

/* The whole table (static): *n rows. For tests and listings. */
const struct kp_cuda_api *kp_cuda_api_table(size_t *n);

#endif
