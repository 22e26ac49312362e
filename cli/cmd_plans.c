/*
 * cmd_plans.c - `kplan plans DB`: every plan the database keeps, per model
 * and GPU (planner/plan_list.c), and `--get N -o FILE` to take one out of
 * it for a bundle.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "../common/fileio.h"
#include "../plan/bundle.h"
#include "../planner/planner.h"

const char kp_usage_plans[] =
	"usage: kplan plans DB\n"
	"       kplan plans DB --get N -o FILE\n"
	"\n"
	"Lists every plan written from the database (kplan plan keeps them all in\n"
	"kp_plans, the run's older ones marked stale), grouped by model (kplan plan\n"
	"--for) and by the GPU each was made for, newest first: the plans a bundle\n"
	"(kplan bundle) of one model can be made of, one per GPU. Each line gives\n"
	"the plan id, current or stale (and why), the source run, the predicted\n"
	"speedup and where the plan was written (its fused sources are there).\n"
	"\n"
	"--get N -o FILE writes plan N's stored text to FILE (replaced atomically),\n"
	"for a plan whose file is gone; its fused sources, if any, must be put next\n"
	"to it before kplan bundle takes it.\n"
	"\n"
	"examples:\n"
	"  kplan plans run.db\n"
	"  kplan plans run.db --get 7 -o h200.kplan\n";

static int get_plan(const char *db_path, int64_t id, const char *out)
{
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_db *db;
	int rc;

	db = kp_db_open(db_path, KP_DB_RDONLY, &err);
	if (!db)
		return kp_cli_error(&err);
	rc = kp_planner_body(db, id, &text, &err);
	kp_db_close(db);
	if (!rc)
		rc = kp_file_write_atomic(AT_FDCWD, out, text.buf, text.len, 0666, &err);
	kp_strbuf_release(&text);
	if (rc)
		return kp_cli_error(&err);
	printf("%s: plan %lld\n", out, (long long)id);
	return KP_EXIT_OK;
}

KP_CMD(plans)
{
	const struct kp_plan *last = NULL;
	struct kp_plan_row *rows;
	struct kp_err err = {0};
	struct kp_db *db;
	const char *path = NULL, *out = NULL;
	long long get = 0;
	size_t n, i;
	char t[256], m[512], p[1024];
	int a;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--get") && a + 1 < argc) {
			char *end;

			get = strtoll(argv[++a], &end, 10);
			if (*end || get <= 0)
				return kp_cli_usage("plans", "--get needs a plan id");
		} else if (!strcmp(argv[a], "-o") && a + 1 < argc) {
			out = argv[++a];
		} else if (argv[a][0] == '-' || path) {
			return kp_cli_usage("plans", "unexpected argument '%s'", argv[a]);
		} else {
			path = argv[a];
		}
	}
	if (!path || !get != !out)
		return kp_cli_usage("plans", "expected DB, or DB --get N -o FILE");
	if (get)
		return get_plan(path, get, out);
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	if (!db)
		return kp_cli_error(&err);
	if (kp_planner_list(db, &rows, &n, &err)) {
		kp_db_close(db);
		return kp_cli_error(&err);
	}
	kp_db_close(db);
	if (!n)
		printf("%s: no plans (kplan plan %s -o model.kplan writes one)\n", path, path);
	for (i = 0; i < n; i++) {
		const struct kp_plan_row *r = &rows[i];

		if (!r->plan) {
			printf("plan %lld: unreadable: %s\n", (long long)r->plan_id,
			       kp_printable(m, sizeof(m), r->error));
			continue;
		}
		/* the stored strings may come from a trace or a hand edit: printable */
		if (!last || strcmp(last->model ? last->model : "",
				    r->plan->model ? r->plan->model : ""))
			printf("model %s\n", r->plan->model ?
			       kp_printable(m, sizeof(m), r->plan->model) : "(not pinned)");
		if (!last || strcmp(last->model ? last->model : "",
				    r->plan->model ? r->plan->model : "") ||
		    kp_bundle_target_cmp(last, r->plan)) {
			kp_bundle_target_name(r->plan, t, sizeof(t));
			printf("  %s\n", t);
		}
		last = r->plan;
		printf("    plan %lld  %s%s%s%s  run %lld  %.2fx  %s\n", (long long)r->plan_id,
		       r->status, r->stale_reason ? " (" : "",
		       r->stale_reason ? kp_printable(m, sizeof(m), r->stale_reason) : "",
		       r->stale_reason ? ")" : "", (long long)r->run_id, r->plan->speedup_pred,
		       r->path ? kp_printable(p, sizeof(p), r->path) : "(written to stdout)");
	}
	kp_plan_rows_free(rows, n);
	return KP_EXIT_OK;
}
