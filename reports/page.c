/*
 * page.c - the report's HTML page: verdict, where the time goes, the
 * timeline (tlpage.c, drawn by page.js), regions and a section per region
 * (sections.c), the gap distribution, top kernels, fusion candidates,
 * plan, calibration, collection quality. One file, no external resources;
 * every database string is escaped through html.h.
 */
#include "report_int.h"
#include "html.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include "../common/version.h"
#define KP_REPORT_VERSION KP_VERSION
#include <string.h>

#include "../common/kname.h"
#include "../plan/predict.h"

#define DEF(v, d) ((v) > 0 ? (v) : (d))
#define NAME_MAX_CP 60

static const struct kp_rep_plan *current_plan(const struct kp_report *rep)
{
	size_t i;

	for (i = 0; i < rep->plans.len; i++) {
		if (rep->plans.data[i].status && !strcmp(rep->plans.data[i].status, "current"))
			return &rep->plans.data[i];
	}
	return NULL;
}

char *kp_report_verdict(const struct kp_report *rep, char *buf, size_t n)
{
	char a[32], b[32], c[32], d[32];
	size_t len = 0;
	int64_t base = rep->stream_span_ns;
	const struct kp_rep_plan *plan = current_plan(rep);
	const struct kp_rep_region *top = NULL;
	int64_t n_graph = 0;
	size_t i;

	buf[0] = '\0';
	if (!rep->n_kernels) {
		snprintf(buf, n, "Run %lld has no kernels: nothing to report.", (long long)rep->run_id);
		return buf;
	}
	if (rep->n_ops && base > 0) {
		double host = 100.0 * rep->host_gap_ns / base;
		const char *word = host >= 50 ? "launch-bound" : host >= 20 ? "partly launch-bound"
				 : "not launch-bound";

		len += snprintf(buf + len, n - len,
			"This run is %s: the GPU sat idle waiting for the CPU for %.1f%% of its stream time"
			" (%s of %s; kernels ran for %s)", word, host,
			kp_fmt_dur(rep->host_gap_ns, a, sizeof(a)), kp_fmt_dur(base, b, sizeof(b)),
			kp_fmt_dur(rep->kernel_ns, c, sizeof(c)));
	} else {
		len += snprintf(buf + len, n - len, "Run %lld has no stream time to attribute",
				(long long)rep->run_id);
	}
	if (len >= n)
		return buf;
	/* the saving: plan/predict.h, the same figures as `kplan show`; the
	 * region that saves most as the example */
	for (i = 0; i < rep->regions.len; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];

		n_graph += r->decision == KP_PLAN_GRAPH;
		if (r->gain_ns > 0 && r->graph_ns_pred >= 0 && (!top || r->gain_ns > top->gain_ns))
			top = r;
	}
	if (rep->plan && rep->saved_ns > 0) {
		len += snprintf(buf + len, n - len, "; the %splan%s%s graphs %lld region%s and is predicted"
				" to save %s of the run's %s (%.2fx)", plan ? "current " : "",
				plan && plan->path ? " " : "", plan && plan->path ? plan->path : "",
				(long long)n_graph, n_graph == 1 ? "" : "s",
				kp_fmt_dur(rep->saved_ns, a, sizeof(a)), kp_fmt_dur(rep->run_ns, b, sizeof(b)),
				rep->plan->speedup_pred);
	} else if (!rep->plan && rep->saved_ns > 0) {
		len += snprintf(buf + len, n - len, "; graphing its %lld capturable region%s is predicted"
				" to save %s of the run's %s (%.2fx) after %d eager warm-up calls and a"
				" capture each", (long long)rep->n_saving, rep->n_saving == 1 ? "" : "s",
				kp_fmt_dur(rep->saved_ns, a, sizeof(a)), kp_fmt_dur(rep->run_ns, b, sizeof(b)),
				rep->run_ns > rep->saved_ns ?
				(double)rep->run_ns / (double)(rep->run_ns - rep->saved_ns) : 0.0,
				KP_PLAN_DEFAULT_WARMUP);
	} else if (rep->plan && len < n) {
		len += snprintf(buf + len, n - len, "; the plan is predicted to save nothing over this run");
	} else if (rep->has_regions && len < n) {
		len += snprintf(buf + len, n - len, "; no region is capturable as a CUDA graph and faster"
				" as one, so a plan would save nothing");
	}
	if (top && rep->saved_ns > 0 && len < n)
		len += snprintf(buf + len, n - len, ", '%s' from %s to %s per call (%.2fx)",
				top->label, kp_fmt_dur(top->eager_ns, c, sizeof(c)),
				kp_fmt_dur(top->graph_ns_pred, d, sizeof(d)),
				top->graph_ns_pred > 0 ? (double)top->eager_ns / top->graph_ns_pred : 0.0);
	/* a graph also closes device-side launch gaps: say so when it shows */
	if (rep->saved_ns > rep->host_gap_ns && rep->host_gap_ns > 0 && len < n)
		len += snprintf(buf + len, n - len, "; more than the host-bound idle, as a graph also"
				" removes the device-side launch gaps");
	if (len < n)
		snprintf(buf + len, n - len, ".");
	return buf;
}

