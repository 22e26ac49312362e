/*
 * test_bundle.c - plan/bundle.c: the bundle index, duplicates, one model per
 * bundle, the order in which an entry is chosen for a GPU, saving with
 * fused sources, one signature over every entry; and the CLI verbs
 * (kplan bundle, show, check, sign) on a bundle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <CUnit/CUnit.h>

#include "common/hash.h"
#include "common/strbuf.h"
#include "plan/bundle.h"
#include "plan/planfile.h"
#include "plan/sign.h"
#include "testutil.h"

static const char src_text[] = "// fused\nextern \"C\" __global__ void f(void) {}\n";

/* What a test plan is made for; warmup tells plans of one GPU apart. */
struct target {
	int cc_major;
	const char *gpu;         /* NULL: unknown */
	int sms, driver;
	const char *model;       /* NULL: not pinned */
	int warmup;
	int fused;               /* 1: a fusion group whose source is kpfuse-b.cu */
};

/*
 * The text of a one-region plan for t (malloc'd, *len set): a fixture as
 * text, with its header's length and checksum computed as the writer does.
 */
static char *plan_text(const struct target *t, size_t *len)
{
	struct kp_strbuf body = KP_STRBUF_INIT, out = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p;

	kp_strbuf_addf(&body, "[hard]\ncompute-capability %d.0\ncuda-major 13\n", t->cc_major);
	if (t->model)
		kp_strbuf_addf(&body, "for %s\n", t->model);
	kp_strbuf_addf(&body, "\n[soft]\ngpu-name %s\nsm-count %d\ndriver-version %d\n\n"
		       "[info]\ntool-version test\nsource-run 0\nsource-kind synthetic\ndate -\n"
		       "run-eager-ns 0\nrun-pred-ns 0\nspeedup-pred 0.0000\n"
		       "graph-mem-budget-bytes 0\n\n"
		       "[region step]\ndecision graph\nreason launch-bound\nreason-text -\n"
		       "fingerprint 0000000000000000\nkernels 2\nnodes 2\noccurrences 10\n"
		       "shape-keys 1\nwarmup %d\nbreak-even 0\neager-ns 0\ngraph-ns 0\n"
		       "one-time-ns 0\nspeedup-pred 0.0000\nmem-budget-bytes 0\n",
		       t->gpu ? t->gpu : "-", t->sms, t->driver, t->warmup);
	if (t->fused)
		kp_strbuf_addf(&body, "\n[fusion 1]\nregion step\nfirst-kernel 0\nkernels 2\n"
			       "names a -> b\ngain-ns 0\nscore 0.0000\nsource kpfuse-b.cu\n"
			       "source-hash %016llx\nnumerics exact\n", (unsigned long long)
			       kp_hash64(src_text, strlen(src_text), KP_HASH_SEED));
	kp_strbuf_addf(&out, "kplan-plan %d\nbody-bytes %zu\nbody-hash %016llx\n",
		       t->model ? 3 : 2, body.len,
		       (unsigned long long)kp_hash64(body.buf, body.len, KP_HASH_SEED));
	kp_strbuf_add(&out, body.buf, body.len);
	kp_strbuf_release(&body);
	p = kp_plan_parse(out.buf, out.len, "fixture", &err);
	if (!p)
		fprintf(stderr, "fixture: %s\n", err.msg);
	CU_ASSERT_PTR_NOT_NULL(p);
	kp_plan_free(p);
	return kp_strbuf_detach(&out, len);
}

/* kp_bundle_add of t's plan: its code */
static int add(struct kp_bundle *b, const struct target *t, int replace, struct kp_strbuf *notes,
	       struct kp_err *err)
{
	size_t len;
	char *text = plan_text(t, &len);
	int rc = kp_bundle_add(b, text, len, kp_test_path("in.kplan"), replace, notes, err);

	free(text);
	return rc;
}

/* A bundle of the n targets, added in that order */
static struct kp_bundle *bundle_of(const struct target *t, size_t n)
{
	struct kp_bundle *b = kp_bundle_new();
	struct kp_err err = {0};
	size_t i;

	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(add(b, &t[i], 0, NULL, &err), 0);
	return b;
}

/* A GPU description */
static struct kp_gpu_desc gpu(int cc_major, const char *name, int sms, int driver)
{
	struct kp_gpu_desc g;

	kp_gpu_desc_init(&g);
	g.cc_major = cc_major;
	g.cc_minor = 0;
	g.cuda_major = 13;
	g.name = name;
	g.sm_count = sms;
	g.driver_version = driver;
	return g;
}

