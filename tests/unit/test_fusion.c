/*
 * test_fusion.c - the fusion catalog reader (errors, hostile input), code
 * generation (golden files tests/golden/fusion/NAME.cu; KPLAN_UPDATE_GOLDEN=1
 * rewrites them), the argument mapping and feasibility rules, planning from
 * a kernel trace, and the runtime's fusion half (runtime/fused_load.c) with fake
 * ops: source hash, chain lookup, shape and alias checks, the fused node's
 * arguments, failures that leave the graph unfused.
 */
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "../../common/hash.h"
#include "../../fusion/catalog.h"
#include "../../fusion/generate.h"
#include "../../plan/planfile.h"
#include "../../runtime/fcache.h"
#include "../../runtime/fused_load.h"

static struct kp_fx_catalog *shipped(void)
{
	struct kp_err err = {0};
	struct kp_fx_catalog *cat = kp_fx_catalog_load(kp_test_src("fusion/catalog/examples.kpcat"), &err);

	if (!cat)
		fprintf(stderr, "\n%s\n", err.msg);
	return cat;
}

static const struct kp_fx_kernel *by_name(const struct kp_fx_catalog *cat, const char *name)
{
	size_t i;

	for (i = 0; i < cat->n_kernels; i++)
		if (!strcmp(cat->kernels[i].name, name))
			return &cat->kernels[i];
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* catalog */

static void test_catalog_shipped(void)
{
	struct kp_fx_catalog *cat = shipped();
	const struct kp_fx_kernel *k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	CU_ASSERT_EQUAL(cat->n_kernels, 12);
	/* a GEMV: the dot, then its output statement */
	k = by_name(cat, "decode_gemv_3072");
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_EQUAL(k->dot_k, 3072);
	CU_ASSERT_EQUAL(k->dot_w, 0);
	CU_ASSERT_EQUAL(k->dot_x, 1);
	CU_ASSERT(k->params[0].is_const);
	CU_ASSERT(!k->params[1].is_const);
	CU_ASSERT_EQUAL(k->stmts[0].kind, KP_FX_S_DOT);
	CU_ASSERT_STRING_EQUAL(k->stmts[0].name, "acc");
	CU_ASSERT_EQUAL(k->n_stmts, 2);
	CU_ASSERT_PTR_EQUAL(kp_fx_catalog_find(cat, "_Z4gemvILi3072E6__halfLb0EEvPKS0_S2_PT0_ii"), k);
	CU_ASSERT_PTR_EQUAL(kp_fx_catalog_find(cat, "void gemv<3072, __half, true>(__half const*, "
					       "__half const*, __half*, int, int)"), k);
	/* the LM head's f32 output is another kernel */
	CU_ASSERT_PTR_NULL(kp_fx_catalog_find(cat, "_Z4gemvILi768EfLb1EEvPK6__halfS2_PT0_ii"));
	k = kp_fx_catalog_find(cat, "_Z9layernormPKfPfS0_S0_i");
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_STRING_EQUAL(k->name, "layernorm");
	CU_ASSERT_EQUAL(k->n_params, 5);
	CU_ASSERT_EQUAL(k->params[4].type, KP_FX_I32);
	CU_ASSERT_EQUAL(k->rows.kind[0], KP_FX_T_GRIDX);
	CU_ASSERT(k->has_reduce);
	CU_ASSERT_EQUAL(k->n_stmts, 3);
	CU_ASSERT_EQUAL(k->stmts[1].red_op, KP_FX_R_MEAN);
	/* demangled trace names match too, other element types do not */
	CU_ASSERT_PTR_EQUAL(kp_fx_catalog_find(cat,
		"bias_residual(float*, float const*, float const*, int, int)"),
		by_name(cat, "mlp_bias_residual"));
	/* the fp16 decode kernels have their own entries; an f32 overload matches none */
	CU_ASSERT_PTR_EQUAL(kp_fx_catalog_find(cat, "ew(int, __half*, __half const*, __half const*, float, int)"),
			    by_name(cat, "decode_ew"));
	CU_ASSERT_PTR_EQUAL(kp_fx_catalog_find(cat, "_Z2ewiP6__halfPKS_S2_fi"), by_name(cat, "decode_ew"));
	CU_ASSERT_PTR_NULL(kp_fx_catalog_find(cat, "ew(int, float*, float const*, float const*, float, int)"));
	CU_ASSERT_PTR_NULL(kp_fx_catalog_find(cat, "_Z2ewiPfPKfS1_fi"));
	k = by_name(cat, "decode_layernorm");
	CU_ASSERT_EQUAL(k->layout_block, 128);
	CU_ASSERT_EQUAL(k->layout_vec, 8);
	CU_ASSERT_EQUAL(k->params[0].type, KP_FX_PTR_F16);
	k = by_name(cat, "decode_attn_mask");
	CU_ASSERT_EQUAL(k->stride, 1024);
	CU_ASSERT_EQUAL(k->params[1].type, KP_FX_PTR_I32);
	CU_ASSERT_PTR_NULL(kp_fx_catalog_find(cat, "bias_residual"));
	k = by_name(cat, "mlp_bias_residual");
	CU_ASSERT_EQUAL(k->rows.op, '/');
	CU_ASSERT_EQUAL(k->rows.v[0], 3);
	CU_ASSERT_EQUAL(k->rows.v[1], 4);
	kp_fx_catalog_free(cat);
}

static void test_catalog_errors(void)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "kernel a\nmatch a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = x[i]\n",
		  "cat:6: kernel 'a': field 'end': file ends inside the kernel" },
		{ "match a\n", "cat:1: field 'keyword': expected 'kernel NAME'" },
		{ "kernel a\nbogus 1\nend\n", "cat:2: kernel 'a': field 'keyword': unknown keyword 'bogus'" },
		{ "kernel a\nparam 0 x f64*\nend\n", "cat:2: kernel 'a': field 'param': type: expected" },
		{ "kernel a\nparam 0 x f32*\nparam 0 y f32*\n", "cat:3: kernel 'a': field 'param': position 0 declared twice" },
		{ "kernel a\nparam 0 x f32*\nparam 1 x f32*\n", "field 'param': parameter name 'x' used twice" },
		{ "kernel a\nparam 0 row i32\n", "field 'param': name: expected an identifier" },
		{ "kernel a\nparam 40 x i32\n", "field 'param': position: expected 0..31, found '40'" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = q\n",
		  "cat:5: kernel 'a': field 'out': unknown name 'q'" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = x\n", "must be indexed" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = x[j]\n", "index of 'x': expected i, col, row or 0" },
		{ "kernel a\nparam 0 x f16*\nparam 1 p i32*\nrows 1\ncols 4\nout x[i] = p[i]\n",
		  "an i32* tensor is read as p[0] only" },
		{ "kernel a\nparam 0 x f16*\nparam 1 p i32*\nrows 1\ncols 4\nout p[i] = 1\n",
		  "with BUF an f32* or f16* parameter" },
		{ "kernel a\nparam 0 x f16*\nrows 1\ncols 4\nlayout 100 8\n", "BLOCK: expected a multiple of 32" },
		{ "kernel a\nparam 0 x f16*\nrows 1\ncols 4\nlayout 128 0\n", "VEC: expected 1..16, found 0" },
		{ "kernel a\nparam 0 x f16*\nrows 1\ncols 4\nlayout 128\n", "expected 'layout BLOCK VEC'" },
		{ "kernel a\nparam 0 x f16*\nlayout 128 8\nlayout 128 8\n", "field 'layout': given twice" },
		{ "kernel a\nparam 0 x f16*\nstride 0\n", "field 'stride': expected a constant 1..2^40" },
		{ "kernel a\nparam 0 x f16*\nrows 1\ncols 4\nlet m x[i] * 2\n", "a let is one value per row" },
		{ "kernel a\nparam 0 x f16*\nrows 1\ncols 4\nlet m col\n", "a let is one value per row" },
		{ "kernel a\nparam 0 x f16*\nrows 1\ncols 4\nreduce s sum x[i]\nlet s 2\n", "name 's' already used" },
		{ "kernel a\nparam 0 x f16*\nstride n\n", "field 'stride': expected a constant" },
		{ "kernel a\nparam 0 x f16*\nstride 8 9\n", "unexpected text after 'stride N'" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = system(x[i])\n", "unknown function 'system'" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = fmaxf(x[i])\n", "fmaxf takes 2 arguments, found 1" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = (x[i]\n", "expected ')'" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = x[i] x[i]\n", "after the expression" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = 1.5e\n", "bad number" },
		{ "kernel a\nparam 0 x f32*\nparam 1 n i32\nrows 1\ncols 4\nout n[i] = 1\n", "with BUF an f32* or f16* parameter" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[col] = 1\n", "stores are elementwise" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols x\n", "field 'cols': parameter 'x' is not an integer" },
		{ "kernel a\nparam 0 x f32*\nrows 1 / 2 / 3\n", "at most two terms" },
		{ "kernel a\nparam 0 x f32*\nrows 0\n", "expected an integer 1..2^40" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nreduce s avg x[i]\n", "operation: expected sum" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = s\nreduce s sum x[i]\n", "unknown name 's'" },
		{ "kernel a\nmatch a\nparam 1 x f32*\nrows 1\ncols 4\nout x[i] = 1\nend\n",
		  "field 'end': parameter position 0 not declared" },
		{ "kernel a\nparam 0 x f32*\nrows 1\ncols 4\nout x[i] = 1\nend\n", "field 'end': no 'match' line" },
		{ "kernel a\nmatch a\nparam 0 x f32*\nrows 1\nout x[i] = 1\nend\n", "'rows' and 'cols' are required" },
		{ "kernel a\nmatch a\nparam 0 x f32*\nrows 1\ncols 1\nend\n", "no 'out' statement" },
		{ "kernel a\nmatch a\\b\n", "backslash in the pattern" },
		{ "kernel a\nmatch a\x01\n", "cat:2: kernel 'a': field 'line': control or non-ASCII byte 0x01" },
		{ "kernel a\nmatch a\nparam 0 x f32*\nrows 1\ncols 1\nout x[i] = 1\nend\nkernel a\n",
		  "cat:8: field 'kernel': kernel 'a' defined twice (first at line 1)" },
		{ "kernel a\nkernel b\n", "'kernel' inside kernel 'a'" },
		/* dot kernels */
		{ "kernel a\nparam 0 w f16* konst\n", "expected nothing or 'const'" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\nout y[i] = 1\ndot s w x 256\n", "'dot' is the kernel's first statement" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\ndot s w x 256\ndot t w x 256\n", "'dot' is the kernel's first statement" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\ndot s w x 100\n", "K: expected a multiple of 256" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\ndot s w x n\n", "K: expected a multiple of 256" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\ndot s w q 256\n", "X: expected a tensor parameter, found 'q'" },
		{ "kernel a\nparam 0 w f16*\nparam 1 x f32*\nrows 1\ncols 1\ndot s w x 256\n",
		  "W and X must have the same element type" },
		{ "kernel a\nparam 0 w f32*\nparam 1 x f32*\nrows 1\ncols 1\ndot s w x 192\n",
		  "K: expected a multiple of 128" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\ndot w w x 256\n", "name 'w' already used" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\ndot s w x 256\nout y[i] = s\nend\n", "needs 'layout BLOCK 8'" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\nlayout 128 8\ndot s w x 256\nout y[i] = s + x[col]\nend\n",
		  "[i] and [0] loads only" },
		{ "kernel a\nmatch a\nparam 0 w f16* const\nparam 1 x f16*\nparam 2 y f16*\nrows 4\ncols 1\nlayout 128 8\ndot s w x 256\nreduce q sum x[i]\nout y[i] = s\nend\n",
		  "no 'reduce' or 'stride'" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kp_err err = {0};
		struct kp_fx_catalog *cat = kp_fx_catalog_parse(cases[i].text, strlen(cases[i].text),
								"cat", &err);

		CU_ASSERT_PTR_NULL(cat);
		CU_ASSERT_EQUAL(err.code, KP_EFORMAT);
		if (!strstr(err.msg, cases[i].want)) {
			fprintf(stderr, "\ncase %zu: want '%s', got '%s'\n", i, cases[i].want, err.msg);
			CU_FAIL("error message");
		}
		kp_fx_catalog_free(cat);
	}
}

static void test_catalog_limits(void)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp_fx_catalog *cat;
	int i;

	/* nesting deeper than the limit is refused, not a stack overflow */
	kp_strbuf_adds(&sb, "kernel a\nmatch a\nparam 0 x f32*\nrows 1\ncols 1\nout x[i] = ");
	for (i = 0; i < 200; i++)
		kp_strbuf_addch(&sb, '(');
	kp_strbuf_adds(&sb, "1");
	for (i = 0; i < 200; i++)
		kp_strbuf_addch(&sb, ')');
	kp_strbuf_adds(&sb, "\nend\n");
	cat = kp_fx_catalog_parse(sb.buf, sb.len, "deep", &err);
	CU_ASSERT_PTR_NULL(cat);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nested deeper than"));
	/* too many nodes */
	kp_strbuf_reset(&sb);
	kp_strbuf_adds(&sb, "kernel a\nmatch a\nparam 0 x f32*\nrows 1\ncols 1\nout x[i] = 1");
	for (i = 0; i < 300; i++)
		kp_strbuf_adds(&sb, "+1");
	kp_strbuf_adds(&sb, "\nend\n");
	cat = kp_fx_catalog_parse(sb.buf, sb.len, "big", &err);
	CU_ASSERT_PTR_NULL(cat);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than 256 nodes"));
	/* long line */
	kp_strbuf_reset(&sb);
	for (i = 0; i < 1100; i++)
		kp_strbuf_addch(&sb, '#');
	cat = kp_fx_catalog_parse(sb.buf, sb.len, "long", &err);
	CU_ASSERT_PTR_NULL(cat);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "long:1: field 'line': line longer than 1024"));
	kp_strbuf_release(&sb);
}

