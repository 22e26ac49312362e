/* diff.c - see diff.h. */
#include "diff.h"
#include "html.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "../common/printable.h"
#include "../db/csv.h"

#define DEF(v, d) ((v) > 0 ? (v) : (d))

static const char *const kind_name[] = { "run", "region", "kernel" };

static void differs(struct kp_diff *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void differs(struct kp_diff *d, const char *fmt, ...)
{
	va_list ap;

	if (d->why.len)
		kp_strbuf_adds(&d->why, "; ");
	va_start(ap, fmt);
	kp_strbuf_vaddf(&d->why, fmt, ap);
	va_end(ap);
	d->comparable = 0;
}

static const char *nz(const char *s)
{
	return s ? s : "unknown";
}

static int compare_setup(struct kp_diff *d)
{
	const struct kp_report *a = d->a, *b = d->b;
	struct kp_strmap names;
	const char *ex_a = NULL, *ex_b = NULL;
	size_t i;
	int64_t v;

	d->comparable = 1;
	if (strcmp(nz(a->device_name), nz(b->device_name)))
		differs(d, "gpu differs (A: %s, B: %s)", nz(a->device_name), nz(b->device_name));
	if (a->compute_major != b->compute_major || a->compute_minor != b->compute_minor)
		differs(d, "compute capability differs (A: %d.%d, B: %d.%d)", a->compute_major,
			a->compute_minor, b->compute_major, b->compute_minor);
	if (a->driver_version != b->driver_version)
		differs(d, "driver differs (A: %d, B: %d)", a->driver_version, b->driver_version);
	kp_strmap_init(&names);
	for (i = 0; i < a->kernels.len; i++)
		if (kp_strmap_put(&names, a->kernels.data[i].name, 1))
			goto out_nomem;
	for (i = 0; i < b->kernels.len; i++) {
		if (kp_strmap_get(&names, b->kernels.data[i].name, &v)) {
			if (kp_strmap_put(&names, b->kernels.data[i].name, 3))
				goto out_nomem;
		} else {
			d->only_b++;
			if (!ex_b)
				ex_b = b->kernels.data[i].short_name;
		}
	}
	for (i = 0; i < a->kernels.len; i++) {
		if (kp_strmap_get(&names, a->kernels.data[i].name, &v) && v == 1) {
			d->only_a++;
			if (!ex_a)
				ex_a = a->kernels.data[i].short_name;
		}
	}
	kp_strmap_release(&names);
	if (d->only_a || d->only_b)
		differs(d, "kernel set differs (%lld only in A%s%s%s, %lld only in B%s%s%s)",
			(long long)d->only_a, ex_a ? ", e.g. " : "", ex_a ? ex_a : "", "",
			(long long)d->only_b, ex_b ? ", e.g. " : "", ex_b ? ex_b : "", "");
	if (a->n_kernels != b->n_kernels)
		differs(d, "kernel launches differ (A: %lld, B: %lld)", (long long)a->n_kernels,
			(long long)b->n_kernels);
	return 0;
out_nomem:
	kp_strmap_release(&names);
	return -1;
}

static int add_row(struct kp_diff *d, int kind, const char *name, int64_t a, int64_t b,
		   int64_t ac, int64_t bc)
{
	struct kp_diff_row r = { .kind = kind, .name = name, .label = name, .a_ns = a, .b_ns = b,
				 .a_count = ac, .b_count = bc };

	if (a > 0 && b >= 0)
		r.change_pct = 100.0 * (double)(b - a) / (double)a;
	if (kind != KP_DIFF_KERNEL && d->fail_pct >= 0 && a > 0 && b >= 0 &&
	    r.change_pct > d->fail_pct) {
		r.regressed = 1;
		d->n_regressed++;
	}
	return kp_vec_push(&d->rows, r);
}

static const struct kp_rep_region *region_by_label(const struct kp_report *r, const char *label)
{
	size_t i;

	for (i = 0; i < r->regions.len; i++)
		if (!strcmp(r->regions.data[i].label, label))
			return &r->regions.data[i];
	return NULL;
}

static const struct kp_rep_kernel *kernel_by_name(const struct kp_report *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->kernels.len; i++)
		if (!strcmp(r->kernels.data[i].name, name))
			return &r->kernels.data[i];
	return NULL;
}

