/* family.c - see family.h. */
#include "family.h"

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* What may stand on either side of a number ('\0': the end of the name). */
static int is_sep(char c)
{
	switch (c) {
	case '\0': case ' ': case '.': case '_': case '-': case '/': case ':':
	case '[': case ']': case '(': case ')': case '#':
		return 1;
	}
	return 0;
}

char *kp_region_family(const char *name, char *out, size_t n)
{
	const char *s = name, *e;
	size_t len = 0;

	if (!n)
		return out;
	while (*s && len + 1 < n) {
		if (is_digit(*s) && (s == name || is_sep(s[-1]))) {
			for (e = s; is_digit(*e); e++)
				;
			if (is_sep(*e)) {
				out[len++] = KP_FAMILY_MARK;
				s = e;
				continue;
			}
			/* a word that starts with digits ("2d_conv"): keep them */
			while (s < e && len + 1 < n)
				out[len++] = *s++;
			continue;
		}
		out[len++] = *s++;
	}
	out[len] = '\0';
	return out;
}
