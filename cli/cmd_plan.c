/* cmd_plan.c - `kplan plan DB [--run N] -o model.kplan`. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#include "../common/fileio.h"
#include "../common/kptime.h"
#include "../common/strbuf.h"
#include "../fusion/generate.h"
#include "../plan/predict.h"
#include "../planner/planner.h"

const char kp_usage_plan[] =
	"usage: kplan plan DB [--run N] -o model.kplan [options]\n"
	"       kplan plan --base PLAN --kernels TRACE --catalog FILE -o model.kplan\n"
	"\n"
	"Writes the plan file for a run (see plan/FORMAT.md), analyzing it first\n"
	"when 'kplan analyze' has not (one line says so): per region\n"
	"graph (shape keys, warm-up, patch slots), eager (with the reason) or split;\n"
	"fusion groups with their predicted gain; the graph memory budget and the\n"
	"predicted speedup of the whole run. The plan is also stored in the database's\n"
	"kp_plans table; older plans of the same run are marked stale, never deleted.\n"
	"The same database always gives a byte-identical plan. A rank of a multi-process\n"
	"job gets one plan for every rank: each rank's run is analyzed and planned, and\n"
	"a region the ranks do not agree on is eager on all of them (ranks-differ).\n"
	"\n"
	"options:\n"
	"  -o, --output PATH     plan file to write ('-' for stdout); required\n"
	"  --run N               run to plan (default: the newest, not a launcher's\n"
	"                        empty run: the newest rank's then)\n"
	"  --warmup N            eager calls before capture in graph regions (default 2)\n"
	"  --min-gain PCT        graph a region only when the cost model predicts it\n"
	"                        saves at least PCT percent of its eager time (default 5)\n"
	"  --run-length X        the run the plan is for is X times as long as the\n"
	"                        recorded one (calls per region; default 1): record\n"
	"                        100 steps of a 10,000-step job and pass 100; break-even\n"
	"                        and the predicted saving count the longer run (the\n"
	"                        plan's occurrences stay the recorded ones)\n"
	"  --mem-limit BYTES     cap on device memory for all graphs; regions with the\n"
	"                        least gain per byte go eager first (default: no cap)\n"
	"  --cc MAJOR.MINOR      compute capability of the GPU the plan is for\n"
	"                        (default: the run's; needed when it records none)\n"
	"  --cuda-major N        CUDA major version of that GPU (default: the run's)\n"
	"  --gpu-name S, --sms N, --driver V\n"
	"                        the soft keys of that GPU (default: the run's): with\n"
	"                        --cc, a plan described for another kind of GPU, for a\n"
	"                        bundle (kplan bundle); the figures stay the run's\n"
	"  --no-store            do not record the plan in the database (read-only:\n"
	"                        the run must be analyzed already)\n"
	"  --for IDENTITY        pin the plan to a model: any string naming it, e.g.\n"
	"                        'gpt2-124M@sha256:...' or a name and version; written\n"
	"                        as [hard] 'for' (plan format 3). An application that\n"
	"                        passes another identity (kp_rt_options.model,\n"
	"                        KPLAN_RT_MODEL) runs every region eagerly\n"
	"                        (plan-mismatch); one that passes none is warned once\n"
	"                        and the plan applies. With --base: replaces the base's\n"
	"                        identity (without --for the base's is kept)\n"
	"  --regions WHICH       which regions the plan holds: runtime: those the\n"
	"                        program enters through libkplanrt (kp_region_begin,\n"
	"                        kplan.torch.region), the only ones a plan can apply\n"
	"                        to; all: also its own NVTX ranges and mined regions;\n"
	"                        auto (default): runtime when the run has any, else all\n"
	"  --catalog FILE        fusion catalog (fusion/FUSION.md; repeatable, first\n"
	"                        match wins): each GEMV (a 'dot' kernel) with the\n"
	"                        elementwise kernels around it, every other run of\n"
	"                        2..12 catalog kernels in each graph region, then the\n"
	"                        analyzer's candidates none of those covers, get a\n"
	"                        generated fused kernel, written next to the plan as\n"
	"                        kpfuse-HASH.cu and referenced by hash (record with\n"
	"                        --args to specialise it on the recorded arguments)\n"
	"  --fusion MODE         which fusion groups the plan keeps (fusion/FUSION.md,\n"
	"                        \"Numerics\"): exact (default): those whose fused\n"
	"                        kernel gives the chain's outputs bit for bit;\n"
	"                        tolerant: also those that differ within a tolerance\n"
	"                        (a sum in another order, as in a layer norm), written\n"
	"                        with it; off: none. Each dropped group is named on\n"
	"                        one line\n"
	"  --base PLAN           instead of a database: add fusion groups to an existing\n"
	"                        plan, from a kernel trace (needs --kernels, --catalog)\n"
	"  --kernels TRACE       captured kernels per region, as KPLAN_FUSION_TRACE=TRACE\n"
	"                        makes libkplanrt write them (REGION<tab>INDEX<tab>NAME\n"
	"                        <tab>ARGS, the kernel's parameter bytes)\n"
	"\n"
	"examples:\n"
	"  kplan plan run.db -o model.kplan\n"
	"  kplan plan run.db --run 2 --mem-limit 268435456 -o model.kplan\n"
	"  kplan plan run.db --run-length 100 -o model.kplan\n"
	"  kplan plan run.db --catalog fusion/catalog/examples.kpcat -o model.kplan\n"
	"  kplan plan run.db --catalog my.kpcat --fusion tolerant -o model.kplan\n"
	"  kplan plan --base model.kplan --kernels trace.tsv --catalog my.kpcat -o fused.kplan\n";

static int parse_num(const char *s, long long lo, long long hi, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || end == s || *end || *out < lo || *out > hi ? -1 : 0;
}

/*
 * A run-length factor: plain decimal (digits, '.', an exponent; no sign,
 * no inf, nan or hex), finite, within the planner's range.
 */
