/*
 * test_atenview.c - the ATen view of fusion candidates in a PyTorch
 * profiler trace recorded with record_shapes=True
 * (tests/fixtures/aten_shapes.json, from gen_aten_shapes.py): the importer
 * keeps each CPU op's inputs (kp_cpu_op_args), the analyzer names the ATen
 * op of each kernel of a candidate with its inputs and says whether
 * kplan.torch fuses the chain (analyzer/aten_view.c), and `kplan analyze`,
 * fusion.csv and `kplan plan` say it: pointwise chains, one ending in a
 * LayerNorm, an RMSNorm written as ops (a row mean inside the chain), a
 * rotate_half ending in a cat, a mask bias ending in a pad. The generator's
 * --cases trace breaks each rule of the mean, the pad and the cat once. The
 * same trace without shapes gives the output it gave before; malformed
 * shape args are counted and skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyzer/analyzer.h"
#include "analyzer/internal.h"
#include "common/strbuf.h"
#include "importers/import.h"
#include "testutil.h"
#include "timeline.h"

#define FIXTURE "tests/fixtures/aten_shapes.json"
#define GEN "tests/fixtures/gen_aten_shapes.py"
#define STEPS 4

static const char gelu_chain[] =
	"aten::mul(f16[1,1,3072], 0.5) > aten::pow(f16[1,1,3072], 3.) > "
	"aten::mul(f16[1,1,3072], 0.044715) > aten::add(f16[1,1,3072], f16[1,1,3072], 1) > "
	"aten::mul(f16[1,1,3072], 0.79788456080286541) > aten::tanh(f16[1,1,3072]) > "
	"aten::add(f16[1,1,3072], 1., 1) > aten::mul(f16[1,1,3072], f16[1,1,3072])";
static const char fuses[] =
	"kplan.torch fuses this chain at capture (kt.open(fuse=\"exact\"), bit-identical)";
/* HF LlamaRMSNorm on f16[1,8,1024]: each .to is the aten::_to_copy around the
 * aten::copy_ that launched the kernel, the eps a wrapped Python float */
static const char rms_chain[] =
	"aten::_to_copy(f16[1,8,1024], 6, False) > aten::pow(f32[1,8,1024], 2) > "
	"aten::mean(f32[1,8,1024], [-1], True) > aten::add(f32[1,8,1], f64[], 1) > "
	"aten::rsqrt(f32[1,8,1]) > aten::mul(f32[1,8,1024], f32[1,8,1]) > "
	"aten::_to_copy(f32[1,8,1024], 5, False) > aten::mul(f16[1024], f16[1,8,1024])";
static const char fuses_rms[] =
	"kplan.torch fuses this chain at capture, the row mean (RMSNorm) inside its kernel "
	"(kt.open(fuse=\"exact\"), bit-identical)";
static const char fuses_cat[] =
	"kplan.torch fuses this chain at capture, ending in the cat's kernel "
	"(kt.open(fuse=\"exact\"), bit-identical)";
static const char fuses_pad[] =
	"kplan.torch fuses this chain at capture, ending in the pad's kernel "
	"(kt.open(fuse=\"exact\"), bit-identical)";

