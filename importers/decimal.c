/*
 * decimal.c - decimal numbers as the importers read them from text (JSON
 * numbers arrive as text): microseconds with a fraction to integer
 * nanoseconds, and integers, by decimal parsing, never through a double.
 */
#include "import.h"

#include <stdint.h>

/* value of s[0..len) * 10^scale, rounded half away from zero, into *out */
static int parse_decimal(const char *s, size_t len, int scale, int64_t *out)
{
	const char *p = s, *end = s + len;
	uint64_t m = 0;
	int neg = 0, any = 0, exp10 = 0;
	long e = 0;

	if (p < end && (*p == '-' || *p == '+'))
		neg = *p++ == '-';
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		any = 1;
		if (m < 100000000000000000ULL)
			m = m * 10 + (uint64_t)(*p - '0');
		else
			exp10++;   /* digit beyond 18 significant ones: keep magnitude */
	}
	if (p < end && *p == '.') {
		for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
			any = 1;
			if (m < 100000000000000000ULL) {
				m = m * 10 + (uint64_t)(*p - '0');
				exp10--;
			}
		}
	}
	if (!any)
		return -1;
	if (p < end && (*p == 'e' || *p == 'E')) {
		int eneg = 0, edig = 0;

		p++;
		if (p < end && (*p == '-' || *p == '+'))
			eneg = *p++ == '-';
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			edig = 1;
			if (e < 100000)
				e = e * 10 + (*p - '0');
		}
		if (!edig)
			return -1;
		if (eneg)
			e = -e;
	}
	if (p != end)
		return -1;
	e += exp10 + scale;
	if (e >= 0) {
		for (; e > 0; e--) {
			if (m > (uint64_t)INT64_MAX / 10) {
				if (m == 0)
					break;
				return -1;
			}
			m *= 10;
		}
		if (m > (uint64_t)INT64_MAX)
			return -1;
	} else if (e < -19) {
		m = 0;
	} else {
		uint64_t d = 1, q, r;

		for (; e < 0; e++)
			d *= 10;
		q = m / d;
		r = m % d;
		m = q + (r >= d - r ? 1 : 0);   /* half away from zero (sign applied below) */
	}
	*out = neg ? -(int64_t)m : (int64_t)m;
	return 0;
}

int kp_import_parse_us(const char *s, size_t len, int64_t *ns)
{
	return parse_decimal(s, len, 3, ns);
}

int kp_import_parse_int(const char *s, size_t len, int64_t *v)
{
	return parse_decimal(s, len, 0, v);
}
