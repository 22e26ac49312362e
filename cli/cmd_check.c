/* cmd_check.c - `kplan check model.kplan`: does the plan apply on a GPU? */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "../common/strbuf.h"
#include "../plan/bundle.h"
#include "../plan/planfile.h"
#include "../plan/sign.h"
#include "../planner/gpuinfo.h"

const char kp_usage_check[] =
	"usage: kplan check model.kplan|model.kplanb [--trust KEY.pub]... [--model ID] [--device N]\n"
	"       kplan check model.kplan [--trust KEY.pub]... [--model ID] [--gpu-name S]\n"
	"                               [--cc M.m] [--sms N] [--driver V] [--cuda-major N]\n"
	"\n"
	"Verifies the plan file and compares its keys with this machine's GPU (found\n"
	"through libcuda.so.1 at run time) or, when any GPU option is given, with the\n"
	"GPU those options describe (for CI machines without one; options not given\n"
	"are unknown). Hard keys: compute capability and CUDA major version; soft keys:\n"
	"GPU name, SM count, driver version. Every mismatch is listed.\n"
	"\n"
	"Model (kplan plan --for): a plan pinned to a model is compared with --model\n"
	"ID, the identity the application passes to libkplanrt (kp_rt_options.model,\n"
	"KPLAN_RT_MODEL); another identity is a hard mismatch (key 'for'). Without\n"
	"--model a pinned plan gets a note; a plan not pinned ignores --model.\n"
	"\n"
	"Signatures (kplan sign): with --trust, the plan must be signed by one of the\n"
	"given public keys, over the plan and every source it references (it says\n"
	"'signed by ID, signature ok', or fails naming the file: a missing .sig, a\n"
	"bad signature, an untrusted key, a changed source). Without --trust it says\n"
	"whether the plan is unsigned or signed (not verified). Signed or not, a\n"
	"fused source (kpfuse-*.cu) the plan names that is missing or changed since\n"
	"the plan was written is an error (exit 2, naming the file).\n"
	"\n"
	"Bundles (kplan bundle): the one signature must hold over every entry and\n"
	"source, kplan.torch's torch fusion groups included; then it says which\n"
	"entry applies on the GPU and why (the order:\n"
	"hard keys must match, then the same GPU name and SM count, the same name,\n"
	"the same SM count, hard keys only; among equals the one made with the GPU's\n"
	"driver, then the first), lists why each other entry does not apply or was\n"
	"not chosen, the chosen entry's mismatches as for a plan, and its torch\n"
	"fusion groups. Exit status as for a plan: 2 when no entry applies.\n"
	"\n"
	"options:\n"
	"  --trust KEY.pub   a trusted public key (kplan keygen); repeatable, or a\n"
	"                    colon-separated list as in KPLAN_RT_TRUST\n"
	"  --model ID        the model identity the application runs (see above)\n"
	"  --device N        which local GPU to compare with (default 0)\n"
	"  --gpu-name S      GPU name, e.g. 'NVIDIA H200'\n"
	"  --cc M.m          compute capability, e.g. 9.0\n"
	"  --sms N           multiprocessor count\n"
	"  --driver V        driver version as cuDriverGetVersion() gives it, e.g. 13000\n"
	"  --cuda-major N    CUDA major version (default: driver version / 1000)\n"
	"\n"
	"exit status:\n"
	"  0  the plan applies\n"
	"  1  the plan applies, with soft mismatches (each listed)\n"
	"  2  the plan does not apply (reasons listed), the file is invalid, a fused\n"
	"     source is missing or changed, its signature does not verify against a\n"
	"     --trust key, or no GPU was found and none was described\n"
	"\n"
	"examples:\n"
	"  kplan check model.kplan\n"
	"  kplan check model.kplan --cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200'\n"
	"  kplan check model.kplan --trust release.key.pub\n"
	"  kplan check model.kplanb --cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' --sms 132\n"
	"  kplan check model.kplan --model 'gpt2-124M@sha256:...'\n";

