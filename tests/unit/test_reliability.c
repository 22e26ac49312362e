/*
 * test_reliability.c - faults and hostile inputs across modules: a
 * recording killed with SIGKILL, a full disk, read-only outputs, and the
 * fuzzers' corpora (every past finding included) fed through the normal
 * APIs. See docs/RELIABILITY.md for what each test stands for.
 *
 * The recording tests drive the collector's writer path without CUPTI:
 * synthesized CUPTI activity records go through the collector's decoder
 * (collector/decode.h) into a struct kp_writer, in kp_db_begin/kp_db_commit
 * batches with kp_db_set_bulk on, as the collector's writer thread does
 * (collector/writer_thread.c).
 */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <CUnit/CUnit.h>
#include <sqlite3.h>

#include "collector/decode.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "db/db.h"
#include "db/writer.h"
#include "importers/import.h"
#include "fusion/catalog.h"
#include "fusion/generate.h"
#include "plan/planfile.h"
#include "plan/sign.h"
#include "runtime/fcache.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* helpers */

/* dir/name in a small ring of static buffers (a few live at once). */
static const char *in_dir_path(const char *dir, const char *name)
{
	static char ring[4][4096];
	static int k;
	char *p = ring[k++ % 4];

	snprintf(p, sizeof(ring[0]), "%s/%s", dir, name);
	return p;
}

static int64_t q(struct kp_db *db, const char *sql)
{
	return kp_db_int(db, sql, -1);
}

/* PRAGMA integrity_check's answer ("ok" when sound); static storage. */
static const char *integrity(struct kp_db *db)
{
	static char buf[256];
	sqlite3_stmt *st;

	snprintf(buf, sizeof(buf), "(no answer)");
	if (kp_db_prepare(db, "PRAGMA integrity_check", &st, NULL))
		return buf;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, sizeof(buf), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

static const char *fake_api_name(void *ctx, int driver, uint32_t cbid)
{
	(void)ctx;
	(void)cbid;
	return driver ? "cuLaunchKernel" : "cudaLaunchKernel";
}

/* ------------------------------------------------------------------------ */
/* the fake producer: the collector's writer path minus CUPTI */

#define PROD_KERNELS 500   /* kernel records per batch, each with its API record */
#define PROD_ROWS (2 * PROD_KERNELS)

/*
 * Child process: record batches into path until killed, until max_batches
 * (0: no limit) or until a write fails. After each COMMIT the batch number
 * goes to fd (4 bytes). On a failure the child writes the error message to
 * path + ".err" and exits 3; it never crashes.
 */
static int prod_rank = -1;   /* >= 0: the producer's run is that rank of a 2-rank job */

static void producer(const char *path, int fd, int max_batches)
{
	static const char *const names[] = { "_Z4gemmPfS_i", "_Z4reluPf", "_Z7softmaxPfi",
					     "_Z9layernormPfS_S_" };
	struct kp_decode_hooks hooks = { NULL, fake_api_name, NULL };
	struct kp_run_info ri;
	struct kp_err err = {0};
	struct kp_writer w;
	struct kp_decoder dec;
	struct kp_db *db;
	int64_t run_id = 0;
	uint32_t corr = 1;
	uint64_t t = 1000000;
	int32_t b;
	int i;

	kp_log_set_level(KP_LOG_ERROR);
	db = kp_db_open(path, KP_DB_CREATE, &err);
	if (!db || kp_db_set_bulk(db, 1, &err))
		goto fail;
	memset(&ri, 0, sizeof(ri));
	ri.source = "record";
	ri.pid = getpid();
	if (prod_rank >= 0) {
		ri.has_rank = 1;
		ri.rank = ri.local_rank = prod_rank;
		ri.world_size = 2;
	}
	if (kp_db_run_insert(db, &ri, &run_id, &err))
		goto fail;
	kp_writer_init(&w, db, run_id);
	kp_decode_init(&dec, &w, getpid(), &hooks);
	for (b = 1; !max_batches || b <= max_batches; b++) {
		if (kp_db_begin(db, &err))
			goto fail_w;
		for (i = 0; i < PROD_KERNELS; i++, corr++, t += 5000) {
			CUpti_ActivityKernel10 k;
			CUpti_ActivityAPI a;

			memset(&a, 0, sizeof(a));
			a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
			a.cbid = 211;
			a.start = t;
			a.end = t + 3000;
			a.processId = (uint32_t)getpid();
			a.threadId = 77;
			a.correlationId = corr;
			memset(&k, 0, sizeof(k));
			k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			k.start = t + 3500;
			k.end = t + 4500;
			k.contextId = 1;
			k.streamId = 7;
			k.correlationId = corr;
			k.gridX = k.gridY = k.gridZ = 1;
			k.blockX = 256;
			k.blockY = k.blockZ = 1;
			k.name = names[i % 4];
			if (kp_decode_record(&dec, (CUpti_Activity *)&a, &err) < 0 ||
			    kp_decode_record(&dec, (CUpti_Activity *)&k, &err) < 0) {
				kp_db_rollback(db);
				goto fail_w;
			}
		}
		if (kp_db_commit(db, &err))
			goto fail_w;
		if (write(fd, &b, sizeof(b)) != sizeof(b))
			_exit(4);
	}
	kp_decode_release(&dec);
	kp_writer_release(&w);
	kp_db_close(db);
	_exit(0);
fail_w:
	kp_decode_release(&dec);
	kp_writer_release(&w);
fail:
	{
		char ep[4096];

		snprintf(ep, sizeof(ep), "%s.err", path);
		kp_test_write(ep, err.msg[0] ? err.msg : "(no message)", -1);
		kp_db_close(db);
	}
	_exit(3);
}

struct child {
	pid_t pid;
	int fd;          /* read end of the producer's pipe */
	int32_t last;    /* last batch number it reported committed */
};

/* Start a producer. limit_bytes > 0: RLIMIT_FSIZE in the child (disk full). */
static int child_start(struct child *c, const char *path, int max_batches, long limit_bytes)
{
	int p[2];

	c->last = 0;
	if (pipe(p))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		close(p[0]);
		if (limit_bytes > 0) {
			struct rlimit rl = { (rlim_t)limit_bytes, (rlim_t)limit_bytes };

			/* a write past the limit must fail with EFBIG, not kill */
			signal(SIGXFSZ, SIG_IGN);
			if (setrlimit(RLIMIT_FSIZE, &rl))
				_exit(5);
		}
		producer(path, p[1], max_batches);
	}
	close(p[1]);
	c->fd = p[0];
	return 0;
}

