/*
 * generate.h - fused-kernel code generation for planned kernel chains.
 *
 * From a chain of catalog kernels (fusion/catalog.h) the generator
 * writes the CUDA C source of one stitched kernel (after FusionStitching):
 *
 *   elementwise scheme  no reduction in the chain: one grid-stride loop over
 *                       i; each kernel's statements in turn, values passed
 *                       in registers (a load of a buffer an earlier kernel
 *                       stored at [i] uses the register when the pointers are
 *                       equal at run time)
 *   rows scheme         a reduction in the chain: one block per row (row
 *                       loop over the grid), phases of column loops; a
 *                       reduction closes its phase with a warp-shuffle +
 *                       shared-memory block reduction (warp- then
 *                       block-level stitching), later phases read the
 *                       reduced value from registers
 *
 * The source starts with a machine-readable header (launch scheme, block
 * size, match patterns, the shape of each chain kernel, the mapping from
 * the original kernels' parameters to the fused kernel's, alias checks);
 * runtime/fused_load.c reads it after checking the file's hash against the
 * plan. The fused kernel's parameters are the mapped ones followed by
 * `long long rows, long long cols`, which the runtime computes from the
 * captured kernels (and checks are the same for every kernel of the chain).
 * Format: fusion/FUSION.md.
 */
#ifndef KP_FUSION_GENERATE_H
#define KP_FUSION_GENERATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "catalog.h"
#include "../plan/fused_limits.h"   /* KP_FX_MAX_CHAIN, KP_FX_MAX_ARGS, KP_FX_HEADER_MAGIC */
#include "../plan/planfile.h"

#define KP_FX_BLOCK       256      /* threads per block, unless a kernel's layout says */

enum kp_fx_scheme { KP_FX_SCHEME_ELEMENTWISE = 1, KP_FX_SCHEME_ROWS = 2, KP_FX_SCHEME_WARP = 3 };

/* Fused parameter j is parameter .param of chain kernel .kernel (.size bytes). */
struct kp_fx_arg {
	uint32_t kernel, param, size;
};

/*
 * How chain kernel .kernel uses its tensor parameter .param: mode letters
 * 'i' loaded at [i], 'c' at [col], 'r' at [row], 'w' stored at [i]. The
 * runtime checks each pair of kernels' tensors, one of them written: equal
 * pointers (only when both are used at [i]: same element, same thread) or
 * disjoint ranges; anything else would race between threads once fused.
 */
struct kp_fx_access {
	uint32_t kernel, param;
	char mode[12];           /* + 'z' loaded at [0]; 'm' a dot's matrix (elements x K),
				    'v' its vector (K); 'h': f16 elements (2 bytes, else 4) */
};

struct kp_fx_group {
	char kernel_name[32];    /* "kp_fused_<16 hex>" */
	int scheme;              /* enum kp_fx_scheme */
	int phases;              /* column loops per row (rows scheme), 1 otherwise */
	int block;               /* threads per block */
	int vec;                 /* consecutive columns per thread and step (rows scheme) */
	int has_f16;             /* an f16* tensor is used */
	int64_t stride;          /* row stride of the [i] tensors (0: cols) */
	int64_t cols_const;      /* every row kernel's constant cols (0: not constant) */
	int dot;                 /* warp scheme: the chain kernel with the dot, else -1 */
	/* const scalars compiled in (specialised on captured values, guarded by
	 * the runtime): spec[k][p] set, value's raw little-endian bits */
	uint8_t spec[KP_FX_MAX_CHAIN][KP_FX_MAX_PARAMS];
	uint64_t spec_val[KP_FX_MAX_CHAIN][KP_FX_MAX_PARAMS];
	int n_spec;
	size_t n_chain;
	const struct kp_fx_kernel *chain[KP_FX_MAX_CHAIN];
	size_t n_args;
	struct kp_fx_arg args[KP_FX_MAX_ARGS];
	size_t n_access;
	struct kp_fx_access access[KP_FX_MAX_ARGS];
	struct kp_strbuf source; /* the whole file */
	uint64_t source_hash;    /* kp_hash64(source, KP_HASH_SEED) */
	char file[48];           /* "kpfuse-<16 hex>.cu" */
	/* found while generating: chain kernel fwd_to adds an f32 value that may
	 * be a product of chain kernel fwd_from, read from a register (the
	 * first such pair; -1: none); see kp_fx_numerics */
	int fwd_from, fwd_to;
	/* kp_fx_numerics of the generated kernel */
	int exact;               /* 1: the chain's bits */
	double tolerance;        /* when !exact: KP_FX_TOL_F32 or KP_FX_TOL_F16 */
	char why[160];           /* when !exact: the cause, for messages */
};

/*
 * Bounds a fused group that is not bit-exact is planned with: max |fused -
 * chain| <= tolerance x max |chain| over each tensor the group stores
 * (FORMAT.md, `tolerance`). f32 outputs: a reordered f32 sum is off by a
 * few units in the last place of the row's magnitude (examples/mlp's fused
 * layer norms measured 3.8e-7 of the largest output); an f16 output may
 * round the other way, one binary16 step (2^-10 relative) and some.
 */
