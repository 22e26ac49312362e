/* chrome_export.c - see chrome_export.h. */
#include "chrome_export.h"

#include <inttypes.h>
#include <string.h>

#include "../db/read.h"
#include "../db/writer.h"
#include "import.h"
#include "kineto.h"

struct out {
	struct kp_db *db;
	FILE *f;
	int64_t run;
	int64_t n;           /* events written */
	struct kp_err *err;
};

static void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	for (; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

/* nanoseconds as microseconds with the fraction kept */
static void us(FILE *f, int64_t ns)
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;

	fprintf(f, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", a / 1000, a % 1000);
}

/* ,\n{"ph":"X","cat":..,"name":..,"pid":..,"tid":..,"ts":..,"dur":.. (object left open) */
static void ev_begin(struct out *o, char ph, const char *cat, const char *name,
		     int64_t pid, int64_t tid, int64_t start, int64_t end)
{
	FILE *f = o->f;

	fputs(o->n++ ? ",\n" : "\n", f);
	fprintf(f, "{\"ph\":\"%c\",\"cat\":", ph);
	json_str(f, cat);
	fputs(",\"name\":", f);
	json_str(f, name);
	fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
	us(f, start);
	if (ph == 'X') {
		fputs(",\"dur\":", f);
		us(f, end - start);
	}
}

static void flow(struct out *o, char ph, int64_t id, int64_t pid, int64_t tid, int64_t ts)
{
	fputs(",\n", o->f);
	o->n++;
	fprintf(o->f, "{\"ph\":\"%c\",\"id\":%" PRId64 ",\"pid\":%" PRId64 ",\"tid\":%" PRId64
		",\"ts\":", ph, id, pid, tid);
	us(o->f, ts);
	fprintf(o->f, ",\"cat\":\"" KP_CAT_FLOW "\",\"name\":\"" KP_CAT_FLOW "\"%s}",
		ph == 'f' ? ",\"bp\":\"e\"" : "");
}

static void meta(struct out *o, const char *what, int64_t pid, int64_t tid, const char *name)
{
	fputs(o->n++ ? ",\n" : "\n", o->f);
	fprintf(o->f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%" PRId64
		",\"args\":{\"name\":", what, pid, tid);
	json_str(o->f, name);
	fputs("}}", o->f);
}

/*
 * Every table is read through db/read.h's iterators, so this file holds no
 * SQL: FOR_ROWS opens one for the run, runs the body once per row (into
 * row) and closes it; afterwards rc is 0, or < 0 with o->err filled. The
 * outer for runs once (once_ is cleared after the close).
 */
#define FOR_ROWS(open, next, row) \
	for (struct kp_db_rows *it_ = NULL, **once_ = &it_; \
	     once_ && !(rc = open(o->db, o->run, &it_, o->err)); \
	     kp_db_rows_close(it_), once_ = NULL) \
		while ((rc = next(it_, &(row), o->err)) > 0)

/* launch -> GPU work arrow: 's' at the API call, 'f' at the GPU op */
static void gpu_flow(struct out *o, const struct kp_db_op *op, const struct kp_db_launch *l)
{
	if (!op->correlation || !l->found)
		return;
	flow(o, 's', op->correlation, KP_GTID_PID(l->gtid), KP_GTID_TID(l->gtid), l->start);
	flow(o, 'f', op->correlation, op->device, op->stream, op->start);
}

/* ,"args":{"device":..,"context":..,"stream":..,"correlation":.. (object left open) */
static void op_args(struct out *o, const struct kp_db_op *op)
{
	fprintf(o->f, ",\"args\":{\"device\":%" PRId64 ",\"context\":%" PRId64 ",\"stream\":%"
		PRId64 ",\"correlation\":%" PRId64, op->device, op->context, op->stream,
		op->correlation);
}

/* A collective kernel's metadata (kp_collectives), as Kineto writes it on
 * the kernel: name, dtype, in, out, group size, process group name,
 * description, ranks, seq; the fields the trace did not say are left out. */
static void collective_args(FILE *f, const struct kp_db_kernel *k)
{
	for (int i = 0; i < KP_DB_COLL__N; i++) {
		const struct kp_db_value *v = &k->coll[i];

		if (!v->type)
			continue;
		fprintf(f, ",\"%s\":", kp_db_coll_keys[i]);
		if (v->type == 1)
			fprintf(f, "%" PRId64, v->i);
		else
			json_str(f, v->t ? v->t : "");
	}
}

static int kernels(struct out *o)
{
	static const char *const opt[] = {
		"launch type", "cache config", "local memory per thread",
		"local memory total", "grid id", "graph node id", "graph id",
	};
	struct kp_db_kernel k;
	int rc;

	FOR_ROWS(kp_db_kernels, kp_db_kernel_next, k) {
		FILE *f = o->f;
		const int64_t optv[] = {
			k.launch_type, k.cache_config, k.local_mem_per_thread,
			k.local_mem_total, k.grid_id, k.graph_node_id, k.graph_id,
		};

		ev_begin(o, 'X', KP_CAT_KERNEL, k.name, k.op.device, k.op.stream, k.op.start,
			 k.op.end);
		op_args(o, &k.op);
		fprintf(f, ",\"registers per thread\":%" PRId64 ",\"shared memory\":%" PRId64
			",\"static shared memory\":%" PRId64 ",\"dynamic shared memory\":%" PRId64
			",\"grid\":[%" PRId64 ",%" PRId64 ",%" PRId64 "],\"block\":[%" PRId64
			",%" PRId64 ",%" PRId64 "]", k.registers_per_thread,
			k.static_smem + k.dynamic_smem, k.static_smem, k.dynamic_smem,
			k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2]);
		for (int i = 0; i < 7; i++) {
			if (optv[i])
				fprintf(f, ",\"%s\":%" PRId64, opt[i], optv[i]);
		}
		/* kplan's own key (Kineto has none): the launch used programmatic
		 * dependent launch; kplan import reads it back into kp_launch_attrs */
		if (k.pdl)
			fputs(",\"kplan pdl\":1", f);
		collective_args(f, &k);
		fputs("}}", f);
		gpu_flow(o, &k.op, &k.launch);
	}
	return rc;
}

