/* cmd_analyze.c - `kplan analyze DB`: regions, gaps, blockers, fusion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "../analyzer/analyzer.h"
#include "../analyzer/ranks.h"

const char kp_usage_analyze[] =
	"usage: kplan analyze DB [--run N] [--csv DIR] [options]\n"
	"\n"
	"Analyzes one run: the idle gap before every GPU op (host-bound: its launch\n"
	"call began after the previous op ended; else device-side), regions (NVTX /\n"
	"profiler annotation ranges, else repeated kernel sequences mined per\n"
	"stream), what blocks capturing each region as a CUDA graph (splitting it\n"
	"into capturable parts), the predicted graphed time from the cost model\n"
	"calibrated for the run's GPU (`kplan calibrate`; documented defaults\n"
	"otherwise), and fusion candidates. Results replace the run's rows in\n"
	"kp_regions, kp_region_occurrences, kp_blockers, kp_gaps and\n"
	"kp_fusion_candidates, then a summary is printed.\n"
	"\n"
	"When the run is a rank of a multi-process job recorded into the same\n"
	"database (kplan record -- torchrun ..., mpirun ...), every rank's run is\n"
	"analyzed (unless --run names one) and the ranks are compared: each rank's\n"
	"time in NCCL collectives, its wait for the last rank to arrive at each\n"
	"collective, and the straggler; --csv adds ranks.csv and collectives.csv.\n"
	"\n"
	"options:\n"
	"  --run N             run to analyze (default: the newest)\n"
	"  --csv DIR           also write regions.csv, gaps.csv, fusion.csv and\n"
	"                      blockers.csv into DIR (created if missing)\n"
	"  --no-nvtx           ignore annotations; mine repeated sequences\n"
	"  --mine              mine sequences even when annotations exist\n"
	"  --legacy-stream ID  stream id of the legacy default stream (default 7,\n"
	"                      as CUPTI and PyTorch traces report it); 'none' for none\n"
	"  --gap-rows N        keep at most the N largest gaps in kp_gaps (default 1000000)\n"
	"  --min-period N      shortest mined period, in GPU ops (default 2)\n"
	"  --dry-run           analyze and print, store nothing\n"
	"  -q, --quiet         print nothing but errors\n"
	"\n"
	"examples:\n"
	"  kplan analyze run.db\n"
	"  kplan analyze run.db --run 2 --csv out/\n"
	"  kplan analyze trace.db --no-nvtx       # regions from repetition alone\n";

static int parse_i64(const char *s, int64_t *v)
{
	char *end;
	long long x;

	if (!s || !*s)
		return -1;
	x = strtoll(s, &end, 10);
	if (*end)
		return -1;
	*v = x;
	return 0;
}

static void pr_time(const char *what, int64_t ns, int64_t total)
{
	printf("  %-22s %12.3f ms  %5.1f%%\n", what, ns / 1e6,
	       total > 0 ? 100.0 * (double)ns / (double)total : 0.0);
}

KP_CMD(analyze)
{
	struct kp_analyze_opts o;
	struct kp_analysis_summary s;
	struct kp_err err = {0};
	const char *path = NULL, *csv = NULL;
	struct kp_db *db;
	struct kp_job *job = NULL;
	int64_t ask_run;
	int quiet = 0, rc;

	kp_analyze_opts_init(&o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int64_t v;

		if (!strcmp(a, "--run") || !strcmp(a, "--gap-rows") || !strcmp(a, "--min-period")) {
			if (i + 1 >= argc || parse_i64(argv[i + 1], &v) || v < 1)
				return kp_cli_usage("analyze", "%s expects a positive integer", a);
			i++;
			if (!strcmp(a, "--run"))
				o.run_id = v;
			else if (!strcmp(a, "--gap-rows"))
				o.gap_rows_max = v;
			else
				o.min_period = (int)v;
		} else if (!strcmp(a, "--csv")) {
			if (i + 1 >= argc)
				return kp_cli_usage("analyze", "--csv expects a directory");
			csv = argv[++i];
		} else if (!strcmp(a, "--legacy-stream")) {
			if (i + 1 >= argc)
				return kp_cli_usage("analyze", "--legacy-stream expects a stream id or 'none'");
			i++;
			if (!strcmp(argv[i], "none"))
				o.legacy_stream = -1;
			else if (parse_i64(argv[i], &o.legacy_stream) || o.legacy_stream < 0)
				return kp_cli_usage("analyze", "--legacy-stream expects a stream id or 'none', found '%s'",
						    argv[i]);
		} else if (!strcmp(a, "--no-nvtx")) {
			o.no_nvtx = 1;
		} else if (!strcmp(a, "--mine")) {
			o.mine = 1;
		} else if (!strcmp(a, "--dry-run")) {
			o.dry_run = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = 1;
		} else if (a[0] == '-' && a[1]) {
			return kp_cli_usage("analyze", "unknown option '%s'", a);
		} else if (!path) {
			path = a;
		} else {
			return kp_cli_usage("analyze", "expected one database path, found '%s' too", a);
		}
	}
	if (!path)
		return kp_cli_usage("analyze", "expected a database path");
	db = kp_db_open(path, o.dry_run ? KP_DB_RDONLY : 0, &err);
	if (!db)
		return kp_cli_error(&err);
	ask_run = o.run_id;
	if (!o.run_id)
		o.run_id = kp_db_default_run(db);   /* not a launcher's empty run */
	rc = kp_analyze(db, &o, &s, &err);
	if (!rc && csv && !o.dry_run)
		rc = kp_analyze_write_csv(db, s.run_id, csv, &err);
	if (!rc)
		rc = kp_job_load(db, s.run_id, &job, &err);
	if (!rc && job && csv && !o.dry_run)
		rc = kp_job_write_csv(job, csv, &err);
	if (rc) {
		kp_job_free(job);
		kp_db_close(db);
		return kp_cli_error(&err);
	}
	if (!quiet) {
		int64_t idle = s.host_idle_ns + s.device_idle_ns, tot = s.busy_ns + idle;
		char gpu[256];

		printf("run %lld: %lld GPU ops (%lld kernels, %lld memset/memcpy) on %lld streams,"
		       " %lld of %lld launch calls joined; cost model: %s%s\n",
		       (long long)s.run_id, (long long)s.n_ops, (long long)s.n_kernels,
		       (long long)s.n_memops, (long long)s.n_streams, (long long)s.n_joined,
		       (long long)s.n_launch_calls, s.cost.gpu_name[0] ?
		       kp_printable(gpu, sizeof(gpu), s.cost.gpu_name) : "unknown GPU",
		       s.cost.n_calibrated ? " (calibrated)" : " (defaults)");
		if (s.n_graph_ops)
			printf("  %lld of the ops ran from the program's own CUDA graphs (%lld graph"
			       " launches): reported as graph regions, not re-graphed\n",
			       (long long)s.n_graph_ops, (long long)s.n_graph_launches);
		if (s.n_collectives)
			printf("  %lld NCCL collective kernels: graph nodes, not blockers\n",
			       (long long)s.n_collectives);
		if (s.n_other_polls)
			printf("  %lld event/stream queries on threads that launch nothing (a watchdog,"
			       " NCCL's proxy): not syncs of the launching thread\n",
			       (long long)s.n_other_polls);
		if (s.n_pdl)
			printf("  %lld kernels launched with programmatic dependent launch: no dependency"
			       " gap in the graph model\n", (long long)s.n_pdl);
		pr_time("busy", s.busy_ns, tot);
		pr_time("host-bound idle", s.host_idle_ns, tot);
		pr_time("device-side idle", s.device_idle_ns, tot);
		printf("  launch call            p50 %.1f us, p90 %.1f us; queue delay p50 %.1f us, p90 %.1f us\n",
		       s.launch_api.p50 / 1e3, s.launch_api.p90 / 1e3, s.queue.p50 / 1e3,
		       s.queue.p90 / 1e3);
		printf("regions (%s): %lld, %lld capturable, %lld split parts, %lld fatal blockers;"
		       " fusion candidates: %lld (%lld feasible)\n",
		       s.regions_from == 1 ? "nvtx ranges" : s.regions_from == 2 ? "mined" : "none",
		       (long long)s.n_regions, (long long)s.n_capturable, (long long)s.n_split,
		       (long long)s.n_blockers, (long long)s.n_fusion, (long long)s.n_fusion_feasible);
		if (!o.dry_run && s.n_regions)
			kp_analyze_print_regions(db, s.run_id, stdout, 40, &err);
		if (!o.dry_run && s.n_fusion)
			kp_analyze_print_fusion(db, s.run_id, stdout, 5);
		if (csv && !o.dry_run)
			printf("wrote %s/regions.csv, gaps.csv, fusion.csv, blockers.csv%s\n", csv,
			       job ? ", ranks.csv, collectives.csv" : "");
		printf("analyzed in %.2f s\n", s.seconds);
	}
	/* the other ranks of its job, unless one run was asked for */
	for (size_t r = 0; job && !ask_run && r < job->n_ranks; r++) {
		struct kp_analyze_opts ro = o;
		struct kp_analysis_summary rs;

		if (job->ranks[r].run_id == s.run_id)
			continue;
		ro.run_id = job->ranks[r].run_id;
		if (kp_analyze(db, &ro, &rs, &err)) {
			kp_job_free(job);
			kp_db_close(db);
			return kp_cli_error(&err);
		}
		if (!quiet)
			printf("rank %d (run %lld) analyzed too: %lld GPU ops, %lld NCCL kernels, %lld"
			       " regions, %lld capturable (kplan analyze DB --run %lld for its table)\n",
			       job->ranks[r].rank, (long long)rs.run_id, (long long)rs.n_ops,
			       (long long)rs.n_collectives, (long long)rs.n_regions,
			       (long long)rs.n_capturable, (long long)rs.run_id);
	}
	if (job && !quiet)
		kp_job_print(job, stdout);
	kp_job_free(job);
	kp_db_close(db);
	return KP_EXIT_OK;
}
