/*
 * sections.c - the parts of the page people look at rather than read:
 * where each region's time goes now and with the plan (one chart), a
 * section per region (its time, kernels, blockers and the plan's
 * decision), and the distribution of idle gaps. Bars are HTML boxes
 * sized in percent, so they fit any width and print; the gap chart is
 * an SVG scaled to the page.
 */
#include "report_int.h"
#include "html.h"

#include <string.h>

#define C_BUSY "#2f6fde"
#define C_OTHER "#d0d7de"
#define C_GRAPH "#1a7f37"

/* A region's time per occurrence: kernels, host-bound idle, device-side idle, the rest. */
static void split(const struct kp_rep_region *r, int64_t part[4])
{
	int64_t sum;

	part[0] = r->busy_ns > 0 ? r->busy_ns : 0;
	part[1] = r->host_idle_ns > 0 ? r->host_idle_ns : 0;
	part[2] = r->device_idle_ns > 0 ? r->device_idle_ns : 0;
	sum = part[0] + part[1] + part[2];
	if (sum > r->eager_ns && sum > 0) {
		/* GPU time on several streams can sum past the wall time: scale down */
		part[0] = part[0] * r->eager_ns / sum;
		part[1] = part[1] * r->eager_ns / sum;
		part[2] = part[2] * r->eager_ns / sum;
		sum = part[0] + part[1] + part[2];
	}
	part[3] = r->eager_ns > sum ? r->eager_ns - sum : 0;
}

static const char *const part_name[] = {
	"kernels", "idle, host-bound", "idle, device-side", "rest (no GPU op running)",
};

static const char *part_color(int i)
{
	return i == 0 ? C_BUSY : i == 1 ? kp__tl_gap_color[KP_TL_HOST_GAP]
	       : i == 2 ? kp__tl_gap_color[KP_TL_DEVICE_GAP] : C_OTHER;
}

/* One bar: parts of total, the bar as long as total / scale of the row. */
static void bar(FILE *f, const int64_t *parts, const char *const *colors, int n, double scale)
{
	char a[32];
	int i;

	fputs("<div class=\"bar\">", f);
	for (i = 0; i < n; i++) {
		if (parts[i] <= 0 || scale <= 0)
			continue;
		fprintf(f, "<span style=\"width:%.3f%%;background:%s\" title=\"%s\"></span>",
			100.0 * (double)parts[i] / scale, colors[i], kp_fmt_dur(parts[i], a, sizeof(a)));
	}
	fputs("</div>", f);
}

/* The predicted time per occurrence with the current plan (or the analysis when none). */
static int64_t planned_ns(const struct kp_report *rep, const struct kp_rep_region *r, int *graphed)
{
	*graphed = 0;
	if (r->decision == KP_PLAN_EAGER)
		return r->eager_ns;
	if (r->capturable && r->graph_ns_pred >= 0 && (r->decision == KP_PLAN_GRAPH ||
	    r->decision == KP_PLAN_SPLIT || (!rep->plan && r->graph_ns_pred < r->eager_ns))) {
		*graphed = 1;
		return r->graph_ns_pred;
	}
	return r->eager_ns;
}

static void legend(FILE *f, int with_plan)
{
	int i;

	fputs("<p class=\"legend\">", f);
	for (i = 0; i < 4; i++)
		fprintf(f, "<span style=\"background:%s\"></span>%s", part_color(i), part_name[i]);
	if (with_plan)
		fprintf(f, "<span style=\"background:%s\"></span>predicted as a CUDA graph", C_GRAPH);
	fputs("</p>\n", f);
}