static int copies(struct out *o)
{
	struct kp_db_memcpy c;
	struct kp_db_memset m;
	struct kp_db_sync y;
	char name[128];
	int rc;

	FOR_ROWS(kp_db_memcpys, kp_db_memcpy_next, c) {
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)",
			 kp__memcpy_kind_name((int)c.copy_kind), kp__memory_kind_name((int)c.src_kind),
			 kp__memory_kind_name((int)c.dst_kind));
		ev_begin(o, 'X', KP_CAT_MEMCPY, name, c.op.device, c.op.stream, c.op.start, c.op.end);
		op_args(o, &c.op);
		fprintf(o->f, ",\"bytes\":%" PRId64 "}}", c.bytes);
		gpu_flow(o, &c.op, &c.launch);
	}
	if (rc)
		return rc;
	FOR_ROWS(kp_db_memsets, kp_db_memset_next, m) {
		snprintf(name, sizeof(name), "Memset (%s)", kp__memory_kind_name((int)m.mem_kind));
		ev_begin(o, 'X', KP_CAT_MEMSET, name, m.op.device, m.op.stream, m.op.start, m.op.end);
		op_args(o, &m.op);
		fprintf(o->f, ",\"bytes\":%" PRId64, m.bytes);
		if (m.value)
			fprintf(o->f, ",\"value\":%" PRId64, m.value);
		fputs("}}", o->f);
		gpu_flow(o, &m.op, &m.launch);
	}
	if (rc)
		return rc;
	FOR_ROWS(kp_db_syncs, kp_db_sync_next, y) {
		ev_begin(o, 'X', KP_CAT_SYNC, kp__sync_name((int)y.sync_type), y.op.device,
			 y.op.stream, y.op.start, y.op.end);
		op_args(o, &y.op);
		fprintf(o->f, ",\"sync type\":%" PRId64, y.sync_type);
		if (y.event_id)
			fprintf(o->f, ",\"event id\":%" PRId64, y.event_id);
		fputs("}}", o->f);
	}
	return rc;
}

static int api_calls(struct out *o)
{
	struct kp_db_api_call c;
	int rc;

	FOR_ROWS(kp_db_api_calls, kp_db_api_call_next, c) {
		ev_begin(o, 'X', c.event_class == KP_API_DRIVER ? KP_CAT_DRIVER : KP_CAT_RUNTIME,
			 c.name, KP_GTID_PID(c.gtid), KP_GTID_TID(c.gtid), c.start, c.end);
		fprintf(o->f, ",\"args\":{\"correlation\":%" PRId64, c.correlation);
		if (c.return_value)
			fprintf(o->f, ",\"return value\":%" PRId64, c.return_value);
		fputs("}}", o->f);
	}
	return rc;
}

