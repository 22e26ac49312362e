/*
 * test_importers.c - importers/: Chrome-trace (Kineto) import, nsys-export
 * import, Chrome-trace export and the round trip, bad input.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <CUnit/CUnit.h>

#include "common/hash.h"
#include "db/db.h"
#include "db/writer.h"
#include "importers/chrome_export.h"
#include "importers/import.h"
#include "importers/kineto.h"
#include "testutil.h"

#define FIXTURE "tests/fixtures/resnet18_b1.json.gz"

/* ------------------------------------------------------------------ helpers */

/* A fresh empty directory under the test tmpdir. */
static const char *new_dir(const char *name)
{
	const char *d = kp_test_path(name);

	mkdir(d, 0755);
	return d;
}

static const char *in_dir(const char *dir, const char *name)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s", strrchr(dir, '/') + 1, name);
	return kp_test_path(p);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		/* read-only opens may leave empty -wal/-shm files: not ours */
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (len > 4 && (!strcmp(e->d_name + len - 4, "-wal") ||
				 !strcmp(e->d_name + len - 4, "-shm"))))
			continue;
		n++;
	}
	closedir(d);
	return n;
}

static struct kp_db *open_ro(const char *path)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(path, KP_DB_RDONLY, &err);

	if (!db)
		fprintf(stderr, "open %s: %s\n", path, err.msg);
	return db;
}

static int64_t q(const char *path, const char *sql)
{
	struct kp_db *db = open_ro(path);
	int64_t v;

	if (!db)
		return -1;
	v = kp_db_int(db, sql, -1);
	kp_db_close(db);
	return v;
}

/* hash of every row of sql, column text by column text */
static uint64_t hash_rows(struct kp_db *db, const char *sql, int64_t *rows)
{
	sqlite3_stmt *st;
	uint64_t h = KP_HASH_SEED;
	int i, n;

	*rows = 0;
	if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "hash_rows: %s\n", sqlite3_errmsg(db->h));
		return 0;
	}
	n = sqlite3_column_count(st);
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (i = 0; i < n; i++) {
			const unsigned char *t = sqlite3_column_text(st, i);

			h = kp_hash64(t ? (const char *)t : "\1NULL", t ? strlen((const char *)t) : 5, h);
			h = kp_hash64("|", 1, h);
		}
		(*rows)++;
	}
	sqlite3_finalize(st);
	return h;
}

struct digest {
	uint64_t kernel, runtime, nvtx, memset;
	int64_t n_kernel, n_runtime, n_nvtx, n_memset;
};

/* Checksums of the kernel/runtime/nvtx/memset rows of the newest run, ids
 * replaced by the strings they stand for. */
static int digest(const char *path, struct digest *d)
{
	struct kp_db *db = open_ro(path);

	if (!db)
		return -1;
	d->kernel = hash_rows(db,
		"SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId,"
		" k.globalPid, s.value, k.registersPerThread, k.gridX, k.gridY, k.gridZ, k.blockX,"
		" k.blockY, k.blockZ, k.staticSharedMemory, k.dynamicSharedMemory"
		" FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
		" WHERE k.runId = (SELECT max(runId) FROM kp_runs) ORDER BY 1, 2, 3, 5, 6, 8",
		&d->n_kernel);
	d->runtime = hash_rows(db,
		"SELECT r.start, r.end, r.eventClass, r.globalTid, r.correlationId, s.value,"
		" r.returnValue FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
		" WHERE r.runId = (SELECT max(runId) FROM kp_runs) ORDER BY 1, 2, 4, 5, 6",
		&d->n_runtime);
	d->nvtx = hash_rows(db,
		"SELECT n.start, n.end, n.eventType, n.category, n.text, n.globalTid,"
		" CASE n.domainId WHEN 0 THEN '' ELSE (SELECT value FROM StringIds WHERE id = n.domainId) END"
		" FROM NVTX_EVENTS n WHERE n.runId = (SELECT max(runId) FROM kp_runs)"
		" AND n.eventType != 75 ORDER BY 1, 2, 3, 4, 5, 6, 7", &d->n_nvtx);
	d->memset = hash_rows(db,
		"SELECT start, end, deviceId, streamId, correlationId, bytes, value, memKind"
		" FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE runId = (SELECT max(runId) FROM kp_runs)"
		" ORDER BY 1, 2, 3, 4, 5", &d->n_memset);
	kp_db_close(db);
	return 0;
}

static int import_file(const char *trace, const char *out, struct kp_import_stats *st,
		       struct kp_err *err)
{
	int rc = kp_import(trace, out, NULL, st, err);

	if (rc && rc != err->code)
		fprintf(stderr, "import: rc %d but err %d\n", rc, err->code);
	return rc;
}

/* ------------------------------------------------------------------ numbers */

