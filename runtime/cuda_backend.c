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
 *
 * Parameter layouts are read once per CUfunction and cached: CUDA 13.0 has
 * no parameter-count query, so the layout is probed with cuFuncGetParamInfo
 * until it answers CUDA_ERROR_INVALID_VALUE (past the last parameter). That
 * one expected error per distinct kernel is what compute-sanitizer lists as
 * an API error; the cache keeps it to one per kernel function per runtime,
 * instead of one per captured node.
 */
#include "rt_internal.h"
#include "watch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "../common/strbuf.h"
#include "../common/u64map.h"
#include "../common/vec.h"

#define DRV_BASE 100000

/*
 * A kernel's parameter layout, cached per handle the graph node names (its
 * CUkernel, or its CUfunction), with the CUfunction and name it was probed
 * for. Owned by the ctx (every layout ever probed stays until close: nodes
 * point at their arrays). Besides sparing the probe's expected errors, this
 * keeps the node walk after a capture to four driver calls per kernel node,
 * instead of five plus one per parameter.
 */
struct layout {
	CUfunction f;
	char *name;                   /* a copy */
	uint32_t n;
	size_t len;
	uint32_t *off, *size;
};

struct cuda_ctx {
	pthread_mutex_t lock;         /* guards fn and layouts */
	struct kp_u64map fn;          /* CUkernel or CUfunction -> index in layouts */
	KP_VEC(struct layout *) layouts;
	struct kp__rt_watcher *watch; /* watch.c's state (its launches) */
};

/* the graph this thread enumerated last, and whether it allocates */
static _Thread_local void *tl_nodes_graph;
static _Thread_local int tl_nodes_alloc;

struct cnode {
	CUgraphNode node;
	CUDA_KERNEL_NODE_PARAMS p;    /* kernelParams points at ptrs */
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
	__typeof__(&cuGraphMemAllocNodeGetParams) GraphMemAllocNodeGetParams;
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
	LOAD(cuGraphMemAllocNodeGetParams, GraphMemAllocNodeGetParams)
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
	int rc;

	(void)ctx;
	rc = cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
	if (rc)
		cudaGetLastError();   /* the application must never see our error */
	return rc;
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
			free(c->ptrs);
			free(c);
		}
		free(nodes[i].params);
	}
	free(nodes);
}

/* Probe f's parameter layout (past the last parameter: INVALID_VALUE). */
static int probe_layout(CUfunction f, struct layout **out)
{
	struct layout *ly = calloc(1, sizeof(*ly));
	size_t o, s, cap = 0;

	if (!ly)
		return cudaErrorMemoryAllocation;
	for (;;) {
		CUresult r = drvapi.FuncGetParamInfo(f, ly->n, &o, &s);

		if (r == CUDA_ERROR_INVALID_VALUE)
			break;       /* past the last parameter */
		if (r != CUDA_SUCCESS) {
			free(ly->off);
			free(ly->size);
			free(ly);
			return drv(r);
		}
		if (ly->n == cap) {
			uint32_t *no, *ns;

			cap = cap ? 2 * cap : 16;
			no = realloc(ly->off, cap * sizeof(*no));
			if (no)
				ly->off = no;
			ns = realloc(ly->size, cap * sizeof(*ns));
			if (ns)
				ly->size = ns;
			if (!no || !ns) {
				free(ly->off);
				free(ly->size);
				free(ly);
				return cudaErrorMemoryAllocation;
			}
		}
		ly->off[ly->n] = (uint32_t)o;
		ly->size[ly->n] = (uint32_t)s;
		if (o + s > ly->len)
			ly->len = o + s;
		ly->n++;
	}
	*out = ly;
	return 0;
}

static void layout_free(struct layout *ly)
{
	if (ly) {
		free(ly->name);
		free(ly->off);
		free(ly->size);
		free(ly);
	}
}

/*
 * The kernel behind handle (a CUkernel when kern, else a CUfunction):
 * resolved and named every time (two cheap calls), its layout probed on
 * first use and cached by handle. A hit whose name differs (a module
 * unloaded and another loaded at the same address) is probed again.
 */
