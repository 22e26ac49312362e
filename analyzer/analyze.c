/*
 * analyze.c - kp_analyze(): the analysis driver, storing results in the
 * run's kp_* tables (one transaction), CSV output and the region table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/kname.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/printable.h"
#include "../common/strbuf.h"
#include "../db/csv.h"
#include "internal.h"

void kp_analyze_opts_init(struct kp_analyze_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->legacy_stream = KP_LEGACY_STREAM_ID;
	o->gap_rows_max = 1000000;
	o->min_period = 2;
	o->max_chain = 8;
}

static void kinds_str(const struct kp__region *r, int fatal, struct kp_strbuf *sb)
{
	int seen[KP__B__N] = {0};

	kp_strbuf_reset(sb);
	for (size_t i = 0; i < r->blk.len; i++)
		if (r->blk.data[i].fatal == fatal)
			seen[r->blk.data[i].kind] = 1;
	for (int k = 0; k < KP__B__N; k++)
		if (seen[k]) {
			if (sb->len)
				kp_strbuf_addch(sb, ',');
			kp_strbuf_adds(sb, kp__blocker_kind_name(k));
		}
}

static void bind_opt_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s && *s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static int step_reset(struct kp__ana *a, sqlite3_stmt *st, const char *what, struct kp_err *err)
{
	int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kp_db_error(a->db, err, what);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

static int store_regions(struct kp__ana *a, struct kp_err *err)
{
	static const char sql_r[] = "INSERT INTO kp_regions (runId, regionId, parentId,"
		" label, source, streamId, occurrences, kernels, nodes, period, coverage,"
		" eager_ns, busy_ns, host_idle_ns, device_idle_ns, queue_p50_ns,"
		" queue_p90_ns, launch_api_p50_ns, launch_api_p90_ns, graph_ns_pred,"
		" speedup_pred, capturable, blockers, advisories, one_time_ns, break_even,"
		" extra_mem_bytes, fingerprint, shape_keys, patch_slots, edge_ns, graph_ns_lo,"
		" graph_ns_hi) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
		" ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28,"
		" ?29, ?30, ?31, ?32, ?33)";
	static const char sql_o[] = "INSERT INTO kp_region_occurrences (runId, regionId,"
		" occIndex, start, end, kernels, eager_ns, busy_ns, host_idle_ns,"
		" device_idle_ns, first_correlationId, last_correlationId, signature)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
	static const char sql_b[] = "INSERT INTO kp_blockers (runId, regionId, kind,"
		" fatal, api_name, start, correlationId, occIndex, position, detail, cpu_op,"
		" py_frame, cost_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
	sqlite3_stmt *sr = NULL, *so = NULL, *sb = NULL;
	struct kp_strbuf s1 = KP_STRBUF_INIT, s2 = KP_STRBUF_INIT;
	char fp[32];
	int rc;

	rc = kp_db_prepare(a->db, sql_r, &sr, err);
	if (!rc)
		rc = kp_db_prepare(a->db, sql_o, &so, err);
	if (!rc)
		rc = kp_db_prepare(a->db, sql_b, &sb, err);
	for (size_t i = 0; i < a->regions.len && !rc; i++) {
		struct kp__region *r = a->regions.data[i];
		int fatal = 0;

		for (size_t b = 0; b < r->blk.len; b++)
			fatal |= r->blk.data[b].fatal == 1;
		if (fatal)
			r->capturable = 0;
		kinds_str(r, 1, &s1);
		kinds_str(r, 0, &s2);
		snprintf(fp, sizeof(fp), "%016llx", (unsigned long long)r->fingerprint);
		sqlite3_bind_int64(sr, 1, a->run);
		sqlite3_bind_int(sr, 2, r->id);
		if (r->parent)
			sqlite3_bind_int(sr, 3, r->parent);
		sqlite3_bind_text(sr, 4, r->label, -1, SQLITE_STATIC);
		sqlite3_bind_text(sr, 5, r->source, -1, SQLITE_STATIC);
		if (r->stream_id >= 0)
			sqlite3_bind_int64(sr, 6, r->stream_id);
		sqlite3_bind_int64(sr, 7, r->n_occ);
		sqlite3_bind_int64(sr, 8, r->kernels);
		sqlite3_bind_int64(sr, 9, r->nodes);
		if (r->period) {
			sqlite3_bind_int(sr, 10, r->period);
			sqlite3_bind_double(sr, 11, r->coverage);
		}
		sqlite3_bind_int64(sr, 12, r->eager);
		sqlite3_bind_int64(sr, 13, r->busy);
		sqlite3_bind_int64(sr, 14, r->hidle);
		sqlite3_bind_int64(sr, 15, r->didle);
		if (r->queue.n) {
			sqlite3_bind_int64(sr, 16, r->queue.p50);
			sqlite3_bind_int64(sr, 17, r->queue.p90);
			sqlite3_bind_int64(sr, 18, r->launch_api.p50);
			sqlite3_bind_int64(sr, 19, r->launch_api.p90);
		}
		if (r->has_pred) {
			sqlite3_bind_int64(sr, 20, r->pred.graph_ns);
			sqlite3_bind_double(sr, 21, r->pred.speedup);
			sqlite3_bind_int64(sr, 25, r->pred.one_time_ns);
			if (r->pred.break_even >= 0)
				sqlite3_bind_int64(sr, 26, r->pred.break_even);
			sqlite3_bind_int64(sr, 27, r->pred.extra_mem_bytes);
			if (r->pred_hi > 0) {
				sqlite3_bind_int64(sr, 32, r->pred_lo);
				sqlite3_bind_int64(sr, 33, r->pred_hi);
			}
		}
		sqlite3_bind_int(sr, 22, r->capturable);
		bind_opt_text(sr, 23, s1.buf);
		bind_opt_text(sr, 24, s2.buf);
		sqlite3_bind_text(sr, 28, fp, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(sr, 29, r->shape_keys);
		sqlite3_bind_int64(sr, 30, r->patch_slots);
		sqlite3_bind_int64(sr, 31, r->edge_ns);
		rc = step_reset(a, sr, "writing kp_regions", err);
		for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
			const struct kp__occ *o = &r->occ[k];
			sqlite3_bind_int64(so, 1, a->run);
			sqlite3_bind_int(so, 2, r->id);
			sqlite3_bind_int64(so, 3, k);
			sqlite3_bind_int64(so, 4, o->t0);
			sqlite3_bind_int64(so, 5, o->t1);
			sqlite3_bind_int64(so, 6, o->n);
			sqlite3_bind_int64(so, 7, o->eager);
			sqlite3_bind_int64(so, 8, o->busy);
			sqlite3_bind_int64(so, 9, o->hidle);
			sqlite3_bind_int64(so, 10, o->didle);
			if (o->n) {
				sqlite3_bind_int64(so, 11, a->ops[o->ops[0]].corr);
				sqlite3_bind_int64(so, 12, a->ops[o->ops[o->n - 1]].corr);
			}
			snprintf(fp, sizeof(fp), "%016llx", (unsigned long long)o->fp);
			sqlite3_bind_text(so, 13, fp, -1, SQLITE_TRANSIENT);
			rc = step_reset(a, so, "writing kp_region_occurrences", err);
		}
		for (size_t b = 0; b < r->blk.len && !rc; b++) {
			const struct kp__blk *bk = &r->blk.data[b];
			sqlite3_bind_int64(sb, 1, a->run);
			sqlite3_bind_int(sb, 2, r->id);
			sqlite3_bind_text(sb, 3, kp__blocker_kind_name(bk->kind), -1, SQLITE_STATIC);
			sqlite3_bind_int(sb, 4, bk->fatal);
			bind_opt_text(sb, 5, bk->api);
			sqlite3_bind_int64(sb, 6, bk->start);
			if (bk->corr > 0)
				sqlite3_bind_int64(sb, 7, bk->corr);
			sqlite3_bind_int(sb, 8, bk->occ);
			sqlite3_bind_int(sb, 9, bk->pos);
			bind_opt_text(sb, 10, bk->detail);
			bind_opt_text(sb, 11, bk->cpu_op);
			bind_opt_text(sb, 12, bk->py_frame);
			if (bk->cost_ns >= 0)
				sqlite3_bind_int64(sb, 13, bk->cost_ns);
			rc = step_reset(a, sb, "writing kp_blockers", err);
			a->sum->n_blockers += bk->fatal == 1;
		}
		a->sum->n_regions++;
		a->sum->n_capturable += r->capturable;
		a->sum->n_split += r->parent != 0;
	}
	sqlite3_finalize(sr);
	sqlite3_finalize(so);
	sqlite3_finalize(sb);
	kp_strbuf_release(&s1);
	kp_strbuf_release(&s2);
	return rc;
}

static int store_gaps(struct kp__ana *a, struct kp_err *err)
{
	static const char sql[] = "INSERT INTO kp_gaps (runId, deviceId, streamId,"
		" correlationId, kernel_start, gap_ns, host_bound, queue_ns, launch_api_ns)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
	size_t n_gaps = 0, room;
	int64_t thr = INT64_MIN;
	sqlite3_stmt *st;
	int rc;

	for (size_t i = 0; i < a->n_ops; i++)
		n_gaps += a->ops[i].gap >= 0;
	room = (size_t)a->o.gap_rows_max;
	if (n_gaps > room) {
		/* keep the largest gaps: threshold at the room-th largest */
		int64_t *v = malloc(n_gaps * sizeof(*v));
		size_t m = 0;
		if (!v)
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		for (size_t i = 0; i < a->n_ops; i++)
			if (a->ops[i].gap >= 0)
				v[m++] = a->ops[i].gap;
		thr = room ? kp__nth(v, m, m - room) : INT64_MAX;
		free(v);
	}
	/* gaps above the threshold all go in; ties fill the rest */
	size_t ties = room;
	if (thr != INT64_MIN) {
		size_t above = 0;
		for (size_t i = 0; i < a->n_ops; i++)
			above += a->ops[i].gap > thr;
		ties = room - above;
	}
	rc = kp_db_prepare(a->db, sql, &st, err);
	if (rc)
		return rc;
	size_t written = 0;
	for (size_t i = 0; i < a->n_ops && !rc && written < room; i++) {
		const struct kp__op *op = &a->ops[a->ord[i]];
		const struct kp__stream *s = &a->streams.data[op->stream];
		if (op->gap < 0 || op->gap < thr)
			continue;
		if (op->gap == thr && thr != INT64_MIN) {
			if (!ties)
				continue;
			ties--;
		}
		sqlite3_bind_int64(st, 1, a->run);
		sqlite3_bind_int64(st, 2, s->device_id);
		sqlite3_bind_int64(st, 3, s->stream_id);
		if (op->corr)
			sqlite3_bind_int64(st, 4, op->corr);
		sqlite3_bind_int64(st, 5, op->start);
		sqlite3_bind_int64(st, 6, op->gap);
		sqlite3_bind_int(st, 7, op->host_bound);
		if (op->has_api) {
			sqlite3_bind_int64(st, 8, op->start - op->api_start);
			sqlite3_bind_int64(st, 9, op->api_dur);
		}
		rc = step_reset(a, st, "writing kp_gaps", err);
		written++;
	}
	sqlite3_finalize(st);
	a->sum->n_gap_rows = (int64_t)written;
	return rc;
}

