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

/*
 * A label that tells kernels apart, for people (reports, `kplan analyze`,
 * `kplan show`): the identifier with the template arguments that
 * distinguish it (functors, the function a lambda comes from, element
 * types, sizes), namespaces dropped and boilerplate arguments left out
 * (std::array<char*, N>, offset calculators, parameter structs):
 *   "void at::native::vectorized_elementwise_kernel<4,
 *    at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(...)"
 *   -> "vectorized_elementwise_kernel<CUDAFunctor_add<float>>"
 * A template argument that only wraps one functor is replaced by it
 * (BinaryFunctor<float, float, float, MulFunctor<float>> -> MulFunctor<float>);
 * a kernel named "kernel" keeps its class ("gemvx::kernel<...>"). Mangled
 * names give kp_kernel_ident; plain names are kept. A label longer than
 * n - 1 bytes loses its last template arguments ("...>") or, without
 * any, its middle ("..."). Writes into out and returns out. For display
 * only: fingerprints and signatures use kp_kernel_ident.
 */
char *kp_kernel_label(const char *name, char *out, size_t n);
/* Buffer size that holds any label kp_kernel_label is asked for in reports. */
#define KP_KNAME_LABEL_MAX 96

/*
 * What tells name apart from others, names whose kp_kernel_label is the
 * same label: for each of them, name's identifier or number (a template
 * argument, a namespace, a parameter type) at the first place the two
 * differ, in order, at most three, as " [AUnaryFunctor]" or " [4,
 * BinaryFunctor]" (numbers without "ul"). Appended to the label it makes
 * the rows of a table differ. "" when no token of name differs from the
 * others' (the caller numbers such names) or it does not fit in n bytes.
 */
char *kp_kernel_label_apart(const char *name, const char *const *others, size_t n_others,
			    char *out, size_t n);

/*
 * The labels of a fusion chain's names ("A -> B -> C", as kp_fusion_candidates
 * and plans store them), joined the same way; each label at most
 * KP_KNAME_LABEL_MAX - 1 bytes, the whole cut at n - 1 ("..." at the end).
 */
char *kp_kernel_chain_label(const char *chain, char *out, size_t n);

/* Signature of one kernel launch: kp_hash64 of "IDENT|gx,gy,gz|bx,by,bz|smem". */
uint64_t kp_kernel_sig(const char *name, const uint32_t grid[3],
		       const uint32_t block[3], uint32_t dynamic_smem);

/* Fingerprint of a kernel sequence: start with KP_FP_INIT, fold each sig. */
#define KP_FP_INIT 0xcbf29ce484222325ULL  /* == KP_HASH_SEED */
uint64_t kp_fp_add(uint64_t fp, uint64_t kernel_sig);

#endif
