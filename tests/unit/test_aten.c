/*
 * test_aten.c - the torch fusion groups shipped with a plan (PLAN.aten,
 * plan/aten_groups.c): the reader against the fixture the Python writer's
 * test also produces (tests/fixtures/aten/groups.aten), its refusals, and
 * their coverage by the signature (plan/sign.c), `kplan check` and `kplan
 * show`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <CUnit/CUnit.h>
#include "common/hash.h"
#include "common/strbuf.h"
#include "plan/aten_groups.h"
#include "plan/planfile.h"
#include "plan/sign.h"
#include "testutil.h"

#define FIXTURE "tests/fixtures/aten/groups.aten"

static const char src_1[] =
	"// kplan ATen chain\nextern \"C\" __global__ void kp_aten_a(float *y) {}\n";
static const char src_2[] =
	"// kplan ATen chain\nextern \"C\" __global__ void kp_aten_b(float *y) {}\n";

static void test_parse_fixture(void)
{
	struct kp_err err = {0};
	struct kp_aten_groups *g;
	size_t len;
	char *text = kp_test_read(kp_test_src(FIXTURE), &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	g = kp_aten_groups_parse(text, len, "groups.aten", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(g->plan_hash, 0x5c1f0d0e8a9b7c6dULL);
	CU_ASSERT_EQUAL_FATAL(g->n_groups, 2);
	CU_ASSERT_STRING_EQUAL(g->groups[0].region, "decode");
	CU_ASSERT_EQUAL(g->groups[0].key, 0x0123456789abcdefULL);
	CU_ASSERT_EQUAL(g->groups[0].exact, 1);
	CU_ASSERT_EQUAL(g->groups[0].outputs, 2);
	CU_ASSERT_STRING_EQUAL(g->groups[0].shape, "1x1x3072");
	CU_ASSERT_STRING_EQUAL(g->groups[0].kernel, "kp_aten_00112233aabbccdd");
	CU_ASSERT_STRING_EQUAL(g->groups[0].source, "kpaten-1111111111111111.cu");
	CU_ASSERT_EQUAL(g->groups[0].source_hash, 0x1111111111111111ULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(g->groups[0].ops, "aten::pow.Tensor_Scalar -> aten::tanh"));
	/* escapes decoded, numerics read */
	CU_ASSERT_STRING_EQUAL(g->groups[1].region, "step 2%");
	CU_ASSERT_EQUAL(g->groups[1].exact, 0);
	CU_ASSERT_EQUAL(g->groups[1].id, 2);
	/* the cost model's figures (version 2) */
	CU_ASSERT_EQUAL(g->format_version, 2);
	CU_ASSERT_EQUAL(g->groups[0].saved_kernels, 2);
	CU_ASSERT_EQUAL(g->groups[0].saved_bytes, 24576);
	CU_ASSERT_EQUAL(g->groups[0].gain_ns, 2016);
	CU_ASSERT_EQUAL(g->groups[1].gain_ns, 1008);
	CU_ASSERT_EQUAL(g->groups[0].per_call, 12);
	CU_ASSERT_EQUAL(g->groups[1].per_call, 1);
	kp_aten_groups_free(g);
	kp_aten_groups_free(NULL);
	free(text);
}

