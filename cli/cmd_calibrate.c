/*
 * cmd_calibrate.c - `kplan calibrate [-o DB]`: measure this GPU's launch-cost
 * constants and store them in kp_calibration.
 *
 * The kplan binary links no CUDA; the measuring is done by kplan-calibrate
 * (runtime/calibrate.cu), found next to this binary (or named by
 * $KPLAN_CALIBRATE), whose output lines are "gpu NAME", "driver VERSION" and
 * "QUANTITY VALUE N_SAMPLES" with the quantity names of common/cost_quantities.def.
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
	"usage: kplan calibrate [-o DB] [--from FILE]\n"
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
	"  -o DB        store the results in DB (created if missing)\n"
	"  --from FILE  take the values from FILE, the saved output of kplan-calibrate\n"
	"               (`kplan-calibrate > h100.calib` on the GPU), instead of\n"
	"               measuring: no GPU needed\n"
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
	"  kplan calibrate -o run.db\n"
	"  kplan calibrate --from bench/cost_corpus/h100/calib.txt -o run.db\n";

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
	const char *dbpath = NULL, *from = NULL;
	char prog[PATH_MAX + 16];
	struct kp_cost_file cf;
	int i, rc, status;
	FILE *p;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			dbpath = argv[++i];
		else if (!strcmp(argv[i], "--from") && i + 1 < argc)
			from = argv[++i];
		else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--from"))
			return kp_cli_usage("calibrate", "%s needs a path", argv[i]);
		else
			return kp_cli_usage("calibrate", "unexpected argument '%s'", argv[i]);
	}
	if (from) {
		if (kp_cost_read_path(from, &cf, &err))
			return kp_cli_error(&err);
	} else {
		find_program(prog, sizeof(prog));
		if (access(prog, X_OK)) {
			kp_err_set(&err, KP_ENOTFOUND, "%s: calibration program not found or not "
				   "executable (`make` builds it where nvcc is found, or set KPLAN_CALIBRATE)",
				   prog);
			return kp_cli_error(&err);
		}
		fflush(stdout);
		p = popen(prog, "r");
		if (!p) {
			kp_err_set(&err, KP_EIO, "%s: cannot run", prog);
			return kp_cli_error(&err);
		}
		rc = kp_cost_read(p, prog, &cf, &err);
		status = pclose(p);
		/*
		 * A program that failed said why on stderr (no GPU, a CUDA
		 * error); what it printed on stdout is then beside the point.
		 */
		if (status != 0) {
			kp_err_set(&err, KP_ECUDA, "%s failed (exit status %d; its own message "
				   "is above): no measurements taken", prog,
				   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
			return kp_cli_error(&err);
		}
		if (rc)
			return kp_cli_error(&err);  /* names prog and what its output lacked */
	}
	printf("gpu %s, driver %d\n", cf.gpu, cf.driver);
	for (i = 0; i < cf.n; i++)
		printf("  %-26s %12.1f  (%lld samples)\n", kp_cost_name(cf.row[i].q),
		       cf.row[i].value, cf.row[i].n_samples);
	if (!dbpath)
		return KP_EXIT_OK;
	if (kp_cost_store_at(dbpath, &cf, &err))
		return kp_cli_error(&err);
	printf("stored %d quantities in %s\n", cf.n, dbpath);
	return KP_EXIT_OK;
}
