/*
 * test_analyzer.c - analyzer/: gap attribution, regions (NVTX and mined),
 * every blocker kind, splits, shape keys, patch slots, fusion feasibility,
 * the cost model, calibration loading, idempotence; and the CLI on the
 * bundled ResNet-18 trace.
 *
 * Timelines are hand-built with kp_writer into temporary databases.
 */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>
#include "common/kname.h"

#include "analyzer/analyzer.h"
#include "analyzer/internal.h"
#include "common/hash.h"
#include "db/writer.h"
#include "importers/import.h"
#include "planner/planner.h"
#include "testutil.h"
#include "timeline.h"

#define EW "void at::native::vectorized_elementwise_kernel<4, add>(int)"
#define EW2 "void at::native::vectorized_elementwise_kernel<4, mul>(int)"
#define EW3 "void at::native::vectorized_elementwise_kernel<4, relu>(int)"
#define GEMM "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128"

/* ------------------------------------------------------------------ */

static void test_gaps(void)
{
	struct tl t;
	struct kp_analysis_summary s;

	tl_open(&t, "gaps.db");
	tl_kernel(&t, EW, 13, 0, 1000, 1000);          /* ends 2000 */
	tl_kernel(&t, EW, 13, 2500, 4000, 1000);       /* launched after: host-bound gap 2000 */
	tl_kernel(&t, EW, 13, 3000, 5500, 500);        /* launched before 5000: device gap 500 */
	tl_api(&t, "cudaLaunchKernel", 99, 1, 12345);  /* a launch call without a kernel */
	t.corr = 50000000;   /* sparse correlation ids: the sort-merge join */
	tl_kernel(&t, EW, 14, 100, 1100, 100);         /* other stream: first op, no gap */
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	CU_ASSERT_EQUAL(s.n_joined, 4);
	CU_ASSERT_EQUAL(s.n_ops, 4);
	CU_ASSERT_EQUAL(s.n_streams, 2);
	CU_ASSERT_EQUAL(s.host_idle_ns, 2000);
	CU_ASSERT_EQUAL(s.device_idle_ns, 500);
	CU_ASSERT_EQUAL(s.busy_ns, 2600);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_gaps"), 2);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT host_bound FROM kp_gaps WHERE correlationId = 2"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT gap_ns FROM kp_gaps WHERE correlationId = 2"), 2000);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT queue_ns FROM kp_gaps WHERE correlationId = 2"), 1500);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT launch_api_ns FROM kp_gaps WHERE correlationId = 2"), 1000);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT host_bound FROM kp_gaps WHERE correlationId = 3"), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT gap_ns FROM kp_gaps WHERE correlationId = 3"), 500);
	tl_close(&t);
}

static void test_gap_rows_cap(void)
{
	struct tl t;
	struct kp_analyze_opts o;

	tl_open(&t, "gapcap.db");
	for (int i = 0; i < 10; i++)   /* gaps 0..8 * 100 */
		tl_kernel(&t, EW, 13, i * 10000 + i * i * 50, i * 10000 + i * i * 50 + 10, 100);
	kp_analyze_opts_init(&o);
	o.gap_rows_max = 3;
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, &o, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_gaps"), 3);
	/* the largest three gaps are kept */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT min(correlationId) FROM kp_gaps"), 8);
	tl_close(&t);
	/* ties at the threshold do not crowd out larger gaps later on */
	tl_open(&t, "gapties.db");
	int64_t tt = 0;
	for (int i = 0; i < 12; i++) {
		int64_t gap = i < 10 ? 100 : 5000;
		tt += gap;
		tl_kernel(&t, EW, 13, tt, tt + 10, 100);
		tt += 100;
	}
	kp_analyze_opts_init(&o);
	o.gap_rows_max = 4;
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, &o, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_gaps"), 4);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_gaps WHERE gap_ns > 1000"), 2);
	tl_close(&t);
}

/*
 * Region "r": n_occ occurrences of four kernels launched at T+1000..T+4000
 * (T = k * 100000) on stream, inside an NVTX range [T, T+50000].
 */
static void region_fixture(struct tl *t, int n_occ, uint32_t stream)
{
	for (int k = 0; k < n_occ; k++) {
		int64_t T = (int64_t)k * 100000;
		tl_nvtx(t, "r", T, T + 50000);
		for (int i = 0; i < 4; i++)
			tl_kernel(t, i % 2 ? EW2 : EW, stream, T + 1000 * (i + 1),
				  T + 10000 + 2000 * i, 1500);
	}
}

/*
 * The runtime's watch (CUPTI attached once per process) is a one-time cost
 * of a region only when the trace is a whole process: a recording with no
 * capture window. A profiler trace or a window samples a longer run.
 */
static void test_watch_cost_whole_runs(void)
{
	struct tl t;
	struct kp_analysis_summary s;
	struct kp_err err = {0};
	int64_t sampled, whole;

	tl_open(&t, "watchcost.db");
	region_fixture(&t, 3, 13);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	sampled = tl_q(&t, "SELECT one_time_ns FROM kp_regions WHERE label = 'r'");
	CU_ASSERT_EQUAL(kp_db_exec(t.db, "UPDATE kp_runs SET source = 'record'", &err), 0);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	whole = tl_q(&t, "SELECT one_time_ns FROM kp_regions WHERE label = 'r'");
	CU_ASSERT_EQUAL(whole - sampled, 20000000);
	CU_ASSERT_EQUAL(kp_db_exec(t.db, "UPDATE kp_runs SET note = "
				   "'capture window: part of the run kept'", &err), 0);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT one_time_ns FROM kp_regions WHERE label = 'r'"), sampled);
	kp_db_close(t.db);
}

static void test_nvtx_region(void)
{
	struct tl t;
	struct kp_analysis_summary s;

	tl_open(&t, "nvtx.db");
	region_fixture(&t, 3, 13);
	/* annotations that are not CPU ranges are ignored */
	struct kp_nvtx_rec gpu = { .start = 0, .end = 400000, .event_type = KP_NVTX_PUSHPOP,
				   .text = "gpu_side", .category = 1 };
	struct kp_nvtx_rec op = { .start = 0, .end = 400000, .event_type = KP_NVTX_PUSHPOP,
				  .text = "aten::add", .domain_id = 2 };
	struct kp_err err = {0};
	CU_ASSERT_EQUAL(kp_writer_nvtx(&t.w, &gpu, &err), 0);
	CU_ASSERT_EQUAL(kp_writer_nvtx(&t.w, &op, &err), 0);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	CU_ASSERT_EQUAL(s.regions_from, 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT occurrences FROM kp_regions WHERE label = 'r'"), 3);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT kernels FROM kp_regions WHERE label = 'r'"), 4);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'r'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT busy_ns FROM kp_regions WHERE label = 'r'"), 6000);
	/* eager: the 50 us range (longer than GPU span 7.5 us) */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT eager_ns FROM kp_regions WHERE label = 'r'"), 50000);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_region_occurrences"), 3);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT kernels FROM kp_region_occurrences WHERE occIndex = 2"), 4);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT first_correlationId FROM kp_region_occurrences WHERE occIndex = 1"), 5);
	/* no blockers on a side stream */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers"), 0);
	/* the fingerprint is plan/FORMAT.md's: kernels' signature strings folded */
	uint64_t fp = KP_HASH_SEED;
	for (int i = 0; i < 4; i++) {
		char sig[256], id[256];
		int n;

		kp_kernel_ident(i % 2 ? EW2 : EW, id, sizeof(id));
		n = snprintf(sig, sizeof(sig), "%s|64,1,1|256,1,1|0", id);
		fp = kp_hash_mix(fp, kp_hash64(sig, (size_t)n, KP_HASH_SEED));
	}
	char want[32];
	snprintf(want, sizeof(want), "%016llx", (unsigned long long)fp);
	CU_ASSERT_STRING_EQUAL(tl_qtext(&t, "SELECT fingerprint FROM kp_regions WHERE label = 'r'"), want);
	CU_ASSERT_STRING_EQUAL(tl_qtext(&t, "SELECT signature FROM kp_region_occurrences WHERE occIndex = 2"), want);
	/* graphed: 4 x max(1500 + traced gap, node floor) (defaults: 1600) */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'r'"),
			4 * (1500 + 100));
	tl_close(&t);
}

/* One blocking call between launches 2 and 3 of occurrence 1. */
static void check_blocker(const char *api, const char *kind, int fatal)
{
	struct tl t;
	char name[64];

	snprintf(name, sizeof(name), "blk_%s.db", api);
	tl_open(&t, name);
	region_fixture(&t, 3, 13);
	tl_api(&t, api, 100000 + 2500, 300, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	if (!kind) {
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers"), 0);
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 1);
		tl_close(&t);
		return;
	}
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = '%s' AND fatal = %d"
			  " AND api_name = '%s' AND start = 102500 AND correlationId = 9999"
			  " AND occIndex = 1 AND position = 2", kind, fatal, api), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), !fatal);
	if (fatal) {
		/* split into two capturable parts of two kernels each */
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE parentId = 1"
				  " AND source = 'split' AND nodes = 2 AND capturable = 1"
				  " AND occurrences = 3"), 2);
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE label = 'r[2:4]'"), 1);
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE regionId = 1"
				  " AND blockers = '%s'", kind), 1);
		/* parent: only the parts gain */
		CU_ASSERT_TRUE(tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE regionId = 1") >
			       tl_q(&t, "SELECT sum(graph_ns_pred) FROM kp_regions WHERE parentId = 1"));
	}
	tl_close(&t);
}

