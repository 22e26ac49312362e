/* test_db.c - db/: open/validate/migrate, writer, CSV, info, concurrency,
 * the typed read API. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CUnit/CUnit.h>

#include "db/csv.h"
#include "db/db.h"
#include "db/info.h"
#include "db/read.h"
#include "db/writer.h"
#include "common/kname.h"
#include "analyzer/analyzer.h"
#include "importers/import.h"
#include "testutil.h"

static struct kp_db *new_db(const char *name)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(kp_test_path(name), KP_DB_CREATE, &err);

	if (!db)
		fprintf(stderr, "open: %s\n", err.msg);
	return db;
}

static void test_create(void)
{
	struct kp_err err = {0};
	struct kp_db *db = new_db("create.db");

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "PRAGMA user_version", -1), KP_DB_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(kp_db_int(db, "PRAGMA application_id", -1), KP_DB_APPLICATION_ID);
	CU_ASSERT_TRUE(kp_db_has_table(db, "CUPTI_ACTIVITY_KIND_KERNEL"));
	CU_ASSERT_TRUE(kp_db_has_table(db, "kp_runs"));
	kp_db_close(db);
	/* reopen read-only: no migration, same version */
	db = kp_db_open(kp_test_path("create.db"), KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(db->schema_version, KP_DB_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(kp_db_exec(db, "CREATE TABLE x(a)", &err) < 0, 1);
	kp_db_close(db);
}

/* A version 1 database (no kp_launch_attrs) is read as it is and gains the
 * table, and version 2, when opened for writing; its rows stay. */
static void test_migrate_v1(void)
{
	struct kp_err err = {0};
	struct kp_db *db = new_db("v1.db");

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_TRUE(kp_db_has_table(db, "kp_launch_attrs"));
	CU_ASSERT_EQUAL(kp_db_exec(db, "DROP TABLE kp_launch_attrs; PRAGMA user_version = 1;"
				   "INSERT INTO StringIds(value) VALUES ('kept')", &err), 0);
	kp_db_close(db);
	db = kp_db_open(kp_test_path("v1.db"), KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(db->schema_version, 1);
	CU_ASSERT_FALSE(kp_db_has_table(db, "kp_launch_attrs"));
	kp_db_close(db);
	db = kp_db_open(kp_test_path("v1.db"), 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "PRAGMA user_version", -1), KP_DB_SCHEMA_VERSION);
	CU_ASSERT_TRUE(kp_db_has_table(db, "kp_launch_attrs"));
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM StringIds WHERE value = 'kept'", 0), 1);
	kp_db_close(db);
}

static void test_missing(void)
{
	struct kp_err err = {0};

	CU_ASSERT_PTR_NULL(kp_db_open(kp_test_path("nope.db"), KP_DB_RDONLY, &err));
	CU_ASSERT_EQUAL(err.code, KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nope.db"));
}

/* a rejected file must be byte-for-byte unchanged */
static void expect_rejected(const char *path, int flags, int code, const char *words)
{
	struct kp_err err = {0};
	size_t n1, n2;
	char *before = kp_test_read(path, &n1), *after;

	CU_ASSERT_PTR_NULL(kp_db_open(path, flags, &err));
	CU_ASSERT_EQUAL(err.code, code);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, words));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
	after = kp_test_read(path, &n2);
	CU_ASSERT_EQUAL(n1, n2);
	CU_ASSERT(before && after && !memcmp(before, after, n1));
	free(before);
	free(after);
}

static void test_not_sqlite(void)
{
	const char *p = kp_test_path("text.db");

	kp_test_write(p, "this is a text file, not a database\n", -1);
	expect_rejected(p, 0, KP_EFORMAT, "not a kplan database");
	expect_rejected(p, KP_DB_CREATE, KP_EFORMAT, "not a kplan database");
	expect_rejected(p, KP_DB_RDONLY, KP_EFORMAT, "not a kplan database");
}