/* The keys of python/kplan/aten_ops.py's OPS, in order, into keys[]. */
static int python_ops(char keys[][32], int max)
{
	size_t len;
	char *text = kp_test_read(kp_test_src("python/kplan/aten_ops.py"), &len);
	char *p, *end;
	int n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	p = strstr(text, "\nOPS = {\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p += strlen("\nOPS = {\n");
	end = strstr(p, "\n}\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(end);
	while (p < end && n < max) {
		char *q, *nl = strchr(p, '\n');

		if (sscanf(p, " \"%31[^\"]\":", keys[n]) == 1 && (q = strchr(p, '"')) && q < nl)
			n++;
		p = nl + 1;
	}
	free(text);
	return n;
}

/* The C catalog is aten_ops.OPS: same ops, same order; the ATen names the
 * profiler shows map onto catalog ops. */
static void test_catalog_is_python_ops(void)
{
	char keys[64][32];
	int n = python_ops(keys, 64);

	CU_ASSERT(n >= 20);
	CU_ASSERT_EQUAL_FATAL((size_t)n, kp__aten_catalog_n);
	for (int i = 0; i < n; i++) {
		if (strcmp(keys[i], kp__aten_catalog[i]))
			fprintf(stderr, "\naten_ops.OPS[%d] is %s, analyzer/aten_view.c has %s\n", i,
				keys[i], kp__aten_catalog[i]);
		CU_ASSERT_STRING_EQUAL(keys[i], kp__aten_catalog[i]);
	}
	CU_ASSERT_STRING_EQUAL(kp__aten_catalog_op("aten::sub"), "add");
	CU_ASSERT_STRING_EQUAL(kp__aten_catalog_op("aten::_to_copy"), "copy");
	CU_ASSERT_STRING_EQUAL(kp__aten_catalog_op("clamp_min"), "clamp");
	CU_ASSERT_PTR_NULL(kp__aten_catalog_op("aten::add_"));
	CU_ASSERT_PTR_NULL(kp__aten_catalog_op("aten::_softmax"));
	/* every op an ATen name becomes is in the catalog */
	static const char *const names[] = {
		"add", "sub", "rsub", "mul", "div", "neg", "abs", "exp", "log", "tanh", "sqrt",
		"rsqrt", "reciprocal", "sigmoid", "relu", "silu", "gelu", "pow", "clamp",
		"clamp_min", "clamp_max", "where", "masked_fill", "_to_copy", "clone",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		const char *op = kp__aten_catalog_op(names[i]);
		size_t j;

		CU_ASSERT_PTR_NOT_NULL_FATAL(op);
		for (j = 0; j < kp__aten_catalog_n && strcmp(op, kp__aten_catalog[j]); j++)
			;
		CU_ASSERT(j < kp__aten_catalog_n);
	}
}

/* A candidate's text column (the test's storage), the one candidate whose
 * kernel names hold `kernel`; "(none)" when not one. */
static char *cand_text(struct kp_db *db, const char *col, const char *kernel)
{
	static char buf[4][2048];
	static int k;
	char sql[256];
	sqlite3_stmt *st;
	char *out = buf[k++ % 4];

	out[0] = 0;
	snprintf(sql, sizeof(sql), "SELECT %s FROM kp_fusion_candidates WHERE"
		 " instr(kernel_names, ?1) > 0", col);
	if (kp_db_prepare(db, sql, &st, NULL))
		return out;
	sqlite3_bind_text(st, 1, kernel, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(out, 2048, "%s", sqlite3_column_text(st, 0) ?
			 (const char *)sqlite3_column_text(st, 0) : "(null)");
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(out, 2048, "(not one)");
	sqlite3_finalize(st);
	if (!out[0])
		snprintf(out, 2048, "(none)");
	return out;
}

static void test_import_keeps_inputs(void)
{
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct kp_db *db;

	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL_FATAL(kp_import(kp_test_src(FIXTURE), kp_test_path("shapes_i.db"), NULL,
					&st, &err), 0);
	/* every CPU op but the four aten::softmax around _softmax carries its inputs */
	CU_ASSERT_EQUAL(st.rows[KP_T_CPU_OP_ARGS], 51 * STEPS);
	CU_ASSERT_EQUAL(st.bad_shape_args, 0);
	db = kp_db_open(kp_test_path("shapes_i.db"), 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	/* keyed as the op's NVTX row, the arrays re-serialized without spaces */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args a JOIN NVTX_EVENTS n"
			       " ON n.runId = a.runId AND n.globalTid = a.globalTid AND n.start = a.start"
			       " JOIN StringIds s ON s.id = n.textId AND s.value = 'aten::tanh'"
			       " WHERE a.dims = '[[1,1,3072]]' AND a.types = '[\"c10::Half\"]'"
			       " AND a.strides = '[[3072,3072,1]]' AND a.concrete = '[\"\"]'"), STEPS);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args WHERE concrete ="
			       " '[\"\",\"-1\",\"False\"]'"), STEPS);
	/* a dim list as the profiler writes it, spaces kept; a cat's TensorList
	 * as shapes and strides of its tensors */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args WHERE concrete ="
			       " '[\"\",\"[-1]\",\"True\",\"\"]'"), STEPS);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args WHERE"
			       " dims = '[[[1,8,32,64],[1,8,32,64]],[]]' AND types ="
			       " '[\"TensorList\",\"Scalar\"]' AND strides ="
			       " '[[[16384,2048,64,1],[32768,4096,128,1]],[]]'"), STEPS);
	kp_db_close(db);
}

