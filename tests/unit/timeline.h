/*
 * timeline.h - synthetic traces for the analyzer's tests (timeline.c).
 */
#ifndef KP_TEST_TIMELINE_H
#define KP_TEST_TIMELINE_H

#include <stdint.h>

#include "analyzer/analyzer.h"
#include "db/writer.h"

/* A hand-built run: kernels, API calls and NVTX ranges, one transaction. */
struct tl {
	struct kp_db *db;
	struct kp_writer w;
	int64_t run;
	uint32_t corr;
	int32_t grid, smem, regs;
};

/* Open a new database name (in the test directory) with one synthetic run
 * on "TestGPU", driver 580, and begin writing. */
void tl_open(struct tl *t, const char *name);
/* An API call name at [start, start + dur) with correlation id corr. */
void tl_api(struct tl *t, const char *name, int64_t start, int64_t dur, uint32_t corr);
/* A kernel launched by a 1 us cudaLaunchKernel at api; returns its corr. */
uint32_t tl_kernel(struct tl *t, const char *name, uint32_t stream,
		   int64_t api, int64_t start, int64_t dur);
/* A CPU-side push/pop range. */
void tl_nvtx(struct tl *t, const char *text, int64_t start, int64_t end);
/* An 8-byte launch argument of launch corr. */
void tl_arg(struct tl *t, uint32_t corr, int idx, int64_t value);
/* Commit what was written and analyze (o NULL: defaults); OUT: *s (may be NULL). */
int tl_analyze(struct tl *t, struct kp_analyze_opts *o, struct kp_analysis_summary *s);
/* The first column of the first row of a query as an integer (-999: none). */
int64_t tl_q(struct tl *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* First column of the first row as text (static buffer). */
const char *tl_qtext(struct tl *t, const char *sql);
void tl_close(struct tl *t);

/* A Kineto trace written as text: host events on pid 9 tid 11, GPU work on stream 7. */
struct kj {
	char *buf;
	size_t len, cap;
	int corr, n_ev;
};

void kj_add(struct kj *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A host-side range (cpu_op, python_function, user_annotation), times in us. */
void kj_x(struct kj *j, const char *cat, const char *name, double ts, double dur);
/* A runtime call; returns its correlation id. */
int kj_call(struct kj *j, const char *name, double ts, double dur);
/* A kernel launched by a 5 us cudaLaunchKernel at call, run at [ts, ts + dur). */
void kj_kernel(struct kj *j, const char *name, double call, double ts, double dur);
/* A cudaMemcpyAsync at [call, call + call_dur) whose copy (Kineto's name) runs at [ts, ts + dur). */
void kj_copy(struct kj *j, const char *name, double call, double call_dur, double ts,
	     double dur);

/* Close the trace's JSON, write it to name in the test directory and
 * release j's buffer; returns the path. */
const char *kj_write(struct kj *j, const char *name);
/* Import the trace at path into NAME.db in the test directory and analyze
 * it with the defaults; the caller closes the database. */
struct kp_db *kj_analyzed_from(const char *trace, const char *name);

/* tl_q for a database opened elsewhere. */
int64_t tl_dbq(struct kp_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
