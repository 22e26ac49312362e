/*
 * timeline.c - synthetic traces for the analyzer's tests: timelines written
 * with kp_writer into temporary databases (tl_*), and Kineto traces written
 * as JSON text for the importer (kj_*).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "importers/import.h"
#include "testutil.h"
#include "timeline.h"

void tl_open(struct tl *t, const char *name)
{
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "synthetic", .device_name = "TestGPU",
				  .driver_version = 580 };

	memset(t, 0, sizeof(*t));
	t->grid = 64;
	t->regs = 32;
	t->db = kp_db_open(kp_test_path(name), KP_DB_CREATE, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t->db);
	CU_ASSERT_EQUAL_FATAL(kp_db_run_insert(t->db, &ri, &t->run, &err), 0);
	kp_writer_init(&t->w, t->db, t->run);
	CU_ASSERT_EQUAL_FATAL(kp_db_begin(t->db, &err), 0);
}

void tl_api(struct tl *t, const char *name, int64_t start, int64_t dur, uint32_t corr)
{
	struct kp_err err = {0};
	struct kp_api_rec a = { .start = start, .end = start + dur, .name = name,
				.correlation_id = corr, .global_tid = 1 };
	CU_ASSERT_EQUAL(kp_writer_api(&t->w, &a, &err), 0);
}

/* A kernel launched by a 1 us cudaLaunchKernel at api; returns its corr. */
uint32_t tl_kernel(struct tl *t, const char *name, uint32_t stream,
			  int64_t api, int64_t start, int64_t dur)
{
	struct kp_err err = {0};
	struct kp_kernel_rec k = {
		.start = start, .end = start + dur, .stream_id = stream,
		.correlation_id = ++t->corr, .name = name, .registers = t->regs,
		.grid = { t->grid, 1, 1 }, .block = { 256, 1, 1 },
		.static_smem = t->smem,
	};
	tl_api(t, "cudaLaunchKernel", api, 1000, t->corr);
	CU_ASSERT_EQUAL(kp_writer_kernel(&t->w, &k, &err), 0);
	return t->corr;
}

void tl_nvtx(struct tl *t, const char *text, int64_t start, int64_t end)
{
	struct kp_err err = {0};
	struct kp_nvtx_rec n = { .start = start, .end = end, .event_type = KP_NVTX_PUSHPOP,
				 .text = text, .global_tid = 1 };
	CU_ASSERT_EQUAL(kp_writer_nvtx(&t->w, &n, &err), 0);
}

void tl_arg(struct tl *t, uint32_t corr, int idx, int64_t value)
{
	char sql[256];
	struct kp_err err = {0};
	snprintf(sql, sizeof(sql), "INSERT INTO kp_launch_args VALUES (%lld, %u, %d, 8, %lld)",
		 (long long)t->run, corr, idx, (long long)value);
	CU_ASSERT_EQUAL(kp_db_exec(t->db, sql, &err), 0);
}

int tl_analyze(struct tl *t, struct kp_analyze_opts *o, struct kp_analysis_summary *s)
{
	struct kp_err err = {0};
	struct kp_analyze_opts def;
	int rc;

	if (t->db->txn_depth) {
		CU_ASSERT_EQUAL(kp_db_commit(t->db, &err), 0);
		kp_writer_release(&t->w);
	}
	if (!o) {
		kp_analyze_opts_init(&def);
		o = &def;
	}
	rc = kp_analyze(t->db, o, s, &err);
	if (rc)
		fprintf(stderr, "analyze: %s\n", err.msg);
	return rc;
}

static int64_t vq(struct kp_db *db, const char *fmt, va_list ap)
{
	char sql[1024];

	vsnprintf(sql, sizeof(sql), fmt, ap);
	return kp_db_int(db, sql, -999);
}

int64_t tl_q(struct tl *t, const char *fmt, ...)
{
	va_list ap;
	int64_t v;

	va_start(ap, fmt);
	v = vq(t->db, fmt, ap);
	va_end(ap);
	return v;
}