static void h2(FILE *f, const char *id, const char *title)
{
	fprintf(f, "<h2 id=\"%s\">%s</h2>\n", id, title);
}

static void td_dur(FILE *f, int64_t ns)
{
	char b[32];

	if (ns < 0) {
		fputs("<td class=\"n\" data-v=\"\">-</td>", f);
		return;
	}
	fprintf(f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)ns, kp_fmt_dur(ns, b, sizeof(b)));
}

/* part of whole in percent, one decimal (as `kplan analyze` and the plan's reason) */
static void td_pct(FILE *f, int64_t part, int64_t whole)
{
	if (whole <= 0 || part < 0)
		fputs("<td class=\"n\" data-v=\"\">-</td>", f);
	else
		kp_html_td_num(f, 100.0 * (double)part / (double)whole, "%.1f%%");
}

static void td_int(FILE *f, int64_t v)
{
	if (v < 0)
		fputs("<td class=\"n\" data-v=\"\">-</td>", f);
	else
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%lld</td>", (long long)v, (long long)v);
}

static void td_name(FILE *f, const char *name, const char *short_name)
{
	fputs("<td>", f);
	kp_html_name(f, name, short_name, NAME_MAX_CP);
	fputs("</td>", f);
}

static void header(FILE *f, const struct kp_report *rep)
{
	char v[1024], a[32];

	fputs("<h1>kplan report</h1>\n<p class=\"meta\">", f);
	kp_html_esc(f, rep->db_path);
	fprintf(f, " &middot; run %lld (", (long long)rep->run_id);
	kp_html_esc(f, rep->source);
	fputs(") &middot; ", f);
	kp_html_esc(f, rep->device_name ? rep->device_name : "unknown GPU");
	if (rep->compute_major)
		fprintf(f, ", compute %d.%d", rep->compute_major, rep->compute_minor);
	if (rep->sm_count)
		fprintf(f, ", %d SMs", rep->sm_count);
	if (rep->driver_version)
		fprintf(f, " &middot; driver %d.%d", rep->driver_version / 1000,
			(rep->driver_version % 1000) / 10);
	fprintf(f, " &middot; %lld kernels, %lld API calls, span %s",
		(long long)rep->n_kernels, (long long)rep->n_api,
		kp_fmt_dur(rep->t_end_ns - rep->t_begin_ns, a, sizeof(a)));
	if (rep->command) {
		fputs("<br>command: ", f);
		kp_html_esc(f, rep->command);
	} else if (rep->source_path) {
		fputs("<br>source: ", f);
		kp_html_esc(f, rep->source_path);
	}
	fputs("</p>\n<div class=\"verdict\" id=\"verdict\">", f);
	kp_html_esc(f, kp_report_verdict(rep, v, sizeof(v)));
	fputs("</div>\n", f);
	if (rep->missing[0]) {
		fputs("<p class=\"missing\" id=\"missing\">", f);
		kp_html_esc(f, rep->missing);
		fputs(".</p>\n", f);
	}
}

