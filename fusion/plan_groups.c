/*
 * plan_groups.c - fusion groups in a plan: add them from chains of catalog
 * kernels or from a trace, drop those covered by another or whose numerics
 * the chosen --fusion mode does not keep, and write each group's generated
 * source next to the plan (kpfuse-<hash>.cu, fusion/FUSION.md); and the order
 * of all that for `kplan plan --catalog` (kp_fx_plan_fuse).
 */
#include "generate.h"
#include "generate_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyzer/cost.h"
#include "../common/fileio.h"
#include "../common/log.h"
#include "../common/printable.h"
#include "../common/vec.h"

/* A fused source beside the plan: atomically, never through a planted link. */
static int write_file(const char *dir, const struct kp_fx_group *g, struct kp_err *err)
{
	struct kp_strbuf path = KP_STRBUF_INIT;
	int rc;

	kp_strbuf_addf(&path, "%s/%s", dir, g->file);
	rc = path.oom ? kp_err_set(err, KP_ENOMEM, "out of memory") :
	     kp_file_write_atomic(AT_FDCWD, path.buf, g->source.buf, g->source.len, 0666, err);
	kp_strbuf_release(&path);
	return rc;
}

/* Generate group u, specialised on its captured arguments when it has them. */
static int gen_group(const struct kp_plan_fusion *u, const struct kp_fx_kernel *const *chain,
		     size_t n, struct kp_fx_group *g, struct kp_err *err)
{
	char *buf = u->args ? kp_strdup(u->args) : NULL, *save = NULL, *t;
	const char *args[KP_FX_MAX_CHAIN] = { 0 };
	size_t k = 0;
	int rc;

	for (t = buf ? strtok_r(buf, " ", &save) : NULL; t && k < n; t = strtok_r(NULL, " ", &save))
		args[k++] = strcmp(t, "-") ? t : NULL;
	rc = kp_fx_generate_spec(chain, buf ? args : NULL, n, g, err);
	free(buf);
	return rc;
}

int kp_fx_plan_sources(struct kp_plan *plan, const struct kp_fx_catalog *cat,
		       const char *dir, struct kp_fx_plan_stats *st, struct kp_err *err)
{
	if (st)
		memset(st, 0, sizeof(*st));
	return kp_fx_plan_sources_from(plan, 0, cat, dir, st, err);
}

int kp_fx_plan_sources_from(struct kp_plan *plan, size_t first, const struct kp_fx_catalog *cat,
			    const char *dir, struct kp_fx_plan_stats *st, struct kp_err *err)
{
	return kp_fx_plan_sources_range(plan, first, plan->n_fusions, cat, dir, st, err);
}

int kp_fx_plan_sources_range(struct kp_plan *plan, size_t first, size_t end,
			     const struct kp_fx_catalog *cat, const char *dir,
			     struct kp_fx_plan_stats *st, struct kp_err *err)
{
	return kp_fx_plan_sources_keep(plan, first, end, KP_FX_KEEP_TOLERANT, cat, dir, st, err);
}

int kp_fx_plan_sources_keep(struct kp_plan *plan, size_t first, size_t end, int keep,
			    const struct kp_fx_catalog *cat, const char *dir,
			    struct kp_fx_plan_stats *st, struct kp_err *err)
{
	struct kp_fx_plan_stats local;
	size_t i;

	if (!st) {
		st = &local;
		memset(st, 0, sizeof(*st));
	}
	if (keep == KP_FX_KEEP_NONE)
		return 0;
	for (i = first; i < end && i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];
		const struct kp_fx_kernel *chain[KP_FX_MAX_CHAIN];
		struct kp_fx_group g;
		struct kp_err gerr = {0};
		const char *s = u->names, *e;
		size_t n = 0;
		int64_t gain;
		int rc;

