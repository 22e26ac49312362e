/*
 * test_plan.c - plan/: the plan file reader, writer and check (bad input of
 * every kind, v1 plans, mutations), and the CLI verbs that read a plan
 * (kplan show, kplan check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CUnit/CUnit.h>

#include "common/hash.h"
#include "common/strbuf.h"
#include "plan/planfile.h"
#include "plan/sign.h"
#include "testutil.h"

/* ---------------------------------------------------------------------- */
/* a plan built in code */

static struct kp_plan *sample_plan(void)
{
	struct kp_plan *p = kp_plan_new();
	struct kp_plan_region *r;

	p->cc_major = 9;
	p->cc_minor = 0;
	p->cuda_major = 13;
	p->gpu_name = strdup("NVIDIA H200");
	p->sm_count = 132;
	p->driver_version = 13000;
	p->tool_version = strdup("0.1.0");
	p->source_run = 3;
	p->source_kind = strdup("chrome");
	p->date = strdup("2026-01-02T03:04:05Z");
	p->run_eager_ns = 22500000;
	p->run_pred_ns = 9100000;
	p->speedup_pred = 2.4725;
	p->mem_budget_bytes = 1 << 20;
	p->args_checked = 1;
	p->n_regions = 3;
	p->regions = calloc(3, sizeof(*p->regions));
	/* written out of order: the writer sorts by label */
	r = &p->regions[0];
	r->label = strdup("step");
	r->decision = KP_PLAN_GRAPH;
	r->reason = KP_PLAN_R_LAUNCH_BOUND;
	r->reason_text = strdup("host-bound idle 78% of 2.250 ms");
	r->fingerprint = 0x9a3c55e01b2f7d44ULL;
	r->kernels = 61;
	r->nodes = 64;
	r->occurrences = 10;
	r->shape_keys = 2;
	r->n_shapes = 2;
	r->shapes = calloc(2, sizeof(*r->shapes));
	r->shapes[0] = 0x9a3c55e01b2f7d44ULL;
	r->shapes[1] = 0x1234;
	r->warmup = 2;
	r->break_even = 1;
	r->eager_ns = 2250000;
	r->graph_ns = 474000;
	r->one_time_ns = 60000;
	r->speedup_pred = 4.7468;
	r->mem_budget_bytes = 1 << 20;
	r->n_patches = 2;
	r->patches = calloc(2, sizeof(*r->patches));
	r->patches[0] = (struct kp_plan_patch){ 7, 1, 8, 8, 1 };   /* a seed passed by value */
	r->patches[1] = (struct kp_plan_patch){ 0, 0, 0, 8, 0 };
	r = &p->regions[1];
	r->label = strdup("load");
	r->decision = KP_PLAN_SPLIT;
	r->reason = KP_PLAN_R_BLOCKER;
	r->reason_text = strdup("split into 1 parts at: sync x1 (cudaStreamSynchronize)");
	r->kernels = 5;
	r->nodes = 5;
	r->occurrences = 10;
	r->shape_keys = 1;
	r = &p->regions[2];
	r->label = strdup("load/a 50% ]");
	r->parent = strdup("load");
	r->decision = KP_PLAN_EAGER;
	r->reason = KP_PLAN_R_TOO_FEW_REPLAYS;
	r->reason_text = strdup("");
	r->kernels = 3;
	r->nodes = 3;
	r->occurrences = 3;
	r->shape_keys = 2;
	p->n_fusions = 2;
	p->fusions = calloc(2, sizeof(*p->fusions));
	/* numerics not set (zeroed): written exact */
	p->fusions[0].id = 4;
	p->fusions[0].region = strdup("step");
	p->fusions[0].first_kernel = 3;
	p->fusions[0].kernels = 2;
	p->fusions[0].names = strdup("add -> relu");
	p->fusions[0].gain_ns = 3000;
	p->fusions[0].score = 0.75;
	p->fusions[1].id = 9;
	p->fusions[1].region = strdup("step");
	p->fusions[1].first_kernel = 10;
	p->fusions[1].kernels = 2;
	p->fusions[1].names = strdup("residual -> layernorm");
	p->fusions[1].gain_ns = 500;
	p->fusions[1].score = 0.5;
	p->fusions[1].exact = 0;
	p->fusions[1].tolerance = 1e-5;
	return p;
}

static char *sample_text(size_t *len)
{
	struct kp_plan *p = sample_plan();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};

	if (kp_plan_write(p, &sb, &err))
		fprintf(stderr, "write: %s\n", err.msg);
	kp_plan_free(p);
	return kp_strbuf_detach(&sb, len);
}

/* Body of a plan file text (after the 3 header lines). */
static const char *body_of(const char *text)
{
	const char *p = text;
	int i;

	for (i = 0; i < 3 && p; i++) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return p;
}

/* A well-formed header of format version v around body. */
static char *wrap_v(int v, const char *body)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;

	kp_strbuf_addf(&sb, "kplan-plan %d\nbody-bytes %zu\nbody-hash %016llx\n%s", v, strlen(body),
		       (unsigned long long)kp_hash64(body, strlen(body), KP_HASH_SEED), body);
	return kp_strbuf_detach(&sb, NULL);
}

/* The same for the version the writer writes for an unpinned plan (so only
 * the body's content is tested). */
static char *wrap(const char *body)
{
	return wrap_v(KP_PLAN_FORMAT_BASE, body);
}

/* sample body with the first `from` replaced by `to`, rewrapped with a valid checksum */
static char *edited(const char *from, const char *to)
{
	char *text = sample_text(NULL), *out;
	const char *body = body_of(text), *at = strstr(body, from);
	struct kp_strbuf sb = KP_STRBUF_INIT;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	kp_strbuf_add(&sb, body, (size_t)(at - body));
	kp_strbuf_adds(&sb, to);
	kp_strbuf_adds(&sb, at + strlen(from));
	out = wrap(sb.buf);
	kp_strbuf_release(&sb);
	free(text);
	return out;
}

/* parse must fail with code, and the message must hold every one of the words */
static void expect_bad(const char *text, size_t len, int code, const char *w1, const char *w2)
{
	struct kp_err err = {0};
	struct kp_plan *p = kp_plan_parse(text, len, "model.kplan", &err);

	CU_ASSERT_PTR_NULL(p);
	kp_plan_free(p);
	CU_ASSERT_EQUAL(err.code, code);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "model.kplan"));
	if (w1 && !strstr(err.msg, w1))
		fprintf(stderr, "\nmissing '%s' in: %s\n", w1, err.msg);
	CU_ASSERT(!w1 || strstr(err.msg, w1));
	if (w2 && !strstr(err.msg, w2))
		fprintf(stderr, "\nmissing '%s' in: %s\n", w2, err.msg);
	CU_ASSERT(!w2 || strstr(err.msg, w2));
}

static void expect_bad_body(const char *from, const char *to, const char *w1, const char *w2)
{
	char *t = edited(from, to);

	expect_bad(t, strlen(t), KP_EFORMAT, w1, w2);
	free(t);
}

/* ---------------------------------------------------------------------- */
/* reader / writer */

