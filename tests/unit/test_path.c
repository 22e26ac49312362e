/*
 * test_path.c - analyzer/path.c: the path the graph will run. An eager
 * Hugging Face style step (tests/fixtures/hf_mask_check.json) waits on a
 * mask check that the captured path skips: the region stays whole, the
 * wait is a capture_path row naming the op, and the prediction gets an
 * interval widened for the attention's other path. The same trace with the
 * wait in the user's own .item() still splits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyzer/analyzer.h"
#include "analyzer/internal.h"
#include "validate/validate.h"
#include "testutil.h"
#include "timeline.h"

#define FIXTURE "tests/fixtures/hf_mask_check.json"
#define STEPS 4

/* The fixture, with each sed expression of edit applied (NULL: as is), analyzed. */
static struct kp_db *analyzed(const char *name, const char *edit)
{
	char trace[64];

	snprintf(trace, sizeof(trace), "%s.json", name);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("sed -e '%s' '%s' > '%s'", edit ? edit : "",
					 kp_test_src(FIXTURE), kp_test_path(trace)), 0);
	return kj_analyzed_from(kp_test_path(trace), name);
}

static void test_path_mask_check(void)
{
	struct kp_db *db = analyzed("path_mask", NULL);

	/* one region, not split by the wait, capturable */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE label = 'step'"
			       " AND parentId IS NULL AND capturable = 1 AND occurrences = %d", STEPS), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE fatal <> 0"), 0);
	/* the wait is reported, named by its op, once per occurrence */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'capture_path'"
			       " AND fatal = 0 AND api_name = 'cudaStreamSynchronize'"
			       " AND cpu_op = 'aten::_local_scalar_dense'"
			       " AND detail LIKE 'path differs under capture (aten::is_nonzero):%%'"), STEPS);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE advisories"
			       " LIKE '%%capture_path%%'"), 1);
	/* the interval: lo <= point <= hi, widened at the top for the two
	 * fused attention kernels running unfused (beyond the model's band) */
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE graph_ns_pred > 0"
			       " AND graph_ns_lo > 0 AND graph_ns_lo <= graph_ns_pred"
			       " AND graph_ns_pred <= graph_ns_hi"), 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions"
			       " WHERE graph_ns_hi > graph_ns_pred / 0.8 + 1000"), 1);
	kp_db_close(db);
	/* the plan's reason says it, and kplan show prints it */
	const char *k = kp_test_kplan(), *log = kp_test_path("path_mask.show");
	CU_ASSERT_EQUAL(kp_test_sh("'%s' plan '%s' -o '%s' --cc 9.0 --cuda-major 13 2>/dev/null &&"
				   " '%s' show '%s' > '%s'", k, kp_test_path("path_mask.db"),
				   kp_test_path("path_mask.kplan"), k, kp_test_path("path_mask.kplan"),
				   log), 0);
	char *out = kp_test_read(log, NULL);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "graph time between "));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "(capture_path)"));
	free(out);
	/* the report's region card gives the interval beside the prediction */
	log = kp_test_path("path_mask.html");
	CU_ASSERT_EQUAL(kp_test_sh("'%s' report '%s' -o '%s' > /dev/null 2>&1", k,
				   kp_test_path("path_mask.db"), log), 0);
	out = kp_test_read(log, NULL);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "predicted graph time "));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, " us, between "));
	free(out);
}

/* The same wait in the user's own .item() (no is_nonzero around it): a real
 * wait, the region splits there, and the interval is the model's band. */
static void test_path_user_item(void)
{
	struct kp_db *db = analyzed("path_item", "s/aten::is_nonzero/aten::mul/");

	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'capture_path'"), 0);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_blockers WHERE kind = 'sync'"
			       " AND fatal = 1 AND detail LIKE '%%splits the region%%'"), STEPS);
	CU_ASSERT(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE parentId IS NOT NULL") >= 1);
	CU_ASSERT_EQUAL(tl_dbq(db, "SELECT count(*) FROM kp_regions WHERE label = 'step'"
			       " AND capturable = 0 AND graph_ns_hi <= graph_ns_pred / 0.8 + 1"
			       " AND graph_ns_lo <= graph_ns_pred"), 1);
	kp_db_close(db);
}

