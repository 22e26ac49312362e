/*
 * cuda_backend.c - the CUDA implementation of struct kp__rt_backend, and
 * kp_rt_open / kp_rt_open_ex (the entry points that pick it).
 *
 * Graph nodes are read with the driver API: kernel node parameters come
 * from cuGraphKernelNodeGetParams, their layout from cuFuncGetParamInfo
 * (a kernel whose layout cannot be read fails the capture: patching blind
 * could leave a stale pointer in the graph). Updates go through
 * cuGraphExecKernelNodeSetParams with the node's own parameter buffer.
 * Error codes: cudaError_t values as they are, CUresult values + DRV_BASE.
 */
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#define DRV_BASE 100000

struct cnode {
	CUgraphNode node;
	CUDA_KERNEL_NODE_PARAMS p;    /* kernelParams points at ptrs */
	uint32_t *off, *size;
	void **ptrs;
};

/*
 * Driver entry points, resolved through the runtime
 * (cudaGetDriverEntryPointByVersion) so the library links only libcudart:
 * nothing to find at link time, and the ABI version is the one we compiled
 * against.
 */
static struct {
	__typeof__(&cuGetErrorName) GetErrorName;
	__typeof__(&cuGetErrorString) GetErrorString;
	__typeof__(&cuGraphKernelNodeGetParams) GraphKernelNodeGetParams;
	__typeof__(&cuKernelGetFunction) KernelGetFunction;
	__typeof__(&cuFuncGetName) FuncGetName;
	__typeof__(&cuFuncGetParamInfo) FuncGetParamInfo;
	__typeof__(&cuGraphMemsetNodeGetParams) GraphMemsetNodeGetParams;
	__typeof__(&cuGraphMemcpyNodeGetParams) GraphMemcpyNodeGetParams;
	__typeof__(&cuGraphGetNodes) GraphGetNodes;
	__typeof__(&cuGraphNodeGetType) GraphNodeGetType;
	__typeof__(&cuGraphExecKernelNodeSetParams) GraphExecKernelNodeSetParams;
} drvapi;

static int drvapi_load(void)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn;

#define LOAD(name, field) \
	if (cudaGetDriverEntryPointByVersion(#name, &fn, CUDART_VERSION, cudaEnableDefault, &q) || \
	    q != cudaDriverEntryPointSuccess || !fn) \
		return cudaErrorSymbolNotFound; \
	memcpy(&drvapi.field, &fn, sizeof(fn));
	LOAD(cuGetErrorName, GetErrorName)
	LOAD(cuGetErrorString, GetErrorString)
	LOAD(cuGraphKernelNodeGetParams, GraphKernelNodeGetParams)
	LOAD(cuKernelGetFunction, KernelGetFunction)
	LOAD(cuFuncGetName, FuncGetName)
	LOAD(cuFuncGetParamInfo, FuncGetParamInfo)
	LOAD(cuGraphMemsetNodeGetParams, GraphMemsetNodeGetParams)
	LOAD(cuGraphMemcpyNodeGetParams, GraphMemcpyNodeGetParams)
	LOAD(cuGraphGetNodes, GraphGetNodes)
	LOAD(cuGraphNodeGetType, GraphNodeGetType)
	LOAD(cuGraphExecKernelNodeSetParams, GraphExecKernelNodeSetParams)
#undef LOAD
	return 0;
}

static int drv(CUresult r)
{
	return r == CUDA_SUCCESS ? 0 : DRV_BASE + (int)r;
}

static const char *cb_strerror(void *ctx, int rc)
{
	static _Thread_local char buf[160];
	const char *name = NULL, *s = NULL;

	(void)ctx;
	if (rc >= DRV_BASE && drvapi.GetErrorName) {
		drvapi.GetErrorName((CUresult)(rc - DRV_BASE), &name);
		drvapi.GetErrorString((CUresult)(rc - DRV_BASE), &s);
	} else {
		name = cudaGetErrorName((cudaError_t)rc);
		s = cudaGetErrorString((cudaError_t)rc);
	}
	snprintf(buf, sizeof(buf), "%s (%s)", name ? name : "?", s ? s : "?");
	return buf;
}