static int num(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/*
 * Say who signed the plan at path (bytes buf[0..len), parsed as p): with
 * trusted keys verify, else only report. Either way a fused source that is
 * missing or changed since the plan was written is an error. 0, or
 * KP_EXIT_ERROR (printed).
 */
static int check_signature(const char *path, const char *buf, size_t len,
			   const struct kp_plan *p, const struct kp_sign_key *keys,
			   size_t n_keys)
{
	struct kp_strbuf msg = KP_STRBUF_INIT;
	struct kp_err err = {0};
	char id[KP_SIGN_ID_HEX];
	int rc;

	if (n_keys) {
		if (kp_plan_verify(path, buf, len, p, keys, n_keys, id, NULL, NULL, &err))
			return kp_cli_error(&err);
		printf("%s: signed by %s, signature ok\n", path, id);
		return 0;
	}
	/* signed or not, every fused source must be there as the plan pins it */
	rc = kp_plan_sign_message(path, buf, len, p, &msg, &err);
	kp_strbuf_release(&msg);
	if (rc)
		return kp_cli_error(&err);
	rc = kp_plan_sig_read(path, id, &err);
	if (rc == KP_ENOTFOUND)
		printf("%s: unsigned\n", path);
	else if (rc)
		printf("%s: signature unreadable (%s)\n", path, err.msg);
	else
		printf("%s: signed by %s (not verified: no --trust key)\n", path, id);
	return 0;
}

/* The items of rep, one line each. */
static void print_report(const struct kp_plan_report *rep)
{
	size_t k;

	for (k = 0; k < rep->n_items; k++) {
		char msg[2048];

		/* the plan's strings (model, GPU name) are in the messages */
		printf("  %s %s: %s\n", rep->items[k].severity == KP_PLAN_NOT_APPLICABLE ? "hard" :
		       rep->items[k].severity == KP_PLAN_SOFT_MISMATCH ? "soft" : "note",
		       rep->items[k].key, kp_printable(msg, sizeof(msg), rep->items[k].msg));
	}
}

/*
 * `kplan check BUNDLE`: its signature over every entry (as check_signature
 * for a plan), then which entry applies on gpu (described or this
 * machine's, named gpu_name) and why the others do not.
 */
static int check_bundle(const char *path, const struct kp_gpu_desc *gpu, const char *gpu_name,
			const struct kp_sign_key *keys, size_t n_keys)
{
	struct kp_strbuf msg = KP_STRBUF_INIT;
	struct kp_bundle_choice c;
	struct kp_plan_report rep;
	struct kp_err err = {0};
	struct kp_bundle *b;
	char id[KP_SIGN_ID_HEX], t[256], why[1024];
	char *buf = NULL;
	size_t len, i;
	int rc, verdict;

	b = kp_bundle_load(path, &buf, &len, &err);
	if (!b)
		return kp_cli_error(&err);
	if (n_keys) {
		rc = kp_bundle_verify(b, buf, len, keys, n_keys, id, NULL, NULL, &err);
		if (!rc)
			printf("%s: signed by %s, signature ok (all %zu entries)\n", b->path, id,
			       b->n_entries);
	} else {
		/* signed or not, every fused source must be there as the entries pin it */
		rc = kp_bundle_sign_message(b, buf, len, &msg, &err);
		if (!rc) {
			int sr = kp_bundle_sig_read(b, id, &err);

			if (sr == KP_ENOTFOUND)
				printf("%s: unsigned\n", b->path);
			else if (sr)
				printf("%s: signature unreadable (%s)\n", b->path, err.msg);
			else
				printf("%s: signed by %s (not verified: no --trust key)\n", b->path, id);
		}
	}
	free(buf);
	kp_strbuf_release(&msg);
	if (rc) {
		kp_bundle_free(b);
		return kp_cli_error(&err);
	}
	kp_bundle_choose(b, gpu, &c);
	if (c.entry < 0) {
		printf("%s: no entry applies on %s\n", path, gpu_name);
	} else {
		kp_bundle_entry_name(b, (size_t)c.entry, t, sizeof(t));
		printf("%s: entry %s applies on %s: %s\n", path, kp_printable(why, sizeof(why), t),
		       gpu_name, c.v[c.entry].why);
	}
	for (i = 0; i < b->n_entries; i++) {
		if ((int)i == c.entry)
			continue;
		kp_bundle_entry_name(b, i, t, sizeof(t));
		printf("  %s: %s", kp_printable(why, sizeof(why), t),
		       c.v[i].match == KP_BUNDLE_M_NONE ? "does not apply: " : "applies, not chosen: ");
		printf("%s%s\n", kp_printable(why, sizeof(why), c.v[i].why),
		       c.v[i].match == KP_BUNDLE_M_NONE ? "" :
		       c.v[i].match > c.match ? " (the chosen entry matches better)" :
		       " (the chosen entry matches as well and comes first or has the GPU's driver)");
	}
	if (c.entry < 0) {
		kp_bundle_free(b);
		return KP_EXIT_ERROR;
	}
	verdict = kp_plan_check(b->entries[c.entry].plan, gpu, &rep);
	if (rep.n_items)
		printf("entry #%d on %s:\n", c.entry + 1, gpu_name);
	print_report(&rep);
	/* the chosen entry's torch fusion groups (sources checked above) */
	kp_strbuf_reset(&msg);
	kp_bundle_aten_path(b, (size_t)c.entry, &msg);
	rc = msg.oom ? KP_EXIT_ERROR :
	     kp_cli_show_aten_groups(msg.buf, b->entries[c.entry].plan->body_hash, 0);
	kp_strbuf_release(&msg);
	kp_bundle_free(b);
	if (rc)
		return rc;
	return verdict == KP_PLAN_APPLIES ? KP_EXIT_OK : KP_EXIT_VERDICT;
}

KP_CMD(check)
{
	struct kp_sign_key keys[KP_SIGN_MAX_TRUST];
	struct kp_strbuf trust = KP_STRBUF_INIT;
	const char *trust_arg[KP_SIGN_MAX_TRUST];
	size_t n_keys = 0, n_trust = 0, len = 0;
	char *buf = NULL;
	struct kp_err err = {0};
	struct kp_gpu_desc gpu;
	struct kp_plan_report rep;
	struct kp_plan *p;
	const char *path = NULL, *model = NULL;
	char name[256];
	int described = 0, device = 0, i, verdict;
	size_t k;

	kp_gpu_desc_init(&gpu);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char tail;

		if (a[0] != '-' || !a[1]) {
			if (path)
				return kp_cli_usage("check", "unexpected argument '%s'", a);
			path = a;
			continue;
		}
		if (!v)
			return kp_cli_usage("check", "%s needs a value", a);
		i++;
		if (!strcmp(a, "--trust")) {
			if (n_trust == KP_SIGN_MAX_TRUST)
				return kp_cli_usage("check", "at most %d --trust options",
						    KP_SIGN_MAX_TRUST);
			trust_arg[n_trust++] = v;
			continue;
		}
		if (!strcmp(a, "--model")) {
			if (!*v)
				return kp_cli_usage("check", "--model needs a model identity");
			model = v;
			continue;
		}
		if (!strcmp(a, "--device")) {
			if (num(v, 0, 1024, &device))
				return kp_cli_usage("check", "--device needs a GPU ordinal");
			continue;
		}
		described = 1;
		if (!strcmp(a, "--gpu-name")) {
			gpu.name = v;
		} else if (!strcmp(a, "--cc")) {
			if (sscanf(v, "%d.%d%c", &gpu.cc_major, &gpu.cc_minor, &tail) != 2 ||
			    gpu.cc_major < 1 || gpu.cc_minor < 0)
				return kp_cli_usage("check", "--cc needs MAJOR.MINOR, e.g. 9.0");
		} else if (!strcmp(a, "--sms")) {
			if (num(v, 1, 100000, &gpu.sm_count))
				return kp_cli_usage("check", "--sms needs a positive count");
		} else if (!strcmp(a, "--driver")) {
			if (num(v, 1, 10000000, &gpu.driver_version))
				return kp_cli_usage("check", "--driver needs a version like 13000");
		} else if (!strcmp(a, "--cuda-major")) {
			if (num(v, 1, 99, &gpu.cuda_major))
				return kp_cli_usage("check", "--cuda-major needs 1..99");
		} else {
			return kp_cli_usage("check", "unknown option '%s'", a);
		}
	}
	if (!path)
		return kp_cli_usage("check", "expected a plan file");
	for (k = 0; k < n_trust; k++)
		kp_strbuf_addf(&trust, "%s%s", k ? ":" : "", trust_arg[k]);
	if (n_trust && kp_sign_load_trust(trust.buf, keys, &n_keys, &err)) {
		kp_strbuf_release(&trust);
		return kp_cli_error(&err);
	}
	kp_strbuf_release(&trust);
	if (kp_bundle_is(path)) {
		if (!described && kp_gpuinfo_local(device, &gpu, name, sizeof(name), &err)) {
			fprintf(stderr, "kplan: error: %s: cannot check against this machine: %s; "
				"describe the target GPU with --cc M.m --cuda-major N [--gpu-name S "
				"--sms N --driver V]\n", path, err.msg);
			return KP_EXIT_ERROR;
		}
		gpu.model = model;
		return check_bundle(path, &gpu, described ? "the described GPU" : gpu.name, keys,
				    n_keys);
	}
	if (kp_plan_read(path, &buf, &len, &err))
		return kp_cli_error(&err);
	p = kp_plan_parse(buf, len, path, &err);
	if (!p) {
		free(buf);
		return kp_cli_error(&err);
	}
	if (!described && kp_gpuinfo_local(device, &gpu, name, sizeof(name), &err)) {
		kp_err_prefix(&err, "%s: cannot check against this machine", path);
		kp_plan_free(p);
		free(buf);
		fprintf(stderr, "kplan: error: %s; describe the target GPU with --cc M.m "
			"--cuda-major N [--gpu-name S --sms N --driver V]\n", err.msg);
		return KP_EXIT_ERROR;
	}
	if (check_signature(path, buf, len, p, keys, n_keys)) {
		free(buf);
		kp_plan_free(p);
		return KP_EXIT_ERROR;
	}
	free(buf);
	gpu.model = model;
	verdict = kp_plan_check(p, &gpu, &rep);
	printf("%s: %s on %s\n", path,
	       verdict == KP_PLAN_APPLIES ? "applies" :
	       verdict == KP_PLAN_SOFT_MISMATCH ? "applies, with soft mismatches" : "does not apply",
	       described ? "the described GPU" : gpu.name);
	print_report(&rep);
	kp_plan_free(p);
	return verdict == KP_PLAN_APPLIES ? KP_EXIT_OK :
	       verdict == KP_PLAN_SOFT_MISMATCH ? KP_EXIT_VERDICT : KP_EXIT_ERROR;
}