/* Mutations of the shipped catalog: never a crash, an error or a catalog. */
static void test_catalog_hostile(void)
{
	size_t len, i;
	char *orig = kp_test_read(kp_test_src("fusion/catalog/examples.kpcat"), &len);
	char *buf;
	uint64_t rnd = 0x1234567;
	int ok = 0, bad = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
	buf = malloc(len);
	for (i = 0; i < 3000; i++) {
		struct kp_err err = {0};
		struct kp_fx_catalog *cat;
		size_t n = len, m, j;

		memcpy(buf, orig, len);
		for (j = 0, m = 1 + (size_t)(rnd % 4); j < m; j++) {
			rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
			buf[(rnd >> 33) % len] = (char)(rnd >> 17);
		}
		if (i % 3 == 0)
			n = (size_t)(rnd >> 40) % len;
		cat = kp_fx_catalog_parse(buf, n, "fuzz", &err);
		if (cat) {
			ok++;
			kp_fx_catalog_free(cat);
		} else {
			bad++;
			CU_ASSERT(err.code == KP_EFORMAT);
			CU_ASSERT(!strncmp(err.msg, "fuzz:", 5));
		}
	}
	CU_ASSERT(ok > 0 && bad > 0);
	free(buf);
	free(orig);
}

/* ---------------------------------------------------------------------- */
/* code generation */

static void golden(const char *name, const struct kp_fx_group *g)
{
	char rel[128];
	const char *path;
	size_t n;
	char *want;

	snprintf(rel, sizeof(rel), "tests/golden/fusion/%s.cu", name);
	path = kp_test_src(rel);
	if (getenv("KPLAN_UPDATE_GOLDEN")) {
		kp_test_sh("mkdir -p '%s'", kp_test_src("tests/golden/fusion"));
		CU_ASSERT_EQUAL(kp_test_write(path, g->source.buf, (long)g->source.len), 0);
		fprintf(stderr, "\nupdated %s\n", path);
	}
	want = kp_test_read(path, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(want);
	CU_ASSERT_EQUAL(n, g->source.len);
	CU_ASSERT(n == g->source.len && !memcmp(want, g->source.buf, n));
	free(want);
}

static void test_gen_rows(void)
{
	struct kp_fx_catalog *cat = shipped();
	const struct kp_fx_kernel *chain[2];
	struct kp_fx_group g, g2;
	struct kp_err err = {0};

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	chain[0] = by_name(cat, "mlp_bias_residual");
	chain[1] = by_name(cat, "layernorm");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g, &err), 0);
	CU_ASSERT_EQUAL(g.scheme, KP_FX_SCHEME_ROWS);
	CU_ASSERT_EQUAL(g.phases, 3);   /* sum(x) with the residual, var, normalise */
	/* mapping: x t b of bias_residual, x y g b of layernorm; sizes n, d are shapes only */
	CU_ASSERT_EQUAL_FATAL(g.n_args, 7);
	CU_ASSERT(g.args[0].kernel == 0 && g.args[0].param == 0 && g.args[0].size == 8);
	CU_ASSERT(g.args[2].kernel == 0 && g.args[2].param == 2);
	CU_ASSERT(g.args[3].kernel == 1 && g.args[3].param == 0);
	CU_ASSERT(g.args[6].kernel == 1 && g.args[6].param == 3);
	/* access modes for the alias checks */
	CU_ASSERT_EQUAL_FATAL(g.n_access, 7);
	CU_ASSERT_STRING_EQUAL(g.access[0].mode, "iw");
	CU_ASSERT_STRING_EQUAL(g.access[2].mode, "c");
	CU_ASSERT_STRING_EQUAL(g.access[4].mode, "w");
	/* the residual's value feeds the mean from a register when x is shared */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "const float kp_l2 = (k1_x == k0_x ? kp_v0_0 : (k1_x == k0_t ? kp_l1 : (k1_x == k0_x ? kp_l0 : k1_x[i])));"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_acc1_mean += kp_l2;"));
	/* stores after the phase's loads: k0_x[i] is written after layer norm read x */
	CU_ASSERT(strstr(g.source.buf, "k0_x[i] = kp_v0_0;") > strstr(g.source.buf, "kp_acc1_mean += kp_l2;"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "const float k1_mean = kp_block_sum(kp_acc1_mean, kp_sh) / (float)cols;"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "((k0_x == k0_t ? kp_l1 : kp_l0) + (kp_l1 + k0_b[col]))"));
	CU_ASSERT_EQUAL(g.source_hash, kp_hash64(g.source.buf, g.source.len, KP_HASH_SEED));
	CU_ASSERT(!strncmp(g.file, "kpfuse-", 7));
	/* deterministic */
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g2, &err), 0);
	CU_ASSERT_EQUAL(g.source_hash, g2.source_hash);
	golden("bias_residual_layernorm", &g);
	kp_fx_group_release(&g2);
	/* PDL: consumers may launch before this grid waits for its producers;
	 * KPLAN_FUSION_PDL_EARLY=0 puts the trigger after the wait */
	CU_ASSERT(strstr(g.source.buf, "griddepcontrol.launch_dependents") <
		  strstr(g.source.buf, "griddepcontrol.wait"));
	setenv("KPLAN_FUSION_PDL_EARLY", "0", 1);
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g2, &err), 0);
	unsetenv("KPLAN_FUSION_PDL_EARLY");
	CU_ASSERT_PTR_NOT_NULL(strstr(g2.source.buf, "griddepcontrol.wait"));
	CU_ASSERT(strstr(g2.source.buf, "griddepcontrol.launch_dependents") >
		  strstr(g2.source.buf, "griddepcontrol.wait"));
	CU_ASSERT_NOT_EQUAL(g.source_hash, g2.source_hash);
	kp_fx_group_release(&g2);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(cat);
}

static void test_gen_elementwise(void)
{
	struct kp_fx_catalog *cat = shipped();
	const struct kp_fx_kernel *chain[3];
	struct kp_fx_group g;
	struct kp_err err = {0};

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	chain[0] = by_name(cat, "mlp_copy");
	chain[1] = by_name(cat, "mlp_bias_residual");
	chain[2] = by_name(cat, "mlp_bias_gelu");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 3, &g, &err), 0);
	CU_ASSERT_EQUAL(g.scheme, KP_FX_SCHEME_ELEMENTWISE);
	CU_ASSERT_EQUAL(g.phases, 1);
	CU_ASSERT_EQUAL(g.n_args, 2 + 3 + 2);
	/* register chain: gelu's input is the residual's value when u == x */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf,
		"const float kp_l3 = (k2_u == k1_x ? kp_v1_0 : (k2_u == k1_t ? kp_l2 : (k2_u == k1_x ? kp_l1 : "
		"(k2_u == k0_dst ? kp_v0_0 : (k2_u == k0_src ? kp_l0 : k2_u[i])))));"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_gelu_tanh((kp_l3 + k2_b[col]))"));
	/* each tensor read once, the stores at the end of the element */
	CU_ASSERT(strstr(g.source.buf, "k2_u[i] = kp_v2_0;") > strstr(g.source.buf, "kp_gelu_tanh("));
	CU_ASSERT_PTR_NULL(strstr(g.source.buf, "kp_block_sum"));
	golden("copy_residual_gelu", &g);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(cat);
}

/* examples/decode's fp16 chains: f16 loads and stores, the kernels' own
 * reduction layout, a padded row stride and a device scalar */
static void test_gen_f16(void)
{
	struct kp_fx_catalog *cat = shipped();
	const struct kp_fx_kernel *chain[8];
	struct kp_fx_group g;
	struct kp_err err = {0};
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	/* the residual add, then layer norm: block 128, 8 columns per thread */
	chain[0] = by_name(cat, "decode_ew");
	chain[1] = by_name(cat, "decode_layernorm");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g, &err), 0);
	CU_ASSERT_EQUAL(g.scheme, KP_FX_SCHEME_ROWS);
	CU_ASSERT_EQUAL(g.block, 128);
	CU_ASSERT_EQUAL(g.vec, 8);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// block 128\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "__launch_bounds__(128)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_c0 = threadIdx.x * 8ll"));
	/* the stored value is rounded to f16 before later kernels read it */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "const unsigned short kp_h0_0 = kp_f2h("));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_v0_0[kp_e] = kp_h2f(kp_h0_0);"));
	/* one step per thread: the value stays in a register across phases */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "float kp_v0_0[8];"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "const float kp_l2 = (k1_x == k0_out ? kp_v0_0[kp_e] : kp_h2f(k1_x[i]));"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_acc1_q += ((kp_l2 - k1_mean) * (kp_l2 - k1_mean));"));
	/* the f16 stores in a loop of their own after the phase's compute */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "\t\t\t\tk0_out[i] = kp_s0_0[kp_e];\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// span 1024\n"));
	/* the constant row length is compiled in */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "const long long cols = 768ll;"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_h2f(k1_g[col])"));
	CU_ASSERT_PTR_NULL(strstr(g.source.buf, "cuda_fp16.h"));
	CU_ASSERT_STRING_EQUAL(g.access[0].mode, "wh");   /* ew's out */
	/* per-row values once per row, outside the element loops */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "\t\tconst float k1_mean = (k1_s * (1.0f / cols));\n"
				      "\t\tfloat kp_acc1_q = 0.0f;\n"));
	golden("f16_residual_layernorm", &g);
	kp_fx_group_release(&g);

	/* scale, mask, softmax over 12 rows padded to 1024 */
	chain[0] = by_name(cat, "decode_attn_scale");
	chain[1] = by_name(cat, "decode_attn_mask");
	chain[2] = by_name(cat, "decode_softmax");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 3, &g, &err), 0);
	CU_ASSERT_EQUAL(g.stride, 1024);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// stride 1024\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "i = row * 1024ll + col;"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "(col > k1_pos[0])"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "int *k1_pos,"));
	for (i = 0; i < (int)g.n_access; i++)
		if (g.access[i].kernel == 1 && g.access[i].param == 1)
			CU_ASSERT_STRING_EQUAL(g.access[i].mode, "z");
	CU_ASSERT_EQUAL(g.phases, 3);   /* max, sum of exp, normalise */
	golden("f16_scale_mask_softmax", &g);
	kp_fx_group_release(&g);

	/* HF's NewGELU as eight ew kernels: one elementwise loop, bit-identical */
	for (i = 0; i < 8; i++)
		chain[i] = by_name(cat, "decode_ew");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 8, &g, &err), 0);
	CU_ASSERT_EQUAL(g.scheme, KP_FX_SCHEME_ELEMENTWISE);
	CU_ASSERT_EQUAL(g.block, KP_FX_BLOCK);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "k7_out[i] = kp_h7_0;"));
	kp_fx_group_release(&g);

	/* a strided kernel next to an unstrided one: refused */
	chain[0] = by_name(cat, "decode_attn_mask");
	chain[1] = by_name(cat, "decode_layernorm");
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 2, &g, &err), KP_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "different row strides"));
	kp_fx_catalog_free(cat);
}

static void test_gen_layout_conflict(void)
{
	static const char text[] =
		"kernel a\nmatch a\nparam 0 x f16*\nrows 1\ncols 64\nlayout 128 8\n"
		"reduce s sum x[i]\nout x[i] = s\nend\n"
		"kernel b\nmatch b\nparam 0 x f16*\nrows 1\ncols 64\nlayout 256 1\n"
		"reduce s sum x[i]\nout x[i] = s\nend\n";
	struct kp_err err = {0};
	struct kp_fx_catalog *cat = kp_fx_catalog_parse(text, sizeof(text) - 1, "t", &err);
	const struct kp_fx_kernel *chain[2];
	struct kp_fx_group g;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	chain[0] = &cat->kernels[0];
	chain[1] = &cat->kernels[1];
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 2, &g, &err), KP_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "different layouts"));
	chain[1] = &cat->kernels[0];
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 2, &g, &err), 0);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(cat);
}

static void test_gen_feasibility(void)
{
	struct kp_fx_catalog *cat = shipped();
	const struct kp_fx_kernel *chain[13];
	struct kp_fx_group g;
	struct kp_err err = {0};
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	for (i = 0; i < 13; i++)
		chain[i] = by_name(cat, "decode_ew");
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 1, &g, &err), KP_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "expected 2..12"));
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 13, &g, &err), KP_EUNSUPPORTED);
	/* 8 ew kernels: 8 x 5 used parameters fit */
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 8, &g, &err), 0);
	CU_ASSERT_EQUAL(g.n_args, 40);
	/* cost rule: elementwise gains the analyzer's figure, default per saved node */
	CU_ASSERT_EQUAL(kp_fx_predicted_gain(&g, 5000), 5000);
	CU_ASSERT(kp_fx_predicted_gain(&g, -1) > 0);
	kp_fx_group_release(&g);
	/* rows scheme: folding an elementwise kernel into the reduction costs 250 ns */
	chain[0] = by_name(cat, "mlp_bias_residual");
	chain[1] = by_name(cat, "layernorm");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g, &err), 0);
	CU_ASSERT_EQUAL(kp_fx_predicted_gain(&g, 1000), 750);
	CU_ASSERT(kp_fx_predicted_gain(&g, 200) <= 0);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(cat);
}

/* ---------------------------------------------------------------------- */
/* numerics: which fused kernels give the chain's bits */