static void test_roundtrip(void)
{
	struct kp_err err = {0};
	struct kp_strbuf again = KP_STRBUF_INIT;
	size_t len;
	char *text = sample_text(&len);
	struct kp_plan *p = kp_plan_parse(text, len, "model.kplan", &err);
	const struct kp_plan_region *r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->cc_major, 9);
	CU_ASSERT_EQUAL(p->cuda_major, 13);
	CU_ASSERT_STRING_EQUAL(p->gpu_name, "NVIDIA H200");
	CU_ASSERT_EQUAL(p->driver_version, 13000);
	CU_ASSERT_EQUAL(p->n_regions, 3);
	/* sorted by label */
	CU_ASSERT_STRING_EQUAL(p->regions[0].label, "load");
	CU_ASSERT_STRING_EQUAL(p->regions[1].label, "load/a 50% ]");
	CU_ASSERT_STRING_EQUAL(p->regions[1].parent, "load");
	CU_ASSERT_STRING_EQUAL(p->regions[1].reason_text, "");
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_PTR_NULL(kp_plan_find(p, "nope"));
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(r->fingerprint, 0x9a3c55e01b2f7d44ULL);
	CU_ASSERT_EQUAL(r->nodes, 64);
	CU_ASSERT_EQUAL_FATAL(r->n_shapes, 2);
	CU_ASSERT_EQUAL(r->shapes[0], 0x1234);      /* sorted */
	CU_ASSERT_EQUAL(r->n_patches, 2);
	CU_ASSERT_EQUAL(r->patches[0].kernel, 0);   /* sorted */
	CU_ASSERT_EQUAL(r->patches[1].kernel, 7);
	CU_ASSERT_EQUAL(r->patches[1].offset, 8);
	CU_ASSERT_EQUAL(r->patches[0].scalar, 0);
	CU_ASSERT_EQUAL(r->patches[1].scalar, 1);
	CU_ASSERT_DOUBLE_EQUAL(r->speedup_pred, 4.7468, 1e-9);
	CU_ASSERT_EQUAL(p->format_version, 2);
	CU_ASSERT_EQUAL(p->args_checked, 1);
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 2);
	CU_ASSERT_PTR_NULL(p->fusions[0].source);
	CU_ASSERT_STRING_EQUAL(p->fusions[0].names, "add -> relu");
	/* numerics: the zeroed group is exact, the other keeps its tolerance */
	CU_ASSERT_EQUAL(p->fusions[0].exact, 1);
	CU_ASSERT_EQUAL(p->fusions[0].tolerance, 0);
	CU_ASSERT_EQUAL(p->fusions[1].exact, 0);
	CU_ASSERT_EQUAL(p->fusions[1].tolerance, 1e-5);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "kplan-plan 2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nargs-checked 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\npatch 0 0 0 8 pointer\npatch 7 1 8 8 scalar\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "source-hash 0000000000000000\nnumerics exact\n\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nnumerics tolerant\ntolerance 1e-05\n"));
	/* escaping is visible and reversible */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "[region load/a 50%25 %5D]\n"));
	/* writing the parsed plan gives the same bytes */
	CU_ASSERT_EQUAL(kp_plan_write(p, &again, &err), 0);
	CU_ASSERT_EQUAL(again.len, len);
	CU_ASSERT(again.len == len && !memcmp(again.buf, text, len));
	kp_strbuf_release(&again);
	kp_plan_free(p);
	free(text);
}

static void test_load_file(void)
{
	struct kp_err err = {0};
	size_t len;
	char *text = sample_text(&len);
	const char *path = kp_test_path("load.kplan");
	struct kp_plan *p;

	kp_test_write(path, text, (long)len);
	p = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL(p);
	kp_plan_free(p);
	/* a file over the limit is refused whole, not read to the end */
	CU_ASSERT_EQUAL(kp_test_sh("head -c 17000000 /dev/zero > '%s'", kp_test_path("big.kplan")), 0);
	CU_ASSERT_PTR_NULL(kp_plan_load(kp_test_path("big.kplan"), &err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "larger than"));
	CU_ASSERT_PTR_NULL(kp_plan_load(kp_test_path("missing.kplan"), &err));
	CU_ASSERT_EQUAL(err.code, KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "missing.kplan"));
	free(text);
}

static void test_truncated(void)
{
	size_t len, n;
	char *text = sample_text(&len);

	/* every proper prefix is rejected, never accepted, never a crash */
	for (n = 0; n < len; n++) {
		struct kp_err err = {0};
		struct kp_plan *p = kp_plan_parse(text, n, "model.kplan", &err);

		CU_ASSERT_PTR_NULL(p);
		kp_plan_free(p);
		CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
	}
	expect_bad(text, len - 10, KP_EFORMAT, "truncated", NULL);
	expect_bad(text, 20, KP_EFORMAT, "truncated", "body-bytes");
	free(text);
}

static void test_flipped_byte(void)
{
	size_t len, i;
	char *text = sample_text(&len);
	int fails = 0;

	for (i = 0; i < len; i++) {
		struct kp_err err = {0};
		struct kp_plan *p;

		text[i] ^= 0x01;
		p = kp_plan_parse(text, len, "model.kplan", &err);
		fails += !p;
		kp_plan_free(p);
		text[i] ^= 0x01;
	}
	CU_ASSERT_EQUAL(fails, (int)len);
	/* a flip in the body is named as a checksum mismatch */
	text[len - 5] ^= 0x20;
	expect_bad(text, len, KP_EFORMAT, "checksum mismatch", "model.kplan:3:");
	free(text);
}

static void test_edited_body(void)
{
	size_t len;
	char *text = sample_text(&len), *at, *appended;

	/* same length, old checksum: the hand edit is caught */
	at = strstr(text, "kernels 61");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	at[9] = '2';
	expect_bad(text, len, KP_EFORMAT, "checksum mismatch", "kplan plan");
	at[9] = '1';
	/* appended lines after the body */
	appended = malloc(len + 32);
	memcpy(appended, text, len);
	memcpy(appended + len, "[region x]\n", 11);
	expect_bad(appended, len + 11, KP_EFORMAT, "after the", NULL);
	free(appended);
	free(text);
}

static void test_header(void)
{
	const char *v5 = "kplan-plan 5\nbody-bytes 5\nbody-hash 0000000000000000\nhello\n";
	char *t;

	expect_bad(v5, strlen(v5), KP_EVERSION, "unknown plan format version 5", "model.kplan:1:");
	expect_bad("kplan-plan 0\n", 13, KP_EFORMAT, "format version", NULL);
	expect_bad("kplan-plan 999999999999999999999\n", 33, KP_EFORMAT, "format version", NULL);
	expect_bad("hello world\n", 12, KP_EFORMAT, "not a kplan plan file", NULL);
	expect_bad("", 0, KP_EFORMAT, "empty", NULL);
	expect_bad("PK\x03\x04\x00\x00", 6, KP_EFORMAT, "not a kplan plan file", NULL);
	t = "kplan-plan 1\nbody-bytes 99999999999\nbody-hash 0000000000000000\n";
	expect_bad(t, strlen(t), KP_EFORMAT, "body-bytes", "model.kplan:2:");
	t = "kplan-plan 1\nbody-bytes -4\nbody-hash 0000000000000000\n";
	expect_bad(t, strlen(t), KP_EFORMAT, "body-bytes", NULL);
	t = "kplan-plan 1\nbody-bytes 4\nbody-hash 00000000000000zz\nabc\n";
	expect_bad(t, strlen(t), KP_EFORMAT, "body-hash", "model.kplan:3:");
	t = "kplan-plan 1\r\nbody-bytes 4\n";
	expect_bad(t, strlen(t), KP_EFORMAT, "carriage return", NULL);
	/* the body must parse too: an empty-ish body lacks sections */
	t = wrap("# nothing\n");
	expect_bad(t, strlen(t), KP_EFORMAT, "missing section [hard]", NULL);
	free(t);
}

