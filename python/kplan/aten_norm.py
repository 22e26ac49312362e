"""A pointwise chain ending in a LayerNorm: one kernel, bit-identical to ATen.

When `aten::native_layer_norm` reads an output of the pending chain
(kplan.aten_fuse, Fuser.defer_norm), the chain ends in a *row-norm node*:
on flush one kernel computes, per row of N elements, the chain's values
(storing the chain outputs still held, e.g. the residual sum the next
residual add reads), then the row's LayerNorm exactly as ATen's
`vectorized_layer_norm_kernel` does, writing out (input dtype), mean and
rstd (float) as ATen's native_layer_norm returns them.

The arithmetic mirrors aten/src/ATen/native/cuda/layer_norm_kernel.cu, read
at pytorch/pytorch commits 0005c538e468 and bad757be610b, and in a later
version with the `rms_norm` template flag (the torch 2.8+ layout); the CUDA
LayerNorm path is the same in all three (the later version only adds
`if constexpr (!rms_norm)` arms, ROCm-only fast reciprocals
(USE_LAYERNORM_FAST_RECIPROCAL) and a ROCm-only split of large grids):

- launch: `launch_vectorized_layer_norm_kernel`: blocks(M), threads(warp_size,
  num_threads() / warp_size) = (32, 4) (thread_constants.h: num_threads() is
  C10_WARP_SIZE * 4 = 128 on CUDA). Ours launches 128 threads in one
  dimension (kp_rt_kernel_launch takes a 1-D block) and uses lane =
  threadIdx.x & 31, warp = threadIdx.x >> 5: the same warps, the same
  thrx = threadIdx.x + threadIdx.y * blockDim.x.
- compute_stats: each thread reads the vectors i = thrx, thrx + 128, ...
  < N / 4 and, in element order ii = 0..3, applies cuWelfordOnlineSum
  (delta = x - mean; count += 1; mean += delta * (1/count), 1/count being
  rcp.rn; sigma2 += delta * (x - new_mean)).
- intra-warp: offsets 16, 8, 4, 2, 1, WARP_SHFL_DOWN (__shfl_down_sync, full
  mask, width 32) of mean, sigma2, count, then cuWelfordCombine(dataB = own,
  dataA = shuffled): delta = B.mean - A.mean, count = A.count + B.count; if
  count > 0: coef = 1/count, nA = A.count * coef, nB = B.count * coef,
  mean = nA * A.mean + nB * B.mean, sigma2 = A.sigma2 + B.sigma2 + delta *
  delta * A.count * nB; else 0, 0.
- inter-warp (blockDim.y = 4 > 1): offsets 2, 1: lanes 0 of warps [offset,
  2 offset) write mean, sigma2 to buf[2 w], buf[2 w + 1] and count to
  buf[4 + w] (w = warp - offset), __syncthreads, lanes 0 of warps < offset
  combine (own as dataB, the buffer's as dataA), __syncthreads; then warp 0
  writes buf[0] = mean, buf[1] = sigma2 / float(N) (an IEEE division),
  __syncthreads, everyone reads them.
- rstd = c10::cuda::compat::rsqrt(var + eps) = rsqrtf (rsqrt.approx.f32,
  no ftz), eps = static_cast<float>(eps).
- normalize, in T_ACC (float), rounded to T by c10::Half / c10::BFloat16's
  round-to-nearest conversions (cvt.rn.f16.f32, cvt.rn.bf16.f32):
  gamma and beta: gamma * (rstd * (x - mean)) + beta; gamma only:
  gamma * (rstd * (x - mean)); neither: rstd * (x - mean) (beta only:
  (rstd * (x - mean)) + beta, not fused: see BIAS_ONLY). mean[row] = mean,
  rstd[row] = rstd.

FMAs. ATen is built by nvcc with -fmad=true, which contracts. Which products
it contracts was read from nvcc 13.0's PTX of a transcription of these
functions (-arch=sm_90): online sum: mean = fma(delta, rcp(count), mean),
sigma2 = fma(delta, x - new_mean, sigma2); combine: mean = fma(nA, A.mean,
round(nB * B.mean)), sigma2 = fma(round(round(delta * delta) * A.count), nB,
round(A.sigma2 + B.sigma2)); normalize: fma(gamma, round(rstd * (x - mean)),
beta), round(gamma * round(rstd * (x - mean))), round(rstd * (x - mean)).
We write exactly these with the _rn intrinsics
(__fmaf_rn, __fmul_rn, __fadd_rn, __fsub_rn, __frcp_rn, __fdiv_rn), so the
result does not depend on how NVRTC would contract our own expressions, and
no FMA forms between the chain's last op and the statistics (ATen reads the
chain's value from memory, rounded to T).

What differs from ATen's kernel is only when values are computed, never
which: the counts do not depend on the data, so the reciprocal of each
Welford update's count (count = the element's place in the thread's unrolled
loop + 1) is a constant, the intra-warp combines' counts and coefficients
are shuffled and computed before the data arrive, and the inter-warp ones
(each warp's lane 0 holds the warp's whole count) are constants; gamma and
beta are read with the chain's inputs, before the statistics, for rows of up
to 2048 elements. The critical path of a row is then the loads, the Welford
updates and the data's shuffles.

ATen takes this kernel only when (LayerNormKernelImplInternal) T is float,
Half or BFloat16, N <= 2^24, N % 4 == 0, and X, Y, gamma, beta (when given)
are aligned to 4 * sizeof(T) bytes; otherwise RowwiseMomentsCUDAKernel +
LayerNormForwardCUDAKernel, which reduce in another order: those are not
fused (aten_fuse refuses with "layer-norm-path"). M must fit the grid.

Checked on an H100 with torch 2.11.0+cu130 (these kernels launched
directly, against torch.ops.aten.native_layer_norm after x + r): out, mean,
rstd and the sum bit-identical on every element for f32/f16/bf16, M in
{1, 7, 128}, N in {12, 256, 768, 1024, 1600, 4096, 5120, 16384} (16384:
the recomputing variant), weight and bias / weight / neither, with rows of
large magnitude, of a large offset and of constants
(tests/gpu/aten_norm_kernels.py); and through aten_fuse's dispatch mode and
libkplanrt (tests/gpu/torch_fusion_ops.py, its LayerNorm cases: 579 of 579
bit-identical on an H200, the 570 fusable ones fused).

Torch-free, like aten_gen.
"""

