/*
 * analyze_first.c - commands that read analysis results (plan, diff)
 * analyze a run that has none first, as `kplan analyze DB --run N` would,
 * and say so in one line. Without it a plan of an imported trace would fail
 * and a diff against one would report every region as gone, which a CI
 * check reads as "nothing to compare" instead of a regression. A rank of a
 * job brings every rank: the plan holds for all of them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

#include "../analyzer/analyzer.h"
#include "../db/jobs.h"

/* Analyze run of path unless it is; 0 when analyzed (or nothing to analyze). */
static int analyze_one(const char *cmd, const char *path, int64_t run, int may_write,
		       struct kp_err *err)
{
	struct kp_analyze_opts o;
	struct kp_db *db = kp_db_open(path, KP_DB_RDONLY, err);
	int rc;

	if (!db)
		return err->code;
	rc = run <= 0 || kp_analysis_stored(db, run);
	kp_db_close(db);
	if (rc)
		return 0;  /* analyzed, or nothing to analyze: the command says what is missing */
	if (!may_write)
		return kp_err_set(err, KP_ENOTFOUND, "%s: run %lld is not analyzed: run 'kplan analyze "
				  "%s --run %lld' first", path, (long long)run, path, (long long)run);
	db = kp_db_open(path, 0, err);
	if (!db) {
		kp_err_prefix(err, "run %lld must be analyzed first ('kplan analyze %s --run %lld'), "
			      "which writes the database", (long long)run, path, (long long)run);
		return err->code;
	}
	fprintf(stderr, "kplan %s: run %lld of %s was not analyzed: analyzing it first "
		"(as 'kplan analyze %s --run %lld')\n", cmd, (long long)run, path, path,
		(long long)run);
	kp_analyze_opts_init(&o);
	o.run_id = run;
	rc = kp_analyze(db, &o, NULL, err);
	if (rc)
		kp_err_prefix(err, "analyzing run %lld first", (long long)run);
	kp_db_close(db);
	return rc;
}

int kp_cli_analyze_first(const char *cmd, const char *path, int64_t run_id, int may_write,
			 struct kp_err *err)
{
	struct kp_job_run *runs = NULL;
	struct kp_db *db = kp_db_open(path, KP_DB_RDONLY, err);
	size_t n = 0;
	int64_t run;
	int rc;

	if (!db)
		return err->code;
	run = run_id > 0 ? run_id : kp_db_default_run(db);
	/* a rank of a job: its plan is every rank's, so every rank is analyzed */
	rc = kp_db_job_runs(db, run, NULL, &runs, &n, err);
	kp_db_close(db);
	if (!rc && n < 2)
		rc = analyze_one(cmd, path, run, may_write, err);
	else
		for (size_t k = 0; k < n && !rc; k++)
			rc = analyze_one(cmd, path, runs[k].run_id, may_write, err);
	free(runs);
	return rc;
}
