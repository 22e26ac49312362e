/*
 * cmd_record.c - `kplan record`: run a command under the CUPTI collector.
 *
 * Sets the KPLAN_* environment read by libkplan_collect.so, points
 * CUDA_INJECTION64_PATH at the library, forks and execs the command, waits,
 * then prints a one-line summary from the database and exits with the
 * command's own exit status (128 + signal when it was killed).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "../common/kptime.h"
#include "../common/strbuf.h"
#include "../common/vec.h"
#include "../db/db.h"

#ifndef KP_CUPTI_LIB
#define KP_CUPTI_LIB "/usr/local/cuda/lib64/libcupti.so"
#endif

const char kp_usage_record[] =
	"usage: kplan record [-o DB] [options] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD with the kplan collector (libkplan_collect.so, a CUPTI injection\n"
	"library loaded through CUDA_INJECTION64_PATH) and record its kernels,\n"
	"copies, memsets, synchronizations, NVTX ranges and the CUDA API calls that\n"
	"matter (launches, graph launches, copies, syncs, malloc/free, events,\n"
	"stream capture) into a kplan database. The program needs no rebuild.\n"
	"kplan record exits with CMD's exit status (128+N when killed by signal N).\n"
	"\n"
	"options:\n"
	"  -o, --output DB     database to write (default: kplan-<pid>.db in the current\n"
	"                      directory); an existing kplan database gets a new run\n"
	"  --args              also record launch arguments (sizes from cuFuncGetParamInfo,\n"
	"                      values of arguments up to 8 bytes) into kp_launch_args\n"
	"  --nvtx-range NAME   keep only work launched inside NVTX ranges named NAME\n"
	"  --profiler-api      keep only work launched between cudaProfilerStart/Stop;\n"
	"                      alone (no --nvtx-range or --skip) tracing is off outside\n"
	"                      those calls, so the rest of the run pays almost nothing\n"
	"  --skip N            drop the first N launches (inside the window)\n"
	"  --duration S        stop recording S seconds after CUDA starts\n"
	"  --mem-mb N          memory for buffered records (default 64); beyond it\n"
	"                      records are dropped and counted, never silently lost\n"
	"\n"
	"environment: KPLAN_COLLECTOR overrides the library path (default\n"
	"<kplan dir>/../lib/libkplan_collect.so in the build tree, else\n"
	"<kplan dir>/../lib/kplan/libkplan_collect.so as installed). The collector\n"
	"reads KPLAN_OUT, KPLAN_NVTX_RANGE, KPLAN_PROFILER_API, KPLAN_SKIP,\n"
	"KPLAN_DURATION, KPLAN_ARGS, KPLAN_MEM_MB, which this command sets.\n"
	"\n"
	"PyTorch: steps in kplan.torch regions without a plan are NVTX ranges the plan\n"
	"names, and they take the path their graph will take (Hugging Face models keep\n"
	"the attention mask and skip its host check, as under capture);\n"
	"KPLAN_TORCH_GRAPH_PATH=0 records the eager path (python/README.md).\n"
	"\n"
	"examples:\n"
	"  kplan record -o run.db -- ./app --steps 100\n"
	"  kplan record -o gpt2.db --nvtx-range step -- python3 bench.py\n"
	"  kplan record -o steps.db --profiler-api -- python3 train.py   (the script calls\n"
	"      torch.cuda.profiler.start()/stop() around the steps to trace)\n";

static int find_collector(char *out, size_t n)
{
	const char *env = getenv("KPLAN_COLLECTOR");
	char self[PATH_MAX - 64], real[PATH_MAX];
	ssize_t len;
	char *slash;

	if (env && *env) {
		snprintf(out, n, "%s", env);
		return access(out, R_OK) == 0 ? 0 : -1;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return -1;
	self[len] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	/* the build tree (build/lib/), then an installed tree (PREFIX/lib/kplan/) */
	snprintf(out, n, "%s/../lib/libkplan_collect.so", self);
	if (access(out, R_OK)) {
		snprintf(out, n, "%s/../lib/kplan/libkplan_collect.so", self);
		if (access(out, R_OK)) {
			snprintf(out, n, "%s/../lib/libkplan_collect.so", self);
			return -1;
		}
	}
	if (realpath(out, real))
		snprintf(out, n, "%s", real);
	return 0;
}