import fractions
import hashlib
import struct

from . import aten_gen as G
from . import aten_ops as A

THREADS = 128          # ATen's threads(32, 4)
VEC = 4                # ATen's vec_size
MAX_N = 1 << 24        # N <= 2^24: the count is a float
MAX_ROWS = (1 << 31) - 1
CACHE_VECS = 16        # rows of up to 16 * 4 * 128 = 8192 elements keep x in registers
PREFETCH_VECS = 4      # rows of up to 2048 read gamma and beta before the statistics


class Norm(object):
    """The row-norm node ending a chain: kind ("layer_norm"), node (index
    of the chain node it normalizes), n (row length, the last dim), eps
    (the double ATen gets), gamma / beta (external indices or None), dtype
    (the input's), outs (which of out, mean, rstd are written: 3 bools)."""

    __slots__ = ("kind", "node", "n", "eps", "gamma", "beta", "dtype", "outs")

    def __init__(self, node, n, eps, gamma=None, beta=None, dtype="f32", outs=(True, True, True),
                 kind="layer_norm"):
        self.kind = kind
        self.node = int(node)
        self.n = int(n)
        self.eps = float(eps)
        self.gamma = gamma
        self.beta = beta
        self.dtype = dtype
        self.outs = tuple(bool(o) for o in outs)

    def __repr__(self):
        return "Norm(%s, n%d, N=%d, eps=%r, gamma=%r, beta=%r, %s, outs=%r)" % (
            self.kind, self.node, self.n, self.eps, self.gamma, self.beta, self.dtype, self.outs)

    def text(self):
        """The node as aten_plan.describe names it."""
        return "norm %s n%d N=%d eps=%r gamma=%s beta=%s %s outs=%s" % (
            self.kind, self.node, self.n, self.eps,
            "-" if self.gamma is None else "x%d" % self.gamma,
            "-" if self.beta is None else "x%d" % self.beta, self.dtype,
            "".join("1" if o else "0" for o in self.outs))


