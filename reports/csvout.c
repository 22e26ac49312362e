/*
 * csvout.c - the report's CSV files. Column order is stable (scripts and
 * golden files depend on it); units are in the column names: *_us are
 * microseconds (ns / 1000, up to 3 decimals), *_ns nanoseconds, *_bytes
 * bytes. Summaries come from the loaded report, row lists stream from the
 * database so they hold every row, never a capped list.
 */
#include "report.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../db/csv.h"

static void num(FILE *f, double v)
{
	char b[64];

	fputs(kp_csv_fmt_double(v, b, sizeof(b)), f);
}

static void us(FILE *f, int64_t ns)
{
	num(f, ns / 1000.0);
}

static int write_kern_sum(const struct kp_report *rep, FILE *f)
{
	size_t i;

	fputs("name,short_name,count,total_us,time_pct,avg_us,min_us,max_us\n", f);
	for (i = 0; i < rep->kernels.len; i++) {
		const struct kp_rep_kernel *k = &rep->kernels.data[i];

		kp_csv_field(f, k->name);
		fputc(',', f);
		kp_csv_field(f, k->short_name);
		fprintf(f, ",%lld,", (long long)k->count);
		us(f, k->total_ns);
		fputc(',', f);
		num(f, rep->kernel_ns ? 100.0 * k->total_ns / rep->kernel_ns : 0);
		fputc(',', f);
		us(f, k->count ? k->total_ns / k->count : 0);
		fputc(',', f);
		us(f, k->min_ns);
		fputc(',', f);
		us(f, k->max_ns);
		fputc('\n', f);
	}
	return 0;
}

static int write_api_sum(const struct kp_report *rep, FILE *f)
{
	size_t i;

	fputs("name,api_class,count,total_us,avg_us,min_us,max_us\n", f);
	for (i = 0; i < rep->apis.len; i++) {
		const struct kp_rep_api *a = &rep->apis.data[i];

		kp_csv_field(f, a->name);
		fprintf(f, ",%s,%lld,", a->event_class ? "driver" : "runtime", (long long)a->count);
		us(f, a->total_ns);
		fputc(',', f);
		us(f, a->count ? a->total_ns / a->count : 0);
		fputc(',', f);
		us(f, a->min_ns);
		fputc(',', f);
		us(f, a->max_ns);
		fputc('\n', f);
	}
	return 0;
}

static int write_plan(const struct kp_report *rep, FILE *f)
{
	const struct kp_plan *pl = rep->plan;
	size_t i;

	fputs("plan_id,region,parent,decision,reason,kernels,nodes,occurrences,shape_keys,warmup,"
	      "break_even,eager_us,graph_us_pred,one_time_us,mem_budget_bytes,speedup_pred,"
	      "patch_slots,why\n", f);
	for (i = 0; pl && i < pl->n_regions; i++) {
		const struct kp_plan_region *r = &pl->regions[i];

		fprintf(f, "%lld,", (long long)rep->plans.data[0].id);
		kp_csv_field(f, r->label);
		fputc(',', f);
		kp_csv_field(f, r->parent);
		fprintf(f, ",%s,%s,%u,%u,%u,%u,%u,%u,", kp_plan_decision_name(r->decision),
			kp_plan_reason_name(r->reason), r->kernels, r->nodes, r->occurrences, r->shape_keys,
			r->warmup, r->break_even);
		us(f, r->eager_ns);
		fputc(',', f);
		us(f, r->graph_ns);
		fputc(',', f);
		us(f, r->one_time_ns);
		fprintf(f, ",%lld,", (long long)r->mem_budget_bytes);
		num(f, r->speedup_pred);
		fprintf(f, ",%zu,", r->n_patches);
		kp_csv_field(f, r->reason_text);
		fputc('\n', f);
	}
	return 0;
}

