/*
 * test_ranks.c - jobs of several ranks: NCCL kernel names (common/nccl.h),
 * each rank's collectives matched across ranks with its wait and the
 * straggler (analyzer/ranks.c), a region around an all-reduce that a
 * watchdog thread polls (capturable, with what capture needs), and the
 * report showing both ranks.
 *
 * The job is written with kp_writer into a temporary database: two runs,
 * rank 0 and rank 1 of one launch, on one time base.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyzer/analyzer.h"
#include "analyzer/ranks.h"
#include "common/nccl.h"
#include "db/writer.h"
#include "plan/planfile.h"
#include "plan/predict.h"
#include "reports/report.h"
#include "testutil.h"
#include "timeline.h"

#define EW "void at::native::vectorized_elementwise_kernel<4, add>(int)"
#define AR "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
#define AG "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

/* Real NCCL kernel names, each NCCL generation's spelling, and what they say. */
static void test_nccl_names(void)
{
	static const struct { const char *name, *desc; } cases[] = {
		{ AR, "AllReduce sum f32 ring/ll" },
		{ "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE",
		  "AllReduce sum bf16 ring/ll" },
		{ "ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
		  "ReduceScatter sum bf16 nvls_tree/simple" },
		{ AG, "AllGather ring/ll" },
		{ "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "Broadcast ring/ll" },
		{ "ncclDevKernel_Reduce_Max_i32_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
		  "Reduce max i32 ring/ll128" },
		{ "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "SendRecv" },
		{ "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", "nccl" },
		{ "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
		  "AllGather sum i8 ring/ll" },
		{ "ncclKernel_AllReduce_COLLNET_DIRECT_LL128_PreMulSum___nv_bfloat16(ncclWorkElem)",
		  "AllReduce premulsum bf16 collnet_direct/ll128" },
		{ "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "SendRecv sum i8 ring/simple" },
		{ "ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)", "AllReduce sum f32 ring/ll" },
	};
	static const char *const not_nccl[] = {
		EW, "ampere_sgemm_128x64_nn", "void ncclish::vectorized_kernel<4>(int)", "",
	};
	struct kp_nccl_kernel k;
	char buf[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		CU_ASSERT_EQUAL(kp_nccl_parse(cases[i].name, &k), 1);
		CU_ASSERT_STRING_EQUAL(kp_nccl_desc(&k, buf, sizeof(buf)), cases[i].desc);
	}
	for (size_t i = 0; i < sizeof(not_nccl) / sizeof(*not_nccl); i++)
		CU_ASSERT_EQUAL(kp_nccl_parse(not_nccl[i], &k), 0);
	CU_ASSERT_EQUAL(kp_nccl_parse(NULL, NULL), 0);
	CU_ASSERT_STRING_EQUAL(kp_nccl_coll_name(KP_NCCL_REDUCESCATTER), "ReduceScatter");
	/* element sizes in PyTorch's spelling and NCCL's */
	CU_ASSERT_EQUAL(kp_nccl_dtype_bytes("BFloat16"), 2);
	CU_ASSERT_EQUAL(kp_nccl_dtype_bytes("Float"), 4);
	CU_ASSERT_EQUAL(kp_nccl_dtype_bytes("f64"), 8);
	CU_ASSERT_EQUAL(kp_nccl_dtype_bytes("Float8_e4m3fn"), 1);
	CU_ASSERT_EQUAL(kp_nccl_dtype_bytes("Quaternion"), 0);
	CU_ASSERT_EQUAL(kp_nccl_dtype_bytes(NULL), 0);
}

struct rk {
	struct kp_db *db;
	struct kp_writer w;
	int64_t run;
	uint32_t corr;
};

static void rk_begin(struct rk *r, struct kp_db *db, int rank, int world)
{
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "record", .device_name = "TestGPU", .driver_version = 580,
				  .host = "node1", .command = "python train.py", .has_rank = 1,
				  .rank = rank, .local_rank = rank, .world_size = world };

	memset(r, 0, sizeof(*r));
	r->db = db;
	CU_ASSERT_EQUAL_FATAL(kp_db_run_insert(db, &ri, &r->run, &err), 0);
	kp_writer_init(&r->w, db, r->run);
	CU_ASSERT_EQUAL_FATAL(kp_db_begin(db, &err), 0);
}

static void rk_api(struct rk *r, const char *name, int64_t start, uint32_t corr, int64_t tid)
{
	struct kp_err err = {0};
	struct kp_api_rec a = { .start = start, .end = start + 1000, .name = name,
				.correlation_id = corr, .global_tid = tid };

	CU_ASSERT_EQUAL(kp_writer_api(&r->w, &a, &err), 0);
}

static void rk_kernel(struct rk *r, const char *name, int64_t api, int64_t start, int64_t dur)
{
	struct kp_err err = {0};
	struct kp_kernel_rec k = {
		.start = start, .end = start + dur, .stream_id = 13, .correlation_id = ++r->corr,
		.name = name, .registers = 32, .grid = { 64, 1, 1 }, .block = { 256, 1, 1 },
	};

	rk_api(r, "cudaLaunchKernel", api, r->corr, 1);
	CU_ASSERT_EQUAL(kp_writer_kernel(&r->w, &k, &err), 0);
}

static void rk_end(struct rk *r)
{
	struct kp_err err = {0};

	CU_ASSERT_EQUAL(kp_db_commit(r->db, &err), 0);
	kp_writer_release(&r->w);
	CU_ASSERT_EQUAL(kp_db_run_finish(r->db, r->run, 0, NULL, "complete", &err), 0);
}

/*
 * One rank's four steps, each an NVTX range "step" at T = k * 100 us: an
 * elementwise kernel, an all-reduce arriving at T + 20 us + late, another
 * elementwise kernel. poll_tid: the thread of a cudaEventQuery in the
 * middle of each step (0: none).
 */
static void rank_steps_n(struct rk *r, int64_t late, int64_t poll_tid, int n_steps)
{
	struct kp_err err = {0};

	for (int k = 0; k < n_steps; k++) {
		int64_t T = (int64_t)k * 100000;
		struct kp_nvtx_rec n = { .start = T, .end = T + 60000, .event_type = KP_NVTX_PUSHPOP,
					 .text = "step", .global_tid = 1 };

		CU_ASSERT_EQUAL(kp_writer_nvtx(&r->w, &n, &err), 0);
		rk_kernel(r, EW, T + 1000, T + 10000, 5000);
		/* the all-reduce ends when the last rank has arrived */
		rk_kernel(r, AR, T + 3000, T + 20000 + late, late < 14000 ? 15000 - late : 1000);
		if (poll_tid)
			rk_api(r, "cudaEventQuery", T + 4000, 900000 + (uint32_t)k, poll_tid);
		rk_kernel(r, EW, T + 5000, T + 40000, 5000);
	}
}

/* Two ranks of n_steps steps; rank 1 arrives `late` ns late at every
 * all-reduce, rank 0 polls on thread poll_tid. */
static struct kp_db *two_ranks_n(const char *name, int64_t poll_tid, int64_t late, int n_steps)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path(name), KP_DB_CREATE, &err);
	struct rk r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	rk_begin(&r, db, 0, 2);
	rank_steps_n(&r, 0, poll_tid, n_steps);
	rk_end(&r);
	rk_begin(&r, db, 1, 2);
	rank_steps_n(&r, late, 0, n_steps);
	rk_end(&r);
	return db;
}

