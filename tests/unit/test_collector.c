/*
 * test_collector.c - collector/: decoding of synthesized CUPTI activity
 * records (no GPU, no libcupti), the capture window, and `kplan record`
 * on commands that do not use CUDA.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CUnit/CUnit.h>

#include "analyzer/internal.h"
#include "collector/decode.h"
#include "collector/rank.h"
#include "collector/window.h"
#include "db/db.h"
#include "common/cuda_api.h"
#include "db/writer.h"
#include "include/kplan/runtime.h"
#include "runtime/watch_calls.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* fixtures */

struct fx {
	struct kp_db *db;
	struct kp_writer w;
	struct kp_decoder d;
	int64_t run;
};

static const char *fake_api_name(void *ctx, int driver, uint32_t cbid)
{
	(void)ctx;
	if (!driver && cbid == 211)
		return "cudaLaunchKernel";
	if (!driver && cbid == 31)
		return "cudaMemcpy";
	if (driver && cbid == 307)
		return "cuLaunchKernel";
	return NULL;
}

static char *fake_demangle(void *ctx, const char *m)
{
	(void)ctx;
	if (!strcmp(m, "_Z6kernelPf"))
		return strdup("kernel(float*)");
	if (!strcmp(m, "_ZN2at6native4gemmEv"))
		return strdup("void at::native::gemm<4>(int)");
	return NULL;
}

static int fx_open(struct fx *f, const char *name)
{
	struct kp_err err = {0};
	struct kp_run_info ri = { .source = "record", .pid = 4242 };
	struct kp_decode_hooks hooks = { NULL, fake_api_name, fake_demangle };

	memset(f, 0, sizeof(*f));
	f->db = kp_db_open(kp_test_path(name), KP_DB_CREATE, &err);
	if (!f->db)
		return -1;
	if (kp_db_run_insert(f->db, &ri, &f->run, &err))
		return -1;
	kp_writer_init(&f->w, f->db, f->run);
	kp_decode_init(&f->d, &f->w, 4242, &hooks);
	return 0;
}

static void fx_close(struct fx *f)
{
	kp_decode_release(&f->d);
	kp_writer_release(&f->w);
	kp_db_close(f->db);
}

static int64_t q(struct fx *f, const char *sql)
{
	return kp_db_int(f->db, sql, -12345);
}

static char *qtext(struct fx *f, const char *sql)
{
	static char buf[512];
	sqlite3_stmt *st;

	buf[0] = 0;
	if (kp_db_prepare(f->db, sql, &st, NULL))
		return buf;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, sizeof(buf), "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

static void make_kernel(CUpti_ActivityKernel10 *k, uint32_t corr, uint64_t start,
			const char *name)
{
	memset(k, 0, sizeof(*k));
	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->start = start;
	k->end = start + 1500;
	k->deviceId = 0;
	k->contextId = 1;
	k->streamId = 7;
	k->correlationId = corr;
	k->gridX = 80;
	k->gridY = 2;
	k->gridZ = 1;
	k->blockX = 256;
	k->blockY = 1;
	k->blockZ = 1;
	k->registersPerThread = 32;
	k->staticSharedMemory = 1024;
	k->dynamicSharedMemory = 4096;
	k->name = name;
	k->launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
	k->gridId = 99;
}

static void make_api(CUpti_ActivityAPI *a, int driver, uint32_t cbid, uint32_t corr,
		     uint64_t start)
{
	memset(a, 0, sizeof(*a));
	a->kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
	a->cbid = cbid;
	a->start = start;
	a->end = start + 3000;
	a->processId = 4242;
	a->threadId = 77;
	a->correlationId = corr;
}

static void make_marker(CUpti_ActivityMarker2 *m, int flags, uint32_t id, uint64_t ts,
			const char *name, const char *domain, int thread)
{
	memset(m, 0, sizeof(*m));
	m->kind = CUPTI_ACTIVITY_KIND_MARKER;
	m->flags = flags;
	m->timestamp = ts;
	m->id = id;
	m->objectKind = thread ? CUPTI_ACTIVITY_OBJECT_THREAD : CUPTI_ACTIVITY_OBJECT_PROCESS;
	m->objectId.pt.processId = 4242;
	m->objectId.pt.threadId = thread ? 78 : 0;
	m->name = name;
	m->domain = domain;
}

/* ------------------------------------------------------------------------ */
/* single records */

static void test_kernel(void)
{
	struct kp_err err = {0};
	struct fx f;
	CUpti_ActivityKernel10 k;

	CU_ASSERT_FATAL(fx_open(&f, "dec_kernel.db") == 0);
	make_kernel(&k, 11, 1000, "_Z6kernelPf");
	k.graphNodeId = 0x123456789ULL;
	k.graphId = 5;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&k, &err), 0);
	/* a second kernel with the same CUPTI name pointer: cached name */
	make_kernel(&k, 12, 5000, k.name);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&k, &err), 0);
	/* a name the demangler does not know is kept as is */
	make_kernel(&k, 13, 9000, "plain_c_kernel");
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&k, &err), 0);
	CU_ASSERT_EQUAL(f.d.st.kernels, 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT gridX*10000+gridY*100+gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 11"), 800201);
	CU_ASSERT_EQUAL(q(&f, "SELECT blockX FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 11"), 256);
	CU_ASSERT_EQUAL(q(&f, "SELECT registersPerThread FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 11"), 32);
	CU_ASSERT_EQUAL(q(&f, "SELECT staticSharedMemory + dynamicSharedMemory FROM"
			  " CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 11"), 5120);
	CU_ASSERT_EQUAL(q(&f, "SELECT end - start FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 11"), 1500);
	CU_ASSERT_EQUAL(q(&f, "SELECT streamId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 11"), 7);
	CU_ASSERT_EQUAL(q(&f, "SELECT graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 11"), 0x123456789LL);
	CU_ASSERT_EQUAL(q(&f, "SELECT graphId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 11"), 5);
	CU_ASSERT_EQUAL(q(&f, "SELECT graphNodeId IS NULL FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 12"), 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 12"),
			4242LL << 24);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
				     " StringIds s ON s.id = k.demangledName WHERE correlationId = 12"),
			       "kernel(float*)");
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
				     " StringIds s ON s.id = k.shortName WHERE correlationId = 11"),
			       "kernel");
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
				     " StringIds s ON s.id = k.mangledName WHERE correlationId = 11"),
			       "_Z6kernelPf");
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
				     " StringIds s ON s.id = k.demangledName WHERE correlationId = 13"),
			       "plain_c_kernel");
	CU_ASSERT_EQUAL(q(&f, "SELECT mangledName IS NULL FROM CUPTI_ACTIVITY_KIND_KERNEL"
			  " WHERE correlationId = 13"), 1);
	fx_close(&f);
}

