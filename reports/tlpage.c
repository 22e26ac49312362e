/*
 * tlpage.c - the timeline section of the page: its controls and canvas,
 * and its data as one JavaScript object (KP_TL) that reports/page.js
 * draws. Times are ns from the run's start. Bins are packed as base-64
 * text, 9 characters a bin (4 classes in 64ths of the bin, 3 for the
 * count, 2 for the key + 1), so a level of 16384 bins costs 147 KB a row
 * whatever the run's size (the finest levels are left out when the rows'
 * bins would pass BIN_BYTES); intervals are numbers, starts as deltas.
 */
#include "report_int.h"
#include "html.h"

#include <inttypes.h>
#include <string.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

#define FULL_NAME_BYTES (512 * 1024)   /* full kernel names in the data, at most */
#define BIN_BYTES (1600 * 1024)        /* bins in the data, at most: finer levels dropped */

static const char *row_name(const struct kp_tl_row *r, int many_devices, char *buf, size_t n)
{
	switch (r->kind) {
	case KP_TL_ROW_REGIONS: return "regions";
	case KP_TL_ROW_NVTX: return "NVTX ranges";
	case KP_TL_ROW_CPU: return "CPU ops (PyTorch)";
	case KP_TL_ROW_API: return "CUDA API calls";
	}
	if (r->rank >= 0 && many_devices)
		snprintf(buf, n, "rank %d GPU %lld stream %lld", r->rank, (long long)r->device_id,
			 (long long)r->stream_id);
	else if (r->rank >= 0)
		snprintf(buf, n, "rank %d stream %lld", r->rank, (long long)r->stream_id);
	else if (many_devices)
		snprintf(buf, n, "GPU %lld stream %lld", (long long)r->device_id, (long long)r->stream_id);
	else
		snprintf(buf, n, "stream %lld", (long long)r->stream_id);
	return buf;
}

/* One level of a row: nb bins, each summing n_bins / nb finest bins. */
static void write_level(FILE *f, const struct kp_tl *tl, const struct kp_tl_row *r, int nb)
{
	int group = tl->n_bins / nb, b, i, c;
	double bw = (double)(tl->t1 - tl->t0) / nb;

	fputc('"', f);
	for (b = 0; b < nb; b++) {
		int64_t ns[KP_TL_CLS] = {0}, cnt = 0, best = 0;
		int32_t key = -1;
		char out[9];

		for (i = b * group; i < (b + 1) * group; i++) {
			for (c = 0; c < KP_TL_CLS; c++)
				ns[c] += r->ns[i * KP_TL_CLS + c];
			cnt += r->count[i];
			if (r->key[i] >= 0 && r->key_ns[i] > best) {
				best = r->key_ns[i];
				key = r->key[i];
			}
		}
		for (c = 0; c < KP_TL_CLS; c++) {
			int q = 0;

			if (ns[c] > 0) {
				q = (int)(63.0 * (double)ns[c] / bw + 0.999);
				q = q < 1 ? 1 : q > 63 ? 63 : q;
			}
			out[c] = b64[q];
		}
		if (cnt > 262143)
			cnt = 262143;
		out[4] = b64[(cnt >> 12) & 63];
		out[5] = b64[(cnt >> 6) & 63];
		out[6] = b64[cnt & 63];
		key = key > 4093 ? 4094 : key + 1;
		out[7] = b64[(key >> 6) & 63];
		out[8] = b64[key & 63];
		fwrite(out, 1, sizeof(out), f);
	}
	fputc('"', f);
}

/*
 * The gap before a stream's op is not kept per item: it is the previous
 * item's end to this start, which is what the scan measured on a stream
 * whose ops do not overlap. An item whose neighbour lies in another
 * detail window (or overlaps it) gets no gap.
 */
static void write_items(FILE *f, const struct kp_tl *tl, const struct kp_tl_row *r)
{
	int64_t prev = tl->t0;
	size_t i, w = 0;

	fputc('[', f);
	for (i = 0; i < r->items.len; i++) {
		const struct kp_tl_item *it = &r->items.data[i];
		const struct kp_tl_item *p = i ? &r->items.data[i - 1] : NULL;
		int64_t cls = it->cls;

		while (w + 2 < tl->win.len && it->start > tl->win.data[w + 1])
			w += 2;
		if (r->kind == KP_TL_ROW_STREAM && cls != KP_TL_KERNEL) {
			if (p && p->end >= tl->win.data[w] && p->end <= it->start)
				cls += 4 * (it->start - p->end);   /* the length rides with the class */
			else
				cls = KP_TL_KERNEL;
		}
		fprintf(f, "%s%" PRId64 ",%" PRId64 ",%d,%d,%" PRId64, i ? "," : "", it->start - prev,
			it->end - it->start, it->a, it->b, cls);
		prev = it->start;
	}
	fputc(']', f);
}

