/*
 * bench_report.c - time `kplan report` on a large synthetic run, and make
 * fixture databases for the browser test.
 *
 *   bench_report [-n KERNELS] [-r REGIONS] [-o DB] [--keep] [--out DIR]
 *
 * Synthesizes a run (default 1,000,000 kernels) in DB (default
 * /tmp/kplan-bench-report.db) with kp_writer in bulk mode: kernels on two
 * streams in steps of 100 inside NVTX "step" ranges, each launched by a
 * cudaLaunchKernel record, the first kernel of each step host-bound; 40
 * kernel names (one full of markup and a raw 0xff byte). Analysis rows as
 * the analyzer would write them: the "step" region with one occurrence per
 * step, REGIONS - 1 mined regions (default 300, more than the HTML table
 * shows), one kp_gaps row per kernel, 500 fusion candidates, a plan row.
 * Then loads the report and writes the HTML page and the CSV files into DIR
 * (default /tmp/kplan-bench-report), timing each part, and checks the
 * budget: under 10 s in all and an HTML page under 5 MB (exit 1 if not).
 * --keep keeps the database (and skips nothing else).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/kptime.h"
#include "db/writer.h"
#include "reports/report.h"

#define STEP 100

static int insert_analysis(struct kp_db *db, int64_t run, long n, long regions, struct kp_err *err)
{
	sqlite3_stmt *st;
	long i, steps = n / STEP;
	int rc;

	rc = kp_db_exec(db, "DELETE FROM kp_regions; DELETE FROM kp_region_occurrences;"
			" DELETE FROM kp_gaps; DELETE FROM kp_fusion_candidates;", err);
	if (rc)
		return rc;
	rc = kp_db_prepare(db,
		"INSERT INTO kp_regions (runId, regionId, label, source, streamId, occurrences, kernels,"
		" nodes, eager_ns, busy_ns, host_idle_ns, device_idle_ns, graph_ns_pred, speedup_pred,"
		" capturable, blockers, one_time_ns, break_even, fingerprint, shape_keys, patch_slots)"
		" VALUES (?1, ?2, ?3, ?4, 7, ?5, ?6, ?6, ?7, ?8, ?9, 1000, ?10, ?11, ?12, ?13, 500000,"
		" 40, printf('%016x', ?2), 1, 0)", &st, err);
	if (rc)
		return rc;
	for (i = 0; i < regions; i++) {
		char label[64];
		int64_t eager = i ? 20000 + i * 10 : STEP * 4000;

		snprintf(label, sizeof(label), i ? "mined-%ld" : "step", i);
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, run);
		sqlite3_bind_int64(st, 2, i + 1);
		sqlite3_bind_text(st, 3, label, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, i ? "mined" : "nvtx", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, i ? 10 + i : steps);
		sqlite3_bind_int64(st, 6, i ? 5 : STEP);
		sqlite3_bind_int64(st, 7, eager);
		sqlite3_bind_int64(st, 8, eager / 2);
		sqlite3_bind_int64(st, 9, eager / 3);
		sqlite3_bind_int64(st, 10, eager / 4);
		sqlite3_bind_double(st, 11, 4.0);
		sqlite3_bind_int(st, 12, i % 3 != 2);
		if (i % 3 == 2)
			sqlite3_bind_text(st, 13, "sync", -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 13);
		if (sqlite3_step(st) != SQLITE_DONE)
			break;
	}
	sqlite3_finalize(st);
	if (i < regions)
		return kp_db_error(db, err, "inserting regions");
	rc = kp_db_exec(db,
		"INSERT INTO kp_blockers (runId, regionId, kind, fatal, api_name, start)"
		" SELECT runId, regionId, 'sync', 1, 'cudaStreamSynchronize', 0 FROM kp_regions"
		" WHERE capturable = 0;"
		"INSERT INTO kp_fusion_candidates (runId, candId, regionId, streamId, n_kernels,"
		" kernel_names, dur_ns, saved_bytes, saved_nodes, score, feasible)"
		" WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 500)"
		" SELECT 1, i, 1, 7, 3, 'bench_kernel_1 -> bench_kernel_2 -> bench_kernel_3',"
		" 3000, 1048576 * i, 2, 1000.0 + i, i % 2 FROM c;", err);
	if (rc)
		return rc;
	/* occurrences of "step" from the NVTX ranges, gaps from the kernels */
	rc = kp_db_exec(db,
		"INSERT INTO kp_region_occurrences (runId, regionId, occIndex, start, end, kernels)"
		" SELECT runId, 1, row_number() OVER (ORDER BY start) - 1, start, end, 100"
		" FROM NVTX_EVENTS;"
		"INSERT INTO kp_gaps (runId, deviceId, streamId, correlationId, kernel_start, gap_ns,"
		" host_bound, queue_ns, launch_api_ns)"
		" SELECT runId, deviceId, streamId, correlationId, start, 1000,"
		" correlationId % 100 = 0, 2000, 3000 FROM CUPTI_ACTIVITY_KIND_KERNEL;", err);
	return rc;
}

