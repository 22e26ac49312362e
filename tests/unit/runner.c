/*
 * runner.c - CUnit runner for every suite in suites.h.
 *
 *   kplan-unit            run all suites
 *   kplan-unit db plan    run only the named suites
 *
 * Exits non-zero when any test or suite fails. Warnings the tests provoke
 * read "kplan (expected): warning: ..." (KPLAN_LOG_TAG).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/Basic.h>

#include "suites.h"
#include "testutil.h"

#define DECLARE(name) extern CU_TestInfo kp_tests_##name[];
KP_SUITES(DECLARE)

#define ENTRY(name) { .pName = #name, .pInitFunc = NULL, .pCleanupFunc = NULL, \
		      .pTests = kp_tests_##name },
static CU_SuiteInfo all_suites[] = {
	KP_SUITES(ENTRY)
	CU_SUITE_INFO_NULL,
};

static int wanted(const char *name, int argc, char **argv)
{
	int i;

	if (argc < 2)
		return 1;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], name))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	CU_SuiteInfo chosen[sizeof(all_suites) / sizeof(all_suites[0])];
	unsigned failures;
	size_t i, n = 0;

	/* every kplan warning of a passing run is one a test provokes on
	 * purpose (here and in the programs it starts): say so (common/log.h) */
	setenv("KPLAN_LOG_TAG", "expected", 0);
	for (i = 0; all_suites[i].pName; i++) {
		if (wanted(all_suites[i].pName, argc, argv))
			chosen[n++] = all_suites[i];
	}
	memset(&chosen[n], 0, sizeof(chosen[n]));
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	if (CU_register_suites(chosen) != CUE_SUCCESS) {
		fprintf(stderr, "cannot register suites: %s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	kp_test_cleanup_tmp();
	return failures ? 1 : 0;
}