static int nvtx(struct out *o)
{
	struct kp_db_nvtx e;
	int rc;

	FOR_ROWS(kp_db_nvtx, kp_db_nvtx_next, e) {
		const char *dom = e.domain;
		int cpu = dom && !strcmp(dom, KP_IMPORT_CPU_OP_DOMAIN);
		int py = dom && !strcmp(dom, KP_IMPORT_PYTHON_DOMAIN);
		int rt = dom && !strcmp(dom, KP_IMPORT_KPLAN_DOMAIN);
		/* a GPU-side projection has no domain; libkplanrt's ranges have
		 * category 1 or 2 in its own domain */
		const char *cat = e.category == KP_NVTX_CAT_GPU && !e.domain_id ? KP_CAT_GPU_ANNOT :
				  cpu ? KP_CAT_CPU_OP : py ? KP_CAT_PYFUNC : KP_CAT_ANNOT;

		ev_begin(o, e.is_mark ? 'i' : 'X', cat, e.text, KP_GTID_PID(e.gtid),
			 KP_GTID_TID(e.gtid), e.start, e.is_mark ? e.start : e.end);
		if (e.is_mark)
			fputs(",\"s\":\"t\"", o->f);
		if (rt) {
			/* kplan import reads it back into the runtime's domain */
			fprintf(o->f, ",\"args\":{\"domain\":\"" KP_IMPORT_KPLAN_DOMAIN "\","
				"\"kplan region\":%" PRId64 "}", e.category > 0 ? e.category : 1);
		} else if (dom && !cpu && !py) {
			fputs(",\"args\":{\"domain\":", o->f);
			json_str(o->f, dom);
			fputc('}', o->f);
		}
		fputc('}', o->f);
	}
	return rc;
}

static int overhead(struct out *o)
{
	struct kp_db_overhead v;
	int rc;

	FOR_ROWS(kp_db_overheads, kp_db_overhead_next, v) {
		ev_begin(o, 'X', KP_CAT_OVERHEAD, v.name ? v.name : "overhead", KP_GTID_PID(v.gtid),
			 KP_GTID_TID(v.gtid), v.start, v.end);
		fputc('}', o->f);
	}
	return rc;
}

static int analysis(struct out *o, struct kp_chrome_export_stats *stats)
{
	struct kp_db_region_occ r;
	struct kp_db_host_gap g;
	int64_t last_dev = -1, last_stream = -1;
	int rc, named = 0;
	char tname[160];

	/* region occurrences: one thread per region */
	FOR_ROWS(kp_db_region_occs, kp_db_region_occ_next, r) {
		int64_t tid = r.region_id + 1;

		if (!named++)
			meta(o, "process_name", KP_EXPORT_ANALYSIS_PID, 0, "kplan analysis");
		if (r.occ_index == 0) {
			snprintf(tname, sizeof(tname), "region %" PRId64 ": %s", r.region_id,
				 r.label ? r.label : "");
			meta(o, "thread_name", KP_EXPORT_ANALYSIS_PID, tid, tname);
		}
		ev_begin(o, 'X', KP_CAT_REGION, r.label, KP_EXPORT_ANALYSIS_PID, tid, r.start, r.end);
		fprintf(o->f, ",\"args\":{\"region\":%" PRId64 ",\"occurrence\":%" PRId64
			",\"kernels\":%" PRId64 ",\"source\":", r.region_id, r.occ_index, r.kernels);
		json_str(o->f, r.source);
		fprintf(o->f, ",\"capturable\":%d}}", r.capturable);
		if (stats)
			stats->regions++;
	}
	if (rc)
		return rc;

	/* host-bound gaps: one thread per device and stream */
	FOR_ROWS(kp_db_host_gaps, kp_db_host_gap_next, g) {
		int64_t tid = 1000000 + g.device * 100000 + g.stream;

		if (!named++)
			meta(o, "process_name", KP_EXPORT_ANALYSIS_PID, 0, "kplan analysis");
		if (g.device != last_dev || g.stream != last_stream) {
			snprintf(tname, sizeof(tname), "host-bound gaps, device %" PRId64 " stream %"
				 PRId64, g.device, g.stream);
			meta(o, "thread_name", KP_EXPORT_ANALYSIS_PID, tid, tname);
			last_dev = g.device;
			last_stream = g.stream;
		}
		ev_begin(o, 'X', KP_CAT_GAP, "host-bound gap", KP_EXPORT_ANALYSIS_PID, tid,
			 g.kernel_start - g.gap_ns, g.kernel_start);
		fprintf(o->f, ",\"args\":{\"device\":%" PRId64 ",\"stream\":%" PRId64
			",\"correlation\":%" PRId64 ",\"queue ns\":%" PRId64
			",\"launch api ns\":%" PRId64 "}}", g.device, g.stream, g.correlation,
			g.queue_ns, g.launch_api_ns);
		if (stats)
			stats->gaps++;
	}
	return rc;
}

