/* cmd_show.c - `kplan show model.kplan`: a human summary of a plan file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "../common/kptime.h"

#include "../common/kname.h"
#include "../plan/aten_groups.h"
#include "../plan/bundle.h"
#include "../plan/planfile.h"
#include "../plan/sign.h"

const char kp_usage_show[] =
	"usage: kplan show model.kplan\n"
	"       kplan show model.kplanb [--entry N]\n"
	"\n"
	"Prints what a plan file says: the GPU it was made for (hard and soft keys),\n"
	"where it came from, the predicted speedup of the whole run, and per region\n"
	"the decision (graph / eager / split) with its reason, then the fusion groups,\n"
	"then kplan.torch's torch fusion groups beside it (PLAN.aten) with the gain\n"
	"the cost model predicts for each.\n"
	"The file is verified first (header, checksum, every field); an invalid file\n"
	"exits 2 with the line and field at fault.\n"
	"\n"
	"For a bundle (kplan bundle) it lists the entries: the GPU each plan was made\n"
	"for (#N in bundle order, the number kp_rt_stats.bundle_entry gives), its\n"
	"driver, source run, regions and predicted speedup, and whether the bundle\n"
	"is signed, and how many torch fusion groups (kplan.torch's) each entry\n"
	"carries; --entry N shows entry N as a plan, with its torch fusion groups.\n"
	"\n"
	"example:\n"
	"  kplan show model.kplan\n"
	"  kplan show model.kplanb --entry 2\n";

static void ms(char *buf, size_t n, int64_t ns)
{
	snprintf(buf, n, "%.3f ms", (double)ns / 1e6);
}

static void mib(char *buf, size_t n, int64_t bytes)
{
	snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* The summary of plan p, read from name. */