/* Read reports until batch >= until (0: until EOF). 0 when reached. */
static int child_read(struct child *c, int32_t until)
{
	int32_t b;

	while (!until || c->last < until) {
		ssize_t n = read(c->fd, &b, sizeof(b));

		if (n != (ssize_t)sizeof(b))
			return -1;
		c->last = b;
	}
	return 0;
}

/* Reap the child; returns its wait status. Drains the pipe first. */
static int child_wait(struct child *c)
{
	int status = 0;

	child_read(c, 0);
	close(c->fd);
	waitpid(c->pid, &status, 0);
	return status;
}

/*
 * The checks after a crash: the file opens read-only (what `kplan analyze`
 * does first), passes integrity_check, holds every batch the producer
 * reported, and nothing of a batch that was not committed (whole batches
 * only: at most one batch beyond the last report, committed just before the
 * kill). Then it opens for writing again and takes another run.
 */
static void check_after_crash(const char *path, int32_t reported, const char *what)
{
	struct kp_err err = {0};
	struct kp_db *db = kp_db_open(path, KP_DB_RDONLY, &err);
	int64_t kernels, apis, runs;

	if (!db)
		fprintf(stderr, "%s: open after crash: %s\n", what, err.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_STRING_EQUAL(integrity(db), "ok");
	kernels = q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL");
	apis = q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME");
	runs = q(db, "SELECT count(*) FROM kp_runs");
	if (kernels < (int64_t)reported * PROD_KERNELS || kernels % PROD_KERNELS ||
	    kernels > ((int64_t)reported + 1) * PROD_KERNELS || apis != kernels)
		fprintf(stderr, "%s: reported %d batches, db holds %lld kernels %lld api rows\n",
			what, reported, (long long)kernels, (long long)apis);
	CU_ASSERT(kernels >= (int64_t)reported * PROD_KERNELS);
	CU_ASSERT(kernels <= ((int64_t)reported + 1) * PROD_KERNELS);
	CU_ASSERT_EQUAL(kernels % PROD_KERNELS, 0);
	CU_ASSERT_EQUAL(apis, kernels);
	/* every committed kernel still joins its API call */
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
			  " CUPTI_ACTIVITY_KIND_RUNTIME r USING (runId, correlationId)"), kernels);
	if (reported > 0) {
		CU_ASSERT_EQUAL(runs, 1);
		/* the run was never finished: it must not claim to be complete */
		CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM kp_runs WHERE status = 'partial'"), 1);
	}
	kp_db_close(db);
	/* the file takes the next recording */
	db = kp_db_open(path, KP_DB_CREATE, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_exec(db, "INSERT INTO kp_runs(created_ns, source) VALUES (1, 'synthetic')",
				   &err), 0);
	CU_ASSERT_STRING_EQUAL(integrity(db), "ok");
	kp_db_close(db);
}

static void rm_db(const char *path)
{
	kp_test_sh("rm -f '%s' '%s-wal' '%s-shm' '%s-journal' '%s.err'", path, path, path, path, path);
}

/* SIGKILL after a given number of committed batches, at several depths
 * (the deepest crosses WAL auto-checkpoints: ~10 pages a batch). */
static void test_sigkill_recording(void)
{
	static const int32_t kill_after[] = { 1, 3, 17, 120 };
	size_t i;

	for (i = 0; i < sizeof(kill_after) / sizeof(kill_after[0]); i++) {
		const char *path = kp_test_path("killed.db");
		struct child c;
		int status;
		char what[64];

		rm_db(path);
		CU_ASSERT_EQUAL_FATAL(child_start(&c, path, 0, 0), 0);
		CU_ASSERT_EQUAL(child_read(&c, kill_after[i]), 0);
		/* mid-batch: the next transaction is being written */
		kill(c.pid, SIGKILL);
		status = child_wait(&c);
		CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		snprintf(what, sizeof(what), "kill after %d batches", kill_after[i]);
		check_after_crash(path, c.last, what);
	}
}

/*
 * Two ranks of one job record into one database at once (as `kplan record
 * -- torchrun` does) and rank 0 is killed mid-run: the file stays valid, the
 * other rank's run is whole, the killed rank's holds its committed batches
 * only, and `kplan info` lists both ranks.
 */
static void test_sigkill_one_rank(void)
{
	const char *path = kp_test_path("ranks.db");
	struct kp_err err = {0};
	struct child r0, r1;
	struct kp_db *db;
	int status;

	rm_db(path);
	/* no file yet: both ranks create it at once (kplan record makes it
	 * first; a program given the collector by hand does not) */
	prod_rank = 0;
	CU_ASSERT_EQUAL_FATAL(child_start(&r0, path, 0, 0), 0);
	prod_rank = 1;
	CU_ASSERT_EQUAL_FATAL(child_start(&r1, path, 40, 0), 0);
	prod_rank = -1;
	if (child_read(&r0, 5) || child_read(&r1, 2)) {   /* both writing when the kill comes */
		kp_test_sh("cat '%s.err' >&2", path);
		CU_FAIL("a rank stopped before the kill");
	}
	kill(r0.pid, SIGKILL);
	status = child_wait(&r0);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	status = child_wait(&r1);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT_EQUAL(r1.last, 40);

	db = kp_db_open(path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_STRING_EQUAL(integrity(db), "ok");
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM kp_runs WHERE rank IS NOT NULL"), 2);
	/* the survivor: every batch, every kernel joined to its call */
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL JOIN kp_runs"
			  " USING (runId) WHERE rank = 1"), 40 * PROD_KERNELS);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
			  " CUPTI_ACTIVITY_KIND_RUNTIME r USING (runId, correlationId) JOIN kp_runs"
			  " USING (runId) WHERE rank = 1"), 40 * PROD_KERNELS);
	/* the killed rank: whole batches, at least those it reported */
	{
		int64_t k0 = q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL JOIN kp_runs"
			       " USING (runId) WHERE rank = 0");

		CU_ASSERT(k0 >= (int64_t)r0.last * PROD_KERNELS);
		CU_ASSERT(k0 <= ((int64_t)r0.last + 1) * PROD_KERNELS);
		CU_ASSERT_EQUAL(k0 % PROD_KERNELS, 0);
	}
	kp_db_close(db);
	CU_ASSERT_EQUAL(kp_test_sh("%s info %s | awk '$1 == \"rank\" {print $2}' | sort |"
				   " tr '\\n' ' ' | grep -qx '0 1 '", kp_test_kplan(), path), 0);
}