		if (u->source)
			continue;
		st->groups++;
		while (s && *s && n <= KP_FX_MAX_CHAIN) {
			char name[1100];
			size_t len;

			e = strstr(s, " -> ");
			len = e ? (size_t)(e - s) : strlen(s);
			snprintf(name, sizeof(name), "%.*s", (int)(len < 1024 ? len : 1024), s);
			if (n == KP_FX_MAX_CHAIN) {
				n++;
				break;
			}
			if (!(chain[n++] = kp_fx_catalog_find(cat, name))) {
				kp_info("fusion %u: kernel '%s' is not in the catalog; not generated",
					u->id, name);
				n = 0;
				break;
			}
			s = e ? e + 4 : NULL;
		}
		if (!n) {
			st->not_in_catalog++;
			continue;
		}
		if (n != u->kernels) {
			kp_info("fusion %u: %zu names for %u kernels; not generated", u->id, n, u->kernels);
			st->infeasible++;
			continue;
		}
		rc = gen_group(u, chain, n, &g, &gerr);
		if (rc == KP_ENOMEM)
			return kp_err_set(err, rc, "%s", gerr.msg);
		if (rc) {
			kp_info("fusion %u: %s; not generated", u->id, gerr.msg);
			st->infeasible++;
			continue;
		}
		gain = kp_fx_predicted_gain(&g, u->gain_ns > 0 ? u->gain_ns : -1);
		if (gain <= 0) {
			kp_info("fusion %u: predicted gain %lld ns after the penalty; not fused",
				u->id, (long long)gain);
			st->unprofitable++;
			kp_fx_group_release(&g);
			continue;
		}
		/* numerics: what the generated kernel computes */
		u->exact = g.exact;
		u->tolerance = g.tolerance;
		free(u->inexact_why);
		u->inexact_why = NULL;
		if (!g.exact && !(u->inexact_why = kp_strdup(g.why))) {
			kp_fx_group_release(&g);
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		}
		if (!g.exact && keep == KP_FX_KEEP_EXACT) {
			kp_info("fusion %u: not bit-exact (%s); not fused (--fusion tolerant fuses it)",
				u->id, g.why);
			st->inexact++;
			kp_fx_group_release(&g);
			continue;
		}
		if (dir && (rc = write_file(dir, &g, err))) {
			kp_fx_group_release(&g);
			return rc;
		}
		u->source = kp_strdup(g.file);
		u->source_hash = g.source_hash;
		u->gain_ns = gain;
		kp_fx_group_release(&g);
		if (!u->source)
			return kp_err_set(err, KP_ENOMEM, "out of memory");
		st->generated++;
	}
	return 0;
}

static int is_dot(const struct kp_fx_catalog *cat, const char *name)
{
	const struct kp_fx_kernel *k = kp_fx_catalog_find(cat, name);

	return k && k->dot_k;
}

/* Kernel x of the list is free and a flat elementwise catalog kernel. */
static int chain_flat(const struct kp_fx_catalog *cat, const char *const *names, size_t n,
		      const char *taken, size_t x)
{
	const struct kp_fx_kernel *k = x < n && !taken[x] ? kp_fx_catalog_find(cat, names[x]) : NULL;

	return k && !k->dot_k && kp__fx_flexible(k);
}

/* Bytes of names[a..j) joined by " -> " (a group's names field). */
static size_t names_len(const char *const *names, size_t a, size_t j)
{
	size_t n = 0, k;

	for (k = a; k < j; k++)
		n += strlen(names[k]) + (k > a ? 4 : 0);
	return n;
}

/* Append a group of kernels names[a..j) of region to plan (their names fit
 * a plan string). 0 or KP_E*. */