static void test_api(void)
{
	struct kp_err err = {0};
	struct fx f;
	CUpti_ActivityAPI a;

	CU_ASSERT_FATAL(fx_open(&f, "dec_api.db") == 0);
	make_api(&a, 0, 211, 11, 100);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&a, &err), 0);
	make_api(&a, 1, 307, 12, 200);
	a.returnValue = 700;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&a, &err), 0);
	make_api(&a, 1, 999, 13, 300);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&a, &err), 0);
	CU_ASSERT_EQUAL(f.d.st.apis, 3);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN"
				     " StringIds s ON s.id = r.nameId WHERE correlationId = 11"),
			       "cudaLaunchKernel");
	CU_ASSERT_EQUAL(q(&f, "SELECT eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 11"), 0);
	CU_ASSERT_EQUAL(q(&f, "SELECT eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 12"), 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT returnValue FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 12"), 700);
	CU_ASSERT_EQUAL(q(&f, "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 11"),
			(4242LL << 24) | 77);
	CU_ASSERT_EQUAL(q(&f, "SELECT end - start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 12"), 3000);
	/* unknown callback id: named by id, not dropped */
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN"
				     " StringIds s ON s.id = r.nameId WHERE correlationId = 13"),
			       "cu_cbid_999");
	fx_close(&f);
}

static void test_copies_and_sync(void)
{
	struct kp_err err = {0};
	struct fx f;
	CUpti_ActivityMemcpy6 m;
	CUpti_ActivityMemcpyPtoP4 p;
	CUpti_ActivityMemset4 s;
	CUpti_ActivitySynchronization2 y;
	CUpti_ActivityContext3 c;

	CU_ASSERT_FATAL(fx_open(&f, "dec_copy.db") == 0);
	memset(&c, 0, sizeof(c));
	c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
	c.contextId = 3;
	c.deviceId = 2;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&c, &err), 0);

	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.bytes = 1 << 20;
	m.start = 10;
	m.end = 20;
	m.deviceId = 2;
	m.contextId = 3;
	m.streamId = 14;
	m.correlationId = 21;
	m.graphNodeId = 9;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);

	memset(&p, 0, sizeof(p));
	p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
	p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	p.bytes = 4096;
	p.start = 30;
	p.end = 40;
	p.deviceId = 0;
	p.srcDeviceId = 0;
	p.dstDeviceId = 1;
	p.correlationId = 22;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&p, &err), 0);

	memset(&s, 0, sizeof(s));
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s.value = 0xab;
	s.bytes = 512;
	s.start = 50;
	s.end = 55;
	s.deviceId = 2;
	s.contextId = 3;
	s.streamId = 14;
	s.correlationId = 23;
	s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&s, &err), 0);

	memset(&y, 0, sizeof(y));
	y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
	y.start = 60;
	y.end = 90;
	y.correlationId = 24;
	y.contextId = 3;
	y.streamId = 14;
	y.cudaEventId = (uint32_t)-1;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&y, &err), 0);

	CU_ASSERT_EQUAL(f.d.st.memcpys, 2);
	CU_ASSERT_EQUAL(f.d.st.memsets, 1);
	CU_ASSERT_EQUAL(f.d.st.syncs, 1);
	CU_ASSERT_EQUAL(f.d.st.contexts, 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE correlationId = 21"), 1 << 20);
	CU_ASSERT_EQUAL(q(&f, "SELECT copyKind*100 + srcKind*10 + dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
			  " WHERE correlationId = 21"), 100 + 10 + 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT graphNodeId FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE correlationId = 21"), 9);
	CU_ASSERT_EQUAL(q(&f, "SELECT dstDeviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE correlationId = 22"), 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE correlationId = 22"),
			CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
	CU_ASSERT_EQUAL(q(&f, "SELECT value FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE correlationId = 23"), 0xab);
	CU_ASSERT_EQUAL(q(&f, "SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE correlationId = 23"), 512);
	CU_ASSERT_EQUAL(q(&f, "SELECT syncType FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
	/* the device comes from the context record */
	CU_ASSERT_EQUAL(q(&f, "SELECT deviceId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"), 2);
	CU_ASSERT_EQUAL(q(&f, "SELECT eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"), 0);
	CU_ASSERT_EQUAL(q(&f, "SELECT end - start FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"), 30);
	fx_close(&f);
}

static void test_markers(void)
{
	struct kp_err err = {0};
	struct fx f;
	CUpti_ActivityMarker2 m;
	CUpti_ActivityMarkerData2 md;

	CU_ASSERT_FATAL(fx_open(&f, "dec_nvtx.db") == 0);
	/* push "step" (thread), nested push "attn" in domain "model" */
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 1000, "step", NULL, 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	memset(&md, 0, sizeof(md));
	md.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
	md.id = 1;
	md.color = 0xff00ff00;
	md.category = 3;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&md, &err), 0);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_START, 2, 1100, "attn", "model", 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	/* ends carry no name */
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_END, 2, 1900, NULL, NULL, 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 2000, NULL, NULL, 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	/* a mark, a start/end range on the process, an end with no start */
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 3, 2500, "checkpoint", "model", 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_START, 4, 3000, "load", NULL, 0);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_END, 4, 3500, NULL, NULL, 0);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_END, 77, 3600, NULL, NULL, 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	/* left open at the end of the recording */
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_START, 5, 4000, "tail", NULL, 1);
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&m, &err), 0);
	CU_ASSERT_EQUAL(kp_decode_finish(&f.d, 9000, &err), 1);

	CU_ASSERT_EQUAL(f.d.st.nvtx_ranges, 4);
	CU_ASSERT_EQUAL(f.d.st.nvtx_marks, 1);
	CU_ASSERT_EQUAL(f.d.st.unmatched_ends, 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59"), 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 60"), 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT start*10000 + end FROM NVTX_EVENTS WHERE text = 'step'"),
			1000LL * 10000 + 2000);
	CU_ASSERT_EQUAL(q(&f, "SELECT color FROM NVTX_EVENTS WHERE text = 'step'"), 0xff00ff00LL);
	CU_ASSERT_EQUAL(q(&f, "SELECT category FROM NVTX_EVENTS WHERE text = 'step'"), 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT end FROM NVTX_EVENTS WHERE text = 'attn'"), 1900);
	CU_ASSERT_EQUAL(q(&f, "SELECT globalTid FROM NVTX_EVENTS WHERE text = 'attn'"), (4242LL << 24) | 78);
	/* domain: a domain-create row names it; ranges and marks in it refer to it */
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'model'"), 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT domainId FROM NVTX_EVENTS WHERE text = 'attn'"),
			q(&f, "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75"));
	CU_ASSERT_EQUAL(q(&f, "SELECT domainId FROM NVTX_EVENTS WHERE text = 'checkpoint'"),
			q(&f, "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75"));
	CU_ASSERT_EQUAL(q(&f, "SELECT domainId FROM NVTX_EVENTS WHERE text = 'step'"), 0);
	CU_ASSERT_EQUAL(q(&f, "SELECT end IS NULL FROM NVTX_EVENTS WHERE text = 'checkpoint'"), 1);
	CU_ASSERT_EQUAL(q(&f, "SELECT eventType FROM NVTX_EVENTS WHERE text = 'checkpoint'"), 34);
	CU_ASSERT_EQUAL(q(&f, "SELECT rangeId FROM NVTX_EVENTS WHERE text = 'load'"), 4);
	CU_ASSERT_EQUAL(q(&f, "SELECT end FROM NVTX_EVENTS WHERE text = 'tail'"), 9000);
	fx_close(&f);
}