static void test_blocker_sync(void) { check_blocker("cudaDeviceSynchronize", "sync", 1); }
static void test_blocker_stream_sync(void) { check_blocker("cuStreamSynchronize", "sync", 1); }
static void test_blocker_copy(void) { check_blocker("cudaMemcpy", "blocking_copy", 1); }
static void test_blocker_malloc(void) { check_blocker("cudaMalloc", "malloc", 1); }
static void test_blocker_free(void) { check_blocker("cudaFree", "free", 1); }
static void test_blocker_memset(void) { check_blocker("cudaMemset", "blocking_copy", 1); }
static void test_blocker_callback(void) { check_blocker("cudaStreamAddCallback", "host_callback", 1); }
static void test_blocker_event(void) { check_blocker("cudaStreamWaitEvent", "cross_stream_event", 1); }
/* issue 30: calls the runtime's watch refused and the analyzer let pass */
static void test_blocker_watch_calls(void)
{
	check_blocker("cudaEventElapsedTime", "sync", 1);
	check_blocker("cudaDeviceSetLimit", "device_limit", 1);
	check_blocker("cudaStreamBeginCapture", "nested_capture", 1);
	check_blocker("cudaHostRegister", "host_register", 1);
}

static void test_not_blockers(void)
{
	check_blocker("cudaMallocAsync", NULL, 0);
	check_blocker("cudaFreeAsync", NULL, 0);
	check_blocker("cudaGetDevice", NULL, 0);
	check_blocker("cudaMemsetAsync", NULL, 0);
	check_blocker("cudaLaunchHostFunc", NULL, 0);   /* a host node */
	check_blocker("cudaGraphAddMemsetNode", NULL, 0);   /* builds a graph: no memset */
	check_blocker("cudaStreamIsCapturing", NULL, 0);
}

static void test_fork_join(void)
{
	struct tl t;

	tl_open(&t, "forkjoin.db");
	region_fixture(&t, 3, 13);
	/* occurrence 1 records an event and a side stream waits on it */
	tl_api(&t, "cudaEventRecord", 100000 + 1500, 100, 9998);
	tl_api(&t, "cudaStreamWaitEvent", 100000 + 2500, 100, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'cross_stream_event'"
			  " AND fatal = 0 AND detail LIKE '%%fork/join%%'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 1);
	tl_close(&t);
}

static void test_blocker_pageable(void)
{
	struct tl t;
	struct kp_err err = {0};
	struct kp_memcpy_rec m = { .start = 111000, .end = 111500, .stream_id = 13,
				   .correlation_id = 777, .bytes = 4096, .copy_kind = 1,
				   .src_kind = 1, .dst_kind = 3 };

	tl_open(&t, "pageable.db");
	region_fixture(&t, 3, 13);
	tl_api(&t, "cudaMemcpyAsync", 100000 + 2500, 300, 777);
	CU_ASSERT_EQUAL(kp_writer_memcpy(&t.w, &m, &err), 0);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'pageable_copy'"
			  " AND fatal = 1 AND api_name = 'cudaMemcpyAsync' AND start = 102500"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 0);
	tl_close(&t);
}

static void test_blocker_edge(void)
{
	struct tl t;

	tl_open(&t, "edge.db");
	region_fixture(&t, 2, 13);
	/* after the last launch, inside the range: bounds capture, no split */
	tl_api(&t, "cudaStreamSynchronize", 40000, 300, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'sync' AND fatal = 0"
			  " AND position = 4"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE parentId IS NOT NULL"), 0);
	tl_close(&t);
}

static void test_legacy_stream(void)
{
	struct tl t;
	struct kp_analyze_opts o;

	tl_open(&t, "legacy.db");
	region_fixture(&t, 2, KP_LEGACY_STREAM_ID);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'legacy_stream'"
			  " AND fatal = 0 AND api_name = 'cudaLaunchKernel' AND correlationId = 1"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE advisories = 'legacy_stream'"), 1);
	kp_analyze_opts_init(&o);
	o.legacy_stream = -1;
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, &o, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers"), 0);
	tl_close(&t);
}

static void test_shape_keys(void)
{
	struct tl t;

	tl_open(&t, "shape.db");
	region_fixture(&t, 2, 13);
	/* a third occurrence whose third kernel has a different grid */
	tl_nvtx(&t, "r", 200000, 250000);
	for (int i = 0; i < 4; i++) {
		t.grid = i == 2 ? 128 : 64;
		tl_kernel(&t, i % 2 ? EW2 : EW, 13, 200000 + 1000 * (i + 1),
			  210000 + 2000 * i, 1500);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT shape_keys FROM kp_regions WHERE regionId = 1"), 2);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'shape_key'"
			  " AND fatal = 0 AND occIndex = 2 AND position = 2"
			  " AND detail LIKE '%%grid 64,1,1%%->%%grid 128,1,1%%'"), 1);
	/* two graphs to instantiate: one-time cost doubles */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT one_time_ns FROM kp_regions WHERE regionId = 1"),
			(int64_t)((1700 + 5000) * 4 * 2));
	tl_close(&t);
}

/* Overlapping kernels (programmatic dependent launch) count once. */
static void test_model_overlap(void)
{
	struct tl t;
	struct kp_err err = {0};
	struct kp_cost c;
	double gap, node;

	kp_cost_defaults(&c);
	gap = kp_cost_node_gap(&c, KP_NODE_KERNEL);
	node = c.v[KP_COST_GRAPH_NODE];
	tl_open(&t, "overlap.db");
	for (int k = 0; k < 3; k++) {
		int64_t T = (int64_t)k * 100000;
		/* b starts 5 us before a ends: 5 us of it is new time */
		struct kp_kernel_rec a = { .start = T + 10000, .end = T + 20000, .stream_id = 13,
					   .name = "a_kernel", .grid = { 8, 1, 1 }, .block = { 128, 1, 1 } };
		struct kp_kernel_rec b = { .start = T + 15000, .end = T + 25000, .stream_id = 13,
					   .name = "b_kernel", .grid = { 8, 1, 1 }, .block = { 128, 1, 1 } };

		tl_nvtx(&t, "pdl", T, T + 50000);
		a.correlation_id = ++t.corr;
		tl_api(&t, "cudaLaunchKernelExC", T + 1000, 1000, t.corr);
		CU_ASSERT_EQUAL(kp_writer_kernel(&t.w, &a, &err), 0);
		b.correlation_id = ++t.corr;
		tl_api(&t, "cudaLaunchKernelExC", T + 3000, 1000, t.corr);
		CU_ASSERT_EQUAL(kp_writer_kernel(&t.w, &b, &err), 0);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	/* a: 10 us + gap; b: only its 5 us past a, no gap (node cost is the floor) */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'pdl'"),
			llround((10000 + gap > node ? 10000 + gap : node) + (5000 > node ? 5000 : node)));
	tl_close(&t);
}

/* Kernels recorded as launched with programmatic dependent launch
 * (kp_launch_attrs), each alone on the stream (a host-bound run), pay
 * graph_traced_gap_pdl_ns after the first instead of the class's gap (in a
 * graph their start-up overlaps the predecessor); without the rows the same
 * timeline pays the class's gap on every kernel. *calibrated: the same after
 * kplan calibrate stored -2000 ns for this GPU. */
static void model_pdl(int with_attrs, int64_t *pred, int64_t *calibrated)
{
	struct kp_analysis_summary sum;
	struct tl t;

	tl_open(&t, with_attrs ? "pdl_attrs.db" : "pdl_none.db");
	for (int k = 0; k < 3; k++) {
		int64_t T = (int64_t)k * 100000;

		tl_nvtx(&t, "step", T, T + 60000);
		for (int i = 0; i < 4; i++) {
			/* host-paced: 10 us apart, 5 us each, no overlap */
			uint32_t c = tl_kernel(&t, EW, 7, T + 1000 + i * 10000, T + 3000 + i * 10000,
					       5000);
			char sql[128];
			struct kp_err err = {0};

			snprintf(sql, sizeof(sql), "INSERT INTO kp_launch_attrs VALUES (%lld, %u, 1)",
				 (long long)t.run, c);
			if (with_attrs)
				CU_ASSERT_EQUAL(kp_db_exec(t.db, sql, &err), 0);
		}
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &sum), 0);
	CU_ASSERT_EQUAL(sum.n_pdl, with_attrs ? 12 : 0);
	*pred = tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'");
	{
		struct kp_err err = {0};

		CU_ASSERT_EQUAL_FATAL(kp_cost_store(t.db, "TestGPU", 0, KP_COST_TRACED_GAP_PDL,
						    -2000, 9, &err), 0);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &sum), 0);
	*calibrated = tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'");
	tl_close(&t);
}

static void test_model_pdl(void)
{
	struct kp_cost c;
	int64_t none = 0, pdl = 0, none_c = 0, pdl_c = 0;
	double gap, pgap;

	kp_cost_defaults(&c);
	gap = kp_cost_node_gap(&c, KP_NODE_KERNEL);
	pgap = c.v[KP_COST_TRACED_GAP_PDL];
	CU_ASSERT(pgap < 0);
	model_pdl(0, &none, &none_c);
	model_pdl(1, &pdl, &pdl_c);
	CU_ASSERT_EQUAL(none, llround(4 * (5000 + gap)));
	CU_ASSERT_EQUAL(none_c, none);   /* no PDL kernels: the PDL constant is unused */
	/* the first kernel keeps its gap (nothing before it in the region) */
	CU_ASSERT_EQUAL(pdl, llround(5000 + gap) + 3 * (5000 + llround(pgap)));
	CU_ASSERT_EQUAL(pdl_c, llround(5000 + gap) + 3 * (5000 - 2000));
}

