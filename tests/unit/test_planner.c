/*
 * test_planner.c - planner/: the planner's decisions on a fixture database,
 * the golden plan, kp_plans bookkeeping, `kplan plan` on the bundled trace.
 * (The plan file itself: test_plan.c.)
 *
 * Golden files: tests/golden/<name>.kplan; KPLAN_UPDATE_GOLDEN=1 rewrites
 * them from the current output (review the diff before committing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "common/hash.h"
#include "common/strbuf.h"
#include "db/db.h"
#include "plan/planfile.h"
#include "planner/planner.h"
#include "testutil.h"

/* ---------------------------------------------------------------------- */
/* the planner on a fixture database */

static const char fixture_sql[] =
	"INSERT INTO kp_runs (runId, created_ns, source, device_name, compute_major, compute_minor, "
	"  sm_count, driver_version, runtime_version, kplan_version, t_begin_ns, t_end_ns) VALUES "
	"  (1, 1790000000000000000, 'synthetic', 'NVIDIA H200', 9, 0, 132, 13000, 13000, '0.1.0', "
	"   0, 150000000);"
	"INSERT INTO StringIds VALUES (1, 'k');"
	/* regions */
	"INSERT INTO kp_regions (runId, regionId, parentId, label, source, streamId, occurrences, "
	"  kernels, eager_ns, busy_ns, host_idle_ns, device_idle_ns, graph_ns_pred, speedup_pred, "
	"  capturable, blockers, one_time_ns, break_even, extra_mem_bytes, fingerprint, shape_keys, "
	"  patch_slots) VALUES "
	" (1, 1, NULL, 'step', 'nvtx', 7, 10, 4, 2250000, 430000, 1700000, 100000, 474000, 4.7468, "
	"  1, NULL, 60000, 1, 1048576, '9a3c55e01b2f7d44', 1, 2),"
	" (1, 2, NULL, 'optimizer', 'nvtx', 7, 10, 40, 5000000, 4900000, 10000, 90000, 4900000, 1.0204, "
	"  1, NULL, 400000, 1, 65536, 'aa', 1, 0),"
	" (1, 3, NULL, 'eval', 'nvtx', 7, 10, 8, 800000, 100000, 600000, 100000, 900000, 0.8889, "
	"  1, NULL, 100000, NULL, 4096, '0x00000000000000bb', 1, 0),"
	" (1, 4, NULL, 'load', 'nvtx', 7, 10, 9, 3000000, 500000, 2000000, 500000, NULL, NULL, "
	"  0, 'sync,pageable_copy', NULL, NULL, NULL, 'load-signature-text', 1, 0),"
	" (1, 5, 4, 'load/a', 'split', 7, 10, 5, 1000000, 200000, 700000, 100000, 300000, 3.3333, "
	"  1, NULL, 50000, 1, 2097152, 'cc', 2, 0),"
	" (1, 6, 4, 'load/b', 'split', 7, 3, 4, 900000, 100000, 700000, 100000, 200000, 4.5, "
	"  1, NULL, 40000, 1, 4096, 'dd', 1, 0),"
	" (1, 7, NULL, 'tail', 'nvtx', 7, 5, 3, 400000, 100000, 250000, 50000, 100000, 4.0, "
	"  0, 'malloc', NULL, NULL, NULL, NULL, 1, 0),"
	" (1, 8, NULL, 'step', 'nvtx', 9, 10, 2, 100000, 90000, 1000, 9000, 98000, 1.0204, "
	"  1, NULL, 1000, 1, 0, 'ee', 1, 0),"
	" (1, 9, NULL, 'decode %]', 'mined', 7, 20, 1, 50000, 1000, 45000, 4000, 2000, 25.0, "
	"  1, NULL, 10000, 1, 512, 'ff', 1, 0),"
	" (1, 10, NULL, 'empty', 'mined', 7, 20, 0, 50000, 1000, 45000, 4000, 2000, 25.0, "
	"  1, NULL, 10000, 1, 512, '11', 1, 0);"
	"INSERT INTO kp_blockers (runId, regionId, kind, fatal, api_name, start, correlationId) VALUES "
	" (1, 4, 'sync', 1, 'cudaStreamSynchronize', 100, 50), (1, 4, 'sync', 1, 'cudaStreamSynchronize', 200, 60),"
	" (1, 4, 'pageable_copy', 1, 'cudaMemcpyAsync', 150, 55), (1, 7, 'malloc', 1, 'cudaMalloc', 10, 5),"
	" (1, 4, 'shape_key', 0, 'cudaLaunchKernel', 300, 70);"
	"INSERT INTO kp_fusion_candidates (runId, candId, regionId, streamId, first_correlationId, "
	"  n_kernels, kernel_names, dur_ns, saved_bytes, saved_nodes, score, feasible, reason) VALUES "
	" (1, 1, 1, 7, 102, 2, 'add -> relu', 8000, 4000000, 1, 2840.5, 1, NULL),"
	" (1, 2, 1, 7, 101, 3, 'a -> b -> c', 9000, 4000000, 2, 900.0, 0, 'reduction shape'),"
	" (1, 3, 2, 7, 9001, 2, 'x -> y', 9000, 4000000, 1, 900.0, 1, NULL),"
	" (1, 4, 1, 7, 101, 2, 'p -> q', 9000, 0, 1, 0.0, 1, NULL);";