static void test_candidates_in_aten_terms(void)
{
	struct kp_db *db = kj_analyzed_from(kp_test_src(FIXTURE), "shapes_a");

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_fusion_candidates"), 8);
	/* GELU: eight catalog ops on f16[1,1,3072], one kernel each */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT occurrences FROM kp_fusion_candidates"
			       " WHERE instr(kernel_names, 'MulScalar2Functor') > 0"), STEPS);
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "MulScalar2Functor"), gelu_chain);
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "MulScalar2Functor"), fuses);
	/* attention scores: the broadcast mask fits, the softmax stops it */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "AddMaskFunctor"),
			       "aten::mul(f16[1,12,64,64], 0.125) > "
			       "aten::add(f16[1,12,64,64], f16[1,1,1,64], 1) > "
			       "aten::_softmax(f16[1,12,64,64], -1, False)");
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "AddMaskFunctor"),
			       "aten::_softmax is a reduction");
	/* a transposed input: read at its strides */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "MulStridedFunctor"),
			       "aten::mul(f16[64,64], 2.) > aten::exp(f16[64,64])");
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "MulStridedFunctor"), fuses);
	/* a residual and a bias add ending in a LayerNorm: one kernel */
	CU_ASSERT_PTR_NOT_NULL(strstr(cand_text(db, "aten_chain", "AddBiasFunctor"),
				      "aten::add(f16[4,768], f16[768], 1) > aten::native_layer_norm("
				      "f16[4,768], "));
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "AddBiasFunctor"),
			       "kplan.torch fuses this chain at capture, ending in the LayerNorm's "
			       "kernel (kt.open(fuse=\"exact\"), bit-identical)");
	/* RMSNorm written as ops: eight kernels, the mean's reduce_kernel among
	 * them (the kernel view calls it infeasible: a row reduction feeding a
	 * larger kernel; kplan.torch's row kernel is a block per row) */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT n_kernels FROM kp_fusion_candidates"
			       " WHERE instr(kernel_names, 'rsqrt_kernel_cuda') > 0"), 8);
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "rsqrt_kernel_cuda"), rms_chain);
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "rsqrt_kernel_cuda"), fuses_rms);
	/* rotate_half: the neg of a half view, the cat of (-x2, x1) */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "CatArrayBatchedCopy"),
			       "aten::neg(f16[1,8,32,64]) > "
			       "aten::cat([[1,8,32,64], [1,8,32,64]], -1)");
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "CatArrayBatchedCopy"), fuses_cat);
	/* a mean over the tokens: no row mean */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "lambda(int)#1}>(int) -> void "
					 "at::native::reduce_kernel"),
			       "aten::mul(f32[1,8,1024], f32[1,8,1]) > "
			       "aten::mean(f32[1,8,1024], [1], False)");
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "lambda(int)#1}>(int) -> void "
					 "at::native::reduce_kernel"),
			       "aten::mean over another dim than the last (kplan.torch fuses a "
			       "mean over the last dim)");
	/* a mask bias padded: the fill_ and the copy_ inside constant_pad_nd are
	 * the pad, one op */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "FillFunctor"),
			       "aten::mul(f16[1,1,8,13], f64[]) > "
			       "aten::add(f16[1,1,8,13], f16[1,1,1,13], 1) > "
			       "aten::constant_pad_nd(f16[1,1,8,13], [0, 3], 0.)");
	CU_ASSERT_STRING_EQUAL(cand_text(db, "torch_verdict", "FillFunctor"), fuses_pad);
	kp_db_close(db);
}