static void test_fingerprint_mangled(void)
{
	struct tl t;
	struct kp_err err = {0};

	tl_open(&t, "mangled.db");
	for (int k = 0; k < 2; k++) {
		int64_t T = (int64_t)k * 100000;
		tl_nvtx(&t, "m", T, T + 50000);
		struct kp_kernel_rec kr = {
			.start = T + 10000, .end = T + 11000, .stream_id = 13,
			.correlation_id = ++t.corr, .name = "void foo<int>(int*)",
			.mangled = "_Z3fooIiEvPi", .grid = { 8, 2, 1 }, .block = { 128, 1, 1 },
			.static_smem = 1024, .dynamic_smem = 512,
		};
		tl_api(&t, "cuLaunchKernel", T + 1000, 1000, t.corr);
		CU_ASSERT_EQUAL(kp_writer_kernel(&t.w, &kr, &err), 0);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	/* the identifier, "foo", whichever spelling the trace has */
	const char *sig = "foo|8,2,1|128,1,1|512";
	uint64_t fp = kp_hash_mix(KP_HASH_SEED, kp_hash64(sig, strlen(sig), KP_HASH_SEED));
	char want[32];
	snprintf(want, sizeof(want), "%016llx", (unsigned long long)fp);
	CU_ASSERT_STRING_EQUAL(tl_qtext(&t, "SELECT fingerprint FROM kp_regions WHERE label = 'm'"), want);
	tl_close(&t);
}

static void test_patch_slots(void)
{
	struct tl t;

	tl_open(&t, "patch.db");
	region_fixture(&t, 3, 13);
	/* kernel 0 of each occurrence (corr 1, 5, 9): arg 0 a changing
	 * pointer, arg 1 a stable pointer; kernel 1: arg 0 stable */
	for (int k = 0; k < 3; k++) {
		tl_arg(&t, 1 + 4 * k, 0, 0x7f0000000000LL + 0x100000LL * k);
		tl_arg(&t, 1 + 4 * k, 1, 0x7f1000000000LL);
		tl_arg(&t, 2 + 4 * k, 0, 0x7f2000000000LL);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT patch_slots FROM kp_regions WHERE regionId = 1"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'patch_slot'"
			  " AND fatal = 0 AND position = 0 AND detail LIKE '%%arg 0: pointer%%'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE regionId = 1"), 1);
	/* host side includes one set_params per patched node */
	tl_close(&t);
}

static void test_mine_period(void)
{
	/* 5 warm-up ops, then 20 periods of a sequence with repeats inside */
	static const uint32_t body[8] = { 1, 2, 1, 3, 4, 5, 1, 2 };
	uint32_t s[5 + 160 + 3];
	int64_t g[5 + 160 + 3];
	size_t n = 0, p, first, cnt;
	struct kp_err err = {0};

	for (int i = 0; i < 5; i++) {
		s[n] = 100 + (uint32_t)i;
		g[n++] = 10;
	}
	for (int k = 0; k < 20; k++)
		for (int i = 0; i < 8; i++) {
			s[n] = body[i];
			g[n++] = i == 0 ? 5000 : 100;   /* steps start after long gaps */
		}
	for (int i = 0; i < 3; i++) {
		s[n] = 200 + (uint32_t)i;
		g[n++] = 10;
	}
	CU_ASSERT_EQUAL_FATAL(kp__mine_period(s, n, 2, g, &p, &first, &cnt, &err), 0);
	CU_ASSERT_EQUAL(p, 8);
	CU_ASSERT_EQUAL(first, 5);
	CU_ASSERT_EQUAL(cnt, 20);
	/* no signature occurs once per step: A B A B C C repeated */
	static const uint32_t body2[6] = { 1, 2, 1, 2, 3, 3 };
	n = 0;
	for (int k = 0; k < 15; k++)
		for (int i = 0; i < 6; i++) {
			s[n] = body2[i];
			g[n++] = i == 0 ? 9000 : 100;
		}
	CU_ASSERT_EQUAL_FATAL(kp__mine_period(s, n, 2, g, &p, &first, &cnt, &err), 0);
	CU_ASSERT_EQUAL(p, 6);
	CU_ASSERT_EQUAL(first, 0);
	CU_ASSERT_EQUAL(cnt, 15);
	/* no repetition: nothing found */
	for (size_t i = 0; i < n; i++)
		s[i] = (uint32_t)i;
	CU_ASSERT_EQUAL(kp__mine_period(s, n, 2, g, &p, &first, &cnt, &err), 1);
}

static int cmp64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

static void test_select(void)
{
	enum { N = 5001 };
	static int64_t v[N], w[N];
	uint64_t r = 12345;
	struct kp_dist d;

	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			r = r * 6364136223846793005ULL + 1442695040888963407ULL;
			/* round 1: many duplicates; round 2: sorted; round 3: reversed */
			v[i] = round == 1 ? (int64_t)(r >> 60) : round == 2 ? i : round == 3 ? N - i
				: (int64_t)(r >> 20) - (1LL << 42);
			w[i] = v[i];
		}
		qsort(w, N, sizeof(*w), cmp64);
		kp__dist(v, N, &d);
		CU_ASSERT_EQUAL(d.p50, w[(N - 1) / 2]);
		CU_ASSERT_EQUAL(d.p90, w[(size_t)((N - 1) * 0.9)]);
		CU_ASSERT_EQUAL(d.p99, w[(size_t)((N - 1) * 0.99)]);
		CU_ASSERT_EQUAL(d.max, w[N - 1]);
		for (int k = 0; k < N; k += 97) {
			memcpy(v, w, sizeof(v));
			for (int i = N - 1; i > 0; i--) {   /* shuffle */
				r = r * 6364136223846793005ULL + 1442695040888963407ULL;
				int j = (int)((r >> 33) % (uint64_t)(i + 1));
				int64_t t = v[i];
				v[i] = v[j];
				v[j] = t;
			}
			CU_ASSERT_EQUAL(kp__nth(v, N, (size_t)k), w[k]);
		}
	}
}

static void test_mined_region(void)
{
	struct tl t;
	struct kp_analysis_summary s;
	const char *names[3] = { EW, EW2, EW3 };
	int64_t tt = 0;

	tl_open(&t, "mined.db");
	for (int k = 0; k < 12; k++) {
		tt += 50000;   /* a long host gap starts each step */
		for (int i = 0; i < 6; i++) {
			t.grid = 32 << (i % 3);
			tl_kernel(&t, names[i % 3], 13, tt, tt + 500, 1000);
			tt += 3000;
		}
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	CU_ASSERT_EQUAL(s.regions_from, 2);
	/* names x grids repeat every 3: the period is 3 (smallest) */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT period FROM kp_regions WHERE source = 'mined'"), 3);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT occurrences FROM kp_regions WHERE source = 'mined'"), 24);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT streamId FROM kp_regions WHERE source = 'mined'"), 13);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT CAST(coverage * 100 AS INTEGER) FROM kp_regions"), 100);
	tl_close(&t);
}

static void test_fusion(void)
{
	struct tl t;
	struct kp_analysis_summary s;

	tl_open(&t, "fusion.db");
	/* chain 1: three short elementwise kernels, one shape: feasible */
	tl_kernel(&t, EW, 13, 0, 10000, 2000);
	tl_kernel(&t, EW2, 13, 1000, 12500, 2000);
	tl_kernel(&t, EW3, 13, 2000, 15000, 2000);
	/* a GEMM breaks chains */
	tl_kernel(&t, GEMM, 13, 3000, 18000, 2000);
	/* chain 2: shapes 64 and 96 blocks do not map */
	tl_kernel(&t, EW, 13, 4000, 21000, 2000);
	t.grid = 96;
	tl_kernel(&t, EW2, 13, 5000, 24000, 2000);
	t.grid = 64;
	/* a long kernel breaks chains */
	tl_kernel(&t, EW3, 13, 6000, 27000, 50000);
	/* chain 3: too much shared memory together */
	t.smem = 40000;
	tl_kernel(&t, EW, 13, 7000, 80000, 2000);
	tl_kernel(&t, EW3, 13, 8000, 83000, 2000);
	t.smem = 0;
	tl_kernel(&t, GEMM, 13, 9000, 86000, 2000);
	/* chain 4 with args: no shared pointer, no chain */
	uint32_t c1 = tl_kernel(&t, EW2, 13, 10000, 90000, 2000);
	uint32_t c2 = tl_kernel(&t, EW3, 13, 11000, 93000, 2000);
	tl_arg(&t, c1, 0, 0x7f0000000000LL);
	tl_arg(&t, c2, 0, 0x7f0000100000LL);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, &s), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_fusion_candidates"), 3);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_fusion_candidates WHERE n_kernels = 3"
			  " AND feasible = 1 AND pattern = 'elementwise' AND saved_nodes = 2"
			  " AND saved_bytes > 0 AND score > 0 AND dependence = 'adjacency'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_fusion_candidates WHERE n_kernels = 2"
			  " AND feasible = 0 AND reason LIKE 'shapes do not map%%'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_fusion_candidates WHERE n_kernels = 2"
			  " AND feasible = 0 AND reason LIKE 'shared memory%%'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_fusion_candidates"
			  " WHERE kernel_names LIKE '%%gemm%%'"), 0);
	tl_close(&t);
}

static void test_fusion_args(void)
{
	struct tl t;

	tl_open(&t, "fusion_args.db");
	uint32_t c1 = tl_kernel(&t, EW, 13, 0, 10000, 2000);
	uint32_t c2 = tl_kernel(&t, EW2, 13, 1000, 12500, 2000);
	tl_arg(&t, c1, 0, 0x7f0000000000LL);   /* output of the first ... */
	tl_arg(&t, c2, 1, 0x7f0000000000LL);   /* ... is an input of the second */
	tl_arg(&t, c2, 0, 0x7f0000200000LL);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_fusion_candidates WHERE feasible = 1"
			  " AND dependence = 'args'"), 1);
	tl_close(&t);
}

