/*
 * csvout.c - the report's CSV files. Column order is stable (scripts and
 * golden files depend on it); units are in the column names: *_us are
 * microseconds (ns / 1000, up to 3 decimals), *_ns nanoseconds, *_bytes
 * bytes. Summaries come from the loaded report, row lists stream from the
 * database so they hold every row, never a capped list; regions.csv gains
 * the report's family column last.
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../analyzer/analyzer.h"
#include "../common/fileio.h"
#include "../common/u64map.h"
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

/* The family name of region id, NULL when it is in none (or unknown). */
static const char *family_of(const struct kp_report *rep, const struct kp_u64map *ids, int64_t id)
{
	uint32_t i;
	int fam;

	if (!kp_u64map_get(ids, (uint64_t)id, &i))
		return NULL;
	fam = rep->regions.data[i].family;
	return fam >= 0 ? rep->families.data[fam].name : NULL;
}

/*
 * Copy the analyzer's regions.csv from in to out with a last column,
 * family. Each row starts with region_id, an integer, so its family is
 * found by id and the analyzer's bytes are copied as they are; a newline
 * ends a row only outside quotes (kp_csv_field quotes fields holding one).
 */
static int copy_with_family(const struct kp_report *rep, const struct kp_u64map *ids,
			    FILE *in, FILE *out)
{
	static const char head[] = "region_id,";
	size_t at = 0;
	int c, quoted = 0, header = 1, lead = 1, bad = 0;
	int64_t id = 0;

	while ((c = getc(in)) != EOF) {
		if (c == '"')
			quoted = !quoted;
		if (c == '\n' && !quoted) {
			if (header) {
				bad |= at < sizeof(head) - 1;
				fputs(",family", out);
			} else {
				fputc(',', out);
				kp_csv_field(out, family_of(rep, ids, id));
			}
			fputc('\n', out);
			header = 0;
			lead = 1;
			id = 0;
			continue;
		}
		if (header && at < sizeof(head) - 1)
			bad |= c != head[at++];
		else if (!header && lead && c >= '0' && c <= '9')
			id = id * 10 + (c - '0');
		else
			lead = 0;
		fputc(c, out);
	}
	return bad || header ? -1 : 0;
}

/* regions.csv is the analyzer's (kp_analyze_write_csv) plus the family column. */
static int add_family_column(const struct kp_report *rep, const char *dir, struct kp_err *err)
{
	struct kp_file_tmp t;
	char path[4096];
	struct kp_u64map ids;
	FILE *in, *out;
	size_t i;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/regions.csv", dir);
	kp_u64map_init(&ids);
	for (i = 0; i < rep->regions.len && !rc; i++)
		rc = kp_u64map_put(&ids, (uint64_t)rep->regions.data[i].id, (uint32_t)i);
	if (rc) {
		kp_u64map_release(&ids);
		return kp_err_set(err, KP_ENOMEM, "out of memory while writing %s", path);
	}
	in = fopen(path, "r");
	if (!in) {
		kp_u64map_release(&ids);
		return kp_err_set(err, KP_EIO, "%s: cannot read: %s", path, strerror(errno));
	}
	/* the new regions.csv replaces the old one atomically (common/fileio.h) */
	if ((rc = kp_file_tmp_open(&t, AT_FDCWD, path, 0666, err)))
		goto out_close;
	if (!(out = kp_file_tmp_stream(&t, err))) {
		rc = KP_EIO;
		kp_file_tmp_abort(&t);
		goto out_close;
	}
	if (copy_with_family(rep, &ids, in, out))
		rc = kp_err_set(err, KP_EFORMAT, "%s: expected a header row starting with region_id",
				path);
	if (ferror(in) && !rc)
		rc = kp_err_set(err, KP_EIO, "%s: read failed", path);
	if (rc)
		kp_file_tmp_abort(&t);
	else
		rc = kp_file_tmp_commit(&t, err);
out_close:
	fclose(in);
	kp_u64map_release(&ids);
	return rc;
}

/*
 * The summaries the report computes; the analysis tables (regions.csv,
 * gaps.csv, fusion.csv, blockers.csv) come from kp_analyze_write_csv, the
 * one definition `kplan analyze --csv` uses too.
 */
struct csv_file {
	const char *name;
	int (*fn)(const struct kp_report *rep, FILE *f);
};

static const struct csv_file files[] = {
	{ "kern_sum.csv", write_kern_sum },
	{ "api_sum.csv", write_api_sum },
	{ "plan.csv", write_plan },
};

int kp_report_csv(struct kp_db *db, const struct kp_report *rep, const char *dir,
		  struct kp_err *err)
{
	char path[4096];
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
		rc = files[i].fn(rep, f);
		if ((ferror(f) | fclose(f)) && !rc)
			rc = kp_err_set(err, KP_EIO, "%s: write failed", path);
	}
	if (!rc)
		rc = kp_analyze_write_csv(db, rep->run_id, dir, err);
	if (!rc && rep->job)
		rc = kp_job_write_csv(rep->job, dir, err);
	return rc ? rc : add_family_column(rep, dir, err);
}
