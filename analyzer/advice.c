/*
 * advice.c - a blocker's fix in the terms of the library that made the
 * call, in the caller's language.
 *
 * A sync or a copy inside cublasSdot, a cudaMalloc inside thrust::reduce or
 * cuSPARSE, a launch on the legacy stream from a cuBLAS handle: the CUDA
 * call is the library's, so "move the sync out of the region" is no help;
 * the fix is one line of the library's API (cublasSetPointerMode,
 * cublasSetStream, a buffer allocated once). The library is known by the
 * kernels launched next to the call (their names: dot_kernel, cusparse::,
 * cub::, ...) and, in PyTorch traces, by the CPU op around it (aten::item,
 * aten::nonzero), whose fix is Python. One table of libraries and one of
 * rules: adding a pattern is a row.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* ---- libraries, by their kernels' names ---- */

/* CUB first: its kernels' names hold words of the others (DeviceSpmv) */
enum { L_NONE = -1, L_CUB, L_CUBLAS, L_CUSPARSE, L_CUFFT, L_CURAND, L_N };

static const struct {
	const char *name;
	const char *pats[8];      /* substrings of its kernels' names */
	const char *set_stream;   /* the call that moves its handle to a stream */
} libs[L_N] = {
	[L_CUB] = { "thrust/CUB", { "cub::", "thrust::" }, NULL },
	[L_CUBLAS] = { "cuBLAS", { "cublas", "dot_kernel", "reduce_1Block_kernel", "nrm2_kernel",
				   "asum_kernel", "amax_kernel", "gemv", "sgemm" },
		       "cublasSetStream(handle, stream)" },
	[L_CUSPARSE] = { "cuSPARSE", { "cusparse", "csrmv", "csrsv", "spmv", "SpMV" },
			 "cusparseSetStream(handle, stream)" },
	[L_CUFFT] = { "cuFFT", { "regular_fft", "vector_fft", "_fft<", "spRadix", "dpRadix" },
		      "cufftSetStream(plan, stream)" },
	[L_CURAND] = { "cuRAND", { "curand", "generate_seed_pseudo", "gen_sequenced" },
		       "curandSetStream(generator, stream)" },
};

/* cuBLAS reductions that return a scalar: in host pointer mode the result
 * is copied to the host and waited for inside the call */
static const char *const host_result[] = {
	"dot_kernel", "reduce_1Block_kernel", "nrm2_kernel", "asum_kernel", "amax_kernel",
	"amin_kernel", "iamax_kernel", "iamin_kernel",
};

static int lib_of(const char *kernel)
{
	for (int l = 0; kernel && l < L_N; l++)
		for (int p = 0; p < 8 && libs[l].pats[p]; p++)
			if (strstr(kernel, libs[l].pats[p]))
				return l;
	return L_NONE;
}

static int any_of(const char *s, const char *const *v, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		if (strstr(s, v[i]))
			return 1;
	return 0;
}

int kp__is_python(struct kp__ana *a)
{
	if (!a->lang)
		a->lang = kp__nvtx_domain(a, "pytorch.cpu_op") > 0 ||
			kp__nvtx_domain(a, "pytorch.python") > 0 ? 2 : 1;
	return a->lang == 2;
}

/*
 * The name of the kernel launched nearest before (dir < 0) or after
 * (dir > 0) CPU time t, looking past up to four copies and memsets; NULL
 * when none.
 */
static const char *kernel_near(const struct kp__ana *a, int64_t t, int dir)
{
	size_t lo = kp__cpu_lower(a, t);

	for (int k = 0; k < 5; k++) {
		size_t i = dir < 0 ? lo - 1 - (size_t)k : lo + (size_t)k;
		const struct kp__op *op;

		if ((dir < 0 && (size_t)k >= lo) || (dir > 0 && i >= a->n_ops))
			return NULL;
		op = &a->ops[a->by_cpu[i]];
		if (op->kind == KP__OP_KERNEL)
			return a->sigs.data[op->sig].name;
	}
	return NULL;
}

/* ---- the rules ---- */

#define K(kind) (1u << (kind))
#define K_WAIT (K(KP__B_SYNC) | K(KP__B_PAGEABLE_COPY) | K(KP__B_BLOCKING_COPY))
#define K_ALLOC (K(KP__B_MALLOC) | K(KP__B_FREE))

/*
 * PyTorch: by the CPU op around the call (innermost or outermost). The
 * first rule that matches gives the fix.
 */