/* a directory given as a database is named as one, for readers and writers */
static void test_directory(void)
{
	const char *p = kp_test_path("a-dir.db");
	struct kp_err err = {0};

	CU_ASSERT_EQUAL(kp_test_sh("mkdir -p %s", p), 0);
	CU_ASSERT_PTR_NULL(kp_db_open(p, KP_DB_RDONLY, &err));
	CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is a directory, not a kplan database"));
	CU_ASSERT_PTR_NULL(kp_db_open(p, KP_DB_CREATE, &err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is a directory"));
	/* a new database in a directory that does not exist: said so */
	CU_ASSERT_PTR_NULL(kp_db_open(kp_test_path("no-dir/new.db"), KP_DB_CREATE, &err));
	CU_ASSERT_EQUAL(err.code, KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no-dir/new.db: no directory "));
}

static void test_truncated(void)
{
	struct kp_db *db = new_db("trunc.db");
	const char *p = kp_test_path("trunc.db");
	struct kp_writer w;
	struct kp_err err = {0};
	struct kp_api_rec a = { .name = "cudaLaunchKernel" };
	size_t n;
	char *data;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_writer_init(&w, db, 1);
	kp_db_begin(db, &err);
	for (i = 0; i < 20000; i++) {
		a.start = i;
		a.end = i + 1;
		kp_writer_api(&w, &a, &err);
	}
	kp_db_commit(db, &err);
	kp_writer_release(&w);
	kp_db_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", &err);
	kp_db_close(db);
	data = kp_test_read(p, &n);
	CU_ASSERT_FATAL(data && n > 8192);
	kp_test_write(p, data, (long)(n / 2 + 100));  /* cut mid-page */
	free(data);
	expect_rejected(p, KP_DB_RDONLY, KP_EFORMAT, "truncated");
	expect_rejected(p, 0, KP_EFORMAT, "truncated");
}

static void test_foreign_and_newer(void)
{
	const char *p = kp_test_path("foreign.db");
	struct kp_err err = {0};
	struct kp_db *db;

	CU_ASSERT_EQUAL(kp_test_sh("sqlite3 '%s' 'CREATE TABLE t(a); INSERT INTO t VALUES(1)'", p), 0);
	expect_rejected(p, 0, KP_EFORMAT, "not a kplan database");
	expect_rejected(p, KP_DB_RDONLY, KP_EFORMAT, "an SQLite database of another program");

	p = kp_test_path("nsys.sqlite");
	CU_ASSERT_EQUAL(kp_test_sh("sqlite3 '%s' 'CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
				   "CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INT)'", p), 0);
	expect_rejected(p, KP_DB_RDONLY, KP_EFORMAT, "Nsight Systems export");

	db = new_db("newer.db");
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_db_exec(db, "PRAGMA user_version = 99", &err);
	kp_db_close(db);
	p = kp_test_path("newer.db");
	kp_test_sh("sqlite3 '%s' 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null", p);
	expect_rejected(p, 0, KP_EVERSION, "newer");
	db = kp_db_open(p, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_TRUE(db->newer);
	kp_db_close(db);
}

static void test_writer_and_intern(void)
{
	struct kp_db *db = new_db("writer.db");
	struct kp_err err = {0};
	struct kp_writer w;
	struct kp_run_info ri = { .source = "synthetic", .device_name = "NVIDIA H200",
				  .compute_major = 9, .sm_count = 132, .driver_version = 13000 };
	struct kp_kernel_rec k = {
		.start = 1000, .end = 3000, .stream_id = 7, .correlation_id = 42,
		.name = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int, float*)",
		.grid = { 10, 1, 1 }, .block = { 128, 1, 1 }, .registers = 16,
	};
	struct kp_nvtx_rec nv = { .start = 900, .end = 5000, .event_type = KP_NVTX_PUSHPOP,
				  .text = "step" };
	int64_t run = 0, id1, id2;
	char buf[64];

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_run_insert(db, &ri, &run, &err), 0);
	CU_ASSERT_EQUAL(run, 1);
	kp_writer_init(&w, db, run);
	CU_ASSERT_EQUAL(kp_db_begin(db, &err), 0);
	CU_ASSERT_EQUAL(kp_writer_kernel(&w, &k, &err), 0);
	k.start = 4000;
	k.end = 4500;
	CU_ASSERT_EQUAL(kp_writer_kernel(&w, &k, &err), 0);
	CU_ASSERT_EQUAL(kp_writer_nvtx(&w, &nv, &err), 0);
	CU_ASSERT_EQUAL(kp_db_commit(db, &err), 0);
	kp_writer_release(&w);
	CU_ASSERT_EQUAL(w.rows[KP_T_KERNEL], 2);
	CU_ASSERT_EQUAL(kp_db_run_finish(db, run, 3, "3 records lost", "complete", &err), 0);

	id1 = kp_db_intern(db, "abc", &err);
	id2 = kp_db_intern(db, "abc", &err);
	CU_ASSERT(id1 > 0 && id1 == id2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM StringIds WHERE value='abc'", 0), 1);
	/* names are interned once: two kernels, two strings (demangled + short) */
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL", 0), 1);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s"
				  " ON s.id = k.shortName WHERE s.value = 'vectorized_elementwise_kernel'", 0), 2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT t_begin_ns FROM kp_runs", 0), 1000);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT t_end_ns FROM kp_runs", 0), 4500);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT dropped_records FROM kp_runs", 0), 3);
	CU_ASSERT_EQUAL(kp_db_create_indexes(db, &err), 0);
	/* single text values, bound to a run */
	CU_ASSERT_EQUAL(kp_db_text(db, "SELECT device_name FROM kp_runs WHERE runId = ?1", run,
				   buf, sizeof(buf), &err), 0);
	CU_ASSERT_STRING_EQUAL(buf, "NVIDIA H200");
	CU_ASSERT_EQUAL(kp_db_text(db, "SELECT device_name FROM kp_runs WHERE runId = ?1", 99,
				   buf, sizeof(buf), &err), 0);
	CU_ASSERT_STRING_EQUAL(buf, "");
	CU_ASSERT_EQUAL(kp_db_text(db, "SELECT device_name FROM kp_runs WHERE runId = ?1", run,
				   buf, 6, &err), 0);
	CU_ASSERT_STRING_EQUAL(buf, "NVIDI");
	CU_ASSERT(kp_db_text(db, "SELECT nope FROM", run, buf, sizeof(buf), &err) < 0);
	CU_ASSERT_STRING_EQUAL(kp_kernel_short_name("kernel_a(float*)", buf, sizeof(buf)), "kernel_a");
	CU_ASSERT_STRING_EQUAL(kp_kernel_short_name("simple", buf, sizeof(buf)), "simple");
	CU_ASSERT_STRING_EQUAL(kp_kernel_short_name("void ns::k<1>(int)", buf, sizeof(buf)), "k");
	kp_db_close(db);
}