static void test_missing_fields(void)
{
	expect_bad_body("warmup 2\n", "", "missing field 'warmup'", "region 'step'");
	expect_bad_body("cuda-major 13\n", "", "missing field 'cuda-major'", "[hard]");
	expect_bad_body("names add -> relu\n", "", "missing field 'names'", "fusion 4");
	expect_bad_body("[soft]\n", "", "unknown field 'gpu-name'", NULL);
	expect_bad_body("[info]\n", "[infox]\n", "expected section [info]", NULL);
	expect_bad_body("decision graph\n", "decision graph\ndecision graph\n", "given twice", NULL);
	expect_bad_body("warmup 2\n", "warm-up 2\n", "unknown field 'warm-up'", NULL);
	expect_bad_body("warmup 2\n", "warmup\n", "expected 'key value'", NULL);
	/* the line named is the one at fault */
	{
		char *t = edited("warmup 2\n", "warmup x\n");
		struct kp_err err = {0};
		const char *at = strstr(body_of(t), "warmup x");
		int line = 4;
		const char *q;
		char want[64];

		for (q = body_of(t); q < at; q++)
			line += *q == '\n';
		snprintf(want, sizeof(want), "model.kplan:%d: region 'step': field 'warmup'", line);
		CU_ASSERT_PTR_NULL(kp_plan_parse(t, strlen(t), "model.kplan", &err));
		if (!strstr(err.msg, want))
			fprintf(stderr, "\nwant '%s' in: %s\n", want, err.msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
		free(t);
	}
}

static void test_absurd_values(void)
{
	expect_bad_body("kernels 61\n", "kernels 3000000000\n", "field 'kernels'", "expected 1..1000000");
	expect_bad_body("kernels 61\n", "kernels -5\n", "field 'kernels'", "found -5");
	expect_bad_body("occurrences 10\n", "occurrences -1\n", "field 'occurrences'", NULL);
	expect_bad_body("kernels 61\n", "kernels 99999999999999999999999\n", "field 'kernels'",
			"expected an integer");
	expect_bad_body("eager-ns 2250000\n", "eager-ns 9223372036854775807\n", "field 'eager-ns'", NULL);
	expect_bad_body("\nmem-budget-bytes 1048576\n", "\nmem-budget-bytes -1048576\n",
			"field 'mem-budget-bytes'", NULL);
	expect_bad_body("compute-capability 9.0\n", "compute-capability 9.10\n",
			"field 'compute-capability'", NULL);
	expect_bad_body("compute-capability 9.0\n", "compute-capability -9.0\n",
			"field 'compute-capability'", NULL);
	expect_bad_body("speedup-pred 4.7468\n", "speedup-pred -4.7\n", "field 'speedup-pred'", NULL);
	expect_bad_body("speedup-pred 4.7468\n", "speedup-pred nan\n", "field 'speedup-pred'", NULL);
	expect_bad_body("speedup-pred 4.7468\n", "speedup-pred 1e308\n", "field 'speedup-pred'", NULL);
	expect_bad_body("fingerprint 9a3c55e01b2f7d44\n", "fingerprint 9A3C55E01B2F7D44\n",
			"field 'fingerprint'", NULL);
	expect_bad_body("decision graph\n", "decision turbo\n", "unknown value 'turbo'", NULL);
	expect_bad_body("shape-keys 1\nwarmup", "shape-keys 0\nwarmup", "field 'shape-keys'", NULL);
	/* patch slots */
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 61 1 8 8 scalar\n", "kernel index 61", "61 kernels");
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 32760 8 scalar\n", "parameter buffer", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 0 scalar\n", "parameter buffer", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 0 0 0 8 scalar\n", "not after the previous slot", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 -1 8 8 scalar\n", "four non-negative integers", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 scalar\n", "four non-negative integers", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 8 9\n", "field 'patch'", "found '9'");
	expect_bad_body("nodes 64\n", "nodes 60\n", "field 'nodes'", "less than the 61 kernels");
	/* shapes */
	expect_bad_body("shape 0000000000001234\n", "shape 9a3c55e01b2f7d44\n",
			"field 'shape'", "ascending, no duplicates");
	expect_bad_body("shape 0000000000001234\n", "shape 0000000000001234\nshape 0000000000001235\n",
			"more shape lines than shape-keys (2)", NULL);
	expect_bad_body("shape 0000000000001234\n", "shape 12\n", "field 'shape'", "16 lowercase hex");
	expect_bad_body("patch 0 0 0 8 pointer\n", "patch 0 0 0 8 pointer\nshape 0000000000001235\n",
			"field 'shape' after the patch lines", NULL);
	expect_bad_body("shape 9a3c55e01b2f7d44\n", "shape 9a3c55e01b2f7d44\nwarmup 2\n",
			"after the shape/patch lines", NULL);
	/* strings */
	expect_bad_body("gpu-name NVIDIA H200\n", "gpu-name NVIDIA%0AH200\n", "control character", NULL);
	expect_bad_body("gpu-name NVIDIA H200\n", "gpu-name NVIDIA%2\n", "cut short", NULL);
	expect_bad_body("gpu-name NVIDIA H200\n", "gpu-name NVIDIA%zzH200\n", "two hex digits", NULL);
	/* cross-field rules */
	expect_bad_body("reason launch-bound\n", "reason predicted-loss\n", "needs reason 'launch-bound'", NULL);
	expect_bad_body("parent load\n", "parent nowhere\n", "no other region is labelled 'nowhere'", NULL);
	expect_bad_body("region step\n", "region ghost\n", "no region is labelled 'ghost'", NULL);
	expect_bad_body("first-kernel 3\n", "first-kernel 60\n", "outside region 'step'", NULL);
	expect_bad_body("source -\n", "source ../../etc/passwd\n", "field 'source-hash'", NULL);
	expect_bad_body("source -\nsource-hash 0000000000000000\n",
			"source ../x.cu\nsource-hash 0000000000000001\n", "plain file name", NULL);
	expect_bad_body("[region step]", "[region load]", "not after 'load/a", "sorted");
	expect_bad_body("[fusion 4]", "[fusion 0]", "fusion id", NULL);
}

/* Format version 2's fields: bad tokens are rejected with the field named. */
static void test_v2_fields(void)
{
	/* patch kinds */
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 8 vector\n", "field 'patch'",
			"'pointer' or 'scalar'");
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 8\n", "field 'patch'",
			"pointer|scalar");
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 8 scalar \n", "field 'patch'", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 8 Scalar\n", "field 'patch'", NULL);
	expect_bad_body("patch 7 1 8 8 scalar\n", "patch 7 1 8 16 scalar\n", "field 'patch'",
			"a scalar is 1..8 bytes");
	expect_bad_body("patch 0 0 0 8 pointer\n", "patch 0 0 0 8 pointer pointer\n", "field 'patch'",
			NULL);
	/* args-checked */
	expect_bad_body("args-checked 1\n", "args-checked 2\n", "field 'args-checked'", "expected 0..1");
	expect_bad_body("args-checked 1\n", "args-checked yes\n", "field 'args-checked'", NULL);
	expect_bad_body("args-checked 1\n", "args-checked 1\nargs-checked 1\n", "given twice", NULL);
	/* numerics and tolerance */
	expect_bad_body("numerics exact\n", "numerics bitwise\n", "field 'numerics'",
			"'exact' or 'tolerant'");
	expect_bad_body("numerics exact\n", "", "missing field 'numerics'", "fusion 4");
	expect_bad_body("numerics exact\n", "numerics exact\ntolerance 1e-05\n", "field 'tolerance'",
			"only with 'numerics tolerant'");
	expect_bad_body("tolerance 1e-05\n", "", "field 'tolerance'", "missing or 0");
	expect_bad_body("tolerance 1e-05\n", "tolerance 0\n", "field 'tolerance'", "missing or 0");
	expect_bad_body("tolerance 1e-05\n", "tolerance 2\n", "field 'tolerance'", "1e-15..1");
	expect_bad_body("tolerance 1e-05\n", "tolerance 1e-16\n", "field 'tolerance'", "1e-15..1");
	expect_bad_body("tolerance 1e-05\n", "tolerance -1e-05\n", "field 'tolerance'", "like 2.5e-05");
	expect_bad_body("tolerance 1e-05\n", "tolerance nan\n", "field 'tolerance'", NULL);
	expect_bad_body("tolerance 1e-05\n", "tolerance 1e-05x\n", "field 'tolerance'", NULL);
	expect_bad_body("tolerance 1e-05\n", "tolerance 1E-05\n", "field 'tolerance'", NULL);
	expect_bad_body("tolerance 1e-05\n", "tolerance 1.e-5\n", "field 'tolerance'", NULL);
	expect_bad_body("tolerance 1e-05\n", "tolerance 1e-\n", "field 'tolerance'", NULL);
	expect_bad_body("tolerance 1e-05\n", "tolerance 1.0000000000000001e-5\n", "field 'tolerance'",
			NULL);
	/* other spellings of a valid number are read */
	{
		char *t = edited("tolerance 1e-05\n", "tolerance 0.00002500\n");
		struct kp_err err = {0};
		struct kp_plan *p = kp_plan_parse(t, strlen(t), "model.kplan", &err);

		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		CU_ASSERT_EQUAL(p->fusions[1].tolerance, 2.5e-5);
		kp_plan_free(p);
		free(t);
	}
}

/* Tolerances are written with 6 significant digits, the same text again
 * after a read. */