# A bias without a weight is not generated. Its branch in ATen's source is
# (rstd * (x - mean)) + beta; on an H100 with torch 2.11+cu130 neither
# fma(rstd, x - mean, beta) (the FMA nvcc 13.0 forms in a transcription:
# 7% of f32 elements 1 ulp off) nor round(rstd * (x - mean)) + beta (20%)
# gave ATen's bits, while the three other branches (weight and bias,
# weight, neither) matched on every element of 216 cases (f32/f16/bf16,
# M 1/7/128, N 12..16384). nn.LayerNorm never makes this case.
BIAS_ONLY = "ATen's bits not reproduced (measured), not fused"


def vectorized(dtype, n, ptrs):
    """Whether ATen's LayerNormKernelImplInternal launches
    vectorized_layer_norm_kernel: dtype f32/f16/bf16, n <= 2^24, n % 4 == 0
    and every pointer (X, Y, gamma, beta: those given) aligned to
    4 * sizeof(T)."""
    size = {"f32": 4, "f16": 2, "bf16": 2}.get(dtype)
    if size is None or n <= 0 or n > MAX_N or n % VEC:
        return False
    return all(int(p) % (VEC * size) == 0 for p in ptrs)


def launch_dims(rows):
    """(grid, block) of the row kernel: one block of 128 threads per row."""
    return max(1, int(rows)), THREADS


_PRELUDE = r"""
// cuWelfordOnlineSum (float): the FMAs nvcc forms in ATen's, written out
static __device__ __forceinline__ void kp_won(float x, float &m, float &s, float &c)
{
	const float d = __fsub_rn(x, m);
	c = __fadd_rn(c, 1.0f);
	m = __fmaf_rn(d, __frcp_rn(c), m);
	s = __fmaf_rn(d, __fsub_rn(x, m), s);
}
// cuWelfordOnlineSum with the count's reciprocal known (rcp.rn of the count
// the element has in ATen's loop: a constant of the unrolled loop)
static __device__ __forceinline__ void kp_wonk(float x, float &m, float &s, float r)
{
	const float d = __fsub_rn(x, m);
	m = __fmaf_rn(d, r, m);
	s = __fmaf_rn(d, __fsub_rn(x, m), s);
}
// cuWelfordCombine with the counts' part computed before the data (the
// counts do not depend on it): ac = A.count, nA = A.count * coef, nB =
// B.count * coef, pos = count > 0, the same operations kp_wcomb does
static __device__ __forceinline__ void kp_wcombk(float &m, float &s, float am, float as,
                                                 float ac, float nA, float nB, bool pos)
{
	const float delta = __fsub_rn(m, am);
	if (pos) {
		const float mean = __fmaf_rn(nA, am, __fmul_rn(nB, m));
		s = __fmaf_rn(__fmul_rn(__fmul_rn(delta, delta), ac), nB, __fadd_rn(as, s));
		m = mean;
	} else {
		m = 0.0f;
		s = 0.0f;
	}
}
"""


def _element(ch, sfx, params):
    """The lines computing the chain at element i: (lines, nf, nb)."""
    body = []
    xf, xb = [], []
    for j, x in enumerate(ch.exts):
        if x.dtype not in G._CTYPE:
            raise G.GenError("dtype %s" % x.dtype)
        if x.mode == "const":
            G.const_lines(j, x, body, xf, xb)
            continue
        if params is not None:
            params.append("const %s *x%d" % (G._CTYPE[x.dtype], j))
        G.load_lines(j, x, G.ext_at(x, ch.numel, sfx), body, xf, xb)
    nf, nb = G._node_lines(ch, xf, xb, body)
    return body, nf, nb


def rcp_rn(c):
    """1 / c rounded to the nearest float32 (ties to even): __frcp_rn(c)
    for a positive integer-valued c, as a Python float."""
    q = fractions.Fraction(1) / fractions.Fraction(c)
    a = A.f32(float(q))
    bits = struct.unpack("<I", struct.pack("<f", a))[0]
    cands = [struct.unpack("<f", struct.pack("<I", b))[0] for b in (bits - 1, bits, bits + 1)]
    return min(cands, key=lambda f: (abs(fractions.Fraction(f) - q),
                                      struct.unpack("<I", struct.pack("<f", f))[0] & 1))


