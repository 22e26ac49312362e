/* report_int.h - internal interfaces between the report's source files. */
#ifndef KP_REPORTS_REPORT_INT_H
#define KP_REPORTS_REPORT_INT_H

#include "report.h"

/*
 * timeline.c: one pass over the run's GPU ops: idle totals and stream
 * spans, the gap distribution, rep->rkernels and rep->tl (needs
 * rep->kernels and rep->regions).
 */
int kp__report_timeline(struct kp_db *db, struct kp_report *rep, struct kp_err *err);
/* timeline.c: free rep->tl and rep->rkernels. */
void kp__report_tl_release(struct kp_report *rep);

/*
 * families.c: each region's plan decision (needs rep->plan), then
 * rep->families and each region's family (needs every region loaded).
 */
int kp__report_families(struct kp_db *db, struct kp_report *rep, struct kp_err *err);

/* timeline.c: free the correlation-id map the scans share. */
void kp__report_corr_free(struct kp_report *rep);

/* tlpage.c: the timeline section, and its data (inside the page's script). */
void kp__page_timeline(FILE *f, const struct kp_report *rep);
void kp__page_timeline_data(FILE *f, const struct kp_report *rep);
/* tlpage.c: region i's colour (i < 0: outside any region), the gap colours. */
const char *kp__region_color(int i);
extern const char *const kp__tl_gap_color[];

/* sections.c: where the time goes per region, the region sections, the gap chart. */
void kp__page_time_chart(FILE *f, const struct kp_report *rep);
void kp__page_region_cards(FILE *f, const struct kp_report *rep);
void kp__page_gap_chart(FILE *f, const struct kp_report *rep);

/* ranks.c: rep->job, the job run rep->run_id is a rank of (NULL: none). */
int kp__report_ranks(struct kp_db *db, struct kp_report *rep, struct kp_err *err);
/* ranks.c: the ranks' section: per-rank table, the ranks on one time axis. */
void kp__page_ranks(FILE *f, const struct kp_report *rep);

/* page.js, embedded by page_js.S (NUL-terminated). */
extern const char kp__page_js[];

#endif
