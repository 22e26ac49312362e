/* test_collector.c - collector/ (suite filled in by the collector work). */
#include <CUnit/CUnit.h>

CU_TestInfo kp_tests_collector[] = {
	CU_TEST_INFO_NULL,
};
