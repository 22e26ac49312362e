/* test_runtime.c - runtime/ (suite filled in by the runtime work). */
#include <CUnit/CUnit.h>

CU_TestInfo kp_tests_runtime[] = {
	CU_TEST_INFO_NULL,
};