static int names(struct out *o)
{
	struct kp_db_stream s;
	char name[64];
	int rc;
	int64_t last_dev = -1;

	FOR_ROWS(kp_db_streams, kp_db_stream_next, s) {
		if (s.device != last_dev) {
			snprintf(name, sizeof(name), "GPU %" PRId64, s.device);
			meta(o, "process_name", s.device, 0, name);
			last_dev = s.device;
		}
		snprintf(name, sizeof(name), "stream %" PRId64, s.stream);
		meta(o, "thread_name", s.device, s.stream, name);
	}
	return rc;
}

/* A rank's place in its job and its clock base, as Kineto writes them. */
static void rank_info(struct out *o, const struct kp_db_run *r)
{
	if (r->has_rank) {
		fprintf(o->f, "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %" PRId64,
			r->rank);
		if (r->has_world_size)
			fprintf(o->f, ", \"world_size\": %" PRId64, r->world_size);
		fputs("},\n", o->f);
	}
	if (r->has_clock_base)
		fprintf(o->f, "\"baseTimeNanoseconds\": %" PRId64 ",\n", r->clock_base_ns);
}

static int header(struct out *o)
{
	struct kp_db_rows *it;
	struct kp_db_run r;
	struct kp_db_gpu g;
	FILE *f = o->f;
	int rc, n = 0;

	if ((rc = kp_db_runs(o->db, o->run, &it, o->err)))
		return rc;
	if ((rc = kp_db_run_next(it, &r, o->err)) <= 0) {
		kp_db_rows_close(it);
		return rc < 0 ? rc : kp_err_set(o->err, KP_ENOTFOUND, "%s: no run %lld", o->db->path,
						(long long)o->run);
	}
	fputs("{\n\"schemaVersion\": 1,\n\"traceName\": ", f);
	json_str(f, r.source_path ? r.source_path : r.source);
	fprintf(f, ",\n\"kplanRun\": %lld,\n\"cuda_driver_version\": %" PRId64 ","
		"\n\"cuda_runtime_version\": %" PRId64 ",\n\"cupti_version\": %" PRId64 ",\n",
		(long long)o->run, r.driver_version, r.runtime_version, r.cupti_version);
	rank_info(o, &r);
	kp_db_rows_close(it);

	fputs("\"deviceProperties\": [", f);
	FOR_ROWS(kp_db_gpus, kp_db_gpu_next, g) {
		fputs(n++ ? ",\n  {" : "\n  {", f);
		fprintf(f, "\"id\": %" PRId64 ", \"name\": ", g.id);
		json_str(f, g.name);
		fprintf(f, ", \"totalGlobalMem\": %" PRId64 ", \"computeMajor\": %" PRId64
			", \"computeMinor\": %" PRId64 ", \"maxThreadsPerBlock\": %" PRId64
			", \"regsPerMultiprocessor\": %" PRId64 ", \"sharedMemPerBlock\": %" PRId64
			", \"sharedMemPerMultiprocessor\": %" PRId64 ", \"warpSize\": %" PRId64
			", \"numSms\": %" PRId64, g.total_memory, g.compute_major, g.compute_minor,
			g.max_threads_per_block, g.max_registers_per_sm, g.max_shmem_per_block,
			g.max_shmem_per_sm, g.threads_per_warp, g.sm_count);
		if (g.clock_rate)
			fprintf(f, ", \"clockRate\": %" PRId64, g.clock_rate);
		if (g.l2_cache_size)
			fprintf(f, ", \"l2CacheSize\": %" PRId64, g.l2_cache_size);
		if (g.memory_bandwidth)
			fprintf(f, ", \"memoryBandwidth\": %" PRId64, g.memory_bandwidth);
		fputc('}', f);
	}
	if (rc)
		return rc;
	fputs("\n],\n\"displayTimeUnit\": \"ms\",\n\"traceEvents\": [", f);
	return 0;
}

int kp_export_chrome(struct kp_db *db, int64_t run_id, FILE *f,
		     struct kp_chrome_export_stats *stats, struct kp_err *err)
{
	struct out o = { db, f, run_id ? run_id : kp_db_default_run(db), 0, err };
	int rc;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (!o.run)
		return kp_err_set(err, KP_ENOTFOUND, "%s: the database holds no runs", db->path);
	if (stats)
		stats->run_id = o.run;
	rc = header(&o);
	if (!rc)
		rc = names(&o);
	if (!rc)
		rc = api_calls(&o);
	if (!rc)
		rc = nvtx(&o);
	if (!rc)
		rc = kernels(&o);
	if (!rc)
		rc = copies(&o);
	if (!rc)
		rc = overhead(&o);
	if (!rc)
		rc = analysis(&o, stats);
	if (rc)
		return err && err->code ? err->code : KP_EDB;
	fputs("\n]\n}\n", f);
	if (stats)
		stats->events = o.n;
	if (ferror(f))
		return kp_err_set(err, KP_EIO, "write error while writing the chrome trace");
	return 0;
}
