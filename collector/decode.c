/*
 * decode.c - see decode.h. No CUPTI calls in this file: it only reads the
 * record structs, so it links into the unit tests without libcupti.
 */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <driver_types.h>

#include "../common/cuda_api.h"

void kp_decode_init(struct kp_decoder *d, struct kp_writer *w, int64_t pid,
		    const struct kp_decode_hooks *hooks)
{
	memset(d, 0, sizeof(*d));
	d->w = w;
	d->pid = pid;
	if (hooks)
		d->hooks = *hooks;
	kp_strmap_init(&d->names);
	kp_strmap_init(&d->domains);
	d->next_domain = 1;
}

void kp_decode_release(struct kp_decoder *d)
{
	size_t i;

	for (i = 0; i < d->demangled.len; i++)
		free(d->demangled.data[i]);
	kp_vec_release(&d->demangled);
	for (i = 0; i < d->open.len; i++)
		free(d->open.data[i].name);
	kp_vec_release(&d->open);
	kp_vec_release(&d->ctx_dev);
	kp_strmap_release(&d->names);
	kp_strmap_release(&d->domains);
}

const char *kp_decode_overhead_name(int kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver compiler";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "cupti buffer flush";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "cupti instrumentation";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "cupti resource";
	case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
		return "runtime triggered module loading";
	case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
	case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command buffer full";
	case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "activity buffer request";
	case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "uvm activity init";
	default: return "unknown overhead";
	}
}

/* The demangled name for a CUPTI kernel name pointer (cached both by
 * pointer, which CUPTI shares between records of one kernel, and by text). */
static const char *kernel_name(struct kp_decoder *d, const char *mangled)
{
	size_t slot;
	int64_t idx;
	char *dm = NULL;

	if (!mangled)
		return "(unknown kernel)";
	slot = ((uintptr_t)mangled >> 4) % (sizeof(d->name_cache) / sizeof(d->name_cache[0]));
	if (d->name_cache[slot].key == mangled)
		return d->name_cache[slot].val;
	if (!kp_strmap_get(&d->names, mangled, &idx)) {
		if (d->hooks.demangle)
			dm = d->hooks.demangle(d->hooks.ctx, mangled);
		if (!dm)
			dm = strdup(mangled);
		if (!dm)
			return mangled;
		if (kp_vec_push(&d->demangled, dm)) {
			free(dm);
			return mangled;
		}
		idx = (int64_t)d->demangled.len - 1;
		if (kp_strmap_put(&d->names, mangled, idx))
			return d->demangled.data[idx];
	}
	d->name_cache[slot].key = mangled;
	d->name_cache[slot].val = d->demangled.data[idx];
	return d->name_cache[slot].val;
}

static void learn_ctx(struct kp_decoder *d, uint32_t ctx, uint32_t dev)
{
	/* stored as dev + 1 so that 0 means unknown */
	while (d->ctx_dev.len <= ctx && ctx < (1u << 20)) {
		if (kp_vec_push(&d->ctx_dev, 0))
			return;
	}
	if (ctx < d->ctx_dev.len)
		d->ctx_dev.data[ctx] = dev + 1;
}

static uint32_t ctx_device(struct kp_decoder *d, uint32_t ctx)
{
	if (ctx < d->ctx_dev.len && d->ctx_dev.data[ctx])
		return d->ctx_dev.data[ctx] - 1;
	return 0;
}

static int written(struct kp_decoder *d, int rc, int64_t *counter)
{
	if (rc < 0) {
		d->st.failed++;
		return rc;
	}
	(*counter)++;
	return 0;
}

/*
 * The fields every GPU-work row shares (struct kp_gpu_op) from a CUPTI
 * kernel, memcpy or memset record x: those records name them alike.
 */
#define GPU_OP_OF(d, x) ((struct kp_gpu_op){ \
	.start = (int64_t)(x)->start, .end = (int64_t)(x)->end, \
	.device_id = (x)->deviceId, .context_id = (x)->contextId, \
	.stream_id = (x)->streamId, .correlation_id = (x)->correlationId, \
	.global_pid = (d)->pid << 24 })