static void test_tolerance_text(void)
{
	static const struct { double v; const char *text; } cases[] = {
		{ 1e-5, "1e-05" }, { 2.5e-4, "2.5e-04" }, { 0.002, "2e-03" }, { 1.0, "1e+00" },
		{ 1.0 / 3.0, "3.33333e-01" }, { 9.9999996e-3, "1e-02" }, { 1e-15, "1e-15" },
		{ 0.123456789, "1.23457e-01" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kp_plan *p = sample_plan(), *q;
		struct kp_strbuf a = KP_STRBUF_INIT, b = KP_STRBUF_INIT;
		struct kp_err err = {0};
		char want[64];

		p->fusions[1].tolerance = cases[i].v;
		CU_ASSERT_EQUAL_FATAL(kp_plan_write(p, &a, &err), 0);
		snprintf(want, sizeof(want), "\ntolerance %s\n", cases[i].text);
		if (!strstr(a.buf, want))
			fprintf(stderr, "\nwant '%s' for %.17g\n", cases[i].text, cases[i].v);
		CU_ASSERT_PTR_NOT_NULL(strstr(a.buf, want));
		q = kp_plan_parse(a.buf, a.len, "t.kplan", &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(q);
		CU_ASSERT_EQUAL(kp_plan_write(q, &b, &err), 0);
		CU_ASSERT(a.len == b.len && !memcmp(a.buf, b.buf, a.len));
		kp_plan_free(p);
		kp_plan_free(q);
		kp_strbuf_release(&a);
		kp_strbuf_release(&b);
	}
}

/* The writer refuses numerics the reader would. */
/* v3: [hard] 'for' pins the plan to a model; only written when set */
static void test_model_pin(void)
{
	struct kp_err err = {0};
	struct kp_strbuf w1 = KP_STRBUF_INIT, w2 = KP_STRBUF_INIT;
	struct kp_plan *p = sample_plan(), *q;
	struct kp_gpu_desc g;
	struct kp_plan_report rep;
	size_t len;
	char *plain = sample_text(&len), *t, *body;

	/* unpinned: version 2, no 'for' line (the goldens stay as they are) */
	CU_ASSERT_PTR_NOT_NULL(strstr(plain, "kplan-plan 2\n"));
	CU_ASSERT_PTR_NULL(strstr(plain, "\nfor "));
	/* pinned: version 3, round trip byte-identical; escaping as any string */
	p->model = strdup("gpt2-124M@sha256:ab12 [v1] 50%");
	CU_ASSERT_EQUAL_FATAL(kp_plan_write(p, &w1, &err), 0);
	CU_ASSERT(!strncmp(w1.buf, "kplan-plan 3\n", 13));
	CU_ASSERT_PTR_NOT_NULL(strstr(w1.buf, "\ncuda-major 13\nfor gpt2-124M@sha256:ab12 [v1%5D 50%25\n"));
	q = kp_plan_parse(w1.buf, w1.len, "model.kplan", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_EQUAL(q->format_version, 3);
	CU_ASSERT_STRING_EQUAL(q->model, "gpt2-124M@sha256:ab12 [v1] 50%");
	CU_ASSERT_EQUAL(kp_plan_write(q, &w2, &err), 0);
	CU_ASSERT(w1.len == w2.len && !memcmp(w1.buf, w2.buf, w1.len));
	/* the rest of the file is the unpinned plan's */
	CU_ASSERT_EQUAL(w1.len, len + strlen("for gpt2-124M@sha256:ab12 [v1%5D 50%25\n"));
	kp_plan_free(q);
	/* 'for' in a version 1 or 2 file is an unknown field */
	body = (char *)body_of(w1.buf);
	t = wrap_v(2, body);
	expect_bad(t, strlen(t), KP_EFORMAT, "unknown field 'for'", "version 3");
	free(t);
	t = wrap_v(1, body);
	expect_bad(t, strlen(t), KP_EFORMAT, "unknown field", NULL);
	free(t);
	/* a version 3 file without 'for' (or with '-'): refused, so that a
	 * flipped version digit is caught */
	t = wrap_v(3, body_of(plain));
	expect_bad(t, strlen(t), KP_EFORMAT, "'for'", "version 3");
	free(t);
	{
		struct kp_strbuf sb = KP_STRBUF_INIT;
		const char *b = body_of(plain), *at = strstr(b, "cuda-major 13\n");

		CU_ASSERT_PTR_NOT_NULL_FATAL(at);
		kp_strbuf_add(&sb, b, (size_t)(at - b));
		kp_strbuf_adds(&sb, "cuda-major 13\nfor -\n");
		kp_strbuf_adds(&sb, at + 14);
		t = wrap_v(3, sb.buf);
		expect_bad(t, strlen(t), KP_EFORMAT, "'for'", NULL);
		free(t);
		kp_strbuf_release(&sb);
	}
	/* check: the identity is a hard key, when the application names one */
	kp_gpu_desc_init(&g);
	g.cc_major = 9;
	g.cc_minor = 0;
	g.cuda_major = 13;
	g.name = "NVIDIA H200";
	g.sm_count = 132;
	g.driver_version = 13000;
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_APPLIES);
	CU_ASSERT_EQUAL_FATAL(rep.n_items, 1);
	CU_ASSERT_STRING_EQUAL(rep.items[0].key, "for");
	CU_ASSERT_EQUAL(rep.items[0].severity, 0);
	g.model = "gpt2-124M@sha256:ab12 [v1] 50%";
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_APPLIES);
	CU_ASSERT_EQUAL(rep.n_items, 0);
	g.model = "gpt2-355M";
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_NOT_APPLICABLE);
	CU_ASSERT_EQUAL_FATAL(rep.n_items, 1);
	CU_ASSERT_STRING_EQUAL(rep.items[0].key, "for");
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.items[0].msg, "gpt2-355M"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.items[0].msg, "gpt2-124M"));
	/* a plan not pinned ignores the application's identity */
	free(p->model);
	p->model = NULL;
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_APPLIES);
	/* an empty identity is refused by the writer ('-' would read as none) */
	p->model = strdup("");
	CU_ASSERT_EQUAL(kp_plan_write(p, &w2, &err), KP_EINVAL);
	kp_plan_free(p);
	kp_strbuf_release(&w1);
	kp_strbuf_release(&w2);
	free(plain);
}

static void test_writer_numerics(void)
{
	static const double bad[] = { 2.0, -1e-5, 1e-20 };
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = sample_plan();
		p->fusions[1].tolerance = bad[i];
		CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), KP_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "field 'tolerance'"));
		kp_plan_free(p);
	}
	p = sample_plan();
	p->fusions[1].tolerance = 0.0 / 0.0;
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), KP_EINVAL);
	kp_plan_free(p);
	/* an exact group with a tolerance is a contradiction */
	p = sample_plan();
	p->fusions[0].exact = 1;
	p->fusions[0].tolerance = 1e-3;
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), KP_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "only with 'numerics tolerant'"));
	kp_plan_free(p);
	/* args_checked: -1 writes no line, anything else but 0/1 is refused */
	p = sample_plan();
	p->args_checked = -1;
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), 0);
	CU_ASSERT_PTR_NULL(strstr(sb.buf, "args-checked"));
	p->args_checked = 2;
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), KP_EINVAL);
	kp_plan_free(p);
	kp_strbuf_release(&sb);
	/* new plans: unknown args */
	p = kp_plan_new();
	CU_ASSERT_EQUAL(p->args_checked, -1);
	CU_ASSERT_EQUAL(p->format_version, KP_PLAN_FORMAT_VERSION);
	kp_plan_free(p);
}