/* Row lists straight from the database (?1 is the run id). */
static const char sql_gaps[] =
	"SELECT deviceId AS device_id, streamId AS stream_id, correlationId AS correlation_id,"
	" kernel_start AS kernel_start_ns, gap_ns / 1000.0 AS gap_us, host_bound,"
	" queue_ns / 1000.0 AS queue_us, launch_api_ns / 1000.0 AS launch_api_us"
	" FROM kp_gaps WHERE runId = %lld ORDER BY rowid";

static const char sql_regions[] =
	"SELECT regionId AS region_id, parentId AS parent_id, label, source, streamId AS stream_id,"
	" occurrences, kernels, nodes, eager_ns / 1000.0 AS eager_us, busy_ns / 1000.0 AS busy_us,"
	" host_idle_ns / 1000.0 AS host_idle_us, device_idle_ns / 1000.0 AS device_idle_us,"
	" queue_p50_ns / 1000.0 AS queue_p50_us, launch_api_p50_ns / 1000.0 AS launch_api_p50_us,"
	" graph_ns_pred / 1000.0 AS graph_us_pred, speedup_pred, capturable, blockers, advisories,"
	" (SELECT group_concat(x, '; ') FROM (SELECT b.kind"
	"   || CASE WHEN b.fatal THEN '' ELSE ' (advisory)' END || coalesce(': ' || b.api_name, '')"
	"   || CASE WHEN count(*) > 1 THEN ' x' || count(*) ELSE '' END AS x"
	"   FROM kp_blockers b WHERE b.runId = r.runId AND b.regionId = r.regionId"
	"   GROUP BY b.kind, b.fatal, b.api_name"
	"   ORDER BY b.fatal DESC, count(*) DESC, b.kind, b.api_name)) AS blocker_calls,"
	" one_time_ns / 1000.0 AS one_time_us, break_even, extra_mem_bytes, shape_keys,"
	" patch_slots, fingerprint"
	" FROM kp_regions r WHERE runId = %lld ORDER BY regionId";

static const char sql_fusion[] =
	"SELECT candId AS cand_id, regionId AS region_id, streamId AS stream_id,"
	" first_correlationId AS first_correlation_id, occurrences, n_kernels, kernel_names,"
	" pattern, dur_ns / 1000.0 AS dur_us, saved_bytes, saved_nodes,"
	" penalty_ns / 1000.0 AS penalty_us, score AS score_ns, feasible, reason, dependence"
	" FROM kp_fusion_candidates WHERE runId = %lld ORDER BY candId";

struct csv_file {
	const char *name;
	const char *sql;          /* NULL: written from the report */
	int (*fn)(const struct kp_report *rep, FILE *f);
};

static const struct csv_file files[] = {
	{ "kern_sum.csv", NULL, write_kern_sum },
	{ "api_sum.csv", NULL, write_api_sum },
	{ "gaps.csv", sql_gaps, NULL },
	{ "regions.csv", sql_regions, NULL },
	{ "fusion.csv", sql_fusion, NULL },
	{ "plan.csv", NULL, write_plan },
};

int kp_report_csv(struct kp_db *db, const struct kp_report *rep, const char *dir,
		  struct kp_err *err)
{
	char path[4096], sql[2048];
	size_t i;
	int rc = 0;

	if (mkdir(dir, 0777) && errno != EEXIST)
		return kp_err_set(err, KP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
	for (i = 0; i < sizeof(files) / sizeof(files[0]) && !rc; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		f = fopen(path, "w");
		if (!f)
			return kp_err_set(err, KP_EIO, "%s: cannot write: %s", path, strerror(errno));
		if (files[i].sql) {
			snprintf(sql, sizeof(sql), files[i].sql, (long long)rep->run_id);
			rc = kp_csv_query(db, sql, f, NULL, err);
		} else {
			rc = files[i].fn(rep, f);
		}
		if ((ferror(f) | fclose(f)) && !rc)
			rc = kp_err_set(err, KP_EIO, "%s: write failed", path);
	}
	return rc;
}