static void test_overhead_device(void)
{
	struct kp_err err = {0};
	struct fx f;
	CUpti_ActivityOverhead3 o;
	CUpti_ActivityDevice5 v;

	CU_ASSERT_FATAL(fx_open(&f, "dec_dev.db") == 0);
	memset(&o, 0, sizeof(o));
	o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
	o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	o.objectId.pt.processId = 4242;
	o.objectId.pt.threadId = 5;
	o.start = 100;
	o.end = 180;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&o, &err), 0);
	CU_ASSERT_EQUAL(q(&f, "SELECT end - start FROM PROFILER_OVERHEAD"), 80);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM PROFILER_OVERHEAD o JOIN StringIds s"
				     " ON s.id = o.nameId"), "cupti buffer flush");
	CU_ASSERT_EQUAL(q(&f, "SELECT globalTid FROM PROFILER_OVERHEAD"), (4242LL << 24) | 5);

	memset(&v, 0, sizeof(v));
	v.kind = CUPTI_ACTIVITY_KIND_DEVICE;
	v.name = "NVIDIA H100 80GB HBM3";
	v.id = 0;
	v.computeCapabilityMajor = 9;
	v.computeCapabilityMinor = 0;
	v.numMultiprocessors = 132;
	v.coreClockRate = 1980000;
	v.globalMemorySize = 85ULL << 30;
	v.globalMemoryBandwidth = 3352000000ULL;
	v.l2CacheSize = 50 << 20;
	v.maxThreadsPerBlock = 1024;
	v.numThreadsPerWarp = 32;
	v.uuid.bytes[0] = (char)0xab;
	CU_ASSERT_EQUAL(kp_decode_record(&f.d, (CUpti_Activity *)&v, &err), 0);
	CU_ASSERT_EQUAL(q(&f, "SELECT smCount FROM TARGET_INFO_GPU"), 132);
	CU_ASSERT_EQUAL(q(&f, "SELECT computeMajor FROM TARGET_INFO_GPU"), 9);
	CU_ASSERT_EQUAL(q(&f, "SELECT clockRate FROM TARGET_INFO_GPU"), 1980000);
	CU_ASSERT_EQUAL(q(&f, "SELECT totalMemory FROM TARGET_INFO_GPU"), 85LL << 30);
	CU_ASSERT_EQUAL(q(&f, "SELECT memoryBandwidth FROM TARGET_INFO_GPU"), 3352000000000LL);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT uuid FROM TARGET_INFO_GPU"),
			       "ab000000-0000-0000-0000-000000000000");
	/* and the run row says which GPU */
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT device_name FROM kp_runs"), "NVIDIA H100 80GB HBM3");
	CU_ASSERT_EQUAL(q(&f, "SELECT sm_count FROM kp_runs"), 132);
	CU_ASSERT_EQUAL(q(&f, "SELECT compute_major * 10 + compute_minor FROM kp_runs"), 90);
	fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* a buffer of several records, one of a kind the decoder does not handle */

#define SLOT 1024

static int next_slot(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *p = *rec ? (uint8_t *)*rec + SLOT : buf;

	if (p + SLOT > buf + valid)
		return 1;
	*rec = (CUpti_Activity *)p;
	return 0;
}