/* kernels of region 1 (4 per occurrence, corr 100*i+1..+4) and their launch arguments */
static int add_step_kernels(struct kp_db *db)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	int i, k, rc;

	kp_strbuf_adds(&sb, "BEGIN;");
	for (i = 0; i < 10; i++) {
		int64_t t = 1000000 + (int64_t)i * 2250000;

		kp_strbuf_addf(&sb, "INSERT INTO kp_region_occurrences (runId, regionId, occIndex, start, "
			       "end, kernels, first_correlationId, last_correlationId, signature) "
			       "VALUES (1, 1, %d, %lld, %lld, 4, %d, %d, '9a3c55e01b2f7d44');", i, (long long)t, (long long)t + 2250000,
			       100 * i + 1, 100 * i + 4);
		for (k = 0; k < 4; k++) {
			int corr = 100 * i + 1 + k;

			kp_strbuf_addf(&sb, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, "
				       "streamId, correlationId, demangledName, shortName, gridX, gridY, "
				       "gridZ, blockX, blockY, blockZ, runId) VALUES (%lld, %lld, 0, 7, %d, "
				       "1, 1, 1, 1, 1, 128, 1, 1, 1);", (long long)t + k * 500000,
				       (long long)t + k * 500000 + 100000, corr);
			/* arg 0: pointer, changes each step for kernels 0 and 2 */
			kp_strbuf_addf(&sb, "INSERT INTO kp_launch_args VALUES (1, %d, 0, 8, %lld);", corr,
				       (long long)(0x7f0000000000LL + (k % 2 == 0 ? i * 0x1000 : 0)));
			/* arg 1: int, constant; arg 2: pointer, changes for kernel 3 */
			kp_strbuf_addf(&sb, "INSERT INTO kp_launch_args VALUES (1, %d, 1, 4, 16);", corr);
			kp_strbuf_addf(&sb, "INSERT INTO kp_launch_args VALUES (1, %d, 2, 8, %lld);", corr,
				       (long long)(0x7e0000000000LL + (k == 3 ? i * 0x100 : 0)));
		}
	}
	kp_strbuf_adds(&sb, "COMMIT;");
	rc = kp_db_exec(db, sb.buf, &err);
	if (rc)
		fprintf(stderr, "fixture: %s\n", err.msg);
	kp_strbuf_release(&sb);
	return rc;
}

