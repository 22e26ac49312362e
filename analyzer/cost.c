/*
 * cost.c - cost-model constants: names, documented defaults, loading from
 * kp_calibration. See cost.h and docs/DESIGN.md "Analyzer".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "../common/kptime.h"
#include "../common/log.h"

struct qdef {
	const char *name;
	double def;
	const char *doc;
	int unit;       /* enum kp_cost_unit */
	int by;         /* enum kp_cost_by */
};

/* The rows of common/cost_quantities.def (where the defaults' sources are). */
static const struct qdef qdefs[KP_COST__N] = {
#define KP_COST_Q(id, name, unit, by, def, doc) \
	[KP_COST_##id] = { name, def, doc, KP_COST_UNIT_##unit, KP_COST_BY_##by },
#include "../common/cost_quantities.def"
};

const char *kp_cost_name(int q)
{
	if (q < 0 || q >= KP_COST__N)
		return NULL;
	return qdefs[q].name;
}

int kp_cost_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int q = 0; q < KP_COST__N; q++)
		if (strcmp(qdefs[q].name, name) == 0)
			return q;
	return -1;
}

const char *kp_cost_doc(int q)
{
	if (q < 0 || q >= KP_COST__N)
		return NULL;
	return qdefs[q].doc;
}

double kp_cost_default(int q)
{
	if (q < 0 || q >= KP_COST__N)
		return 0;
	return qdefs[q].def;
}

double kp_cost_fusion_gain_ns(const struct kp_cost *c, double saved_bytes,
			      double saved_kernels)
{
	double bw = c->v[KP_COST_DRAM_BW] * KP_COST_SHORT_BW_SHARE;

	return (bw > 0 ? saved_bytes / bw : 0) + saved_kernels * c->v[KP_COST_GRAPH_NODE];
}

int kp_cost_unit(int q)
{
	if (q < 0 || q >= KP_COST__N)
		return -1;
	return qdefs[q].unit;
}

int kp_cost_by(int q)
{
	if (q < 0 || q >= KP_COST__N)
		return -1;
	return qdefs[q].by;
}

void kp_cost_defaults(struct kp_cost *c)
{
	memset(c, 0, sizeof(*c));
	for (int q = 0; q < KP_COST__N; q++)
		c->v[q] = qdefs[q].def;
}

/* Apply rows of st (quantity, value_ns) to quantities still at default. */
static int apply_rows(struct kp_db *db, sqlite3_stmt *st, struct kp_cost *c,
		      int src, struct kp_err *err)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		int q = kp_cost_from_name(name);
		if (q < 0 || c->src[q] != KP_COST_SRC_DEFAULT)
			continue;
		if (sqlite3_column_type(st, 1) == SQLITE_NULL)
			continue;
		c->v[q] = sqlite3_column_double(st, 1);
		c->src[q] = (unsigned char)src;
		c->n_calibrated++;
	}
	if (rc != SQLITE_DONE)
		return kp_db_error(db, err, "reading kp_calibration");
	return 0;
}

int kp_cost_load(struct kp_db *db, const char *gpu_name, int driver_version,
		 struct kp_cost *c, struct kp_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;

	kp_cost_defaults(c);
	c->driver_version = driver_version;
	if (gpu_name)
		snprintf(c->gpu_name, sizeof(c->gpu_name), "%s", gpu_name);
	if (!gpu_name || !*gpu_name || !db || !kp_db_has_table(db, "kp_calibration"))
		return 0;

	rc = kp_db_prepare(db, "SELECT quantity, value_ns FROM kp_calibration"
			   " WHERE gpu_name = ?1 AND driver_version = ?2", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, gpu_name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, driver_version);
	rc = apply_rows(db, st, c, KP_COST_SRC_EXACT, err);
	sqlite3_finalize(st);
	if (rc || c->n_calibrated == KP_COST__N)
		return rc;

	/* other drivers of the same GPU, newest driver first */
	rc = kp_db_prepare(db, "SELECT quantity, value_ns FROM kp_calibration"
			   " WHERE gpu_name = ?1 AND driver_version <> ?2"
			   " ORDER BY driver_version DESC, created_ns DESC", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, gpu_name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, driver_version);
	rc = apply_rows(db, st, c, KP_COST_SRC_GPU, err);
	sqlite3_finalize(st);
	return rc;
}

int kp_cost_load_run(struct kp_db *db, int64_t run_id, struct kp_cost *c,
		     struct kp_err *err)
{
	char name[128] = "", driver[32] = "";
	int rc;