/* which launch attributes make a launch programmatic-dependent */
static void test_launch_pdl(void)
{
	cudaLaunchAttribute rt[3];
	CUlaunchAttribute drv[2];

	memset(rt, 0, sizeof(rt));
	memset(drv, 0, sizeof(drv));
	rt[0].id = cudaLaunchAttributePriority;
	rt[0].val.priority = 1;
	rt[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	rt[1].val.programmaticStreamSerializationAllowed = 0;
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(rt, 2, sizeof(rt[0])), 0);
	rt[1].val.programmaticStreamSerializationAllowed = 1;
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(rt, 2, sizeof(rt[0])), 1);
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(rt, 1, sizeof(rt[0])), 0);   /* count respected */
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(NULL, 2, sizeof(rt[0])), 0);
	rt[2].id = cudaLaunchAttributeProgrammaticEvent;
	rt[2].val.programmaticEvent.event = (cudaEvent_t)rt;
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(rt + 2, 1, sizeof(rt[0])), 1);
	/* the driver's array, same layout */
	drv[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	drv[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	drv[1].value.programmaticStreamSerializationAllowed = 1;
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(drv, 2, sizeof(drv[0])), 1);
	CU_ASSERT_EQUAL(kp_decode_launch_pdl(drv, 1, sizeof(drv[0])), 0);
}

/* which callbacks give synchronization records */
static void test_sync_codes(void)
{
	CU_ASSERT_EQUAL(kp_decode_sync_code("cudaStreamSynchronize_v3020"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cudaStreamSynchronize_ptsz_v7000"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE | 1 << 4);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cuStreamWaitEvent_ptsz"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT | 1 << 4);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cuEventSynchronize"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cudaDeviceSynchronize_v3020"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
	CU_ASSERT_EQUAL(kp_decode_sync_code("__cudaThreadSynchronize"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cuCtxSynchronize_v2"),
			CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
	/* not synchronizing, or only sharing a prefix */
	CU_ASSERT_EQUAL(kp_decode_sync_code("cudaStreamQuery"), 0);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cudaEventRecord"), 0);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cudaStreamSynchronizeX"), 0);
	CU_ASSERT_EQUAL(kp_decode_sync_code("cuLaunchKernel"), 0);
	CU_ASSERT_EQUAL(kp_decode_sync_code(""), 0);
	CU_ASSERT_EQUAL(kp_decode_sync_code(NULL), 0);
}

static void test_buffer(void)
{
	struct kp_err err = {0};
	struct fx f;
	uint8_t *buf = calloc(8, SLOT);
	CUpti_ActivityAPI *a;
	CUpti_Activity *unk;
	int64_t n;

	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_FATAL(fx_open(&f, "dec_buf.db") == 0);
	make_api((CUpti_ActivityAPI *)(buf + 0 * SLOT), 0, 211, 1, 100);
	make_kernel((CUpti_ActivityKernel10 *)(buf + 1 * SLOT), 1, 5000, "_Z6kernelPf");
	make_api((CUpti_ActivityAPI *)(buf + 2 * SLOT), 0, 211, 2, 200);
	unk = (CUpti_Activity *)(buf + 3 * SLOT);
	unk->kind = CUPTI_ACTIVITY_KIND_PC_SAMPLING;
	make_kernel((CUpti_ActivityKernel10 *)(buf + 4 * SLOT), 2, 7000, "_Z6kernelPf");
	unk = (CUpti_Activity *)(buf + 5 * SLOT);
	unk->kind = (CUpti_ActivityKind)9999;
	a = (CUpti_ActivityAPI *)(buf + 6 * SLOT);
	make_api(a, 1, 307, 3, 300);
	make_kernel((CUpti_ActivityKernel10 *)(buf + 7 * SLOT), 3, 9000,
		    "_ZN2at6native4gemmEv");

	n = kp_decode_buffer(&f.d, buf, 8 * SLOT, next_slot, &err);
	CU_ASSERT_EQUAL(n, 8);
	CU_ASSERT_EQUAL(err.code, 0);
	CU_ASSERT_EQUAL(f.d.st.unknown, 2);
	CU_ASSERT_EQUAL(f.d.st.kernels, 3);
	CU_ASSERT_EQUAL(f.d.st.apis, 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 3);
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"), 3);
	/* every kernel joins its launch call */
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
			  " CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"), 3);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN"
				     " StringIds s ON s.id = k.shortName WHERE correlationId = 3"), "gemm");
	/* an empty buffer decodes nothing */
	CU_ASSERT_EQUAL(kp_decode_buffer(&f.d, buf, 0, next_slot, &err), 0);
	fx_close(&f);
	free(buf);
}

