/*
 * load.c - kp_report_load: read one run's trace aggregates and analysis
 * results into a struct kp_report (see report.h).
 */
#include "report_int.h"

#include <stdlib.h>
#include "../common/kname.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/u64map.h"
#include "../db/read.h"
#include <string.h>

#define DEF(v, d) ((v) > 0 ? (v) : (d))

/* A copy of s in the report's arena; NULL stays NULL. */
static const char *dup(struct kp_report *rep, const char *s)
{
	return s ? kp_arena_strdup(&rep->arena, s) : NULL;
}

static const char *col_str(struct kp_report *rep, sqlite3_stmt *st, int i)
{
	return dup(rep, (const char *)sqlite3_column_text(st, i));
}

static int nomem(struct kp_err *err)
{
	return kp_err_set(err, KP_ENOMEM, "out of memory while loading the report");
}

/* Prepare sql and bind ?1 to the run id. */
static int prep(struct kp_db *db, struct kp_report *rep, const char *sql,
		sqlite3_stmt **st, struct kp_err *err)
{
	return kp_db_prepare_run(db, sql, rep->run_id, st, err);
}

static int done(struct kp_db *db, sqlite3_stmt *st, int rc, struct kp_err *err)
{
	if (rc != SQLITE_DONE && rc != SQLITE_ROW && rc >= 0)
		rc = kp_db_error(db, err, "report query failed");
	else if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		rc = 0;
	sqlite3_finalize(st);
	return rc;
}

static int load_run(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_db_rows *it;
	struct kp_db_run r;
	int rc;

	if ((rc = kp_db_runs(db, rep->run_id, &it, err)))
		return rc;
	if ((rc = kp_db_run_next(it, &r, err)) <= 0) {
		kp_db_rows_close(it);
		if (rc < 0)
			return rc;
		return kp_err_set(err, KP_ENOTFOUND, "%s: no run %lld (see 'kplan info %s')",
				  db->path, (long long)rep->run_id, db->path);
	}
	rep->source = dup(rep, r.source);
	rep->source_path = dup(rep, r.source_path);
	rep->command = dup(rep, r.command);
	rep->device_name = dup(rep, r.device_name);
	rep->status = dup(rep, r.status);
	rep->dropped_detail = dup(rep, r.dropped_detail);
	rep->compute_major = (int)r.compute_major;
	rep->compute_minor = (int)r.compute_minor;
	rep->sm_count = (int)r.sm_count;
	rep->driver_version = (int)r.driver_version;
	rep->runtime_version = (int)r.runtime_version;
	rep->t_begin_ns = r.t_begin_ns;
	rep->t_end_ns = r.t_end_ns;
	rep->dropped_records = r.dropped_records;
	rep->overhead_ns = r.has_overhead ? r.overhead_ns : -1;
	kp_db_rows_close(it);
	return 0;
}

struct lab_ix {
	const char *label;
	size_t i;
};