static int store_fusion(struct kp__ana *a, struct kp_err *err)
{
	static const char sql[] = "INSERT INTO kp_fusion_candidates (runId, candId,"
		" regionId, streamId, first_correlationId, occurrences, n_kernels,"
		" kernel_names, pattern, dur_ns, saved_bytes, saved_nodes, penalty_ns,"
		" score, feasible, reason, dependence, aten_chain, torch_verdict) VALUES (?1, ?2,"
		" ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)";
	sqlite3_stmt *st;
	int rc = kp_db_prepare(a->db, sql, &st, err);

	for (size_t i = 0; i < a->cands.len && !rc; i++) {
		const struct kp__cand *c = &a->cands.data[i];
		sqlite3_bind_int64(st, 1, a->run);
		sqlite3_bind_int64(st, 2, (int64_t)i + 1);
		if (c->region)
			sqlite3_bind_int(st, 3, a->regions.data[c->region - 1]->id);
		sqlite3_bind_int64(st, 4, c->stream_id);
		if (a->ops[c->first_op].corr)
			sqlite3_bind_int64(st, 5, a->ops[c->first_op].corr);
		sqlite3_bind_int64(st, 6, c->occurrences);
		sqlite3_bind_int(st, 7, c->n);
		sqlite3_bind_text(st, 8, c->names, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, c->pattern, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 10, c->dur);
		sqlite3_bind_int64(st, 11, c->saved_bytes);
		sqlite3_bind_int64(st, 12, c->saved_nodes);
		sqlite3_bind_int64(st, 13, c->penalty);
		sqlite3_bind_double(st, 14, c->score);
		sqlite3_bind_int(st, 15, c->feasible);
		bind_opt_text(st, 16, c->reason);
		sqlite3_bind_text(st, 17, c->dependence, -1, SQLITE_STATIC);
		bind_opt_text(st, 18, c->aten_chain);
		bind_opt_text(st, 19, c->torch_verdict);
		rc = step_reset(a, st, "writing kp_fusion_candidates", err);
	}
	sqlite3_finalize(st);
	return rc;
}

