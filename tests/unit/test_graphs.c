/*
 * test_graphs.c - analyzer/graphs.c: programs that replay CUDA graphs of
 * their own. A synthetic solver loop (the shape of CUDA's
 * conjugateGradientCudaGraphs sample): each iteration launches a captured
 * graph (four kernels and a DtoH copy node into host memory), synchronises,
 * and launches one kernel eagerly before the next replay.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyzer/analyzer.h"
#include "db/writer.h"
#include "testutil.h"
#include "timeline.h"

#define ITERS 6
#define GRAPH_ID 42
#define STREAM 13
#define DOT "void dot_kernel<float, 128, 0, cublasDotParams<float>>(float)"
#define AXPY "void axpy_kernel_val<float, float>(cublasAxpyParamsVal<float>)"
#define SPMV "void cusparse::csrmv_v3_kernel<int, float>(float)"
#define CHECK "void check_converged(float *)"

enum { G_NO_IDS = 1, G_RANGES = 2, G_DRIVER_ROWS = 4 };

/*
 * Iteration k at T = 100 us + 50 us k: cudaGraphLaunch at T (5 us); the
 * graph runs SPMV, DOT, AXPY, DOT at T+6, +10, +14, +18 (3 us each) and a
 * 4-byte DtoH copy node into pageable memory at T+22 (1 us); the host
 * waits in cudaStreamSynchronize (T+6 .. T+24), then launches CHECK at
 * T+30 (runs T+31 for 2 us). G_NO_IDS: the trace has no graph ids (only
 * the launch call tells); G_RANGES: an NVTX range "iter" brackets each
 * cudaGraphLaunch; G_DRIVER_ROWS: every launch also has a driver row
 * under the same correlation id.
 */
static void solver_loop(struct tl *t, int flags)
{
	static const char *const nodes[] = { SPMV, DOT, AXPY, DOT };
	struct kp_err err = {0};

	for (int k = 0; k < ITERS; k++) {
		int64_t T = 100000 + 50000 * k;
		uint32_t c = ++t->corr;

		if (flags & G_RANGES)
			tl_nvtx(t, "iter", T - 100, T + 5100);
		tl_api(t, "cudaGraphLaunch_v10000", T, 5000, c);
		if (flags & G_DRIVER_ROWS)
			tl_api(t, "cuGraphLaunch", T + 100, 4800, c);
		for (int i = 0; i < 4; i++) {
			struct kp_kernel_rec r = {
				.start = T + 6000 + 4000 * i, .end = T + 9000 + 4000 * i,
				.stream_id = STREAM, .correlation_id = c, .name = nodes[i],
				.registers = 32, .grid = { 64, 1, 1 }, .block = { 128, 1, 1 },
				.graph_node_id = (flags & G_NO_IDS) ? 0 : 1000 + i,
				.graph_id = (flags & G_NO_IDS) ? 0 : GRAPH_ID,
			};
			CU_ASSERT_EQUAL(kp_writer_kernel(&t->w, &r, &err), 0);
		}
		struct kp_memcpy_rec m = {
			.start = T + 22000, .end = T + 23000, .stream_id = STREAM,
			.correlation_id = c, .bytes = 4, .copy_kind = 2, .src_kind = 3,
			.dst_kind = 1, .graph_node_id = (flags & G_NO_IDS) ? 0 : 1004,
		};
		CU_ASSERT_EQUAL(kp_writer_memcpy(&t->w, &m, &err), 0);
		tl_api(t, "cudaStreamSynchronize", T + 6000, 18000, 90000 + k);
		uint32_t e = tl_kernel(t, CHECK, STREAM, T + 30000, T + 31000, 2000);
		if (flags & G_DRIVER_ROWS)
			tl_api(t, "cuLaunchKernel", T + 30100, 800, e);
	}
}

static void analyzed(struct tl *t, const char *name, int flags, struct kp_analysis_summary *s)
{
	tl_open(t, name);
	solver_loop(t, flags);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(t, NULL, s), 0);
}