/* The warmup of the entry b chooses for g (the tests' tag), -1: none */
static int chosen(const struct kp_bundle *b, struct kp_gpu_desc g, int *match)
{
	struct kp_bundle_choice c;

	kp_bundle_choose(b, &g, &c);
	if (match)
		*match = c.match;
	return c.entry < 0 ? -1 : (int)b->entries[c.entry].plan->regions[0].warmup;
}

static const struct target fleet[] = {
	{ 9, "NVIDIA H100 80GB HBM3", 132, 13000, NULL, 1, 0 },
	{ 9, "NVIDIA H200", 132, 13000, NULL, 2, 0 },
	{ 9, "NVIDIA H200", 114, 13010, NULL, 3, 0 },
	{ 8, "NVIDIA A100-SXM4-80GB", 108, 13000, NULL, 4, 0 },
	{ 9, NULL, 0, 0, NULL, 5, 0 },
};
#define N_FLEET (sizeof(fleet) / sizeof(fleet[0]))

/* The documented order: name and SMs, name, SMs, hard keys; then driver, then first */
static void test_choice_order(void)
{
	struct target rev[N_FLEET];
	struct kp_strbuf w1 = KP_STRBUF_INIT, w2 = KP_STRBUF_INIT;
	struct kp_bundle *b, *r;
	struct kp_err err = {0};
	size_t i;
	int m;

	for (i = 0; i < N_FLEET; i++)
		rev[i] = fleet[N_FLEET - 1 - i];
	b = bundle_of(fleet, N_FLEET);
	r = bundle_of(rev, N_FLEET);
	/* the order plans are given in changes nothing: same bytes, same choices */
	CU_ASSERT_EQUAL(kp_bundle_write(b, &w1, &err), 0);
	CU_ASSERT_EQUAL(kp_bundle_write(r, &w2, &err), 0);
	CU_ASSERT_EQUAL_FATAL(w1.len, w2.len);
	CU_ASSERT_EQUAL(memcmp(w1.buf, w2.buf, w1.len), 0);
	for (i = 0; i < 2; i++) {
		const struct kp_bundle *x = i ? r : b;

		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA H200", 132, 13000), &m), 2);
		CU_ASSERT_EQUAL(m, KP_BUNDLE_M_EXACT);
		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA H200", 114, 13000), &m), 3);
		CU_ASSERT_EQUAL(m, KP_BUNDLE_M_EXACT);
		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA H100 80GB HBM3", 132, -1), &m), 1);
		/* same name, other SM count: the one with the GPU's driver, else the first */
		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA H200", 100, 13010), &m), 3);
		CU_ASSERT_EQUAL(m, KP_BUNDLE_M_NAME);
		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA H200", 100, 13000), &m), 2);
		/* neither: the first, and entries are sorted (114 SMs before 132) */
		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA H200", -1, -1), &m), 3);
		/* an unknown name with the SM count of two: the first of them (H100) */
		CU_ASSERT_EQUAL(chosen(x, gpu(9, "NVIDIA GH200", 132, -1), &m), 1);
		CU_ASSERT_EQUAL(m, KP_BUNDLE_M_SMS);
		/* the hard keys only: the first entry that applies */
		CU_ASSERT_EQUAL(chosen(x, gpu(9, NULL, -1, -1), &m), 5);
		CU_ASSERT_EQUAL(m, KP_BUNDLE_M_HARD);
		CU_ASSERT_EQUAL(chosen(x, gpu(8, "NVIDIA H200", 132, 13000), &m), 4);
	}
	kp_strbuf_release(&w1);
	kp_strbuf_release(&w2);
	kp_bundle_free(b);
	kp_bundle_free(r);
}

/* No entry applies: -1, and why each does not */
static void test_no_match(void)
{
	struct kp_bundle *b = bundle_of(fleet, 2);
	struct kp_gpu_desc g = gpu(10, "NVIDIA B200", 148, 13000);
	struct kp_bundle_choice c;

	CU_ASSERT_EQUAL(kp_bundle_choose(b, &g, &c), -1);
	CU_ASSERT_EQUAL(c.match, KP_BUNDLE_M_NONE);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.why, "no entry applies"));
	CU_ASSERT_PTR_NOT_NULL(strstr(c.v[0].why, "plan wants 9.0, gpu has 10.0"));
	CU_ASSERT_EQUAL(c.v[1].match, KP_BUNDLE_M_NONE);
	/* the CUDA major is a hard key too */
	g = gpu(9, "NVIDIA H200", 132, 12000);
	g.cuda_major = 12;
	CU_ASSERT_EQUAL(kp_bundle_choose(b, &g, &c), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.v[1].why, "cuda-major"));
	/* and so is the model the application runs, for pinned plans */
	kp_bundle_free(b);
	{
		struct target t = { 9, "NVIDIA H200", 132, 13000, "m@1", 2, 0 };

		b = bundle_of(&t, 1);
		g = gpu(9, "NVIDIA H200", 132, 13000);
		g.model = "m@2";
		CU_ASSERT_EQUAL(kp_bundle_choose(b, &g, &c), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.v[0].why, "for:"));
		g.model = "m@1";
		CU_ASSERT_EQUAL(kp_bundle_choose(b, &g, &c), 0);
	}
	kp_bundle_free(b);
}