static void test_rollback(void)
{
	struct kp_db *db = new_db("rollback.db");
	struct kp_err err = {0};

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_db_begin(db, &err);
	CU_ASSERT(kp_db_intern(db, "gone", &err) > 0);
	kp_db_rollback(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM StringIds", -1), 0);
	/* the cache forgot it too: re-interning inserts again */
	CU_ASSERT(kp_db_intern(db, "gone", &err) > 0);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM StringIds", -1), 1);
	CU_ASSERT(kp_db_commit(db, &err) < 0);  /* commit without begin */
	kp_db_close(db);
}

static void test_csv(void)
{
	struct kp_db *db = new_db("csv.db");
	struct kp_err err = {0};
	const char *out = kp_test_path("out.csv");
	FILE *f;
	int64_t rows = -1;
	char *text;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_db_exec(db, "CREATE TABLE t(name TEXT, n INTEGER, x REAL, z);"
		   "INSERT INTO t VALUES('plain', 1, 0.5, NULL),"
		   "('a,b', -2, 1.25, 'x'), ('say \"hi\"', 3, 2.0, 'line\nbreak')", &err);
	f = fopen(out, "w");
	CU_ASSERT_EQUAL(kp_csv_table(db, "t", f, &rows, &err), 0);
	fclose(f);
	CU_ASSERT_EQUAL(rows, 3);
	text = kp_test_read(out, NULL);
	CU_ASSERT_STRING_EQUAL(text,
		"name,n,x,z\n"
		"plain,1,0.5,\n"
		"\"a,b\",-2,1.25,x\n"
		"\"say \"\"hi\"\"\",3,2,\"line\nbreak\"\n");
	free(text);
	f = fopen(out, "w");
	CU_ASSERT_EQUAL(kp_csv_table(db, "nosuch", f, NULL, &err), KP_ENOTFOUND);
	CU_ASSERT_EQUAL(kp_csv_query(db, "SELECT nonsense FROM", f, NULL, &err), KP_EDB);
	fclose(f);
	kp_db_close(db);
}

static void test_info(void)
{
	struct kp_db *db = new_db("info.db");
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "record", .device_name = "NVIDIA H100",
				  .compute_major = 9, .sm_count = 132, .driver_version = 13000,
				  .command = "./app --x" };
	const char *out = kp_test_path("info.txt");
	int64_t run;
	FILE *f;
	char *text;

	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_db_run_insert(db, &ri, &run, &err);
	kp_db_run_finish(db, run, 12, "cupti buffer full", "partial", &err);
	/* two ranks of a job: one run each, with its rank */
	ri.has_rank = 1;
	ri.rank = 1;
	ri.local_rank = 1;
	ri.world_size = 2;
	kp_db_run_insert(db, &ri, &run, &err);
	ri.rank = 0;
	ri.local_rank = -1;   /* a launcher that does not say */
	kp_db_run_insert(db, &ri, &run, &err);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM kp_runs WHERE rank IS NULL", -1), 1);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM kp_runs WHERE local_rank IS NULL", -1),
			2);
	/* CUPTI's own costs in the last run: by kind, the costliest first */
	{
		char sql[512];

		snprintf(sql, sizeof(sql),
			 "INSERT INTO StringIds(id, value) VALUES (9001, 'command buffer full'),"
			 " (9002, 'lazy function loading');"
			 "INSERT INTO PROFILER_OVERHEAD(start, end, nameId, runId) VALUES"
			 " (0, 1000000, 9002, %lld), (0, 2500000, 9001, %lld),"
			 " (5, 1500005, 9001, %lld), (0, 100, 9002, %lld)",
			 (long long)run, (long long)run, (long long)run, (long long)run);
		CU_ASSERT_EQUAL(kp_db_exec(db, sql, &err), 0);
	}
	f = fopen(out, "w");
	CU_ASSERT_EQUAL(kp_db_info(db, f, &err), 0);
	fclose(f);
	text = kp_test_read(out, NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "rank       1 of 2 (local rank 1)\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "  rank       0 of 2\n  gpu "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "  overhead   CUPTI: command buffer full 2 (4.000 ms), "
				     "lazy function loading 2 (1.000 ms)\n"));
	/* only the run that has them */
	CU_ASSERT_PTR_NULL(strstr(strstr(text, "overhead") + 1, "overhead   CUPTI"));
	{
		/* what kplan record prints of the runs it added */
		struct kp_run_summary rs;
		int64_t *runs;
		size_t n;

		CU_ASSERT_EQUAL(kp_db_recorded_since(db, 0, &runs, &n, &err), 0);
		CU_ASSERT_EQUAL(n, 3);
		CU_ASSERT(n == 3 && runs[0] < runs[1] && runs[1] < runs[2]);
		CU_ASSERT_EQUAL(kp_db_run_note(db, runs[0], "first", &err), 0);
		CU_ASSERT_EQUAL(kp_db_run_note(db, runs[0], "second", &err), 0);
		kp_db_run_summary(db, runs[0], &rs);
		CU_ASSERT_EQUAL(rs.dropped, 12);
		CU_ASSERT_STRING_EQUAL(rs.status, "partial");
		CU_ASSERT_STRING_EQUAL(rs.note, "first; second");
		CU_ASSERT_EQUAL(rs.kernels, 0);
		free(runs);
		CU_ASSERT_EQUAL(kp_db_recorded_since(db, INT64_MAX, &runs, &n, &err), 0);
		CU_ASSERT_EQUAL(n, 0);
		CU_ASSERT_PTR_NULL(runs);
		kp_db_run_summary(db, 999, &rs);
		CU_ASSERT_STRING_EQUAL(rs.status, "?");
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "rank       0 of 2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "NVIDIA H100, compute 9.0, 132 SMs"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "driver     13.0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "./app --x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "DROPPED    12 records (cupti buffer full)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "CUPTI_ACTIVITY_KIND_KERNEL"));
	free(text);
	kp_db_close(db);
}