/* a writer failure is counted and reported, the walk goes on */
static void test_write_failure(void)
{
	struct kp_err err = {0};
	struct fx f;
	CUpti_ActivityKernel10 k;

	CU_ASSERT_FATAL(fx_open(&f, "dec_fail.db") == 0);
	CU_ASSERT_EQUAL(kp_db_exec(f.db, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", &err), 0);
	make_kernel(&k, 1, 100, "_Z6kernelPf");
	CU_ASSERT(kp_decode_record(&f.d, (CUpti_Activity *)&k, &err) < 0);
	CU_ASSERT_EQUAL(f.d.st.failed, 1);
	CU_ASSERT_EQUAL(f.d.st.kernels, 0);
	CU_ASSERT(err.code != 0);
	fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* capture window */

/* 10 launches at t = 1000*i (corr i), kernels, a "step" range over
 * launches 3..6, profiler start at 7500 and stop at 8500. */
static void window_fixture(struct fx *f, const char *name)
{
	struct kp_err err = {0};
	CUpti_ActivityAPI a;
	CUpti_ActivityKernel10 k;
	CUpti_ActivityMarker2 m;
	int i;

	CU_ASSERT_FATAL(fx_open(f, name) == 0);
	kp_db_begin(f->db, &err);
	for (i = 1; i <= 10; i++) {
		make_api(&a, 0, 211, (uint32_t)i, (uint64_t)i * 1000);
		kp_decode_record(&f->d, (CUpti_Activity *)&a, &err);
		make_kernel(&k, (uint32_t)i, (uint64_t)i * 1000 + 500, "_Z6kernelPf");
		kp_decode_record(&f->d, (CUpti_Activity *)&k, &err);
	}
	make_api(&a, 0, 31, 50, 5200);   /* a copy call inside the range */
	kp_decode_record(&f->d, (CUpti_Activity *)&a, &err);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 2900, "step", NULL, 1);
	kp_decode_record(&f->d, (CUpti_Activity *)&m, &err);
	make_marker(&m, CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 6100, NULL, NULL, 1);
	kp_decode_record(&f->d, (CUpti_Activity *)&m, &err);
	kp_db_commit(f->db, &err);
	/* named as CUPTI names them: the runtime call with its version suffix,
	 * the driver call without one */
	kp_db_exec(f->db, "INSERT INTO StringIds(value) VALUES ('cudaProfilerStart_v4000'),"
		   " ('cuProfilerStop')", &err);
	kp_db_exec(f->db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME(start, end, nameId, correlationId, runId)"
		   " SELECT 7500, 7510, id, 100, 1 FROM StringIds WHERE value = 'cudaProfilerStart_v4000'", &err);
	kp_db_exec(f->db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME(start, end, nameId, correlationId, runId)"
		   " SELECT 8500, 8510, id, 101, 1 FROM StringIds WHERE value = 'cuProfilerStop'", &err);
}

static void test_window_nvtx(void)
{
	struct kp_err err = {0};
	struct kp_window w = { "step", 0, 0 };
	const char *note = "x";
	int64_t kept = -1;
	struct fx f;

	window_fixture(&f, "win_nvtx.db");
	CU_ASSERT_EQUAL(kp_window_apply(f.db, f.run, &w, &kept, &note, &err), 0);
	CU_ASSERT_PTR_NULL(note);
	CU_ASSERT_EQUAL(kept, 4);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT group_concat(correlationId) FROM (SELECT correlationId"
				     " FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1)"), "3,4,5,6");
	/* four launches and the copy call */
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"), 5);
	/* the range itself stays */
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'step'"), 1);
	fx_close(&f);
}

static void test_window_skip_profiler(void)
{
	struct kp_err err = {0};
	struct kp_window w = { NULL, 0, 4 };
	const char *note = NULL;
	int64_t kept = -1;
	struct fx f;

	window_fixture(&f, "win_skip.db");
	CU_ASSERT_EQUAL(kp_window_apply(f.db, f.run, &w, &kept, &note, &err), 0);
	CU_ASSERT_EQUAL(kept, 6);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT min(correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL"), "5");
	/* the copy call at 5200 is not a launch: kept */
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 50"), 1);
	fx_close(&f);

	w.skip = 0;
	w.profiler_api = 1;
	window_fixture(&f, "win_prof.db");
	CU_ASSERT_EQUAL(kp_window_apply(f.db, f.run, &w, &kept, &note, &err), 0);
	CU_ASSERT_EQUAL(kept, 1);
	CU_ASSERT_STRING_EQUAL(qtext(&f, "SELECT group_concat(correlationId) FROM"
				     " CUPTI_ACTIVITY_KIND_KERNEL"), "8");
	fx_close(&f);

	/* a range that never appeared: nothing kept, and the note says why */
	w.profiler_api = 0;
	w.nvtx_range = "nope";
	window_fixture(&f, "win_none.db");
	CU_ASSERT_EQUAL(kp_window_apply(f.db, f.run, &w, &kept, &note, &err), 0);
	CU_ASSERT_EQUAL(kept, 0);
	CU_ASSERT_PTR_NOT_NULL(note);
	CU_ASSERT_PTR_NOT_NULL(note ? strstr(note, "never appeared") : NULL);
	CU_ASSERT_EQUAL(q(&f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 0);
	CU_ASSERT_EQUAL(kp_db_run_note(f.db, f.run, note, &err), 0);
	CU_ASSERT_EQUAL(kp_db_run_note(f.db, f.run, "second", &err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(qtext(&f, "SELECT note FROM kp_runs"), "; second"));
	fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* the library and the CLI without a GPU */

static const char *collector_lib(void)
{
	static char path[4096];
	const char *bin = kp_test_kplan();
	const char *slash = strrchr(bin, '/');

	snprintf(path, sizeof(path), "%.*s/../lib/libkplan_collect.so",
		 slash ? (int)(slash - bin) : 1, slash ? bin : ".");
	return path;
}

static void test_library_exports(void)
{
	const char *lib = collector_lib();

	if (access(lib, R_OK)) {
		fprintf(stderr, "(skipped: %s not built) ", lib);
		return;
	}
	/* only the entry point is exported */
	CU_ASSERT_EQUAL(kp_test_sh("nm -D --defined-only '%s' | awk '{print $3}' | grep -qvx"
				   " InitializeInjection", lib) != 0, 1);
	CU_ASSERT_EQUAL(kp_test_sh("nm -D --defined-only '%s' | grep -q ' InitializeInjection$'",
				   lib), 0);
	/* with no driver the entry point warns and returns; it never exits */
	{
		pid_t pid = fork();
		int status = -1;

		if (pid == 0) {
			void *h;
			int (*init)(void);

			setenv("KPLAN_OUT", kp_test_path("nodrv.db"), 1);
			h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
			if (!h)
				_exit(3);
			init = (int (*)(void))dlsym(h, "InitializeInjection");
			if (!init)
				_exit(4);
			init();
			_exit(42);
		}
		CU_ASSERT_FATAL(pid > 0);
		waitpid(pid, &status, 0);
		CU_ASSERT(WIFEXITED(status));
		CU_ASSERT_EQUAL(WEXITSTATUS(status), 42);
	}
}

static void test_record_cli(void)
{
	const char *db = kp_test_path("rec_nocuda.db");
	const char *log = kp_test_path("rec.log");
	char *text;
	size_t n;

	/* usage errors */
	CU_ASSERT_EQUAL(kp_test_sh("%s record >/dev/null 2>&1", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s record -o x.db -- >/dev/null 2>&1", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s record --skip -3 -- true >/dev/null 2>&1", kp_test_kplan()), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s record --bogus -- true >/dev/null 2>&1", kp_test_kplan()), 64);
	/* a command that does not exist */
	CU_ASSERT_EQUAL(kp_test_sh("%s record -o %s -- /no/such/cmd 2>%s", kp_test_kplan(),
				   kp_test_path("x.db"), log), 2);
	text = kp_test_read(log, &n);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "/no/such/cmd"));
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "not found"));
	free(text);
	if (access(collector_lib(), R_OK)) {
		fprintf(stderr, "(skipped rest: collector not built) ");
		return;
	}
	/* a command with no CUDA: its exit code, an empty run row that says so */
	CU_ASSERT_EQUAL(kp_test_sh("%s record -o %s -- sh -c 'exit 3' 2>%s", kp_test_kplan(), db,
				   log), 3);
	text = kp_test_read(log, &n);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "no GPU work was seen"));
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, db));
	free(text);
	CU_ASSERT_EQUAL(kp_test_sh("test \"$(sqlite3 %s \"SELECT count(*) FROM kp_runs WHERE"
				   " note LIKE 'no GPU work%%' AND command = 'sh -c exit 3'\" 2>/dev/null)\""
				   " = 1 || ! command -v sqlite3 >/dev/null", db), 0);
	{
		struct kp_err err = {0};
		struct kp_db *h = kp_db_open(db, KP_DB_RDONLY, &err);

		CU_ASSERT_PTR_NOT_NULL_FATAL(h);
		CU_ASSERT_EQUAL(kp_db_int(h, "SELECT count(*) FROM kp_runs WHERE source = 'record'"
					  " AND note LIKE 'no GPU work was seen%'", 0), 1);
		CU_ASSERT_EQUAL(kp_db_int(h, "SELECT count(*) FROM kp_runs WHERE command = 'sh -c exit 3'", 0), 1);
		kp_db_close(h);
	}
	/* killed by a signal: 128 + N */
	CU_ASSERT_EQUAL(kp_test_sh("%s record -o %s -- sh -c 'kill -TERM $$' 2>/dev/null",
				   kp_test_kplan(), db), 128 + 15);
	/* the environment reaches the command */
	CU_ASSERT_EQUAL(kp_test_sh("%s record -o %s --nvtx-range step --skip 5 --mem-mb 8 --args"
				   " -- sh -c 'test \"$KPLAN_NVTX_RANGE/$KPLAN_SKIP/$KPLAN_MEM_MB/$KPLAN_ARGS\""
				   " = step/5/8/1 && test -n \"$CUDA_INJECTION64_PATH\" && test \"$KPLAN_OUT\" = %s'"
				   " 2>/dev/null", kp_test_kplan(), db, db), 0);
}

