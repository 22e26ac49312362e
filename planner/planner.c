/*
 * planner.c - analysis tables to struct kp_plan, and kp_plans bookkeeping.
 *
 * Everything comes from the database (the analyzer's tables and the trace),
 * read in a fixed order, so the same database gives the same plan. No
 * analyzer code is used: its results are read from its tables.
 */
#include "planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/hash.h"
#include "../common/kptime.h"
#include "../common/log.h"
#include "../common/printable.h"
#include "../common/strbuf.h"
#include "../common/vec.h"
#include "../common/version.h"
#include "../plan/predict.h"
#include "planner_internal.h"

#define DEFAULT_WARMUP KP_PLAN_DEFAULT_WARMUP
#define DEFAULT_MIN_GAIN 0.05
#define PATCH_MAX_OCC 64            /* occurrences compared for patch slots */
#define PATCH_MAX_KERNELS 200000    /* larger regions are not scanned */

void kp_planner_opts_init(struct kp_planner_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->warmup = -1;
	o->min_gain = -1;
	o->run_length = 1;
	o->cc_major = o->cc_minor = o->cuda_major = -1;
	o->sm_count = o->driver_version = -1;
}

double kp__planner_run_length(const struct kp_planner_opts *o)
{
	double x = o->run_length;

	return x >= KP_PLAN_RUN_LENGTH_MIN && x <= KP_PLAN_RUN_LENGTH_MAX ? x : 1.0;
}

/* One kp_regions row and what the planner makes of it. */
struct reg {
	int64_t id, parent_id;      /* parent_id < 0: none */
	int64_t stream;             /* < 0: any stream */
	int64_t occ, kernels, eager, host_idle, graph, one_time, break_even;
	int64_t occ_run;            /* calls in the run the plan is for (occ x run length) */
	int64_t extra_mem, shape_keys, patch_count, nodes;
	int64_t graph_lo, graph_hi;  /* the interval, where the captured path may differ; else 0 */
	int has_graph, has_one_time, has_break_even, capturable, n_parts;
	int runtime;                /* source "runtime": entered through libkplanrt */
	int own_graph;              /* source "graph": the program replays it itself */
	int warmup;                 /* warm-up calls this region needs (blockers
				       seen only in its first occurrences) */
	double speedup;
	char *label, *blockers, *fp;
	int64_t saving;             /* predicted ns saved over the run when graphed */
	struct kp_plan_region *out; /* in plan->regions; NULL when skipped */
};

struct ctx {
	struct kp_db *db;
	struct kp_err *err;
	int64_t run;
	int warmup;
	double min_gain;
	double run_length;          /* the run the plan is for / the recorded one (1: same) */
	struct kp_plan *plan;
	struct reg *regs;
	size_t n_regs;
	int have_args;              /* kp_launch_args has rows for the run */
};