static const char *fixture_db(const char *name)
{
	struct kp_err err = {0};
	const char *path = kp_test_path(name);
	struct kp_db *db = kp_db_open(path, KP_DB_CREATE, &err);

	if (!db) {
		fprintf(stderr, "open: %s\n", err.msg);
		return NULL;
	}
	if (kp_db_exec(db, fixture_sql, &err)) {
		fprintf(stderr, "fixture: %s\n", err.msg);
		kp_db_close(db);
		return NULL;
	}
	if (add_step_kernels(db)) {
		kp_db_close(db);
		return NULL;
	}
	kp_db_close(db);
	return path;
}

static void test_planner_decisions(void)
{
	const char *path = fixture_db("decide.db");
	struct kp_err err = {0};
	struct kp_planner_opts o;
	struct kp_db *db;
	struct kp_plan *p;
	const struct kp_plan_region *r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_planner_opts_init(&o);
	p = kp_planner_run(db, &o, &err);
	if (!p)
		fprintf(stderr, "plan: %s\n", err.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->n_regions, 9);   /* 'empty' has no kernels: left out */
	CU_ASSERT_EQUAL(p->cc_major, 9);
	CU_ASSERT_EQUAL(p->cuda_major, 13);
	CU_ASSERT_STRING_EQUAL(p->date, "2026-09-21T14:13:20Z");

	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(r->warmup, 2);
	CU_ASSERT_EQUAL(r->fingerprint, 0x9a3c55e01b2f7d44ULL);
	CU_ASSERT_EQUAL(r->mem_budget_bytes, 1048576);
	CU_ASSERT(r->n_shapes == 1 && r->shapes[0] == r->fingerprint);
	CU_ASSERT_EQUAL(r->nodes, 4);   /* kp_regions.nodes 0: at least the kernels */
	/* patch slots: kernels 0 and 2 arg 0 (offset 0), kernel 3 arg 2 (offset 16: 8-byte pointer, 4-byte int, aligned) */
	CU_ASSERT_EQUAL_FATAL(r->n_patches, 3);
	CU_ASSERT(r->patches[0].kernel == 0 && r->patches[0].param == 0 && r->patches[0].offset == 0);
	CU_ASSERT(r->patches[1].kernel == 2 && r->patches[1].param == 0 && r->patches[1].size == 8);
	CU_ASSERT(r->patches[2].kernel == 3 && r->patches[2].param == 2 && r->patches[2].offset == 16);

	r = kp_plan_find(p, "step#8");   /* repeated label made unique */
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_NOT_LAUNCH_BOUND);
	r = kp_plan_find(p, "optimizer");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_NOT_LAUNCH_BOUND);
	r = kp_plan_find(p, "eval");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_PREDICTED_LOSS);
	CU_ASSERT(r && r->fingerprint == 0xbb);
	r = kp_plan_find(p, "load");
	CU_ASSERT(r && r->decision == KP_PLAN_SPLIT && r->reason == KP_PLAN_R_BLOCKER);
	CU_ASSERT(r && strstr(r->reason_text, "sync x2 (cudaStreamSynchronize)"));
	CU_ASSERT(r && r->fingerprint == kp_hash_str("load-signature-text"));
	r = kp_plan_find(p, "load/a");
	CU_ASSERT(r && r->decision == KP_PLAN_GRAPH && r->parent && !strcmp(r->parent, "load"));
	CU_ASSERT(r && r->shape_keys == 2 && r->mem_budget_bytes == 2 * 2097152);
	r = kp_plan_find(p, "load/b");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_TOO_FEW_REPLAYS);
	r = kp_plan_find(p, "tail");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_BLOCKER && !r->parent);
	r = kp_plan_find(p, "decode %]");
	CU_ASSERT(r && r->decision == KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(p->mem_budget_bytes, 1048576 + 2 * 2097152 + 512);
	/* only the feasible, positive-score candidate of a graph region */
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 1);
	CU_ASSERT_EQUAL(p->fusions[0].id, 1);
	CU_ASSERT_EQUAL(p->fusions[0].first_kernel, 1);
	CU_ASSERT_EQUAL(p->fusions[0].gain_ns, 2841);  /* the analyzer's score, rounded */
	/* whole run: 150 ms eager, saving from step, load/a and decode:
	 * (10-2)*(2.25-0.474) - 0.06 + (10-2)*(1-0.3) - 0.05 + (20-2)*(0.05-0.002) - 0.01 ms */
	CU_ASSERT_EQUAL(p->run_eager_ns, 150000000);
	CU_ASSERT_EQUAL(p->run_pred_ns, 150000000 - 14148000 - 5550000 - 854000);
	kp_plan_free(p);

	/* the graph regions' kernels in launch order, for fusion from the catalog */
	{
		struct kp_strbuf kt = KP_STRBUF_INIT;

		o.kernel_trace = &kt;
		p = kp_planner_run(db, &o, &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		CU_ASSERT_PTR_NOT_NULL_FATAL(kt.buf);
		/* with the recorded arguments (hex bytes per parameter) */
		CU_ASSERT_PTR_NOT_NULL(strstr(kt.buf, "step\t0\tk\t00000000007f0000:10000000:00000000007e0000\n"
					      "step\t1\tk\t00000000007f0000:10000000:00000000007e0000\n"
					      "step\t2\tk\t"));
		CU_ASSERT_PTR_NOT_NULL(strstr(kt.buf, "step\t3\tk\t00000000007f0000:10000000:00000000007e0000\n"));
		CU_ASSERT_PTR_NULL(strstr(kt.buf, "step\t4\t"));   /* the first occurrence only */
		CU_ASSERT_PTR_NULL(strstr(kt.buf, "optimizer\t"));  /* eager regions: none */
		kp_plan_free(p);
		kp_strbuf_release(&kt);
		o.kernel_trace = NULL;
	}

	/* memory cap: the region with the least gain per byte goes eager */
	o.mem_limit_bytes = 1500000;
	p = kp_planner_run(db, &o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "load/a");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_MEMORY_BUDGET);
	CU_ASSERT(kp_plan_find(p, "step")->decision == KP_PLAN_GRAPH);
	CU_ASSERT(p->mem_budget_bytes <= 1500000);
	kp_plan_free(p);

	/* no such run */
	o.mem_limit_bytes = 0;
	o.run_id = 42;
	CU_ASSERT_PTR_NULL(kp_planner_run(db, &o, &err));
	CU_ASSERT_EQUAL(err.code, KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no run 42"));
	kp_db_close(db);
}

