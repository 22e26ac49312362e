/*
 * nsys.c - reader of Nsight Systems SQLite exports (`nsys export --type sqlite`).
 *
 * The export is opened read-only with sqlite3 directly (kp_db_open refuses
 * nsys files on purpose). kplan's trace tables share nsys's names and
 * columns, so each table is read with one SELECT whose column list is built
 * from what the file actually has: nsys creates tables lazily (any may be
 * missing) and adds columns over releases. A missing required column is an
 * error naming the table and column; a missing optional one reads as a
 * default. Names (StringIds ids) are resolved to text in the SELECT and
 * interned again in kplan's StringIds by the writer.
 *
 * The export's schema version (META_DATA_EXPORT or, in older releases,
 * EXPORT_META_DATA: name EXPORT_SCHEMA_VERSION, value "3.x.y") is checked:
 * only major version 3 is known; exports without a metadata table predate
 * it and are accepted when their columns check out.
 */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/strbuf.h"
#include "kineto.h"

#define KNOWN_MAJOR 3

enum ctype { C_INT, C_STR };

struct colspec {
	const char *name;       /* nsys column */
	int type;               /* enum ctype; C_STR columns hold StringIds ids */
	int required;
};

struct src {
	sqlite3 *h;
	const char *path;
	struct kp_err *err;
};

static int sql_fail(struct src *s, const char *what)
{
	int rc = sqlite3_errcode(s->h);

	return kp_err_set(s->err, rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT ? KP_EFORMAT : KP_EDB,
			  "%s: %s: %s", s->path, what, sqlite3_errmsg(s->h));
}

