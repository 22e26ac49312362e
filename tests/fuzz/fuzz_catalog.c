/*
 * fuzz_catalog.c - libFuzzer harness for the fusion catalog reader
 * (fusion/catalog.h, kp_fx_catalog_parse) and, behind it, the fused
 * kernel generator (fusion/generate.h).
 *
 * When an input parses: every kernel's patterns are looked up again with
 * kp_fx_catalog_find (the kernel found must match the name), and chains of
 * 2 and 3 consecutive kernels go through kp_fx_generate, which must either
 * refuse with a message or produce a source whose hash is right - twice,
 * with the same bytes (the generator is deterministic).
 */
#include "fuzz_util.h"

#include "common/hash.h"
#include "fusion/catalog.h"
#include "fusion/generate.h"

static void generate(const struct kp_fx_kernel *const *chain, size_t n)
{
	struct kp_fx_group g1, g2;
	struct kp_err err = {0};
	int rc1, rc2;

	rc1 = kp_fx_generate(chain, n, &g1, &err);
	if (rc1) {
		FZ_CHECK(rc1 < 0 && err.msg[0], "generate failed (%d) without a message", rc1);
		kp_fx_group_release(&g1);
		return;
	}
	FZ_CHECK(g1.source.len > 0, "empty source");
	FZ_CHECK(g1.source_hash == kp_hash64(g1.source.buf, g1.source.len, KP_HASH_SEED),
		 "source_hash is not the hash of the source");
	rc2 = kp_fx_generate(chain, n, &g2, &err);
	FZ_CHECK(rc2 == 0, "second generate of the same chain failed: %s", err.msg);
	FZ_CHECK(g1.source.len == g2.source.len && !memcmp(g1.source.buf, g2.source.buf, g1.source.len),
		 "generator is not deterministic");
	(void)kp_fx_predicted_gain(&g1, -1);
	kp_fx_group_release(&g1);
	kp_fx_group_release(&g2);
}

/* The same chain specialised on made-up captured arguments (a trace's
 * form): tensors at parameter positions 0 and 1 share a pointer, scalars
 * have their position as value; the output must carry its own hash. */
static void generate_spec(const struct kp_fx_kernel *const *chain, size_t n)
{
	static char buf[3][32 * 17 + 1];
	const char *args[3] = { NULL, NULL, NULL };
	struct kp_fx_group g;
	struct kp_err err = {0};
	size_t k, p;

	for (k = 0; k < n && k < 3; k++) {
		size_t o = 0;

		for (p = 0; p < chain[k]->n_params && p < 32; p++) {
			int sz = kp_fx_type_size(chain[k]->params[p].type);
			unsigned long long v = sz == 8 ? 0x7f0000000000ull + (p > 1 ? p : 0) * 0x1000 : p;

			if (p)
				buf[k][o++] = ':';
			for (int b = 0; b < sz; b++)
				o += (size_t)snprintf(buf[k] + o, sizeof(buf[k]) - o, "%02x",
						      (unsigned)((v >> (8 * b)) & 0xff));
		}
		buf[k][o] = 0;
		args[k] = buf[k];
	}
	if (kp_fx_generate_spec(chain, args, n, &g, &err) == 0)
		FZ_CHECK(g.source_hash == kp_hash64(g.source.buf, g.source.len, KP_HASH_SEED),
			 "specialised source_hash is not the hash of the source");
	else
		FZ_CHECK(err.msg[0], "specialised generate failed without a message");
	kp_fx_group_release(&g);
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
	struct kp_err err = {0};
	struct kp_fx_catalog *cat;
	char *copy = fz_copy(data, size);
	size_t i, j;

	if (!copy)
		return 0;
	cat = kp_fx_catalog_parse(copy, size, "fuzz.kpcat", &err);
	free(copy);
	if (!cat) {
		FZ_CHECK(err.code < 0 && err.msg[0], "parse failed without a message");
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "rejected: %s\n", err.msg);
		return 0;
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "parsed: %zu kernels\n", cat->n_kernels);
	for (i = 0; i < cat->n_kernels; i++) {
		const struct kp_fx_kernel *k = &cat->kernels[i];

		for (j = 0; j < k->n_match; j++) {
			const struct kp_fx_kernel *f = kp_fx_catalog_find(cat, k->match[j]);

			/* a pattern need not match itself ("[ab]"), but what is
			 * found must match */
			if (f) {
				size_t m;
				int ok = 0;

				for (m = 0; m < f->n_match; m++)
					ok |= kp_fx_glob(f->match[m], k->match[j]);
				FZ_CHECK(ok, "find returned a kernel none of whose patterns match");
			}
		}
	}
	(void)kp_fx_catalog_find(cat, "_Z9bias_geluPfPKfii");
	for (i = 0; i + 1 < cat->n_kernels && i < 8; i++) {
		const struct kp_fx_kernel *chain[3] = { &cat->kernels[i], &cat->kernels[i + 1],
							i + 2 < cat->n_kernels ? &cat->kernels[i + 2] : NULL };

		generate(chain, 2);
		generate_spec(chain, 2);
		if (chain[2]) {
			generate(chain, 3);
			generate_spec(chain, 3);
		}
	}
	kp_fx_catalog_free(cat);
	return 0;
}