int kp__store(struct kp__ana *a, struct kp_err *err)
{
	static const char *const tables[] = {
		"kp_regions", "kp_region_occurrences", "kp_blockers", "kp_gaps",
		"kp_fusion_candidates",
	};
	char sql[128];
	int rc = kp_db_begin(a->db, err);

	if (rc)
		return rc;
	for (size_t t = 0; t < sizeof(tables) / sizeof(*tables) && !rc; t++) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE runId = %lld", tables[t],
			 (long long)a->run);
		rc = kp_db_exec(a->db, sql, err);
	}
	if (!rc)
		rc = store_regions(a, err);
	if (!rc)
		rc = store_gaps(a, err);
	if (!rc)
		rc = store_fusion(a, err);
	if (!rc)
		rc = kp_db_commit(a->db, err);
	else
		kp_db_rollback(a->db);
	return rc;
}

static void count_regions(struct kp__ana *a)
{
	for (size_t i = 0; i < a->regions.len; i++) {
		struct kp__region *r = a->regions.data[i];
		int fatal = 0;
		for (size_t b = 0; b < r->blk.len; b++) {
			fatal |= r->blk.data[b].fatal;
			a->sum->n_blockers += r->blk.data[b].fatal;
		}
		if (fatal)
			r->capturable = 0;
		a->sum->n_regions++;
		a->sum->n_capturable += r->capturable;
		a->sum->n_split += r->parent != 0;
	}
}