static int get_layout(struct cuda_ctx *cx, void *handle, int kern, const struct layout **out)
{
	struct layout *ly = NULL, *old = NULL;
	CUfunction f = kern ? NULL : (CUfunction)handle;
	const char *name = NULL;
	uint32_t idx;
	int rc, hit;

	rc = kern ? drv(drvapi.KernelGetFunction(&f, (CUkernel)handle)) : 0;
	if (!rc && !f)
		rc = DRV_BASE + CUDA_ERROR_INVALID_HANDLE;
	if (!rc)
		rc = drv(drvapi.FuncGetName(&name, f));
	if (rc)
		return rc;
	pthread_mutex_lock(&cx->lock);
	hit = kp_u64map_get(&cx->fn, (uint64_t)(uintptr_t)handle, &idx);
	if (hit) {
		old = cx->layouts.data[idx];
		if (old->f == f && !strcmp(old->name, name)) {
			*out = old;
			pthread_mutex_unlock(&cx->lock);
			return 0;
		}
	}
	rc = probe_layout(f, &ly);
	if (!rc) {
		ly->f = f;
		if (!(ly->name = kp_strdup(name))) {
			layout_free(ly);
			rc = cudaErrorMemoryAllocation;
		}
	}
	if (!rc && hit) {
		/* replaced in place: nodes of live graphs may still point at the
		 * old layout's arrays, so it is kept (leaked until close) */
		if (kp_vec_push(&cx->layouts, old)) {
			layout_free(ly);
			rc = cudaErrorMemoryAllocation;
		} else {
			cx->layouts.data[idx] = ly;
		}
	} else if (!rc && kp_vec_push(&cx->layouts, ly)) {
		layout_free(ly);
		rc = cudaErrorMemoryAllocation;
	} else if (!rc && kp_u64map_put(&cx->fn, (uint64_t)(uintptr_t)handle,
					(uint32_t)(cx->layouts.len - 1))) {
		cx->layouts.len--;
		layout_free(ly);
		rc = cudaErrorMemoryAllocation;
	}
	if (!rc)
		*out = ly;
	pthread_mutex_unlock(&cx->lock);
	return rc;
}

/* The layout of a kernel for watch.c (a view of the cached one): its
 * kp__rt_layout_fn. */
static int cuda_layout(void *ctx, void *handle, int kern, struct kp__rt_layout_view *out)
{
	const struct layout *ly;
	int rc = get_layout(ctx, handle, kern, &ly);

	if (!rc) {
		out->name = ly->name;
		out->n_params = ly->n;
		out->off = ly->off;
		out->size = ly->size;
		out->len = ly->len;
	}
	return rc;
}

static int read_kernel(struct cuda_ctx *cx, CUgraphNode node, struct kp__rt_node *out)
{
	struct cnode *c = calloc(1, sizeof(*c));
	const struct layout *ly;
	size_t i, n, len;
	int rc;

	if (!c)
		return cudaErrorMemoryAllocation;
	out->handle = c;
	c->node = node;
	if ((rc = drv(drvapi.GraphKernelNodeGetParams(node, &c->p))))
		return rc;
	if (c->p.func)
		rc = get_layout(cx, c->p.func, 0, &ly);
	else if (c->p.kern)
		rc = get_layout(cx, c->p.kern, 1, &ly);
	else
		rc = DRV_BASE + CUDA_ERROR_INVALID_HANDLE;
	if (rc)
		return rc;
	out->name = ly->name;
	n = ly->n;
	len = ly->len;
	out->params = calloc(len ? len : 1, 1);
	c->ptrs = calloc(n ? n : 1, sizeof(void *));
	if (!out->params || !c->ptrs)
		return cudaErrorMemoryAllocation;
	if (c->p.kernelParams) {
		for (i = 0; i < n; i++)
			memcpy(out->params + ly->off[i], c->p.kernelParams[i], ly->size[i]);
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
		c->ptrs[i] = out->params + ly->off[i];
	c->p.func = ly->f;
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
	out->param_off = ly->off;
	out->param_size = ly->size;
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
	int rc, alloc = 0;

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
		if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
			CUDA_MEM_ALLOC_NODE_PARAMS ap;

			alloc = 1;
			memset(&ap, 0, sizeof(ap));
			if (!drvapi.GraphMemAllocNodeGetParams(hs[i], &ap)) {
				nodes[i].alloc_ptr = (uint64_t)ap.dptr;
				nodes[i].alloc_size = (uint64_t)ap.bytesize;
			}
		}
		if (t == CU_GRAPH_NODE_TYPE_KERNEL)
			rc = read_kernel(ctx, hs[i], &nodes[i]);
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
	tl_nodes_graph = graph;
	tl_nodes_alloc = alloc;
out:
	if (nodes)
		cb_nodes_free(ctx, nodes, n);
	free(hs);
	return rc;
}

/*
 * Instantiate as a person would (flags 0), adding AutoFreeOnLaunch only for
 * graphs that allocate (a relaunch would fail without it); 1 when graph
 * holds a memory allocation node (for graphs cb_nodes did not just walk).
 */