static int has_table(struct src *s, const char *t)
{
	sqlite3_stmt *st;
	int found;

	if (sqlite3_prepare_v2(s->h, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, t, -1, SQLITE_STATIC);
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return found;
}

static int has_column(struct src *s, const char *t, const char *c)
{
	sqlite3_stmt *st;
	int found;

	if (sqlite3_prepare_v2(s->h, "SELECT 1 FROM pragma_table_info(?) WHERE name=?",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, t, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, c, -1, SQLITE_STATIC);
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return found;
}

static int check_version(struct src *s, char *version, size_t n)
{
	static const char *const meta[] = { "META_DATA_EXPORT", "EXPORT_META_DATA" };
	sqlite3_stmt *st;
	char sql[160];
	size_t i;
	int major;

	*version = '\0';
	if (sqlite3_exec(s->h, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK)
		return sql_fail(s, "not a readable SQLite database");
	if (!has_table(s, "StringIds"))
		return kp_err_set(s->err, KP_EFORMAT,
				  "%s: not an Nsight Systems export (SQLite file without a StringIds table)",
				  s->path);
	for (i = 0; i < sizeof(meta) / sizeof(meta[0]); i++) {
		if (!has_table(s, meta[i]))
			continue;
		snprintf(sql, sizeof(sql), "SELECT value FROM %s WHERE name='EXPORT_SCHEMA_VERSION'",
			 meta[i]);
		if (sqlite3_prepare_v2(s->h, sql, -1, &st, NULL) != SQLITE_OK)
			return sql_fail(s, meta[i]);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
			snprintf(version, n, "%s", (const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
		if (!*version)
			return kp_err_set(s->err, KP_EVERSION,
					  "%s: nsys export has a %s table but no EXPORT_SCHEMA_VERSION; "
					  "expected version %d.x", s->path, meta[i], KNOWN_MAJOR);
		major = atoi(version);
		if (major != KNOWN_MAJOR)
			return kp_err_set(s->err, KP_EVERSION,
					  "%s: nsys export schema version %s is not supported "
					  "(expected %d.x)", s->path, version, KNOWN_MAJOR);
		return 0;
	}
	kp_info("%s: no export metadata table: assuming an export from before nsys 2023", s->path);
	return 0;
}

/*
 * Prepare "SELECT <cols> FROM table" with missing optional columns as
 * NULL and C_STR columns resolved through StringIds. *st is NULL (and 0
 * returned) when the table does not exist.
 */
static int select_table(struct src *s, const char *table, const struct colspec *cols, int n,
			sqlite3_stmt **st)
{
	struct kp_strbuf sql = KP_STRBUF_INIT;
	int i, rc = 0;

	*st = NULL;
	if (!has_table(s, table))
		return 0;
	kp_strbuf_adds(&sql, "SELECT ");
	for (i = 0; i < n; i++) {
		if (i)
			kp_strbuf_adds(&sql, ", ");
		if (!has_column(s, table, cols[i].name)) {
			if (cols[i].required) {
				rc = kp_err_set(s->err, KP_EFORMAT,
						"%s: nsys table %s has no column '%s' (unknown export layout)",
						s->path, table, cols[i].name);
				goto out;
			}
			kp_strbuf_adds(&sql, "NULL");
		} else if (cols[i].type == C_STR) {
			kp_strbuf_addf(&sql, "(SELECT value FROM StringIds WHERE id = t.\"%s\")",
				       cols[i].name);
		} else {
			kp_strbuf_addf(&sql, "t.\"%s\"", cols[i].name);
		}
	}
	kp_strbuf_addf(&sql, " FROM \"%s\" t", table);
	if (sql.oom) {
		rc = kp_err_set(s->err, KP_ENOMEM, "out of memory");
		goto out;
	}
	if (sqlite3_prepare_v2(s->h, sql.buf, -1, st, NULL) != SQLITE_OK) {
		rc = sql_fail(s, table);
		*st = NULL;
	}
out:
	kp_strbuf_release(&sql);
	return rc;
}

#define I(st, i) sqlite3_column_int64((st), (i))
#define S(st, i) ((const char *)sqlite3_column_text((st), (i)))

static const struct colspec kernel_cols[] = {
	{ "start", C_INT, 1 }, { "end", C_INT, 1 }, { "deviceId", C_INT, 1 },
	{ "contextId", C_INT, 0 }, { "streamId", C_INT, 1 }, { "correlationId", C_INT, 0 },
	{ "globalPid", C_INT, 0 }, { "demangledName", C_STR, 1 }, { "shortName", C_STR, 0 },
	{ "mangledName", C_STR, 0 }, { "launchType", C_INT, 0 }, { "cacheConfig", C_INT, 0 },
	{ "registersPerThread", C_INT, 0 }, { "gridX", C_INT, 1 }, { "gridY", C_INT, 1 },
	{ "gridZ", C_INT, 1 }, { "blockX", C_INT, 1 }, { "blockY", C_INT, 1 },
	{ "blockZ", C_INT, 1 }, { "staticSharedMemory", C_INT, 0 },
	{ "dynamicSharedMemory", C_INT, 0 }, { "localMemoryPerThread", C_INT, 0 },
	{ "localMemoryTotal", C_INT, 0 }, { "gridId", C_INT, 0 },
	{ "sharedMemoryExecuted", C_INT, 0 }, { "graphNodeId", C_INT, 0 },
	{ "graphId", C_INT, 0 },
};

static const struct colspec runtime_cols[] = {
	{ "start", C_INT, 1 }, { "end", C_INT, 1 }, { "globalTid", C_INT, 0 },
	{ "correlationId", C_INT, 1 }, { "nameId", C_STR, 1 }, { "returnValue", C_INT, 0 },
};

static const struct colspec memcpy_cols[] = {
	{ "start", C_INT, 1 }, { "end", C_INT, 1 }, { "deviceId", C_INT, 1 },
	{ "contextId", C_INT, 0 }, { "streamId", C_INT, 1 }, { "correlationId", C_INT, 0 },
	{ "globalPid", C_INT, 0 }, { "bytes", C_INT, 1 }, { "copyKind", C_INT, 1 },
	{ "srcKind", C_INT, 0 }, { "dstKind", C_INT, 0 }, { "srcDeviceId", C_INT, 0 },
	{ "dstDeviceId", C_INT, 0 }, { "graphNodeId", C_INT, 0 },
};

static const struct colspec memset_cols[] = {
	{ "start", C_INT, 1 }, { "end", C_INT, 1 }, { "deviceId", C_INT, 1 },
	{ "contextId", C_INT, 0 }, { "streamId", C_INT, 1 }, { "correlationId", C_INT, 0 },
	{ "globalPid", C_INT, 0 }, { "value", C_INT, 0 }, { "bytes", C_INT, 1 },
	{ "graphNodeId", C_INT, 0 }, { "memKind", C_INT, 0 },
};

static const struct colspec sync_cols[] = {
	{ "start", C_INT, 1 }, { "end", C_INT, 1 }, { "deviceId", C_INT, 0 },
	{ "contextId", C_INT, 0 }, { "streamId", C_INT, 0 }, { "correlationId", C_INT, 0 },
	{ "globalPid", C_INT, 0 }, { "syncType", C_INT, 1 }, { "eventId", C_INT, 0 },
};

static const struct colspec nvtx_cols[] = {
	{ "start", C_INT, 1 }, { "end", C_INT, 0 }, { "eventType", C_INT, 1 },
	{ "rangeId", C_INT, 0 }, { "category", C_INT, 0 }, { "color", C_INT, 0 },
	{ "text", C_INT, 0 }, { "globalTid", C_INT, 0 }, { "endGlobalTid", C_INT, 0 },
	{ "textId", C_STR, 0 }, { "domainId", C_INT, 0 },
};

static const struct colspec gpu_cols[] = {
	{ "id", C_INT, 1 }, { "name", C_INT, 1 }, { "busLocation", C_INT, 0 },
	{ "totalMemory", C_INT, 0 }, { "smCount", C_INT, 0 }, { "computeMajor", C_INT, 0 },
	{ "computeMinor", C_INT, 0 }, { "clockRate", C_INT, 0 }, { "memoryBandwidth", C_INT, 0 },
	{ "l2CacheSize", C_INT, 0 }, { "maxThreadsPerBlock", C_INT, 0 },
	{ "maxRegistersPerSm", C_INT, 0 }, { "maxShmemPerBlock", C_INT, 0 },
	{ "maxShmemPerSm", C_INT, 0 }, { "threadsPerWarp", C_INT, 0 }, { "uuid", C_INT, 0 },
};

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (nsys appends the API version) */
static void api_name(const char *s, char *out, size_t n)
{
	size_t len;
	const char *v;

	snprintf(out, n, "%s", s ? s : "");
	len = strlen(out);
	v = strrchr(out, '_');
	if (v && v[1] == 'v' && v[2] && strspn(v + 2, "0123456789") == strlen(v + 2) && v > out)
		out[v - out] = '\0';
	(void)len;
}

struct first_gpu {
	int have;
	char name[256];
	int major, minor, sms;
};

struct copy {
	struct first_gpu *first;
	struct src *s;
	struct kp_writer *w;
	struct kp_err *err;
	int64_t rows_read;
};

static int step_rows(struct copy *c, sqlite3_stmt *st, const char *table,
		     int (*row)(struct copy *, sqlite3_stmt *))
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (row(c, st))
			return c->err->code;
		c->rows_read++;
	}
	if (rc != SQLITE_DONE)
		return sql_fail(c->s, table);
	return 0;
}

/* The seven leading columns every GPU-work table shares (see db/writer.h). */
static struct kp_gpu_op gpu_op(sqlite3_stmt *st)
{
	struct kp_gpu_op op;

	op.start = I(st, 0);
	op.end = I(st, 1);
	op.device_id = (uint32_t)I(st, 2);
	op.context_id = (uint32_t)I(st, 3);
	op.stream_id = (uint32_t)I(st, 4);
	op.correlation_id = (uint32_t)I(st, 5);
	op.global_pid = I(st, 6);
	return op;
}

static int kernel_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_kernel_rec k = {0};

	k.op = gpu_op(st);
	k.name = S(st, 7) ? S(st, 7) : "";
	k.short_name = S(st, 8);
	k.mangled = S(st, 9);
	k.launch_type = (int)I(st, 10);
	k.cache_config = (int)I(st, 11);
	k.registers = (int)I(st, 12);
	k.grid[0] = (int32_t)I(st, 13);
	k.grid[1] = (int32_t)I(st, 14);
	k.grid[2] = (int32_t)I(st, 15);
	k.block[0] = (int32_t)I(st, 16);
	k.block[1] = (int32_t)I(st, 17);
	k.block[2] = (int32_t)I(st, 18);
	k.static_smem = (int32_t)I(st, 19);
	k.dynamic_smem = (int32_t)I(st, 20);
	k.local_mem_per_thread = (int32_t)I(st, 21);
	k.local_mem_total = I(st, 22);
	k.grid_id = I(st, 23);
	k.shared_mem_executed = (int32_t)I(st, 24);
	k.graph_node_id = (uint64_t)I(st, 25);
	k.graph_id = (uint32_t)I(st, 26);
	return kp_writer_kernel(c->w, &k, c->err) < 0 ? -1 : 0;
}

static int runtime_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_api_rec a = {0};
	char name[256];

	api_name(S(st, 4), name, sizeof(name));
	a.start = I(st, 0);
	a.end = I(st, 1);
	a.global_tid = I(st, 2);
	a.correlation_id = (uint32_t)I(st, 3);
	a.name = name;
	a.return_value = (int)I(st, 5);
	/* runtime and driver calls share the table; tell them apart by name */
	a.event_class = !strncmp(name, "cu", 2) && strncmp(name, "cuda", 4) ?
			KP_API_DRIVER : KP_API_RUNTIME;
	return kp_writer_api(c->w, &a, c->err) < 0 ? -1 : 0;
}

static int memcpy_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_memcpy_rec m = {0};

	m.op = gpu_op(st);
	m.bytes = I(st, 7);
	m.copy_kind = (int)I(st, 8);
	m.src_kind = (int)I(st, 9);
	m.dst_kind = (int)I(st, 10);
	m.src_device = (int)I(st, 11);
	m.dst_device = (int)I(st, 12);
	m.graph_node_id = (uint64_t)I(st, 13);
	return kp_writer_memcpy(c->w, &m, c->err) < 0 ? -1 : 0;
}