/*
 * The --cases trace: a chain per rule of kplan.torch's row mean, pad, cat,
 * index_copy_ and _foreach programs (gen_aten_shapes.py CASES), each found
 * by its first kernel.
 */
static void test_mean_pad_cat_rules(void)
{
	static const struct { const char *tag, *verdict; } cases[] = {
		{ "MeanF16", "aten::mean on f16 (kplan.torch fuses a mean of f32)" },
		{ "NoKeep", "aten::mean without keepdim (kplan.torch fuses a mean that keeps "
		  "the dim)" },
		{ "MeanAll", "aten::mean over all elements (kplan.torch fuses a mean over the "
		  "last dim)" },
		{ "MeanDtype", "aten::mean with a dtype (kplan.torch fuses a mean without one)" },
		{ "NoConcrete", "aten::mean: its arguments were not recorded (not fused: "
		  "kplan.torch fuses a mean over the last dim with keepdim)" },
		{ "TwoMeans", "a second aten::mean (kplan.torch fuses one row mean per chain)" },
		{ "MeanFirst", "aten::mean does not read a value of the chain (kplan.torch "
		  "fuses a mean into the chain before it)" },
		{ "StridedMean", "aten::mean: a chain over strided tensors does not take a row "
		  "mean (kplan.torch's row kernel reads and writes row-major)" },
		/* aten_rms.refusal: the warps split a row of 65536 vectors, 512 each */
		{ "LongRow", "aten::mean of f32[1,262144]: ATen may reduce a row across "
		  "blocks (kplan.torch fuses a mean ATen reduces in one block per row)" },
		{ "StridedAfter", "aten::mul reads a strided input after the row mean "
		  "(kplan.torch's row kernel reads row-major: the chain ends before it)" },
		/* dim [ndim-1] is the last dim too */
		{ "LastDim", "kplan.torch fuses this chain at capture, the row mean (RMSNorm) "
		  "inside its kernel (kt.open(fuse=\"exact\"), bit-identical)" },
		{ "NormAfterMean", "aten::native_layer_norm after a row mean (kplan.torch fuses "
		  "one reduction per chain)" },
		{ "CatMiddle", "aten::cat ends a chain (kplan.torch fuses the ops before it "
		  "into its kernel; the ops after it start another)" },
		{ "CatSizes", "aten::cat: a tensor of other sizes than the chain's off the cat "
		  "dim" },
		{ "CatStrided", "aten::cat: the chain's value is not row-major (kplan.torch "
		  "ends a chain in a cat of a row-major value)" },
		{ "CatAfterMean", "aten::cat after a row mean (kplan.torch's row kernel does not "
		  "end in a pad, a cat or an index_copy_)" },
		{ "IndexCopyOk", "kplan.torch fuses this chain at capture, ending in the KV cache "
		  "update's kernel (kt.open(fuse=\"exact\"), bit-identical)" },
		{ "IndexCopyIndex", "aten::index_copy_: the index is not a contiguous int64 vector "
		  "of the value's size along dim 2" },
		{ "IndexCopyBcast", "aten::index_copy_ into a broadcast tensor (its writes would "
		  "overlap)" },
		{ "IntPositions", "kplan.torch fuses this chain at capture (kt.open(fuse=\"exact\"), "
		  "bit-identical)" },
		{ "IntOut", "kplan.torch fuses this chain at capture (kt.open(fuse=\"exact\"), "
		  "bit-identical)" },
		{ "IntFloat", "aten::mul of i64 by a float (it promotes: kplan.torch fuses int64 ops "
		  "by integers)" },
		{ "IntTanh", "aten::tanh on i64 (kplan.torch fuses one of f32, f16, bf16 per op, and "
		  "i64 in add and mul)" },
		{ "PadCrop", "aten::constant_pad_nd with a negative pad (a crop; kplan.torch "
		  "fuses non-negative pads)" },
		{ "PadStrided", "aten::constant_pad_nd: the chain's value is not row-major "
		  "(kplan.torch ends a chain in a pad of a row-major value)" },
		{ "PadOk", "kplan.torch fuses this chain at capture, ending in the pad's kernel "
		  "(kt.open(fuse=\"exact\"), bit-identical)" },
		/* a copy_ of the user's own is in place: not read as the op around it */
		{ "InPlaceCopy", "aten::copy_ is not in kplan.torch's pointwise catalog" },
		/* runs of _foreach ops: aten_foreach.py's overloads */
		{ "ForeachAdam", "kplan.torch runs these 8 _foreach ops as one program of at "
		  "most two kernels at capture, when their lists are f32 (a trace does not record "
		  "a list's dtypes; kt.open(fuse=\"exact\"), bit-identical)" },
		{ "ForeachScalars", "aten::_foreach_addcdiv_ by a list of scalars (kplan.torch "
		  "fuses a scalar, or a list of tensors where the op takes one)" },
		{ "ForeachTensor", "aten::_foreach_add_ by one tensor (kplan.torch fuses a scalar, "
		  "or a list of tensors where the op takes one)" },
		{ "ForeachMax", "aten::_foreach_maximum_ is not among the _foreach ops kplan.torch "
		  "fuses (add, sub, mul, div, neg, reciprocal, sqrt, lerp, addcmul, addcdiv, pow "
		  "of a scalar)" },
		{ "ForeachPowList", "aten::_foreach_pow of a list (kplan.torch fuses the power of "
		  "a scalar by a list)" },
		{ "ForeachLerpList", "aten::_foreach_lerp_ with a list where kplan.torch takes a "
		  "scalar" },
		{ "ForeachThenMul", "aten::mul ends the run of _foreach ops (kplan.torch fuses the "
		  "run as one program of its own)" },
		{ "MulThenForeach", "aten::_foreach_mul_ is a multi-tensor op (kplan.torch fuses a "
		  "run of _foreach ops as one program, apart from pointwise chains)" },
	};
	const char *trace = kp_test_path("aten_cases.json");
	struct kp_db *db;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("python3 '%s' --cases > '%s'", kp_test_src(GEN), trace),
			      0);
	db = kj_analyzed_from(trace, "aten_cases");
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_fusion_candidates"),
			(int64_t)(sizeof(cases) / sizeof(*cases)));
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char first[64];
		const char *got;

		snprintf(first, sizeof(first), "Case%s0<", cases[i].tag);
		got = cand_text(db, "torch_verdict", first);
		if (strcmp(got, cases[i].verdict))
			fprintf(stderr, "\n%s: %s\n", cases[i].tag, got);
		CU_ASSERT_STRING_EQUAL(got, cases[i].verdict);
	}
	/* a [ndim-1] dim list and a TensorList as the chain shows them */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "CaseLastDim0<"),
			       "aten::pow(f32[4,256], 2) > aten::mean(f32[4,256], [1], True) > "
			       "aten::add(f32[4,1], f64[], 1) > aten::rsqrt(f32[4,1]) > "
			       "aten::mul(f32[4,256], f32[4,1])");
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "CaseCatSizes0<"),
			       "aten::neg(f16[2,8,32]) > aten::cat([[2,8,32], [2,4,32]], -1)");
	/* a _foreach op's lists: the first one's shapes, the others named */
	CU_ASSERT_STRING_EQUAL(cand_text(db, "aten_chain", "CaseForeachScalars0<"),
			       "aten::_foreach_mul_([[64,64], [64]], 0.999) > "
			       "aten::_foreach_addcdiv_([[64,64], [64]], TensorList, TensorList, "
			       "[-0.001, -0.001])");
	kp_db_close(db);
}