static void test_parse_us(void)
{
	int64_t v = 0;

	CU_ASSERT_EQUAL(kp_import_parse_us("4446475346144.640", 17, &v), 0);
	CU_ASSERT_EQUAL(v, 4446475346144640LL);
	CU_ASSERT_EQUAL(kp_import_parse_us("5259.559", 8, &v), 0);
	CU_ASSERT_EQUAL(v, 5259559);
	CU_ASSERT_EQUAL(kp_import_parse_us("12", 2, &v), 0);
	CU_ASSERT_EQUAL(v, 12000);
	CU_ASSERT_EQUAL(kp_import_parse_us("-1.5", 4, &v), 0);
	CU_ASSERT_EQUAL(v, -1500);
	CU_ASSERT_EQUAL(kp_import_parse_us("1.2345", 6, &v), 0);   /* 1234.5 ns */
	CU_ASSERT_EQUAL(v, 1235);
	CU_ASSERT_EQUAL(kp_import_parse_us("1.2344", 6, &v), 0);
	CU_ASSERT_EQUAL(v, 1234);
	CU_ASSERT_EQUAL(kp_import_parse_us("2e3", 3, &v), 0);
	CU_ASSERT_EQUAL(v, 2000000);
	CU_ASSERT_EQUAL(kp_import_parse_us("1.5E-3", 6, &v), 0);
	CU_ASSERT_EQUAL(v, 2);
	CU_ASSERT_EQUAL(kp_import_parse_us("0.0", 3, &v), 0);
	CU_ASSERT_EQUAL(v, 0);
	/* a value whose double is not exact: 0.1 + 0.2 style digits stay exact */
	CU_ASSERT_EQUAL(kp_import_parse_us("9007199254740.993", 17, &v), 0);
	CU_ASSERT_EQUAL(v, 9007199254740993LL);
	CU_ASSERT_EQUAL(kp_import_parse_us("", 0, &v), -1);
	CU_ASSERT_EQUAL(kp_import_parse_us("abc", 3, &v), -1);
	CU_ASSERT_EQUAL(kp_import_parse_us("1.2.3", 5, &v), -1);
	CU_ASSERT_EQUAL(kp_import_parse_us("1e30", 4, &v), -1);
	CU_ASSERT_EQUAL(kp_import_parse_int("392", 3, &v), 0);
	CU_ASSERT_EQUAL(v, 392);
	CU_ASSERT_EQUAL(kp_import_parse_int("5.939394", 8, &v), 0);
	CU_ASSERT_EQUAL(v, 6);
}

static void test_detect(void)
{
	const char *p = kp_test_path("detect.txt");
	struct kp_err err = {0};
	int fmt = -1;

	CU_ASSERT_EQUAL(kp_import_detect(kp_test_src(FIXTURE), &fmt, &err), 0);
	CU_ASSERT_EQUAL(fmt, KP_IMPORT_CHROME);
	kp_test_write(p, "  \n {\"traceEvents\": []}", -1);
	CU_ASSERT_EQUAL(kp_import_detect(p, &fmt, &err), 0);
	CU_ASSERT_EQUAL(fmt, KP_IMPORT_CHROME);
	kp_test_write(p, "hello world", -1);
	CU_ASSERT_EQUAL(kp_import_detect(p, &fmt, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a trace"));
	kp_test_write(p, "", 0);
	CU_ASSERT_EQUAL(kp_import_detect(p, &fmt, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "empty"));
	/* a directory is named as one, not as an empty file */
	p = kp_test_path("trace-dir");
	CU_ASSERT_EQUAL(kp_test_sh("mkdir -p %s", p), 0);
	CU_ASSERT_EQUAL(kp_import_detect(p, &fmt, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is a directory; expected a trace file"));
}

/* ------------------------------------------------------------------ resnet */

static void test_resnet_counts(void)
{
	const char *dir = new_dir("resnet");
	const char *out = in_dir(dir, "run.db");
	struct kp_import_stats st;
	struct kp_err err = {0};

	CU_ASSERT_EQUAL_FATAL(import_file(kp_test_src(FIXTURE), out, &st, &err), 0);
	CU_ASSERT_EQUAL(st.format, KP_IMPORT_CHROME);
	CU_ASSERT_EQUAL(st.run_id, 1);
	CU_ASSERT_EQUAL(st.appended, 0);
	CU_ASSERT_EQUAL(st.rows[KP_T_KERNEL], 1020);
	CU_ASSERT_EQUAL(st.rows[KP_T_MEMSET], 70);
	CU_ASSERT_EQUAL(st.rows[KP_T_RUNTIME], 2202);
	CU_ASSERT_EQUAL(st.uncorrelated, 0);
	CU_ASSERT_EQUAL(st.skipped, 3);   /* one "Trace" span, two instant events */
	CU_ASSERT_EQUAL(dir_entries(dir), 1);   /* no temporary file left */

	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'step'"
			  " AND eventType = 59 AND category = 0 AND domainId = 0"), 10);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'step'"
			  " AND category = 1"), 10);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 1020);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"), 70);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"), 2202);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
			  " WHERE eventClass = 0"), 2202);
	/* cpu ops live in their own domain, named in StringIds */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds s"
			  " ON s.id = n.domainId WHERE s.value = 'pytorch.cpu_op' AND n.eventType = 59"),
			3130);
	/* the run row */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM kp_runs WHERE device_name = 'NVIDIA H200'"
			  " AND sm_count = 132 AND compute_major = 9 AND compute_minor = 0"
			  " AND source = 'chrome' AND status = 'complete'"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT driver_version * 1000000 + cupti_version FROM kp_runs"),
			13000LL * 1000000 + 130001);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM TARGET_INFO_GPU WHERE name = 'NVIDIA H200'"
			  " AND smCount = 132 AND computeMajor = 9 AND totalMemory = 150109880320"), 1);
	/* exact nanoseconds from "ts": 4446475346144.640, "dur": 5259.559 */
	CU_ASSERT_EQUAL(q(out, "SELECT min(start) FROM NVTX_EVENTS WHERE text = 'step'"),
			4446475346144640LL);
	CU_ASSERT_EQUAL(q(out, "SELECT end - start FROM NVTX_EVENTS WHERE start = 4446475346144640"
			  " AND text = 'step'"), 5259559);
	/* kernel fields: the first conv kernel */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE"
			  " correlationId = 652062 AND gridX = 392 AND gridY = 2 AND gridZ = 1"
			  " AND blockX = 8 AND blockY = 8 AND registersPerThread = 64"
			  " AND staticSharedMemory = 2304 AND streamId = 7 AND deviceId = 0"
			  " AND start = 4446475348558057 AND end = 4446475348576361"), 1);
	/* every launch is joined to its runtime call */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
			  " JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"), 1020);
	CU_ASSERT_EQUAL(q(out, "SELECT count(DISTINCT globalTid) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
			  " WHERE globalTid = (400 << 24) | 400"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE globalPid = 400 << 24"), 1020);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE memKind = 3"
			  " AND bytes > 0"), 70);
}

