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

static int prep(struct out *o, const char *sql, sqlite3_stmt **st)
{
	return kp_db_prepare_run(o->db, sql, o->run, st, o->err) ? -1 : 0;
}

static int done(struct out *o, sqlite3_stmt *st, int rc, const char *what)
{
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return kp_db_error(o->db, o->err, what);
	return 0;
}

#define I(i) sqlite3_column_int64(st, (i))
#define T(i) ((const char *)sqlite3_column_text(st, (i)))

/* launch -> GPU work arrow: 's' at the API call, 'f' at the GPU op */
static void gpu_flow(struct out *o, sqlite3_stmt *st, int col, int64_t corr, int64_t dev,
		     int64_t stream, int64_t start)
{
	int64_t gtid;

	if (!corr || sqlite3_column_type(st, col) == SQLITE_NULL)
		return;
	gtid = I(col + 1);
	flow(o, 's', corr, KP_GTID_PID(gtid), KP_GTID_TID(gtid), I(col));
	flow(o, 'f', corr, dev, stream, start);
}

/* the same for a kernel of the read API */
static void kernel_flow(struct out *o, const struct kp_db_kernel *k)
{
	if (!k->correlation || !k->has_launch)
		return;
	flow(o, 's', k->correlation, KP_GTID_PID(k->launch_gtid), KP_GTID_TID(k->launch_gtid),
	     k->launch_start);
	flow(o, 'f', k->correlation, k->device, k->stream, k->start);
}

#define LAUNCH_COLS \
	", (SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = x.runId" \
	"   AND r.correlationId = x.correlationId LIMIT 1)" \
	", (SELECT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.runId = x.runId" \
	"   AND r.correlationId = x.correlationId LIMIT 1)"

static int kernels(struct out *o)
{
	struct kp_db_rows *it;
	struct kp_db_kernel k;
	int rc;

	if ((rc = kp_db_kernels(o->db, o->run, &it, o->err)))
		return rc;
	while ((rc = kp_db_kernel_next(it, &k, o->err)) > 0) {
		FILE *f = o->f;
		static const char *const opt[] = {
			"launch type", "cache config", "local memory per thread",
			"local memory total", "grid id", "graph node id", "graph id",
		};
		const int64_t optv[] = {
			k.launch_type, k.cache_config, k.local_mem_per_thread,
			k.local_mem_total, k.grid_id, k.graph_node_id, k.graph_id,
		};
		int i;

		ev_begin(o, 'X', KP_CAT_KERNEL, k.name, k.device, k.stream, k.start, k.end);
		fprintf(f, ",\"args\":{\"device\":%" PRId64 ",\"context\":%" PRId64
			",\"stream\":%" PRId64 ",\"correlation\":%" PRId64
			",\"registers per thread\":%" PRId64 ",\"shared memory\":%" PRId64
			",\"static shared memory\":%" PRId64 ",\"dynamic shared memory\":%" PRId64
			",\"grid\":[%" PRId64 ",%" PRId64 ",%" PRId64 "],\"block\":[%" PRId64
			",%" PRId64 ",%" PRId64 "]",
			k.device, k.context, k.stream, k.correlation, k.registers_per_thread,
			k.static_smem + k.dynamic_smem, k.static_smem, k.dynamic_smem,
			k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2]);
		for (i = 0; i < 7; i++) {
			if (optv[i])
				fprintf(f, ",\"%s\":%" PRId64, opt[i], optv[i]);
		}
		/* kplan's own key (Kineto has none): the launch used programmatic
		 * dependent launch; kplan import reads it back into kp_launch_attrs */
		if (k.pdl)
			fputs(",\"kplan pdl\":1", f);
		fputs("}}", f);
		kernel_flow(o, &k);
	}
	kp_db_rows_close(it);
	return rc;
}