static int build_rows(struct kp_diff *d, int top)
{
	const struct kp_report *a = d->a, *b = d->b;
	size_t i;

	if (add_row(d, KP_DIFF_RUN, "stream time", a->stream_span_ns, b->stream_span_ns,
		    a->n_kernels, b->n_kernels))
		return -1;
	for (i = 0; i < a->regions.len; i++) {
		const struct kp_rep_region *ra = &a->regions.data[i];
		const struct kp_rep_region *rb = region_by_label(b, ra->label);

		if (region_by_label(a, ra->label) != ra)
			continue;   /* a repeated label: the first one stands for it */
		if (add_row(d, KP_DIFF_REGION, ra->label, ra->eager_ns, rb ? rb->eager_ns : -1,
			    ra->occurrences, rb ? rb->occurrences : -1))
			return -1;
	}
	for (i = 0; i < b->regions.len; i++) {
		const struct kp_rep_region *rb = &b->regions.data[i];

		if (!region_by_label(a, rb->label) && region_by_label(b, rb->label) == rb &&
		    add_row(d, KP_DIFF_REGION, rb->label, -1, rb->eager_ns, -1, rb->occurrences))
			return -1;
	}
	/* the top kernels of A by time, then B's top kernels A lacks */
	for (i = 0; i < a->kernels.len && i < (size_t)top; i++) {
		const struct kp_rep_kernel *ka = &a->kernels.data[i];
		const struct kp_rep_kernel *kb = kernel_by_name(b, ka->name);

		if (add_row(d, KP_DIFF_KERNEL, ka->name, ka->total_ns, kb ? kb->total_ns : -1,
			    ka->count, kb ? kb->count : -1))
			return -1;
		d->rows.data[d->rows.len - 1].label = ka->label;
	}
	for (i = 0; i < b->kernels.len && i < (size_t)top; i++) {
		const struct kp_rep_kernel *kb = &b->kernels.data[i];
		const struct kp_rep_kernel *ka = kernel_by_name(a, kb->name);

		if (ka && (size_t)(ka - a->kernels.data) < (size_t)top)
			continue;
		if (add_row(d, KP_DIFF_KERNEL, kb->name, ka ? ka->total_ns : -1, kb->total_ns,
			    ka ? ka->count : -1, kb->count))
			return -1;
		d->rows.data[d->rows.len - 1].label = kb->label;
	}
	return 0;
}

int kp_diff_compute(struct kp_db *a, struct kp_db *b, const struct kp_diff_opts *opts,
		    struct kp_diff **out, struct kp_err *err)
{
	struct kp_report_opts ro = { .max_rows = 100000, .summary_only = 1 };
	struct kp_diff *d = calloc(1, sizeof(*d));
	int rc;

	*out = NULL;
	if (!d)
		return kp_err_set(err, KP_ENOMEM, "out of memory comparing runs");
	kp_strbuf_init(&d->why);
	d->fail_pct = opts ? opts->fail_pct : -1;
	ro.run_id = opts ? opts->run_a : 0;
	if ((rc = kp_report_load(a, &ro, &d->a, err))) {
		kp_err_prefix(err, "A");
		goto out_free;
	}
	ro.run_id = opts ? opts->run_b : 0;
	if ((rc = kp_report_load(b, &ro, &d->b, err))) {
		kp_err_prefix(err, "B");
		goto out_free;
	}
	if (compare_setup(d) || build_rows(d, DEF(opts ? opts->top_kernels : 0, 15))) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory comparing runs");
		goto out_free;
	}
	*out = d;
	return 0;
out_free:
	kp_diff_free(d);
	return rc;
}

void kp_diff_free(struct kp_diff *d)
{
	if (!d)
		return;
	kp_report_free(d->a);
	kp_report_free(d->b);
	kp_strbuf_release(&d->why);
	kp_vec_release(&d->rows);
	free(d);
}

static const char *cell_dur(int64_t ns, char *buf, size_t n)
{
	if (ns < 0)
		return "-";
	return kp_fmt_dur(ns, buf, n);
}

