/*
 * strbuf.h - growable NUL-terminated string (after git's strbuf).
 *
 * Lifecycle: KP_STRBUF_INIT or kp_strbuf_init(); kp_strbuf_release() frees.
 * buf is always NUL-terminated and never NULL once initialised.
 * Allocation failure aborts the append (the buffer keeps its old content)
 * and sets sb->oom; callers that care check it.
 */
#ifndef KP_STRBUF_H
#define KP_STRBUF_H

#include <stddef.h>
#include <stdarg.h>

struct kp_strbuf {
	char *buf;
	size_t len;
	size_t alloc;
	int oom;
};

extern char kp_strbuf_empty[];
#define KP_STRBUF_INIT { kp_strbuf_empty, 0, 0, 0 }

void kp_strbuf_init(struct kp_strbuf *sb);
void kp_strbuf_release(struct kp_strbuf *sb);
/* Make room for extra more bytes; 0 ok, -1 on allocation failure. */
int kp_strbuf_grow(struct kp_strbuf *sb, size_t extra);
void kp_strbuf_add(struct kp_strbuf *sb, const void *data, size_t len);
void kp_strbuf_adds(struct kp_strbuf *sb, const char *s);
void kp_strbuf_addch(struct kp_strbuf *sb, int c);
void kp_strbuf_addf(struct kp_strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void kp_strbuf_vaddf(struct kp_strbuf *sb, const char *fmt, va_list ap);
void kp_strbuf_reset(struct kp_strbuf *sb);
/* Hand the buffer to the caller (who frees it); sb is re-initialised. */
char *kp_strbuf_detach(struct kp_strbuf *sb, size_t *len);

/* strdup that returns NULL for NULL. */
char *kp_strdup(const char *s);

#endif