/* First column of the first row as text (static buffer). */
const char *tl_qtext(struct tl *t, const char *sql)
{
	static char buf[256];
	sqlite3_stmt *st;

	buf[0] = 0;
	if (sqlite3_prepare_v2(t->db->h, sql, -1, &st, NULL) != SQLITE_OK)
		return buf;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, sizeof(buf), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

void tl_close(struct tl *t)
{
	if (t->db && t->db->txn_depth) {
		kp_db_rollback(t->db);
		kp_writer_release(&t->w);
	}
	kp_db_close(t->db);
}


void kj_add(struct kj *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->cap - j->len < 1024) {
		j->cap = j->cap ? j->cap * 2 : 65536;
		j->buf = realloc(j->buf, j->cap);
		CU_ASSERT_PTR_NOT_NULL_FATAL(j->buf);
	}
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
	va_end(ap);
	j->len += (size_t)n;
}

/* A host-side range (cpu_op, python_function, user_annotation), times in us. */
void kj_x(struct kj *j, const char *cat, const char *name, double ts, double dur)
{
	kj_add(j, "%s{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 9, \"tid\": 11,"
	       " \"ts\": %.3f, \"dur\": %.3f}\n", j->n_ev++ ? "," : "", cat, name, ts, dur);
}

int kj_call(struct kj *j, const char *name, double ts, double dur)
{
	kj_add(j, "%s{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"%s\", \"pid\": 9,"
	       " \"tid\": 11, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"correlation\": %d}}\n",
	       j->n_ev++ ? "," : "", name, ts, dur, ++j->corr);
	return j->corr;
}

/* A kernel launched by a 5 us cudaLaunchKernel at call, run at [ts, ts + dur). */
void kj_kernel(struct kj *j, const char *name, double call, double ts, double dur)
{
	int c = kj_call(j, "cudaLaunchKernel", call, 5);

	kj_add(j, ",{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7,"
	       " \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"device\": 0, \"stream\": 7,"
	       " \"correlation\": %d, \"grid\": [64, 1, 1], \"block\": [256, 1, 1],"
	       " \"registers per thread\": 32, \"shared memory\": 0}}\n", name, ts, dur, c);
}

/* A cudaMemcpyAsync at [call, call + call_dur) whose copy (Kineto's name) runs at [ts, ts + dur). */
void kj_copy(struct kj *j, const char *name, double call, double call_dur, double ts,
		    double dur)
{
	int c = kj_call(j, "cudaMemcpyAsync", call, call_dur);

	kj_add(j, ",{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7,"
	       " \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"device\": 0, \"stream\": 7,"
	       " \"correlation\": %d, \"bytes\": 4}}\n", name, ts, dur, c);
}

int64_t tl_dbq(struct kp_db *db, const char *fmt, ...)
{
	va_list ap;
	int64_t v;

	va_start(ap, fmt);
	v = vq(db, fmt, ap);
	va_end(ap);
	return v;
}

const char *kj_write(struct kj *j, const char *name)
{
	const char *path = kp_test_path(name);

	kj_add(j, "]}\n");
	CU_ASSERT_EQUAL(kp_test_write(path, j->buf, (long)j->len), 0);
	free(j->buf);
	memset(j, 0, sizeof(*j));
	return path;
}

struct kp_db *kj_analyzed_from(const char *trace, const char *name)
{
	char dbn[128];
	struct kp_err err = {0};
	struct kp_analyze_opts o;
	struct kp_db *db;

	snprintf(dbn, sizeof(dbn), "%s.db", name);
	if (kp_import(trace, kp_test_path(dbn), NULL, NULL, &err))
		fprintf(stderr, "import: %s\n", err.msg);
	db = kp_db_open(kp_test_path(dbn), 0, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_analyze_opts_init(&o);
	if (kp_analyze(db, &o, NULL, &err))
		fprintf(stderr, "analyze: %s\n", err.msg);
	return db;
}

