/*
 * chrome.c - streaming reader of Chrome-trace JSON written by the PyTorch
 * profiler (Kineto), plain or gzip.
 *
 * The file is read with zlib's gzread (which passes plain files through) in
 * fixed-size chunks and fed to yajl's callback parser; a small state machine
 * follows where in the document each callback lands. One event at a time is
 * held in memory and written through struct kp_writer as soon as its object
 * closes, so memory does not depend on the file size. Top-level keys may come
 * in any order (deviceProperties before or after traceEvents).
 *
 * Numbers arrive as text (yajl_number): microsecond timestamps with a
 * fraction become integer nanoseconds by decimal parsing, never through a
 * double.
 */
#include "import.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "../common/hash.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/vec.h"
#include "chrome_internal.h"
#include "kineto.h"

#define CHUNK_BYTES (256 * 1024)

/* ------------------------------------------------------------------ numbers */

/* value of s[0..len) * 10^scale, rounded half away from zero, into *out */
static int parse_decimal(const char *s, size_t len, int scale, int64_t *out)
{
	const char *p = s, *end = s + len;
	uint64_t m = 0;
	int neg = 0, any = 0, exp10 = 0;
	long e = 0;

	if (p < end && (*p == '-' || *p == '+'))
		neg = *p++ == '-';
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		any = 1;
		if (m < 100000000000000000ULL)
			m = m * 10 + (uint64_t)(*p - '0');
		else
			exp10++;   /* digit beyond 18 significant ones: keep magnitude */
	}
	if (p < end && *p == '.') {
		for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
			any = 1;
			if (m < 100000000000000000ULL) {
				m = m * 10 + (uint64_t)(*p - '0');
				exp10--;
			}
		}
	}
	if (!any)
		return -1;
	if (p < end && (*p == 'e' || *p == 'E')) {
		int eneg = 0, edig = 0;

		p++;
		if (p < end && (*p == '-' || *p == '+'))
			eneg = *p++ == '-';
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			edig = 1;
			if (e < 100000)
				e = e * 10 + (*p - '0');
		}
		if (!edig)
			return -1;
		if (eneg)
			e = -e;
	}
	if (p != end)
		return -1;
	e += exp10 + scale;
	if (e >= 0) {
		for (; e > 0; e--) {
			if (m > (uint64_t)INT64_MAX / 10) {
				if (m == 0)
					break;
				return -1;
			}
			m *= 10;
		}
		if (m > (uint64_t)INT64_MAX)
			return -1;
	} else if (e < -19) {
		m = 0;
	} else {
		uint64_t d = 1, q, r;

		for (; e < 0; e++)
			d *= 10;
		q = m / d;
		r = m % d;
		m = q + (r >= d - r ? 1 : 0);   /* half away from zero (sign applied below) */
	}
	*out = neg ? -(int64_t)m : (int64_t)m;
	return 0;
}

int kp_import_parse_us(const char *s, size_t len, int64_t *ns)
{
	return parse_decimal(s, len, 3, ns);
}

int kp_import_parse_int(const char *s, size_t len, int64_t *v)
{
	return parse_decimal(s, len, 0, v);
}

/* ------------------------------------------------------------------ state */

#define KEY(s, id) { s, sizeof(s) - 1, id }
static const struct { const char *key; size_t len; int id; } arg_keys[] = {
	KEY("device", A_DEVICE), KEY("context", A_CONTEXT), KEY("stream", A_STREAM),
	KEY("correlation", A_CORR), KEY("registers per thread", A_REGS),
	KEY("shared memory", A_SMEM), KEY("static shared memory", A_SSMEM),
	KEY("dynamic shared memory", A_DSMEM), KEY("grid", A_GRID), KEY("block", A_BLOCK),
	KEY("bytes", A_BYTES), KEY("return value", A_RETVAL), KEY("value", A_VALUE),
	KEY("launch type", A_LAUNCH), KEY("graph node id", A_GRAPH_NODE),
	KEY("graph id", A_GRAPH_ID), KEY("event id", A_EVENT_ID),
	KEY("cache config", A_CACHE), KEY("local memory per thread", A_LMEM_THREAD),
	KEY("local memory total", A_LMEM_TOTAL), KEY("grid id", A_GRID_ID),
	KEY("sync type", A_SYNC_TYPE),
	KEY("kplan pdl", A_PDL),      /* kplan export --chrome: programmatic dependent launch */
	KEY("kplan region", A_KPLAN_REGION),  /* and a libkplanrt range's category */
};

static const struct { const char *key; size_t len; int id; } dev_keys[] = {
	KEY("id", D_ID), KEY("name", D_NAME), KEY("totalGlobalMem", D_MEM),
	KEY("computeMajor", D_MAJOR), KEY("computeMinor", D_MINOR),
	KEY("maxThreadsPerBlock", D_MAXTPB), KEY("regsPerMultiprocessor", D_REGS_SM),
	KEY("sharedMemPerBlock", D_SHMEM_BLOCK), KEY("sharedMemPerMultiprocessor", D_SHMEM_SM),
	KEY("warpSize", D_WARP), KEY("numSms", D_SMS), KEY("clockRate", D_CLOCK),
	KEY("l2CacheSize", D_L2), KEY("memoryBandwidth", D_BW), KEY("busLocation", D_BUS),
	KEY("uuid", D_UUID),
};