static int memset_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_memset_rec m = {0};

	m.op = gpu_op(st);
	m.value = (int)I(st, 7);
	m.bytes = I(st, 8);
	m.graph_node_id = (uint64_t)I(st, 9);
	m.mem_kind = (int)I(st, 10);
	return kp_writer_memset(c->w, &m, c->err) < 0 ? -1 : 0;
}

static int sync_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_sync_rec s = {0};

	s.op = gpu_op(st);
	s.sync_type = (int)I(st, 7);
	s.event_id = (uint32_t)I(st, 8);
	return kp_writer_sync(c->w, &s, c->err) < 0 ? -1 : 0;
}

static int nvtx_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_nvtx_rec n = {0};

	n.start = I(st, 0);
	n.end = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : I(st, 1);
	n.event_type = (int)I(st, 2);
	n.range_id = I(st, 3);
	n.category = (int)I(st, 4);
	n.color = (uint32_t)I(st, 5);
	n.text = S(st, 6) ? S(st, 6) : S(st, 9);   /* inline text, else textId's */
	n.global_tid = I(st, 7);
	n.end_global_tid = I(st, 8);
	n.domain_id = I(st, 10);
	return kp_writer_nvtx(c->w, &n, c->err) < 0 ? -1 : 0;
}

static int gpu_row(struct copy *c, sqlite3_stmt *st)
{
	struct kp_gpu_rec g = {0};

	g.id = (int)I(st, 0);
	g.name = S(st, 1) ? S(st, 1) : "";
	g.bus_location = S(st, 2);
	g.total_memory = I(st, 3);
	g.sm_count = (int)I(st, 4);
	g.compute_major = (int)I(st, 5);
	g.compute_minor = (int)I(st, 6);
	g.clock_rate = (int)I(st, 7);
	g.memory_bandwidth = I(st, 8);
	g.l2_cache_size = I(st, 9);
	g.max_threads_per_block = (int)I(st, 10);
	g.max_registers_per_sm = (int)I(st, 11);
	g.max_shmem_per_block = (int)I(st, 12);
	g.max_shmem_per_sm = (int)I(st, 13);
	g.threads_per_warp = (int)I(st, 14);
	g.uuid = S(st, 15);
	if (!c->first->have) {
		c->first->have = 1;
		snprintf(c->first->name, sizeof(c->first->name), "%s", g.name);
		c->first->major = g.compute_major;
		c->first->minor = g.compute_minor;
		c->first->sms = g.sm_count;
	}
	return kp_writer_gpu(c->w, &g, c->err) < 0 ? -1 : 0;
}