static int cmp_lab(const void *a, const void *b)
{
	const struct lab_ix *x = a, *y = b;
	int c = strcmp(x->label, y->label);

	return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

/*
 * Kernels whose labels are the same (their full names differ only in what
 * kp_kernel_label leaves out) get what tells them apart
 * (kp_kernel_label_apart), the label shortened to leave it room within
 * KP_REP_KNAME_MAX; any still the same are numbered by total time. No two
 * rows of a kernel table read the same.
 */
static int labels_apart(struct kp_report *rep, int numbered)
{
	size_t n = rep->kernels.len, i, j, k;
	struct lab_ix *ix = malloc((n ? n : 1) * sizeof(*ix));
	const char **others = malloc((n ? n : 1) * sizeof(*others));
	int rc = 0;

	if (!ix || !others) {
		rc = -1;
		goto out;
	}
	for (i = 0; i < n; i++)
		ix[i] = (struct lab_ix){ rep->kernels.data[i].label, i };
	qsort(ix, n, sizeof(*ix), cmp_lab);
	for (i = 0; i < n && !rc; i = j) {
		for (j = i + 1; j < n && !strcmp(ix[j].label, ix[i].label); j++)
			;
		for (k = i; k < j && j - i > 1 && !rc; k++) {
			struct kp_rep_kernel *kn = &rep->kernels.data[ix[k].i];
			char apart[96], base[KP_KNAME_LABEL_MAX], label[KP_KNAME_LABEL_MAX + 96];
			size_t m = 0, o, room;

			if (numbered) {
				snprintf(apart, sizeof(apart), " #%zu", k - i + 1);
			} else {
				for (o = i; o < j; o++)
					if (o != k)
						others[m++] = rep->kernels.data[ix[o].i].name;
				kp_kernel_label_apart(kn->name, others, m, apart, sizeof(apart));
			}
			room = strlen(apart) + 16 < KP_REP_KNAME_MAX ?
			       KP_REP_KNAME_MAX - strlen(apart) + 1 : 17;
			if (room > sizeof(base))
				room = sizeof(base);
			snprintf(label, sizeof(label), "%s%s", strlen(kn->label) < room ? kn->label :
				 kp_kernel_label(kn->name, base, room), apart);
			if (!(kn->label = kp_arena_strdup(&rep->arena, label)))
				rc = -1;
		}
	}
out:
	free(ix);
	free(others);
	return rc;
}

static int load_kernels(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_db_kernel_sum ks;
	struct kp_db_rows *it;
	int rc;

	if ((rc = kp_db_kernel_sums(db, rep->run_id, &it, err)))
		return rc;
	while ((rc = kp_db_kernel_sum_next(it, &ks, err)) > 0) {
		struct kp_rep_kernel k = {
			.name = dup(rep, ks.name), .short_name = dup(rep, ks.short_name),
			.count = ks.count, .total_ns = ks.total_ns,
			.min_ns = ks.min_ns, .max_ns = ks.max_ns, .name_id = ks.name_id,
		};
		char label[KP_KNAME_LABEL_MAX];

		/* no longer than the tables show: what they show is what is told apart */
		k.label = kp_arena_strdup(&rep->arena, kp_kernel_label(k.name, label, KP_REP_KNAME_MAX + 1));
		if (!k.label || kp_vec_push(&rep->kernels, k)) {
			kp_db_rows_close(it);
			return nomem(err);
		}
		rep->n_kernels += k.count;
		rep->kernel_ns += k.total_ns;
	}
	kp_db_rows_close(it);
	if (rc < 0)
		return rc;
	/* by their distinguishing tokens, then by number where those are not enough */
	if (labels_apart(rep, 0) || labels_apart(rep, 1))
		return nomem(err);
	return 0;
}

static int load_apis(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_db_api_sum as;
	struct kp_db_rows *it;
	int rc;

	if ((rc = kp_db_api_sums(db, rep->run_id, &it, err)))
		return rc;
	while ((rc = kp_db_api_sum_next(it, &as, err)) > 0) {
		struct kp_rep_api a = {
			.name = dup(rep, as.name), .event_class = (int)as.event_class,
			.count = as.count, .total_ns = as.total_ns,
			.min_ns = as.min_ns, .max_ns = as.max_ns,
		};
		if (kp_vec_push(&rep->apis, a)) {
			kp_db_rows_close(it);
			return nomem(err);
		}
		rep->n_api += a.count;
	}
	kp_db_rows_close(it);
	return rc < 0 ? rc : 0;
}

static int load_gaps(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(db, rep, "SELECT count(*) FROM kp_gaps WHERE runId = ?1", &st, err);
	if (rc)
		return rc;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		rep->n_gaps = sqlite3_column_int64(st, 0);
	rep->has_gaps = rep->n_gaps > 0;
	return done(db, st, rc, err);
}

/*
 * The API calls that block each region, grouped ("sync: cudaStreamSynchronize
 * x3; ..."): one pass over the run's kp_blockers rows (the table has no
 * index on regionId, so one query per region would scan it once each).
 */
static int load_blocker_apis(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_u64map ids;
	sqlite3_stmt *st;
	uint32_t at = 0;
	int64_t cur = 0;
	int have = 0, rc;
	size_t i;

	kp_u64map_init(&ids);
	for (i = 0; i < rep->regions.len; i++) {
		if (kp_u64map_put(&ids, (uint64_t)rep->regions.data[i].id, (uint32_t)i)) {
			kp_u64map_release(&ids);
			return nomem(err);
		}
	}
	rc = prep(db, rep,
		"SELECT regionId, kind || CASE fatal WHEN 1 THEN '' WHEN 2 THEN ' (warm-up only)' ELSE ' (advisory)' END,"
		" coalesce(api_name, ''), count(*) FROM kp_blockers WHERE runId = ?1"
		" GROUP BY regionId, kind, fatal, api_name"
		" ORDER BY regionId, fatal = 1 DESC, fatal DESC, count(*) DESC, kind, api_name", &st, err);
	if (rc) {
		kp_u64map_release(&ids);
		return rc;
	}
	for (;;) {
		int64_t id;
		const char *api;

		rc = sqlite3_step(st);
		id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		if (have && (rc != SQLITE_ROW || id != cur)) {
			rep->regions.data[at].blocker_apis = kp_arena_strdup(&rep->arena, sb.buf);
			have = 0;
		}
		if (rc != SQLITE_ROW)
			break;
		if (!have) {
			/* rows of regions the report does not hold are skipped */
			if (!kp_u64map_get(&ids, (uint64_t)id, &at))
				continue;
			kp_strbuf_reset(&sb);
			cur = id;
			have = 1;
		}
		api = (const char *)sqlite3_column_text(st, 2);
		kp_strbuf_addf(&sb, "%s%s", sb.len ? "; " : "", (const char *)sqlite3_column_text(st, 1));
		if (api && *api)
			kp_strbuf_addf(&sb, ": %s", api);
		if (sqlite3_column_int64(st, 3) > 1)
			kp_strbuf_addf(&sb, " x%lld", (long long)sqlite3_column_int64(st, 3));
	}
	kp_strbuf_release(&sb);
	kp_u64map_release(&ids);
	return done(db, st, rc, err);
}

/* 1 when table has column col (a newer schema's), else 0. */
static int has_column(struct kp_db *db, const char *table, const char *col)
{
	char sql[128];
	sqlite3_stmt *st;
	int found = 0;

	snprintf(sql, sizeof(sql), "PRAGMA table_info(%s)", table);
	if (kp_db_prepare(db, sql, &st, NULL))
		return 0;
	while (!found && sqlite3_step(st) == SQLITE_ROW)
		found = sqlite3_column_text(st, 1) && !strcmp((const char *)sqlite3_column_text(st, 1), col);
	sqlite3_finalize(st);
	return found;
}

/*
 * The user-level code around time t on the thread that made call corr:
 * the innermost PyTorch CPU op, Python frame and NVTX range holding it
 * ("aten::item in model.py(42): forward, in NVTX step"), from the ranges
 * an imported profiler trace stores in NVTX_EVENTS. NULL when none.
 */
static const char *where_from_nvtx(struct kp_db *db, struct kp_report *rep, int64_t t,
				   int64_t corr, const char *cpu_op, const char *py_frame)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_db_launch call = {0};
	struct kp_db_nvtx_holder h;
	struct kp_db_rows *it;
	const char *nvtx = NULL, *out;
	char *own[3] = { NULL, NULL, NULL };

	/* a read error leaves the code unknown: the report goes on without it */
	if (t && (!cpu_op || !py_frame) && corr > 0 &&
	    kp_db_launch_of(db, rep->run_id, corr, &call, NULL))
		call.found = 0;
	if (t && (!cpu_op || !py_frame) &&
	    !kp_db_nvtx_holding(db, rep->run_id, t, call.found && call.has_gtid, call.gtid, &it,
				NULL)) {
		while (kp_db_nvtx_holder_next(it, &h, NULL) > 0) {
			const char *dom = h.domain;
			int k = dom && !strcmp(dom, "pytorch.cpu_op") ? 0
				: dom && !strcmp(dom, "pytorch.python") ? 1 : 2;

			if (h.text && !own[k])
				own[k] = kp_strdup(h.text);
		}
		kp_db_rows_close(it);
		if (!cpu_op)
			cpu_op = own[0];
		if (!py_frame)
			py_frame = own[1];
		nvtx = own[2];
	}
	if (cpu_op)
		kp_strbuf_addf(&sb, "%s", cpu_op);
	if (py_frame)
		kp_strbuf_addf(&sb, "%s%s", sb.len ? " in " : "", py_frame);
	if (nvtx)
		kp_strbuf_addf(&sb, "%sNVTX %s", sb.len ? ", inside " : "inside ", nvtx);
	out = sb.len ? kp_arena_strdup(&rep->arena, sb.buf) : NULL;
	kp_strbuf_release(&sb);
	free(own[0]);
	free(own[1]);
	free(own[2]);
	return out;
}

