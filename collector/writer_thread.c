/*
 * writer_thread.c - the collector's writer thread: takes completed buffers
 * and records built from callbacks off the queues, decodes them (decode.c)
 * and inserts them in one transaction per batch; opens the database and the
 * run row, and at the end applies the capture window and finishes the run
 * (notes, dropped counts, status). The application's threads never wait on
 * it; a database failure stops recording, never the program.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "internal.h"
#include "rank.h"
#include "window.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../db/db.h"
#include "../db/writer.h"

static int write_args(struct kp_db *db, int64_t run_id, struct kp__arg_rec *a, size_t n)
{
	static sqlite3_stmt *st, *pdl;
	size_t i;

	if (!db) {
		sqlite3_finalize(st);
		sqlite3_finalize(pdl);
		st = pdl = NULL;
		return 0;
	}
	if (!st && kp_db_prepare(db, "INSERT OR IGNORE INTO kp_launch_args(runId, correlationId,"
				 " argIndex, size, value) VALUES (?,?,?,?,?)", &st, NULL))
		return -1;
	if (!pdl && kp_db_prepare(db, "INSERT OR IGNORE INTO kp_launch_attrs(runId, correlationId,"
				  " pdl) VALUES (?,?,1)", &pdl, NULL))
		return -1;
	for (i = 0; i < n; i++) {
		if (a[i].index == KP__ARG_PDL) {
			sqlite3_bind_int64(pdl, 1, run_id);
			sqlite3_bind_int64(pdl, 2, a[i].corr);
			if (sqlite3_step(pdl) != SQLITE_DONE) {
				sqlite3_reset(pdl);
				return -1;
			}
			sqlite3_reset(pdl);
			continue;
		}
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int64(st, 2, a[i].corr);
		sqlite3_bind_int(st, 3, a[i].index);
		sqlite3_bind_int(st, 4, (int)a[i].size);
		if (a[i].has_value)
			sqlite3_bind_int64(st, 5, a[i].value);
		else
			sqlite3_bind_null(st, 5);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_reset(st);
			return -1;
		}
		sqlite3_reset(st);
	}
	return 0;
}

static void writer_fail(const char *what, const struct kp_err *err)
{
	if (!atomic_exchange(&kp__col.db_failed, 1))
		kp_warn("%s: %s; recording stops, the program runs on", what,
			err && err->msg[0] ? err->msg : "failed");
}

static const char *getenv_const(const char *name)
{
	return getenv(name);
}

static struct kp_db *open_db(struct kp_err *err)
{
	struct kp_rank rank = { 0, -1, -1, NULL };
	struct kp_run_info ri;
	struct kp_db *db;
	char host[256] = "";
	uint32_t cupti_v = 0;

	db = kp_db_open(kp__col.out, KP_DB_CREATE, err);
	if (!db)
		return NULL;
	if (kp_db_set_bulk(db, 1, err))
		goto fail;
	gethostname(host, sizeof(host) - 1);
	cuptiGetVersion(&cupti_v);
	memset(&ri, 0, sizeof(ri));
	ri.source = "record";
	ri.source_path = kp__col.out;
	ri.command = kp__col.command;
	ri.host = host;
	ri.pid = kp__col.pid;
	ri.driver_version = kp__col_driver_version();
	ri.runtime_version = kp__col_runtime_version();
	ri.cupti_version = (int)cupti_v;
	ri.has_rank = kp_rank_from_env(getenv_const, &rank);
	ri.rank = rank.rank;
	ri.local_rank = rank.local_rank;
	ri.world_size = rank.world_size;
	if (kp_db_run_insert(db, &ri, &kp__col.run_id, err))
		goto fail;
	return db;
fail:
	kp_db_close(db);
	return NULL;
}

static void finish_run(struct kp_db *db, struct kp_decoder *dec, struct kp_writer *w)
{
	struct kp_err err = {0};
	struct kp_strbuf detail = KP_STRBUF_INIT;
	struct kp_window win = { kp__col.nvtx_range, kp__col.profiler_api, kp__col.skip };
	const char *note = NULL;
	int64_t dropped, q = atomic_load(&kp__col.drop_queue_records),
		c = atomic_load(&kp__col.drop_cupti), a = atomic_load(&kp__col.drop_args) + kp__col.args_dropped;
	const char *status = "complete";

	if (kp_db_begin(db, &err) == 0) {
		kp_decode_finish(dec, kp__col.last_ts, &err);
		if (dec->st.devices == 0)
			kp__col_devices_from_driver(w);
		kp_db_commit(db, &err);
	}
	if (kp_window_apply(db, kp__col.run_id, &win, NULL, &note, &err))
		kp_warn("capture window: %s", err.msg);
	if (note)
		kp_db_run_note(db, kp__col.run_id, note, NULL);
	else if (kp_window_active(&win))
		kp_db_run_note(db, kp__col.run_id, "capture window: part of the run kept", NULL);
	if (atomic_load(&kp__col.sig_flush)) {
		kp_db_run_note(db, kp__col.run_id, kp__col.flush_timed_out ?
			    "ended by a signal; the final CUPTI flush did not finish in 3 s, records"
			    " still buffered by CUPTI were lost" : "ended by a signal", NULL);
		if (kp__col.flush_timed_out)
			status = "partial";
	}
	if (kp__col.live) {
		char buf[128];
		int64_t n;

		pthread_mutex_lock(&kp__col_gate_mu);
		n = kp__col.live_starts;
		pthread_mutex_unlock(&kp__col_gate_mu);
		snprintf(buf, sizeof(buf), "--profiler-api: traced live, %lld start/stop window%s",
			 (long long)n, n == 1 ? "" : "s");
		kp_db_run_note(db, kp__col.run_id, buf, NULL);
	}
	if (kp__col.duration_hit) {
		char buf[96];

		snprintf(buf, sizeof(buf), "capture stopped after %g s (--duration)", kp__col.duration_s);
		kp_db_run_note(db, kp__col.run_id, buf, NULL);
	}
	if (dec->st.kernels + dec->st.apis + dec->st.memcpys + dec->st.memsets == 0 &&
	    !note)
		kp_db_run_note(db, kp__col.run_id, "no GPU work was seen", NULL);
	dropped = q + c;
	if (q)
		kp_strbuf_addf(&detail, "%lld records in %lld buffers dropped by kplan (queue over"
			       " KPLAN_MEM_MB=%zu)", (long long)q,
			       (long long)atomic_load(&kp__col.drop_queue_buffers), kp__col.mem_bytes >> 20);
	if (c)
		kp_strbuf_addf(&detail, "%s%lld records dropped by CUPTI", detail.len ? "; " : "",
			       (long long)c);
	if (kp__col.args) {
		char buf[256];

		snprintf(buf, sizeof(buf), "--args: %lld runtime launch calls, %lld driver launch"
			 " calls, %lld launches of functions without parameter info",
			 (long long)atomic_load(&kp__col_n_rt_cb), (long long)atomic_load(&kp__col_n_drv_cb),
			 (long long)atomic_load(&kp__col_n_no_info));
		kp_db_run_note(db, kp__col.run_id, buf, NULL);
	}
	if (a)
		kp_strbuf_addf(&detail, "%s%lld launch arguments dropped", detail.len ? "; " : "",
			       (long long)a);
	if (kp__col.syncs_dropped) {
		kp_strbuf_addf(&detail, "%s%lld records built from callbacks (synchronization, API)"
			       " dropped (queue over KPLAN_MEM_MB=%zu / 16)", detail.len ? "; " : "",
			       (long long)kp__col.syncs_dropped, kp__col.mem_bytes >> 20);
		dropped += kp__col.syncs_dropped;
	}
	if (dec->st.unknown)
		kp_strbuf_addf(&detail, "%s%lld records of unhandled kinds skipped",
			       detail.len ? "; " : "", (long long)dec->st.unknown);
	if (dec->st.failed)
		kp_strbuf_addf(&detail, "%s%lld records failed to insert", detail.len ? "; " : "",
			       (long long)dec->st.failed);
	if (dropped || dec->st.failed)
		status = "partial";
	if (kp_db_run_finish(db, kp__col.run_id, dropped, detail.len ? detail.buf : NULL, status, &err))
		kp_warn("finishing the run row in %s: %s", kp__col.out, err.msg);
	kp_strbuf_release(&detail);
	/* a dying process (signal) has no time to index; readers index later */
	if (!atomic_load(&kp__col.sig_flush) && kp_db_create_indexes(db, &err))
		kp_warn("indexing %s: %s", kp__col.out, err.msg);
}

