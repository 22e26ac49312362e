/*
 * fuzz_aten.c - libFuzzer harness for the reader of torch fusion groups
 * shipped beside a plan (kp_aten_groups_parse, plan/aten_groups.h): the
 * file libkplanrt reads while it verifies a signed plan and `kplan check`
 * and `kplan show` read beside any plan.
 *
 * Each input is parsed from a buffer of exactly its size (reads past the
 * end are caught), then as PLAN.aten beside a plan through
 * kp_aten_groups_load: the file reader must agree with the buffer parser.
 * What is accepted must survive a round trip: the groups written back in
 * the canonical form (plan/FORMAT.md, "Torch fusion groups") parse to the
 * same fields.
 */
#include "fuzz_util.h"

#include "plan/aten_groups.h"

/* s with '%' and control bytes escaped as %XX */
static void add_escaped(struct kp_strbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '%' || c < 0x20 || c == 0x7f)
			kp_strbuf_addf(sb, "%%%02X", c);
		else
			kp_strbuf_addch(sb, (char)c);
	}
}

static void rebuild(const struct kp_aten_groups *g, struct kp_strbuf *sb)
{
	size_t i;

	kp_strbuf_addf(sb, "%s %d\nplan-hash %016llx\n", KP_ATEN_MAGIC, g->format_version,
		       (unsigned long long)g->plan_hash);
	for (i = 0; i < g->n_groups; i++) {
		const struct kp_aten_group *u = &g->groups[i];

		kp_strbuf_addf(sb, "\n[group %u]\nregion ", u->id);
		add_escaped(sb, u->region);
		kp_strbuf_addf(sb, "\nkey %016llx\nnumerics %s\nops ", (unsigned long long)u->key,
			       u->exact ? "exact" : "tolerant");
		add_escaped(sb, u->ops);
		kp_strbuf_adds(sb, "\nshape ");
		add_escaped(sb, u->shape);
		kp_strbuf_adds(sb, "\ninputs ");
		add_escaped(sb, u->inputs);
		kp_strbuf_addf(sb, "\noutputs %u\nkernel %s\nsource ", u->outputs, u->kernel);
		add_escaped(sb, u->source);
		kp_strbuf_addf(sb, "\nsource-hash %016llx\n", (unsigned long long)u->source_hash);
		if (g->format_version >= 2)
			kp_strbuf_addf(sb, "saved-kernels %lld\nsaved-bytes %lld\ngain-ns %lld\n"
				       "per-call %lld\n", (long long)u->saved_kernels,
				       (long long)u->saved_bytes, (long long)u->gain_ns,
				       (long long)u->per_call);
	}
}

static int same(const struct kp_aten_groups *a, const struct kp_aten_groups *b)
{
	size_t i;

	if (a->plan_hash != b->plan_hash || a->n_groups != b->n_groups ||
	    a->format_version != b->format_version)
		return 0;
	for (i = 0; i < a->n_groups; i++) {
		const struct kp_aten_group *x = &a->groups[i], *y = &b->groups[i];

		if (x->id != y->id || x->key != y->key || x->exact != y->exact ||
		    x->outputs != y->outputs || x->source_hash != y->source_hash ||
		    x->saved_kernels != y->saved_kernels || x->saved_bytes != y->saved_bytes ||
		    x->gain_ns != y->gain_ns || x->per_call != y->per_call ||
		    strcmp(x->region, y->region) || strcmp(x->ops, y->ops) ||
		    strcmp(x->shape, y->shape) || strcmp(x->inputs, y->inputs) ||
		    strcmp(x->kernel, y->kernel) || strcmp(x->source, y->source))
			return 0;
	}
	return 1;
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
	struct kp_err err = {0}, ferr = {0};
	struct kp_strbuf sb = KP_STRBUF_INIT;
	struct kp_aten_groups *g, *f = NULL, *r;
	char *copy = fz_copy(data, size);
	int frc;

	if (!copy)
		return 0;
	g = kp_aten_groups_parse(copy, size, "fuzz.aten", &err);
	fz_write("p.kplan.aten", data, size);
	frc = kp_aten_groups_load(fz_path("p.kplan"), &f, NULL, NULL, &ferr);
	FZ_CHECK(!g == !f && (g || frc == err.code), "buffer parser says %d, file reader %d (%s)",
		 g ? 0 : err.code, frc, ferr.msg);
	if (!g) {
		FZ_CHECK(err.code && err.msg[0], "rejected without a code and a message");
		goto out;
	}
	FZ_CHECK(same(g, f), "the file reader reads other groups");
	rebuild(g, &sb);
	FZ_CHECK(!sb.oom, "out of memory");
	r = kp_aten_groups_parse(sb.buf, sb.len, "rebuilt.aten", &err);
	FZ_CHECK(r != NULL, "the rebuilt groups do not parse: %s", err.msg);
	FZ_CHECK(same(g, r), "the rebuilt groups parse differently");
	kp_aten_groups_free(r);
out:
	kp_aten_groups_free(g);
	kp_aten_groups_free(f);
	kp_strbuf_release(&sb);
	free(copy);
	return 0;
}
