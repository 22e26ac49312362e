/*
 * html.h - writing HTML safely: escaping, shortened names, sortable tables.
 *
 * Every string that comes from a database goes through kp_html_esc (or a
 * function built on it): it escapes & < > " ' and replaces bytes that are
 * not valid UTF-8 (and C0 control characters other than tab and newline)
 * with U+FFFD, so a kernel name can never inject markup or break the page's
 * encoding.
 */
#ifndef KP_REPORTS_HTML_H
#define KP_REPORTS_HTML_H

#include <stdio.h>
#include <stddef.h>

/* Write s (NULL writes nothing) escaped for HTML text and attribute values. */
void kp_html_esc(FILE *f, const char *s);
/* The same for the first n bytes of s. */
void kp_html_escn(FILE *f, const char *s, size_t n);

/*
 * Write a name shortened to at most max characters (UTF-8 code points) for
 * a table cell: `<span title="FULL">SHORT…</span>` when it is longer,
 * the escaped name alone otherwise. short_name (may be NULL) is preferred
 * as the shortened form when given and different from name.
 */
void kp_html_name(FILE *f, const char *name, const char *short_name, int max);

/*
 * Write a kernel's label (kp_kernel_label, cut to max code points) with
 * the full name in a title attribute when they differ.
 */
void kp_html_kname(FILE *f, const char *name, const char *label, int max);

/* The page's <head> (inline CSS, sort script) and <body> opening. */
void kp_html_begin(FILE *f, const char *title);
/* The page's one script (the table sorter) and the document's end. */
void kp_html_end(FILE *f);
/*
 * The same in two halves, for a page with more script: kp_html_script_begin
 * opens the script and writes the table sorter; the caller writes more
 * JavaScript; kp_html_script_end closes it and the document.
 */
void kp_html_script_begin(FILE *f);
void kp_html_script_end(FILE *f);

/*
 * Write s (NULL: null) as a JavaScript string literal that is safe inside
 * a <script> element: quotes, backslashes and control characters escaped,
 * < > & as \u003c \u003e \u0026 (so "</script>" cannot end the element),
 * U+2028/2029 escaped, bytes that are not valid UTF-8 as \ufffd.
 */
void kp_html_js_str(FILE *f, const char *s);

/*
 * Table helpers. Columns are described by "label|kind" strings where kind
 * is 'n' (numeric, sorts by the cell's data-v) or 's' (text); a table with
 * sortable=1 gets the `sortable` class the page script attaches to.
 */
void kp_html_table_begin(FILE *f, const char *id, const char *const *cols, int n);
void kp_html_table_end(FILE *f, long shown, long total, const char *what);
/* A numeric cell: value v shown with printf format fmt, sort key v. */
void kp_html_td_num(FILE *f, double v, const char *fmt);
/* A text cell, escaped. */
void kp_html_td_str(FILE *f, const char *s);

#endif
