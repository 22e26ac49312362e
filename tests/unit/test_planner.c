/* test_planner.c - planner/ (suite filled in by the planner work). */
#include <CUnit/CUnit.h>

CU_TestInfo kp_tests_planner[] = {
	CU_TEST_INFO_NULL,
};
