/*
 * fuse_candidates.c - fusion candidates: chains of dependent, short,
 * memory-bound kernels on one stream, scored after FusionStitching (saved DRAM traffic
 * + saved launches/nodes - a penalty for register and shared-memory
 * pressure and lost occupancy). Identical chains (same signature sequence)
 * are one candidate with an occurrence count.
 *
 * Dependence: two kernels share an 8-byte pointer argument when launch
 * arguments were recorded (kp_launch_args); otherwise stream adjacency.
 * Memory-bound: not a GEMM/convolution/attention kernel by name (the trace
 * has no byte counts); traffic is estimated as duration x bandwidth x 1/2.
 * In a PyTorch trace with shapes each candidate also gets its ATen view
 * (aten_view.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "../common/strbuf.h"
#include "internal.h"

#define MAX_CANDS 10000

/* 1 dependent, 0 independent, -1 unknown (no args recorded for both). */
static int shares_pointer(struct kp__ana *a, const struct kp__op *x, const struct kp__op *y)
{
	size_t nx, ny;
	const struct kp__arg *ax = kp__args_of(a, x->corr, &nx), *ay = kp__args_of(a, y->corr, &ny);

	if (!ax || !ay)
		return -1;
	for (size_t i = 0; i < nx; i++) {
		if (ax[i].size != 8 || (uint64_t)ax[i].value < (1ULL << 32))
			continue;
		for (size_t j = 0; j < ny; j++)
			if (ay[j].size == 8 && ay[j].value == ax[i].value)
				return 1;
	}
	return 0;
}

static int eligible(struct kp__ana *a, const struct kp__op *op)
{
	return op->kind == KP__OP_KERNEL &&
		(double)(op->end - op->start) < a->cost.v[KP_COST_SHORT_KERNEL] &&
		a->sigs.data[op->sig].mem_class == 1;
}

/*
 * a * b * c, saturated at INT64_MAX: launch shapes come from traces, and
 * even a legal one (2^31-1 x 65535 x 65535 blocks of 1024) overflows int64.
 */
static int64_t mul3_sat(int64_t a, int64_t b, int64_t c)
{
	int64_t r;

	if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r))
		return INT64_MAX;
	return r;
}

/* threads per block, at most INT32_MAX (occupancy() multiplies it again) */
static int64_t block_threads(const struct kp__sig *s)
{
	int64_t t = mul3_sat(s->block[0], s->block[1], s->block[2]);

	return t > INT32_MAX ? INT32_MAX : t;
}

static int64_t threads(const struct kp__sig *s)
{
	return mul3_sat(mul3_sat(s->grid[0], s->grid[1], s->grid[2]), block_threads(s), 1);
}

static double occupancy(int regs, int64_t tpb)
{
	int64_t blocks;
	if (regs < 1)
		regs = 32;
	if (tpb < 1)
		tpb = 1;
	blocks = 65536 / ((int64_t)regs * tpb);
	double occ = (double)(blocks * tpb) / 2048.0;
	return occ > 1 ? 1 : occ;
}

/* Score and check one chain of kernels (op indices). */
static int evaluate(struct kp__ana *a, const uint32_t *ch, int k, struct kp__cand *c)
{
	double bw = a->cost.v[KP_COST_DRAM_BW] * KP_COST_SHORT_BW_SHARE;
	int64_t smem = 0, tmin = INT64_MAX, tmax = 0, tpb_max = 1, dur = 0, saved = 0;
	int regs_max = 0, reduction = 0;
	double occ_before = 1;
	struct kp_strbuf names = KP_STRBUF_INIT;
	char reason[256] = "";

	for (int i = 0; i < k; i++) {
		const struct kp__op *op = &a->ops[ch[i]];
		const struct kp__sig *s = &a->sigs.data[op->sig];
		int64_t t = threads(s), tpb = block_threads(s);
		int64_t d = op->end - op->start;

		dur += d;
		smem += s->smem;
		if (t < tmin)
			tmin = t;
		if (t > tmax)
			tmax = t;
		if (tpb > tpb_max)
			tpb_max = tpb;
		if (s->regs > regs_max)
			regs_max = s->regs;
		double occ = occupancy(s->regs, tpb);
		if (occ < occ_before)
			occ_before = occ;
		if (i > 0) {
			const struct kp__op *p = &a->ops[ch[i - 1]];
			double b0 = (double)(p->end - p->start) * bw, b1 = (double)d * bw;
			saved += llround(b0 < b1 ? b0 : b1);
			const struct kp__sig *ps = &a->sigs.data[p->sig];
			if (ps->reduction && t > threads(ps) && !*reason)
				snprintf(reason, sizeof(reason),
					 "row reduction %.60s feeds a larger kernel (%lld > %lld threads): needs a grid-wide barrier",
					 ps->name, (long long)t, (long long)threads(ps));
		}
		reduction |= s->reduction;
		if (i)
			kp_strbuf_adds(&names, " -> ");
		kp_strbuf_adds(&names, s->name);
	}
	int fused_regs = regs_max + 4 * (k - 1);
	if (!*reason && smem > a->smem_limit)
		snprintf(reason, sizeof(reason), "shared memory %lld B > %lld B per block",
			 (long long)smem, (long long)a->smem_limit);
	if (!*reason && fused_regs > 255)
		snprintf(reason, sizeof(reason), "register pressure: %d registers per thread > 255",
			 fused_regs);
	if (!*reason && tmin > 0 && tmax % tmin)
		snprintf(reason, sizeof(reason),
			 "shapes do not map: %lld and %lld threads are neither equal nor a broadcast",
			 (long long)tmin, (long long)tmax);
	double occ_after = occupancy(fused_regs > 255 ? 255 : fused_regs, tpb_max);
	double lost = occ_before > 0 ? 1 - occ_after / occ_before : 0;
	c->n = k;
	c->first_op = ch[0];
	c->dur = dur;
	c->saved_bytes = saved;
	c->saved_nodes = k - 1;
	c->penalty = lost > 0 ? llround(lost * (double)dur) : 0;
	c->score = kp_cost_fusion_gain_ns(&a->cost, (double)saved, (double)(k - 1)) -
		(double)c->penalty;
	c->feasible = !*reason;
	c->reason = *reason ? kp_arena_strdup(&a->arena, reason) : NULL;
	c->pattern = reduction ? "reduction" : tmin == tmax ? "elementwise" : "broadcast";
	c->names = kp_arena_strdup(&a->arena, names.buf);
	kp_strbuf_release(&names);
	return c->names ? 0 : KP_ENOMEM;
}

