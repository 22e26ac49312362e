/* test_reports.c - reports/ (suite filled in by the reports work). */
#include <CUnit/CUnit.h>

CU_TestInfo kp_tests_reports[] = {
	CU_TEST_INFO_NULL,
};