static void test_golden_and_store(void)
{
	const char *path = fixture_db("golden.db");
	const char *out1 = kp_test_path("g1.kplan"), *out2 = kp_test_path("g2.kplan");
	const char *golden = kp_test_src("tests/golden/planner_fixture.kplan");
	struct kp_err err = {0};
	char *a, *b, *g;
	size_t na, nb, ng;
	struct kp_db *db;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o '%s' >/dev/null", kp_test_kplan(), path, out1), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --run 1 -o '%s' >/dev/null", kp_test_kplan(), path, out2), 0);
	a = kp_test_read(out1, &na);
	b = kp_test_read(out2, &nb);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	/* deterministic */
	CU_ASSERT(na == nb && !memcmp(a, b, na));
	if (getenv("KPLAN_UPDATE_GOLDEN")) {
		kp_test_sh("mkdir -p '%s'", kp_test_src("tests/golden"));
		CU_ASSERT_EQUAL(kp_test_write(golden, a, (long)na), 0);
		fprintf(stderr, "\nupdated %s\n", golden);
	}
	g = kp_test_read(golden, &ng);
	if (!g || ng != na || memcmp(g, a, na))
		fprintf(stderr, "\n%s differs from the output (diff %s %s; KPLAN_UPDATE_GOLDEN=1 "
			"to accept)\n", golden, golden, out1);
	CU_ASSERT(g && ng == na && !memcmp(g, a, na));
	free(a);
	free(b);
	free(g);
	/* two plans stored, the older stale with a reason, none deleted */
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT COUNT(*) FROM kp_plans", -1), 2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT planId FROM kp_plans WHERE status = 'current'", -1), 2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT COUNT(*) FROM kp_plans WHERE status = 'stale' "
				  "AND stale_reason = 'superseded by plan 2'", -1), 1);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT COUNT(*) FROM kp_plans WHERE length(body) > 100 "
				  "AND length(checksum) = 16", -1), 2);
	kp_db_close(db);
	/* show works on it */
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' | grep -q 'step *graph'", kp_test_kplan(), out1), 0);
	/* --for pins it: format 3, one 'for' line more, nothing else changes */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --for 'fixture@1' -o '%s' >/dev/null",
				   kp_test_kplan(), path, out2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("head -1 '%s' | grep -qx 'kplan-plan 3'", out2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qx 'for fixture@1' '%s'", out2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("diff '%s' '%s' | grep -c '^[<>]' | grep -qx 7", out1, out2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --for '' -o x 2>/dev/null", kp_test_kplan(), path), 64);
}