#define KP_FX_TOL_F32 1e-5
#define KP_FX_TOL_F16 2e-3

/*
 * Whether g's fused kernel computes the chain's outputs bit for bit (the
 * rule: fusion/FUSION.md, "Numerics"). Exact unless
 *   - a kernel of the chain has a sum or mean reduction and no `layout`:
 *     the fused block reduction sums in another order than the kernel (a
 *     declared layout is the kernel's own order, which the fused code then
 *     follows; max and min do not depend on the order; a `dot` sums as the
 *     GEMV it describes), or
 *   - a later chain kernel adds a value that may end in a multiplication
 *     of an earlier one and reads it from a register (g->fwd_from, found
 *     by the generator): NVRTC contracts a multiplication and an addition
 *     into one FMA (--fmad=true, as nvcc's default the chain was built
 *     with) across statements, which memory between two kernels prevents.
 * f16 stores are rounded and re-widened through inline PTX, opaque to the
 * compiler, so they never carry a product. Returns 1 (exact, *tolerance 0,
 * why "") or 0 with *tolerance (the largest of the outputs' element types)
 * and why (n bytes, may be NULL) filled. kp_fx_generate sets g->exact,
 * g->tolerance and g->why from it.
 */
int kp_fx_numerics(const struct kp_fx_group *g, double *tolerance, char *why, size_t n);

/*
 * Generate the fused kernel for chain[0..n) into *g (initialised here;
 * release with kp_fx_group_release). Feasibility: 2..KP_FX_MAX_CHAIN
 * kernels, at most KP_FX_MAX_ARGS used parameters. KP_EUNSUPPORTED (with
 * the rule in err) when infeasible, KP_ENOMEM. Deterministic.
 */
int kp_fx_generate(const struct kp_fx_kernel *const *chain, size_t n,
		   struct kp_fx_group *g, struct kp_err *err);
/*
 * The same, specialised: args[k] (NULL, or args NULL: none) is chain kernel
 * k's captured parameter bytes as a kernel trace lists them (hex per
 * parameter, ':' separated). Each scalar the catalog declares const whose
 * captured value is known is compiled in as a constant; the source's header
 * lists it ("// const K P BITS") and the runtime fuses only a capture with
 * that value. Unparseable args are ignored (no specialisation).
 */
int kp_fx_generate_spec(const struct kp_fx_kernel *const *chain, const char *const *args,
			size_t n, struct kp_fx_group *g, struct kp_err *err);
void kp_fx_group_release(struct kp_fx_group *g);

/*
 * The cost rule: predicted gain of fusing g, given the gain the analyzer
 * predicted for the chain (saved nodes + saved DRAM traffic; < 0 when
 * unknown: then (kernels - 1) x graph_node_ns). Returns gain minus the
 * penalty (documented in FUSION.md): fuse when > 0.
 */
int64_t kp_fx_predicted_gain(const struct kp_fx_group *g, int64_t analyzer_gain_ns);

struct kp_fx_plan_stats {
	int groups;              /* fusion groups looked at */
	int generated;           /* sources written and referenced */
	int not_in_catalog;      /* a kernel had no catalog entry */
	int infeasible;          /* the generator refused the chain */
	int unprofitable;        /* predicted gain <= 0 */
	int inexact;             /* not bit-exact and the plan keeps exact groups only */
};

/* Which fused groups a plan keeps (kplan plan --fusion exact|tolerant|off). */
enum kp_fx_keep {
	KP_FX_KEEP_EXACT = 0,    /* bit-exact groups only (the default) */
	KP_FX_KEEP_TOLERANT = 1, /* every group; tolerant ones with their tolerance */
	KP_FX_KEEP_NONE = 2,     /* none */
};

/*
 * For every fusion group of plan without a source: look its kernels up in
 * cat (names split at " -> "); generate; apply the cost rule; write the
 * source as dir/<g.file> (dir NULL: do not write, for tests) and set the
 * group's source, source_hash, gain_ns and numerics (exact, tolerance and,
 * when not exact, inexact_why). Groups that do not qualify keep source NULL
 * (the runtime ignores them); why goes to kp_info. Counts in *st (may be
 * NULL). Keeps every group (KP_FX_KEEP_TOLERANT). Returns 0 or KP_EIO /
 * KP_ENOMEM.
 */
int kp_fx_plan_sources(struct kp_plan *plan, const struct kp_fx_catalog *cat,
		       const char *dir, struct kp_fx_plan_stats *st, struct kp_err *err);
/* The same for plan->fusions[first..] only; counts are added to *st. */
int kp_fx_plan_sources_from(struct kp_plan *plan, size_t first, const struct kp_fx_catalog *cat,
			    const char *dir, struct kp_fx_plan_stats *st, struct kp_err *err);
