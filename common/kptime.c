/* kptime.c - see kptime.h. */

#include "kptime.h"

#include <stdio.h>
#include <time.h>

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t kp_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t kp_wall_ns(void) { return clock_ns(CLOCK_REALTIME); }

char *kp_fmt_dur(int64_t ns, char *buf, size_t n)
{
	double a = ns < 0 ? -(double)ns : (double)ns;

	if (a < 1e3)
		snprintf(buf, n, "%lld ns", (long long)ns);
	else if (a < 1e6)
		snprintf(buf, n, "%.2f us", ns / 1e3);
	else if (a < 1e9)
		snprintf(buf, n, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, n, "%.2f s", ns / 1e9);
	return buf;
}