/* Two ranks; rank 1 arrives `late` ns late at every all-reduce. */
static struct kp_db *two_ranks_late(const char *name, int64_t poll_tid, int64_t late)
{
	return two_ranks_n(name, poll_tid, late, 4);
}

/* Two ranks; rank 1 arrives 5 us late at every all-reduce. */
static struct kp_db *two_ranks(const char *name, int64_t poll_tid)
{
	return two_ranks_late(name, poll_tid, 5000);
}

/*
 * Rank 1's all-reduce starts 20 us after rank 0's, which lasted 15 us: the
 * processes' clocks differ (or the kernel sat queued). A rank waits only
 * inside its kernel: rank 0's wait is its kernel's 15 us, not 20.
 */
static void test_wait_within_kernel(void)
{
	struct kp_err err = {0};
	struct kp_db *db = two_ranks_late("ranks_skew.db", 0, 20000);
	struct kp_job *job = NULL;

	CU_ASSERT_EQUAL_FATAL(kp_job_load(db, 0, &job, &err), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	CU_ASSERT_EQUAL(job->n_matches, 4);
	CU_ASSERT_EQUAL(job->ranks[0].colls[2].wait_ns, 15000);
	CU_ASSERT_EQUAL(job->ranks[0].wait_ns, 4 * 15000);
	CU_ASSERT(job->ranks[0].wait_ns <= job->ranks[0].coll_ns);
	CU_ASSERT_EQUAL(job->ranks[1].caused_ns, 4 * 15000);
	CU_ASSERT_EQUAL(job->straggler, 1);
	kp_job_free(job);
	kp_db_close(db);
}

static void test_waits_and_straggler(void)
{
	struct kp_err err = {0};
	struct kp_db *db = two_ranks("ranks.db", 0);
	struct kp_job *job = NULL;
	char *text;
	FILE *f;

	CU_ASSERT_EQUAL_FATAL(kp_job_load(db, 0, &job, &err), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	CU_ASSERT_EQUAL(job->n_ranks, 2);
	CU_ASSERT_EQUAL(job->world_size, 2);
	CU_ASSERT_EQUAL(job->n_matches, 4);
	CU_ASSERT_EQUAL(job->ranks[0].rank, 0);
	CU_ASSERT_EQUAL(job->ranks[0].n_coll, 4);
	CU_ASSERT_EQUAL(job->ranks[0].coll_ns, 4 * 15000);
	CU_ASSERT_EQUAL(job->ranks[1].coll_ns, 4 * 10000);
	/* rank 0 waits 5 us at each all-reduce for rank 1 */
	CU_ASSERT_EQUAL(job->ranks[0].wait_ns, 4 * 5000);
	CU_ASSERT_EQUAL(job->ranks[1].wait_ns, 0);
	CU_ASSERT_EQUAL(job->ranks[1].n_last, 4);
	CU_ASSERT_EQUAL(job->ranks[0].n_last, 0);
	CU_ASSERT_EQUAL(job->ranks[1].caused_ns, 4 * 5000);
	CU_ASSERT_EQUAL(job->straggler, 1);
	CU_ASSERT_EQUAL(job->ranks[0].colls[2].k.coll, KP_NCCL_ALLREDUCE);
	CU_ASSERT_EQUAL(job->ranks[0].colls[2].wait_ns, 5000);
	CU_ASSERT_EQUAL(job->ranks[0].colls[2].match, 2);
	CU_ASSERT_STRING_EQUAL(job->mismatch, "");
	/* the terminal's table and the CSV files */
	f = fopen(kp_test_path("ranks.txt"), "w");
	kp_job_print(job, f);
	fclose(f);
	text = kp_test_read(kp_test_path("ranks.txt"), NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "straggler: rank 1 arrived last at 4 of 4"));
	free(text);
	kp_test_sh("mkdir -p %s", kp_test_path("rcsv"));
	CU_ASSERT_EQUAL(kp_job_write_csv(job, kp_test_path("rcsv"), &err), 0);
	text = kp_test_read(kp_test_path("rcsv/ranks.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\n0,1,4,60.000,4,20.000,0,0.000,0\n"));
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\n1,2,4,40.000,4,0.000,4,20.000,1\n"));
	free(text);
	text = kp_test_read(kp_test_path("rcsv/collectives.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\n0,1,13,0,1,1,AllReduce,sum,f32,ring,ll,"
					      "unknown,unknown,120000,15.000,5.000,0\n"));
	free(text);
	kp_job_free(job);
	kp_db_close(db);
}

/* A rank's sequence that differs: matching stops there and says where. */
static void test_mismatch(void)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path("mismatch.db"), KP_DB_CREATE, &err);
	struct kp_job *job = NULL;
	struct rk r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	rk_begin(&r, db, 0, 2);
	rk_kernel(&r, AR, 0, 1000, 1000);
	rk_kernel(&r, AR, 10000, 11000, 1000);
	rk_end(&r);
	rk_begin(&r, db, 1, 2);
	rk_kernel(&r, AR, 0, 1500, 500);
	rk_kernel(&r, AG, 10000, 11000, 1000);
	rk_end(&r);
	CU_ASSERT_EQUAL_FATAL(kp_job_load(db, 0, &job, &err), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	CU_ASSERT_EQUAL(job->n_matches, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(job->mismatch, "collective 1: rank 0 runs AllReduce sum f32"
				      " ring/ll, rank 1 AllGather ring/ll"));
	CU_ASSERT_EQUAL(job->ranks[1].colls[1].match, -1);
	kp_job_free(job);
	/* a run that is no rank of a job has none */
	{
		struct kp_run_info ri = { .source = "synthetic" };
		int64_t run;

		CU_ASSERT_EQUAL(kp_db_run_insert(db, &ri, &run, &err), 0);
		CU_ASSERT_EQUAL(kp_job_load(db, run, &job, &err), 0);
		CU_ASSERT_PTR_NULL(job);
		/* an empty run without a rank (torchrun's agent) is not what a command
		 * naming no run means: the newest rank's run is */
		CU_ASSERT_EQUAL(run, 3);
		CU_ASSERT_EQUAL(kp_db_default_run(db), 2);
		ri.source = "synthetic";
		CU_ASSERT_EQUAL(kp_db_run_insert(db, &ri, &run, &err), 0);
		CU_ASSERT_EQUAL(kp_db_exec(db, "INSERT INTO StringIds VALUES (990, 'k');"
					   " INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId,"
					   " streamId, demangledName, shortName, gridX, gridY, gridZ, blockX,"
					   " blockY, blockZ, runId) VALUES (1, 2, 0, 7, 990, 990, 1, 1, 1, 1,"
					   " 1, 1, 4)", &err), 0);
		CU_ASSERT_EQUAL(kp_db_default_run(db), 4);   /* a run of its own */
	}
	kp_db_close(db);
}