/*
 * Each region's blockers grouped by kind, fatality and call, with the
 * first instance (occurrence, position, detail) and, for the regions with
 * a section of their own, where in the user's code it was.
 */
static int load_blockers(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_u64map ids;
	sqlite3_stmt *st;
	int cols = has_column(db, "kp_blockers", "cpu_op") && has_column(db, "kp_blockers", "py_frame");
	int rc, lookups = 0;
	char sql[1024];
	size_t i;

	if (!rep->has_regions || rep->opts.summary_only)
		return 0;
	kp_u64map_init(&ids);
	for (i = 0; i < rep->regions.len; i++) {
		if (kp_u64map_put(&ids, (uint64_t)rep->regions.data[i].id, (uint32_t)i)) {
			kp_u64map_release(&ids);
			return nomem(err);
		}
	}
	/* bare columns next to min() come from the row holding the minimum */
	snprintf(sql, sizeof(sql),
		"SELECT regionId, kind, fatal, api_name, count(*), count(DISTINCT occIndex),"
		" min(coalesce(occIndex, 0) * 4294967296 + coalesce(position, 0)), occIndex, position,"
		" detail, start, correlationId, %s FROM kp_blockers WHERE runId = ?1"
		" GROUP BY regionId, kind, fatal, api_name"
		" ORDER BY regionId, fatal = 1 DESC, fatal DESC, count(*) DESC, kind, api_name",
		cols ? "cpu_op, py_frame" : "NULL, NULL");
	rc = prep(db, rep, sql, &st, err);
	if (rc) {
		kp_u64map_release(&ids);
		return rc;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct kp_rep_blocker b = {
			.kind = col_str(rep, st, 1), .fatal = sqlite3_column_int(st, 2),
			.api = col_str(rep, st, 3), .count = sqlite3_column_int64(st, 4),
			.occurrences = sqlite3_column_int64(st, 5),
			.first_occ = kp_db_col_i64(st, 7, -1), .position = kp_db_col_i64(st, 8, -1),
			.detail = col_str(rep, st, 9),
		};
		uint32_t ix;

		if (!kp_u64map_get(&ids, (uint64_t)sqlite3_column_int64(st, 0), &ix))
			continue;
		b.region = (int32_t)ix;
		if (ix < KP_REP_CARDS && lookups < 4 * KP_REP_CARDS) {
			lookups++;
			b.where = where_from_nvtx(db, rep, kp_db_col_i64(st, 10, 0), kp_db_col_i64(st, 11, 0),
						  (const char *)sqlite3_column_text(st, 12),
						  (const char *)sqlite3_column_text(st, 13));
		}
		if (kp_vec_push(&rep->blockers, b)) {
			sqlite3_finalize(st);
			kp_u64map_release(&ids);
			return nomem(err);
		}
	}
	kp_u64map_release(&ids);
	return done(db, st, rc, err);
}