int kp__chrome_fail(struct kp__chrome *r, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kp__err_vset(r->err, code, KP_WHERE, fmt, ap);
	va_end(ap);
	r->rc = code;
	return 0;   /* makes yajl stop */
}

static void ev_reset(struct kp__chrome_ev *e)
{
	e->ph = 0;
	e->cat = C_NONE;
	e->have = e->ahave = 0;
	e->pid_str = e->tid_str = 0;
	e->pid = e->tid = e->ts = e->dur = e->id = 0;
	memset(e->a, 0, sizeof(e->a));
	memset(e->grid, 0, sizeof(e->grid));
	memset(e->block, 0, sizeof(e->block));
	kp_strbuf_reset(&e->name);
	kp_strbuf_reset(&e->cat_s);
}

static int keyeq(const unsigned char *k, size_t len, const char *s)
{
	return strlen(s) == len && !memcmp(k, s, len);
}

static int classify_cat(const char *s, size_t len)
{
	static const struct { const char *name; int cat; } cats[] = {
		{ KP_CAT_KERNEL, C_KERNEL }, { KP_CAT_MEMCPY, C_MEMCPY },
		{ KP_CAT_MEMSET, C_MEMSET }, { KP_CAT_RUNTIME, C_RUNTIME },
		{ KP_CAT_DRIVER, C_DRIVER }, { KP_CAT_SYNC, C_SYNC },
		{ KP_CAT_ANNOT, C_ANNOT }, { KP_CAT_GPU_ANNOT, C_GPU_ANNOT },
		{ KP_CAT_CPU_OP, C_CPU_OP }, { KP_CAT_PYFUNC, C_PYFUNC }, { KP_CAT_FLOW, C_FLOW },
		{ KP_CAT_OVERHEAD, C_OVERHEAD }, { KP_CAT_REGION, C_KPLAN },
		{ KP_CAT_GAP, C_KPLAN },
		/* names used by PyTorch 1.8 - 1.10 */
		{ "Memcpy", C_MEMCPY }, { "Memset", C_MEMSET }, { "Runtime", C_RUNTIME },
		{ "Operator", C_CPU_OP },
	};
	size_t i;

	for (i = 0; i < sizeof(cats) / sizeof(cats[0]); i++) {
		if (strlen(cats[i].name) == len && !strncasecmp(cats[i].name, s, len))
			return cats[i].cat;
	}
	return C_OTHER;
}

static void count_skip(struct kp__chrome *r, const char *kind)
{
	int64_t n = 0;

	r->st->skipped++;
	if (!kp_strmap_get(&r->skipped, kind, &n)) {
		if (r->n_skip_kinds >= MAX_SKIP_KINDS)
			kind = "(other)";
		else
			r->n_skip_kinds++;
	}
	n = 0;
	kp_strmap_get(&r->skipped, kind, &n);
	kp_strmap_put(&r->skipped, kind, n + 1);
}

/* ------------------------------------------------------------------ events */

const char *const kp__chrome_key_names[] = {
	[K_PH] = "ph", [K_CAT] = "cat", [K_NAME] = "name", [K_PID] = "pid",
	[K_TID] = "tid", [K_TS] = "ts", [K_DUR] = "dur", [K_ID] = "id",
};

static const char *cat_label(const struct kp__chrome_ev *e)
{
	return e->cat_s.len ? e->cat_s.buf : "none";
}

/* Fail unless every field in mask is present (and pid/tid numeric). */
static int need(struct kp__chrome *r, const struct kp__chrome_ev *e, unsigned mask)
{
	int k;

	for (k = K_PH; k <= K_ID; k++) {
		if (!(mask & (1u << k)))
			continue;
		if (!(e->have & (1u << k)))
			return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld (cat %s): missing field '%s'",
				    r->path, (long long)r->ev_index, cat_label(e), kp__chrome_key_names[k]), -1;
		if ((k == K_PID && e->pid_str) || (k == K_TID && e->tid_str))
			return kp__chrome_fail(r, KP_EFORMAT,
				    "%s: event %lld (cat %s): field '%s' is not a number",
				    r->path, (long long)r->ev_index, cat_label(e), kp__chrome_key_names[k]), -1;
	}
	return 0;
}

/* args.<what>, falling back to pid/tid (Kineto puts device/stream there too) */
static int gpu_place(struct kp__chrome *r, const struct kp__chrome_ev *e, int64_t *device, int64_t *stream)
{
	if (e->ahave & (1u << A_DEVICE))
		*device = e->a[A_DEVICE];
	else if ((e->have & (1u << K_PID)) && !e->pid_str)
		*device = e->pid;
	else
		return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld (cat %s): missing field 'args.device'",
			    r->path, (long long)r->ev_index, cat_label(e)), -1;
	if (e->ahave & (1u << A_STREAM))
		*stream = e->a[A_STREAM];
	else if ((e->have & (1u << K_TID)) && !e->tid_str)
		*stream = e->tid;
	else
		return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld (cat %s): missing field 'args.stream'",
			    r->path, (long long)r->ev_index, cat_label(e)), -1;
	return 0;
}

/*
 * The domain id of cpu_op (or python_function) ranges: the StringIds id of
 * the domain's name, with one domain-create row (eventType 75) written
 * the first time, as nsys writes for named domains. *cache holds it.
 */