int kp_import_nsys(struct kp_db *db, const char *path, const struct kp_import_opts *opts,
		   struct kp_import_stats *stats, struct kp_err *err)
{
	static const struct {
		const char *table;
		const struct colspec *cols;
		int n;
		int (*row)(struct copy *, sqlite3_stmt *);
	} tables[] = {
		{ "TARGET_INFO_GPU", gpu_cols, NCOLS(gpu_cols), gpu_row },
		{ "CUPTI_ACTIVITY_KIND_KERNEL", kernel_cols, NCOLS(kernel_cols), kernel_row },
		{ "CUPTI_ACTIVITY_KIND_RUNTIME", runtime_cols, NCOLS(runtime_cols), runtime_row },
		{ "CUPTI_ACTIVITY_KIND_MEMCPY", memcpy_cols, NCOLS(memcpy_cols), memcpy_row },
		{ "CUPTI_ACTIVITY_KIND_MEMSET", memset_cols, NCOLS(memset_cols), memset_row },
		{ "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", sync_cols, NCOLS(sync_cols), sync_row },
		{ "NVTX_EVENTS", nvtx_cols, NCOLS(nvtx_cols), nvtx_row },
	};
	struct kp_run_info ri = { .source = "nsys", .source_path = path };
	sqlite3_stmt *sts[sizeof(tables) / sizeof(tables[0])] = {0};
	struct src s = { NULL, path, err };
	struct first_gpu first = {0};
	struct kp_writer w;
	struct copy c = { &first, &s, &w, err, 0 };
	char version[64];
	size_t i;
	int rc, have_writer = 0;