/* sample body as format version 1 wrote it: no kinds, no args-checked, no numerics */
static char *sample_v1(void)
{
	static const char *const drop[] = {
		"args-checked 1\n", "numerics exact\n", "numerics tolerant\n", "tolerance 1e-05\n",
	};
	char *text = sample_text(NULL), *out;
	struct kp_strbuf sb = KP_STRBUF_INIT;
	const char *b = body_of(text);
	size_t i;

	while (*b) {
		const char *nl = strchr(b, '\n');
		size_t n = (size_t)(nl - b) + 1;
		int skip = 0;

		for (i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
			skip |= strlen(drop[i]) == n && !memcmp(b, drop[i], n);
		if (!strncmp(b, "patch ", 6)) {
			/* without the kind, the last word */
			while (b[n - 1] != ' ')
				n--;
			kp_strbuf_add(&sb, b, n - 1);
			kp_strbuf_addch(&sb, '\n');
		} else if (!skip) {
			kp_strbuf_add(&sb, b, n);
		}
		b = nl + 1;
	}
	out = wrap_v(1, sb.buf);
	kp_strbuf_release(&sb);
	free(text);
	return out;
}

/* Version 1 files still parse, with version 1's meaning for what they lack. */
static void test_v1_plans(void)
{
	struct kp_err err = {0};
	struct kp_strbuf again = KP_STRBUF_INIT;
	char *t = sample_v1();
	struct kp_plan *p = kp_plan_parse(t, strlen(t), "v1.kplan", &err), *q;
	const struct kp_plan_region *r;
	size_t i;

	if (!p)
		fprintf(stderr, "\nv1: %s\n", err.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "\npatch 7 1 8 8\n"));
	CU_ASSERT_EQUAL(p->format_version, 1);
	CU_ASSERT_EQUAL(p->args_checked, -1);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL_FATAL(r->n_patches, 2);
	CU_ASSERT(r->patches[0].scalar == 0 && r->patches[1].scalar == 0);
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 2);
	for (i = 0; i < 2; i++)
		CU_ASSERT(p->fusions[i].exact == 1 && p->fusions[i].tolerance == 0);
	/* written back as version 2 */
	CU_ASSERT_EQUAL(kp_plan_write(p, &again, &err), 0);
	CU_ASSERT(again.buf && !strncmp(again.buf, "kplan-plan 2\n", 13));
	CU_ASSERT_PTR_NULL(strstr(again.buf, "args-checked"));
	CU_ASSERT_PTR_NOT_NULL(strstr(again.buf, "\npatch 7 1 8 8 pointer\n"));
	q = kp_plan_parse(again.buf, again.len, "v2.kplan", &err);
	CU_ASSERT(q && q->args_checked == -1 && q->fusions[1].exact == 1);
	kp_plan_free(q);
	kp_strbuf_release(&again);
	kp_plan_free(p);
	/* version 2's keys and tokens are not version 1's */
	{
		struct kp_strbuf sb = KP_STRBUF_INIT;
		const char *body = body_of(t);
		static const char *const edits[][3] = {
			{ "graph-mem-budget-bytes 1048576\n", "graph-mem-budget-bytes 1048576\nargs-checked 1\n",
			  "unknown field 'args-checked' (format version 1" },
			{ "patch 7 1 8 8\n", "patch 7 1 8 8 scalar\n", "four non-negative integers" },
			{ "source-hash 0000000000000000\n", "source-hash 0000000000000000\nnumerics exact\n",
			  "unknown field 'numerics'" },
		};

		for (i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
			const char *at = strstr(body, edits[i][0]);
			char *w;

			CU_ASSERT_PTR_NOT_NULL_FATAL(at);
			kp_strbuf_reset(&sb);
			kp_strbuf_add(&sb, body, (size_t)(at - body));
			kp_strbuf_adds(&sb, edits[i][1]);
			kp_strbuf_adds(&sb, at + strlen(edits[i][0]));
			w = wrap_v(1, sb.buf);
			expect_bad(w, strlen(w), KP_EFORMAT, edits[i][2], "model.kplan:");
			free(w);
		}
		kp_strbuf_release(&sb);
	}
	free(t);
	/* the version 1 plan files kept under tests/ */
	p = kp_plan_load(kp_test_src("tests/fuzz/corpus/planfile/golden.kplan"), &err);
	if (!p)
		fprintf(stderr, "\ncorpus v1: %s\n", err.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->format_version, 1);
	CU_ASSERT_EQUAL(p->args_checked, -1);
	r = kp_plan_find(p, "step");
	CU_ASSERT(r && r->n_patches == 3 && !r->patches[0].scalar && !r->patches[2].scalar);
	CU_ASSERT(p->n_fusions == 1 && p->fusions[0].exact == 1 && p->fusions[0].tolerance == 0);
	kp_plan_free(p);
}

static void test_huge_input(void)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	char *body_text = sample_text(NULL), *t;
	const char *b = body_of(body_text), *cut = strstr(b, "[region");
	int i;

	/* a very long line */
	kp_strbuf_add(&sb, b, (size_t)(strstr(b, "[soft]") - b));
	kp_strbuf_adds(&sb, "[soft]\ngpu-name ");
	for (i = 0; i < 5000; i++)
		kp_strbuf_addch(&sb, 'x');
	kp_strbuf_adds(&sb, "\n");
	t = wrap(sb.buf);
	expect_bad(t, strlen(t), KP_EFORMAT, "line longer than 4096", NULL);
	free(t);
	/* more regions than the format allows: rejected at the limit, memory bounded */
	kp_strbuf_reset(&sb);
	kp_strbuf_add(&sb, b, (size_t)(cut - b));
	for (i = 0; i < KP_PLAN_MAX_REGIONS + 5; i++)
		kp_strbuf_addf(&sb, "[region r%06d]\ndecision eager\nreason blocker\nreason-text -\n"
			       "fingerprint 0000000000000000\nkernels 1\nnodes 1\noccurrences 1\nshape-keys 1\n"
			       "warmup 0\nbreak-even 0\neager-ns 1\ngraph-ns 1\none-time-ns 0\n"
			       "speedup-pred 1.0\nmem-budget-bytes 0\n", i);
	t = wrap(sb.buf);
	expect_bad(t, strlen(t), KP_EFORMAT, "more than 4096 regions", NULL);
	free(t);
	/* a file over the size limit is refused before parsing */
	expect_bad(body_text, KP_PLAN_MAX_FILE_BYTES + 1, KP_EFORMAT, "larger than", NULL);
	kp_strbuf_release(&sb);
	free(body_text);
}

/*
 * Random edits of a valid body, re-checksummed so that the parser proper sees
 * them: never a crash (run under ASan), and what parses writes back to a
 * file that parses again.
 */
static void test_mutations(void)
{
	char *text = sample_text(NULL);
	const char *body = body_of(text);
	size_t blen = strlen(body);
	const char alphabet[] = "0123456789abcdef -%]\n[x.#";
	uint64_t rng = 0x2545f4914f6cdd1dULL;
	int i, accepted = 0;

	for (i = 0; i < 3000; i++) {
		struct kp_strbuf sb = KP_STRBUF_INIT, out = KP_STRBUF_INIT;
		struct kp_err err = {0};
		struct kp_plan *p, *q;
		size_t at, j, n_edits;
		char *t;

		kp_strbuf_add(&sb, body, blen);
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		n_edits = 1 + rng % 3;
		for (j = 0; j < n_edits && sb.len > 1; j++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			at = (size_t)(rng >> 8) % sb.len;
			switch (rng % 4) {
			case 0:  /* replace a byte */
				sb.buf[at] = alphabet[(rng >> 40) % (sizeof(alphabet) - 1)];
				break;
			case 1:  /* delete a byte */
				memmove(sb.buf + at, sb.buf + at + 1, sb.len - at);
				sb.len--;
				break;
			case 2:  /* duplicate a chunk */
				kp_strbuf_add(&sb, sb.buf + at, (rng >> 32) % 64 < sb.len - at ?
					      (rng >> 32) % 64 : sb.len - at);
				break;
			default: /* big number */
				if (sb.buf[at] >= '0' && sb.buf[at] <= '9')
					sb.buf[at] = '9';
				break;
			}
		}
		t = wrap(sb.buf);
		p = kp_plan_parse(t, strlen(t), "m.kplan", &err);
		if (p) {
			accepted++;
			CU_ASSERT_EQUAL(kp_plan_write(p, &out, &err), 0);
			q = kp_plan_parse(out.buf, out.len, "again", &err);
			CU_ASSERT_PTR_NOT_NULL(q);
			kp_plan_free(q);
		} else {
			CU_ASSERT(err.code == KP_EFORMAT && strstr(err.msg, "m.kplan:"));
		}
		kp_plan_free(p);
		free(t);
		kp_strbuf_release(&sb);
		kp_strbuf_release(&out);
	}
	/* some edits are harmless (comments, blank lines, digits in text) */
	CU_ASSERT(accepted > 0 && accepted < 3000);
	free(text);
}

static void test_writer_refuses(void)
{
	struct kp_plan *p = sample_plan();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};

	p->regions[0].kernels = 0;
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), KP_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "field 'kernels'"));
	CU_ASSERT_EQUAL(sb.len, 0);
	kp_plan_free(p);
	/* region 2 ("load/a 50% ]") is referenced by nothing: relabel it */
	p = sample_plan();
	free(p->regions[2].label);
	p->regions[2].label = strdup("");
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), KP_EINVAL);
	kp_plan_free(p);
	p = sample_plan();
	free(p->regions[2].label);
	p->regions[2].label = strdup("-");   /* a real label, not "empty" */
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(sb.buf, "[region -]\n"));
	kp_plan_free(p);
	kp_strbuf_release(&sb);
}

