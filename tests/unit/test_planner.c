/*
 * test_planner.c - planner/: plan file reader/writer/check (bad input of
 * every kind), the planner's decisions on a fixture database, the golden
 * plan, kp_plans bookkeeping, and the CLI verbs plan/show/check.
 *
 * Golden files: tests/golden/<name>.kplan; KPLAN_UPDATE_GOLDEN=1 rewrites
 * them from the current output (review the diff before committing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "common/hash.h"
#include "common/strbuf.h"
#include "db/db.h"
#include "planner/planfile.h"
#include "planner/planner.h"
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

/* The same for the current version (so only the body's content is tested). */
static char *wrap(const char *body)
{
	return wrap_v(KP_PLAN_FORMAT_VERSION, body);
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
	const char *v3 = "kplan-plan 3\nbody-bytes 5\nbody-hash 0000000000000000\nhello\n";
	char *t;

	expect_bad(v3, strlen(v3), KP_EVERSION, "unknown plan format version 3", "model.kplan:1:");
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
/* the planner on a fixture database */

static const char fixture_sql[] =
	"INSERT INTO kp_runs (runId, created_ns, source, device_name, compute_major, compute_minor, "
	"  sm_count, driver_version, runtime_version, kplan_version, t_begin_ns, t_end_ns) VALUES "
	"  (1, 1790000000000000000, 'synthetic', 'NVIDIA H200', 9, 0, 132, 13000, 13000, '0.1.0', "
	"   0, 150000000);"
	"INSERT INTO StringIds VALUES (1, 'k');"
	/* regions */
	"INSERT INTO kp_regions (runId, regionId, parentId, label, source, streamId, occurrences, "
	"  kernels, eager_ns, busy_ns, host_idle_ns, device_idle_ns, graph_ns_pred, speedup_pred, "
	"  capturable, blockers, one_time_ns, break_even, extra_mem_bytes, fingerprint, shape_keys, "
	"  patch_slots) VALUES "
	" (1, 1, NULL, 'step', 'nvtx', 7, 10, 4, 2250000, 430000, 1700000, 100000, 474000, 4.7468, "
	"  1, NULL, 60000, 1, 1048576, '9a3c55e01b2f7d44', 1, 2),"
	" (1, 2, NULL, 'optimizer', 'nvtx', 7, 10, 40, 5000000, 4900000, 10000, 90000, 4900000, 1.0204, "
	"  1, NULL, 400000, 1, 65536, 'aa', 1, 0),"
	" (1, 3, NULL, 'eval', 'nvtx', 7, 10, 8, 800000, 100000, 600000, 100000, 900000, 0.8889, "
	"  1, NULL, 100000, NULL, 4096, '0x00000000000000bb', 1, 0),"
	" (1, 4, NULL, 'load', 'nvtx', 7, 10, 9, 3000000, 500000, 2000000, 500000, NULL, NULL, "
	"  0, 'sync,pageable_copy', NULL, NULL, NULL, 'load-signature-text', 1, 0),"
	" (1, 5, 4, 'load/a', 'split', 7, 10, 5, 1000000, 200000, 700000, 100000, 300000, 3.3333, "
	"  1, NULL, 50000, 1, 2097152, 'cc', 2, 0),"
	" (1, 6, 4, 'load/b', 'split', 7, 3, 4, 900000, 100000, 700000, 100000, 200000, 4.5, "
	"  1, NULL, 40000, 1, 4096, 'dd', 1, 0),"
	" (1, 7, NULL, 'tail', 'nvtx', 7, 5, 3, 400000, 100000, 250000, 50000, 100000, 4.0, "
	"  0, 'malloc', NULL, NULL, NULL, NULL, 1, 0),"
	" (1, 8, NULL, 'step', 'nvtx', 9, 10, 2, 100000, 90000, 1000, 9000, 98000, 1.0204, "
	"  1, NULL, 1000, 1, 0, 'ee', 1, 0),"
	" (1, 9, NULL, 'decode %]', 'mined', 7, 20, 1, 50000, 1000, 45000, 4000, 2000, 25.0, "
	"  1, NULL, 10000, 1, 512, 'ff', 1, 0),"
	" (1, 10, NULL, 'empty', 'mined', 7, 20, 0, 50000, 1000, 45000, 4000, 2000, 25.0, "
	"  1, NULL, 10000, 1, 512, '11', 1, 0);"
	"INSERT INTO kp_blockers (runId, regionId, kind, fatal, api_name, start, correlationId) VALUES "
	" (1, 4, 'sync', 1, 'cudaStreamSynchronize', 100, 50), (1, 4, 'sync', 1, 'cudaStreamSynchronize', 200, 60),"
	" (1, 4, 'pageable_copy', 1, 'cudaMemcpyAsync', 150, 55), (1, 7, 'malloc', 1, 'cudaMalloc', 10, 5),"
	" (1, 4, 'shape_key', 0, 'cudaLaunchKernel', 300, 70);"
	"INSERT INTO kp_fusion_candidates (runId, candId, regionId, streamId, first_correlationId, "
	"  n_kernels, kernel_names, dur_ns, saved_bytes, saved_nodes, score, feasible, reason) VALUES "
	" (1, 1, 1, 7, 102, 2, 'add -> relu', 8000, 4000000, 1, 2840.5, 1, NULL),"
	" (1, 2, 1, 7, 101, 3, 'a -> b -> c', 9000, 4000000, 2, 900.0, 0, 'reduction shape'),"
	" (1, 3, 2, 7, 9001, 2, 'x -> y', 9000, 4000000, 1, 900.0, 1, NULL),"
	" (1, 4, 1, 7, 101, 2, 'p -> q', 9000, 0, 1, 0.0, 1, NULL);";

/* kernels of region 1 (4 per occurrence, corr 100*i+1..+4) and their launch arguments */
static int add_step_kernels(struct kp_db *db)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	int i, k, rc;

	kp_strbuf_adds(&sb, "BEGIN;");
	for (i = 0; i < 10; i++) {
		int64_t t = 1000000 + (int64_t)i * 2250000;

		kp_strbuf_addf(&sb, "INSERT INTO kp_region_occurrences (runId, regionId, occIndex, start, "
			       "end, kernels, first_correlationId, last_correlationId, signature) "
			       "VALUES (1, 1, %d, %lld, %lld, 4, %d, %d, '9a3c55e01b2f7d44');", i, (long long)t, (long long)t + 2250000,
			       100 * i + 1, 100 * i + 4);
		for (k = 0; k < 4; k++) {
			int corr = 100 * i + 1 + k;

			kp_strbuf_addf(&sb, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, "
				       "streamId, correlationId, demangledName, shortName, gridX, gridY, "
				       "gridZ, blockX, blockY, blockZ, runId) VALUES (%lld, %lld, 0, 7, %d, "
				       "1, 1, 1, 1, 1, 128, 1, 1, 1);", (long long)t + k * 500000,
				       (long long)t + k * 500000 + 100000, corr);
			/* arg 0: pointer, changes each step for kernels 0 and 2 */
			kp_strbuf_addf(&sb, "INSERT INTO kp_launch_args VALUES (1, %d, 0, 8, %lld);", corr,
				       (long long)(0x7f0000000000LL + (k % 2 == 0 ? i * 0x1000 : 0)));
			/* arg 1: int, constant; arg 2: pointer, changes for kernel 3 */
			kp_strbuf_addf(&sb, "INSERT INTO kp_launch_args VALUES (1, %d, 1, 4, 16);", corr);
			kp_strbuf_addf(&sb, "INSERT INTO kp_launch_args VALUES (1, %d, 2, 8, %lld);", corr,
				       (long long)(0x7e0000000000LL + (k == 3 ? i * 0x100 : 0)));
		}
	}
	kp_strbuf_adds(&sb, "COMMIT;");
	rc = kp_db_exec(db, sb.buf, &err);
	if (rc)
		fprintf(stderr, "fixture: %s\n", err.msg);
	kp_strbuf_release(&sb);
	return rc;
}

