/*
 * kname.h - kernel names and the workload fingerprint.
 *
 * Traces name kernels differently: CUPTI and a captured graph give the
 * mangled name ("_ZN2at6native...E"), the PyTorch profiler the demangled
 * one ("void at::native::foo<4>(int)"), cuBLAS/cuDNN kernels are often
 * plain C names. The kernel's *identifier* (unqualified name without
 * template arguments or parameters, "foo") is the same in all three, so it
 * is what the fingerprint hashes. The fingerprint is the contract between
 * the analyzer (which writes it into the plan) and the runtime (which
 * recomputes it from the captured graph); plan/FORMAT.md documents it.
 */
#ifndef KP_KNAME_H
#define KP_KNAME_H

#include <stddef.h>
#include <stdint.h>

/*
 * The identifier of a kernel name, mangled (Itanium ABI, "_Z...") or
 * demangled or plain. Writes into out (always NUL-terminated, truncated to
 * n - 1 bytes) and returns out. Names it cannot parse are copied whole.
 */
char *kp_kernel_ident(const char *name, char *out, size_t n);

/*
 * The short name nsys shows for a demangled kernel name ("void
 * at::native::foo<4>(int)" -> "foo"); same as kp_kernel_ident for
 * demangled names.
 */
char *kp_kernel_short_name(const char *demangled, char *out, size_t n);

/* Signature of one kernel launch: kp_hash64 of "IDENT|gx,gy,gz|bx,by,bz|smem". */
uint64_t kp_kernel_sig(const char *name, const uint32_t grid[3],
		       const uint32_t block[3], uint32_t dynamic_smem);

/* Fingerprint of a kernel sequence: start with KP_FP_INIT, fold each sig. */
#define KP_FP_INIT 0xcbf29ce484222325ULL  /* == KP_HASH_SEED */
uint64_t kp_fp_add(uint64_t fp, uint64_t kernel_sig);

#endif
