/*
 * test_reports.c - reports/: HTML escaping, the report page, golden CSVs,
 * a database without analysis, `kplan report`, `kplan diff` and region
 * families.
 *
 * The fixture is built in code: trace rows through kp_writer, analysis rows
 * (kp_regions, kp_blockers, kp_fusion_candidates, kp_plans...) with SQL, so
 * the reports are tested without the analyzer or the planner.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "common/kname.h"
#include "common/strbuf.h"

#include "db/db.h"
#include "db/writer.h"
#include "plan/planfile.h"
#include "plan/predict.h"
#include "reports/diff.h"
#include "reports/html.h"
#include "reports/report.h"
#include "testutil.h"

/* a name that tries to inject markup, with a raw 0xff byte */
#define EVIL "<script>alert(\"x&y\")</script>\xff"
#define EVIL_ESC "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;\xef\xbf\xbd"

static const char *const names[] = {
	"void gemm_kernel<128, 64>(float const*, float*, int)",
	EVIL,
	"elementwise_add, \"fused\"",
};

/*
 * One run on stream 7: `steps` steps of three kernels each, every kernel
 * launched by cudaLaunchKernel. Kernel 0 of each step waits for the CPU
 * (its launch call starts 5 us after the previous kernel ended: host-bound),
 * kernels 1 and 2 were queued early (device-side gaps of 1 us). One
 * cudaStreamSynchronize at the end. scale stretches kernel 0's duration.
 */
static int64_t add_run(struct kp_db *db, const char *gpu, int driver, int steps, double scale)
{
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "synthetic", .device_name = gpu, .compute_major = 9,
				  .sm_count = 132, .driver_version = driver, .runtime_version = 13000,
				  .command = "python train.py --evil '<b>'" };
	struct kp_writer w;
	int64_t run = 0, prev_end = 100000;
	uint32_t corr = 1;
	int s, k;

	if (kp_db_run_insert(db, &ri, &run, &err))
		return -1;
	kp_writer_init(&w, db, run);
	kp_db_begin(db, &err);
	for (s = 0; s < steps; s++) {
		struct kp_nvtx_rec nv = { .event_type = KP_NVTX_PUSHPOP, .text = "step" };

		nv.start = prev_end + 1000;
		for (k = 0; k < 3; k++) {
			int64_t dur = k == 0 ? (int64_t)(4000 * scale) : k == 1 ? 2000 : 1000;
			struct kp_api_rec a = { .name = "cudaLaunchKernel", .correlation_id = corr };
			struct kp_kernel_rec kr = { .stream_id = 7, .correlation_id = corr,
						    .name = names[k], .grid = { 64, 1, 1 },
						    .block = { 256, 1, 1 } };

			if (k == 0) {
				a.start = prev_end + 5000;
				kr.start = a.start + 4000;
			} else {
				a.start = prev_end - 1500;
				kr.start = prev_end + 1000;
			}
			a.end = a.start + 3000;
			kr.end = kr.start + dur;
			kp_writer_api(&w, &a, &err);
			kp_writer_kernel(&w, &kr, &err);
			prev_end = kr.end;
			corr++;
		}
		nv.end = prev_end + 500;
		kp_writer_nvtx(&w, &nv, &err);
	}
	{
		struct kp_api_rec a = { .name = "cudaStreamSynchronize", .correlation_id = corr,
					.start = prev_end + 100, .end = prev_end + 900 };

		kp_writer_api(&w, &a, &err);
	}
	kp_db_commit(db, &err);
	kp_writer_release(&w);
	kp_db_run_finish(db, run, 2, "2 kernel records: buffer full", "complete", &err);
	return run;
}

/* kp_db_exec of a printf-formatted statement list. */
static int exec_f(struct kp_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int exec_f(struct kp_db *db, const char *fmt, ...)
{
	struct kp_err err = {0};
	char *sql;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&sql, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = kp_db_exec(db, sql, &err);
	if (rc)
		fprintf(stderr, "fixture: %s\n", err.msg);
	free(sql);
	return rc;
}

/* A plan for the fixture, written by plan/'s own writer. */
/* The keys and info every test plan shares. */
static void plan_keys(struct kp_plan *p, int64_t run)
{
	p->cc_major = 9;
	p->cuda_major = 13;
	p->gpu_name = strdup("NVIDIA H200");
	p->sm_count = 132;
	p->driver_version = 13000;
	p->tool_version = strdup("0.1.0");
	p->source_run = run;
	p->source_kind = strdup("synthetic");
	p->date = strdup("");
	p->run_eager_ns = 93000;
}

static char *plan_text(int64_t run)
{
	struct kp_plan *p = kp_plan_new();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan_region *r;

	if (!p)
		return NULL;
	plan_keys(p, run);
	p->mem_budget_bytes = 1 << 20;
	p->n_regions = 2;
	p->regions = r = calloc(2, sizeof(*r));
	r[0].label = strdup("step");
	r[0].decision = KP_PLAN_GRAPH;
	r[0].reason = KP_PLAN_R_LAUNCH_BOUND;
	r[0].reason_text = strdup("host-bound idle 55% of the occurrence");
	r[0].fingerprint = 0x1234;
	r[0].kernels = 3;
	r[0].nodes = 3;
	r[0].occurrences = 3;
	r[0].shape_keys = 1;
	r[0].warmup = 2;
	r[0].break_even = 4;
	r[0].eager_ns = 18000;
	r[0].graph_ns = 8000;
	r[0].one_time_ns = 2000;
	r[0].mem_budget_bytes = 65536;
	r[0].speedup_pred = 2.25;
	r[1].label = strdup("<b>opt</b>");
	r[1].decision = KP_PLAN_EAGER;
	r[1].reason = KP_PLAN_R_BLOCKER;
	r[1].reason_text = strdup("cudaStreamSynchronize inside");
	r[1].fingerprint = 0x5678;
	r[1].kernels = 1;
	r[1].nodes = 1;
	r[1].occurrences = 1;
	r[1].shape_keys = 1;
	r[1].eager_ns = 2000;
	r[1].graph_ns = 2000;
	r[1].speedup_pred = 1;
	kp_plan_predict_run(p);  /* 'step' saves (3 - 2) x 10 us - 2 us of the run's 93 us */
	if (kp_plan_write(p, &sb, &err)) {
		fprintf(stderr, "plan write: %s\n", err.msg);
		kp_plan_free(p);
		kp_strbuf_release(&sb);
		return NULL;
	}
	kp_plan_free(p);
	return kp_strbuf_detach(&sb, NULL);
}

/* Store plan text as run's current plan. */
static int insert_plan(struct kp_db *db, int64_t run, const char *plan)
{
	struct kp_err err = {0};
	sqlite3_stmt *st;
	int rc;

	rc = kp_db_prepare(db, "INSERT INTO kp_plans (runId, created_ns, path, checksum, status,"
			   " speedup_pred, body) VALUES (?1, 1, 'model.kplan', 'abc', 'current', 2.25, ?2)",
			   &st, &err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_text(st, 2, plan, -1, SQLITE_STATIC);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
	sqlite3_finalize(st);
	return rc;
}

static int add_analysis(struct kp_db *db, int64_t run, int64_t eager_step)
{
	char *plan = plan_text(run);
	long long r = (long long)run;
	int rc;

	rc = exec_f(db,
		"INSERT INTO kp_regions (runId, regionId, label, source, streamId, occurrences,"
		" kernels, nodes, eager_ns, busy_ns, host_idle_ns, device_idle_ns, graph_ns_pred,"
		" speedup_pred, capturable, blockers, one_time_ns, break_even, extra_mem_bytes,"
		" fingerprint, shape_keys, patch_slots) VALUES"
		" (%lld, 1, 'step', 'nvtx', NULL, 3, 3, 3, %lld, 7000, 9000, 2000, 8000, 2.25, 1, NULL,"
		"  60000, 4, 65536, '0000000000001234', 1, 0),"
		" (%lld, 2, '<b>opt</b>', 'mined', 7, 1, 1, 1, 2000, 2000, 0, 0, NULL, NULL, 0, 'sync',"
		"  NULL, NULL, NULL, '0000000000005678', 1, 0);"
		"INSERT INTO kp_region_occurrences (runId, regionId, occIndex, start, end, kernels) VALUES"
		" (%lld, 1, 0, 101000, 116500, 3), (%lld, 1, 1, 117000, 132500, 3),"
		" (%lld, 1, 2, 133000, 148500, 3);"
		"INSERT INTO kp_blockers (runId, regionId, kind, fatal, api_name, start, correlationId)"
		" VALUES (%lld, 2, 'sync', 1, 'cudaStreamSynchronize', 150000, 10),"
		" (%lld, 1, 'shape_key', 0, 'cudaLaunchKernel', 120000, 4);"
		"INSERT INTO kp_gaps (runId, deviceId, streamId, correlationId, kernel_start, gap_ns,"
		" host_bound, queue_ns, launch_api_ns) VALUES"
		" (%lld, 0, 7, 4, 126000, 9000, 1, 4000, 3000), (%lld, 0, 7, 5, 131000, 1000, 0, 3500, 3000);"
		"INSERT INTO kp_fusion_candidates (runId, candId, regionId, streamId,"
		" first_correlationId, occurrences, n_kernels, kernel_names, pattern, dur_ns,"
		" saved_bytes, saved_nodes, penalty_ns, score, feasible, reason, dependence) VALUES"
		" (%lld, 1, 1, 7, 2, 3, 2, 'elementwise_add, \"fused\" -> x' || char(10) || 'y',"
		"  'elementwise', 3000, 1048576, 1, 100, 2500.5, 1, NULL, 'args');"
		"INSERT OR REPLACE INTO kp_calibration VALUES ('NVIDIA H200', 13000, 'launch_host_ns', 3700.0, 50, 1);",
		r, (long long)eager_step, r, r, r, r, r, r, r, r, r);
	if (!rc && plan)
		rc = insert_plan(db, run, plan);
	free(plan);
	return plan ? rc : -1;
}

static struct kp_db *fixture(const char *name, int analyzed, double scale)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path(name), KP_DB_CREATE, &err);
	int64_t run;

	if (!db)
		return NULL;
	run = add_run(db, "NVIDIA H200", 13000, 3, scale);
	kp_db_create_indexes(db, &err);
	if (run < 0 || (analyzed && add_analysis(db, run, (int64_t)(18000 * scale)))) {
		kp_db_close(db);
		return NULL;
	}
	return db;
}