/* ------------------------------------------------------------------ round trip */

static void test_roundtrip(void)
{
	const char *dir = new_dir("roundtrip");
	const char *db1 = in_dir(dir, "a.db"), *db2 = in_dir(dir, "b.db");
	const char *json = in_dir(dir, "a.json");
	struct kp_chrome_export_stats es;
	struct kp_import_stats st1, st2;
	struct digest d1, d2;
	struct kp_err err = {0};
	struct kp_db *db;
	FILE *f;

	CU_ASSERT_EQUAL_FATAL(import_file(kp_test_src(FIXTURE), db1, &st1, &err), 0);
	db = open_ro(db1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	f = fopen(json, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_export_chrome(db, 0, f, &es, &err), 0);
	fclose(f);
	kp_db_close(db);
	CU_ASSERT_EQUAL(es.run_id, 1);
	CU_ASSERT(es.events > 1020 + 2202 + 70 + 3150);
	/* valid JSON that the importer reads back */
	CU_ASSERT_EQUAL_FATAL(import_file(json, db2, &st2, &err), 0);
	if (err.code)
		fprintf(stderr, "%s\n", err.msg);
	CU_ASSERT_EQUAL(st2.skipped, 0);
	CU_ASSERT_EQUAL(st2.uncorrelated, 0);
	CU_ASSERT_EQUAL(memcmp(st1.rows, st2.rows, sizeof(st1.rows)), 0);
	CU_ASSERT_EQUAL_FATAL(digest(db1, &d1), 0);
	CU_ASSERT_EQUAL_FATAL(digest(db2, &d2), 0);
	CU_ASSERT_EQUAL(d1.n_kernel, 1020);
	CU_ASSERT_EQUAL(d1.n_runtime, 2202);
	CU_ASSERT_EQUAL(d1.n_nvtx, 3150);
	CU_ASSERT_EQUAL(d1.n_memset, 70);
	CU_ASSERT_EQUAL(d1.n_kernel, d2.n_kernel);
	CU_ASSERT_EQUAL(d1.n_runtime, d2.n_runtime);
	CU_ASSERT_EQUAL(d1.n_nvtx, d2.n_nvtx);
	CU_ASSERT_EQUAL(d1.kernel, d2.kernel);
	CU_ASSERT_EQUAL(d1.runtime, d2.runtime);
	CU_ASSERT_EQUAL(d1.nvtx, d2.nvtx);
	CU_ASSERT_EQUAL(d1.memset, d2.memset);
	CU_ASSERT_EQUAL(q(db2, "SELECT count(*) FROM kp_runs WHERE device_name = 'NVIDIA H200'"
			  " AND sm_count = 132 AND compute_major = 9 AND cupti_version = 130001"), 1);
}

/* analyzer tables become their own tracks */
static void test_export_analysis_tracks(void)
{
	const char *dir = new_dir("tracks");
	const char *db1 = in_dir(dir, "a.db"), *json = in_dir(dir, "a.json");
	struct kp_chrome_export_stats es;
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct kp_db *db;
	char *text;
	FILE *f;

	CU_ASSERT_EQUAL_FATAL(import_file(kp_test_src(FIXTURE), db1, &st, &err), 0);
	db = kp_db_open(db1, 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_exec(db,
		"INSERT INTO kp_regions(runId, regionId, label, source, occurrences, kernels,"
		" eager_ns, busy_ns, host_idle_ns, device_idle_ns, capturable)"
		" VALUES (1, 0, 'step', 'nvtx', 2, 102, 2000000, 400000, 1500000, 0, 1);"
		"INSERT INTO kp_region_occurrences(runId, regionId, occIndex, start, end, kernels)"
		" VALUES (1, 0, 0, 4446475346144640, 4446475351404199, 102),"
		" (1, 0, 1, 4446475352000000, 4446475353000001, 102);"
		"INSERT INTO kp_gaps(runId, deviceId, streamId, correlationId, kernel_start, gap_ns,"
		" host_bound) VALUES (1, 0, 7, 652101, 4446475348742056, 165695, 1),"
		" (1, 0, 7, 652102, 4446475348752056, 100, 0);", &err), 0);
	f = fopen(json, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_export_chrome(db, 1, f, &es, &err), 0);
	fclose(f);
	kp_db_close(db);
	CU_ASSERT_EQUAL(es.regions, 2);
	CU_ASSERT_EQUAL(es.gaps, 1);
	text = kp_test_read(json, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"cat\":\"kplan_region\",\"name\":\"step\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"ts\":4446475352000.000,\"dur\":1000.001"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"cat\":\"kplan_gap\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"ts\":4446475348576.361,\"dur\":165.695"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "kplan analysis"));
	free(text);
	/* analysis tracks are not imported back as trace rows */
	CU_ASSERT_EQUAL(import_file(json, in_dir(dir, "b.db"), &st, &err), 0);
	CU_ASSERT_EQUAL(st.skipped, 0);
	CU_ASSERT_EQUAL(st.rows[KP_T_NVTX], 3151);
}

/* ------------------------------------------------------------------ small traces */