static const char *fixture_db(const char *name)
{
	struct kp_err err = {0};
	const char *path = kp_test_path(name);
	struct kp_db *db = kp_db_open(path, KP_DB_CREATE, &err);

	if (!db) {
		fprintf(stderr, "open: %s\n", err.msg);
		return NULL;
	}
	if (kp_db_exec(db, fixture_sql, &err)) {
		fprintf(stderr, "fixture: %s\n", err.msg);
		kp_db_close(db);
		return NULL;
	}
	if (add_step_kernels(db)) {
		kp_db_close(db);
		return NULL;
	}
	kp_db_close(db);
	return path;
}

static void test_planner_decisions(void)
{
	const char *path = fixture_db("decide.db");
	struct kp_err err = {0};
	struct kp_planner_opts o;
	struct kp_db *db;
	struct kp_plan *p;
	const struct kp_plan_region *r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	kp_planner_opts_init(&o);
	p = kp_planner_run(db, &o, &err);
	if (!p)
		fprintf(stderr, "plan: %s\n", err.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->n_regions, 9);   /* 'empty' has no kernels: left out */
	CU_ASSERT_EQUAL(p->cc_major, 9);
	CU_ASSERT_EQUAL(p->cuda_major, 13);
	CU_ASSERT_STRING_EQUAL(p->date, "2026-09-21T14:13:20Z");

	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(r->warmup, 2);
	CU_ASSERT_EQUAL(r->fingerprint, 0x9a3c55e01b2f7d44ULL);
	CU_ASSERT_EQUAL(r->mem_budget_bytes, 1048576);
	CU_ASSERT(r->n_shapes == 1 && r->shapes[0] == r->fingerprint);
	CU_ASSERT_EQUAL(r->nodes, 4);   /* kp_regions.nodes 0: at least the kernels */
	/* patch slots: kernels 0 and 2 arg 0 (offset 0), kernel 3 arg 2 (offset 16: 8-byte pointer, 4-byte int, aligned) */
	CU_ASSERT_EQUAL_FATAL(r->n_patches, 3);
	CU_ASSERT(r->patches[0].kernel == 0 && r->patches[0].param == 0 && r->patches[0].offset == 0);
	CU_ASSERT(r->patches[1].kernel == 2 && r->patches[1].param == 0 && r->patches[1].size == 8);
	CU_ASSERT(r->patches[2].kernel == 3 && r->patches[2].param == 2 && r->patches[2].offset == 16);

	r = kp_plan_find(p, "step#8");   /* repeated label made unique */
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_NOT_LAUNCH_BOUND);
	r = kp_plan_find(p, "optimizer");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_NOT_LAUNCH_BOUND);
	r = kp_plan_find(p, "eval");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_PREDICTED_LOSS);
	CU_ASSERT(r && r->fingerprint == 0xbb);
	r = kp_plan_find(p, "load");
	CU_ASSERT(r && r->decision == KP_PLAN_SPLIT && r->reason == KP_PLAN_R_BLOCKER);
	CU_ASSERT(r && strstr(r->reason_text, "sync x2 (cudaStreamSynchronize)"));
	CU_ASSERT(r && r->fingerprint == kp_hash_str("load-signature-text"));
	r = kp_plan_find(p, "load/a");
	CU_ASSERT(r && r->decision == KP_PLAN_GRAPH && r->parent && !strcmp(r->parent, "load"));
	CU_ASSERT(r && r->shape_keys == 2 && r->mem_budget_bytes == 2 * 2097152);
	r = kp_plan_find(p, "load/b");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_TOO_FEW_REPLAYS);
	r = kp_plan_find(p, "tail");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_BLOCKER && !r->parent);
	r = kp_plan_find(p, "decode %]");
	CU_ASSERT(r && r->decision == KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(p->mem_budget_bytes, 1048576 + 2 * 2097152 + 512);
	/* only the feasible, positive-score candidate of a graph region */
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 1);
	CU_ASSERT_EQUAL(p->fusions[0].id, 1);
	CU_ASSERT_EQUAL(p->fusions[0].first_kernel, 1);
	CU_ASSERT_EQUAL(p->fusions[0].gain_ns, 2841);  /* the analyzer's score, rounded */
	/* whole run: 150 ms eager, saving from step, load/a and decode:
	 * (10-2)*(2.25-0.474) - 0.06 + (10-2)*(1-0.3) - 0.05 + (20-2)*(0.05-0.002) - 0.01 ms */
	CU_ASSERT_EQUAL(p->run_eager_ns, 150000000);
	CU_ASSERT_EQUAL(p->run_pred_ns, 150000000 - 14148000 - 5550000 - 854000);
	kp_plan_free(p);

	/* the graph regions' kernels in launch order, for fusion from the catalog */
	{
		struct kp_strbuf kt = KP_STRBUF_INIT;

		o.kernel_trace = &kt;
		p = kp_planner_run(db, &o, &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		CU_ASSERT_PTR_NOT_NULL_FATAL(kt.buf);
		/* with the recorded arguments (hex bytes per parameter) */
		CU_ASSERT_PTR_NOT_NULL(strstr(kt.buf, "step\t0\tk\t00000000007f0000:10000000:00000000007e0000\n"
					      "step\t1\tk\t00000000007f0000:10000000:00000000007e0000\n"
					      "step\t2\tk\t"));
		CU_ASSERT_PTR_NOT_NULL(strstr(kt.buf, "step\t3\tk\t00000000007f0000:10000000:00000000007e0000\n"));
		CU_ASSERT_PTR_NULL(strstr(kt.buf, "step\t4\t"));   /* the first occurrence only */
		CU_ASSERT_PTR_NULL(strstr(kt.buf, "optimizer\t"));  /* eager regions: none */
		kp_plan_free(p);
		kp_strbuf_release(&kt);
		o.kernel_trace = NULL;
	}

	/* memory cap: the region with the least gain per byte goes eager */
	o.mem_limit_bytes = 1500000;
	p = kp_planner_run(db, &o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "load/a");
	CU_ASSERT(r && r->decision == KP_PLAN_EAGER && r->reason == KP_PLAN_R_MEMORY_BUDGET);
	CU_ASSERT(kp_plan_find(p, "step")->decision == KP_PLAN_GRAPH);
	CU_ASSERT(p->mem_budget_bytes <= 1500000);
	kp_plan_free(p);

	/* no such run */
	o.mem_limit_bytes = 0;
	o.run_id = 42;
	CU_ASSERT_PTR_NULL(kp_planner_run(db, &o, &err));
	CU_ASSERT_EQUAL(err.code, KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no run 42"));
	kp_db_close(db);
}

static void test_golden_and_store(void)
{
	const char *path = fixture_db("golden.db");
	const char *out1 = kp_test_path("g1.kplan"), *out2 = kp_test_path("g2.kplan");
	const char *golden = kp_test_src("tests/golden/planner_fixture.kplan");
	struct kp_err err = {0};
	char *a, *b, *g;
	size_t na, nb, ng;
	struct kp_db *db;

	CU_ASSERT_PTR_NOT_NULL_FATAL(path);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o '%s' >/dev/null", kp_test_kplan(), path, out1), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' --run 1 -o '%s' >/dev/null", kp_test_kplan(), path, out2), 0);
	a = kp_test_read(out1, &na);
	b = kp_test_read(out2, &nb);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	/* deterministic */
	CU_ASSERT(na == nb && !memcmp(a, b, na));
	if (getenv("KPLAN_UPDATE_GOLDEN")) {
		kp_test_sh("mkdir -p '%s'", kp_test_src("tests/golden"));
		CU_ASSERT_EQUAL(kp_test_write(golden, a, (long)na), 0);
		fprintf(stderr, "\nupdated %s\n", golden);
	}
	g = kp_test_read(golden, &ng);
	if (!g || ng != na || memcmp(g, a, na))
		fprintf(stderr, "\n%s differs from the output (diff %s %s; KPLAN_UPDATE_GOLDEN=1 "
			"to accept)\n", golden, golden, out1);
	CU_ASSERT(g && ng == na && !memcmp(g, a, na));
	free(a);
	free(b);
	free(g);
	/* two plans stored, the older stale with a reason, none deleted */
	db = kp_db_open(path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT COUNT(*) FROM kp_plans", -1), 2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT planId FROM kp_plans WHERE status = 'current'", -1), 2);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT COUNT(*) FROM kp_plans WHERE status = 'stale' "
				  "AND stale_reason = 'superseded by plan 2'", -1), 1);
	CU_ASSERT_EQUAL(kp_db_int(db, "SELECT COUNT(*) FROM kp_plans WHERE length(body) > 100 "
				  "AND length(checksum) = 16", -1), 2);
	kp_db_close(db);
	/* show works on it */
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' | grep -q 'step *graph'", kp_test_kplan(), out1), 0);
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
	CU_ASSERT_EQUAL(kp_test_sh("%s plan 2>/dev/null", k), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan '%s' -o x 2>/dev/null", k, kp_test_path("none.db")), 2);
	free(text);
}