/* kplan analyze's lines, fusion.csv's columns and kplan plan's notes. */
static void test_cli_says_it(void)
{
	const char *k = kp_test_kplan(), *db = kp_test_path("shapes_c.db");
	const char *out = kp_test_path("shapes_c.out"), *csv = kp_test_path("shapes_csv");
	char *text;
	size_t len;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import '%s' -o '%s' > '%s'", k, kp_test_src(FIXTURE),
					 db, out), 0);
	text = kp_test_read(out, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "; 204 CPU ops with input shapes\n"));
	free(text);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s analyze '%s' --csv '%s' > '%s'", k, db, csv, out), 0);
	text = kp_test_read(out, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "8 kernels, 16.0 us saved: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n       ATen: aten::mul(f16[1,1,3072], 0.5) > "
				      "aten::pow(f16[1,1,3072], 3.) > "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n       kplan.torch fuses this chain at capture "
				      "(kt.open(fuse=\"exact\"), bit-identical)\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n       aten::_softmax is a reduction\n"));
	free(text);
	text = kp_test_read(kp_test_path("shapes_csv/fusion.csv"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, ",reason,dependence,aten_chain,torch_verdict\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, ",adjacency,\"aten::mul(f16[1,1,3072], 0.5) > "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "f16[1,1,3072])\",\"kplan.torch fuses this chain at "
				      "capture (kt.open(fuse=\"\"exact\"\"), bit-identical)\"\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, ",aten::_softmax is a reduction\n"));
	/* every candidate is in the csv, the RMSNorm the kernel view calls infeasible too */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "aten::mul(f16[1024], f16[1,8,1024])\",\"kplan.torch "
				      "fuses this chain at capture, the row mean (RMSNorm) inside "
				      "its kernel (kt.open(fuse=\"\"exact\"\"), bit-identical)\"\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "-1)\",\"kplan.torch fuses this chain at capture, "
				      "ending in the cat's kernel (kt.open(fuse=\"\"exact\"\"), "
				      "bit-identical)\"\n"));
	free(text);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s plan '%s' -o '%s' > '%s' 2>&1", k, db,
					 kp_test_path("shapes_c.kplan"), out), 0);
	text = kp_test_read(out, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "fusion candidate 1 (region step, 8 kernels) is the "
				      "ATen chain aten::mul(f16[1,1,3072], 0.5) > "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "aten::mul(f16[1,1,3072], f16[1,1,3072]): kplan.torch "
				      "fuses this chain at capture"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "(region step, 3 kernels) is the ATen chain "
				      "aten::mul(f16[1,12,64,64], 0.125) > "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "-1, False): aten::_softmax is a reduction\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "aten::constant_pad_nd(f16[1,1,8,13], [0, 3], 0.): "
				      "kplan.torch fuses this chain at capture, ending in the pad's "
				      "kernel"));
	free(text);
}