/*
 * --run-length: a plan for a run X times the recorded one. 'load/b' (3
 * calls, 2 warm-up, 1 capture: no replay) is too-few-replays as recorded
 * and a graph in a run 4x as long (12 calls); the recorded occurrences stay
 * in the plan, the run's figures are the longer run's. 0.25x: 'step' (10
 * calls) gets 3 (2.5 rounded), too few.
 */
static void test_planner_run_length(void)
{
	const char *path = fixture_db("runlength.db");
	struct kp_err err = {0};
	struct kp_planner_opts o;
	struct kp_db *db;
	struct kp_plan *p;
	const struct kp_plan_region *r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_planner_opts_init(&o);
	CU_ASSERT_EQUAL(o.run_length, 1.0);
	p = kp_planner_run(db, &o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "load/b");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT(r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_TOO_FEW_REPLAYS);
	CU_ASSERT_STRING_EQUAL(r->reason_text, "0 replays after 2 warm-up calls and the capture, "
			       "break-even 1");
	kp_plan_free(p);

	o.run_length = 4;
	p = kp_planner_run(db, &o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "load/b");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(r->reason, KP_PLAN_R_LAUNCH_BOUND);
	CU_ASSERT_EQUAL(r->occurrences, 3);   /* the recorded count */
	CU_ASSERT_EQUAL(r->warmup, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(r->reason_text, "saves 6.96 ms over the run's 12 calls (4x the "
				      "recorded 3; 2 warm-up, 1 capture, 9 replays; break-even 1)"));
	r = kp_plan_find(p, "step");
	CU_ASSERT(r && r->occurrences == 10 &&
		  strstr(r->reason_text, "over the run's 40 calls (4x the recorded 10; 2 warm-up"));
	/* the run 4x the recorded 150 ms; saving over 4x the calls of step, load/a, load/b, decode:
	 * (40-2)*(2.25-0.474) - 0.06 + (40-2)*(1-0.3) - 0.05 + (12-2)*(0.9-0.2) - 0.04
	 * + (80-2)*(0.05-0.002) - 0.01 ms */
	CU_ASSERT_EQUAL(p->run_eager_ns, 600000000);
	CU_ASSERT_EQUAL(p->run_pred_ns, 600000000 - 67428000 - 26550000 - 6960000 - 3734000);
	kp_plan_free(p);

	o.run_length = 0.25;
	p = kp_planner_run(db, &o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT(r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_TOO_FEW_REPLAYS);
	CU_ASSERT_STRING_EQUAL(r->reason_text, "0 replays after 2 warm-up calls and the capture of "
			       "the run's 3 calls (0.25x the recorded 10), break-even 1");
	CU_ASSERT_EQUAL(p->run_eager_ns, 37500000);
	kp_plan_free(p);
	kp_db_close(db);
}

/* ---------------------------------------------------------------------- */
/* CLI */

/*
 * `kplan plan --run-length`: 1 (as 1 or 1.0) writes the plan without it
 * byte for byte; 4 graphs 'load/b' and says so; a bad factor is a usage
 * error (64) naming it.
 */
static void test_cli_run_length(void)
{
	const char *path = fixture_db("runlength-cli.db"), *k = kp_test_kplan();
	const char *none = kp_test_path("rl-none.kplan"), *one = kp_test_path("rl-one.kplan");
	const char *four = kp_test_path("rl-four.kplan"), *errs = kp_test_path("rl.err");
	static const char *const bad[] = { "0", "-1", "abc", "1e999", "inf", "nan", "", "0x10", "2e6" };
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store -o '%s' >/dev/null", k, path, none), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length 1 -o '%s' >/dev/null", k,
				   path, one), 0);
	CU_ASSERT_EQUAL(kp_test_sh("cmp -s '%s' '%s'", none, one), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length 1.0 -o '%s' >/dev/null", k,
				   path, one), 0);
	CU_ASSERT_EQUAL(kp_test_sh("cmp -s '%s' '%s'", none, one), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -A3 -x '.region load/b.' '%s' | grep -qx 'decision eager'",
				   none), 0);
	/* 4x: load/b a graph, the reason with the scaled count; the same plan twice */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length 4 -o '%s' >'%s'", k, path,
				   four, errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'a run 4x the recorded one' '%s'", errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -A3 -x '.region load/b.' '%s' | grep -qx 'decision graph'",
				   four), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q \"^reason-text .*over the run's 12 calls (4x the "
				   "recorded 3; 2 warm-up\" '%s'", four), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -A12 -x '.region load/b.' '%s' | grep -qx 'occurrences 3'",
				   four), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qx 'run-eager-ns 600000000' '%s'", four), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length 4 -o '%s' >/dev/null && "
				   "cmp -s '%s' '%s'", k, path, one, one, four), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' >/dev/null", k, four), 0);
	/* the largest factor still writes a plan the reader takes */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length 1e6 -o '%s' >/dev/null && "
				   "%s show '%s' >/dev/null", k, path, one, k, one), 0);
	/* refused, naming the value */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --run-length '%s' -o x >/dev/null "
					   "2>'%s'", k, path, bad[i], errs), 64);
		CU_ASSERT_EQUAL(kp_test_sh("grep -qF -- \"--run-length needs a factor X > 0\" '%s' && "
					   "grep -qF -- \"not '%s'\" '%s'", errs, bad[i], errs), 0);
	}
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store -o x --run-length >/dev/null 2>'%s'", k,
				   path, errs), 64);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qF -- '--run-length needs a factor' '%s'", errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("test ! -e x"), 0);
	/* documented */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --help | grep -q -- '--run-length X .*the run the plan is "
				   "for is X times'", k), 0);
}