static int parse_factor(const char *s, double *out)
{
	char *end;

	if (!s || !((*s >= '0' && *s <= '9') || *s == '.') ||
	    s[strspn(s, "0123456789.eE+-")])
		return -1;
	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out >= KP_PLAN_RUN_LENGTH_MIN) ||
	       !(*out <= KP_PLAN_RUN_LENGTH_MAX) ? -1 : 0;
}

/* Write text to path atomically (common/fileio.h), so a failed run leaves no half plan. */
static int write_atomic(const char *path, const char *text, size_t len, struct kp_err *err)
{
	if (!strcmp(path, "-")) {
		if (fwrite(text, 1, len, stdout) != len || fflush(stdout))
			return kp_err_set(err, KP_EIO, "writing the plan to stdout failed");
		return 0;
	}
	return kp_file_write_atomic(AT_FDCWD, path, text, len, 0666, err);
}

/* Directory of path ("." when it has none). */
static void dir_of(const char *path, char *out, size_t n)
{
	const char *sl = strrchr(path, '/');

	if (!sl)
		snprintf(out, n, ".");
	else if (sl == path)
		snprintf(out, n, "/");
	else
		snprintf(out, n, "%.*s", (int)(sl - path), path);
}

/*
 * The fusion part (fusion/: kp_fx_plan_fuse decides the order). Base mode:
 * groups from a trace file, then sources. Database mode: the groups of
 * ktrace (the planner's kernels of each graph region) win over the
 * analyzer's candidates.
 */
static int plan_fusion(struct kp_plan *plan, const struct kp_fx_catalog *cat, const char *trace,
		       const struct kp_strbuf *ktrace, const char *out, int keep, struct kp_err *err)
{
	struct kp_strbuf buf = KP_STRBUF_INIT;
	struct kp_fx_plan_stats st;
	char dir[4096];
	int rc;

	dir_of(out, dir, sizeof(dir));
	if (ktrace) {
		rc = kp_fx_plan_fuse(plan, cat, ktrace->buf, ktrace->len, "the database's kernels",
				     KP_FX_FUSE_TRACE_FIRST, keep, dir, &st, err);
	} else {
		if (trace) {
			FILE *f = fopen(trace, "rb");
			char chunk[65536];
			size_t n;

			if (!f)
				return kp_err_set(err, KP_EIO, "%s: cannot open: %s", trace,
						  strerror(errno));
			while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
				kp_strbuf_add(&buf, chunk, n);
			fclose(f);
			if (buf.oom) {
				kp_strbuf_release(&buf);
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			}
		}
		rc = kp_fx_plan_fuse(plan, cat, trace ? (buf.buf ? buf.buf : "") : NULL, buf.len,
				     trace, KP_FX_FUSE_IN_ORDER, keep, dir, &st, err);
		kp_strbuf_release(&buf);
	}
	if (rc)
		return rc;
	fprintf(stdout, "fusion: %d groups, %d generated, %d not in the catalog, %d infeasible, "
		"%d below the cost threshold, %d not bit-exact\n", st.groups, st.generated,
		st.not_in_catalog, st.infeasible, st.unprofitable, st.inexact);
	return 0;
}