static const char *cell_pct(const struct kp_diff_row *r, char *buf, size_t n)
{
	if (r->a_ns < 0)
		return "new";
	if (r->b_ns < 0)
		return "gone";
	if (r->a_ns == 0)
		return "-";
	snprintf(buf, n, "%+.1f%%", r->change_pct);
	return buf;
}

/* Shorten a name for the text table to n columns (bytes). */
void kp_diff_text(const struct kp_diff *d, FILE *f)
{
	char a[32], b[32], p[32], t1[1024], t2[256], why[2048];
	size_t i;

	/* names come from the traces: printable (common/printable.h) */
	fprintf(f, "A: %s run %lld (%s)\nB: %s run %lld (%s)\n", d->a->db_path,
		(long long)d->a->run_id, kp_printable(t1, sizeof(t1), nz(d->a->device_name)),
		d->b->db_path, (long long)d->b->run_id,
		kp_printable(t2, sizeof(t2), nz(d->b->device_name)));
	if (d->comparable)
		fprintf(f, "comparable: same GPU, driver, compute capability and kernel set\n");
	else
		fprintf(f, "NOT COMPARABLE: %s\n", kp_printable(why, sizeof(why), d->why.buf));
	/*
	 * The name last and whole: kernel names share long prefixes (the
	 * same template with other arguments), so a name column cut to a
	 * width would print two rows that read the same.
	 */
	fprintf(f, "\n%-7s %12s %12s %9s %-9s %s\n", "kind", "A", "B", "change", "", "name");
	for (i = 0; i < d->rows.len; i++) {
		const struct kp_diff_row *r = &d->rows.data[i];

		fprintf(f, "%-7s %12s %12s %9s %-9s %s\n", kind_name[r->kind],
			cell_dur(r->a_ns, a, sizeof(a)), cell_dur(r->b_ns, b, sizeof(b)),
			cell_pct(r, p, sizeof(p)), r->regressed ? "REGRESSED" : "",
			kp_printable(t1, sizeof(t1), r->name));
	}
	if (d->fail_pct < 0)
		fprintf(f, "\nno regression threshold (--fail-on-regression PCT sets one)\n");
	else if (d->n_regressed)
		fprintf(f, "\nREGRESSION: %d row%s slower by more than %.1f%%\n", d->n_regressed,
			d->n_regressed == 1 ? "" : "s", d->fail_pct);
	else
		fprintf(f, "\nno region and not the run slowed by more than %.1f%%\n", d->fail_pct);
}

void kp_diff_csv(const struct kp_diff *d, FILE *f)
{
	char b[64];
	size_t i;

	fputs("kind,name,a_us,b_us,a_count,b_count,change_pct,regressed\n", f);
	for (i = 0; i < d->rows.len; i++) {
		const struct kp_diff_row *r = &d->rows.data[i];

		fprintf(f, "%s,", kind_name[r->kind]);
		kp_csv_field(f, r->name);
		fputc(',', f);
		if (r->a_ns >= 0)
			fputs(kp_csv_fmt_double(r->a_ns / 1000.0, b, sizeof(b)), f);
		fputc(',', f);
		if (r->b_ns >= 0)
			fputs(kp_csv_fmt_double(r->b_ns / 1000.0, b, sizeof(b)), f);
		fputc(',', f);
		if (r->a_count >= 0)
			fprintf(f, "%lld", (long long)r->a_count);
		fputc(',', f);
		if (r->b_count >= 0)
			fprintf(f, "%lld", (long long)r->b_count);
		fputc(',', f);
		if (r->a_ns > 0 && r->b_ns >= 0)
			fprintf(f, "%.1f", r->change_pct);
		fprintf(f, ",%d\n", r->regressed);
	}
}

/* One bar of a before/after pair, as long as v / scale. */
static void diff_bar(FILE *f, int64_t v, double scale, const char *color, const char *side)
{
	char a[32];

	fputs("<div class=\"bar\">", f);
	if (v > 0 && scale > 0)
		fprintf(f, "<span style=\"width:%.3f%%;background:%s\" title=\"%s: %s\"></span>",
			100.0 * (double)v / scale, color, side, cell_dur(v, a, sizeof(a)));
	fputs("</div>", f);
}