/* Every region of the run: the HTML page shows families, regions.csv needs each one's. */
static int load_regions(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(db, rep, "SELECT count(*) FROM kp_regions WHERE runId = ?1", &st, err);
	if (rc)
		return rc;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		rep->n_regions_total = sqlite3_column_int64(st, 0);
	if ((rc = done(db, st, rc, err)))
		return rc;
	rep->has_regions = rep->n_regions_total > 0;
	static const char sql[] =
		"SELECT regionId, coalesce(parentId, 0), label, source, blockers, fingerprint,"
		" coalesce(streamId, -1), occurrences, kernels, eager_ns, busy_ns, host_idle_ns,"
		" device_idle_ns, coalesce(graph_ns_pred, -1), coalesce(speedup_pred, 0),"
		" capturable, coalesce(one_time_ns, -1), coalesce(break_even, -1),"
		" coalesce(extra_mem_bytes, -1), coalesce(shape_keys, -1), coalesce(patch_slots, -1),"
		" %s FROM kp_regions WHERE runId = ?1"
		" ORDER BY occurrences * eager_ns DESC, regionId";
	char q[sizeof(sql) + 64];

	/* a database written before schema v5 has no interval */
	snprintf(q, sizeof(q), sql, kp_db_has_column(db, "kp_regions", "graph_ns_hi")
		 ? "coalesce(graph_ns_lo, -1), coalesce(graph_ns_hi, -1)" : "-1, -1");
	rc = prep(db, rep, q, &st, err);
	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct kp_rep_region r = {
			.id = sqlite3_column_int64(st, 0), .parent_id = sqlite3_column_int64(st, 1),
			.label = col_str(rep, st, 2), .source = col_str(rep, st, 3),
			.blockers = col_str(rep, st, 4), .fingerprint = col_str(rep, st, 5),
			.stream_id = sqlite3_column_int64(st, 6),
			.occurrences = sqlite3_column_int64(st, 7), .kernels = sqlite3_column_int64(st, 8),
			.eager_ns = sqlite3_column_int64(st, 9), .busy_ns = sqlite3_column_int64(st, 10),
			.host_idle_ns = sqlite3_column_int64(st, 11),
			.device_idle_ns = sqlite3_column_int64(st, 12),
			.graph_ns_pred = sqlite3_column_int64(st, 13),
			.speedup_pred = sqlite3_column_double(st, 14),
			.capturable = sqlite3_column_int(st, 15),
			.one_time_ns = sqlite3_column_int64(st, 16),
			.break_even = sqlite3_column_int64(st, 17),
			.extra_mem_bytes = sqlite3_column_int64(st, 18),
			.shape_keys = sqlite3_column_int64(st, 19),
			.patch_slots = sqlite3_column_int64(st, 20),
			.graph_ns_lo = sqlite3_column_int64(st, 21),
			.graph_ns_hi = sqlite3_column_int64(st, 22),
			.family = -1, .decision = -1,
		};
		if (kp_vec_push(&rep->regions, r)) {
			sqlite3_finalize(st);
			return nomem(err);
		}
	}
	if ((rc = done(db, st, rc, err)))
		return rc;
	return load_blocker_apis(db, rep, err);
}