/* Flush CUPTI's buffers into our queue and tell the writer to stop once
 * the queue is drained. */
void kp__col_final_flush(void)
{
	size_t dropped = 0;

	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&kp__col.drop_cupti, (long long)dropped);
	pthread_mutex_lock(&kp__col.mu);
	kp__col.stop = 1;
	pthread_cond_signal(&kp__col.cv);
	pthread_mutex_unlock(&kp__col.mu);
}

static atomic_int flush_done;

static void *flush_thread(void *arg)
{
	(void)arg;
	kp__col_final_flush();
	atomic_store(&flush_done, 1);
	return NULL;
}

/*
 * The process is dying by a signal. The interrupted thread may hold a lock
 * that cuptiActivityFlushAll needs, so flush from a helper thread and give
 * up after 3 s: the run is finished with what was delivered so far.
 */
static void signal_flush(void)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	pthread_attr_t attr;
	pthread_t t;
	int i;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, flush_thread, NULL) == 0) {
		for (i = 0; i < 300 && !atomic_load(&flush_done); i++)
			nanosleep(&tick, NULL);
	}
	pthread_attr_destroy(&attr);
	if (!atomic_load(&flush_done))
		kp__col.flush_timed_out = 1;
	pthread_mutex_lock(&kp__col.mu);
	kp__col.stop = 1;
	pthread_mutex_unlock(&kp__col.mu);
}