/* Version 1 (no cost figures) is still read; its groups' gains are unknown */
static void test_parse_version_1(void)
{
	struct kp_err err = {0};
	struct kp_aten_groups *g;
	struct kp_strbuf sb = KP_STRBUF_INIT;
	size_t len;
	char *text = kp_test_read(kp_test_src("tests/fixtures/aten/groups-v1.aten"), &len), *at;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	g = kp_aten_groups_parse(text, len, "v1.aten", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(g->format_version, 1);
	CU_ASSERT_EQUAL_FATAL(g->n_groups, 2);
	CU_ASSERT_EQUAL(g->groups[0].gain_ns, -1);
	CU_ASSERT_EQUAL(g->groups[1].saved_bytes, -1);
	CU_ASSERT_EQUAL(g->groups[1].per_call, -1);
	kp_aten_groups_free(g);
	/* a version 2 field in a version 1 file */
	at = strstr(text, "outputs 1\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	kp_strbuf_add(&sb, text, (size_t)(at - text));
	kp_strbuf_adds(&sb, "gain-ns 5\n");
	kp_strbuf_adds(&sb, at);
	CU_ASSERT_PTR_NULL(kp_aten_groups_parse(sb.buf, sb.len, "v1.aten", &err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown field 'gain-ns' (format version 1 has none)"));
	kp_strbuf_release(&sb);
	free(text);
}

/* The fixture with line `from` (a prefix) replaced by `to` ("" drops it):
 * the parse's code, err filled. */
static int parse_edited(const char *from, const char *to, struct kp_err *err)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_aten_groups *g;
	char *text = kp_test_read(kp_test_src(FIXTURE), NULL), *at, *eol;
	int rc = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	at = strstr(text, from);
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	eol = strchr(at, '\n');
	kp_strbuf_add(&sb, text, (size_t)(at - text));
	kp_strbuf_adds(&sb, to);
	if (*to)
		kp_strbuf_addch(&sb, '\n');
	kp_strbuf_adds(&sb, eol + 1);
	memset(err, 0, sizeof(*err));
	g = kp_aten_groups_parse(sb.buf, sb.len, "e.aten", err);
	if (!g)
		rc = err->code;
	kp_aten_groups_free(g);
	kp_strbuf_release(&sb);
	free(text);
	return rc;
}

static void test_parse_refusals(void)
{
	struct kp_err err;

	CU_ASSERT_EQUAL(parse_edited("kplan-aten-groups 2", "kplan-aten-groups 3", &err),
			KP_EVERSION);
	CU_ASSERT_EQUAL(parse_edited("kplan-aten-groups 2", "kplan-aten-groups 0", &err),
			KP_EVERSION);
	CU_ASSERT_EQUAL(parse_edited("kplan-aten-groups 2", "kplan-plan 2", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("gain-ns 1008", "", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "group 2: missing field 'gain-ns'"));
	CU_ASSERT_EQUAL(parse_edited("saved-bytes 12288", "saved-bytes -1", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("saved-kernels 1", "saved-kernels 01", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("saved-kernels 2", "saved-kernels 65", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("gain-ns 2016", "gain-ns 99999999999999999999", &err),
			KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("per-call 12", "per-call 0", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "per-call: expected an integer 1..1000000"));
	CU_ASSERT_EQUAL(parse_edited("plan-hash", "", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "before 'plan-hash'"));
	CU_ASSERT_EQUAL(parse_edited("source-hash 2222", "", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "group 2: missing field 'source-hash'"));
	CU_ASSERT_EQUAL(parse_edited("source-hash 1111", "", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "group 1: missing field 'source-hash'"));
	CU_ASSERT_EQUAL(parse_edited("key 0123", "key 0123456789ABCDEF", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "e.aten:7: key: expected 16"));
	CU_ASSERT_EQUAL(parse_edited("[group 2]", "[group 3]", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("numerics exact", "numerics fast", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("outputs 2", "outputs 65", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("kernel kp_aten_0011", "kernel kp-aten", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("source kpaten-1111", "source ../evil.cu", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("source kpaten-1111", "source .hidden.cu", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("region decode", "region a%0Ab", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("region decode", "region a%4", &err), KP_EFORMAT);
	CU_ASSERT_EQUAL(parse_edited("shape 1x1", "colour red", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown field 'colour'"));
	CU_ASSERT_EQUAL(parse_edited("shape 1x1", "region again", &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "given twice"));
	/* the fixture itself, unedited, parses */
	CU_ASSERT_EQUAL(parse_edited("shape 1x1", "shape 1x1x3072", &err), 0);
}

/*
 * The golden plan with two torch fusion groups beside it, in a directory of
 * its own (name): PLAN.aten pinned to the plan's body-hash and both
 * sources. Returns the plan's path; signed with key when not NULL.
 */
static const char *aten_fixture(const char *name, const char *key)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p;
	const char *plan, *src1, *src2;
	char *text = kp_test_read(kp_test_src("tests/golden/planner_fixture.kplan"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	kp_test_sh("mkdir -p '%s'", kp_test_path(name));
	kp_strbuf_addf(&sb, "%s/model.kplan", name);
	plan = kp_test_path(sb.buf);
	kp_test_write(plan, text, -1);
	free(text);
	p = kp_plan_load(plan, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	kp_strbuf_reset(&sb);
	kp_strbuf_addf(&sb, "%s/kpaten-%016llx.cu", name,
		       (unsigned long long)kp_hash64(src_1, strlen(src_1), KP_HASH_SEED));
	src1 = kp_test_path(sb.buf);
	kp_strbuf_reset(&sb);
	kp_strbuf_addf(&sb, "%s/kpaten-%016llx.cu", name,
		       (unsigned long long)kp_hash64(src_2, strlen(src_2), KP_HASH_SEED));
	src2 = kp_test_path(sb.buf);
	kp_test_write(src1, src_1, -1);
	kp_test_write(src2, src_2, -1);
	kp_strbuf_reset(&sb);
	kp_strbuf_addf(&sb, "kplan-aten-groups 2\nplan-hash %016llx\n",
		       (unsigned long long)p->body_hash);
	kp_strbuf_addf(&sb, "\n[group 1]\nregion step\nkey 0000000000000001\nnumerics exact\n"
		       "ops aten::mul.Tensor -> aten::tanh\nshape 4x768\ninputs f16 full 4x768 s768,1\n"
		       "outputs 1\nkernel kp_aten_a\nsource kpaten-%016llx.cu\nsource-hash %016llx\n"
		       "saved-kernels 1\nsaved-bytes 12288\ngain-ns 1008\nper-call 1\n",
		       (unsigned long long)kp_hash64(src_1, strlen(src_1), KP_HASH_SEED),
		       (unsigned long long)kp_hash64(src_1, strlen(src_1), KP_HASH_SEED));
	kp_strbuf_addf(&sb, "\n[group 2]\nregion step\nkey 0000000000000002\nnumerics exact\n"
		       "ops aten::silu -> aten::mul.Tensor\nshape 4x768\ninputs f16 full 4x768 s768,1\n"
		       "outputs 1\nkernel kp_aten_b\nsource kpaten-%016llx.cu\nsource-hash %016llx\n"
		       "saved-kernels 1\nsaved-bytes 6144\ngain-ns 1004\nper-call 1\n",
		       (unsigned long long)kp_hash64(src_2, strlen(src_2), KP_HASH_SEED),
		       (unsigned long long)kp_hash64(src_2, strlen(src_2), KP_HASH_SEED));
	{
		struct kp_strbuf ap = KP_STRBUF_INIT;

		kp_aten_groups_path(plan, &ap);
		kp_test_write(ap.buf, sb.buf, (long)sb.len);
		kp_strbuf_release(&ap);
	}
	kp_plan_free(p);
	kp_strbuf_release(&sb);
	if (key)
		CU_ASSERT_EQUAL(kp_plan_sign(plan, key, NULL, &err), 0);
	return plan;
}

/* The plan at path as it is now, read into *buf, *len and parsed into *p
 * (NULL when it does not parse): 0 or the code of the read. */
static int load(const char *path, char **buf, size_t *len, struct kp_plan **p,
		struct kp_err *err)
{
	int rc;

	memset(err, 0, sizeof(*err));
	if ((rc = kp_plan_read(path, buf, len, err)))
		return rc;
	*p = kp_plan_parse(*buf, *len, path, err);
	return 0;
}

/* kp_plan_verify of the plan at path as it is now; aten_sha may be NULL */
static int verify(const char *path, const struct kp_sign_key *key, struct kp_strbuf *aten_sha,
		  struct kp_err *err)
{
	struct kp_plan *p;
	char *buf;
	size_t len;
	int rc;

	if ((rc = load(path, &buf, &len, &p, err)))
		return rc;
	rc = p ? kp_plan_verify(path, buf, len, p, key, 1, NULL, NULL, aten_sha, err) : KP_EFORMAT;
	kp_plan_free(p);
	free(buf);
	return rc;
}

/* kp_plan_sign_message of the plan at path into msg: 0 or the code */
static int message(const char *path, struct kp_strbuf *msg, struct kp_err *err)
{
	struct kp_plan *p;
	char *buf;
	size_t len;
	int rc;

	if ((rc = load(path, &buf, &len, &p, err)))
		return rc;
	kp_strbuf_reset(msg);
	rc = p ? kp_plan_sign_message(path, buf, len, p, msg, err) : KP_EFORMAT;
	kp_plan_free(p);
	free(buf);
	return rc;
}

/* Flip one byte of the file at path (at offset at from the end when < 0), or put it back. */
static void flip(const char *path, long at)
{
	size_t len;
	char *b = kp_test_read(path, &len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	b[at < 0 ? (long)len + at : at] ^= 0x01;
	kp_test_write(path, b, (long)len);
	free(b);
}

static void test_sign_covers_groups(void)
{
	struct kp_strbuf msg = KP_STRBUF_INIT, sha = KP_STRBUF_INIT, ap = KP_STRBUF_INIT;
	struct kp_sign_key key;
	struct kp_err err;
	const char *k1 = kp_test_fresh_key("a1.key", &key), *plan = aten_fixture("sig", k1);
	char src1[4200];
	size_t plain_len;

	snprintf(src1, sizeof(src1), "%s/kpaten-%016llx.cu", kp_test_path("sig"),
		 (unsigned long long)kp_hash64(src_1, strlen(src_1), KP_HASH_SEED));
	kp_aten_groups_path(plan, &ap);
	CU_ASSERT_EQUAL(verify(plan, &key, &sha, &err), 0);
	/* the digests handed out are the sources' */
	CU_ASSERT_EQUAL_FATAL(sha.len, 2 * KP_SIGN_SHA256_BYTES);
	/* the message names PLAN.aten and both sources */
	CU_ASSERT_EQUAL(message(plan, &msg, &err), 0);
	CU_ASSERT_PTR_NOT_NULL(memmem(msg.buf, msg.len, "model.kplan.aten", 17));
	CU_ASSERT_PTR_NOT_NULL(memmem(msg.buf, msg.len, "kpaten-", 7));
	/* the source changed after signing: named */
	flip(src1, -2);
	CU_ASSERT_EQUAL(verify(plan, &key, NULL, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "torch fusion group 1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "source file changed"));
	CU_ASSERT_EQUAL(message(plan, &msg, &err), KP_EMISMATCH);   /* kplan check's path */
	flip(src1, -2);
	CU_ASSERT_EQUAL(verify(plan, &key, NULL, &err), 0);
	/* a missing source */
	rename(src1, kp_test_path("moved.cu"));
	CU_ASSERT_EQUAL(verify(plan, &key, NULL, &err), KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kpaten-"));
	rename(kp_test_path("moved.cu"), src1);
	/* PLAN.aten edited (a group's shape): the signature breaks */
	flip(ap.buf, -30);
	CU_ASSERT_NOT_EQUAL(verify(plan, &key, NULL, &err), 0);
	flip(ap.buf, -30);
	CU_ASSERT_EQUAL(verify(plan, &key, NULL, &err), 0);
	/* PLAN.aten removed after signing: the message changes, so does the verdict */
	rename(ap.buf, kp_test_path("moved.aten"));
	CU_ASSERT_EQUAL(verify(plan, &key, NULL, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad signature"));
	CU_ASSERT_EQUAL(message(plan, &msg, &err), 0);
	plain_len = msg.len;
	rename(kp_test_path("moved.aten"), ap.buf);
	CU_ASSERT_EQUAL(message(plan, &msg, &err), 0);
	CU_ASSERT(msg.len > plain_len);
	kp_strbuf_release(&msg);
	kp_strbuf_release(&sha);
	kp_strbuf_release(&ap);
}

static void test_stale_groups(void)
{
	struct kp_strbuf msg = KP_STRBUF_INIT, ap = KP_STRBUF_INIT;
	struct kp_err err;
	const char *plan = aten_fixture("stale", NULL);
	size_t len;
	char *text;

	kp_aten_groups_path(plan, &ap);
	CU_ASSERT_EQUAL(message(plan, &msg, &err), 0);
	/* groups found with another plan */
	text = kp_test_read(ap.buf, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	{
		char *d = text + strlen("kplan-aten-groups 2\nplan-hash ");

		*d = *d == '0' ? '1' : '0';
	}
	kp_test_write(ap.buf, text, (long)len);
	CU_ASSERT_EQUAL(message(plan, &msg, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "found with another plan"));
	/* malformed */
	kp_test_write(ap.buf, "kplan-aten-groups 2\nnonsense\n", -1);
	CU_ASSERT_EQUAL(message(plan, &msg, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "model.kplan.aten:2"));
	free(text);
	kp_strbuf_release(&msg);
	kp_strbuf_release(&ap);
}

static void test_cli_check_show(void)
{
	const char *k = kp_test_kplan(), *log = kp_test_path("aten.log");
	const char *key = kp_test_fresh_key("cli-a.key", NULL), *plan = aten_fixture("cli", NULL);
	const char *gpu = "--cc 9.0 --cuda-major 13";
	char src2[4200];

	snprintf(src2, sizeof(src2), "%s/kpaten-%016llx.cu", kp_test_path("cli"),
		 (unsigned long long)kp_hash64(src_2, strlen(src_2), KP_HASH_SEED));
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' >'%s'", k, plan, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^torch fusion groups: 2 ' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '  2  step 4x768, 1 written, bit-exact, kpaten-' '%s'",
				   log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'aten::silu -> aten::mul.Tensor' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s sign '%s' --key '%s' >/dev/null", k, plan, key), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s --trust '%s.pub' >'%s' 2>&1", k, plan, gpu,
				   key, log), 0);
	/* a changed source: check fails naming it, with or without a trust key */
	flip(src2, 3);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >'%s' 2>&1", k, plan, gpu, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'torch fusion group 2.*source file changed' '%s'", log),
			0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s --trust '%s.pub' >/dev/null 2>&1", k, plan,
				   gpu, key), 2);
	flip(src2, 3);
	/* a missing source */
	CU_ASSERT_EQUAL(kp_test_sh("mv '%s' '%s.x'", src2, src2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s >/dev/null 2>&1", k, plan, gpu), 2);
	CU_ASSERT_EQUAL(kp_test_sh("mv '%s.x' '%s'", src2, src2), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s --trust '%s.pub' >/dev/null 2>&1", k, plan,
				   gpu, key), 0);
}

/*
 * kplan precompile: every source of the groups compiled by libkplanrt's
 * NVRTC path for the named compute capabilities into the kernel cache (no
 * GPU needed); a second run finds them there; a changed source is refused.
 * Skipped where NVRTC cannot be loaded or libkplanrt is not built (`make`).
 */
static void test_cli_precompile(void)
{
	const char *k = kp_test_kplan(), *log = kp_test_path("pre.log");
	const char *plan = aten_fixture("pre", NULL), *cache = kp_test_path("pre-cache");
	char src1[4200];

	snprintf(src1, sizeof(src1), "%s/kpaten-%016llx.cu", kp_test_path("pre"),
		 (unsigned long long)kp_hash64(src_1, strlen(src_1), KP_HASH_SEED));
	kp_test_sh("rm -rf '%s' && mkdir -m 700 '%s'", cache, cache);
	if (kp_test_sh("KPLAN_CACHE_DIR='%s' %s precompile '%s' --cc 9.0 --cc 8.0 >'%s' 2>&1",
		       cache, k, plan, log) &&
	    !kp_test_sh("grep -q 'cannot load NVRTC\\|cannot load libkplanrt' '%s'", log)) {
		fprintf(stderr, "(no NVRTC or no built libkplanrt: kplan precompile not checked) ");
		return;
	}
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^2 sources, 2 compute capabilities' '%s'", log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("test $(ls '%s' | grep -c -- '-sm90-nvrtc.*\\.cubin$') = 2 && "
				   "test $(ls '%s' | grep -c -- '-sm80-nvrtc.*\\.cubin$') = 2",
				   cache, cache), 0);
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CACHE_DIR='%s' %s precompile '%s' --cc 9.0 >'%s' 2>&1",
				   cache, k, plan, log), 0);
	CU_ASSERT_EQUAL(kp_test_sh("test $(grep -c 'sm_90 already in the cache' '%s') = 2", log), 0);
	/* the default: the plan's compute capability */
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CACHE_DIR='%s' %s precompile '%s' | grep -q "
				   "'1 compute capabilities'", cache, k, plan), 0);
	flip(src1, 3);
	CU_ASSERT_EQUAL(kp_test_sh("KPLAN_CACHE_DIR='%s' %s precompile '%s' >'%s' 2>&1", cache, k,
				   plan, log), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'source file changed' '%s'", log), 0);
	flip(src1, 3);
	CU_ASSERT_EQUAL(kp_test_sh("%s precompile '%s' --cc 9 2>/dev/null", k, plan), 64);
}

CU_TestInfo kp_tests_aten[] = {
	{ "PLAN.aten: the fixture the Python writer produces", test_parse_fixture },
	{ "PLAN.aten: version 1 read, its gains unknown", test_parse_version_1 },
	{ "PLAN.aten: refusals name the line and field", test_parse_refusals },
	{ "sign: PLAN.aten and its sources covered, digests handed out", test_sign_covers_groups },
	{ "sign/check: groups of another plan, malformed file", test_stale_groups },
	{ "cli: show lists the groups, check fails on a changed or missing source",
	  test_cli_check_show },
	{ "cli: precompile fills the kernel cache without a GPU", test_cli_precompile },
	CU_TEST_INFO_NULL,
};