/*
 * A step around an all-reduce is capturable: the collective is a node, and
 * a watchdog thread polling its event is no sync of the launching thread.
 * The same poll on the launching thread is.
 */
static void test_region_with_allreduce(void)
{
	struct kp_err err = {0};
	struct kp_analyze_opts o;
	struct kp_analysis_summary s;
	struct kp_db *db = two_ranks("ranks_region.db", 2);

	kp_analyze_opts_init(&o);
	o.run_id = 1;
	CU_ASSERT_EQUAL_FATAL(kp_analyze(db, &o, &s, &err), 0);
	CU_ASSERT_EQUAL(s.n_collectives, 4);
	CU_ASSERT_EQUAL(s.n_other_polls, 4);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT capturable FROM kp_regions WHERE runId = 1 AND label = 'step'"),
			1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE runId = 1 AND fatal > 0"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE runId = 1 AND kind ="
			       " 'collective' AND fatal = 0 AND detail LIKE '%%AllReduce x1%%NCCL >= 2.9%%'"),
			1);
	/* no fusion chain runs through the collective */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_fusion_candidates WHERE runId = 1"
			       " AND kernel_names LIKE '%%nccl%%'"), 0);
	kp_db_close(db);

	db = two_ranks("ranks_region_sync.db", 1);
	CU_ASSERT_EQUAL_FATAL(kp_analyze(db, &o, &s, &err), 0);
	CU_ASSERT_EQUAL(s.n_other_polls, 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE runId = 1 AND fatal = 1"
			       " AND kind = 'sync' AND api_name = 'cudaEventQuery'"), 4);
	kp_db_close(db);
}