void kp__page_timeline_data(FILE *f, const struct kp_report *rep)
{
	const struct kp_tl *tl = &rep->tl;
	size_t i, full_bytes = 0, bytes;
	int64_t dev0 = INT64_MIN;
	int many_devices = 0, l, levels;
	char buf[96];

	for (i = 0; i < tl->rows.len; i++) {
		const struct kp_tl_row *r = &tl->rows.data[i];

		if (r->kind != KP_TL_ROW_STREAM)
			continue;
		if (dev0 == INT64_MIN)
			dev0 = r->device_id;
		many_devices |= r->device_id != dev0;
	}
	/* the finer levels only while the bins of every row fit BIN_BYTES */
	for (levels = 1, bytes = 0; levels <= tl->n_levels; levels++) {
		bytes += (size_t)9 * (KP_TL_BINS << (2 * (levels - 1))) * tl->rows.len;
		if (bytes > BIN_BYTES)
			break;
	}
	levels = levels > 1 ? levels - 1 : 1;
	fprintf(f, "var KP_TL={span:%" PRId64 ",levels:%d,full:%d,streams:%" PRId64 ",detail:%d,\n",
		tl->t1 - tl->t0, levels, tl->full, tl->n_streams,
		rep->opts.detail > 0 ? rep->opts.detail : KP_TL_DETAIL);
	fprintf(f, "view:[%" PRId64 ",%" PRId64 "],viewWhat:", rep->tl_what ? rep->tl_begin - tl->t0 : 0,
		rep->tl_what ? rep->tl_end - tl->t0 : tl->t1 - tl->t0);
	kp_html_js_str(f, rep->tl_what ? rep->tl_what : "the whole run");
	fputs(",\nwin:[", f);
	for (i = 0; i < tl->win.len; i++)
		fprintf(f, "%s%" PRId64, i ? "," : "", tl->win.data[i] - tl->t0);
	fputs("],\nkn:[", f);
	for (i = 0; i < rep->kernels.len; i++) {
		const struct kp_rep_kernel *k = &rep->kernels.data[i];
		int same = !strcmp(k->label, k->name);

		fputs(i ? ",[" : "[", f);
		kp_html_js_str(f, k->label);
		fputc(',', f);
		if (!same && full_bytes < FULL_NAME_BYTES) {
			kp_html_js_str(f, k->name);
			full_bytes += strlen(k->name);
		} else {
			fputs(same ? "0" : "null", f);
		}
		fputc(']', f);
	}
	fputs("],\nstrs:[", f);
	for (i = 0; i < tl->strs.len; i++) {
		if (i)
			fputc(',', f);
		kp_html_js_str(f, tl->strs.data[i]);
	}
	fputs("],\nregs:[", f);
	for (i = 0; i < rep->regions.len && i < 4094; i++) {
		const struct kp_rep_region *r = &rep->regions.data[i];

		fputs(i ? ",[" : "[", f);
		kp_html_js_str(f, r->label);
		fprintf(f, ",%lld,", (long long)r->id);
		kp_html_js_str(f, r->decision >= 0 ? kp_plan_decision_name(r->decision) : "not planned");
		fprintf(f, ",%lld,%lld,%lld]", (long long)r->occurrences, (long long)r->eager_ns,
			(long long)r->kernels);
	}
	fputs("],\nrows:[\n", f);
	for (i = 0; i < tl->rows.len; i++) {
		const struct kp_tl_row *r = &tl->rows.data[i];

		fprintf(f, "%s{k:%d,n:%" PRId64 ",cap:%d,name:", i ? ",\n" : "", r->kind, r->n_items,
			r->capped);
		kp_html_js_str(f, row_name(r, many_devices, buf, sizeof(buf)));
		fputs(",lv:[", f);
		for (l = 0; l < levels; l++) {
			if (l)
				fputc(',', f);
			write_level(f, tl, r, KP_TL_BINS << (2 * l));
		}
		fputs("],it:", f);
		write_items(f, tl, r);
		fputc('}', f);
	}
	fputs("]};\n", f);
}

/* colours shared with page.js (PAL, GAP) and the charts */
const char *kp__region_color(int i)
{
	static const char *const pal[] = {
		"#2f6fde", "#8250df", "#1a7f37", "#bf3989", "#0e8a9a", "#9a6700",
		"#5a32a3", "#2da44e", "#cf4d9e", "#1b4f9c", "#7d4e24", "#4c9ee8",
	};

	return i < 0 ? "#57606a" : pal[i % (int)(sizeof(pal) / sizeof(pal[0]))];
}