static void td_dash(FILE *f)
{
	fputs("<td class=\"n\" data-v=\"\">-</td>", f);
}

static void td_decision(FILE *f, int decision)
{
	kp_html_td_str(f, decision >= 0 ? kp_plan_decision_name(decision) : "-");
}

static void td_blockers(FILE *f, const struct kp_rep_region *r)
{
	fputs("<td>", f);
	kp_html_esc(f, r->blocker_apis && *r->blocker_apis ? r->blocker_apis
		    : r->blockers ? r->blockers : "");
	fputs("</td>", f);
}

static void region_row(FILE *f, const struct kp_rep_region *r)
{
	fprintf(f, "<tr class=\"region\" data-region=\"%lld\">", (long long)r->id);
	td_int(f, r->id);
	td_name(f, r->label, NULL);
	kp_html_td_str(f, r->source);
	td_int(f, r->stream_id);
	td_int(f, r->occurrences);
	td_int(f, r->kernels);
	td_dur(f, r->eager_ns);
	td_dur(f, r->occurrences * r->eager_ns);
	td_dur(f, r->graph_ns_pred);
	if (r->speedup_pred > 0)
		kp_html_td_num(f, r->speedup_pred, "%.2fx");
	else
		td_dash(f);
	td_dur(f, r->gain_ns);
	td_dur(f, r->host_idle_ns);
	td_pct(f, r->host_idle_ns, r->eager_ns);
	kp_html_td_str(f, r->capturable ? "yes" : "no");
	td_decision(f, r->decision);
	td_blockers(f, r);
	td_int(f, r->break_even);
	fputs("</tr>\n", f);
}

/* "graph 28 / eager 323": the plan's decisions over a family's members. */
static void td_decisions(FILE *f, const struct kp_report *rep, const struct kp_rep_family *fam)
{
	static const int order[] = { KP_PLAN_GRAPH, KP_PLAN_SPLIT, KP_PLAN_EAGER };
	const char *sep = "";
	size_t i;

	if (!rep->plan) {
		kp_html_td_str(f, "-");
		return;
	}
	fputs("<td>", f);
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (!fam->decisions[order[i]])
			continue;
		fprintf(f, "%s%s %lld", sep, kp_plan_decision_name(order[i]),
			(long long)fam->decisions[order[i]]);
		sep = " / ";
	}
	if (fam->n_unplanned)
		fprintf(f, "%snot planned %lld", sep, (long long)fam->n_unplanned);
	fputs("</td>", f);
}

/* A family's members, in region order, inside its row's <details>. */
static void family_members(FILE *f, const struct kp_report *rep, int fi, size_t max)
{
	static const char *const cols[] = {
		"id", "label", "occurrences", "eager / occ", "graphed / occ (pred)",
		"predicted saving (run)", "capturable", "plan", "blockers (API call)",
	};
	const struct kp_rep_family *fam = &rep->families.data[fi];
	size_t i, shown = 0;

	fputs("<table class=\"members\"><thead><tr>", f);
	for (i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		fprintf(f, "<th>%s</th>", cols[i]);
	fputs("</tr></thead><tbody>\n", f);
	for (i = fam->first; i < rep->regions.len && shown < max; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];

		if (r->family != fi)
			continue;
		fprintf(f, "<tr class=\"region\" data-region=\"%lld\">", (long long)r->id);
		td_int(f, r->id);
		td_name(f, r->label, NULL);
		td_int(f, r->occurrences);
		td_dur(f, r->eager_ns);
		td_dur(f, r->graph_ns_pred);
		td_dur(f, r->gain_ns);
		kp_html_td_str(f, r->capturable ? "yes" : "no");
		td_decision(f, r->decision);
		td_blockers(f, r);
		fputs("</tr>\n", f);
		shown++;
	}
	fputs("</tbody></table>", f);
	if ((int64_t)shown < fam->members)
		fprintf(f, "<p class=\"cap\">showing the largest %zu of %lld members; regions.csv holds"
			" all of them.</p>", shown, (long long)fam->members);
}

