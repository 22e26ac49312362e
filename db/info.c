/* info.c - see info.h. */
#include "info.h"

#include <string.h>

#include "../common/printable.h"

static const char *const counted[] = {
	"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
	"CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
	"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "PROFILER_OVERHEAD",
	"TARGET_INFO_GPU", "StringIds", "kp_launch_args", "kp_launch_attrs", "kp_calibration",
	"kp_regions", "kp_region_occurrences", "kp_blockers", "kp_gaps",
	"kp_fusion_candidates", "kp_plans", "kp_validations",
};

/* column i as printable text into buf[n] (a recorded command line, a GPU
 * name: whatever the trace says), "-" for NULL */
static const char *col(sqlite3_stmt *st, int i, char *buf, size_t n)
{
	const char *s = (const char *)sqlite3_column_text(st, i);

	return s ? kp_printable(buf, n, s) : "-";
}

static void version(FILE *f, const char *label, int v)
{
	/* CUDA encodes 13000 as 13.0; CUPTI versions are plain integers */
	if (v <= 0)
		fprintf(f, "  %-10s -\n", label);
	else if (v >= 1000 && v < 100000)
		fprintf(f, "  %-10s %d.%d\n", label, v / 1000, (v % 1000) / 10);
	else
		fprintf(f, "  %-10s %d\n", label, v);
}

/*
 * What CUPTI said its own work cost the run (PROFILER_OVERHEAD, by kind,
 * the costliest first): where recording slowed the program down, e.g.
 * "command buffer full" stalls of the launching threads, lazy function
 * loading. One line; nothing when the run has no such rows.
 */
static void overhead(struct kp_db *db, FILE *f, int64_t run)
{
	sqlite3_stmt *st;
	int n = 0;

	if (!kp_db_has_table(db, "PROFILER_OVERHEAD") ||
	    kp_db_prepare(db, "SELECT coalesce(s.value, 'unknown'), count(*), sum(o.end - o.start)"
			  " FROM PROFILER_OVERHEAD o LEFT JOIN StringIds s ON s.id = o.nameId"
			  " WHERE o.runId = ?1 GROUP BY 1 ORDER BY 3 DESC, 1", &st, NULL))
		return;
	sqlite3_bind_int64(st, 1, run);
	while (sqlite3_step(st) == SQLITE_ROW) {
		char name[64];

		if (n == 4) {
			fputs(", ...", f);
			break;
		}
		fprintf(f, "%s%s %lld (%.3f ms)", n ? ", " : "  overhead   CUPTI: ",
			col(st, 0, name, sizeof(name)), (long long)sqlite3_column_int64(st, 1),
			(double)sqlite3_column_int64(st, 2) / 1e6);
		n++;
	}
	if (n)
		fputc('\n', f);
	sqlite3_finalize(st);
}

int kp_db_info(struct kp_db *db, FILE *f, struct kp_err *err)
{
	sqlite3_stmt *st;
	size_t i;
	int rc;

	fprintf(f, "database   %s (schema v%d)\n", db->path, db->schema_version);
	rc = kp_db_prepare(db,
		"SELECT runId, source, source_path, command, device_name, compute_major,"
		" compute_minor, sm_count, driver_version, runtime_version, cupti_version,"
		" dropped_records, dropped_detail, status, t_begin_ns, t_end_ns, host,"
		" rank, local_rank, world_size FROM kp_runs ORDER BY runId", &st, err);
	if (rc)
		return rc;
	while (sqlite3_step(st) == SQLITE_ROW) {
		char b1[64], b2[64], b3[4096];
		int64_t dropped = sqlite3_column_int64(st, 11);
		int64_t span = sqlite3_column_int64(st, 15) - sqlite3_column_int64(st, 14);

		fprintf(f, "run %lld    %s (%s)\n", (long long)sqlite3_column_int64(st, 0),
			col(st, 1, b1, sizeof(b1)), col(st, 13, b2, sizeof(b2)));
		if (sqlite3_column_type(st, 2) != SQLITE_NULL)
			fprintf(f, "  source     %s\n", col(st, 2, b3, sizeof(b3)));
		if (sqlite3_column_type(st, 3) != SQLITE_NULL)
			fprintf(f, "  command    %s\n", col(st, 3, b3, sizeof(b3)));
		if (sqlite3_column_type(st, 16) != SQLITE_NULL)
			fprintf(f, "  host       %s\n", col(st, 16, b3, sizeof(b3)));
		if (sqlite3_column_type(st, 17) != SQLITE_NULL) {
			/* one run per process of a multi-process job */
			fprintf(f, "  rank       %d", sqlite3_column_int(st, 17));
			if (sqlite3_column_type(st, 19) != SQLITE_NULL)
				fprintf(f, " of %d", sqlite3_column_int(st, 19));
			if (sqlite3_column_type(st, 18) != SQLITE_NULL)
				fprintf(f, " (local rank %d)", sqlite3_column_int(st, 18));
			fputc('\n', f);
		}
		fprintf(f, "  gpu        %s, compute %d.%d, %d SMs\n", col(st, 4, b3, sizeof(b3)),
			sqlite3_column_int(st, 5), sqlite3_column_int(st, 6),
			sqlite3_column_int(st, 7));
		version(f, "driver", sqlite3_column_int(st, 8));
		version(f, "runtime", sqlite3_column_int(st, 9));
		version(f, "cupti", sqlite3_column_int(st, 10));
		if (sqlite3_column_type(st, 14) != SQLITE_NULL)
			fprintf(f, "  span       %.3f ms\n", span / 1e6);
		if (dropped)
			fprintf(f, "  DROPPED    %lld records (%s)\n", (long long)dropped,
				col(st, 12, b3, sizeof(b3)));
		else
			fprintf(f, "  dropped    0 records\n");
		overhead(db, f, sqlite3_column_int64(st, 0));
	}
	sqlite3_finalize(st);
	fprintf(f, "tables\n");
	for (i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
		char sql[128];

		if (!kp_db_has_table(db, counted[i]))
			continue;
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", counted[i]);
		fprintf(f, "  %-36s %lld\n", counted[i], (long long)kp_db_int(db, sql, 0));
	}
	return 0;
}