/* The same plan twice: once; another plan for one GPU: refused, or replaces */
static void test_duplicates(void)
{
	struct kp_strbuf notes = KP_STRBUF_INIT, text = KP_STRBUF_INIT;
	struct target h200b = fleet[1];
	struct kp_bundle *b = bundle_of(fleet, 2), *p;
	struct kp_err err = {0};
	char *dup;

	CU_ASSERT_EQUAL(add(b, &fleet[1], 0, &notes, &err), 0);
	CU_ASSERT_EQUAL(b->n_entries, 2);
	CU_ASSERT_PTR_NOT_NULL(notes.buf && strstr(notes.buf, "kept once"));
	h200b.warmup = 7;
	h200b.driver = 13010;      /* another driver is still the same GPU */
	CU_ASSERT_EQUAL(add(b, &h200b, 0, NULL, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "another plan for the same GPU"));
	CU_ASSERT_EQUAL(b->n_entries, 2);
	CU_ASSERT_EQUAL(add(b, &h200b, 1, &notes, &err), 0);
	CU_ASSERT_EQUAL(b->n_entries, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(notes.buf, "replaces"));
	CU_ASSERT_EQUAL(chosen(b, gpu(9, "NVIDIA H200", 132, 13000), NULL), 7);
	/* an index holding one GPU twice is refused by the reader */
	CU_ASSERT_EQUAL(kp_bundle_write(b, &text, &err), 0);
	dup = strstr(text.buf, "gpu-name NVIDIA H100 80GB HBM3");
	CU_ASSERT_PTR_NOT_NULL_FATAL(dup);
	{
		/* entry 1 re-made for the H200 (same length name: same bytes count) */
		struct target t = fleet[0];
		size_t l1, l2;
		char *e1, *e2;

		t.gpu = "NVIDIA H200";
		t.sms = 132;
		e1 = plan_text(&fleet[0], &l1);
		e2 = plan_text(&t, &l2);
		kp_strbuf_reset(&text);
		kp_strbuf_addf(&text, "kplan-bundle 1\nentries 2\nentry 1 bytes %zu\n", l2);
		kp_strbuf_add(&text, e2, l2);
		kp_strbuf_addf(&text, "entry 2 bytes %zu\n", b->entries[1].len);
		kp_strbuf_add(&text, b->entries[1].bytes, b->entries[1].len);
		kp_strbuf_adds(&text, "end\n");
		p = kp_bundle_parse(text.buf, text.len, "dup", &err);
		CU_ASSERT_PTR_NULL(p);
		CU_ASSERT_EQUAL(err.code, KP_EMISMATCH);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the same GPU as entry 1"));
		kp_bundle_free(p);
		free(e1);
		free(e2);
	}
	kp_strbuf_release(&notes);
	kp_strbuf_release(&text);
	kp_bundle_free(b);
}

/* One bundle, one model: pinned to two models, or pinned and not, refused */
static void test_models(void)
{
	struct target a = fleet[0], c = fleet[1];
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_bundle *b = kp_bundle_new(), *p;
	struct kp_err err = {0};
	size_t la, lc;
	char *ta, *tc;

	a.model = "gpt2@1";
	c.model = "gpt2@2";
	CU_ASSERT_EQUAL(add(b, &a, 0, NULL, &err), 0);
	CU_ASSERT_EQUAL(add(b, &c, 1, NULL, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "one bundle holds one model"));
	CU_ASSERT_EQUAL(add(b, &fleet[1], 1, NULL, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "(not pinned)"));
	c.model = "gpt2@1";
	CU_ASSERT_EQUAL(add(b, &c, 0, NULL, &err), 0);
	CU_ASSERT_EQUAL(b->n_entries, 2);
	/* the reader refuses such an index too */
	c.model = "gpt2@2";
	ta = plan_text(&a, &la);
	tc = plan_text(&c, &lc);
	kp_strbuf_addf(&text, "kplan-bundle 1\nentries 2\nentry 1 bytes %zu\n", la);
	kp_strbuf_add(&text, ta, la);
	kp_strbuf_addf(&text, "entry 2 bytes %zu\n", lc);
	kp_strbuf_add(&text, tc, lc);
	kp_strbuf_adds(&text, "end\n");
	p = kp_bundle_parse(text.buf, text.len, "models", &err);
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_EQUAL(err.code, KP_EMISMATCH);
	kp_bundle_free(p);
	free(ta);
	free(tc);
	kp_strbuf_release(&text);
	kp_bundle_free(b);
}

