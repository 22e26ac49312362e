/* writer.c - see writer.h. */
#include "writer.h"
#include "../common/kname.h"

#include <stdio.h>
#include <string.h>

static const char *const table_names[KP_T__N] = {
	[KP_T_KERNEL] = "CUPTI_ACTIVITY_KIND_KERNEL",
	[KP_T_RUNTIME] = "CUPTI_ACTIVITY_KIND_RUNTIME",
	[KP_T_MEMCPY] = "CUPTI_ACTIVITY_KIND_MEMCPY",
	[KP_T_MEMSET] = "CUPTI_ACTIVITY_KIND_MEMSET",
	[KP_T_SYNC] = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
	[KP_T_NVTX] = "NVTX_EVENTS",
	[KP_T_OVERHEAD] = "PROFILER_OVERHEAD",
	[KP_T_GPU] = "TARGET_INFO_GPU",
	[KP_T_LAUNCH_ATTRS] = "kp_launch_attrs",
	[KP_T_COLL] = "kp_collectives",
	[KP_T_CPU_OP_ARGS] = "kp_cpu_op_args",
};

/* Column lists; runId is always bound last. */
static const char *const table_cols[KP_T__N] = {
	[KP_T_KERNEL] = "start,end,deviceId,contextId,streamId,correlationId,globalPid,"
		"demangledName,shortName,mangledName,launchType,cacheConfig,registersPerThread,"
		"gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,dynamicSharedMemory,"
		"localMemoryPerThread,localMemoryTotal,gridId,sharedMemoryExecuted,graphNodeId,"
		"graphId,runId",
	[KP_T_RUNTIME] = "start,end,eventClass,globalTid,correlationId,nameId,returnValue,runId",
	[KP_T_MEMCPY] = "start,end,deviceId,contextId,streamId,correlationId,globalPid,bytes,"
		"copyKind,srcKind,dstKind,srcDeviceId,dstDeviceId,graphNodeId,runId",
	[KP_T_MEMSET] = "start,end,deviceId,contextId,streamId,correlationId,globalPid,value,"
		"bytes,graphNodeId,memKind,runId",
	[KP_T_SYNC] = "start,end,deviceId,contextId,streamId,correlationId,globalPid,syncType,"
		"eventId,runId",
	[KP_T_NVTX] = "start,end,eventType,rangeId,category,color,text,globalTid,endGlobalTid,"
		"textId,domainId,runId",
	[KP_T_OVERHEAD] = "start,end,globalTid,nameId,runId",
	[KP_T_GPU] = "id,name,busLocation,totalMemory,smCount,computeMajor,computeMinor,"
		"clockRate,memoryBandwidth,l2CacheSize,maxThreadsPerBlock,maxRegistersPerSm,"
		"maxShmemPerBlock,maxShmemPerSm,threadsPerWarp,uuid,runId",
	[KP_T_LAUNCH_ATTRS] = "correlationId,pdl,runId",
	[KP_T_COLL] = "streamId,start,name,dtype,in_nelems,out_nelems,bytes,pg_name,pg_desc,"
		"group_size,group_ranks,seq,runId",
	[KP_T_CPU_OP_ARGS] = "globalTid,start,dims,types,strides,concrete,runId",
};

const char *kp_table_name(int table)
{
	return table >= 0 && table < KP_T__N ? table_names[table] : NULL;
}

void kp_writer_init(struct kp_writer *w, struct kp_db *db, int64_t run_id)
{
	memset(w, 0, sizeof(*w));
	w->db = db;
	w->run_id = run_id;
	kp_strmap_init(&w->kernel_names);
}

void kp_writer_release(struct kp_writer *w)
{
	int i;

	for (i = 0; i < KP_T__N; i++)
		sqlite3_finalize(w->st[i]);
	memset(w->st, 0, sizeof(w->st));
	kp_strmap_release(&w->kernel_names);
	kp_vec_release(&w->kernel_ids);
}

