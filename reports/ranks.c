/*
 * ranks.c - the report's section for a job of several ranks: the per-rank
 * table of collectives and waits (analyzer/ranks.h), and the ranks side by
 * side on one time axis, one lane group per rank (a lane per stream that
 * carries collectives), each collective drawn with the part spent waiting
 * for the last rank.
 */
#include <stdio.h>
#include <stdlib.h>

#include "html.h"
#include "report_int.h"

#define RANKS_W 1000            /* drawing width */
#define LANE_H 16
#define LABEL_W 90
#define MAX_DRAWN 400           /* collectives per rank in the drawing */

int kp__report_ranks(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	if (rep->opts.summary_only)
		return 0;
	return kp_job_load(db, rep->run_id, &rep->job, err);
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

/* The drawing's window: the job's first collectives, at most MAX_DRAWN of a rank. */
static void window(const struct kp_job *job, int64_t *t0, int64_t *t1)
{
	*t0 = job->t0;
	*t1 = job->t1;
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];
		int64_t *v;

		if (s->n <= MAX_DRAWN || !(v = malloc(s->n * sizeof(*v))))
			continue;
		for (size_t i = 0; i < s->n; i++)
			v[i] = s->colls[i].start;
		qsort(v, s->n, sizeof(*v), cmp_i64);
		if (v[MAX_DRAWN] < *t1)
			*t1 = v[MAX_DRAWN];
		free(v);
	}
	if (*t1 <= *t0)
		*t1 = *t0 + 1;
}

static double xof(int64_t t, int64_t t0, int64_t t1)
{
	return LABEL_W + (double)(t - t0) * (RANKS_W - LABEL_W) / (double)(t1 - t0);
}

static void drawing(FILE *f, const struct kp_job *job)
{
	int64_t t0, t1;
	int lanes = 0, y = 0;
	char b0[32], b1[32];

	window(job, &t0, &t1);
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];

		lanes += 1 + (s->n ? s->colls[s->n - 1].lane + 1 : 0);
	}
	fprintf(f, "<p>The ranks on one time axis (CUPTI's clock, shared by the processes of one"
		" host), %s to %s after the first collective: one group of lanes per rank, a lane per"
		" stream that carries collectives. Each collective's darker part is its wait for the"
		" last rank to arrive.</p>\n", kp_fmt_dur(0, b0, sizeof(b0)),
		kp_fmt_dur(t1 - t0, b1, sizeof(b1)));
	fprintf(f, "<svg id=\"ranks-timeline\" class=\"chart-svg\" viewBox=\"0 0 %d %d\" role=\"img\""
		" aria-label=\"collectives of each rank on one time axis\">\n", RANKS_W,
		lanes * LANE_H + 4);
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];
		int n_lanes = s->n ? s->colls[s->n - 1].lane + 1 : 0;

		fprintf(f, "<g class=\"rank\" data-rank=\"%d\"><text x=\"2\" y=\"%d\" font-size=\"11\">"
			"rank %d%s</text>\n", s->rank, y + 12, s->rank,
			s->rank == job->straggler ? " (straggler)" : "");
		y += LANE_H;
		for (int l = 0; l < n_lanes; l++, y += LANE_H) {
			fprintf(f, "<text x=\"12\" y=\"%d\" font-size=\"10\">lane %d</text>\n", y + 12, l);
			for (size_t i = 0; i < s->n; i++) {
				const struct kp_coll *c = &s->colls[i];
				double x0, x1, xw;

				if (c->lane != l || c->end < t0 || c->start > t1)
					continue;
				x0 = xof(c->start < t0 ? t0 : c->start, t0, t1);
				x1 = xof(c->end > t1 ? t1 : c->end, t0, t1);
				xw = c->wait_ns > 0 ? xof(c->start + c->wait_ns > t1 ? t1 :
						       c->start + c->wait_ns, t0, t1) : x0;
				fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"%d\""
					" fill=\"#4c78a8\"><title>rank %d %s #%d%s</title></rect>",
					x0, y + 2, x1 - x0 > 0.3 ? x1 - x0 : 0.3, LANE_H - 4, s->rank,
					kp_nccl_coll_name(c->k.coll), c->seq, c->last ? " (last to arrive)" : "");
				if (xw > x0)
					fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"%d\""
						" fill=\"#e45756\"/>", x0, y + 2, xw - x0, LANE_H - 4);
				fputc('\n', f);
			}
		}
		fputs("</g>\n", f);
	}
	fputs("</svg>\n", f);
}

void kp__page_ranks(FILE *f, const struct kp_report *rep)
{
	static const char *const cols[] = {
		"rank|n", "run|n", "collectives|n", "in collectives|n", "waited|n", "waited %|n",
		"last to arrive|n", "others waited for it|n",
	};
	const struct kp_job *job = rep->job;
	char b[32];

	if (!job)
		return;
	fprintf(f, "<h2 id=\"ranks\">Ranks of the job</h2>\n<p>This run is a rank of a job of %zu"
		" ranks in this database. NCCL collectives of each rank are matched across the ranks"
		" in order, per stream; %lld matched.", job->n_ranks, (long long)job->n_matches);
	for (size_t r = 0; r < job->n_ranks && job->straggler >= 0; r++)
		if (job->ranks[r].rank == job->straggler)
			fprintf(f, " The straggler is <b>rank %d</b>: last to arrive at %lld of them;"
				" the others waited %s in all for it.", job->straggler,
				(long long)job->ranks[r].n_last,
				kp_fmt_dur(job->ranks[r].caused_ns, b, sizeof(b)));
	{
		char d[1024];

		kp_job_bytes_desc(job, d, sizeof(d));
		d[0] = (char)(d[0] - 'a' + 'A');   /* a sentence of its own */
		fputc(' ', f);
		kp_html_esc(f, d);
		fputc('.', f);
	}
	if (job->mismatch[0]) {
		fputs(" The ranks' collectives differ at ", f);
		kp_html_esc(f, job->mismatch);
		fputc('.', f);
	}
	fputs("</p>\n", f);
	kp_html_table_begin(f, "ranks-table", cols, 8);
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];

		fprintf(f, "<tr><td class=\"n\">%d</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>",
			s->rank, (long long)s->run_id, (long long)s->n_coll);
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)s->coll_ns,
			kp_fmt_dur(s->coll_ns, b, sizeof(b)));
		fprintf(f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)s->wait_ns,
			kp_fmt_dur(s->wait_ns, b, sizeof(b)));
		if (s->coll_ns > 0)
			kp_html_td_num(f, 100.0 * (double)s->wait_ns / (double)s->coll_ns, "%.1f%%");
		else
			fputs("<td class=\"n\" data-v=\"\">-</td>", f);
		fprintf(f, "<td class=\"n\">%lld</td><td class=\"n\" data-v=\"%lld\">%s</td></tr>\n",
			(long long)s->n_last, (long long)s->caused_ns,
			kp_fmt_dur(s->caused_ns, b, sizeof(b)));
	}
	kp_html_table_end(f, (long)job->n_ranks, (long)job->n_ranks, "ranks");
	if (job->n_colls)
		drawing(f, job);
}
