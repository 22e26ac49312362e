/*
 * test_validate.c - validate/: the validation corpus's ground_truth.csv and
 * one workload's import, calibration, analysis and prediction against its
 * measured graph time (`kplan validate`; the corpus itself runs in
 * `make validate-corpus`).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "common/err.h"
#include "validate/validate.h"
#include "testutil.h"

static const char *vdir(const char *name, const char *truth)
{
	static char dir[1024];
	char p[1200];

	snprintf(dir, sizeof(dir), "%s", kp_test_path(name));
	kp_test_sh("mkdir -p '%s'", dir);
	snprintf(p, sizeof(p), "%s/ground_truth.csv", dir);
	if (truth)
		kp_test_write(p, truth, -1);
	return dir;
}

static void test_validate_truth(void)
{
	struct kp_validate_row *r = NULL;
	struct kp_err err = {0};
	int n = -1;

	/* extra columns, quoted fields, column order from the header */
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v1", "graph_ms,workload,x,eager_ms\n"
						       "0.5,\"a,b\",7,2.5\n1.25,c,,3\n"),
					       &r, &n, &err), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(r[0].workload, "a,b");
	CU_ASSERT_DOUBLE_EQUAL(r[0].graph_ms, 0.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(r[0].eager_ms, 2.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(r[1].graph_ms, 1.25, 1e-12);
	CU_ASSERT_STRING_EQUAL(r[0].label, "");      /* no label column */
	free(r);
	/* a label column: each workload's region, empty for the default */
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v1l", "workload,graph_ms,label\n"
						       "mlp,0.2,mlp.forward\nr18,0.5,\n"),
					       &r, &n, &err), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(r[0].label, "mlp.forward");
	CU_ASSERT_STRING_EQUAL(r[1].label, "");
	free(r);
	/* the errors name the file and the line */
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v2", "workload,eager_ms\na,1\n"), &r, &n,
					       &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "graph_ms"));
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v3", "workload,graph_ms\na,1\nb,fast\n"),
					       &r, &n, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line 3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'fast'"));
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v4", "workload,graph_ms\na,-1\n"), &r, &n,
					       &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v5", "workload,graph_ms\n"), &r, &n, &err),
			KP_EFORMAT);
	CU_ASSERT_EQUAL(kp_validate_read_truth(vdir("v6", NULL), &r, &n, &err), KP_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "ground_truth.csv"));
}

/* The bundled ResNet-18 trace against its measured graph (H200): predicted
 * within 20 %; a calibration file moves the prediction by what it says. */
static void test_validate_one(void)
{
	const char *dir = vdir("vr", "workload,eager_ms,graph_ms\nresnet18_b1,2.2520,0.4739\n"
			       "missing,1,1\n");
	struct kp_validate_row *r = NULL;
	struct kp_err err = {0};
	char calib[1200];
	int n = 0;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("cp '%s' '%s/resnet18_b1.json.gz'",
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), dir), 0);
	CU_ASSERT_EQUAL_FATAL(kp_validate_read_truth(dir, &r, &n, &err), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(kp_validate_one(dir, NULL, "step", kp_test_path("vs.db"), &r[0], &err), 0);
	CU_ASSERT_TRUE(r[0].found);
	CU_ASSERT_EQUAL(r[0].occurrences, 10);
	CU_ASSERT_TRUE(fabs(r[0].error) < 0.20);
	int64_t dflt = r[0].pred_ns;
	/* the missing trace is a note, not an error */
	CU_ASSERT_EQUAL(kp_validate_one(dir, NULL, "step", kp_test_path("vs.db"), &r[1], &err), 0);
	CU_ASSERT_FALSE(r[1].found);
	CU_ASSERT_PTR_NOT_NULL(strstr(r[1].note, "missing"));
	/* a calibration with 100 ns more per node of either class: no node
	 * costs more than 100 ns more, some (above the floor) do */
	snprintf(calib, sizeof(calib), "%s/calib.txt", dir);
	kp_test_write(calib, "gpu NVIDIA H200\ndriver 13000\ngraph_traced_gap_ns 200 9\n"
		      "graph_traced_gap_gemm_ns 450 9\n", -1);
	CU_ASSERT_EQUAL(kp_validate_one(dir, calib, "step", kp_test_path("vs.db"), &r[0], &err), 0);
	CU_ASSERT_TRUE(r[0].pred_ns > dflt + 100 * 10);
	CU_ASSERT_TRUE(r[0].pred_ns <= dflt + 100 * (r[0].nodes + 7));
	/* an unreadable calibration is an error naming it */
	kp_test_write(calib, "nothing here\n", -1);
	CU_ASSERT_EQUAL(kp_validate_one(dir, calib, "step", kp_test_path("vs.db"), &r[0], &err),
			KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "calib.txt"));
	free(r);
}

CU_TestInfo kp_tests_validate[] = {
	{ "validate: ground_truth.csv", test_validate_truth },
	{ "validate: one workload, calibration file", test_validate_one },
	CU_TEST_INFO_NULL,
};