/* The report of a rank shows every rank of its job on one time axis. */
static void test_report_ranks(void)
{
	struct kp_err err = {0};
	struct kp_db *db = two_ranks("ranks_report.db", 2);
	struct kp_report *rep = NULL;
	const char *out = kp_test_path("ranks.html");
	char *html, *csv;
	FILE *f;

	CU_ASSERT_EQUAL_FATAL(kp_report_load(db, NULL, &rep, &err), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rep->job);
	f = fopen(out, "w");
	CU_ASSERT_EQUAL(kp_report_html(rep, f, &err), 0);
	fclose(f);
	html = kp_test_read(out, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<h2 id=\"ranks\">"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<svg id=\"ranks-timeline\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<g class=\"rank\" data-rank=\"0\">"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<g class=\"rank\" data-rank=\"1\">"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "rank 1 (straggler)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "The straggler is <b>rank 1</b>"));
	/* the main timeline: a lane group per rank, on one axis */
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "name:\"rank 0 stream 13\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "name:\"rank 1 stream 13\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "This run is rank 1 of a job of 2 ranks"));
	CU_ASSERT(strstr(html, "name:\"rank 0 stream 13\"") < strstr(html, "name:\"rank 1 stream 13\""));
	free(html);
	CU_ASSERT_EQUAL(kp_report_csv(db, rep, kp_test_path("ranks_csv"), &err), 0);
	csv = kp_test_read(kp_test_path("ranks_csv/ranks.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL(csv && strstr(csv, "\n1,2,4,40.000,4,0.000,4,20.000,1\n"));
	free(csv);
	kp_report_free(rep);
	kp_db_close(db);
}


/*
 * Two ranks' PyTorch profiler traces imported into one database: the runs
 * know their ranks (distributedInfo, before or after traceEvents), each
 * NCCL kernel its collective's bytes and process group (on the kernel's own
 * event, or on the record_param_comms op of the same External id), and the
 * ranks' times meet on one clock (baseTimeNanoseconds): rank 1 started its
 * process 500 us earlier, so its raw times are 500 us later.
 */
static void test_import_two_ranks(void)
{
	const char *db_path = kp_test_path("imported_ranks.db");
	char *r0 = strdup(kp_test_src("tests/fixtures/ranks/rank0.json"));
	char *r1 = strdup(kp_test_src("tests/fixtures/ranks/rank1.json"));
	const char *out = kp_test_path("imported_ranks.txt");
	struct kp_err err = {0};
	struct kp_job *job = NULL;
	struct kp_db *db;
	char *text;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import '%s' -o '%s' >/dev/null && %s import '%s' -o '%s'"
					 " >/dev/null", kp_test_kplan(), r0, db_path, kp_test_kplan(),
					 r1, db_path), 0);
	free(r0);
	free(r1);
	db = kp_db_open(db_path, 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM kp_runs WHERE rank IS NOT NULL"
				  " AND world_size = 2", -1), 2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM kp_collectives", -1), 4);
	/* the all-reduce's kernel carries no metadata: tied by External id */
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT bytes FROM kp_collectives WHERE runId = 1"
				  " AND streamId = 20", -1), 1048576 * 4);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT bytes FROM kp_collectives WHERE runId = 2"
				  " AND streamId = 21", -1), 1024 * 2);
	CU_ASSERT_EQUAL(kp_job_load(db, 0, &job, &err), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	CU_ASSERT_EQUAL(job->n_matches, 2);
	CU_ASSERT_EQUAL(job->ranks[0].bytes, 1048576 * 4 + 2048);
	CU_ASSERT_EQUAL(job->ranks[1].n_bytes, 2);
	CU_ASSERT_STRING_EQUAL(job->ranks[0].colls[0].comm, "0");
	/* on the shared clock rank 1 reached the all-reduce 20 us before rank 0 */
	CU_ASSERT_EQUAL(job->ranks[1].colls[0].wait_ns, 20000);
	CU_ASSERT_EQUAL(job->straggler, 0);
	CU_ASSERT_STRING_EQUAL(job->comms, "0 (default_pg, 2 ranks), 1 (tp, 2 ranks)");
	kp_job_free(job);
	kp_db_close(db);
	/* the job table says it */
	CU_ASSERT_EQUAL(kp_test_sh("%s analyze '%s' --csv '%s' > '%s' 2>&1", kp_test_kplan(), db_path,
				   kp_test_path("imported_csv"), out), 0);
	text = kp_test_read(out, NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "bytes moved: rank 0 4.196 MB in 2 of 2 collectives;"
					      " rank 1 4.196 MB in 2 of 2 collectives; communicators:"
					      " 0 (default_pg, 2 ranks), 1 (tp, 2 ranks)"));
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "straggler: rank 0 "));
	free(text);
	text = kp_test_read(kp_test_path("imported_csv/collectives.csv"), NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\n1,2,20,0,0,0,AllReduce,sum,f32,ring,ll,4194304,0,"
					      "1700000000000110000,75.000,20.000,0\n"));
	free(text);
	/* the report of rank 1 draws rank 0's all-reduce on rank 1's clock: 500 us
	 * later than rank 0's raw time, 20 us after rank 1's own */
	{
		struct kp_report *rep = NULL;
		int64_t s0 = -1, s1 = -1;

		db = kp_db_open(db_path, KP_DB_RDONLY, &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(db);
		CU_ASSERT_EQUAL_FATAL(kp_report_load(db, NULL, &rep, &err), 0);
		for (size_t i = 0; i < rep->tl.rows.len; i++) {
			const struct kp_tl_row *row = &rep->tl.rows.data[i];

			if (row->kind != KP_TL_ROW_STREAM || row->stream_id != 20 || !row->items.len)
				continue;
			if (row->rank == 0)
				s0 = row->items.data[0].start;
			else
				s1 = row->items.data[0].start;
		}
		CU_ASSERT_EQUAL(s0, 630000);
		CU_ASSERT_EQUAL(s1, 610000);
		kp_report_free(rep);
		kp_db_close(db);
	}
	/* export --chrome writes them back as Kineto does: the same rows again */
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s export '%s' --chrome '%s' --run 2 >/dev/null 2>&1 && %s import"
					 " '%s' -o '%s' >/dev/null", kp_test_kplan(), db_path,
					 kp_test_path("rank1_again.json"), kp_test_kplan(),
					 kp_test_path("rank1_again.json"), kp_test_path("again.db")), 0);
	db = kp_db_open(kp_test_path("again.db"), 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT rank * 10 + world_size FROM kp_runs", -1), 12);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT clock_base_ns FROM kp_runs", -1),
			INT64_C(1699999999999500000));
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM kp_collectives WHERE (streamId, start,"
				  " name, dtype, in_nelems, out_nelems, bytes, pg_name, pg_desc, group_size,"
				  " group_ranks, seq) IN (VALUES (20, 610000, 'allreduce', 'Float', 1048576,"
				  " 1048576, 4194304, '0', 'default_pg', 2, '[0, 1]', 1), (21, 830000,"
				  " '_allgather_base', 'BFloat16', 512, 1024, 2048, '1', 'tp', 2, '[0, 1]', 1))",
				  -1), 2);
	kp_db_close(db);
}

