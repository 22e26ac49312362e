"""A mean over the last dim inside a chain (RMSNorm written as ops): one kernel.

Hugging Face's LlamaRMSNorm is `h = x.float(); v = h.pow(2).mean(-1,
keepdim=True); y = w * (h * torch.rsqrt(v + eps)).to(x.dtype)`. When
`aten::mean.dim` over the last dim reads an f32 value of the pending chain
(kplan.aten_fuse, Fuser.defer_mean), the chain gets a *row-reduce node* (op
"mean", a node of [..., 1]) instead of ending: ops over row values and
scalars (the add of eps, the rsqrt) are *row nodes*, computed once per row,
and ops over the full shape may read row values broadcast over the row (the
mul by rstd); they join the chain after the mean. On flush one kernel
computes, per row: pass 1, the nodes before the mean per element (storing
the values still held), summed in ATen's order; the mean; the row nodes;
pass 2, the nodes after the mean per element (the pass-1 values they read
kept in registers when the row is short enough, else computed again: the
same operations, the same bits).

ATen's mean. Read in pytorch/pytorch's sources (the search index's copies;
none carries the commit of torch 2.11, see VARIANTS):
- ReduceOps.cpp, mean_out: on CUDA (not CPU, where it is a sum and a
  division) make_reduction_from_out_ty + mean_stub.
- cuda/ReduceMomentKernel.cu, mean_kernel_impl<float>: factor =
  static_cast<float>(iter.num_output_elements()) / iter.numel() (a float
  division on the host: rows / (rows * N)), gpu_reduce_kernel<float,
  float>(iter, MeanOps{factor}) with the default vt0 = 4 and
  input_vec_size = vt0 (only 16-bit inputs take input_vec_size 8; a vendor
  fork read, Biren's torch_supa, takes vt0 = 8 for float when N % 1024 ==
  0: no upstream copy read does).
- SharedReduceOps.h, MeanOps: reduce(acc, x) = acc + x, combine(a, b) =
  a + b, project(acc) = acc * factor, ident 0 (so a thread's first add is
  0 + x). No product precedes a sum: nvcc has nothing to contract, and we
  write each add and the product as __fadd_rn / __fmul_rn.
- cuda/Reduce.cuh, setReduceConfig for a contiguous [rows, N] float input
  reduced over its last dim (TensorIterator: reduction on the fastest dim,
  one reduce dim, element stride 4 bytes): dim0 = N, dim1 = rows; the input
  is vectorized (vec4 loads) when dim0 >= 128 (VARIANTS), then dim0 /= 4;
  set_block_dimension (512 threads at most): d0 = last_pow2(dim0) (512 when
  dim0 >= 512), d1 likewise, bw = min(d0, 32), bh = min(d1, 512 / bw),
  bw = min(d0, 512 / bh); input_mult[0] = split_input(bw) (step = bw);
  values_per_thread = div_up(N, step) (elements, also when vectorized);
  when it is >= min(bh * 16, 256) the warps of a block split one row
  (input_mult[1] = bw, step = bw * bh: block_y_reduce), else each warp
  (threadIdx.y) has its own row (step_output = bh); grid = div_up(rows,
  step_output); when the warps split a row and div_up(N, step) >= 256 ATen
  may reduce across blocks (global_reduce): not generated (Fuser refuses,
  "mean-config"), nor more than 2^31 bytes of input (sub-iterators).
- input_vectorized_thread_reduce_impl: a row starting shift = (address %
  16) / 4 elements past a 16-byte boundary first gives elements 0..3-shift
  to threads x = shift..3 (the head, into accumulator 0); then thread (x,
  y) reads the vectors idx = x + y * input_mult[1], idx + step, ... while
  idx * 4 + 3 < end, element ii into accumulator ii; the tail (end % 4
  elements) goes to threads x = 0.. into accumulator 0 (head and tail by
  warp 0 only when the warps split a row); accumulators combined
  ((a0 + a1) + a2) + a3. Our rows start at row * N elements of a tensor the
  chain allocated (16-byte aligned): shift = (row * N) % 4.
- thread_reduce_impl (not vectorized): thread x reads idx = x + y *
  input_mult[1], idx + step, ...; the j-th into accumulator j % 4; combined
  the same way.
- block_x_reduce: when blockDim.x > 32, shared memory halving (offset
  bw/2 .. 32: threads x < offset add x + offset); then shuffles
  (__shfl_down_sync, full mask, width 32) over min(bw, 32) lanes;
  block_y_reduce: shared memory halving over y (offset bh/2 .. 1). The
  leader (x == 0, and y == 0 when split) stores value * factor.

VARIANTS. The copies of Reduce.cuh read differ in three places that change
bits, and which one torch 2.11 (CUDA 13) has could not be pinned from the
sources available; the flags below select them and
tests/gpu/aten_rms_kernels.py measures each against eager ATen:
- SHUFFLE_DESCENDING: shuffle offsets 16, 8, .., 1 (pytorch PR #164790,
  "Fix CUDA reduction warp shuffle order", Oct 2025, backed out by #181819
  in Apr 2026: `#if USE_ROCM || FBCODE_CAFFE2` ascending, else descending)
  or 1, 2, .., 16 (earlier versions).
- X_BEFORE_Y: run() reduces over x (lanes) then y (warps) in the newest
  copy, y then x in the older ones, also in a 2025 port (PaddlePaddle's)
  that already carries #164790's comment (matters when the warps split a
  row and bh > 1, e.g. 3 rows of 8192).
- VECTORIZE_AT_128: `dim0 >= 128` in the newest copy, `dim0 > 128` (and
  vt0 >= input_vec_size) before (matters for N = 128 only).
The defaults are the newest copy read (a line-numbered Reduce.cuh with
block_x_reduce at line 634 and setReduceConfig at line 1039).

Checked on the CPU only: tests/python/test_aten_rms.py runs the generated
kernel on the host (a thread per CUDA thread, a barrier for
__syncthreads) against an independent transcription of the loops above,
bit for bit; eager ATen on a GPU decides (tests/gpu/aten_rms_kernels.py,
tests/gpu/torch_fusion_ops.py --rms-norm). Exact only where those passed.

Torch-free, like aten_gen and aten_norm.
"""