/* ------------------------------------------------------------------------ */
/* one table of CUDA calls (common/cuda_api.def), three users */

/* What each user makes of a call: 1 when it counts it as breaking a capture. */
static int analyzer_breaks(const char *name)
{
	int kind = kp__api_blocker(kp__classify_api(name));

	/* a cross-stream wait depends on where its event was recorded */
	return kind >= 0 && kind != KP__B_CROSS_STREAM_EVENT;
}

static int watch_breaks(const char *name)
{
	return kp__rt_watch_breaker(name) != KP_API_OTHER;
}

/* The three users agree on name; 0 or 1 with a message naming it. */
static int agree(const char *name, int driver, const char *why_prefix)
{
	const struct kp_cuda_api *a = kp_cuda_api_find(name);
	int breaks = a && kp_cuda_api_breaks(a->cls), rec = a && a->record && a->driver == driver;
	int ok = 1;

	if (analyzer_breaks(name) != breaks || watch_breaks(name) != breaks) {
		fprintf(stderr, "\n%s%s: table %d, analyzer %d, watch %d", why_prefix, name, breaks,
			analyzer_breaks(name), watch_breaks(name));
		ok = 0;
	}
	if (kp_decode_api_recorded(name, driver) != rec || (breaks && !rec)) {
		fprintf(stderr, "\n%s%s: recorded %d, table %d, breaks %d", why_prefix, name,
			kp_decode_api_recorded(name, driver), rec, breaks);
		ok = 0;
	}
	if (!!kp_decode_sync_code(name) != !!(a && a->sync)) {
		fprintf(stderr, "\n%s%s: sync code %d", why_prefix, name, kp_decode_sync_code(name));
		ok = 0;
	}
	return ok;
}

/*
 * Every call of the table, in each flavour, is classified alike by the
 * collector (recorded, so that the analyzer sees it), the analyzer (a
 * blocker) and the runtime's watch (an offence); the calls issue 30 found
 * them disagreeing on are named.
 */