static int has_alloc_node(CUgraph g)
{
	CUgraphNode *hs;
	size_t n = 0, i;
	int found = 0;

	if (drvapi.GraphGetNodes(g, NULL, &n) != CUDA_SUCCESS)
		return 1;
	if (!(hs = calloc(n ? n : 1, sizeof(*hs))))
		return 1;
	if (drvapi.GraphGetNodes(g, hs, &n) != CUDA_SUCCESS) {
		free(hs);
		return 1;
	}
	for (i = 0; i < n && !found; i++) {
		CUgraphNodeType t;

		if (drvapi.GraphNodeGetType(hs[i], &t) != CUDA_SUCCESS ||
		    t == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
			found = 1;
	}
	free(hs);
	return found;
}

static int cb_instantiate(void *ctx, void *graph, void **exec)
{
	cudaGraphExec_t x = NULL;
	unsigned long long flags = 0;
	int rc;

	(void)ctx;
	if (graph != tl_nodes_graph ? has_alloc_node((CUgraph)graph) : tl_nodes_alloc)
		flags = cudaGraphInstantiateFlagAutoFreeOnLaunch;
	rc = cudaGraphInstantiateWithFlags(&x, (cudaGraph_t)graph, flags);
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

static int cb_watch_begin(void *ctx, void *stream, unsigned flags)
{
	struct cuda_ctx *cx = ctx;

	return kp__rt_watch_begin(&cx->watch, cuda_layout, cx, stream, flags);
}

static void cb_watch_release(void *ctx)
{
	(void)ctx;
	kp__rt_watch_release();
}

static int cb_watch_end(void *ctx, struct kp__rt_watch *w)
{
	return kp__rt_watch_end(((struct cuda_ctx *)ctx)->watch, w);
}

static void cb_destroy(void *ctx)
{
	struct cuda_ctx *cx = ctx;
	size_t i;

	if (!cx)
		return;
	kp__rt_watch_free(cx->watch);
	for (i = 0; i < cx->layouts.len; i++)
		layout_free(cx->layouts.data[i]);
	kp_vec_release(&cx->layouts);
	kp_u64map_release(&cx->fn);
	pthread_mutex_destroy(&cx->lock);
	free(cx);
}

/*
 * NVTX ranges cost a few ns when no tool is attached (NVTX v3, header-only).
 * They go in the runtime's own domain, "kplan", so that the analyzer can tell
 * regions the runtime will be asked about from the application's other
 * ranges; the category says who captures (1: this library on the region's
 * stream, 2: a language binding).
 */
static nvtxDomainHandle_t kplan_domain(void)
{
	static nvtxDomainHandle_t dom;
	nvtxDomainHandle_t d = __atomic_load_n(&dom, __ATOMIC_ACQUIRE);

	if (!d) {
		d = nvtxDomainCreateA("kplan");
		__atomic_store_n(&dom, d, __ATOMIC_RELEASE);
	}
	return d;
}

static void cb_range_push(void *ctx, const char *name, int kind)
{
	nvtxEventAttributes_t a;

	(void)ctx;
	memset(&a, 0, sizeof(a));
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.category = (uint32_t)(kind > 0 ? kind : 1);
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = name;
	nvtxDomainRangePushEx(kplan_domain(), &a);
}

static void cb_range_pop(void *ctx)
{
	(void)ctx;
	nvtxDomainRangePop(kplan_domain());
}

int kp__rt_cuda_backend(struct kp__rt_backend *be, struct kp_err *err)
{
	struct cuda_ctx *cx;
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
	if (!(cx = calloc(1, sizeof(*cx))))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	pthread_mutex_init(&cx->lock, NULL);
	kp_u64map_init(&cx->fn);
	be->ctx = cx;
	be->destroy = cb_destroy;
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
	be->range_push = cb_range_push;
	be->range_pop = cb_range_pop;
	be->watch_begin = cb_watch_begin;
	be->watch_end = cb_watch_end;
	be->watch_counts = kp__rt_watch_counts;
	be->watch_release = cb_watch_release;
	return 0;
}

KP_RT_API kp_rt *kp_rt_open_ex(const char *plan_path, const struct kp_rt_options *opt,
			       struct kp_rt_err *err)
{
	struct kp__rt_backend be;
	struct kp_err kerr = {0};
	struct kp_rt_options o = { 0, 0, -1, 0, NULL, NULL };
	const char *dis = getenv("KPLAN_RT_DISABLE");

	if (opt)
		o = *opt;
	/*
	 * Disabled or planless: never touch CUDA (all eager, nothing to
	 * capture), but still name each region call for tracing tools: this is
	 * how `kplan record` of a planless run finds the regions. KP_RT_CUDA
	 * asks for the backend without a plan (a binding's watch and patching).
	 */
	if (o.flags & KP_RT_DISABLE || (!plan_path && !(o.flags & KP_RT_CUDA)) ||
	    (!(o.flags & KP_RT_NO_ENV) && dis && atoi(dis))) {
		memset(&be, 0, sizeof(be));
		be.range_push = cb_range_push;
		be.range_pop = cb_range_pop;
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