int kp_analyze(struct kp_db *db, const struct kp_analyze_opts *o,
	       struct kp_analysis_summary *sum, struct kp_err *err)
{
	struct kp_analysis_summary local;
	struct kp__ana a;
	int64_t t0 = kp_now_ns();
	char sql[160];
	int rc;

	memset(&a, 0, sizeof(a));
	if (!sum)
		sum = &local;
	memset(sum, 0, sizeof(*sum));
	a.db = db;
	a.sum = sum;
	if (o)
		a.o = *o;
	else
		kp_analyze_opts_init(&a.o);
	if (a.o.gap_rows_max <= 0)
		a.o.gap_rows_max = 1000000;
	if (a.o.min_period < 1)
		a.o.min_period = 2;
	a.run = a.o.run_id ? a.o.run_id : kp_db_default_run(db);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM kp_runs WHERE runId = %lld",
		 (long long)a.run);
	if (!a.run || kp_db_int(db, sql, 0) == 0) {
		if (!a.run)
			return kp_err_set(err, KP_ENOTFOUND, "%s: no runs in the database", db->path);
		return kp_err_set(err, KP_ENOTFOUND, "%s: no run %lld (see kplan info)",
				  db->path, (long long)a.run);
	}
	sum->run_id = a.run;
	kp_arena_init(&a.arena);
	kp_u64map_init(&a.sigmap);
	kp_u64map_init(&a.namemap);
	kp_u64map_init(&a.graph_ids);
	rc = kp_cost_load_run(db, a.run, &a.cost, err);
	/*
	 * The runtime's watch costs once per process: it counts against the
	 * regions only when the trace is a whole process (kplan record with no
	 * capture window), whose occurrences are the run's. A profiler trace
	 * or a window is a sample of a longer run.
	 */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM kp_runs WHERE runId = %lld AND"
		 " source = 'record' AND (note IS NULL OR note NOT LIKE '%%capture window%%')",
		 (long long)a.run);
	if (kp_db_int(db, sql, 0) == 0)
		a.cost.v[KP_COST_WATCH] = 0;
	sum->cost = a.cost;
	snprintf(sql, sizeof(sql), "SELECT maxShmemPerBlock FROM TARGET_INFO_GPU"
		 " WHERE runId = %lld ORDER BY id LIMIT 1", (long long)a.run);
	a.smem_limit = kp_db_int(db, sql, 0);
	if (a.smem_limit <= 0)
		a.smem_limit = 49152;