static int64_t named_domain(struct kp__chrome *r, const struct kp__chrome_ev *e, const char *name,
			    int64_t *cache)
{
	struct kp_nvtx_rec n = {0};
	int64_t id;

	if (*cache)
		return *cache;
	id = kp_db_intern(r->db, name, r->err);
	if (id < 0)
		return r->rc = (int)id, -1;
	n.start = e->ts;
	n.end = -1;
	n.event_type = 75;
	n.text = name;
	n.global_tid = KP_GLOBAL_TID(e->pid, e->tid);
	n.domain_id = id;
	if (kp_writer_nvtx(&r->w, &n, r->err) < 0)
		return r->rc = r->err->code, -1;
	*cache = id;
	return id;
}

/*
 * The fields every GPU-work row shares (db/writer.h, struct kp_gpu_op):
 * where and when e ran. OUT: *device for the caller's bookkeeping.
 */
static int gpu_op(struct kp__chrome *r, const struct kp__chrome_ev *e, int64_t corr,
		  struct kp_gpu_op *op, int64_t *device)
{
	int64_t stream = 0;

	if (gpu_place(r, e, device, &stream))
		return -1;
	op->start = e->ts;
	op->end = e->ts + e->dur;
	op->device_id = (uint32_t)*device;
	op->stream_id = (uint32_t)stream;
	op->context_id = (uint32_t)e->a[A_CONTEXT];
	op->correlation_id = (uint32_t)corr;
	op->global_pid = KP_GLOBAL_PID(r->host_pid);
	return 0;
}

#define WRITE(call) do { if ((call) < 0) { r->rc = r->err->code; return -1; } } while (0)

/* Write one complete event whose correlation id is known (0: none). */
static int write_event(struct kp__chrome *r, const struct kp__chrome_ev *e, int64_t corr)
{
	int64_t device = 0;

	switch (e->cat) {
	case C_KERNEL: {
		struct kp_kernel_rec k = {0};

		if (gpu_op(r, e, corr, &k.op, &device))
			return -1;
		k.name = e->name.buf;
		k.registers = (int)e->a[A_REGS];
		memcpy(k.grid, e->grid, sizeof(k.grid));
		memcpy(k.block, e->block, sizeof(k.block));
		if (e->ahave & ((1u << A_SSMEM) | (1u << A_DSMEM))) {
			k.static_smem = (int32_t)e->a[A_SSMEM];
			k.dynamic_smem = (int32_t)e->a[A_DSMEM];
		} else {
			k.static_smem = (int32_t)e->a[A_SMEM];  /* Kineto: static + dynamic */
		}
		k.launch_type = (int)e->a[A_LAUNCH];
		k.cache_config = (int)e->a[A_CACHE];
		k.local_mem_per_thread = (int32_t)e->a[A_LMEM_THREAD];
		k.local_mem_total = e->a[A_LMEM_TOTAL];
		k.grid_id = e->a[A_GRID_ID];
		k.graph_node_id = (uint64_t)e->a[A_GRAPH_NODE];
		k.graph_id = (uint32_t)e->a[A_GRAPH_ID];
		if (r->kernel_device < 0)
			r->kernel_device = device;
		WRITE(kp_writer_kernel(&r->w, &k, r->err));
		if (e->a[A_PDL] && corr)
			WRITE(kp_writer_pdl(&r->w, corr, r->err));
		break;
	}
	case C_MEMCPY: {
		struct kp_memcpy_rec m = {0};

		if (gpu_op(r, e, corr, &m.op, &device))
			return -1;
		m.bytes = e->a[A_BYTES];
		m.src_device = m.dst_device = (int)device;
		kp__memcpy_name_parse(e->name.buf, &m.copy_kind, &m.src_kind, &m.dst_kind);
		WRITE(kp_writer_memcpy(&r->w, &m, r->err));
		break;
	}
	case C_MEMSET: {
		struct kp_memset_rec m = {0};

		if (gpu_op(r, e, corr, &m.op, &device))
			return -1;
		m.bytes = e->a[A_BYTES];
		m.value = (int)e->a[A_VALUE];
		kp__memset_name_parse(e->name.buf, &m.mem_kind);
		WRITE(kp_writer_memset(&r->w, &m, r->err));
		break;
	}
	case C_SYNC: {
		struct kp_sync_rec s = {0};
		int t;

		if (gpu_op(r, e, corr, &s.op, &device))
			return -1;
		t = kp__sync_parse(e->name.buf);
		s.sync_type = (e->ahave & (1u << A_SYNC_TYPE)) ? (int)e->a[A_SYNC_TYPE] :
			      t > 0 ? t : 0;
		s.event_id = (uint32_t)e->a[A_EVENT_ID];
		WRITE(kp_writer_sync(&r->w, &s, r->err));
		break;
	}
	case C_RUNTIME:
	case C_DRIVER: {
		struct kp_api_rec a = {0};

		a.start = e->ts;
		a.end = e->ts + e->dur;
		a.event_class = e->cat == C_DRIVER ? KP_API_DRIVER : KP_API_RUNTIME;
		a.global_tid = KP_GLOBAL_TID(e->pid, e->tid);
		a.correlation_id = (uint32_t)corr;
		a.name = e->name.buf;
		a.return_value = (int)e->a[A_RETVAL];
		WRITE(kp_writer_api(&r->w, &a, r->err));
		break;
	}
	}
	return 0;
}

static uint64_t flow_hash(int64_t pid, int64_t tid, int64_t ts)
{
	uint64_t h = kp_hash_mix(kp_hash_mix((uint64_t)pid, (uint64_t)tid), (uint64_t)ts);

	return h & (FLOW_SLOTS - 1);
}