/* `kplan plan` without a database: usage (64), or one that does not open (2) */
static void test_cli_plan(void)
{
	const char *k = kp_test_kplan();

	CU_ASSERT_EQUAL(kp_test_sh("%s plan 2>/dev/null", k), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o x 2>/dev/null", k, kp_test_path("none.db")), 2);
}

/*
 * The bundled ResNet-18 trace: import, analyze, plan through the CLI. The
 * 'step' region must be a graph whose predicted speedup is the analyzer's.
 */
static void test_resnet18(void)
{
	const char *db_path = kp_test_path("resnet.db"), *plan_path = kp_test_path("resnet.kplan");
	const char *k = kp_test_kplan();
	struct kp_err err = {0};
	struct kp_plan *p;
	const struct kp_plan_region *r;
	struct kp_db *db;
	sqlite3_stmt *st;
	double analyzer_speedup = 0;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import '%s' -o '%s' >/dev/null", k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), db_path), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s analyze '%s' >/dev/null", k, db_path), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s plan '%s' -o '%s' >/dev/null", k, db_path, plan_path), 0);
	p = kp_plan_load(plan_path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(p->cc_major, 9);
	CU_ASSERT_EQUAL(p->cuda_major, 13);
	db = kp_db_open(db_path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	if (!kp_db_prepare(db, "SELECT speedup_pred FROM kp_regions WHERE label = 'step' "
			   "ORDER BY regionId LIMIT 1", &st, &err)) {
		if (sqlite3_step(st) == SQLITE_ROW)
			analyzer_speedup = sqlite3_column_double(st, 0);
		sqlite3_finalize(st);
	}
	kp_db_close(db);
	CU_ASSERT(analyzer_speedup > 1.0);
	CU_ASSERT_DOUBLE_EQUAL(r->speedup_pred, analyzer_speedup, 1e-3 * analyzer_speedup + 1e-4);
	/* the whole run gains, but less than the region (warm-up, capture) */
	CU_ASSERT(p->speedup_pred > 1.0 && p->speedup_pred <= r->speedup_pred + 1e-9);
	kp_plan_free(p);
	/* a plan described for another kind of GPU (for a bundle): its keys, the run's figures */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store --cc 8.0 --cuda-major 12 --gpu-name "
				   "'NVIDIA A100' --sms 108 --driver 12080 -o '%s' >/dev/null", k,
				   db_path, plan_path), 0);
	p = kp_plan_load(plan_path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(p->cc_major == 8 && p->cuda_major == 12 && p->sm_count == 108 &&
		  p->driver_version == 12080 && !strcmp(p->gpu_name, "NVIDIA A100"));
	CU_ASSERT_PTR_NOT_NULL(kp_plan_find(p, "step"));
	kp_plan_free(p);
	/* and what the database keeps, per model and GPU */
	CU_ASSERT_EQUAL(kp_test_sh("%s plans '%s' | grep -q 'NVIDIA H200, 132 SMs, cc 9.0, CUDA 13'",
				   k, db_path), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plans '%s' --get 1 -o '%s.got' >/dev/null && "
				   "%s show '%s.got' >/dev/null", k, db_path, plan_path, k, plan_path),
			0);
}