static const char numerics_cat[] =
	"kernel mul\nmatch mul\nparam 0 x f32*\nparam 1 y f32*\nparam 2 s f32\nrows 1\ncols 64\n"
	"out y[i] = x[i] * s\nend\n"
	"kernel addf\nmatch addf\nparam 0 x f32*\nparam 1 y f32*\nparam 2 s f32\nrows 1\ncols 64\n"
	"out y[i] = x[i] + s\nend\n"
	"kernel add\nmatch add\nparam 0 y f32*\nparam 1 w f32*\nparam 2 z f32*\nrows 1\ncols 64\n"
	"out z[i] = y[i] + w[i]\nend\n"
	"kernel gel\nmatch gel\nparam 0 x f32*\nparam 1 y f32*\nrows 1\ncols 64\n"
	"out y[i] = gelu_tanh(x[i])\nend\n"
	"kernel mx\nmatch mx\nparam 0 x f32*\nparam 1 y f32*\nrows 1\ncols 64\n"
	"reduce m max x[i]\nout y[i] = x[i] - m\nend\n"
	"kernel mul16\nmatch mul16\nparam 0 x f16*\nparam 1 y f16*\nparam 2 s f32\nrows 1\ncols 64\n"
	"out y[i] = x[i] * s\nend\n"
	"kernel add16\nmatch add16\nparam 0 y f16*\nparam 1 w f16*\nparam 2 z f16*\nrows 1\ncols 64\n"
	"out z[i] = y[i] + w[i]\nend\n"
	"kernel sm16\nmatch sm16\nparam 0 x f16*\nrows 1\ncols 64\n"
	"reduce m max x[i]\nreduce s sum expf(x[i] - m)\nout x[i] = expf(x[i] - m) / s\nend\n"
	"kernel cpy\nmatch cpy\nparam 0 x f32*\nparam 1 y f32*\nrows 1\ncols 64\nout y[i] = x[i]\nend\n"
	"kernel scl\nmatch scl\nparam 0 y f32*\nparam 1 z f32*\nrows 1\ncols 64\n"
	"out z[i] = y[i] * 2.0f > 1.0f ? fmaxf(y[i], 0.0f) : y[i] / 3.0f\nend\n"
	"kernel lsum\nmatch lsum\nparam 0 y f32*\nparam 1 z f32*\nrows 1\ncols 64\nlayout 64 1\n"
	"reduce s sum y[i]\nout z[i] = s\nend\n";

/* Generate the chain of catalog kernels a, b[, c] (by name) and return its numerics. */
static int chain_numerics3(const struct kp_fx_catalog *cat, const char *a, const char *b,
			   const char *c, const char *const *args, double *tol, char *why, size_t n)
{
	const struct kp_fx_kernel *chain[3] = { by_name(cat, a), by_name(cat, b),
						c ? by_name(cat, c) : NULL };
	size_t len = c ? 3 : 2;
	struct kp_fx_group g;
	struct kp_err err = {0};
	int exact;

	CU_ASSERT_PTR_NOT_NULL_FATAL(chain[0]);
	CU_ASSERT_PTR_NOT_NULL_FATAL(chain[1]);
	CU_ASSERT_FATAL(!c || chain[2]);
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate_spec(chain, args, len, &g, &err), 0);
	exact = kp_fx_numerics(&g, tol, why, n);
	/* kp_fx_generate recorded the same */
	CU_ASSERT(g.exact == exact && g.tolerance == *tol && !strcmp(g.why, why));
	CU_ASSERT(exact ? *tol == 0 && !why[0] : *tol > 0 && why[0]);
	kp_fx_group_release(&g);
	return exact;
}

static int chain_numerics(const struct kp_fx_catalog *cat, const char *a, const char *b,
			  const char *const *args, double *tol, char *why, size_t n)
{
	return chain_numerics3(cat, a, b, NULL, args, tol, why, n);
}

static void test_numerics(void)
{
	struct kp_err err = {0};
	struct kp_fx_catalog *own = kp_fx_catalog_parse(numerics_cat, sizeof(numerics_cat) - 1, "n", &err);
	struct kp_fx_catalog *cat = shipped();
	const struct kp_fx_kernel *chain[8];
	struct kp_fx_group g;
	char why[160], a0[64], a1[64];
	const char *args[2] = { a0, a1 };
	double tol;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(own);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	/* elementwise, sums handed on: exact */
	CU_ASSERT_EQUAL(chain_numerics(own, "addf", "add", NULL, &tol, why, sizeof(why)), 1);
	/* a product handed on in a register may become an FMA with the add */
	CU_ASSERT_EQUAL(chain_numerics(own, "mul", "add", NULL, &tol, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(tol, KP_FX_TOL_F32);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "'mul' passes a product to 'add' in a register: FMA"));
	CU_ASSERT_EQUAL(chain_numerics(own, "gel", "add", NULL, &tol, why, sizeof(why)), 0);
	/* ... also through a copy; a product stored as it is, multiplied, compared,
	 * divided or through fmaxf cannot contract */
	CU_ASSERT_EQUAL(chain_numerics3(own, "mul", "cpy", "add", NULL, &tol, why, sizeof(why)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "'mul' passes a product to 'add'"));
	CU_ASSERT_EQUAL(chain_numerics(own, "mul", "cpy", NULL, &tol, why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(chain_numerics3(own, "gel", "cpy", "scl", NULL, &tol, why, sizeof(why)), 1);
	/* a sum in the kernel's own order adds the product: an FMA again */
	CU_ASSERT_EQUAL(chain_numerics(own, "addf", "lsum", NULL, &tol, why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(chain_numerics(own, "mul", "lsum", NULL, &tol, why, sizeof(why)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "'mul' passes a product to 'lsum'"));
	/* ... unless the trace shows the tensors differ: then it goes through memory */
	snprintf(a0, sizeof(a0), "0000001000000000:0000002000000000:00000040");
	snprintf(a1, sizeof(a1), "0000003000000000:0000004000000000:0000005000000000");
	CU_ASSERT_EQUAL(chain_numerics(own, "mul", "add", args, &tol, why, sizeof(why)), 1);
	snprintf(a1, sizeof(a1), "0000002000000000:0000004000000000:0000005000000000");
	CU_ASSERT_EQUAL(chain_numerics(own, "mul", "add", args, &tol, why, sizeof(why)), 0);
	/* f16 stores round through inline PTX: never an FMA across kernels */
	CU_ASSERT_EQUAL(chain_numerics(own, "mul16", "add16", NULL, &tol, why, sizeof(why)), 1);
	/* max does not depend on the order */
	CU_ASSERT_EQUAL(chain_numerics(own, "addf", "mx", NULL, &tol, why, sizeof(why)), 1);
	/* a sum without the kernel's layout: tolerant, f16 outputs looser */
	CU_ASSERT_EQUAL(chain_numerics(own, "mul16", "sm16", NULL, &tol, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(tol, KP_FX_TOL_F16);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "'sm16' sums its sum 's' in another order"));
	/* mlp's layer norm (f32, no layout) */
	CU_ASSERT_EQUAL(chain_numerics(cat, "mlp_bias_residual", "layernorm", NULL, &tol, why,
				       sizeof(why)), 0);
	CU_ASSERT_EQUAL(tol, KP_FX_TOL_F32);
	CU_ASSERT_STRING_EQUAL(why, "'layernorm' sums its mean 'mean' in another order than the "
			       "kernel: no layout in the catalog");
	/* tests/gpu/fusion_ew's chain (the gelu's product is copied out) and
	 * decode's (f16, layouts: the kernels' own order) */
	chain[0] = by_name(cat, "mlp_copy");
	chain[1] = by_name(cat, "mlp_bias_residual");
	chain[2] = by_name(cat, "mlp_bias_gelu");
	chain[3] = by_name(cat, "mlp_copy");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 4, &g, &err), 0);
	CU_ASSERT(g.exact && g.tolerance == 0 && g.fwd_from < 0);
	kp_fx_group_release(&g);
	CU_ASSERT_EQUAL(chain_numerics(cat, "decode_ew", "decode_layernorm", NULL, &tol, why,
				       sizeof(why)), 1);
	chain[0] = by_name(cat, "decode_attn_scale");
	chain[1] = by_name(cat, "decode_attn_mask");
	chain[2] = by_name(cat, "decode_softmax");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 3, &g, &err), 0);
	CU_ASSERT(g.exact);
	kp_fx_group_release(&g);
	for (i = 0; i < 8; i++)
		chain[i] = by_name(cat, "decode_ew");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 8, &g, &err), 0);
	CU_ASSERT(g.exact);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(own);
	kp_fx_catalog_free(cat);
}

/* A plan's fused groups: one exact, one tolerant, one not generated (zeroed). */
static struct kp_plan *numerics_plan(void)
{
	static const char *const names[] = {
		"_Z8copy_f32PfPKfi -> _Z13bias_residualPfPKfS1_ii",
		"_Z13bias_residualPfPKfS1_ii -> _Z9layernormPKfPfS0_S0_i",
		"x -> y",
	};
	struct kp_plan *p = kp_plan_new();
	size_t i;

	p->cc_major = 9;
	p->cuda_major = 13;
	p->gpu_name = strdup("");
	p->tool_version = strdup("t");
	p->source_kind = strdup("synthetic");
	p->date = strdup("");
	p->n_regions = 1;
	p->regions = calloc(1, sizeof(*p->regions));
	p->regions[0].label = strdup("mlp.forward");
	p->regions[0].decision = KP_PLAN_GRAPH;
	p->regions[0].reason = KP_PLAN_R_LAUNCH_BOUND;
	p->regions[0].reason_text = strdup("");
	p->regions[0].kernels = 8;
	p->regions[0].shape_keys = 1;
	p->n_fusions = 3;
	p->fusions = calloc(3, sizeof(*p->fusions));
	for (i = 0; i < 3; i++) {
		p->fusions[i].id = (uint32_t)(i + 1);
		p->fusions[i].region = strdup("mlp.forward");
		p->fusions[i].first_kernel = (uint32_t)(2 * i);
		p->fusions[i].kernels = 2;
		p->fusions[i].names = strdup(names[i]);
		p->fusions[i].gain_ns = 5000;
	}
	return p;
}

static void test_numerics_plan(void)
{
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p, *q;
	struct kp_fx_plan_stats st;
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_err err = {0};
	char *notes = NULL;
	size_t n_notes = 0;
	FILE *note;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	/* keep everything: numerics on the groups, and through the plan file */
	p = numerics_plan();
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, NULL, &st, &err), 0);
	CU_ASSERT_EQUAL(st.generated, 2);
	CU_ASSERT(p->fusions[0].source && p->fusions[0].exact && p->fusions[0].tolerance == 0);
	CU_ASSERT(p->fusions[1].source && !p->fusions[1].exact);
	CU_ASSERT_EQUAL(p->fusions[1].tolerance, KP_FX_TOL_F32);
	CU_ASSERT(p->fusions[1].inexact_why && strstr(p->fusions[1].inexact_why, "'layernorm'"));
	CU_ASSERT(!p->fusions[2].source && !p->fusions[2].exact);   /* not set */
	CU_ASSERT_EQUAL_FATAL(kp_plan_write(p, &text, &err), 0);
	q = kp_plan_parse(text.buf, text.len, "n.kplan", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT(q->fusions[0].exact && q->fusions[0].tolerance == 0);
	CU_ASSERT(!q->fusions[1].exact && q->fusions[1].tolerance == KP_FX_TOL_F32);
	CU_ASSERT(q->fusions[2].exact);
	CU_ASSERT_PTR_NULL(q->fusions[1].inexact_why);   /* not in the file */
	/* --fusion exact on a plan read back: the tolerant group goes, named */
	note = open_memstream(&notes, &n_notes);
	CU_ASSERT_PTR_NOT_NULL_FATAL(note);
	CU_ASSERT_EQUAL(kp_fx_plan_filter(q, KP_FX_KEEP_TOLERANT, note), 0);
	CU_ASSERT_EQUAL(kp_fx_plan_filter(q, KP_FX_KEEP_EXACT, note), 1);
	fclose(note);
	CU_ASSERT_EQUAL_FATAL(q->n_fusions, 2);
	CU_ASSERT(q->fusions[0].id == 1 && q->fusions[1].id == 3);
	CU_ASSERT_STRING_EQUAL(notes, "fusion group 2 (_Z13bias_residualPfPKfS1_ii -> "
			       "_Z9layernormPKfPfS0_S0_i) dropped: not bit-exact (tolerance 1e-05); "
			       "use --fusion tolerant\n");
	free(notes);
	kp_plan_free(q);
	/* on the plan just generated: the reason the generator found */
	note = open_memstream(&notes, &n_notes);
	CU_ASSERT_PTR_NOT_NULL_FATAL(note);
	CU_ASSERT_EQUAL(kp_fx_plan_filter(p, KP_FX_KEEP_EXACT, note), 1);
	fclose(note);
	CU_ASSERT_PTR_NOT_NULL(strstr(notes, "dropped: not bit-exact ('layernorm' sums its mean"));
	free(notes);
	CU_ASSERT_EQUAL(p->n_fusions, 2);
	/* --fusion off: every group */
	CU_ASSERT_EQUAL(kp_fx_plan_filter(p, KP_FX_KEEP_NONE, NULL), 2);
	CU_ASSERT_EQUAL(p->n_fusions, 0);
	kp_strbuf_reset(&text);
	CU_ASSERT_EQUAL(kp_plan_write(p, &text, &err), 0);
	CU_ASSERT_PTR_NULL(strstr(text.buf, "[fusion"));
	kp_plan_free(p);

	/* generating for --fusion exact: the tolerant group gets no source (no
	 * file written), its numerics are kept for the filter */
	p = numerics_plan();
	kp_test_sh("mkdir -p '%s'", kp_test_path("fusion-keep"));
	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL(kp_fx_plan_sources_keep(p, 0, p->n_fusions, KP_FX_KEEP_EXACT, cat,
						kp_test_path("fusion-keep"), &st, &err), 0);
	CU_ASSERT(st.groups == 3 && st.generated == 1 && st.inexact == 1 && st.not_in_catalog == 1);
	CU_ASSERT(p->fusions[0].source && p->fusions[0].exact);
	CU_ASSERT(!p->fusions[1].source && !p->fusions[1].exact && p->fusions[1].inexact_why);
	CU_ASSERT_EQUAL(p->fusions[1].tolerance, KP_FX_TOL_F32);
	CU_ASSERT_EQUAL(kp_test_sh("test \"$(ls '%s')\" = '%s'", kp_test_path("fusion-keep"),
				   p->fusions[0].source), 0);
	CU_ASSERT_EQUAL(kp_fx_plan_filter(p, KP_FX_KEEP_EXACT, NULL), 1);
	CU_ASSERT(p->n_fusions == 2 && p->fusions[1].id == 3);
	/* --fusion off generates nothing */
	kp_plan_free(p);
	p = numerics_plan();
	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL(kp_fx_plan_sources_keep(p, 0, p->n_fusions, KP_FX_KEEP_NONE, cat, NULL,
						&st, &err), 0);
	CU_ASSERT(st.groups == 0 && !p->fusions[0].source);
	kp_plan_free(p);
	kp_strbuf_release(&text);
	kp_fx_catalog_free(cat);
}