/* SIGKILL at arbitrary moments from the start: during open, schema
 * creation, the run insert, the first batches. */
static void test_sigkill_early(void)
{
	static const int delays_us[] = { 0, 300, 1000, 3000, 8000, 20000 };
	size_t i;

	for (i = 0; i < sizeof(delays_us) / sizeof(delays_us[0]); i++) {
		const char *path = kp_test_path("early.db");
		struct kp_err err = {0};
		struct kp_db *db;
		struct child c;
		char what[64];

		rm_db(path);
		CU_ASSERT_EQUAL_FATAL(child_start(&c, path, 0, 0), 0);
		if (delays_us[i])
			usleep((useconds_t)delays_us[i]);
		kill(c.pid, SIGKILL);
		child_wait(&c);
		snprintf(what, sizeof(what), "kill after %d us", delays_us[i]);
		if (c.last > 0) {
			check_after_crash(path, c.last, what);
			continue;
		}
		/* killed before its first commit: whatever is there must open
		 * for writing (a new recording into the same path works) */
		db = kp_db_open(path, KP_DB_CREATE, &err);
		if (!db)
			fprintf(stderr, "%s: %s\n", what, err.msg);
		CU_ASSERT_PTR_NOT_NULL_FATAL(db);
		CU_ASSERT_STRING_EQUAL(integrity(db), "ok");
		CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") % PROD_KERNELS, 0);
		kp_db_close(db);
	}
}

/* A producer that runs out of disk: a clean error (exit 3 with a message
 * saying so), never a crash; the database keeps every reported batch. */
static void test_disk_full_recording(void)
{
	static const long limits[] = { 300 * 1024, 1536 * 1024 };
	size_t i;

	for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		const char *path = kp_test_path("full.db");
		char ep[4096], *msg;
		struct child c;
		int status;

		rm_db(path);
		CU_ASSERT_EQUAL_FATAL(child_start(&c, path, 400, limits[i]), 0);
		status = child_wait(&c);
		CU_ASSERT(WIFEXITED(status));
		CU_ASSERT_EQUAL(WEXITSTATUS(status), 3);
		snprintf(ep, sizeof(ep), "%s.err", path);
		msg = kp_test_read(ep, NULL);
		CU_ASSERT_PTR_NOT_NULL(msg);
		if (msg) {
			CU_ASSERT_PTR_NOT_NULL(strstr(msg, "full"));
			free(msg);
		}
		/* the largest limit must have let some batches through */
		if (i == 1)
			CU_ASSERT(c.last > 0);
		if (c.last > 0)
			check_after_crash(path, c.last, "disk full");
	}
}

/* `kplan import` into a file system that fills up: exit 2 with a message,
 * no output file left behind; the same into an existing database leaves it
 * as it was. (The trace is the bundled 2.4 MB resnet trace.) */