/* One row for a family: sums over its members, the members inside <details>. */
static void family_row(FILE *f, const struct kp_report *rep, int fi, size_t max)
{
	const struct kp_rep_family *fam = &rep->families.data[fi];

	fputs("<tr class=\"family\" data-family=\"", f);
	kp_html_esc(f, fam->name);
	fputs("\">", f);
	td_dash(f);
	fputs("<td><details><summary>", f);
	kp_html_name(f, fam->name, NULL, NAME_MAX_CP);
	fprintf(f, " <span class=\"cap\">(%lld regions)</span></summary>", (long long)fam->members);
	family_members(f, rep, fi, max);
	fputs("</details></td>", f);
	kp_html_td_str(f, fam->source);
	td_int(f, fam->stream_id);
	td_int(f, fam->occurrences);
	td_dash(f);
	td_dur(f, fam->occurrences ? fam->eager_ns / fam->occurrences : 0);
	td_dur(f, fam->eager_ns);
	td_dash(f);
	td_dash(f);
	td_dur(f, fam->gain_ns);
	td_dur(f, fam->occurrences ? fam->host_idle_ns / fam->occurrences : 0);
	td_pct(f, fam->host_idle_ns, fam->eager_ns);
	fprintf(f, "<td>%lld of %lld</td>", (long long)fam->n_capturable, (long long)fam->members);
	td_decisions(f, rep, fam);
	fputs("<td></td>", f);
	td_dash(f);
	fputs("</tr>\n", f);
}

static int64_t region_total(const struct kp_rep_region *r)
{
	return r->occurrences * r->eager_ns;
}

/*
 * One row per region in no family and one per family, by total eager time
 * (occurrences x eager / occ), largest first: both lists are sorted so, and
 * are merged here, up to max rows.
 */
static void regions(FILE *f, const struct kp_report *rep)
{
	static const char *const cols[] = {
		"id|n", "label|s", "source|s", "stream|n", "occurrences|n", "kernels|n",
		"eager / occ|n", "eager total|n", "graphed / occ (pred)|n", "speedup|n",
		"predicted saving (run)|n", "host idle / occ|n", "host-bound|n", "capturable|s", "plan|s",
		"blockers (API call)|s", "break-even|n",
	};
	size_t max = (size_t)DEF(rep->opts.max_rows, 200);
	size_t i = 0, fi = 0, rows = 0, total = rep->families.len;
	const struct kp_rep_family *fam;

	h2(f, "regions", "Regions");
	if (!rep->has_regions) {
		fputs("<p class=\"cap\">no regions: run <code>kplan analyze</code> first.</p>\n", f);
		return;
	}
	for (i = 0; i < rep->regions.len; i++)
		total += rep->regions.data[i].family < 0;
	if (rep->families.len) {
		fam = &rep->families.data[0];
		fputs("<p class=\"cap\">Regions of one source whose names differ only in their numbers"
		      " are one family row when at least 3 share the name (", f);
		kp_html_esc(f, fam->name);
		fprintf(f, " stands for %lld regions); open a family for its members. regions.csv keeps"
			" one row per region, with its family.</p>\n", (long long)fam->members);
	}
	kp_html_table_begin(f, "regions-table", cols, (int)(sizeof(cols) / sizeof(cols[0])));
	for (i = 0; rows < max; rows++) {
		while (i < rep->regions.len && rep->regions.data[i].family >= 0)
			i++;
		fam = fi < rep->families.len ? &rep->families.data[fi] : NULL;
		if (i < rep->regions.len &&
		    (!fam || region_total(&rep->regions.data[i]) >= fam->eager_ns)) {
			region_row(f, &rep->regions.data[i++]);
		} else if (fam) {
			family_row(f, rep, (int)fi++, max);
		} else {
			break;
		}
	}
	if (rep->families.len)
		kp_html_table_end(f, (long)rows, (long)total, "rows (regions and families)");
	else
		kp_html_table_end(f, (long)rows, (long)rep->n_regions_total, "regions");
}