static int flow_find(struct kp__chrome *r, const struct kp__chrome_ev *e, int64_t *id)
{
	struct kp__chrome_flow *f = &r->flows[flow_hash(e->pid, e->tid, e->ts)];

	if (f->used && f->pid == e->pid && f->tid == e->tid && f->ts == e->ts) {
		*id = f->id;
		return 1;
	}
	return 0;
}

/* GPU and API events: correlation from args, else from an ac2g flow. */
static int correlated_event(struct kp__chrome *r, struct kp__chrome_ev *e)
{
	int64_t corr = 0;

	if (e->ahave & (1u << A_CORR))
		return write_event(r, e, e->a[A_CORR]);
	if (flow_find(r, e, &corr))
		return write_event(r, e, corr);
	/* its flow may come later: hold it for a while (Kineto writes the flow
	 * right next to the event, so a short window is enough) */
	if (r->pending.len >= PENDING_MAX) {
		struct kp__chrome_ev old = r->pending.data[0];

		memmove(r->pending.data, r->pending.data + 1,
			(r->pending.len - 1) * sizeof(old));
		r->pending.len--;
		r->st->uncorrelated++;
		if (write_event(r, &old, 0))
			return kp_strbuf_release(&old.name), -1;
		kp_strbuf_release(&old.name);
	}
	{
		struct kp__chrome_ev copy = *e;

		kp_strbuf_init(&copy.name);
		kp_strbuf_add(&copy.name, e->name.buf, e->name.len);
		kp_strbuf_init(&copy.cat_s);
		if (copy.name.oom || kp_vec_push(&r->pending, copy)) {
			kp_strbuf_release(&copy.name);
			return kp__chrome_fail(r, KP_ENOMEM, "out of memory"), -1;
		}
	}
	return 0;
}

static int flow_event(struct kp__chrome *r, const struct kp__chrome_ev *e)
{
	struct kp__chrome_flow *f;
	size_t i;

	if (need(r, e, (1u << K_ID) | (1u << K_PID) | (1u << K_TID) | (1u << K_TS)))
		return -1;
	f = &r->flows[flow_hash(e->pid, e->tid, e->ts)];
	f->pid = e->pid;
	f->tid = e->tid;
	f->ts = e->ts;
	f->id = e->id;
	f->used = 1;
	for (i = 0; i < r->pending.len; i++) {
		struct kp__chrome_ev *p = &r->pending.data[i];

		if (p->pid == e->pid && p->tid == e->tid && p->ts == e->ts) {
			struct kp__chrome_ev got = *p;
			int rc;

			memmove(p, p + 1, (r->pending.len - i - 1) * sizeof(*p));
			r->pending.len--;
			rc = write_event(r, &got, e->id);
			kp_strbuf_release(&got.name);
			return rc;
		}
	}
	return 0;
}

int kp__chrome_flush_pending(struct kp__chrome *r)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < r->pending.len; i++) {
		if (!rc) {
			r->st->uncorrelated++;
			rc = write_event(r, &r->pending.data[i], 0);
		}
		kp_strbuf_release(&r->pending.data[i].name);
	}
	r->pending.len = 0;
	/* the helpers return -1 after kp__chrome_fail() or WRITE() stored the code */
	return rc < 0 && r->rc ? r->rc : rc;
}

static int nvtx_event(struct kp__chrome *r, const struct kp__chrome_ev *e, int mark)
{
	struct kp_nvtx_rec n = {0};

	n.start = e->ts;
	n.end = mark ? -1 : e->ts + e->dur;
	n.event_type = mark ? KP_NVTX_MARK : KP_NVTX_PUSHPOP;
	n.text = e->name.buf;
	n.global_tid = KP_GLOBAL_TID(e->pid, e->tid);
	if (e->cat == C_GPU_ANNOT) {
		n.category = KP_NVTX_CAT_GPU;
	} else if (e->cat == C_ANNOT && e->a[A_KPLAN_REGION] > 0) {
		/* a region of libkplanrt (kplan export --chrome of a recording) */
		int64_t d = named_domain(r, e, KP_IMPORT_KPLAN_DOMAIN, &r->kplan_domain);

		if (d < 0)
			return -1;
		n.domain_id = d;
		n.category = (int)e->a[A_KPLAN_REGION];
	} else if (e->cat == C_CPU_OP || e->cat == C_PYFUNC) {
		int64_t d = e->cat == C_CPU_OP
			? named_domain(r, e, KP_IMPORT_CPU_OP_DOMAIN, &r->cpu_op_domain)
			: named_domain(r, e, KP_IMPORT_PYTHON_DOMAIN, &r->python_domain);

		if (d < 0)
			return -1;
		n.domain_id = d;
	}
	WRITE(kp_writer_nvtx(&r->w, &n, r->err));
	return 0;
}