const char *const kp__tl_gap_color[] = {
	[KP_TL_KERNEL] = "#2f6fde", [KP_TL_HOST_GAP] = "#e5532d",
	[KP_TL_DEVICE_GAP] = "#9aa4ae", [KP_TL_UNKNOWN_GAP] = "#e8d36a",
};

/* The rank of the report's run in its job (rep->job set). */
static int own_rank(const struct kp_report *rep)
{
	for (size_t i = 0; i < rep->job->n_ranks; i++)
		if (rep->job->ranks[i].run_id == rep->run_id)
			return rep->job->ranks[i].rank;
	return -1;
}

void kp__page_timeline(FILE *f, const struct kp_report *rep)
{
	const struct kp_tl *tl = &rep->tl;
	char a[32], b[32];
	size_t i, n_streams = 0;

	fputs("<h2 id=\"timeline\">Timeline</h2>\n", f);
	if (!tl->rows.len) {
		fputs("<p class=\"cap\">no kernels to draw.</p>\n", f);
		return;
	}
	for (i = 0; i < tl->rows.len; i++)
		n_streams += tl->rows.data[i].kind == KP_TL_ROW_STREAM &&
			     (!rep->job || tl->rows.data[i].rank == own_rank(rep));
	fprintf(f, "<p class=\"cap\">The whole run (%s), one row per stream (the busiest %zu of %lld"
		" with GPU work), plus the regions, NVTX ranges, PyTorch CPU ops and CUDA API calls"
		" where the trace has them. Kernels take their region's colour; the idle gap before a"
		" kernel is drawn thin, coloured by its cause. Scroll to zoom, drag to pan, click for"
		" details. ", kp_fmt_dur(tl->t1 - tl->t0, a, sizeof(a)), n_streams,
		(long long)tl->n_streams);
	if (rep->job)
		fprintf(f, "This run is rank %d of a job of %zu ranks: the streams of every rank"
			" are drawn on the same time axis (CUPTI's clock, shared by the processes of one"
			" host), one group of rows per rank; the regions, ranges and calls are this"
			" rank's. ", own_rank(rep), rep->job->n_ranks);
	if (tl->full)
		fputs("Every interval is in the page.", f);
	else
		fprintf(f, "Zoomed out, each row shows per-bin summaries; intervals one by one are in the"
			" page for %zu stretches (the typical occurrence among them, %s long).",
			tl->win.len / 2, kp_fmt_dur(rep->tl_end - rep->tl_begin, b, sizeof(b)));
	fputs("</p>\n<div class=\"tlbar noprint\">"
	      "<button type=\"button\" id=\"tl-in\">zoom in</button>"
	      "<button type=\"button\" id=\"tl-out\">zoom out</button>"
	      "<button type=\"button\" id=\"tl-all\">whole run</button>"
	      "<button type=\"button\" id=\"tl-typical\">typical occurrence</button>"
	      " <span id=\"tl-status\" class=\"cap\"></span></div>\n"
	      "<div id=\"tl\"><canvas id=\"tl-canvas\" tabindex=\"0\" width=\"1000\" height=\"120\""
	      " role=\"img\" aria-label=\"timeline of the run: scroll to zoom, drag to pan, click for"
	      " details; + and - zoom, arrows pan\"></canvas></div>\n<p class=\"legend\">", f);
	fprintf(f, "<span style=\"background:%s\"></span>idle, host-bound (GPU waited for the CPU)"
		"<span style=\"background:%s\"></span>idle, device-side"
		"<span style=\"background:%s\"></span>idle, no launch record"
		"<span style=\"background:#57606a\"></span>kernel outside any region",
		kp__tl_gap_color[KP_TL_HOST_GAP], kp__tl_gap_color[KP_TL_DEVICE_GAP],
		kp__tl_gap_color[KP_TL_UNKNOWN_GAP]);
	for (i = 0; i < rep->regions.len && i < KP_REP_CARDS; i++) {
		fprintf(f, "<span style=\"background:%s\"></span>", kp__region_color((int)i));
		kp_html_name(f, rep->regions.data[i].label, NULL, 30);
	}
	/* page.js APIC */
	fputs("<br>CUDA API calls: <span style=\"background:#6f42c1\"></span>launch"
	      "<span style=\"background:#24292f\"></span>synchronize or wait"
	      "<span style=\"background:#0e8a9a\"></span>copy or set"
	      "<span style=\"background:#8c959f\"></span>other", f);
	fputs("</p>\n<div id=\"tl-detail\" class=\"detail\">Click a kernel, a gap or a bin for its"
	      " details.</div>\n", f);
}
