/*
 * test_advice.c - analyzer/advice.c: each blocker gets the fix of the
 * library that made the call, in the caller's language. One synthetic
 * trace per pattern: cuBLAS reductions in host pointer mode, library
 * handles on the legacy stream (cuBLAS, cuSPARSE, cuFFT, cuRAND), cuSPARSE
 * work buffers, thrust/CUB temporary storage (C programs: tl_*), and
 * PyTorch's .item() and tensor truth tests (Kineto traces: kj_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyzer/analyzer.h"
#include "db/writer.h"
#include "testutil.h"
#include "timeline.h"

#define AXPY "void axpy_kernel_val<float, float>(cublasAxpyParamsVal<float, float, float>)"
#define DOT "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensor<float const>>>(float)"
#define REDUCE "void reduce_1Block_kernel<float, 128, 7, cublasGemvTensorStridedBatched<float>>(float)"
#define SCAL "void scal_kernel_val<float, float>(cublasScalParamsVal<float, float>)"
#define GEMV "void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false," \
	" false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>>>(float)"
#define SPMV "void cusparse::csrmv_v3_kernel<std::integral_constant<bool, false>, int, float>(float)"
#define FFT "void regular_fft<256u, EPT_8, 32u, 8u, CallbackType_0, float>(float)"
#define RAND "void generate_seed_pseudo<rng_config<curandStateXORWOW, (curandOrdering)101>>(float)"
#define CUB1 "void cub::DeviceReduceKernel<cub::DeviceReducePolicy<float, int>, float *>(float *)"
#define CUB2 "void cub::DeviceReduceSingleTileKernel<cub::DeviceReducePolicy<float, int>>(float *)"
#define MINE "void update_x(float *, float *)"
#define MINE2 "void update_r(float *, float *)"

#define C_DOT "cuBLAS: the reduction (cublasSdot, cublasSnrm2, cublasSasum, cublasIsamax, ...)" \
	" returns its result to host memory (CUBLAS_POINTER_MODE_HOST), a copy and a wait" \
	" inside the call: cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE) with a" \
	" device result pointer keeps it on the GPU, and the loop needs no sync"
#define C_SPARSE_BUF "cuSPARSE: its work buffer is allocated and freed around each call:" \
	" query the size once (cusparseSpMV_bufferSize, or the routine''s _bufferSize)," \
	" cudaMalloc the buffer before the loop and pass the same buffer to every call"
#define C_CUB_TMP "thrust/CUB: the algorithm allocates its temporary storage on every call:" \
	" with CUB, call it once with d_temp_storage = NULL for the size and cudaMalloc the" \
	" storage before the loop; with thrust, pass a caching allocator" \
	" (thrust::cuda::par(alloc).on(stream))"
#define C_LEGACY(calls) "launches on the legacy default stream, which cannot be captured:" \
	" the library handles run on it: give them a stream you created" \
	" (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) with " calls ", launch" \
	" your own kernels on it too, and capture that stream"
#define PY_ITEM "PyTorch: .item() copies the value to the host and waits for the GPU: keep" \
	" it a tensor (accumulate on the GPU) and read it every few steps"
#define PY_IF "PyTorch: a Python if (or bool()) on a tensor reads it on the host and waits" \
	" for the GPU: keep the test on the GPU (torch.where(cond, a, b)), or test once" \
	" outside the step"

#define OCCS 3

/* A call made in an iteration, before kernel `at` (after kernel at - 1). */
struct call { const char *name; int at; int copy; };

/*
 * OCCS "iter" ranges at T = 100 us + 100 us k on stream: kernel i launched
 * at T + 2 us (i + 1), run 1 us later for 1 us; each call before kernel at
 * made at T + 2 us at + 1.5 us (+0.1 us per call), 50 ns long. copy: a
 * cudaMemcpyAsync whose 4-byte DtoH copy lands in pageable memory.
 */