static int copies(struct out *o)
{
	sqlite3_stmt *st;
	char name[128];
	int rc;

	if (prep(o, "SELECT x.start, x.end, x.deviceId, x.contextId, x.streamId, x.correlationId,"
		 " x.bytes, x.copyKind, x.srcKind, x.dstKind" LAUNCH_COLS
		 " FROM CUPTI_ACTIVITY_KIND_MEMCPY x WHERE x.runId = ? ORDER BY x.start", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", kp__memcpy_kind_name((int)I(7)),
			 kp__memory_kind_name((int)I(8)), kp__memory_kind_name((int)I(9)));
		ev_begin(o, 'X', KP_CAT_MEMCPY, name, I(2), I(4), I(0), I(1));
		fprintf(o->f, ",\"args\":{\"device\":%lld,\"context\":%lld,\"stream\":%lld,"
			"\"correlation\":%lld,\"bytes\":%lld}}", I(2), I(3), I(4), I(5), I(6));
		gpu_flow(o, st, 10, I(5), I(2), I(4), I(0));
	}
	rc = done(o, st, rc, "reading memcpys");
	if (rc)
		return rc;

	if (prep(o, "SELECT x.start, x.end, x.deviceId, x.contextId, x.streamId, x.correlationId,"
		 " x.bytes, x.value, x.memKind" LAUNCH_COLS
		 " FROM CUPTI_ACTIVITY_KIND_MEMSET x WHERE x.runId = ? ORDER BY x.start", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(name, sizeof(name), "Memset (%s)", kp__memory_kind_name((int)I(8)));
		ev_begin(o, 'X', KP_CAT_MEMSET, name, I(2), I(4), I(0), I(1));
		fprintf(o->f, ",\"args\":{\"device\":%lld,\"context\":%lld,\"stream\":%lld,"
			"\"correlation\":%lld,\"bytes\":%lld", I(2), I(3), I(4), I(5), I(6));
		if (I(7))
			fprintf(o->f, ",\"value\":%lld", I(7));
		fputs("}}", o->f);
		gpu_flow(o, st, 9, I(5), I(2), I(4), I(0));
	}
	rc = done(o, st, rc, "reading memsets");
	if (rc)
		return rc;

	if (prep(o, "SELECT x.start, x.end, x.deviceId, x.contextId, x.streamId, x.correlationId,"
		 " x.syncType, x.eventId"
		 " FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION x WHERE x.runId = ? ORDER BY x.start", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ev_begin(o, 'X', KP_CAT_SYNC, kp__sync_name((int)I(6)), I(2), I(4), I(0), I(1));
		fprintf(o->f, ",\"args\":{\"device\":%lld,\"context\":%lld,\"stream\":%lld,"
			"\"correlation\":%lld,\"sync type\":%lld", I(2), I(3), I(4), I(5), I(6));
		if (I(7))
			fprintf(o->f, ",\"event id\":%lld", I(7));
		fputs("}}", o->f);
	}
	return done(o, st, rc, "reading syncs");
}

static int api_calls(struct out *o)
{
	sqlite3_stmt *st;
	int rc;

	if (prep(o, "SELECT x.start, x.end, x.eventClass, x.globalTid, x.correlationId,"
		 " (SELECT value FROM StringIds WHERE id = x.nameId), x.returnValue"
		 " FROM CUPTI_ACTIVITY_KIND_RUNTIME x WHERE x.runId = ? ORDER BY x.start", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ev_begin(o, 'X', I(2) == KP_API_DRIVER ? KP_CAT_DRIVER : KP_CAT_RUNTIME, T(5),
			 KP_GTID_PID(I(3)), KP_GTID_TID(I(3)), I(0), I(1));
		fprintf(o->f, ",\"args\":{\"correlation\":%lld", I(4));
		if (I(6))
			fprintf(o->f, ",\"return value\":%lld", I(6));
		fputs("}}", o->f);
	}
	return done(o, st, rc, "reading api calls");
}

static int nvtx(struct out *o)
{
	sqlite3_stmt *st;
	int rc;

	/* a domain's name is in its create event (eventType 75): the collector's
	 * domain ids are its own, the importer's are StringIds ids */
	if (prep(o, "SELECT x.start, x.end, x.eventType, x.category, x.globalTid,"
		 " coalesce(x.text, (SELECT value FROM StringIds WHERE id = x.textId)), x.domainId,"
		 " (SELECT coalesce(d.text, s.value) FROM NVTX_EVENTS d"
		 "   LEFT JOIN StringIds s ON s.id = d.textId WHERE d.runId = x.runId"
		 "   AND d.eventType = 75 AND d.domainId = x.domainId LIMIT 1)"
		 " FROM NVTX_EVENTS x WHERE x.runId = ? AND x.eventType IN (34, 59, 60)"
		 " ORDER BY x.start", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int mark = sqlite3_column_type(st, 1) == SQLITE_NULL;
		const char *dom = I(6) ? T(7) : NULL;
		int cpu = dom && !strcmp(dom, KP_IMPORT_CPU_OP_DOMAIN);
		int py = dom && !strcmp(dom, KP_IMPORT_PYTHON_DOMAIN);
		int rt = dom && !strcmp(dom, KP_IMPORT_KPLAN_DOMAIN);
		/* a GPU-side projection has no domain; libkplanrt's ranges have
		 * category 1 or 2 in its own domain */
		const char *cat = I(3) == KP_NVTX_CAT_GPU && !I(6) ? KP_CAT_GPU_ANNOT :
				  cpu ? KP_CAT_CPU_OP : py ? KP_CAT_PYFUNC : KP_CAT_ANNOT;

		ev_begin(o, mark ? 'i' : 'X', cat, T(5), KP_GTID_PID(I(4)), KP_GTID_TID(I(4)),
			 I(0), mark ? I(0) : I(1));
		if (mark)
			fputs(",\"s\":\"t\"", o->f);
		if (rt) {
			/* kplan import reads it back into the runtime's domain */
			fprintf(o->f, ",\"args\":{\"domain\":\"" KP_IMPORT_KPLAN_DOMAIN "\","
				"\"kplan region\":%lld}", I(3) > 0 ? I(3) : 1);
		} else if (dom && !cpu && !py) {
			fputs(",\"args\":{\"domain\":", o->f);
			json_str(o->f, dom);
			fputc('}', o->f);
		}
		fputc('}', o->f);
	}
	return done(o, st, rc, "reading nvtx events");
}

static int overhead(struct out *o)
{
	sqlite3_stmt *st;
	int rc;

	if (prep(o, "SELECT x.start, x.end, x.globalTid, (SELECT value FROM StringIds WHERE id = x.nameId)"
		 " FROM PROFILER_OVERHEAD x WHERE x.runId = ? ORDER BY x.start", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ev_begin(o, 'X', KP_CAT_OVERHEAD, T(3) ? T(3) : "overhead", KP_GTID_PID(I(2)),
			 KP_GTID_TID(I(2)), I(0), I(1));
		fputc('}', o->f);
	}
	return done(o, st, rc, "reading overhead");
}

static int analysis(struct out *o, struct kp_chrome_export_stats *stats)
{
	sqlite3_stmt *st;
	int rc, named = 0;
	char tname[160];

	/* region occurrences: one thread per region */
	{
		struct kp_db_rows *it;
		struct kp_db_region_occ r;

		if ((rc = kp_db_region_occs(o->db, o->run, &it, o->err)))
			return rc;
		while ((rc = kp_db_region_occ_next(it, &r, o->err)) > 0) {
			int64_t tid = r.region_id + 1;

			if (!named++)
				meta(o, "process_name", KP_EXPORT_ANALYSIS_PID, 0, "kplan analysis");
			if (r.occ_index == 0) {
				snprintf(tname, sizeof(tname), "region %" PRId64 ": %s", r.region_id,
					 r.label ? r.label : "");
				meta(o, "thread_name", KP_EXPORT_ANALYSIS_PID, tid, tname);
			}
			ev_begin(o, 'X', KP_CAT_REGION, r.label, KP_EXPORT_ANALYSIS_PID, tid, r.start,
				 r.end);
			fprintf(o->f, ",\"args\":{\"region\":%" PRId64 ",\"occurrence\":%" PRId64
				",\"kernels\":%" PRId64 ",\"source\":", r.region_id, r.occ_index,
				r.kernels);
			json_str(o->f, r.source);
			fprintf(o->f, ",\"capturable\":%d}}", r.capturable);
			if (stats)
				stats->regions++;
		}
		kp_db_rows_close(it);
		if (rc)
			return rc;
	}

	/* host-bound gaps: one thread per device and stream */
	if (prep(o, "SELECT deviceId, streamId, correlationId, kernel_start, gap_ns, queue_ns,"
		 " launch_api_ns FROM kp_gaps WHERE runId = ? AND host_bound = 1 AND gap_ns > 0"
		 " ORDER BY deviceId, streamId, kernel_start", &st))
		return -1;
	{
		int64_t last_dev = -1, last_stream = -1;

		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t tid = 1000000 + I(0) * 100000 + I(1);

			if (!named++)
				meta(o, "process_name", KP_EXPORT_ANALYSIS_PID, 0, "kplan analysis");
			if (I(0) != last_dev || I(1) != last_stream) {
				snprintf(tname, sizeof(tname), "host-bound gaps, device %lld stream %lld",
					 I(0), I(1));
				meta(o, "thread_name", KP_EXPORT_ANALYSIS_PID, tid, tname);
				last_dev = I(0);
				last_stream = I(1);
			}
			ev_begin(o, 'X', KP_CAT_GAP, "host-bound gap", KP_EXPORT_ANALYSIS_PID, tid,
				 I(3) - I(4), I(3));
			fprintf(o->f, ",\"args\":{\"device\":%lld,\"stream\":%lld,\"correlation\":%lld,"
				"\"queue ns\":%lld,\"launch api ns\":%lld}}",
				I(0), I(1), I(2), I(5), I(6));
			if (stats)
				stats->gaps++;
		}
	}
	return done(o, st, rc, "reading gaps");
}

static int names(struct out *o)
{
	sqlite3_stmt *st;
	char name[64];
	int rc;
	int64_t last_dev = -1;

	if (prep(o, "SELECT DISTINCT deviceId, streamId FROM ("
		 " SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE runId = ?1"
		 " UNION SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE runId = ?1"
		 " UNION SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE runId = ?1)"
		 " ORDER BY 1, 2", &st))
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (I(0) != last_dev) {
			snprintf(name, sizeof(name), "GPU %lld", I(0));
			meta(o, "process_name", I(0), 0, name);
			last_dev = I(0);
		}
		snprintf(name, sizeof(name), "stream %lld", I(1));
		meta(o, "thread_name", I(0), I(1), name);
	}
	return done(o, st, rc, "reading streams");
}

static int header(struct out *o)
{
	struct kp_db_rows *it;
	struct kp_db_run r;
	sqlite3_stmt *st;
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
	kp_db_rows_close(it);

	if (prep(o, "SELECT id, name, totalMemory, computeMajor, computeMinor, maxThreadsPerBlock,"
		 " maxRegistersPerSm, maxShmemPerBlock, maxShmemPerSm, threadsPerWarp, smCount,"
		 " clockRate, l2CacheSize, memoryBandwidth"
		 " FROM TARGET_INFO_GPU WHERE runId = ? ORDER BY id", &st))
		return -1;
	fputs("\"deviceProperties\": [", f);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		fputs(n++ ? ",\n  {" : "\n  {", f);
		fprintf(f, "\"id\": %lld, \"name\": ", I(0));
		json_str(f, T(1));
		fprintf(f, ", \"totalGlobalMem\": %lld, \"computeMajor\": %lld, \"computeMinor\": %lld,"
			" \"maxThreadsPerBlock\": %lld, \"regsPerMultiprocessor\": %lld,"
			" \"sharedMemPerBlock\": %lld, \"sharedMemPerMultiprocessor\": %lld,"
			" \"warpSize\": %lld, \"numSms\": %lld",
			I(2), I(3), I(4), I(5), I(6), I(7), I(8), I(9), I(10));
		if (I(11))
			fprintf(f, ", \"clockRate\": %lld", I(11));
		if (I(12))
			fprintf(f, ", \"l2CacheSize\": %lld", I(12));
		if (I(13))
			fprintf(f, ", \"memoryBandwidth\": %lld", I(13));
		fputc('}', f);
	}
	fputs("\n],\n\"displayTimeUnit\": \"ms\",\n\"traceEvents\": [", f);
	return done(o, st, rc, "reading gpus");
}

int kp_export_chrome(struct kp_db *db, int64_t run_id, FILE *f,
		     struct kp_chrome_export_stats *stats, struct kp_err *err)
{
	struct out o = { db, f, run_id ? run_id : kp_db_last_run(db), 0, err };
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