/* ---------------------------------------------------------------------- */
/* plans */

static const char *mlp_names[] = {
	"_Z8copy_f32PfPKfi", "_Z9layernormPKfPfS0_S0_i", "gemm", "_Z9bias_geluPfPKfii",
	"gemm", "_Z13bias_residualPfPKfS1_ii", "_Z9layernormPKfPfS0_S0_i", "gemm",
};

static struct kp_plan *base_plan(uint32_t kernels)
{
	struct kp_plan *p = kp_plan_new();

	p->cc_major = 9;
	p->cuda_major = 13;
	p->gpu_name = strdup("");
	p->tool_version = strdup("t");
	p->source_kind = strdup("synthetic");
	p->date = strdup("");
	p->n_regions = 1;
	p->regions = calloc(1, sizeof(*p->regions));
	p->regions[0].label = strdup("mlp.forward");
	p->regions[0].decision = KP_PLAN_GRAPH;
	p->regions[0].reason = KP_PLAN_R_LAUNCH_BOUND;
	p->regions[0].reason_text = strdup("");
	p->regions[0].kernels = kernels;
	p->regions[0].nodes = kernels;
	p->regions[0].shape_keys = 1;
	return p;
}

/* kp_fx_plan_fuse: from a database the trace's groups win over the
 * analyzer's candidate they overlap; with --base every group stays, in order */
static void test_plan_fuse_order(void)
{
	struct kp_fx_catalog *cat = shipped();
	struct kp_strbuf trace = KP_STRBUF_INIT;
	struct kp_fx_plan_stats st;
	struct kp_err err = {0};

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	for (size_t i = 0; i < 8; i++)
		kp_strbuf_addf(&trace, "mlp.forward\t%zu\t%s\n", i, mlp_names[i]);
	for (int order = KP_FX_FUSE_IN_ORDER; order <= KP_FX_FUSE_TRACE_FIRST; order++) {
		struct kp_plan *p = base_plan(8);

		p->fusions = calloc(1, sizeof(*p->fusions));
		CU_ASSERT_PTR_NOT_NULL_FATAL(p->fusions);
		p->n_fusions = 1;
		p->fusions[0].id = 1;
		p->fusions[0].region = strdup("mlp.forward");
		p->fusions[0].first_kernel = 1;     /* overlaps the trace's group at 0..1 */
		p->fusions[0].kernels = 2;
		p->fusions[0].names = strdup("x -> y");
		CU_ASSERT_EQUAL(kp_fx_plan_fuse(p, cat, trace.buf, trace.len, "t", order,
						KP_FX_KEEP_TOLERANT, NULL, &st, &err), 0);
		CU_ASSERT_EQUAL(st.generated, 2);
		if (order == KP_FX_FUSE_TRACE_FIRST) {
			CU_ASSERT_EQUAL_FATAL(p->n_fusions, 2);
			CU_ASSERT_EQUAL(p->fusions[0].first_kernel, 0);
			CU_ASSERT_EQUAL(st.not_in_catalog, 0);
		} else {
			CU_ASSERT_EQUAL_FATAL(p->n_fusions, 3);
			CU_ASSERT_EQUAL(p->fusions[0].id, 1);
			CU_ASSERT_PTR_NULL(p->fusions[0].source);
			CU_ASSERT_EQUAL(st.not_in_catalog, 1);
		}
		kp_plan_free(p);
	}
	/* no trace: the plan's groups alone, a bad trace an error naming it */
	{
		struct kp_plan *p = base_plan(8);

		CU_ASSERT_EQUAL(kp_fx_plan_fuse(p, cat, NULL, 0, NULL, KP_FX_FUSE_IN_ORDER,
						KP_FX_KEEP_EXACT, NULL, &st, &err), 0);
		CU_ASSERT_EQUAL(p->n_fusions, 0);
		CU_ASSERT_EQUAL(kp_fx_plan_fuse(p, cat, "nofields\n", 9, "bad.tsv",
						KP_FX_FUSE_TRACE_FIRST, KP_FX_KEEP_EXACT, NULL, &st, &err),
				KP_EFORMAT);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad.tsv:1"));
		kp_plan_free(p);
	}
	kp_strbuf_release(&trace);
	kp_fx_catalog_free(cat);
}

static void test_plan_trace_and_sources(void)
{
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan(8), *q;
	struct kp_strbuf trace = KP_STRBUF_INIT, text = KP_STRBUF_INIT;
	struct kp_fx_plan_stats st;
	struct kp_err err = {0};
	const char *dir = kp_test_path("fusion-plan");
	char path[512];
	size_t i, n;
	char *src;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	kp_test_sh("mkdir -p '%s'", dir);
	kp_strbuf_adds(&trace, "mlp.forward\t0\tstale\n");   /* listed again below: last wins */
	for (i = 0; i < 8; i++)
		kp_strbuf_addf(&trace, "mlp.forward\t%zu\t%s\n", i, mlp_names[i]);
	kp_strbuf_adds(&trace, "other\t0\tx\n");
	CU_ASSERT_EQUAL(kp_fx_plan_add_trace(p, trace.buf, trace.len, "t", cat, &err), 2);
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 2);
	CU_ASSERT_EQUAL(p->fusions[0].first_kernel, 0);
	CU_ASSERT_EQUAL(p->fusions[0].kernels, 2);
	CU_ASSERT_EQUAL(p->fusions[1].first_kernel, 5);
	CU_ASSERT_EQUAL(p->fusions[1].id, 2);
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, dir, &st, &err), 0);
	CU_ASSERT_EQUAL(st.generated, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->fusions[1].source);
	snprintf(path, sizeof(path), "%s/%s", dir, p->fusions[1].source);
	src = kp_test_read(path, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(src);
	CU_ASSERT_EQUAL(kp_hash64(src, n, KP_HASH_SEED), p->fusions[1].source_hash);
	free(src);
	/* kernels of generated groups are taken: the same trace again adds none */
	CU_ASSERT_EQUAL(kp_fx_plan_add_trace(p, trace.buf, trace.len, "t", cat, &err), 0);
	CU_ASSERT_EQUAL(p->n_fusions, 2);
	/* the plan with sources round-trips through the plan file */
	CU_ASSERT_EQUAL_FATAL(kp_plan_write(p, &text, &err), 0);
	q = kp_plan_parse(text.buf, text.len, "p", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_STRING_EQUAL(q->fusions[1].source, p->fusions[1].source);
	kp_plan_free(q);
	kp_plan_free(p);

	/* trace errors name the line */
	p = base_plan(8);
	CU_ASSERT_EQUAL(kp_fx_plan_add_trace(p, "mlp.forward\t0\ta\nmlp.forward\t5\tb\n", 32, "t",
					     cat, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "t:2: index"));
	CU_ASSERT_EQUAL(kp_fx_plan_add_trace(p, "nofields\n", 9, "t", cat, &err), KP_EFORMAT);
	/* a region with fewer kernels than the trace lists */
	kp_plan_free(p);
	p = base_plan(3);
	kp_strbuf_reset(&trace);
	for (i = 0; i < 8; i++)
		kp_strbuf_addf(&trace, "mlp.forward\t%zu\t%s\n", i, mlp_names[i]);
	CU_ASSERT_EQUAL(kp_fx_plan_add_trace(p, trace.buf, trace.len, "t", cat, &err), KP_EMISMATCH);
	kp_plan_free(p);

	/* groups from the analyzer: a name not in the catalog leaves the group without source */
	p = base_plan(8);
	p->n_fusions = 1;
	p->fusions = calloc(1, sizeof(*p->fusions));
	p->fusions[0].id = 1;
	p->fusions[0].region = strdup("mlp.forward");
	p->fusions[0].kernels = 2;
	p->fusions[0].names = strdup("_Z9bias_geluPfPKfii -> unknown_kernel");
	p->fusions[0].gain_ns = 900;
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, NULL, &st, &err), 0);
	CU_ASSERT_EQUAL(st.not_in_catalog, 1);
	CU_ASSERT_PTR_NULL(p->fusions[0].source);
	/* below the cost threshold: residual + layernorm with a 100 ns gain */
	free(p->fusions[0].names);
	p->fusions[0].names = strdup("bias_residual(float*, float const*, float const*, int, int) -> "
				     "layernorm(float const*, float*, float const*, float const*, int)");
	p->fusions[0].gain_ns = 100;
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, NULL, &st, &err), 0);
	CU_ASSERT_EQUAL(st.unprofitable, 1);
	CU_ASSERT_PTR_NULL(p->fusions[0].source);
	p->fusions[0].gain_ns = 2000;
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, NULL, &st, &err), 0);
	CU_ASSERT_EQUAL(st.generated, 1);
	CU_ASSERT_EQUAL(p->fusions[0].gain_ns, 1750);
	/* the region's other catalog runs around the generated group: kernels
	 * 0-1 are taken, 2..4 form a new group, sources_from counts only it */
	{
		const char *nm[5] = { "_Z13bias_residualPfPKfS1_ii", "_Z9layernormPKfPfS0_S0_i",
				      "_Z8copy_f32PfPKfi", "_Z13bias_residualPfPKfS1_ii",
				      "_Z9layernormPKfPfS0_S0_i" };

		CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", nm, 5, cat, &err), 1);
		CU_ASSERT_EQUAL_FATAL(p->n_fusions, 2);
		CU_ASSERT_EQUAL(p->fusions[1].first_kernel, 2);
		CU_ASSERT_EQUAL(p->fusions[1].kernels, 3);
		CU_ASSERT_EQUAL(p->fusions[1].id, 2);
		memset(&st, 0, sizeof(st));
		CU_ASSERT_EQUAL(kp_fx_plan_sources_from(p, 1, cat, NULL, &st, &err), 0);
		CU_ASSERT_EQUAL(st.groups, 1);
		CU_ASSERT_EQUAL(st.generated, 1);
	}
	kp_plan_free(p);
	kp_strbuf_release(&trace);
	kp_strbuf_release(&text);
	kp_fx_catalog_free(cat);
}

/* ---------------------------------------------------------------------- */
/* runtime half, fake ops */

struct fake {
	int loads, load_fail;
	char last_name[64];
	struct kp__rt_fx_repl last;
	size_t n_repl;
	int replace_calls;
	int tail_ok;          /* the last two args point at the repl's rows, cols */
};

static int fake_load(void *ctx, const char *src, size_t len, uint64_t hash, const char *name,
		     void **fn, char *msg, size_t mlen)
{
	struct fake *f = ctx;

	if (f->load_fail) {
		snprintf(msg, mlen, "nvrtc: syntax error");
		return 1;
	}
	f->loads++;
	snprintf(f->last_name, sizeof(f->last_name), "%s", name);
	*fn = (void *)0x1234;
	(void)src; (void)len; (void)hash;
	return 0;
}

static int fake_replace(void *ctx, void *graph, struct kp__rt_fx_repl *r, size_t n, char *msg,
			size_t mlen)
{
	struct fake *f = ctx;
	size_t i;

	f->replace_calls++;
	f->n_repl = n;
	for (i = 0; i < n; i++)
		r[i].rc = 0;
	if (n) {
		f->last = r[0];
		f->tail_ok = r[0].args[r[0].n_args - 2] == &r[0].rows &&
			r[0].args[r[0].n_args - 1] == &r[0].cols;
	}
	(void)graph; (void)msg; (void)mlen;
	return (int)n;
}

/* A kernel node with pointer/int parameters laid out naturally. */
struct fnode {
	struct kp__rt_node n;
	uint32_t off[8], size[8];
	unsigned char buf[64];
};

static void mk_node(struct fnode *f, const char *name, uint32_t grid, uint32_t block,
		    const uint64_t *ptrs, int n_ptrs, const int32_t *ints, int n_ints)
{
	uint32_t o = 0;
	int i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < n_ptrs; i++, o += 8) {
		f->off[i] = o;
		f->size[i] = 8;
		memcpy(f->buf + o, &ptrs[i], 8);
	}
	for (i = 0; i < n_ints; i++, o += 4) {
		f->off[n_ptrs + i] = o;
		f->size[n_ptrs + i] = 4;
		memcpy(f->buf + o, &ints[i], 4);
	}
	f->n.kind = KP__RT_NODE_KERNEL;
	f->n.name = name;
	f->n.grid[0] = grid;
	f->n.grid[1] = f->n.grid[2] = 1;
	f->n.block[0] = block;
	f->n.block[1] = f->n.block[2] = 1;
	f->n.n_params = (uint32_t)(n_ptrs + n_ints);
	f->n.param_off = f->off;
	f->n.param_size = f->size;
	f->n.params = f->buf;
	f->n.params_len = o;
}

/* ew(op, out, a, b, s, n): a decode ew kernel node (op first, s as float bits) */
static void mk_ew(struct fnode *x, int32_t op, const uint64_t ptr[3], uint32_t s_bits, int32_t n)
{
	uint32_t o = 8;
	int j;

	memset(x, 0, sizeof(*x));
	x->off[0] = 0;
	x->size[0] = 4;
	memcpy(x->buf, &op, 4);
	for (j = 0; j < 3; j++, o += 8) {
		x->off[1 + j] = o;
		x->size[1 + j] = 8;
		memcpy(x->buf + o, &ptr[j], 8);
	}
	x->off[4] = o;
	x->size[4] = 4;
	memcpy(x->buf + o, &s_bits, 4);
	x->off[5] = o + 4;
	x->size[5] = 4;
	memcpy(x->buf + o + 4, &n, 4);
	x->n.kind = KP__RT_NODE_KERNEL;
	x->n.name = "_Z2ewiP6__halfPKS_S2_fi";
	x->n.grid[0] = x->n.grid[1] = x->n.grid[2] = 1;
	x->n.block[0] = 128;
	x->n.block[1] = x->n.block[2] = 1;
	x->n.n_params = 6;
	x->n.param_off = x->off;
	x->n.param_size = x->size;
	x->n.params = x->buf;
	x->n.params_len = o + 8;
}

/*
 * Generate p's sources into the temp dir SUB (the first group must get one;
 * counts in *st when not NULL), write and load the plan (*plan), and open the
 * runtime's fusion half over it with ops (fk reset first).
 */