/* The index: bad version, truncated, appended, miscounted, a bad entry */
static void test_index_format(void)
{
	struct kp_strbuf text = KP_STRBUF_INIT, bad = KP_STRBUF_INIT;
	struct kp_bundle *b = bundle_of(fleet, 2), *p;
	struct kp_err err = {0};
	const char *e2;
	size_t n;

	CU_ASSERT_EQUAL(kp_bundle_write(b, &text, &err), 0);
	p = kp_bundle_parse(text.buf, text.len, "ok", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->n_entries, 2);
	CU_ASSERT_EQUAL(memcmp(p->entries[0].bytes, b->entries[0].bytes, b->entries[0].len), 0);
	kp_bundle_free(p);
	/* cut anywhere: refused */
	for (n = 0; n < text.len; n += 7) {
		p = kp_bundle_parse(text.buf, n, "cut", &err);
		CU_ASSERT_PTR_NULL(p);
		kp_bundle_free(p);
	}
	kp_strbuf_add(&bad, text.buf, text.len);
	kp_strbuf_adds(&bad, "x\n");
	CU_ASSERT_PTR_NULL(kp_bundle_parse(bad.buf, bad.len, "appended", &err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "after 'end'"));
	kp_strbuf_reset(&bad);
	kp_strbuf_adds(&bad, "kplan-bundle 2\n");
	kp_strbuf_add(&bad, strchr(text.buf, '\n') + 1, text.len - 15);
	CU_ASSERT_PTR_NULL(kp_bundle_parse(bad.buf, bad.len, "v2", &err));
	CU_ASSERT_EQUAL(err.code, KP_EVERSION);
	kp_strbuf_reset(&bad);
	kp_strbuf_adds(&bad, "kplan-bundle 1\nentries 3\n");
	kp_strbuf_add(&bad, strstr(text.buf, "entry 1"), text.len - (size_t)(strstr(text.buf,
				"entry 1") - text.buf));
	CU_ASSERT_PTR_NULL(kp_bundle_parse(bad.buf, bad.len, "count", &err));
	CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
	/* a flipped byte inside entry 2's plan: its checksum names the entry */
	kp_strbuf_reset(&bad);
	kp_strbuf_add(&bad, text.buf, text.len);
	e2 = strstr(bad.buf, "entry 2 bytes");
	CU_ASSERT_PTR_NOT_NULL_FATAL(e2);
	bad.buf[(size_t)(e2 - bad.buf) + 120] ^= 0x01;
	CU_ASSERT_PTR_NULL(kp_bundle_parse(bad.buf, bad.len, "flip", &err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "flip: entry 2"));
	CU_ASSERT_PTR_NULL(kp_bundle_parse("", 0, "empty", &err));
	p = kp_bundle_new();
	CU_ASSERT_EQUAL(kp_bundle_write(p, &bad, &err), KP_EINVAL);
	kp_bundle_free(p);
	kp_strbuf_release(&text);
	kp_strbuf_release(&bad);
	kp_bundle_free(b);
}

/* Add t's plan to the bundle at dir (a new one when there is none) and save it */
static int add_and_save(const char *dir, const struct target *t, int *unsigned_now)
{
	struct kp_err err = {0};
	struct kp_bundle *b = kp_bundle_is(dir) ? kp_bundle_load(dir, NULL, NULL, &err) :
			      kp_bundle_new();
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	rc = add(b, t, 1, NULL, &err);
	if (!rc)
		rc = kp_bundle_save(b, dir, unsigned_now, &err);
	kp_bundle_free(b);
	return rc;
}

/* kp_bundle_verify of the bundle at dir as it is now: 0 or the code (err) */
static int verify_dir(const char *dir, const struct kp_sign_key *key, struct kp_err *err)
{
	struct kp_bundle *b;
	char *bytes;
	size_t len;
	int rc;

	b = kp_bundle_load(dir, &bytes, &len, err);
	if (!b)
		return err->code;
	rc = kp_bundle_verify(b, bytes, len, key, 1, NULL, NULL, NULL, err);
	kp_bundle_free(b);
	free(bytes);
	return rc;
}

/*
 * Saving copies the fused sources in; adding keeps the other entries; one
 * signature covers every entry: one entry tampered (checksum recomputed)
 * or a source changed makes the whole bundle fail verification.
 */