static void test_flows_and_order(void)
{
	const char *dir = new_dir("flows");
	const char *json = in_dir(dir, "t.json"), *out = in_dir(dir, "t.db");
	struct kp_import_stats st;
	struct kp_err err = {0};

	/* correlation only in flows; deviceProperties after traceEvents; an
	 * unknown category; a driver call; a memcpy */
	kp_test_write(json,
		"{\"traceEvents\": ["
		" {\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernel\", \"pid\": 9,"
		"  \"tid\": 11, \"ts\": 100.5, \"dur\": 2, \"args\": {}},"
		" {\"ph\": \"s\", \"id\": 77, \"pid\": 9, \"tid\": 11, \"ts\": 100.5, \"cat\": \"ac2g\","
		"  \"name\": \"ac2g\"},"
		" {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k1\", \"pid\": 1, \"tid\": 3,"
		"  \"ts\": 110.25, \"dur\": 1.001, \"args\": {\"grid\": [4, 2, 1], \"block\": [32, 1, 1],"
		"  \"registers per thread\": 16, \"shared memory\": 128, \"nested\": {\"a\": [1, {}]}}},"
		" {\"ph\": \"f\", \"id\": 77, \"pid\": 1, \"tid\": 3, \"ts\": 110.25, \"cat\": \"ac2g\","
		"  \"name\": \"ac2g\", \"bp\": \"e\"},"
		" {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pageable -> Device)\","
		"  \"pid\": 1, \"tid\": 3, \"ts\": 120, \"dur\": 3,"
		"  \"args\": {\"device\": 1, \"stream\": 3, \"correlation\": 78, \"bytes\": 4096}},"
		" {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"f\", \"pid\": 9, \"tid\": 11,"
		"  \"ts\": 99, \"dur\": 30},"
		" {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"step\", \"pid\": 9, \"tid\": 11,"
		"  \"ts\": 99, \"dur\": 40}"
		"],"
		" \"deviceProperties\": [{\"id\": 1, \"name\": \"Test GPU\", \"computeMajor\": 8,"
		"  \"computeMinor\": 6, \"numSms\": 84}],"
		" \"cuda_runtime_version\": 12040}", -1);
	CU_ASSERT_EQUAL_FATAL(import_file(json, out, &st, &err), 0);
	CU_ASSERT_EQUAL(st.rows[KP_T_KERNEL], 1);
	CU_ASSERT_EQUAL(st.rows[KP_T_RUNTIME], 1);
	CU_ASSERT_EQUAL(st.rows[KP_T_MEMCPY], 1);
	CU_ASSERT_EQUAL(st.skipped, 0);   /* python_function: a range in its own domain */
	CU_ASSERT_EQUAL(st.uncorrelated, 0);
	CU_ASSERT_EQUAL(q(out, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL"), 77);
	CU_ASSERT_EQUAL(q(out, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"), 77);
	CU_ASSERT_EQUAL(q(out, "SELECT eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"), (9LL << 24) | 11);
	CU_ASSERT_EQUAL(q(out, "SELECT end - start FROM CUPTI_ACTIVITY_KIND_KERNEL"), 1001);
	CU_ASSERT_EQUAL(q(out, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL"), 110250);
	CU_ASSERT_EQUAL(q(out, "SELECT gridX * 100 + gridY * 10 + gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL"),
			421);
	CU_ASSERT_EQUAL(q(out, "SELECT deviceId * 10 + streamId FROM CUPTI_ACTIVITY_KIND_KERNEL"), 13);
	CU_ASSERT_EQUAL(q(out, "SELECT copyKind * 100 + srcKind * 10 + dstKind"
			  " FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE bytes = 4096"), 113);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM kp_runs WHERE device_name = 'Test GPU'"
			  " AND compute_major = 8 AND compute_minor = 6 AND sm_count = 84"
			  " AND runtime_version = 12040 AND pid = 9"), 1);
}

/*
 * Python frames (profiler with_stack=True) become ranges in their own
 * domain, like cpu ops, on the thread they ran on; region finding ignores
 * both, and the export writes them back with their categories.
 */
static void test_python_frames(void)
{
	const char *dir = new_dir("pyframes");
	const char *json = in_dir(dir, "t.json"), *out = in_dir(dir, "t.db");
	const char *back = in_dir(dir, "back.json"), *out2 = in_dir(dir, "back.db");
	struct kp_chrome_export_stats es;
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct digest d1, d2;
	struct kp_db *db;
	FILE *f;

	kp_test_write(json,
		"{\"traceEvents\": ["
		" {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"train.py(42): step\","
		"  \"pid\": 9, \"tid\": 11, \"ts\": 100, \"dur\": 50,"
		"  \"args\": {\"Python id\": 3, \"Python parent id\": 1}},"
		" {\"ph\": \"X\", \"cat\": \"python_function\","
		"  \"name\": \"torch/_tensor.py(900): nonzero\", \"pid\": 9, \"tid\": 11,"
		"  \"ts\": 110, \"dur\": 20},"
		" {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::nonzero\", \"pid\": 9,"
		"  \"tid\": 11, \"ts\": 112, \"dur\": 15},"
		" {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\","
		"  \"pid\": 9, \"tid\": 11, \"ts\": 115, \"dur\": 5, \"args\": {\"correlation\": 5}},"
		" {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"step\", \"pid\": 9,"
		"  \"tid\": 11, \"ts\": 99, \"dur\": 60}"
		"]}", -1);
	CU_ASSERT_EQUAL_FATAL(import_file(json, out, &st, &err), 0);
	CU_ASSERT_EQUAL(st.skipped, 0);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds s"
			  " ON s.id = n.domainId WHERE s.value = 'pytorch.python' AND n.eventType = 59"
			  " AND n.globalTid = (9 << 24) | 11"), 2);
	CU_ASSERT_EQUAL(q(out, "SELECT start FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.domainId"
			  " WHERE s.value = 'pytorch.python' AND n.text = 'train.py(42): step'"), 100000);
	/* one domain-create row per domain, named as nsys names them */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75"
			  " AND text IN ('pytorch.python', 'pytorch.cpu_op')"), 2);
	/* the annotation stays the only domain-0 range */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59"
			  " AND domainId = 0"), 1);
	/* export and import again: the same ranges in the same domains */
	db = open_ro(out);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	f = fopen(back, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_export_chrome(db, 0, f, &es, &err), 0);
	fclose(f);
	kp_db_close(db);
	CU_ASSERT_EQUAL_FATAL(import_file(back, out2, &st, &err), 0);
	CU_ASSERT_EQUAL(st.skipped, 0);
	CU_ASSERT_EQUAL_FATAL(digest(out, &d1), 0);
	CU_ASSERT_EQUAL_FATAL(digest(out2, &d2), 0);
	CU_ASSERT_EQUAL(d1.n_nvtx, 4);
	CU_ASSERT_EQUAL(d1.n_nvtx, d2.n_nvtx);
	CU_ASSERT_EQUAL(d1.nvtx, d2.nvtx);
}

