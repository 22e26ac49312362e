/*
 * fused_load_cuda.c - the CUDA side of libkplanrt's fusion (struct
 * kp__rt_fusion_ops, see fused_load.h): NVRTC compilation with an on-disk CUBIN
 * cache, and the replacement of a chain of kernel nodes by one fused node in
 * a captured graph.
 *
 * NVRTC is opened with dlopen (libnvrtc.so.13, then libnvrtc.so) the first
 * time a source is loaded, so the library needs no NVRTC at link time and a
 * machine without it only loses fusion (reason fusion-compile). CUBINs are
 * cached under $XDG_CACHE_HOME/kplan (default ~/.cache/kplan;
 * KPLAN_CACHE_DIR overrides) by runtime/fcache.c, which opens and checks the
 * directory once (ours alone, under parents nobody else can rearrange, else
 * no cache; entries only through that descriptor), checks each entry's
 * digest, and keys entries by the source's SHA-256, the compute capability
 * and the NVRTC version; the source was checked against the plan (and its
 * signature) before we get here.
 *
 * Driver entry points come through the runtime
 * (cudaGetDriverEntryPointByVersion), like cuda_backend.c.
 */
#include "fused_load.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include "../common/log.h"
#include "../common/strbuf.h"
#include "fcache.h"

static struct {
	__typeof__(&cuModuleLoadData) ModuleLoadData;
	__typeof__(&cuModuleGetFunction) ModuleGetFunction;
	__typeof__(&cuModuleUnload) ModuleUnload;
	__typeof__(&cuGraphAddKernelNode) GraphAddKernelNode;
	__typeof__(&cuGetErrorString) GetErrorString;
} drv;

static struct {
	void *lib;
	__typeof__(&nvrtcCreateProgram) CreateProgram;
	__typeof__(&nvrtcCompileProgram) CompileProgram;
	__typeof__(&nvrtcGetProgramLogSize) GetProgramLogSize;
	__typeof__(&nvrtcGetProgramLog) GetProgramLog;
	__typeof__(&nvrtcGetCUBINSize) GetCUBINSize;
	__typeof__(&nvrtcGetCUBIN) GetCUBIN;
	__typeof__(&nvrtcDestroyProgram) DestroyProgram;
	__typeof__(&nvrtcGetErrorString) GetErrorString;
	__typeof__(&nvrtcVersion) Version;
} nv;

struct fctx {
	CUmodule mods[256];
	size_t n_mods;
	int cache_fd;       /* the checked cache directory (fcache.h), or -1: none */
	int cache_tried;    /* cache_fd is set */
};

static int drv_load(char *msg, size_t mlen)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn;

	if (drv.GraphAddKernelNode)
		return 0;