static struct kp__rt_fusion *write_and_open(struct kp_plan *p, const struct kp_fx_catalog *cat,
					    const char *sub, struct kp_fx_plan_stats *st,
					    struct kp_plan **plan, const struct kp__rt_fusion_ops *ops,
					    struct fake *fk)
{
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_err err = {0};
	const char *dir = kp_test_path(sub);
	char path[512];

	kp_test_sh("mkdir -p '%s'", dir);
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, dir, st, &err), 0);
	if (!p->n_fusions || !p->fusions[0].source)
		return NULL;
	CU_ASSERT_EQUAL(kp_plan_write(p, &text, &err), 0);
	snprintf(path, sizeof(path), "%s/model.kplan", dir);
	kp_test_write(path, text.buf, (long)text.len);
	kp_strbuf_release(&text);
	if (!(*plan = kp_plan_load(path, &err)))
		return NULL;
	memset(fk, 0, sizeof(*fk));
	return kp__rt_fusion_open(*plan, path, NULL, ops);
}

/* plan file + source in the temp dir; returns the plan path */
static const char *write_fused_plan(const char *sub, int corrupt)
{
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan(8);
	struct kp_strbuf trace = KP_STRBUF_INIT, text = KP_STRBUF_INIT;
	struct kp_err err = {0};
	static char path[512];
	char dir[400];
	size_t i;

	snprintf(dir, sizeof(dir), "%s", kp_test_path(sub));
	kp_test_sh("mkdir -p '%s'", dir);
	for (i = 0; i < 8; i++)
		kp_strbuf_addf(&trace, "mlp.forward\t%zu\t%s\n", i, mlp_names[i]);
	kp_fx_plan_add_trace(p, trace.buf, trace.len, "t", cat, &err);
	kp_fx_plan_sources(p, cat, dir, NULL, &err);
	if (corrupt) {
		char src[600];

		snprintf(src, sizeof(src), "%s/%s", dir, p->fusions[1].source);
		kp_test_sh("echo '// edited' >> '%s'", src);
	}
	kp_plan_write(p, &text, &err);
	snprintf(path, sizeof(path), "%s/model.kplan", dir);
	kp_test_write(path, text.buf, (long)text.len);
	kp_strbuf_release(&trace);
	kp_strbuf_release(&text);
	kp_plan_free(p);
	kp_fx_catalog_free(cat);
	return path;
}

/* The mlp capture as nodes: copy, ln, gemm, gelu, gemm, residual, ln, gemm (+ a memset). */
static void mlp_nodes(struct fnode *f, struct kp__rt_node *nodes, int alias, int bad_n)
{
	const uint64_t X = 0x10000, H = 0x20000, U = 0x30000, T = 0x40000, IN = 0x50000;
	const uint64_t G = 0x60000, BE = 0x61000, B1 = 0x62000, B2 = 0x63000;
	uint64_t p[4];
	int32_t v[2];
	int i;

	p[0] = X; p[1] = IN; v[0] = 4096;
	mk_node(&f[0], "_Z8copy_f32PfPKfi", 16, 256, p, 2, v, 1);
	p[0] = X; p[1] = H; p[2] = G; p[3] = BE; v[0] = 512;
	mk_node(&f[1], "_Z9layernormPKfPfS0_S0_i", 8, 256, p, 4, v, 1);
	mk_node(&f[2], "gemm", 8, 128, p, 1, NULL, 0);
	p[0] = U; p[1] = B1; v[0] = 16384; v[1] = 2048;
	mk_node(&f[3], "_Z9bias_geluPfPKfii", 64, 256, p, 2, v, 2);
	mk_node(&f[4], "gemm", 8, 128, p, 1, NULL, 0);
	p[0] = X; p[1] = T; p[2] = B2; v[0] = bad_n ? 4000 : 4096; v[1] = 512;
	mk_node(&f[5], "_Z13bias_residualPfPKfS1_ii", 16, 256, p, 3, v, 2);
	p[0] = X; p[1] = H; p[2] = alias ? X : G; p[3] = BE; v[0] = 512;
	mk_node(&f[6], "_Z9layernormPKfPfS0_S0_i", 8, 256, p, 4, v, 1);
	mk_node(&f[7], "gemm", 8, 128, p, 1, NULL, 0);
	/* node order: a memset first, then the kernels */
	memset(&nodes[0], 0, sizeof(nodes[0]));
	nodes[0].kind = KP__RT_NODE_MEMOP;
	nodes[0].name = "";
	for (i = 0; i < 8; i++)
		nodes[1 + i] = f[i].n;
}

static void test_runtime_apply(void)
{
	struct fake fk;
	struct kp__rt_fusion_ops ops = { &fk, fake_load, fake_replace, NULL };
	struct kp_err err = {0};
	struct kp_plan *plan;
	struct kp__rt_fusion *fz;
	struct fnode f[8];
	struct kp__rt_node nodes[9];
	const char *path = write_fused_plan("fusion-rt", 0);

	memset(&fk, 0, sizeof(fk));
	plan = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	CU_ASSERT_EQUAL_FATAL(plan->n_fusions, 2);
	fz = kp__rt_fusion_open(plan, path, NULL, &ops);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	CU_ASSERT_EQUAL(fk.loads, 2);
	CU_ASSERT(!strncmp(fk.last_name, "kp_fused_", 9));

	mlp_nodes(f, nodes, 0, 0);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 2);
	CU_ASSERT_EQUAL(fk.n_repl, 2);
	/* first chain: kernels 0, 1 = nodes 1, 2 (after the memset) */
	CU_ASSERT_EQUAL(fk.last.n, 2);
	CU_ASSERT_EQUAL(fk.last.idx[0], 1);
	CU_ASSERT_EQUAL(fk.last.idx[1], 2);
	/* rows scheme: one block of 256 per row, 8 rows of 512 */
	CU_ASSERT_EQUAL(fk.last.grid[0], 8);
	CU_ASSERT_EQUAL(fk.last.block[0], 256);
	/* mapped args: dst src (copy), x y g b (layernorm), rows, cols */
	CU_ASSERT_EQUAL_FATAL(fk.last.n_args, 8);
	CU_ASSERT_PTR_EQUAL(fk.last.args[1], nodes[1].params + 8);
	CU_ASSERT_PTR_EQUAL(fk.last.args[5], nodes[2].params + 24);
	CU_ASSERT(fk.tail_ok);
	CU_ASSERT_EQUAL(fk.last.rows, 8);
	CU_ASSERT_EQUAL(fk.last.cols, 512);
	CU_ASSERT_EQUAL(kp__rt_fusion_applied(fz), 2);
	/* other regions are untouched */
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "decode.step", (void *)1, nodes, 9), 0);

	/* shape mismatch: the residual's n is not 8 x 512 */
	mlp_nodes(f, nodes, 0, 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_SHAPE), 1);
	/* alias: layernorm's gamma is the residual's output */
	mlp_nodes(f, nodes, 1, 0);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_ALIAS), 1);
	/* chain not found: another kernel at the planned index, or too few kernels */
	mlp_nodes(f, nodes, 0, 0);
	nodes[6].name = "_Z9bias_geluPfPKfii";
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_CHAIN), 1);
	/* 3 kernels captured: the first chain is there, the second is not */
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 4), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_CHAIN), 2);
	/* a parameter of another size than the catalog says */
	mlp_nodes(f, nodes, 0, 0);
	f[5].size[3] = 8;
	nodes[6] = f[5].n;
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 1);
	kp__rt_fusion_close(fz);
	kp_plan_free(plan);
}

/* groups whose ids do not follow the kernel order (database mode: the
 * analyzer's candidates first, then the catalog runs) all apply; a group
 * overlapping an earlier one is skipped */
static void test_runtime_order(void)
{
	struct fake fk;
	struct kp__rt_fusion_ops ops = { &fk, fake_load, fake_replace, NULL };
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan(8), *plan;
	struct kp_strbuf text = KP_STRBUF_INIT;
	struct kp_err err = {0};
	struct kp__rt_fusion *fz;
	struct fnode f[8];
	struct kp__rt_node nodes[9];
	const char *masked[8], *dir = kp_test_path("fusion-order");
	char path[512];
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	kp_test_sh("mkdir -p '%s'", dir);
	for (i = 0; i < 8; i++)
		masked[i] = i >= 5 && i <= 6 ? mlp_names[i] : "gemm";
	CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", masked, 8, cat, &err), 1);
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, dir, NULL, &err), 0);
	CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", mlp_names, 8, cat, &err), 1);
	CU_ASSERT_EQUAL(kp_fx_plan_sources_from(p, 1, cat, dir, NULL, &err), 0);
	/* a third group over kernels 1..2, overlapping the second */
	{
		struct kp_plan_fusion *q = realloc(p->fusions, 3 * sizeof(*q));

		CU_ASSERT_PTR_NOT_NULL_FATAL(q);
		p->fusions = q;
		q[2] = q[1];
		q[2].id = 3;
		q[2].region = strdup(q[1].region);
		q[2].names = strdup(q[1].names);
		q[2].source = strdup(q[1].source);
		q[2].inexact_why = q[1].inexact_why ? strdup(q[1].inexact_why) : NULL;
		q[2].first_kernel = 1;
		p->n_fusions = 3;
	}
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 3);
	CU_ASSERT(p->fusions[0].first_kernel == 5 && p->fusions[1].first_kernel == 0);
	CU_ASSERT_EQUAL(kp_plan_write(p, &text, &err), 0);
	snprintf(path, sizeof(path), "%s/model.kplan", dir);
	kp_test_write(path, text.buf, (long)text.len);
	plan = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	memset(&fk, 0, sizeof(fk));
	fz = kp__rt_fusion_open(plan, path, NULL, &ops);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	mlp_nodes(f, nodes, 0, 0);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 2);
	CU_ASSERT_EQUAL(fk.n_repl, 2);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_CHAIN), 1);
	kp__rt_fusion_close(fz);
	kp_plan_free(plan);
	kp_plan_free(p);
	kp_strbuf_release(&text);
	kp_fx_catalog_free(cat);
}

/* decode's scale -> mask -> softmax: f16 rows padded to a stride of 1024, a
 * device scalar read at [0], one step per thread (span 1024) */
static void test_runtime_f16_stride(void)
{
	static const char *names[3] = { "_Z10attn_scaleP6__halfif", "_Z9attn_maskP6__halfPKii",
					"_Z12softmax_rowsP6__halfi" };
	struct fake fk;
	struct kp__rt_fusion_ops ops = { &fk, fake_load, fake_replace, NULL };
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan(3), *plan = NULL;
	struct kp_err err = {0};
	struct kp__rt_fusion *fz;
	struct fnode f[3];
	struct kp__rt_node nodes[3];
	const uint64_t S = 0x7f0000100000ull, POS = 0x7f0000200000ull;
	int round;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", names, 3, cat, &err), 1);
	fz = write_and_open(p, cat, "fusion-f16", NULL, &plan, &ops, &fk);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	for (round = 0; round < 4; round++) {
		/* 0: fine; 1: 2048 columns (past the span); 2: pos inside the
		 * scores (read at [0] while written); 3: pos just past row 11's end */
		int32_t maxlen = round == 1 ? 2048 : 512, v[2] = { maxlen, 0x3e000000 };
		uint64_t pp[2] = { S, round == 2 ? S + 2 * (5 * 1024 + 7) :
				   round == 3 ? S + 2 * (11 * 1024 + 512) : POS };

		mk_node(&f[0], names[0], 6, 128, pp, 1, v, 2);
		mk_node(&f[1], names[1], 6, 128, pp, 2, v, 1);
		mk_node(&f[2], names[2], 12, 128, pp, 1, v, 1);
		nodes[0] = f[0].n;
		nodes[1] = f[1].n;
		nodes[2] = f[2].n;
		fk.n_repl = 0;
		kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 3);
		if (round == 0 || round == 3) {
			CU_ASSERT_EQUAL(fk.n_repl, 1);
			CU_ASSERT_EQUAL(fk.last.rows, 12);
			CU_ASSERT_EQUAL(fk.last.cols, 512);
			CU_ASSERT_EQUAL(fk.last.grid[0], 12);
			CU_ASSERT_EQUAL(fk.last.block[0], 128);
		} else {
			CU_ASSERT_EQUAL(fk.n_repl, 0);
		}
	}
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_SHAPE), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_ALIAS), 1);
	kp__rt_fusion_close(fz);
	kp_plan_free(plan);
	kp_plan_free(p);
	kp_fx_catalog_free(cat);
}

/*
 * The kernel cache (runtime/fcache.c): only a directory of ours alone is
 * used, entries are named by source SHA-256, compute capability and NVRTC
 * version, and a damaged entry is removed, never returned.
 */