static int add_group(struct kp_plan *plan, const char *region, const char *const *names,
		     const char *const *args, size_t a, size_t j, uint32_t id, struct kp_err *err)
{
	struct kp_strbuf nm = KP_STRBUF_INIT, ar = KP_STRBUF_INIT;
	struct kp_plan_fusion *u;
	size_t k;
	void *q;

	if (plan->n_fusions >= KP_PLAN_MAX_FUSIONS)
		return kp_err_set(err, KP_EINVAL, "more than %d fusion groups", KP_PLAN_MAX_FUSIONS);
	q = realloc(plan->fusions, (plan->n_fusions + 1) * sizeof(*plan->fusions));
	if (!q)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	plan->fusions = q;
	u = &plan->fusions[plan->n_fusions];
	memset(u, 0, sizeof(*u));
	for (k = a; k < j; k++) {
		if (k > a)
			kp_strbuf_adds(&nm, " -> ");
		kp_strbuf_adds(&nm, names[k]);
		if (args)
			kp_strbuf_addf(&ar, "%s%s", k > a ? " " : "", args[k] && *args[k] ? args[k] : "-");
	}
	u->id = id;
	u->exact = 1;   /* until a generated kernel says otherwise */
	u->region = kp_strdup(region);
	u->first_kernel = (uint32_t)a;
	u->kernels = (uint32_t)(j - a);
	u->names = kp_strbuf_detach(&nm, NULL);
	u->args = args ? kp_strbuf_detach(&ar, NULL) : NULL;
	kp_strbuf_release(&ar);
	u->gain_ns = (int64_t)((double)(j - a - 1) * kp_cost_default(KP_COST_GRAPH_NODE));
	u->score = (double)u->gain_ns;
	if (!u->region || !u->names || (args && !u->args)) {
		free(u->region);
		free(u->names);
		free(u->args);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	plan->n_fusions++;
	return 0;
}

/* Free what group u owns (it is being removed from its plan). */
static void fusion_release(struct kp_plan_fusion *u)
{
	free(u->region);
	free(u->names);
	free(u->source);
	free(u->args);
	free(u->inexact_why);
	memset(u, 0, sizeof(*u));
}

size_t kp_fx_plan_drop_covered(struct kp_plan *plan, size_t first)
{
	size_t i, j, out = 0, dropped = 0;

	for (i = 0; i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];
		int covered = 0;

		for (j = first; i < first && !u->source && j < plan->n_fusions && !covered; j++) {
			const struct kp_plan_fusion *t = &plan->fusions[j];

			covered = t->source && u->region && t->region && !strcmp(u->region, t->region) &&
				u->first_kernel < t->first_kernel + t->kernels &&
				t->first_kernel < u->first_kernel + u->kernels;
		}
		if (covered) {
			kp_info("fusion %u: kernels %u..%u are in a generated group already; dropped",
				u->id, u->first_kernel, u->first_kernel + u->kernels - 1);
			fusion_release(u);
			dropped++;
			continue;
		}
		plan->fusions[out++] = *u;
	}
	plan->n_fusions = out;
	return dropped;
}

size_t kp_fx_plan_filter(struct kp_plan *plan, int keep, FILE *note)
{
	size_t i, out = 0, dropped = 0;

	if (keep == KP_FX_KEEP_TOLERANT)
		return 0;
	if (keep == KP_FX_KEEP_NONE && plan->n_fusions && note)
		fprintf(note, "fusion: %zu group%s dropped: --fusion off\n", plan->n_fusions,
			plan->n_fusions == 1 ? "" : "s");
	for (i = 0; i < plan->n_fusions; i++) {
		struct kp_plan_fusion *u = &plan->fusions[i];
		const char *nm = u->names ? u->names : "";

		if (!u->exact && u->tolerance == 0)
			u->exact = 1;   /* not set (a zeroed group): exact, as kp_plan_write says */
		if (keep != KP_FX_KEEP_NONE && u->exact) {
			plan->fusions[out++] = *u;
			continue;
		}
		if (keep != KP_FX_KEEP_NONE && note) {
			char tol[32], shown[201], why[512];

			snprintf(tol, sizeof(tol), "tolerance %g", u->tolerance);
			fprintf(note, "fusion group %u (%s%s) dropped: not bit-exact (%s); use "
				"--fusion tolerant\n", u->id, kp_printable(shown, sizeof(shown), nm),
				strlen(nm) > 200 ? "..." : "",
				kp_printable(why, sizeof(why), u->inexact_why ? u->inexact_why : tol));
		}
		fusion_release(u);
		dropped++;
	}
	plan->n_fusions = out;
	return dropped;
}

int kp_fx_plan_add_chains(struct kp_plan *plan, const char *region, const char *const *names,
			  size_t n, const struct kp_fx_catalog *cat, struct kp_err *err)
{
	return kp_fx_plan_add_chains_args(plan, region, names, NULL, n, cat, err);
}

int kp_fx_plan_add_chains_args(struct kp_plan *plan, const char *region, const char *const *names,
			       const char *const *args, size_t n, const struct kp_fx_catalog *cat,
			       struct kp_err *err)
{
	const struct kp_plan_region *r = kp_plan_find(plan, region);
	uint32_t next_id = 1;
	size_t i, k, added = 0;
	int pass, rc = 0;
	char *taken;

