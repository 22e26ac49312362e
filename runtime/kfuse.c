/*
 * kfuse.c - fused kernels built outside a plan (kp_rt_kernel_load/launch,
 * include/kplan/runtime.h): kplan.torch generates one CUDA kernel per chain
 * of pointwise ATen ops while it captures a region, and launches it on the
 * capturing stream, so that the kernel becomes one node of PyTorch's graph
 * in place of the chain's nodes.
 *
 * Compilation goes through fused_load_cuda.c's load (NVRTC with the options and
 * the signed-by-digest CUBIN cache of plan fusion). Its modules are never
 * unloaded: the ops instance is the process's, and a graph that captured a
 * launch keeps the function's address. A load may come while the calling
 * thread captures a stream: it runs in relaxed capture mode (NVRTC, module
 * loads and cudaFree(0) are not stream work, but a strict capture mode would
 * refuse them and invalidate the capture).
 *
 * kp_rt_kernel_precompile fills the same cache ahead of time, for a named
 * compute capability, on a machine without a GPU: a deployment that ships
 * the cache entries pays no NVRTC time.
 */
#include "rt_internal.h"
#include "fused_load.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../common/hash.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct kp__rt_fusion_ops ops;      /* zero until the first load */
static unsigned n_loaded;                 /* loads into ops.ctx */
static __typeof__(&cuLaunchKernel) launch_fn;

static int ensure(char *msg, size_t mlen)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	/* a context holds 256 modules (fused_load_cuda.c): the next one gets a
	 * fresh context; the full one stays, its modules loaded */
	if (n_loaded >= 250)
		ops.load = NULL;
	if (ops.load && launch_fn)
		return 0;
	if (!kp__rt_fusion_cuda_ops) {
		snprintf(msg, mlen, "no CUDA fusion in this build");
		return -1;
	}
	if (!ops.load) {
		const struct kp__rt_fusion_ops *o = kp__rt_fusion_cuda_ops();

		if (!o) {
			snprintf(msg, mlen, "out of memory");
			return -1;
		}
		ops = *o;   /* the returned struct is per thread; its ctx is ours for good */
		n_loaded = 0;
	}
	if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, CUDART_VERSION,
					     cudaEnableDefault, &q) ||
	    q != cudaDriverEntryPointSuccess || !fn) {
		snprintf(msg, mlen, "driver entry point cuLaunchKernel not found");
		return -1;
	}
	memcpy(&launch_fn, &fn, sizeof(fn));
	return 0;
}

/*
 * Where an entry point writes its message: the caller's msg[0..*len), or
 * dummy when the caller passed none; emptied.
 */
static char *message_buf(char *msg, size_t *len, char *dummy, size_t dummy_len)
{
	if (!msg || !*len) {
		msg = dummy;
		*len = dummy_len;
	}
	msg[0] = 0;
	return msg;
}

KP_RT_API int kp_rt_kernel_load(kp_rt *rt, const char *src, size_t len, const char *name,
				void **fn, char *msg, size_t msg_len)
{
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	char dummy[8];
	int rc;

	msg = message_buf(msg, &msg_len, dummy, sizeof(dummy));
	if (fn)
		*fn = NULL;
	if (!rt || !src || !len || !name || !fn) {
		snprintf(msg, msg_len, "bad arguments");
		return -1;
	}
	if (!kp__rt_source_trusted(rt, src, len)) {
		snprintf(msg, msg_len, "untrusted-source: a trust key is set and the plan's "
			 "signature does not cover this source");
		return -1;
	}
	pthread_mutex_lock(&mu);
	rc = ensure(msg, msg_len);
	if (!rc) {
		cudaThreadExchangeStreamCaptureMode(&mode);
		rc = ops.load(ops.ctx, src, len, kp_hash64(src, len, KP_HASH_SEED), name, fn, msg,
			      msg_len) ? -1 : 0;
		n_loaded += !rc;
		cudaThreadExchangeStreamCaptureMode(&mode);
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

KP_RT_API int kp_rt_kernel_launch(void *fn, unsigned grid, unsigned block, void *stream,
				  void **args)
{
	if (!fn || !launch_fn || !grid || !block)
		return (int)CUDA_ERROR_INVALID_VALUE;
	return (int)launch_fn((CUfunction)fn, grid, 1, 1, block, 1, 1, 0, (CUstream)stream,
			      args, NULL);
}

KP_RT_API int kp_rt_kernel_precompile(const char *src, size_t len, int cc_major, int cc_minor,
				      char *msg, size_t msg_len)
{
	char dummy[8];
	int rc;

	msg = message_buf(msg, &msg_len, dummy, sizeof(dummy));
	if (!src || !len || cc_major < 1 || cc_major > 99 || cc_minor < 0 || cc_minor > 9) {
		snprintf(msg, msg_len, "bad arguments");
		return -1;
	}
	if (!kp__rt_fusion_precompile) {
		snprintf(msg, msg_len, "no CUDA fusion in this build");
		return -1;
	}
	pthread_mutex_lock(&mu);
	rc = kp__rt_fusion_precompile(src, len, cc_major, cc_minor, msg, msg_len);
	pthread_mutex_unlock(&mu);
	return rc;
}