#define PHASE(what) kp_debug("analyze: %-12s %.3f s", what, (double)(kp_now_ns() - t0) / 1e9)
	if (!rc)
		rc = kp__load(&a, err);
	PHASE("load");
	if (!rc)
		rc = kp__load_args(&a, err);
	if (!rc)
		rc = kp__load_attrs(&a, err);
	if (!rc && !a.o.no_nvtx) {
		rc = kp__regions_nvtx(&a, err);
		if (a.regions.len)
			sum->regions_from = 1;
	}
	if (!rc && (!a.regions.len || a.o.mine)) {
		size_t before = a.regions.len;
		rc = kp__regions_mine(&a, err);
		if (a.regions.len > before && !sum->regions_from)
			sum->regions_from = 2;
	}
	if (!rc)
		rc = kp__regions_graphs(&a, err);
	PHASE("regions");
	if (!rc)
		rc = kp__capturability(&a, err);
	PHASE("capture");
	if (!rc)
		rc = kp__fusion(&a, err);
	PHASE("fusion");
	if (!rc && !a.o.dry_run)
		rc = kp__store(&a, err);
	else if (!rc)
		count_regions(&a);
	PHASE("store");
#undef PHASE
	sum->seconds = (double)(kp_now_ns() - t0) / 1e9;

	for (size_t i = 0; i < a.regions.len; i++)
		kp_vec_release(&a.regions.data[i]->blk);
	kp_vec_release(&a.regions);
	kp_vec_release(&a.cands);
	kp__src_free(&a);
	kp_vec_release(&a.sigs);
	kp_vec_release(&a.streams);
	kp_vec_release(&a.names);
	kp_u64map_release(&a.sigmap);
	kp_u64map_release(&a.namemap);
	kp_u64map_release(&a.graph_ids);
	free(a.ops);
	free(a.ord);
	free(a.by_cpu);
	free(a.ev);
	free(a.rec);
	free(a.hostfn);
	free(a.args);
	kp_arena_release(&a.arena);
	return rc;
}

int kp_analysis_stored(struct kp_db *db, int64_t run_id)
{
	char sql[256];

	if (run_id <= 0)
		run_id = kp_db_default_run(db);
	if (run_id <= 0 || !kp_db_has_table(db, "kp_regions") || !kp_db_has_table(db, "kp_gaps"))
		return 0;
	snprintf(sql, sizeof(sql), "SELECT EXISTS (SELECT 1 FROM kp_regions WHERE runId = %lld)"
		 " OR EXISTS (SELECT 1 FROM kp_gaps WHERE runId = %lld)",
		 (long long)run_id, (long long)run_id);
	return kp_db_int(db, sql, 0) == 1;
}