/* remember the latest timestamp seen: the end for ranges left open */
static void note_time(const CUpti_Activity *rec)
{
	int64_t t = 0;

	if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		t = (int64_t)((const CUpti_ActivityKernel10 *)rec)->end;
	else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
		t = (int64_t)((const CUpti_ActivityAPI *)rec)->end;
	else if (rec->kind == CUPTI_ACTIVITY_KIND_MARKER)
		t = (int64_t)((const CUpti_ActivityMarker2 *)rec)->timestamp;
	if (t > kp__col.last_ts)
		kp__col.last_ts = t;
}

/* What the writer takes from the queues in one round. */
struct wbatch {
	struct kp__qbuf bufs[16];          /* CUPTI activity buffers */
	size_t n;
	KP_VEC(struct kp__arg_rec) args;   /* launch arguments (--args) */
	KP_VEC(union kp__synth_rec) syncs; /* records built from callbacks */
};

/*
 * Wait for work (records built from callbacks are taken a batch at a time,
 * or within 50 ms of the first), then take it from the queues into b.
 * Returns whether the writer stops after this batch.
 */
static int take_batch(struct wbatch *b)
{
	int stop, waited;

	pthread_mutex_lock(&kp__col.mu);
	for (waited = 0; !kp__col.qlen && !kp__col.stop && !kp__col.argq.len &&
	     (!kp__col.syncq.len || (kp__col.syncq.len < kp__col_synth_batch() && !waited)) &&
	     atomic_load(&kp__col.sig_flush) != 1;) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (kp__col.syncq.len ? 50 : 250) * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&kp__col.cv, &kp__col.mu, &ts) == ETIMEDOUT && kp__col.syncq.len)
			waited = 1;
		if (kp__col.duration_s > 0 && !kp__col.duration_hit &&
		    kp_now_ns() - kp__col.t0_ns >= (int64_t)(kp__col.duration_s * 1e9))
			break;
	}
	while (kp__col.qlen && b->n < sizeof(b->bufs) / sizeof(b->bufs[0])) {
		b->bufs[b->n++] = kp__col.q[kp__col.qhead];
		kp__col.qhead = (kp__col.qhead + 1) % kp__col.qcap;
		kp__col.qlen--;
	}
	if (kp__col.argq.len) {
		b->args.data = kp__col.argq.data;
		b->args.len = kp__col.argq.len;
		b->args.cap = kp__col.argq.cap;
		memset(&kp__col.argq, 0, sizeof(kp__col.argq));
	}
	if (kp__col.syncq.len) {
		b->syncs.data = kp__col.syncq.data;
		b->syncs.len = kp__col.syncq.len;
		b->syncs.cap = kp__col.syncq.cap;
		memset(&kp__col.syncq, 0, sizeof(kp__col.syncq));
	}
	stop = kp__col.stop && !kp__col.qlen;
	pthread_mutex_unlock(&kp__col.mu);
	return stop;
}