void kp__page_time_chart(FILE *f, const struct kp_report *rep)
{
	const char *colors[4] = { part_color(0), part_color(1), part_color(2), part_color(3) };
	const char *gcol[1] = { C_GRAPH };
	double scale = 0;
	size_t i, n = rep->regions.len < KP_REP_CARDS ? rep->regions.len : KP_REP_CARDS;
	char a[32], b[32];

	fputs("<h2 id=\"breakdown\">Where the time goes, per region</h2>\n", f);
	if (!n) {
		fputs("<p class=\"cap\">no regions: run <code>kplan analyze</code> first.</p>\n", f);
		return;
	}
	for (i = 0; i < n; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];

		if ((double)r->occurrences * r->eager_ns > scale)
			scale = (double)r->occurrences * r->eager_ns;
	}
	fprintf(f, "<p class=\"cap\">Each region's time over the whole run (occurrences &times; time"
		" per occurrence): now, split by what the GPU did, and predicted with the %s; the %zu"
		" regions with the most time.</p>\n", rep->plan ? "current plan" : "regions graphed"
		" (no plan yet)", n);
	legend(f, 1);
	fputs("<div class=\"chart\" id=\"time-chart\">\n", f);
	for (i = 0; i < n; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];
		int64_t part[4], tot[4], pred, g;
		int graphed, k;

		split(r, part);
		for (k = 0; k < 4; k++)
			tot[k] = part[k] * r->occurrences;
		pred = planned_ns(rep, r, &graphed);
		fprintf(f, "<div class=\"crow\" data-region=\"%lld\"><div class=\"clab\">", (long long)r->id);
		kp_html_name(f, r->label, NULL, 28);
		fputs("</div><div class=\"cbars\">", f);
		bar(f, tot, colors, 4, scale);
		/* with the plan: the run's eager time less the region's predicted
		 * saving (warm-up calls and capture included, plan/predict.h) */
		g = !graphed ? r->occurrences * r->eager_ns : r->gain_ns > 0 ?
		    r->occurrences * r->eager_ns - r->gain_ns : r->occurrences * pred;
		if (graphed)
			bar(f, &g, gcol, 1, scale);
		else
			bar(f, tot, colors, 4, scale);
		fprintf(f, "</div><div class=\"cval\">%s<br>&rarr; %s%s</div></div>\n",
			kp_fmt_dur(r->occurrences * r->eager_ns, a, sizeof(a)),
			kp_fmt_dur(g, b, sizeof(b)), graphed ? "" : " (eager)");
	}
	fputs("</div>\n", f);
}

/* Blockers of region index ri: what they are, where, and where in the user's code. */
static void card_blockers(FILE *f, const struct kp_report *rep, int ri)
{
	size_t i, n = 0;

	for (i = 0; i < rep->blockers.len; i++) {
		const struct kp_rep_blocker *b = &rep->blockers.data[i];

		if (b->region != ri)
			continue;
		if (!n++)
			fputs("<h4>Blockers</h4>\n<ul class=\"blockers\">\n", f);
		fprintf(f, "<li><b>%s</b> ", b->fatal == 1 ? "fatal" : b->fatal == 2 ? "warm-up only"
		      : "advisory");
		kp_html_esc(f, b->kind);
		if (b->api) {
			fputs(": <code>", f);
			kp_html_esc(f, b->api);
			fputs("</code>", f);
		}
		fprintf(f, " &times;%lld", (long long)b->count);
		if (b->occurrences > 0)
			fprintf(f, " in %lld occurrence%s", (long long)b->occurrences,
				b->occurrences == 1 ? "" : "s");
		if (b->first_occ >= 0) {
			fprintf(f, "; first in occurrence %lld", (long long)b->first_occ);
			if (b->position >= 0)
				fprintf(f, " before op %lld", (long long)b->position);
		}
		if (b->where) {
			fputs("<br><span class=\"where\">where: ", f);
			kp_html_esc(f, b->where);
			fputs("</span>", f);
		}
		if (b->detail && *b->detail) {
			fputs("<br><span class=\"cap\">", f);
			kp_html_esc(f, b->detail);
			fputs("</span>", f);
		}
		fputs("</li>\n", f);
		if (n >= 12)
			break;
	}
	if (n)
		fputs("</ul>\n", f);
	else if (rep->regions.data[ri].capturable)
		fputs("<p class=\"cap\">no blockers: nothing in it stops a CUDA graph capture.</p>\n", f);
}