static int cmp_count(const void *a, const void *b)
{
	const struct kp_rep_kernel *x = *(const struct kp_rep_kernel *const *)a;
	const struct kp_rep_kernel *y = *(const struct kp_rep_kernel *const *)b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return strcmp(x->name, y->name);
}

static void kernel_table(FILE *f, const char *id, const struct kp_report *rep,
			 const struct kp_rep_kernel *const *ks, size_t n)
{
	static const char *const cols[] = {
		"kernel|s", "count|n", "total|n", "% of kernel time|n", "avg|n", "min|n", "max|n",
	};
	size_t i;

	kp_html_table_begin(f, id, cols, 7);
	for (i = 0; i < n; i++) {
		const struct kp_rep_kernel *k = ks[i];

		fputs("<tr><td>", f);
		kp_html_kname(f, k->name, k->label, KP_REP_KNAME_MAX);
		fputs("</td>", f);
		td_int(f, k->count);
		td_dur(f, k->total_ns);
		kp_html_td_num(f, rep->kernel_ns ? 100.0 * k->total_ns / rep->kernel_ns : 0, "%.1f");
		td_dur(f, k->count ? k->total_ns / k->count : 0);
		td_dur(f, k->min_ns);
		td_dur(f, k->max_ns);
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, (long)n, (long)rep->kernels.len, "distinct kernels");
}

static int kernels(FILE *f, const struct kp_report *rep)
{
	size_t n = rep->kernels.len, top = (size_t)DEF(rep->opts.top_kernels, 25), i;
	const struct kp_rep_kernel **ks = malloc((n ? n : 1) * sizeof(*ks));

	if (!ks)
		return -1;
	for (i = 0; i < n; i++)
		ks[i] = &rep->kernels.data[i];
	h2(f, "kernels-time", "Top kernels by time");
	kernel_table(f, "kernels-by-time", rep, ks, n < top ? n : top);
	qsort(ks, n, sizeof(*ks), cmp_count);
	h2(f, "kernels-count", "Top kernels by count");
	kernel_table(f, "kernels-by-count", rep, ks, n < top ? n : top);
	free(ks);
	return 0;
}

/* A fusion chain by its kernels' labels, the full names on hover. */
static void chain(FILE *f, const char *names)
{
	char buf[1024];

	fputs("<span title=\"", f);
	kp_html_esc(f, names);
	fputs("\">", f);
	kp_html_esc(f, kp_kernel_chain_label(names, buf, sizeof(buf)));
	fputs("</span>", f);
}

static void td_chain(FILE *f, const char *names)
{
	fputs("<td>", f);
	chain(f, names);
	fputs("</td>", f);
}

static void fusion(FILE *f, const struct kp_report *rep)
{
	static const char *const cols[] = {
		"id|n", "region|n", "kernels|n", "chain|s", "time|n", "saved bytes|n",
		"saved launches|n", "score (ns saved)|n", "feasible|s", "reason|s",
	};
	size_t i;

	h2(f, "fusion", "Fusion candidates");
	if (!rep->n_fusion_total) {
		fputs("<p class=\"cap\">no fusion candidates", f);
		fputs(rep->has_regions ? ".</p>\n" : " (the run has not been analyzed).</p>\n", f);
		return;
	}
	kp_html_table_begin(f, "fusion-table", cols, 10);
	for (i = 0; i < rep->fusion.len; i++) {
		const struct kp_rep_fusion *c = &rep->fusion.data[i];

		fputs("<tr>", f);
		td_int(f, c->id);
		td_int(f, c->region_id);
		td_int(f, c->n_kernels);
		td_chain(f, c->kernel_names);
		td_dur(f, c->dur_ns);
		td_int(f, c->saved_bytes);
		td_int(f, c->saved_nodes);
		kp_html_td_num(f, c->score, "%.1f");
		kp_html_td_str(f, c->feasible ? "yes" : "no");
		kp_html_td_str(f, c->reason);
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, (long)rep->fusion.len, (long)rep->n_fusion_total, "fusion candidates");
}

