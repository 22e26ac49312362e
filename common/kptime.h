/* kptime.h - clocks in integer nanoseconds. */
#ifndef KP_KPTIME_H
#define KP_KPTIME_H

#include <stdint.h>

/* CLOCK_MONOTONIC in ns: for measuring durations. */
int64_t kp_now_ns(void);
/* CLOCK_REALTIME in ns since the Unix epoch: for timestamps in records. */
int64_t kp_wall_ns(void);

#endif
