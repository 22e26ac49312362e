/*
 * cmd_calibrate.c - `kplan calibrate [-o DB]`: measure this GPU's launch-cost
 * constants and store them in kp_calibration.
 *
 * The kplan binary links no CUDA; the measuring is done by kplan-calibrate
 * (runtime/calibrate.cu), found next to this binary (or named by
 * $KPLAN_CALIBRATE), whose output lines are "gpu NAME", "driver VERSION" and
 * "QUANTITY VALUE N_SAMPLES" with the quantity names of analyzer/cost.h.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#include "../analyzer/cost.h"
#include "../common/strbuf.h"
#include "../db/db.h"

const char kp_usage_calibrate[] =
	"usage: kplan calibrate [-o DB]\n"
	"\n"
	"Measures this GPU's launch-cost constants (eager launch host cost, graph node\n"
	"device cost, capture, instantiate, exec update, node parameter update, graph\n"
	"launch base and per-node cost, DRAM bandwidth, ...; medians over repeats) by\n"
	"running kplan-calibrate, installed next to kplan, and prints them. With -o the\n"
	"values are stored in DB's kp_calibration table under the GPU's name and driver\n"
	"version, where `kplan analyze` and `kplan plan` find them (constants not\n"
	"calibrated keep their documented defaults).\n"
	"\n"
	"options:\n"
	"  -o DB     store the results in DB (created if missing)\n"
	"\n"
	"environment:\n"
	"  KPLAN_CALIBRATE   path of the measuring program (default: kplan-calibrate\n"
	"                    in the directory of the kplan binary)\n"
	"\n"
	"exit status: 0 measured (and stored); 2 no GPU, program missing or failed,\n"
	"database error; 64 usage.\n"
	"\n"
	"examples:\n"
	"  kplan calibrate\n"
	"  kplan calibrate -o run.db\n";

struct row {
	char name[64];
	double value;
	long long n;
};

static void find_program(char *out, size_t n)
{
	const char *env = getenv("KPLAN_CALIBRATE");
	char self[PATH_MAX];
	ssize_t len;
	char *slash;

	if (env && *env) {
		snprintf(out, n, "%s", env);
		return;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		snprintf(out, n, "kplan-calibrate");
		return;
	}
	self[len] = 0;
	slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(out, n, "%s/kplan-calibrate", self);
}

KP_CMD(calibrate)
{
	struct kp_err err = {0};
	const char *dbpath = NULL;
	char prog[PATH_MAX + 16], line[512], gpu[512] = "";
	struct row rows[KP_COST__N];
	int driver = -1, n_rows = 0, i, status;
	struct kp_db *db;
	FILE *p;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			dbpath = argv[++i];
		else if (!strcmp(argv[i], "-o"))
			return kp_cli_usage("calibrate", "-o needs a database path");
		else
			return kp_cli_usage("calibrate", "unexpected argument '%s'", argv[i]);
	}
	find_program(prog, sizeof(prog));
	if (access(prog, X_OK)) {
		kp_err_set(&err, KP_ENOTFOUND, "%s: calibration program not found or not executable "
			   "(build it with `make runtime`, or set KPLAN_CALIBRATE)", prog);
		return kp_cli_error(&err);
	}
	fflush(stdout);
	p = popen(prog, "r");
	if (!p) {
		kp_err_set(&err, KP_EIO, "%s: cannot run", prog);
		return kp_cli_error(&err);
	}
	while (fgets(line, sizeof(line), p)) {
		char name[64];
		double v;
		long long n;
		size_t len = strlen(line);

		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!strncmp(line, "gpu ", 4)) {
			snprintf(gpu, sizeof(gpu), "%s", line + 4);
		} else if (!strncmp(line, "driver ", 7)) {
			driver = atoi(line + 7);
		} else if (sscanf(line, "%63s %lf %lld", name, &v, &n) == 3) {
			if (kp_cost_from_name(name) < 0) {
				fprintf(stderr, "kplan calibrate: ignoring unknown quantity '%s'\n", name);
				continue;
			}
			if (n_rows < KP_COST__N) {
				snprintf(rows[n_rows].name, sizeof(rows[n_rows].name), "%s", name);
				rows[n_rows].value = v;
				rows[n_rows].n = n;
				n_rows++;
			}
		} else if (len) {
			fprintf(stderr, "kplan calibrate: ignoring line '%s'\n", line);
		}
	}
	status = pclose(p);
	if (status != 0 || !gpu[0] || driver < 0 || !n_rows) {
		kp_err_set(&err, KP_ECUDA, "%s failed (exit status %d): expected 'gpu', 'driver' and "
			   "quantity lines, found %d quantities", prog,
			   WIFEXITED(status) ? WEXITSTATUS(status) : -1, n_rows);
		return kp_cli_error(&err);
	}
	printf("gpu %s, driver %d\n", gpu, driver);
	for (i = 0; i < n_rows; i++)
		printf("  %-22s %12.1f  (%lld samples)\n", rows[i].name, rows[i].value, rows[i].n);
	if (!dbpath)
		return KP_EXIT_OK;
	db = kp_db_open(dbpath, KP_DB_CREATE, &err);
	if (!db)
		return kp_cli_error(&err);
	if (kp_db_begin(db, &err))
		goto out_err;
	for (i = 0; i < n_rows; i++) {
		if (kp_cost_store(db, gpu, driver, kp_cost_from_name(rows[i].name), rows[i].value,
				  rows[i].n, &err)) {
			kp_db_rollback(db);
			goto out_err;
		}
	}
	if (kp_db_commit(db, &err))
		goto out_err;
	kp_db_close(db);
	printf("stored %d quantities in %s\n", n_rows, dbpath);
	return KP_EXIT_OK;
out_err:
	kp_db_close(db);
	return kp_cli_error(&err);
}
