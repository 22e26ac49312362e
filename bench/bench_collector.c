/*
 * bench_collector.c - the collector's writer path on one core: synthesized
 * CUPTI kernel records (CUpti_ActivityKernel10, 20 mangled names, one CUPTI
 * name pointer per kernel as CUPTI hands them) decoded by collector/decode.c
 * into struct kp_writer, in transactions of one 4 MiB activity buffer each
 * (as the collector's writer thread does), commit included.
 *
 *   bench_collector [N_KERNELS] [DB]
 *
 * With KP_BENCH_API=1 every kernel also gets its launch API record (the
 * collector's usual 2 records per launch). Prints records per second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/decode.h"
#include "common/kptime.h"
#include "db/writer.h"

static size_t stride;

static int next_fixed(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *p = *rec ? (uint8_t *)*rec + stride : buf;

	if (p + stride > buf + valid)
		return 1;
	*rec = (CUpti_Activity *)p;
	return 0;
}

static const char *api_name(void *ctx, int driver, uint32_t cbid)
{
	(void)ctx;
	(void)driver;
	(void)cbid;
	return "cudaLaunchKernel_v7000";
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *path = argc > 2 ? argv[2] : "/tmp/kplan-bench-collector.db";
	int with_api = getenv("KP_BENCH_API") && atoi(getenv("KP_BENCH_API"));
	struct kp_decode_hooks hooks = { NULL, api_name, NULL };
	struct kp_run_info ri = { .source = "synthetic", .device_name = "bench" };
	struct kp_err err = {0};
	char names[20][96];
	struct kp_decoder dec;
	struct kp_writer w;
	struct kp_db *db;
	size_t per_buf, i, in_buf = 0;
	uint8_t *buf;
	int64_t run, t0, t1, recs = 0;
	long k;

	stride = sizeof(CUpti_ActivityKernel10) > sizeof(CUpti_ActivityAPI) ?
		 sizeof(CUpti_ActivityKernel10) : sizeof(CUpti_ActivityAPI);
	stride = (stride + 7) & ~(size_t)7;
	per_buf = (4u << 20) / stride;
	buf = calloc(per_buf, stride);
	for (i = 0; i < 20; i++)
		snprintf(names[i], sizeof(names[i]), "_Z13bench_kernel%zuIfEvPT_i", i);
	unlink(path);
	db = kp_db_open(path, KP_DB_CREATE, &err);
	if (!buf || !db || kp_db_run_insert(db, &ri, &run, &err) || kp_db_set_bulk(db, 1, &err)) {
		fprintf(stderr, "bench_collector: %s\n", err.msg);
		return 2;
	}
	kp_writer_init(&w, db, run);
	kp_decode_init(&dec, &w, 1234, &hooks);
	t0 = kp_now_ns();
	for (k = 0; k < n; k++) {
		CUpti_ActivityKernel10 *kr = (CUpti_ActivityKernel10 *)(buf + in_buf++ * stride);

		memset(kr, 0, sizeof(*kr));
		kr->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		kr->start = (uint64_t)k * 3000;
		kr->end = kr->start + 2000;
		kr->streamId = 7;
		kr->correlationId = (uint32_t)k;
		kr->gridX = 128; kr->gridY = kr->gridZ = 1;
		kr->blockX = 256; kr->blockY = kr->blockZ = 1;
		kr->registersPerThread = 32;
		kr->name = names[k % 20];
		if (with_api) {
			CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)(buf + in_buf++ * stride);

			memset(a, 0, sizeof(*a));
			a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
			a->cbid = 211;
			a->start = (uint64_t)k * 3000 - 2500;
			a->end = a->start + 2400;
			a->processId = 1234;
			a->threadId = 1234;
			a->correlationId = (uint32_t)k;
		}
		if (in_buf + 2 > per_buf || k == n - 1) {
			if (kp_db_begin(db, &err))
				goto fail;
			recs += kp_decode_buffer(&dec, buf, in_buf * stride, next_fixed, &err);
			if (err.code || kp_db_commit(db, &err))
				goto fail;
			in_buf = 0;
		}
	}
	kp_decode_release(&dec);
	kp_writer_release(&w);
	kp_db_close(db);
	t1 = kp_now_ns();
	printf("bench_collector: %lld records (%ld kernels%s) in %.3f s: %.0f records/s\n",
	       (long long)recs, n, with_api ? " + launch API records" : "", (t1 - t0) / 1e9,
	       recs / ((t1 - t0) / 1e9));
	free(buf);
	unlink(path);
	return 0;
fail:
	fprintf(stderr, "bench_collector: %s\n", err.msg);
	return 2;
}