static void test_disk_full_import(void)
{
	const char *dir = kp_test_path("full_import");
	const char *trace = kp_test_src("tests/fixtures/resnet18_b1.json.gz");
	struct kp_err err = {0};
	struct kp_db *db;
	int rc;

	kp_test_sh("rm -rf '%s' && mkdir -p '%s'", dir, dir);
	/* ulimit -f counts 1024-byte blocks in bash and 512 in dash: either is
	 * far below the ~1 MB the import writes */
	rc = kp_test_sh("cd '%s' && trap '' XFSZ && ulimit -f 400 && %s import %s -o new.db"
			" > log 2>&1", dir, kp_test_kplan(), trace);
	CU_ASSERT_EQUAL(rc, 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'full\\|too large\\|EFBIG\\|I/O' '%s/log'", dir), 0);
	/* the message names the file the user asked for, not the temporary one */
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'new\\.db' '%s/log' && ! grep -q 'tmp-' '%s/log'",
				   dir, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("ls -A '%s' | grep -v '^log$' | grep -q .", dir), 1);
	if (rc != 2)
		kp_test_sh("cat '%s/log' >&2", dir);
	/* appending to an existing database that cannot grow */
	CU_ASSERT_EQUAL(kp_test_sh("cd '%s' && %s import %s -o base.db > /dev/null 2>&1", dir,
				   kp_test_kplan(), trace), 0);
	rc = kp_test_sh("cd '%s' && trap '' XFSZ && ulimit -f 600 && %s import %s -o base.db"
			" > log 2>&1", dir, kp_test_kplan(), trace);
	CU_ASSERT_EQUAL(rc, 2);
	db = kp_db_open(in_dir_path(dir, "base.db"), KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_STRING_EQUAL(integrity(db), "ok");
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM kp_runs"), 1);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 1020);
	kp_db_close(db);
}

/* ------------------------------------------------------------------------ */
/* read-only locations */

/*
 * Permission bits do not stop root, so when the tests run as root the
 * commands run as nobody (setpriv); without setpriv the test is skipped.
 * Returns the prefix for the command line, or NULL to skip.
 */
/*
 * Finding 1: a database in a read-only directory (a CI artifact, a shared
 * or mounted copy) could not be read at all: SQLite must create the -shm
 * file of a WAL database, and every reading command failed with "attempt
 * to write a readonly database" (fixed in db/db.c, reopen_immutable).
 * Every reading command must work on it; writing commands fail with
 * exit 2 and one error line; nothing crashes and the file is unchanged.
 */
static void test_readonly_paths(void)
{
	const char *pre = kp_test_unprivileged(), *dir, *db_path, *log;
	const char *kplan = kp_test_kplan();
	const char *trace = kp_test_src("tests/fixtures/resnet18_b1.json.gz");
	char *before, *after;
	size_t n1 = 0, n2 = 0;
	int rc;

	if (!pre)
		return;
	dir = kp_test_public_dir();
	CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
	db_path = in_dir_path(dir, "run.db");
	log = kp_test_path("ro.log");
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import %s -o %s > /dev/null 2>&1 && %s analyze %s"
					 " > /dev/null 2>&1", kplan, trace, db_path, kplan, db_path), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan %s -o %s/model.kplan > /dev/null 2>&1", kplan,
				   db_path, dir), 0);
	/* a reader that cannot write the file, in a directory it can write,
	 * leaves no -wal or -shm beside it */
	kp_test_sh("chmod 0444 %s/* && chmod 0777 %s", dir, dir);
	rc = kp_test_sh("%s%s report %s -o /dev/null > %s 2>&1", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(kp_test_sh("ls %s | grep -q -- '-wal\\|-shm'", dir), 1);
	/* a writer is told which of file and directory it cannot write, and why */
	rc = kp_test_sh("%s%s analyze %s > %s 2>&1", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'run.db: cannot write to this database (Permission "
				   "denied)' %s && ! grep -q 'readonly database' %s", log, log), 0);
	kp_test_sh("chmod 0666 %s && chmod 0555 %s", db_path, dir);
	rc = kp_test_sh("%s%s analyze %s > %s 2>&1", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'cannot write in the directory %s (Permission denied)'"
				   " %s", dir, log), 0);
	kp_test_sh("chmod 0444 %s", db_path);
	before = kp_test_read(db_path, &n1);

	/* reading commands: output to a writable place */
	rc = kp_test_sh("%s%s info %s > %s 2>&1", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc)
		kp_test_sh("cat %s >&2", log);
	rc = kp_test_sh("%s%s report %s -o /dev/null > %s 2>&1", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc)
		kp_test_sh("cat %s >&2", log);
	rc = kp_test_sh("%s%s export %s --chrome - 2> %s > /dev/null", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc)
		kp_test_sh("cat %s >&2", log);
	CU_ASSERT_EQUAL(kp_test_sh("%s%s show %s/model.kplan > /dev/null 2>&1", pre, kplan, dir), 0);

	/* writing commands: exit 2 and one line naming the file */
	rc = kp_test_sh("%s%s import %s -o %s/new.db > %s 2>&1", pre, kplan, trace, dir, log);
	CU_ASSERT_EQUAL(rc, 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'new.db' %s && test $(wc -l < %s) -eq 1", log, log), 0);
	rc = kp_test_sh("%s%s import %s -o %s > %s 2>&1", pre, kplan, trace, db_path, log);
	CU_ASSERT_EQUAL(rc, 2);
	rc = kp_test_sh("%s%s analyze %s > %s 2>&1", pre, kplan, db_path, log);
	CU_ASSERT_EQUAL(rc, 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'run.db' %s", log), 0);
	rc = kp_test_sh("%s%s plan %s -o %s/new.kplan > %s 2>&1", pre, kplan, db_path, dir, log);
	CU_ASSERT_EQUAL(rc, 2);
	rc = kp_test_sh("%s%s report %s -o %s/r.html > %s 2>&1", pre, kplan, db_path, dir, log);
	CU_ASSERT_EQUAL(rc, 2);
	CU_ASSERT_EQUAL(kp_test_sh("ls %s | grep -q 'new\\|r.html\\|-wal\\|-shm\\|tmp'", dir), 1);

	after = kp_test_read(db_path, &n2);
	CU_ASSERT(before && after && n1 == n2 && !memcmp(before, after, n1));
	free(before);
	free(after);
	kp_test_sh("chmod -R u+w %s && rm -rf %s", dir, dir);
}

/* ------------------------------------------------------------------------ */
/* the fuzzers' corpora through the normal APIs (tests/fuzz/corpus/) */

/* Files of tests/fuzz/corpus/<target>/, each handed to fn. Returns count. */
static int for_corpus(const char *target, void (*fn)(const char *path, const char *name))
{
	char rel[256];
	const char *dir;
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(rel, sizeof(rel), "tests/fuzz/corpus/%s", target);
	dir = kp_test_src(rel);
	d = opendir(dir);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		fn(in_dir_path(dir, de->d_name), de->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/* parse; when it parses, write, re-parse and write again: same bytes */
static void plan_roundtrip(const char *buf, size_t len, const char *name)
{
	struct kp_err err = {0};
	struct kp_strbuf w1 = KP_STRBUF_INIT, w2 = KP_STRBUF_INIT;
	struct kp_plan *p1 = kp_plan_parse(buf, len, name, &err), *p2;

	if (!p1) {
		CU_ASSERT(err.code < 0 && err.msg[0]);
		return;
	}
	CU_ASSERT_EQUAL(kp_plan_write(p1, &w1, &err), 0);
	if (err.code)
		fprintf(stderr, "%s: rewrite: %s\n", name, err.msg);
	p2 = kp_plan_parse(w1.buf, w1.len, name, &err);
	CU_ASSERT_PTR_NOT_NULL(p2);
	if (p2) {
		CU_ASSERT_EQUAL(kp_plan_write(p2, &w2, &err), 0);
		CU_ASSERT(w1.len == w2.len && !memcmp(w1.buf, w2.buf, w1.len));
	}
	kp_plan_free(p1);
	kp_plan_free(p2);
	kp_strbuf_release(&w1);
	kp_strbuf_release(&w2);
}

static void corpus_plan(const char *path, const char *name)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	size_t len = 0, skip = 0;
	char *buf = kp_test_read(path, &len);
	int nl = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	plan_roundtrip(buf, len, name);
	/* as the fuzzer does: the bytes as a body behind a valid header */
	if (len > 11 && !memcmp(buf, KP_PLAN_MAGIC " ", 11))
		for (; skip < len && nl < 3; skip++)
			nl += buf[skip] == '\n';
	if (skip < len) {
		kp_strbuf_addf(&sb, KP_PLAN_MAGIC " %d\nbody-bytes %zu\nbody-hash %016llx\n",
			       memmem(buf + skip, len - skip, "\nfor ", 5) ? 3 : KP_PLAN_FORMAT_BASE,
			       len - skip,
			       (unsigned long long)kp_hash64(buf + skip, len - skip, KP_HASH_SEED));
		kp_strbuf_add(&sb, buf + skip, len - skip);
		plan_roundtrip(sb.buf, sb.len, name);
	}
	kp_strbuf_release(&sb);
	free(buf);
}

/* kp_import() of one corpus file: 0, or an error with a message and no
 * output file; on success the row counts match the tables. */
static void import_one(const char *trace, const char *name)
{
	const char *out = kp_test_path("corpus_import.db");
	struct kp_import_stats st;
	struct kp_err err = {0};
	struct kp_db *db;
	int rc;

	rm_db(out);
	rc = kp_import(trace, out, NULL, &st, &err);
	if (rc) {
		CU_ASSERT(rc < 0 && err.code == rc && err.msg[0]);
		CU_ASSERT(access(out, F_OK) != 0);
		return;
	}
	db = kp_db_open(out, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), st.rows[KP_T_KERNEL]);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"), st.rows[KP_T_RUNTIME]);
	CU_ASSERT_EQUAL(q(db, "SELECT count(*) FROM NVTX_EVENTS"), st.rows[KP_T_NVTX]);
	CU_ASSERT_STRING_EQUAL(integrity(db), "ok");
	kp_db_close(db);
	(void)name;
}

static void corpus_chrome(const char *path, const char *name)
{
	import_one(path, name);
}

/* nsys corpus files are raw exports or "SQL\n" + the SQL that builds one */
static void corpus_nsys(const char *path, const char *name)
{
	const char *exp = kp_test_path("corpus_export.sqlite");
	size_t len = 0;
	char *buf = kp_test_read(path, &len);
	sqlite3 *h;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	if (len >= 4 && !memcmp(buf, "SQL\n", 4)) {
		unlink(exp);
		if (sqlite3_open(exp, &h) == SQLITE_OK) {
			sqlite3_limit(h, SQLITE_LIMIT_ATTACHED, 0);
			sqlite3_exec(h, buf + 4, NULL, NULL, NULL);
		}
		sqlite3_close(h);
		import_one(exp, name);
	} else {
		import_one(path, name);
	}
	free(buf);
}

/* parse; when it parses, generate chains of consecutive kernels twice */
static void corpus_catalog(const char *path, const char *name)
{
	struct kp_err err = {0};
	struct kp_fx_catalog *cat;
	size_t len = 0, i;
	char *buf = kp_test_read(path, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	cat = kp_fx_catalog_parse(buf, len, name, &err);
	free(buf);
	if (!cat) {
		CU_ASSERT(err.code < 0 && err.msg[0]);
		return;
	}
	for (i = 0; i + 1 < cat->n_kernels; i++) {
		const struct kp_fx_kernel *chain[2] = { &cat->kernels[i], &cat->kernels[i + 1] };
		struct kp_fx_group g1, g2;
		int rc1 = kp_fx_generate(chain, 2, &g1, &err), rc2;

		if (!rc1) {
			rc2 = kp_fx_generate(chain, 2, &g2, &err);
			CU_ASSERT_EQUAL(rc2, 0);
			CU_ASSERT(!rc2 && g1.source.len == g2.source.len &&
				  !memcmp(g1.source.buf, g2.source.buf, g1.source.len));
			kp_fx_group_release(&g2);
		} else {
			CU_ASSERT(rc1 < 0 && err.msg[0]);
		}
		kp_fx_group_release(&g1);
	}
	kp_fx_catalog_free(cat);
}

static void test_fuzz_corpus_catalog(void)
{
	CU_ASSERT(for_corpus("catalog", corpus_catalog) >= 2);
}

static void test_fuzz_corpus_plan(void)
{
	CU_ASSERT(for_corpus("planfile", corpus_plan) >= 2);
}

static void test_fuzz_corpus_chrome(void)
{
	CU_ASSERT(for_corpus("chrome", corpus_chrome) >= 2);
}

static void test_fuzz_corpus_nsys(void)
{
	CU_ASSERT(for_corpus("nsys", corpus_nsys) >= 2);
}

/* both parsers, as fuzz_sig does: the file readers agree with the buffer
 * parsers; a rejection is KP_EFORMAT with a message */
static void corpus_sig(const char *path, const char *name)
{
	struct kp_err err = {0}, ferr = {0};
	struct kp_sign_key key, fkey;
	char id[KP_SIGN_ID_HEX], fid[KP_SIGN_ID_HEX];
	uint8_t sig[KP_SIGN_BYTES];
	const char *plan = kp_test_path("corpus_sig.kplan");
	size_t len = 0;
	char *buf = kp_test_read(path, &len);
	int rc, frc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	rc = kp_plan_sig_parse(buf, len, name, id, sig, &err);
	CU_ASSERT(rc == 0 || (rc == KP_EFORMAT && err.msg[0]));
	kp_test_sh("cp '%s' '%s.sig'", path, plan);
	frc = kp_plan_sig_read(plan, fid, &ferr);
	CU_ASSERT_EQUAL(rc, frc);
	if (!rc && !frc)
		CU_ASSERT_STRING_EQUAL(id, fid);
	rc = kp_sign_parse_public(buf, len, name, &key, &err);
	CU_ASSERT(rc == 0 || (rc == KP_EFORMAT && err.msg[0]));
	frc = kp_sign_load_public(path, &fkey, &ferr);
	CU_ASSERT_EQUAL(rc, frc);
	if (!rc && !frc)
		CU_ASSERT(!memcmp(key.pk, fkey.pk, sizeof(key.pk)) && !strcmp(key.id, fkey.id));
	/* the committed seeds: the valid ones parse, the others do not */
	if (!strcmp(name, "valid.sig"))
		CU_ASSERT_EQUAL(kp_plan_sig_parse(buf, len, name, id, sig, &err), 0);
	if (!strcmp(name, "valid.pub"))
		CU_ASSERT_EQUAL(kp_sign_parse_public(buf, len, name, &key, &err), 0);
	free(buf);
}

static void test_fuzz_corpus_sig(void)
{
	CU_ASSERT(for_corpus("sig", corpus_sig) >= 2);
}

/* ------------------------------------------------------------------------ */
/* regressions: one test per finding (docs/RELIABILITY.md lists them) */

/*
 * Finding 2 (fuzz_chrome): a GPU event that waits for its flow event and
 * is still unmatched at the end of the trace went through kp__chrome_flush_pending(),
 * whose helpers return -1 after filling err: kp_import_chrome returned
 * KP_EINVAL (-1) with err.code KP_EFORMAT. The return value must be the
 * error's code. (importers/chrome_events.c)
 */
static void test_chrome_pending_error_code(void)
{
	static const char trace[] =
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,"
		"\"tif\":7,\"ts\":4446475348789.256,\"dur\":1.952,\"args\":{\"x\":37}}]}";
	const char *in = kp_test_path("pending.json"), *out = kp_test_path("pending.db");
	struct kp_import_stats st;
	struct kp_err err = {0};
	int rc;

	CU_ASSERT_EQUAL_FATAL(kp_test_write(in, trace, -1), 0);
	rm_db(out);
	rc = kp_import(in, out, NULL, &st, &err);
	CU_ASSERT_EQUAL(rc, KP_EFORMAT);
	CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "args.stream"));
	CU_ASSERT(access(out, F_OK) != 0);
}

