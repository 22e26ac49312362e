/*
 * kplan.c - entry point and command table of the kplan CLI.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../common/log.h"
#include "../common/version.h"

const struct kp_cmd kp_cmds[] = {
	{ "record", cmd_record, "run a program under the CUPTI collector into a database", kp_usage_record },
	{ "import", cmd_import, "import a PyTorch profiler trace or an nsys SQLite export", kp_usage_import },
	{ "analyze", cmd_analyze, "find launch-bound regions, blockers and fusion chains", kp_usage_analyze },
	{ "plan", cmd_plan, "write a plan file from an analyzed database", kp_usage_plan },
	{ "report", cmd_report, "write an HTML report and CSV files", kp_usage_report },
	{ "diff", cmd_diff, "compare two runs (exit 1 on regression)", kp_usage_diff },
	{ "show", cmd_show, "summarise a plan file or list a bundle's entries", kp_usage_show },
	{ "check", cmd_check, "say whether a plan applies on this GPU (and who signed it)", kp_usage_check },
	{ "plans", cmd_plans, "list the plans a database keeps, per model and GPU", kp_usage_plans },
	{ "bundle", cmd_bundle, "put one model's plans for several GPUs in one bundle", kp_usage_bundle },
	{ "keygen", cmd_keygen, "make an Ed25519 key pair for signing plans", kp_usage_keygen },
	{ "sign", cmd_sign, "sign a plan or a bundle and the sources it references", kp_usage_sign },
	{ "precompile", cmd_precompile, "compile a plan's fused sources into the kernel cache, no GPU needed", kp_usage_precompile },
	{ "calibrate", cmd_calibrate, "measure this GPU's launch and graph costs", kp_usage_calibrate },
	{ "validate", cmd_validate, "check the cost model against measured graph times", kp_usage_validate },
	{ "export", cmd_export, "write a table or query as CSV, or a Chrome trace", kp_usage_export },
	{ "info", cmd_info, "print runs, GPU, versions, row counts and dropped records", kp_usage_info },
	{ "version", cmd_version, "print kplan's version", kp_usage_version },
	{ "help", cmd_help, "show help for a command", kp_usage_help },
	{ NULL, NULL, NULL, NULL },
};

const struct kp_cmd *kp_cmd_find(const char *name)
{
	const struct kp_cmd *c;

	for (c = kp_cmds; c->name; c++) {
		if (!strcmp(c->name, name))
			return c;
	}
	return NULL;
}

int kp_cli_error(const struct kp_err *err)
{
	char msg[4 * sizeof(err->msg)];

	/* messages quote names and bytes from files and traces */
	fprintf(stderr, "kplan: error: %s\n",
		err->msg[0] ? kp_printable(msg, sizeof(msg), err->msg) : "unknown error");
	if (kp_log_get_level() >= KP_LOG_DEBUG && err->where)
		fprintf(stderr, "kplan: (%s, %s)\n", kp_errcode_name(err->code), err->where);
	return KP_EXIT_ERROR;
}

int kp_cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kplan %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see 'kplan help %s')\n", cmd);
	return KP_EXIT_USAGE;
}

int kp_cli_help(const char *name)
{
	const struct kp_cmd *c = kp_cmd_find(name);

	if (!c) {
		fprintf(stderr, "kplan: '%s' is not a kplan command (see 'kplan --help')\n", name);
		return KP_EXIT_USAGE;
	}
	printf("kplan %s - %s\n\n%s", c->name, c->summary, c->usage);
	return KP_EXIT_OK;
}

int kp_cli_wants_help(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	}
	return 0;
}

static void usage(FILE *f)
{
	const struct kp_cmd *c;

	fprintf(f,
		"usage: kplan [-v] COMMAND [ARGS]\n"
		"\n"
		"kplan profiles CUDA workloads, finds where the GPU waits for the CPU to\n"
		"launch work, and writes a plan that runs those regions as CUDA graphs.\n"
		"\n"
		"commands:\n");
	for (c = kp_cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f,
		"\n"
		"workflow: kplan record -o run.db -- ./app   (or: kplan import trace.json.gz -o run.db)\n"
		"          kplan analyze run.db && kplan plan run.db -o model.kplan\n"
		"          kplan report run.db -o report.html\n"
		"\n"
		"options:\n"
		"  -v, --verbose   more log output (repeat for debug); also KPLAN_LOG=info|debug\n"
		"  -h, --help      this help; 'kplan help CMD' for one command\n"
		"\n"
		"exit codes:\n"
		"  0   success\n"
		"  1   ran, but the answer is no (diff found a regression; check found soft mismatches)\n"
		"  2   bad input or failed operation (message on stderr names the file and problem)\n"
		"  64  bad command line\n");
}

const char kp_usage_help[] = "usage: kplan help [CMD]\n";
const char kp_usage_version[] = "usage: kplan version\n";

KP_CMD(help)
{
	if (argc < 2) {
		usage(stdout);
		return KP_EXIT_OK;
	}
	return kp_cli_help(argv[1]);
}

KP_CMD(version)
{
	(void)argc;
	(void)argv;
	printf("kplan %s\n", KP_VERSION);
	return KP_EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct kp_cmd *c;
	int verbose = 0;

	while (argc > 1 && argv[1][0] == '-') {
		if (!strcmp(argv[1], "-v") || !strcmp(argv[1], "--verbose")) {
			verbose++;
		} else if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			usage(stdout);
			return KP_EXIT_OK;
		} else if (!strcmp(argv[1], "--version")) {
			return cmd_version(1, argv);
		} else {
			fprintf(stderr, "kplan: unknown option '%s'\n", argv[1]);
			usage(stderr);
			return KP_EXIT_USAGE;
		}
		argc--;
		argv++;
	}
	if (verbose)
		kp_log_set_level(verbose > 1 ? KP_LOG_DEBUG : KP_LOG_INFO);
	if (argc < 2) {
		usage(stderr);
		return KP_EXIT_USAGE;
	}
	c = kp_cmd_find(argv[1]);
	if (!c) {
		fprintf(stderr, "kplan: '%s' is not a kplan command (see 'kplan --help')\n", argv[1]);
		return KP_EXIT_USAGE;
	}
	if (c->fn != cmd_help && kp_cli_wants_help(argc - 1, argv + 1))
		return kp_cli_help(c->name);
	return c->fn(argc - 1, argv + 1);
}
