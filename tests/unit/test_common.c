/* test_common.c - common/: errors, strbuf, vec, arena, hash map, region families, fileio, printable. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CUnit/CUnit.h>

#include "common/arena.h"
#include "common/err.h"
#include "common/family.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/kname.h"
#include "common/printable.h"
#include "common/strbuf.h"
#include "common/vec.h"
#include "testutil.h"

static void test_err(void)
{
	struct kp_err err = {0};

	CU_ASSERT_EQUAL(kp_err_set(&err, KP_EFORMAT, "bad %s at %d", "thing", 7), KP_EFORMAT);
	CU_ASSERT_STRING_EQUAL(err.msg, "bad thing at 7");
	CU_ASSERT_PTR_NOT_NULL(strstr(err.where, "test_common.c"));
	kp_err_prefix(&err, "file.db");
	CU_ASSERT_STRING_EQUAL(err.msg, "file.db: bad thing at 7");
	CU_ASSERT_STRING_EQUAL(kp_errcode_name(err.code), "EFORMAT");
	CU_ASSERT_EQUAL(kp_err_set(NULL, KP_EIO, "ignored"), KP_EIO);
	kp_err_set(&err, KP_EIO, "/d/.out.db.tmp-AB12: disk full");
	kp_err_rename(&err, "/d/.out.db.tmp-AB12", "/d/out.db");
	CU_ASSERT_STRING_EQUAL(err.msg, "/d/out.db: disk full");
	kp_err_rename(&err, "absent", "x");
	CU_ASSERT_STRING_EQUAL(err.msg, "/d/out.db: disk full");
	kp_err_clear(&err);
	CU_ASSERT_EQUAL(err.code, 0);
}

static void test_strbuf(void)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	char *p;
	size_t len;
	int i;

	CU_ASSERT_STRING_EQUAL(sb.buf, "");
	for (i = 0; i < 1000; i++)
		kp_strbuf_addf(&sb, "%d,", i);
	CU_ASSERT_EQUAL(strncmp(sb.buf, "0,1,2,", 6), 0);
	CU_ASSERT_EQUAL(sb.len, strlen(sb.buf));
	kp_strbuf_reset(&sb);
	kp_strbuf_adds(&sb, "ab");
	kp_strbuf_addch(&sb, 'c');
	p = kp_strbuf_detach(&sb, &len);
	CU_ASSERT_STRING_EQUAL(p, "abc");
	CU_ASSERT_EQUAL(len, 3);
	CU_ASSERT_EQUAL(sb.len, 0);
	free(p);
	kp_strbuf_release(&sb);
}

static void test_vec(void)
{
	KP_VEC(int) v = KP_VEC_INIT;
	int i, sum = 0;

	for (i = 0; i < 10000; i++)
		CU_ASSERT_EQUAL_FATAL(kp_vec_push(&v, i), 0);
	CU_ASSERT_EQUAL(v.len, 10000);
	for (i = 0; i < (int)v.len; i++)
		sum += v.data[i] == i;
	CU_ASSERT_EQUAL(sum, 10000);
	kp_vec_release(&v);
	CU_ASSERT_PTR_NULL(v.data);
}

static void test_arena(void)
{
	struct kp_arena a;
	char *s;
	int *big;

	kp_arena_init(&a);
	s = kp_arena_strdup(&a, "hello");
	big = kp_arena_alloc(&a, 1 << 20);  /* larger than a block */
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	CU_ASSERT_EQUAL(big[12345], 0);
	CU_ASSERT_STRING_EQUAL(s, "hello");
	CU_ASSERT_EQUAL((uintptr_t)kp_arena_alloc(&a, 3) % 16, 0);
	CU_ASSERT(a.used_bytes >= (1 << 20));
	kp_arena_release(&a);
}

static void test_hash(void)
{
	struct kp_strmap m;
	char key[32];
	int64_t v;
	int i, ok = 0;

	/* stable across runs: plans and databases store these */
	CU_ASSERT_EQUAL(kp_hash_str("step"), kp_hash_str("step"));
	CU_ASSERT_NOT_EQUAL(kp_hash_str("step"), kp_hash_str("step "));
	CU_ASSERT_NOT_EQUAL(kp_hash_mix(1, 2), kp_hash_mix(2, 1));
	kp_strmap_init(&m);
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CU_ASSERT_EQUAL_FATAL(kp_strmap_put(&m, key, i * 3), 0);
	}
	CU_ASSERT_EQUAL(kp_strmap_put(&m, "k7", -1), 0);
	CU_ASSERT_EQUAL(m.len, 5000);
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ok += kp_strmap_get(&m, key, &v) && v == (i == 7 ? -1 : i * 3);
	}
	CU_ASSERT_EQUAL(ok, 5000);
	CU_ASSERT_FALSE(kp_strmap_get(&m, "missing", &v));
	kp_strmap_release(&m);
}