int kp__chrome_handle_event(struct kp__chrome *r)
{
	struct kp__chrome_ev *e = &r->ev;
	const unsigned x_fields = (1u << K_TS) | (1u << K_DUR) | (1u << K_NAME);
	const unsigned cpu_fields = x_fields | (1u << K_PID) | (1u << K_TID);
	char kind[80];

	r->st->events++;
	if (!(e->have & (1u << K_PH)))
		return need(r, e, 1u << K_PH);
	switch (e->ph) {
	case 'M':
		return 0;   /* process/thread names: not stored */
	case 's': case 'f': case 't':
		if (e->cat == C_FLOW)
			return flow_event(r, e);
		break;
	case 'X':
		switch (e->cat) {
		case C_KERNEL: case C_MEMCPY: case C_MEMSET: case C_SYNC:
			if (need(r, e, x_fields))
				return -1;
			return correlated_event(r, e);
		case C_RUNTIME: case C_DRIVER:
			if (need(r, e, cpu_fields))
				return -1;
			r->host_pid = e->pid;
			return correlated_event(r, e);
		case C_ANNOT: case C_CPU_OP: case C_PYFUNC:
			if (need(r, e, cpu_fields))
				return -1;
			r->host_pid = e->pid;
			return nvtx_event(r, e, 0);
		case C_GPU_ANNOT: {
			int64_t device, stream;
			struct kp__chrome_ev g;

			if (need(r, e, x_fields) || gpu_place(r, e, &device, &stream))
				return -1;
			g = *e;
			g.pid = device;
			g.tid = stream;
			return nvtx_event(r, &g, 0);
		}
		case C_OVERHEAD: {
			struct kp_overhead_rec o = {0};

			if (need(r, e, x_fields))
				return -1;
			o.start = e->ts;
			o.end = e->ts + e->dur;
			o.global_tid = e->pid > 0 && !e->pid_str && !e->tid_str ?
				       KP_GLOBAL_TID(e->pid, e->tid) : 0;
			o.name = e->name.buf;
			WRITE(kp_writer_overhead(&r->w, &o, r->err));
			return 0;
		}
		case C_KPLAN:
			return 0;  /* kplan's own analysis tracks: recomputed, not imported */
		}
		break;
	case 'i': case 'I':
		if (e->cat == C_ANNOT) {
			if (need(r, e, (1u << K_TS) | (1u << K_NAME) | (1u << K_PID) | (1u << K_TID)))
				return -1;
			return nvtx_event(r, e, 1);
		}
		break;
	}
	snprintf(kind, sizeof(kind), "%s%s%c", e->cat_s.len ? e->cat_s.buf : "",
		 e->cat_s.len ? "/" : "phase ", e->ph);
	if (e->cat_s.len && e->ph == 'X')
		snprintf(kind, sizeof(kind), "%s", e->cat_s.buf);
	count_skip(r, kind);
	return 0;
}

/* ------------------------------------------------------------------ callbacks */

static int skip_value(struct kp__chrome *r, enum state ret)
{
	r->state = S_SKIP;
	r->skip_depth = r->depth - 1;
	r->ret_state = ret;
	return 1;
}

static int ev_scalar(struct kp__chrome *r, int type, const char *s, size_t len)
{
	struct kp__chrome_ev *e = &r->ev;
	int64_t v;

	switch (r->key) {
	case K_PH:
		if (type == V_STR && len >= 1)
			e->ph = s[0];
		break;
	case K_CAT:
		if (type == V_STR) {
			kp_strbuf_add(&e->cat_s, s, len);
			e->cat = classify_cat(s, len);
		}
		break;
	case K_NAME:
		if (type == V_STR)
			kp_strbuf_add(&e->name, s, len);
		else if (type == V_NUM)
			kp_strbuf_add(&e->name, s, len);
		break;
	case K_PID: case K_TID:
		if (type == V_NUM) {
			if (kp_import_parse_int(s, len, &v))
				return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: bad number '%.*s'",
					    r->path, (long long)r->ev_index, (int)len, s);
		} else if (type == V_STR) {
			v = 0;
			if (r->key == K_PID)
				e->pid_str = 1;
			else
				e->tid_str = 1;
		} else {
			return 1;
		}
		if (r->key == K_PID)
			e->pid = v;
		else
			e->tid = v;
		break;
	case K_TS: case K_DUR:
		if (type != V_NUM && type != V_STR)
			return 1;
		if (kp_import_parse_us(s, len, &v))
			return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: field '%s' is not a number ('%.*s')",
				    r->path, (long long)r->ev_index, kp__chrome_key_names[r->key],
				    (int)(len > 40 ? 40 : len), s);
		if (r->key == K_TS)
			e->ts = v;
		else
			e->dur = v;
		break;
	case K_ID:
		if (type == V_NUM || type == V_STR) {
			if (kp_import_parse_int(s, len, &v))
				v = (int64_t)kp_hash64(s, len, KP_HASH_SEED);  /* string ids */
			e->id = v;
		} else {
			return 1;
		}
		break;
	default:
		return 1;
	}
	e->have |= 1u << r->key;
	return 1;
}

static void dev_scalar(struct kp__chrome *r, int key, int type, const char *s, size_t len)
{
	struct kp__chrome_gpu *g = &r->cur_gpu;
	int64_t v = 0;

	if (type == V_STR) {
		char *dst = key == D_NAME ? g->name : key == D_BUS ? g->bus :
			    key == D_UUID ? g->uuid : NULL;
		size_t cap = key == D_NAME ? sizeof(g->name) : sizeof(g->bus);

		if (dst) {
			snprintf(dst, cap, "%.*s", (int)len, s);
			return;
		}
	}
	if ((type != V_NUM && type != V_STR) || kp_import_parse_int(s, len, &v))
		return;
	switch (key) {
	case D_ID: g->rec.id = (int)v; break;
	case D_MEM: g->rec.total_memory = v; break;
	case D_MAJOR: g->rec.compute_major = (int)v; break;
	case D_MINOR: g->rec.compute_minor = (int)v; break;
	case D_MAXTPB: g->rec.max_threads_per_block = (int)v; break;
	case D_REGS_SM: g->rec.max_registers_per_sm = (int)v; break;
	case D_SHMEM_BLOCK: g->rec.max_shmem_per_block = (int)v; break;
	case D_SHMEM_SM: g->rec.max_shmem_per_sm = (int)v; break;
	case D_WARP: g->rec.threads_per_warp = (int)v; break;
	case D_SMS: g->rec.sm_count = (int)v; break;
	case D_CLOCK: g->rec.clock_rate = (int)v; break;
	case D_L2: g->rec.l2_cache_size = v; break;
	case D_BW: g->rec.memory_bandwidth = v; break;
	}
}

