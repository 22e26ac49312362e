/*
 * gpuinfo.h - describe the local GPU without linking CUDA.
 *
 * The kplan CLI runs on CI machines without a GPU or a driver, so it never
 * links libcuda: kp_gpuinfo_local dlopen()s "libcuda.so.1" at run time (or
 * the file named by KPLAN_LIBCUDA, for tests) and calls the driver API
 * through function pointers.
 */
#ifndef KP_GPUINFO_H
#define KP_GPUINFO_H

#include <stddef.h>

#include "../common/err.h"
#include "../plan/planfile.h"

/*
 * Fill *gpu for device ordinal (name copied into name_buf[n], which gpu->name
 * then points at). Returns 0, or KP_ENOTFOUND (no driver library, no device,
 * ordinal out of range) / KP_ECUDA (a driver call failed) with err saying
 * which. The library stays loaded (the driver does not like being unloaded).
 */
int kp_gpuinfo_local(int ordinal, struct kp_gpu_desc *gpu, char *name_buf, size_t n,
		     struct kp_err *err);

#endif