/* ---------------------------------------------------------------------- */

static char *html_of(void (*fn)(FILE *f, const char *s, const char *t), const char *s, const char *t)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	fn(f, s, t);
	fclose(f);
	return buf;
}

static void esc2(FILE *f, const char *s, const char *t)
{
	(void)t;
	kp_html_esc(f, s);
}

static void name60(FILE *f, const char *s, const char *t)
{
	kp_html_name(f, s, t, 20);
}

static void test_escape(void)
{
	char *o = html_of(esc2, EVIL, NULL);

	CU_ASSERT_STRING_EQUAL(o, EVIL_ESC);
	free(o);
	/* valid multi-byte UTF-8 passes, overlong / truncated / surrogate do not */
	o = html_of(esc2, "\xc3\xa9 \xe2\x80\xa6 \xc0\xaf \xe2\x80 \xed\xa0\x80 'q'\x01", NULL);
	CU_ASSERT_STRING_EQUAL(o, "\xc3\xa9 \xe2\x80\xa6 \xef\xbf\xbd\xef\xbf\xbd "
			       "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
			       "&#39;q&#39;\xef\xbf\xbd");
	free(o);
}

static void test_shorten(void)
{
	char *o = html_of(name60, "short", NULL);

	CU_ASSERT_STRING_EQUAL(o, "short");
	free(o);
	o = html_of(name60, "void very::long::name<int, \"q\">(float*, float*)", "name");
	CU_ASSERT_STRING_EQUAL(o, "<span title=\"void very::long::name&lt;int, &quot;q&quot;&gt;"
			       "(float*, float*)\">name\xe2\x80\xa6</span>");
	free(o);
	o = html_of(name60, "abcdefghijklmnopqrstuvwxyz", NULL);
	CU_ASSERT_STRING_EQUAL(o, "<span title=\"abcdefghijklmnopqrstuvwxyz\">abcdefghijklmnopqrst\xe2\x80\xa6</span>");
	free(o);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle))) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* every byte sequence of s is valid UTF-8 */
static int valid_utf8(const char *s)
{
	char *o = html_of(esc2, s, NULL);
	/* escaping changes markup bytes but not valid UTF-8: no U+FFFD added */
	int ok = count(o, "\xef\xbf\xbd") == count(s, "\xef\xbf\xbd");

	free(o);
	return ok;
}

static char *report_html(struct kp_db *db, struct kp_report **rep_out)
{
	struct kp_err err = {0};
	struct kp_report *rep = NULL;
	char *buf = NULL;
	size_t n = 0;
	FILE *f;

	if (kp_report_load(db, NULL, &rep, &err)) {
		fprintf(stderr, "load: %s\n", err.msg);
		return NULL;
	}
	f = open_memstream(&buf, &n);
	CU_ASSERT_EQUAL(kp_report_html(rep, f, &err), 0);
	fclose(f);
	if (rep_out)
		*rep_out = rep;
	else
		kp_report_free(rep);
	return buf;
}

static void test_report_page(void)
{
	struct kp_db *db = fixture("page.db", 1, 1.0);
	struct kp_report *rep = NULL;
	char *h, verdict[1024];

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	h = report_html(db, &rep);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	/* whole-run attribution from the trace: 2 host-bound gaps of 9 us, 45 us of stream time */
	CU_ASSERT_EQUAL(rep->n_ops, 9);
	CU_ASSERT_EQUAL(rep->host_gap_ns, 18000);
	CU_ASSERT_EQUAL(rep->device_gap_ns, 6000);
	CU_ASSERT_EQUAL(rep->stream_span_ns, 45000);
	CU_ASSERT_EQUAL(rep->n_kernels, 9);
	CU_ASSERT_EQUAL(rep->kernel_ns, 21000);
	CU_ASSERT_STRING_EQUAL(rep->missing, "");
	kp_report_verdict(rep, verdict, sizeof(verdict));
	CU_ASSERT_PTR_NOT_NULL(strstr(verdict, "partly launch-bound"));
	CU_ASSERT_PTR_NOT_NULL(strstr(verdict, "40.0%"));
	/* the saving is the plan's (plan/predict.h), as kplan show prints it */
	CU_ASSERT_PTR_NOT_NULL(strstr(verdict, "; the current plan model.kplan graphs 1 region and is "
				      "predicted to save 8.00 us of the run's 93.00 us (1.09x), 'step' "
				      "from 18.00 us to 8.00 us per call (2.25x)."));
	CU_ASSERT_EQUAL(rep->saved_ns, 8000);
	CU_ASSERT_EQUAL(rep->regions.data[0].gain_ns, 8000);
	/* the evil kernel name appears only escaped */
	CU_ASSERT_PTR_NULL(strstr(h, "<script>alert"));
	CU_ASSERT_PTR_NULL(strstr(h, "<b>opt"));
	CU_ASSERT_PTR_NULL(strstr(h, "'<b>'"));
	CU_ASSERT(count(h, "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;\xef\xbf\xbd") >= 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "&lt;b&gt;opt&lt;/b&gt;"));
	CU_ASSERT(valid_utf8(h));
	CU_ASSERT_EQUAL(count(h, "<script>"), 1);      /* only the page's own sort script */
	/* self-contained: nothing fetched */
	CU_ASSERT_PTR_NULL(strstr(h, "src="));
	CU_ASSERT_PTR_NULL(strstr(h, "href="));
	CU_ASSERT_PTR_NULL(strstr(h, "@import"));
	CU_ASSERT_PTR_NULL(strstr(h, "url("));
	/* sections */
	CU_ASSERT_EQUAL(count(h, "<tr class=\"region\""), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "sync: cudaStreamSynchronize"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "shape_key (advisory): cudaLaunchKernel"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"kernels-by-time\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"kernels-by-count\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"fusion-table\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"plan-table\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "host-bound idle 55% of the occurrence"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<td>launch_host_ns</td><td class=\"n\" data-v=\"3700\">3700</td><td>calibrated</td>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "dropped records: 2 (2 kernel records: buffer full)"));
	/* the timeline: canvas, data, the typical occurrence it opens on */
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<canvas id=\"tl-canvas\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "var KP_TL={"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "viewWhat:\"occurrence 2 of 3 of region 1\""));
	CU_ASSERT_EQUAL(count(h, "</script>"), 1);
	/* the kernel's label, its full name on hover */
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<span title=\"void gemm_kernel&lt;128, 64&gt;(float const*, float*, int)\">"
				      "gemm_kernel&lt;128,64&gt;</span>"));
	/* charts and a section per region, with its blockers, kernels and plan */
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"time-chart\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<svg id=\"gap-chart\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "fill=\"#e5532d\""));   /* host-bound gaps in the chart */
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<section class=\"card\" id=\"region-1\">"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<section class=\"card\" id=\"region-2\">"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"region-1-kernels\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<b>graph</b> (launch-bound): host-bound idle 55% of the occurrence"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "shape_key: <code>cudaLaunchKernel</code> &times;1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<span class=\"where\">where: inside NVTX step</span>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<b>fatal</b> sync: <code>cudaStreamSynchronize</code>"));
	free(h);
	kp_report_free(rep);
	kp_db_close(db);
}

