/*
 * cmd_bundle.c - `kplan bundle -o model.kplanb PLAN...`: one shipped
 * directory holding a model's plans for several GPUs (plan/bundle.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "../plan/aten_groups.h"
#include "../plan/bundle.h"

const char kp_usage_bundle[] =
	"usage: kplan bundle -o model.kplanb PLAN...\n"
	"\n"
	"Writes a bundle: the directory model.kplanb holding the given plans of one\n"
	"model (kplan plan, one per kind of GPU), the fused sources they name, each\n"
	"plan's torch fusion groups (PLAN.aten beside it, kplan.torch's save_fusion)\n"
	"with their sources, and later its signature (kplan sign model.kplanb --key\n"
	"KEY), which covers them all. libkplanrt and\n"
	"kplan.torch open a bundle like a plan and apply the entry made for the GPU\n"
	"they run on (kplan check model.kplanb says which). Format: plan/FORMAT.md,\n"
	"\"Bundles\".\n"
	"\n"
	"When model.kplanb is a bundle already, its entries are kept: a plan for a\n"
	"new GPU is added, a plan for a GPU it has replaces that entry. A GPU is\n"
	"its compute capability, CUDA major, GPU name and SM count (driver version\n"
	"aside). The same plan given twice is kept once; two different plans for\n"
	"one GPU among the PLAN arguments, or plans pinned to different models\n"
	"(kplan plan --for), are refused. Torch fusion groups found with another\n"
	"plan than the one beside them are refused; groups saved again beside a\n"
	"plan the bundle has replace its entry's. A change removes the bundle's\n"
	"signature.\n"
	"\n"
	"exit status:\n"
	"  0  written\n"
	"  2  a plan or source is missing or invalid, plans conflict (named), or the\n"
	"     bundle cannot be written\n"
	"\n"
	"examples:\n"
	"  kplan bundle -o model.kplanb h100.kplan h200.kplan\n"
	"  kplan bundle -o model.kplanb b200.kplan      # adds a GPU, keeps the others\n"
	"  kplan plans run.db                           # which plans the database has\n";

/* The plan files named on the command line, read once. */
struct input {
	const char *name;
	char *buf;
	size_t len;
};

static void inputs_free(struct input *in, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(in[i].buf);
	free(in);
}

KP_CMD(bundle)
{
	struct kp_strbuf notes = KP_STRBUF_INIT;
	struct kp_bundle *b = NULL, *given = NULL;
	struct kp_err err = {0};
	struct input *in = NULL;
	const char *out = NULL;
	int i, n = 0, rc = KP_EXIT_ERROR, unsigned_now = 0, existed = 0;
	size_t k, before, pruned;

	if (!(in = calloc((size_t)argc, sizeof(*in))))
		return KP_EXIT_ERROR;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
			if (i + 1 >= argc) {
				inputs_free(in, n);
				return kp_cli_usage("bundle", "%s needs a directory", argv[i]);
			}
			out = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			inputs_free(in, n);
			return kp_cli_usage("bundle", "unknown option '%s'", argv[i]);
		} else {
			in[n++].name = argv[i];
		}
	}
	if (!out || !n) {
		inputs_free(in, n);
		return kp_cli_usage("bundle", "expected -o model.kplanb and at least one plan");
	}
	/* every input is read and checked against the others first: two
	 * different plans for one GPU among them is a mistake, not an update */
	if (!(given = kp_bundle_new()))
		goto out;
	for (i = 0; i < n; i++) {
		if (kp_plan_read(in[i].name, &in[i].buf, &in[i].len, &err) ||
		    kp_bundle_add(given, in[i].buf, in[i].len, in[i].name, 0, &notes, &err))
			goto fail;
	}
	if (kp_bundle_is(out)) {
		existed = 1;
		b = kp_bundle_load(out, NULL, NULL, &err);
		if (!b) {
			kp_err_prefix(&err, "%s: not a bundle that can be added to", out);
			goto fail;
		}
	} else if (!(b = kp_bundle_new())) {
		goto out;
	}
	before = b->n_entries;
	kp_strbuf_reset(&notes);
	for (i = 0; i < n; i++)
		if (kp_bundle_add(b, in[i].buf, in[i].len, in[i].name, 1, &notes, &err))
			goto fail;
	if (kp_bundle_save(b, out, &unsigned_now, &err))
		goto fail;
	pruned = kp_bundle_prune_aten(b, out);
	fputs(notes.buf ? notes.buf : "", stdout);
	if (pruned)
		printf("%zu torch fusion group file%s of replaced entries removed\n", pruned,
		       pruned == 1 ? "" : "s");
	printf("%s: %zu entr%s (%s%zu before)\n", out, b->n_entries,
	       b->n_entries == 1 ? "y" : "ies", existed ? "" : "new bundle, ",
	       existed ? before : (size_t)0);
	for (k = 0; k < b->n_entries; k++) {
		struct kp_strbuf ap = KP_STRBUF_INIT;
		struct kp_aten_groups *g = NULL;
		char t[256];

		kp_bundle_entry_name(b, k, t, sizeof(t));
		/* kplan.torch's groups travel with their entry */
		kp_bundle_aten_path(b, k, &ap);
		if (!ap.oom && !kp_aten_groups_read(ap.buf, &g, NULL, NULL, &err))
			printf("  %s, %zu torch fusion groups\n", t, g->n_groups);
		else
			printf("  %s\n", t);
		kp_err_clear(&err);
		kp_aten_groups_free(g);
		kp_strbuf_release(&ap);
	}
	if (unsigned_now)
		printf("%s/%s.sig removed: it signed the old bundle; sign again with kplan sign "
		       "%s --key KEY\n", out, KP_BUNDLE_FILE, out);
	rc = KP_EXIT_OK;
	goto out;
fail:
	rc = kp_cli_error(&err);
out:
	kp_strbuf_release(&notes);
	kp_bundle_free(b);
	kp_bundle_free(given);
	inputs_free(in, n);
	return rc;
}