/* write text to a file in the test dir and run `kplan import` + more on it;
 * returns the exit status of the last command */
static int pipeline(const char *name, const char *json, const char *cmd)
{
	char in[64], db[64];

	snprintf(in, sizeof(in), "%s.json", name);
	snprintf(db, sizeof(db), "%s.db", name);
	if (kp_test_write(kp_test_path(in), json, -1))
		return -1;
	rm_db(kp_test_path(db));
	if (kp_test_sh("%s import %s -o %s > /dev/null 2>&1", kp_test_kplan(), kp_test_path(in),
		       kp_test_path(db)))
		return -2;
	return kp_test_sh("%s %s %s > /dev/null", kp_test_kplan(), cmd, kp_test_path(db));
}

/*
 * Finding 3 (generated traces, UBSan): the analyzer's fusion scoring
 * multiplied grid x block sizes in int64, which overflows for legal CUDA
 * launch shapes (2^31-1 x 65535 x 65535 blocks): signed overflow, undefined
 * behaviour; `make asan` aborts in `kplan analyze`. Now saturated.
 * (analyzer/fuse_candidates.c, threads())
 */
static void test_analyze_huge_grid(void)
{
	static const char trace[] =
		"{\"schemaVersion\":1,\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"step\",\"pid\":400,\"tid\":400,"
		"\"ts\":1019.3,\"dur\":1000},"
		"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":400,"
		"\"tid\":401,\"ts\":1005.0,\"dur\":4,\"args\":{\"correlation\":1}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void k4<float>(float*, int)\",\"pid\":0,"
		"\"tid\":7,\"ts\":1005.0,\"dur\":2,\"args\":{\"device\":0,\"context\":1,\"stream\":7,"
		"\"correlation\":1,\"registers per thread\":255,\"shared memory\":1048576,"
		"\"grid\":[2147483647,65535,65535],\"block\":[256,1,1]}},"
		"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":400,"
		"\"tid\":401,\"ts\":1004.5,\"dur\":0.5,\"args\":{\"correlation\":2}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void k4<float>(float*, int)\",\"pid\":0,"
		"\"tid\":7,\"ts\":1007.5,\"dur\":1,\"args\":{\"device\":0,\"context\":1,\"stream\":7,"
		"\"correlation\":2,\"registers per thread\":0,\"shared memory\":0,"
		"\"grid\":[2147483647,65535,65535],\"block\":[32,2,1]}}]}";

	CU_ASSERT_EQUAL(pipeline("huge_grid", trace, "analyze"), 0);
}