static void plan_decisions(FILE *f, const struct kp_plan *pl)
{
	static const char *const cols[] = {
		"region|s", "decision|s", "reason|s", "kernels|n", "occurrences|n", "eager / occ|n",
		"graphed / occ (pred)|n", "speedup|n", "warm-up|n", "break-even|n", "patch slots|n",
		"why|s",
	};
	size_t i;

	kp_html_table_begin(f, "plan-table", cols, 12);
	for (i = 0; i < pl->n_regions; i++) {
		const struct kp_plan_region *r = &pl->regions[i];

		fputs("<tr>", f);
		td_name(f, r->label, NULL);
		kp_html_td_str(f, kp_plan_decision_name(r->decision));
		kp_html_td_str(f, kp_plan_reason_name(r->reason));
		td_int(f, r->kernels);
		td_int(f, r->occurrences);
		td_dur(f, r->eager_ns);
		td_dur(f, r->graph_ns);
		kp_html_td_num(f, r->speedup_pred, "%.2fx");
		td_int(f, r->warmup);
		td_int(f, r->break_even);
		td_int(f, (int64_t)r->n_patches);
		kp_html_td_str(f, r->reason_text);
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, (long)pl->n_regions, (long)pl->n_regions, "regions in the plan");
	for (i = 0; i < pl->n_fusions; i++) {
		const struct kp_plan_fusion *u = &pl->fusions[i];
		char a[32];

		if (!i)
			fputs("<p>fusion groups:</p>\n<ul>\n", f);
		fprintf(f, "<li>%u kernels in ", u->kernels);
		kp_html_esc(f, u->region);
		fprintf(f, " (saves %s per occurrence, score %.3g): ", kp_fmt_dur(u->gain_ns, a, sizeof(a)),
			u->score);
		chain(f, u->names);
		fputs("</li>\n", f);
		if (i + 1 == pl->n_fusions)
			fputs("</ul>\n", f);
	}
}

/*
 * kplan.torch's fusion groups of the plan (PLAN.aten): each group's ops,
 * shape, numerics and what the cost model predicts it saves, with the
 * gain recorded when the groups were saved (the model's defaults) and the
 * same formula with this GPU's constants (kp_cost_fusion_gain_ns).
 */