/*
 * A kplan recording through `kplan export --chrome` and back (how the C
 * examples enter the validation corpus): libkplanrt's region ranges keep
 * their domain (the collector names it in a create event under its own id,
 * not a StringIds id) and category, so they are runtime regions again and
 * not GPU-side annotations; a launch recorded with programmatic dependent
 * launch keeps its kp_launch_attrs row.
 */
static void test_export_recording(void)
{
	const char *dir = new_dir("recording");
	const char *rec = in_dir(dir, "rec.db"), *json = in_dir(dir, "rec.json");
	const char *back = in_dir(dir, "back.db");
	struct kp_run_info ri = { .source = "kplan record", .device_name = "TestGPU",
				  .driver_version = 580 };
	struct kp_chrome_export_stats es;
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct kp_writer w;
	struct kp_db *db;
	int64_t run;
	FILE *f;

	db = kp_db_open(rec, KP_DB_CREATE, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL_FATAL(kp_db_run_insert(db, &ri, &run, &err), 0);
	kp_writer_init(&w, db, run);
	{
		struct kp_nvtx_rec dom = { .start = 10, .end = -1, .event_type = 75, .text = "kplan",
					   .global_tid = KP_GLOBAL_TID(9, 11), .domain_id = 7 };
		struct kp_nvtx_rec r = { .start = 100000, .end = 200000,
					 .event_type = KP_NVTX_PUSHPOP, .text = "mlp.forward",
					 .category = 1, .global_tid = KP_GLOBAL_TID(9, 11),
					 .domain_id = 7 };
		struct kp_api_rec a = { .start = 110000, .end = 112000,
					.name = "cudaLaunchKernelExC", .correlation_id = 5,
					.global_tid = KP_GLOBAL_TID(9, 11) };
		struct kp_kernel_rec k = { .start = 120000, .end = 125000, .stream_id = 13,
					   .correlation_id = 5, .name = "pdl_kernel",
					   .grid = { 8, 1, 1 }, .block = { 128, 1, 1 } };

		CU_ASSERT_EQUAL(kp_writer_nvtx(&w, &dom, &err), 0);
		CU_ASSERT_EQUAL(kp_writer_nvtx(&w, &r, &err), 0);
		CU_ASSERT_EQUAL(kp_writer_api(&w, &a, &err), 0);
		CU_ASSERT_EQUAL(kp_writer_kernel(&w, &k, &err), 0);
		a.start = 130000, a.end = 131000, a.correlation_id = 6;
		k.start = 140000, k.end = 141000, k.correlation_id = 6, k.name = "plain_kernel";
		CU_ASSERT_EQUAL(kp_writer_api(&w, &a, &err), 0);
		CU_ASSERT_EQUAL(kp_writer_kernel(&w, &k, &err), 0);
		CU_ASSERT_EQUAL(kp_writer_pdl(&w, 5, &err), 0);
		CU_ASSERT_EQUAL(kp_writer_pdl(&w, 5, &err), 0);   /* a second row is ignored */
	}
	kp_writer_release(&w);
	f = fopen(json, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(kp_export_chrome(db, run, f, &es, &err), 0);
	fclose(f);
	kp_db_close(db);
	CU_ASSERT_EQUAL_FATAL(import_file(json, back, &st, &err), 0);
	CU_ASSERT_EQUAL(st.skipped, 0);
	CU_ASSERT_EQUAL(q(back, "SELECT count(*) FROM kp_launch_attrs WHERE pdl = 1"), 1);
	CU_ASSERT_EQUAL(q(back, "SELECT k.correlationId FROM kp_launch_attrs a JOIN"
			  " CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = a.correlationId"
			  " JOIN StringIds s ON s.id = k.shortName WHERE s.value = 'pdl_kernel'"), 5);
	/* the range: CPU side, category 1, in the domain named kplan */
	CU_ASSERT_EQUAL(q(back, "SELECT count(*) FROM NVTX_EVENTS n WHERE n.eventType = 59"
			  " AND n.category = 1 AND n.text = 'mlp.forward' AND n.domainId ="
			  " (SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'kplan')"
			  " AND n.globalTid = (9 << 24) | 11 AND n.start = 100000"), 1);
}

/* ------------------------------------------------------------------ bad input */

/* Import must fail with code and words in the message, leave dir as it was. */
static void expect_bad(const char *trace, const char *dir, int code, const char *w1,
		       const char *w2)
{
	struct kp_import_stats st;
	struct kp_err err = {0};
	int before = dir_entries(dir);

	CU_ASSERT_EQUAL(kp_import(trace, in_dir(dir, "out.db"), NULL, &st, &err), code);
	CU_ASSERT_EQUAL(err.code, code);
	if (w1 && !strstr(err.msg, w1))
		fprintf(stderr, "\nmessage '%s' lacks '%s'\n", err.msg, w1);
	CU_ASSERT(!w1 || strstr(err.msg, w1));
	CU_ASSERT(!w2 || strstr(err.msg, w2));
	CU_ASSERT_PTR_NULL(strchr(err.msg, '\n'));
	CU_ASSERT_EQUAL(dir_entries(dir), before);
}

static void test_bad_truncated_gzip(void)
{
	const char *dir = new_dir("bad_gz"), *p = kp_test_path("truncated.json.gz");
	size_t n;
	char *gz = kp_test_read(kp_test_src(FIXTURE), &n);

	CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
	kp_test_write(p, gz, (long)(n / 2));
	expect_bad(p, dir, KP_EFORMAT, "truncated.json.gz", "truncated gzip");
	/* whole, but with damaged deflate data */
	gz[n / 2] ^= 0x55;
	gz[n / 2 + 1] ^= 0xaa;
	kp_test_write(p, gz, (long)n);
	free(gz);
	expect_bad(p, dir, KP_EFORMAT, "truncated.json.gz", NULL);
}

static void test_bad_json(void)
{
	const char *dir = new_dir("bad_json"), *p = kp_test_path("bad.json");

	kp_test_write(p, "{\"traceEvents\": [\n {\"ph\": \"X\", \"cat\": \"kernel\" \"name\": 1}]}", -1);
	expect_bad(p, dir, KP_EFORMAT, "invalid JSON at byte 4", "bad.json");
	/* ends inside the document */
	kp_test_write(p, "{\"traceEvents\": [{\"ph\": \"X\"", -1);
	expect_bad(p, dir, KP_EFORMAT, "invalid JSON at byte", "ends inside");
}

static void test_bad_not_trace(void)
{
	const char *dir = new_dir("bad_nottrace"), *p = kp_test_path("notrace.json");

	kp_test_write(p, "{\"schemaVersion\": 1, \"deviceProperties\": [], \"other\": {\"a\": [1]}}", -1);
	expect_bad(p, dir, KP_EFORMAT, "not a trace", "traceEvents");
	kp_test_write(p, "[1, 2, 3]", -1);
	expect_bad(p, dir, KP_EFORMAT, "not a trace", "array");
	kp_test_write(p, "{\"traceEvents\": 5}", -1);
	expect_bad(p, dir, KP_EFORMAT, "not a trace", "not an array");
}

static void test_bad_missing_field(void)
{
	const char *dir = new_dir("bad_field"), *p = kp_test_path("field.json");

	kp_test_write(p, "{\"traceEvents\": ["
		      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"pid\": 1, \"tid\": 1,"
		      " \"ts\": 1, \"dur\": 1},"
		      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7,"
		      " \"ts\": 5}]}", -1);
	expect_bad(p, dir, KP_EFORMAT, "event 1 (cat kernel)", "'dur'");
	kp_test_write(p, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cuda_runtime\","
		      " \"name\": \"cudaMalloc\", \"pid\": \"host\", \"tid\": 1, \"ts\": 1, \"dur\": 1}]}",
		      -1);
	expect_bad(p, dir, KP_EFORMAT, "event 0", "'pid' is not a number");
	kp_test_write(p, "{\"traceEvents\": [{\"cat\": \"kernel\"}]}", -1);
	expect_bad(p, dir, KP_EFORMAT, "event 0", "'ph'");
}

/* A failed import into an existing database leaves it as it was. */
static void test_bad_existing_db_unchanged(void)
{
	const char *dir = new_dir("bad_existing"), *db = in_dir(dir, "out.db");
	const char *p = kp_test_path("late_error.json");
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct digest d1, d2;

	CU_ASSERT_EQUAL_FATAL(import_file(kp_test_src(FIXTURE), db, &st, &err), 0);
	CU_ASSERT_EQUAL_FATAL(digest(db, &d1), 0);
	/* the error comes after rows have been written */
	kp_test_write(p, "{\"traceEvents\": ["
		      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7,"
		      " \"ts\": 5, \"dur\": 1, \"args\": {\"correlation\": 1}},"
		      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7,"
		      " \"ts\": 6}]}", -1);
	expect_bad(p, dir, KP_EFORMAT, "event 1", "'dur'");
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM kp_runs"), 1);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 1020);
	CU_ASSERT_EQUAL_FATAL(digest(db, &d2), 0);
	CU_ASSERT_EQUAL(d1.kernel, d2.kernel);
	CU_ASSERT_EQUAL(d1.nvtx, d2.nvtx);
	/* and a good import appends a second run */
	CU_ASSERT_EQUAL(import_file(kp_test_src(FIXTURE), db, &st, &err), 0);
	CU_ASSERT_EQUAL(st.appended, 1);
	CU_ASSERT_EQUAL(st.run_id, 2);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = 2"), 1020);
	/* a kplan database is not a trace */
	expect_bad(db, new_dir("bad_kplan"), KP_EFORMAT, "already a kplan database", NULL);
}

/* ------------------------------------------------------------------ nsys */

static int sql_file(const char *path, const char *sql)
{
	sqlite3 *h;
	char *msg = NULL;
	int rc;

	unlink(path);
	if (sqlite3_open(path, &h) != SQLITE_OK)
		return -1;
	rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "sql_file: %s\n", msg);
	sqlite3_free(msg);
	sqlite3_close(h);
	return rc == SQLITE_OK ? 0 : -1;
}

/* nsys's layout: nsys column names (more than kplan uses), no runId column,
 * names as StringIds ids, API names with version suffixes, lazily created
 * tables (no MEMCPY / SYNCHRONIZATION here). */
#define NSYS_TABLES \
	"CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);" \
	"INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'cuLaunchKernel')," \
	" (3, 'void gemm<float>(float*, int)'), (4, 'gemm'), (5, 'forward'), (6, 'cudaMemsetAsync_v3020')," \
	" (7, 'my.domain');" \
	"CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);" \
	"CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT NOT NULL, busLocation TEXT," \
	" isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER," \
	" clockRate INTEGER, smCount INTEGER, pageableMemoryAccess INTEGER, computeMajor INTEGER," \
	" computeMinor INTEGER, maxShmemPerBlock INTEGER, threadsPerWarp INTEGER, uuid TEXT);" \
	"INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100 80GB HBM3', '0000:1a:00.0', 1, 52428800," \
	" 85520809984, 3352320000000, 1980000, 132, 0, 9, 0, 49152, 32, 'GPU-1234');" \
	"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL," \
	" deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER," \
	" streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER," \
	" demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER," \
	" launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL," \
	" gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL," \
	" blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL," \
	" staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL," \
	" localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL," \
	" gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER," \
	" sharedMemoryLimitConfig INTEGER);" \
	"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES" \
	" (1000, 3000, 0, 1, NULL, 7, 11, 4660 << 24, 3, 4, NULL, 0, 0, 40, 128, 1, 1, 256, 1, 1," \
	"  0, 1024, 0, 0, 5, 0, NULL, NULL)," \
	" (5000, 6500, 0, 1, NULL, 7, 12, 4660 << 24, 3, 4, NULL, 0, 0, 40, 64, 1, 1, 256, 1, 1," \
	"  0, 0, 0, 0, 6, 0, NULL, NULL);" \
	"CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL," \
	" eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER," \
	" nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);" \
	"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (500, 900, 1, (4660 << 24) | 4661, 11, 1, 0, NULL)," \
	" (4000, 4800, 3, (4660 << 24) | 4661, 12, 2, 0, NULL)," \
	" (7000, 7100, 1, (4660 << 24) | 4661, 13, 6, 0, NULL);" \
	"CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL," \
	" deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER," \
	" streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL," \
	" bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);" \
	"INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (7200, 7300, 0, 1, NULL, 7, 13, 4660 << 24, 0," \
	" 512, NULL, 3);" \
	"CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL," \
	" rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER," \
	" endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER," \
	" int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER," \
	" floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);" \
	"INSERT INTO NVTX_EVENTS(start, end, eventType, text, textId, globalTid, domainId) VALUES" \
	" (400, 8000, 59, NULL, 5, (4660 << 24) | 4661, 0)," \
	" (450, 7000, 59, 'inline text', NULL, (4660 << 24) | 4661, 0)," \
	" (300, NULL, 75, 'my.domain', NULL, (4660 << 24) | 4661, 1);"

static void test_nsys_import(void)
{
	const char *dir = new_dir("nsys"), *p = kp_test_path("prof.sqlite");
	const char *out = in_dir(dir, "run.db");
	struct kp_import_stats st;
	struct kp_err err = {0};
	int fmt = -1;

	CU_ASSERT_EQUAL_FATAL(sql_file(p, NSYS_TABLES
		"CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);"
		"INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.20.7'),"
		" ('EXPORT_PRODUCT_VERSION', '2025.4.1');"), 0);
	CU_ASSERT_EQUAL(kp_import_detect(p, &fmt, &err), 0);
	CU_ASSERT_EQUAL(fmt, KP_IMPORT_NSYS);
	CU_ASSERT_EQUAL_FATAL(import_file(p, out, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "%s\n", err.msg);
	CU_ASSERT_EQUAL(st.format, KP_IMPORT_NSYS);
	CU_ASSERT_EQUAL(st.rows[KP_T_KERNEL], 2);
	CU_ASSERT_EQUAL(st.rows[KP_T_RUNTIME], 3);
	CU_ASSERT_EQUAL(st.rows[KP_T_MEMSET], 1);
	CU_ASSERT_EQUAL(st.rows[KP_T_MEMCPY], 0);
	CU_ASSERT_EQUAL(st.rows[KP_T_NVTX], 3);
	CU_ASSERT_EQUAL(st.rows[KP_T_GPU], 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
			  " JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName"
			  " WHERE d.value = 'void gemm<float>(float*, int)' AND s.value = 'gemm'"
			  " AND k.runId = 1 AND k.registersPerThread = 40 AND k.gridX IN (128, 64) AND k.blockX = 256"
			  " AND k.streamId = 7"), 2);
	CU_ASSERT_EQUAL(q(out, "SELECT dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 11"), 1024);
	/* API names without nsys's version suffix; driver calls told by name */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s"
			  " ON s.id = r.nameId WHERE s.value = 'cudaLaunchKernel' AND r.eventClass = 0"
			  " AND r.correlationId = 11"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s"
			  " ON s.id = r.nameId WHERE s.value = 'cuLaunchKernel' AND r.eventClass = 1"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s"
			  " ON s.id = r.nameId WHERE s.value = 'cudaMemsetAsync'"), 1);
	/* NVTX text from textId or inline */
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'forward'"
			  " AND eventType = 59 AND end = 8000"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'inline text'"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75 AND end IS NULL"
			  " AND domainId = 1"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE bytes = 512"
			  " AND memKind = 3 AND correlationId = 13"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM kp_runs WHERE source = 'nsys'"
			  " AND device_name = 'NVIDIA H100 80GB HBM3' AND sm_count = 132"
			  " AND compute_major = 9 AND t_begin_ns = 500 AND t_end_ns = 7100"), 1);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM TARGET_INFO_GPU WHERE l2CacheSize = 52428800"
			  " AND uuid = 'GPU-1234' AND busLocation = '0000:1a:00.0'"), 1);
}