/* Does CMD name something we can execute (through PATH when no slash)? */
static int command_exists(const char *cmd)
{
	const char *path, *p, *e;
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0;
	path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	for (p = path; ; p = e + 1) {
		e = strchr(p, ':');
		if (!e)
			e = p + strlen(p);
		snprintf(buf, sizeof(buf), "%.*s/%s", (int)(e - p), e == p ? "." : p, cmd);
		if (e == p)
			snprintf(buf, sizeof(buf), "./%s", cmd);
		if (access(buf, X_OK) == 0) {
			struct stat st;

			if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
				return 1;
		}
		if (!*e)
			break;
	}
	return 0;
}

static int parse_count(const char *opt, const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s ? s : "", &end, 10);
	if (!s || !*s || *end || errno || *v < 0)
		return kp_cli_usage("record", "%s expects a non-negative integer, found '%s'",
				    opt, s ? s : "");
	return 0;
}

/* Print the summary of the newest run for pid, or add an empty run row when
 * the collector never ran (the program did not use CUDA). */
static void summarise_run(const char *out, struct kp_db *db, int64_t run, int cmd_status);

static void summarise(const char *out, const char *command, pid_t pid, int64_t t_start,
		      int cmd_status)
{
	struct kp_err err = {0};
	struct kp_db *db;
	int64_t run = 0;
	int n = 0;

	db = kp_db_open(out, access(out, F_OK) ? KP_DB_CREATE : 0, &err);
	if (!db) {
		fprintf(stderr, "kplan: warning: no recording in %s: %s\n", out, err.msg);
		return;
	}
	/* every process of the command that used CUDA added a run */
	{
		int64_t *runs;
		size_t k, nr;

		if (kp_db_recorded_since(db, t_start, &runs, &nr, &err) == 0) {
			for (k = 0; k < nr; k++)
				summarise_run(out, db, runs[k], cmd_status);
			n = (int)nr;
			free(runs);
		}
	}
	if (!n) {
		struct kp_run_info ri;
		char host[256] = "";

		gethostname(host, sizeof(host) - 1);
		memset(&ri, 0, sizeof(ri));
		ri.source = "record";
		ri.source_path = out;
		ri.command = command;
		ri.host = host;
		ri.pid = pid;
		if (kp_db_run_insert(db, &ri, &run, &err) ||
		    kp_db_run_finish(db, run, 0, NULL, "complete", &err)) {
			fprintf(stderr, "kplan: warning: %s: %s\n", out, err.msg);
		} else {
			kp_db_run_note(db, run, "no GPU work was seen (the program never initialised "
				       "CUDA)", NULL);
		}
		fprintf(stderr, "kplan: recorded run %lld in %s: no GPU work was seen"
			" (the program never initialised CUDA)\n", (long long)run, out);
	}
	kp_db_close(db);
}

static void summarise_run(const char *out, struct kp_db *db, int64_t run, int cmd_status)
{
	struct kp_run_summary r;
	const char *status;

	kp_db_run_summary(db, run, &r);
	status = r.status;
	if (!strcmp(status, "partial") && !r.dropped && cmd_status >= 128)
		status = "partial (the program was killed before the collector finished)";
	fprintf(stderr, "kplan: recorded run %lld in %s: %lld kernels, %lld API calls,"
		" %lld copies/memsets, %lld NVTX events, %lld dropped, %s%s%s\n",
		(long long)run, out, (long long)r.kernels, (long long)r.api_calls,
		(long long)r.copies, (long long)r.nvtx, (long long)r.dropped, status,
		r.note[0] ? "; " : "", r.note);
}

static volatile pid_t child;

static void forward_signal(int sig)
{
	if (child > 0)
		kill(child, sig);
}

