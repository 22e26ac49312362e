/*
 * gpuinfo.c - see gpuinfo.h. The driver API is reached through dlsym so the
 * CLI has no link-time dependency on CUDA.
 */
#include "gpuinfo.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* from cuda.h (stable ABI values, not included so no CUDA headers are needed) */
#define CU_ATTR_MULTIPROCESSOR_COUNT 16
#define CU_ATTR_COMPUTE_CAPABILITY_MAJOR 75
#define CU_ATTR_COMPUTE_CAPABILITY_MINOR 76

typedef int (*fn_init)(unsigned);
typedef int (*fn_count)(int *);
typedef int (*fn_get)(int *, int);
typedef int (*fn_name)(char *, int, int);
typedef int (*fn_attr)(int *, int, int);
typedef int (*fn_version)(int *);

int kp_gpuinfo_local(int ordinal, struct kp_gpu_desc *gpu, char *name_buf, size_t n,
		     struct kp_err *err)
{
	const char *lib = getenv("KPLAN_LIBCUDA") ? getenv("KPLAN_LIBCUDA") : "libcuda.so.1";
	fn_init cu_init;
	fn_count cu_count;
	fn_get cu_get;
	fn_name cu_name;
	fn_attr cu_attr;
	fn_version cu_version;
	int rc, count = 0, dev = 0, v = 0, maj = -1, min = -1, sms = -1;
	void *h;

	kp_gpu_desc_init(gpu);
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return kp_err_set(err, KP_ENOTFOUND, "no NVIDIA driver: cannot load %s", lib);
	cu_init = (fn_init)dlsym(h, "cuInit");
	cu_count = (fn_count)dlsym(h, "cuDeviceGetCount");
	cu_get = (fn_get)dlsym(h, "cuDeviceGet");
	cu_name = (fn_name)dlsym(h, "cuDeviceGetName");
	cu_attr = (fn_attr)dlsym(h, "cuDeviceGetAttribute");
	cu_version = (fn_version)dlsym(h, "cuDriverGetVersion");
	if (!cu_init || !cu_count || !cu_get || !cu_name || !cu_attr || !cu_version)
		return kp_err_set(err, KP_ENOTFOUND, "%s lacks the driver API entry points", lib);
	if ((rc = cu_init(0)))
		return kp_err_set(err, KP_ENOTFOUND, "no usable GPU: cuInit failed with CUDA error %d", rc);
	if ((rc = cu_count(&count)))
		return kp_err_set(err, KP_ECUDA, "cuDeviceGetCount failed with CUDA error %d", rc);
	if (ordinal < 0 || ordinal >= count)
		return kp_err_set(err, KP_ENOTFOUND, "no GPU %d: the driver sees %d device%s",
				  ordinal, count, count == 1 ? "" : "s");
	if ((rc = cu_get(&dev, ordinal)) || (rc = cu_name(name_buf, (int)n, dev)) ||
	    (rc = cu_attr(&maj, CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev)) ||
	    (rc = cu_attr(&min, CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev)) ||
	    (rc = cu_attr(&sms, CU_ATTR_MULTIPROCESSOR_COUNT, dev)) || (rc = cu_version(&v)))
		return kp_err_set(err, KP_ECUDA, "querying GPU %d failed with CUDA error %d", ordinal, rc);
	name_buf[n - 1] = '\0';
	gpu->name = name_buf;
	gpu->cc_major = maj;
	gpu->cc_minor = min;
	gpu->sm_count = sms;
	gpu->driver_version = v;
	gpu->cuda_major = v / 1000;
	return 0;
}
