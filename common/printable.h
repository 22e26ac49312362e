/*
 * printable.h - text from traces, plans and files made safe for a terminal.
 *
 * Kernel, region and op names come from traces anyone can write. Printed
 * raw, an ESC or BEL in one retitles or rewrites the terminal and a newline
 * forges an output line. Everything the CLI and the logs print that such
 * text may reach goes through these: every byte that is not printable
 * text is written as \xNN (lowercase hex) - the C0 controls (newline and
 * tab included), DEL, the C1 controls U+0080..U+009F (which some terminals
 * obey) and bytes that are not UTF-8 - while printable ASCII and valid
 * UTF-8 pass unchanged. The output is for people, not a reversible
 * encoding: a backslash stays a backslash.
 */
#ifndef KP_PRINTABLE_H
#define KP_PRINTABLE_H

#include <stddef.h>

#include "strbuf.h"

/* Append s[0..len), made printable, to sb. */
void kp_strbuf_add_printable(struct kp_strbuf *sb, const char *s, size_t len);

/*
 * s (NULL: "") made printable into dst[n] (n > 0), cut at a character
 * boundary when it does not fit; returns dst, for printf arguments:
 * printf("%s\n", kp_printable(buf, sizeof(buf), name)).
 */
char *kp_printable(char *dst, size_t n, const char *s);

#endif