static int csv_to(struct kp_db *db, const char *dir, const char *name,
		  const char *sql, struct kp_err *err)
{
	char path[4096];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return kp_err_set(err, KP_EIO, "%s: cannot write: %s", path, strerror(errno));
	rc = kp_csv_query(db, sql, f, NULL, err);
	if (fclose(f) && !rc)
		rc = kp_err_set(err, KP_EIO, "%s: write failed: %s", path, strerror(errno));
	if (rc)
		kp_err_prefix(err, "%s", path);
	return rc;
}

/*
 * The analysis tables as CSV (`kplan analyze --csv`, and the report's CSV
 * set): one definition, units in the column names. %lld is the run id.
 */
static const struct { const char *file, *sql; } csv_files[] = {
	{ "regions.csv",
	  "SELECT regionId AS region_id, parentId AS parent_id, label, source, streamId AS stream_id,"
	  " occurrences, kernels, nodes, eager_ns / 1000.0 AS eager_us, busy_ns / 1000.0 AS busy_us,"
	  " host_idle_ns / 1000.0 AS host_idle_us, device_idle_ns / 1000.0 AS device_idle_us,"
	  " queue_p50_ns / 1000.0 AS queue_p50_us, launch_api_p50_ns / 1000.0 AS launch_api_p50_us,"
	  " graph_ns_pred / 1000.0 AS graph_us_pred, graph_ns_lo / 1000.0 AS graph_us_lo,"
	  " graph_ns_hi / 1000.0 AS graph_us_hi, speedup_pred, capturable, blockers, advisories,"
	  " (SELECT group_concat(x, '; ') FROM (SELECT b.kind"
	  "   || CASE WHEN b.fatal THEN '' ELSE ' (advisory)' END || coalesce(': ' || b.api_name, '')"
	  "   || CASE WHEN count(*) > 1 THEN ' x' || count(*) ELSE '' END AS x"
	  "   FROM kp_blockers b WHERE b.runId = r.runId AND b.regionId = r.regionId"
	  "   GROUP BY b.kind, b.fatal, b.api_name"
	  "   ORDER BY b.fatal DESC, count(*) DESC, b.kind, b.api_name)) AS blocker_calls,"
	  " one_time_ns / 1000.0 AS one_time_us, break_even, extra_mem_bytes, shape_keys,"
	  " patch_slots, fingerprint, edge_ns / 1000.0 AS edge_us"
	  " FROM kp_regions r WHERE runId = %lld ORDER BY regionId" },
	{ "gaps.csv",
	  "SELECT deviceId AS device_id, streamId AS stream_id, correlationId AS correlation_id,"
	  " kernel_start AS kernel_start_ns, gap_ns / 1000.0 AS gap_us, host_bound,"
	  " queue_ns / 1000.0 AS queue_us, launch_api_ns / 1000.0 AS launch_api_us"
	  " FROM kp_gaps WHERE runId = %lld ORDER BY rowid" },
	{ "fusion.csv",
	  "SELECT candId AS cand_id, regionId AS region_id, streamId AS stream_id,"
	  " first_correlationId AS first_correlation_id, occurrences, n_kernels, kernel_names,"
	  " pattern, dur_ns / 1000.0 AS dur_us, saved_bytes, saved_nodes,"
	  " penalty_ns / 1000.0 AS penalty_us, score AS score_ns, feasible, reason, dependence,"
	  " aten_chain, torch_verdict"
	  " FROM kp_fusion_candidates WHERE runId = %lld ORDER BY candId" },
	{ "blockers.csv",
	  "SELECT b.regionId AS region_id, r.label, b.kind, b.fatal, b.api_name,"
	  " b.start AS start_ns, b.correlationId AS correlation_id, b.occIndex AS occurrence,"
	  " b.position, b.detail, b.cpu_op, b.py_frame, b.cost_ns / 1000.0 AS cost_us"
	  " FROM kp_blockers b"
	  " JOIN kp_regions r ON r.runId = b.runId AND r.regionId = b.regionId"
	  " WHERE b.runId = %lld ORDER BY b.regionId, b.start" },
};