/* A memcpy row from a CUPTI memcpy or peer-to-peer memcpy record m. */
#define MEMCPY_REC(d, m, src, dst) ((struct kp_memcpy_rec){ \
	.op = GPU_OP_OF(d, m), .bytes = (int64_t)(m)->bytes, \
	.copy_kind = (m)->copyKind, .src_kind = (m)->srcKind, .dst_kind = (m)->dstKind, \
	.src_device = (int)(src), .dst_device = (int)(dst), .graph_node_id = (m)->graphNodeId })

static int do_kernel(struct kp_decoder *d, const CUpti_ActivityKernel10 *k, struct kp_err *err)
{
	struct kp_kernel_rec r;

	memset(&r, 0, sizeof(r));
	r.op = GPU_OP_OF(d, k);
	r.name = kernel_name(d, k->name);
	r.mangled = NULL;
	if (k->name && strcmp(k->name, r.name))
		r.mangled = k->name;
	r.launch_type = k->launchType;
	r.cache_config = k->cacheConfig.both;
	r.registers = k->registersPerThread;
	r.grid[0] = k->gridX;
	r.grid[1] = k->gridY;
	r.grid[2] = k->gridZ;
	r.block[0] = k->blockX;
	r.block[1] = k->blockY;
	r.block[2] = k->blockZ;
	r.static_smem = k->staticSharedMemory;
	r.dynamic_smem = k->dynamicSharedMemory;
	r.local_mem_per_thread = (int32_t)k->localMemoryPerThread;
	r.local_mem_total = (int64_t)k->localMemoryTotal_v2;
	r.grid_id = k->gridId;
	r.shared_mem_executed = (int32_t)k->sharedMemoryExecuted;
	r.graph_node_id = k->graphNodeId;
	r.graph_id = k->graphId;
	learn_ctx(d, k->contextId, k->deviceId);
	return written(d, kp_writer_kernel(d->w, &r, err), &d->st.kernels);
}

static int do_memcpy(struct kp_decoder *d, const CUpti_ActivityMemcpy6 *m, struct kp_err *err)
{
	struct kp_memcpy_rec r = MEMCPY_REC(d, m, m->deviceId, m->deviceId);

	learn_ctx(d, m->contextId, m->deviceId);
	return written(d, kp_writer_memcpy(d->w, &r, err), &d->st.memcpys);
}

static int do_memcpy_p2p(struct kp_decoder *d, const CUpti_ActivityMemcpyPtoP4 *m,
			 struct kp_err *err)
{
	struct kp_memcpy_rec r = MEMCPY_REC(d, m, m->srcDeviceId, m->dstDeviceId);

	return written(d, kp_writer_memcpy(d->w, &r, err), &d->st.memcpys);
}

static int do_memset(struct kp_decoder *d, const CUpti_ActivityMemset4 *m, struct kp_err *err)
{
	struct kp_memset_rec r;

	memset(&r, 0, sizeof(r));
	r.op = GPU_OP_OF(d, m);
	r.bytes = (int64_t)m->bytes;
	r.value = (int)m->value;
	r.mem_kind = m->memoryKind;
	r.graph_node_id = m->graphNodeId;
	learn_ctx(d, m->contextId, m->deviceId);
	return written(d, kp_writer_memset(d->w, &r, err), &d->st.memsets);
}

static int do_sync(struct kp_decoder *d, const CUpti_ActivitySynchronization2 *s,
		   struct kp_err *err)
{
	struct kp_sync_rec r;

	memset(&r, 0, sizeof(r));
	r.start = (int64_t)s->start;
	r.end = (int64_t)s->end;
	r.device_id = ctx_device(d, s->contextId);
	r.context_id = s->contextId;
	/* CUPTI_SYNCHRONIZATION_INVALID_VALUE (-1) means "not applicable" */
	r.stream_id = s->streamId == (uint32_t)-1 ? 0 : s->streamId;
	r.correlation_id = s->correlationId;
	r.global_pid = d->pid << 24;
	r.sync_type = s->type;
	r.event_id = s->cudaEventId == (uint32_t)-1 ? 0 : s->cudaEventId;
	return written(d, kp_writer_sync(d->w, &r, err), &d->st.syncs);
}