static void test_save_sign_tamper(void)
{
	struct target fused = fleet[0], h200 = fleet[1];
	struct kp_strbuf text = KP_STRBUF_INIT, msg = KP_STRBUF_INIT;
	struct kp_sign_key key;
	struct kp_err err = {0};
	const char *dir = kp_test_path("save.kplanb"), *in = kp_test_path("in.kplan");
	const char *keypath = kp_test_path("bundle.key");
	char pub[4200], src[4200], path[4200], *bytes, *t;
	struct kp_bundle *b;
	size_t len, tl;
	int unsigned_now = 1;

	kp_test_sh("rm -rf '%s' '%s' '%s.pub'", dir, keypath, keypath);
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(keypath, NULL, &err), 0);
	snprintf(pub, sizeof(pub), "%s.pub", keypath);
	CU_ASSERT_EQUAL_FATAL(kp_sign_load_public(pub, &key, &err), 0);
	kp_test_write(kp_test_path("kpfuse-b.cu"), src_text, -1);
	fused.fused = 1;
	CU_ASSERT_EQUAL(add_and_save(dir, &fused, &unsigned_now), 0);
	CU_ASSERT_EQUAL(unsigned_now, 0);
	snprintf(src, sizeof(src), "%s/kpfuse-b.cu", dir);
	CU_ASSERT_EQUAL(access(src, R_OK), 0);
	CU_ASSERT(kp_bundle_is(dir));
	CU_ASSERT(!kp_bundle_is(in));
	/* add a GPU: the other entry stays */
	CU_ASSERT_EQUAL(add_and_save(dir, &h200, NULL), 0);
	CU_ASSERT_EQUAL(verify_dir(dir, &key, &err), KP_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bundle is unsigned"));
	CU_ASSERT_EQUAL(kp_bundle_sign(dir, keypath, NULL, &err), 0);
	CU_ASSERT_EQUAL(verify_dir(dir, &key, &err), 0);
	/* the message covers the index, both entries, and the source */
	b = kp_bundle_load(dir, &bytes, &len, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(b->n_entries, 2);
	CU_ASSERT_EQUAL(kp_bundle_sign_message(b, bytes, len, &msg, &err), 0);
	CU_ASSERT(msg.len > len + strlen("kpfuse-b.cu") + 32);
	free(bytes);
	/* entry 2 (the H200's, no source) re-made with another warm-up: its
	 * checksum holds, the bundle's signature does not */
	h200.warmup = 9;
	t = plan_text(&h200, &tl);
	free(b->entries[1].bytes);
	b->entries[1].bytes = t;
	b->entries[1].len = tl;
	CU_ASSERT_EQUAL(kp_bundle_write(b, &text, &err), 0);
	kp_bundle_free(b);
	snprintf(path, sizeof(path), "%s/bundle", dir);
	kp_test_write(path, text.buf, (long)text.len);
	CU_ASSERT_EQUAL(verify_dir(dir, &key, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad signature"));
	/* signed again, then entry 1's source changed: untrusted, named */
	CU_ASSERT_EQUAL(kp_bundle_sign(dir, keypath, NULL, &err), 0);
	kp_test_write(src, "// evil\n", -1);
	CU_ASSERT_EQUAL(verify_dir(dir, &key, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kpfuse-b.cu: source file changed"));
	kp_test_write(src, src_text, -1);
	/* a change removes the signature (it would not verify) */
	h200.warmup = 10;
	CU_ASSERT_EQUAL(add_and_save(dir, &h200, &unsigned_now), 0);
	CU_ASSERT_EQUAL(unsigned_now, 1);
	snprintf(path, sizeof(path), "%s/bundle.sig", dir);
	CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
	/* a source changed inside the bundle: the next save refuses it */
	kp_test_write(src, "// other\n", -1);
	CU_ASSERT_EQUAL(add_and_save(dir, &fused, NULL), KP_EMISMATCH);
	kp_strbuf_release(&text);
	kp_strbuf_release(&msg);
}

/* kplan bundle / show / check / sign on a bundle, and their exit codes */
static void test_cli(void)
{
	const char *k = kp_test_kplan(), *dir = kp_test_path("cli.kplanb");
	const char *h100 = kp_test_path("cli-h100.kplan"), *h200 = kp_test_path("cli-h200.kplan");
	const char *other = kp_test_path("cli-other.kplan"), *key = kp_test_path("cli.key");
	const char *out = kp_test_path("cli.out");
	struct target pinned = fleet[0];
	size_t len;
	char *t;

	kp_test_sh("rm -rf '%s' '%s' '%s.pub'", dir, key, key);
	t = plan_text(&fleet[0], &len);
	kp_test_write(h100, t, (long)len);
	free(t);
	t = plan_text(&fleet[1], &len);
	kp_test_write(h200, t, (long)len);
	free(t);
	pinned.model = "m@1";
	t = plan_text(&pinned, &len);
	kp_test_write(other, t, (long)len);
	free(t);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' >/dev/null", k, dir, h200), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' '%s' > '%s'", k, dir, h100, h100, out),
			0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '2 entries (1 before)' '%s'", out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' 2>/dev/null", k, dir, other), 2);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' 2>/dev/null", k, dir), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' > '%s'", k, dir, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '#2 NVIDIA H200, 132 SMs' '%s' && grep -q unsigned '%s'",
				   out, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' --entry 2 | grep -q 'plan '", k, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' "
				   "--sms 132 --driver 13000 > '%s'", k, dir, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'entry #2 NVIDIA H200.*gpu-name and sm-count match' '%s'"
				   " && grep -q '#1 NVIDIA H100.*not chosen' '%s'", out, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H20' "
				   ">/dev/null", k, dir), 1);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 8.0 --cuda-major 13 > '%s'", k, dir, out), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'no entry applies' '%s'", out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s keygen -o '%s' >/dev/null && %s sign '%s' --key '%s' "
				   ">/dev/null", k, key, k, dir, key), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s.pub' --cc 9.0 --cuda-major 13 | "
				   "grep -q 'signature ok (all 2 entries)'", k, dir, key), 0);
	/* a hand edit of one entry (the checksum already refuses it) */
	CU_ASSERT_EQUAL(kp_test_sh("sed -i 's/^warmup 2$/warmup 3/' '%s/bundle' && %s check '%s' "
				   "--trust '%s.pub' --cc 9.0 --cuda-major 13 >/dev/null 2>&1",
				   dir, k, dir, key), 2);
}