static void test_cost_model(void)
{
	struct kp_cost c;
	struct kp_region_pred p;
	int64_t dur[3] = { 100, 5000, 300 };
	uint8_t mem[3] = { 0, 0, 1 };

	kp_cost_defaults(&c);
	CU_ASSERT_DOUBLE_EQUAL(c.v[KP_COST_GRAPH_NODE], 1000, 1e-9);
	kp_cost_predict(&c, dur, mem, NULL, 0, 3, 20000, 0, 1, &p);
	/* max(100+100, 1000) + (5000+100) + max(300+100, 1000 memop) */
	CU_ASSERT_EQUAL(p.device_ns, 1000 + 5100 + 1000);
	CU_ASSERT_EQUAL(p.host_ns, 1210 + 3 * 19);
	CU_ASSERT_EQUAL(p.graph_ns, 7100);
	CU_ASSERT_DOUBLE_EQUAL(p.speedup, 20000.0 / 7100.0, 1e-9);
	/* capture + instantiate per node, and the runtime's watch once */
	CU_ASSERT_EQUAL(p.one_time_ns, (1700 + 5000) * 3 + 20000000);
	CU_ASSERT_EQUAL(p.break_even, (20100 + 20000000 + 12900 - 1) / 12900);
	c.v[KP_COST_WATCH] = 0;     /* a sampled trace (the analyzer's choice) */
	kp_cost_predict(&c, dur, mem, NULL, 0, 3, 20000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.one_time_ns, (1700 + 5000) * 3);
	CU_ASSERT_EQUAL(p.break_even, 2);   /* 20100 / 12900 rounded up */
	CU_ASSERT_EQUAL(p.extra_mem_bytes, 65536 + 3 * 4096);
	/* host-bound graph: many patched nodes make the launch the limit */
	kp_cost_predict(&c, dur, mem, NULL, 0, 3, 20000, 20, 2, &p);
	CU_ASSERT_EQUAL(p.host_ns, 1210 + 3 * 19 + 20 * 550);
	CU_ASSERT_EQUAL(p.graph_ns, p.host_ns);
	CU_ASSERT_EQUAL(p.one_time_ns, (1700 + 5000) * 3 * 2);
	/* no gain: never breaks even */
	kp_cost_predict(&c, dur, mem, NULL, 0, 3, 1000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.break_even, -1);
}

/*
 * The gap added to a traced duration depends on the node's class and comes
 * from the calibration: a GEMM library kernel pays graph_traced_gap_gemm_ns,
 * others graph_traced_gap_ns (not graph_dep_gap_ns, which is measured
 * against the kernel's own time, not its traced duration).
 */
static void test_cost_model_classes(void)
{
	struct kp_cost c;
	struct kp_region_pred p;
	int64_t dur[3] = { 5000, 5000, 300 };
	uint8_t cls[3] = { KP_NODE_KERNEL, KP_NODE_GEMM, KP_NODE_MEMOP };

	kp_cost_defaults(&c);
	c.v[KP_COST_TRACED_GAP] = 350;
	c.v[KP_COST_TRACED_GAP_GEMM] = 700;
	c.v[KP_COST_GRAPH_DEP_GAP] = 5000;     /* not used by the model */
	kp_cost_predict(&c, dur, cls, NULL, 0, 3, 100000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.device_ns, (5000 + 350) + (5000 + 700) + 1000);
	/* no classes: every node a plain kernel */
	kp_cost_predict(&c, dur, NULL, NULL, 0, 3, 100000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.device_ns, (5000 + 350) * 2 + 1000);
	/* the floor still holds for tiny kernels of either class */
	int64_t tiny[2] = { 100, 100 };
	uint8_t tc[2] = { KP_NODE_KERNEL, KP_NODE_GEMM };
	kp_cost_predict(&c, tiny, tc, NULL, 0, 2, 100000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.device_ns, 1000 + 1000);
	CU_ASSERT_DOUBLE_EQUAL(kp_cost_node_gap(&c, KP_NODE_GEMM), 700, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(kp_cost_node_gap(&c, KP_NODE_KERNEL), 350, 1e-9);
}

/*
 * Streams forked from the region's stream and joined back run beside it in
 * a graph: the device time is the longest chain, not the sum; a branch
 * starts from the region's chain where it forks (again after each main-
 * stream node) and the next main-stream node waits for every branch that
 * ran since. Host nodes add graph_host_node_ns each.
 */
static void test_cost_model_branches(void)
{
	struct kp_cost c;
	struct kp_region_pred p;
	int64_t dur[7] = { 5000, 5000, 5000, 5000, 5000, 5000, 5000 };
	uint32_t one[7] = { 3, 3, 3, 3, 3, 3, 3 };
	/* main, fork: side 1 twice and side 2 once, join on main, then side 1
	 * again (forked anew from main's finish), main */
	uint32_t st[7] = { 3, 8, 8, 9, 3, 8, 3 };
	double n;

	kp_cost_defaults(&c);
	n = 5000 + kp_cost_node_gap(&c, KP_NODE_KERNEL);
	kp_cost_predict(&c, dur, NULL, one, 0, 7, 100000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.device_ns, llround(7 * n));
	kp_cost_predict(&c, dur, NULL, NULL, 0, 7, 100000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.device_ns, llround(7 * n));     /* no streams: one chain */
	kp_cost_predict(&c, dur, NULL, st, 0, 7, 100000, 0, 1, &p);
	/* node 0; side 1's two nodes (side 2's one beside them); node 4 joins;
	 * node 5 forks from it; node 6 joins */
	CU_ASSERT_EQUAL(p.device_ns, llround(n + 2 * n + n + n + n));
	/* two host nodes */
	c.v[KP_COST_GRAPH_HOST_NODE] = 30000;
	kp_cost_predict(&c, dur, NULL, st, 2, 7, 100000, 0, 1, &p);
	CU_ASSERT_EQUAL(p.device_ns, llround(6 * n + 60000));
}

/*
 * Through the analysis: a cudaLaunchHostFunc inside each occurrence (a
 * per-step hook, captured as a host node) adds graph_host_node_ns to the
 * prediction; one outside the occurrences adds nothing.
 */
static void test_model_host_node(void)
{
	struct tl t;
	struct kp_cost c;
	int64_t with = -1, plain = -1;

	kp_cost_defaults(&c);
	for (int h = 0; h < 2; h++) {
		tl_open(&t, h ? "hostnode.db" : "hostnode0.db");
		for (int k = 0; k < 3; k++) {
			int64_t T = (int64_t)k * 100000;

			tl_nvtx(&t, "step", T, T + 60000);
			tl_kernel(&t, EW, 7, T + 1000, T + 20000, 5000);
			tl_api(&t, "cudaLaunchHostFunc", h ? T + 5000 : T + 70000, 1000, ++t.corr);
			tl_kernel(&t, EW, 7, T + 9000, T + 30000, 5000);
		}
		CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
		*(h ? &with : &plain) = tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'");
		tl_close(&t);
	}
	CU_ASSERT_EQUAL(with - plain, llround(c.v[KP_COST_GRAPH_HOST_NODE]));
	CU_ASSERT_EQUAL(plain, llround(2 * (5000 + kp_cost_node_gap(&c, KP_NODE_KERNEL))));
}

/*
 * Through the analysis: a region of a GEMM library kernel and an
 * elementwise one, each 5 us as traced, is predicted at (5 us + the GEMM
 * gap) + (5 us + the plain gap): the defaults, then the calibration the
 * database holds for the run's GPU.
 */
static void test_model_classes_in_analysis(void)
{
	struct tl t;
	struct kp_err err = {0};

	tl_open(&t, "classes.db");
	for (int k = 0; k < 3; k++) {
		int64_t T = (int64_t)k * 100000;

		tl_nvtx(&t, "step", T, T + 60000);
		tl_kernel(&t, GEMM, 7, T + 1000, T + 20000, 5000);
		tl_kernel(&t, EW, 7, T + 3000, T + 30000, 5000);
	}
	/* the defaults: 350 ns for the GEMM, 100 for the elementwise kernel */
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'"),
			(5000 + 350) + (5000 + 100));
	/* this GPU's calibration (kplan calibrate) replaces them */
	CU_ASSERT_EQUAL_FATAL(kp_cost_store(t.db, "TestGPU", 0, KP_COST_TRACED_GAP, 200, 9, &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_cost_store(t.db, "TestGPU", 0, KP_COST_TRACED_GAP_GEMM, 700, 9,
					    &err), 0);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'"),
			(5000 + 700) + (5000 + 200));
	tl_close(&t);
}