static void test_fcache(void)
{
	static const char bin[] = "\x7f" "ELF not really a cubin";
	const char *dir = kp_test_path("fcache"), *lnk = kp_test_path("fcache-link");
	const char *file = kp_test_path("fcache-file");
	char path[4200], name[200], n2[200], sub[600], why[512], got_dir[600], *old, *raw;
	unsigned char *b;
	size_t len = 0, rlen;
	int fd;

	/* directories: created 0700; group or other writable, a link, a file,
	 * refused with the reason */
	snprintf(sub, sizeof(sub), "%s/made", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
	old = getenv("KPLAN_CACHE_DIR") ? strdup(getenv("KPLAN_CACHE_DIR")) : NULL;
	setenv("KPLAN_CACHE_DIR", sub, 1);
	fd = kp__rt_fcache_open(got_dir, sizeof(got_dir), why, sizeof(why));
	CU_ASSERT(fd >= 0);
	if (fd >= 0)
		close(fd);
	CU_ASSERT_STRING_EQUAL(got_dir, sub);
	{
		struct stat st;

		CU_ASSERT_EQUAL(lstat(sub, &st), 0);
		CU_ASSERT_EQUAL(st.st_mode & 0777, 0700);
	}
#define OPEN_OK(d) do { \
		int f_ = kp__rt_fcache_open_dir(d, 0, why, sizeof(why)); \
		CU_ASSERT(f_ >= 0); \
		if (f_ >= 0) \
			close(f_); \
	} while (0)
	OPEN_OK(dir);
	CU_ASSERT_EQUAL(chmod(dir, 0770), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(dir, 0, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "writable by group or others"));
	CU_ASSERT_EQUAL(chmod(dir, 0703), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(dir, 0, why, sizeof(why)), -1);
	CU_ASSERT_EQUAL(chmod(dir, 0755), 0);
	OPEN_OK(dir);
	CU_ASSERT_EQUAL(chmod(dir, 0700), 0);
	CU_ASSERT_EQUAL(symlink(dir, lnk), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(lnk, 0, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "symbolic link"));
	setenv("KPLAN_CACHE_DIR", lnk, 1);
	CU_ASSERT_EQUAL(kp__rt_fcache_open(NULL, 0, why, sizeof(why)), -1);
	CU_ASSERT_EQUAL(kp_test_write(file, "x", 1), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(file, 0, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "not a directory"));
	if (old)
		setenv("KPLAN_CACHE_DIR", old, 1);
	else
		unsetenv("KPLAN_CACHE_DIR");
	free(old);

	/* names: the source's SHA-256, the compute capability, the NVRTC version */
	CU_ASSERT_EQUAL(kp__rt_fcache_name(name, sizeof(name), "abc", 3, 9, 0, 13, 0), 0);
	CU_ASSERT_STRING_EQUAL(name, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61"
			       "f20015ad-sm90-nvrtc13.0.cubin");
	CU_ASSERT_EQUAL(kp__rt_fcache_name(n2, sizeof(n2), "abd", 3, 9, 0, 13, 0), 0);
	CU_ASSERT_STRING_NOT_EQUAL(name, n2);
	CU_ASSERT_EQUAL(kp__rt_fcache_name(n2, sizeof(n2), "abc", 3, 10, 0, 13, 0), 0);
	CU_ASSERT_STRING_NOT_EQUAL(name, n2);
	CU_ASSERT_EQUAL(kp__rt_fcache_name(n2, sizeof(n2), "abc", 3, 9, 0, 13, 1), 0);
	CU_ASSERT_STRING_NOT_EQUAL(name, n2);
	CU_ASSERT_EQUAL(kp__rt_fcache_name(n2, 20, "abc", 3, 9, 0, 13, 0), -1);

	/* entries: written 0600, read back intact */
	fd = kp__rt_fcache_open_dir(dir, 0, why, sizeof(why));
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(kp__rt_fcache_name(name, sizeof(name), "src", 3, 9, 0, 13, 0), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CU_ASSERT_PTR_NULL(kp__rt_fcache_read(fd, name, &len));
	CU_ASSERT_EQUAL(kp__rt_fcache_write(fd, name, bin, sizeof(bin)), 0);
	{
		struct stat st;

		CU_ASSERT_EQUAL(stat(path, &st), 0);
		CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
	}
	b = kp__rt_fcache_read(fd, name, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(len, sizeof(bin));
	CU_ASSERT_EQUAL(memcmp(b, bin, sizeof(bin)), 0);
	free(b);
	/* one CUBIN byte changed: not returned, and the entry is gone */
	raw = kp_test_read(path, &rlen);
	CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
	raw[rlen - 3] ^= 0x20;
	CU_ASSERT_EQUAL(kp_test_write(path, raw, (long)rlen), 0);
	CU_ASSERT_PTR_NULL(kp__rt_fcache_read(fd, name, &len));
	CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
	/* truncated, or a raw CUBIN without the header: the same */
	CU_ASSERT_EQUAL(kp_test_write(path, raw, (long)rlen - 5), 0);
	CU_ASSERT_PTR_NULL(kp__rt_fcache_read(fd, name, &len));
	CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
	CU_ASSERT_EQUAL(kp_test_write(path, bin, (long)sizeof(bin)), 0);
	CU_ASSERT_PTR_NULL(kp__rt_fcache_read(fd, name, &len));
	free(raw);
	/* an entry that is a symbolic link is not followed, and removed */
	CU_ASSERT_EQUAL(kp__rt_fcache_name(n2, sizeof(n2), "src", 3, 9, 0, 13, 1), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_write(fd, n2, bin, sizeof(bin)), 0);
	CU_ASSERT_EQUAL(symlink(n2, path), 0);
	CU_ASSERT_PTR_NULL(kp__rt_fcache_read(fd, name, &len));
	CU_ASSERT_NOT_EQUAL(faccessat(fd, name, F_OK, AT_SYMLINK_NOFOLLOW), 0);
	/* a FIFO under an entry's name: refused at once (never waited on), removed */
	CU_ASSERT_EQUAL(mkfifo(path, 0600), 0);
	CU_ASSERT_PTR_NULL(kp__rt_fcache_read(fd, name, &len));
	CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
	/* a link planted at every temporary name cannot be written through:
	 * the temporary file is created O_EXCL under a random name */
	CU_ASSERT_EQUAL(kp__rt_fcache_write(fd, name, bin, sizeof(bin)), 0);
	b = kp__rt_fcache_read(fd, name, &len);
	CU_ASSERT_PTR_NOT_NULL(b);
	free(b);
	close(fd);
}

/* Swap two directories' names as fast as possible until *stop. */
struct swapper {
	const char *a, *b;
	volatile int stop;
	long swaps;
};

static void *swap_loop(void *arg)
{
	struct swapper *s = arg;

	while (!s->stop)
		s->swaps += !renameat2(AT_FDCWD, s->a, AT_FDCWD, s->b, RENAME_EXCHANGE);
	return NULL;
}

/*
 * Issue 30, defect 1: the cache directory was checked by path (lstat) and
 * its entries opened by path again, so a directory exchanged in between
 * (renameat2 RENAME_EXCHANGE in a loop) served a forged entry with its own
 * correct digest. The directory is now opened once, checked through the
 * descriptor, and entries are read only through it: while a thread keeps
 * exchanging the genuine cache with a forged one (group-writable, so that
 * the check can tell them apart), every open either refuses what it got or
 * reads the genuine entry, never the forged one.
 */
static void test_fcache_swap(void)
{
	static const char good[] = "genuine cubin", evil[] = "forged cubin!";
	const char *cache = kp_test_path("swap-cache"), *forged = kp_test_path("swap-forged");
	struct swapper sw = { cache, forged, 0, 0 };
	char name[200], why[512];
	long opened = 0, refused = 0, forged_reads = 0, i;
	pthread_t th;
	size_t len;
	void *b;
	int fd;

	CU_ASSERT_EQUAL_FATAL(mkdir(cache, 0700), 0);
	CU_ASSERT_EQUAL_FATAL(mkdir(forged, 0700), 0);
	CU_ASSERT_EQUAL_FATAL(kp__rt_fcache_name(name, sizeof(name), "src", 3, 9, 0, 13, 0), 0);
	fd = kp__rt_fcache_open_dir(forged, 0, why, sizeof(why));
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_write(fd, name, evil, sizeof(evil)), 0);   /* a valid digest */
	close(fd);
	CU_ASSERT_EQUAL(chmod(forged, 0770), 0);
	fd = kp__rt_fcache_open_dir(cache, 0, why, sizeof(why));
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_write(fd, name, good, sizeof(good)), 0);
	close(fd);
	if (pthread_create(&th, NULL, swap_loop, &sw)) {
		CU_FAIL("pthread_create");
		return;
	}
	for (i = 0; i < 5000; i++) {
		fd = kp__rt_fcache_open_dir(cache, 0, why, sizeof(why));
		if (fd < 0) {
			refused++;
			continue;
		}
		opened++;
		b = kp__rt_fcache_read(fd, name, &len);
		if (b && len == sizeof(evil) && !memcmp(b, evil, len))
			forged_reads++;
		else
			CU_ASSERT(b && len == sizeof(good) && !memcmp(b, good, len));
		free(b);
		close(fd);
	}
	sw.stop = 1;
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(forged_reads, 0);
	CU_ASSERT(opened > 0);
	CU_ASSERT(sw.swaps > 0);
	(void)refused;   /* how often the swap won the race: varies, and both outcomes are safe */
}

/*
 * The cache directory's parents: writable by others and not sticky (a
 * shared group directory) or owned by another user, someone else could
 * rename the cache away and put theirs in its place: refused. Sticky (as
 * /tmp) is fine, and links in the path are resolved first.
 */
static void test_fcache_parents(void)
{
	const char *shared = kp_test_path("shared"), *lnk = kp_test_path("shared-link");
	char cache[600], via[600], why[512];
	int fd;

	snprintf(cache, sizeof(cache), "%s/cache", shared);
	snprintf(via, sizeof(via), "%s/cache", lnk);
	CU_ASSERT_EQUAL_FATAL(mkdir(shared, 0755), 0);
	CU_ASSERT_EQUAL(chmod(shared, 0777), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(cache, 1, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "writable by group or others and not sticky"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, shared));
	CU_ASSERT_NOT_EQUAL(access(cache, F_OK), 0);   /* refused before creating anything */
	CU_ASSERT_EQUAL(chmod(shared, 0775), 0);
	CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(cache, 1, why, sizeof(why)), -1);
	CU_ASSERT_EQUAL(chmod(shared, 01777), 0);
	fd = kp__rt_fcache_open_dir(cache, 1, why, sizeof(why));
	CU_ASSERT(fd >= 0);
	if (fd >= 0)
		close(fd);
	CU_ASSERT_EQUAL(chmod(shared, 0755), 0);
	CU_ASSERT_EQUAL(symlink(shared, lnk), 0);
	fd = kp__rt_fcache_open_dir(via, 0, why, sizeof(why));
	CU_ASSERT(fd >= 0);
	if (fd >= 0)
		close(fd);
	if (geteuid() == 0) {
		/* only root can give a directory away */
		CU_ASSERT_EQUAL(chown(shared, 65534, 65534), 0);
		CU_ASSERT_EQUAL(kp__rt_fcache_open_dir(cache, 0, why, sizeof(why)), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "owned by another user"));
		CU_ASSERT_EQUAL(chown(shared, 0, 0), 0);
	}
}

static void test_runtime_load_failures(void)
{
	struct fake fk;
	struct kp__rt_fusion_ops ops = { &fk, fake_load, fake_replace, NULL };
	struct kp_err err = {0};
	struct kp_plan *plan;
	struct kp__rt_fusion *fz;
	struct fnode f[8];
	struct kp__rt_node nodes[9];
	const char *path = write_fused_plan("fusion-rt-bad", 1);

	memset(&fk, 0, sizeof(fk));
	plan = kp_plan_load(path, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	fz = kp__rt_fusion_open(plan, path, NULL, &ops);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	/* group 2's source was edited after planning: refused, group 1 still loads */
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_HASH), 1);
	CU_ASSERT_EQUAL(fk.loads, 1);
	mlp_nodes(f, nodes, 0, 0);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 1);
	kp__rt_fusion_close(fz);

	/* compile errors: nothing applied, never a replace call */
	memset(&fk, 0, sizeof(fk));
	fk.load_fail = 1;
	fz = kp__rt_fusion_open(plan, path, NULL, &ops);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_COMPILE), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 0);
	CU_ASSERT_EQUAL(fk.replace_calls, 0);
	kp__rt_fusion_close(fz);

	/* without ops (a build with no CUDA): fusion-compile, no crash */
	fz = kp__rt_fusion_open(plan, path, NULL, NULL);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_COMPILE), 1);
	CU_ASSERT_EQUAL(kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 9), 0);
	kp__rt_fusion_close(fz);

	/* a missing source file */
	kp_test_sh("rm -f '%s'/kpfuse-*.cu", kp_test_path("fusion-rt-bad"));
	fz = kp__rt_fusion_open(plan, path, NULL, &ops);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_SOURCE), 2);
	kp__rt_fusion_close(fz);
	kp_plan_free(plan);
}

static void test_cli_plan_catalog(void)
{
	const char *dir = kp_test_path("fusion-cli");
	char trace[512];
	size_t i;
	FILE *f;

	kp_test_sh("mkdir -p '%s'", dir);
	snprintf(trace, sizeof(trace), "%s/trace.tsv", dir);
	f = fopen(trace, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	for (i = 0; i < 8; i++)
		fprintf(f, "mlp.forward\t%zu\t%s\n", i, mlp_names[i]);
	fclose(f);
	{
		struct kp_plan *p = base_plan(8);
		struct kp_strbuf text = KP_STRBUF_INIT;
		struct kp_err err = {0};
		char path[512];

		snprintf(path, sizeof(path), "%s/base.kplan", dir);
		kp_plan_write(p, &text, &err);
		kp_test_write(path, text.buf, (long)text.len);
		kp_strbuf_release(&text);
		kp_plan_free(p);
	}
	/* mlp's groups end in an f32 layer norm without a layout: not bit-exact,
	 * so the default (--fusion exact) drops them, one line each, and writes
	 * no source */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --base '%s/base.kplan' --kernels '%s' --catalog '%s' -o '%s/f.kplan' >'%s/out.txt'",
				   kp_test_kplan(), dir, trace, kp_test_src("fusion/catalog/examples.kpcat"), dir, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -c '^fusion group [12] (_Z.*layernorm.*) dropped: not bit-exact "
				   "(.layernorm. sums its mean .mean. in another order than the kernel: no "
				   "layout in the catalog); use --fusion tolerant$' '%s/out.txt' | grep -qx 2", dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '2 not bit-exact' '%s/out.txt'", dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("! grep -q '^.fusion' '%s/f.kplan' && ! ls '%s'/kpfuse-*.cu >/dev/null 2>&1",
				   dir, dir), 0);
	/* --fusion tolerant keeps them, with their tolerance */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --base '%s/base.kplan' --kernels '%s' --catalog '%s' --fusion tolerant "
				   "-o '%s/f.kplan' >/dev/null",
				   kp_test_kplan(), dir, trace, kp_test_src("fusion/catalog/examples.kpcat"), dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^source kpfuse-' '%s/f.kplan' && ls '%s'/kpfuse-*.cu >/dev/null", dir, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -c '^numerics tolerant$' '%s/f.kplan' | grep -qx 2 && "
				   "grep -c '^tolerance 1e-05$' '%s/f.kplan' | grep -qx 2", dir, dir), 0);
	/* --fusion off: none, from the trace or the base plan */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --base '%s/f.kplan' --kernels '%s' --catalog '%s' --fusion off "
				   "-o '%s/g.kplan' >'%s/out.txt'",
				   kp_test_kplan(), dir, trace, kp_test_src("fusion/catalog/examples.kpcat"), dir, dir), 0);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^.fusion' '%s/g.kplan'", dir), 1);
	CU_ASSERT_EQUAL(kp_test_sh("grep -q '^fusion: 2 groups dropped: --fusion off$' '%s/out.txt'", dir), 0);
	/* usage errors */
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --base '%s/base.kplan' -o x 2>/dev/null", kp_test_kplan(), dir), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --base '%s/base.kplan' --kernels '%s' --catalog '%s' --fusion fast "
				   "-o x 2>/dev/null", kp_test_kplan(), dir, trace,
				   kp_test_src("fusion/catalog/examples.kpcat")), 64);
	CU_ASSERT_EQUAL(kp_test_sh("%s plan --catalog /nonexistent x.db -o x 2>/dev/null", kp_test_kplan()), 2);
}

