/*
 * csv.h - CSV output (RFC 4180) through libcsv.
 *
 * Fields are quoted only when they hold a comma, quote, CR or LF; embedded
 * quotes are doubled (libcsv's csv_fwrite). Rows end with "\n".
 */
#ifndef KP_CSV_H
#define KP_CSV_H

#include <stdio.h>
#include "db.h"

/* Write one field (no separator); NULL writes an empty field. */
void kp_csv_field(FILE *f, const char *s);
/* Write a row of n fields followed by a newline. */
void kp_csv_row(FILE *f, const char *const *fields, int n);

/*
 * Run sql on db and write its result as CSV with a header row of the column
 * names. Integers print as integers, reals with %.6f trimmed of trailing
 * zeros, NULL as an empty field. OUT: *n_rows (may be NULL).
 */
int kp_csv_query(struct kp_db *db, const char *sql, FILE *f, int64_t *n_rows,
		 struct kp_err *err);

/* kp_csv_query of SELECT * FROM table, refusing names that are not tables. */
int kp_csv_table(struct kp_db *db, const char *table, FILE *f, int64_t *n_rows,
		 struct kp_err *err);

/* Format a double the way kp_csv_query does, into buf. Returns buf. */
char *kp_csv_fmt_double(double v, char *buf, size_t n);

#endif