static const char *const csv_names[] = {
	"kern_sum.csv", "api_sum.csv", "gaps.csv", "regions.csv", "fusion.csv", "plan.csv",
};

static void test_kernel_labels(void)
{
	static const struct { const char *in, *label; } cases[] = {
		{ "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
		  "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
		  "vectorized_elementwise_kernel<CUDAFunctor_add<float>>" },
		{ "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>, "
		  "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<c10::Half>, at::detail::Array<char*, 3>)",
		  "vectorized_elementwise_kernel<AddFunctor<Half>>" },
		/* a lambda stands for the function it is in */
		{ "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
		  "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
		  "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
		  "operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int)",
		  "vectorized_elementwise_kernel<launch_clamp_scalar::lambda>" },
		/* a wrapper of one functor is the functor */
		{ "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
		  "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >"
		  "(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
		  "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int)",
		  "elementwise_kernel<MulFunctor<float>>" },
		{ "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
		  "float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, "
		  "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>)",
		  "reduce_kernel<MeanOps<float>>" },
		/* without functors, the element types and sizes; parameter structs left out */
		{ "void gemv2T_kernel_val<int, int, __half, __half, float, 128, 16, 4, 4, false, false, "
		  "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__half const>, "
		  "cublasGemvTensorStridedBatched<__half>, float> >(cublasGemvParamsEx<int>, float, float)",
		  "gemv2T_kernel_val<int,__half,float,128,16,4,4,false,false>" },
		{ "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, "
		  "float, false, true, true, false, 7, false, cublasGemvParamsEx<int, float> >(cublasGemvParamsEx<int, float>)",
		  "gemvx::kernel<int,float,false,true,true,false,7,false>" },
		{ "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, "
		  "(cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, float const*, float*)",
		  "nchwToNhwcKernel<float,false,true,2>" },
		{ "void gemm_kernel<128, 64>(float const*, float*, int)", "gemm_kernel<128,64>" },
		{ "add_kernel(float*, float const*, int)", "add_kernel" },
		{ "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64",
		  "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64" },
		{ "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
		  "vectorized_elementwise_kernel" },
		{ EVIL, EVIL },
		{ "", "" },
	};
	char out[KP_KNAME_LABEL_MAX], small[24], deep[4096];
	size_t i;
	int d;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kp_kernel_label(cases[i].in, out, sizeof(out));
		if (strcmp(out, cases[i].label))
			fprintf(stderr, "\nlabel of '%.60s...': got '%s', want '%s'\n", cases[i].in, out,
				cases[i].label);
		CU_ASSERT_STRING_EQUAL(out, cases[i].label);
	}
	/* too long: the last template arguments go, or a plain name's middle */
	CU_ASSERT_STRING_EQUAL(kp_kernel_label("void k<Alpha<float>, Beta<float>, Gamma<float> >(int)",
					       small, sizeof(small)), "k<Alpha<float>,...>");
	CU_ASSERT_STRING_EQUAL(kp_kernel_label("abcdefghijklmnopqrstuvwxyz0123456789", small, sizeof(small)),
			       "abcdefghij...0123456789");
	/* nesting past the bound is cut, not followed */
	strcpy(deep, "void f");
	for (d = 0; d < 500; d++)
		strcat(deep, "<a");
	for (d = 0; d < 500; d++)
		strcat(deep, ">");
	strcat(deep, "(int)");
	kp_kernel_label(deep, out, sizeof(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "..."));
	/* any bytes: a bounded, terminated label (ASan checks the reads) */
	{
		static const char alpha[] = "<>(),: {}[]ab_1#&*-\xff";
		uint32_t x = 12345;
		char in[80];
		int k, ok = 1;

		for (d = 0; d < 20000; d++) {
			int len = (int)(x % 70);

			for (k = 0; k < len; k++) {
				x = x * 1103515245u + 12345u;
				in[k] = alpha[(x >> 16) % (sizeof(alpha) - 1)];
			}
			in[len] = '\0';
			kp_kernel_label(in, small, sizeof(small));
			ok &= strlen(small) < sizeof(small);
			x = x * 1103515245u + 12345u;
		}
		CU_ASSERT_TRUE(ok);
	}
	/* fusion chains label each name */
	CU_ASSERT_STRING_EQUAL(kp_kernel_chain_label("void gemm_kernel<128, 64>(float const*, float*, int) -> "
						     "add_kernel(float*, float const*, int)", deep, 200),
			       "gemm_kernel<128,64> -> add_kernel");
	CU_ASSERT_STRING_EQUAL(kp_kernel_chain_label("aaaaaaaaaa -> bbbbbbbbbb -> cccccccccc", small,
						     sizeof(small)), "aaaaaaaaaa...");
}

/*
 * Kernels whose labels are the same (GPT-2's two MulFunctor kernels: a
 * tensor times a scalar and a tensor times a tensor) are told apart by what
 * differs, in the report's tables too; names that differ in no token are
 * numbered.
 */
static void test_kernel_labels_apart(void)
{
	static const char *const mul[] = {
		"void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::Half, "
		"c10::Half, c10::Half, at::native::binary_internal::MulFunctor<float> >, std::array<char*, "
		"2ul> >(int, at::native::AUnaryFunctor<c10::Half, c10::Half, c10::Half, "
		"at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
		"void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::Half, "
		"c10::Half, c10::Half, at::native::binary_internal::MulFunctor<float> >, std::array<char*, "
		"3ul> >(int, at::native::BinaryFunctor<c10::Half, c10::Half, c10::Half, "
		"at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)",
		"void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::Half, "
		"c10::Half, c10::Half, at::native::binary_internal::MulFunctor<float> >, std::array<char*, "
		"3ul> >(int, at::native::BinaryFunctor<c10::Half, c10::Half, c10::Half, "
		"at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)",
		"void k<a<b> >(int)",
		"void k<a<b>>(int)",
	};
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path("apart.db"), KP_DB_CREATE, &err);
	struct kp_report *rep = NULL;
	struct kp_run_info ri = { .source = "synthetic", .device_name = "NVIDIA H200",
				  .compute_major = 9, .sm_count = 132, .driver_version = 13000 };
	struct kp_writer w;
	char out[96], *h;
	int64_t run = 0;
	size_t i, j;

	CU_ASSERT_STRING_EQUAL(kp_kernel_label_apart(mul[0], &mul[1], 1, out, sizeof(out)),
			       " [AUnaryFunctor]");
	CU_ASSERT_STRING_EQUAL(kp_kernel_label_apart(mul[1], &mul[0], 1, out, sizeof(out)),
			       " [BinaryFunctor]");
	/* against two: each place it differs, in order */
	{
		const char *o1[] = { mul[0], mul[2] }, *o2[] = { mul[0], mul[1] };

		CU_ASSERT_STRING_EQUAL(kp_kernel_label_apart(mul[1], o1, 2, out, sizeof(out)),
				       " [8, BinaryFunctor]");
		CU_ASSERT_STRING_EQUAL(kp_kernel_label_apart(mul[2], o2, 2, out, sizeof(out)), " [4]");
	}
	CU_ASSERT_STRING_EQUAL(kp_kernel_label_apart(mul[3], &mul[4], 1, out, sizeof(out)), "");
	CU_ASSERT_STRING_EQUAL(kp_kernel_label_apart(mul[0], &mul[1], 1, out, 8), "");

	/* the report: three kernels of one label, two more of another that differ in
	 * no token (numbered); every row its own */
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL_FATAL(kp_db_run_insert(db, &ri, &run, &err), 0);
	kp_writer_init(&w, db, run);
	kp_db_begin(db, &err);
	for (i = 0; i < 5; i++) {
		struct kp_kernel_rec k = { .stream_id = 7, .correlation_id = (uint32_t)i + 1,
					   .name = mul[i], .start = 1000 * (int64_t)i + 1000,
					   .end = 1000 * (int64_t)i + 1500 + 10 * (int64_t)i,
					   .grid = { 1, 1, 1 }, .block = { 32, 1, 1 } };

		kp_writer_kernel(&w, &k, &err);
	}
	kp_db_commit(db, &err);
	kp_writer_release(&w);
	kp_db_run_finish(db, run, 0, NULL, "complete", &err);
	CU_ASSERT_EQUAL_FATAL(kp_report_load(db, NULL, &rep, &err), 0);
	CU_ASSERT_EQUAL_FATAL(rep->kernels.len, 5);
	for (i = 0; i < rep->kernels.len; i++)
		for (j = i + 1; j < rep->kernels.len; j++)
			CU_ASSERT_STRING_NOT_EQUAL(rep->kernels.data[i].label, rep->kernels.data[j].label);
	h = report_html(db, NULL);
	CU_ASSERT(h && strstr(h, ">vectorized_elementwise_kernel&lt;MulFunctor&lt;float&gt;&gt; "
				 "[8, AUnaryFunctor]</span>"));
	CU_ASSERT(h && strstr(h, ">vectorized_elementwise_kernel&lt;MulFunctor&lt;float&gt;&gt; "
				 "[4]</span>"));
	CU_ASSERT(h && strstr(h, ">k&lt;b&gt; #1</span>") && strstr(h, ">k&lt;b&gt; #2</span>"));
	free(h);
	kp_report_free(rep);
	kp_db_close(db);
}