static int scalar(struct kp__chrome *r, int type, const char *s, size_t len)
{
	int64_t v;

	switch (r->state) {
	case S_START:
		return kp__chrome_fail(r, KP_EFORMAT,
			    "%s: not a trace: expected a JSON object with \"traceEvents\", found a JSON %s",
			    r->path, type == V_STR ? "string" : type == V_NUM ? "number" : "literal");
	case S_TOPVAL:
		if (r->top_key == TK_EVENTS)
			return kp__chrome_fail(r, KP_EFORMAT, "%s: not a trace: \"traceEvents\" is not an array",
				    r->path);
		if (r->top_key >= TK_DRIVER && (type == V_NUM || type == V_STR) &&
		    !kp_import_parse_int(s, len, &v))
			r->versions[r->top_key - TK_DRIVER] = v;
		r->state = S_TOP;
		return 1;
	case S_EVENTS:
		return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: expected an object, found a JSON %s",
			    r->path, (long long)r->ev_index,
			    type == V_STR ? "string" : type == V_NUM ? "number" : "literal");
	case S_EVVAL:
		r->state = S_EV;
		return ev_scalar(r, type, s, len);
	case S_ARGVAL:
		r->state = S_ARGS;
		if (r->key != A_NONE && (type == V_NUM || type == V_STR) &&
		    !kp_import_parse_int(s, len, &v)) {
			r->ev.a[r->key] = v;
			r->ev.ahave |= 1u << r->key;
		}
		return 1;
	case S_ARGARR:
		if (r->arr && r->arr_idx < 3 && type == V_NUM && !kp_import_parse_int(s, len, &v))
			r->arr[r->arr_idx] = (int32_t)v;
		r->arr_idx++;
		return 1;
	case S_DEVVAL:
		r->state = S_DEV;
		dev_scalar(r, r->key, type, s, len);
		return 1;
	default:
		return 1;
	}
}

static int cb_null(void *ctx)
{
	return scalar(ctx, V_NULL, "", 0);
}

static int cb_bool(void *ctx, int b)
{
	return scalar(ctx, V_BOOL, b ? "1" : "0", 1);
}

static int cb_number(void *ctx, const char *s, size_t len)
{
	return scalar(ctx, V_NUM, s, len);
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
	return scalar(ctx, V_STR, (const char *)s, len);
}

static int cb_start_map(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth++;
	switch (r->state) {
	case S_START:
		r->state = S_TOP;
		return 1;
	case S_TOPVAL:
		if (r->top_key == TK_EVENTS)
			return kp__chrome_fail(r, KP_EFORMAT, "%s: not a trace: \"traceEvents\" is not an array",
				    r->path);
		return skip_value(r, S_TOP);
	case S_EVENTS:
		ev_reset(&r->ev);
		r->state = S_EV;
		return 1;
	case S_EVVAL:
		if (r->key == K_ARGS) {
			r->state = S_ARGS;
			return 1;
		}
		return skip_value(r, S_EV);
	case S_ARGVAL:
		return skip_value(r, S_ARGS);
	case S_ARGARR:
		return skip_value(r, S_ARGARR);
	case S_DEVS:
		memset(&r->cur_gpu, 0, sizeof(r->cur_gpu));
		r->state = S_DEV;
		return 1;
	case S_DEVVAL:
		return skip_value(r, S_DEV);
	default:
		return 1;
	}
}

static int cb_start_array(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth++;
	switch (r->state) {
	case S_START:
		return kp__chrome_fail(r, KP_EFORMAT,
			    "%s: not a trace: expected a JSON object with \"traceEvents\", found an array",
			    r->path);
	case S_TOPVAL:
		if (r->top_key == TK_EVENTS) {
			r->have_events = 1;
			r->state = S_EVENTS;
			return 1;
		}
		if (r->top_key == TK_DEVPROPS) {
			r->state = S_DEVS;
			return 1;
		}
		return skip_value(r, S_TOP);
	case S_EVENTS:
		return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: expected an object, found an array",
			    r->path, (long long)r->ev_index);
	case S_EVVAL:
		return skip_value(r, S_EV);
	case S_ARGVAL:
		if (r->key == A_GRID || r->key == A_BLOCK) {
			r->arr = r->key == A_GRID ? r->ev.grid : r->ev.block;
			r->ev.ahave |= 1u << r->key;
			r->arr_idx = 0;
			r->state = S_ARGARR;
			return 1;
		}
		return skip_value(r, S_ARGS);
	case S_ARGARR:
		return skip_value(r, S_ARGARR);
	case S_DEVS:
		return skip_value(r, S_DEVS);
	case S_DEVVAL:
		return skip_value(r, S_DEV);
	default:
		return 1;
	}
}