static int load_fusion(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(db, rep, "SELECT count(*) FROM kp_fusion_candidates WHERE runId = ?1", &st, err);
	if (rc)
		return rc;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		rep->n_fusion_total = sqlite3_column_int64(st, 0);
	if ((rc = done(db, st, rc, err)))
		return rc;
	rc = prep(db, rep,
		"SELECT candId, coalesce(regionId, -1), coalesce(streamId, -1),"
		" coalesce(first_correlationId, -1), n_kernels, kernel_names, reason,"
		" coalesce(dur_ns, -1), coalesce(saved_bytes, -1), coalesce(saved_nodes, -1),"
		" coalesce(score, 0), feasible FROM kp_fusion_candidates WHERE runId = ?1"
		" ORDER BY coalesce(score, 0) DESC, candId LIMIT ?2", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 2, DEF(rep->opts.max_rows, 200));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct kp_rep_fusion c = {
			.id = sqlite3_column_int64(st, 0), .region_id = sqlite3_column_int64(st, 1),
			.stream_id = sqlite3_column_int64(st, 2), .first_corr = sqlite3_column_int64(st, 3),
			.n_kernels = sqlite3_column_int64(st, 4), .kernel_names = col_str(rep, st, 5),
			.reason = col_str(rep, st, 6), .dur_ns = sqlite3_column_int64(st, 7),
			.saved_bytes = sqlite3_column_int64(st, 8),
			.saved_nodes = sqlite3_column_int64(st, 9),
			.score = sqlite3_column_double(st, 10), .feasible = sqlite3_column_int(st, 11),
		};
		if (kp_vec_push(&rep->fusion, c)) {
			sqlite3_finalize(st);
			return nomem(err);
		}
	}
	return done(db, st, rc, err);
}

/*
 * kplan.torch's fusion groups of the current plan (PLAN.aten beside the
 * file kp_plans.path names: as stored, else a relative path beside the
 * database), when there are some. Not finding them is not an error; a file
 * that cannot be read is said in the report (aten_error).
 */
static void load_aten(struct kp_db *db, struct kp_report *rep)
{
	const char *path = rep->plans.data[0].path;
	struct kp_strbuf alt = KP_STRBUF_INIT;
	struct kp_err e = {0};
	int rc;

	if (!rep->plan || !path || !*path)
		return;
	rc = kp_aten_groups_load(path, &rep->aten, NULL, NULL, &e);
	if (rc == KP_ENOTFOUND && path[0] != '/' && db->path && strchr(db->path, '/')) {
		kp_plan_dir(db->path, &alt);
		kp_strbuf_addf(&alt, "/%s", path);
		if (!alt.oom) {
			path = alt.buf;
			rc = kp_aten_groups_load(path, &rep->aten, NULL, NULL, &e);
		}
	}
	if (rc != KP_ENOTFOUND)
		snprintf(rep->aten_path, sizeof(rep->aten_path), "%s%s", path, KP_ATEN_SUFFIX);
	if (rc && rc != KP_ENOTFOUND)
		snprintf(rep->aten_error, sizeof(rep->aten_error), "%s", e.msg);
	kp_strbuf_release(&alt);
}

