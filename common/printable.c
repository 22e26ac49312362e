/* printable.c - see printable.h. */
#include "printable.h"

#include <stdio.h>
#include <string.h>

/* length of the valid UTF-8 sequence at s[0..len) (lead byte >= 0x80), 0 if none */
static size_t utf8_len(const unsigned char *s, size_t len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	/* U+0080..U+009F: the C1 controls */
	return c == 0xc2 && s[1] <= 0x9f ? 0 : n;
}

/*
 * The next unit of s[0..len) as it is printed, into out[5]: a printable
 * character as it is, anything else as \xNN. Returns its length in out;
 * *used gets the bytes of s it stands for.
 */
static size_t next_unit(const unsigned char *s, size_t len, char *out, size_t *used)
{
	size_t n;

	if (s[0] >= 0x20 && s[0] < 0x7f) {
		out[0] = (char)s[0];
		*used = 1;
		return 1;
	}
	if (s[0] >= 0x80 && (n = utf8_len(s, len))) {
		memcpy(out, s, n);
		*used = n;
		return n;
	}
	snprintf(out, 5, "\\x%02x", s[0]);
	*used = 1;
	return 4;
}

void kp_strbuf_add_printable(struct kp_strbuf *sb, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t used, n;
	char u[5];

	while (len) {
		n = next_unit(p, len, u, &used);
		kp_strbuf_add(sb, u, n);
		p += used;
		len -= used;
	}
}

char *kp_printable(char *dst, size_t n, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)p), at = 0, used, k;
	char u[5];

	while (len) {
		k = next_unit(p, len, u, &used);
		if (at + k >= n)
			break;
		memcpy(dst + at, u, k);
		at += k;
		p += used;
		len -= used;
	}
	dst[at] = 0;
	return dst;
}