static void test_nsys_bad(void)
{
	const char *dir = new_dir("nsys_bad"), *p = kp_test_path("bad.sqlite");

	/* unknown schema version */
	CU_ASSERT_EQUAL_FATAL(sql_file(p, NSYS_TABLES
		"CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);"
		"INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '4.1.0');"), 0);
	expect_bad(p, dir, KP_EVERSION, "schema version 4.1.0", "bad.sqlite");
	CU_ASSERT_EQUAL(kp_test_sh("%s import %s -o %s/cli.db 2>/dev/null", kp_test_kplan(), p, dir),
			2);
	CU_ASSERT_EQUAL(dir_entries(dir), 0);
	/* older metadata table name, metadata without a version */
	CU_ASSERT_EQUAL_FATAL(sql_file(p, NSYS_TABLES
		"CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);"), 0);
	expect_bad(p, dir, KP_EVERSION, "no EXPORT_SCHEMA_VERSION", NULL);
	/* a required column missing */
	CU_ASSERT_EQUAL_FATAL(sql_file(p,
		"CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
		"CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);"
		"INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.1.7');"
		"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,"
		" streamId INTEGER, demangledName INTEGER);"), 0);
	expect_bad(p, dir, KP_EFORMAT, "CUPTI_ACTIVITY_KIND_KERNEL", "'gridX'");
	/* an SQLite file that is not an nsys export */
	CU_ASSERT_EQUAL_FATAL(sql_file(p, "CREATE TABLE t (a);"), 0);
	expect_bad(p, dir, KP_EFORMAT, "not an Nsight Systems export", NULL);
}