static void test_kernel_is_gemm(void)
{
	const char *yes[] = { "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8",
			      "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(T1::Params)",
			      "ampere_sgemm_128x64_nn", "void gemv2T_kernel_val<int, int, float>(float)",
			      "volta_h884gemm_64x64_ldg8_nn", "cublasLt::splitKreduce_kernel" };
	const char *no[] = { "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>()",
			     "layer_norm_kernel", "Memcpy DtoH (Device -> Pinned)", "", "gem" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
		CU_ASSERT_TRUE(kp_kernel_is_gemm(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
		CU_ASSERT_FALSE(kp_kernel_is_gemm(no[i]));
	CU_ASSERT_FALSE(kp_kernel_is_gemm(NULL));
}

static void test_cost_names_and_load(void)
{
	struct tl t;
	struct kp_cost c;
	struct kp_err err = {0};

	for (int q_ = 0; q_ < KP_COST__N; q_++) {
		CU_ASSERT_PTR_NOT_NULL(kp_cost_name(q_));
		CU_ASSERT_EQUAL(kp_cost_from_name(kp_cost_name(q_)), q_);
		/* only the PDL gap is negative: start-up hidden behind the predecessor */
		CU_ASSERT_TRUE(q_ == KP_COST_TRACED_GAP_PDL ? kp_cost_default(q_) < 0
							   : kp_cost_default(q_) > 0);
	}
	/* a calibration file's value must be a finite number */
	{
		struct kp_cost_file cf;
		const char *path = kp_test_path("nan_calib.txt");

		kp_test_write(path, "gpu TestGPU\ndriver 580\ngraph_node_ns nan 9\n"
			      "graph_traced_gap_ns inf 9\ngraph_traced_gap_pdl_ns -300.5 9\n", -1);
		CU_ASSERT_EQUAL(kp_cost_read_path(path, &cf, &err), 0);
		CU_ASSERT_EQUAL_FATAL(cf.n, 1);
		CU_ASSERT_EQUAL(cf.row[0].q, KP_COST_TRACED_GAP_PDL);
		CU_ASSERT_DOUBLE_EQUAL(cf.row[0].value, -300.5, 1e-9);
	}
	CU_ASSERT_STRING_EQUAL(kp_cost_name(KP_COST_LAUNCH_HOST), "launch_host_ns");
	CU_ASSERT_STRING_EQUAL(kp_cost_name(KP_COST_GRAPH_LAUNCH_BASE), "graph_launch_base_ns");
	CU_ASSERT_EQUAL(kp_cost_from_name("nope"), -1);
	tl_open(&t, "cost.db");
	CU_ASSERT_EQUAL(kp_cost_store(t.db, "TestGPU", 580, KP_COST_GRAPH_NODE, 1234, 10, &err), 0);
	CU_ASSERT_EQUAL(kp_cost_store(t.db, "TestGPU", 570, KP_COST_GRAPH_NODE, 9999, 10, &err), 0);
	CU_ASSERT_EQUAL(kp_cost_store(t.db, "TestGPU", 570, KP_COST_CAPTURE, 777, 10, &err), 0);
	CU_ASSERT_EQUAL(kp_cost_load(t.db, "TestGPU", 580, &c, &err), 0);
	CU_ASSERT_DOUBLE_EQUAL(c.v[KP_COST_GRAPH_NODE], 1234, 1e-9);
	CU_ASSERT_EQUAL(c.src[KP_COST_GRAPH_NODE], KP_COST_SRC_EXACT);
	CU_ASSERT_DOUBLE_EQUAL(c.v[KP_COST_CAPTURE], 777, 1e-9);   /* other driver */
	CU_ASSERT_EQUAL(c.src[KP_COST_CAPTURE], KP_COST_SRC_GPU);
	CU_ASSERT_DOUBLE_EQUAL(c.v[KP_COST_INSTANTIATE], kp_cost_default(KP_COST_INSTANTIATE), 1e-9);
	CU_ASSERT_EQUAL(c.n_calibrated, 2);
	CU_ASSERT_EQUAL(kp_cost_load(t.db, "OtherGPU", 580, &c, &err), 0);
	CU_ASSERT_EQUAL(c.n_calibrated, 0);
	/* the run's GPU (TestGPU, 580) drives the analysis */
	CU_ASSERT_EQUAL(kp_cost_load_run(t.db, t.run, &c, &err), 0);
	CU_ASSERT_DOUBLE_EQUAL(c.v[KP_COST_GRAPH_NODE], 1234, 1e-9);
	tl_close(&t);
}

/*
 * kplan-calibrate and the cost model share common/cost_quantities.def: each
 * saved kplan-calibrate output of the validation corpus, parsed by the
 * analyzer, covers exactly the quantities the table says kplan-calibrate
 * measures, and the program's source prints each of those through the
 * table's enum and spells no quantity name of its own.
 */
static void test_cost_quantities_calibrate(void)
{
	static const struct { const char *id, *name; } qs[KP_COST__N] = {
#define KP_COST_Q(id, name, unit, by, def, doc) [KP_COST_##id] = { #id, name },
#include "common/cost_quantities.def"
	};
	static const char *const gpus[] = { "h100", "h200" };
	static const char *const suffix[] = { "_ns", "_bytes", "_bytes_per_ns" };
	struct kp_err err = {0};
	char *src = kp_test_read(kp_test_src("runtime/calibrate.cu"), NULL);
	char rel[64], pat[96];

	CU_ASSERT_PTR_NOT_NULL_FATAL(src);
	for (int q = 0; q < KP_COST__N; q++) {
		const char *nm = kp_cost_name(q), *suf;
		int by = kp_cost_by(q), u = kp_cost_unit(q);

		CU_ASSERT_STRING_EQUAL(nm, qs[q].name);
		/* the name's suffix is its unit (bytes_per_ns before _ns) */
		CU_ASSERT_TRUE_FATAL(u >= 0 && u < 3);
		suf = suffix[u];
		CU_ASSERT_TRUE(strlen(nm) > strlen(suf) &&
			       !strcmp(nm + strlen(nm) - strlen(suf), suf));
		if (u == KP_COST_UNIT_NS)
			CU_ASSERT_FALSE(strstr(nm, "_per_ns") != NULL);
		/* printed by enum (out or out_n), iff kplan-calibrate measures it */
		snprintf(pat, sizeof(pat), "(KP_COST_%s,", qs[q].id);
		CU_assertImplementation((strstr(src, pat) != NULL) == (by == KP_COST_BY_CALIBRATE),
					__LINE__, qs[q].name, __FILE__, "", CU_FALSE);
		snprintf(pat, sizeof(pat), "\"%s", qs[q].name);
		CU_ASSERT_PTR_NULL(strstr(src, pat));
	}
	free(src);
	for (size_t g = 0; g < sizeof(gpus) / sizeof(*gpus); g++) {
		struct kp_cost_file cf;
		int seen[KP_COST__N] = { 0 };

		snprintf(rel, sizeof(rel), "bench/cost_corpus/%s/calib.txt", gpus[g]);
		CU_ASSERT_EQUAL_FATAL(kp_cost_read_path(kp_test_src(rel), &cf, &err), 0);
		for (int i = 0; i < cf.n; i++) {
			CU_ASSERT_EQUAL(kp_cost_by(cf.row[i].q), KP_COST_BY_CALIBRATE);
			seen[cf.row[i].q] = 1;
		}
		for (int q = 0; q < KP_COST__N; q++)
			CU_assertImplementation(seen[q] == (kp_cost_by(q) == KP_COST_BY_CALIBRATE),
						__LINE__, kp_cost_name(q), __FILE__, "", CU_FALSE);
	}
}

static void test_idempotent(void)
{
	struct tl t;
	static const char sig[] =
		"SELECT (SELECT count(*) FROM kp_regions) * 1000000 +"
		" (SELECT count(*) FROM kp_blockers) * 10000 + (SELECT count(*) FROM kp_gaps) * 100 +"
		" (SELECT count(*) FROM kp_region_occurrences) + (SELECT count(*) FROM kp_fusion_candidates) * 7";
	static const char sum[] = "SELECT sum(graph_ns_pred) + sum(eager_ns) FROM kp_regions";

	tl_open(&t, "idem.db");
	region_fixture(&t, 3, 13);
	tl_api(&t, "cudaDeviceSynchronize", 100000 + 2500, 300, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	int64_t a = kp_db_int(t.db, sig, -1), b = kp_db_int(t.db, sum, -1);
	CU_ASSERT_TRUE(a > 3000000);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(kp_db_int(t.db, sig, -1), a);
	CU_ASSERT_EQUAL(kp_db_int(t.db, sum, -1), b);
	tl_close(&t);
}

static void test_no_run(void)
{
	struct tl t;
	struct kp_analyze_opts o;
	struct kp_err err = {0};

	tl_open(&t, "norun.db");
	kp_db_commit(t.db, &err);
	kp_writer_release(&t.w);
	kp_analyze_opts_init(&o);
	o.run_id = 42;
	CU_ASSERT_EQUAL(kp_analyze(t.db, &o, NULL, &err), KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no run 42"));
	o.run_id = 0;   /* the run exists but holds no GPU work */
	CU_ASSERT_EQUAL(kp_analyze(t.db, &o, NULL, &err), KP_ENOTFOUND);
	kp_db_close(t.db);
}

/* ---- the bundled ResNet-18 trace, through the CLI ---- */

static int import_resnet(const char *db)
{
	return kp_test_sh("%s import '%s' -o '%s' >/dev/null 2>&1", kp_test_kplan(),
			  kp_test_src("tests/fixtures/resnet18_b1.json.gz"), db);
}

static void test_resnet_step(void)
{
	const char *db = kp_test_path("r18.db"), *dir = kp_test_path("r18csv");
	char sql[256];
	struct kp_err err = {0};

	CU_ASSERT_EQUAL_FATAL(import_resnet(db), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s analyze '%s' --csv '%s' >/dev/null", kp_test_kplan(),
					 db, dir), 0);
	struct kp_db *h = kp_db_open(db, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(kp_db_int(h, "SELECT occurrences FROM kp_regions WHERE label = 'step'", 0), 10);
	CU_ASSERT_EQUAL(kp_db_int(h, "SELECT capturable FROM kp_regions WHERE label = 'step'", 0), 1);
	int64_t g = kp_db_int(h, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'", 0);
	CU_ASSERT_TRUE(g >= 474000 * 0.8 && g <= 474000 * 1.2);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM kp_gaps WHERE host_bound = 1");
	CU_ASSERT_TRUE(kp_db_int(h, sql, 0) > 500);
	kp_db_close(h);
	/* regions.csv carries the required columns */
	char *csv = kp_test_read(kp_test_path("r18csv/regions.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
	const char *cols[] = { "label", "occurrences", "kernels", "eager_us", "graph_us_pred",
			       "speedup_pred", "capturable", "blockers" };
	char *nl = strchr(csv, '\n');
	CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
	*nl = 0;
	for (size_t i = 0; i < sizeof(cols) / sizeof(*cols); i++) {
		char pat[64];
		snprintf(pat, sizeof(pat), ",%s,", cols[i]);
		char hdr[1024];
		snprintf(hdr, sizeof(hdr), ",%s,", csv);
		CU_ASSERT_PTR_NOT_NULL(strstr(hdr, pat));
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(nl + 1, "step,nvtx,,10,102,109"));
	free(csv);
	CU_ASSERT_EQUAL(kp_test_sh("test -s '%s/gaps.csv' && test -s '%s/fusion.csv'", dir, dir), 0);
}

static void test_resnet_mined(void)
{
	const char *db = kp_test_path("r18m.db");
	struct kp_err err = {0};

	CU_ASSERT_EQUAL_FATAL(import_resnet(db), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("sqlite3 '%s' 'DELETE FROM NVTX_EVENTS'", db), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s analyze '%s' >/dev/null", kp_test_kplan(), db), 0);
	struct kp_db *h = kp_db_open(db, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	/* the step: 102 kernels + 7 memsets = 109 nodes */
	CU_ASSERT_EQUAL(kp_db_int(h, "SELECT period FROM kp_regions WHERE source = 'mined'", 0), 109);
	CU_ASSERT_EQUAL(kp_db_int(h, "SELECT kernels FROM kp_regions WHERE source = 'mined'", 0), 102);
	CU_ASSERT_TRUE(kp_db_int(h, "SELECT occurrences FROM kp_regions WHERE source = 'mined'", 0) >= 9);
	kp_db_close(h);
	/* --no-nvtx on an annotated copy finds the same */
	const char *db2 = kp_test_path("r18n.db");
	CU_ASSERT_EQUAL_FATAL(import_resnet(db2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s analyze '%s' --no-nvtx | grep -q 'mined:s7:p109'",
				   kp_test_kplan(), db2), 0);
}

static void test_cli_usage(void)
{
	CU_ASSERT_EQUAL(kp_test_sh("%s analyze >/dev/null 2>&1", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s analyze x.db --bogus >/dev/null 2>&1", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s analyze '%s' >/dev/null 2>&1", kp_test_kplan(),
				   kp_test_path("missing.db")), 2);
}


/* ------------------------------------------------------------------ */
/* runtime regions (libkplanrt's NVTX domain) and what a plan must know */

/* Domain 1 is "kplan"; occurrence k of region "step" is [k*100us, +50us). */
static void rt_range(struct tl *t, const char *label, int64_t start, int64_t end)
{
	struct kp_err err = {0};
	struct kp_nvtx_rec n = { .start = start, .end = end, .event_type = KP_NVTX_PUSHPOP,
				 .text = label, .global_tid = 1, .domain_id = 1, .category = 1 };
	CU_ASSERT_EQUAL(kp_writer_nvtx(&t->w, &n, &err), 0);
}

static void rt_domain(struct tl *t)
{
	struct kp_err err = {0};
	struct kp_nvtx_rec d = { .start = 0, .end = -1, .event_type = 75, .text = "kplan",
				 .global_tid = 1, .domain_id = 1 };
	CU_ASSERT_EQUAL(kp_writer_nvtx(&t->w, &d, &err), 0);
}

/* n_occ runtime occurrences of 4 kernels on stream 13; node `odd` (if >= 0)
 * on stream odd_stream instead. */
static void rt_fixture(struct tl *t, int n_occ, int odd, uint32_t odd_stream)
{
	rt_domain(t);
	for (int k = 0; k < n_occ; k++) {
		int64_t T = (int64_t)k * 100000;
		rt_range(t, "step", T, T + 50000);
		for (int i = 0; i < 4; i++)
			tl_kernel(t, i % 2 ? EW2 : EW, i == odd ? odd_stream : 13,
				  T + 1000 * (i + 1), T + 10000 + 2000 * i, 1500);
	}
}

/* cudaStreamWaitEvent at t making `stream` wait (its synchronization row). */
static void tl_wait(struct tl *t, int64_t at, uint32_t stream, uint32_t corr)
{
	struct kp_err err = {0};
	struct kp_sync_rec sy = { .start = at, .end = at + 50, .stream_id = stream,
				  .correlation_id = corr, .sync_type = 2 };
	tl_api(t, "cudaStreamWaitEvent", at, 100, corr);
	CU_ASSERT_EQUAL(kp_writer_sync(&t->w, &sy, &err), 0);
}

static void test_rt_legacy_fatal(void)
{
	struct tl t;

	tl_open(&t, "rt_legacy.db");
	rt_fixture(&t, 3, 2, KP_LEGACY_STREAM_ID);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE label = 'step' AND "
			  "source = 'runtime' AND capturable = 0"), 1);
	/* one row per occurrence naming the kernel, both streams and the fix */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'legacy_stream' "
			  "AND fatal = 1 AND position = 2 AND detail LIKE 'node 2 (%%add%%) runs on "
			  "the legacy default stream (stream 7) while the region runs on stream 13: "
			  "launch it on stream 13'"), 3);
	/* a runtime region is entered whole: never split */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE parentId IS NOT NULL"), 0);
	tl_close(&t);
}

static void test_rt_side_stream(void)
{
	for (int join = 0; join < 2; join++) {
		struct tl t;

		tl_open(&t, join ? "rt_side_join.db" : "rt_side.db");
		rt_fixture(&t, 3, 2, 14);
		for (int k = 0; k < 3; k++) {
			int64_t T = (int64_t)k * 100000;
			tl_api(&t, "cudaEventRecord", T + 2500, 100, 9000 + 4 * k);
			tl_wait(&t, T + 2700, 14, 9001 + 4 * k);       /* fork */
			if (join) {
				tl_api(&t, "cudaEventRecord", T + 3500, 100, 9002 + 4 * k);
				tl_wait(&t, T + 3700, 13, 9003 + 4 * k);  /* join */
			}
		}
		CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'step'"), join);
		CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE fatal = 1 AND "
				  "detail LIKE 'stream 14 %%never joined back%%'"), join ? 0 : 3);
		tl_close(&t);
	}
	/* a side stream that is never forked */
	struct tl t;

	tl_open(&t, "rt_unforked.db");
	rt_fixture(&t, 3, 1, 14);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	/* no wait rows at all: the trace cannot tell, a runtime region is fatal */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 0);
	tl_close(&t);
}

/* In a runtime region a sync before the first launch is inside the capture. */
static void test_rt_edge_fatal(void)
{
	struct tl t;

	tl_open(&t, "rt_edge.db");
	rt_fixture(&t, 3, -1, 0);
	tl_api(&t, "cudaStreamSynchronize", 100000 + 500, 100, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'sync' AND fatal = 1 "
			  "AND position = 0 AND detail LIKE 'before node 0%%move the synchron%%'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 0);
	tl_close(&t);
}

static struct kp_plan *plan_notes(struct tl *t, int regions, struct kp_strbuf *notes)
{
	struct kp_planner_opts o;
	struct kp_err err = {0};
	struct kp_plan *p;

	kp_planner_opts_init(&o);
	o.cc_major = 9;
	o.cc_minor = 0;
	o.cuda_major = 13;
	o.regions = regions;
	o.min_gain = 0;
	o.notes = notes;
	p = kp_planner_run(t->db, &o, &err);
	if (!p)
		fprintf(stderr, "plan: %s\n", err.msg);
	return p;
}

static struct kp_plan *plan_of(struct tl *t, int regions)
{
	return plan_notes(t, regions, NULL);
}

/* A malloc in the first two occurrences only: warm-up covers it. */
static void test_rt_warmup_only(void)
{
	struct tl t;
	struct kp_plan *p;
	const struct kp_plan_region *r;

	tl_open(&t, "rt_warm.db");
	rt_fixture(&t, 8, -1, 0);
	tl_api(&t, "cudaMalloc", 2500, 100, 9998);
	tl_api(&t, "cudaMalloc", 100000 + 2500, 100, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'malloc' AND fatal = 2"), 2);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 1);
	p = plan_of(&t, KP_PLANNER_REGIONS_AUTO);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(r->warmup, 3);   /* calls 0, 1 eager, call 2 watched, 3 captured */
	kp_plan_free(p);
	tl_close(&t);

	/* in the last occurrences too: fatal, planned eager naming the call */
	tl_open(&t, "rt_warm_late.db");
	rt_fixture(&t, 8, -1, 0);
	tl_api(&t, "cudaMalloc", 2500, 100, 9998);
	tl_api(&t, "cudaMalloc", 700000 + 2500, 100, 9999);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'malloc' AND fatal = 1"), 2);
	p = plan_of(&t, KP_PLANNER_REGIONS_AUTO);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_EAGER);
	CU_ASSERT_EQUAL(r->reason, KP_PLAN_R_BLOCKER);
	CU_ASSERT_PTR_NOT_NULL(strstr(r->reason_text, "malloc x2 (cudaMalloc)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r->reason_text, "allocate once before the region"));
	kp_plan_free(p);
	tl_close(&t);
}

/* A kplan.torch region (category 2): blockers are advisories, the binding tries. */
static void test_rt_binding_advisory(void)
{
	struct tl t;
	struct kp_err err = {0};

	tl_open(&t, "rt_torch.db");
	rt_domain(&t);
	for (int k = 0; k < 3; k++) {
		int64_t T = (int64_t)k * 100000;
		struct kp_nvtx_rec n = { .start = T, .end = T + 50000,
					 .event_type = KP_NVTX_PUSHPOP, .text = "gpt2",
					 .global_tid = 1, .domain_id = 1, .category = 2 };

		CU_ASSERT_EQUAL(kp_writer_nvtx(&t.w, &n, &err), 0);
		for (int i = 0; i < 4; i++)
			tl_kernel(&t, EW, 13, T + 1000 * (i + 1), T + 10000 + 2000 * i, 1500);
		tl_api(&t, "cudaStreamSynchronize", T + 2500, 100, 9000 + k);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'gpt2' AND "
			  "source = 'runtime'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'sync' AND fatal = 0 "
			  "AND detail LIKE '%%advisory in a kplan.torch region%%'"), 3);
	tl_close(&t);
}

/* Plans hold runtime regions; the application's own ranges only on request. */
static void test_rt_plan_regions(void)
{
	struct tl t;
	struct kp_plan *p;
	struct kp_strbuf notes = KP_STRBUF_INIT;

	tl_open(&t, "rt_select.db");
	rt_fixture(&t, 6, -1, 0);
	for (int k = 0; k < 6; k++)
		tl_nvtx(&t, "Layer 0", (int64_t)k * 100000, (int64_t)k * 100000 + 20000);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE source = 'nvtx'"), 1);
	p = plan_of(&t, KP_PLANNER_REGIONS_AUTO);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->n_regions, 1);
	CU_ASSERT_PTR_NOT_NULL(kp_plan_find(p, "step"));
	CU_ASSERT_EQUAL(p->args_checked, 0);
	kp_plan_free(p);
	p = plan_of(&t, KP_PLANNER_REGIONS_ALL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->n_regions, 2);
	kp_plan_free(p);
	/* the notes say what was left out and that scalars were not checked */
	p = plan_notes(&t, KP_PLANNER_REGIONS_AUTO, &notes);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(notes.buf, "1 region(s) from the application's own"));
	CU_ASSERT_PTR_NOT_NULL(strstr(notes.buf, "scalars passed by value were not checked"));
	kp_plan_free(p);
	kp_strbuf_release(&notes);
	tl_close(&t);
}

/* A seed (8 bytes, small) and a learning rate (4 bytes) that change. */
static void test_scalar_slots(void)
{
	struct tl t;
	struct kp_err err = {0};
	struct kp_plan *p;
	const struct kp_plan_region *r;
	char sql[256];

	tl_open(&t, "scalar.db");
	rt_fixture(&t, 6, -1, 0);
	for (int k = 0; k < 6; k++) {
		tl_arg(&t, 1 + 4 * k, 0, 0x7f1000000000LL);      /* stable pointer */
		tl_arg(&t, 1 + 4 * k, 1, 1234 + k);              /* seed */
		snprintf(sql, sizeof(sql), "INSERT INTO kp_launch_args VALUES (%lld, %d, 2, 4, %d)",
			 (long long)t.run, 1 + 4 * k, 1065353216 - k * 1000);  /* lr */
		CU_ASSERT_EQUAL(kp_db_exec(t.db, sql, &err), 0);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT patch_slots FROM kp_regions WHERE label = 'step'"), 2);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'patch_slot' AND "
			  "detail LIKE '%%scalar changes in 5 of 5 occurrences: a replay would "
			  "reuse%%kp_rt_bind_value'"), 2);
	p = plan_of(&t, KP_PLANNER_REGIONS_AUTO);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->args_checked, 1);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL_FATAL(r->n_patches, 2);
	CU_ASSERT_EQUAL(r->patches[0].param, 1);
	CU_ASSERT_EQUAL(r->patches[0].offset, 8);
	CU_ASSERT_EQUAL(r->patches[0].scalar, 1);
	CU_ASSERT_EQUAL(r->patches[1].param, 2);
	CU_ASSERT_EQUAL(r->patches[1].offset, 16);
	CU_ASSERT_EQUAL(r->patches[1].size, 4);
	CU_ASSERT_EQUAL(r->patches[1].scalar, 1);
	kp_plan_free(p);
	tl_close(&t);
}

/* ---- PyTorch (Kineto) traces: region edges, blockers in the user's terms ---- */

enum { KJ_ITEM = 1, KJ_NONZERO = 2, KJ_INPUT = 4, KJ_DEEP = 8 };

/*
 * Five "step" annotations of 300 us, each with four kernels launched at
 * T+10, 20, 30, 40 (run at T+12, 22, 32, 42 for 8 us) under aten::add,
 * inside the user's frame train.py(42) (under train.py(100) <module>).
 * KJ_INPUT: first a pageable HtoD copy (call T+2..8, copy T+4..7) and a
 * stream sync (T+8.5..9.5) under aten::to > aten::_to_copy > aten::copy_.
 * KJ_NONZERO: a stream sync (T+26..28) under aten::nonzero, called from
 * torch's own frame, between kernels 1 and 2 (KJ_DEEP: through nn.Module's
 * _call_impl, in site-packages, and a model's forward with a long path).
 * KJ_ITEM: last, loss.item():
 * a pageable DtoH copy (call T+52..56, copy T+60..62) and a stream sync
 * (T+57..63) under aten::item > aten::_local_scalar_dense.
 */
static const char *kj_trace(const char *name, int flags)
{
	struct kj j = {0};

	kj_add(&j, "{\"traceEvents\": [\n");
	kj_x(&j, "python_function", "train.py(100): <module>", 0, 1e6);
	for (int k = 0; k < 5; k++) {
		double T = 1000 + 1000 * k;

		kj_x(&j, "user_annotation", "step", T, 300);
		kj_x(&j, "python_function", "train.py(42): train_step", T + 1, 298);
		if (flags & KJ_INPUT) {
			kj_x(&j, "cpu_op", "aten::to", T + 1.5, 9);
			kj_x(&j, "cpu_op", "aten::_to_copy", T + 1.6, 8.8);
			kj_x(&j, "cpu_op", "aten::copy_", T + 1.7, 8.5);
			kj_copy(&j, "Memcpy HtoD (Pageable -> Device)", T + 2, 6, T + 4, 3);
			kj_call(&j, "cudaStreamSynchronize", T + 8.5, 1);
		}
		for (int i = 0; i < 4; i++) {
			char kn[32];

			snprintf(kn, sizeof(kn), "elementwise_kernel_%d", i);
			kj_x(&j, "cpu_op", "aten::add", T + 9 + 10 * i, 6.5);
			kj_kernel(&j, kn, T + 10 + 10 * i, T + 12 + 10 * i, 8);
			if (i == 1 && (flags & KJ_DEEP)) {
				kj_x(&j, "python_function", "/usr/lib/python3/dist-packages/torch/nn/"
				     "modules/module.py(1501): _call_impl", T + 25.2, 4.2);
				kj_x(&j, "python_function", "nn.Module: Net_0", T + 25.3, 4);
				kj_x(&j, "python_function", "/home/someone/projects/a-rather-long-name/"
				     "src/models/model.py(17): forward", T + 25.4, 3.8);
			}
			if (i == 1 && (flags & (KJ_NONZERO | KJ_DEEP))) {
				kj_x(&j, "python_function", "torch/_tensor.py(900): nonzero", T + 25.6, 3.3);
				kj_x(&j, "cpu_op", "aten::nonzero", T + 25.8, 3);
				kj_call(&j, "cudaStreamSynchronize", T + 26, 2);
			}
		}
		if (flags & KJ_ITEM) {
			kj_x(&j, "cpu_op", "aten::item", T + 50, 30);
			kj_x(&j, "cpu_op", "aten::_local_scalar_dense", T + 51, 28);
			kj_copy(&j, "Memcpy DtoH (Device -> Pageable)", T + 52, 4, T + 60, 2);
			kj_call(&j, "cudaStreamSynchronize", T + 57, 6);
		}
	}
	return kj_write(&j, name);
}

/* Import the trace with flags into a new database and analyze it. */
static struct kp_db *kj_analyzed(const char *name, int flags)
{
	char trace[128];

	snprintf(trace, sizeof(trace), "%s.json", name);
	return kj_analyzed_from(kj_trace(trace, flags), name);
}

/* loss.item() at the step's end: left outside the graph, its cost added. */
static void test_edge_item(void)
{
	struct kp_db *plain = kj_analyzed("edge_plain", 0), *db = kj_analyzed("edge_item", KJ_ITEM);
	int64_t g0 = tl_dbq(plain, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'");
	int64_t g1 = tl_dbq(db, "SELECT graph_ns_pred FROM kp_regions WHERE label = 'step'");

	/* the body: the four kernels, no copy node, nothing fatal */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT nodes FROM kp_regions WHERE label = 'step'"), 4);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT kernels FROM kp_region_occurrences WHERE occIndex = 2"), 4);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE fatal != 0"), 0);
	/* the copy from the last kernel's end (T+50... the call at T+52) to the
	 * copy's end (T+62): 10 us; the sync past the copy's end: 1 us */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 11000);
	CU_ASSERT_EQUAL(tl_dbq(plain, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'pageable_copy'"
			    " AND fatal = 0 AND cost_ns = 10000 AND position = 4"
			    " AND cpu_op = 'aten::_local_scalar_dense' AND py_frame = 'train.py:42'"
			    " AND detail LIKE 'left outside the graph (after the body): cudaMemcpyAsync"
			    " DtoH (pageable) in aten::_local_scalar_dense (from aten::item,"
			    " train.py:42), 10.0 us in this occurrence; the region''s edges cost 11.0 us"
			    " per occurrence%%'"), 5);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'sync' AND fatal = 0"
			    " AND cost_ns = 1000 AND api_name = 'cudaStreamSynchronize'"
			    " AND detail LIKE 'left outside the graph (after the body): cudaStreamSynchronize"
			    " in aten::_local_scalar_dense (from aten::item, train.py:42), 1.0 us%%'"), 5);
	/* the prediction: the same body as without the copy, plus what the edge costs */
	CU_ASSERT_TRUE(g0 > 0);
	CU_ASSERT_TRUE(llabs(g1 - (g0 + 11000)) <= 500);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT eager_ns FROM kp_regions WHERE label = 'step'"), 300000);
	kp_db_close(plain);
	kp_db_close(db);
}