/*
 * Write t's plan to the test file name, with torch fusion groups beside it
 * (name.aten, version 2) whose sources are srcs[0..n): one group each.
 * plan_hash 0: the plan's body-hash (else another plan's: stale groups).
 */
static void plan_with_groups(const char *name, const struct target *t, const char *const *srcs,
			     int n, uint64_t plan_hash)
{
	struct kp_strbuf sb = KP_STRBUF_INIT, path = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_plan *p;
	size_t len;
	char *text = plan_text(t, &len);
	int i;

	kp_test_write(kp_test_path(name), text, (long)len);
	p = kp_plan_parse(text, len, name, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	kp_strbuf_addf(&sb, "kplan-aten-groups 2\nplan-hash %016llx\n",
		       (unsigned long long)(plan_hash ? plan_hash : p->body_hash));
	for (i = 0; i < n; i++) {
		uint64_t h = kp_hash64(srcs[i], strlen(srcs[i]), KP_HASH_SEED);

		kp_strbuf_addf(&sb, "\n[group %d]\nregion step\nkey %016llx\nnumerics exact\n"
			       "ops aten::mul.Tensor -> aten::tanh\nshape 4x768\n"
			       "inputs f16 full 4x768 s768,1\noutputs 1\nkernel kp_aten_a\n"
			       "source kpaten-%016llx.cu\nsource-hash %016llx\nsaved-kernels 1\n"
			       "saved-bytes 12288\ngain-ns 1008\nper-call 1\n", i + 1, (unsigned long long)i + 1,
			       (unsigned long long)h, (unsigned long long)h);
		kp_strbuf_reset(&path);
		kp_strbuf_addf(&path, "kpaten-%016llx.cu", (unsigned long long)h);
		kp_test_write(kp_test_path(path.buf), srcs[i], -1);
	}
	kp_strbuf_reset(&path);
	kp_strbuf_addf(&path, "%s.aten", name);
	kp_test_write(kp_test_path(path.buf), sb.buf, (long)sb.len);
	kp_plan_free(p);
	free(text);
	kp_strbuf_release(&sb);
	kp_strbuf_release(&path);
}

/*
 * A bundle carries each entry's torch fusion groups (plan-<hash>.aten) and
 * their sources, once each; the one signature covers them (a tampered
 * group file or source: untrusted, named); kplan show and check list them;
 * groups found with another plan are refused.
 */
static void test_torch_groups(void)
{
	static const char *const a[] = { "// a\nextern \"C\" __global__ void kp_aten_a() {}\n",
					 "// shared\nextern \"C\" __global__ void kp_aten_a() {}\n" };
	static const char *const c[] = { "// c\nextern \"C\" __global__ void kp_aten_a() {}\n",
					 "// shared\nextern \"C\" __global__ void kp_aten_a() {}\n" };
	const char *k = kp_test_kplan(), *dir = kp_test_path("tg.kplanb");
	const char *key = kp_test_path("tg.key"), *out = kp_test_path("tg.out");
	const char *gpu = "--cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H200' --sms 132";
	struct kp_strbuf aten[2] = { KP_STRBUF_INIT, KP_STRBUF_INIT }, p0 = KP_STRBUF_INIT;
	struct kp_sign_key pub;
	struct kp_err err = {0};
	struct kp_bundle *b;
	char pubpath[4200], *bytes;
	size_t len;
	int i;

	kp_test_sh("rm -rf '%s' '%s' '%s.pub' '%s' && mkdir -m 700 '%s'", dir, key, key,
		   kp_test_path("tgc"), kp_test_path("tgc"));
	plan_with_groups("tg-h100.kplan", &fleet[0], a, 2, 0);
	plan_with_groups("tg-h200.kplan", &fleet[1], c, 2, 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' '%s' > '%s'", k, dir,
				   kp_test_path("tg-h100.kplan"), kp_test_path("tg-h200.kplan"), out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("test $(grep -c ', 2 torch fusion groups$' '%s') = 2", out), 0);
	/* two group files, three sources (the shared one once) */
	CU_ASSERT_EQUAL(kp_test_sh("test $(ls '%s' | grep -c '^plan-[0-9a-f]*\\.aten$') = 2 && "
				   "test $(ls '%s' | grep -c '^kpaten-.*\\.cu$') = 3", dir, dir), 0);
	/* show lists them per entry, --entry N in full */
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' > '%s'", k, dir, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("test $(grep -c '2 torch fusion groups (plan-' '%s') = 2", out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s show '%s' --entry 2 > '%s'", k, dir, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^torch fusion groups: 2 (.*/plan-' '%s' && grep -q "
				   "'gain 1.0 us per occurrence (1 kernel, 12.0 KiB saved), 1 per call' '%s'",
				   out, out), 0);
	/* signed: the one signature covers the groups; check lists the chosen entry's */
	CU_ASSERT_EQUAL_FATAL(kp_sign_keygen(key, NULL, &err), 0);
	snprintf(pubpath, sizeof(pubpath), "%s.pub", key);
	CU_ASSERT_EQUAL_FATAL(kp_sign_load_public(pubpath, &pub, &err), 0);
	CU_ASSERT_EQUAL(kp_bundle_sign(dir, key, NULL, &err), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s' %s > '%s'", k, dir, pubpath, gpu,
				   out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'signature ok' '%s' && grep -q '  torch fusion groups: "
				   "2 ' '%s'", out, out), 0);
	/* the digests of each entry's group sources, as signed */
	b = kp_bundle_load(dir, &bytes, &len, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(kp_bundle_verify(b, bytes, len, &pub, 1, NULL, NULL, aten, &err), 0);
	CU_ASSERT_EQUAL(aten[0].len, 2 * KP_SIGN_SHA256_BYTES);
	CU_ASSERT_EQUAL(aten[1].len, 2 * KP_SIGN_SHA256_BYTES);
	kp_bundle_aten_path(b, 0, &p0);
	kp_bundle_free(b);
	free(bytes);
	/* precompile: every entry's sources (skipped without NVRTC) */
	if (!kp_test_sh("KPLAN_CACHE_DIR='%s' %s precompile '%s' > '%s' 2>&1", kp_test_path("tgc"),
			k, dir, out) ||
	    kp_test_sh("grep -q 'cannot load NVRTC\\|cannot load libkplanrt' '%s'", out))
		CU_ASSERT_EQUAL(kp_test_sh("grep -q '^4 sources of 2 entries, each for its entry' '%s' "
					   "&& test $(ls '%s' | grep -c -- '-sm90-.*\\.cubin$') = 3",
					   out, kp_test_path("tgc")), 0);
	/* a group file edited: the signature breaks */
	CU_ASSERT_EQUAL(kp_test_sh("sed -i 's/^shape 4x768$/shape 8x768/' '%s'", p0.buf), 0);
	CU_ASSERT_EQUAL(verify_dir(dir, &pub, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad signature"));
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --trust '%s' %s >/dev/null 2>&1", k, dir, pubpath,
				   gpu), 2);
	CU_ASSERT_EQUAL(kp_test_sh("sed -i 's/^shape 8x768$/shape 4x768/' '%s'", p0.buf), 0);
	CU_ASSERT_EQUAL(verify_dir(dir, &pub, &err), 0);
	/* a group file removed: the message changes */
	CU_ASSERT_EQUAL(kp_test_sh("mv '%s' '%s.x'", p0.buf, p0.buf), 0);
	CU_ASSERT_EQUAL(verify_dir(dir, &pub, &err), KP_EMISMATCH);
	CU_ASSERT_EQUAL(kp_test_sh("mv '%s.x' '%s'", p0.buf, p0.buf), 0);
	/* a group source changed in the bundle: named */
	CU_ASSERT_EQUAL(kp_test_sh("for f in '%s'/kpaten-*.cu; do echo '// evil' >> \"$f\"; done",
				   dir), 0);
	CU_ASSERT_EQUAL(verify_dir(dir, &pub, &err), KP_EMISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "torch fusion group"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "source file changed"));
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' %s 2>&1 | grep -q 'source file changed'", k, dir,
				   gpu), 0);
	/* groups found with another plan are not bundled */
	plan_with_groups("tg-stale.kplan", &fleet[2], a, 1, 0x1234);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' 2> '%s'", k, kp_test_path("tg2.kplanb"),
				   kp_test_path("tg-stale.kplan"), out), 2);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q 'found with another plan' '%s'", out), 0);
	for (i = 0; i < 2; i++)
		kp_strbuf_release(&aten[i]);
	kp_strbuf_release(&p0);
}