static void test_check(void)
{
	struct kp_plan *p = sample_plan();
	struct kp_gpu_desc g;
	struct kp_plan_report rep;

	kp_gpu_desc_init(&g);
	/* nothing known: hard keys unknown, does not apply */
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_NOT_APPLICABLE);
	g.cc_major = 9;
	g.cc_minor = 0;
	g.cuda_major = 13;
	/* hard keys match, soft keys unknown: applies, with notes */
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_APPLIES);
	CU_ASSERT_EQUAL(rep.n_items, 3);
	CU_ASSERT_EQUAL(rep.items[0].severity, 0);
	g.name = "NVIDIA H200";
	g.sm_count = 132;
	g.driver_version = 13000;
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_APPLIES);
	CU_ASSERT_EQUAL(rep.n_items, 0);
	g.name = "NVIDIA H100 80GB HBM3";
	g.driver_version = 13010;
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_SOFT_MISMATCH);
	CU_ASSERT_EQUAL(rep.n_items, 2);
	CU_ASSERT_STRING_EQUAL(rep.items[0].key, "gpu-name");
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.items[0].msg, "NVIDIA H100 80GB HBM3"));
	CU_ASSERT_STRING_EQUAL(rep.items[1].key, "driver-version");
	g.cc_major = 8;
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_NOT_APPLICABLE);
	CU_ASSERT_STRING_EQUAL(rep.items[0].key, "compute-capability");
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.items[0].msg, "plan wants 9.0, gpu has 8.0"));
	/* cuda major from the driver version when not given */
	g.cc_major = 9;
	g.cuda_major = -1;
	g.driver_version = 12080;
	CU_ASSERT_EQUAL(kp_plan_check(p, &g, &rep), KP_PLAN_NOT_APPLICABLE);
	CU_ASSERT_STRING_EQUAL(rep.items[0].key, "cuda-major");
	kp_plan_free(p);
}

/* ---------------------------------------------------------------------- */
/* CLI */

static void test_cli_check(void)
{
	const char *plan = kp_test_path("cli.kplan"), *bad = kp_test_path("bad.kplan");
	const char *log = kp_test_path("check.log");
	const char *k = kp_test_kplan();
	size_t len;
	char *text = sample_text(&len), *msg;

	kp_test_write(plan, text, (long)len);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' "
				   "--sms 132 --driver 13000 >'%s'", k, plan, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'applies' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 9.0 --driver 13000 --gpu-name 'NVIDIA H100' "
				   ">'%s'", k, plan, log), 1);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'soft gpu-name' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 8.0 --cuda-major 13 >'%s'", k, plan, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'hard compute-capability: plan wants 9.0, gpu has 8.0' '%s'",
				   log), 0);
	/* no GPU and no options: says so, exit 2 */
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_LIBCUDA=/nonexistent/libcuda.so.1 %s check '%s' 2>'%s'",
				   k, plan, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'no NVIDIA driver' '%s'", log), 0);
	/* an invalid file: exit 2 from check and show, with line and reason */
	text[len - 3] ^= 0x04;
	kp_test_write(bad, text, (long)len);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 9.0 --cuda-major 13 2>'%s'", k, bad, log), 2);
	msg = kp_test_read(log, NULL);
	CU_ASSERT(msg && strstr(msg, "bad.kplan:3: body checksum mismatch"));
	free(msg);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' 2>/dev/null", k, bad), 2);
	kp_test_write(bad, text, 40);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' 2>/dev/null", k, bad), 2);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' >/dev/null", k, plan), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check 2>/dev/null", k), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc nine 2>/dev/null", k, plan), 64);
	free(text);
}

/* kplan check --model against a plan pinned with 'for' */
static void test_cli_check_model(void)
{
	const char *plan = kp_test_path("pinned.kplan"), *log = kp_test_path("model.log");
	const char *gpu = "--cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' --sms 132 --driver 13000";
	const char *k = kp_test_kplan();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p = sample_plan();

	p->model = strdup("llama-3-8b v2");
	CU_ASSERT_EQUAL_FATAL(kp_plan_write(p, &sb, &err), 0);
	kp_test_write(plan, sb.buf, (long)sb.len);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s --model 'llama-3-8b v2' >'%s'", k, plan, gpu,
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q ': applies on' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s --model 'llama-3-8b v3' >'%s'", k, plan, gpu,
				   log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q \"hard for: plan was made for model 'llama-3-8b v2', "
				   "the application runs 'llama-3-8b v3'\" '%s'", log), 0);
	/* no --model: a note, applies */
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >'%s'", k, plan, gpu, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'note for: ' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s --model '' 2>/dev/null", k, plan, gpu), 64);
	/* show names the identity */
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' | grep -q 'llama-3-8b v2'", k, plan), 0);
	kp_plan_free(p);
	kp_strbuf_release(&sb);
}

/* ---------------------------------------------------------------------- */
/* signatures (plan/sign.c) */

static const char src_a[] = "// fused a\nextern \"C\" __global__ void a(void) {}\n";
static const char src_b[] = "// fused b\nextern \"C\" __global__ void b(void) {}\n";

/* sample_plan with both fusion groups' sources next to it, at name */
static const char *signed_fixture(const char *name, const char *key)
{
	struct kp_plan *p = sample_plan();
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	const char *path;

	p->fusions[0].source = strdup("kpfuse-a.cu");
	p->fusions[0].source_hash = kp_hash64(src_a, strlen(src_a), KP_HASH_SEED);
	p->fusions[1].source = strdup("kpfuse-b.cu");
	p->fusions[1].source_hash = kp_hash64(src_b, strlen(src_b), KP_HASH_SEED);
	CU_ASSERT_EQUAL(kp_plan_write(p, &sb, &err), 0);
	kp_plan_free(p);
	kp_test_write(kp_test_path("kpfuse-a.cu"), src_a, -1);
	kp_test_write(kp_test_path("kpfuse-b.cu"), src_b, -1);
	path = kp_test_path(name);
	kp_test_write(path, sb.buf, (long)sb.len);
	kp_strbuf_release(&sb);
	if (key)
		CU_ASSERT_EQUAL(kp_plan_sign(path, key, NULL, &err), 0);
	return path;
}

/* kp_plan_verify of the plan file at path as it is now: 0 or the code */
static int verify_file(const char *path, const struct kp_sign_key *keys, size_t n,
		       struct kp_err *err)
{
	struct kp_plan *p;
	char *buf;
	size_t len;
	int rc;

	if ((rc = kp_plan_read(path, &buf, &len, err)))
		return rc;
	p = kp_plan_parse(buf, len, path, err);
	rc = p ? kp_plan_verify(path, buf, len, p, keys, n, NULL, NULL, NULL, err) : KP_EFORMAT;
	kp_plan_free(p);
	free(buf);
	return rc;
}