static void js_str(FILE *f, const char *s, const char *t)
{
	(void)t;
	kp_html_js_str(f, s);
}

static void test_js_string(void)
{
	char *o = html_of(js_str, EVIL "\n\"\\\xe2\x80\xa8\xc3\xa9", NULL);

	CU_ASSERT_STRING_EQUAL(o, "\"\\u003cscript\\u003ealert(\\\"x\\u0026y\\\")\\u003c/script\\u003e"
			       "\\ufffd\\u000a\\\"\\\\\\u2028\xc3\xa9\"");
	free(o);
	o = html_of(js_str, NULL, NULL);
	CU_ASSERT_STRING_EQUAL(o, "null");
	free(o);
}

/* Sum of class cls over a row's finest bins. */
static int64_t bins_sum(const struct kp_tl *tl, const struct kp_tl_row *r, int cls)
{
	int64_t sum = 0;
	int b;

	for (b = 0; b < tl->n_bins; b++)
		sum += r->ns[b * KP_TL_CLS + cls];
	return sum;
}

static const struct kp_tl_row *tl_row(const struct kp_report *rep, int kind)
{
	size_t i;

	for (i = 0; i < rep->tl.rows.len; i++)
		if (rep->tl.rows.data[i].kind == kind)
			return &rep->tl.rows.data[i];
	return NULL;
}

static void test_timeline_data(void)
{
	struct kp_db *db = fixture("tl.db", 1, 1.0);
	struct kp_report_opts o = { .detail = 5 };
	struct kp_report *rep = NULL;
	struct kp_err err = {0};
	const struct kp_tl_row *s, *r;
	int64_t n = 0;
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL_FATAL(kp_report_load(db, NULL, &rep, &err), 0);
	/* small: every interval in the page, one level of bins */
	CU_ASSERT_TRUE(rep->tl.full);
	CU_ASSERT_EQUAL(rep->tl.n_levels, 1);
	CU_ASSERT_EQUAL(rep->tl.rows.len, 4);   /* regions, NVTX, API calls, stream 7 */
	s = tl_row(rep, KP_TL_ROW_STREAM);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(s->stream_id, 7);
	CU_ASSERT_EQUAL(s->n_items, 9);
	CU_ASSERT_EQUAL(s->items.len, 9);
	/* the bins hold the kernels' time and the idle time the verdict counts */
	CU_ASSERT_EQUAL(bins_sum(&rep->tl, s, KP_TL_KERNEL), rep->kernel_ns);
	CU_ASSERT_EQUAL(bins_sum(&rep->tl, s, KP_TL_HOST_GAP), rep->host_gap_ns);
	CU_ASSERT_EQUAL(bins_sum(&rep->tl, s, KP_TL_DEVICE_GAP), rep->device_gap_ns);
	for (i = 0; i < (size_t)rep->tl.n_bins; i++)
		n += s->count[i];
	CU_ASSERT_EQUAL(n, 9);
	/*
	 * each kernel launched inside an occurrence of 'step' (index 0) is in
	 * it (the last one's launch call comes after the last occurrence
	 * ends), with its gap's cause
	 */
	for (i = 0; i < s->items.len; i++) {
		CU_ASSERT_EQUAL(s->items.data[i].b, i < 8 ? 0 : -1);
		CU_ASSERT(s->items.data[i].a >= 0);
		CU_ASSERT_EQUAL(s->items.data[i].cls, i == 0 ? KP_TL_KERNEL : i % 3 == 0 ? KP_TL_HOST_GAP
				: KP_TL_DEVICE_GAP);
	}
	r = tl_row(rep, KP_TL_ROW_REGIONS);
	CU_ASSERT(r && r->n_items == 3 && r->items.len == 3);
	r = tl_row(rep, KP_TL_ROW_API);
	CU_ASSERT(r && r->n_items == 10);
	CU_ASSERT(rep->regions.data[0].mid_start == 117000 && rep->regions.data[0].mid_end == 132500);
	/* the region's kernels: three names, 8 launches, by time */
	for (i = 0, n = 0; i < rep->rkernels.len; i++) {
		if (rep->rkernels.data[i].region != 0)
			continue;
		CU_ASSERT_EQUAL(rep->rkernels.data[i].count, rep->rkernels.data[i].kernel == 2 ? 2 : 3);
		n += rep->rkernels.data[i].count;
	}
	CU_ASSERT_EQUAL(n, 8);
	CU_ASSERT_EQUAL(rep->rkernels.data[0].total_ns, 12000);   /* 3 x 4 us first */
	/* the gap distribution: two host-bound gaps of 9 us in [8, 16) us, four of 1 us */
	CU_ASSERT_EQUAL(rep->gap_n[0][4], 2);
	CU_ASSERT_EQUAL(rep->gap_ns[0][4], 18000);
	CU_ASSERT_EQUAL(rep->gap_n[1][1], 6);
	/* blockers with where they were */
	CU_ASSERT_EQUAL(rep->blockers.len, 2);
	kp_report_free(rep);
	rep = NULL;

	/* a detail budget of 5: windows, three levels, no row past the budget */
	CU_ASSERT_EQUAL_FATAL(kp_report_load(db, &o, &rep, &err), 0);
	CU_ASSERT_FALSE(rep->tl.full);
	CU_ASSERT_EQUAL(rep->tl.n_levels, 3);
	CU_ASSERT_EQUAL(rep->tl.n_bins, KP_TL_BINS * 16);
	CU_ASSERT(rep->tl.win.len >= 2 && rep->tl.win.len % 2 == 0);
	for (i = 0, n = 0; i < rep->tl.rows.len; i++) {
		CU_ASSERT(rep->tl.rows.data[i].items.len <= 5);
		n += (int64_t)rep->tl.rows.data[i].items.len;
	}
	CU_ASSERT(n <= 7);
	s = tl_row(rep, KP_TL_ROW_STREAM);
	CU_ASSERT(s && bins_sum(&rep->tl, s, KP_TL_KERNEL) == rep->kernel_ns);
	kp_report_free(rep);
	kp_db_close(db);
}

static void test_csv_golden(void)
{
	struct kp_db *db = fixture("csv.db", 1, 1.0);
	struct kp_err err = {0};
	struct kp_report *rep = NULL;
	const char *dir = kp_test_path("csv");
	int update = getenv("KPLAN_UPDATE_GOLDEN") && *getenv("KPLAN_UPDATE_GOLDEN") == '1';
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL_FATAL(kp_report_load(db, NULL, &rep, &err), 0);
	CU_ASSERT_EQUAL(kp_report_csv(db, rep, dir, &err), 0);
	for (i = 0; i < sizeof(csv_names) / sizeof(csv_names[0]); i++) {
		char got_path[512], want_path[512];
		char *got, *want;
		size_t ng = 0, nw = 0;

		snprintf(got_path, sizeof(got_path), "%s/%s", dir, csv_names[i]);
		snprintf(want_path, sizeof(want_path), "%s",
			 kp_test_src(strcat(strcpy(want_path, "tests/golden/reports/"), csv_names[i])));
		got = kp_test_read(got_path, &ng);
		CU_ASSERT_PTR_NOT_NULL(got);
		if (update && got)
			kp_test_write(want_path, got, (long)ng);
		want = kp_test_read(want_path, &nw);
		CU_ASSERT_PTR_NOT_NULL(want);
		if (got && want && (ng != nw || memcmp(got, want, ng))) {
			fprintf(stderr, "\n%s differs from %s (KPLAN_UPDATE_GOLDEN=1 regenerates)\n",
				got_path, want_path);
			CU_FAIL("csv differs from golden");
		}
		free(got);
		free(want);
	}
	kp_report_free(rep);
	kp_db_close(db);
}

