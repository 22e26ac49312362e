/*
 * generate_internal.h - what the fused-kernel generator's files share: the
 * state of one generation (struct kp__fx_gen) and the emitters generate.c
 * calls in generate_emit.c.
 *
 * generate_emit.c writes loads, expressions and statements; generate.c
 * chooses the scheme and lays out the file; plan_groups.c adds groups to a
 * plan and writes their sources.
 */
#ifndef KP_FUSION_GENERATE_INTERNAL_H
#define KP_FUSION_GENERATE_INTERNAL_H

#include <stdint.h>

#include "../common/strbuf.h"
#include "generate.h"

/* A value known in a register for tensor p of chain kernel k at [i]: what
 * a statement stored there, or what a load read (is_load) */
struct kp__fx_store {
	uint32_t k, p;
	int is_load;
	int prod_from;   /* the value may be a multiplication's result computed by
			    this chain kernel (expr_from); -1: it is not */
	char var[24];
};

struct kp__fx_gen {
	struct kp_fx_group *g;
	struct kp_strbuf *out;
	/* the phase being built (rows scheme) or the loop body (elementwise) */
	struct kp_strbuf pre, body, post;
	struct kp_strbuf decl;   /* row-scope declarations (single-step rows scheme) */
	struct kp_strbuf st;     /* the phase's memory stores, emitted after its compute */
	unsigned n_loads;        /* load registers named so far */
#define KP__FX_MAX_KNOWN ((KP_FX_MAX_STMTS + KP_FX_MAX_PARAMS) * KP_FX_MAX_CHAIN)
	struct kp__fx_store stores[KP__FX_MAX_KNOWN];
	size_t n_stores;
	/* reductions of the open phase, not yet reduced: (kernel, stmt) */
	uint32_t pend_k[KP_FX_MAX_STMTS * KP_FX_MAX_CHAIN], pend_s[KP_FX_MAX_STMTS * KP_FX_MAX_CHAIN];
	size_t n_pend;
	int used[KP_FX_MAX_CHAIN][KP_FX_MAX_PARAMS];
	/* captured parameter bytes per chain kernel (NULL: unknown) */
	const char *const *args;
	/* pointer relations compiled in ("// same" lines), in order found */
	struct kp_strbuf same;
	size_t end_mark;         /* where "// end" starts in the rendering */
};

/* Bits of parameter p (size bytes) in a trace's args field (hex of the
 * parameter bytes in memory order, one field per parameter, ':' separated):
 * 0, or -1 when the field is missing or malformed. */
int kp__fx_arg_bits(const char *args, size_t p, int size, uint64_t *v);
/* Mark the parameters an expression uses; note whether it needs a
 * reduction of the open phase. */
void kp__fx_scan_expr(struct kp__fx_gen *c, uint32_t k, int x, int *uses_pending);
/* kp_fx_expr_any callback: index kinds each tensor parameter is loaded with
 * (bit per enum kp_fx_index, into the unsigned array kinds). */
int kp__fx_note_load(const struct kp_fx_node *nd, void *kinds);
/* A kernel whose result does not depend on how its elements split into rows. */
int kp__fx_flexible(const struct kp_fx_kernel *kk);
/* Steps of 32 lanes x 16 bytes of a dot kernel's row. */
int64_t kp__fx_dot_steps(const struct kp_fx_kernel *kk);
/* The loads of the warp's row of W into kp_w (warp scheme). */
void kp__fx_dot_loads(struct kp__fx_gen *c, struct kp_strbuf *o, const char *ind, const char *idx);
/* Close the open phase of the rows scheme: loop + block reductions. */
void kp__fx_close_phase(struct kp__fx_gen *c);
/* Statement si of chain kernel k, indented by ind. */
void kp__fx_emit_stmt(struct kp__fx_gen *c, uint32_t k, uint32_t si, const char *ind);

#endif
