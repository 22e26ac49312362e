/* window.c - see window.h. */
#include "window.h"

#include <stdio.h>
#include <string.h>

/* A launch: an API call that issued a kernel, or a graph launch. */
#define LAUNCH_COND \
	"(correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL" \
	"  WHERE runId = ?1) OR nameId IN (SELECT id FROM StringIds" \
	"  WHERE value LIKE 'cudaGraphLaunch%' OR value LIKE 'cuGraphLaunch%'))"

/* cudaProfilerStart/cuProfilerStart (Stop), bare or with the version suffix
 * CUPTI's callback names carry ("cudaProfilerStart_v4000") */
#define API_IS(t, what) \
	"(" t ".value IN ('cudaProfiler" what "', 'cuProfiler" what "')" \
	" OR " t ".value GLOB 'cudaProfiler" what "_v[0-9]*'" \
	" OR " t ".value GLOB 'cuProfiler" what "_v[0-9]*')"

int kp_window_active(const struct kp_window *w)
{
	return w && (w->nvtx_range || w->profiler_api || w->skip > 0);
}

static int exec_bound(struct kp_db *db, const char *sql, int64_t run_id, const char *text,
		      int64_t n, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc = kp_db_prepare(db, sql, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, run_id);
	if (sqlite3_bind_parameter_count(st) >= 2)
		sqlite3_bind_text(st, 2, text, -1, SQLITE_TRANSIENT);
	if (sqlite3_bind_parameter_count(st) >= 3)
		sqlite3_bind_int64(st, 3, n);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return kp_db_error(db, err, "applying the capture window");
	return 0;
}

int kp_window_apply(struct kp_db *db, int64_t run_id, const struct kp_window *w,
		    int64_t *kept_launches, const char **note, struct kp_err *err)
{
	static const char *const trace[] = {
		"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
		"CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
		"CUPTI_ACTIVITY_KIND_RUNTIME",
	};
	char sql[1024];
	size_t i;
	int rc;

	*note = NULL;
	if (kept_launches)
		*kept_launches = 0;
	if (!kp_window_active(w))
		return 0;
	if ((rc = kp_db_begin(db, err)))
		return rc;
	rc = kp_db_exec(db, "DROP TABLE IF EXISTS temp.kp_win;"
			"CREATE TEMP TABLE kp_win(s INTEGER, e INTEGER);"
			"DROP TABLE IF EXISTS temp.kp_keep;"
			"CREATE TEMP TABLE kp_keep(c INTEGER PRIMARY KEY, s INTEGER)", err);
	if (rc)
		goto out;
	/* 1. intervals */
	if (w->nvtx_range) {
		rc = exec_bound(db, "INSERT INTO kp_win SELECT start, end FROM NVTX_EVENTS"
				" WHERE runId = ?1 AND text = ?2 AND end IS NOT NULL"
				" AND eventType IN (59, 60)", run_id, w->nvtx_range, 0, err);
		if (rc)
			goto out;
	}
	if (w->profiler_api) {
		/* each start pairs with the first stop after it */
		rc = exec_bound(db,
			"INSERT INTO kp_win SELECT a.start, coalesce((SELECT min(b.start)"
			"  FROM CUPTI_ACTIVITY_KIND_RUNTIME b JOIN StringIds sb ON sb.id = b.nameId"
			"  WHERE b.runId = ?1 AND b.start >= a.start"
			"  AND " API_IS("sb", "Stop") "), 9223372036854775807)"
			" FROM CUPTI_ACTIVITY_KIND_RUNTIME a JOIN StringIds sa ON sa.id = a.nameId"
			" WHERE a.runId = ?1 AND " API_IS("sa", "Start"),
			run_id, NULL, 0, err);
		if (rc)
			goto out;
	}
	if (!w->nvtx_range && !w->profiler_api) {
		rc = kp_db_exec(db, "INSERT INTO kp_win VALUES (-9223372036854775807,"
				" 9223372036854775807)", err);
		if (rc)
			goto out;
	}
	if (kp_db_int(db, "SELECT count(*) FROM kp_win", 0) == 0)
		*note = w->nvtx_range ? "capture window: the nvtx range never appeared; nothing kept"
			: "capture window: cudaProfilerStart was never called; nothing kept";
	/* 2. API calls that start inside a window interval */
	rc = exec_bound(db, "INSERT OR IGNORE INTO kp_keep SELECT r.correlationId, r.start"
			" FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = ?1"
			" AND r.correlationId IS NOT NULL"
			" AND EXISTS (SELECT 1 FROM kp_win w WHERE r.start >= w.s AND r.start <= w.e)",
			run_id, NULL, 0, err);
	if (rc)
		goto out;
	/* 3. skip the first N launches */
	if (w->skip > 0) {
		rc = exec_bound(db, "DELETE FROM kp_keep WHERE c IN (SELECT correlationId"
				" FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE runId = ?1"
				" AND correlationId IN (SELECT c FROM kp_keep) AND " LAUNCH_COND
				" ORDER BY start, correlationId LIMIT ?3)", run_id, NULL, w->skip, err);
		if (rc)
			goto out;
	}
	/* 4. delete everything else */
	for (i = 0; i < sizeof(trace) / sizeof(trace[0]); i++) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE runId = ?1 AND"
			 " (correlationId IS NULL OR correlationId NOT IN (SELECT c FROM kp_keep))",
			 trace[i]);
		if ((rc = exec_bound(db, sql, run_id, NULL, 0, err)))
			goto out;
	}
	rc = exec_bound(db, "DELETE FROM kp_launch_args WHERE runId = ?1"
			" AND correlationId NOT IN (SELECT c FROM kp_keep)", run_id, NULL, 0, err);
	if (!rc)
		rc = exec_bound(db, "DELETE FROM kp_launch_attrs WHERE runId = ?1"
				" AND correlationId NOT IN (SELECT c FROM kp_keep)", run_id, NULL, 0, err);
	if (rc)
		goto out;
	/* overhead and NVTX rows: keep those overlapping the kept span */
	rc = exec_bound(db, "DELETE FROM PROFILER_OVERHEAD WHERE runId = ?1 AND"
			" (end < (SELECT coalesce(min(s), 0) FROM kp_keep)"
			"  OR start > (SELECT coalesce(max(s), -1) FROM kp_keep)"
			"  OR NOT EXISTS (SELECT 1 FROM kp_keep))", run_id, NULL, 0, err);
	if (rc)
		goto out;
	if (kept_launches) {
		sqlite3_stmt *st;

		if ((rc = kp_db_prepare(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
					" WHERE runId = ?1 AND " LAUNCH_COND, &st, err)))
			goto out;
		sqlite3_bind_int64(st, 1, run_id);
		if (sqlite3_step(st) == SQLITE_ROW)
			*kept_launches = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	rc = kp_db_exec(db, "DROP TABLE temp.kp_win; DROP TABLE temp.kp_keep", err);
out:
	if (rc) {
		kp_db_rollback(db);
		return rc;
	}
	return kp_db_commit(db, err);
}