	rc = kp_db_text(db, "SELECT device_name FROM kp_runs WHERE runId = ?1", run_id,
			name, sizeof(name), err);
	if (!rc)
		rc = kp_db_text(db, "SELECT driver_version FROM kp_runs WHERE runId = ?1", run_id,
				driver, sizeof(driver), err);
	/* fall back to the trace's GPU table when the run row has no name */
	if (!rc && !*name && kp_db_has_table(db, "TARGET_INFO_GPU"))
		rc = kp_db_text(db, "SELECT name FROM TARGET_INFO_GPU WHERE runId = ?1"
				" ORDER BY id LIMIT 1", run_id, name, sizeof(name), err);
	if (rc)
		return rc;
	return kp_cost_load(db, name, atoi(driver), c, err);
}

int kp_cost_store(struct kp_db *db, const char *gpu_name, int driver_version,
		  int q, double value, int64_t n_samples, struct kp_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!kp_cost_name(q) || !gpu_name)
		return kp_err_set(err, KP_EINVAL, "unknown cost quantity %d", q);
	rc = kp_db_prepare(db, "INSERT OR REPLACE INTO kp_calibration"
			   " (gpu_name, driver_version, quantity, value_ns, n_samples,"
			   " created_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, gpu_name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, driver_version);
	sqlite3_bind_text(st, 3, kp_cost_name(q), -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 4, value);
	if (n_samples > 0)
		sqlite3_bind_int64(st, 5, n_samples);
	sqlite3_bind_int64(st, 6, kp_wall_ns());
	rc = sqlite3_step(st) == SQLITE_DONE ? 0
		: kp_db_error(db, err, "writing kp_calibration");
	sqlite3_finalize(st);
	return rc;
}

int kp_cost_read(FILE *f, const char *what, struct kp_cost_file *cf, struct kp_err *err)
{
	char line[512];

	memset(cf, 0, sizeof(*cf));
	cf->driver = -1;
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		double v;
		long long n;
		size_t len = strlen(line);
		int q;

		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!strncmp(line, "gpu ", 4)) {
			snprintf(cf->gpu, sizeof(cf->gpu), "%s", line + 4);
		} else if (!strncmp(line, "driver ", 7)) {
			cf->driver = atoi(line + 7);
		} else if (sscanf(line, "%63s %lf %lld", name, &v, &n) == 3) {
			q = kp_cost_from_name(name);
			if (q < 0) {
				fprintf(stderr, "kplan: %s: ignoring unknown quantity '%s'\n", what, name);
				continue;
			}
			if (!isfinite(v)) {
				kp_warn("%s: ignoring %s: not a finite number", what, name);
				continue;
			}
			int i;
			for (i = 0; i < cf->n && cf->row[i].q != q; i++)
				;
			if (i == cf->n)
				cf->n++;
			cf->row[i].q = q;
			cf->row[i].value = v;
			cf->row[i].n_samples = n;
		} else if (len) {
			kp_warn("%s: ignoring line '%.80s'", what, line);
		}
	}
	if (ferror(f))
		return kp_err_set(err, KP_EIO, "%s: read error", what);
	if (!cf->gpu[0] || cf->driver < 0 || !cf->n)
		return kp_err_set(err, KP_EFORMAT, "%s: expected 'gpu', 'driver' and quantity lines, "
				  "found %s%s%d quantities", what, cf->gpu[0] ? "" : "no gpu line, ",
				  cf->driver < 0 ? "no driver line, " : "", cf->n);
	return 0;
}

int kp_cost_store_file(struct kp_db *db, const struct kp_cost_file *cf, struct kp_err *err)
{
	for (int i = 0; i < cf->n; i++) {
		int rc = kp_cost_store(db, cf->gpu, cf->driver, cf->row[i].q, cf->row[i].value,
				       cf->row[i].n_samples, err);
		if (rc)
			return rc;
	}
	return 0;
}

int kp_cost_read_path(const char *path, struct kp_cost_file *cf, struct kp_err *err)
{
	FILE *f = fopen(path, "r");
	int rc;

	if (!f)
		return kp_err_set(err, KP_EIO, "%s: %s", path, strerror(errno));
	rc = kp_cost_read(f, path, cf, err);
	fclose(f);
	return rc;
}

int kp_cost_store_at(const char *db_path, const struct kp_cost_file *cf, struct kp_err *err)
{
	struct kp_db *db = kp_db_open(db_path, KP_DB_CREATE, err);
	int rc;

	if (!db)
		return err->code ? err->code : KP_EIO;
	rc = kp_db_begin(db, err);
	if (!rc && (rc = kp_cost_store_file(db, cf, err)) != 0)
		kp_db_rollback(db);
	else if (!rc)
		rc = kp_db_commit(db, err);
	kp_db_close(db);
	return rc;
}