/* One region per graph, its replays the occurrences; no prediction. */
static void test_graph_region(void)
{
	struct kp_analysis_summary s;
	struct tl t;

	analyzed(&t, "graphs.db", 0, &s);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE source = 'graph'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE label = 'graph:42'"
			     " AND occurrences = %d AND nodes = 5 AND kernels = 4 AND streamId = %d"
			     " AND graph_ns_pred IS NULL AND speedup_pred IS NULL AND capturable = 1",
			     ITERS, STREAM), 1);
	/* a replay: first node start to the copy node's end */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT eager_ns FROM kp_regions WHERE label = 'graph:42'"), 17000);
	/* the copy node is the graph's: never a pageable_copy blocker or an edge */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'pageable_copy'"), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE api_name LIKE"
			     " 'cudaGraphLaunch%%' AND kind != 'graph_replay'"), 0);
	/* graph-launched kernels are never mined into a region to graph again */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE source != 'graph'"
			     " AND nodes >= 4"), 0);
	/* nor are the eager launches between replays: they are the graph's finding */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE graph_ns_pred IS NOT NULL"), 0);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions"), 1);
	tl_close(&t);
}

/* What runs between replays is the finding, costed by the GPU's idle time. */
static void test_graph_between_replays(void)
{
	struct tl t;

	analyzed(&t, "graphs_between.db", 0, NULL);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers b JOIN kp_regions r"
			     " ON r.regionId = b.regionId WHERE r.label = 'graph:42'"), 1);
	/* copy node ends T+23, CHECK runs T+31..33, next replay starts T+56:
	 * 33 us between the replays, 2 of them busy */
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT cost_ns FROM kp_blockers WHERE kind = 'graph_replay'"
			     " AND fatal = 0 AND api_name = 'cudaGraphLaunch_v10000'"), 31000);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE detail = '%s'",
			       "the program replays this graph itself (cudaGraphLaunch): 6 replays of 5"
			       " nodes, 17.0 us each on the GPU, one every 50.0 us (median, launch to"
			       " launch); no re-graphing predicted. Between replays the GPU idles 31.0 us"
			       " (5 of 5 replays waited for the host), the host launches 1 op eagerly,"
			       " and calls cudaStreamSynchronize x5: the sync after each replay waits"
			       " for it and the next launch waits for the host; test the result every"
			       " few replays, or keep the loop''s test on the GPU (a conditional node,"
			       " CUDA 12.4); that time is what is left to gain"), 1);
	tl_close(&t);
}

/* Launch calls counted once each: graph launches and runtime + driver rows. */
static void test_graph_launch_counts(void)
{
	struct kp_analysis_summary s;
	struct tl t;

	analyzed(&t, "graphs_counts.db", G_DRIVER_ROWS, &s);
	CU_ASSERT_EQUAL(s.n_ops, ITERS * 6);
	CU_ASSERT_EQUAL(s.n_launch_calls, 2 * ITERS);
	CU_ASSERT_EQUAL(s.n_joined, 2 * ITERS);
	CU_ASSERT_TRUE(s.n_joined <= s.n_launch_calls);
	CU_ASSERT_EQUAL(s.n_graph_launches, ITERS);
	CU_ASSERT_EQUAL(s.n_graph_ops, ITERS * 5);
	tl_close(&t);
}

/* Without graph ids the launch call says it: one region per node sequence. */
static void test_graph_no_ids(void)
{
	struct kp_analysis_summary s;
	struct tl t;

	analyzed(&t, "graphs_noid.db", G_NO_IDS, &s);
	CU_ASSERT_EQUAL(s.n_graph_ops, ITERS * 5);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE source = 'graph'"
			     " AND label = 'graph:c1' AND occurrences = %d AND nodes = 5"
			     " AND graph_ns_pred IS NULL", ITERS), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE kind = 'pageable_copy'"), 0);
	tl_close(&t);
}

/* A range around each graph launch: a graph already, no prediction. */
static void test_graph_in_range(void)
{
	struct tl t;

	analyzed(&t, "graphs_range.db", G_RANGES, NULL);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_regions WHERE label = 'iter'"
			     " AND nodes = 5 AND graph_ns_pred IS NULL"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers b JOIN kp_regions r"
			     " ON r.regionId = b.regionId WHERE r.label = 'iter'"
			     " AND b.kind = 'graph_replay' AND b.fatal = 0"
			     " AND b.detail LIKE 'its 5 nodes run from the program''s own graph"
			     " launches%%'"), 1);
	CU_ASSERT_EQUAL(tl_q(&t, "SELECT count(*) FROM kp_blockers WHERE fatal != 0"), 0);
	tl_close(&t);
}