static void test_kname(void)
{
	static const struct { const char *in, *ident; } cases[] = {
		{ "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
		  "vectorized_elementwise_kernel" },
		{ "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
		  "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
		  "vectorized_elementwise_kernel" },
		{ "_Z10add_kernelPfPKfi", "add_kernel" },
		{ "add_kernel(float*, float const*, int)", "add_kernel" },
		{ "_ZN12_GLOBAL__N_18max_poolIfEEvPfi", "max_pool" },
		{ "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)",
		  "max_pool_forward_nchw" },
		{ "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64", "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64" },
		{ "_ZN5Outer5InnerIiE6kernelEv", "kernel" },      /* member of a class template */
		{ "_ZN2ns1kIJifEEEvDpT_", "k" },                  /* variadic template args */
		{ "_Z", "_Z" },                                   /* malformed: copied whole */
		{ "_ZN3abc", "_ZN3abc" },
		{ "_ZN999abcE", "_ZN999abcE" },                   /* length past the end */
		{ "", "" },
	};
	uint32_t g[3] = { 10, 1, 1 }, b[3] = { 128, 1, 1 };
	char out[256];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kp_kernel_ident(cases[i].in, out, sizeof(out));
		if (strcmp(out, cases[i].ident))
			fprintf(stderr, "\nident(%s) = %s, want %s\n", cases[i].in, out, cases[i].ident);
		CU_ASSERT_STRING_EQUAL(out, cases[i].ident);
	}
	/* truncation keeps a terminated string */
	kp_kernel_ident("_Z10add_kernelPfPKfi", out, 4);
	CU_ASSERT_STRING_EQUAL(out, "add");
	/* mangled and demangled spellings of one launch have one signature */
	CU_ASSERT_EQUAL(kp_kernel_sig(cases[0].in, g, b, 0), kp_kernel_sig(cases[1].in, g, b, 0));
	CU_ASSERT_NOT_EQUAL(kp_kernel_sig(cases[0].in, g, b, 0), kp_kernel_sig(cases[0].in, g, b, 16));
	g[0] = 11;
	CU_ASSERT_NOT_EQUAL(kp_kernel_sig(cases[0].in, g, b, 0), kp_kernel_sig(cases[1].in, b, g, 0));
	/* order matters in a fingerprint */
	CU_ASSERT_NOT_EQUAL(kp_fp_add(kp_fp_add(KP_FP_INIT, 1), 2), kp_fp_add(kp_fp_add(KP_FP_INIT, 2), 1));
	CU_ASSERT_EQUAL(KP_FP_INIT, KP_HASH_SEED);
}

static void test_family(void)
{
	static const struct { const char *name, *family; } cases[] = {
		{ "Layer 3", "Layer #" },
		{ "Layer 11", "Layer #" },
		{ "Generation step 12", "Generation step #" },
		{ "block.3.attn", "block.#.attn" },
		{ "decoder_layer_7", "decoder_layer_#" },
		{ "h.0.mlp/c_fc:2", "h.#.mlp/c_fc:#" },
		{ "step[0:5]", "step[#:#]" },
		{ "iter (12)", "iter (#)" },
		{ "rank-3-of-8", "rank-#-of-#" },
		{ "#4", "##" },
		{ "42", "#" },
		{ "007 agent", "# agent" },
		{ "1.25", "#.#" },
		/* digits glued to letters are part of a word */
		{ "fp16_gemm", "fp16_gemm" },
		{ "conv2d", "conv2d" },
		{ "sm90_xmma", "sm90_xmma" },
		{ "2d_conv 3", "2d_conv #" },
		{ "layer3", "layer3" },
		{ "mined:s7:p12", "mined:s7:p12" },
		/* separators outside the list do not make a number */
		{ "step 1, rank 0", "step 1, rank #" },
		{ "step", "step" },
		{ "", "" },
	};
	char out[64];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kp_region_family(cases[i].name, out, sizeof(out));
		if (strcmp(out, cases[i].family))
			fprintf(stderr, "\nfamily(%s) = %s, want %s\n", cases[i].name, out,
				cases[i].family);
		CU_ASSERT_STRING_EQUAL(out, cases[i].family);
		CU_ASSERT(strlen(out) <= strlen(cases[i].name));
	}
	/* truncation keeps a terminated string; n = 0 writes nothing */
	CU_ASSERT_STRING_EQUAL(kp_region_family("Layer 12", out, 4), "Lay");
	CU_ASSERT_STRING_EQUAL(kp_region_family("Layer 12", out, 8), "Layer #");
	CU_ASSERT_STRING_EQUAL(kp_region_family("ab 12", out, 4), "ab ");
	out[0] = 'x';
	kp_region_family("Layer 1", out, 0);
	CU_ASSERT_EQUAL(out[0], 'x');
}

/*
 * fileio: a regular file is read whole; a FIFO, a directory, a link under
 * KP_FILE_NOFOLLOW and a file past the bound are refused with what was
 * found (a FIFO without blocking); an atomic write replaces a link planted
 * at the target instead of writing through it, and leaves no temporary.
 */