static int cb_device(void *ctx, struct kp__rt_device *dev)
{
	struct cudaDeviceProp prop;
	int d, rc;

	(void)ctx;
	if ((rc = cudaGetDevice(&d)) || (rc = cudaGetDeviceProperties(&prop, d)) ||
	    (rc = cudaDriverGetVersion(&dev->driver_version)))
		return rc;
	snprintf(dev->name, sizeof(dev->name), "%s", prop.name);
	dev->cc_major = prop.major;
	dev->cc_minor = prop.minor;
	dev->sm_count = prop.multiProcessorCount;
	return 0;
}

static int cb_capture_begin(void *ctx, void *stream)
{
	(void)ctx;
	return cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
}

static int cb_capture_end(void *ctx, void *stream, void **graph)
{
	cudaGraph_t g = NULL;
	int rc;

	(void)ctx;
	rc = cudaStreamEndCapture((cudaStream_t)stream, &g);
	if (rc || !g) {
		if (g)
			cudaGraphDestroy(g);
		cudaGetLastError();   /* the invalidation error is not sticky: clear it */
		return rc ? rc : cudaErrorStreamCaptureInvalidated;
	}
	*graph = g;
	return 0;
}

static int cb_capturing(void *ctx, void *stream)
{
	enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;

	(void)ctx;
	cudaStreamIsCapturing((cudaStream_t)stream, &st);
	return st != cudaStreamCaptureStatusNone;
}

static void cb_nodes_free(void *ctx, struct kp__rt_node *nodes, size_t n)
{
	size_t i;

	(void)ctx;
	for (i = 0; i < n; i++) {
		struct cnode *c = nodes[i].handle;

		if (c) {
			free(c->off);
			free(c->size);
			free(c->ptrs);
			free(c);
		}
		free(nodes[i].params);
	}
	free(nodes);
}

