/*
 * suites.h - the one list of every CUnit suite. Each tests/unit/test_X.c
 * defines `CU_TestInfo kp_tests_X[]` (CU_TEST_INFO_NULL-terminated); add X
 * here and the runner registers it.
 */
#define KP_SUITES(X) \
	X(common) \
	X(db) \
	X(importers) \
	X(analyzer) \
	X(ranks) \
	X(graphs) \
	X(advice) \
	X(path) \
	X(atenview) \
	X(validate) \
	X(plan) \
	X(aten) \
	X(bundle) \
	X(planner) \
	X(runtime) \
	X(fusion) \
	X(collector) \
	X(reports) \
	X(reliability)