static void test_sign_roundtrip(void)
{
	struct kp_sign_key keys[2];
	struct kp_err err = {0};
	const char *k1 = kp_test_fresh_key("s1.key", &keys[0]), *plan;
	char sigpath[4200], id[KP_SIGN_ID_HEX], *sig, c;
	size_t siglen;

	kp_test_fresh_key("s2.key", &keys[1]);
	plan = signed_fixture("signed.kplan", k1);
	snprintf(sigpath, sizeof(sigpath), "%s.sig", plan);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 2, &err), 0);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 1, &err), 0);
	CU_ASSERT_EQUAL(kp_plan_sig_read(plan, id, &err), 0);
	CU_ASSERT_STRING_EQUAL(id, keys[0].id);
	/* the secret key file is private, the formats are one line each */
	CU_ASSERT_EQUAL(kp_test_sh("test \"$(stat -c %%a '%s')\" = 600", k1), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qx 'kplan-ed25519-secret [0-9a-f]\\{64\\}' '%s'", k1), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qx 'kplan-ed25519-public [0-9a-f]\\{64\\}' '%s.pub'", k1), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -qx 'kplan-ed25519-signature %s [0-9a-f]\\{128\\}' '%s'",
				   id, sigpath), 0);
	/* keygen never overwrites */
	CU_ASSERT_EQUAL(kp_sign_keygen(k1, NULL, &err), KP_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exists"));
	/* another key only */
	CU_ASSERT_EQUAL(verify_file(plan, keys + 1, 1, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a trusted key"));
	/* truncated, malformed and missing signatures */
	sig = kp_test_read(sigpath, &siglen);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sig);
	kp_test_write(sigpath, sig, (long)siglen - 3);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 2, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ".sig: not a kplan signature"));
	kp_test_write(sigpath, sig, 20);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 2, &err), KP_EFORMAT);
	/* another hex digit in the signature */
	c = sig[siglen - 20];
	sig[siglen - 20] = c == '0' ? '1' : '0';
	kp_test_write(sigpath, sig, (long)siglen);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 2, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad signature"));
	sig[siglen - 20] = c;
	unlink(sigpath);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 2, &err), KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unsigned"));
	CU_ASSERT_EQUAL(kp_plan_sig_read(plan, id, &err), KP_ENOTFOUND);
	kp_test_write(sigpath, sig, (long)siglen);
	CU_ASSERT_EQUAL(verify_file(plan, keys, 2, &err), 0);
	free(sig);
	/* trust lists */
	{
		struct kp_sign_key tk[KP_SIGN_MAX_TRUST];
		char list[9000];
		size_t n = 0;

		snprintf(list, sizeof(list), ":%s.pub::%s.pub", kp_test_path("s2.key"), k1);
		CU_ASSERT_EQUAL(kp_sign_load_trust(list, tk, &n, &err), 0);
		CU_ASSERT_EQUAL(n, 2);
		CU_ASSERT_STRING_EQUAL(tk[1].id, keys[0].id);
		CU_ASSERT_EQUAL(kp_sign_load_trust("::", tk, &n, &err), KP_EINVAL);
		CU_ASSERT_EQUAL(kp_sign_load_trust(plan, tk, &n, &err), KP_EFORMAT);
		CU_ASSERT_EQUAL(kp_sign_load_trust("/nonexistent.pub", tk, &n, &err), KP_ENOTFOUND);
	}
}

/* every byte of the plan and of each source flipped: refused */
static void test_sign_tamper(void)
{
	struct kp_sign_key key;
	struct kp_err err = {0};
	const char *k1 = kp_test_fresh_key("t1.key", &key), *plan = signed_fixture("tamper.kplan", k1);
	const char *other, *srcs[2] = { kp_test_path("kpfuse-a.cu"), kp_test_path("kpfuse-b.cu") };
	char sigpath[4200], *text, *sig;
	size_t len, i, siglen, parsed = 0;
	int s;

	snprintf(sigpath, sizeof(sigpath), "%s.sig", plan);
	text = kp_test_read(plan, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	for (i = 0; i < len; i++) {
		struct kp_plan *p;

		text[i] ^= 0x20;
		p = kp_plan_parse(text, len, "t", &err);
		if (p) {
			parsed++;
			CU_ASSERT_NOT_EQUAL(kp_plan_verify(plan, text, len, p, &key, 1, NULL, NULL, NULL, &err), 0);
		}
		kp_plan_free(p);
		text[i] ^= 0x20;
	}
	CU_ASSERT_EQUAL(kp_plan_verify(plan, text, len, NULL, &key, 0, NULL, NULL, NULL, &err), KP_EMISMATCH);
	free(text);
	/* each byte of each source */
	for (s = 0; s < 2; s++) {
		char *src = kp_test_read(srcs[s], &len);

		CU_ASSERT_PTR_NOT_NULL_FATAL(src);
		for (i = 0; i < len; i++) {
			src[i] ^= 0x01;
			kp_test_write(srcs[s], src, (long)len);
			CU_ASSERT_EQUAL(verify_file(plan, &key, 1, &err), KP_EMISMATCH);
			src[i] ^= 0x01;
		}
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, s ? "kpfuse-b.cu: source file changed" :
					      "kpfuse-a.cu: source file changed"));
		kp_test_write(srcs[s], src, (long)len);
		free(src);
	}
	CU_ASSERT_EQUAL(verify_file(plan, &key, 1, &err), 0);
	/* a missing source is named */
	rename(srcs[1], kp_test_path("moved.cu"));
	CU_ASSERT_EQUAL(verify_file(plan, &key, 1, &err), KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kpfuse-b.cu"));
	rename(kp_test_path("moved.cu"), srcs[1]);
	/* the signature of another plan */
	other = kp_test_path("other.kplan");
	text = sample_text(&len);
	kp_test_write(other, text, (long)len);
	free(text);
	sig = kp_test_read(sigpath, &siglen);
	snprintf(sigpath, sizeof(sigpath), "%s.sig", other);
	kp_test_write(sigpath, sig, (long)siglen);
	free(sig);
	CU_ASSERT_EQUAL(verify_file(other, &key, 1, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad signature"));
	CU_ASSERT(parsed < 8);   /* nearly every flip already breaks the checksum */
}

static void test_cli_sign(void)
{
	const char *k = kp_test_kplan(), *log = kp_test_path("sign.log");
	const char *key = kp_test_path("cli.key"), *plan;
	const char *gpu = "--cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' --sms 132 --driver 13000";
	char *msg;

	kp_test_sh("rm -f '%s' '%s.pub'", key, key);
	CU_ASSERT_EQUAL(kp_test_sh("%s keygen -o '%s' >'%s'", k, key, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'public key, id [0-9a-f]\\{16\\}' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s keygen -o '%s' 2>/dev/null", k, key), 2);
	CU_ASSERT_EQUAL(kp_test_sh("%s keygen 2>/dev/null", k), 64);
	plan = signed_fixture("cli.kplan", NULL);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >'%s'", k, plan, gpu, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'cli.kplan: unsigned' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s.pub' %s 2>'%s'", k, plan, key, gpu,
				   log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'cli.kplan: plan is unsigned (no .*cli.kplan.sig)' '%s'",
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s sign '%s' --key '%s' >/dev/null", k, plan, key), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >'%s'", k, plan, gpu, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'signed by [0-9a-f]* (not verified: no --trust key)' '%s'",
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s.pub' %s >'%s'", k, plan, key, gpu,
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'signed by [0-9a-f]*, signature ok' '%s'", log), 0);
	/* a changed source is named, exit 2 */
	kp_test_write(kp_test_path("kpfuse-b.cu"), "// evil\n", -1);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s.pub' %s 2>'%s'", k, plan, key, gpu,
				   log), 2);
	msg = kp_test_read(log, NULL);
	CU_ASSERT(msg && strstr(msg, "kpfuse-b.cu: source file changed"));
	free(msg);
	/* ... without --trust too, and a missing one (a plan is code: its sources
	 * must be the ones it was written with) */
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >/dev/null 2>'%s'", k, plan, gpu, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'kpfuse-b.cu: source file changed' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("rm '%s' && %s check '%s' %s >'%s.out' 2>'%s'",
				   kp_test_path("kpfuse-b.cu"), k, plan, gpu, log, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'cannot read the source the plan references: "
				   ".*kpfuse-b.cu: cannot open: No such file' '%s' && ! grep -q applies '%s.out'",
				   log, log), 0);
	kp_test_write(kp_test_path("kpfuse-b.cu"), src_b, -1);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >/dev/null", k, plan, gpu), 0);
	/* a key readable by others is refused; usage errors */
	CU_ASSERT_EQUAL(kp_test_sh("chmod 644 '%s' && %s sign '%s' --key '%s' 2>'%s'", key, k, plan,
				   key, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'chmod 600' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s sign '%s' 2>/dev/null", k, plan), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust /nonexistent.pub %s 2>/dev/null", k, plan,
				   gpu), 2);
}

/*
 * Issue 30, defect 2: a FIFO planted under the name of a file kplan reads
 * (plan, PLAN.sig, KEY.pub, a fused source) blocked `kplan check --trust`
 * forever in fopen. Every one is refused at once now, naming the file and
 * what it is (common/fileio.h: O_NONBLOCK, fstat, regular files only).
 * Each command runs under timeout(1): a hang is exit 124.
 */