static void test_no_analysis(void)
{
	struct kp_db *db = fixture("bare.db", 0, 1.0);
	struct kp_report *rep = NULL;
	char *h;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	h = report_html(db, &rep);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_PTR_NOT_NULL(strstr(rep->missing, "run 'kplan analyze"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"missing\""));
	/* the trace parts are still there */
	CU_ASSERT_EQUAL(rep->host_gap_ns, 18000);
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<canvas id=\"tl-canvas\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "a stretch from the middle of the run") ||
			       strstr(h, "the whole run"));
	CU_ASSERT_PTR_NULL(strstr(h, "<section class=\"card\""));
	free(h);
	kp_report_free(rep);
	kp_db_close(db);
	/* the CLI notes it and still writes the page */
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s -o %s 2>%s >/dev/null", kp_test_kplan(),
				   kp_test_path("bare.db"), kp_test_path("bare.html"),
				   kp_test_path("bare.err")), 0);
	h = kp_test_read(kp_test_path("bare.err"), NULL);
	CU_ASSERT(h && strstr(h, "run 'kplan analyze"));
	free(h);
}

static void test_cli_report(void)
{
	struct kp_db *db = fixture("cli.db", 1, 1.0);
	const char *p = kp_test_path("cli.db");
	char *h;
	size_t n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_db_close(db);
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s -o %s --csv %s >%s", kp_test_kplan(), p,
				   kp_test_path("cli.html"), kp_test_path("cli-csv"),
				   kp_test_path("cli.out")), 0);
	h = kp_test_read(kp_test_path("cli.html"), &n);
	CU_ASSERT(h && n > 1000 && strstr(h, "</html>"));
	free(h);
	h = kp_test_read(kp_test_path("cli-csv/regions.csv"), NULL);
	CU_ASSERT(h && !strncmp(h, "region_id,", 10));
	free(h);
	h = kp_test_read(kp_test_path("cli.out"), NULL);
	CU_ASSERT(h && strstr(h, "launch-bound") && strstr(h, "cli.html"));
	free(h);
	/* the database is only read: no -wal or -shm left beside it */
	CU_ASSERT_EQUAL(kp_test_sh("test -e %s-wal || test -e %s-shm", p, p), 1);
	/* an output it cannot write: the OS's reason */
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s -o %s/no/such/dir.html 2>%s >/dev/null",
				   kp_test_kplan(), p, kp_test_path("."), kp_test_path("cli.err")), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'cannot write the report: No such file or directory' %s",
				   kp_test_path("cli.err")), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s --run 9 -o /dev/null 2>/dev/null", kp_test_kplan(), p), 2);
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s --bogus 2>/dev/null", kp_test_kplan(), p), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s report 2>/dev/null", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s 2>/dev/null", kp_test_kplan(),
				   kp_test_path("nope.db")), 2);
}

/* The same labels in `kplan analyze`, `kplan show` and the page, on the bundled trace. */
static void test_cli_labels(void)
{
	const char *db = kp_test_path("r18.db");
	char *out;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import %s -o %s >/dev/null && %s analyze %s >%s",
					 kp_test_kplan(), kp_test_src("tests/fixtures/resnet18_b1.json.gz"),
					 db, kp_test_kplan(), db, kp_test_path("r18.analyze")), 0);
	out = kp_test_read(kp_test_path("r18.analyze"), NULL);
	CU_ASSERT(out && strstr(out, "best fusion candidates"));
	CU_ASSERT(out && strstr(out, "vectorized_elementwise_kernel<CUDAFunctor_add<float>> -> "
				"vectorized_elementwise_kernel<launch_clamp_scalar::lambda>"));
	CU_ASSERT(out && !strstr(out, "at::native::"));
	free(out);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s plan %s -o %s >/dev/null 2>&1 && %s show %s >%s && %s report %s -o %s >/dev/null",
					 kp_test_kplan(), db, kp_test_path("r18.kplan"), kp_test_kplan(),
					 kp_test_path("r18.kplan"), kp_test_path("r18.show"), kp_test_kplan(), db,
					 kp_test_path("r18.html")), 0);
	out = kp_test_read(kp_test_path("r18.show"), NULL);
	CU_ASSERT(out && strstr(out, "     vectorized_elementwise_kernel<CUDAFunctor_add<float>> -> "));
	CU_ASSERT(out && !strstr(out, "at::native::"));
	free(out);
	out = kp_test_read(kp_test_path("r18.html"), NULL);
	CU_ASSERT(out && strstr(out, ">vectorized_elementwise_kernel&lt;CUDAFunctor_add&lt;float&gt;&gt;</span>"));
	CU_ASSERT(out && strstr(out, "reduce_kernel&lt;MeanOps&lt;float&gt;&gt;"));
	/* the region's section: its kernels and the plan's decision */
	CU_ASSERT(out && strstr(out, "id=\"region-1-kernels\""));
	CU_ASSERT(out && strstr(out, "<b>graph</b> (launch-bound)"));
	free(out);
}

/*
 * One definition each of the predicted saving (plan/predict.h) and of a
 * region's host-bound share, the same figure wherever it is printed: the
 * report's verdict before and after the plan, `kplan plan`, `kplan show`,
 * the plan's reason, the page's tables; `kplan analyze`'s host% and the
 * reason's pct. On the bundled trace.
 */
static void test_one_figure_everywhere(void)
{
	const char *db = kp_test_path("fig.db"), *k = kp_test_kplan();
	const char *o = kp_test_path("fig");
	char *save, *host, *sh;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import %s -o %s >/dev/null && %s analyze %s >%s.analyze"
					 " && %s report %s -o %s.0.html >%s.report0 && %s plan %s -o "
					 "%s.kplan >%s.plan && %s show %s.kplan >%s.show && %s report %s "
					 "-o %s.1.html >%s.report1", k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), db, k, db, o,
					 k, db, o, o, k, db, o, o, k, o, o, k, db, o, o), 0);
	/* the saving and the run's time, as the plan summary says them */
	kp_test_sh("sed -n 's/.*predicted to save \\(.* of the run.s [^ ]* ms ([0-9.]*x)\\).*/\\1/p' "
		   "%s.plan > %s.save", o, o);
	save = kp_test_read(kp_test_path("fig.save"), NULL);
	CU_ASSERT_FATAL(save && strstr(save, " of the run's 27.73 ms (2.65x)"));
	*strchr(save, '\n') = '\0';
	sh = strstr(save, " of the run's");
	CU_ASSERT_EQUAL(kp_test_sh("grep -qF \"graphing its 1 capturable region is predicted to save %s"
				   "\" %s.report0", save, o), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qF \"graphs 1 region and is predicted to save %s\" "
				   "%s.report1", save, o), 0);
	*sh = '\0';   /* the saving alone, e.g. "17.27 ms" */
	CU_ASSERT_EQUAL(kp_test_sh("grep -qF 'for the run: saves %s (2.65x)' %s.show && grep -qF "
				   "'; saves %s over the run' %s.show", save, o, save, o), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qF '>%s</td>' %s.0.html && grep -qF '>%s</td>' %s.1.html",
				   save, o, save, o), 0);
	/* the region's host-bound share: analyze's host% column, the plan's reason, the page */
	kp_test_sh("awk '$2 == \"step\" { print $7 }' %s.analyze > %s.host", o, o);
	host = kp_test_read(kp_test_path("fig.host"), NULL);
	CU_ASSERT_FATAL(host && strchr(host, '.'));
	*strchr(host, '\n') = '\0';
	CU_ASSERT_EQUAL(kp_test_sh("grep -qF 'host-bound idle is %s pct of its' %s.show && "
				   "grep -qF '>%s%%</td>' %s.1.html", host, o, host, o), 0);
	free(save);
	free(host);
}