/* Kernels of region index ri over the run (rep->rkernels is by region, then time). */
static void card_kernels(FILE *f, const struct kp_report *rep, int ri)
{
	static const char *const cols[] = {
		"kernel|s", "per occurrence|n", "count|n", "total|n", "avg|n", "% of region kernel time|n",
	};
	const struct kp_rep_region *r = &rep->regions.data[ri];
	size_t i, first = rep->rkernels.len, shown = 0, total = 0;
	int64_t sum = 0;
	char id[48], a[32];

	for (i = 0; i < rep->rkernels.len; i++) {
		if (rep->rkernels.data[i].region != ri)
			continue;
		if (first == rep->rkernels.len)
			first = i;
		total++;
		sum += rep->rkernels.data[i].total_ns;
	}
	if (!total) {
		fputs("<p class=\"cap\">no kernels of the trace fall in its occurrences.</p>\n", f);
		return;
	}
	fprintf(f, "<h4>Kernels</h4>\n<p class=\"cap\">%zu distinct kernels, %s of kernel time over"
		" the run.</p>\n", total, kp_fmt_dur(sum, a, sizeof(a)));
	snprintf(id, sizeof(id), "region-%lld-kernels", (long long)r->id);
	kp_html_table_begin(f, id, cols, 6);
	for (i = first; i < rep->rkernels.len && rep->rkernels.data[i].region == ri && shown < 15;
	     i++, shown++) {
		const struct kp_rep_rkernel *k = &rep->rkernels.data[i];
		const struct kp_rep_kernel *kn = &rep->kernels.data[k->kernel];
		char d[32];

		fputs("<tr><td>", f);
		kp_html_kname(f, kn->name, kn->label, KP_REP_KNAME_MAX);
		fputs("</td>", f);
		kp_html_td_num(f, r->occurrences ? (double)k->count / r->occurrences : 0, "%.1f");
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%lld</td>", (long long)k->count, (long long)k->count);
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)k->total_ns,
			kp_fmt_dur(k->total_ns, d, sizeof(d)));
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)(k->total_ns / k->count),
			kp_fmt_dur(k->total_ns / k->count, d, sizeof(d)));
		kp_html_td_num(f, sum ? 100.0 * k->total_ns / sum : 0, "%.1f");
		fputs("</tr>\n", f);
	}
	fputs("</tbody></table></div>\n", f);
	if (total > shown)
		fprintf(f, "<p class=\"cap\">the %zu with the most time of %zu.</p>\n", shown, total);
}

static const struct kp_plan_region *plan_region(const struct kp_report *rep, const char *label)
{
	size_t i;

	for (i = 0; rep->plan && label && i < rep->plan->n_regions; i++)
		if (rep->plan->regions[i].label && !strcmp(rep->plan->regions[i].label, label))
			return &rep->plan->regions[i];
	return NULL;
}

static void card_plan(FILE *f, const struct kp_report *rep, const struct kp_rep_region *r)
{
	const struct kp_plan_region *pr = plan_region(rep, r->label);
	char a[32];

	fputs("<h4>Plan</h4>\n<p>", f);
	if (!rep->plans.len) {
		fputs("no plan yet (<code>kplan plan DB -o model.kplan</code>).", f);
	} else if (!pr) {
		fputs("the current plan does not name this region: it runs eagerly"
		      " (<code>kplan plan --regions all</code> plans every region).", f);
	} else {
		fprintf(f, "<b>%s</b> (%s)", kp_plan_decision_name(pr->decision),
			kp_plan_reason_name(pr->reason));
		if (pr->reason_text && *pr->reason_text) {
			fputs(": ", f);
			kp_html_esc(f, pr->reason_text);
		}
		if (pr->decision != KP_PLAN_EAGER)
			fprintf(f, ". Warm-up %u call%s, break-even after %u replays, %u patch slot%s,"
				" predicted %s per occurrence (%.2fx)", pr->warmup, pr->warmup == 1 ? "" : "s",
				pr->break_even, (unsigned)pr->n_patches, pr->n_patches == 1 ? "" : "s",
				kp_fmt_dur(pr->graph_ns, a, sizeof(a)), pr->speedup_pred);
		fputs(".", f);
	}
	fputs("</p>\n", f);
}