/* ---------------------------------------------------------------------- */
/* warp scheme: GEMVs with their bias copy and elementwise epilogue */

#define BIAS "_Z9bias_copyP6__halfPKS_i"
#define GEMV768 "_Z4gemvILi768E6__halfLb1EEvPKS0_S2_PT0_ii"
#define GEMV3072 "_Z4gemvILi3072E6__halfLb1EEvPKS0_S2_PT0_ii"
#define EW "_Z2ewiP6__halfPKS_S2_fi"

static void test_gen_warp(void)
{
	static const char text[] =
		"kernel g\nmatch g\nparam 0 w f32*\nparam 1 x f32*\nparam 2 y f32*\nrows 8\ncols 1\n"
		"layout 64 4\ndot d w x 128\nout y[i] = d\nend\n"
		"kernel e\nmatch e\nparam 0 y f32*\nrows 8\ncols 1\nout y[i] = relu(y[i])\nend\n";
	struct kp_fx_catalog *cat = shipped(), *own;
	const struct kp_fx_kernel *chain[10];
	struct kp_fx_group g;
	struct kp_err err = {0};
	const char *pre, *wait;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	/* decode's output projection: bias copy, GEMV (K 3072), residual add */
	chain[0] = by_name(cat, "decode_bias_copy");
	chain[1] = by_name(cat, "decode_gemv_3072");
	chain[2] = by_name(cat, "decode_ew");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 3, &g, &err), 0);
	CU_ASSERT_EQUAL(g.scheme, KP_FX_SCHEME_WARP);
	CU_ASSERT_EQUAL(g.dot, 1);
	CU_ASSERT_EQUAL(g.block, 256);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// scheme warp\n// block 256\n// chain 3\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// dot 1 0 1 3072\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// shape 1 p3 c1 flat\n"));
	for (i = 0; i < (int)g.n_access; i++) {
		if (g.access[i].kernel == 1 && g.access[i].param == 0)
			CU_ASSERT_STRING_EQUAL(g.access[i].mode, "mh");
		if (g.access[i].kernel == 1 && g.access[i].param == 1)
			CU_ASSERT_STRING_EQUAL(g.access[i].mode, "vh");
	}
	/* the weights (const) stream before the wait, 12 steps of 16 bytes */
	pre = strstr(g.source.buf, "kp_w[kp_c] = __ldcs((const uint4 *)(k1_w + i * 3072ll) + kp_lane + 32 * kp_c);");
	wait = strstr(g.source.buf, "griddepcontrol.wait");
	CU_ASSERT(pre && wait && pre < wait);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "uint4 kp_w[12];"));
	/* the lanes' sums in the kernel's order, then xor shuffles */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_dot = kp_dot16(kp_w[kp_c], ((const uint4 *)k1_x)[kp_lane + 32 * kp_c], kp_dot);"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "kp_dot += __shfl_xor_sync(0xffffffffu, kp_dot, kp_o);"));
	/* the bias reaches the GEMV's y[i] in a register; the residual reads
	 * the GEMV's output from its register */
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "(k1_y == k0_y ? kp_v0_0 : "));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "(k2_b == k1_y ? kp_v1_1 : "));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "if (kp_lane == 0) {"));
	/* a GEMV waits before it lets its successor launch (unless told) */
	CU_ASSERT(strstr(g.source.buf, "griddepcontrol.wait") <
		  strstr(g.source.buf, "griddepcontrol.launch_dependents"));
	golden("f16_bias_gemv_residual", &g);
	kp_fx_group_release(&g);
	setenv("KPLAN_FUSION_PDL_EARLY", "1", 1);
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 3, &g, &err), 0);
	unsetenv("KPLAN_FUSION_PDL_EARLY");
	CU_ASSERT(strstr(g.source.buf, "griddepcontrol.wait") >
		  strstr(g.source.buf, "griddepcontrol.launch_dependents"));
	kp_fx_group_release(&g);

	/* the fc GEMV with HF's eight-op GELU after it: 10 kernels, one kernel */
	chain[0] = by_name(cat, "decode_bias_copy");
	chain[1] = by_name(cat, "decode_gemv_768");
	for (i = 2; i < 10; i++)
		chain[i] = by_name(cat, "decode_ew");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 10, &g, &err), 0);
	CU_ASSERT_EQUAL(g.scheme, KP_FX_SCHEME_WARP);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "uint4 kp_w[3];"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "k9_out[i] = kp_h9_0;"));
	kp_fx_group_release(&g);

	/* refused: two dots, a row kernel next to a dot */
	chain[0] = by_name(cat, "decode_gemv_768");
	chain[1] = by_name(cat, "decode_gemv_768");
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 2, &g, &err), KP_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "one per chain"));
	chain[0] = by_name(cat, "decode_layernorm");
	CU_ASSERT_EQUAL(kp_fx_generate(chain, 2, &g, &err), KP_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cannot join dot kernel"));
	kp_fx_catalog_free(cat);

	/* f32, W not const: its loads come after the wait, in the loop */
	own = kp_fx_catalog_parse(text, sizeof(text) - 1, "own", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(own);
	chain[0] = &own->kernels[0];
	chain[1] = &own->kernels[1];
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate(chain, 2, &g, &err), 0);
	CU_ASSERT_EQUAL(g.block, 64);
	pre = strstr(g.source.buf, "kp_w[kp_c] = __ldcs((const uint4 *)(k0_w + i * 128ll)");
	wait = strstr(g.source.buf, "griddepcontrol.wait");
	CU_ASSERT(pre && wait && pre > wait);
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "__uint_as_float(w.x)"));
	CU_ASSERT_PTR_NULL(strstr(g.source.buf, "kp_h2f"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g.source.buf, "// dot 0 0 1 128\n"));
	kp_fx_group_release(&g);
	kp_fx_catalog_free(own);
}

/* decode's layer as the runtime captures it: which groups the planner forms */
static void test_plan_dot_groups(void)
{
	static const char *names[] = {
		"_Z9layernormPK6__halfPS_S1_S1_", BIAS, GEMV768, "kv_append", "attn_scores",
		"_Z10attn_scaleP6__halfif", "_Z9attn_maskP6__halfPKii", "_Z12softmax_rowsP6__halfi",
		"attn_pv", BIAS, GEMV768, EW, "_Z9layernormPK6__halfPS_S1_S1_", BIAS, GEMV768,
		EW, EW, EW, EW, EW, EW, EW, EW, BIAS, GEMV3072, EW,
		"_Z9layernormPK6__halfPS_S1_S1_", GEMV768, "argmax",
	};
	static const struct { uint32_t first, n; } want[] = {
		{ 1, 2 }, { 9, 3 }, { 13, 10 }, { 23, 3 }, { 5, 3 },
	};
	const size_t n = sizeof(names) / sizeof(names[0]);
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan((uint32_t)n);
	struct kp_fx_plan_stats st;
	struct kp_err err = {0};
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", names, n, cat, &err), 5);
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 5);
	for (i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(p->fusions[i].first_kernel, want[i].first);
		CU_ASSERT_EQUAL(p->fusions[i].kernels, want[i].n);
		CU_ASSERT_EQUAL(p->fusions[i].id, i + 1);
	}
	/* every group generates (the lone layer norms and the LM head GEMV stay),
	 * every one bit-exact (f16 values, the kernels' own reduction layouts,
	 * the GEMV's summation order) */
	CU_ASSERT_EQUAL(kp_fx_plan_sources(p, cat, NULL, &st, &err), 0);
	CU_ASSERT_EQUAL(st.generated, 5);
	CU_ASSERT_EQUAL(st.infeasible, 0);
	for (i = 0; i < 5; i++)
		CU_ASSERT(p->fusions[i].exact && !p->fusions[i].inexact_why);
	kp_plan_free(p);

	/* database mode: the analyzer's candidates that a generated group
	 * covers are dropped, the others stay (ids keep their order) */
	p = base_plan((uint32_t)n);
	p->fusions = calloc(2, sizeof(*p->fusions));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->fusions);
	p->n_fusions = 2;
	for (i = 0; i < 2; i++) {
		p->fusions[i].id = (uint32_t)i + 1;
		p->fusions[i].region = strdup("mlp.forward");
		p->fusions[i].first_kernel = i ? 26 : 0;   /* LN + bias copy; LN + LM head */
		p->fusions[i].kernels = 2;
		p->fusions[i].names = strdup("x -> y");
	}
	CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", names, n, cat, &err), 5);
	CU_ASSERT_EQUAL(kp_fx_plan_sources_from(p, 2, cat, NULL, NULL, &err), 0);
	CU_ASSERT_EQUAL(kp_fx_plan_drop_covered(p, 2), 1);
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 6);
	CU_ASSERT_EQUAL(p->fusions[0].id, 2);
	CU_ASSERT_EQUAL(p->fusions[0].first_kernel, 26);
	CU_ASSERT_EQUAL(p->fusions[1].id, 3);
	CU_ASSERT_PTR_NOT_NULL(p->fusions[1].source);
	kp_plan_free(p);
	kp_fx_catalog_free(cat);

	/* a group's names must fit one plan string (else the plan could not be
	 * written): a long run is cut into chains that fit */
	{
		static const char text[] = "kernel e\nmatch long*\nparam 0 y f32*\nrows 1\ncols 4\n"
					   "out y[i] = y[i] * 2\nend\n";
		char longname[300];
		const char *ln[7];
		struct kp_strbuf out = KP_STRBUF_INIT;

		cat = kp_fx_catalog_parse(text, sizeof(text) - 1, "t", &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
		memset(longname, 'x', sizeof(longname) - 1);
		memcpy(longname, "long", 4);
		longname[sizeof(longname) - 1] = 0;
		for (i = 0; i < 7; i++)
			ln[i] = i == 3 ? "other" : longname;
		p = base_plan(7);
		/* 0..2 and 4..6: 3 x 299 bytes fit */
		CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", ln, 7, cat, &err), 2);
		ln[3] = longname;
		kp_plan_free(p);
		/* one run of 7: cut into chains that fit (3, 3; the last alone stays) */
		p = base_plan(7);
		CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", ln, 7, cat, &err), 2);
		CU_ASSERT_EQUAL_FATAL(p->n_fusions, 2);
		CU_ASSERT_EQUAL(p->fusions[0].first_kernel, 0);
		CU_ASSERT_EQUAL(p->fusions[0].kernels, 3);
		CU_ASSERT_EQUAL(p->fusions[1].first_kernel, 3);
		CU_ASSERT_EQUAL(p->fusions[1].kernels, 3);
		CU_ASSERT(strlen(p->fusions[1].names) <= KP_PLAN_MAX_STR);
		CU_ASSERT_EQUAL(kp_plan_write(p, &out, &err), 0);
		kp_strbuf_release(&out);
		kp_plan_free(p);
		kp_fx_catalog_free(cat);
	}
}

static void test_runtime_warp(void)
{
	static const char *names[3] = { BIAS, GEMV768, EW };
	struct fake fk;
	struct kp__rt_fusion_ops ops = { &fk, fake_load, fake_replace, NULL };
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan(3), *plan = NULL;
	struct kp_err err = {0};
	struct kp__rt_fusion *fz;
	struct fnode f[3];
	struct kp__rt_node nodes[3];
	const uint64_t W = 0x7f0000000000ull, X = 0x7f0001000000ull, Y = 0x7f0002000000ull,
		B = 0x7f0003000000ull, R = 0x7f0004000000ull;
	int round;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	CU_ASSERT_EQUAL(kp_fx_plan_add_chains(p, "mlp.forward", names, 3, cat, &err), 1);
	fz = write_and_open(p, cat, "fusion-warp", NULL, &plan, &ops, &fk);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	CU_ASSERT_EQUAL(fk.loads, 1);
	for (round = 0; round < 5; round++) {
		/* 0: fine; 1: W off 16 bytes; 2: the residual's input is the GEMV's
		 * x (a vector every warp reads while the add writes it); 3: the
		 * bias copy 2304 elements, the GEMV 768; 4: y inside W */
		int32_t n = 768, nb = round == 3 ? 2304 : 768, v[2];
		uint64_t pb[2] = { round == 4 ? W + 2 * 768 * 10 : Y, B };
		uint64_t pg[3] = { round == 1 ? W + 8 : W, X, round == 4 ? W + 2 * 768 * 10 : Y };
		uint64_t pe[3] = { round == 2 ? X : R, R, Y };

		v[0] = nb;
		mk_node(&f[0], names[0], 1, 128, pb, 2, v, 1);
		v[0] = n;
		v[1] = 1;
		mk_node(&f[1], names[1], 192, 128, pg, 3, v, 2);
		mk_ew(&f[2], 0, pe, 0x3f800000, n);   /* residual add: R = R + Y */
		nodes[0] = f[0].n;
		nodes[1] = f[1].n;
		nodes[2] = f[2].n;
		fk.n_repl = 0;
		kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 3);
		if (round == 0) {
			CU_ASSERT_EQUAL(fk.n_repl, 1);
			CU_ASSERT_EQUAL(fk.last.rows * fk.last.cols, 768);
			CU_ASSERT_EQUAL(fk.last.grid[0], 96);   /* 8 warps, one element each */
			CU_ASSERT_EQUAL(fk.last.block[0], 256);
			CU_ASSERT(fk.tail_ok);
		} else {
			CU_ASSERT_EQUAL(fk.n_repl, 0);
		}
	}
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_SHAPE), 2);
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_ALIAS), 2);
	kp__rt_fusion_close(fz);
	kp_plan_free(plan);
	kp_plan_free(p);
	kp_fx_catalog_free(cat);
}