/* An input copied from pageable memory first: left outside too. */
static void test_edge_input(void)
{
	struct kp_db *db = kj_analyzed("edge_input", KJ_INPUT | KJ_ITEM);

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT nodes FROM kp_regions WHERE label = 'step'"), 4);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE fatal != 0"), 0);
	/* copy call T+2 .. T+8: 6 us; sync past the call's end: 1 us; plus loss.item()'s 11 us */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 18000);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'pageable_copy'"
			    " AND fatal = 0 AND position = 0 AND cost_ns = 6000 AND cpu_op = 'aten::copy_'"
			    " AND detail LIKE 'left outside the graph (before the body): cudaMemcpyAsync"
			    " HtoD (pageable) in aten::copy_ (from aten::to, train.py:42), 6.0 us%%'"), 5);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'sync' AND fatal = 0"
			    " AND position = 0 AND cost_ns = 1000"), 5);
	kp_db_close(db);
}

/* A sync in the middle still splits; named by aten::nonzero and the user's line. */
static void test_blk_nonzero(void)
{
	struct kp_db *db = kj_analyzed("blk_nonzero", KJ_NONZERO | KJ_ITEM);
	char sql[512];
	sqlite3_stmt *st;

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE label = 'step'"
			    " AND blockers = 'sync'"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE parentId = 1"
			    " AND label IN ('step[0:2]', 'step[2:4]') AND capturable = 1 AND nodes = 2"), 2);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE regionId = 1 AND fatal = 1"
			    " AND kind = 'sync' AND position = 2 AND cpu_op = 'aten::nonzero'"
			    " AND py_frame = 'train.py:42' AND cost_ns IS NULL"), 5);
	/* the end is still an edge: loss.item() does not split */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE regionId = 1 AND fatal = 0"
			    " AND kind IN ('sync', 'pageable_copy') AND position = 4"), 10);
	snprintf(sql, sizeof(sql), "SELECT detail FROM kp_blockers WHERE fatal = 1 AND occIndex = 0");
	CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(db->h, sql, -1, &st, NULL), SQLITE_OK);
	CU_ASSERT_EQUAL(sqlite3_step(st), SQLITE_ROW);
	CU_ASSERT_STRING_EQUAL((const char *)sqlite3_column_text(st, 0),
			       "cudaStreamSynchronize in aten::nonzero (train.py:42): between node 1"
			       " (elementwise_kernel_1) and node 2 (elementwise_kernel_2): splits the region;"
			       " PyTorch: nonzero (and boolean-mask indexing) sizes its output from the"
			       " data, so it reads the count on the host: torch.nonzero_static(x, size=n),"
			       " or keep the shape fixed with a mask (torch.where(mask, x, 0))");
	sqlite3_finalize(st);
	kp_db_close(db);
}

