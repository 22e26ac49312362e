/*
 * nccl.h - NCCL kernels by name: which collective, reduction, data type,
 * algorithm and protocol a communication kernel runs.
 *
 * NCCL runs every collective as one kernel on the stream the call was
 * given, and the kernel's name says what it does. Three spellings exist:
 *
 *   NCCL >= 2.19  ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)
 *                 ncclDevKernel_AllGather_RING_LL, ncclDevKernel_SendRecv,
 *                 ncclDevKernel_Generic (any operation: the name does not say)
 *   2.7 - 2.18    ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ...)
 *   <= 2.6        ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)
 *
 * mangled or demangled. The fields are read token by token, so the order of
 * a spelling does not matter. What a name does not say stays NULL
 * ("unknown" when printed): nothing is guessed.
 */
#ifndef KP_NCCL_H
#define KP_NCCL_H

/* Collectives, in the order of kp_nccl_coll_name. */
enum kp_nccl_coll {
	KP_NCCL_OTHER = 0,       /* an NCCL kernel whose name does not say (Generic) */
	KP_NCCL_ALLREDUCE, KP_NCCL_ALLGATHER, KP_NCCL_REDUCESCATTER,
	KP_NCCL_BROADCAST, KP_NCCL_REDUCE, KP_NCCL_SENDRECV, KP_NCCL_SEND,
	KP_NCCL_RECV, KP_NCCL_ALLTOALL,
	KP_NCCL__N
};

/* What one NCCL kernel's name says. Strings are static; NULL: not said. */
struct kp_nccl_kernel {
	int coll;                /* enum kp_nccl_coll */
	const char *redop;       /* "sum", "prod", "min", "max", "premulsum", "sumpostdiv" */
	const char *dtype;       /* "f32", "bf16", "i8", ... (NCCL >= 2.19's spelling) */
	const char *algo;        /* "ring", "tree", "collnet_direct", "nvls", "pat", ... */
	const char *proto;       /* "ll", "ll128", "simple" */
};

/*
 * 1 when name (mangled or demangled) is an NCCL kernel, filling *out; else
 * 0 and *out is zeroed. out may be NULL.
 */
int kp_nccl_parse(const char *name, struct kp_nccl_kernel *out);

/* "AllReduce", "AllGather", ..., "SendRecv"; "nccl" for KP_NCCL_OTHER. */
const char *kp_nccl_coll_name(int coll);

/*
 * "AllReduce sum f32 ring/LL": the collective and the fields its name has,
 * written into buf (always NUL-terminated). Returns buf.
 */
char *kp_nccl_desc(const struct kp_nccl_kernel *k, char *buf, unsigned n);

/*
 * Bytes per element of a data type spelled as PyTorch writes it in a
 * trace's collective metadata ("Float", "BFloat16", "Long", "Float8_e4m3fn",
 * ...) or as NCCL's kernel names do ("f32", "bf16", ...); 0 unknown.
 */
int kp_nccl_dtype_bytes(const char *dtype);

#endif