static void iter_loop(struct tl *t, const char *name, const char *const *kernels, int n,
		      uint32_t stream, const struct call *calls, int n_calls)
{
	struct kp_err err = {0};
	uint32_t extra = 50000;

	tl_open(t, name);
	for (int k = 0; k < OCCS; k++) {
		int64_t T = 100000 + 100000 * k;

		tl_nvtx(t, "iter", T, T + 2000 * (n + 2));
		for (int i = 0; i < n; i++)
			tl_kernel(t, kernels[i], stream, T + 2000 * (i + 1), T + 2000 * (i + 1) + 1000,
				  1000);
		for (int c = 0; c < n_calls; c++) {
			int64_t at = T + 2000 * calls[c].at + 1500 + 100 * c;
			struct kp_memcpy_rec m = {
				.start = at + 20, .end = at + 40, .stream_id = stream,
				.correlation_id = ++extra, .bytes = 4, .copy_kind = 2,
				.src_kind = 3, .dst_kind = 1,
			};

			tl_api(t, calls[c].name, at, 50, m.correlation_id);
			if (calls[c].copy)
				CU_ASSERT_EQUAL(kp_writer_memcpy(&t->w, &m, &err), 0);
		}
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(t, NULL, NULL), 0);
}

/*
 * The iteration's kernels ks and calls cs: every call's row in each
 * occurrence is fatal, of the kinds given (SQL list), and ends with fix.
 */
static void c_advice(const char *db, const char *const *ks, int n_ks, const struct call *cs,
		     int n_cs, const char *kinds, const char *fix)
{
	struct tl t;

	iter_loop(&t, db, ks, n_ks, 13, cs, n_cs);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE fatal = 1 AND regionId = 1"
			     " AND kind IN (%s) AND detail LIKE '%%splits the region; %s'", kinds,
			     fix), n_cs * OCCS);
	tl_close(&t);
}

/* cublasSdot in host pointer mode: its copy and its sync get cublasSetPointerMode. */
static void test_advice_cublas_dot(void)
{
	static const char *const ks[] = { AXPY, DOT, REDUCE, SCAL };
	static const struct call cs[] = { { "cudaMemcpyAsync", 3, 1 },
					  { "cudaStreamSynchronize", 3, 0 } };

	c_advice("adv_dot.db", ks, 4, cs, 2, "'pageable_copy', 'sync'", C_DOT);
}

/* The same calls after the program's own kernels: no library advice. */
static void test_advice_none(void)
{
	static const char *const ks[] = { MINE, MINE2, MINE, MINE2 };
	static const struct call cs[] = { { "cudaMemcpyAsync", 3, 1 },
					  { "cudaStreamSynchronize", 3, 0 },
					  { "cudaMalloc", 1, 0 } };
	struct tl t;

	iter_loop(&t, "adv_none.db", ks, 4, 13, cs, 3);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE fatal = 1"
			     " AND regionId = 1"), 3 * OCCS);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE detail LIKE '%%; %%'"), 0);
	tl_close(&t);
}

/* A region of one library's kernels on the legacy stream: its SetStream call. */
static void legacy(const char *db, const char *k1, const char *k2, const char *advice)
{
	const char *const ks[] = { k1, k2, k1 };
	struct tl t;

	iter_loop(&t, db, ks, 3, KP_LEGACY_STREAM_ID, NULL, 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'legacy_stream'"
			     " AND fatal = 0 AND detail = '%s'", advice), 1);
	tl_close(&t);
}

static void test_advice_legacy_handles(void)
{
	legacy("adv_leg_blas.db", GEMV, AXPY, C_LEGACY("cublasSetStream(handle, stream)"));
	legacy("adv_leg_sparse.db", SPMV, SPMV, C_LEGACY("cusparseSetStream(handle, stream)"));
	legacy("adv_leg_fft.db", FFT, FFT, C_LEGACY("cufftSetStream(plan, stream)"));
	legacy("adv_leg_rand.db", RAND, RAND, C_LEGACY("curandSetStream(generator, stream)"));
	legacy("adv_leg_two.db", SPMV, DOT, C_LEGACY("cublasSetStream(handle, stream) and"
						     " cusparseSetStream(handle, stream)"));
	/* a C program's own kernels: its own stream */
	legacy("adv_leg_own.db", MINE, MINE2, "launches on the legacy default stream, which"
	       " cannot be captured: create a stream (cudaStreamCreateWithFlags(&stream,"
	       " cudaStreamNonBlocking)), launch the region on it and capture that stream");
}

/* cusparseSpMV allocating its buffer around the call. */
static void test_advice_cusparse_buffer(void)
{
	static const char *const ks[] = { MINE, SPMV, MINE2 };
	static const struct call cs[] = { { "cudaMalloc", 1, 0 }, { "cudaFree", 2, 0 } };

	c_advice("adv_sparse_buf.db", ks, 3, cs, 2, "'malloc', 'free'", C_SPARSE_BUF);
}