static char *col_str(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s ? strdup((const char *)s) : NULL;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* A string the plan file accepts: no control characters, bounded length. */
static char *clean_str(const char *s, size_t max)
{
	size_t i, n = s ? strlen(s) : 0;
	char *d;

	if (n > max)
		n = max;
	d = malloc(n + 1);
	if (!d)
		return NULL;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		d[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	d[n] = '\0';
	return d;
}

static int prep(struct ctx *c, const char *sql, sqlite3_stmt **st)
{
	return kp_db_prepare(c->db, sql, st, c->err);
}

static int step_err(struct ctx *c, sqlite3_stmt *st, const char *what)
{
	int rc = kp_db_error(c->db, c->err, what);

	sqlite3_finalize(st);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* run row: hard and soft keys, info */

static void iso_date(int64_t ns, char *out, size_t n)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (ns <= 0 || !gmtime_r(&t, &tm) || !strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
		out[0] = '\0';
}

static int load_run(struct ctx *c, const struct kp_planner_opts *o)
{
	struct kp_plan *pl = c->plan;
	sqlite3_stmt *st;
	char date[40];
	int rc, cc_major = -1, cc_minor = -1, runtime_v = 0;
	int64_t t0, t1;
	char *name = NULL;

	if ((rc = prep(c, "SELECT created_ns, source, device_name, compute_major, compute_minor, "
		       "sm_count, driver_version, runtime_version, t_begin_ns, t_end_ns "
		       "FROM kp_runs WHERE runId = ?", &st)))
		return rc;
	sqlite3_bind_int64(st, 1, c->run);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_finalize(st);
		return kp_err_set(c->err, KP_ENOTFOUND, "%s: no run %lld (see 'kplan info %s')",
				  c->db->path, (long long)c->run, c->db->path);
	}
	if (rc != SQLITE_ROW)
		return step_err(c, st, "reading kp_runs");
	iso_date(kp_db_col_i64(st, 0, 0), date, sizeof(date));
	pl->date = strdup(date);
	pl->source_kind = clean_str((const char *)sqlite3_column_text(st, 1), 64);
	name = col_str(st, 2);
	cc_major = (int)kp_db_col_i64(st, 3, -1);
	cc_minor = (int)kp_db_col_i64(st, 4, -1);
	pl->sm_count = (int)clamp(kp_db_col_i64(st, 5, 0), 0, 100000);
	pl->driver_version = (int)clamp(kp_db_col_i64(st, 6, 0), 0, 10000000);
	runtime_v = (int)kp_db_col_i64(st, 7, 0);
	t0 = kp_db_col_i64(st, 8, 0);
	t1 = kp_db_col_i64(st, 9, 0);
	pl->run_eager_ns = t1 > t0 ? t1 - t0 : 0;
	sqlite3_finalize(st);

	/* a run without device fields: TARGET_INFO_GPU (nsys exports carry it there) */
	if ((cc_major < 0 || !name || !pl->sm_count) && kp_db_has_table(c->db, "TARGET_INFO_GPU")) {
		if ((rc = prep(c, "SELECT name, computeMajor, computeMinor, smCount FROM TARGET_INFO_GPU "
			       "WHERE runId = ? ORDER BY id LIMIT 1", &st)))
			goto out;
		sqlite3_bind_int64(st, 1, c->run);
		if (sqlite3_step(st) == SQLITE_ROW) {
			if (!name)
				name = col_str(st, 0);
			if (cc_major < 0) {
				cc_major = (int)kp_db_col_i64(st, 1, -1);
				cc_minor = (int)kp_db_col_i64(st, 2, -1);
			}
			if (!pl->sm_count)
				pl->sm_count = (int)clamp(kp_db_col_i64(st, 3, 0), 0, 100000);
		}
		sqlite3_finalize(st);
	}
	if (o->sm_count >= 0)
		pl->sm_count = (int)clamp(o->sm_count, 0, 100000);
	if (o->driver_version >= 0)
		pl->driver_version = (int)clamp(o->driver_version, 0, 10000000);
	pl->gpu_name = clean_str(o->gpu_name ? o->gpu_name : name, 256);
	pl->tool_version = strdup(KP_VERSION);
	if (!pl->date || !pl->source_kind || !pl->gpu_name || !pl->tool_version) {
		rc = kp_err_set(c->err, KP_ENOMEM, "out of memory");
		goto out;
	}
	if (o->cc_major >= 0) {
		cc_major = o->cc_major;
		cc_minor = o->cc_minor < 0 ? 0 : o->cc_minor;
	}
	if (cc_major < 1 || cc_major > 99 || cc_minor < 0 || cc_minor > 9) {
		rc = kp_err_set(c->err, KP_EFORMAT, "%s: run %lld records no valid compute capability "
				"(found %d.%d); pass --cc MAJOR.MINOR", c->db->path, (long long)c->run,
				cc_major, cc_minor);
		goto out;
	}
	pl->cc_major = cc_major;
	pl->cc_minor = cc_minor;
	pl->cuda_major = o->cuda_major > 0 ? o->cuda_major :
			 runtime_v > 0 ? runtime_v / 1000 : pl->driver_version / 1000;
	if (pl->cuda_major < 1 || pl->cuda_major > 99) {
		rc = kp_err_set(c->err, KP_EFORMAT, "%s: run %lld records no CUDA runtime or driver "
				"version; pass --cuda-major N", c->db->path, (long long)c->run);
		goto out;
	}
	rc = 0;
out:
	free(name);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* regions */

static int load_regions(struct ctx *c)
{
	sqlite3_stmt *st;
	size_t cap = 0;
	int rc;

	static const char sql[] = "SELECT regionId, parentId, label, streamId, occurrences, kernels, "
		"eager_ns, host_idle_ns, graph_ns_pred, speedup_pred, capturable, blockers, "
		"one_time_ns, break_even, extra_mem_bytes, fingerprint, shape_keys, patch_slots, nodes, "
		"source, %s FROM kp_regions WHERE runId = ? ORDER BY regionId";
	char q[sizeof(sql) + 160];

	/* the interval of a region whose captured path may differ (schema v5) */
	snprintf(q, sizeof(q), sql, kp_db_has_column(c->db, "kp_regions", "graph_ns_hi")
		 ? "CASE WHEN advisories LIKE '%capture_path%' THEN graph_ns_lo END,"
		   " CASE WHEN advisories LIKE '%capture_path%' THEN graph_ns_hi END" : "NULL, NULL");
	if ((rc = prep(c, q, &st)))
		return rc;
	sqlite3_bind_int64(st, 1, c->run);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct reg *r;

		if (c->n_regs == cap) {
			struct reg *n = realloc(c->regs, (cap = cap ? cap * 2 : 16) * sizeof(*n));

			if (!n) {
				sqlite3_finalize(st);
				return kp_err_set(c->err, KP_ENOMEM, "out of memory");
			}
			c->regs = n;
		}
		r = &c->regs[c->n_regs++];
		memset(r, 0, sizeof(*r));
		r->id = sqlite3_column_int64(st, 0);
		r->parent_id = kp_db_col_i64(st, 1, -1);
		r->label = clean_str((const char *)sqlite3_column_text(st, 2), 200);
		r->stream = kp_db_col_i64(st, 3, -1);
		r->occ = clamp(kp_db_col_i64(st, 4, 0), 0, 1000000000);
		r->occ_run = kp_plan_scaled_occ(r->occ, c->run_length);
		r->kernels = kp_db_col_i64(st, 5, 0);
		r->eager = clamp(kp_db_col_i64(st, 6, 0), 0, KP_PLAN_MAX_NS);
		r->host_idle = clamp(kp_db_col_i64(st, 7, 0), 0, KP_PLAN_MAX_NS);
		r->has_graph = sqlite3_column_type(st, 8) != SQLITE_NULL;
		r->graph = clamp(kp_db_col_i64(st, 8, 0), 0, KP_PLAN_MAX_NS);
		r->speedup = sqlite3_column_type(st, 9) == SQLITE_NULL ? 0 : sqlite3_column_double(st, 9);
		r->capturable = (int)kp_db_col_i64(st, 10, 0);
		r->blockers = clean_str((const char *)sqlite3_column_text(st, 11), 200);
		r->has_one_time = sqlite3_column_type(st, 12) != SQLITE_NULL;
		r->one_time = clamp(kp_db_col_i64(st, 12, 0), 0, KP_PLAN_MAX_NS);
		r->has_break_even = sqlite3_column_type(st, 13) != SQLITE_NULL;
		r->break_even = clamp(kp_db_col_i64(st, 13, 0), 0, 1000000000);
		r->extra_mem = clamp(kp_db_col_i64(st, 14, 0), 0, KP_PLAN_MAX_BYTES);
		r->fp = col_str(st, 15);
		r->shape_keys = clamp(kp_db_col_i64(st, 16, 1), 1, 1024);
		r->patch_count = kp_db_col_i64(st, 17, 0);
		r->nodes = kp_db_col_i64(st, 18, 0);
		r->runtime = sqlite3_column_text(st, 19) &&
			     !strcmp((const char *)sqlite3_column_text(st, 19), "runtime");
		r->own_graph = sqlite3_column_text(st, 19) &&
			       !strcmp((const char *)sqlite3_column_text(st, 19), "graph");
		r->graph_lo = clamp(kp_db_col_i64(st, 20, 0), 0, KP_PLAN_MAX_NS);
		r->graph_hi = clamp(kp_db_col_i64(st, 21, 0), 0, KP_PLAN_MAX_NS);
		if (!r->label || !r->blockers) {
			sqlite3_finalize(st);
			return kp_err_set(c->err, KP_ENOMEM, "out of memory");
		}
		if (!(r->speedup >= 0 && r->speedup <= 1e6))
			r->speedup = 0;
	}
	if (rc != SQLITE_DONE)
		return step_err(c, st, "reading kp_regions");
	sqlite3_finalize(st);
	if (!c->n_regs)
		return kp_err_set(c->err, KP_ENOTFOUND, "%s: run %lld has no regions "
				  "(run 'kplan analyze %s' first)", c->db->path, (long long)c->run,
				  c->db->path);
	return 0;
}

static struct reg *find_reg(struct ctx *c, int64_t id)
{
	size_t i;

	for (i = 0; i < c->n_regs; i++) {
		if (c->regs[i].id == id)
			return &c->regs[i];
	}
	return NULL;
}

/* kp_regions.fingerprint as 64 bits: hex as is, other text hashed. */
static uint64_t parse_fp(const char *s)
{
	const char *p = s;
	uint64_t v = 0;
	size_t n = 0;

	if (!s || !*s)
		return 0;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	for (; p[n]; n++) {
		char ch = p[n];
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
			ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;

		if (d < 0 || n >= 16)
			return kp_hash_str(s);
		v = v << 4 | (uint64_t)d;
	}
	return n ? v : kp_hash_str(s);
}

/* Fingerprint from the first occurrence's signature when the region has none. */
static uint64_t occ_fingerprint(struct ctx *c, int64_t region)
{
	sqlite3_stmt *st;
	uint64_t fp = 0;

	if (kp_db_prepare(c->db, "SELECT signature FROM kp_region_occurrences WHERE runId = ? "
			  "AND regionId = ? AND signature IS NOT NULL ORDER BY occIndex LIMIT 1", &st, NULL))
		return 0;
	sqlite3_bind_int64(st, 1, c->run);
	sqlite3_bind_int64(st, 2, region);
	if (sqlite3_step(st) == SQLITE_ROW)
		fp = parse_fp((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return fp;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The distinct occurrence fingerprints (one per shape key), ascending. */
static int load_shapes(struct ctx *c, const struct reg *r, struct kp_plan_region *o)
{
	sqlite3_stmt *st;
	size_t n = 0, i;
	uint64_t *v;
	int rc;

	v = malloc(KP_PLAN_MAX_SHAPES * sizeof(*v));
	if (!v)
		return kp_err_set(c->err, KP_ENOMEM, "out of memory");
	if ((rc = prep(c, "SELECT DISTINCT signature FROM kp_region_occurrences WHERE runId = ? "
		       "AND regionId = ? AND signature IS NOT NULL", &st))) {
		free(v);
		return rc;
	}
	sqlite3_bind_int64(st, 1, c->run);
	sqlite3_bind_int64(st, 2, r->id);
	while (n < KP_PLAN_MAX_SHAPES && sqlite3_step(st) == SQLITE_ROW)
		v[n++] = parse_fp((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	qsort(v, n, sizeof(*v), cmp_u64);
	o->n_shapes = 0;
	for (i = 0; i < n && o->n_shapes < o->shape_keys; i++) {
		if (!o->n_shapes || v[i] != v[o->n_shapes - 1])
			v[o->n_shapes++] = v[i];
	}
	if (!o->n_shapes) {
		free(v);
		return 0;
	}
	o->shapes = v;
	return 0;
}

/*
 * "legacy_stream x60 (cudaLaunchKernel), sync x1 (cudaStreamSynchronize);
 * first: occurrence 0 node 12: <detail with the fix>" from kp_blockers.
 */
static void blocker_text(struct ctx *c, const struct reg *r, struct kp_strbuf *sb)
{
	sqlite3_stmt *st;
	int n = 0;

	if (kp_db_has_table(c->db, "kp_blockers") &&
	    !kp_db_prepare(c->db, "SELECT kind, COUNT(*), MIN(api_name) FROM kp_blockers "
			   "WHERE runId = ? AND regionId = ? AND fatal = 1 GROUP BY kind ORDER BY kind", &st, NULL)) {
		sqlite3_bind_int64(st, 1, c->run);
		sqlite3_bind_int64(st, 2, r->id);
		while (sqlite3_step(st) == SQLITE_ROW && n < 6) {
			const unsigned char *api = sqlite3_column_text(st, 2);

			kp_strbuf_addf(sb, "%s%s x%lld", n++ ? ", " : "",
				       (const char *)sqlite3_column_text(st, 0),
				       (long long)sqlite3_column_int64(st, 1));
			if (api)
				kp_strbuf_addf(sb, " (%s)", (const char *)api);
		}
		sqlite3_finalize(st);
	}
	if (!n) {
		kp_strbuf_adds(sb, r->blockers[0] ? r->blockers : "unspecified blocker");
		return;
	}
	if (!kp_db_prepare(c->db, "SELECT occIndex, detail FROM kp_blockers WHERE runId = ? "
			   "AND regionId = ? AND fatal = 1 AND detail IS NOT NULL "
			   "ORDER BY occIndex, start LIMIT 1", &st, NULL)) {
		sqlite3_bind_int64(st, 1, c->run);
		sqlite3_bind_int64(st, 2, r->id);
		if (sqlite3_step(st) == SQLITE_ROW)
			kp_strbuf_addf(sb, "; first in occurrence %lld: %.600s",
				       (long long)sqlite3_column_int64(st, 0),
				       (const char *)sqlite3_column_text(st, 1));
		sqlite3_finalize(st);
	}
}

/*
 * Warm-up calls region r needs: blockers the analyzer saw only in its first
 * occurrences (kp_blockers.fatal = 2) must all fall in eager calls before
 * the one the runtime watches (the last warm-up call), so occurrences
 * 0..K-1 with them need K + 1 calls.
 */
static int region_warmup(struct ctx *c, const struct reg *r)
{
	sqlite3_stmt *st;
	int64_t last = -1;

	if (!kp_db_has_table(c->db, "kp_blockers") ||
	    kp_db_prepare(c->db, "SELECT MAX(occIndex) FROM kp_blockers WHERE runId = ? "
			  "AND regionId = ? AND fatal = 2", &st, NULL))
		return c->warmup;
	sqlite3_bind_int64(st, 1, c->run);
	sqlite3_bind_int64(st, 2, r->id);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		last = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	/* a blocker seen only in occurrence `last` (a lazy first-use set-up,
	 * DDP's timing events) must run eagerly: warm up past it, and one more
	 * call, so that the watched call before the capture is a clean one.
	 * The analyzer stores such blockers in the first 8 occurrences only;
	 * the bound holds against a database that says otherwise. */
	if (last > 1000)
		last = 1000;
	return last < 0 ? c->warmup : (int)(last + 2 > c->warmup ? last + 2 : c->warmup);
}

/* The decision for one region (before memory budgeting). */
static void decide(struct ctx *c, struct reg *r, struct kp_plan_region *o, struct kp_strbuf *why)
{
	char e[32], g[32], s[32];
	int64_t replays, gain;

	kp_fmt_dur(r->eager, e, sizeof(e));
	kp_fmt_dur(r->graph, g, sizeof(g));
	o->decision = KP_PLAN_EAGER;
	/* the tests run from what makes a graph impossible to what makes it
	 * not worth it, so that the reason given is the most fundamental one */
	if (!r->capturable) {
		o->reason = KP_PLAN_R_BLOCKER;
		if (r->n_parts) {
			o->decision = KP_PLAN_SPLIT;
			kp_strbuf_addf(why, "split into %d parts at: ", r->n_parts);
		} else {
			kp_strbuf_adds(why, "not capturable: ");
		}
		blocker_text(c, r, why);
		return;
	}
	if (!r->has_graph || r->eager == 0 || r->graph >= r->eager) {
		o->reason = KP_PLAN_R_PREDICTED_LOSS;
		if (r->own_graph)
			kp_strbuf_addf(why, "a graph already: the program replays it itself "
				       "(cudaGraphLaunch), %s per replay", e);
		else if (!r->has_graph || r->eager == 0)
			kp_strbuf_addf(why, "no graph-time prediction for %s eager", e);
		else
			kp_strbuf_addf(why, "graph %s predicted, not below eager %s", g, e);
		return;
	}
	/*
	 * Launch-bound means a graph saves enough: host-bound gaps close, and
	 * so do the device-side launch gaps between dependent kernels, so the
	 * cost model's gain is the test, not host-bound idle alone.
	 */
	if ((double)(r->eager - r->graph) < c->min_gain * (double)r->eager) {
		o->reason = KP_PLAN_R_NOT_LAUNCH_BOUND;
		kp_strbuf_addf(why, "graph %s predicted vs %s eager saves %.1f pct, below %.0f pct "
			       "(host-bound idle %.1f pct)", g, e,
			       100.0 * (double)(r->eager - r->graph) / (double)r->eager,
			       100.0 * c->min_gain, 100.0 * (double)r->host_idle / (double)r->eager);
		return;
	}
	gain = r->eager - r->graph;
	/* the analyzer's break-even when it gave one; else the one-time cost
	 * (capture and instantiation) over the gain per call, rounded up */
	if (!r->has_break_even)
		r->break_even = r->has_one_time ? (r->one_time + gain - 1) / gain : 0;
	/* calls that replay: not the warm-up calls, not the capture's (it runs
	 * the body once, at eager cost or more) */
	replays = r->occ_run - r->warmup - 1;
	if (replays < 1 || replays < r->break_even) {
		o->reason = KP_PLAN_R_TOO_FEW_REPLAYS;
		kp_strbuf_addf(why, "%lld replays after %d warm-up calls and the capture",
			       (long long)(replays < 0 ? 0 : replays), r->warmup);
		if (c->run_length != 1.0)
			kp_strbuf_addf(why, " of the run's %lld calls (%.4gx the recorded %lld)",
				       (long long)r->occ_run, c->run_length, (long long)r->occ);
		kp_strbuf_addf(why, ", break-even %lld", (long long)r->break_even);
		return;
	}
	o->decision = KP_PLAN_GRAPH;
	o->reason = KP_PLAN_R_LAUNCH_BOUND;
	r->saving = kp_plan_saving_ns(r->occ_run, r->warmup, r->eager, r->graph, r->one_time);
	kp_strbuf_addf(why, "host-bound idle is %.1f pct of its %s per call; graph %s predicted "
		       "(%.2fx); saves %s over the run's %lld calls (",
		       100.0 * (double)r->host_idle / (double)r->eager, e, g,
		       (double)r->eager / (double)(r->graph ? r->graph : 1),
		       kp_fmt_dur(r->saving, s, sizeof(s)), (long long)r->occ_run);
	if (c->run_length != 1.0)
		kp_strbuf_addf(why, "%.4gx the recorded %lld; ", c->run_length, (long long)r->occ);
	kp_strbuf_addf(why, "%d warm-up, 1 capture, %lld replays; break-even %lld)", r->warmup,
		       (long long)replays, (long long)r->break_even);
	if (r->warmup > c->warmup)
		kp_strbuf_addf(why, "; %d warm-up calls: blockers in its first %d occurrences only",
			       r->warmup, r->warmup - 1);
}

/* ---------------------------------------------------------------------- */
/* patch slots from kp_launch_args */

struct arg {
	uint32_t kernel, index, size, offset;
	int64_t first;
	int changed, has_value;
	int scalar;                 /* a value seen is not a device address */
};

/*
 * Device addresses are 8 bytes, 4-aligned and above 4 GiB (CUDA's virtual
 * address space); anything else is a scalar passed by value.
 */
static int not_address(uint32_t size, int64_t v)
{
	return size != 8 || (uint64_t)v < (1ULL << 32) || (v & 3);
}

static uint32_t arg_align(uint32_t size)
{
	return size >= 8 ? 8 : size >= 4 ? 4 : size >= 2 ? 2 : 1;
}

/*
 * Compare each kernel's launch arguments across the region's occurrences
 * (kernels in launch order, i.e. correlationId order); an argument of at
 * most 8 bytes whose value changes is a patch slot. Offsets assume natural
 * alignment of each parameter (right for pointers and scalars).
 */
static int derive_patches(struct ctx *c, struct reg *r, struct kp_plan_region *o)
{
	KP_VEC(struct arg) args = KP_VEC_INIT;
	sqlite3_stmt *occ = NULL, *ks = NULL;
	int rc = 0, n_occ = 0;
	size_t i;

	if (!c->have_args || r->kernels > PATCH_MAX_KERNELS)
		return 0;
	if ((rc = prep(c, "SELECT first_correlationId, last_correlationId FROM kp_region_occurrences "
		       "WHERE runId = ? AND regionId = ? AND first_correlationId IS NOT NULL "
		       "AND last_correlationId IS NOT NULL ORDER BY occIndex", &occ)))
		return rc;
	if ((rc = prep(c, "SELECT k.correlationId, a.argIndex, a.size, a.value "
		       "FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN kp_launch_args a "
		       "ON a.runId = k.runId AND a.correlationId = k.correlationId "
		       "WHERE k.runId = ?1 AND k.correlationId BETWEEN ?2 AND ?3 "
		       "AND (?4 < 0 OR k.streamId = ?4) ORDER BY k.correlationId, a.argIndex", &ks)))
		goto out;
	sqlite3_bind_int64(occ, 1, c->run);
	sqlite3_bind_int64(occ, 2, r->id);
	while (n_occ < PATCH_MAX_OCC && sqlite3_step(occ) == SQLITE_ROW) {
		int64_t prev_corr = -1, kernel = -1;
		size_t ai = 0;
		uint32_t off = 0;
		int ok = 1;

		sqlite3_reset(ks);
		sqlite3_bind_int64(ks, 1, c->run);
		sqlite3_bind_int64(ks, 2, sqlite3_column_int64(occ, 0));
		sqlite3_bind_int64(ks, 3, sqlite3_column_int64(occ, 1));
		sqlite3_bind_int64(ks, 4, r->stream);
		while (ok && sqlite3_step(ks) == SQLITE_ROW) {
			int64_t corr = sqlite3_column_int64(ks, 0);
			struct arg a = {0};

			if (corr != prev_corr) {
				prev_corr = corr;
				kernel++;
				off = 0;
			}
			if (kernel >= r->kernels) {
				ok = 0;
				break;
			}
			if (sqlite3_column_type(ks, 1) == SQLITE_NULL)
				continue;  /* kernel without recorded arguments */
			a.kernel = (uint32_t)kernel;
			a.index = (uint32_t)clamp(sqlite3_column_int64(ks, 1), 0, UINT32_MAX);
			a.size = (uint32_t)clamp(sqlite3_column_int64(ks, 2), 0, KP_PLAN_MAX_PARAM_BYTES);
			a.has_value = sqlite3_column_type(ks, 3) != SQLITE_NULL;
			a.first = sqlite3_column_int64(ks, 3);
			off = (off + arg_align(a.size) - 1) & ~(arg_align(a.size) - 1);
			a.offset = off;
			off += a.size;
			a.scalar = not_address(a.size, a.first);
			if (n_occ == 0) {
				if (kp_vec_push(&args, a)) {
					rc = kp_err_set(c->err, KP_ENOMEM, "out of memory");
					goto out;
				}
			} else if (ai < args.len && args.data[ai].kernel == a.kernel &&
				   args.data[ai].index == a.index && args.data[ai].size == a.size) {
				if (a.has_value != args.data[ai].has_value || a.first != args.data[ai].first)
					args.data[ai].changed = 1;
				args.data[ai].scalar |= a.scalar;
				ai++;
			} else {
				ok = 0;  /* different argument layout: not the same sequence */
			}
		}
		if (!ok || kernel + 1 != r->kernels || (n_occ && ai != args.len)) {
			kp_debug("region %s: occurrence with a different launch sequence, "
				 "not used for patch slots", r->label);
			if (n_occ == 0)
				args.len = 0;
			continue;
		}
		n_occ++;
	}
	for (i = 0; i < args.len; i++) {
		struct arg *a = &args.data[i];
		struct kp_plan_patch *p;

		if (!a->changed || a->size == 0 || a->size > 8 ||
		    a->offset + a->size > KP_PLAN_MAX_PARAM_BYTES)
			continue;
		if (o->n_patches >= KP_PLAN_MAX_PATCHES) {
			rc = 1;  /* too many: caller demotes the region */
			goto out;
		}
		p = realloc(o->patches, (o->n_patches + 1) * sizeof(*p));
		if (!p) {
			rc = kp_err_set(c->err, KP_ENOMEM, "out of memory");
			goto out;
		}
		o->patches = p;
		p[o->n_patches++] = (struct kp_plan_patch){ a->kernel, a->index, a->offset, a->size,
							    a->scalar };
	}
out:
	kp_vec_release(&args);
	sqlite3_finalize(occ);
	sqlite3_finalize(ks);
	return rc;
}

void kp__planner_demote(struct kp_plan_region *o, int reason)
{
	o->decision = KP_PLAN_EAGER;
	o->reason = reason;
	o->warmup = 0;
	o->mem_budget_bytes = 0;
	free(o->patches);
	o->patches = NULL;
	o->n_patches = 0;
}

/* A region planned as a graph goes eager after all (reason), saving
 * nothing; the caller sets the reason text. */
static void demote(struct reg *r, int reason)
{
	kp__planner_demote(r->out, reason);
	r->saving = 0;
}

/* ---------------------------------------------------------------------- */
/* graph memory budget */

static int cmp_value(const void *a, const void *b)
{
	const struct reg *x = *(struct reg *const *)a, *y = *(struct reg *const *)b;
	/* least saving per byte first; ties by region id for determinism */
	double vx = (double)x->saving / (double)(x->out->mem_budget_bytes + 1);
	double vy = (double)y->saving / (double)(y->out->mem_budget_bytes + 1);

	if (vx != vy)
		return vx < vy ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int apply_budget(struct ctx *c, int64_t limit)
{
	struct reg **g;
	size_t i, n = 0;
	int64_t total = 0;

	g = calloc(c->n_regs ? c->n_regs : 1, sizeof(*g));
	if (!g)
		return kp_err_set(c->err, KP_ENOMEM, "out of memory");
	for (i = 0; i < c->n_regs; i++) {
		struct reg *r = &c->regs[i];

		if (r->out && r->out->decision == KP_PLAN_GRAPH) {
			g[n++] = r;
			total += r->out->mem_budget_bytes;
		}
	}
	if (limit > 0 && total > limit) {
		qsort(g, n, sizeof(*g), cmp_value);
		for (i = 0; i < n && total > limit; i++) {
			struct kp_plan_region *o = g[i]->out;
			char *t = NULL;

			total -= o->mem_budget_bytes;
			if (asprintf(&t, "graph memory %lld bytes does not fit the %lld-byte budget "
				     "(regions with more gain per byte kept)",
				     (long long)o->mem_budget_bytes, (long long)limit) < 0) {
				free(g);
				return kp_err_set(c->err, KP_ENOMEM, "out of memory");
			}
			free(o->reason_text);
			o->reason_text = t;
			demote(g[i], KP_PLAN_R_MEMORY_BUDGET);
		}
	}
	c->plan->mem_budget_bytes = total;
	free(g);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* fusion groups */

/* Index of kernel corr in its region occurrence's launch order, or -1. */
static int64_t kernel_index(struct ctx *c, const struct reg *r, int64_t corr)
{
	sqlite3_stmt *st;
	int64_t idx = -1;

	if (kp_db_prepare(c->db,
			  "SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
			  "  WHERE k.runId = o.runId AND k.correlationId >= o.first_correlationId "
			  "  AND k.correlationId < ?3 AND (?4 < 0 OR k.streamId = ?4)) "
			  "FROM kp_region_occurrences o WHERE o.runId = ?1 AND o.regionId = ?2 "
			  "AND ?3 BETWEEN o.first_correlationId AND o.last_correlationId "
			  "ORDER BY o.occIndex LIMIT 1", &st, NULL))
		return -1;
	sqlite3_bind_int64(st, 1, c->run);
	sqlite3_bind_int64(st, 2, r->id);
	sqlite3_bind_int64(st, 3, corr);
	sqlite3_bind_int64(st, 4, r->stream);
	if (sqlite3_step(st) == SQLITE_ROW)
		idx = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return idx;
}

/*
 * The kernels of each graph region's first occurrence, in launch order, as
 * trace lines (mangled names when recorded: what the runtime captures).
 */
/* A kernel's recorded arguments (kplan record --args) in the trace's form:
 * per parameter its bytes in hex, ':' separated (empty when not recorded);
 * nothing when the launch has none. */
static int trace_args(struct ctx *c, sqlite3_stmt *as, int64_t corr, struct kp_strbuf *out)
{
	int rc, n = 0;

	sqlite3_reset(as);
	sqlite3_bind_int64(as, 1, c->run);
	sqlite3_bind_int64(as, 2, corr);
	while ((rc = sqlite3_step(as)) == SQLITE_ROW) {
		int64_t idx = sqlite3_column_int64(as, 0), size = sqlite3_column_int64(as, 1);
		uint64_t v = (uint64_t)sqlite3_column_int64(as, 2);

		if (idx != n)
			break;   /* a gap: the positions would be wrong */
		kp_strbuf_addch(out, n++ ? ':' : '\t');
		if (sqlite3_column_type(as, 2) == SQLITE_NULL || size < 1 || size > 8)
			continue;
		for (int64_t b = 0; b < size; b++)
			kp_strbuf_addf(out, "%02x", (unsigned)((v >> (8 * b)) & 0xff));
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return kp_db_error(c->db, c->err, "reading a kernel's arguments");
	return 0;
}

static int kernel_trace(struct ctx *c, struct kp_strbuf *out)
{
	sqlite3_stmt *st, *as = NULL;
	size_t i;
	int rc = 0;

	if (kp_db_has_table(c->db, "kp_launch_args") &&
	    (rc = prep(c, "SELECT argIndex, size, value FROM kp_launch_args "
		       "WHERE runId = ?1 AND correlationId = ?2 ORDER BY argIndex", &as)))
		return rc;
	if ((rc = prep(c, "SELECT s.value, k.correlationId FROM kp_region_occurrences o "
		       "JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.runId = o.runId "
		       "AND k.correlationId BETWEEN o.first_correlationId AND o.last_correlationId "
		       "AND (?3 < 0 OR k.streamId = ?3) "
		       "JOIN StringIds s ON s.id = coalesce(k.mangledName, k.demangledName) "
		       "WHERE o.runId = ?1 AND o.regionId = ?2 AND o.occIndex = "
		       "(SELECT min(occIndex) FROM kp_region_occurrences WHERE runId = ?1 AND regionId = ?2) "
		       "ORDER BY k.correlationId", &st))) {
		sqlite3_finalize(as);
		return rc;
	}
	for (i = 0; i < c->n_regs && !rc; i++) {
		struct reg *r = &c->regs[i];
		int64_t n = 0;

		if (!r->out || r->out->decision != KP_PLAN_GRAPH)
			continue;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, c->run);
		sqlite3_bind_int64(st, 2, r->id);
		sqlite3_bind_int64(st, 3, r->stream);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *name = (const char *)sqlite3_column_text(st, 0);

			kp_strbuf_addf(out, "%s\t%lld\t%s", r->out->label, (long long)n++,
				       name ? name : "");
			if (as && (rc = trace_args(c, as, sqlite3_column_int64(st, 1), out))) {
				sqlite3_finalize(as);
				sqlite3_finalize(st);
				return rc;
			}
			kp_strbuf_addch(out, '\n');
		}
		if (rc != SQLITE_DONE) {
			sqlite3_finalize(as);
			return step_err(c, st, "reading a region's kernels");
		}
		rc = 0;
	}
	sqlite3_finalize(as);
	sqlite3_finalize(st);
	if (out->oom)
		rc = kp_err_set(c->err, KP_ENOMEM, "out of memory");
	return rc;
}

/*
 * The analyzer's feasible candidates in graph regions become the plan's
 * fusion groups. A candidate of a PyTorch trace with shapes (schema v7:
 * aten_chain, torch_verdict) also gets a note: its ATen ops and whether
 * kplan.torch fuses them at capture, which needs no generated source.
 */
static int load_fusions(struct ctx *c, struct kp_strbuf *notes)
{
	struct kp_plan *pl = c->plan;
	sqlite3_stmt *st;
	size_t cap = 0;
	char sql[512];
	int rc;

	if (!kp_db_has_table(c->db, "kp_fusion_candidates"))
		return 0;
	snprintf(sql, sizeof(sql), "SELECT candId, regionId, first_correlationId, n_kernels, "
		 "kernel_names, score, %s FROM kp_fusion_candidates "
		 "WHERE runId = ? AND feasible != 0 AND score > 0 AND regionId IS NOT NULL "
		 "ORDER BY candId", kp_db_has_column(c->db, "kp_fusion_candidates", "aten_chain")
		 ? "aten_chain, torch_verdict" : "NULL, NULL");
	if ((rc = prep(c, sql, &st)))
		return rc;
	sqlite3_bind_int64(st, 1, c->run);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0), n = sqlite3_column_int64(st, 3), first;
		struct reg *r = find_reg(c, sqlite3_column_int64(st, 1));
		const char *aten = (const char *)sqlite3_column_text(st, 6);
		struct kp_plan_fusion *u;

		if (notes && aten && r) {
			const char *v = (const char *)sqlite3_column_text(st, 7);
			char t1[256], t2[8200], t3[1400];

			/* op names and labels come from the trace */
			kp_strbuf_addf(notes, "fusion candidate %lld (region %s, %lld kernels) is the "
				       "ATen chain %s: %s\n", (long long)id,
				       kp_printable(t1, sizeof(t1), r->label), (long long)n,
				       kp_printable(t2, sizeof(t2), aten),
				       kp_printable(t3, sizeof(t3), v ? v : "no verdict"));
		}

		if (!r || !r->out || r->out->decision != KP_PLAN_GRAPH) {
			kp_info("fusion candidate %lld: its region is not planned as a graph; skipped",
				(long long)id);
			continue;
		}
		first = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 :
			kernel_index(c, r, sqlite3_column_int64(st, 2));
		if (id < 1 || id > UINT32_MAX || n < 2 || first < 0 || first + n > r->kernels) {
			kp_info("fusion candidate %lld: cannot place %lld kernels in region %s; skipped",
				(long long)id, (long long)n, r->label);
			continue;
		}
		if (pl->n_fusions >= KP_PLAN_MAX_FUSIONS)
			break;
		if (pl->n_fusions == cap) {
			void *p = realloc(pl->fusions, (cap = cap ? cap * 2 : 8) * sizeof(*pl->fusions));

			if (!p) {
				sqlite3_finalize(st);
				return kp_err_set(c->err, KP_ENOMEM, "out of memory");
			}
			pl->fusions = p;
		}
		u = &pl->fusions[pl->n_fusions++];
		memset(u, 0, sizeof(*u));
		u->id = (uint32_t)id;
		u->region = strdup(r->out->label);
		u->first_kernel = (uint32_t)first;
		u->kernels = (uint32_t)n;
		u->names = clean_str((const char *)sqlite3_column_text(st, 4), KP_PLAN_MAX_STR);
		/* the analyzer's score is the predicted ns saved per instance */
		u->score = sqlite3_column_double(st, 5);
		if (!(u->score <= 1e9))
			u->score = 1e9;
		u->gain_ns = (int64_t)(u->score + 0.5);
		if (!u->region || !u->names) {
			sqlite3_finalize(st);
			return kp_err_set(c->err, KP_ENOMEM, "out of memory");
		}
	}
	if (rc != SQLITE_DONE)
		return step_err(c, st, "reading kp_fusion_candidates");
	sqlite3_finalize(st);
	return 0;
}

/* ---------------------------------------------------------------------- */

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const struct kp_plan_region *)a)->label,
		      ((const struct kp_plan_region *)b)->label);
}

/*
 * Which regions the plan holds (only those entered through libkplanrt,
 * unless o->regions says otherwise or none was), with the notes the user
 * should see about it. Returns whether only the runtime's regions count.
 */
static int choose_scope(struct ctx *c, const struct kp_planner_opts *o)
{
	struct kp_plan *pl = c->plan;
	size_t i, n_runtime = 0;
	int only_runtime;

	for (i = 0; i < c->n_regs; i++)
		n_runtime += c->regs[i].runtime;
	only_runtime = o->regions == KP_PLANNER_REGIONS_RUNTIME ||
		       (o->regions == KP_PLANNER_REGIONS_AUTO && n_runtime);
	if (o->notes && only_runtime && n_runtime < c->n_regs)
		kp_strbuf_addf(o->notes, "%zu region(s) from the application's own NVTX ranges or "
			       "mining left out: only regions entered through libkplanrt can be "
			       "applied (--regions all to plan them too)\n", c->n_regs - n_runtime);
	if (o->notes && !n_runtime && o->regions == KP_PLANNER_REGIONS_AUTO)
		kp_strbuf_addf(o->notes, "no region of the run was entered through libkplanrt "
			       "(kp_region_begin, kplan.torch.region): planning the %zu regions "
			       "found otherwise, which apply only where the application enters "
			       "a runtime region of the same name\n", c->n_regs);
	if (o->notes && !c->have_args)
		kp_strbuf_addf(o->notes, "the run has no kernel arguments (kplan record --args): "
			       "scalars passed by value were not checked; the runtime still "
			       "compares one warm-up call with the capture\n");
	pl->args_checked = c->have_args;
	return only_runtime;
}

/* r's label in the plan: labels are unique, a repeated or empty one gets "#regionId". */
static int unique_label(struct ctx *c, struct reg *r)
{
	struct kp_plan *pl = c->plan;
	size_t j;

	for (j = 0; j + 1 < pl->n_regions; j++) {
		if (!strcmp(pl->regions[j].label, r->label))
			break;
	}
	if (j + 1 < pl->n_regions || !r->label[0]) {
		char *l = NULL;

		if (asprintf(&l, "%s#%lld", r->label, (long long)r->id) < 0)
			return kp_err_set(c->err, KP_ENOMEM, "out of memory");
		free(r->label);
		r->label = l;
	}
	return 0;
}

/*
 * Fill r->out, the plan's entry for region r: what it measured, the
 * decision (graph, eager, split) with its reason in words, and for a graph
 * its warm-up, memory budget and patch sites.
 */
static int plan_region(struct ctx *c, struct reg *r, struct kp_strbuf *why)
{
	struct kp_plan_region *out = r->out;
	int rc;

	if ((rc = unique_label(c, r)))
		return rc;
	out->label = strdup(r->label);
	out->fingerprint = r->fp ? parse_fp(r->fp) : occ_fingerprint(c, r->id);
	out->kernels = (uint32_t)r->kernels;
	out->nodes = (uint32_t)clamp(r->nodes, r->kernels, KP_PLAN_MAX_KERNELS);
	out->occurrences = (uint32_t)r->occ;
	out->shape_keys = (uint32_t)r->shape_keys;
	out->eager_ns = r->eager;
	out->graph_ns = r->graph;
	out->one_time_ns = r->one_time;
	out->speedup_pred = r->speedup > 0 ? r->speedup :
			    r->has_graph && r->graph ? (double)r->eager / (double)r->graph : 0;
	if ((rc = load_shapes(c, r, out)))
		return rc;
	kp_strbuf_reset(why);
	r->warmup = region_warmup(c, r);
	decide(c, r, out, why);
	out->break_even = (uint32_t)r->break_even;
	if (out->decision == KP_PLAN_GRAPH) {
		out->warmup = (uint32_t)r->warmup;
		out->mem_budget_bytes = clamp(r->extra_mem * r->shape_keys, 0, KP_PLAN_MAX_BYTES);
		rc = derive_patches(c, r, out);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			demote(r, KP_PLAN_R_BLOCKER);
			kp_strbuf_reset(why);
			kp_strbuf_addf(why, "more than %d changing kernel parameters to patch",
				       KP_PLAN_MAX_PATCHES);
		} else if (!out->n_patches && r->patch_count > 0) {
			kp_info("region %s: %lld patch slots counted, none derivable without "
				"launch arguments (kplan record --args)", r->label,
				(long long)r->patch_count);
		}
	}
	if (r->graph_hi > 0)
		kp_strbuf_addf(why, "%sgraph time between %.2f and %.2f us: the eager trace waits "
			       "where the captured path does not (capture_path), so the graph may run "
			       "other kernels", why->len ? "; " : "", (double)r->graph_lo / 1e3,
			       (double)r->graph_hi / 1e3);
	out->reason_text = why->oom ? NULL : strdup(why->buf);
	if (!out->label || !out->reason_text)
		return kp_err_set(c->err, KP_ENOMEM, "out of memory");
	return 0;
}

/* Parts of split regions name their parent (one level). */
static int link_parts(struct ctx *c)
{
	size_t i;

	for (i = 0; i < c->n_regs; i++) {
		struct reg *r = &c->regs[i], *p;

		if (!r->out || r->parent_id < 0)
			continue;
		p = find_reg(c, r->parent_id);
		if (!p || p == r || !p->out || p->out->decision != KP_PLAN_SPLIT || p->parent_id >= 0)
			continue;
		if (!(r->out->parent = strdup(p->out->label)))
			return kp_err_set(c->err, KP_ENOMEM, "out of memory");
	}
	/* a split region that is itself a part: keep it top-level */
	for (i = 0; i < c->n_regs; i++) {
		struct reg *r = &c->regs[i];

		if (r->out && r->out->decision == KP_PLAN_SPLIT && r->out->parent) {
			free(r->out->parent);
			r->out->parent = NULL;
		}
	}
	return 0;
}

/*
 * The whole run's eager and predicted time, and the predicted speedup: of
 * the run the plan is for, the recorded span times the run length (the
 * time outside the regions grows with it too, so the ratio stays the
 * run's), each region's calls scaled alike.
 */
static void run_totals(struct ctx *c)
{
	struct kp_plan *pl = c->plan;
	int64_t regions_ns = 0;
	size_t i;

	if (c->run_length != 1.0) {
		double v = (double)pl->run_eager_ns * c->run_length;

		pl->run_eager_ns = v < (double)KP_PLAN_MAX_NS ? (int64_t)(v + 0.5) : KP_PLAN_MAX_NS;
	}
	/* whole run: top-level regions' time when the run has no recorded span */
	for (i = 0; i < c->n_regs; i++) {
		struct reg *r = &c->regs[i];

		if (r->out && r->parent_id < 0)
			regions_ns += r->eager * r->occ_run;
	}
	if (pl->run_eager_ns < regions_ns)
		pl->run_eager_ns = regions_ns;
	pl->run_eager_ns = clamp(pl->run_eager_ns, 0, KP_PLAN_MAX_NS);
	kp_plan_predict_run_for(pl, c->run_length);
}

static int build(struct ctx *c, const struct kp_planner_opts *o)
{
	struct kp_plan *pl = c->plan;
	struct kp_strbuf why = KP_STRBUF_INIT;
	size_t i;
	int rc, only_runtime;

	if ((rc = load_run(c, o)) || (rc = load_regions(c)))
		return rc;
	c->have_args = kp_db_int(c->db, "SELECT EXISTS (SELECT 1 FROM kp_launch_args)", 0) > 0;
	for (i = 0; i < c->n_regs; i++) {
		struct reg *p = c->regs[i].parent_id >= 0 ? find_reg(c, c->regs[i].parent_id) : NULL;

		if (p && p != &c->regs[i])
			p->n_parts++;
	}
	pl->regions = calloc(c->n_regs, sizeof(*pl->regions));
	if (!pl->regions)
		return kp_err_set(c->err, KP_ENOMEM, "out of memory");
	only_runtime = choose_scope(c, o);
	for (i = 0; i < c->n_regs; i++) {
		struct reg *r = &c->regs[i];

		if (only_runtime && !r->runtime)
			continue;
		if (r->kernels < 1 || r->kernels > KP_PLAN_MAX_KERNELS) {
			kp_info("region %s: %lld kernels per occurrence; left out of the plan",
				r->label, (long long)r->kernels);
			continue;
		}
		if (pl->n_regions >= KP_PLAN_MAX_REGIONS) {
			kp_warn("more than %d regions; the rest are left out of the plan",
				KP_PLAN_MAX_REGIONS);
			break;
		}
		r->out = &pl->regions[pl->n_regions++];
		if ((rc = plan_region(c, r, &why)))
			goto out;
	}
	if ((rc = link_parts(c)) || (rc = apply_budget(c, o->mem_limit_bytes)) ||
	    (rc = load_fusions(c, o->notes)) || (o->kernel_trace && (rc = kernel_trace(c, o->kernel_trace))))
		goto out;
	run_totals(c);
	/* sorted by label, as in the file (kp_plan_find relies on it) */
	for (i = 0; i < c->n_regs; i++)
		c->regs[i].out = NULL;
	qsort(pl->regions, pl->n_regions, sizeof(*pl->regions), cmp_label);
	rc = 0;
out:
	kp_strbuf_release(&why);
	return rc;
}

struct kp_plan *kp__planner_one(struct kp_db *db, const struct kp_planner_opts *o, int64_t run,
				struct kp_err *err)
{
	struct ctx c;
	size_t i;
	int rc;

	memset(&c, 0, sizeof(c));
	c.db = db;
	c.err = err;
	c.run = run;
	c.warmup = o->warmup >= 0 ? (o->warmup > 1000 ? 1000 : o->warmup) : DEFAULT_WARMUP;
	c.min_gain = o->min_gain >= 0 ? o->min_gain : DEFAULT_MIN_GAIN;
	c.run_length = kp__planner_run_length(o);
	if (c.run <= 0) {
		kp_err_set(err, KP_ENOTFOUND, "%s: no runs (import or record one first)", db->path);
		return NULL;
	}
	if (!kp_db_has_table(db, "kp_regions")) {
		kp_err_set(err, KP_ENOTFOUND, "%s: no kp_regions table (run 'kplan analyze' first)",
			   db->path);
		return NULL;
	}
	c.plan = kp_plan_new();
	if (!c.plan) {
		kp_err_set(err, KP_ENOMEM, "out of memory");
		return NULL;
	}
	c.plan->source_run = c.run;
	rc = build(&c, o);
	for (i = 0; i < c.n_regs; i++) {
		free(c.regs[i].label);
		free(c.regs[i].blockers);
		free(c.regs[i].fp);
	}
	free(c.regs);
	if (rc) {
		kp_plan_free(c.plan);
		return NULL;
	}
	return c.plan;
}

/* ---------------------------------------------------------------------- */
/* kp_plans */

int kp_planner_store(struct kp_db *db, const struct kp_plan *plan, const char *text,
		     size_t len, const char *path, int64_t *plan_id, struct kp_err *err)
{
	sqlite3_stmt *st = NULL;
	char hex[17], reason[64];
	int64_t id;
	int rc;

	if ((rc = kp_db_begin(db, err)))
		return rc;
	if ((rc = kp_db_prepare(db, "INSERT INTO kp_plans (runId, created_ns, path, checksum, status, "
				"speedup_pred, body) VALUES (?, ?, ?, ?, 'current', ?, ?)", &st, err)))
		goto fail;
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)plan->body_hash);
	sqlite3_bind_int64(st, 1, plan->source_run);
	sqlite3_bind_int64(st, 2, kp_wall_ns());
	if (path)
		sqlite3_bind_text(st, 3, path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, hex, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 5, plan->speedup_pred);
	sqlite3_bind_text(st, 6, text, (int)len, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = kp_db_error(db, err, "inserting into kp_plans");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	id = sqlite3_last_insert_rowid(db->h);
	snprintf(reason, sizeof(reason), "superseded by plan %lld", (long long)id);
	if ((rc = kp_db_prepare(db, "UPDATE kp_plans SET status = 'stale', stale_reason = ? "
				"WHERE runId = ? AND planId != ? AND status = 'current'", &st, err)))
		goto fail;
	sqlite3_bind_text(st, 1, reason, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, plan->source_run);
	sqlite3_bind_int64(st, 3, id);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = kp_db_error(db, err, "marking older plans stale");
		goto fail;
	}
	sqlite3_finalize(st);
	if ((rc = kp_db_commit(db, err)))
		return rc;
	if (plan_id)
		*plan_id = id;
	return 0;
fail:
	sqlite3_finalize(st);
	kp_db_rollback(db);
	return rc;
}
