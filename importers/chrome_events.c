/*
 * chrome_events.c - one Chrome-trace event, once its object closes, into
 * rows through struct kp_writer: GPU ops, API calls, annotations and NVTX
 * ranges; the flow events that correlate a launch with its kernel, with the
 * events that wait for theirs (PENDING_MAX); what is skipped, counted by kind.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chrome_internal.h"
#include "kineto.h"
#include "../common/hash.h"
#include "../common/log.h"
#include "../common/nccl.h"

int kp__chrome_fail(struct kp__chrome *r, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kp__err_vset(r->err, code, KP_WHERE, fmt, ap);
	va_end(ap);
	r->rc = code;
	return 0;   /* makes yajl stop */
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

static int64_t arg_or(const struct kp__chrome_ev *e, int key)
{
	return (e->ahave & (1u << key)) ? e->a[key] : -1;
}

/* Write the kp_collectives row of the kernel at (stream, start). */
static int write_collective(struct kp__chrome *r, uint32_t stream, int64_t start,
			    const struct kp__chrome_comm *c, int64_t in, int64_t out,
			    int64_t group_size, int64_t seq)
{
	struct kp_collective_rec cr = {
		.stream_id = stream, .start = start, .name = c->name, .dtype = c->dtype,
		.pg_name = c->pg_name, .pg_desc = c->pg_desc, .group_ranks = c->ranks,
		.in_nelems = in, .out_nelems = out, .group_size = group_size, .seq = seq,
		.bytes = -1,
	};
	int size = kp_nccl_dtype_bytes(c->dtype);

	/* the larger buffer: the whole tensor of an all-reduce, the gathered
	 * one of an all-gather, the scattered input of a reduce-scatter */
	if (size > 0 && (in >= 0 || out >= 0))
		cr.bytes = (in > out ? in : out) * size;
	WRITE(kp_writer_collective(&r->w, &cr, r->err));
	return 0;
}

/*
 * An NCCL kernel's collective: from its own args (Kineto copies the
 * launching record_param_comms op's metadata onto the kernel), else kept
 * with the op's External id for kp__chrome_tie_collectives.
 */
static int kernel_collective(struct kp__chrome *r, const struct kp__chrome_ev *e,
			     const struct kp_gpu_op *op)
{
	struct kp__chrome_ncclk k = { .ext_id = e->a[A_EXT_ID], .start = op->start,
				      .stream = op->stream_id };

	if (!kp_nccl_parse(e->name.buf, NULL))
		return 0;
	if (e->ahave & ((1u << A_IN_NELEMS) | (1u << A_OUT_NELEMS)) || e->comm.pg_name[0])
		return write_collective(r, op->stream_id, op->start, &e->comm,
					arg_or(e, A_IN_NELEMS), arg_or(e, A_OUT_NELEMS),
					arg_or(e, A_GROUP_SIZE), arg_or(e, A_SEQ));
	if (!(e->ahave & (1u << A_EXT_ID)))
		return 0;
	if (kp_vec_push(&r->nccl_kernels, k))
		return kp__chrome_fail(r, KP_ENOMEM, "out of memory"), -1;
	return 0;
}

/* A record_param_comms op: its collective, for the kernels it launched. */
static int comm_op(struct kp__chrome *r, const struct kp__chrome_ev *e)
{
	struct kp__chrome_commop c = {
		.ext_id = e->a[A_EXT_ID], .in_nelems = arg_or(e, A_IN_NELEMS),
		.out_nelems = arg_or(e, A_OUT_NELEMS), .group_size = arg_or(e, A_GROUP_SIZE),
		.seq = arg_or(e, A_SEQ), .comm = e->comm,
	};

	if (!(e->ahave & (1u << A_EXT_ID)) || strcmp(e->name.buf, "record_param_comms"))
		return 0;
	if (kp_vec_push(&r->commops, c))
		return kp__chrome_fail(r, KP_ENOMEM, "out of memory"), -1;
	return 0;
}

static int by_ext_id(const void *x, const void *y)
{
	const struct kp__chrome_commop *a = x, *b = y;

	return (a->ext_id > b->ext_id) - (a->ext_id < b->ext_id);
}

int kp__chrome_tie_collectives(struct kp__chrome *r)
{
	size_t n = r->commops.len;

	if (!n || !r->nccl_kernels.len)
		return 0;
	qsort(r->commops.data, n, sizeof(*r->commops.data), by_ext_id);
	for (size_t i = 0; i < r->nccl_kernels.len; i++) {
		const struct kp__chrome_ncclk *k = &r->nccl_kernels.data[i];
		struct kp__chrome_commop key = { .ext_id = k->ext_id };
		const struct kp__chrome_commop *c = bsearch(&key, r->commops.data, n,
							    sizeof(key), by_ext_id);

		if (c && write_collective(r, k->stream, k->start, &c->comm, c->in_nelems,
					  c->out_nelems, c->group_size, c->seq))
			return r->rc;
	}
	return 0;
}

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
		if (kernel_collective(r, e, &k.op))
			return -1;
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

/*
 * The kp_cpu_op_args row of the CPU op e (profiler record_shapes=True):
 * the args read well, each malformed one counted and left out.
 */
static int shape_args(struct kp__chrome *r, const struct kp__chrome_ev *e)
{
	struct kp_cpu_op_args_rec a = { .global_tid = KP_GLOBAL_TID(e->pid, e->tid), .start = e->ts };
	const char **f[4] = { &a.dims, &a.types, &a.strides, &a.concrete };
	int any = 0;

	for (int k = 0; k < 4; k++) {
		if (!(r->shp_have & (1u << k)))
			continue;
		if (r->shp_bad & (1u << k)) {
			r->st->bad_shape_args++;
			continue;
		}
		*f[k] = r->shp[k].buf;
		any = 1;
	}
	if (any)
		WRITE(kp_writer_cpu_op_args(&r->w, &a, r->err));
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
			if (e->cat == C_CPU_OP && comm_op(r, e))
				return -1;
			if (nvtx_event(r, e, 0))
				return -1;
			return e->cat == C_CPU_OP && r->shp_have ? shape_args(r, e) : 0;
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