static const struct {
	const char *op;
	unsigned kinds;
	const char *fix;
} torch_rules[] = {
	{ "aten::is_nonzero", K_WAIT,
	  "PyTorch: a Python if (or bool()) on a tensor reads it on the host and waits for the "
	  "GPU: keep the test on the GPU (torch.where(cond, a, b)), or test once outside the step" },
	{ "aten::nonzero", K_WAIT,
	  "PyTorch: nonzero (and boolean-mask indexing) sizes its output from the data, so it "
	  "reads the count on the host: torch.nonzero_static(x, size=n), or keep the shape fixed "
	  "with a mask (torch.where(mask, x, 0))" },
	{ "aten::masked_select", K_WAIT,
	  "PyTorch: masked_select sizes its output from the data, so it reads the count on the "
	  "host: keep the shape fixed with a mask (torch.where(mask, x, 0))" },
	{ "aten::item", K_WAIT,
	  "PyTorch: .item() copies the value to the host and waits for the GPU: keep it a tensor "
	  "(accumulate on the GPU) and read it every few steps" },
	{ "aten::_local_scalar_dense", K_WAIT,
	  "PyTorch: .item() copies the value to the host and waits for the GPU: keep it a tensor "
	  "(accumulate on the GPU) and read it every few steps" },
	{ "aten::copy_", K(KP__B_PAGEABLE_COPY),
	  "PyTorch: the host tensor is pageable: allocate it pinned (.pin_memory(), or "
	  "pin_memory=True in the DataLoader) and copy with non_blocking=True" },
};

/*
 * C: by the kernels next to the call: lib the library (L_*, L_NONE: any),
 * before/after where to look (the kernel launched just before the call,
 * just after, or either), names the kernels it must be (NULL: any of lib's).
 */
static const struct {
	int lib;
	unsigned kinds;
	int before, after;
	int host_result;          /* only after a cuBLAS reduction returning a scalar */
	const char *fix;
} c_rules[] = {
	{ L_CUBLAS, K_WAIT, 1, 0, 1,
	  "cuBLAS: the reduction (cublasSdot, cublasSnrm2, cublasSasum, cublasIsamax, ...) "
	  "returns its result to host memory (CUBLAS_POINTER_MODE_HOST), a copy and a wait inside "
	  "the call: cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE) with a device "
	  "result pointer keeps it on the GPU, and the loop needs no sync" },
	{ L_CUSPARSE, K_ALLOC, 1, 1, 0,
	  "cuSPARSE: its work buffer is allocated and freed around each call: query the size "
	  "once (cusparseSpMV_bufferSize, or the routine's _bufferSize), cudaMalloc the buffer "
	  "before the loop and pass the same buffer to every call" },
	{ L_CUB, K_ALLOC, 1, 1, 0,
	  "thrust/CUB: the algorithm allocates its temporary storage on every call: with CUB, "
	  "call it once with d_temp_storage = NULL for the size and cudaMalloc the storage before "
	  "the loop; with thrust, pass a caching allocator (thrust::cuda::par(alloc).on(stream))" },
};

const char *kp__advice(struct kp__ana *a, int kind, int64_t t, const char *op,
		       const char *outer)
{
	const char *before, *after;

	if (kind < 0 || kind >= KP__B__N)
		return NULL;
	if (op || outer) {
		for (size_t i = 0; i < sizeof(torch_rules) / sizeof(*torch_rules); i++)
			if (torch_rules[i].kinds & K(kind) &&
			    ((op && !strcmp(op, torch_rules[i].op)) ||
			     (outer && !strcmp(outer, torch_rules[i].op))))
				return torch_rules[i].fix;
		return NULL;   /* PyTorch's own call: C advice would not fit */
	}
	before = kernel_near(a, t, -1);
	after = kernel_near(a, t, 1);
	for (size_t i = 0; i < sizeof(c_rules) / sizeof(*c_rules); i++) {
		int lb = lib_of(before), la = lib_of(after);

		if (!(c_rules[i].kinds & K(kind)))
			continue;
		if (c_rules[i].host_result &&
		    !any_of(before, host_result, sizeof(host_result) / sizeof(*host_result)))
			continue;
		if ((c_rules[i].before && lb == c_rules[i].lib) ||
		    (c_rules[i].after && la == c_rules[i].lib))
			return c_rules[i].fix;
	}
	return NULL;
}

const char *kp__advice_legacy(struct kp__ana *a, const struct kp__occ *o)
{
	char buf[640];
	int seen[L_N] = {0}, n = 0;
	size_t at;

	if (kp__is_python(a))
		return "capture on a side stream (as torch.cuda.graph does)";
	for (uint32_t i = 0; i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		int l = op->kind == KP__OP_KERNEL ? lib_of(a->sigs.data[op->sig].name) : L_NONE;

		if (l != L_NONE && libs[l].set_stream && !seen[l]) {
			seen[l] = 1;
			n++;
		}
	}
	if (!n)
		return "create a stream (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)), "
		       "launch the region on it and capture that stream";
	at = (size_t)snprintf(buf, sizeof(buf), "the library handles run on it: give them a stream "
			      "you created (cudaStreamCreateWithFlags(&stream, "
			      "cudaStreamNonBlocking)) with ");
	for (int l = 0, k = 0; l < L_N && at < sizeof(buf); l++)
		if (seen[l])
			at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s", k++ ?
					       (k == n ? " and " : ", ") : "", libs[l].set_stream);
	if (at < sizeof(buf))
		snprintf(buf + at, sizeof(buf) - at, ", launch your own kernels on it too, and "
			 "capture that stream");
	return kp_arena_strdup(&a->arena, buf);
}