/* Without record_shapes: no rows, no ATen view, kplan analyze's output as before. */
static void test_no_shapes_as_before(void)
{
	const char *k = kp_test_kplan();
	const char *ns = kp_test_path("noshapes.json");
	const char *a = kp_test_path("noshapes_a.out"), *b = kp_test_path("noshapes_b.out");
	struct kp_db *db;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("python3 '%s' --no-shapes > '%s'", kp_test_src(GEN), ns), 0);
	db = kj_analyzed_from(ns, "noshapes");
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_fusion_candidates"), 8);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_fusion_candidates"
			       " WHERE aten_chain IS NOT NULL OR torch_verdict IS NOT NULL"), 0);
	kp_db_close(db);
	/* the output with shapes, less its ATen lines, is the output without */
	CU_ASSERT_EQUAL(kp_test_sh("%s import '%s' -o '%s' >/dev/null && %s analyze '%s' |"
				   " grep -v '^analyzed in' > '%s'", k, ns,
				   kp_test_path("noshapes_c.db"), k, kp_test_path("noshapes_c.db"),
				   a), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s import '%s' -o '%s' >/dev/null && %s analyze '%s' |"
				   " grep -v '^analyzed in' | grep -v '^       ATen: '"
				   " | grep -v '^       kplan.torch fuses\\|^       aten::' > '%s'", k,
				   kp_test_src(FIXTURE), kp_test_path("shapes_d.db"), k,
				   kp_test_path("shapes_d.db"), b), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'best fusion candidates' '%s' && cmp -s '%s' '%s'",
				   a, a, b), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'ATen' '%s'", a), 1);
}

