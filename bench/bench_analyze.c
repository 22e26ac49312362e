/*
 * bench_analyze.c - analysis time and peak memory on a synthesized run.
 *
 *   bench_analyze [N_KERNELS] [DB] [--reuse]
 *
 * Writes N kernels (default 10,000,000) on one stream plus their
 * cudaLaunchKernel rows with kp_writer in bulk mode into DB (default
 * /tmp/kplan-bench-analyze.db): a 100-kernel step of 20 kernel names with
 * varying grids repeated, mostly host-bound gaps, a longer gap between
 * steps, no annotations (so the mining path runs). --reuse skips the
 * synthesis when DB exists. Then times kp_analyze() and prints wall time
 * and peak RSS (getrusage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "common/kptime.h"
#include "db/writer.h"

#define PERIOD 100

static int synth(const char *path, long n, struct kp_err *err)
{
	struct kp_run_info ri = { .source = "synthetic", .device_name = "NVIDIA H100 80GB HBM3",
				  .driver_version = 580 };
	struct kp_kernel_rec k = { .block = { 256, 1, 1 }, .registers = 32, .stream_id = 13 };
	struct kp_api_rec a = { .name = "cudaLaunchKernel", .global_tid = 1 };
	char names[20][96];
	struct kp_writer w;
	struct kp_db *db;
	int64_t run, t = 1000000, gpu_free = 0;
	uint64_t rng = 88172645463325252ULL;
	int rc = 0;

	for (int i = 0; i < 20; i++)
		snprintf(names[i], sizeof(names[i]),
			 "void at::native::vectorized_elementwise_kernel<4, op%d>(int, float*)", i);
	unlink(path);
	db = kp_db_open(path, KP_DB_CREATE, err);
	if (!db || kp_db_run_insert(db, &ri, &run, err) || kp_db_set_bulk(db, 1, err))
		return -1;
	kp_writer_init(&w, db, run);
	for (long i = 0; i < n && !rc; i++) {
		int pos = (int)(i % PERIOD);
		if (i % 100000 == 0 && (rc = kp_db_begin(db, err)))
			break;
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		t += pos == 0 ? 40000 : 3000 + (int64_t)(rng % 2000);   /* CPU launch pace */
		a.start = t;
		a.end = t + 2500;
		a.correlation_id = (uint32_t)(i + 1);
		k.correlation_id = a.correlation_id;
		k.name = names[pos % 20];
		k.grid[0] = 32 << (pos % 5);
		k.grid[1] = k.grid[2] = 1;
		k.start = (a.start + 4000 > gpu_free ? a.start + 4000 : gpu_free + 800);
		k.end = k.start + 1500 + (int64_t)(pos % 7) * 400;
		gpu_free = k.end;
		rc = kp_writer_api(&w, &a, err);
		if (!rc)
			rc = kp_writer_kernel(&w, &k, err);
		if (!rc && ((i + 1) % 100000 == 0 || i + 1 == n))
			rc = kp_db_commit(db, err);
	}
	kp_writer_release(&w);
	if (!rc)
		rc = kp_db_run_finish(db, run, 0, NULL, "complete", err);
	if (!rc)
		rc = kp_db_create_indexes(db, err);
	kp_db_close(db);
	return rc;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	const char *path = argc > 2 ? argv[2] : "/tmp/kplan-bench-analyze.db";
	int reuse = argc > 3 && !strcmp(argv[3], "--reuse");
	struct kp_err err = {0};
	struct kp_analysis_summary s;
	struct kp_analyze_opts o;
	struct rusage ru, ru0;
	struct kp_db *db;
	int64_t t0;

	if (!reuse || access(path, F_OK)) {
		t0 = kp_now_ns();
		if (synth(path, n, &err)) {
			fprintf(stderr, "bench_analyze: synthesis: %s\n", err.msg);
			return 2;
		}
		printf("synthesized %ld kernels + %ld launch calls in %.1f s\n", n, n,
		       (double)(kp_now_ns() - t0) / 1e9);
	}
	db = kp_db_open(path, 0, &err);
	if (!db) {
		fprintf(stderr, "bench_analyze: %s\n", err.msg);
		return 2;
	}
	kp_analyze_opts_init(&o);
	getrusage(RUSAGE_SELF, &ru0);
	t0 = kp_now_ns();
	if (kp_analyze(db, &o, &s, &err)) {
		fprintf(stderr, "bench_analyze: %s\n", err.msg);
		kp_db_close(db);
		return 2;
	}
	double wall = (double)(kp_now_ns() - t0) / 1e9;
	kp_db_close(db);
	getrusage(RUSAGE_SELF, &ru);
#define SEC(tv) ((double)(tv).tv_sec + (double)(tv).tv_usec / 1e6)
	double cpu = SEC(ru.ru_utime) + SEC(ru.ru_stime) - SEC(ru0.ru_utime) - SEC(ru0.ru_stime);
	printf("analyzed %lld ops (%lld regions, %lld fusion candidates, %lld gap rows)"
	       " in %.2f s wall, %.2f s cpu; peak RSS %.0f MiB\n",
	       (long long)s.n_ops, (long long)s.n_regions, (long long)s.n_fusion,
	       (long long)s.n_gap_rows, wall, cpu, ru.ru_maxrss / 1024.0);
	return 0;
}