static int do_api(struct kp_decoder *d, const CUpti_ActivityAPI *a, int driver,
		  struct kp_err *err)
{
	struct kp_api_rec r;
	const char *name = NULL;
	char buf[48];

	if (d->hooks.api_name)
		name = d->hooks.api_name(d->hooks.ctx, driver, a->cbid);
	if (!name) {
		snprintf(buf, sizeof(buf), "%s_cbid_%u", driver ? "cu" : "cuda", a->cbid);
		name = buf;
	}
	memset(&r, 0, sizeof(r));
	r.start = (int64_t)a->start;
	r.end = (int64_t)a->end;
	r.event_class = driver ? KP_API_DRIVER : KP_API_RUNTIME;
	r.global_tid = kp_global_tid(a->processId ? a->processId : d->pid, a->threadId);
	r.correlation_id = a->correlationId;
	r.name = name;
	r.return_value = (int)a->returnValue;
	return written(d, kp_writer_api(d->w, &r, err), &d->st.apis);
}

static int do_overhead(struct kp_decoder *d, const CUpti_ActivityOverhead3 *o,
		       struct kp_err *err)
{
	struct kp_overhead_rec r;

	memset(&r, 0, sizeof(r));
	r.start = (int64_t)o->start;
	r.end = (int64_t)o->end;
	if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
	    o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
		r.global_tid = kp_global_tid(o->objectId.pt.processId ?
					     o->objectId.pt.processId : d->pid,
					     o->objectId.pt.threadId);
	r.name = kp_decode_overhead_name(o->overheadKind);
	return written(d, kp_writer_overhead(d->w, &r, err), &d->st.overheads);
}

/* domainId for a domain name: 0 for the default domain, else 1, 2, ... in
 * order of first sight; a domain-create row (eventType 75) names it. */
static int64_t domain_id(struct kp_decoder *d, const char *domain, int64_t ts, int64_t tid,
			 struct kp_err *err)
{
	struct kp_nvtx_rec r;
	int64_t id;

	if (!domain || !domain[0])
		return 0;
	if (kp_strmap_get(&d->domains, domain, &id))
		return id;
	id = d->next_domain++;
	if (kp_strmap_put(&d->domains, domain, id))
		return 0;
	memset(&r, 0, sizeof(r));
	r.start = ts;
	r.end = -1;
	r.event_type = 75;
	r.text = domain;
	r.global_tid = tid;
	r.domain_id = id;
	if (kp_writer_nvtx(d->w, &r, err) < 0)
		d->st.failed++;
	return id;
}

static int do_marker(struct kp_decoder *d, const CUpti_ActivityMarker2 *m, struct kp_err *err)
{
	struct kp_nvtx_rec r;
	int64_t tid = 0, pid = d->pid;
	size_t i;

	if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
	    m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
		if (m->objectId.pt.processId)
			pid = m->objectId.pt.processId;
		tid = kp_global_tid(pid, m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ?
				    m->objectId.pt.threadId : pid);
	}
	memset(&r, 0, sizeof(r));
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		struct kp_decode_range o;

		memset(&o, 0, sizeof(o));
		o.id = m->id;
		o.start = (int64_t)m->timestamp;
		o.tid = tid;
		/* CUPTI reports push/pop ranges on the thread, start/end ranges
		 * (which may end on another thread) on the process */
		o.pushpop = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD;
		o.domain_id = domain_id(d, m->domain, o.start, tid, err);
		o.name = m->name ? strdup(m->name) : NULL;
		if (kp_vec_push(&d->open, o)) {
			free(o.name);
			d->st.failed++;
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		}
		return 0;
	}
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		/* ranges nest: search from the most recent */
		for (i = d->open.len; i-- > 0;) {
			struct kp_decode_range o = d->open.data[i];
			int rc;

			if (o.id != m->id)
				continue;
			memmove(&d->open.data[i], &d->open.data[i + 1],
				(d->open.len - i - 1) * sizeof(o));
			d->open.len--;
			r.start = o.start;
			r.end = (int64_t)m->timestamp;
			r.event_type = o.pushpop ? KP_NVTX_PUSHPOP : KP_NVTX_STARTEND;
			r.range_id = o.pushpop ? 0 : o.id;
			r.category = o.category;
			r.color = o.color;
			r.text = o.name;
			r.global_tid = o.tid;
			r.end_global_tid = tid != o.tid ? tid : 0;
			r.domain_id = o.domain_id;
			rc = kp_writer_nvtx(d->w, &r, err);
			free(o.name);
			return written(d, rc, &d->st.nvtx_ranges);
		}
		d->st.unmatched_ends++;
		return 0;
	}
	/* instantaneous mark (and the sync-object flavours: kept as marks) */
	r.start = (int64_t)m->timestamp;
	r.end = -1;
	r.event_type = KP_NVTX_MARK;
	r.text = m->name;
	r.global_tid = tid;
	r.domain_id = domain_id(d, m->domain, r.start, tid, err);
	return written(d, kp_writer_nvtx(d->w, &r, err), &d->st.nvtx_marks);
}