static int read_kernel(CUgraphNode node, struct kp__rt_node *out)
{
	struct cnode *c = calloc(1, sizeof(*c));
	CUfunction f;
	size_t o, s, i, n = 0, len = 0, cap = 0;
	int rc;

	if (!c)
		return cudaErrorMemoryAllocation;
	out->handle = c;
	c->node = node;
	if ((rc = drv(drvapi.GraphKernelNodeGetParams(node, &c->p))))
		return rc;
	f = c->p.func;
	if (!f && c->p.kern && (rc = drv(drvapi.KernelGetFunction(&f, c->p.kern))))
		return rc;
	if (!f)
		return DRV_BASE + CUDA_ERROR_INVALID_HANDLE;
	if ((rc = drv(drvapi.FuncGetName(&out->name, f))))
		return rc;
	for (;;) {
		CUresult r = drvapi.FuncGetParamInfo(f, n, &o, &s);

		if (r == CUDA_ERROR_INVALID_VALUE)
			break;       /* past the last parameter */
		if (r != CUDA_SUCCESS)
			return drv(r);
		if (n == cap) {
			uint32_t *no, *ns;

			cap = cap ? 2 * cap : 16;
			no = realloc(c->off, cap * sizeof(*no));
			if (no)
				c->off = no;
			ns = realloc(c->size, cap * sizeof(*ns));
			if (ns)
				c->size = ns;
			if (!no || !ns)
				return cudaErrorMemoryAllocation;
		}
		c->off[n] = (uint32_t)o;
		c->size[n] = (uint32_t)s;
		if (o + s > len)
			len = o + s;
		n++;
	}
	out->params = calloc(len ? len : 1, 1);
	c->ptrs = calloc(n ? n : 1, sizeof(void *));
	if (!out->params || !c->ptrs)
		return cudaErrorMemoryAllocation;
	if (c->p.kernelParams) {
		for (i = 0; i < n; i++)
			memcpy(out->params + c->off[i], c->p.kernelParams[i], c->size[i]);
	} else if (c->p.extra) {
		void *buf = NULL;
		size_t bsz = 0;

		for (i = 0; c->p.extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (c->p.extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = c->p.extra[i + 1];
			else if (c->p.extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				bsz = *(size_t *)c->p.extra[i + 1];
		}
		if (buf)
			memcpy(out->params, buf, bsz < len ? bsz : len);
	}
	for (i = 0; i < n; i++)
		c->ptrs[i] = out->params + c->off[i];
	c->p.func = f;
	c->p.kernelParams = c->ptrs;
	c->p.extra = NULL;
	out->kind = KP__RT_NODE_KERNEL;
	out->grid[0] = c->p.gridDimX;
	out->grid[1] = c->p.gridDimY;
	out->grid[2] = c->p.gridDimZ;
	out->block[0] = c->p.blockDimX;
	out->block[1] = c->p.blockDimY;
	out->block[2] = c->p.blockDimZ;
	out->smem = c->p.sharedMemBytes;
	out->n_params = (uint32_t)n;
	out->param_off = c->off;
	out->param_size = c->size;
	out->params_len = len;
	return 0;
}

/* memset/memcpy: their device pointers as words (checked, never patched) */
static int read_memop(CUgraphNode node, CUgraphNodeType t, struct kp__rt_node *out)
{
	static const uint32_t off[2] = { 0, 8 }, size[2] = { 8, 8 };
	uint64_t w[2] = { 0, 0 };
	int rc;

	if (t == CU_GRAPH_NODE_TYPE_MEMSET) {
		CUDA_MEMSET_NODE_PARAMS mp;

		if ((rc = drv(drvapi.GraphMemsetNodeGetParams(node, &mp))))
			return rc;
		w[0] = mp.dst;
	} else {
		CUDA_MEMCPY3D cp;

		if ((rc = drv(drvapi.GraphMemcpyNodeGetParams(node, &cp))))
			return rc;
		w[0] = cp.srcDevice ? cp.srcDevice : (uintptr_t)cp.srcHost;
		w[1] = cp.dstDevice ? cp.dstDevice : (uintptr_t)cp.dstHost;
	}
	out->params = malloc(16);
	if (!out->params)
		return cudaErrorMemoryAllocation;
	memcpy(out->params, w, 16);
	out->params_len = 16;
	out->n_params = 2;
	out->param_off = off;
	out->param_size = size;
	out->kind = KP__RT_NODE_MEMOP;
	return 0;
}

static int cb_nodes(void *ctx, void *graph, struct kp__rt_node **out, size_t *n_out)
{
	CUgraphNode *hs = NULL;
	struct kp__rt_node *nodes = NULL;
	size_t n = 0, i;
	int rc;

	if ((rc = drv(drvapi.GraphGetNodes((CUgraph)graph, NULL, &n))))
		return rc;
	hs = calloc(n ? n : 1, sizeof(*hs));
	nodes = calloc(n ? n : 1, sizeof(*nodes));
	if (!hs || !nodes) {
		rc = cudaErrorMemoryAllocation;
		goto out;
	}
	if ((rc = drv(drvapi.GraphGetNodes((CUgraph)graph, hs, &n))))
		goto out;
	for (i = 0; i < n; i++) {
		CUgraphNodeType t;

		nodes[i].name = "";
		if ((rc = drv(drvapi.GraphNodeGetType(hs[i], &t))))
			goto out;
		if (t == CU_GRAPH_NODE_TYPE_KERNEL)
			rc = read_kernel(hs[i], &nodes[i]);
		else if (t == CU_GRAPH_NODE_TYPE_MEMSET || t == CU_GRAPH_NODE_TYPE_MEMCPY)
			rc = read_memop(hs[i], t, &nodes[i]);
		else
			nodes[i].kind = KP__RT_NODE_OTHER;
		if (rc)
			goto out;
	}
	*out = nodes;
	*n_out = n;
	nodes = NULL;
out:
	if (nodes)
		cb_nodes_free(ctx, nodes, n);
	free(hs);
	return rc;
}

static int cb_instantiate(void *ctx, void *graph, void **exec)
{
	cudaGraphExec_t x = NULL;
	int rc;

	(void)ctx;
	rc = cudaGraphInstantiateWithFlags(&x, (cudaGraph_t)graph,
					   cudaGraphInstantiateFlagAutoFreeOnLaunch);
	if (rc) {
		cudaGetLastError();
		return rc;
	}
	*exec = x;
	return 0;
}

static int cb_set_params(void *ctx, void *exec, struct kp__rt_node *node)
{
	struct cnode *c = node->handle;

	(void)ctx;
	return drv(drvapi.GraphExecKernelNodeSetParams((CUgraphExec)exec, c->node, &c->p));
}

static int cb_launch(void *ctx, void *exec, void *stream)
{
	(void)ctx;
	return cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream);
}

static void cb_graph_free(void *ctx, void *graph)
{
	(void)ctx;
	cudaGraphDestroy((cudaGraph_t)graph);
}

static void cb_exec_free(void *ctx, void *exec)
{
	(void)ctx;
	cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

static int cb_sync(void *ctx, void *stream)
{
	(void)ctx;
	return cudaStreamSynchronize((cudaStream_t)stream);
}

static int cb_dev_alloc(void *ctx, void **p, size_t n)
{
	(void)ctx;
	return cudaMalloc(p, n);
}

static void cb_dev_free(void *ctx, void *p)
{
	(void)ctx;
	cudaFree(p);
}

static int cb_dev_copy(void *ctx, void *dst, const void *src, size_t n, void *stream)
{
	(void)ctx;
	return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
}

static int cb_dev_equal(void *ctx, const void *a, const void *b, size_t n, int *equal)
{
	unsigned char *ha = malloc(n ? n : 1), *hb = malloc(n ? n : 1);
	int rc = cudaErrorMemoryAllocation;

	(void)ctx;
	if (ha && hb && !(rc = cudaMemcpy(ha, a, n, cudaMemcpyDeviceToHost)) &&
	    !(rc = cudaMemcpy(hb, b, n, cudaMemcpyDeviceToHost)))
		*equal = !memcmp(ha, hb, n);
	free(ha);
	free(hb);
	return rc;
}

static int64_t cb_graph_mem(void *ctx)
{
	unsigned long long v = 0;
	int d;

	(void)ctx;
	if (cudaGetDevice(&d) ||
	    cudaDeviceGetGraphMemAttribute(d, cudaGraphMemAttrUsedMemCurrent, &v))
		return 0;
	return (int64_t)v;
}

int kp__rt_cuda_backend(struct kp__rt_backend *be, struct kp_err *err)
{
	int rc;

	memset(be, 0, sizeof(*be));
	rc = cudaFree(0);     /* create the primary context now */
	if (rc)
		return kp_err_set(err, KP_ECUDA, "cannot initialise cuda: %s",
				  cb_strerror(NULL, rc));
	rc = drvapi_load();
	if (rc)
		return kp_err_set(err, KP_ECUDA, "cannot resolve the cuda driver entry points "
				  "(driver older than cuda %d.%d?): %s", CUDART_VERSION / 1000,
				  CUDART_VERSION % 1000 / 10, cb_strerror(NULL, rc));
	be->device = cb_device;
	be->capture_begin = cb_capture_begin;
	be->capture_end = cb_capture_end;
	be->capturing = cb_capturing;
	be->nodes = cb_nodes;
	be->nodes_free = cb_nodes_free;
	be->instantiate = cb_instantiate;
	be->set_params = cb_set_params;
	be->launch = cb_launch;
	be->graph_free = cb_graph_free;
	be->exec_free = cb_exec_free;
	be->sync = cb_sync;
	be->dev_alloc = cb_dev_alloc;
	be->dev_free = cb_dev_free;
	be->dev_copy = cb_dev_copy;
	be->dev_equal = cb_dev_equal;
	be->graph_mem = cb_graph_mem;
	be->strerror = cb_strerror;
	return 0;
}

KP_RT_API kp_rt *kp_rt_open_ex(const char *plan_path, const struct kp_rt_options *opt,
			       struct kp_rt_err *err)
{
	struct kp__rt_backend be;
	struct kp_err kerr = {0};
	struct kp_rt_options o = { 0, 0, -1, 0 };
	const char *dis = getenv("KPLAN_RT_DISABLE");

	if (opt)
		o = *opt;
	/* disabled or planless: never touch CUDA (all eager, nothing to capture) */
	if (o.flags & KP_RT_DISABLE || !plan_path ||
	    (!(o.flags & KP_RT_NO_ENV) && dis && atoi(dis))) {
		memset(&be, 0, sizeof(be));
		return kp__rt_open_backend(&be, plan_path, &o, err);
	}
	if (kp__rt_cuda_backend(&be, &kerr)) {
		if (err) {
			err->code = kerr.code;
			snprintf(err->msg, sizeof(err->msg), "%s", kerr.msg);
		}
		return NULL;
	}
	return kp__rt_open_backend(&be, plan_path, &o, err);
}

KP_RT_API kp_rt *kp_rt_open(const char *plan_path, struct kp_rt_err *err)
{
	return kp_rt_open_ex(plan_path, NULL, err);
}
