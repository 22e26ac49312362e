/*
 * validate.c - the cost model against measured graph times: import each
 * workload's trace, store the calibration, analyze, read the region's
 * prediction; see validate.h and docs/DESIGN.md "Cost model".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <csv.h>

#include "validate.h"
#include "../analyzer/analyzer.h"
#include "../analyzer/cost.h"
#include "../db/db.h"
#include "../importers/import.h"

/* ---- ground_truth.csv, through libcsv ---- */

struct truth {
	struct kp_validate_row *rows;
	int n, cap;
	int line, field;
	int c_workload, c_eager, c_graph, c_label;   /* column indexes, -1 unknown */
	int bad_line;                       /* first line with a bad number */
	char bad[64];
	struct kp_validate_row cur;
	int oom;
};

static int parse_ms(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return !*s || *end || errno || !isfinite(*v) || *v < 0;
}

static void on_field(void *s, size_t len, void *data)
{
	struct truth *t = data;
	char buf[128];

	snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1),
		 (const char *)s);
	if (t->line == 0) {
		if (!strcmp(buf, "workload"))
			t->c_workload = t->field;
		else if (!strcmp(buf, "eager_ms"))
			t->c_eager = t->field;
		else if (!strcmp(buf, "graph_ms"))
			t->c_graph = t->field;
		else if (!strcmp(buf, "label"))
			t->c_label = t->field;
	} else if (t->field == t->c_workload) {
		snprintf(t->cur.workload, sizeof(t->cur.workload), "%s", buf);
	} else if (t->field == t->c_label) {
		snprintf(t->cur.label, sizeof(t->cur.label), "%s", buf);
	} else if (t->field == t->c_eager || t->field == t->c_graph) {
		double v;
		if (parse_ms(buf, &v)) {
			if (!t->bad_line) {
				t->bad_line = t->line + 1;
				snprintf(t->bad, sizeof(t->bad), "%.60s", buf);
			}
		} else if (t->field == t->c_eager) {
			t->cur.eager_ms = v;
		} else {
			t->cur.graph_ms = v;
		}
	}
	t->field++;
}

static void on_row(int c, void *data)
{
	struct truth *t = data;

	(void)c;
	if (t->line > 0 && t->cur.workload[0]) {
		if (t->n == t->cap) {
			int cap = t->cap ? t->cap * 2 : 16;
			void *p = realloc(t->rows, (size_t)cap * sizeof(*t->rows));
			if (!p) {
				t->oom = 1;
				return;
			}
			t->rows = p;
			t->cap = cap;
		}
		t->rows[t->n++] = t->cur;
	}
	memset(&t->cur, 0, sizeof(t->cur));
	t->line++;
	t->field = 0;
}

int kp_validate_read_truth(const char *dir, struct kp_validate_row **rows, int *n,
			   struct kp_err *err)
{
	struct truth t = { .c_workload = -1, .c_eager = -1, .c_graph = -1, .c_label = -1 };
	struct csv_parser p;
	char path[4096], buf[8192];
	size_t got;
	FILE *f;
	int rc = 0;