/* Decode and write b in one transaction; a failure stops all writing (writer_fail). */
static void write_batch(struct kp_decoder *dec, struct wbatch *b)
{
	struct kp_err err = {0};
	size_t i;

	if (kp_db_begin(kp__col.db, &err)) {
		writer_fail("writing the database", &err);
		return;
	}
	for (i = 0; i < b->n; i++) {
		CUpti_Activity *rec = NULL;

		while (cuptiActivityGetNextRecord(b->bufs[i].p, b->bufs[i].valid, &rec) == CUPTI_SUCCESS) {
			struct kp_err e2 = {0};

			note_time(rec);
			if (kp_decode_record(dec, rec, &e2) < 0 && !err.code)
				err = e2;
		}
	}
	for (i = 0; i < b->syncs.len; i++) {
		struct kp_err e2 = {0};
		CUpti_Activity *rec = (CUpti_Activity *)&b->syncs.data[i];

		note_time(rec);
		if (kp_decode_record(dec, rec, &e2) < 0 && !err.code)
			err = e2;
	}
	if (b->args.len && write_args(kp__col.db, kp__col.run_id, b->args.data, b->args.len))
		atomic_fetch_add(&kp__col.drop_args, (long long)b->args.len);
	if (err.code) {
		kp_db_rollback(kp__col.db);
		writer_fail("writing the database", &err);
	} else if (kp_db_commit(kp__col.db, &err)) {
		kp_db_rollback(kp__col.db);
		writer_fail("writing the database", &err);
	}
}

/* Give b's buffers back (counted as dropped when the database failed). */
static void release_batch(struct wbatch *b)
{
	size_t i;

	if (atomic_load(&kp__col.db_failed)) {
		for (i = 0; i < b->n; i++)
			atomic_fetch_add(&kp__col.drop_db_records, kp__col_count_records(b->bufs[i].p, b->bufs[i].valid));
	}
	kp_vec_release(&b->args);
	kp_vec_release(&b->syncs);
	pthread_mutex_lock(&kp__col.mu);
	for (i = 0; i < b->n; i++)
		kp__col.queued_bytes -= b->bufs[i].size;
	pthread_mutex_unlock(&kp__col.mu);
	for (i = 0; i < b->n; i++)
		kp__col_buf_put(b->bufs[i].p);
}

void *kp__col_writer_main(void *arg)
{
	struct kp_err err = {0};
	struct kp_writer w;
	struct kp_decoder dec;
	struct kp_decode_hooks hooks = { NULL, kp__col_api_name, kp__col_demangle };
	sigset_t all;

	(void)arg;
	/* signals belong to the application's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	kp__col.db = open_db(&err);
	if (!kp__col.db) {
		writer_fail("cannot record", &err);
		pthread_mutex_lock(&kp__col.mu);
		kp__col.have_writer = 0;
		pthread_mutex_unlock(&kp__col.mu);
		kp__col_disable_all();
		atomic_store(&kp__col.finished, 1);
		return NULL;
	}
	kp_writer_init(&w, kp__col.db, kp__col.run_id);
	kp_decode_init(&dec, &w, kp__col.pid, &hooks);
	for (;;) {
		struct wbatch b;
		int stop;

		memset(&b, 0, sizeof(b));
		if (atomic_load(&kp__col.sig_flush) == 1) {
			/* asked from a signal handler, which cannot flush itself */
			atomic_store(&kp__col.sig_flush, 2);
			signal_flush();
		}
		stop = take_batch(&b);
		if (kp__col.duration_s > 0 && !kp__col.duration_hit &&
		    kp_now_ns() - kp__col.t0_ns >= (int64_t)(kp__col.duration_s * 1e9)) {
			kp__col.duration_hit = 1;
			kp__col_disable_all();
		}
		if ((b.n || b.args.len || b.syncs.len) && !atomic_load(&kp__col.db_failed))
			write_batch(&dec, &b);
		release_batch(&b);
		if (stop)
			break;
	}
	if (!atomic_load(&kp__col.db_failed))
		finish_run(kp__col.db, &dec, &w);
	else if (atomic_load(&kp__col.drop_db_records))
		kp_warn("%lld records not written to %s", (long long)atomic_load(&kp__col.drop_db_records),
			kp__col.out);
	write_args(NULL, 0, NULL, 0);
	kp_decode_release(&dec);
	kp_writer_release(&w);
	kp_db_close(kp__col.db);
	kp__col.db = NULL;
	atomic_store(&kp__col.finished, 1);
	return NULL;
}
