/*
 * cuda_info.c - what the collector asks CUPTI and the driver: callback
 * names (for the decoder, and to walk every API call), demangled kernel
 * names, driver and runtime versions, and device rows when CUPTI sent none.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../db/db.h"

const char *kp__col_cupti_msg(CUptiResult r)
{
	const char *s = NULL;

	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown cupti error";
	return s;
}

/* fn(d, cbid, name, arg) for every named callback id of the runtime (d 0)
 * and driver (d 1) API domains */
void kp__col_each_callback(void (*fn)(int d, uint32_t cbid, const char *name, void *arg),
			  void *arg)
{
	const char *name;
	uint32_t cbid;
	int d;

	for (d = 0; d < 2; d++) {
		for (cbid = 1; cbid < KP__N_CBIDS; cbid++) {
			if (cuptiGetCallbackName(kp__col_api_domain(d), cbid, &name) == CUPTI_SUCCESS && name)
				fn(d, cbid, name, arg);
		}
	}
}

/* CUPTI's name for a callback id, as nsys shows it ("cudaLaunchKernel_v7000");
 * cached per id (only the writer thread calls this). */
const char *kp__col_api_name(void *ctx, int driver, uint32_t cbid)
{
	static const char *cache[2][KP__N_CBIDS];
	const char *name = NULL;

	(void)ctx;
	if (cbid < KP__N_CBIDS && cache[driver != 0][cbid])
		return cache[driver != 0][cbid];
	if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
				 cbid, &name) != CUPTI_SUCCESS)
		return NULL;
	if (cbid < KP__N_CBIDS)
		cache[driver != 0][cbid] = name;
	return name;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

char *kp__col_demangle(void *ctx, const char *mangled)
{
	static demangle_fn fn;
	static int looked;
	int status = 0;
	char *s;

	(void)ctx;
	if (mangled[0] != '_' || mangled[1] != 'Z')
		return NULL;
	if (!looked) {
		looked = 1;
		fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!fn) {
			void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

			if (h)
				fn = (demangle_fn)dlsym(h, "__cxa_demangle");
		}
	}
	if (!fn)
		return NULL;
	s = fn(mangled, NULL, NULL, &status);
	if (status) {
		free(s);
		return NULL;
	}
	return s;
}

/* A driver or runtime symbol: the driver is often dlopen'ed RTLD_LOCAL (by
 * static cudart, by PyTorch), so RTLD_DEFAULT alone does not find it. */
void *kp__col_cuda_sym(const char *name)
{
	static const char *const libs[] = { "libcuda.so.1", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so", NULL };
	void *p = dlsym(RTLD_DEFAULT, name), *h;
	size_t i;

	for (i = 0; !p && libs[i]; i++) {
		if ((h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD))) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	return p;
}

typedef CUresult (*drv_int_fn)(int *);
typedef int (*rt_int_fn)(int *);

int kp__col_driver_version(void)
{
	drv_int_fn fn = (drv_int_fn)kp__col_cuda_sym("cuDriverGetVersion");
	int v = 0;

	if (fn && fn(&v) != CUDA_SUCCESS)
		v = 0;
	return v;
}

int kp__col_runtime_version(void)
{
	/* only visible when the app links libcudart dynamically */
	rt_int_fn fn = (rt_int_fn)kp__col_cuda_sym("cudaRuntimeGetVersion");
	int v = 0;

	if (fn && fn(&v) != 0)
		v = 0;
	return v;
}

/* Device rows from the driver, for when CUPTI sent no DEVICE record. */
void kp__col_devices_from_driver(struct kp_writer *w)
{
	CUresult (*get_count)(int *) = (CUresult (*)(int *))kp__col_cuda_sym("cuDeviceGetCount");
	CUresult (*get_name)(char *, int, CUdevice) =
		(CUresult (*)(char *, int, CUdevice))kp__col_cuda_sym("cuDeviceGetName");
	CUresult (*get_attr)(int *, CUdevice_attribute, CUdevice) =
		(CUresult (*)(int *, CUdevice_attribute, CUdevice))kp__col_cuda_sym("cuDeviceGetAttribute");
	CUresult (*total_mem)(size_t *, CUdevice) =
		(CUresult (*)(size_t *, CUdevice))kp__col_cuda_sym("cuDeviceTotalMem_v2");
	int n = 0, i;

	if (!get_count || !get_name || !get_attr || get_count(&n) != CUDA_SUCCESS)
		return;
	for (i = 0; i < n && i < 64; i++) {
		struct kp_gpu_rec r;
		char name[256] = "";
		size_t mem = 0;
		int v;

		memset(&r, 0, sizeof(r));
		get_name(name, sizeof(name), i);
		r.id = i;
		r.name = name;
#define ATTR(field, a) do { v = 0; get_attr(&v, a, i); r.field = v; } while (0)
		ATTR(sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
		ATTR(compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
		ATTR(compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
		ATTR(clock_rate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
		ATTR(l2_cache_size, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
		ATTR(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
		ATTR(max_registers_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
		ATTR(max_shmem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
		ATTR(max_shmem_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
		ATTR(threads_per_warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
#undef ATTR
		if (total_mem && total_mem(&mem, i) == CUDA_SUCCESS)
			r.total_memory = (int64_t)mem;
		kp_writer_gpu(w, &r, NULL);
		if (i == 0) {
			sqlite3_stmt *st;

			if (!kp_db_prepare(w->db, "UPDATE kp_runs SET device_name = ?,"
					   " compute_major = ?, compute_minor = ?, sm_count = ?"
					   " WHERE runId = ? AND device_name IS NULL", &st, NULL)) {
				sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
				sqlite3_bind_int(st, 2, r.compute_major);
				sqlite3_bind_int(st, 3, r.compute_minor);
				sqlite3_bind_int(st, 4, r.sm_count);
				sqlite3_bind_int64(st, 5, w->run_id);
				sqlite3_step(st);
				sqlite3_finalize(st);
			}
		}
	}
}