	(void)opts;
	stats->format = KP_IMPORT_NSYS;
	if (sqlite3_open_v2(path, &s.h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		rc = sql_fail(&s, "cannot open");
		goto out;
	}
	rc = check_version(&s, version, sizeof(version));
	if (rc)
		goto out;
	/* validate every table's columns before writing anything */
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		rc = select_table(&s, tables[i].table, tables[i].cols, tables[i].n, &sts[i]);
		if (rc)
			goto out;
	}
	rc = kp_db_run_insert(db, &ri, &stats->run_id, err);
	if (rc)
		goto out;
	kp_writer_init(&w, db, stats->run_id);
	have_writer = 1;
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (!sts[i])
			continue;
		rc = step_rows(&c, sts[i], tables[i].table, tables[i].row);
		if (rc)
			goto out;
	}
	if (first.have) {
		struct kp__run_update u = {0};

		u.device_name = first.name;
		u.compute_major = first.major;
		u.compute_minor = first.minor;
		u.sm_count = first.sms;
		rc = kp__run_update(db, stats->run_id, &u, err);
		if (rc)
			goto out;
	}
	rc = kp_db_run_finish(db, stats->run_id, 0, NULL, "complete", err);
	if (rc)
		goto out;
	memcpy(stats->rows, w.rows, sizeof(stats->rows));
	stats->events = c.rows_read;
	kp_info("%s: nsys export schema %s", path, version[0] ? version : "(unrecorded)");
out:
	if (have_writer)
		kp_writer_release(&w);
	for (i = 0; i < sizeof(sts) / sizeof(sts[0]); i++)
		sqlite3_finalize(sts[i]);
	if (s.h)
		sqlite3_close_v2(s.h);
	return rc;
}
