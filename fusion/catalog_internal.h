/*
 * catalog_internal.h - what the fusion catalog reader's files share: the
 * reader's position (struct kp__fx_ps), its error and name helpers, and the
 * expression parser catalog_read.c calls in catalog_expr.c.
 */
#ifndef KP_FUSION_CATALOG_INTERNAL_H
#define KP_FUSION_CATALOG_INTERNAL_H

#include <stddef.h>

#include "catalog.h"

/* Where the reader is: file, line, kernel and field (for messages), and the
 * expression tokenizer's span. */
struct kp__fx_ps {
	const char *file;
	int line;
	struct kp_err *err;
	struct kp_fx_kernel *k;   /* kernel being read, NULL outside one */
	const char *field;
	/* expression tokenizer */
	const char *s, *end;
	int depth;
};

/* Fail with KP_EFORMAT, "FILE:LINE: [kernel 'K': ]field 'F': message";
 * returns the code. */
__attribute__((format(printf, 2, 3)))
int kp__fx_perr(struct kp__fx_ps *p, const char *fmt, ...);
/* Printable excerpt of untrusted text for messages (at most 40 bytes, in buf). */
const char *kp__fx_shown(const char *s, size_t n, char *buf, size_t cap);
/* Index of k's parameter named s[0..n), or of its named statement (reduce,
 * let or dot; not out); -1 when there is none. */
int kp__fx_find_param(const struct kp_fx_kernel *k, const char *s, size_t n);
int kp__fx_find_red(const struct kp_fx_kernel *k, const char *s, size_t n);
/* Tokenizer: skip blanks; consume tok when it comes next (1), else 0. */
void kp__fx_skip_ws(struct kp__fx_ps *p);
int kp__fx_accept(struct kp__fx_ps *p, const char *tok);
/* A whole expression s..end into p->k's node array, nothing left over: the
 * root node's index, or -1 (error in p->err). */
int kp__fx_parse_full(struct kp__fx_ps *p, const char *s, const char *end);

#endif
