/*
 * families.c - group the report's regions into families: regions of one
 * source whose labels differ only in their numbers ("Layer 0" ... "Layer 11"
 * are "Layer #", common/family.h). A family of at least KP_REP_FAMILY_MIN
 * members is one row of the HTML page; regions.csv names each region's.
 * Also the plan's decision for each region, which the family rows count.
 */
#include "report_int.h"

#include <stdlib.h>
#include <string.h>

#include "../common/family.h"
#include "../common/hash.h"
#include "../common/strbuf.h"
#include "../plan/predict.h"

/*
 * Region r's predicted saving over the run (plan/predict.h): the plan's for
 * a region it names (0 unless it graphs it), else what graphing it after
 * the default warm-up would save when it is capturable and faster as a
 * graph (never below 0).
 */
static int64_t region_saving(const struct kp_report *rep, const struct kp_rep_region *r)
{
	const struct kp_plan_region *pr = rep->plan && r->label ? kp_plan_find(rep->plan, r->label) : NULL;
	int64_t v;

	if (pr)
		return kp_plan_region_saving_ns(pr);
	if (rep->plan || !r->capturable || r->graph_ns_pred < 0 || r->graph_ns_pred >= r->eager_ns)
		return 0;
	v = kp_plan_saving_ns(r->occurrences, KP_PLAN_DEFAULT_WARMUP, r->eager_ns, r->graph_ns_pred,
			      r->one_time_ns > 0 ? r->one_time_ns : 0);
	return v > 0 ? v : 0;
}

/*
 * Each region's saving, and the run's: the plan's figures when there is
 * one (the same numbers `kplan show` prints), else the regions' summed
 * over the run's measured time, as the planner would take it.
 */
static void savings(struct kp_report *rep)
{
	int64_t regions_ns = 0;
	size_t i;

	rep->saved_ns = 0;
	rep->n_saving = 0;
	for (i = 0; i < rep->regions.len; i++) {
		struct kp_rep_region *r = &rep->regions.data[i];

		r->gain_ns = region_saving(rep, r);
		rep->saved_ns += r->gain_ns;
		rep->n_saving += r->gain_ns > 0;
		if (r->parent_id <= 0)
			regions_ns += r->occurrences * r->eager_ns;
	}
	if (rep->plan) {
		rep->run_ns = rep->plan->run_eager_ns;
		rep->saved_ns = rep->plan->run_eager_ns - rep->plan->run_pred_ns;
		return;
	}
	rep->run_ns = rep->t_end_ns > rep->t_begin_ns ? rep->t_end_ns - rep->t_begin_ns : 0;
	if (rep->run_ns < regions_ns)
		rep->run_ns = regions_ns;
}

/* The current plan's decision for each region, by label (the runtime's name). */
static int plan_decisions(struct kp_report *rep)
{
	struct kp_strmap labels;
	size_t i;
	int64_t v;

	savings(rep);
	if (!rep->plan)
		return 0;
	kp_strmap_init(&labels);
	for (i = 0; i < rep->plan->n_regions; i++) {
		const struct kp_plan_region *pr = &rep->plan->regions[i];

		if (pr->label && kp_strmap_put(&labels, pr->label, pr->decision)) {
			kp_strmap_release(&labels);
			return -1;
		}
	}
	for (i = 0; i < rep->regions.len; i++) {
		struct kp_rep_region *r = &rep->regions.data[i];

		if (r->label && kp_strmap_get(&labels, r->label, &v))
			r->decision = (int)v;
	}
	kp_strmap_release(&labels);
	return 0;
}

/*
 * The key of region r's family ("source\x1ffamily" in sb) and the family
 * name (in name, strlen(label) + 1 bytes). 0 when the label has no number,
 * so the region is in no family whatever its count.
 */
static int family_key(const struct kp_rep_region *r, struct kp_strbuf *sb, char *name, size_t n)
{
	const char *label = r->label ? r->label : "";

	kp_region_family(label, name, n);
	if (!strcmp(name, label))
		return 0;
	kp_strbuf_reset(sb);
	kp_strbuf_adds(sb, r->source ? r->source : "");
	kp_strbuf_addch(sb, '\x1f');
	kp_strbuf_adds(sb, name);
	return 1;
}