/* The prepared INSERT for table t, prepared on first use. */
static sqlite3_stmt *stmt(struct kp_writer *w, int t, struct kp_err *err)
{
	char sql[1024], *p;
	const char *c;
	int n;

	if (w->st[t])
		return w->st[t];
	/* a launch's attributes (a collective's, a CPU op's inputs) are one
	 * row per launch (kernel, op), whoever saw it first */
	n = snprintf(sql, sizeof(sql), "INSERT %sINTO %s(%s) VALUES (?",
		     t == KP_T_LAUNCH_ATTRS || t == KP_T_COLL || t == KP_T_CPU_OP_ARGS ?
		     "OR IGNORE " : "", table_names[t], table_cols[t]);
	p = sql + n;
	for (c = table_cols[t]; *c; c++) {
		if (*c == ',') {
			*p++ = ',';
			*p++ = '?';
		}
	}
	strcpy(p, ")");
	if (kp_db_prepare(w->db, sql, &w->st[t], err))
		return NULL;
	return w->st[t];
}

static int step(struct kp_writer *w, int t, sqlite3_stmt *st, int ncols, struct kp_err *err)
{
	int rc;

	sqlite3_bind_int64(st, ncols, w->run_id);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return kp_db_error(w->db, err, table_names[t]);
	w->rows[t]++;
	return 0;
}

/* Bind helpers: value 0 means "unknown" for optional ids -> NULL. */
static void bind_opt(sqlite3_stmt *st, int i, int64_t v)
{
	if (v)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

/*
 * The seven leading columns every GPU-work table shares (start, end,
 * deviceId, contextId, streamId, correlationId, globalPid); returns the
 * next parameter index.
 */
static int bind_gpu_op(sqlite3_stmt *st, const struct kp_gpu_op *op)
{
	sqlite3_bind_int64(st, 1, op->start);
	sqlite3_bind_int64(st, 2, op->end);
	sqlite3_bind_int64(st, 3, op->device_id);
	sqlite3_bind_int64(st, 4, op->context_id);
	sqlite3_bind_int64(st, 5, op->stream_id);
	sqlite3_bind_int64(st, 6, op->correlation_id);
	sqlite3_bind_int64(st, 7, op->global_pid);
	return 8;
}

int kp_writer_kernel(struct kp_writer *w, const struct kp_kernel_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_KERNEL, err);
	const char *name = r->name ? r->name : "";
	int64_t name_id, short_id, mangled_id = 0, idx;
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	if (!r->short_name && kp_strmap_get(&w->kernel_names, name, &idx)) {
		name_id = w->kernel_ids.data[idx].name_id;
		short_id = w->kernel_ids.data[idx].short_id;
	} else {
		char shortbuf[256];
		struct kp_writer_name_ids ids;

		name_id = kp_db_intern(w->db, name, err);
		if (name_id < 0)
			return (int)name_id;
		short_id = kp_db_intern(w->db, r->short_name ? r->short_name :
					kp_kernel_short_name(name, shortbuf, sizeof(shortbuf)),
					err);
		if (short_id < 0)
			return (int)short_id;
		ids.name_id = name_id;
		ids.short_id = short_id;
		if (!r->short_name && kp_vec_push(&w->kernel_ids, ids) == 0 &&
		    kp_strmap_put(&w->kernel_names, name, (int64_t)w->kernel_ids.len - 1))
			return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	if (r->mangled && (mangled_id = kp_db_intern(w->db, r->mangled, err)) < 0)
		return (int)mangled_id;
	i = bind_gpu_op(st, &r->op);
	sqlite3_bind_int64(st, i++, name_id);
	sqlite3_bind_int64(st, i++, short_id);
	bind_opt(st, i++, mangled_id);
	sqlite3_bind_int(st, i++, r->launch_type);
	sqlite3_bind_int(st, i++, r->cache_config);
	sqlite3_bind_int(st, i++, r->registers);
	sqlite3_bind_int(st, i++, r->grid[0]);
	sqlite3_bind_int(st, i++, r->grid[1]);
	sqlite3_bind_int(st, i++, r->grid[2]);
	sqlite3_bind_int(st, i++, r->block[0]);
	sqlite3_bind_int(st, i++, r->block[1]);
	sqlite3_bind_int(st, i++, r->block[2]);
	sqlite3_bind_int(st, i++, r->static_smem);
	sqlite3_bind_int(st, i++, r->dynamic_smem);
	sqlite3_bind_int(st, i++, r->local_mem_per_thread);
	sqlite3_bind_int64(st, i++, r->local_mem_total);
	sqlite3_bind_int64(st, i++, r->grid_id);
	sqlite3_bind_int(st, i++, r->shared_mem_executed);
	bind_opt(st, i++, (int64_t)r->graph_node_id);
	bind_opt(st, i++, r->graph_id);
	return step(w, KP_T_KERNEL, st, i, err);
}

int kp_writer_api(struct kp_writer *w, const struct kp_api_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_RUNTIME, err);
	int64_t name_id;
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	name_id = kp_db_intern(w->db, r->name, err);
	if (name_id < 0)
		return (int)name_id;
	sqlite3_bind_int64(st, i++, r->start);
	sqlite3_bind_int64(st, i++, r->end);
	sqlite3_bind_int(st, i++, r->event_class);
	sqlite3_bind_int64(st, i++, r->global_tid);
	sqlite3_bind_int64(st, i++, r->correlation_id);
	sqlite3_bind_int64(st, i++, name_id);
	sqlite3_bind_int(st, i++, r->return_value);
	return step(w, KP_T_RUNTIME, st, i, err);
}