int kp_analyze_write_csv(struct kp_db *db, int64_t run_id, const char *dir,
			 struct kp_err *err)
{
	char sql[2048];
	size_t i;
	int rc = 0;

	if (mkdir(dir, 0777) && errno != EEXIST)
		return kp_err_set(err, KP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
	for (i = 0; i < sizeof(csv_files) / sizeof(csv_files[0]) && !rc; i++) {
		snprintf(sql, sizeof(sql), csv_files[i].sql, (long long)run_id);
		rc = csv_to(db, dir, csv_files[i].file, sql, err);
	}
	return rc;
}

/* The first blocker row of region id with fatal = `fatal` (and kind, when
 * not NULL), as one indented line. */
static void print_first_blocker(struct kp_db *db, int64_t run_id, int id, int fatal,
				const char *kind, const char *what, FILE *f)
{
	static const char sql[] = "SELECT kind, COALESCE(api_name, ''), occIndex, position,"
		" COALESCE(detail, ''), (SELECT COUNT(DISTINCT occIndex) FROM kp_blockers b2"
		" WHERE b2.runId = ?1 AND b2.regionId = ?2 AND b2.fatal = ?3"
		" AND (?4 IS NULL OR b2.kind = ?4))"
		" FROM kp_blockers WHERE runId = ?1 AND regionId = ?2 AND fatal = ?3"
		" AND (?4 IS NULL OR kind = ?4) ORDER BY occIndex, start LIMIT 1";
	char api[256], detail[2048];
	sqlite3_stmt *st;

	if (kp_db_prepare(db, sql, &st, NULL))
		return;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int(st, 2, id);
	sqlite3_bind_int(st, 3, fatal);
	if (kind)
		sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
	/* the call and the detail (kernel names) come from the trace */
	if (sqlite3_step(st) == SQLITE_ROW)
		fprintf(f, "       %s %s (%s) in %lld occurrence(s), first occurrence %lld node "
			"%lld: %s\n", what, (const char *)sqlite3_column_text(st, 0),
			kp_printable(api, sizeof(api), (const char *)sqlite3_column_text(st, 1)),
			(long long)sqlite3_column_int64(st, 5), (long long)sqlite3_column_int64(st, 2),
			(long long)sqlite3_column_int64(st, 3),
			kp_printable(detail, sizeof(detail), (const char *)sqlite3_column_text(st, 4)));
	sqlite3_finalize(st);
}

void kp_analyze_print_fusion(struct kp_db *db, int64_t run_id, FILE *f, int max)
{
	sqlite3_stmt *st;
	char chain[400], shown[1600], aten[8200];
	char sql[512];

	/* the ATen view: schema v7, a PyTorch trace recorded with shapes */
	snprintf(sql, sizeof(sql), "SELECT candId, coalesce(regionId, -1), n_kernels, kernel_names,"
		 " coalesce(score, 0), feasible, %s FROM kp_fusion_candidates WHERE runId = ?1"
		 " ORDER BY feasible DESC, coalesce(score, 0) DESC, candId LIMIT ?2",
		 kp_db_has_column(db, "kp_fusion_candidates", "aten_chain")
		 ? "aten_chain, torch_verdict" : "NULL, NULL");
	if (kp_db_prepare(db, sql, &st, NULL))
		return;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int(st, 2, max);
	fprintf(f, "best fusion candidates (kplan report lists all):\n");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *at = (const char *)sqlite3_column_text(st, 6);

		fprintf(f, "  %4lld region %lld, %lld kernels, %.1f us saved%s: %s\n",
			(long long)sqlite3_column_int64(st, 0), (long long)sqlite3_column_int64(st, 1),
			(long long)sqlite3_column_int64(st, 2), sqlite3_column_double(st, 4) / 1e3,
			sqlite3_column_int(st, 5) ? "" : " (not feasible)",
			kp_printable(shown, sizeof(shown),
				     kp_kernel_chain_label((const char *)sqlite3_column_text(st, 3),
							   chain, sizeof(chain))));
		if (at) {
			const char *v = (const char *)sqlite3_column_text(st, 7);

			fprintf(f, "       ATen: %s\n", kp_printable(aten, sizeof(aten), at));
			fprintf(f, "       %s\n", kp_printable(shown, sizeof(shown), v ? v : ""));
		}
	}
	sqlite3_finalize(st);
}

