"""One CUDA kernel per chain of pointwise ATen ops (kplan.aten_ops).

A chain is a DAG of nodes over one iteration space of `numel` elements,
with external tensors read either at [i] (`full`), at [0] (`scalar`: one
element broadcast), at [i % n] (`row`: a contiguous trailing-dims tensor
broadcast over the leading dims), at [(i / inner) % n] (`bcast`: broadcast
over trailing dims too) or at a strided offset (`strided`: any layout, the
tensor's strides broadcast to the chain's shape, applied to i unravelled
row-major over that shape). The kernel computes every node per element and
stores only the nodes listed in `outs` (the values something outside the
chain still reads), each at [i] or, for an output whose layout is not
row-major (ATen gives a pointwise op's output its inputs' memory order), at
its strided offset. Size-1 dims are dropped and adjacent dims merged where
every strided tensor allows it; index math is 32-bit when the elements and
every strided offset fit, else 64-bit.

Numerics. `exact`: each node's value is rounded to its storage dtype as
ATen's kernel does when it stores it (f16: cvt.rn.f16.f32, bf16:
cvt.rn.bf16.f32, the instructions c10::Half / c10::BFloat16 use on sm_80+),
f16/bf16 values are carried as their bits (a selection such as where or
masked_fill passes the bits through as ATen does), and each op's last
arithmetic uses the _rn intrinsics so that no FMA is formed across two ops
(ATen stores between them). `tolerant`: values stay float from op to op and
round once, when stored.

The source needs no headers (NVRTC, no include path); conversions are inline
PTX as in fusion/generate.c. Torch-free.
"""

import hashlib

from . import aten_ops as A

BLOCK = 256
MAX_BLOCKS = 4096

_CTYPE = {"f32": "float", "f16": "unsigned short", "bf16": "unsigned short",
          "b8": "unsigned char"}

_PRELUDE = r"""
static __device__ __forceinline__ float kp_h2f(unsigned short u)
{ float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u)); return f; }
static __device__ __forceinline__ unsigned short kp_f2h(float f)
{ unsigned short u; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(u) : "f"(f)); return u; }
static __device__ __forceinline__ float kp_b2f(unsigned short u)
{ return __int_as_float(((unsigned int)u) << 16); }
static __device__ __forceinline__ unsigned short kp_f2b(float f)
{ unsigned short u; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(u) : "f"(f)); return u; }
"""


class Ext(object):
    """An external tensor: dtype (f32 f16 bf16 b8) and how element i of
    the chain reads it (mode): full [i], scalar [0], row [i % n] (a
    contiguous tensor broadcast over leading dims), bcast [(i / inner) % n]
    (contiguous, broadcast over trailing dims too: inner is the element
    count of those, e.g. an RMSNorm's per-row scale), strided: any layout,
    read at sum(c[d] * strides[d]) where c is the chain's logical index i
    unravelled row-major over the chain's shape and strides (in elements)
    are the tensor's broadcast to that shape (0 on broadcast dims; a
    transposed view, a slice with a gap, an expand), const: a 0-dim
    tensor whose value the chain knows (a scalar_tensor not yet filled):
    `bits` (its storage bits) are a literal of the kernel, which takes no
    pointer for it."""

    __slots__ = ("dtype", "mode", "n", "inner", "strides", "bits")

    def __init__(self, dtype, mode="full", n=0, inner=1, strides=None, bits=None):
        self.dtype = dtype
        self.mode = mode
        self.n = int(n)
        self.inner = int(inner)
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        self.bits = None if bits is None else int(bits)

    def __repr__(self):
        if self.mode == "strided":
            return "Ext(%s, strided, %r)" % (self.dtype, self.strides)
        if self.mode == "const":
            return "Ext(%s, const, 0x%x)" % (self.dtype, self.bits)
        return "Ext(%s, %s, %d, %d)" % (self.dtype, self.mode, self.n, self.inner)


def contiguous_strides(shape):
    """The row-major strides (in elements) of shape."""
    st, acc = [], 1
    for s in reversed(tuple(shape)):
        st.insert(0, acc)
        acc *= int(s)
    return tuple(st)


def same_layout(shape, a, b):
    """Whether strides a and b address shape's elements alike (strides of
    size-1 dims do not matter)."""
    return all(int(s) == 1 or x == y for s, x, y in zip(shape, a, b))