/* The user's frame is the innermost outside torch and installed packages. */
static void test_blk_user_frame(void)
{
	struct kp_db *db = kj_analyzed("blk_deep", KJ_DEEP);

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE fatal = 1 AND kind = 'sync'"
			    " AND cpu_op = 'aten::nonzero' AND py_frame = '.../models/model.py:17'"
			    " AND detail LIKE 'cudaStreamSynchronize in aten::nonzero"
			    " (.../models/model.py:17): between node 1 %%'"), 5);
	kp_db_close(db);
}

/* The bundled ResNet-18 step has no edges: it analyzes as before. */
static void test_edge_resnet_unchanged(void)
{
	const char *path = kp_test_path("r18e.db");
	struct kp_err err = {0};
	struct kp_db *db;

	CU_ASSERT_EQUAL_FATAL(import_resnet(path), 0);
	db = kp_db_open(path, 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL_FATAL(kp_analyze(db, NULL, NULL, &err), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT nodes * 1000 + kernels FROM kp_regions WHERE label = 'step'"),
			109102);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 1);
	/* its one row, the legacy-stream advisory, is not a call: no op named */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'legacy_stream'"
			    " AND cpu_op IS NULL AND cost_ns IS NULL"), 1);
	kp_db_close(db);
}

/* A runtime region is entered whole: a copy at its end stays fatal there. */
static void test_rt_edge_copy_fatal(void)
{
	struct tl t;
	struct kp_err err = {0};

	tl_open(&t, "rt_edge_copy.db");
	rt_fixture(&t, 3, -1, 0);
	for (int k = 0; k < 3; k++) {
		int64_t T = (int64_t)k * 100000;
		struct kp_memcpy_rec m = { .start = T + 20000, .end = T + 20500, .stream_id = 13,
					   .correlation_id = 800 + (uint32_t)k, .bytes = 4,
					   .copy_kind = 2, .src_kind = 3, .dst_kind = 1 };

		tl_api(&t, "cudaMemcpyAsync", T + 6000, 300, 800 + (uint32_t)k);
		CU_ASSERT_EQUAL(kp_writer_memcpy(&t.w, &m, &err), 0);
	}
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT nodes FROM kp_regions WHERE label = 'step'"), 5);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'pageable_copy'"
			  " AND fatal = 1 AND cost_ns IS NULL"), 3);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT capturable FROM kp_regions WHERE label = 'step'"), 0);
	tl_close(&t);
}