KP_CMD(record)
{
	const char *out = NULL, *nvtx = NULL;
	long long skip = -1, mem = -1;
	double duration = -1;
	int args = 0, profiler = 0, i, status, code;
	char lib[PATH_MAX], outbuf[PATH_MAX], num[64];
	struct kp_strbuf cmdline = KP_STRBUF_INIT;
	struct sigaction ign, old_int, old_term;
	pid_t pid;
	int64_t t_start;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--"))  {
			i++;
			break;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (++i >= argc)
				return kp_cli_usage("record", "%s expects a database path", a);
			out = argv[i];
		} else if (!strcmp(a, "--args")) {
			args = 1;
		} else if (!strcmp(a, "--profiler-api")) {
			profiler = 1;
		} else if (!strcmp(a, "--nvtx-range")) {
			if (++i >= argc || !argv[i][0])
				return kp_cli_usage("record", "--nvtx-range expects a range name");
			nvtx = argv[i];
		} else if (!strcmp(a, "--skip")) {
			if (parse_count("--skip", ++i < argc ? argv[i] : NULL, &skip))
				return KP_EXIT_USAGE;
		} else if (!strcmp(a, "--mem-mb")) {
			if (parse_count("--mem-mb", ++i < argc ? argv[i] : NULL, &mem))
				return KP_EXIT_USAGE;
			if (mem < 1)
				return kp_cli_usage("record", "--mem-mb expects at least 1, found %lld", mem);
		} else if (!strcmp(a, "--duration")) {
			char *end;

			if (++i >= argc)
				return kp_cli_usage("record", "--duration expects seconds");
			duration = strtod(argv[i], &end);
			if (*end || !argv[i][0] || duration <= 0)
				return kp_cli_usage("record", "--duration expects a positive number of"
						    " seconds, found '%s'", argv[i]);
		} else if (a[0] == '-') {
			return kp_cli_usage("record", "unknown option '%s'", a);
		} else {
			/* the command may start without "--" */
			break;
		}
	}
	if (i >= argc)
		return kp_cli_usage("record", "no command given (usage: kplan record [options] -- CMD [ARGS...])");
	if (!command_exists(argv[i])) {
		fprintf(stderr, "kplan: error: command '%s' not found or not executable\n", argv[i]);
		return KP_EXIT_ERROR;
	}
	if (find_collector(lib, sizeof(lib))) {
		fprintf(stderr, "kplan: error: collector library not found at %s (build it with"
			" 'make collector' or set KPLAN_COLLECTOR)\n", lib);
		return KP_EXIT_ERROR;
	}
	if (!out) {
		snprintf(outbuf, sizeof(outbuf), "kplan-%d.db", (int)getpid());
		out = outbuf;
	}
	for (int j = i; j < argc; j++)
		kp_strbuf_addf(&cmdline, "%s%s", j > i ? " " : "", argv[j]);
	/*
	 * The database and its schema exist before the command starts: the
	 * ranks of a job (torchrun, mpirun) then open an existing file rather
	 * than race to create one, and an output that cannot be written is
	 * said now, not after a long run.
	 */
	{
		struct kp_err err = {0};
		struct kp_db *db = kp_db_open(out, KP_DB_CREATE, &err);

		if (!db) {
			kp_err_prefix(&err, "cannot record into %s", out);
			return kp_cli_error(&err);
		}
		kp_db_close(db);
	}

	setenv("CUDA_INJECTION64_PATH", lib, 1);
	if (!getenv("NVTX_INJECTION64_PATH"))
		setenv("NVTX_INJECTION64_PATH", KP_CUPTI_LIB, 1);
	setenv("KPLAN_OUT", out, 1);
	setenv("KPLAN_COMMAND", cmdline.buf, 1);
	if (nvtx)
		setenv("KPLAN_NVTX_RANGE", nvtx, 1);
	if (profiler)
		setenv("KPLAN_PROFILER_API", "1", 1);
	if (args)
		setenv("KPLAN_ARGS", "1", 1);
	if (skip >= 0) {
		snprintf(num, sizeof(num), "%lld", skip);
		setenv("KPLAN_SKIP", num, 1);
	}
	if (mem >= 0) {
		snprintf(num, sizeof(num), "%lld", mem);
		setenv("KPLAN_MEM_MB", num, 1);
	}
	if (duration > 0) {
		snprintf(num, sizeof(num), "%g", duration);
		setenv("KPLAN_DURATION", num, 1);
	}
	fflush(NULL);
	t_start = kp_wall_ns();
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kplan: error: cannot start '%s': %s\n", argv[i], strerror(errno));
		kp_strbuf_release(&cmdline);
		return KP_EXIT_ERROR;
	}
	if (pid == 0) {
		execvp(argv[i], argv + i);
		fprintf(stderr, "kplan: error: cannot run '%s': %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	/* ^C and kill reach the child (same process group); we wait for it to
	 * flush instead of dying first */
	child = pid;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGINT, &ign, &old_int);
	ign.sa_handler = forward_signal;
	sigaction(SIGTERM, &ign, &old_term);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = 0;
			break;
		}
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (WIFSIGNALED(status))
		code = 128 + WTERMSIG(status);
	else
		code = WEXITSTATUS(status);
	if (code == 127 && access(out, F_OK)) {
		kp_strbuf_release(&cmdline);
		return KP_EXIT_ERROR;
	}
	summarise(out, cmdline.buf, pid, t_start, code);
	kp_strbuf_release(&cmdline);
	return code;
}
