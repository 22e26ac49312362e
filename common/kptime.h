/* kptime.h - clocks in integer nanoseconds, and durations for people. */
#ifndef KP_KPTIME_H
#define KP_KPTIME_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in ns: for measuring durations. */
int64_t kp_now_ns(void);
/* CLOCK_REALTIME in ns since the Unix epoch: for timestamps in records. */
int64_t kp_wall_ns(void);

/*
 * ns as a human duration ("412 ns", "3.50 us", "2.25 ms", "1.20 s") into
 * buf; returns buf. Every figure kplan prints for people in these units
 * (report, show, plan reasons) goes through it, so one quantity reads the
 * same everywhere.
 */
char *kp_fmt_dur(int64_t ns, char *buf, size_t n);

#endif