static void test_fifo_inputs(void)
{
	const char *k = kp_test_kplan(), *log = kp_test_path("fifo.log");
	const char *key = kp_test_fresh_key("fifo.key", NULL), *plan, *fifo = kp_test_path("fifo.kplan");
	const char *gpu = "--cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' --sms 132 --driver 13000";
	const char *src = kp_test_path("kpfuse-a.cu");
	char sig[4200], pub[4200];

	plan = signed_fixture("fifo-signed.kplan", key);
	snprintf(sig, sizeof(sig), "%s.sig", plan);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s check '%s' --trust '%s' %s >/dev/null", k, plan,
				   pub, gpu), 0);
	/* a fused source */
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("rm -f '%s' && mkfifo '%s'", src, src), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s check '%s' --trust '%s' %s 2>'%s'", k, plan, pub,
				   gpu, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'kpfuse-a.cu: a FIFO, expected a regular file' '%s'",
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s sign '%s' --key '%s' 2>/dev/null", k, plan, key),
			2);
	CU_ASSERT_EQUAL(kp_test_sh("rm -f '%s'", src), 0);
	kp_test_write(src, src_a, -1);
	/* the signature */
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("rm -f '%s' && mkfifo '%s'", sig, sig), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s check '%s' --trust '%s' %s 2>'%s'", k, plan, pub,
				   gpu, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'sig: a FIFO' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s check '%s' %s >'%s'", k, plan, gpu, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'signature unreadable' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("rm -f '%s' && timeout 20 %s sign '%s' --key '%s' >/dev/null",
				   sig, k, plan, key), 0);
	/* the public key, the secret key */
	CU_ASSERT_EQUAL(kp_test_sh("rm -f '%s' && mkfifo '%s'", pub, pub), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s check '%s' --trust '%s' %s 2>'%s'", k, plan, pub,
				   gpu, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'pub: a FIFO' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("rm -f '%s' '%s' && mkfifo -m 600 '%s'", pub, key, key), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s sign '%s' --key '%s' 2>'%s'", k, plan, key, log),
			2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'key: a FIFO' '%s'", log), 0);
	/* the plan itself: check, show, sign */
	CU_ASSERT_EQUAL(kp_test_sh("rm -f '%s' && mkfifo '%s'", fifo, fifo), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s check '%s' %s 2>'%s'", k, fifo, gpu, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'fifo.kplan: a FIFO, expected a regular file' '%s'",
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s show '%s' 2>/dev/null", k, fifo), 2);
	CU_ASSERT_EQUAL(kp_test_sh("rm -f '%s'", fifo), 0);
	/* a directory is not a plan either */
	CU_ASSERT_EQUAL(kp_test_sh("timeout 20 %s show '%s' 2>'%s'", k, kp_test_path(""), log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'a directory, expected a regular file' '%s'", log), 0);
}

/*
 * Issue 30, defect 3: `kplan sign` wrote PLAN.sig.tmp with fopen("wb"), so
 * a symbolic link planted at that name made the signer overwrite the
 * link's target (any file it can write) and left PLAN.sig a link. The
 * signature is now written through common/fileio.h: a new file under a
 * random name (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over PLAN.sig, which
 * replaces a link there rather than following it.
 */
static void test_sign_planted_links(void)
{
	const char *k = kp_test_kplan(), *key = kp_test_fresh_key("links.key", NULL);
	const char *victim = kp_test_path("victim.txt"), *plan;
	char sig[4200], tmp[4200], pub[4200], *got;
	struct stat st;

	plan = signed_fixture("links.kplan", NULL);
	snprintf(sig, sizeof(sig), "%s.sig", plan);
	snprintf(tmp, sizeof(tmp), "%s.sig.tmp", plan);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	kp_test_write(victim, "precious\n", -1);
	CU_ASSERT_EQUAL_FATAL(symlink(victim, tmp), 0);
	CU_ASSERT_EQUAL_FATAL(symlink(victim, sig), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s sign '%s' --key '%s' >/dev/null", k, plan, key), 0);
	got = kp_test_read(victim, NULL);
	CU_ASSERT(got && !strcmp(got, "precious\n"));
	free(got);
	CU_ASSERT_EQUAL(lstat(sig, &st), 0);
	CU_ASSERT(S_ISREG(st.st_mode));
	CU_ASSERT_EQUAL(lstat(tmp, &st), 0);
	CU_ASSERT(S_ISLNK(st.st_mode));   /* not written, not removed */
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s' --cc 9.0 --cuda-major 13 --gpu-name "
				   "'NVIDIA H200' --sms 132 --driver 13000 >/dev/null", k, plan, pub),
			0);
	/* no temporary file left behind */
	CU_ASSERT_EQUAL(kp_test_sh("ls -a '%s' | grep -q 'links.kplan.sig.tmp-'", kp_test_path("")),
			1);
	/* a key never overwrites, and never follows, a planted link */
	unlink(tmp);
	CU_ASSERT_EQUAL(symlink(victim, kp_test_path("planted.key")), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s keygen -o '%s' 2>/dev/null", k, kp_test_path("planted.key")),
			2);
	got = kp_test_read(victim, NULL);
	CU_ASSERT(got && !strcmp(got, "precious\n"));
	free(got);
}

/*
 * Version 4: a region the ranks of a job do not agree on is eager with the
 * reason ranks-differ; the writer writes version 4 then (and only then),
 * and a version 2 file with that reason is refused.
 */
static void test_ranks_differ(void)
{
	struct kp_plan *p = sample_plan(), *q;
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan_region *r = NULL;
	char *v2;

	for (size_t i = 0; i < p->n_regions; i++)
		if (!strcmp(p->regions[i].label, "step"))
			r = &p->regions[i];
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	r->decision = KP_PLAN_EAGER;
	r->reason = KP_PLAN_R_RANKS_DIFFER;
	free(r->patches);
	r->patches = NULL;
	r->n_patches = 0;
	CU_ASSERT_EQUAL_FATAL(kp_plan_write(p, &sb, &err), 0);
	CU_ASSERT_EQUAL(strncmp(sb.buf, "kplan-plan 4\n", 13), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(sb.buf, "\nreason ranks-differ\n"));
	q = kp_plan_parse(sb.buf, sb.len, "model.kplan", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_EQUAL(q->format_version, 4);
	CU_ASSERT_EQUAL(kp_plan_find(q, "step")->reason, KP_PLAN_R_RANKS_DIFFER);
	CU_ASSERT_STRING_EQUAL(kp_plan_reason_name(KP_PLAN_R_RANKS_DIFFER), "ranks-differ");
	kp_plan_free(q);
	v2 = wrap(body_of(sb.buf));
	CU_ASSERT_PTR_NULL(kp_plan_parse(v2, strlen(v2), "model.kplan", &err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "reason 'ranks-differ' in a version 2 plan"));
	free(v2);
	kp_strbuf_release(&sb);
	kp_plan_free(p);
}

CU_TestInfo kp_tests_plan[] = {
	{ "plan file round trip, sorted and byte-identical", test_roundtrip },
	{ "a FIFO as plan, signature, key or source: refused at once", test_fifo_inputs },
	{ "kplan sign: links planted at PLAN.sig and its temporary name", test_sign_planted_links },
	{ "load from a file", test_load_file },
	{ "truncated file", test_truncated },
	{ "flipped byte", test_flipped_byte },
	{ "body edited with the old checksum", test_edited_body },
	{ "header: unknown version, not a plan, bad lengths", test_header },
	{ "missing fields name the line and field", test_missing_fields },
	{ "absurd values", test_absurd_values },
	{ "v2: patch kinds, args-checked, numerics", test_v2_fields },
	{ "v2: tolerance text, stable on rewrite", test_tolerance_text },
	{ "v2: writer refuses bad numerics", test_writer_numerics },
	{ "v1 plans parse with v1 defaults", test_v1_plans },
	{ "v3: 'for' pins a plan to a model; check compares it", test_model_pin },
	{ "v4: ranks-differ, written only when used", test_ranks_differ },
	{ "huge lines, too many regions, huge file", test_huge_input },
	{ "random edits: no crash, accepted plans round-trip", test_mutations },
	{ "writer refuses what the reader would", test_writer_refuses },
	{ "check: hard and soft keys", test_check },
	{ "cli: check / show exit codes", test_cli_check },
	{ "cli: check --model against a pinned plan", test_cli_check_model },
	{ "sign: round trip, formats, bad and missing signatures", test_sign_roundtrip },
	{ "sign: every byte of plan and sources flipped, another plan", test_sign_tamper },
	{ "cli: keygen, sign, check --trust", test_cli_sign },
	CU_TEST_INFO_NULL,
};