static void torch_groups(FILE *f, const struct kp_report *rep)
{
	static const char *const cols[] = {
		"id|n", "region|s", "ops|s", "shape|s", "numerics|s", "saved kernels|n",
		"saved bytes|n", "per call|n", "gain (saved)|n", "gain on this GPU|n",
		"per region call|n",
	};
	const struct kp_aten_groups *g = rep->aten;
	size_t i;

	if (rep->aten_error[0]) {
		fputs("<p class=\"missing\">torch fusion groups beside the plan cannot be read: ", f);
		kp_html_esc(f, rep->aten_error);
		fputs("</p>\n", f);
		return;
	}
	if (!g)
		return;
	fprintf(f, "<p>torch fusion groups (kplan.torch, <code>");
	kp_html_esc(f, rep->aten_path);
	fprintf(f, "</code>): %zu%s; the gain per occurrence of a group is DRAM traffic no longer"
		" moved at half the bandwidth plus a graph node per kernel saved (the cost model"
		" of fusion candidates), and a call of its region runs it <i>per call</i>"
		" times.</p>\n", g->n_groups,
		g->plan_hash == rep->plan->body_hash ? "" :
		", <b>found with another plan</b>: not used until saved again with this one");
	kp_html_table_begin(f, "aten-table", cols, 11);
	for (i = 0; i < g->n_groups; i++) {
		const struct kp_aten_group *u = &g->groups[i];
		int64_t here = u->saved_bytes < 0 ? -1 :
			llround(kp_cost_fusion_gain_ns(&rep->cost, (double)u->saved_bytes,
						       (double)u->saved_kernels));

		fputs("<tr>", f);
		td_int(f, u->id);
		kp_html_td_str(f, u->region);
		kp_html_td_str(f, u->ops);
		kp_html_td_str(f, u->shape);
		kp_html_td_str(f, u->exact ? "bit-exact" : "tolerant");
		td_int(f, u->saved_kernels);
		td_int(f, u->saved_bytes);
		td_int(f, u->per_call);
		td_dur(f, u->gain_ns);
		td_dur(f, here);
		td_dur(f, here < 0 || u->per_call < 0 ? -1 : here * u->per_call);
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, (long)g->n_groups, (long)g->n_groups, "torch fusion groups");
}

static void plan(FILE *f, const struct kp_report *rep)
{
	const struct kp_rep_plan *p = rep->plans.len ? &rep->plans.data[0] : NULL;
	size_t len;

	h2(f, "plan", "Plan");
	if (!p) {
		fputs("<p class=\"cap\">no plan for this run: <code>kplan plan DB -o model.kplan</code> writes one.</p>\n", f);
		return;
	}
	fprintf(f, "<p>plan %lld (", (long long)p->id);
	kp_html_esc(f, p->status);
	if (p->stale_reason) {
		fputs(": ", f);
		kp_html_esc(f, p->stale_reason);
	}
	fputs(")", f);
	if (p->path) {
		fputs(", written to <code>", f);
		kp_html_esc(f, p->path);
		fputs("</code>", f);
	}
	fputs(", checksum <code>", f);
	kp_html_esc(f, p->checksum);
	fputs("</code>", f);
	if (p->speedup_pred > 0)
		fprintf(f, ", predicted speedup %.2fx", p->speedup_pred);
	fputs(".</p>\n", f);
	if (rep->plan) {
		plan_decisions(f, rep->plan);
		torch_groups(f, rep);
	} else {
		/* unreadable plan text: say why and show it as it is */
		fputs("<p class=\"missing\">the stored plan does not parse: ", f);
		kp_html_esc(f, rep->plan_error);
		fputs("</p>\n<pre id=\"plan-body\">", f);
		len = p->body ? strlen(p->body) : 0;
		kp_html_escn(f, p->body, len > 65536 ? 65536 : len);
		if (len > 65536)
			fprintf(f, "\n... (%zu more bytes)", len - 65536);
		fputs("</pre>\n", f);
	}
	if (rep->plans.len > 1)
		fprintf(f, "<p class=\"cap\">%zu older or stale plans for this run are in kp_plans.</p>\n",
			rep->plans.len - 1);
}

static void calibration(FILE *f, const struct kp_report *rep)
{
	static const char *const cols[] = { "quantity|s", "value|n", "from|s", "meaning|s" };
	static const char *const src[] = { "default", "calibrated", "calibrated (other driver)" };
	const struct kp_cost *c = &rep->cost;
	int q;

	h2(f, "calibration", "Calibration constants");
	fputs("<p class=\"cap\">", f);
	if (c->n_calibrated)
		fprintf(f, "%d of %d constants were measured on this GPU by <code>kplan calibrate</code>;"
			" the rest are the documented defaults.", c->n_calibrated, KP_COST__N);
	else
		fputs("no calibration for this GPU in the database: the cost model used its documented"
		      " defaults (measured on H100/H200, CUDA 13.0); <code>kplan calibrate</code> measures"
		      " this GPU.", f);
	fputs("</p>\n", f);
	kp_html_table_begin(f, "calibration-table", cols, 4);
	for (q = 0; q < KP_COST__N; q++) {
		unsigned s = c->src[q];

		fputs("<tr>", f);
		kp_html_td_str(f, kp_cost_name(q));
		kp_html_td_num(f, c->v[q], "%.4g");
		kp_html_td_str(f, s < 3 ? src[s] : "?");
		kp_html_td_str(f, kp_cost_doc(q));
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, KP_COST__N, KP_COST__N, "constants");
}