class Chain(object):
    """nodes (aten_ops.Node, inputs before users), exts (Ext), numel, outs
    (node indices written, in parameter order), exact (bool); shape (the
    iteration space, row-major over numel: needed when an Ext is strided or
    an output is not contiguous) and out_strides (per entry of outs: the
    output's strides in elements, or None for contiguous)."""

    def __init__(self, nodes, exts, numel, outs, exact=True, shape=None, out_strides=None):
        self.nodes = list(nodes)
        self.exts = list(exts)
        self.numel = int(numel)
        self.outs = list(outs)
        self.exact = bool(exact)
        self.shape = None if shape is None else tuple(int(s) for s in shape)
        self.out_strides = None if out_strides is None else \
            [None if st is None else tuple(int(x) for x in st) for st in out_strides]


class GenError(Exception):
    pass


def _to_bits(dtype):
    return "kp_f2h" if dtype == "f16" else "kp_f2b"


def _from_bits(dtype):
    return "kp_h2f" if dtype == "f16" else "kp_b2f"


def _bits_of(value, dtype):
    """The storage bits of a float value already representable in dtype."""
    import struct
    if dtype == "f16":
        return struct.unpack("<H", struct.pack("<e", value))[0]
    b = struct.unpack("<I", struct.pack("<f", A.f32(value)))[0]
    return b >> 16


def const_bits(value, dtype):
    """The storage bits ATen's fill of a `dtype` tensor with the Python
    number value writes (c10's Scalar conversion: the double to float, then
    round to nearest even to f16/bf16); b8: 1 or 0."""
    import math
    import struct
    if dtype == "b8":
        return 1 if value else 0
    f = A.f32(value)
    if dtype == "f32":
        return struct.unpack("<I", struct.pack("<f", f))[0]
    if dtype == "f16":
        if math.isnan(f):
            return 0x7e00
        try:
            return struct.unpack("<H", struct.pack("<e", f))[0]
        except OverflowError:            # rounds past the largest half: inf
            return 0xfc00 if f < 0 else 0x7c00
    u = struct.unpack("<I", struct.pack("<f", f))[0]
    if math.isnan(f):
        return 0x7fc0
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff


def _rounder(dtype, exact):
    if dtype == "f32" or not exact:
        return lambda e: e
    to, fr = _to_bits(dtype), _from_bits(dtype)
    return lambda e: "%s(%s(%s))" % (fr, to, e)


def _bits_expr(node, fl, bits, dts):
    """The storage bits of a f16/bf16 node whose ATen kernel selects or
    copies values in the storage type (exact mode), else None. dts: the
    inputs' dtypes (None for scalars)."""
    op, d = node.op, node.dtype
    if op == "where":
        return "(%s ? %s : %s)" % (fl[0], bits[1], bits[2])
    if op == "masked_fill":
        return "(%s ? (unsigned short)0x%04x : %s)" % (fl[1], _bits_of(node.attrs["value"], d),
                                                      bits[0])
    if op == "copy" and dts[0] == d:
        return bits[0]
    if op in ("relu", "clamp"):
        # clamp_min / clamp kernels: a NaN is returned as it is
        x = fl[0]
        if op == "relu":
            e = "fmaxf(%s, 0.0f)" % x
        else:
            e = x
            if node.attrs.get("lo") is not None:
                e = "fmaxf(%s, %s)" % (e, A.flit(node.attrs["lo"]))
            if node.attrs.get("hi") is not None:
                e = "fminf(%s, %s)" % (e, A.flit(node.attrs["hi"]))
        return "((%s != %s) ? %s : %s(%s))" % (x, x, bits[0], _to_bits(d), e)
    if op == "neg" and A.NEG_HALF_BITFLIP:
        return "(unsigned short)(%s ^ 0x8000u)" % bits[0]
    return None


def _index_plan(shape, layouts):
    """The chain's iteration space as the strided tensors need it: (dims,
    strides) with size-1 dims dropped and adjacent dims merged where every
    tensor of layouts (stride tuples over shape) allows it; strides[t] are
    tensor t's over dims."""
    keep = [d for d, s in enumerate(shape) if s != 1]
    dims = [shape[d] for d in keep]
    sts = [[st[d] for d in keep] for st in layouts]
    k = len(dims) - 1
    while k > 0:
        # merge dim k-1 into dim k when each tensor steps over them as one
        if all(st[k - 1] == st[k] * dims[k] for st in sts):
            dims[k - 1:k + 1] = [dims[k - 1] * dims[k]]
            for st in sts:
                st[k - 1:k + 1] = [st[k]]
        k -= 1
    return dims, sts