#define LOAD(name, field) \
	if (cudaGetDriverEntryPointByVersion(#name, &fn, CUDART_VERSION, cudaEnableDefault, &q) || \
	    q != cudaDriverEntryPointSuccess || !fn) { \
		snprintf(msg, mlen, "driver entry point %s not found", #name); \
		return -1; \
	} \
	memcpy(&drv.field, &fn, sizeof(fn));
	LOAD(cuModuleLoadData, ModuleLoadData)
	LOAD(cuModuleGetFunction, ModuleGetFunction)
	LOAD(cuModuleUnload, ModuleUnload)
	LOAD(cuGetErrorString, GetErrorString)
	LOAD(cuGraphAddKernelNode, GraphAddKernelNode)
#undef LOAD
	return 0;
}

static int nvrtc_load(char *msg, size_t mlen)
{
	void *lib;

	if (nv.lib)
		return 0;
	lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		lib = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(msg, mlen, "cannot load NVRTC (libnvrtc.so.13): %s", dlerror());
		return -1;
	}
#define SYM(name, field) \
	if (!(*(void **)&nv.field = dlsym(lib, #name))) { \
		snprintf(msg, mlen, "NVRTC lacks %s", #name); \
		dlclose(lib); \
		return -1; \
	}
	SYM(nvrtcCreateProgram, CreateProgram)
	SYM(nvrtcCompileProgram, CompileProgram)
	SYM(nvrtcGetProgramLogSize, GetProgramLogSize)
	SYM(nvrtcGetProgramLog, GetProgramLog)
	SYM(nvrtcGetCUBINSize, GetCUBINSize)
	SYM(nvrtcGetCUBIN, GetCUBIN)
	SYM(nvrtcDestroyProgram, DestroyProgram)
	SYM(nvrtcGetErrorString, GetErrorString)
	SYM(nvrtcVersion, Version)
#undef SYM
	nv.lib = lib;
	return 0;
}

static const char *drv_str(CUresult r)
{
	const char *s = NULL;

	if (drv.GetErrorString)
		drv.GetErrorString(r, &s);
	return s ? s : "CUDA driver error";
}

/*
 * The cache directory, opened and checked once per runtime (fcache.h):
 * every entry is then read and written through that descriptor. -1 when
 * none may be used: the reason is logged once per process.
 */
static int cache_dir(struct fctx *c)
{
	static int logged;
	char why[512];

	if (c->cache_tried)
		return c->cache_fd;
	c->cache_tried = 1;
	c->cache_fd = kp__rt_fcache_open(NULL, 0, why, sizeof(why));
	if (c->cache_fd < 0 && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		kp_warn("runtime: fusion: not using the kernel cache (%s); compiling in memory",
			why);
	return c->cache_fd;
}

static void *compile(const char *src, size_t len, int cc_major, int cc_minor, size_t *out_len,
		     char *msg, size_t mlen)
{
	nvrtcProgram prog;
	nvrtcResult r;
	char arch[64], *text, *bin = NULL;
	const char *opts[2];
	size_t n = 0;

	if (nvrtc_load(msg, mlen))
		return NULL;
	text = malloc(len + 1);
	if (!text) {
		snprintf(msg, mlen, "out of memory");
		return NULL;
	}
	memcpy(text, src, len);
	text[len] = 0;
	snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d%d", cc_major, cc_minor);
	opts[0] = arch;
	opts[1] = "--std=c++17";
	r = nv.CreateProgram(&prog, text, "kpfuse.cu", 0, NULL, NULL);
	free(text);
	if (r != NVRTC_SUCCESS) {
		snprintf(msg, mlen, "nvrtcCreateProgram: %s", nv.GetErrorString(r));
		return NULL;
	}
	r = nv.CompileProgram(prog, 2, opts);
	if (r != NVRTC_SUCCESS) {
		size_t ln = 0;
		char *log = NULL;

		if (nv.GetProgramLogSize(prog, &ln) == NVRTC_SUCCESS && ln && (log = malloc(ln + 1)) &&
		    nv.GetProgramLog(prog, log) == NVRTC_SUCCESS) {
			char *nl;

			log[ln] = 0;
			for (nl = log; *nl; nl++)
				if (*nl == '\n')
					*nl = ' ';
		}
		snprintf(msg, mlen, "nvrtc: %s: %.200s", nv.GetErrorString(r), log ? log : "");
		free(log);
		nv.DestroyProgram(&prog);
		return NULL;
	}
	if (nv.GetCUBINSize(prog, &n) != NVRTC_SUCCESS || !n || !(bin = malloc(n)) ||
	    nv.GetCUBIN(prog, bin) != NVRTC_SUCCESS) {
		snprintf(msg, mlen, "nvrtc: no CUBIN");
		free(bin);
		bin = NULL;
	}
	nv.DestroyProgram(&prog);
	*out_len = n;
	return bin;
}

static int f_load(void *ctx, const char *src, size_t len, uint64_t hash, const char *name,
		  void **fn, char *msg, size_t mlen)
{
	struct fctx *c = ctx;
	char entry[200];
	int dfd, dev = 0, maj = 0, min = 0, nv_maj = 0, nv_min = 0, compiled = 0;
	void *bin = NULL;
	size_t blen = 0;
	CUmodule mod = NULL;
	CUfunction f = NULL;
	CUresult r;

	(void)hash;   /* the cache keys by SHA-256 (fcache.h) */
	if (drv_load(msg, mlen))
		return -1;
	if (cudaFree(0) != cudaSuccess || cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
		snprintf(msg, mlen, "cannot query the device");
		return -1;
	}
	if (c->n_mods == sizeof(c->mods) / sizeof(c->mods[0])) {
		snprintf(msg, mlen, "too many fused modules");
		return -1;
	}
	/* the cache key names the compiler: NVRTC is needed to use an entry too */
	if (nvrtc_load(msg, mlen))
		return -1;
	if (nv.Version(&nv_maj, &nv_min) != NVRTC_SUCCESS) {
		snprintf(msg, mlen, "nvrtcVersion failed");
		return -1;
	}
	dfd = cache_dir(c);
	if (dfd >= 0 && kp__rt_fcache_name(entry, sizeof(entry), src, len, maj, min, nv_maj, nv_min))
		dfd = -1;
	if (dfd >= 0)
		bin = kp__rt_fcache_read(dfd, entry, &blen);   /* its digest checked */
	if (bin && drv.ModuleLoadData(&mod, bin) != CUDA_SUCCESS) {
		/* intact but refused (a driver change): compile again */
		free(bin);
		bin = NULL;
		mod = NULL;
	}
	if (!mod) {
		compiled = 1;
		bin = compile(src, len, maj, min, &blen, msg, mlen);
		if (!bin)
			return -1;
		if ((r = drv.ModuleLoadData(&mod, bin)) != CUDA_SUCCESS) {
			snprintf(msg, mlen, "cuModuleLoadData: %s", drv_str(r));
			free(bin);
			return -1;
		}
		if (dfd >= 0)
			kp__rt_fcache_write(dfd, entry, bin, blen);
	}
	free(bin);
	if ((r = drv.ModuleGetFunction(&f, mod, name)) != CUDA_SUCCESS) {
		snprintf(msg, mlen, "cuModuleGetFunction(%s): %s", name, drv_str(r));
		drv.ModuleUnload(mod);
		return -1;
	}
	c->mods[c->n_mods++] = mod;
	*fn = f;
	snprintf(msg, mlen, "%s", compiled ? "nvrtc" : "cache");
	return 0;
}

static int in_set(cudaGraphNode_t x, const cudaGraphNode_t *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == x)
			return 1;
	return 0;
}

/*
 * A node's edges one way (in: dependencies, else dependents) with their edge
 * data: graphs captured with programmatic dependent launch have
 * programmatic edges, which a query without edge data refuses (lossy).
 * *nodes and *eds are malloc'ed (NULL when none). 0 or -1.
 */
static int node_edges(cudaGraphNode_t x, int in, cudaGraphNode_t **nodes, cudaGraphEdgeData **eds,
		      size_t *n)
{
	size_t c = 0;

	*nodes = NULL;
	*eds = NULL;
	*n = 0;
	if ((in ? cudaGraphNodeGetDependencies(x, NULL, NULL, &c) :
	     cudaGraphNodeGetDependentNodes(x, NULL, NULL, &c)) != cudaSuccess)
		return -1;
	if (!c)
		return 0;
	*nodes = calloc(c, sizeof(**nodes));
	*eds = calloc(c, sizeof(**eds));
	if (!*nodes || !*eds ||
	    (in ? cudaGraphNodeGetDependencies(x, *nodes, *eds, &c) :
	     cudaGraphNodeGetDependentNodes(x, *nodes, *eds, &c)) != cudaSuccess) {
		free(*nodes);
		free(*eds);
		*nodes = NULL;
		*eds = NULL;
		return -1;
	}
	*n = c;
	return 0;
}

/* One replacement; 0 done, 1 not done (graph unchanged), -1 graph damaged. */
static int replace_one(cudaGraph_t graph, const cudaGraphNode_t *all, size_t n_all,
		       struct kp__rt_fx_repl *r, char *msg, size_t mlen)
{
	cudaGraphNode_t ch[KP__RT_FX_MAX_CHAIN], *ins = NULL, *outs = NULL, *same = NULL, *e = NULL;
	cudaGraphEdgeData *in_ed = NULL, *out_ed = NULL, *ee = NULL;
	size_t n_ins = 0, n_outs = 0, ne, k, m;
	CUDA_KERNEL_NODE_PARAMS p;
	CUgraphNode fused = NULL;
	enum cudaGraphNodeType t;
	CUresult cr;
	int rc = 1;

	for (k = 0; k < r->n; k++) {
		if (r->idx[k] >= n_all || cudaGraphNodeGetType(all[r->idx[k]], &t) != cudaSuccess ||
		    t != cudaGraphNodeTypeKernel) {
			snprintf(msg, mlen, "node %zu is not a kernel node", r->idx[k]);
			return 1;
		}
		ch[k] = all[r->idx[k]];
	}
	/* a simple chain: each inner link is the only edge on both sides */
	for (k = 0; k < r->n; k++) {
		if (k == 0 && node_edges(ch[k], 1, &ins, &in_ed, &n_ins)) {
			snprintf(msg, mlen, "cannot read the graph's edges");
			goto out;
		}
		if (k > 0) {
			if (node_edges(ch[k], 1, &e, &ee, &ne)) {
				snprintf(msg, mlen, "cannot read the graph's edges");
				goto out;
			}
			free(e);
			free(ee);
			if (ne != 1) {
				snprintf(msg, mlen, "chain kernel %zu has %zu dependencies (not a simple chain)",
					 k, ne);
				goto out;
			}
		}
		if (k + 1 == r->n) {
			if (node_edges(ch[k], 0, &outs, &out_ed, &n_outs)) {
				snprintf(msg, mlen, "cannot read the graph's edges");
				goto out;
			}
		} else {
			if (node_edges(ch[k], 0, &e, &ee, &ne)) {
				snprintf(msg, mlen, "cannot read the graph's edges");
				goto out;
			}
			m = ne == 1 && e[0] == ch[k + 1];
			free(e);
			free(ee);
			if (!m) {
				snprintf(msg, mlen, "chain kernel %zu does not lead only to kernel %zu", k, k + 1);
				goto out;
			}
		}
	}
	for (m = 0; m < n_ins; m++)
		if (in_set(ins[m], ch, r->n)) {
			snprintf(msg, mlen, "the chain depends on itself");
			goto out;
		}
	memset(&p, 0, sizeof(p));
	p.func = (CUfunction)r->fn;
	p.gridDimX = r->grid[0];
	p.gridDimY = r->grid[1];
	p.gridDimZ = r->grid[2];
	p.blockDimX = r->block[0];
	p.blockDimY = r->block[1];
	p.blockDimZ = r->block[2];
	p.sharedMemBytes = r->smem;
	p.kernelParams = r->args;
	cr = drv.GraphAddKernelNode(&fused, (CUgraph)graph, NULL, 0, &p);
	if (cr != CUDA_SUCCESS) {
		snprintf(msg, mlen, "cuGraphAddKernelNode: %s", drv_str(cr));
		goto out;
	}
	/* programmatic dependent launch, when the chain's first kernel had it
	 * as a node attribute (a graph captured from PDL launches), and its
	 * priority: the fused kernel waits with griddepcontrol.wait */
	{
		static const enum cudaLaunchAttributeID keep[] = {
			cudaLaunchAttributeProgrammaticStreamSerialization, cudaLaunchAttributePriority,
		};
		cudaLaunchAttributeValue v;

		for (m = 0; m < sizeof(keep) / sizeof(keep[0]); m++) {
			memset(&v, 0, sizeof(v));
			if (cudaGraphKernelNodeGetAttribute(ch[0], keep[m], &v) == cudaSuccess)
				cudaGraphKernelNodeSetAttribute((cudaGraphNode_t)fused, keep[m], &v);
		}
		cudaGetLastError();
	}
	/* the chain's edges, with their types: the fused kernel starts with
	 * griddepcontrol.wait, so a programmatic edge into it stays one */
	if (n_ins + n_outs) {
		if (!(same = calloc(n_ins + n_outs, sizeof(*same)))) {
			cudaGraphDestroyNode((cudaGraphNode_t)fused);
			snprintf(msg, mlen, "out of memory");
			goto out;
		}
		for (m = 0; m < n_ins + n_outs; m++)
			same[m] = (cudaGraphNode_t)fused;
		if ((n_ins && cudaGraphAddDependencies(graph, ins, same, in_ed, n_ins) != cudaSuccess) ||
		    (n_outs && cudaGraphAddDependencies(graph, same, outs, out_ed, n_outs) != cudaSuccess)) {
			cudaGraphDestroyNode((cudaGraphNode_t)fused);
			snprintf(msg, mlen, "cudaGraphAddDependencies failed");
			goto out;
		}
	}
	rc = 0;
	for (k = 0; k < r->n; k++)
		if (cudaGraphDestroyNode(ch[k]) != cudaSuccess) {
			snprintf(msg, mlen, "cudaGraphDestroyNode failed half way");
			rc = -1;
		}
out:
	cudaGetLastError();
	free(ins);
	free(outs);
	free(in_ed);
	free(out_ed);
	free(same);
	return rc;
}

static int f_replace(void *ctx, void *graph, struct kp__rt_fx_repl *r, size_t n, char *msg,
		     size_t mlen)
{
	cudaGraphNode_t *all = NULL;
	size_t n_all = 0, i;
	int done = 0, x;

	(void)ctx;
	for (i = 0; i < n; i++)
		r[i].rc = 1;
	if (drv_load(msg, mlen))
		return 0;
	if (cudaGraphGetNodes((cudaGraph_t)graph, NULL, &n_all) != cudaSuccess ||
	    !(all = calloc(n_all ? n_all : 1, sizeof(*all))) ||
	    cudaGraphGetNodes((cudaGraph_t)graph, all, &n_all) != cudaSuccess) {
		snprintf(msg, mlen, "cannot list the graph's nodes");
		free(all);
		cudaGetLastError();
		return 0;
	}
	for (i = 0; i < n; i++) {
		x = replace_one((cudaGraph_t)graph, all, n_all, &r[i], msg, mlen);
		if (x < 0) {
			free(all);
			return -1;
		}
		r[i].rc = x;
		done += !x;
	}
	free(all);
	return done;
}

static void f_destroy(void *ctx)
{
	struct fctx *c = ctx;
	size_t i;

	for (i = 0; i < c->n_mods; i++)
		drv.ModuleUnload(c->mods[i]);
	if (c->cache_fd >= 0 && c->cache_tried)
		close(c->cache_fd);
	free(c);
}

int kp__rt_fusion_precompile(const char *src, size_t len, int cc_major, int cc_minor,
			      char *msg, size_t mlen)
{
	char entry[200], why[512];
	int dfd, nv_maj = 0, nv_min = 0, rc = -1;
	void *bin;
	size_t blen = 0;

	if (nvrtc_load(msg, mlen))
		return -1;
	if (nv.Version(&nv_maj, &nv_min) != NVRTC_SUCCESS) {
		snprintf(msg, mlen, "nvrtcVersion failed");
		return -1;
	}
	dfd = kp__rt_fcache_open(NULL, 0, why, sizeof(why));
	if (dfd < 0) {
		snprintf(msg, mlen, "no kernel cache to store it in: %s", why);
		return -1;
	}
	if (kp__rt_fcache_name(entry, sizeof(entry), src, len, cc_major, cc_minor, nv_maj,
			       nv_min)) {
		snprintf(msg, mlen, "cache entry name too long");
		goto out;
	}
	bin = kp__rt_fcache_read(dfd, entry, &blen);   /* its digest checked */
	if (bin) {
		free(bin);
		snprintf(msg, mlen, "cache");
		rc = 0;
		goto out;
	}
	bin = compile(src, len, cc_major, cc_minor, &blen, msg, mlen);
	if (!bin)
		goto out;
	if (kp__rt_fcache_write(dfd, entry, bin, blen))
		snprintf(msg, mlen, "cannot write the cache entry %s", entry);
	else {
		snprintf(msg, mlen, "nvrtc");
		rc = 0;
	}
	free(bin);
out:
	close(dfd);
	return rc;
}

static struct kp__rt_fusion_ops ops_template = {
	NULL, f_load, f_replace, f_destroy,
};

/* A fresh ops value per runtime (each owns the modules it loaded). */
const struct kp__rt_fusion_ops *kp__rt_fusion_cuda_ops(void)
{
	static __thread struct kp__rt_fusion_ops ops;

	ops = ops_template;
	ops.ctx = calloc(1, sizeof(struct fctx));
	return ops.ctx ? &ops : NULL;
}