static int streq(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

/* Which chains of CPU ops make a skipped wait, and whose code decides. */
static void test_path_ops(void)
{
	static const char *const check[] = { "aten::_local_scalar_dense", "aten::item",
					     "aten::is_nonzero" };
	static const char *const item[] = { "aten::_local_scalar_dense", "aten::item" };
	const char *why = NULL;

	CU_ASSERT(streq(kp__path_op(KP__B_SYNC, check, 3, -1, &why), "aten::is_nonzero"));
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT(streq(kp__path_op(KP__B_PAGEABLE_COPY, check, 3, 1, NULL),
			"aten::_local_scalar_dense"));
	/* the user's own test (innermost Python frame is theirs) is a real wait */
	CU_ASSERT_PTR_NULL(kp__path_op(KP__B_SYNC, check, 3, 0, NULL));
	/* .item() alone: skipped only when library code made it */
	CU_ASSERT_PTR_NULL(kp__path_op(KP__B_SYNC, item, 2, -1, NULL));
	CU_ASSERT(streq(kp__path_op(KP__B_SYNC, item, 2, 1, NULL), "aten::_local_scalar_dense"));
	/* not a wait */
	CU_ASSERT_PTR_NULL(kp__path_op(KP__B_MALLOC, check, 3, -1, NULL));
	CU_ASSERT_PTR_NULL(kp__path_op(KP__B_SYNC, check, 0, -1, NULL));
}

/*
 * kplan validate on a corpus of the fixture as a plain trace: the row holds
 * the interval and its width, the point is 50 % off; --max-width lets a miss
 * pass only inside an interval that narrow, --min-coverage counts the
 * intervals that hold the measured time.
 */
static void test_path_validate(void)
{
	const char *dir = kp_test_path("pathcorpus"), *log = kp_test_path("pathcorpus.log");
	struct kp_validate_row *r = NULL;
	struct kp_err err = {0};
	const char *k = kp_test_kplan();
	char *out;
	int n = 0;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("mkdir -p '%s' && gzip -c '%s' > '%s/mask_plain.json.gz' &&"
					 " printf 'workload,eager_ms,graph_ms\nmask_plain,0.4,0.15\n'"
					 " > '%s/ground_truth.csv'", dir, kp_test_src(FIXTURE), dir,
					 dir), 0);
	CU_ASSERT_EQUAL_FATAL(kp_validate_read_truth(dir, &r, &n, &err), 0);
	CU_ASSERT_EQUAL(kp_validate_one(dir, NULL, "step", kp_test_path("pathv.db"), &r[0], &err), 0);
	CU_ASSERT_TRUE(r[0].found);
	CU_ASSERT_EQUAL(r[0].path_points, 1);
	CU_ASSERT_TRUE(r[0].lo_ns > 0 && r[0].lo_ns <= r[0].pred_ns && r[0].pred_ns <= r[0].hi_ns);
	CU_ASSERT_TRUE(r[0].lo_ns <= 150000 && 150000 <= r[0].hi_ns);
	CU_ASSERT_TRUE(r[0].error < -0.4);
	double w = (double)r[0].hi_ns / (double)r[0].lo_ns;
	free(r);
	/* inside but wider than 1.7: the miss fails; allowed that wide, it passes */
	CU_ASSERT_EQUAL(kp_test_sh("'%s' validate '%s' --max-error 20 --max-width 1.7 > '%s'",
				   k, dir, log), 1);
	CU_ASSERT_EQUAL(kp_test_sh("'%s' validate '%s' --max-error 20 --max-width %.2f"
				   " --min-coverage 100 > '%s'", k, dir, w + 0.01, log), 0);
	out = kp_test_read(log, NULL);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "intervals: 1 of 1 hold the measured time"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "  path"));
	free(out);
	/* measured outside the interval: coverage fails */
	CU_ASSERT_EQUAL(kp_test_sh("printf 'workload,eager_ms,graph_ms\nmask_plain,0.4,5\n'"
				   " > '%s/ground_truth.csv' && '%s' validate '%s' --min-coverage 100"
				   " > '%s'", dir, k, dir, log), 1);
}

CU_TestInfo kp_tests_path[] = {
	{ "validate: coverage and width of the intervals", test_path_validate },
	{ "mask check skipped under capture: no split, named, interval", test_path_mask_check },
	{ "the user's own .item(): a split, the model's band", test_path_user_item },
	{ "which op chains the captured path skips", test_path_ops },
	CU_TEST_INFO_NULL,
};