def generate(chain):
    """(kernel name, CUDA source) for chain. Raises GenError when the
    chain is malformed."""
    ch = chain
    if not ch.nodes or not ch.outs:
        raise GenError("empty chain")
    if ch.numel <= 0:
        raise GenError("no elements")
    # the layouts read or written at strided offsets
    out_st = ch.out_strides if ch.out_strides is not None else [None] * len(ch.outs)
    if len(out_st) != len(ch.outs):
        raise GenError("%d output layouts for %d outputs" % (len(out_st), len(ch.outs)))
    layouts = []          # stride tuples over ch.shape
    ext_lay, out_lay = {}, {}
    for j, x in enumerate(ch.exts):
        if x.mode == "strided":
            ext_lay[j] = len(layouts)
            layouts.append(x.strides)
    for o, st in enumerate(out_st):
        if st is not None:
            out_lay[o] = len(layouts)
            layouts.append(st)
    if layouts:
        if ch.shape is None:
            raise GenError("strided tensors in a chain without a shape")
        n = 1
        for d in ch.shape:
            if d <= 0:
                raise GenError("shape %r" % (ch.shape,))
            n *= d
        if n != ch.numel:
            raise GenError("shape %r for %d elements" % (ch.shape, ch.numel))
        for st in layouts:
            if st is None or len(st) != len(ch.shape) or any(v < 0 for v in st):
                raise GenError("strides %r over shape %r" % (st, ch.shape))
    dims, sts = _index_plan(ch.shape, layouts) if layouts else ([], [])
    # 32-bit index math when the elements and every strided offset fit
    reach = max([sum((d - 1) * v for d, v in zip(dims, st)) for st in sts] + [ch.numel])
    idx_t = "unsigned int" if reach < (1 << 31) else "unsigned long long"
    sfx = "u" if idx_t == "unsigned int" else "ull"
    body = []
    params = []
    cont = list(contiguous_strides(dims))
    offs = {}

    def offset(t):
        """The offset expression of layout t (an index of layouts)."""
        st = sts[t]
        if st == cont:
            return "i"
        terms = []
        for d, v in enumerate(st):
            if v == 0:
                continue
            c = "i" if len(dims) == 1 else "c%d" % d
            terms.append(c if v == 1 else "%s * %d%s" % (c, v, sfx))
        return " + ".join(terms) or "0"
    if any(st != cont for st in sts) and len(dims) > 1:
        body.append("%s kp_r = i;" % idx_t)
        for d in range(len(dims) - 1, 0, -1):
            body.append("const %s c%d = kp_r %% %d%s; kp_r /= %d%s;"
                        % (idx_t, d, dims[d], sfx, dims[d], sfx))
        body.append("const %s c0 = kp_r;" % idx_t)
    # external loads
    xf, xb = [], []
    for j, x in enumerate(ch.exts):
        if x.dtype not in _CTYPE:
            raise GenError("dtype %s" % x.dtype)
        if x.mode == "const":
            if x.bits is None:
                raise GenError("const without a value")
            if x.dtype == "b8":
                body.append("const bool a%d = %s;" % (j, "true" if x.bits else "false"))
                xb.append(None)
            elif x.dtype == "f32":
                body.append("const float a%d = __int_as_float(0x%08x);" % (j, x.bits))
                xb.append(None)
            else:
                body.append("const unsigned short b%d = (unsigned short)0x%04x;" % (j, x.bits))
                body.append("const float a%d = %s(b%d);" % (j, _from_bits(x.dtype), j))
                xb.append("b%d" % j)
            xf.append("a%d" % j)
            continue
        params.append("const %s *x%d" % (_CTYPE[x.dtype], j))
        if x.mode == "full":
            at = "i"
        elif x.mode == "scalar":
            at = "0"
        elif x.mode == "row":
            if x.n <= 0:
                raise GenError("row of %d" % x.n)
            at = "i %% %d%s" % (x.n, sfx)
        elif x.mode == "bcast":
            if x.n <= 0 or x.inner <= 0:
                raise GenError("bcast of %d x %d" % (x.n, x.inner))
            if x.n * x.inner == ch.numel:
                at = "i / %d%s" % (x.inner, sfx)
            else:
                at = "(i / %d%s) %% %d%s" % (x.inner, sfx, x.n, sfx)
        elif x.mode == "strided":
            at = offset(ext_lay[j])
        else:
            raise GenError("mode %s" % x.mode)
        if x.dtype == "b8":
            body.append("const bool a%d = x%d[%s] != 0;" % (j, j, at))
            xf.append("a%d" % j)
            xb.append(None)
        elif x.dtype == "f32":
            body.append("const float a%d = x%d[%s];" % (j, j, at))
            xf.append("a%d" % j)
            xb.append(None)
        else:
            body.append("const unsigned short b%d = x%d[%s];" % (j, j, at))
            body.append("const float a%d = %s(b%d);" % (j, _from_bits(x.dtype), j))
            xf.append("a%d" % j)
            xb.append("b%d" % j)
    nf, nb = [], []
    for k, n in enumerate(ch.nodes):
        if n.op not in A.OPS:
            raise GenError("op %s" % n.op)
        if n.dtype not in A.FLOAT_DTYPES:
            raise GenError("node dtype %s" % n.dtype)
        fl, bits, dts = [], [], []
        for kind, v in n.ins:
            if kind == "n":
                if not 0 <= v < k:
                    raise GenError("node %d reads node %d" % (k, v))
                fl.append(nf[v])
                bits.append(nb[v])
                dts.append(ch.nodes[v].dtype)
            elif kind == "x":
                if not 0 <= v < len(ch.exts):
                    raise GenError("node %d reads external %d" % (k, v))
                fl.append(xf[v])
                bits.append(xb[v])
                dts.append(ch.exts[v].dtype)
            elif kind == "s":
                fl.append(A.flit(v))
                bits.append(None)
                dts.append(None)
            else:
                raise GenError("input kind %r" % (kind,))
        R = _rounder(n.dtype, ch.exact)
        if n.dtype == "f32" or not ch.exact:
            body.append("const float v%d = %s;" % (k, A.expr(n, fl, R)))
            nf.append("v%d" % k)
            nb.append(None)
            continue
        be = _bits_expr(n, fl, bits, dts)
        if be is None:
            be = "%s(%s)" % (_to_bits(n.dtype), A.expr(n, fl, R))
        body.append("const unsigned short h%d = %s;" % (k, be))
        body.append("const float v%d = %s(h%d);" % (k, _from_bits(n.dtype), k))
        nf.append("v%d" % k)
        nb.append("h%d" % k)
    for o, k in enumerate(ch.outs):
        n = ch.nodes[k]
        params.append("%s *y%d" % (_CTYPE[n.dtype], o))
        at = offset(out_lay[o]) if o in out_lay else "i"
        if n.dtype == "f32":
            body.append("y%d[%s] = %s;" % (o, at, nf[k]))
        elif nb[k] is not None:
            body.append("y%d[%s] = %s;" % (o, at, nb[k]))
        else:
            body.append("y%d[%s] = %s(%s);" % (o, at, _to_bits(n.dtype), nf[k]))
    desc = "; ".join("%d %s%s %s <- %s" % (k, n.op, "" if not n.attrs else repr(sorted(
        (a, v) for a, v in n.attrs.items() if not a.endswith("_raw"))), n.dtype,
        ",".join("%s%s" % (c, v if c != "s" else "(%r)" % v) for c, v in n.ins))
        for k, n in enumerate(ch.nodes))
    loop = ("\tfor (%s i = blockIdx.x * %d%s + threadIdx.x; i < %d%s; i += gridDim.x * %d%s) {\n"
            % (idx_t, BLOCK, sfx, ch.numel, sfx, BLOCK, sfx) +
            "".join("\t\t%s\n" % line for line in body) + "\t}\n")
    core = ("extern \"C\" __global__ void __launch_bounds__(%d) KPNAME(%s)\n{\n%s}\n"
            % (BLOCK, ", ".join(params), loop))
    head = ("// kplan ATen chain (python/kplan/aten_gen.py): %d ops, %d elements, %s\n"
            "// %s\n" % (len(ch.nodes), ch.numel, "exact" if ch.exact else "tolerant",
                         desc.replace("\n", " ")))
    name = "kp_aten_" + hashlib.sha256((_PRELUDE + core).encode()).hexdigest()[:16]
    return name, head + _PRELUDE + core.replace("KPNAME", name)


def launch_dims(numel):
    """(grid, block) for a chain of numel elements."""
    g = (numel + BLOCK - 1) // BLOCK
    return max(1, min(g, MAX_BLOCKS)), BLOCK