/* thrust::reduce / cub::DeviceReduce allocating temporary storage per call. */
static void test_advice_cub_temp(void)
{
	static const char *const ks[] = { MINE, CUB1, CUB2, MINE2 };
	static const struct call cs[] = { { "cudaMalloc", 1, 0 }, { "cudaFree", 3, 0 } };

	c_advice("adv_cub.db", ks, 4, cs, 2, "'malloc', 'free'", C_CUB_TMP);
}

/*
 * A PyTorch step (Kineto trace): four kernels under aten::add in train.py(7),
 * and between kernels 1 and 2 (T+26 .. 28.5) a value read on the host: a
 * pageable DtoH copy and a stream sync under the CPU ops ops[0] > ops[1] >
 * ... (n_ops).
 */
static struct kp_db *torch_step(const char *name, const char *const *ops, int n_ops)
{
	char trace[64];
	struct kj j = {0};

	snprintf(trace, sizeof(trace), "%s.json", name);
	kj_add(&j, "{\"traceEvents\": [\n");
	kj_x(&j, "python_function", "train.py(100): <module>", 0, 1e6);
	for (int k = 0; k < OCCS; k++) {
		double T = 1000 + 1000 * k;

		kj_x(&j, "user_annotation", "step", T, 300);
		kj_x(&j, "python_function", "train.py(7): train_step", T + 1, 298);
		for (int i = 0; i < 4; i++) {
			char kn[32];

			snprintf(kn, sizeof(kn), "elementwise_kernel_%d", i);
			kj_x(&j, "cpu_op", "aten::add", T + 9 + 10 * i, 6.5);
			kj_kernel(&j, kn, T + 10 + 10 * i, T + 12 + 10 * i, 8);
			if (i != 1)
				continue;
			for (int p = 0; p < n_ops; p++)
				kj_x(&j, "cpu_op", ops[p], T + 26 + 0.1 * p, 2.5 - 0.2 * p);
			kj_copy(&j, "Memcpy DtoH (Device -> Pageable)", T + 26.5, 0.5, T + 30.2, 0.3);
			kj_call(&j, "cudaStreamSynchronize", T + 27.2, 0.6);
		}
	}
	return kj_analyzed_from(kj_write(&j, trace), name);
}

/* loss.item() in the middle of a step: Python advice, not C. */
static void test_advice_torch_item(void)
{
	static const char *const ops[] = { "aten::item", "aten::_local_scalar_dense" };
	struct kp_db *db = torch_step("adv_item", ops, 2);

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE fatal = 1"
			       " AND kind IN ('pageable_copy', 'sync')"
			       " AND cpu_op = 'aten::_local_scalar_dense' AND py_frame = 'train.py:7'"
			       " AND detail LIKE '%%splits the region; " PY_ITEM "'"), 2 * OCCS);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE detail LIKE '%%cuda%%Set%%'"), 0);
	kp_db_close(db);
}

/* `if mask.any():` (aten::is_nonzero, GPT-2's mask check): the truth test's fix. */
static void test_advice_torch_if(void)
{
	static const char *const ops[] = { "aten::is_nonzero", "aten::item",
					   "aten::_local_scalar_dense" };
	struct kp_db *db = torch_step("adv_if", ops, 3);

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE fatal = 1"
			       " AND kind IN ('pageable_copy', 'sync')"
			       " AND detail LIKE 'cuda%% in aten::_local_scalar_dense (from"
			       " aten::is_nonzero, train.py:7)%%; " PY_IF "'"), 2 * OCCS);
	kp_db_close(db);
}

CU_TestInfo kp_tests_advice[] = {
	{ "cuBLAS reduction in host pointer mode: cublasSetPointerMode", test_advice_cublas_dot },
	{ "the program's own kernels: no library advice", test_advice_none },
	{ "library handles on the legacy stream: their SetStream calls",
	  test_advice_legacy_handles },
	{ "cuSPARSE work buffer allocated per call", test_advice_cusparse_buffer },
	{ "thrust/CUB temporary storage allocated per call", test_advice_cub_temp },
	{ "PyTorch .item() in a step: Python advice", test_advice_torch_item },
	{ "PyTorch truth test on a tensor (is_nonzero)", test_advice_torch_if },
	CU_TEST_INFO_NULL,
};