static int store_gpu(struct kp__chrome *r)
{
	struct kp__chrome_gpu *g = &r->cur_gpu;

	g->rec.name = g->name;
	g->rec.bus_location = g->bus[0] ? g->bus : NULL;
	g->rec.uuid = g->uuid[0] ? g->uuid : NULL;
	if (kp_writer_gpu(&r->w, &g->rec, r->err) < 0)
		return r->rc = r->err->code, 0;
	if (r->gpus.len < 64 && kp_vec_push(&r->gpus, *g))
		return kp__chrome_fail(r, KP_ENOMEM, "out of memory");
	return 1;
}

static int cb_end_map(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth--;
	switch (r->state) {
	case S_SKIP:
		if (r->depth == r->skip_depth)
			r->state = r->ret_state;
		return 1;
	case S_TOP:
		r->state = S_DONE;
		return 1;
	case S_EV:
		r->state = S_EVENTS;
		if (kp__chrome_handle_event(r))
			return 0;
		r->ev_index++;
		return 1;
	case S_ARGS:
		r->state = S_EV;
		return 1;
	case S_DEV:
		r->state = S_DEVS;
		return store_gpu(r);
	default:
		return 1;
	}
}

static int cb_end_array(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth--;
	switch (r->state) {
	case S_SKIP:
		if (r->depth == r->skip_depth)
			r->state = r->ret_state;
		return 1;
	case S_EVENTS:
	case S_DEVS:
		r->state = S_TOP;
		return 1;
	case S_ARGARR:
		r->state = S_ARGS;
		return 1;
	default:
		return 1;
	}
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t len)
{
	struct kp__chrome *r = ctx;
	size_t i;

	switch (r->state) {
	case S_TOP:
		r->top_key = keyeq(k, len, "traceEvents") ? TK_EVENTS :
			     keyeq(k, len, "deviceProperties") ? TK_DEVPROPS :
			     keyeq(k, len, "cuda_driver_version") ? TK_DRIVER :
			     keyeq(k, len, "cuda_runtime_version") ? TK_RUNTIME :
			     keyeq(k, len, "cupti_version") ? TK_CUPTI : TK_OTHER;
		r->state = S_TOPVAL;
		return 1;
	case S_EV:
		r->key = K_NONE;
		switch (len) {
		case 2:
			r->key = k[0] == 'p' && k[1] == 'h' ? K_PH :
				 k[0] == 't' && k[1] == 's' ? K_TS :
				 k[0] == 'i' && k[1] == 'd' ? K_ID : K_NONE;
			break;
		case 3:
			r->key = !memcmp(k, "cat", 3) ? K_CAT : !memcmp(k, "pid", 3) ? K_PID :
				 !memcmp(k, "tid", 3) ? K_TID : !memcmp(k, "dur", 3) ? K_DUR : K_NONE;
			break;
		case 4:
			r->key = !memcmp(k, "name", 4) ? K_NAME : !memcmp(k, "args", 4) ? K_ARGS :
				 K_NONE;
			break;
		}
		r->state = S_EVVAL;
		return 1;
	case S_ARGS:
		r->key = A_NONE;
		for (i = 0; i < sizeof(arg_keys) / sizeof(arg_keys[0]); i++) {
			if (arg_keys[i].len == len && !memcmp(k, arg_keys[i].key, len)) {
				r->key = arg_keys[i].id;
				break;
			}
		}
		r->state = S_ARGVAL;
		return 1;
	case S_DEV:
		r->key = D_NONE;
		for (i = 0; i < sizeof(dev_keys) / sizeof(dev_keys[0]); i++) {
			if (dev_keys[i].len == len && !memcmp(k, dev_keys[i].key, len)) {
				r->key = dev_keys[i].id;
				break;
			}
		}
		r->state = S_DEVVAL;
		return 1;
	default:
		return 1;
	}
}

const yajl_callbacks kp__chrome_callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_bool,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};

/* ------------------------------------------------------------------ driver */

/* "parse error: invalid object key (must be a string)" -> first line, trimmed */
static void yajl_message(yajl_handle h, char *out, size_t n)
{
	unsigned char *m = yajl_get_error(h, 0, NULL, 0);
	char *nl;

	snprintf(out, n, "%s", m ? (char *)m : "parse error");
	if (m)
		yajl_free_error(h, m);
	if ((nl = strchr(out, '\n')))
		*nl = '\0';
}

static void skipped_detail(struct kp__chrome *r)
{
	char *p = r->st->skipped_detail;
	size_t left = sizeof(r->st->skipped_detail), i;
	int n;

	*p = '\0';
	for (i = 0; i < r->skipped.cap; i++) {
		struct kp_strmap_slot *s = &r->skipped.slots[i];

		if (!s->key)
			continue;
		n = snprintf(p, left, "%s%s %lld", p == r->st->skipped_detail ? "" : ", ",
			     s->key, (long long)s->value);
		if (n < 0 || (size_t)n >= left)
			break;
		p += n;
		left -= (size_t)n;
		kp_info("%s: skipped %lld events of kind '%s'", r->path, (long long)s->value, s->key);
	}
}

