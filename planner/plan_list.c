/*
 * plan_list.c - the plans kp_plans keeps, per model and GPU (planner.h):
 * what `kplan plans` lists and takes bundles' entries from.
 */
#include <stdlib.h>
#include <string.h>

#include "planner.h"

#include "../plan/bundle.h"

static char *dup_col(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s ? kp_strdup((const char *)s) : NULL;
}

void kp_plan_rows_free(struct kp_plan_row *rows, size_t n)
{
	size_t i;

	for (i = 0; rows && i < n; i++) {
		free(rows[i].status);
		free(rows[i].stale_reason);
		free(rows[i].path);
		kp_plan_free(rows[i].plan);
		free(rows[i].error);
	}
	free(rows);
}

static int model_cmp(const struct kp_plan *a, const struct kp_plan *b)
{
	return strcmp(a->model ? a->model : "", b->model ? b->model : "");
}

/* By model, target, newest first; rows that do not parse last. */
static int row_cmp(const void *x, const void *y)
{
	const struct kp_plan_row *a = x, *b = y;
	int c;

	if (!a->plan || !b->plan) {
		if (a->plan != b->plan)
			return a->plan ? -1 : 1;
	} else if ((c = model_cmp(a->plan, b->plan)) ||
		   (c = kp_bundle_target_cmp(a->plan, b->plan))) {
		return c;
	}
	return a->plan_id > b->plan_id ? -1 : a->plan_id < b->plan_id;
}

int kp_planner_list(struct kp_db *db, struct kp_plan_row **rows, size_t *n,
		    struct kp_err *err)
{
	struct kp_plan_row *r = NULL, *grown;
	sqlite3_stmt *st = NULL;
	size_t cap = 0, k = 0;
	int rc, step;

	*rows = NULL;
	*n = 0;
	if ((rc = kp_db_prepare(db, "SELECT planId, runId, status, stale_reason, path, body "
				"FROM kp_plans ORDER BY planId", &st, err)))
		return rc;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		const char *body = (const char *)sqlite3_column_text(st, 5);
		struct kp_err perr = {0};
		char name[64];

		if (k == cap) {
			cap = cap ? 2 * cap : 16;
			if (!(grown = realloc(r, cap * sizeof(*r)))) {
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				goto out;
			}
			r = grown;
		}
		memset(&r[k], 0, sizeof(r[k]));
		r[k].plan_id = sqlite3_column_int64(st, 0);
		r[k].run_id = sqlite3_column_int64(st, 1);
		r[k].status = dup_col(st, 2);
		r[k].stale_reason = dup_col(st, 3);
		r[k].path = dup_col(st, 4);
		snprintf(name, sizeof(name), "kp_plans %lld", (long long)r[k].plan_id);
		r[k].plan = kp_plan_parse(body ? body : "", body ? strlen(body) : 0, name, &perr);
		if (!r[k].plan)
			r[k].error = kp_strdup(perr.msg);
		k++;
		if (!r[k - 1].status || (!r[k - 1].plan && !r[k - 1].error)) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (step != SQLITE_DONE) {
		rc = kp_db_error(db, err, "reading kp_plans");
		goto out;
	}
	if (k)
		qsort(r, k, sizeof(*r), row_cmp);
	*rows = r;
	*n = k;
	r = NULL;
out:
	sqlite3_finalize(st);
	kp_plan_rows_free(r, k);
	return rc;
}

int kp_planner_body(struct kp_db *db, int64_t plan_id, struct kp_strbuf *out,
		    struct kp_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc, step;

	if ((rc = kp_db_prepare(db, "SELECT body FROM kp_plans WHERE planId = ?", &st, err)))
		return rc;
	sqlite3_bind_int64(st, 1, plan_id);
	step = sqlite3_step(st);
	if (step == SQLITE_ROW) {
		kp_strbuf_add(out, sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0));
		if (out->oom)
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
	} else if (step == SQLITE_DONE) {
		rc = kp_err_set(err, KP_ENOTFOUND, "no plan %lld in kp_plans", (long long)plan_id);
	} else {
		rc = kp_db_error(db, err, "reading kp_plans");
	}
	sqlite3_finalize(st);
	return rc;
}