/*
 * The bundled ResNet-18 trace: import, analyze, plan through the CLI. The
 * 'step' region must be a graph whose predicted speedup is the analyzer's.
 */
static void test_resnet18(void)
{
	const char *db_path = kp_test_path("resnet.db"), *plan_path = kp_test_path("resnet.kplan");
	const char *k = kp_test_kplan();
	struct kp_err err = {0};
	struct kp_plan *p;
	const struct kp_plan_region *r;
	struct kp_db *db;
	sqlite3_stmt *st;
	double analyzer_speedup = 0;

	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s import '%s' -o '%s' >/dev/null", k,
					 kp_test_src("tests/fixtures/resnet18_b1.json.gz"), db_path), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s analyze '%s' >/dev/null", k, db_path), 0);
	CU_ASSERT_EQUAL_FATAL(kp_test_sh("%s plan '%s' -o '%s' >/dev/null", k, db_path, plan_path), 0);
	p = kp_plan_load(plan_path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	r = kp_plan_find(p, "step");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(r->decision, KP_PLAN_GRAPH);
	CU_ASSERT_EQUAL(p->cc_major, 9);
	CU_ASSERT_EQUAL(p->cuda_major, 13);
	db = kp_db_open(db_path, KP_DB_RDONLY, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(db);
	if (!kp_db_prepare(db, "SELECT speedup_pred FROM kp_regions WHERE label = 'step' "
			   "ORDER BY regionId LIMIT 1", &st, &err)) {
		if (sqlite3_step(st) == SQLITE_ROW)
			analyzer_speedup = sqlite3_column_double(st, 0);
		sqlite3_finalize(st);
	}
	kp_db_close(db);
	CU_ASSERT(analyzer_speedup > 1.0);
	CU_ASSERT_DOUBLE_EQUAL(r->speedup_pred, analyzer_speedup, 1e-3 * analyzer_speedup + 1e-4);
	/* the whole run gains, but less than the region (warm-up, capture) */
	CU_ASSERT(p->speedup_pred > 1.0 && p->speedup_pred <= r->speedup_pred + 1e-9);
	kp_plan_free(p);
}

CU_TestInfo kp_tests_planner[] = {
	{ "plan file round trip, sorted and byte-identical", test_roundtrip },
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
	{ "huge lines, too many regions, huge file", test_huge_input },
	{ "random edits: no crash, accepted plans round-trip", test_mutations },
	{ "writer refuses what the reader would", test_writer_refuses },
	{ "check: hard and soft keys", test_check },
	{ "planner decisions on a fixture db", test_planner_decisions },
	{ "golden plan, determinism, kp_plans", test_golden_and_store },
	{ "cli: check / show exit codes", test_cli_check },
	{ "resnet18 trace: step planned as a graph", test_resnet18 },
	CU_TEST_INFO_NULL,
};