	if (!r)
		return kp_err_set(err, KP_ENOTFOUND, "region '%s' is not in the plan", region);
	if (n > r->kernels)
		return kp_err_set(err, KP_EMISMATCH, "region '%s': %zu kernels listed, the plan has %u",
				  region, n, r->kernels);
	if (plan->n_fusions)
		next_id = plan->fusions[plan->n_fusions - 1].id + 1;
	/* kernels of the region's generated groups are taken */
	if (!(taken = calloc(n ? n : 1, 1)))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	for (k = 0; k < plan->n_fusions; k++) {
		const struct kp_plan_fusion *f = &plan->fusions[k];

		if (f->source && f->region && !strcmp(f->region, region))
			for (size_t x = f->first_kernel; x < (size_t)f->first_kernel + f->kernels && x < n; x++)
				taken[x] = 1;
	}
	/*
	 * First the dot kernels (GEMVs): each takes the flat elementwise kernel
	 * just before it (its output's initialisation, a bias broadcast) and
	 * the flat ones after it (its epilogue), except one that directly
	 * precedes the next dot kernel (that one's prologue). Then every other
	 * maximal run of catalog kernels, dot kernels excluded.
	 */
	for (pass = 0; pass < 2 && !rc; pass++) {
		for (i = 0; i < n; i++) {
			const struct kp_fx_kernel *ki = kp_fx_catalog_find(cat, names[i]);
			size_t a = i, j = i;

			if (taken[i] || !ki || (pass == 0) != (ki->dot_k != 0))
				continue;
			if (pass == 0) {
				if (i > 0 && chain_flat(cat, names, n, taken, i - 1))
					a = i - 1;
				for (j = i + 1; j < n && j - a < KP_FX_MAX_CHAIN &&
				     chain_flat(cat, names, n, taken, j) &&
				     !(j + 1 < n && !taken[j + 1] && is_dot(cat, names[j + 1])); j++)
					;
			} else {
				while (j < n && j - a < KP_FX_MAX_CHAIN && !taken[j] &&
				       (ki = kp_fx_catalog_find(cat, names[j])) && !ki->dot_k)
					j++;
			}
			/* the names must fit one plan string: a shorter chain */
			while (j - a >= 2 && names_len(names, a, j) > KP_PLAN_MAX_STR)
				j--;
			if (j - a < 2 || (pass == 0 && j <= i))
				continue;
			if ((rc = add_group(plan, region, names, args, a, j, next_id++, err)))
				break;
			memset(taken + a, 1, j - a);
			added++;
			i = j - 1;
		}
	}
	free(taken);
	return rc ? rc : (int)added;
}

struct tregion {
	char *label;
	KP_VEC(char *) names;
	KP_VEC(char *) args;     /* the optional 4th column (NULL when absent) */
};

static void tregion_clear(struct tregion *tr)
{
	size_t j;

	for (j = 0; j < tr->names.len; j++)
		free(tr->names.data[j]);
	for (j = 0; j < tr->args.len; j++)
		free(tr->args.data[j]);
	tr->names.len = tr->args.len = 0;
}