/* Shape args of the wrong type, too long, or holding a map: counted, left out. */
static void test_malformed_args(void)
{
	static const char tail[] = "]}";
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct kp_strbuf sb = KP_STRBUF_INIT;
	const char *bad = kp_test_path("bad_shapes.json");
	struct kp_db *db;

	kp_strbuf_adds(&sb, "{\"traceEvents\": ["
		/* good */
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mul\",\"pid\":9,\"tid\":11,"
		"\"ts\":100,\"dur\":7,\"args\":{\"Input Dims\":[[1,1,3072],[]],"
		"\"Input type\":[\"c10::Half\",\"Scalar\"],\"Concrete Inputs\":[\"\",\"0.5\"]}},"
		/* a string, a number, a map; an escaped control character kept escaped */
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":9,\"tid\":11,"
		"\"ts\":110,\"dur\":7,\"args\":{\"Input Dims\":\"oops\",\"Input type\":7,"
		"\"Input Strides\":{\"a\":[1]},\"Concrete Inputs\":[\"\\u0001\\\"\"]}},"
		/* a map inside, then an array too long to keep */
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::tanh\",\"pid\":9,\"tid\":11,"
		"\"ts\":120,\"dur\":7,\"args\":{\"Input Dims\":[[1,{\"x\":[2]}]],"
		"\"Input Strides\":[[");
	for (int i = 0; i < 100000; i++)
		kp_strbuf_addf(&sb, "%s%d", i ? "," : "", i);
	kp_strbuf_adds(&sb, "]]}}");
	kp_strbuf_adds(&sb, tail);
	CU_ASSERT_EQUAL_FATAL(kp_test_write(bad, sb.buf, (long)sb.len), 0);
	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL_FATAL(kp_import(bad, kp_test_path("bad_shapes.db"), NULL, &st, &err), 0);
	CU_ASSERT_EQUAL(st.bad_shape_args, 5);
	CU_ASSERT_EQUAL(st.rows[KP_T_CPU_OP_ARGS], 2);
	CU_ASSERT_EQUAL(st.rows[KP_T_NVTX], 4);   /* three ops and their domain */
	db = kp_db_open(kp_test_path("bad_shapes.db"), 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args WHERE start = 110000"
			       " AND dims IS NULL AND types IS NULL AND strides IS NULL"
			       " AND concrete = '[\"\\u0001\\\"\"]'"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_cpu_op_args WHERE start = 120000"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT max(length(coalesce(dims, '')) + length(coalesce(strides,"
			       " ''))) FROM kp_cpu_op_args") <= 2 * 4096, 1);
	kp_db_close(db);
	/* bytes that are not UTF-8 make the file not JSON: an error, as for any string */
	sb.len = 0;
	kp_strbuf_adds(&sb, "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mul\","
		       "\"pid\":9,\"tid\":11,\"ts\":100,\"dur\":7,\"args\":{\"Concrete Inputs\":"
		       "[\"\xff\xfe\"]}}]}");
	CU_ASSERT_EQUAL_FATAL(kp_test_write(bad, sb.buf, (long)sb.len), 0);
	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL(kp_import(bad, kp_test_path("bad_utf8.db"), NULL, &st, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "invalid JSON"));
	kp_strbuf_release(&sb);
}

CU_TestInfo kp_tests_atenview[] = {
	{ "catalog: the C table is aten_ops.OPS", test_catalog_is_python_ops },
	{ "import: a CPU op's inputs kept, keyed as its range", test_import_keeps_inputs },
	{ "analyze: candidates as ATen chains with kplan.torch's verdict",
	  test_candidates_in_aten_terms },
	{ "analyze: the rules of the row mean, the pad, the cat and the update", test_mean_pad_cat_rules },
	{ "cli: analyze, fusion.csv and plan say it", test_cli_says_it },
	{ "no shapes: no view, the output as before", test_no_shapes_as_before },
	{ "malformed shape args: counted and skipped", test_malformed_args },
	CU_TEST_INFO_NULL,
};
