/* report_int.h - internal interfaces between the report's source files. */
#ifndef KP_REPORTS_REPORT_INT_H
#define KP_REPORTS_REPORT_INT_H

#include "report.h"

/* timeline.c: fill rep->streams for the chosen window (needs rep->regions). */
int kp__report_timeline(struct kp_db *db, struct kp_report *rep, struct kp_err *err);
/* timeline.c: whole-run idle totals and stream spans from the trace. */
int kp__report_gap_totals(struct kp_db *db, struct kp_report *rep, struct kp_err *err);

/*
 * families.c: each region's plan decision (needs rep->plan), then
 * rep->families and each region's family (needs every region loaded).
 */
int kp__report_families(struct kp_db *db, struct kp_report *rep, struct kp_err *err);

/* timeline.c: free the correlation-id map the scans share. */
void kp__report_corr_free(struct kp_report *rep);

#endif
