/* kptime.c - see kptime.h. */

#include "kptime.h"

#include <time.h>

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t kp_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t kp_wall_ns(void) { return clock_ns(CLOCK_REALTIME); }