/* What `kplan plan`'s options ask for. */
struct plan_args {
	struct kp_planner_opts o;
	const char *db_path, *out;
	const char *base, *trace;     /* trace mode: --base PLAN --kernels TRACE */
	const char *model;            /* --for IDENTITY, or NULL */
	struct kp_fx_catalog *cat;    /* the --catalog files, merged; the caller frees it */
	int store, keep;
};

/* Parse the options into opt; 0, or the exit code (a usage or error message printed). */
static int parse_args(int argc, char **argv, struct plan_args *opt)
{
	struct kp_err err = {0};
	long long v;
	int i;

	memset(opt, 0, sizeof(*opt));
	kp_planner_opts_init(&opt->o);
	opt->store = 1;
	opt->keep = KP_FX_KEEP_EXACT;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (!val)
				return kp_cli_usage("plan", "%s needs a path", a);
			opt->out = val;
			i++;
		} else if (!strcmp(a, "--run")) {
			if (!val || parse_num(val, 1, INT64_MAX, &v))
				return kp_cli_usage("plan", "--run needs a positive run id");
			opt->o.run_id = v;
			i++;
		} else if (!strcmp(a, "--warmup")) {
			if (!val || parse_num(val, 0, 1000, &v))
				return kp_cli_usage("plan", "--warmup needs a count 0..1000");
			opt->o.warmup = (int)v;
			i++;
		} else if (!strcmp(a, "--min-gain")) {
			if (!val || parse_num(val, 0, 100, &v))
				return kp_cli_usage("plan", "--min-gain needs a percentage 0..100");
			opt->o.min_gain = (double)v / 100.0;
			i++;
		} else if (!strcmp(a, "--run-length")) {
			if (!val)
				return kp_cli_usage("plan", "--run-length needs a factor X > 0");
			if (parse_factor(val, &opt->o.run_length))
				return kp_cli_usage("plan", "--run-length needs a factor X > 0, e.g. 100 "
						    "or 3.33 (at most 1e6), not '%s'", val);
			i++;
		} else if (!strcmp(a, "--mem-limit")) {
			if (!val || parse_num(val, 1, KP_PLAN_MAX_BYTES, &v))
				return kp_cli_usage("plan", "--mem-limit needs a byte count");
			opt->o.mem_limit_bytes = v;
			i++;
		} else if (!strcmp(a, "--cc")) {
			if (!val || sscanf(val, "%d.%d", &opt->o.cc_major, &opt->o.cc_minor) != 2 ||
			    opt->o.cc_major < 1 || opt->o.cc_major > 99 ||
			    opt->o.cc_minor < 0 || opt->o.cc_minor > 9)
				return kp_cli_usage("plan", "--cc needs MAJOR.MINOR, e.g. 9.0");
			i++;
		} else if (!strcmp(a, "--cuda-major")) {
			if (!val || parse_num(val, 1, 99, &v))
				return kp_cli_usage("plan", "--cuda-major needs 1..99");
			opt->o.cuda_major = (int)v;
			i++;
		} else if (!strcmp(a, "--gpu-name")) {
			if (!val || !*val)
				return kp_cli_usage("plan", "--gpu-name needs a GPU name");
			opt->o.gpu_name = val;
			i++;
		} else if (!strcmp(a, "--sms")) {
			if (!val || parse_num(val, 1, 100000, &v))
				return kp_cli_usage("plan", "--sms needs a multiprocessor count");
			opt->o.sm_count = (int)v;
			i++;
		} else if (!strcmp(a, "--driver")) {
			if (!val || parse_num(val, 1, 10000000, &v))
				return kp_cli_usage("plan", "--driver needs a version like 13000");
			opt->o.driver_version = (int)v;
			i++;
		} else if (!strcmp(a, "--no-store")) {
			opt->store = 0;
		} else if (!strcmp(a, "--regions")) {
			if (!val || (strcmp(val, "auto") && strcmp(val, "runtime") && strcmp(val, "all")))
				return kp_cli_usage("plan", "--regions needs auto, runtime or all");
			opt->o.regions = !strcmp(val, "auto") ? KP_PLANNER_REGIONS_AUTO :
					 !strcmp(val, "runtime") ? KP_PLANNER_REGIONS_RUNTIME :
					 KP_PLANNER_REGIONS_ALL;
			i++;
		} else if (!strcmp(a, "--catalog")) {
			struct kp_fx_catalog *c;

			if (!val)
				return kp_cli_usage("plan", "--catalog needs a file");
			if (!(c = kp_fx_catalog_load(val, &err)))
				return kp_cli_error(&err);
			if (!opt->cat) {
				opt->cat = c;
			} else {
				int mrc = kp_fx_catalog_merge(opt->cat, c, &err);

				kp_fx_catalog_free(c);
				if (mrc)
					return kp_cli_error(&err);
			}
			i++;
		} else if (!strcmp(a, "--fusion")) {
			if (!val || (strcmp(val, "exact") && strcmp(val, "tolerant") && strcmp(val, "off")))
				return kp_cli_usage("plan", "--fusion needs exact, tolerant or off");
			opt->keep = !strcmp(val, "exact") ? KP_FX_KEEP_EXACT :
				    !strcmp(val, "tolerant") ? KP_FX_KEEP_TOLERANT : KP_FX_KEEP_NONE;
			i++;
		} else if (!strcmp(a, "--for")) {
			if (!val || !*val || strlen(val) > 512)
				return kp_cli_usage("plan", "--for needs a model identity (1..512 bytes)");
			opt->model = val;
			i++;
		} else if (!strcmp(a, "--base") || !strcmp(a, "--kernels")) {
			if (!val)
				return kp_cli_usage("plan", "%s needs a path", a);
			*(a[2] == 'b' ? &opt->base : &opt->trace) = val;
			i++;
		} else if (a[0] == '-' && a[1]) {
			return kp_cli_usage("plan", "unknown option '%s'", a);
		} else if (!opt->db_path) {
			opt->db_path = a;
		} else {
			return kp_cli_usage("plan", "unexpected argument '%s'", a);
		}
	}
	if (opt->base || opt->trace) {
		if (!opt->base || !opt->trace || !opt->cat || opt->db_path)
			return kp_cli_usage("plan", "--base PLAN goes with --kernels TRACE and --catalog, without a database");
	} else if (!opt->db_path) {
		return kp_cli_usage("plan", "expected a database path");
	}
	if (!opt->out || (opt->cat && !strcmp(opt->out, "-")))
		return kp_cli_usage("plan", opt->cat ? "--catalog needs -o PATH (sources go next to the plan)"
					    : "expected -o model.kplan");
	return 0;
}