static void quality(FILE *f, const struct kp_report *rep)
{
	char a[32];

	h2(f, "collection", "Collection");
	fputs("<ul>\n<li>status: ", f);
	kp_html_esc(f, rep->status);
	fprintf(f, "</li>\n<li id=\"dropped\">dropped records: %lld", (long long)rep->dropped_records);
	if (rep->dropped_detail) {
		fputs(" (", f);
		kp_html_esc(f, rep->dropped_detail);
		fputs(")", f);
	}
	if (rep->dropped_records)
		fputs(" &mdash; <b>the trace is incomplete; gaps near the losses are suspect</b>", f);
	fputs("</li>\n<li>collector overhead: ", f);
	if (rep->overhead_ns >= 0)
		fputs(kp_fmt_dur(rep->overhead_ns, a, sizeof(a)), f);
	else if (rep->profiler_overhead_ns >= 0)
		fprintf(f, "%s (sum of PROFILER_OVERHEAD)", kp_fmt_dur(rep->profiler_overhead_ns, a, sizeof(a)));
	else
		fputs("unknown (not recorded by this source)", f);
	fputs("</li>\n</ul>\n", f);
}

static void api_table(FILE *f, const struct kp_report *rep)
{
	static const char *const cols[] = { "API call|s", "class|s", "count|n", "total|n", "avg|n", "max|n" };
	size_t i, n = rep->apis.len, top = (size_t)DEF(rep->opts.top_kernels, 25);

	h2(f, "api", "CUDA API calls");
	if (n > top)
		n = top;
	kp_html_table_begin(f, "api-table", cols, 6);
	for (i = 0; i < n; i++) {
		const struct kp_rep_api *a = &rep->apis.data[i];

		fputs("<tr>", f);
		td_name(f, a->name, NULL);
		kp_html_td_str(f, a->event_class ? "driver" : "runtime");
		td_int(f, a->count);
		td_dur(f, a->total_ns);
		td_dur(f, a->count ? a->total_ns / a->count : 0);
		td_dur(f, a->max_ns);
		fputs("</tr>\n", f);
	}
	kp_html_table_end(f, (long)n, (long)rep->apis.len, "API calls");
}

int kp_report_html(const struct kp_report *rep, FILE *f, struct kp_err *err)
{
	kp_html_begin(f, "kplan report");
	header(f, rep);
	kp__page_time_chart(f, rep);
	kp__page_timeline(f, rep);
	kp__page_ranks(f, rep);
	regions(f, rep);
	kp__page_region_cards(f, rep);
	kp__page_gap_chart(f, rep);
	if (kernels(f, rep))
		return kp_err_set(err, KP_ENOMEM, "out of memory while writing the report");
	fusion(f, rep);
	plan(f, rep);
	api_table(f, rep);
	calibration(f, rep);
	quality(f, rep);
	fprintf(f, "<p class=\"meta\">kplan %s. Tables sort when a header is clicked; a region's row"
		" leads to its section; names cut short show the full name on hover.</p>\n",
		KP_REPORT_VERSION);
	kp_html_script_begin(f);
	kp__page_timeline_data(f, rep);
	fputs(kp__page_js, f);
	kp_html_script_end(f);
	if (ferror(f))
		return kp_err_set(err, KP_EIO, "write error while writing the html report");
	return 0;
}