/* ------------------------------------------------------------------ CLI */

static void test_cli(void)
{
	const char *dir = new_dir("cli");
	const char *out = in_dir(dir, "run.db"), *log = kp_test_path("cli.log");
	const char *json = in_dir(dir, "t.json"), *bad = kp_test_path("cli_bad.json");
	size_t n;
	char *text;

	CU_ASSERT_EQUAL(kp_test_sh("%s import %s -o %s > %s 2>&1", kp_test_kplan(),
				   kp_test_src(FIXTURE), out, log), 0);
	text = kp_test_read(log, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "1020 kernels, 2202 api calls"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "70 memsets"));
	CU_ASSERT_EQUAL(strchr(text, '\n') - text + 1, (long)n);   /* one line */
	free(text);
	CU_ASSERT_EQUAL(kp_test_sh("%s export %s --chrome %s 2>/dev/null", kp_test_kplan(), out,
				   json), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s export %s --csv 'SELECT count(*) n FROM kp_runs' > %s",
				   kp_test_kplan(), out, log), 0);
	text = kp_test_read(log, NULL);
	CU_ASSERT(text && !strcmp(text, "n\n1\n"));
	free(text);
	/* appending the export as a second run */
	CU_ASSERT_EQUAL(kp_test_sh("%s import -q %s -o %s", kp_test_kplan(), json, out), 0);
	CU_ASSERT_EQUAL(q(out, "SELECT count(*) FROM kp_runs"), 2);
	/* bad input: exit 2, one line, nothing written */
	kp_test_write(bad, "{\"traceEvents\": [}", -1);
	CU_ASSERT_EQUAL(kp_test_sh("%s import %s -o %s/new.db 2> %s", kp_test_kplan(), bad, dir,
				   log), 2);
	text = kp_test_read(log, &n);
	CU_ASSERT(text && strstr(text, "invalid JSON at byte"));
	CU_ASSERT(text && strchr(text, '\n') - text + 1 == (long)n);
	free(text);
	CU_ASSERT_EQUAL(dir_entries(dir), 2);
	CU_ASSERT_EQUAL(kp_test_sh("%s import %s > /dev/null 2>&1", kp_test_kplan(), bad), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s import --help | grep -q 'usage: kplan import'",
				   kp_test_kplan()), 0);
}

CU_TestInfo kp_tests_importers[] = {
	{ "parse microseconds exactly", test_parse_us },
	{ "detect format by content", test_detect },
	{ "resnet18 fixture counts and run row", test_resnet_counts },
	{ "import -> export -> import round trip", test_roundtrip },
	{ "export: analyzer regions and gaps tracks", test_export_analysis_tracks },
	{ "export --chrome of a recording: runtime regions and PDL kept", test_export_recording },
	{ "flows, key order, unknown categories", test_flows_and_order },
	{ "python frames: their own domain, round trip", test_python_frames },
	{ "bad: truncated gzip", test_bad_truncated_gzip },
	{ "bad: invalid json", test_bad_json },
	{ "bad: not a trace", test_bad_not_trace },
	{ "bad: missing fields", test_bad_missing_field },
	{ "bad: existing db unchanged", test_bad_existing_db_unchanged },
	{ "nsys export import", test_nsys_import },
	{ "nsys bad version and columns", test_nsys_bad },
	{ "cli import/export", test_cli },
	CU_TEST_INFO_NULL,
};