static int do_marker_data(struct kp_decoder *d, const CUpti_ActivityMarkerData2 *m)
{
	size_t i;

	for (i = d->open.len; i-- > 0;) {
		if (d->open.data[i].id == m->id) {
			d->open.data[i].color = m->color;
			d->open.data[i].category = (int)m->category;
			break;
		}
	}
	d->st.marker_data++;
	return 0;
}

/* First device also fills the run row's device columns. */
static void update_run_device(struct kp_decoder *d, const CUpti_ActivityDevice5 *v)
{
	sqlite3_stmt *st;

	if (d->run_device_set || !d->w->db)
		return;
	d->run_device_set = 1;
	if (kp_db_prepare(d->w->db, "UPDATE kp_runs SET device_name = ?, compute_major = ?,"
			  " compute_minor = ?, sm_count = ? WHERE runId = ?", &st, NULL))
		return;
	sqlite3_bind_text(st, 1, v->name ? v->name : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, (int)v->computeCapabilityMajor);
	sqlite3_bind_int(st, 3, (int)v->computeCapabilityMinor);
	sqlite3_bind_int(st, 4, (int)v->numMultiprocessors);
	sqlite3_bind_int64(st, 5, d->w->run_id);
	sqlite3_step(st);
	sqlite3_finalize(st);
}

