/* strbuf.c - see strbuf.h. */
#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char kp_strbuf_empty[1];

void kp_strbuf_init(struct kp_strbuf *sb)
{
	sb->buf = kp_strbuf_empty;
	sb->len = sb->alloc = 0;
	sb->oom = 0;
}

void kp_strbuf_release(struct kp_strbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	kp_strbuf_init(sb);
}

int kp_strbuf_grow(struct kp_strbuf *sb, size_t extra)
{
	size_t want = sb->len + extra + 1, n;
	char *p;

	if (want <= sb->alloc)
		return 0;
	n = sb->alloc ? sb->alloc : 64;
	while (n < want)
		n *= 2;
	p = realloc(sb->alloc ? sb->buf : NULL, n);
	if (!p) {
		sb->oom = 1;
		return -1;
	}
	if (!sb->alloc)
		p[0] = '\0';
	sb->buf = p;
	sb->alloc = n;
	return 0;
}

void kp_strbuf_add(struct kp_strbuf *sb, const void *data, size_t len)
{
	if (kp_strbuf_grow(sb, len))
		return;
	if (len)
		memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void kp_strbuf_adds(struct kp_strbuf *sb, const char *s)
{
	kp_strbuf_add(sb, s, strlen(s));
}

void kp_strbuf_addch(struct kp_strbuf *sb, int c)
{
	char ch = (char)c;

	kp_strbuf_add(sb, &ch, 1);
}

void kp_strbuf_vaddf(struct kp_strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0 || kp_strbuf_grow(sb, (size_t)n))
		return;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void kp_strbuf_addf(struct kp_strbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kp_strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void kp_strbuf_reset(struct kp_strbuf *sb)
{
	sb->len = 0;
	if (sb->alloc)
		sb->buf[0] = '\0';
}

char *kp_strbuf_detach(struct kp_strbuf *sb, size_t *len)
{
	char *p = sb->alloc ? sb->buf : calloc(1, 1);

	if (len)
		*len = sb->len;
	kp_strbuf_init(sb);
	return p;
}

char *kp_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}