static void test_diff(void)
{
	struct kp_db *a = fixture("diff-a.db", 1, 1.0), *b = fixture("diff-b.db", 1, 2.0);
	struct kp_diff_opts o = { .fail_pct = 10 };
	struct kp_diff *d = NULL;
	struct kp_err err = {0};
	char *out;
	size_t i;
	int found = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL_FATAL(kp_diff_compute(a, b, &o, &d, &err), 0);
	CU_ASSERT_TRUE(d->comparable);
	CU_ASSERT_EQUAL(d->rows.data[0].kind, KP_DIFF_RUN);
	CU_ASSERT_EQUAL(d->rows.data[0].a_ns, 45000);
	CU_ASSERT_EQUAL(d->rows.data[0].b_ns, 57000);
	for (i = 0; i < d->rows.len; i++) {
		const struct kp_diff_row *r = &d->rows.data[i];

		if (r->kind == KP_DIFF_REGION && !strcmp(r->name, "step")) {
			found = 1;
			CU_ASSERT_EQUAL(r->a_ns, 18000);
			CU_ASSERT_EQUAL(r->b_ns, 36000);
			CU_ASSERT_DOUBLE_EQUAL(r->change_pct, 100.0, 1e-9);
			CU_ASSERT_TRUE(r->regressed);
		}
		if (r->kind == KP_DIFF_KERNEL)
			CU_ASSERT_FALSE(r->regressed);
	}
	CU_ASSERT_TRUE(found);
	CU_ASSERT_EQUAL(d->n_regressed, 2);  /* the run (+26.7%) and 'step' */
	kp_diff_free(d);
	kp_db_close(a);
	kp_db_close(b);

	/* CLI: exit 1 only with a threshold that is crossed */
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s >%s", kp_test_kplan(), kp_test_path("diff-a.db"),
				   kp_test_path("diff-b.db"), kp_test_path("diff.out")), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s --fail-on-regression 10 --csv %s --html %s >/dev/null",
				   kp_test_kplan(), kp_test_path("diff-a.db"), kp_test_path("diff-b.db"),
				   kp_test_path("diff.csv"), kp_test_path("diff.html")), 1);
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s --fail-on-regression 150 >/dev/null", kp_test_kplan(),
				   kp_test_path("diff-a.db"), kp_test_path("diff-b.db")), 0);
	/* B against A: faster, never a regression */
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s --fail-on-regression 0 >/dev/null", kp_test_kplan(),
				   kp_test_path("diff-b.db"), kp_test_path("diff-a.db")), 0);
	out = kp_test_read(kp_test_path("diff.out"), NULL);
	CU_ASSERT(out && strstr(out, "comparable: same GPU"));
	CU_ASSERT(out && strstr(out, "+100.0%"));
	/* names whole, last on their line (52 characters: once cut at 44) */
	CU_ASSERT(out && strstr(out, " void gemm_kernel<128, 64>(float const*, float*, int)\n"));
	CU_ASSERT(out && strstr(out, "+100.0%           step\n"));   /* no threshold: none marked */
	free(out);
	out = kp_test_read(kp_test_path("diff.csv"), NULL);
	CU_ASSERT(out && !strncmp(out, "kind,name,a_us,b_us,a_count,b_count,change_pct,regressed\n"
				   "run,stream time,45,57,9,9,26.7,1\n", 90));
	CU_ASSERT(out && strstr(out, "region,step,18,36,3,3,100.0,1\n"));
	free(out);
	out = kp_test_read(kp_test_path("diff.html"), NULL);
	CU_ASSERT(out && strstr(out, "id=\"diff-table\"") && !strstr(out, "<script>alert"));
	/* before/after bars: the region 'step' doubled, regressed */
	CU_ASSERT(out && strstr(out, "id=\"diff-chart\""));
	CU_ASSERT(out && strstr(out, "<div class=\"crow region\"><div class=\"clab\">step</div>"));
	CU_ASSERT(out && strstr(out, "width:50.000%;background:#8c959f"));
	CU_ASSERT(out && strstr(out, "width:100.000%;background:#cf222e"));
	free(out);
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s 2>/dev/null", kp_test_kplan(), kp_test_path("diff-a.db")), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s --fail-on-regression x 2>/dev/null", kp_test_kplan(),
				   kp_test_path("diff-a.db"), kp_test_path("diff-b.db")), 64);
}

/*
 * A run imported but never analyzed (a CI job that records and diffs) is
 * analyzed first, its regions compared, not reported as gone; a database
 * that cannot be written is refused with the command to run.
 */
static void test_diff_unanalyzed(void)
{
	const char *a = kp_test_path("un-a.db"), *b = kp_test_path("un-b.db");
	const char *out = kp_test_path("un.out"), *errs = kp_test_path("un.err");
	const char *k = kp_test_kplan(), *pre, *dir;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import %s -o %s >/dev/null && %s analyze %s >/dev/null"
					 " && %s import %s -o %s >/dev/null", k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), a, k, a, k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), b), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s --fail-on-regression 5 >%s 2>%s", k, a, b, out,
				   errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'run 1 of .*un-b.db was not analyzed: analyzing it first'"
				   " %s", errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^region .* ms .* ms  *+0.0%%  *step$' %s && "
				   "! grep -q gone %s", out, out), 0);
	/* one that cannot be analyzed here (read-only): refused, naming the command */
	if (!(pre = kp_test_unprivileged()) || !(dir = kp_test_public_dir()))
		return;
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import %s -o %s/b.db >/dev/null && cp %s %s/a.db && "
					 "chmod 0555 %s && chmod 0444 %s/*", k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), dir, a, dir,
					 dir, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s%s diff %s/a.db %s/b.db >/dev/null 2>%s", pre, k, dir, dir,
				   errs), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q \"run 1 must be analyzed first ('kplan analyze %s/b.db "
				   "--run 1')\" %s", dir, errs), 0);
	kp_test_sh("chmod -R u+w %s && rm -rf %s", dir, dir);
}

static void test_diff_not_comparable(void)
{
	struct kp_err err = {0};
	struct kp_db *a = fixture("nc-a.db", 1, 1.0);
	struct kp_db *b = kp_db_open(kp_test_path("nc-b.db"), KP_DB_CREATE, &err);
	struct kp_diff *d = NULL;
	struct kp_kernel_rec k = { .start = 1, .end = 2, .name = "other_kernel" };
	struct kp_writer w;

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT(add_run(b, "NVIDIA H100 80GB HBM3", 12080, 3, 1.0) > 0);
	kp_writer_init(&w, b, 1);
	kp_writer_kernel(&w, &k, &err);
	kp_writer_release(&w);
	CU_ASSERT_EQUAL_FATAL(kp_diff_compute(a, b, NULL, &d, &err), 0);
	CU_ASSERT_FALSE(d->comparable);
	CU_ASSERT_PTR_NOT_NULL(strstr(d->why.buf, "gpu differs (A: NVIDIA H200, B: NVIDIA H100 80GB HBM3)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(d->why.buf, "driver differs (A: 13000, B: 12080)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(d->why.buf, "0 only in A, 1 only in B, e.g. other_kernel"));
	CU_ASSERT_EQUAL(d->n_regressed, 0);   /* no threshold: never */
	kp_diff_free(d);
	kp_db_close(a);
	kp_db_close(b);
}

/*
 * Region families: a run annotated "Layer 0" ... "Layer 11" (as a GPT-2
 * program's NVTX ranges are), beside "step", "fp16_gemm" (digits in a word)
 * and "warmup 1", "warmup 2" (a family of two: too few for a row). Layers
 * 3, 7 and 11 hold a sync; the plan graphs the other nine.
 */
#define N_LAYERS 12

static char *layer_plan(int64_t run)
{
	struct kp_plan *p = kp_plan_new();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan_region *r;
	char label[32];
	int i;

	if (!p)
		return NULL;
	plan_keys(p, run);
	p->run_pred_ns = 60000;
	p->speedup_pred = 1.5;
	p->mem_budget_bytes = 1 << 20;
	p->n_regions = N_LAYERS;
	p->regions = r = calloc(N_LAYERS, sizeof(*r));
	for (i = 0; i < N_LAYERS; i++) {
		snprintf(label, sizeof(label), "Layer %d", i);
		r[i].label = strdup(label);
		r[i].decision = i % 4 == 3 ? KP_PLAN_EAGER : KP_PLAN_GRAPH;
		r[i].reason = i % 4 == 3 ? KP_PLAN_R_BLOCKER : KP_PLAN_R_LAUNCH_BOUND;
		r[i].reason_text = strdup("");
		r[i].fingerprint = 0x100 + (uint64_t)i;
		r[i].kernels = r[i].nodes = 4;
		r[i].occurrences = 2;
		r[i].shape_keys = 1;
		r[i].eager_ns = 10000 + 100 * i;
		r[i].graph_ns = 5000;
		r[i].speedup_pred = 2;
	}
	if (kp_plan_write(p, &sb, &err)) {
		fprintf(stderr, "plan write: %s\n", err.msg);
		kp_plan_free(p);
		kp_strbuf_release(&sb);
		return NULL;
	}
	kp_plan_free(p);
	return kp_strbuf_detach(&sb, NULL);
}

static struct kp_db *layer_fixture(const char *name)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path(name), KP_DB_CREATE, &err);
	int64_t run;
	char *plan;
	int rc;

	if (!db)
		return NULL;
	run = add_run(db, "NVIDIA H200", 13000, 3, 1.0);
	plan = layer_plan(run);
	rc = run < 0 || !plan;
	/* eager 10-11.1 us per occurrence, 2 occurrences, graphed 5 us when capturable */
	rc = rc || exec_f(db,
		"INSERT INTO kp_regions (runId, regionId, label, source, streamId, occurrences, kernels,"
		" nodes, eager_ns, busy_ns, host_idle_ns, device_idle_ns, graph_ns_pred, speedup_pred,"
		" capturable, blockers, fingerprint, shape_keys, patch_slots)"
		" WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d)"
		" SELECT %lld, 10 + i, 'Layer ' || i, 'nvtx', NULL, 2, 4, 4, 10000 + 100 * i, 4000, 3000,"
		"  0, 5000, 2.0, i %% 4 != 3, CASE WHEN i %% 4 = 3 THEN 'sync' END, printf('%%016x', i),"
		"  1, 0 FROM c;"
		"INSERT INTO kp_regions (runId, regionId, label, source, streamId, occurrences, kernels,"
		" nodes, eager_ns, busy_ns, host_idle_ns, device_idle_ns, capturable) VALUES"
		" (%lld, 1, 'step', 'nvtx', NULL, 3, 50, 50, 500000, 1, 1, 1, 0),"
		" (%lld, 2, 'fp16_gemm', 'nvtx', NULL, 1, 1, 1, 3000, 1, 1, 1, 1),"
		" (%lld, 3, 'fp16_gemm 1', 'nvtx', NULL, 1, 1, 1, 2900, 1, 1, 1, 1),"
		" (%lld, 4, 'warmup 1', 'nvtx', NULL, 1, 1, 1, 2000, 1, 1, 1, 1),"
		" (%lld, 5, 'warmup 2', 'nvtx', NULL, 1, 1, 1, 1000, 1, 1, 1, 1);"
		"INSERT INTO kp_blockers (runId, regionId, kind, fatal, api_name, start)"
		" SELECT runId, regionId, 'sync', 1, 'cudaStreamSynchronize', 0 FROM kp_regions"
		" WHERE runId = %lld AND blockers = 'sync';",
		N_LAYERS - 1, (long long)run, (long long)run, (long long)run, (long long)run,
		(long long)run, (long long)run, (long long)run);
	rc = rc || insert_plan(db, run, plan);
	free(plan);
	if (rc) {
		kp_db_close(db);
		return NULL;
	}
	return db;
}

