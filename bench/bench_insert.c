/*
 * bench_insert.c - bulk insert rate of kernel rows through struct kp_writer.
 *
 *   bench_insert [N_ROWS] [BATCH] [DB]
 *
 * Inserts N synthetic kernel rows (20 distinct names, realistic field
 * values) in transactions of BATCH rows into a fresh database, commit
 * included, and prints rows per second. One thread, so it measures one core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/kptime.h"
#include "db/writer.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	long batch = argc > 2 ? atol(argv[2]) : 100000;
	const char *path = argc > 3 ? argv[3] : "/tmp/kplan-bench-insert.db";
	char names[20][64];
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "synthetic", .device_name = "bench" };
	struct kp_kernel_rec k = { .grid = { 128, 1, 1 }, .block = { 256, 1, 1 },
				   .registers = 32, .stream_id = 7 };
	struct kp_writer w;
	struct kp_db *db;
	int64_t run, t0, t1;
	long i;

	for (i = 0; i < 20; i++)
		snprintf(names[i], sizeof(names[i]), "void bench_kernel_%ld<float>(float*, int)", i);
	unlink(path);
	db = kp_db_open(path, KP_DB_CREATE, &err);
	if (!db || kp_db_run_insert(db, &ri, &run, &err)) {
		fprintf(stderr, "bench_insert: %s\n", err.msg);
		return 2;
	}
	if (kp_db_set_bulk(db, 1, &err))
		goto fail;
	if (getenv("KP_BENCH_PRAGMA") && kp_db_exec(db, getenv("KP_BENCH_PRAGMA"), &err))
		goto fail;
	kp_writer_init(&w, db, run);
	t0 = kp_now_ns();
	for (i = 0; i < n; i++) {
		if (i % batch == 0 && kp_db_begin(db, &err))
			goto fail;
		k.start = i * 3000;
		k.end = k.start + 2000;
		k.correlation_id = (uint32_t)i;
		k.name = names[i % 20];
		if (kp_writer_kernel(&w, &k, &err))
			goto fail;
		if ((i + 1) % batch == 0 && kp_db_commit(db, &err))
			goto fail;
	}
	if (n % batch && kp_db_commit(db, &err))
		goto fail;
	kp_writer_release(&w);
	kp_db_close(db);  /* includes the final WAL checkpoint */
	t1 = kp_now_ns();
	printf("bench_insert: %ld kernel rows in %.3f s = %.0f rows/s (batch %ld)\n",
	       n, (t1 - t0) / 1e9, n / ((t1 - t0) / 1e9), batch);
	unlink(path);
	return 0;
fail:
	fprintf(stderr, "bench_insert: %s\n", err.msg);
	return 2;
}
