/*
 * cmd_sign.c - `kplan keygen -o KEY` and `kplan sign model.kplan --key KEY`:
 * Ed25519 signatures of shipped plans (plan/sign.h; verified by
 * `kplan check --trust` and by libkplanrt with KPLAN_RT_TRUST).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#include "../plan/bundle.h"
#include "../plan/sign.h"

const char kp_usage_keygen[] =
	"usage: kplan keygen -o KEY\n"
	"\n"
	"Makes an Ed25519 key pair for signing plans: the secret key in KEY (mode\n"
	"0600, one line 'kplan-ed25519-secret <hex>') and the public key in KEY.pub\n"
	"('kplan-ed25519-public <hex>'), which ships with the application (kplan\n"
	"check --trust, KPLAN_RT_TRUST). Neither file may exist already. Prints the\n"
	"key id (16 hex digits) that signatures name.\n"
	"\n"
	"exit status:\n"
	"  0  written\n"
	"  2  a file exists or cannot be written\n"
	"\n"
	"example:\n"
	"  kplan keygen -o ~/.kplan/release.key\n";

const char kp_usage_sign[] =
	"usage: kplan sign model.kplan --key KEY\n"
	"       kplan sign model.kplanb --key KEY\n"
	"\n"
	"Signs the plan with the secret key KEY (kplan keygen) and writes the detached\n"
	"signature model.kplan.sig ('kplan-ed25519-signature <key id> <hex>'). The\n"
	"signature covers the plan's bytes and the content (SHA-256) of every fused\n"
	"source the plan references, next to it: editing either breaks it. Each source\n"
	"must still hash to the plan's source-hash. Torch fusion groups saved beside\n"
	"the plan (model.kplan.aten, kplan.torch's save_fusion) and their sources are\n"
	"covered too: save them before signing. Ship the .sig with the plan.\n"
	"\n"
	"A bundle (kplan bundle) gets one signature, model.kplanb/bundle.sig, over\n"
	"its index, every entry's plan and every source they reference, each entry's\n"
	"torch fusion groups and their sources included (kplan bundle carries them\n"
	"in): one tampered entry, group file or source makes the whole bundle\n"
	"untrusted.\n"
	"\n"
	"exit status:\n"
	"  0  signed\n"
	"  2  the plan, a source or the key is missing or invalid (named), or the key\n"
	"     is readable by group or others\n"
	"\n"
	"example:\n"
	"  kplan sign model.kplan --key ~/.kplan/release.key\n";

KP_CMD(keygen)
{
	struct kp_err err = {0};
	const char *out = NULL;
	char id[KP_SIGN_ID_HEX];
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
			if (i + 1 >= argc)
				return kp_cli_usage("keygen", "%s needs a file name", argv[i]);
			out = argv[++i];
		} else {
			return kp_cli_usage("keygen", "unexpected argument '%s'", argv[i]);
		}
	}
	if (!out)
		return kp_cli_usage("keygen", "expected -o KEY");
	if (kp_sign_keygen(out, id, &err))
		return kp_cli_error(&err);
	printf("%s: secret key (keep it private)\n%s.pub: public key, id %s\n", out, out, id);
	return KP_EXIT_OK;
}

KP_CMD(sign)
{
	struct kp_err err = {0};
	const char *plan = NULL, *key = NULL;
	char id[KP_SIGN_ID_HEX];
	int i, rc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--key")) {
			if (i + 1 >= argc)
				return kp_cli_usage("sign", "--key needs a file name");
			key = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return kp_cli_usage("sign", "unknown option '%s'", argv[i]);
		} else if (plan) {
			return kp_cli_usage("sign", "unexpected argument '%s'", argv[i]);
		} else {
			plan = argv[i];
		}
	}
	if (!plan || !key)
		return kp_cli_usage("sign", "expected a plan file and --key KEY");
	if (kp_bundle_is(plan)) {
		struct kp_strbuf index = KP_STRBUF_INIT;

		kp_bundle_index_path(plan, &index);
		rc = kp_bundle_sign(plan, key, id, &err);
		if (!rc)
			printf("%s.sig: signed by %s\n", index.buf, id);
		kp_strbuf_release(&index);
		return rc ? kp_cli_error(&err) : KP_EXIT_OK;
	}
	if (kp_plan_sign(plan, key, id, &err))
		return kp_cli_error(&err);
	printf("%s.sig: signed by %s\n", plan, id);
	return KP_EXIT_OK;
}