/*
 * Finding 4 (generated traces, UBSan): a run whose timeline window holds no
 * GPU stream made the report qsort() a NULL array (undefined behaviour;
 * `make asan` aborts in `kplan report` and `kplan diff`).
 * (reports/timeline.c, the "keep the busiest streams" qsort)
 */
static void test_report_no_streams(void)
{
	static const char trace[] =
		"{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0,\"name\":\"NVIDIA H200\","
		"\"computeMajor\":9,\"computeMinor\":0,\"numSms\":132}],\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":400,"
		"\"tid\":400,\"ts\":1019.0,\"dur\":3,\"args\":{\"correlation\":1}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void k3<float>(float*, int)\",\"pid\":0,"
		"\"tid\":13,\"ts\":1020.0,\"dur\":0,\"args\":{\"device\":1,\"context\":1,\"stream\":13,"
		"\"correlation\":1,\"grid\":[0,0,0],\"block\":[256,1,1]}},"
		"{\"ph\":\"s\",\"id\":1,\"pid\":400,\"tid\":400,\"ts\":1019.0,\"cat\":\"ac2g\",\"name\":\"ac2g\"},"
		"{\"ph\":\"f\",\"id\":1,\"pid\":0,\"tid\":13,\"ts\":1020.0,\"cat\":\"ac2g\",\"name\":\"ac2g\","
		"\"bp\":\"e\"}]}";
	CU_ASSERT_EQUAL(pipeline("no_streams", trace, "info"), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s report %s -o %s > /dev/null 2>&1", kp_test_kplan(),
				   kp_test_path("no_streams.db"), kp_test_path("no_streams.html")), 0);
	/* (its one kernel leaves the analysis nothing to store: diff analyzes it
	 * each time, saying so on stderr) */
	CU_ASSERT_EQUAL(kp_test_sh("%s diff %s %s > /dev/null 2>&1", kp_test_kplan(),
				   kp_test_path("no_streams.db"), kp_test_path("no_streams.db")), 0);
}

/*
 * Finding 5 (fuzz_catalog): a number whose exponent is cut off by the end
 * of the buffer ("1.E" as the last bytes of a catalog without a final
 * newline) made the error message read one byte past the buffer
 * (heap-buffer-overflow under ASan). (fusion/catalog_expr.c,
 * parse_number's "bad number" message)
 */
static void test_catalog_number_at_end(void)
{
	static const char text[] =
		"kernel k\n\tparam 0 dst f32*\n\tparam 1 n i32\n\tout dst[i] = 0.0/0.E";
	struct kp_err err = {0};
	size_t n = sizeof(text) - 1;
	char *buf = malloc(n);   /* exactly the text: ASan sees a read past it */
	struct kp_fx_catalog *cat;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	memcpy(buf, text, n);
	cat = kp_fx_catalog_parse(buf, n, "cut.kpcat", &err);
	CU_ASSERT_PTR_NULL(cat);
	CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad number '0.E'"));
	if (!strstr(err.msg, "bad number '0.E'"))
		fprintf(stderr, "%s\n", err.msg);
	kp_fx_catalog_free(cat);
	free(buf);
}

/*
 * Issue 30, defect 4: ESC, BEL and newlines in kernel, region and op names
 * of a trace reached the terminal raw through `kplan analyze`, `show`,
 * `diff` (a trace could retitle the terminal or forge output lines). A
 * stepped trace whose region label, kernel names and device name carry
 * them goes through every command that prints; the output holds no control
 * byte but the line ends, and shows them as \xNN (common/printable.h).
 */