int kp_writer_memcpy(struct kp_writer *w, const struct kp_memcpy_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_MEMCPY, err);
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	i = bind_gpu_op(st, &r->op);
	sqlite3_bind_int64(st, i++, r->bytes);
	sqlite3_bind_int(st, i++, r->copy_kind);
	sqlite3_bind_int(st, i++, r->src_kind);
	sqlite3_bind_int(st, i++, r->dst_kind);
	sqlite3_bind_int(st, i++, r->src_device);
	sqlite3_bind_int(st, i++, r->dst_device);
	bind_opt(st, i++, (int64_t)r->graph_node_id);
	return step(w, KP_T_MEMCPY, st, i, err);
}

int kp_writer_memset(struct kp_writer *w, const struct kp_memset_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_MEMSET, err);
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	i = bind_gpu_op(st, &r->op);
	sqlite3_bind_int(st, i++, r->value);
	sqlite3_bind_int64(st, i++, r->bytes);
	bind_opt(st, i++, (int64_t)r->graph_node_id);
	sqlite3_bind_int(st, i++, r->mem_kind);
	return step(w, KP_T_MEMSET, st, i, err);
}

int kp_writer_sync(struct kp_writer *w, const struct kp_sync_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_SYNC, err);
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	i = bind_gpu_op(st, &r->op);
	sqlite3_bind_int(st, i++, r->sync_type);
	sqlite3_bind_int64(st, i++, r->event_id);
	return step(w, KP_T_SYNC, st, i, err);
}

int kp_writer_nvtx(struct kp_writer *w, const struct kp_nvtx_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_NVTX, err);
	int64_t text_id = 0;
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	if (r->text && (text_id = kp_db_intern(w->db, r->text, err)) < 0)
		return (int)text_id;
	sqlite3_bind_int64(st, i++, r->start);
	if (r->end >= 0)
		sqlite3_bind_int64(st, i++, r->end);
	else
		sqlite3_bind_null(st, i++);
	sqlite3_bind_int(st, i++, r->event_type);
	bind_opt(st, i++, r->range_id);
	sqlite3_bind_int(st, i++, r->category);
	sqlite3_bind_int64(st, i++, r->color);
	sqlite3_bind_text(st, i++, r->text, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, i++, r->global_tid);
	bind_opt(st, i++, r->end_global_tid);
	bind_opt(st, i++, text_id);
	sqlite3_bind_int64(st, i++, r->domain_id);
	return step(w, KP_T_NVTX, st, i, err);
}