/* --for: pin plan to opt->model (replacing any identity). 0 or KP_ENOMEM. */
static int set_model(struct kp_plan *plan, const struct plan_args *opt, struct kp_err *err)
{
	char *m;

	if (!opt->model)
		return 0;
	m = strdup(opt->model);
	if (!m)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	free(plan->model);
	plan->model = m;
	return 0;
}

/* Trace mode: the fusion groups of a kernel trace added to an existing plan. */
static int plan_from_base(const struct plan_args *opt)
{
	struct kp_err err = {0};
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_plan *plan;
	int rc = KP_EXIT_OK;

	plan = kp_plan_load(opt->base, &err);
	if (!plan || (opt->keep != KP_FX_KEEP_NONE &&
		      plan_fusion(plan, opt->cat, opt->trace, NULL, opt->out, opt->keep, &err))) {
		rc = kp_cli_error(&err);
		goto out;
	}
	kp_fx_plan_filter(plan, opt->keep, stdout);
	if (set_model(plan, opt, &err) || kp_plan_write(plan, &text, &err) || write_atomic(opt->out, text.buf, text.len, &err)) {
		rc = kp_cli_error(&err);
		goto out;
	}
	printf("%s: %zu fusion groups\n", opt->out, plan->n_fusions);
out:
	kp_strbuf_release(&text);
	kp_plan_free(plan);
	return rc;
}