static int load_plans(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = prep(db, rep,
		"SELECT planId, created_ns, path, checksum, status, stale_reason, body,"
		" coalesce(speedup_pred, 0) FROM kp_plans WHERE runId = ?1"
		" ORDER BY (status = 'current') DESC, planId DESC LIMIT 20", &st, err);
	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct kp_rep_plan p = {
			.id = sqlite3_column_int64(st, 0), .created_ns = sqlite3_column_int64(st, 1),
			.path = col_str(rep, st, 2), .checksum = col_str(rep, st, 3),
			.status = col_str(rep, st, 4), .stale_reason = col_str(rep, st, 5),
			.body = col_str(rep, st, 6), .speedup_pred = sqlite3_column_double(st, 7),
		};
		if (kp_vec_push(&rep->plans, p)) {
			sqlite3_finalize(st);
			return nomem(err);
		}
	}
	if ((rc = done(db, st, rc, err)) || !rep->plans.len)
		return rc;
	/* the plan's decisions come from its own text, the file that ships */
	if (rep->plans.data[0].body) {
		struct kp_err perr = {0};
		const char *body = rep->plans.data[0].body;

		rep->plan = kp_plan_parse(body, strlen(body), "kp_plans.body", &perr);
		if (!rep->plan)
			snprintf(rep->plan_error, sizeof(rep->plan_error), "%s", perr.msg);
	}
	load_aten(db, rep);
	return 0;
}

static int load_overhead(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_db_extent e;
	int rc;

	rep->profiler_overhead_ns = -1;
	if ((rc = kp_db_extent(db, rep->run_id, KP_DB_EXTENT_OVERHEAD, &e, err)))
		return rc;
	if (e.count > 0)
		rep->profiler_overhead_ns = e.sum_ns;
	return 0;
}


static int load_cost(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	return kp_cost_load_run(db, rep->run_id, &rep->cost, err);
}

/*
 * In order: the timeline (with the gap scan) needs the kernels, the
 * regions, the API count and the job's ranks, the families the regions and
 * the plan.
 */
static const struct {
	const char *what;
	int (*fn)(struct kp_db *db, struct kp_report *rep, struct kp_err *err);
} steps[] = {
	{ "run", load_run }, { "kernel summary", load_kernels }, { "api summary", load_apis },
	{ "gaps", load_gaps }, { "regions", load_regions }, { "fusion", load_fusion },
	{ "plans", load_plans }, { "families", kp__report_families }, { "cost model", load_cost },
	{ "overhead", load_overhead }, { "ranks", kp__report_ranks },
	{ "timeline and gap scan", kp__report_timeline }, { "blockers", load_blockers },
};

int kp_report_load(struct kp_db *db, const struct kp_report_opts *opts,
		   struct kp_report **out, struct kp_err *err)
{
	struct kp_report *rep = calloc(1, sizeof(*rep));
	size_t i;
	int rc;

	*out = NULL;
	if (!rep)
		return nomem(err);
	kp_arena_init(&rep->arena);
	if (opts)
		rep->opts = *opts;
	rep->db_path = kp_arena_strdup(&rep->arena, db->path);
	rep->run_id = rep->opts.run_id > 0 ? rep->opts.run_id : kp_db_default_run(db);
	if (rep->run_id <= 0) {
		rc = kp_err_set(err, KP_ENOTFOUND, "%s: no runs in the database (import or record one first)",
				db->path);
		goto out_free;
	}
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int64_t t0 = kp_now_ns();

		if ((rc = steps[i].fn(db, rep, err)))
			goto out_free;
		kp_debug("report: %s in %.3f s", steps[i].what, (kp_now_ns() - t0) / 1e9);
	}
	if (!rep->has_regions)
		snprintf(rep->missing, sizeof(rep->missing),
			 "no analysis results for run %lld (kp_regions is empty): run 'kplan analyze %s' first",
			 (long long)rep->run_id, db->path);
	kp__report_corr_free(rep);
	*out = rep;
	return 0;
out_free:
	kp_report_free(rep);
	return rc;
}

void kp_report_free(struct kp_report *rep)
{
	if (!rep)
		return;
	kp__report_tl_release(rep);
	kp_vec_release(&rep->blockers);
	kp_vec_release(&rep->kernels);
	kp_vec_release(&rep->apis);
	kp_vec_release(&rep->regions);
	kp_vec_release(&rep->families);
	kp_vec_release(&rep->fusion);
	kp_vec_release(&rep->plans);
	kp_plan_free(rep->plan);
	kp_aten_groups_free(rep->aten);
	kp_job_free(rep->job);
	kp__report_corr_free(rep);
	kp_arena_release(&rep->arena);
	free(rep);
}