/* Two processes appending to one database at once: both succeed, no corruption. */
static void test_concurrent_writers(void)
{
	const char *p = kp_test_path("conc.db");
	struct kp_err err = {0};
	struct kp_db *db;
	pid_t pids[2];
	int i, status, ok = 0;

	db = kp_db_open(p, KP_DB_CREATE, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_db_close(db);
	for (i = 0; i < 2; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct kp_api_rec a = { .name = i ? "writerB" : "writerA" };
			struct kp_writer w;
			int b, j, rc = 0;

			db = kp_db_open(p, KP_DB_CREATE, &err);
			if (!db)
				_exit(3);
			kp_writer_init(&w, db, i + 1);
			for (b = 0; b < 20 && !rc; b++) {
				rc = kp_db_begin(db, &err);
				for (j = 0; j < 500 && !rc; j++) {
					a.start = b * 1000 + j;
					a.end = a.start + 1;
					rc = kp_writer_api(&w, &a, &err);
				}
				if (!rc)
					rc = kp_db_commit(db, &err);
			}
			kp_writer_release(&w);
			kp_db_close(db);
			_exit(rc ? 4 : 0);
		}
	}
	for (i = 0; i < 2; i++) {
		waitpid(pids[i], &status, 0);
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	CU_ASSERT_EQUAL(ok, 2);
	db = kp_db_open(p, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME", 0), 20000);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
				  " JOIN StringIds s ON s.id = r.nameId"
				  " WHERE s.value = CASE r.runId WHEN 1 THEN 'writerA' ELSE 'writerB' END", 0),
			20000);
	kp_db_close(db);
	CU_ASSERT_EQUAL(kp_test_sh("test \"$(sqlite3 '%s' 'PRAGMA integrity_check')\" = ok", p), 0);
}