/* kplan analyze says how many ops the program's graphs ran; kplan plan keeps them eager. */
static void test_graph_cli(void)
{
	struct tl t;
	const char *out = kp_test_path("graphs_cli.txt");
	char *text;
	size_t len;

	tl_open(&t, "graphs_cli.db");
	solver_loop(&t, G_DRIVER_ROWS);
	CU_ASSERT_EQUAL_FATAL(tl_analyze(&t, NULL, NULL), 0);   /* commits the trace */
	tl_close(&t);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s analyze %s > %s 2>&1", kp_test_kplan(),
					 kp_test_path("graphs_cli.db"), out), 0);
	text = kp_test_read(out, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "12 of 12 launch calls joined"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "30 of the ops ran from the program's own CUDA graphs"
				      " (6 graph launches)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "already a graph: graph_replay"));
	free(text);
	/* the planner keeps it eager, and says why */
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s plan --cc 9.0 --cuda-major 12 --regions all -o %s %s"
					 " > /dev/null 2>&1", kp_test_kplan(),
					 kp_test_path("graphs_cli.kplan"),
					 kp_test_path("graphs_cli.db")), 0);
	text = kp_test_read(kp_test_path("graphs_cli.kplan"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "[region graph:42]\ndecision eager\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "reason-text a graph already: the program replays it"
				      " itself (cudaGraphLaunch), 17.00 us per replay"));
	free(text);
}

/*
 * A PyTorch profile of a step replayed with torch.cuda.graph: each
 * g.replay() is one cudaGraphLaunch whose three kernels carry its
 * correlation id (Kineto writes no graph ids here), then loss.item()'s
 * copy and sync between replays.
 */
static void test_graph_torch_replay(void)
{
	struct kj j = {0};
	struct kp_db *db;

	kj_add(&j, "{\"traceEvents\": [\n");
	kj_x(&j, "python_function", "train.py(100): <module>", 0, 1e6);
	for (int k = 0; k < ITERS; k++) {
		double T = 1000 + 100 * k;
		int c = kj_call(&j, "cudaGraphLaunch", T, 8);

		for (int i = 0; i < 3; i++)
			kj_add(&j, ",{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k%d\", \"pid\": 0,"
			       " \"tid\": 7, \"ts\": %.3f, \"dur\": 5, \"args\": {\"device\": 0,"
			       " \"stream\": 7, \"correlation\": %d, \"grid\": [64, 1, 1],"
			       " \"block\": [256, 1, 1]}}\n", i, T + 10 + 6 * i, c);
		kj_x(&j, "cpu_op", "aten::item", T + 39, 7);
		kj_copy(&j, "Memcpy DtoH (Device -> Pageable)", T + 40, 2, T + 41, 1);
		kj_call(&j, "cudaStreamSynchronize", T + 43, 2);
	}
	db = kj_analyzed_from(kj_write(&j, "graphs_torch.json"), "graphs_torch");
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE source = 'graph'"
			       " AND label = 'graph:c1' AND occurrences = %d AND nodes = 3"
			       " AND eager_ns = 17000 AND graph_ns_pred IS NULL", ITERS), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE source != 'graph'"
			       " AND nodes >= 3"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'graph_replay'"
			       " AND detail LIKE '%%, and calls cudaMemcpyAsync x5, cudaStreamSynchronize x5:"
			       " the sync after each replay waits for it and the next launch waits for the"
			       " host; read the results (.item(), .cpu()) every few replays, not after"
			       " each g.replay(); that time is what is left to gain'"), 1);
	kp_db_close(db);
}

CU_TestInfo kp_tests_graphs[] = {
	{ "PyTorch profile of torch.cuda.graph replays", test_graph_torch_replay },
	{ "a graph the program launches: one region, its replays, no prediction",
	  test_graph_region },
	{ "between replays: idle, eager launches, syncs", test_graph_between_replays },
	{ "launch calls counted once", test_graph_launch_counts },
	{ "graph launches without graph ids", test_graph_no_ids },
	{ "a range around a graph launch: no re-graphing", test_graph_in_range },
	{ "cli: graph ops in the summary, the plan keeps the graph eager", test_graph_cli },
	CU_TEST_INFO_NULL,
};
