/*
 * fused_limits.h - what the header of a fused kernel source (kpfuse-*.cu)
 * holds at most, and its first line: the generator (fusion/generate.c)
 * writes within these limits and libkplanrt (runtime/fused_load.c) rejects a
 * header beyond them. The lines are specified in fusion/FUSION.md
 * ("Generated kernels"); the plan names each source and pins its kp_hash64
 * (plan/FORMAT.md, `[fusion ID]`).
 *
 * It lives in plan/, not fusion/, because it belongs to what the shipped
 * runtime reads from the offline tool, as the plan file does: the runtime
 * depends on plan/ and common/ only. Constants, no code.
 */
#ifndef KP_PLAN_FUSED_LIMITS_H
#define KP_PLAN_FUSED_LIMITS_H

#define KP_FX_HEADER_MAGIC "// kplan-fusion 1"   /* the first line */
#define KP_FX_MAX_CHAIN   12       /* kernels one fused kernel replaces */
#define KP_FX_MAX_ARGS    64       /* fused kernel parameters (before rows, cols) */
#define KP_FX_MAX_SOURCE_BYTES (64u << 20) /* a fused source as signed or bundled */

#endif
