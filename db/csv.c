/* csv.c - see csv.h. */
#include "csv.h"

#include <csv.h>
#include <string.h>

void kp_csv_field(FILE *f, const char *s)
{
	if (!s)
		return;
	if (strpbrk(s, ",\"\r\n"))
		csv_fwrite(f, s, strlen(s));
	else
		fputs(s, f);
}

void kp_csv_row(FILE *f, const char *const *fields, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		kp_csv_field(f, fields[i]);
	}
	fputc('\n', f);
}

char *kp_csv_fmt_double(double v, char *buf, size_t n)
{
	char *p;

	snprintf(buf, n, "%.6f", v);
	if (strchr(buf, '.')) {
		p = buf + strlen(buf) - 1;
		while (*p == '0')
			*p-- = '\0';
		if (*p == '.')
			*p = '\0';
	}
	if (!strcmp(buf, "-0"))
		strcpy(buf, "0");
	return buf;
}

int kp_csv_query(struct kp_db *db, const char *sql, FILE *f, int64_t *n_rows,
		 struct kp_err *err)
{
	sqlite3_stmt *st;
	int64_t rows = 0;
	int rc, i, n;
	char num[64];

	rc = kp_db_prepare(db, sql, &st, err);
	if (rc)
		return rc;
	n = sqlite3_column_count(st);
	for (i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		kp_csv_field(f, sqlite3_column_name(st, i));
	}
	fputc('\n', f);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (i = 0; i < n; i++) {
			if (i)
				fputc(',', f);
			switch (sqlite3_column_type(st, i)) {
			case SQLITE_INTEGER:
				fprintf(f, "%lld", (long long)sqlite3_column_int64(st, i));
				break;
			case SQLITE_FLOAT:
				fputs(kp_csv_fmt_double(sqlite3_column_double(st, i), num,
							sizeof(num)), f);
				break;
			case SQLITE_NULL:
				break;
			default:
				kp_csv_field(f, (const char *)sqlite3_column_text(st, i));
			}
		}
		fputc('\n', f);
		rows++;
	}
	rc = rc == SQLITE_DONE ? 0 : kp_db_error(db, err, "query failed");
	sqlite3_finalize(st);
	if (!rc && ferror(f))
		rc = kp_err_set(err, KP_EIO, "write error while writing csv");
	if (n_rows)
		*n_rows = rows;
	return rc;
}

int kp_csv_table(struct kp_db *db, const char *table, FILE *f, int64_t *n_rows,
		 struct kp_err *err)
{
	char sql[256];

	if (!kp_db_has_table(db, table) || strchr(table, '"'))
		return kp_err_set(err, KP_ENOTFOUND, "%s: no table named '%s'", db->path, table);
	snprintf(sql, sizeof(sql), "SELECT * FROM \"%s\"", table);
	return kp_csv_query(db, sql, f, n_rows, err);
}