import hashlib

from . import aten_gen as G
from . import aten_ops as A

VEC = 4                 # input_vec_size for float (= vt0)
WARP = 32
MAX_THREADS = 512       # mnt_wrapper<float>::MAX_NUM_THREADS
MIN_VALUES = 16         # setReduceConfig's min_values_per_thread
MAX_VALUES = 256        # ... max_values_per_thread
MAX_ELEMS = (1 << 31) // 4   # can_use_32bit_indexing: f32 byte offsets below 2^31
CACHE_SLOTS = 64        # pass-1 values kept in registers per thread, at most

SHUFFLE_DESCENDING = True
X_BEFORE_Y = True
VECTORIZE_AT_128 = True


def variant():
    """The variant flags as one word (in the chain's key and the kernel's head)."""
    return "shfl-%s,%s,vec%s128" % ("desc" if SHUFFLE_DESCENDING else "asc",
                                     "x-y" if X_BEFORE_Y else "y-x",
                                     ">=" if VECTORIZE_AT_128 else ">")


def _div_up(a, b):
    return (a + b - 1) // b


def _last_pow2(n):
    # Reduce.cuh's last_pow2: the largest power of 2 <= n, at least 1
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


class Config(object):
    """ATen's ReduceConfig for the mean of a contiguous float [rows, n] over
    its last dim: vec (vec4 loads), bw x bh threads, step (input stride:
    vectors when vec, else elements), mult1 (input_mult[1]: the offset of
    warp y in a row, 0 when each warp has its own row), split (warps split a
    row: block_y_reduce), step_out (rows per block), grid, glob (ATen may
    reduce across blocks)."""

    __slots__ = ("rows", "n", "vec", "bw", "bh", "step", "mult1", "split", "step_out",
                 "grid", "glob")

    def __repr__(self):
        return "Config(%dx%d, %s, block %dx%d, step %d, %s, grid %d%s)" % (
            self.rows, self.n, "vec4" if self.vec else "scalar", self.bw, self.bh, self.step,
            "warps split a row" if self.split else "a row per warp", self.grid,
            ", global" if self.glob else "")