static void show_plan(const char *name, const struct kp_plan *p)
{
	char a[32], b[32], c[32], t1[256], t2[256], t3[256], t4[256];
	size_t i, w = 6;
	int n[3] = {0, 0, 0};

	printf("plan %s (format %d, body-hash %016llx)\n", name, p->format_version,
	       (unsigned long long)p->body_hash);
	printf("  made for    compute capability %d.%d, CUDA %d (hard keys)\n",
	       p->cc_major, p->cc_minor, p->cuda_major);
	/* every text field may come from a trace or a hand edit: printable (common/printable.h) */
	if (p->model)
		printf("              model '%s' (hard key: kplan plan --for)\n",
		       kp_printable(t1, sizeof(t1), p->model));
	printf("              %s, %d SMs, driver %d (soft keys)\n",
	       p->gpu_name[0] ? kp_printable(t1, sizeof(t1), p->gpu_name) : "unknown GPU",
	       p->sm_count, p->driver_version);
	printf("  source      run %lld (%s%s%s), kplan %s\n", (long long)p->source_run,
	       p->source_kind[0] ? kp_printable(t2, sizeof(t2), p->source_kind) : "unknown",
	       p->date[0] ? ", " : "", kp_printable(t3, sizeof(t3), p->date),
	       kp_printable(t4, sizeof(t4), p->tool_version));
	printf("  predicted   %s -> %s for the run: saves %s (%.2fx)\n",
	       kp_fmt_dur(p->run_eager_ns, a, sizeof(a)), kp_fmt_dur(p->run_pred_ns, b, sizeof(b)),
	       kp_fmt_dur(p->run_eager_ns - p->run_pred_ns, c, sizeof(c)), p->speedup_pred);
	mib(a, sizeof(a), p->mem_budget_bytes);
	printf("  graph mem   %s budget\n", a);
	for (i = 0; i < p->n_regions; i++) {
		n[p->regions[i].decision]++;
		if (strlen(p->regions[i].label) + (p->regions[i].parent ? 2 : 0) > w)
			w = strlen(p->regions[i].label) + (p->regions[i].parent ? 2 : 0);
	}
	if (w > 40)
		w = 40;
	printf("\nregions: %zu (%d graph, %d eager, %d split)\n", p->n_regions,
	       n[KP_PLAN_GRAPH], n[KP_PLAN_EAGER], n[KP_PLAN_SPLIT]);
	if (p->n_regions)
		printf("  %-*s  %-5s  %7s  %6s  %10s  %10s  %7s  %s\n", (int)w, "region", "plan",
		       "kernels", "occ", "eager", "graph", "speedup", "reason");
	for (i = 0; i < p->n_regions; i++) {
		const struct kp_plan_region *r = &p->regions[i];
		char lab[64], why[1024];

		snprintf(lab, sizeof(lab), "%s%s", r->parent ? "  " : "",
			 kp_printable(t1, sizeof(t1), r->label));
		ms(a, sizeof(a), r->eager_ns);
		ms(b, sizeof(b), r->graph_ns);
		printf("  %-*.*s  %-5s  %7u  %6u  %10s  %10s  %6.2fx  %s\n", (int)w, (int)w, lab,
		       kp_plan_decision_name(r->decision), r->kernels, r->occurrences, a, b,
		       r->speedup_pred, kp_plan_reason_name(r->reason));
		if (r->reason_text[0])
			printf("  %-*s  %s\n", (int)w, "",
			       kp_printable(why, sizeof(why), r->reason_text));
		if (r->decision == KP_PLAN_GRAPH) {
			mib(a, sizeof(a), r->mem_budget_bytes);
			size_t j, scalars = 0;

			for (j = 0; j < r->n_patches; j++)
				scalars += r->patches[j].scalar != 0;
			printf("  %-*s  warm-up %u, shape keys %u, %zu patch slots (%zu scalars: "
			       "bind them with kp_rt_bind_value), memory %s, fingerprint %016llx\n",
			       (int)w, "", r->warmup, r->shape_keys, r->n_patches, scalars, a,
			       (unsigned long long)r->fingerprint);
		}
	}
	printf("\nfusion groups: %zu\n", p->n_fusions);
	for (i = 0; i < p->n_fusions; i++) {
		const struct kp_plan_fusion *u = &p->fusions[i];
		char num[48], chain[400], shown[1600];

		if (u->exact || !u->tolerance)
			snprintf(num, sizeof(num), "bit-exact");
		else
			snprintf(num, sizeof(num), "within %g of eager", u->tolerance);
		printf("  %u  %s kernels %u..%u, gain %.1f us per occurrence, %s, %s\n", u->id,
		       kp_printable(t1, sizeof(t1), u->region), u->first_kernel,
		       u->first_kernel + u->kernels - 1, (double)u->gain_ns / 1e3, num,
		       u->source ? kp_printable(t2, sizeof(t2), u->source) : "source not generated");
		/* the kernels' labels (common/kname.h), as the report shows them */
		printf("     %s\n", kp_printable(shown, sizeof(shown),
					      kp_kernel_chain_label(u->names, chain, sizeof(chain))));
	}
}