/* An empty run without a rank, as torchrun's agent records after its ranks. */
static void add_launcher_run(struct kp_db *db)
{
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "record", .command = "torchrun --nproc_per_node 2 x.py",
				  .host = "node1" };
	int64_t run;

	CU_ASSERT_EQUAL(kp_db_run_insert(db, &ri, &run, &err), 0);
	CU_ASSERT_EQUAL(kp_db_run_finish(db, run, 0, NULL, "complete", &err), 0);
}

/*
 * `kplan plan` naming no run plans the newest rank's run, as analyze and
 * report do, not the launcher's empty run recorded after it.
 */
static void test_plan_default_run(void)
{
	const char *path = kp_test_path("ranks_plan_default.db");
	const char *plan_path = kp_test_path("ranks_default.kplan");
	struct kp_err err = {0};
	struct kp_db *db = two_ranks("ranks_plan_default.db", 2);
	struct kp_plan *plan;

	add_launcher_run(db);
	CU_ASSERT_EQUAL(kp_db_last_run(db), 3);
	CU_ASSERT_EQUAL(kp_db_default_run(db), 2);
	kp_db_close(db);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s plan '%s' -o '%s' --cc 9.0 --cuda-major 12 >/dev/null 2>&1",
					 kp_test_kplan(), path, plan_path), 0);
	plan = kp_plan_load(plan_path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	CU_ASSERT_EQUAL(plan->source_run, 2);
	CU_ASSERT_PTR_NOT_NULL(kp_plan_find(plan, "step"));
	kp_plan_free(plan);
}

