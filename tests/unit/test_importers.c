/* test_importers.c - importers/ (suite filled in by the importers work). */
#include <CUnit/CUnit.h>

CU_TestInfo kp_tests_importers[] = {
	CU_TEST_INFO_NULL,
};