def config(rows, n):
    """setReduceConfig<float, float, 4, 4> for mean over the last dim of a
    contiguous float [rows, n] (module docstring)."""
    c = Config()
    c.rows, c.n = int(rows), int(n)
    dim0, dim1 = c.n, c.rows
    c.vec = dim0 >= 128 if VECTORIZE_AT_128 else dim0 > 128
    if c.vec:
        dim0 //= VEC
    d0 = _last_pow2(dim0) if dim0 < MAX_THREADS else MAX_THREADS
    d1 = _last_pow2(dim1) if dim1 < MAX_THREADS else MAX_THREADS
    bw = min(d0, WARP)
    bh = min(d1, MAX_THREADS // bw)
    bw = min(d0, MAX_THREADS // bh)
    c.bw, c.bh = bw, bh
    c.step = bw
    c.split = _div_up(c.n, c.step) >= min(bh * MIN_VALUES, MAX_VALUES)
    if c.split:
        c.mult1 = c.step
        c.step *= bh
        c.step_out = 1
    else:
        c.mult1 = 0
        c.step_out = bh
    c.glob = c.split and _div_up(c.n, c.step) >= MAX_VALUES
    c.grid = _div_up(c.rows, c.step_out)
    return c


def factor(rows, n):
    """MeanOps' factor: float(rows) / (rows * n), a float division."""
    return A.f32(A.f32(rows) / A.f32(rows * n))


def launch_dims(rows, n):
    """(grid, block) of the kernel: ATen's, its block flattened."""
    c = config(rows, n)
    return c.grid, c.bw * c.bh


def refusal(rows, n):
    """Why the mean of [rows, n] is not generated, or None."""
    if n < 2 or rows < 1:
        return "a row of %d" % n
    if rows * n > MAX_ELEMS:
        return "%d elements: ATen splits the iterator" % (rows * n)
    if config(rows, n).glob:
        return "ATen may reduce across blocks"
    return None


class Red(object):
    """The row-reduce node of a chain: node (the index of the chain node of
    op "mean", reading the f32 node it sums), n (the row length, the last
    dim), rows (the indices of the nodes computed once per row: the mean and
    the nodes over row values and scalars)."""

    __slots__ = ("node", "n", "rows")

    def __init__(self, node, n, rows):
        self.node = int(node)
        self.n = int(n)
        self.rows = tuple(sorted(int(k) for k in rows))

    def __repr__(self):
        return "Red(n%d, N=%d, rows=%r)" % (self.node, self.n, self.rows)

    def text(self):
        """The node as aten_plan.describe names it."""
        return "red mean n%d N=%d rows=%s aten=%s" % (
            self.node, self.n, ",".join(str(k) for k in self.rows), variant())


def _used_exts(ch, nodes):
    return sorted({v for k in nodes for c, v in ch.nodes[k].ins if c == "x"})


def _loads(ch, js, at, sfx, body):
    """Lines loading externals js at index expression at ("0": scalars);
    returns (xf, xb), None for the externals not loaded."""
    xf, xb = [None] * len(ch.exts), [None] * len(ch.exts)
    for j in js:
        x = ch.exts[j]
        f, b = [], []
        if x.mode == "const":
            G.const_lines(j, x, body, f, b)
        else:
            G.load_lines(j, x, at if at is not None else G.ext_at(x, ch.numel, sfx),
                         body, f, b)
        xf[j], xb[j] = f[0], b[0]
    return xf, xb


def generate(chain, red):
    """(kernel name, CUDA source) of chain (aten_gen.Chain: its outs are the
    chain nodes written, row nodes included) with the row-reduce node red
    (Red). Parameters: the externals x0.., then the outputs y0.. (a row
    node's [rows] values, the others' [rows * N]). Launch: launch_dims.
    Raises aten_gen.GenError."""
    ch = chain
    k0, N = red.node, red.n
    if not ch.nodes or not 0 <= k0 < len(ch.nodes):
        raise G.GenError("mean node %d" % k0)
    mn = ch.nodes[k0]
    if mn.op != "mean" or mn.dtype != "f32" or len(mn.ins) != 1 or mn.ins[0][0] != "n":
        raise G.GenError("node %d is not a mean of a node" % k0)
    src = mn.ins[0][1]
    if not 0 <= src < k0 or ch.nodes[src].dtype != "f32":
        raise G.GenError("mean of node %d" % src)
    if N < 2 or ch.numel % N:
        raise G.GenError("rows of %d over %d elements" % (N, ch.numel))
    M = ch.numel // N
    why = refusal(M, N)
    if why:
        raise G.GenError(why)
    if any(x.dtype not in G._CTYPE for x in ch.exts):
        raise G.GenError("external dtypes %r" % ([x.dtype for x in ch.exts],))
    if any(x.mode == "strided" for x in ch.exts) or \
            any(st is not None for st in (ch.out_strides or ())) or ch.pad is not None:
        raise G.GenError("the row kernel reads and writes row-major")
    rows = set(red.rows)
    if k0 not in rows or min(rows) != k0:
        raise G.GenError("row nodes %r" % (red.rows,))
    for k in rows - {k0}:
        for c, v in ch.nodes[k].ins:
            if (c == "n" and v not in rows) or \
                    (c == "x" and ch.exts[v].mode not in ("scalar", "const")):
                raise G.GenError("row node %d reads %s%d" % (k, c, v))
    pre = set(range(k0))
    post = set(range(k0 + 1, len(ch.nodes))) - rows
    if not ch.outs:
        raise G.GenError("nothing written")
    cfg = config(M, N)
    sfx = "u"
    params = ["const %s *x%d" % (G._CTYPE[x.dtype], j) for j, x in enumerate(ch.exts)
              if x.mode != "const"]
    stores = {"pre": [], "row": [], "post": []}
    for o, k in enumerate(ch.outs):
        n = ch.nodes[k]
        params.append("%s *y%d" % (G._CTYPE[n.dtype], o))
        stores["pre" if k in pre else "row" if k in rows else "post"].append((o, k))
    # the pass-1 values pass 2 reads: in registers when they fit, else
    # computed again (with the nodes they read)
    kept = sorted({v for k in post for c, v in ch.nodes[k].ins if c == "n" and v in pre})
    again = set(kept)
    for k in range(k0 - 1, -1, -1):
        if k in again:
            again |= {v for c, v in ch.nodes[k].ins if c == "n"}
    shifted = cfg.vec and N % VEC != 0
    if cfg.vec:
        vpt = _div_up(N // VEC, cfg.step)
        slots = vpt * VEC + (2 if shifted else 0)
    else:
        vpt = _div_up(_div_up(N, cfg.step), VEC)
        slots = vpt * VEC
    cache = bool(kept) and len(kept) * slots <= CACHE_SLOTS
    rt = "ty == 0" if cfg.split else ""           # should_reduce_tail

    def kept_type(k):
        d = ch.nodes[k].dtype
        return "unsigned short" if d != "f32" and ch.exact else "float"

    # pass 1: the nodes before the mean, their stores, the sum
    p1 = []
    xf, xb = _loads(ch, _used_exts(ch, pre), None, sfx, p1)
    nf1, nb1 = G._node_lines(ch, xf, xb, p1, todo=pre)
    p1 += [G.store_line(ch, o, k, nf1, nb1, "i") for o, k in stores["pre"]]

    def body1(col, slot, acc):
        lines = ["const unsigned int i = row0 + (unsigned int)(%s);" % col] + p1
        if cache:
            for k in kept:
                v = nb1[k] if kept_type(k) != "float" else nf1[k]
                lines.append("kp_c%d[%s] = %s;" % (k, slot, v))
        lines.append("kp_a[%s] = __fadd_rn(kp_a[%s], %s);" % (acc, acc, nf1[src]))
        return lines

    # the row nodes, once per row
    rl = []
    rf, rb = _loads(ch, _used_exts(ch, rows - {k0}), "0", sfx, rl)
    nfr, nbr = G._node_lines(ch, rf, rb, rl, todo=rows - {k0}, known={k0: ("kp_mean", None)})

    # pass 2: the nodes after the mean
    known = {k: (nfr[k], nbr[k]) for k in rows}

    def body2(col, slot, acc):
        lines = ["const unsigned int i = row0 + (unsigned int)(%s);" % col]
        kn = dict(known)
        todo = set(post)
        if cache:
            for k in kept:
                e = "kp_c%d[%s]" % (k, slot)
                kn[k] = (e, None) if kept_type(k) == "float" else \
                    ("%s(%s)" % (G._from_bits(ch.nodes[k].dtype), e), e)
            js = _used_exts(ch, post)
        else:
            todo |= again
            js = _used_exts(ch, again | post)
        xf2, xb2 = _loads(ch, js, None, sfx, lines)
        nf2, nb2 = G._node_lines(ch, xf2, xb2, lines, todo=todo, known=kn)
        lines += [G.store_line(ch, o, k, nf2, nb2, "i") for o, k in stores["post"]]
        return lines

    def walk(body, ind, fixed):
        """The elements of this thread's row in ATen's order (module
        docstring); fixed: loops of a fixed trip count (register slots)."""
        def inner(lines, d):
            return [ind + "\t" * d + x for x in lines]
        only = " && %s" % rt if rt else ""
        L = []
        if cfg.vec:
            if shifted:
                L += [ind + "const int kp_shift = (int)(row0 & 3u);   // 16-byte aligned tensor",
                      ind + "const int kp_s2 = kp_shift ? %d - kp_shift : 0;" % VEC,
                      ind + "const int kp_end = %d - kp_s2;" % N,
                      ind + "if (kp_shift > 0 && tx >= kp_shift && tx < %d%s) {" % (VEC, only)]
                L += inner(body("tx - kp_shift", slots - 2, "0"), 1) + [ind + "}"]
                cond, col = "kp_iv * %d + %d < kp_end" % (VEC, VEC - 1), \
                    "kp_s2 + kp_iv * %d + ii" % VEC
            else:
                cond, col = "kp_iv < %d" % (N // VEC), "kp_iv * %d + ii" % VEC
            if fixed:
                L += [ind + "#pragma unroll",
                      ind + "for (int v = 0; v < %d; v++) {" % vpt,
                      ind + "\tconst int kp_iv = kp_i0 + v * %d;" % cfg.step,
                      ind + "\tif (!(%s))" % cond,
                      ind + "\t\tbreak;"]
            else:
                L += [ind + "for (int kp_iv = kp_i0; %s; kp_iv += %d) {" % (cond, cfg.step)]
            L += [ind + "\t#pragma unroll",
                  ind + "\tfor (int ii = 0; ii < %d; ii++) {" % VEC]
            L += inner(body(col, "v * %d + ii" % VEC, "ii"), 2) + [ind + "\t}", ind + "}"]
            if shifted:
                L += [ind + "{",
                      ind + "\tconst int kp_t = (kp_end & ~3) + tx;",
                      ind + "\tif (kp_t < kp_end%s) {" % only]
                L += inner(body("kp_s2 + kp_t", slots - 1, "0"), 2) + [ind + "\t}", ind + "}"]
        else:
            if fixed:
                L += [ind + "#pragma unroll",
                      ind + "for (int v = 0; v < %d; v++) {" % vpt,
                      ind + "\tconst int kp_q = kp_i0 + v * %d;" % (VEC * cfg.step)]
            else:
                L += [ind + "for (int kp_q = kp_i0; kp_q < %d; kp_q += %d) {"
                      % (N, VEC * cfg.step)]
            L += [ind + "\t#pragma unroll",
                  ind + "\tfor (int ii = 0; ii < %d; ii++) {" % VEC,
                  ind + "\t\tconst int kp_col = kp_q + ii * %d;" % cfg.step,
                  ind + "\t\tif (kp_col < %d) {" % N]
            L += inner(body("kp_col", "v * %d + ii" % VEC, "ii"), 3)
            L += [ind + "\t\t}", ind + "\t}", ind + "}"]
        return L

    T = cfg.bw * cfg.bh
    L = ["\tconst int tid = (int)threadIdx.x;",
         "\tconst int tx = tid %% %d, ty = tid / %d;" % (cfg.bw, cfg.bw),
         "\tconst unsigned int row = blockIdx.x * %du + (unsigned int)ty * %du;"
         % (cfg.step_out, 0 if cfg.split else 1),
         "\tconst bool kp_in = row < %du;" % M,
         "\tconst unsigned int row0 = row * %du;" % N,
         "\tconst int kp_i0 = %s;   // input_idx" % (
             "tx + ty * %d" % cfg.mult1 if cfg.mult1 else "tx"),
         "\tfloat kp_a[%d] = {0.0f, 0.0f, 0.0f, 0.0f};   // value_list, ident 0" % VEC]
    if cfg.bw > WARP or (cfg.split and cfg.bh > 1):
        L.append("\t__shared__ float kp_sh[%d];" % T)
    L.append("\t__shared__ float kp_row[%d];" % (1 if cfg.split else cfg.bh))
    if cache:
        L += ["\t%s kp_c%d[%d];" % (kept_type(k), k, slots) for k in kept]
    L.append("\t// pass 1: %s, the chain's elements in ATen's read order" % (
        "input_vectorized_thread_reduce_impl" if cfg.vec else "thread_reduce_impl"))
    L.append("\tif (kp_in) {")
    L += walk(body1, "\t\t", cache)
    L.append("\t}")
    L.append("\tfloat kp_v = __fadd_rn(__fadd_rn(__fadd_rn(kp_a[0], kp_a[1]), kp_a[2]), kp_a[3]);")
    bx = []
    dim_x = cfg.bw
    if cfg.bw > WARP:
        bx += ["\tkp_sh[tid] = kp_v;",
               "\tfor (int off = %d; off >= %d; off >>= 1) {" % (cfg.bw // 2, WARP),
               "\t\t__syncthreads();",
               "\t\tif (tx < off) {",
               "\t\t\tkp_v = __fadd_rn(kp_v, kp_sh[tid + off]);",
               "\t\t\tkp_sh[tid] = kp_v;",
               "\t\t}",
               "\t}"]
        dim_x = WARP
    bx.append("\t__syncthreads();")
    offs = []
    o = 1
    while o < dim_x:
        offs.append(o)
        o *= 2
    if SHUFFLE_DESCENDING:
        offs.reverse()
    bx += ["\tkp_v = __fadd_rn(kp_v, __shfl_down_sync(0xffffffffu, kp_v, %d, 32));" % o
           for o in offs]
    by = []
    if cfg.split and cfg.bh > 1:
        by = ["\t__syncthreads();",
              "\tkp_sh[tid] = kp_v;",
              "\tfor (int off = %d; off > 0; off >>= 1) {" % (cfg.bh // 2),
              "\t\t__syncthreads();",
              "\t\tif (ty < off) {",
              "\t\t\tkp_v = __fadd_rn(kp_v, kp_sh[tid + off * %d]);" % cfg.bw,
              "\t\t\tkp_sh[tid] = kp_v;",
              "\t\t}",
              "\t}",
              "\t__syncthreads();"]
    L.append("\t// block_x_reduce%s" % (", block_y_reduce" if by else ""))
    L += bx + by if X_BEFORE_Y else by + bx
    lead = "tid == 0" if cfg.split else "tx == 0"
    L += ["\tif (%s)" % lead,
          "\t\tkp_row[%s] = __fmul_rn(kp_v, %s);   // project: acc * factor"
          % ("0" if cfg.split else "ty", A.flit(factor(M, N))),
          "\t__syncthreads();",
          "\tconst float kp_mean = kp_row[%s];" % ("0" if cfg.split else "ty")]
    L += ["\t" + s for s in rl]
    if stores["row"]:
        L.append("\tif (kp_in && %s) {" % lead)
        L += ["\t\t" + G.store_line(ch, o, k, nfr, nbr, "row") for o, k in stores["row"]]
        L.append("\t}")
    if post:
        L.append("\t// pass 2: the chain after the mean, each element by the thread that read it")
        L.append("\tif (kp_in) {")
        L += walk(body2, "\t\t", cache)
        L.append("\t}")
    core = ("extern \"C\" __global__ void __launch_bounds__(%d) KPNAME(%s)\n{\n%s\n}\n"
            % (T, ", ".join(params), "\n".join(L)))
    desc = G.nodes_text(ch.nodes, attrs=False)
    head = ("// kplan ATen chain with a row mean (python/kplan/aten_rms.py): %d ops, %d rows of "
            "%d, %s, ATen's gpu_reduce_kernel order (%r, %s)\n// %s; %s\n"
            % (len(ch.nodes), M, N, "exact" if ch.exact else "tolerant", cfg, variant(),
               desc.replace("\n", " "), red.text()))
    name = "kp_atenrms_" + hashlib.sha256((G._PRELUDE + core).encode()).hexdigest()[:16]
    return name, head + G._PRELUDE + core.replace("KPNAME", name)
