/*
 * chrome_export.h - one run of a kplan database as a Chrome trace (JSON)
 * that Perfetto and chrome://tracing open.
 *
 * Tracks: kernels, memcpys, memsets and syncs per device (pid) and stream
 * (tid); runtime/driver calls, annotations and cpu ops per host process and
 * thread (globalTid split as nsys does); ac2g flow arrows from each launch
 * to its GPU work; and, when the analyzer has filled kp_regions /
 * kp_region_occurrences / kp_gaps, its region occurrences and host-bound
 * gaps on a separate "kplan analysis" process. Categories and argument
 * names are Kineto's, so `kplan import` reads the output back into the
 * same rows (plus a few "static shared memory"-style arguments Kineto does
 * not have, which keep values Kineto would merge).
 */
#ifndef KP_CHROME_EXPORT_H
#define KP_CHROME_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "../common/err.h"
#include "../db/db.h"

/* pid of the analysis tracks in exported traces */
#define KP_EXPORT_ANALYSIS_PID 999999999

struct kp_chrome_export_stats {
	int64_t run_id;      /* the run written */
	int64_t events;      /* trace events written (flows and metadata included) */
	int64_t regions;     /* region occurrences written */
	int64_t gaps;        /* host-bound gaps written */
};

/*
 * Write run run_id (0: the newest run) of db to f as a Chrome-trace JSON
 * object with "traceEvents". Timestamps are microseconds with the
 * nanosecond fraction kept ("%lld.%03lld"). stats may be NULL. Returns 0,
 * KP_ENOTFOUND when the run does not exist, KP_EDB or KP_EIO.
 */
int kp_export_chrome(struct kp_db *db, int64_t run_id, FILE *f,
		     struct kp_chrome_export_stats *stats, struct kp_err *err);

#endif