/* Plan the database at name (rank 1's run by default) into a plan file. */
static struct kp_plan *plan_job(const char *name, const char *plan_name, char **out)
{
	struct kp_err err = {0};
	const char *log = kp_test_path("ranks_plan.txt");
	struct kp_plan *plan;

	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o '%s' --cc 9.0 --cuda-major 12 > '%s' 2>&1",
				   kp_test_kplan(), kp_test_path(name), kp_test_path(plan_name), log), 0);
	*out = kp_test_read(log, NULL);
	plan = kp_plan_load(kp_test_path(plan_name), &err);
	if (!plan)
		fprintf(stderr, "%s\n%s\n", err.msg, *out ? *out : "");
	return plan;
}

/*
 * A plan that holds for every rank: ranks that run the same step plan it
 * as one section; when rank 0 syncs inside the step (a cudaEventQuery on
 * its launching thread) and rank 1 does not, rank 1 alone would replay a
 * graph around an all-reduce that rank 0 runs eagerly: the step is eager
 * on both, ranks-differ (format version 4).
 */
static void test_plan_every_rank(void)
{
	struct kp_db *db;
	struct kp_plan *plan;
	const struct kp_plan_region *r;
	char *log, *text;

	/* the same step on both ranks: one graph section for both */
	/* enough steps that a graph pays for its capture */
	db = two_ranks_n("ranks_plan_same.db", 2, 5000, 1000);
	add_launcher_run(db);
	kp_db_close(db);
	plan = plan_job("ranks_plan_same.db", "same.kplan", &log);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	CU_ASSERT_PTR_NOT_NULL(log && strstr(log, "the plan holds for the 2 ranks of the job (runs 1, 2):"
					     " 1 region(s) agree on every rank, 0 differ"));
	/* kplan plan analyzed rank 0 as well as the asked rank 1 */
	CU_ASSERT_PTR_NOT_NULL(log && strstr(log, "analyzing it first (as 'kplan analyze"));
	CU_ASSERT_PTR_NOT_NULL(log && strstr(log, "--run 1')"));
	r = kp_plan_find(plan, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(plan->format_version, KP_PLAN_FORMAT_BASE);
	kp_plan_free(plan);
	free(log);
	text = kp_test_read(kp_test_path("same.kplan"), NULL);
	CU_ASSERT_PTR_NOT_NULL(text && !strncmp(text, "kplan-plan 2\n", 13));
	free(text);
	/* for a run 3x the recorded one: the job's prediction counts 3x the calls */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length 3 -o '%s' --cc 9.0 "
				   "--cuda-major 12 >/dev/null 2>&1", kp_test_kplan(),
				   kp_test_path("ranks_plan_same.db"), kp_test_path("same3.kplan")), 0);
	{
		struct kp_err err = {0};

		plan = kp_plan_load(kp_test_path("same3.kplan"), &err);
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	r = kp_plan_find(plan, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT(r->occurrences > 0);
	CU_ASSERT_EQUAL(plan->run_pred_ns, plan->run_eager_ns -
			kp_plan_saving_ns(kp_plan_scaled_occ(r->occurrences, 3.0), r->warmup,
					  r->eager_ns, r->graph_ns, r->one_time_ns));
	CU_ASSERT(kp_plan_scaled_occ(r->occurrences, 3.0) == 3 * (int64_t)r->occurrences);
	kp_plan_free(plan);

	/* rank 0 blocks inside the step: eager on every rank */
	db = two_ranks_n("ranks_plan_differ.db", 1, 5000, 1000);
	kp_db_close(db);
	plan = plan_job("ranks_plan_differ.db", "differ.kplan", &log);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	CU_ASSERT_EQUAL(plan->source_run, 2);
	r = kp_plan_find(plan, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_EAGER);
	CU_ASSERT_EQUAL(r->reason, KP_PLAN_R_RANKS_DIFFER);
	CU_ASSERT_EQUAL(r->warmup, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(r->reason_text, "ranks differ: rank 0 (run 1) plans it split"
				      " (blocker); every rank runs it eagerly"));
	CU_ASSERT_EQUAL(plan->format_version, 4);
	CU_ASSERT_PTR_NOT_NULL(log && strstr(log, "0 region(s) agree on every rank, 1 differ"));
	CU_ASSERT_EQUAL(plan->speedup_pred, 1.0);
	kp_plan_free(plan);
	free(log);
	text = kp_test_read(kp_test_path("differ.kplan"), NULL);
	CU_ASSERT_PTR_NOT_NULL(text && !strncmp(text, "kplan-plan 4\n", 13));
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\nreason ranks-differ\n"));
	free(text);
}

/* All-reduces of other sizes do not match, where the trace gives sizes. */
static void test_mismatch_bytes(void)
{
	struct kp_err err = {0};
	struct kp_db *db = two_ranks("mismatch_bytes.db", 2);
	struct kp_job *job = NULL;

	/* 4 KB each, but rank 1's third all-reduce moves 8 KB */
	CU_ASSERT_EQUAL(kp_db_exec(db, "INSERT INTO kp_collectives (runId, streamId, start, bytes,"
				   " pg_name) SELECT runId, streamId, start, CASE WHEN runId = 2 AND"
				   " start = 225000 THEN 8192 ELSE 4096 END, '0'"
				   " FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName IN (SELECT id"
				   " FROM StringIds WHERE value LIKE 'ncclDevKernel%')", &err), 0);
	CU_ASSERT_EQUAL_FATAL(kp_job_load(db, 0, &job, &err), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	CU_ASSERT_EQUAL(job->n_matches, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(job->mismatch, "collective 2: rank 0 runs AllReduce sum f32"
				      " ring/ll, 4096 bytes on communicator 0, rank 1 AllReduce sum f32"
				      " ring/ll, 8192 bytes on communicator 0"));
	CU_ASSERT_EQUAL(job->ranks[0].bytes, 4 * 4096);
	kp_job_free(job);
	kp_db_close(db);
}

CU_TestInfo kp_tests_ranks[] = {
	{ "NCCL kernel names", test_nccl_names },
	{ "two ranks: waits and the straggler", test_waits_and_straggler },
	{ "a rank waits only inside its own kernel", test_wait_within_kernel },
	{ "ranks whose collectives differ", test_mismatch },
	{ "ranks whose collectives differ in size", test_mismatch_bytes },
	{ "a region around an all-reduce is capturable", test_region_with_allreduce },
	{ "the report shows every rank", test_report_ranks },
	{ "two imported ranks: bytes, communicators, one clock", test_import_two_ranks },
	{ "plan names no run: the newest rank's, not the launcher's", test_plan_default_run },
	{ "a plan that holds for every rank", test_plan_every_rank },
	CU_TEST_INFO_NULL,
};