int kp_analyze_print_regions(struct kp_db *db, int64_t run_id, FILE *f,
			     int max_rows, struct kp_err *err)
{
	static const char sql[] = "SELECT regionId, parentId, label, occurrences, nodes,"
		" eager_ns, graph_ns_pred, speedup_pred, capturable, blockers, source,"
		" CASE WHEN eager_ns > 0 THEN 100.0 * host_idle_ns / eager_ns END, %s"
		" FROM kp_regions WHERE runId = ?1 ORDER BY regionId LIMIT ?2";
	char q[sizeof(sql) + 32];
	sqlite3_stmt *st;
	int rc;

	/* a database read before v5 has no interval */
	snprintf(q, sizeof(q), sql, kp_db_has_column(db, "kp_regions", "graph_ns_hi")
		 ? "graph_ns_lo, graph_ns_hi" : "NULL, NULL");
	rc = kp_db_prepare(db, q, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int(st, 2, max_rows > 0 ? max_rows : 1000000);
	fprintf(f, "%4s %-32s %-7s %6s %6s %11s %6s %11s %17s %7s %4s  %s\n", "id", "region",
		"source", "occ", "nodes", "eager_us", "host%", "graph_us", "interval_us", "speedup",
		"capt", "blockers");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *label = (const char *)sqlite3_column_text(st, 2);
		const char *bl = (const char *)sqlite3_column_text(st, 9);
		const char *src = (const char *)sqlite3_column_text(st, 10);
		int id = sqlite3_column_int(st, 0), part = sqlite3_column_type(st, 1) != SQLITE_NULL;
		char lab[64], shown[31];

		snprintf(lab, sizeof(lab), "%s%s", part ? "  " : "",
			 kp_printable(shown, sizeof(shown), label));
		/* host%: the region's host-bound idle per call, as the plan's reason says it */
		char graph[16] = "-", speed[16] = "-", range[40] = "-";

		if (sqlite3_column_type(st, 6) != SQLITE_NULL) {
			snprintf(graph, sizeof(graph), "%.1f", sqlite3_column_int64(st, 6) / 1000.0);
			snprintf(speed, sizeof(speed), "%.2fx", sqlite3_column_double(st, 7));
		}
		if (sqlite3_column_type(st, 13) != SQLITE_NULL)
			snprintf(range, sizeof(range), "%.0f-%.0f", sqlite3_column_int64(st, 12) / 1000.0,
				 sqlite3_column_int64(st, 13) / 1000.0);
		fprintf(f, "%4d %-32s %-7s %6lld %6lld %11.1f %6.1f %11s %17s %7s %4s  %s\n",
			id, lab, src ? src : "-",
			(long long)sqlite3_column_int64(st, 3), (long long)sqlite3_column_int64(st, 4),
			sqlite3_column_int64(st, 5) / 1000.0, sqlite3_column_double(st, 11),
			graph, range, speed, sqlite3_column_int(st, 8) ? "yes" : "no", bl ? bl : "-");
		if (!part && !sqlite3_column_int(st, 8))
			print_first_blocker(db, run_id, id, 1, NULL, "fatal:", f);
		if (!part)
			print_first_blocker(db, run_id, id, 0, "capture_path", "graph path:", f);
		if (!part)
			print_first_blocker(db, run_id, id, 2, NULL, "warm-up only:", f);
		if (sqlite3_column_type(st, 6) == SQLITE_NULL)
			print_first_blocker(db, run_id, id, 0, "graph_replay", "already a graph:", f);
	}
	sqlite3_finalize(st);
	return 0;
}