/* A version 2 database gains the v3 columns when opened for writing, and analyzes. */
static void test_blk_schema_v2(void)
{
	struct kp_err err = {0};
	struct kp_db *db = kj_analyzed("blk_v2", KJ_ITEM);

	CU_ASSERT_EQUAL(kp_db_exec(db, "ALTER TABLE kp_blockers DROP COLUMN cpu_op;"
				   "ALTER TABLE kp_blockers DROP COLUMN py_frame;"
				   "ALTER TABLE kp_blockers DROP COLUMN cost_ns;"
				   "ALTER TABLE kp_regions DROP COLUMN edge_ns;"
				   "PRAGMA user_version = 2", &err), 0);
	kp_db_close(db);
	db = kp_db_open(kp_test_path("blk_v2.db"), 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "PRAGMA user_version", -1), KP_DB_SCHEMA_VERSION);
	/* old rows read with the defaults */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE cpu_op IS NULL"),
			tl_dbq(db, "SELECT count(*) FROM kp_blockers"));
	CU_ASSERT_EQUAL(kp_analyze(db, NULL, NULL, &err), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT edge_ns FROM kp_regions WHERE label = 'step'"), 11000);
	kp_db_close(db);
}

CU_TestInfo kp_tests_analyzer[] = {
	{ "runtime region: legacy-stream launch is fatal", test_rt_legacy_fatal },
	{ "runtime region: side streams forked and joined", test_rt_side_stream },
	{ "runtime region: a sync before the first launch is fatal", test_rt_edge_fatal },
	{ "runtime region: blockers in warm-up only", test_rt_warmup_only },
	{ "plan: runtime regions only by default", test_rt_plan_regions },
	{ "kplan.torch region: blockers are advisories", test_rt_binding_advisory },
	{ "scalar arguments that change", test_scalar_slots },
	{ "blocker: synchronous memset", test_blocker_memset },
	{ "gaps: host-bound vs device-side", test_gaps },
	{ "gaps: largest kept under --gap-rows", test_gap_rows_cap },
	{ "regions from nvtx ranges", test_nvtx_region },
	{ "watch cost: whole recorded runs only", test_watch_cost_whole_runs },
	{ "blocker: device sync", test_blocker_sync },
	{ "blocker: driver stream sync", test_blocker_stream_sync },
	{ "blocker: blocking copy", test_blocker_copy },
	{ "blocker: malloc", test_blocker_malloc },
	{ "blocker: free", test_blocker_free },
	{ "blocker: stream callback", test_blocker_callback },
	{ "blocker: cross-stream event", test_blocker_event },
	{ "blocker: elapsed time, device limit, nested capture, host register",
	  test_blocker_watch_calls },
	{ "blocker: pageable copy", test_blocker_pageable },
	{ "event wait after a record inside: fork/join", test_fork_join },
	{ "not blockers: async alloc, other calls", test_not_blockers },
	{ "blocker at the edge does not split", test_blocker_edge },
	{ "legacy default stream advisory", test_legacy_stream },
	{ "shape keys", test_shape_keys },
	{ "patch slots", test_patch_slots },
	{ "fingerprint: mangled name, dynamic smem", test_fingerprint_mangled },
	{ "model: overlapping kernels count once", test_model_overlap },
	{ "model: programmatic dependent launch hides start-up (calibrated)", test_model_pdl },
	{ "model: forked streams run beside the region's, host nodes", test_cost_model_branches },
	{ "model: a host node per occurrence through the analysis", test_model_host_node },
	{ "mining: period, phase, occurrences", test_mine_period },
	{ "mining: region from a stream", test_mined_region },
	{ "selection and distributions", test_select },
	{ "fusion: feasibility and reasons", test_fusion },
	{ "fusion: dependence from args", test_fusion_args },
	{ "cost model arithmetic", test_cost_model },
	{ "cost model: gap per node class, floor", test_cost_model_classes },
	{ "GEMM library kernels by name", test_kernel_is_gemm },
	{ "cost model: node classes through the analysis", test_model_classes_in_analysis },
	{ "cost constants: names, store, load", test_cost_names_and_load },
	{ "cost constants: kplan-calibrate measures every quantity the table says",
	  test_cost_quantities_calibrate },
	{ "re-analyze is idempotent", test_idempotent },
	{ "missing run", test_no_run },
	{ "cli: resnet18 step region", test_resnet_step },
	{ "cli: resnet18 mined sequence", test_resnet_mined },
	{ "cli: usage errors", test_cli_usage },
	{ "edge: loss.item() at the end is left outside, its cost counted", test_edge_item },
	{ "edge: a pageable input copy at the start too", test_edge_input },
	{ "blocker: a sync in the middle splits, named by aten::nonzero and file:line",
	  test_blk_nonzero },
	{ "blocker: the user's frame, not torch's or a package's", test_blk_user_frame },
	{ "edge: resnet18 step unchanged", test_edge_resnet_unchanged },
	{ "runtime region: a copy at the end stays fatal", test_rt_edge_copy_fatal },
	{ "schema v2 database gains the v3 columns", test_blk_schema_v2 },
	CU_TEST_INFO_NULL,
};