/* The CLI: exit 2 and a one-line error naming the file for a bad database. */
static void test_cli_errors(void)
{
	const char *bad = kp_test_path("bad-cli.db");
	const char *log = kp_test_path("cli.err");
	char *text;

	kp_test_write(bad, "garbage", -1);
	CU_ASSERT_EQUAL(kp_test_sh("%s info '%s' 2>'%s'", kp_test_kplan(), bad, log), 2);
	text = kp_test_read(log, NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "bad-cli.db: not a kplan database"));
	CU_ASSERT(text && strchr(text, '\n') == text + strlen(text) - 1);  /* one line */
	free(text);
	CU_ASSERT_EQUAL(kp_test_sh("%s nosuchcmd 2>/dev/null", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s --help | grep -q 'exit codes'", kp_test_kplan()), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s help info | grep -q 'usage: kplan info DB'", kp_test_kplan()), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s version | grep -q '^kplan [0-9]'", kp_test_kplan()), 0);
}

/* The typed read API (db/read.h) over the bundled ResNet-18 trace: every
 * row once, in order, with the fields the tables hold. */
static void test_read_api(void)
{
	struct kp_import_opts io = { .format = KP_IMPORT_AUTO };
	struct kp_analyze_opts ao;
	struct kp_err err = {0};
	const char *path = kp_test_path("read.db");
	struct kp_db_rows *it = NULL;
	struct kp_db_kernel k;
	struct kp_db_region_occ oc;
	struct kp_db_run r;
	struct kp_db *db;
	int64_t n = 0, last = INT64_MIN, launched = 0;
	int rc;

	CU_ASSERT_EQUAL_FATAL(kp_import(kp_test_src("tests/fixtures/resnet18_b1.json.gz"), path,
					&io, NULL, &err), 0);
	db = kp_db_open(path, 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_analyze_opts_init(&ao);
	CU_ASSERT_EQUAL_FATAL(kp_analyze(db, &ao, NULL, &err), 0);

	/* runs: all of them, or one; a run that is not there has no row */
	CU_ASSERT_EQUAL_FATAL(kp_db_runs(db, 0, &it, &err), 0);
	CU_ASSERT_EQUAL(kp_db_run_next(it, &r, &err), 1);
	CU_ASSERT_EQUAL(r.run_id, 1);
	CU_ASSERT_STRING_EQUAL(r.source, "chrome");
	CU_ASSERT_PTR_NOT_NULL(r.source_path);
	CU_ASSERT_EQUAL(kp_db_run_next(it, &r, &err), 0);
	kp_db_rows_close(it);
	CU_ASSERT_EQUAL_FATAL(kp_db_runs(db, 7, &it, &err), 0);
	CU_ASSERT_EQUAL(kp_db_run_next(it, &r, &err), 0);
	/* an iterator of another kind is refused */
	CU_ASSERT_EQUAL(kp_db_kernel_next(it, &k, &err), KP_EINVAL);
	kp_db_rows_close(it);
	kp_db_rows_close(NULL);

	/* kernels: each one, by start, named, most with their launching call */
	CU_ASSERT_EQUAL_FATAL(kp_db_kernels(db, 1, &it, &err), 0);
	while ((rc = kp_db_kernel_next(it, &k, &err)) > 0) {
		CU_ASSERT_TRUE(k.op.start >= last && k.op.end >= k.op.start);
		CU_ASSERT_PTR_NOT_NULL(k.name);
		CU_ASSERT_TRUE(k.grid[0] > 0 && k.block[0] > 0);
		last = k.op.start;
		launched += k.launch.found && k.launch.start <= k.op.start;
		n++;
	}
	CU_ASSERT_EQUAL(rc, 0);
	kp_db_rows_close(it);
	CU_ASSERT_EQUAL(n, kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL", -1));
	CU_ASSERT_TRUE(n > 0 && launched == kp_db_int(db, "SELECT count(*) FROM"
		" CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
		" WHERE r.runId = k.runId AND r.correlationId = k.correlationId AND r.start <= k.start)",
		-1));

	/* region occurrences: by region, then occurrence, with the region's label */
	n = 0;
	CU_ASSERT_EQUAL_FATAL(kp_db_region_occs(db, 1, &it, &err), 0);
	while ((rc = kp_db_region_occ_next(it, &oc, &err)) > 0) {
		CU_ASSERT_PTR_NOT_NULL(oc.label);
		CU_ASSERT_PTR_NOT_NULL(oc.source);
		CU_ASSERT_TRUE(oc.end > oc.start && oc.kernels > 0);
		n++;
	}
	CU_ASSERT_EQUAL(rc, 0);
	kp_db_rows_close(it);
	CU_ASSERT_TRUE(n > 0);
	CU_ASSERT_EQUAL(n, kp_db_int(db, "SELECT count(*) FROM kp_region_occurrences", -1));

	/* every other iterator: one row per row of its table */
	{
		struct kp_db_gpu g;
		struct kp_db_stream st;
		struct kp_db_api_call c;
		struct kp_db_nvtx e;
		struct kp_db_overhead v;
		struct kp_db_memcpy mc;
		struct kp_db_memset ms;
		struct kp_db_sync sy;
		struct kp_db_host_gap hg;
		int64_t cnt[9] = { 0 };

#define COUNT(i, open, next, row) \
		do { \
			CU_ASSERT_EQUAL_FATAL(open(db, 1, &it, &err), 0); \
			while ((rc = next(it, &(row), &err)) > 0) \
				cnt[i]++; \
			CU_ASSERT_EQUAL(rc, 0); \
			kp_db_rows_close(it); \
		} while (0)
		COUNT(0, kp_db_gpus, kp_db_gpu_next, g);
		COUNT(1, kp_db_streams, kp_db_stream_next, st);
		COUNT(2, kp_db_api_calls, kp_db_api_call_next, c);
		COUNT(3, kp_db_nvtx, kp_db_nvtx_next, e);
		COUNT(4, kp_db_overheads, kp_db_overhead_next, v);
		COUNT(5, kp_db_memcpys, kp_db_memcpy_next, mc);
		COUNT(6, kp_db_memsets, kp_db_memset_next, ms);
		COUNT(7, kp_db_syncs, kp_db_sync_next, sy);
		COUNT(8, kp_db_host_gaps, kp_db_host_gap_next, hg);
#undef COUNT
		CU_ASSERT_TRUE(cnt[0] == 1 && g.name != NULL);
		CU_ASSERT_EQUAL(cnt[1], kp_db_int(db, "SELECT count(*) FROM (SELECT deviceId, streamId"
			" FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT deviceId, streamId FROM"
			" CUPTI_ACTIVITY_KIND_MEMCPY UNION SELECT deviceId, streamId FROM"
			" CUPTI_ACTIVITY_KIND_MEMSET)", -1));
		CU_ASSERT_EQUAL(cnt[2], kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME", -1));
		CU_ASSERT_EQUAL(cnt[3], kp_db_int(db, "SELECT count(*) FROM NVTX_EVENTS"
						  " WHERE eventType IN (34, 59, 60)", -1));
		CU_ASSERT_EQUAL(cnt[4], kp_db_int(db, "SELECT count(*) FROM PROFILER_OVERHEAD", -1));
		CU_ASSERT_EQUAL(cnt[5], kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY", -1));
		CU_ASSERT_EQUAL(cnt[6], kp_db_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET", -1));
		CU_ASSERT_EQUAL(cnt[7], kp_db_int(db, "SELECT count(*) FROM"
						  " CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", -1));
		CU_ASSERT_EQUAL(cnt[8], kp_db_int(db, "SELECT count(*) FROM kp_gaps"
						  " WHERE host_bound = 1 AND gap_ns > 0", -1));
		CU_ASSERT_TRUE(cnt[1] > 0 && cnt[2] > 0 && cnt[3] > 0 && cnt[6] > 0 && cnt[8] > 0);
	}
	kp_db_close(db);
}

CU_TestInfo kp_tests_db[] = {
	{ "create", test_create },
	{ "migrate_v1", test_migrate_v1 },
	{ "missing", test_missing },
	{ "not_sqlite", test_not_sqlite },
	{ "directory", test_directory },
	{ "truncated", test_truncated },
	{ "foreign_and_newer", test_foreign_and_newer },
	{ "writer_and_intern", test_writer_and_intern },
	{ "rollback", test_rollback },
	{ "csv", test_csv },
	{ "info", test_info },
	{ "concurrent_writers", test_concurrent_writers },
	{ "cli_errors", test_cli_errors },
	{ "read API: every iterator, every row", test_read_api },
	CU_TEST_INFO_NULL,
};