/* the hex a kernel trace lists for parameters of the given sizes and values */
static void trace_args(char *out, size_t cap, const int *sizes, const uint64_t *vals, int n)
{
	size_t o = 0;
	int p, b;

	for (p = 0; p < n; p++) {
		if (p)
			o += (size_t)snprintf(out + o, cap - o, ":");
		for (b = 0; b < sizes[p]; b++)
			o += (size_t)snprintf(out + o, cap - o, "%02x", (unsigned)((vals[p] >> (8 * b)) & 0xff));
	}
}

/* const scalars: compiled in from a trace's captured values, guarded at capture */
static void test_spec(void)
{
	static const int ew_sizes[6] = { 4, 8, 8, 8, 4, 4 }, g_sizes[5] = { 8, 8, 8, 4, 4 },
		b_sizes[3] = { 8, 8, 4 };
	const uint64_t W = 0x7f0000000000ull, X = 0x7f0001000000ull,
		B = 0x7f0003000000ull, F = 0x7f0004000000ull, P = 0x7f0005000000ull;
	uint64_t ev[6] = { 4, P, F, 0, 0, 3072 }, gv[5] = { W, X, F, 3072, 1 }, bv[3] = { F, B, 3072 };
	char ea[3][128], ga[128], ba[128], *line;
	struct kp_fx_catalog *cat = shipped();
	struct kp_plan *p = base_plan(5), *plan = NULL;
	struct kp_strbuf trace = KP_STRBUF_INIT;
	struct kp_fx_plan_stats st;
	struct kp_err err = {0};
	struct fake fk;
	struct kp__rt_fusion_ops ops = { &fk, fake_load, fake_replace, NULL };
	struct kp__rt_fusion *fz;
	char path[512];
	size_t n;
	int round;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	/* bias copy, fc GEMV, then pow3 (op 4), * 0.044715 (op 2), tanh (op 5) */
	trace_args(ba, sizeof(ba), b_sizes, bv, 3);
	trace_args(ga, sizeof(ga), g_sizes, gv, 5);
	trace_args(ea[0], sizeof(ea[0]), ew_sizes, ev, 6);
	ev[0] = 2; ev[2] = P; ev[4] = 0x3d372713;   /* 0.044715f */
	trace_args(ea[1], sizeof(ea[1]), ew_sizes, ev, 6);
	ev[0] = 5; ev[4] = 0;
	trace_args(ea[2], sizeof(ea[2]), ew_sizes, ev, 6);
	kp_strbuf_addf(&trace, "mlp.forward\t0\t%s\t%s\nmlp.forward\t1\t%s\t%s\n", BIAS, ba, GEMV768, ga);
	for (n = 0; n < 3; n++)
		kp_strbuf_addf(&trace, "mlp.forward\t%zu\t%s\t%s\n", n + 2, EW, ea[n]);
	CU_ASSERT_EQUAL(kp_fx_plan_add_trace(p, trace.buf, trace.len, "t", cat, &err), 1);
	CU_ASSERT_EQUAL_FATAL(p->n_fusions, 1);
	CU_ASSERT_EQUAL(p->fusions[0].kernels, 5);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->fusions[0].args);
	memset(&st, 0, sizeof(st));
	fz = write_and_open(p, cat, "fusion-spec", &st, &plan, &ops, &fk);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fz);
	CU_ASSERT_EQUAL(st.generated, 1);
	CU_ASSERT_PTR_NULL(plan->fusions[0].args);   /* never written */
	CU_ASSERT_EQUAL(fk.loads, 1);
	snprintf(path, sizeof(path), "%s/%s", kp_test_path("fusion-spec"), p->fusions[0].source);
	line = kp_test_read(path, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(line);
	/* op, s and beta are compiled in, listed for the guard, not passed */
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "// const 1 4 4 0x1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "// const 2 0 4 0x4\n// const 2 4 4 0x0\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "// const 3 4 4 0x3d372713\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "((1) != 0)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "__int_as_float(0x3d372713)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "(((4) == 0) ?"));
	CU_ASSERT_PTR_NULL(strstr(line, "k2_op"));
	CU_ASSERT_PTR_NULL(strstr(line, "k1_beta"));
	/* pointer relations of the capture are compiled in and listed: the
	 * first op reads the GEMV's output (same pointer), the second the
	 * first's; no run-time pointer comparisons are left */
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "// same 2 2 1 2 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "// same 3 2 2 1 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "const float kp_l1 = kp_v1_1;"));
	CU_ASSERT_PTR_NULL(strstr(line, " == k"));
	free(line);
	for (round = 0; round < 3; round++) {
		/* 0: the captured values; 1: the tanh is a sigmoid now (op 6);
		 * 2: the second op reads the GEMV's output, not the first op's */
		struct fnode f[5];
		struct kp__rt_node nodes[5];
		int32_t iv[2];
		uint64_t pp[3];
		int k;

		pp[0] = F; pp[1] = B; iv[0] = 3072;
		mk_node(&f[0], BIAS, 3, 128, pp, 2, iv, 1);
		pp[0] = W; pp[1] = X; pp[2] = F; iv[0] = 3072; iv[1] = 1;
		mk_node(&f[1], GEMV768, 768, 128, pp, 3, iv, 2);
		for (k = 0; k < 3; k++) {
			static const uint32_t sv[3] = { 0, 0x3d372713, 0 };
			int32_t ops3[3] = { 4, 2, round == 1 ? 6 : 5 };
			uint64_t pt[3] = { P, k && !(round == 2 && k == 1) ? P : F, 0 };

			mk_ew(&f[2 + k], ops3[k], pt, sv[k], 3072);
		}
		for (k = 0; k < 5; k++)
			nodes[k] = f[k].n;
		fk.n_repl = 0;
		kp__rt_fusion_apply(fz, "mlp.forward", (void *)1, nodes, 5);
		CU_ASSERT_EQUAL(fk.n_repl, round ? 0u : 1u);
		if (!round)
			CU_ASSERT_EQUAL(fk.last.grid[0], 384);
	}
	CU_ASSERT_EQUAL(kp__rt_fusion_failures(fz, KP__RT_FX_CHAIN), 2);
	kp__rt_fusion_close(fz);
	kp_plan_free(plan);
	kp_plan_free(p);
	kp_strbuf_release(&trace);
	kp_fx_catalog_free(cat);
}

/* ---------------------------------------------------------------------- */
/* the generated code compiles: NVRTC (no GPU needed), when this machine has it */

typedef int (*nv_create_fn)(void **prog, const char *src, const char *name, int n_headers,
			    const char *const *headers, const char *const *include_names);
typedef int (*nv_compile_fn)(void *prog, int n_opts, const char *const *opts);
typedef int (*nv_logsize_fn)(void *prog, size_t *size);
typedef int (*nv_log_fn)(void *prog, char *log);
typedef int (*nv_destroy_fn)(void **prog);

/* 0 when src compiles for sm_90 (PTX), else 1 with NVRTC's log on stderr */
static int nvrtc_compiles(void *lib, const char *src, const char *name)
{
	nv_create_fn create = (nv_create_fn)dlsym(lib, "nvrtcCreateProgram");
	nv_compile_fn compile = (nv_compile_fn)dlsym(lib, "nvrtcCompileProgram");
	nv_logsize_fn logsize = (nv_logsize_fn)dlsym(lib, "nvrtcGetProgramLogSize");
	nv_log_fn getlog = (nv_log_fn)dlsym(lib, "nvrtcGetProgramLog");
	nv_destroy_fn destroy = (nv_destroy_fn)dlsym(lib, "nvrtcDestroyProgram");
	static const char *const opts[] = { "--gpu-architecture=compute_90" };
	void *prog = NULL;
	size_t n = 0;
	int rc;

	if (!create || !compile || !logsize || !getlog || !destroy || create(&prog, src, name, 0, NULL, NULL))
		return 1;
	rc = compile(prog, 1, opts);
	if (rc && !logsize(prog, &n) && n) {
		char *log = malloc(n);

		if (log && !getlog(prog, log))
			fprintf(stderr, "\n%s: NVRTC says:\n%s\n", name, log);
		free(log);
	}
	destroy(&prog);
	return rc != 0;
}

static void test_nvrtc_compiles(void)
{
	static const char *golden_files[] = { "bias_residual_layernorm", "copy_residual_gelu",
					      "f16_bias_gemv_residual", "f16_residual_layernorm",
					      "f16_scale_mask_softmax" };
	static const int ew_sizes[6] = { 4, 8, 8, 8, 4, 4 }, g_sizes[5] = { 8, 8, 8, 4, 4 },
		b_sizes[3] = { 8, 8, 4 };
	const uint64_t F = 0x7f0004000000ull, P = 0x7f0005000000ull;
	uint64_t ev[6] = { 5, P, P, 0, 0, 3072 }, gv[5] = { 0x7f0000000000ull, 0x7f0001000000ull, F, 3072, 1 },
		bv[3] = { F, 0x7f0003000000ull, 3072 };
	char ea[2][128], ga[128], ba[128], cuda[300];
	const char *args[4] = { ba, ga, ea[0], ea[1] };
	const struct kp_fx_kernel *chain[4];
	struct kp_fx_catalog *cat;
	struct kp_fx_group g;
	struct kp_err err = {0};
	const char *home = getenv("CUDA_HOME");
	void *lib;
	size_t i, n;

#ifdef __SANITIZE_ADDRESS__
	/* NVRTC's own allocations are not ours to check */
	fprintf(stderr, "(skipped under AddressSanitizer) ");
	return;
#endif
	snprintf(cuda, sizeof(cuda), "%s/lib64/libnvrtc.so.13", home ? home : "/usr/local/cuda");
	if (!(lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL)) &&
	    !(lib = dlopen(cuda, RTLD_NOW | RTLD_LOCAL))) {
		fprintf(stderr, "(no libnvrtc.so.13 here: not compiled) ");
		return;
	}
	for (i = 0; i < sizeof(golden_files) / sizeof(golden_files[0]); i++) {
		char rel[128], *src;

		snprintf(rel, sizeof(rel), "tests/golden/fusion/%s.cu", golden_files[i]);
		src = kp_test_read(kp_test_src(rel), &n);
		CU_ASSERT_PTR_NOT_NULL_FATAL(src);
		CU_ASSERT_EQUAL(nvrtc_compiles(lib, src, rel), 0);
		free(src);
	}
	/* specialised: bias copy -> fc GEMV -> tanh -> add (op 0, pointers equal) */
	cat = shipped();
	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	trace_args(ba, sizeof(ba), b_sizes, bv, 3);
	trace_args(ga, sizeof(ga), g_sizes, gv, 5);
	trace_args(ea[0], sizeof(ea[0]), ew_sizes, ev, 6);
	ev[0] = 0;
	ev[3] = F;
	trace_args(ea[1], sizeof(ea[1]), ew_sizes, ev, 6);
	chain[0] = by_name(cat, "decode_bias_copy");
	chain[1] = by_name(cat, "decode_gemv_768");
	chain[2] = chain[3] = by_name(cat, "decode_ew");
	CU_ASSERT_EQUAL_FATAL(kp_fx_generate_spec(chain, args, 4, &g, &err), 0);
	CU_ASSERT(g.n_spec > 0);
	CU_ASSERT_EQUAL(nvrtc_compiles(lib, g.source.buf, g.file), 0);
	kp_fx_group_release(&g);
	kp_fx_catalog_free(cat);
	dlclose(lib);
}

CU_TestInfo kp_tests_fusion[] = {
	{ "catalog: shipped entries", test_catalog_shipped },
	{ "catalog: errors name line and field", test_catalog_errors },
	{ "catalog: limits", test_catalog_limits },
	{ "catalog: hostile input", test_catalog_hostile },
	{ "codegen: rows scheme (golden)", test_gen_rows },
	{ "codegen: elementwise scheme (golden)", test_gen_elementwise },
	{ "codegen: f16, layouts, strides (golden)", test_gen_f16 },
	{ "codegen: conflicting layouts refused", test_gen_layout_conflict },
	{ "codegen: feasibility and cost rule", test_gen_feasibility },
	{ "codegen: warp scheme, GEMV with prologue and epilogue (golden)", test_gen_warp },
	{ "plan: GEMV groups take their bias copy and epilogue", test_plan_dot_groups },
	{ "runtime: warp scheme grid, alignment, aliasing", test_runtime_warp },
	{ "plan + runtime: const scalars specialised from a trace, guarded", test_spec },
	{ "codegen: golden and specialised sources compile (NVRTC, sm_90)", test_nvrtc_compiles },
	{ "plan: from a kernel trace, sources by hash", test_plan_trace_and_sources },
	{ "plan: the order of trace groups and candidates (kp_fx_plan_fuse)", test_plan_fuse_order },
	{ "runtime: chain lookup, mapping, checks", test_runtime_apply },
	{ "runtime: groups out of kernel order, overlaps", test_runtime_order },
	{ "numerics: exact chains, reductions, FMA across kernels", test_numerics },
	{ "numerics: plan round trip, --fusion exact|tolerant|off", test_numerics_plan },
	{ "runtime: f16, row stride, [0] reads, span", test_runtime_f16_stride },
	{ "runtime: hash, compile, missing source", test_runtime_load_failures },
	{ "runtime: kernel cache directory, names, damaged entries", test_fcache },
	{ "runtime: kernel cache opened once: a swapped directory is never used", test_fcache_swap },
	{ "runtime: kernel cache parents writable by others refused unless sticky",
	  test_fcache_parents },
	{ "cli: plan --base --kernels --catalog", test_cli_plan_catalog },
	CU_TEST_INFO_NULL,
};