static void test_fileio(void)
{
	const char *f = kp_test_path("fio.txt"), *fifo = kp_test_path("fio.fifo");
	const char *lnk = kp_test_path("fio.lnk"), *victim = kp_test_path("fio.victim");
	struct kp_file_tmp t;
	struct kp_err err = {0};
	struct stat st;
	char *buf;
	size_t len;

	CU_ASSERT_EQUAL(kp_file_write_atomic(AT_FDCWD, f, "hello\n", 6, 0644, &err), 0);
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, f, 0, 6, &buf, &len, &err), 0);
	CU_ASSERT(len == 6 && buf && !strcmp(buf, "hello\n"));
	free(buf);
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, f, 0, 5, &buf, &len, &err), KP_EFORMAT);
	CU_ASSERT_PTR_NULL(buf);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "larger than"));
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, kp_test_path("none"), 0, 9, &buf, &len, &err),
			KP_ENOTFOUND);
	CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, fifo, 0, 9, &buf, &len, &err), KP_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a FIFO, expected a regular file"));
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, kp_test_path(""), 0, 9, &buf, &len, &err), KP_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a directory"));
	CU_ASSERT_EQUAL(symlink(f, lnk), 0);
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, lnk, 0, 9, &buf, &len, &err), 0);
	free(buf);
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, lnk, KP_FILE_NOFOLLOW, 9, &buf, &len, &err), KP_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a symbolic link"));
	/* a link at the target is replaced, its target untouched */
	CU_ASSERT_EQUAL(kp_test_write(victim, "keep", 4), 0);
	CU_ASSERT_EQUAL(unlink(lnk), 0);
	CU_ASSERT_EQUAL(symlink(victim, lnk), 0);
	CU_ASSERT_EQUAL(kp_file_write_atomic(AT_FDCWD, lnk, "new", 3, 0600, &err), 0);
	CU_ASSERT_EQUAL(lstat(lnk, &st), 0);
	CU_ASSERT(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	buf = kp_test_read(victim, &len);
	CU_ASSERT(buf && !strcmp(buf, "keep"));
	free(buf);
	/* through a stream, then abandoned: nothing is left */
	CU_ASSERT_EQUAL_FATAL(kp_file_tmp_open(&t, AT_FDCWD, f, 0644, &err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(t.tmp, "/.fio.txt.tmp-"));
	CU_ASSERT_PTR_NOT_NULL(kp_file_tmp_stream(&t, &err));
	fputs("half", t.f);
	kp_file_tmp_abort(&t);
	kp_file_tmp_abort(&t);   /* twice: a no-op */
	CU_ASSERT_EQUAL(kp_test_sh("ls -a '%s' | grep -q 'fio.txt.tmp-'", kp_test_path("")), 1);
	CU_ASSERT_EQUAL(kp_file_read(AT_FDCWD, f, 0, 9, &buf, &len, &err), 0);
	CU_ASSERT(buf && !strcmp(buf, "hello\n"));
	free(buf);
	/* a directory that cannot take the temporary: one error naming the target */
	CU_ASSERT_EQUAL(kp_file_write_atomic(AT_FDCWD, kp_test_path("nodir/x"), "x", 1, 0644, &err),
			KP_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nodir/x: cannot create"));
}

/* printable: control bytes, C1 controls and broken UTF-8 as \xNN; text as it is */
static void test_printable(void)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	char buf[64];

	CU_ASSERT_STRING_EQUAL(kp_printable(buf, sizeof(buf), "k<float>(a, b) \\ ok"),
			       "k<float>(a, b) \\ ok");
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, sizeof(buf), "a\x1b]0;t\x07\nb\tc\x7f"),
			       "a\\x1b]0;t\\x07\\x0ab\\x09c\\x7f");
	/* UTF-8 passes; U+009B (CSI as a C1 control), a lone byte, an overlong
	 * form and a cut sequence do not */
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, sizeof(buf), "caf\xc3\xa9 \xe2\x86\x92"),
			       "caf\xc3\xa9 \xe2\x86\x92");
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, sizeof(buf), "\xc2\x9b" "2J \xff \xc0\xaf \xe2\x86"),
			       "\\xc2\\x9b2J \\xff \\xc0\\xaf \\xe2\\x86");
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, sizeof(buf), NULL), "");
	/* cut where the next character does not fit, never inside one */
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, 6, "ab\x1b" "cd"), "ab");
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, 7, "ab\x1b" "cd"), "ab\\x1b");
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, 4, "a\xc3\xa9" "b"), "a\xc3\xa9");
	CU_ASSERT_STRING_EQUAL(kp_printable(buf, 3, "a\xc3\xa9" "b"), "a");
	kp_strbuf_add_printable(&sb, "x\0y", 3);
	CU_ASSERT_STRING_EQUAL(sb.buf, "x\\x00y");
	kp_strbuf_release(&sb);
}

CU_TestInfo kp_tests_common[] = {
	{ "kname", test_kname },
	{ "region family", test_family },
	{ "err", test_err },
	{ "strbuf", test_strbuf },
	{ "vec", test_vec },
	{ "arena", test_arena },
	{ "hash", test_hash },
	{ "fileio: regular files only, atomic replacement", test_fileio },
	{ "printable: terminal-safe names", test_printable },
	CU_TEST_INFO_NULL,
};