/*
 * The run and each region, A over B: each pair of bars scaled to its own
 * larger side, so a change reads the same for a long and a short region.
 */
static void diff_chart(FILE *f, const struct kp_diff *d)
{
	char a[32], b[32], p[32];
	size_t i;

	fputs("<p class=\"legend\"><span style=\"background:#8c959f\"></span>A (before)"
	      "<span style=\"background:#2f6fde\"></span>B (after)"
	      "<span style=\"background:#cf222e\"></span>B, regressed</p>\n"
	      "<div class=\"chart\" id=\"diff-chart\">\n", f);
	for (i = 0; i < d->rows.len; i++) {
		const struct kp_diff_row *r = &d->rows.data[i];
		double scale = (double)(r->a_ns > r->b_ns ? r->a_ns : r->b_ns);

		if (r->kind == KP_DIFF_KERNEL)
			continue;
		fprintf(f, "<div class=\"crow %s\"><div class=\"clab\">", kind_name[r->kind]);
		kp_html_name(f, r->label, NULL, 28);
		fputs("</div><div class=\"cbars\">", f);
		diff_bar(f, r->a_ns, scale, "#8c959f", "A");
		diff_bar(f, r->b_ns, scale, r->regressed ? "#cf222e" : "#2f6fde", "B");
		fprintf(f, "</div><div class=\"cval\">%s &rarr; %s<br>%s</div></div>\n",
			cell_dur(r->a_ns, a, sizeof(a)), cell_dur(r->b_ns, b, sizeof(b)),
			cell_pct(r, p, sizeof(p)));
	}
	fputs("</div>\n", f);
}

void kp_diff_html(const struct kp_diff *d, FILE *f)
{
	static const char *const cols[] = { "kind|s", "name|s", "A|n", "B|n", "change %|n", "verdict|s" };
	char a[32], b[32];
	size_t i;

	kp_html_begin(f, "kplan diff");
	fputs("<h1>kplan diff</h1>\n<p class=\"meta\">A: ", f);
	kp_html_esc(f, d->a->db_path);
	fprintf(f, " run %lld &middot; B: ", (long long)d->a->run_id);
	kp_html_esc(f, d->b->db_path);
	fprintf(f, " run %lld</p>\n<section id=\"diff\">\n<h2>Before / after</h2>\n", (long long)d->b->run_id);
	if (d->comparable) {
		fputs("<p>comparable: same GPU, driver, compute capability and kernel set.</p>\n", f);
	} else {
		fputs("<p class=\"missing\">not comparable: ", f);
		kp_html_esc(f, d->why.buf);
		fputs(".</p>\n", f);
	}
	diff_chart(f, d);
	kp_html_table_begin(f, "diff-table", cols, 6);
	for (i = 0; i < d->rows.len; i++) {
		const struct kp_diff_row *r = &d->rows.data[i];

		fprintf(f, "<tr class=\"%s\">", kind_name[r->kind]);
		kp_html_td_str(f, kind_name[r->kind]);
		fputs("<td>", f);
		kp_html_kname(f, r->name, r->label, 60);
		fprintf(f, "</td><td class=\"n\" data-v=\"%lld\">%s</td>", (long long)r->a_ns,
			cell_dur(r->a_ns, a, sizeof(a)));
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)r->b_ns,
			cell_dur(r->b_ns, b, sizeof(b)));
		if (r->a_ns > 0 && r->b_ns >= 0)
			kp_html_td_num(f, r->change_pct, "%+.1f");
		else
			fputs("<td class=\"n\" data-v=\"\">-</td>", f);
		kp_html_td_str(f, r->regressed ? "REGRESSED" : "");
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, (long)d->rows.len, (long)d->rows.len, "rows");
	if (d->fail_pct >= 0)
		fprintf(f, "<p>%d row%s slower by more than %.1f%%.</p>\n", d->n_regressed,
			d->n_regressed == 1 ? "" : "s", d->fail_pct);
	fputs("</section>\n", f);
	kp_html_end(f);
}