static int cmp_cand(const void *x, const void *y)
{
	const struct kp__cand *a = x, *b = y;
	double sa = a->score * (double)a->occurrences, sb = b->score * (double)b->occurrences;
	if (a->feasible != b->feasible)
		return b->feasible - a->feasible;
	return (sa < sb) - (sa > sb);
}

int kp__fusion(struct kp__ana *a, struct kp_err *err)
{
	int max_chain = a->o.max_chain > 1 ? a->o.max_chain : 8;
	uint32_t *ch = malloc((size_t)max_chain * sizeof(*ch));
	uint16_t *reg = calloc(a->n_ops, sizeof(*reg));
	struct kp_u64map seen;
	int rc = 0;

	if (!ch || !reg) {
		free(ch);
		free(reg);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	/* op -> first top-level region holding it */
	for (size_t r = 0; r < a->regions.len && r < 65535; r++) {
		const struct kp__region *rg = a->regions.data[r];
		if (rg->parent)
			continue;
		for (uint32_t k = 0; k < rg->n_occ; k++)
			for (uint32_t i = 0; i < rg->occ[k].n; i++)
				if (!reg[rg->occ[k].ops[i]])
					reg[rg->occ[k].ops[i]] = (uint16_t)(r + 1);
	}
	kp_u64map_init(&seen);
	for (size_t s = 0; s < a->streams.len && !rc; s++) {
		const struct kp__stream *ss = &a->streams.data[s];
		int k = 0, dep_args = 0;
		for (uint32_t i = ss->beg; i <= ss->end && !rc; i++) {
			const struct kp__op *op = i < ss->end ? &a->ops[a->ord[i]] : NULL;
			int elig = op && eligible(a, op), extend = elig;
			int dep = -1;

			if (extend && k > 0) {
				dep = shares_pointer(a, &a->ops[ch[k - 1]], op);
				if (dep == 0)
					extend = 0;
			}
			if (extend && k < max_chain) {
				if (k == 0)
					dep_args = 1;
				if (k > 0 && dep < 0)
					dep_args = 0;
				ch[k++] = a->ord[i];
				continue;
			}
			/* close the chain */
			if (k >= 2) {
				uint64_t key = KP_HASH_SEED;
				uint32_t ix;
				for (int j = 0; j < k; j++)
					key = kp_hash_mix(key, a->ops[ch[j]].sig);
				if (kp_u64map_get(&seen, key, &ix)) {
					a->cands.data[ix].occurrences++;
				} else if (a->cands.len < MAX_CANDS) {
					struct kp__cand c;
					memset(&c, 0, sizeof(c));
					c.key = key;
					c.occurrences = 1;
					c.stream_id = ss->stream_id;
					c.region = reg[ch[0]];
					c.dependence = dep_args ? "args" : "adjacency";
					if (evaluate(a, ch, k, &c) || kp__aten_view(a, ch, k, &c) ||
					    kp_vec_push(&a->cands, c) ||
					    kp_u64map_put(&seen, key, (uint32_t)(a->cands.len - 1)))
						rc = kp_err_set(err, KP_ENOMEM, "out of memory");
				}
			}
			k = 0;
			if (elig) {  /* chain full or broken: op starts a new one */
				dep_args = 1;
				ch[k++] = a->ord[i];
			}
		}
	}
	kp_u64map_release(&seen);
	kp__aten_view_done(a);
	free(ch);
	free(reg);
	if (!rc && a->cands.len)
		qsort(a->cands.data, a->cands.len, sizeof(*a->cands.data), cmp_cand);
	for (size_t i = 0; i < a->cands.len; i++) {
		a->sum->n_fusion++;
		a->sum->n_fusion_feasible += a->cands.data[i].feasible;
	}
	return rc;
}