/* The entries of the bundle at path, or entry `entry` (from 1) in full. */
static int show_bundle(const char *path, long entry)
{
	struct kp_strbuf ap = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_bundle *b;
	struct kp_aten_groups *g;
	char id[KP_SIGN_ID_HEX], t[256], m[256];
	size_t i, j;
	int rc;

	b = kp_bundle_load(path, NULL, NULL, &err);
	if (!b)
		return kp_cli_error(&err);
	if (entry > 0) {
		if ((size_t)entry > b->n_entries) {
			printf("%s: no entry %ld (%zu entries)\n", path, entry, b->n_entries);
			kp_bundle_free(b);
			return KP_EXIT_ERROR;
		}
		kp_bundle_entry_name(b, (size_t)entry - 1, t, sizeof(t));
		printf("bundle %s, entry %s\n", b->path, t);
		show_plan(b->path, b->entries[entry - 1].plan);
		kp_bundle_aten_path(b, (size_t)entry - 1, &ap);
		rc = ap.oom ? KP_EXIT_ERROR :
		     kp_cli_show_aten_groups(ap.buf, b->entries[entry - 1].plan->body_hash, 1);
		kp_strbuf_release(&ap);
		kp_bundle_free(b);
		return rc ? rc : KP_EXIT_OK;
	}
	printf("bundle %s (format %d, %zu entr%s)\n", b->path, KP_BUNDLE_FORMAT_VERSION,
	       b->n_entries, b->n_entries == 1 ? "y" : "ies");
	/* every text field may come from a hand edit: printable */
	printf("  model       %s\n", b->entries[0].plan->model ?
	       kp_printable(m, sizeof(m), b->entries[0].plan->model) : "(not pinned: kplan plan --for)");
	rc = kp_bundle_sig_read(b, id, &err);
	printf("  signature   %s%s%s\n", rc == KP_ENOTFOUND ? "unsigned" : rc ? "unreadable: " :
	       "signed by ", rc == KP_ENOTFOUND ? "" : rc ? err.msg : id,
	       rc ? "" : " (not verified: kplan check --trust)");
	kp_err_clear(&err);
	for (i = 0; i < b->n_entries; i++) {
		const struct kp_plan *p = b->entries[i].plan;
		size_t graphs = 0;

		for (j = 0; j < p->n_regions; j++)
			graphs += p->regions[j].decision == KP_PLAN_GRAPH;
		kp_bundle_entry_name(b, i, t, sizeof(t));
		printf("  %s\n      driver %d, run %lld, %zu regions (%zu graph), %zu fusion "
		       "groups, predicted %.2fx, body-hash %016llx\n", t, p->driver_version,
		       (long long)p->source_run, p->n_regions, graphs, p->n_fusions,
		       p->speedup_pred, (unsigned long long)p->body_hash);
		/* kplan.torch's groups for this entry (kplan show --entry N lists them) */
		kp_strbuf_reset(&ap);
		kp_bundle_aten_path(b, i, &ap);
		if (!ap.oom && !kp_aten_groups_read(ap.buf, &g, NULL, NULL, &err)) {
			printf("      %zu torch fusion groups (%s)\n", g->n_groups,
			       kp_printable(m, sizeof(m), strrchr(ap.buf, '/') ?
					    strrchr(ap.buf, '/') + 1 : ap.buf));
			kp_aten_groups_free(g);
		} else if (err.code && err.code != KP_ENOTFOUND) {
			printf("      torch fusion groups unreadable: %s\n",
			       kp_printable(m, sizeof(m), err.msg));
		}
		kp_err_clear(&err);
	}
	kp_strbuf_release(&ap);
	kp_bundle_free(b);
	return KP_EXIT_OK;
}

KP_CMD(show)
{
	struct kp_err err = {0};
	struct kp_plan *p;
	long entry = 0;
	char *end;
	int rc;

	if (argc == 4 && !strcmp(argv[2], "--entry")) {
		entry = strtol(argv[3], &end, 10);
		if (end == argv[3] || *end || entry < 1)
			return kp_cli_usage("show", "--entry needs an entry number from 1");
		argc = 2;
	}
	if (argc != 2)
		return kp_cli_usage("show", "expected one plan file or bundle");
	if (kp_bundle_is(argv[1]))
		return show_bundle(argv[1], entry);
	if (entry)
		return kp_cli_usage("show", "--entry is for a bundle; %s is a plan", argv[1]);
	p = kp_plan_load(argv[1], &err);
	if (!p)
		return kp_cli_error(&err);
	show_plan(argv[1], p);
	{
		struct kp_strbuf ap = KP_STRBUF_INIT;

		kp_aten_groups_path(argv[1], &ap);
		rc = ap.oom ? KP_EXIT_ERROR : kp_cli_show_aten_groups(ap.buf, p->body_hash, 1);
		kp_strbuf_release(&ap);
	}
	kp_plan_free(p);
	return rc ? rc : KP_EXIT_OK;
}