/* The same for plan->fusions[first..end). */
int kp_fx_plan_sources_range(struct kp_plan *plan, size_t first, size_t end,
			     const struct kp_fx_catalog *cat, const char *dir,
			     struct kp_fx_plan_stats *st, struct kp_err *err);
/*
 * The same with keep (enum kp_fx_keep): with KP_FX_KEEP_EXACT a group whose
 * fused kernel is not bit-exact gets no source (its file is not written)
 * but its numerics and inexact_why, and is counted in st->inexact, for
 * kp_fx_plan_filter to drop it; KP_FX_KEEP_NONE generates nothing.
 */
int kp_fx_plan_sources_keep(struct kp_plan *plan, size_t first, size_t end, int keep,
			    const struct kp_fx_catalog *cat, const char *dir,
			    struct kp_fx_plan_stats *st, struct kp_err *err);

/*
 * Drop the fusion groups of plan that keep (enum kp_fx_keep) excludes:
 * KP_FX_KEEP_EXACT those that are not exact, KP_FX_KEEP_NONE all,
 * KP_FX_KEEP_TOLERANT none. One line per dropped group to note (NULL:
 * none), "fusion group N (NAMES) dropped: not bit-exact (WHY); use --fusion
 * tolerant" (one line in all for KP_FX_KEEP_NONE). Ids of the others are
 * unchanged. Returns how many were dropped.
 */
size_t kp_fx_plan_filter(struct kp_plan *plan, int keep, FILE *note);

/*
 * Add fusion groups for a region from its captured kernel sequence (names
 * in launch order, e.g. from KPLAN_FUSION_TRACE; ids continue after the
 * plan's highest): first each dot kernel (GEMV) with the flat elementwise
 * catalog kernel just before it and those after it (not one directly
 * before the next dot kernel), up to KP_FX_MAX_CHAIN; then every other
 * maximal run of 2..KP_FX_MAX_CHAIN consecutive catalog kernels, dot
 * kernels excluded. Kernels already in a group of the region that has a
 * source are left out. The region must exist in plan. Then call
 * kp_fx_plan_sources. Returns groups added (>= 0) or KP_E*.
 */
int kp_fx_plan_add_chains(struct kp_plan *plan, const char *region, const char *const *names,
			  size_t n, const struct kp_fx_catalog *cat, struct kp_err *err);
/* The same with each kernel's captured parameter bytes (args[k] may be NULL;
 * the trace's format), kept on the groups for kp_fx_generate_spec. */
int kp_fx_plan_add_chains_args(struct kp_plan *plan, const char *region, const char *const *names,
			       const char *const *args, size_t n, const struct kp_fx_catalog *cat,
			       struct kp_err *err);
/*
 * Remove the groups before index first that have no source and share a
 * kernel with a generated group from index first on (the analyzer's
 * candidates a trace's groups cover). Returns how many were removed.
 */
size_t kp_fx_plan_drop_covered(struct kp_plan *plan, size_t first);

/*
 * kp_fx_plan_add_chains_args for every region of a kernel trace: lines
 * "REGION<TAB>INDEX<TAB>NAME[<TAB>ARGS]" (what KPLAN_FUSION_TRACE writes), indices
 * 0, 1, ... per region; the last listing of a region wins. Regions not in
 * the plan, or not planned as graphs, are skipped. Returns groups added or
 * KP_EFORMAT naming the line.
 */
int kp_fx_plan_add_trace(struct kp_plan *plan, const char *buf, size_t len, const char *name,
			 const struct kp_fx_catalog *cat, struct kp_err *err);

/* In what order kp_fx_plan_fuse adds and generates a plan's groups. */
enum kp_fx_fuse_order {
	/* --base PLAN: a kernel trace's groups after the plan's own, every
	 * group generated in plan order; none dropped */
	KP_FX_FUSE_IN_ORDER = 0,
	/* a plan from a database: the trace's groups (the catalog runs of each
	 * graph region's recorded kernels, every instance, GEMVs with their
	 * prologue and epilogue) generated first, since they are what the
	 * program really ran; then the plan's earlier groups (the analyzer's
	 * candidates) that a generated one overlaps are dropped, and the rest
	 * generated */
	KP_FX_FUSE_TRACE_FIRST = 1,
};

/*
 * The fusion groups of `kplan plan --catalog` and their sources, in the
 * order (enum kp_fx_fuse_order) that decides which group keeps a kernel
 * two groups share. trace: a kernel trace (kp_fx_plan_add_trace's format,
 * len bytes, named trace_name in messages; NULL: none); keep as
 * kp_fx_plan_sources_keep (the caller drops what it excludes with
 * kp_fx_plan_filter); sources go to dir. *st is reset and filled. Returns 0
 * or KP_E*.
 */
int kp_fx_plan_fuse(struct kp_plan *plan, const struct kp_fx_catalog *cat, const char *trace,
		    size_t len, const char *trace_name, int order, int keep, const char *dir,
		    struct kp_fx_plan_stats *st, struct kp_err *err);

#endif