static void test_terminal_escapes(void)
{
	struct kp_strbuf t = KP_STRBUF_INIT;
	const char *k = kp_test_kplan(), *db = kp_test_path("esc.db"), *json;
	const char *plan = kp_test_path("esc.kplan"), *log = kp_test_path("esc.log");
	char *out;
	size_t len, i;
	int step, j, corr = 1, bad = 0;

	json = kp_test_path("esc.json");
	kp_strbuf_adds(&t, "{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0,\"name\":"
		       "\"GPU\\u001b]0;owned\\u0007\",\"computeMajor\":9,\"computeMinor\":0,"
		       "\"numSms\":132}],\"traceEvents\":[");
	for (step = 0; step < 6; step++) {
		double t0 = 1000.0 + step * 1000.0;

		kp_strbuf_addf(&t, "%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
			       "\"step\\u001b[2J\\nkplan: error: forged\",\"pid\":400,\"tid\":400,"
			       "\"ts\":%.1f,\"dur\":600}", step ? "," : "", t0);
		for (j = 0; j < 6; j++, corr++) {
			double ts = t0 + 10 + j * 90;

			kp_strbuf_addf(&t, ",{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":"
				       "\"cudaLaunchKernel\",\"pid\":400,\"tid\":400,\"ts\":%.1f,"
				       "\"dur\":5,\"args\":{\"correlation\":%d}}", ts, corr);
			kp_strbuf_addf(&t, ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":"
				       "\"void k%d\\u0007\\u001b[31m<float>(float*, int)\",\"pid\":0,"
				       "\"tid\":7,\"ts\":%.1f,\"dur\":20,\"args\":{\"device\":0,"
				       "\"context\":1,\"stream\":7,\"correlation\":%d,\"grid\":[64,1,1],"
				       "\"block\":[256,1,1]}}", j, ts + 40, corr);
		}
	}
	kp_strbuf_adds(&t, "]}");
	CU_ASSERT_EQUAL_FATAL(kp_test_write(json, t.buf, (long)t.len), 0);
	kp_strbuf_release(&t);
	rm_db(db);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import %s -o %s > %s 2>&1", k, json, db, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("(%s analyze %s && %s plan %s -o %s --no-store --cuda-major 13; %s show %s;"
				   " %s diff %s %s; %s info %s; %s report %s -o %s;"
				   " %s check %s --cc 8.0 --cuda-major 13) >> %s 2>&1", k, db, k, db,
				   plan, k, plan, k, db, db, k, db, k, db,
				   kp_test_path("esc.html"), k, plan, log) >= 0, 1);
	out = kp_test_read(log, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	for (i = 0; i < len; i++)
		bad += ((unsigned char)out[i] < 0x20 && out[i] != '\n') || out[i] == 0x7f;
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "step\\x1b[2J\\x0akplan: error: forged"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\\x07\\x1b[31m"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "GPU\\x1b]0;owned\\x07"));
	/* no line starts with the forged text */
	CU_ASSERT_PTR_NULL(strstr(out, "\nkplan: error: forged"));
	if (bad)
		fprintf(stderr, "\n%s\n", out);
	free(out);
}

/* ------------------------------------------------------------------------ */
/* the kernel cache between two users */

#define VICTIM_UID 65534   /* nobody */
#define THIEF_UID 65533

/*
 * As uid (its own group, no others) in a child process: open the kernel
 * cache at dir (created when missing) and store content as entry name,
 * or with content NULL read that entry. out gets "refused: WHY",
 * "read: CONTENT", "none" or "wrote".
 */