static int finish_run(struct kp__chrome *r)
{
	struct kp__run_update u = {0};
	const struct kp__chrome_gpu *g = NULL;
	size_t i;

	for (i = 0; i < r->gpus.len; i++) {
		if (!g || r->gpus.data[i].rec.id == r->kernel_device)
			g = &r->gpus.data[i];
		if (r->gpus.data[i].rec.id == r->kernel_device)
			break;
	}
	u.pid = r->host_pid;
	if (g) {
		u.device_name = g->name;
		u.compute_major = g->rec.compute_major;
		u.compute_minor = g->rec.compute_minor;
		u.sm_count = g->rec.sm_count;
	}
	u.driver_version = (int)r->versions[0];
	u.runtime_version = (int)r->versions[1];
	u.cupti_version = (int)r->versions[2];
	if (kp__run_update(r->db, r->st->run_id, &u, r->err))
		return r->err->code;
	return kp_db_run_finish(r->db, r->st->run_id, 0, NULL, "complete", r->err);
}

int kp_import_chrome(struct kp_db *db, const char *path, const struct kp_import_opts *opts,
		     struct kp_import_stats *stats, struct kp_err *err)
{
	struct kp_run_info ri = { .source = "chrome", .source_path = path };
	struct kp__chrome r;
	yajl_handle h = NULL;
	unsigned char *buf = NULL;
	gzFile gz = NULL;
	struct stat sb;
	int64_t fed = 0, next_progress = 0;
	int rc = 0, n;
	yajl_status ys;

	memset(&r, 0, sizeof(r));
	r.db = db;
	r.path = path;
	r.err = err;
	r.st = stats;
	r.kernel_device = -1;
	kp_strbuf_init(&r.ev.name);
	kp_strbuf_init(&r.ev.cat_s);
	kp_strmap_init(&r.skipped);
	stats->format = KP_IMPORT_CHROME;

	if (stat(path, &sb))
		sb.st_size = 0;
	gz = gzopen(path, "rb");
	buf = malloc(CHUNK_BYTES);
	r.flows = calloc(FLOW_SLOTS, sizeof(*r.flows));
	if (!gz || !buf || !r.flows) {
		rc = gz ? kp_err_set(err, KP_ENOMEM, "out of memory") :
			  kp_err_set(err, KP_EIO, "%s: cannot open", path);
		goto out;
	}
	gzbuffer(gz, CHUNK_BYTES);
	h = yajl_alloc(&kp__chrome_callbacks, NULL, &r);
	if (!h) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	rc = kp_db_run_insert(db, &ri, &stats->run_id, err);
	if (rc)
		goto out;
	kp_writer_init(&r.w, db, stats->run_id);

	while ((n = gzread(gz, buf, CHUNK_BYTES)) > 0) {
		ys = yajl_parse(h, buf, (size_t)n);
		if (ys != yajl_status_ok) {
			if (r.rc) {
				rc = r.rc;
			} else {
				char m[200];

				yajl_message(h, m, sizeof(m));
				rc = kp_err_set(err, KP_EFORMAT, "%s: invalid JSON at byte %lld%s: %s",
						path, (long long)(fed + (int64_t)yajl_get_bytes_consumed(h)),
						gzdirect(gz) ? "" : " of the decompressed data", m);
			}
			goto out_writer;
		}
		fed += n;
		if (opts && opts->progress && fed >= next_progress) {
			kp_progress("importing (compressed bytes)", (long long)gzoffset(gz),
				    (long long)sb.st_size);
			next_progress = fed + (64 << 20);
		}
	}
	{
		int zerr = Z_OK;
		const char *zmsg = gzerror(gz, &zerr);

		/* zlib reports a stream cut short as Z_BUF_ERROR after the data */
		if (n >= 0 && gzeof(gz) && zerr == Z_OK)
			goto parsed;

		rc = kp_err_set(err, KP_EFORMAT,
				"%s: %s after %lld bytes of data (%s)", path,
				zerr == Z_BUF_ERROR ? "truncated gzip stream" : "corrupt gzip stream",
				(long long)fed, zmsg ? zmsg : "read error");
		goto out_writer;
	}
parsed:
	ys = yajl_complete_parse(h);
	if (ys != yajl_status_ok) {
		char m[200];

		if (r.rc) {
			rc = r.rc;
		} else {
			yajl_message(h, m, sizeof(m));
			rc = kp_err_set(err, KP_EFORMAT,
					"%s: invalid JSON at byte %lld: %s (file ends inside the document)",
					path, (long long)fed, m);
		}
		goto out_writer;
	}
	if (r.state == S_START) {
		rc = kp_err_set(err, KP_EFORMAT, "%s: not a trace: the file holds no JSON", path);
		goto out_writer;
	}
	if (!r.have_events) {
		rc = kp_err_set(err, KP_EFORMAT,
				"%s: not a trace: the JSON object has no \"traceEvents\" array", path);
		goto out_writer;
	}
	if ((rc = kp__chrome_flush_pending(&r)))
		goto out_writer;
	rc = finish_run(&r);
	if (!rc) {
		memcpy(stats->rows, r.w.rows, sizeof(stats->rows));
		stats->bytes_in = fed;
		skipped_detail(&r);
	}
out_writer:
	if (opts && opts->progress)
		kp_progress_done();
	kp_writer_release(&r.w);
out:
	if (h)
		yajl_free(h);
	if (gz)
		gzclose(gz);
	free(buf);
	free(r.flows);
	for (size_t i = 0; i < r.pending.len; i++)
		kp_strbuf_release(&r.pending.data[i].name);
	kp_vec_release(&r.pending);
	kp_vec_release(&r.gpus);
	kp_strbuf_release(&r.ev.name);
	kp_strbuf_release(&r.ev.cat_s);
	kp_strmap_release(&r.skipped);
	return rc;
}