def thread_count(t, nv):
    """Elements thread t folds in compute_stats (4 per vector it reads)."""
    return 0 if t >= nv else ((nv - 1 - t) // THREADS + 1) * VEC


def inter_warp(nv):
    """The inter-warp combines' counts, known before the data: for offsets
    2 and 1, per receiving warp w, (A.count, nA, nB, count > 0) where dataB
    is warp w's lane 0 (the warp's whole count, exact in float below 2^24)
    and dataA the warp w + offset's."""
    cw = [sum(thread_count(w * 32 + l, nv) for l in range(32)) for w in range(THREADS // 32)]
    stages = []
    for offset in (2, 1):
        st = []
        for w in range(offset):
            c, ac = float(cw[w]), float(cw[w + offset])
            count = c + ac
            if count > 0:
                coef = rcp_rn(count)
                st.append((ac, A.f32(ac * coef), A.f32(c * coef), True))
            else:
                st.append((ac, 0.0, 0.0, False))
            cw[w] = count
        stages.append((offset, st))
    return stages


def generate(chain, norm):
    """(kernel name, CUDA source) of chain (aten_gen.Chain: its outs are the
    chain nodes written) ending in norm (Norm). Parameters: the externals
    x0.., the chain outputs y0.., then out, mean, rstd (those norm.outs
    says). Raises aten_gen.GenError."""
    ch = chain
    nm = norm
    if nm.kind != "layer_norm":
        raise G.GenError("norm %s" % nm.kind)
    if not ch.nodes:
        raise G.GenError("empty chain")
    if not ch.outs and not any(nm.outs):
        raise G.GenError("nothing written")
    if not 0 <= nm.node < len(ch.nodes):
        raise G.GenError("norm reads node %d" % nm.node)
    dt = ch.nodes[nm.node].dtype
    if dt not in A.FLOAT_DTYPES or dt != nm.dtype:
        raise G.GenError("norm dtype %s" % dt)
    N = nm.n
    if N <= 0 or N % VEC or N > MAX_N or ch.numel % N:
        raise G.GenError("row of %d over %d elements" % (N, ch.numel))
    rows = ch.numel // N
    if rows > MAX_ROWS:
        raise G.GenError("%d rows" % rows)
    for w in (nm.gamma, nm.beta):
        if w is not None and not (0 <= w < len(ch.exts) and ch.exts[w].dtype == dt):
            raise G.GenError("norm weight x%r" % (w,))
    if nm.beta is not None and nm.gamma is None:
        raise G.GenError("a bias without a weight: " + BIAS_ONLY)
    if not ch.exact:
        # tolerant chains would feed the norm an unrounded value: ATen's
        # reads it rounded to T; the norm itself is exact either way
        pass
    idx_t = "unsigned int" if ch.numel < (1 << 31) else "unsigned long long"
    sfx = "u" if idx_t == "unsigned int" else "ull"
    params = []
    elem, nf, nb = _element(ch, sfx, params)
    stores = []
    for o, k in enumerate(ch.outs):
        params.append("%s *y%d" % (G._CTYPE[ch.nodes[k].dtype], o))
        stores.append(G.store_line(ch, o, k, nf, nb))
    ct = G._CTYPE[dt]
    if nm.outs[0]:
        params.append("%s *ln_y" % ct)
    if nm.outs[1]:
        params.append("float *ln_mean")
    if nm.outs[2]:
        params.append("float *ln_rstd")
    # the value the norm reads: the node rounded to T (exact chains carry it so)
    xv = nf[nm.node]
    if not ch.exact and dt != "f32":
        xv = "%s(%s(%s))" % (G._from_bits(dt), G._to_bits(dt), xv)
    nv = N // VEC
    vpt = (nv + THREADS - 1) // THREADS
    cache = vpt <= CACHE_VECS
    # gamma and beta read with the chain's inputs, before the statistics
    # (the order of loads changes no bit), where the row fits in registers
    pre = cache and vpt <= PREFETCH_VECS and nm.outs[0]
    L = []
    L.append("\t__shared__ float kp_buf[4];   // ATen's s_data: meansigmabuf (counts: below)")
    L.append("\tconst int thrx = (int)threadIdx.x;")
    L.append("\tconst int lane = thrx & 31, warp = thrx >> 5;")
    L.append("\tconst %s row0 = (%s)blockIdx.x * %d%s;" % (idx_t, idx_t, N, sfx))
    L.append("\tfloat kp_m = 0.0f, kp_s = 0.0f;" if cache else
             "\tfloat kp_m = 0.0f, kp_s = 0.0f, kp_c = 0.0f;")
    # ATen's combines compute coefficients from the counts, which do not
    # depend on the data: computed here, off the statistics' critical path
    L += ["\t// the intra-warp combines' counts, ahead of the data",
          "\tfloat kp_ac[5], kp_na[5], kp_nb[5];",
          "\tbool kp_pos[5];",
          "\t{",
          "\t	float c = thrx < %d ? (float)(((%d - 1 - thrx) / %d + 1) * %d) : 0.0f;"
          % (nv, nv, THREADS, VEC),
          "\t	#pragma unroll",
          "\t	for (int k = 0; k < 5; k++) {",
          "\t		const float ac = __shfl_down_sync(0xffffffffu, c, 16 >> k, 32);",
          "\t		const float count = __fadd_rn(ac, c);",
          "\t		const float coef = __frcp_rn(count);",
          "\t		kp_ac[k] = ac;",
          "\t		kp_na[k] = __fmul_rn(ac, coef);",
          "\t		kp_nb[k] = __fmul_rn(c, coef);",
          "\t		kp_pos[k] = count > 0.0f;",
          "\t		c = count;",
          "\t	}",
          "\t}"]

    def loop_head(ind):
        if cache:
            return [ind + "#pragma unroll",
                    ind + "for (int v = 0; v < %d; v++) {" % vpt,
                    ind + "\tconst int iv = thrx + v * %d;" % THREADS,
                    ind + "\tif (iv < %d) {" % nv,
                    ind + "\t\t#pragma unroll",
                    ind + "\t\tfor (int ii = 0; ii < %d; ii++) {" % VEC,
                    ind + "\t\t\tconst int col = iv * %d + ii;" % VEC,
                    ind + "\t\t\tconst %s i = row0 + (%s)col;" % (idx_t, idx_t)], ind + "\t\t\t"
        return [ind + "for (int iv = thrx; iv < %d; iv += %d) {" % (nv, THREADS),
                ind + "\t\t#pragma unroll",
                ind + "\t\tfor (int ii = 0; ii < %d; ii++) {" % VEC,
                ind + "\t\t\tconst int col = iv * %d + ii;" % VEC,
                ind + "\t\t\tconst %s i = row0 + (%s)col;" % (idx_t, idx_t)], ind + "\t\t\t"

    def loop_tail(ind):
        return [ind + "\t\t}", ind + "\t}"] + ([ind + "}"] if cache else [])

    def wload(j):
        if dt == "f32":
            return "x%d[col]" % j
        return "%s(x%d[col])" % (G._from_bits(dt), j)
    g, b = nm.gamma, nm.beta
    if cache:
        L.append("\tfloat kp_x[%d];" % (vpt * VEC))
        # 1 / count of each element's Welford update, count = its place + 1
        L.append("\tconst float kp_rcp[%d] = {%s};" % (vpt * VEC, ", ".join(
            A.flit(rcp_rn(k + 1)) for k in range(vpt * VEC))))
    if pre:
        for w, nmw in ((g, "kp_g"), (b, "kp_b")):
            if w is not None:
                L.append("\tfloat %s[%d];" % (nmw, vpt * VEC))
    # pass 1: the chain, its stores, the per-thread Welford sums
    L.append("\t// compute_stats: the chain's elements in ATen's read order")
    head, ind = loop_head("\t")
    L += head
    L += [ind + line for line in elem + stores]
    if cache:
        L.append(ind + "kp_x[v * %d + ii] = %s;" % (VEC, xv))
        L.append(ind + "kp_wonk(kp_x[v * %d + ii], kp_m, kp_s, kp_rcp[v * %d + ii]);"
                 % (VEC, VEC))
    else:
        L.append(ind + "kp_won(%s, kp_m, kp_s, kp_c);" % xv)
    if pre:
        for w, nmw in ((g, "kp_g"), (b, "kp_b")):
            if w is not None:
                L.append(ind + "%s[v * %d + ii] = %s;" % (nmw, VEC, wload(w)))
    L += loop_tail("\t")
    # intra-warp (the counts' part above), inter-warp (counts: constants)
    L += ["\t#pragma unroll",
          "\tfor (int k = 0; k < 5; k++) {",
          "\t\tconst float bm = __shfl_down_sync(0xffffffffu, kp_m, 16 >> k, 32);",
          "\t\tconst float bs = __shfl_down_sync(0xffffffffu, kp_s, 16 >> k, 32);",
          "\t\tkp_wcombk(kp_m, kp_s, bm, bs, kp_ac[k], kp_na[k], kp_nb[k], kp_pos[k]);",
          "\t}"]
    for offset, st in inter_warp(nv):
        L += ["\tif (lane == 0 && warp >= %d && warp < %d) {" % (offset, 2 * offset),
              "\t\tkp_buf[2 * (warp - %d)] = kp_m;" % offset,
              "\t\tkp_buf[2 * (warp - %d) + 1] = kp_s;" % offset,
              "\t}",
              "\t__syncthreads();"]
        for w, (ac, na, nb, pos) in enumerate(st):
            L += ["\tif (lane == 0 && warp == %d)" % w,
                  "\t\tkp_wcombk(kp_m, kp_s, kp_buf[%d], kp_buf[%d], %s, %s, %s, %s);"
                  % (2 * w, 2 * w + 1, A.flit(ac), A.flit(na), A.flit(nb),
                     "true" if pos else "false")]
        L.append("\t__syncthreads();")
    L += [
          "\tif (lane == 0 && warp == 0) {",
          "\t\tkp_buf[0] = kp_m;",
          "\t\tkp_buf[1] = __fdiv_rn(kp_s, %s);   // sigma2 / float(N)" % A.flit(float(N)),
          "\t}",
          "\t__syncthreads();",
          "\tconst float mean = kp_buf[0];",
          "\tconst float rstd = rsqrtf(__fadd_rn(kp_buf[1], %s));   // eps %r as float"
          % (A.flit(A.f32(nm.eps)), nm.eps)]
    if nm.outs[1] or nm.outs[2]:
        L.append("\tif (thrx == 0) {")
        if nm.outs[1]:
            L.append("\t\tln_mean[blockIdx.x] = mean;")
        if nm.outs[2]:
            L.append("\t\tln_rstd[blockIdx.x] = rstd;")
        L.append("\t}")
    if nm.outs[0]:
        L.append("\t// normalize: ATen's expression in float, rounded to T")
        head, ind = loop_head("\t")
        L += head
        if cache:
            L.append(ind + "const float x = kp_x[v * %d + ii];" % VEC)
        else:
            # recompute the chain's element (the same operations: the same value)
            L += [ind + line for line in elem]
            L.append(ind + "const float x = %s;" % xv)
        L.append(ind + "const float xm = __fsub_rn(x, mean);")
        if pre:
            gv, bv = "kp_g[v * %d + ii]" % VEC, "kp_b[v * %d + ii]" % VEC
        else:
            gv, bv = (None if g is None else wload(g)), (None if b is None else wload(b))
        if g is not None and b is not None:
            e = "__fmaf_rn(%s, __fmul_rn(rstd, xm), %s)" % (gv, bv)
        elif g is not None:
            e = "__fmul_rn(%s, __fmul_rn(rstd, xm))" % gv
        else:
            e = "__fmul_rn(rstd, xm)"
        if dt == "f32":
            L.append(ind + "ln_y[i] = %s;" % e)
        else:
            L.append(ind + "ln_y[i] = %s(%s);" % (G._to_bits(dt), e))
        L += loop_tail("\t")
    core = ("extern \"C\" __global__ void __launch_bounds__(%d) KPNAME(%s)\n{\n%s\n}\n"
            % (THREADS, ", ".join(params), "\n".join(L)))
    desc = G.nodes_text(ch.nodes, attrs=False)
    head = ("// kplan ATen chain + row norm (python/kplan/aten_norm.py): %d ops, %d rows of %d, "
            "%s, ATen's vectorized_layer_norm_kernel order\n// %s; %s\n"
            % (len(ch.nodes) + 1, rows, N, "exact" if ch.exact else "tolerant",
               desc.replace("\n", " "), nm.text()))
    prelude = G._PRELUDE + _PRELUDE
    name = "kp_atenln_" + hashlib.sha256((prelude + core).encode()).hexdigest()[:16]
    return name, head + prelude + core.replace("KPNAME", name)
