/*
 * fuzz_sig.c - libFuzzer harness for the signature and public key file
 * parsers (kp_plan_sig_parse, kp_sign_parse_public; plan/sign.h).
 *
 * Each input is handed to both parsers, first from a buffer of exactly its
 * size (reads past the end are caught), then as a file through the readers
 * libkplanrt and `kplan check --trust` use (kp_plan_sig_read,
 * kp_sign_load_public): the file readers must agree with the buffer
 * parsers. What a parser accepts must survive a round trip: the canonical
 * line rebuilt from the parsed key id / key / signature parses to the same
 * bytes.
 */
#include "fuzz_util.h"

#include <sodium.h>

#include "plan/sign.h"

static void check_sig(const char *buf, size_t len)
{
	struct kp_err err = {0}, ferr = {0};
	char id[KP_SIGN_ID_HEX], id2[KP_SIGN_ID_HEX], fid[KP_SIGN_ID_HEX];
	uint8_t sig[KP_SIGN_BYTES], sig2[KP_SIGN_BYTES];
	char hex[2 * KP_SIGN_BYTES + 1], line[256];
	int rc, frc, n;

	rc = kp_plan_sig_parse(buf, len, "fuzz.kplan.sig", id, sig, &err);
	fz_write("p.kplan.sig", (const uint8_t *)buf, len);
	frc = kp_plan_sig_read(fz_path("p.kplan"), fid, &ferr);
	FZ_CHECK(rc == frc, "buffer parser says %d, file reader %d (%s)", rc, frc, ferr.msg);
	if (rc) {
		FZ_CHECK(rc == KP_EFORMAT && err.msg[0], "rejected without KP_EFORMAT and a message");
		return;
	}
	FZ_CHECK(!strcmp(id, fid), "file reader reads another key id");
	FZ_CHECK(strlen(id) == 16 && strspn(id, "0123456789abcdef") == 16, "bad key id '%s'", id);
	sodium_bin2hex(hex, sizeof(hex), sig, sizeof(sig));
	n = snprintf(line, sizeof(line), "kplan-ed25519-signature %s %s\n", id, hex);
	FZ_CHECK(n > 0 && (size_t)n < sizeof(line), "line overflow");
	rc = kp_plan_sig_parse(line, (size_t)n, "rebuilt.sig", id2, sig2, &err);
	FZ_CHECK(rc == 0, "rebuilt signature line does not parse: %s", err.msg);
	FZ_CHECK(!strcmp(id, id2) && !memcmp(sig, sig2, sizeof(sig)),
		 "rebuilt signature line parses differently");
}

static void check_pub(const char *buf, size_t len)
{
	struct kp_err err = {0}, ferr = {0};
	struct kp_sign_key key, key2, fkey;
	char hex[2 * KP_SIGN_PUBLIC_BYTES + 1], line[128];
	int rc, frc, n;

	rc = kp_sign_parse_public(buf, len, "fuzz.pub", &key, &err);
	frc = kp_sign_load_public(fz_write("k.pub", (const uint8_t *)buf, len), &fkey, &ferr);
	FZ_CHECK(rc == frc, "buffer parser says %d, file reader %d (%s)", rc, frc, ferr.msg);
	if (rc) {
		FZ_CHECK(rc == KP_EFORMAT && err.msg[0], "rejected without KP_EFORMAT and a message");
		return;
	}
	FZ_CHECK(!memcmp(key.pk, fkey.pk, sizeof(key.pk)) && !strcmp(key.id, fkey.id),
		 "file reader reads another key");
	sodium_bin2hex(hex, sizeof(hex), key.pk, sizeof(key.pk));
	n = snprintf(line, sizeof(line), "kplan-ed25519-public %s\n", hex);
	FZ_CHECK(n > 0 && (size_t)n < sizeof(line), "line overflow");
	rc = kp_sign_parse_public(line, (size_t)n, "rebuilt.pub", &key2, &err);
	FZ_CHECK(rc == 0, "rebuilt public key line does not parse: %s", err.msg);
	FZ_CHECK(!memcmp(key.pk, key2.pk, sizeof(key.pk)) && !strcmp(key.id, key2.id),
		 "rebuilt public key line parses differently");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct kp_err err = {0};

	(void)argc;
	(void)argv;
	kp_log_set_level(KP_LOG_ERROR);
	if (kp_sign_init(&err))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = fz_copy(data, size);

	if (!copy)
		return 0;
	check_sig(copy, size);
	check_pub(copy, size);
	free(copy);
	return 0;
}