static void cache_as(uid_t uid, const char *dir, const char *name, const char *content,
		     char *out, size_t n)
{
	char buf[600] = "";
	int pfd[2], fd;
	pid_t pid;
	ssize_t r;

	out[0] = 0;
	if (pipe(pfd))
		return;
	pid = fork();
	if (pid == 0) {
		char why[512];
		size_t len;
		void *b;

		close(pfd[0]);
		if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			snprintf(buf, sizeof(buf), "setresuid failed");
		else if ((fd = kp__rt_fcache_open_dir(dir, 1, why, sizeof(why))) < 0)
			snprintf(buf, sizeof(buf), "refused: %s", why);
		else if (content)
			snprintf(buf, sizeof(buf), "%s", kp__rt_fcache_write(fd, name, content,
								  strlen(content)) ? "none" : "wrote");
		else if ((b = kp__rt_fcache_read(fd, name, &len)))
			snprintf(buf, sizeof(buf), "read: %.*s", (int)len, (char *)b);
		else
			snprintf(buf, sizeof(buf), "none");
		r = write(pfd[1], buf, strlen(buf));
		_exit(r < 0);
	}
	close(pfd[1]);
	r = pid > 0 ? read(pfd[0], out, n - 1) : -1;
	out[r > 0 ? r : 0] = 0;
	close(pfd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/*
 * Issue 30, defect 1, with two real users: a victim (nobody) keeps its
 * kernel cache in a shared directory, a thief (another uid, through
 * setpriv) tries to put a forged cache with a valid entry in its place.
 * Writable by all and not sticky, the directory is refused before anything
 * is created or read; sticky (1777), the thief cannot rename the victim's
 * cache away and the victim reads its own entry; made non-sticky again
 * after the swap, the victim refuses the directory rather than read the
 * forged entry. Needs root (to be both users) and setpriv; otherwise
 * skipped, saying why.
 */
static void test_cache_two_users(void)
{
	const char *pub, *thief = "setpriv --reuid=65533 --regid=65533 --clear-groups ";
	char shared[200], cache[256], forged[256], scratch[256], entry[700], name[200], out[600];
	int fd;

	if (geteuid() != 0 || kp_test_sh("command -v setpriv > /dev/null 2>&1")) {
		fprintf(stderr, "(skipped: the two-user cache check needs root and setpriv) ");
		return;
	}
	pub = kp_test_public_dir();
	CU_ASSERT_PTR_NOT_NULL_FATAL(pub);
	snprintf(shared, sizeof(shared), "%s/shared", pub);
	snprintf(cache, sizeof(cache), "%s/cache", shared);
	snprintf(forged, sizeof(forged), "%s/forged", shared);
	snprintf(scratch, sizeof(scratch), "%s/scratch", pub);
	CU_ASSERT_EQUAL_FATAL(kp__rt_fcache_name(name, sizeof(name), "src", 3, 9, 0, 13, 0), 0);
	/* the forged entry: a valid header and digest over the thief's bytes */
	CU_ASSERT_EQUAL_FATAL(mkdir(scratch, 0700), 0);
	fd = kp__rt_fcache_open_dir(scratch, 0, NULL, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_write(fd, name, "forged", 6), 0);
	close(fd);
	snprintf(entry, sizeof(entry), "%s/%s", scratch, name);
	CU_ASSERT_EQUAL(chmod(scratch, 0755) | chmod(entry, 0644), 0);
	CU_ASSERT_EQUAL_FATAL(mkdir(shared, 0777) | chmod(shared, 0777), 0);

	/* writable by all, not sticky: refused, nothing created */
	cache_as(VICTIM_UID, cache, name, "genuine", out, sizeof(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "refused: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "not sticky"));
	CU_ASSERT_NOT_EQUAL(access(cache, F_OK), 0);
	/* sticky: the victim's cache works, the thief cannot move it */
	CU_ASSERT_EQUAL(chmod(shared, 01777), 0);
	cache_as(VICTIM_UID, cache, name, "genuine", out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "wrote");
	CU_ASSERT_EQUAL(kp_test_sh("%s sh -c 'mkdir %s && cp %s %s/ && mv -T %s %s/stolen' "
				   "2>/dev/null", thief, forged, entry, forged, cache, shared) != 0, 1);
	cache_as(VICTIM_UID, cache, name, NULL, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "read: genuine");
	/* not sticky: the swap succeeds, and the victim refuses what it finds */
	CU_ASSERT_EQUAL(chmod(shared, 0777), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s sh -c 'mv -T %s %s/stolen && mv -T %s %s'", thief, cache,
				   shared, forged, cache), 0);
	cache_as(VICTIM_UID, cache, name, NULL, out, sizeof(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "refused: "));
	CU_ASSERT_PTR_NULL(strstr(out, "forged"));
	/* even under a parent of its own, a cache owned by the thief is refused */
	CU_ASSERT_EQUAL(chmod(shared, 01777), 0);
	cache_as(VICTIM_UID, cache, name, NULL, out, sizeof(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "owned by another user"));
	kp_test_sh("rm -rf '%s'", pub);
}

/*
 * `make test` on a fresh machine failed while another apt held the dpkg
 * lock: scripts/deps.sh now waits for it. Run as "root" with a fake
 * apt-get whose first update finds the lists locked: deps.sh retries, then
 * installs with apt's DPkg::Lock::Timeout; a lock that stays is an error
 * naming the wait.
 */
static void test_deps_waits_for_apt(void)
{
	const char *bin = kp_test_path("fakebin"), *log = kp_test_path("apt.log");
	const char *state = kp_test_path("apt.state"), *out = kp_test_path("deps.out");
	char *text;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("mkdir -p %s && printf '#!/bin/sh\necho 0\n' > %s/id && "
					 "printf '#!/bin/sh\nexit 0\n' > %s/sleep && chmod +x %s/id "
					 "%s/sleep", bin, bin, bin, bin, bin), 0);
	/* update: locked while the state file says so (first call only, or always) */
	kp_test_write(kp_test_path("fakebin/apt-get"),
		      "#!/bin/sh\necho \"$*\" >> \"$APT_LOG\"\n"
		      "case \"$*\" in *update*)\n"
		      "  if [ -s \"$APT_STATE\" ]; then\n"
		      "    [ \"$(cat \"$APT_STATE\")\" = always ] || : > \"$APT_STATE\"\n"
		      "    echo 'E: Could not get lock /var/lib/apt/lists/lock. It is held by process 7 "
		      "(apt-get)' >&2; exit 100\n"
		      "  fi ;;\nesac\nexit 0\n", -1);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("chmod +x %s/apt-get", bin), 0);
	CU_ASSERT_EQUAL(kp_test_sh("echo once > %s && PATH=%s:$PATH APT_LOG=%s APT_STATE=%s "
				   "KPLAN_DEPS_ROOT=/nonexistent KPLAN_APT_WAIT=30 sh %s > %s 2>&1",
				   state, bin, log, state, kp_test_src("scripts/deps.sh"), out), 0);
	text = kp_test_read(log, NULL);
	CU_ASSERT(text && strstr(text, "-o DPkg::Lock::Timeout=30 update -qq\n-o DPkg::Lock::Timeout=30 "
				 "update -qq\n-o DPkg::Lock::Timeout=30 install -y -qq"));
	free(text);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'another apt holds its lock; waiting' %s", out), 0);
	/* a lock that is never released: an error after the wait, not a hang */
	CU_ASSERT_NOT_EQUAL(kp_test_sh("echo always > %s && PATH=%s:$PATH APT_LOG=%s APT_STATE=%s "
				       "KPLAN_DEPS_ROOT=/nonexistent KPLAN_APT_WAIT=10 sh %s > %s 2>&1",
				       state, bin, log, state, kp_test_src("scripts/deps.sh"), out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'still holds its lock after 10 s' %s", out), 0);
}

CU_TestInfo kp_tests_reliability[] = {
	{ "sigkill_recording", test_sigkill_recording },
	{ "sigkill_early", test_sigkill_early },
	{ "sigkill_one_rank", test_sigkill_one_rank },
	{ "disk_full_recording", test_disk_full_recording },
	{ "disk_full_import", test_disk_full_import },
	{ "readonly_paths", test_readonly_paths },
	{ "fuzz_corpus_plan", test_fuzz_corpus_plan },
	{ "fuzz_corpus_chrome", test_fuzz_corpus_chrome },
	{ "fuzz_corpus_nsys", test_fuzz_corpus_nsys },
	{ "fuzz_corpus_catalog", test_fuzz_corpus_catalog },
	{ "fuzz_corpus_sig", test_fuzz_corpus_sig },
	{ "chrome_pending_error_code", test_chrome_pending_error_code },
	{ "analyze_huge_grid", test_analyze_huge_grid },
	{ "report_no_streams", test_report_no_streams },
	{ "catalog_number_at_end", test_catalog_number_at_end },
	{ "cache_two_users", test_cache_two_users },
	{ "terminal_escapes", test_terminal_escapes },
	{ "deps_waits_for_apt", test_deps_waits_for_apt },
	CU_TEST_INFO_NULL,
};
