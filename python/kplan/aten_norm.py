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

import hashlib

from . import aten_gen as G
from . import aten_ops as A

THREADS = 128          # ATen's threads(32, 4)
VEC = 4                # ATen's vec_size
MAX_N = 1 << 24        # N <= 2^24: the count is a float
MAX_ROWS = (1 << 31) - 1
CACHE_VECS = 16        # rows of up to 16 * 4 * 128 = 8192 elements keep x in registers


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
// cuWelfordCombine(dataB = (m, s, c), dataA = (am, as, ac))
static __device__ __forceinline__ void kp_wcomb(float &m, float &s, float &c,
                                                float am, float as, float ac)
{
	const float delta = __fsub_rn(m, am);
	const float count = __fadd_rn(ac, c);
	float mean, sigma2;
	if (count > 0.0f) {
		const float coef = __frcp_rn(count);
		const float nA = __fmul_rn(ac, coef);
		const float nB = __fmul_rn(c, coef);
		mean = __fmaf_rn(nA, am, __fmul_rn(nB, m));
		sigma2 = __fmaf_rn(__fmul_rn(__fmul_rn(delta, delta), ac), nB, __fadd_rn(as, s));
	} else {
		mean = 0.0f;
		sigma2 = 0.0f;
	}
	m = mean;
	s = sigma2;
	c = count;
}
"""


def _ext_at(x, numel, sfx):
    # how element i reads an external tensor (aten_gen.Ext's modes)
    if x.mode == "full":
        return "i"
    if x.mode == "scalar":
        return "0"
    if x.mode == "row":
        if x.n <= 0:
            raise G.GenError("row of %d" % x.n)
        return "i %% %d%s" % (x.n, sfx)
    if x.mode == "bcast":
        if x.n <= 0 or x.inner <= 0:
            raise G.GenError("bcast of %d x %d" % (x.n, x.inner))
        if x.n * x.inner == numel:
            return "i / %d%s" % (x.inner, sfx)
        return "(i / %d%s) %% %d%s" % (x.inner, sfx, x.n, sfx)
    raise G.GenError("mode %s" % x.mode)


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
        G.load_lines(j, x, _ext_at(x, ch.numel, sfx), body, xf, xb)
    nf, nb = G._node_lines(ch, xf, xb, body)
    return body, nf, nb


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
        n = ch.nodes[k]
        params.append("%s *y%d" % (G._CTYPE[n.dtype], o))
        if n.dtype == "f32":
            stores.append("y%d[i] = %s;" % (o, nf[k]))
        elif nb[k] is not None:
            stores.append("y%d[i] = %s;" % (o, nb[k]))
        else:
            stores.append("y%d[i] = %s(%s);" % (o, G._to_bits(n.dtype), nf[k]))
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
    L = []
    L.append("\t__shared__ float kp_buf[6];   // ATen's s_data: meansigmabuf[0..3], countbuf = +4")
    L.append("\tconst int thrx = (int)threadIdx.x;")
    L.append("\tconst int lane = thrx & 31, warp = thrx >> 5;")
    L.append("\tconst %s row0 = (%s)blockIdx.x * %d%s;" % (idx_t, idx_t, N, sfx))
    L.append("\tfloat kp_m = 0.0f, kp_s = 0.0f, kp_c = 0.0f;")

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

    if cache:
        L.append("\tfloat kp_x[%d];" % (vpt * VEC))
    # pass 1: the chain, its stores, the per-thread Welford sums
    L.append("\t// compute_stats: the chain's elements in ATen's read order")
    head, ind = loop_head("\t")
    L += head
    L += [ind + line for line in elem + stores]
    if cache:
        L.append(ind + "kp_x[v * %d + ii] = %s;" % (VEC, xv))
    L.append(ind + "kp_won(%s, kp_m, kp_s, kp_c);" % xv)
    L += loop_tail("\t")
    # intra-warp, inter-warp
    L += ["\t#pragma unroll",
          "\tfor (int offset = 16; offset > 0; offset >>= 1) {",
          "\t\tconst float bm = __shfl_down_sync(0xffffffffu, kp_m, offset, 32);",
          "\t\tconst float bs = __shfl_down_sync(0xffffffffu, kp_s, offset, 32);",
          "\t\tconst float bc = __shfl_down_sync(0xffffffffu, kp_c, offset, 32);",
          "\t\tkp_wcomb(kp_m, kp_s, kp_c, bm, bs, bc);",
          "\t}",
          "\tfor (int offset = 2; offset > 0; offset /= 2) {",
          "\t\tif (lane == 0 && warp >= offset && warp < 2 * offset) {",
          "\t\t\tconst int w = warp - offset;",
          "\t\t\tkp_buf[2 * w] = kp_m;",
          "\t\t\tkp_buf[2 * w + 1] = kp_s;",
          "\t\t\tkp_buf[4 + w] = kp_c;",
          "\t\t}",
          "\t\t__syncthreads();",
          "\t\tif (lane == 0 && warp < offset)",
          "\t\t\tkp_wcomb(kp_m, kp_s, kp_c, kp_buf[2 * warp], kp_buf[2 * warp + 1], "
          "kp_buf[4 + warp]);",
          "\t\t__syncthreads();",
          "\t}",
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

        def wload(j):
            if dt == "f32":
                return "x%d[col]" % j
            return "%s(x%d[col])" % (G._from_bits(dt), j)
        g, b = nm.gamma, nm.beta
        if g is not None and b is not None:
            e = "__fmaf_rn(%s, __fmul_rn(rstd, xm), %s)" % (wload(g), wload(b))
        elif g is not None:
            e = "__fmul_rn(%s, __fmul_rn(rstd, xm))" % wload(g)
        else:
            e = "__fmul_rn(rstd, xm)"
        if dt == "f32":
            L.append(ind + "ln_y[i] = %s;" % e)
        else:
            L.append(ind + "ln_y[i] = %s(%s);" % (G._to_bits(dt), e))
        L += loop_tail("\t")
    core = ("extern \"C\" __global__ void __launch_bounds__(%d) KPNAME(%s)\n{\n%s\n}\n"
            % (THREADS, ", ".join(params), "\n".join(L)))
    desc = "; ".join("%d %s %s <- %s" % (k, n.op, n.dtype, ",".join(
        "%s%s" % (c, v if c != "s" else "(%r)" % v) for c, v in n.ins))
        for k, n in enumerate(ch.nodes))
    head = ("// kplan ATen chain + row norm (python/kplan/aten_norm.py): %d ops, %d rows of %d, "
            "%s, ATen's vectorized_layer_norm_kernel order\n// %s; %s\n"
            % (len(ch.nodes) + 1, rows, N, "exact" if ch.exact else "tolerant",
               desc.replace("\n", " "), nm.text()))
    prelude = G._PRELUDE + _PRELUDE
    name = "kp_atenln_" + hashlib.sha256((prelude + core).encode()).hexdigest()[:16]
    return name, head + prelude + core.replace("KPNAME", name)