static void add_member(struct kp_report *rep, struct kp_rep_family *f, const struct kp_rep_region *r)
{
	if (!f->members)
		f->stream_id = r->stream_id;
	else if (f->stream_id != r->stream_id)
		f->stream_id = -1;
	f->members++;
	f->occurrences += r->occurrences;
	f->n_capturable += r->capturable != 0;
	f->eager_ns += r->occurrences * r->eager_ns;
	f->host_idle_ns += r->occurrences * r->host_idle_ns;
	f->gain_ns += r->gain_ns;
	if (r->decision >= 0 && r->decision < 3)
		f->decisions[r->decision]++;
	else if (rep->plan)
		f->n_unplanned++;
}

struct fam_order {
	int64_t eager_ns;
	size_t first;
	int old;
};

static int cmp_order(const void *a, const void *b)
{
	const struct fam_order *x = a, *y = b;

	if (x->eager_ns != y->eager_ns)
		return x->eager_ns < y->eager_ns ? 1 : -1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Largest total eager time first, ties in region order; renumber r->family. */
static int sort_families(struct kp_report *rep)
{
	size_t n = rep->families.len, i;
	struct fam_order *ord;
	struct kp_rep_family *sorted;
	int *renum;

	if (n < 2)
		return 0;
	ord = malloc(n * sizeof(*ord));
	sorted = malloc(n * sizeof(*sorted));
	renum = malloc(n * sizeof(*renum));
	if (!ord || !sorted || !renum) {
		free(ord);
		free(sorted);
		free(renum);
		return -1;
	}
	for (i = 0; i < n; i++)
		ord[i] = (struct fam_order){ rep->families.data[i].eager_ns,
					     rep->families.data[i].first, (int)i };
	qsort(ord, n, sizeof(*ord), cmp_order);
	for (i = 0; i < n; i++) {
		sorted[i] = rep->families.data[ord[i].old];
		renum[ord[i].old] = (int)i;
	}
	memcpy(rep->families.data, sorted, n * sizeof(*sorted));
	for (i = 0; i < rep->regions.len; i++) {
		struct kp_rep_region *r = &rep->regions.data[i];

		if (r->family >= 0)
			r->family = renum[r->family];
	}
	free(ord);
	free(sorted);
	free(renum);
	return 0;
}

int kp__report_families(struct kp_db *db, struct kp_report *rep, struct kp_err *err)
{
	struct kp_strbuf key = KP_STRBUF_INIT;
	struct kp_strmap count;
	char *name = NULL;
	size_t i, cap = 0;
	int64_t v;
	int pass, rc = 0;

	(void)db;
	if (plan_decisions(rep))
		return kp_err_set(err, KP_ENOMEM, "out of memory while grouping regions");
	kp_strmap_init(&count);
	/*
	 * Pass 0 counts the regions of each key; pass 1 opens a family at the
	 * first (largest) region of a key with enough of them, whose value then
	 * becomes -(index + 1), and adds every region of such a key to it.
	 */
	for (pass = 0; pass < 2 && !rc; pass++) {
		for (i = 0; i < rep->regions.len && !rc; i++) {
			struct kp_rep_region *r = &rep->regions.data[i];
			size_t need = (r->label ? strlen(r->label) : 0) + 1;

			if (need > cap) {
				char *p = realloc(name, need);

				if (!p) {
					rc = -1;
					break;
				}
				name = p;
				cap = need;
			}
			if (!family_key(r, &key, name, cap))
				continue;
			if (!kp_strmap_get(&count, key.buf, &v))
				v = 0;
			if (pass == 0) {
				rc = kp_strmap_put(&count, key.buf, v + 1);
				continue;
			}
			if (v >= KP_REP_FAMILY_MIN) {
				struct kp_rep_family f = {
					.name = kp_arena_strdup(&rep->arena, name),
					.source = r->source, .first = i,
				};

				if (!f.name || kp_vec_push(&rep->families, f) ||
				    kp_strmap_put(&count, key.buf, -(int64_t)rep->families.len)) {
					rc = -1;
					break;
				}
				v = -(int64_t)rep->families.len;
			}
			if (v < 0) {
				r->family = (int)(-v - 1);
				add_member(rep, &rep->families.data[r->family], r);
			}
		}
	}
	free(name);
	kp_strbuf_release(&key);
	kp_strmap_release(&count);
	if (rc || sort_families(rep))
		return kp_err_set(err, KP_ENOMEM, "out of memory while grouping regions");
	return 0;
}