void kp__page_region_cards(FILE *f, const struct kp_report *rep)
{
	const char *colors[4] = { part_color(0), part_color(1), part_color(2), part_color(3) };
	const char *gcol[1] = { C_GRAPH };
	size_t i, n = rep->regions.len < KP_REP_CARDS ? rep->regions.len : KP_REP_CARDS;
	char a[32], b[32], c[32];

	if (!n)
		return;
	fprintf(f, "<h2 id=\"region-sections\">Regions one by one</h2>\n<p class=\"cap\">The %zu regions"
		" with the most time: where an occurrence's time goes now and with the plan, its kernels,"
		" what blocks capturing it and what the plan decided.</p>\n", n);
	legend(f, 1);
	for (i = 0; i < n; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];
		int64_t part[4], pred;
		int graphed;

		split(r, part);
		pred = planned_ns(rep, r, &graphed);
		fprintf(f, "<section class=\"card\" id=\"region-%lld\"><h3><span class=\"swatch\""
			" style=\"background:%s\"></span>", (long long)r->id, kp__region_color((int)i));
		kp_html_name(f, r->label, NULL, 80);
		fprintf(f, " <span class=\"cap\">region %lld, ", (long long)r->id);
		kp_html_esc(f, r->source);
		if (r->stream_id >= 0)
			fprintf(f, ", stream %lld", (long long)r->stream_id);
		fprintf(f, ", %lld occurrences of %lld kernels</span></h3>\n", (long long)r->occurrences,
			(long long)r->kernels);
		fprintf(f, "<div class=\"crow\"><div class=\"clab\">now</div><div class=\"cbars\">");
		bar(f, part, colors, 4, (double)r->eager_ns);
		fprintf(f, "</div><div class=\"cval\">%s</div></div>\n", kp_fmt_dur(r->eager_ns, a, sizeof(a)));
		fprintf(f, "<div class=\"crow\"><div class=\"clab\">with the plan</div><div class=\"cbars\">");
		if (graphed)
			bar(f, &pred, gcol, 1, (double)r->eager_ns);
		else
			bar(f, part, colors, 4, (double)r->eager_ns);
		fprintf(f, "</div><div class=\"cval\">%s%s</div></div>\n", kp_fmt_dur(pred, b, sizeof(b)),
			graphed ? "" : " (eager)");
		if (graphed && r->graph_ns_hi > 0 && pred == r->graph_ns_pred)
			fprintf(f, "<p class=\"cap\">predicted graph time %s, between %s and %s (the "
				"model's validated error, or, where the captured path may run other "
				"kernels than the trace shows, the range of the two paths)</p>\n",
				kp_fmt_dur(pred, a, sizeof(a)),
				kp_fmt_dur(r->graph_ns_lo, b, sizeof(b)),
				kp_fmt_dur(r->graph_ns_hi, c, sizeof(c)));
		fprintf(f, "<p class=\"cap\">per occurrence: kernels %s, host-bound idle %s (%.1f%%),"
			" device-side idle %s", kp_fmt_dur(part[0], a, sizeof(a)),
			kp_fmt_dur(part[1], b, sizeof(b)),
			r->eager_ns > 0 ? 100.0 * (double)part[1] / (double)r->eager_ns : 0.0,
			kp_fmt_dur(part[2], c, sizeof(c)));
		if (r->gain_ns > 0)
			fprintf(f, "; predicted saving over the run %s", kp_fmt_dur(r->gain_ns, a, sizeof(a)));
		if (r->mid_end > r->mid_start)
			fprintf(f, " &middot; <button type=\"button\" class=\"tl-go noprint\" data-t0=\"%lld\""
				" data-t1=\"%lld\">show occurrence %lld in the timeline</button>",
				(long long)(r->mid_start - rep->tl.t0), (long long)(r->mid_end - rep->tl.t0),
				(long long)(r->occurrences / 2 + 1));
		fputs("</p>\n<div class=\"cols\"><div>\n", f);
		card_kernels(f, rep, (int)i);
		fputs("</div><div>\n", f);
		card_blockers(f, rep, (int)i);
		card_plan(f, rep, r);
		fputs("</div></div></section>\n", f);
	}
}

