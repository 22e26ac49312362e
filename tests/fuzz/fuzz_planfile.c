/*
 * fuzz_planfile.c - libFuzzer harness for the plan reader (kp_plan_parse).
 *
 * Each input is tried twice:
 *   1. as the whole file, exactly as a user could hand it to the runtime;
 *   2. as a plan body behind a generated, valid header (right body-bytes
 *      and body-hash), so that mutations reach the field parser instead of
 *      stopping at the checksum.
 * When a plan parses, it must write back (kp_plan_write refuses nothing the
 * reader accepts), the written text must parse again, and writing that
 * second plan must give the same bytes (write(parse(write(p))) ==
 * write(p)): the reader and the writer agree on every field.
 */
#include "fuzz_util.h"

#include "common/hash.h"
#include "common/strbuf.h"
#include "plan/planfile.h"

static void roundtrip(const char *buf, size_t len)
{
	struct kp_err err = {0};
	struct kp_strbuf w1 = KP_STRBUF_INIT, w2 = KP_STRBUF_INIT;
	struct kp_plan *p1, *p2;
	int rc;

	p1 = kp_plan_parse(buf, len, "fuzz.kplan", &err);
	if (!p1) {
		FZ_CHECK(err.code < 0 && err.msg[0], "parse failed without an error message");
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "rejected: %s\n", err.msg);
		return;
	}
	(void)kp_plan_find(p1, "step");
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "parsed: %zu regions, %zu fusions\n", p1->n_regions, p1->n_fusions);
	rc = kp_plan_write(p1, &w1, &err);
	FZ_CHECK(rc == 0, "a plan the reader accepted does not write back: %s", err.msg);
	p2 = kp_plan_parse(w1.buf, w1.len, "rewritten.kplan", &err);
	FZ_CHECK(p2 != NULL, "written plan does not parse: %s", err.msg);
	FZ_CHECK(p2->n_regions == p1->n_regions && p2->n_fusions == p1->n_fusions,
		 "region/fusion counts changed on rewrite");
	rc = kp_plan_write(p2, &w2, &err);
	FZ_CHECK(rc == 0, "re-parsed plan does not write: %s", err.msg);
	FZ_CHECK(w1.len == w2.len && !memcmp(w1.buf, w2.buf, w1.len),
		 "write(parse(write(p))) differs from write(p)");
	kp_plan_free(p2);
	kp_plan_free(p1);
	kp_strbuf_release(&w1);
	kp_strbuf_release(&w2);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	kp_log_set_level(KP_LOG_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	const char *body = (const char *)data;
	size_t blen = size;

	/* 1: the raw bytes (copied, so reads past the end are caught) */
	{
		char *copy = fz_copy(data, size);

		if (!copy)
			return 0;
		roundtrip(copy, size);
		free(copy);
	}
	/* 2: the bytes as a body behind a valid header; a whole plan file as
	 * input contributes its body */
	if (size > 11 && !memcmp(data, KP_PLAN_MAGIC " ", 11)) {
		int nl = 0;

		while (blen && nl < 3) {
			if (*body == '\n')
				nl++;
			body++;
			blen--;
		}
	}
	if (!blen)
		return 0;
	/* version 3 is the pinned plan's: a body with a 'for' line gets it */
	kp_strbuf_addf(&sb, KP_PLAN_MAGIC " %d\nbody-bytes %zu\nbody-hash %016llx\n",
		       memmem(body, blen, "\nfor ", 5) ? 3 : KP_PLAN_FORMAT_BASE, blen,
		       (unsigned long long)kp_hash64(body, blen, KP_HASH_SEED));
	kp_strbuf_add(&sb, body, blen);
	if (!sb.oom)
		roundtrip(sb.buf, sb.len);
	kp_strbuf_release(&sb);
	return 0;
}