static int do_device(struct kp_decoder *d, const CUpti_ActivityDevice5 *v, struct kp_err *err)
{
	struct kp_gpu_rec r;
	char uuid[40];
	int i, n = 0;

	for (i = 0; i < 16; i++) {
		n += snprintf(uuid + n, sizeof(uuid) - n, "%02x",
			      (unsigned char)v->uuid.bytes[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			uuid[n++] = '-';
	}
	uuid[n] = 0;
	memset(&r, 0, sizeof(r));
	r.id = (int)v->id;
	r.name = v->name ? v->name : "";
	r.uuid = uuid;
	r.total_memory = (int64_t)v->globalMemorySize;
	/* CUPTI gives KB/s */
	r.memory_bandwidth = (int64_t)v->globalMemoryBandwidth * 1000;
	r.l2_cache_size = v->l2CacheSize;
	r.sm_count = (int)v->numMultiprocessors;
	r.compute_major = (int)v->computeCapabilityMajor;
	r.compute_minor = (int)v->computeCapabilityMinor;
	r.clock_rate = (int)v->coreClockRate;
	r.max_threads_per_block = (int)v->maxThreadsPerBlock;
	r.max_registers_per_sm = (int)v->maxRegistersPerMultiprocessor;
	r.max_shmem_per_block = (int)v->maxSharedMemoryPerBlock;
	r.max_shmem_per_sm = (int)v->maxSharedMemoryPerMultiprocessor;
	r.threads_per_warp = (int)v->numThreadsPerWarp;
	update_run_device(d, v);
	return written(d, kp_writer_gpu(d->w, &r, err), &d->st.devices);
}

int kp_decode_record(struct kp_decoder *d, const CUpti_Activity *rec, struct kp_err *err)
{
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL:
		return do_kernel(d, (const CUpti_ActivityKernel10 *)rec, err);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return do_memcpy(d, (const CUpti_ActivityMemcpy6 *)rec, err);
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return do_memcpy_p2p(d, (const CUpti_ActivityMemcpyPtoP4 *)rec, err);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return do_memset(d, (const CUpti_ActivityMemset4 *)rec, err);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return do_sync(d, (const CUpti_ActivitySynchronization2 *)rec, err);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
		return do_api(d, (const CUpti_ActivityAPI *)rec, 0, err);
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return do_api(d, (const CUpti_ActivityAPI *)rec, 1, err);
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		return do_overhead(d, (const CUpti_ActivityOverhead3 *)rec, err);
	case CUPTI_ACTIVITY_KIND_MARKER:
		return do_marker(d, (const CUpti_ActivityMarker2 *)rec, err);
	case CUPTI_ACTIVITY_KIND_MARKER_DATA:
		return do_marker_data(d, (const CUpti_ActivityMarkerData2 *)rec);
	case CUPTI_ACTIVITY_KIND_DEVICE:
		return do_device(d, (const CUpti_ActivityDevice5 *)rec, err);
	case CUPTI_ACTIVITY_KIND_CONTEXT: {
		const CUpti_ActivityContext3 *c = (const CUpti_ActivityContext3 *)rec;

		learn_ctx(d, c->contextId, c->deviceId);
		d->st.contexts++;
		return 0;
	}
	default:
		d->st.unknown++;
		return 1;
	}
}

int64_t kp_decode_buffer(struct kp_decoder *d, uint8_t *buf, size_t valid,
			 kp_decode_next_fn next, struct kp_err *err)
{
	CUpti_Activity *rec = NULL;
	struct kp_err e2 = {0};
	int64_t n = 0;
	int first = 1;

	while (next(buf, valid, &rec) == 0) {
		n++;
		if (kp_decode_record(d, rec, first ? err : &e2) < 0)
			first = 0;
	}
	return n;
}

int64_t kp_decode_finish(struct kp_decoder *d, int64_t end_ns, struct kp_err *err)
{
	int64_t n = 0;
	size_t i;

	for (i = 0; i < d->open.len; i++) {
		struct kp_decode_range *o = &d->open.data[i];
		struct kp_nvtx_rec r;

		memset(&r, 0, sizeof(r));
		r.start = o->start;
		r.end = end_ns > o->start ? end_ns : o->start;
		r.event_type = o->pushpop ? KP_NVTX_PUSHPOP : KP_NVTX_STARTEND;
		r.range_id = o->pushpop ? 0 : o->id;
		r.category = o->category;
		r.color = o->color;
		r.text = o->name;
		r.global_tid = o->tid;
		r.domain_id = o->domain_id;
		if (written(d, kp_writer_nvtx(d->w, &r, err), &d->st.nvtx_ranges) == 0)
			n++;
		free(o->name);
	}
	d->open.len = 0;
	return n;
}

int kp_decode_sync_code(const char *name)
{
	static const int type[] = {
		[KP_API_SYNC_CONTEXT] = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
		[KP_API_SYNC_STREAM] = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
		[KP_API_SYNC_EVENT] = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
		[KP_API_SYNC_WAIT] = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT,
	};
	const struct kp_cuda_api *a = kp_cuda_api_find(name);

	if (!a || a->sync == KP_API_SYNC_NONE)
		return 0;
	return type[a->sync] | (strstr(name, "_ptsz") ? 1 << 4 : 0);
}

int kp_decode_api_recorded(const char *name, int driver)
{
	const struct kp_cuda_api *a = kp_cuda_api_find(name);

	return a && a->record && a->driver == !!driver;
}

int kp_decode_launch_pdl(const void *attrs, unsigned n, size_t stride)
{
	unsigned i;

	for (i = 0; attrs && i < n && i < 64; i++) {
		const cudaLaunchAttribute *at =
			(const cudaLaunchAttribute *)((const char *)attrs + i * stride);

		if ((at->id == cudaLaunchAttributeProgrammaticStreamSerialization &&
		     at->val.programmaticStreamSerializationAllowed) ||
		    (at->id == cudaLaunchAttributeProgrammaticEvent && at->val.programmaticEvent.event))
			return 1;
	}
	return 0;
}