static void bucket_label(int b, char *buf, size_t n)
{
	int64_t us = b ? (int64_t)1 << (b - 1) : 0;

	if (!b)
		snprintf(buf, n, "<1us");
	else if (us < 1000)
		snprintf(buf, n, "%lldus", (long long)us);
	else if (us < 1000000)
		snprintf(buf, n, "%lldms", (long long)(us / 1000));
	else
		snprintf(buf, n, "%llds", (long long)(us / 1000000));
}

void kp__page_gap_chart(FILE *f, const struct kp_report *rep)
{
	static const int cause_kind[3] = { KP_TL_HOST_GAP, KP_TL_DEVICE_GAP, KP_TL_UNKNOWN_GAP };
	static const char *const cause_name[3] = { "host-bound", "device-side", "no launch record" };
	const int W = 800, H = 200, L = 40, B = 30;
	int lo = KP_GAP_BUCKETS, hi = -1, b, c, nb;
	double max = 0, bw, y;
	char lab[32], a[32];

	fputs("<h2 id=\"gaps\">Idle gaps</h2>\n", f);
	for (b = 0; b < KP_GAP_BUCKETS; b++) {
		double t = 0;

		for (c = 0; c < 3; c++)
			t += (double)rep->gap_ns[c][b];
		if (t > 0) {
			lo = b < lo ? b : lo;
			hi = b;
		}
		max = t > max ? t : max;
	}
	if (hi < 0) {
		fputs("<p class=\"cap\">no idle gaps between GPU ops.</p>\n", f);
		return;
	}
	fputs("<p class=\"cap\">Idle time between consecutive GPU ops on a stream, by the gap's length"
	      " (each bar: all gaps of that length, from the bucket's lower edge to twice it) and by"
	      " cause. Many short host-bound gaps are what CUDA graphs remove.</p>\n<p class=\"legend\">", f);
	for (c = 0; c < 3; c++)
		fprintf(f, "<span style=\"background:%s\"></span>%s", kp__tl_gap_color[cause_kind[c]],
			cause_name[c]);
	fputs("</p>\n", f);
	nb = hi - lo + 1;
	bw = (double)(W - L) / nb;
	fprintf(f, "<svg id=\"gap-chart\" class=\"chart-svg\" viewBox=\"0 0 %d %d\" role=\"img\""
		" aria-label=\"idle time by gap length\">\n", W, H + B);
	fprintf(f, "<text x=\"0\" y=\"12\">%s</text><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\""
		" stroke=\"#8c959f\"/>\n", kp_fmt_dur((int64_t)max, a, sizeof(a)), L, H, W, H);
	for (b = lo; b <= hi; b++) {
		double x = L + (b - lo) * bw;
		int64_t n = 0;

		y = H;
		for (c = 0; c < 3; c++) {
			double h = max > 0 ? (H - 16) * (double)rep->gap_ns[c][b] / max : 0;

			n += rep->gap_n[c][b];
			if (h <= 0)
				continue;
			y -= h;
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
				"<title>%lld %s gaps, %s</title></rect>\n", x + 1, y, bw - 2, h,
				kp__tl_gap_color[cause_kind[c]], (long long)rep->gap_n[c][b], cause_name[c],
				kp_fmt_dur(rep->gap_ns[c][b], a, sizeof(a)));
		}
		bucket_label(b, lab, sizeof(lab));
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"small\">%lld</text>\n",
			x + bw / 2, H + 13, lab, x + bw / 2, H + 26, (long long)n);
	}
	fputs("</svg>\n<p class=\"cap\">under each bar: its lower edge and how many gaps.</p>\n", f);
}