/* Lines of text that end with suffix. */
static int count_lines_ending(const char *text, const char *suffix)
{
	size_t n = strlen(suffix);
	int hits = 0;
	const char *line = text, *nl;

	for (; (nl = strchr(line, '\n')); line = nl + 1)
		hits += (size_t)(nl - line) >= n && !memcmp(nl - n, suffix, n);
	return hits;
}

static void test_families(void)
{
	struct kp_db *db = layer_fixture("families.db");
	struct kp_err err = {0};
	struct kp_report *rep = NULL;
	const struct kp_rep_family *fam;
	char *h, *csv, *row;
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	h = report_html(db, &rep);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	/* one family of twelve; the others stay regions */
	CU_ASSERT_EQUAL_FATAL(rep->families.len, 1);
	fam = &rep->families.data[0];
	CU_ASSERT_STRING_EQUAL(fam->name, "Layer #");
	CU_ASSERT_STRING_EQUAL(fam->source, "nvtx");
	CU_ASSERT_EQUAL(fam->members, N_LAYERS);
	CU_ASSERT_EQUAL(fam->occurrences, 2 * N_LAYERS);
	/* 2 x (10000 + 100 i) summed over i < 12 */
	CU_ASSERT_EQUAL(fam->eager_ns, 2 * (10000 * N_LAYERS + 100 * 66));
	CU_ASSERT_EQUAL(fam->host_idle_ns, 2 * 3000 * N_LAYERS);
	CU_ASSERT_EQUAL(fam->n_capturable, 9);
	/* 2 x (eager - 5000) over the nine capturable layers: i = 0..11 but 3, 7, 11 */
	CU_ASSERT_EQUAL(fam->gain_ns, 2 * (5000 * 9 + 100 * (66 - 3 - 7 - 11)));
	CU_ASSERT_EQUAL(fam->decisions[KP_PLAN_GRAPH], 9);
	CU_ASSERT_EQUAL(fam->decisions[KP_PLAN_EAGER], 3);
	CU_ASSERT_EQUAL(fam->n_unplanned, 0);
	CU_ASSERT_EQUAL(rep->regions.data[fam->first].id, 10 + N_LAYERS - 1);  /* the largest */
	for (i = 0; i < rep->regions.len; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];

		CU_ASSERT_EQUAL(r->family, strncmp(r->label, "Layer ", 6) ? -1 : 0);
	}
	/* the page: one family row holding twelve region rows; step, fp16_gemm and warmup apart */
	CU_ASSERT_EQUAL(count(h, "<tr class=\"family\""), 1);
	CU_ASSERT_EQUAL(count(h, "<tr class=\"region\""), N_LAYERS + 5);
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<details><summary>Layer # <span class=\"cap\">(12 regions)</span>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<td>graph 9 / eager 3</td>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<td>9 of 12</td>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "Layer # stands for 12 regions"));
	CU_ASSERT_PTR_NULL(strstr(h, "warmup #"));
	CU_ASSERT_PTR_NULL(strstr(h, "fp16_gemm #"));
	/* rows by total time: step (1.5 ms), the family (~254 us), then the rest */
	CU_ASSERT(strstr(h, "data-region=\"1\"") < strstr(h, "<tr class=\"family\""));
	CU_ASSERT(strstr(h, "<tr class=\"family\"") < strstr(h, "data-region=\"2\""));
	CU_ASSERT(strstr(h, "data-region=\"10\"") < strstr(h, "data-region=\"4\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<td>sync: cudaStreamSynchronize</td>"));
	CU_ASSERT(valid_utf8(h));
	free(h);

	/* regions.csv: one row per region, the family last */
	CU_ASSERT_EQUAL(kp_report_csv(db, rep, kp_test_path("families-csv"), &err), 0);
	csv = kp_test_read(kp_test_path("families-csv/regions.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
	CU_ASSERT(!strncmp(csv, "region_id,", 10));
	CU_ASSERT_EQUAL(count_lines_ending(csv, ",fingerprint,edge_us,family"), 1);
	CU_ASSERT_EQUAL(count_lines_ending(csv, ",Layer #"), N_LAYERS);
	CU_ASSERT_EQUAL(count(csv, "\n"), 1 + N_LAYERS + 5);
	row = strstr(csv, "\n1,,step,");
	CU_ASSERT(row && strchr(row + 1, '\n')[-1] == ',');   /* step: no family */
	row = strstr(csv, "\n4,,warmup 1,");
	CU_ASSERT(row && strchr(row + 1, '\n')[-1] == ',');
	free(csv);
	kp_report_free(rep);

	/* a capped table: two rows, and two of the family's twelve members */
	{
		struct kp_report_opts o = { .max_rows = 2 };
		char *buf = NULL;
		size_t n = 0;
		FILE *f;

		CU_ASSERT_EQUAL_FATAL(kp_report_load(db, &o, &rep, &err), 0);
		CU_ASSERT_EQUAL(rep->regions.len, N_LAYERS + 5);   /* all loaded, for the sums */
		f = open_memstream(&buf, &n);
		CU_ASSERT_EQUAL(kp_report_html(rep, f, &err), 0);
		fclose(f);
		CU_ASSERT_EQUAL(count(buf, "<tr class=\"family\""), 1);
		CU_ASSERT_EQUAL(count(buf, "<tr class=\"region\""), 3);
		CU_ASSERT_PTR_NOT_NULL(strstr(buf, "showing the largest 2 of 12 members"));
		CU_ASSERT_PTR_NOT_NULL(strstr(buf, "showing the first 2 of 6 rows (regions and families)"));
		free(buf);
		kp_report_free(rep);
	}
	kp_db_close(db);
}

/*
 * Families by total time, one per source; labels that CSV must quote (a
 * quote, a comma, a newline) keep their rows whole.
 */
static void test_families_csv_quoting(void)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path("famq.db"), KP_DB_CREATE, &err);
	struct kp_report *rep = NULL;
	int64_t run;
	char *csv, *row;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	run = add_run(db, "NVIDIA H200", 13000, 3, 1.0);
	CU_ASSERT_EQUAL_FATAL(exec_f(db,
		"INSERT INTO kp_regions (runId, regionId, label, source, occurrences, kernels, nodes,"
		" eager_ns, busy_ns, host_idle_ns, device_idle_ns, capturable, blockers)"
		" WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3)"
		" SELECT %lld, i, 'say \"hi\",' || char(10) || 'part ' || i, 'nvtx', 1, 1, 1, 1000 * i,"
		"  1, 1, 1, 0, 'a,b' FROM c;"
		"INSERT INTO kp_regions (runId, regionId, label, source, occurrences, kernels, nodes,"
		" eager_ns, busy_ns, host_idle_ns, device_idle_ns, capturable)"
		" VALUES (%lld, 4, 'x' || char(10) || '1', 'mined', 1, 1, 1, 1, 1, 1, 1, 0),"
		/* a.# holds the largest region, b.# the most time: b.# comes first */
		" (%lld, 5, 'a.1', 'nvtx', 1, 1, 1, 50000, 1, 1, 1, 0),"
		" (%lld, 6, 'a.2', 'nvtx', 1, 1, 1, 1, 1, 1, 1, 0),"
		" (%lld, 7, 'a.3', 'nvtx', 1, 1, 1, 1, 1, 1, 1, 0),"
		" (%lld, 8, 'b.1', 'nvtx', 1, 1, 1, 30000, 1, 1, 1, 0),"
		" (%lld, 9, 'b.2', 'nvtx', 1, 1, 1, 30000, 1, 1, 1, 0),"
		" (%lld, 10, 'b.3', 'nvtx', 1, 1, 1, 30000, 1, 1, 1, 0),"
		/* the same family name from another source is another family */
		" (%lld, 11, 'b.4', 'mined', 1, 1, 1, 30000, 1, 1, 1, 0);",
		(long long)run, (long long)run, (long long)run, (long long)run, (long long)run,
		(long long)run, (long long)run, (long long)run, (long long)run), 0);
	CU_ASSERT_EQUAL_FATAL(kp_report_load(db, NULL, &rep, &err), 0);
	CU_ASSERT_EQUAL_FATAL(rep->families.len, 3);
	CU_ASSERT_STRING_EQUAL(rep->families.data[0].name, "b.#");
	CU_ASSERT_EQUAL(rep->families.data[0].members, 3);
	CU_ASSERT_STRING_EQUAL(rep->families.data[1].name, "a.#");
	CU_ASSERT_EQUAL(rep->families.data[1].eager_ns, 50002);
	CU_ASSERT_EQUAL(rep->regions.data[0].id, 5);
	CU_ASSERT_EQUAL(rep->regions.data[0].family, 1);
	CU_ASSERT_EQUAL(rep->regions.data[1].family, 0);
	CU_ASSERT_EQUAL(rep->regions.data[rep->families.data[0].first].id, 8);
	CU_ASSERT_PTR_NOT_NULL(strstr(rep->families.data[2].name, "part #"));
	CU_ASSERT_EQUAL(kp_report_csv(db, rep, kp_test_path("famq-csv"), &err), 0);
	csv = kp_test_read(kp_test_path("famq-csv/regions.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
	CU_ASSERT_EQUAL(count(csv, ",\"say \"\"hi\"\",\npart #\"\n"), 3);
	CU_ASSERT_PTR_NOT_NULL(strstr(csv, "\n2,,\"say \"\"hi\"\",\npart 2\",nvtx,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(csv, ",fingerprint,edge_us,family\n1,,"));
	row = strstr(csv, "\n4,,\"x\n1\",mined,");
	CU_ASSERT(row && strchr(row + 8, '\n')[-1] == ',');   /* no family */
	free(csv);
	kp_report_free(rep);
	kp_db_close(db);
}

/*
 * The plan section lists kplan.torch's fusion groups beside the plan's file
 * (kp_plans.path, relative: found beside the database) with the gain they
 * recorded and the same formula with this GPU's calibration; groups found
 * with another plan are said to be unused; no file, no table.
 */
static void test_report_torch_groups(void)
{
	struct kp_db *db = fixture("aten.db", 1, 1.0);
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p;
	char *h, *plan = plan_text(1);

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	h = report_html(db, NULL);
	CU_ASSERT_PTR_NULL(h ? strstr(h, "id=\"aten-table\"") : NULL);
	free(h);
	p = kp_plan_parse(plan, strlen(plan), "plan", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	/* half the default bandwidth calibrated for this GPU: the traffic costs twice */
	CU_ASSERT_EQUAL(exec_f(db, "UPDATE kp_plans SET path = 'rp.kplan';"
			       "INSERT OR REPLACE INTO kp_calibration VALUES ('NVIDIA H200', 13000,"
			       " 'dram_bytes_per_ns', 1500.0, 10, 1);"), 0);
	kp_strbuf_addf(&sb, "kplan-aten-groups 2\nplan-hash %016llx\n\n[group 1]\nregion step\n"
		       "key 0000000000000001\nnumerics exact\nops aten::silu -> aten::mul.Tensor\n"
		       "shape 4x768\ninputs f16 full 4x768 s768,1\noutputs 1\nkernel kp_aten_a\n"
		       "source kpaten-0000000000000001.cu\nsource-hash 0000000000000001\n"
		       "saved-kernels 1\nsaved-bytes 12288\ngain-ns 1008\nper-call 3\n",
		       (unsigned long long)p->body_hash);
	kp_test_write(kp_test_path("rp.kplan.aten"), sb.buf, (long)sb.len);
	h = report_html(db, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"aten-table\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "torch fusion groups (kplan.torch, <code>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "rp.kplan.aten</code>): 1;"));
	CU_ASSERT_PTR_NULL(strstr(h, "found with another plan"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<td>aten::silu -&gt; aten::mul.Tensor</td>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "<td class=\"n\" data-v=\"12288\">12288</td>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "data-v=\"1008\""));      /* as saved: the defaults */
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "data-v=\"1016\""));      /* 12288 B at 750 B/ns + 1 us */
	CU_ASSERT_PTR_NOT_NULL(strstr(h, "data-v=\"3048\""));      /* run 3 times per call */
	free(h);
	/* found with another plan */
	sb.buf[strlen("kplan-aten-groups 2\nplan-hash ")] ^= 1;
	kp_test_write(kp_test_path("rp.kplan.aten"), sb.buf, (long)sb.len);
	h = report_html(db, NULL);
	CU_ASSERT_PTR_NOT_NULL(h ? strstr(h, "<b>found with another plan</b>") : NULL);
	free(h);
	/* unreadable: said */
	kp_test_write(kp_test_path("rp.kplan.aten"), "kplan-aten-groups 2\nbad\n", -1);
	h = report_html(db, NULL);
	CU_ASSERT_PTR_NOT_NULL(h ? strstr(h, "torch fusion groups beside the plan cannot be read") :
			       NULL);
	free(h);
	kp_plan_free(p);
	kp_strbuf_release(&sb);
	free(plan);
	kp_db_close(db);
}

CU_TestInfo kp_tests_reports[] = {
	{ "html escaping and invalid utf-8", test_escape },
	{ "long names shortened with a title", test_shorten },
	{ "report page: verdict, sections, escaping", test_report_page },
	{ "report page: the plan's torch fusion groups and their gains", test_report_torch_groups },
	{ "kernel labels and fusion chains", test_kernel_labels },
	{ "kernel labels told apart in the tables", test_kernel_labels_apart },
	{ "javascript string literals", test_js_string },
	{ "timeline data, region kernels, gap distribution", test_timeline_data },
	{ "golden csv files", test_csv_golden },
	{ "database without analysis", test_no_analysis },
	{ "kplan report cli", test_cli_report },
	{ "kernel labels in analyze, show and the page", test_cli_labels },
	{ "one saving and one host-bound figure everywhere", test_one_figure_everywhere },
	{ "diff: regression and exit codes", test_diff },
	{ "diff: comparability check", test_diff_not_comparable },
	{ "diff: a run not analyzed is analyzed first", test_diff_unanalyzed },
	{ "region families: one row, csv column", test_families },
	{ "region families: order, sources, csv quoting", test_families_csv_quoting },
	CU_TEST_INFO_NULL,
};
