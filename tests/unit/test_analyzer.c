/* test_analyzer.c - analyzer/ (suite filled in by the analyzer work). */
#include <CUnit/CUnit.h>

CU_TestInfo kp_tests_analyzer[] = {
	CU_TEST_INFO_NULL,
};