int kp_fx_plan_add_trace(struct kp_plan *plan, const char *buf, size_t len, const char *name,
			 const struct kp_fx_catalog *cat, struct kp_err *err)
{
	KP_VEC(struct tregion) regs = KP_VEC_INIT;
	size_t pos = 0, i;
	int line = 0, rc = 0, added = 0;

	while (pos < len && !rc) {
		const char *s = buf + pos, *nl = memchr(s, '\n', len - pos), *t1, *t2, *t3;
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		struct tregion *tr = NULL;
		char *end, idxs[24], *nm, *ar = NULL;
		long long idx;

		line++;
		pos += n + (nl != NULL);
		if (!n)
			continue;
		t1 = memchr(s, '\t', n);
		t2 = t1 ? memchr(t1 + 1, '\t', n - (size_t)(t1 + 1 - s)) : NULL;
		if (!t1 || !t2 || t1 == s || t2 == t1 + 1 || t2 + 1 == s + n ||
		    (size_t)(t2 - t1 - 1) >= sizeof(idxs) || n > 16384) {
			rc = kp_err_set(err, KP_EFORMAT, "%s:%d: expected REGION<tab>INDEX<tab>NAME", name, line);
			break;
		}
		memcpy(idxs, t1 + 1, (size_t)(t2 - t1 - 1));
		idxs[t2 - t1 - 1] = 0;
		idx = strtoll(idxs, &end, 10);
		for (i = 0; i < regs.len; i++)
			if (strlen(regs.data[i].label) == (size_t)(t1 - s) &&
			    !memcmp(regs.data[i].label, s, (size_t)(t1 - s)))
				tr = &regs.data[i];
		if (*end || idx < 0 || idx > KP_PLAN_MAX_KERNELS ||
		    (size_t)idx > (tr ? tr->names.len : 0)) {
			rc = kp_err_set(err, KP_EFORMAT, "%s:%d: index '%s': expected the next kernel index",
					name, line, idxs);
			break;
		}
		if (!tr) {
			struct tregion z;

			memset(&z, 0, sizeof(z));
			if (!(z.label = strndup(s, (size_t)(t1 - s))) || kp_vec_push(&regs, z)) {
				free(z.label);
				rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				break;
			}
			tr = &regs.data[regs.len - 1];
		}
		if (idx == 0) {   /* listed again: the last listing wins */
			tregion_clear(tr);
		} else if ((size_t)idx != tr->names.len) {
			rc = kp_err_set(err, KP_EFORMAT, "%s:%d: index %lld after %zu kernels", name, line,
					idx, tr->names.len);
			break;
		}
		/* NAME, then optionally TAB and the kernel's parameter bytes */
		t3 = memchr(t2 + 1, '\t', (size_t)(s + n - t2 - 1));
		nm = strndup(t2 + 1, (size_t)((t3 ? t3 : s + n) - t2 - 1));
		if (t3 && !(ar = strndup(t3 + 1, (size_t)(s + n - t3 - 1)))) {
			free(nm);
			nm = NULL;
		}
		if (!nm || kp_vec_push(&tr->names, nm)) {
			free(nm);
			free(ar);
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		} else if (kp_vec_push(&tr->args, ar)) {
			free(ar);
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		}
	}
	for (i = 0; i < regs.len; i++) {
		const struct kp_plan_region *r = kp_plan_find(plan, regs.data[i].label);

		if (!rc && r && r->decision == KP_PLAN_GRAPH) {
			int x = kp_fx_plan_add_chains_args(plan, regs.data[i].label,
							   (const char *const *)regs.data[i].names.data,
							   (const char *const *)regs.data[i].args.data,
							   regs.data[i].names.len, cat, err);
			if (x < 0)
				rc = x;
			else
				added += x;
		} else if (!rc) {
			kp_info("%s: region '%s' is not a graph region of the plan; skipped", name,
				regs.data[i].label);
		}
		tregion_clear(&regs.data[i]);
		kp_vec_release(&regs.data[i].names);
		kp_vec_release(&regs.data[i].args);
		free(regs.data[i].label);
	}
	kp_vec_release(&regs);
	return rc ? rc : added;
}

int kp_fx_plan_fuse(struct kp_plan *plan, const struct kp_fx_catalog *cat, const char *trace,
		    size_t len, const char *trace_name, int order, int keep, const char *dir,
		    struct kp_fx_plan_stats *st, struct kp_err *err)
{
	size_t before = plan->n_fusions;
	int rc;

	memset(st, 0, sizeof(*st));
	if (order == KP_FX_FUSE_TRACE_FIRST) {
		/* a candidate is dropped only for a group that got a source, so
		 * the trace's groups are generated before the candidates */
		if ((rc = kp_fx_plan_add_trace(plan, trace ? trace : "", trace ? len : 0, trace_name,
					       cat, err)) < 0 ||
		    (rc = kp_fx_plan_sources_keep(plan, before, plan->n_fusions, keep, cat, dir,
						  st, err)))
			return rc;
		before -= kp_fx_plan_drop_covered(plan, before);
		return kp_fx_plan_sources_keep(plan, 0, before, keep, cat, dir, st, err);
	}
	if (trace && (rc = kp_fx_plan_add_trace(plan, trace, len, trace_name, cat, err)) < 0)
		return rc;
	return kp_fx_plan_sources_keep(plan, 0, plan->n_fusions, keep, cat, dir, st, err);
}