/*
 * A new plan for a GPU the bundle has replaces that entry, and its old
 * torch fusion groups file goes with it (the sources stay: others may share
 * them); files of other shapes in the directory are left alone.
 */
static void test_replaced_groups_pruned(void)
{
	static const char *const a[] = { "// a\nextern \"C\" __global__ void kp_aten_a() {}\n" };
	static const char *const a2[] = { "// a2\nextern \"C\" __global__ void kp_aten_a() {}\n" };
	struct target h100b = fleet[0];
	const char *k = kp_test_kplan(), *dir = kp_test_path("pr.kplanb");
	const char *out = kp_test_path("pr.out");

	h100b.warmup = 5;      /* another plan for the same GPU */
	kp_test_sh("rm -rf '%s'", dir);
	plan_with_groups("pr-h100.kplan", &fleet[0], a, 1, 0);
	plan_with_groups("pr-h200.kplan", &fleet[1], a, 1, 0);
	plan_with_groups("pr-h100b.kplan", &h100b, a2, 1, 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' '%s' > '%s'", k, dir,
				   kp_test_path("pr-h100.kplan"), kp_test_path("pr-h200.kplan"), out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("touch '%s/plan-notahash.aten' '%s/plan-0123456789abcdef.aten.bak'",
				   dir, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("ls '%s' | grep '^plan-[0-9a-f]\\{16\\}\\.aten$' | sort > '%s.before'",
				   dir, out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' > '%s'", k, dir,
				   kp_test_path("pr-h100b.kplan"), out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^1 torch fusion group file of replaced entries removed$' "
				   "'%s'", out), 0);
	/* still two group files, one of them new; the odd names untouched */
	CU_ASSERT_EQUAL(kp_test_sh("test $(ls '%s' | grep -c '^plan-[0-9a-f]*\\.aten$') = 2 && "
				   "test $(ls '%s' | grep '^plan-[0-9a-f]\\{16\\}\\.aten$' | sort | "
				   "comm -12 - '%s.before' | wc -l) = 1 && test -f '%s/plan-notahash.aten' "
				   "&& test -f '%s/plan-0123456789abcdef.aten.bak'", dir, dir, out, dir, dir), 0);
	/* the old source stays, the bundle checks */
	CU_ASSERT_EQUAL(kp_test_sh("test $(ls '%s' | grep -c '^kpaten-.*\\.cu$') = 2", dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("%s check '%s' --cc 9.0 --cuda-major 13 --gpu-name 'NVIDIA H100 "
				   "80GB HBM3' --sms 132 > '%s' 2>&1", k, dir, out), 0);
	/* saved again unchanged: nothing to remove, nothing said */
	CU_ASSERT_EQUAL(kp_test_sh("%s bundle -o '%s' '%s' > '%s'", k, dir,
				   kp_test_path("pr-h100b.kplan"), out), 0);
	CU_ASSERT_EQUAL(kp_test_sh("! grep -q 'removed' '%s'", out), 0);
}

CU_TestInfo kp_tests_bundle[] = {
	{ "choice order: name and SMs, name, SMs, hard keys; driver; first", test_choice_order },
	{ "no entry applies: each says why", test_no_match },
	{ "duplicates: kept once, refused, or replacing", test_duplicates },
	{ "entries of different models refused", test_models },
	{ "index format: version, truncated, appended, counts", test_index_format },
	{ "save with sources, add a GPU, one signature, a tampered entry", test_save_sign_tamper },
	{ "cli: bundle, show, check, sign", test_cli },
	{ "torch fusion groups: carried per entry, signed, listed", test_torch_groups },
	{ "torch fusion groups of a replaced entry removed", test_replaced_groups_pruned },
	CU_TEST_INFO_NULL,
};