/* "OUT: N regions (...), N fusion groups, predicted speedup X" */
static void print_summary(const struct plan_args *opt, const struct kp_plan *plan, int64_t plan_id)
{
	FILE *f = strcmp(opt->out, "-") ? stdout : stderr;
	int n_graph = 0, n_eager = 0, n_split = 0;
	char a[32], b[32];
	size_t r;

	for (r = 0; r < plan->n_regions; r++) {
		int d = plan->regions[r].decision;

		n_graph += d == KP_PLAN_GRAPH;
		n_eager += d == KP_PLAN_EAGER;
		n_split += d == KP_PLAN_SPLIT;
	}
	fprintf(f, "%s: %zu regions (%d graph, %d eager, %d split), %zu fusion groups, "
		"predicted to save %s of the run's %s",
		opt->out, plan->n_regions, n_graph, n_eager, n_split, plan->n_fusions,
		kp_fmt_dur(plan->run_eager_ns - plan->run_pred_ns, a, sizeof(a)),
		kp_fmt_dur(plan->run_eager_ns, b, sizeof(b)));
	if (opt->o.run_length != 1.0)
		fprintf(f, ", a run %.4gx the recorded one", opt->o.run_length);
	fprintf(f, " (%.2fx)", plan->speedup_pred);
	if (opt->store)
		fprintf(f, " (plan %lld in %s)\n", (long long)plan_id, opt->db_path);
	else
		fputc('\n', f);
}

KP_CMD(plan)
{
	struct plan_args opt;
	struct kp_err err = {0};
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_strbuf ktrace = KP_STRBUF_INIT, notes = KP_STRBUF_INIT;
	struct kp_plan *plan = NULL;
	struct kp_db *db = NULL;
	FILE *say;
	int64_t plan_id = 0;
	int rc;

	if ((rc = parse_args(argc, argv, &opt)) || opt.base) {
		if (!rc)
			rc = plan_from_base(&opt);
		kp_fx_catalog_free(opt.cat);
		return rc;
	}
	say = strcmp(opt.out, "-") ? stdout : stderr;
	if (kp_cli_analyze_first("plan", opt.db_path, opt.o.run_id, opt.store, &err))
		db = NULL;
	else
		db = kp_db_open(opt.db_path, opt.store ? 0 : KP_DB_RDONLY, &err);
	if (!db) {
		kp_fx_catalog_free(opt.cat);
		return kp_cli_error(&err);
	}
	if (opt.cat)
		opt.o.kernel_trace = &ktrace;
	opt.o.notes = &notes;
	plan = kp_planner_run(db, &opt.o, &err);
	if (notes.len)
		fprintf(say, "%s", notes.buf);
	if (plan && opt.cat && opt.keep != KP_FX_KEEP_NONE &&
	    plan_fusion(plan, opt.cat, NULL, &ktrace, opt.out, opt.keep, &err)) {
		rc = kp_cli_error(&err);
		goto out;
	}
	if (plan)
		kp_fx_plan_filter(plan, opt.keep, say);
	if (!plan || set_model(plan, &opt, &err) || kp_plan_write(plan, &text, &err) ||
	    write_atomic(opt.out, text.buf, text.len, &err)) {
		rc = kp_cli_error(&err);
		goto out;
	}
	if (opt.store && kp_planner_store(db, plan, text.buf, text.len,
					  strcmp(opt.out, "-") ? opt.out : NULL, &plan_id, &err)) {
		rc = kp_cli_error(&err);
		goto out;
	}
	print_summary(&opt, plan, plan_id);
	rc = KP_EXIT_OK;
out:
	kp_fx_catalog_free(opt.cat);
	kp_strbuf_release(&ktrace);
	kp_strbuf_release(&notes);
	kp_strbuf_release(&text);
	kp_plan_free(plan);
	kp_db_close(db);
	return rc;
}
