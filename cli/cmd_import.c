/* cmd_import.c - `kplan import TRACE -o DB`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#include "../common/log.h"
#include "../importers/import.h"

const char kp_usage_import[] =
	"usage: kplan import TRACE -o DB [--format auto|chrome|nsys] [-q]\n"
	"\n"
	"Imports a trace recorded by another tool as a new run of a kplan database.\n"
	"\n"
	"  TRACE            a PyTorch profiler (Kineto) Chrome trace, plain JSON or\n"
	"                   gzip (.json, .json.gz, .pt.trace.json), or an Nsight Systems\n"
	"                   SQLite export (`nsys export --type sqlite`); the format is\n"
	"                   recognised from the content, not the file name\n"
	"  -o, --output DB  the kplan database to write: created when missing (built\n"
	"                   under a temporary name, renamed when complete); an existing\n"
	"                   kplan database gets the import as one more run, in one\n"
	"                   transaction\n"
	"  --format F       force the input format: auto (default), chrome or nsys\n"
	"  -q, --quiet      print no summary line\n"
	"\n"
	"Profiler annotations (record_function, `step` ranges) become NVTX push/pop\n"
	"ranges (domain 0, category 0); their GPU-side projections category 1; cpu_op\n"
	"events go to the NVTX domain \"" KP_IMPORT_CPU_OP_DOMAIN "\" and python_function\n"
	"events (profiler with_stack=True) to \"" KP_IMPORT_PYTHON_DOMAIN "\": the\n"
	"analyzer names blockers by them (`aten::nonzero (train.py:42)`). A cpu_op's\n"
	"input shapes, dtypes and scalars (profiler record_shapes=True) are kept: the\n"
	"analyzer names fusion candidates by their ATen ops and says whether\n"
	"kplan.torch fuses them. Events of other categories are counted and skipped\n"
	"(listed by `kplan -v import`).\n"
	"\n"
	"On bad input (truncated gzip, invalid JSON, not a trace, events missing\n"
	"required fields, nsys export of an unknown version) prints one error line,\n"
	"exits 2 and leaves no output file behind (an existing database unchanged).\n"
	"\n"
	"examples:\n"
	"  kplan import resnet18.json.gz -o run.db\n"
	"  nsys export --type sqlite -o prof.sqlite prof.nsys-rep && kplan import prof.sqlite -o run.db\n";

KP_CMD(import)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	struct kp_import_opts io = { .format = KP_IMPORT_AUTO, .progress = 1 };
	struct kp_import_stats st;
	struct kp_err err = {0};
	const char *out = NULL;
	int c, quiet = 0;

	while ((c = getopt_long(argc, argv, "o:f:q", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'q': quiet = 1; break;
		case 'f':
			if (!strcmp(optarg, "auto"))
				io.format = KP_IMPORT_AUTO;
			else if (!strcmp(optarg, "chrome"))
				io.format = KP_IMPORT_CHROME;
			else if (!strcmp(optarg, "nsys"))
				io.format = KP_IMPORT_NSYS;
			else
				return kp_cli_usage("import", "unknown format '%s' (auto, chrome, nsys)",
						    optarg);
			break;
		default: return kp_cli_usage("import", "unknown option");
		}
	}
	if (optind != argc - 1)
		return kp_cli_usage("import", "expected one trace file");
	if (!out)
		return kp_cli_usage("import", "no output database: give -o DB");
	if (kp_import(argv[optind], out, &io, &st, &err))
		return kp_cli_error(&err);
	if (!quiet) {
		char shown[4 * sizeof(st.skipped_detail)];

		printf("imported %s (%s) into %s as run %lld%s: %lld kernels, %lld api calls, "
		       "%lld memcpys, %lld memsets, %lld syncs, %lld nvtx, %lld gpus",
		       argv[optind], kp_import_format_name(st.format), out, (long long)st.run_id,
		       st.appended ? " (appended)" : "",
		       (long long)st.rows[KP_T_KERNEL], (long long)st.rows[KP_T_RUNTIME],
		       (long long)st.rows[KP_T_MEMCPY], (long long)st.rows[KP_T_MEMSET],
		       (long long)st.rows[KP_T_SYNC], (long long)st.rows[KP_T_NVTX],
		       (long long)st.rows[KP_T_GPU]);
		if (st.skipped)
			printf("; skipped %lld events (%s)", (long long)st.skipped,
			       kp_printable(shown, sizeof(shown), st.skipped_detail));
		if (st.uncorrelated)
			printf("; %lld without correlation id", (long long)st.uncorrelated);
		if (st.rows[KP_T_CPU_OP_ARGS])
			printf("; %lld CPU ops with input shapes", (long long)st.rows[KP_T_CPU_OP_ARGS]);
		if (st.bad_shape_args)
			printf("; %lld malformed shape args skipped", (long long)st.bad_shape_args);
		printf("\n");
	}
	return KP_EXIT_OK;
}