	*rows = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/ground_truth.csv", dir);
	f = fopen(path, "r");
	if (!f)
		return kp_err_set(err, KP_EIO, "%s: %s", path, strerror(errno));
	if (csv_init(&p, CSV_APPEND_NULL)) {
		fclose(f);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
		if (csv_parse(&p, buf, got, on_field, on_row, &t) != got)
			break;
	if (ferror(f))
		rc = kp_err_set(err, KP_EIO, "%s: read error", path);
	else if (csv_error(&p) != CSV_SUCCESS || csv_fini(&p, on_field, on_row, &t))
		rc = kp_err_set(err, KP_EFORMAT, "%s: not CSV: %s", path,
				csv_strerror(csv_error(&p)));
	else if (t.oom)
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
	else if (t.c_workload < 0 || t.c_graph < 0)
		rc = kp_err_set(err, KP_EFORMAT, "%s: the header needs 'workload' and 'graph_ms' "
				"columns", path);
	else if (t.bad_line)
		rc = kp_err_set(err, KP_EFORMAT, "%s: line %d: '%s' is not a time in ms", path,
				t.bad_line, t.bad);
	else if (!t.n)
		rc = kp_err_set(err, KP_EFORMAT, "%s: no workloads", path);
	csv_free(&p);
	fclose(f);
	if (rc) {
		free(t.rows);
		return rc;
	}
	*rows = t.rows;
	*n = t.n;
	return 0;
}

/* ---- one workload ---- */

static int find_trace(const char *dir, const char *w, char *out, size_t n)
{
	static const char *const ext[] = { ".json.gz", ".json" };

	for (size_t i = 0; i < sizeof(ext) / sizeof(*ext); i++) {
		snprintf(out, n, "%s/%s%s", dir, w, ext[i]);
		if (access(out, R_OK) == 0)
			return (int)i;
	}
	return -1;
}

int kp_validate_one(const char *dir, const char *calib, const char *label,
		    const char *scratch_db, struct kp_validate_row *row, struct kp_err *err)
{
	struct kp_import_opts io = { .format = KP_IMPORT_AUTO };
	struct kp_analyze_opts o;
	struct kp_err e2 = {0};
	char trace[4200];
	struct kp_db *db;
	int kind, rc;

	row->found = 0;
	row->error = NAN;
	kind = find_trace(dir, row->workload, trace, sizeof(trace));
	if (kind < 0) {
		snprintf(row->note, sizeof(row->note), "no trace %.100s.json.gz", row->workload);
		return 0;
	}
	kp_db_remove(scratch_db);
	if (kp_import(trace, scratch_db, &io, NULL, &e2)) {
		snprintf(row->note, sizeof(row->note), "import: %.140s", e2.msg);
		return 0;
	}
	if (calib) {
		struct kp_cost_file cf;
		if ((rc = kp_cost_read_path(calib, &cf, err)) != 0 ||
		    (rc = kp_cost_store_at(scratch_db, &cf, err)) != 0)
			return rc;
	}
	db = kp_db_open(scratch_db, 0, err);
	if (!db)
		return err->code ? err->code : KP_EIO;
	kp_analyze_opts_init(&o);
	if (kp_analyze(db, &o, NULL, &e2)) {
		snprintf(row->note, sizeof(row->note), "analyze: %.140s", e2.msg);
		kp_db_close(db);
		return 0;
	}
	sqlite3_stmt *st = NULL;
	rc = kp_db_prepare(db, "SELECT occurrences, kernels, eager_ns, graph_ns_pred,"
			   " coalesce(edge_ns, 0), capturable, coalesce(graph_ns_lo, 0),"
			   " coalesce(graph_ns_hi, 0), (SELECT count(*) FROM kp_blockers b"
			   " WHERE b.runId = r.runId AND b.regionId = r.regionId"
			   " AND b.kind = 'capture_path' AND b.occIndex = 0)"
			   " FROM kp_regions r WHERE label = ?1"
			   " ORDER BY occurrences DESC LIMIT 1", &st, err);
	if (rc) {
		kp_db_close(db);
		return rc;
	}
	sqlite3_bind_text(st, 1, label, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		row->found = 1;
		row->occurrences = sqlite3_column_int64(st, 0);
		row->nodes = sqlite3_column_int64(st, 1);
		row->eager_ns = sqlite3_column_int64(st, 2);
		row->edge_ns = sqlite3_column_int64(st, 4);
		row->pred_ns = sqlite3_column_int64(st, 3) - row->edge_ns;
		row->capturable = sqlite3_column_int(st, 5);
		/* the interval is around graph_ns_pred: take the edges off it too */
		if (sqlite3_column_int64(st, 7) > 0) {
			row->lo_ns = sqlite3_column_int64(st, 6) - row->edge_ns;
			row->hi_ns = sqlite3_column_int64(st, 7) - row->edge_ns;
		}
		row->path_points = sqlite3_column_int(st, 8);
		if (row->graph_ms > 0)
			row->error = (double)row->pred_ns / (row->graph_ms * 1e6) - 1.0;
	} else {
		snprintf(row->note, sizeof(row->note), "no region '%.60s' in the analysis", label);
	}
	sqlite3_finalize(st);
	kp_db_close(db);
	return 0;
}