/*
 * `kplan plan` on an imported, never analyzed run analyzes it first and says
 * so in one line; with --no-store (writes nothing) it names the command.
 */
static void test_plan_analyzes_first(void)
{
	const char *db_path = kp_test_path("fresh.db"), *plan_path = kp_test_path("fresh.kplan");
	const char *errs = kp_test_path("fresh.err"), *k = kp_test_kplan();

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import '%s' -o '%s' >/dev/null", k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), db_path), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --no-store -o '%s' >/dev/null 2>'%s'", k, db_path,
				   plan_path, errs), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q \"run 1 is not analyzed: run 'kplan analyze .*fresh.db "
				   "--run 1' first\" '%s'", errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o '%s' >/dev/null 2>'%s'", k, db_path, plan_path,
				   errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("test $(wc -l < '%s') -eq 1 && grep -q 'run 1 of .*fresh.db was "
				   "not analyzed: analyzing it first' '%s'", errs, errs), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' | grep -q 'step *graph'", k, plan_path), 0);
	/* analyzed now: the next plan says nothing about it */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o '%s' >/dev/null 2>'%s' && test ! -s '%s'", k,
				   db_path, plan_path, errs, errs), 0);
}

CU_TestInfo kp_tests_planner[] = {
	{ "planner decisions on a fixture db", test_planner_decisions },
	{ "golden plan, determinism, kp_plans", test_golden_and_store },
	{ "planner: --run-length scales the calls (too-few-replays to graph)", test_planner_run_length },
	{ "cli: plan exit codes", test_cli_plan },
	{ "cli: plan --run-length (1 unchanged, 4 graphs, bad values refused)", test_cli_run_length },
	{ "resnet18 trace: step planned as a graph", test_resnet18 },
	{ "plan analyzes a run not yet analyzed", test_plan_analyzes_first },
	CU_TEST_INFO_NULL,
};