static void test_cuda_api_agree(void)
{
	static const char *const suffix[] = { "", "_v2", "_ptsz", "_v3020", "_ptsz_v7000" };
	static const struct {
		const char *name, *kind;     /* kind: the analyzer's blocker, NULL: none */
	} named[] = {
		{ "cudaEventElapsedTime", "sync" }, { "cudaEventElapsedTime_v2_v12080", "sync" },
		{ "cuEventElapsedTime_v2", "sync" }, { "cudaEventQuery", "sync" },
		{ "cudaStreamQuery", "sync" }, { "cudaDeviceSetLimit", "device_limit" },
		{ "cuCtxSetLimit", "device_limit" }, { "cudaStreamBeginCapture", "nested_capture" },
		{ "cudaStreamBeginCaptureToGraph_v12030", "nested_capture" },
		{ "cuStreamBeginCapture_v2_ptsz", "nested_capture" },
		{ "cudaHostRegister", "host_register" }, { "cudaMemcpy", "blocking_copy" },
		{ "cudaMemset", "blocking_copy" }, { "cudaMemcpyToSymbol", "blocking_copy" },
		{ "cudaMalloc", "malloc" }, { "cudaFree", "free" },
		{ "cudaStreamAddCallback", "host_callback" }, { "__cudaThreadSynchronize", "sync" },
		{ "cudaLaunchHostFunc", NULL }, { "cudaMallocAsync", NULL },
		{ "cudaMemsetAsync", NULL }, { "cudaStreamIsCapturing", NULL },
		{ "cudaGraphAddMemsetNode", NULL }, { "cudaGraphAddMemAllocNode", NULL },
		{ "cudaGetDevice", NULL }, { "cuStreamWaitValue32_v2", NULL },
	};
	const struct kp_cuda_api *t;
	char name[160];
	size_t n, i, j;
	int bad = 0, kind;

	t = kp_cuda_api_table(&n);
	CU_ASSERT(n > 150);
	for (i = 0; i < n; i++) {
		/* the class table and the rows agree on the basics */
		CU_ASSERT(t[i].cls > KP_API_OTHER && t[i].cls < KP_API__N);
		CU_ASSERT_EQUAL(t[i].driver, strncmp(t[i].name, "cuda", 4) != 0);
		CU_ASSERT_PTR_EQUAL(kp_cuda_api_find(t[i].name), &t[i]);
		for (j = 0; j < sizeof(suffix) / sizeof(suffix[0]); j++) {
			snprintf(name, sizeof(name), "%s%s", t[i].name, suffix[j]);
			bad += !agree(name, t[i].driver, "");
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		const char *nm = named[i].name;

		kind = kp__api_blocker(kp__classify_api(nm));
		CU_ASSERT_STRING_EQUAL(kind >= 0 ? kp__blocker_kind_name(kind) : "-",
				       named[i].kind ? named[i].kind : "-");
		CU_ASSERT_EQUAL(watch_breaks(nm), named[i].kind != NULL);
		if (named[i].kind)
			CU_ASSERT(kp_decode_api_recorded(nm, strncmp(nm + strspn(nm, "_"), "cuda", 4)));
		CU_ASSERT(agree(nm, strncmp(nm + strspn(nm, "_"), "cuda", 4) != 0, "named: "));
	}
	/* allocations and event queries pass a watch for a caching allocator */
	CU_ASSERT(kp__rt_watch_allowed(kp__rt_watch_breaker("cudaMalloc"), KP_RT_WATCH_ALLOW_ALLOC));
	CU_ASSERT(kp__rt_watch_allowed(kp__rt_watch_breaker("cuMemCreate"),
				       KP_RT_WATCH_ALLOW_ALLOC));
	CU_ASSERT(kp__rt_watch_allowed(kp__rt_watch_breaker("cudaEventElapsedTime"),
				       KP_RT_WATCH_ALLOW_ALLOC));
	CU_ASSERT(!kp__rt_watch_allowed(kp__rt_watch_breaker("cudaStreamQuery"),
					KP_RT_WATCH_ALLOW_ALLOC));
	CU_ASSERT(!kp__rt_watch_allowed(kp__rt_watch_breaker("cudaMalloc"), 0));
	CU_ASSERT_PTR_NOT_NULL(strstr(kp__rt_watch_offence(kp__rt_watch_breaker("cudaDeviceSetLimit")),
				      "device limits"));
}

/* The base name of a CUPTI callback id name: no leading _, no _vN/_ptsz/_ptds. */
static void base_of(const char *name, char *out, size_t n)
{
	size_t len;
	char *u;
	int again = 1;

	snprintf(out, n, "%s", name + strspn(name, "_"));
	while (again) {
		again = 0;
		len = strlen(out);
		u = strrchr(out, '_');
		if (!u)
			break;
		if ((u[1] == 'v' && u[2] && strspn(u + 2, "0123456789") == strlen(u + 2)) ||
		    !strcmp(u, "_ptsz") || !strcmp(u, "_ptds")) {
			*u = 0;
			again = len > 0;
		}
	}
}

/* 1 when name looks like a call the table must hold */
static int must_be_listed(const char *b)
{
	static const char *const prefix[] = {
		"cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset", "cudaLaunch", "cuLaunch",
		"cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree", "cudaHostAlloc",
		"cudaHostRegister", "cudaHostUnregister", "cuMemHostAlloc", "cuMemHostRegister",
		"cuMemHostUnregister", "cudaStreamBeginCapture",
		"cuStreamBeginCapture", "cudaEventRecord", "cuEventRecord", "cudaGraphLaunch",
		"cuGraphLaunch", NULL,
	};
	size_t i;

	if (strstr(b, "Synchronize") || strstr(b, "SetLimit") || strstr(b, "ElapsedTime") ||
	    strstr(b, "StreamWaitEvent"))
		return 1;
	if (!strcmp(b, "cudaStreamQuery") || !strcmp(b, "cudaEventQuery") ||
	    !strcmp(b, "cuStreamQuery") || !strcmp(b, "cuEventQuery"))
		return 1;
	for (i = 0; prefix[i]; i++)
		if (!strncmp(b, prefix[i], strlen(prefix[i])))
			return 1;
	return 0;
}

/*
 * Against every callback id of the installed CUPTI headers (the runtime and
 * driver API as CUDA knows it): each call is classified alike by the three
 * users, each one that looks like a copy, memset, launch, synchronisation,
 * query, allocation, free, limit or capture is in the table, and every
 * call the collector recorded before the table existed (its name prefixes,
 * kept here) is still recorded. Skipped, saying so, without the headers.
 */
static void test_cuda_api_cupti(void)
{
	static const char *const old_rt[] = {
		"cudaLaunch", "cudaGraphLaunch", "cudaGraphInstantiate", "cudaGraphUpload",
		"cudaGraphExecUpdate", "cudaMemcpy", "cudaMemset", "cudaDeviceSynchronize",
		"cudaThreadSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
		"cudaStreamWaitEvent", "cudaEventRecord", "cudaEventQuery", "cudaStreamQuery",
		"cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaHostRegister", "cudaHostUnregister",
		"cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaStreamAddCallback",
		"cudaProfilerStart", "cudaProfilerStop", NULL,
	};
	static const char *const old_drv[] = {
		"cuLaunch", "cuGraphLaunch", "cuGraphInstantiate", "cuGraphUpload",
		"cuGraphExecUpdate", "cuMemcpy", "cuMemset", "cuCtxSynchronize",
		"cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent", "cuEventRecord",
		"cuEventQuery", "cuStreamQuery", "cuMemAlloc", "cuMemFree", "cuMemHostAlloc",
		"cuMemHostRegister", "cuMemHostUnregister", "cuStreamBeginCapture",
		"cuStreamEndCapture", "cuStreamAddCallback", "cuProfilerStart", "cuProfilerStop",
		NULL,
	};
	static const char *const hdr[2] = { "cupti_runtime_cbid.h", "cupti_driver_cbid.h" };
	static const char *const tag[2] = { "CUPTI_RUNTIME_TRACE_CBID_", "CUPTI_DRIVER_TRACE_CBID_" };
	int d, bad = 0, seen = 0;

	for (d = 0; d < 2; d++) {
		char path[512], line[512], name[256], b[256];
		const char *const *old = d ? old_drv : old_rt;
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", KP_CUPTI_INCLUDE, hdr[d]);
		if (!(f = fopen(path, "r"))) {
			snprintf(path, sizeof(path), "%s/../extras/CUPTI/include/%s", KP_CUPTI_INCLUDE,
				 hdr[d]);
			f = fopen(path, "r");
		}
		if (!f) {
			fprintf(stderr, "(skipped: no %s under %s) ", hdr[d], KP_CUPTI_INCLUDE);
			return;
		}
		while (fgets(line, sizeof(line), f)) {
			const char *p = strstr(line, tag[d]);
			size_t i;

			if (!p || sscanf(p + strlen(tag[d]), "%255[A-Za-z0-9_]", name) != 1 ||
			    !strcmp(name, "INVALID") || !strcmp(name, "SIZE") ||
			    !strcmp(name, "FORCE_INT") || strstr(line, "#define"))
				continue;
			seen++;
			/* cu64*: the old 64-bit entry points, never seen in a trace */
			base_of(name, b, sizeof(b));
			if (!strncmp(b, "cu64", 4))
				continue;
			bad += !agree(name, d, "CUPTI: ");
			if ((b[0] == 'c' && !strncmp(b, d ? "cu" : "cuda", d ? 2 : 4)) &&
			    must_be_listed(b) && !kp_cuda_api_find(name)) {
				fprintf(stderr, "\nCUPTI: %s is not in common/cuda_api.def", name);
				bad++;
			}
			for (i = 0; old[i]; i++) {
				if (!strncmp(b, old[i], strlen(old[i])) &&
				    !kp_decode_api_recorded(name, d)) {
					fprintf(stderr, "\nCUPTI: %s was recorded, is not", name);
					bad++;
				}
			}
		}
		fclose(f);
	}
	CU_ASSERT(seen > 1000);
	CU_ASSERT_EQUAL(bad, 0);
}

/* the environment kp_rank_from_env reads in test_rank: NAME=VALUE pairs */
static const char *const *rank_env;

static const char *rank_getenv(const char *name)
{
	size_t n = strlen(name);

	for (const char *const *e = rank_env; *e; e++) {
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return *e + n + 1;
	}
	return NULL;
}

static int rank_of(const char *const *env, struct kp_rank *r)
{
	rank_env = env;
	memset(r, 0, sizeof(*r));
	return kp_rank_from_env(rank_getenv, r);
}

/* Which rank a recorded process is, from its launcher's variables. */
static void test_rank(void)
{
	static const char *const none[] = { "PATH=/bin", NULL };
	static const char *const torchrun[] = { "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4",
						"SLURM_PROCID=0", NULL };
	static const char *const ompi[] = { "OMPI_COMM_WORLD_RANK=5",
					    "OMPI_COMM_WORLD_LOCAL_RANK=1",
					    "OMPI_COMM_WORLD_SIZE=8", NULL };
	static const char *const pmi[] = { "PMI_RANK=2", NULL };
	static const char *const bad[] = { "RANK=two", "PMI_RANK=-1", NULL };
	static const char *const odd[] = { "RANK=4", "WORLD_SIZE=4", "LOCAL_RANK=x", NULL };
	struct kp_rank r;

	CU_ASSERT_EQUAL(rank_of(none, &r), 0);
	CU_ASSERT_EQUAL(rank_of(torchrun, &r), 1);   /* torchrun before Slurm */
	CU_ASSERT_EQUAL(r.rank, 3);
	CU_ASSERT_EQUAL(r.local_rank, 1);
	CU_ASSERT_EQUAL(r.world_size, 4);
	CU_ASSERT_STRING_EQUAL(r.by, "RANK");
	CU_ASSERT_EQUAL(rank_of(ompi, &r), 1);
	CU_ASSERT_EQUAL(r.rank, 5);
	CU_ASSERT_EQUAL(r.world_size, 8);
	CU_ASSERT_STRING_EQUAL(r.by, "OMPI_COMM_WORLD_RANK");
	CU_ASSERT_EQUAL(rank_of(pmi, &r), 1);
	CU_ASSERT_EQUAL(r.rank, 2);
	CU_ASSERT_EQUAL(r.local_rank, -1);
	CU_ASSERT_EQUAL(r.world_size, -1);
	CU_ASSERT_EQUAL(rank_of(bad, &r), 0);        /* not whole numbers >= 0 */
	CU_ASSERT_EQUAL(rank_of(odd, &r), 1);        /* rank past the size: size unknown */
	CU_ASSERT_EQUAL(r.rank, 4);
	CU_ASSERT_EQUAL(r.world_size, -1);
	CU_ASSERT_EQUAL(r.local_rank, -1);
}

CU_TestInfo kp_tests_collector[] = {
	{ "rank of a process of a multi-process job", test_rank },
	{ "cuda_api.def: collector, analyzer and watch classify every call alike",
	  test_cuda_api_agree },
	{ "cuda_api.def: every CUPTI callback id classified alike; none missing",
	  test_cuda_api_cupti },
	{ "decode kernel", test_kernel },
	{ "decode runtime and driver api", test_api },
	{ "decode memcpy, p2p, memset, sync", test_copies_and_sync },
	{ "decode nvtx ranges, marks, domains", test_markers },
	{ "decode overhead and device", test_overhead_device },
	{ "synchronizing calls by callback name", test_sync_codes },
	{ "programmatic dependent launch from launch attributes", test_launch_pdl },
	{ "buffer with unknown kinds", test_buffer },
	{ "writer failure counted", test_write_failure },
	{ "window: nvtx range", test_window_nvtx },
	{ "window: skip and profiler api", test_window_skip_profiler },
	{ "library exports and no-driver init", test_library_exports },
	{ "record cli without cuda", test_record_cli },
	CU_TEST_INFO_NULL,
};