int kp_writer_overhead(struct kp_writer *w, const struct kp_overhead_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_OVERHEAD, err);
	int64_t name_id = 0;
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	if (r->name && (name_id = kp_db_intern(w->db, r->name, err)) < 0)
		return (int)name_id;
	sqlite3_bind_int64(st, i++, r->start);
	sqlite3_bind_int64(st, i++, r->end);
	sqlite3_bind_int64(st, i++, r->global_tid);
	bind_opt(st, i++, name_id);
	return step(w, KP_T_OVERHEAD, st, i, err);
}

int kp_writer_gpu(struct kp_writer *w, const struct kp_gpu_rec *r, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_GPU, err);
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	sqlite3_bind_int(st, i++, r->id);
	sqlite3_bind_text(st, i++, r->name ? r->name : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, i++, r->bus_location, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, i++, r->total_memory);
	sqlite3_bind_int(st, i++, r->sm_count);
	sqlite3_bind_int(st, i++, r->compute_major);
	sqlite3_bind_int(st, i++, r->compute_minor);
	sqlite3_bind_int(st, i++, r->clock_rate);
	sqlite3_bind_int64(st, i++, r->memory_bandwidth);
	sqlite3_bind_int64(st, i++, r->l2_cache_size);
	sqlite3_bind_int(st, i++, r->max_threads_per_block);
	sqlite3_bind_int(st, i++, r->max_registers_per_sm);
	sqlite3_bind_int(st, i++, r->max_shmem_per_block);
	sqlite3_bind_int(st, i++, r->max_shmem_per_sm);
	sqlite3_bind_int(st, i++, r->threads_per_warp);
	sqlite3_bind_text(st, i++, r->uuid, -1, SQLITE_STATIC);
	return step(w, KP_T_GPU, st, i, err);
}

int kp_writer_pdl(struct kp_writer *w, int64_t corr, struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_LAUNCH_ATTRS, err);

	if (!st)
		return err ? err->code : KP_EDB;
	sqlite3_bind_int64(st, 1, corr);
	sqlite3_bind_int(st, 2, 1);
	return step(w, KP_T_LAUNCH_ATTRS, st, 3, err);
}

static void bind_text_opt(sqlite3_stmt *st, int i, const char *s)
{
	if (s && *s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static void bind_count(sqlite3_stmt *st, int i, int64_t v)
{
	if (v >= 0)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int kp_writer_collective(struct kp_writer *w, const struct kp_collective_rec *r,
			 struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_COLL, err);
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	sqlite3_bind_int64(st, i++, r->stream_id);
	sqlite3_bind_int64(st, i++, r->start);
	bind_text_opt(st, i++, r->name);
	bind_text_opt(st, i++, r->dtype);
	bind_count(st, i++, r->in_nelems);
	bind_count(st, i++, r->out_nelems);
	bind_count(st, i++, r->bytes);
	bind_text_opt(st, i++, r->pg_name);
	bind_text_opt(st, i++, r->pg_desc);
	bind_count(st, i++, r->group_size);
	bind_text_opt(st, i++, r->group_ranks);
	bind_count(st, i++, r->seq);
	return step(w, KP_T_COLL, st, i, err);
}

int kp_writer_cpu_op_args(struct kp_writer *w, const struct kp_cpu_op_args_rec *r,
			  struct kp_err *err)
{
	sqlite3_stmt *st = stmt(w, KP_T_CPU_OP_ARGS, err);
	int i = 1;

	if (!st)
		return err ? err->code : KP_EDB;
	sqlite3_bind_int64(st, i++, r->global_tid);
	sqlite3_bind_int64(st, i++, r->start);
	bind_text_opt(st, i++, r->dims);
	bind_text_opt(st, i++, r->types);
	bind_text_opt(st, i++, r->strides);
	bind_text_opt(st, i++, r->concrete);
	return step(w, KP_T_CPU_OP_ARGS, st, i, err);
}