int main(int argc, char **argv)
{
	long n = 1000000, regions = 300, i;
	const char *path = "/tmp/kplan-bench-report.db", *dir = "/tmp/kplan-bench-report";
	int keep = 0, over;
	char names[40][96], html[4096];
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "synthetic", .device_name = "NVIDIA H200",
				  .compute_major = 9, .sm_count = 132, .driver_version = 13000 };
	struct kp_kernel_rec k = { .grid = { 128, 1, 1 }, .block = { 256, 1, 1 }, .registers = 32 };
	struct kp_api_rec a = { .name = "cudaLaunchKernel" };
	struct kp_nvtx_rec nv = { .event_type = KP_NVTX_PUSHPOP, .text = "step" };
	struct kp_writer w;
	struct kp_report *rep = NULL;
	struct kp_db *db;
	int64_t run, t, t0, t1, t2, t3, t4;
	struct stat sb;
	FILE *f;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atol(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			regions = atol(argv[++i]);
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--keep"))
			keep = 1;
		else {
			fprintf(stderr, "usage: bench_report [-n KERNELS] [-r REGIONS] [-o DB] [--out DIR] [--keep]\n");
			return 64;
		}
	}
	if (n < STEP || regions < 1) {
		fprintf(stderr, "bench_report: need at least %d kernels and one region\n", STEP);
		return 64;
	}
	for (i = 0; i < 40; i++)
		snprintf(names[i], sizeof(names[i]), "void bench_kernel_%ld<float, %ld>(float const*, float*, int)",
			 i, i * 7);
	snprintf(names[39], sizeof(names[39]), "<script>alert(\"x&y\")</script>\xff");

	unlink(path);
	t0 = kp_now_ns();
	db = kp_db_open(path, KP_DB_CREATE, &err);
	if (!db || kp_db_run_insert(db, &ri, &run, &err) || kp_db_set_bulk(db, 1, &err))
		goto fail;
	kp_writer_init(&w, db, run);
	t = 1000000;
	for (i = 0; i < n; i++) {
		if (i % 100000 == 0 && kp_db_begin(db, &err))
			goto fail;
		if (i % STEP == 0) {
			t += 20000;   /* the CPU is late: host-bound gap */
			nv.start = t - 5000;
		}
		a.correlation_id = k.correlation_id = (uint32_t)(i + 1);
		a.start = i % STEP == 0 ? t - 3000 : t - 30000;
		a.end = a.start + 2500;
		k.stream_id = i % 10 == 9 ? 13 : 7;
		k.name = names[i % 40];
		k.start = t;
		k.end = t + 2000 + (i % 7) * 300;
		t = k.end + 1000;
		if (kp_writer_api(&w, &a, &err) || kp_writer_kernel(&w, &k, &err))
			goto fail;
		if (i % STEP == STEP - 1) {
			nv.end = t;
			if (kp_writer_nvtx(&w, &nv, &err))
				goto fail;
		}
		if ((i + 1) % 100000 == 0 && kp_db_commit(db, &err))
			goto fail;
	}
	if (n % 100000 && kp_db_commit(db, &err))
		goto fail;
	kp_writer_release(&w);
	if (kp_db_begin(db, &err) || insert_analysis(db, run, n, regions, &err) ||
	    kp_db_commit(db, &err) || kp_db_run_finish(db, run, 0, NULL, "complete", &err) ||
	    kp_db_create_indexes(db, &err))
		goto fail;
	kp_db_close(db);
	t1 = kp_now_ns();

	/* what `kplan report DB -o DIR/report.html --csv DIR` does */
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	if (!db || kp_report_load(db, NULL, &rep, &err))
		goto fail;
	t2 = kp_now_ns();
	mkdir(dir, 0777);
	snprintf(html, sizeof(html), "%s/report.html", dir);
	f = fopen(html, "w");
	if (!f || kp_report_html(rep, f, &err) || fclose(f))
		goto fail;
	t3 = kp_now_ns();
	if (kp_report_csv(db, rep, dir, &err))
		goto fail;
	t4 = kp_now_ns();
	kp_report_free(rep);
	kp_db_close(db);
	stat(html, &sb);
	over = (t4 - t1) > 10000000000LL || sb.st_size > 5 * 1024 * 1024;
	printf("bench_report: %ld kernels, %ld regions: synthesize %.2f s; report %.2f s"
	       " (load %.2f s, html %.3f s, csv %.2f s); html %.0f KiB%s\n",
	       n, regions, (t1 - t0) / 1e9, (t4 - t1) / 1e9, (t2 - t1) / 1e9, (t3 - t2) / 1e9,
	       (t4 - t3) / 1e9, sb.st_size / 1024.0, over ? "  OVER BUDGET (10 s, 5 MB)" : "");
	if (!keep)
		kp_db_remove(path);
	return over ? 1 : 0;
fail:
	fprintf(stderr, "bench_report: %s\n", err.msg);
	return 2;
}
