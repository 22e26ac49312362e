"""ATen's pointwise ops as kplan fuses them: one table of facts.

Each entry says how ATen's CUDA kernel computes one op (the expression, the
CUDA math functions, where it rounds to the storage dtype), so that a fused
kernel made of these expressions gives the same bits as the chain of ATen
kernels it replaces (python/README.md, "Fusion"). The facts come from
aten/src/ATen/native/cuda/ (BinaryMulKernel, BinaryDivTrueKernel, the ufunc
add, UnaryOpsKernel, UnarySpecialOpsKernel, ActivationGeluKernel,
ActivationSiluKernel, PowKernel, TensorCompare): read them again when torch
changes its kernels; tests/gpu/torch_fusion_ops.py checks every entry
against eager ATen bit for bit.

Torch-free: `recognize(name, args, kwargs, is_tensor)` reads an op as the
dispatcher shows it ("aten::add.Tensor", its arguments), `expr()` gives the
CUDA C expression over float values. Values are floats in the kernel:
f16/bf16 inputs widened (exact), computed in float ("opmath"), rounded to the
storage dtype as ATen does.
"""

import math
import struct

# storage dtypes a chain may hold (names as aten_gen uses them)
FLOAT_DTYPES = ("f32", "f16", "bf16")
# the ops of int64 nodes (position arithmetic: arange and the adds and
# products over it), computed in two's complement as ATen's int64_t kernels
INT_OPS = ("add", "mul", "iota")


class Refuse(Exception):
    """This op is not fused; .reason is a short stable word for the stats."""

    def __init__(self, reason, detail=""):
        Exception.__init__(self, "%s%s" % (reason, ": " + detail if detail else ""))
        self.reason = reason


def f32(x):
    """x rounded to the nearest float32 (as a Python float)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(float("inf"), x)


def _f16(x):
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0]
    except OverflowError:
        return math.copysign(float("inf"), x)


def _bf16(x):
    """float32 x rounded to bfloat16, nearest even (what __float2bfloat16 does)."""
    b = struct.unpack("<I", struct.pack("<f", f32(x)))[0]
    if (b & 0x7fffffff) > 0x7f800000:
        return x
    b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000
    return struct.unpack("<f", struct.pack("<I", b))[0]


def to_storage(x, dtype):
    """A host scalar converted to dtype (Scalar::to<scalar_t>()), as a float."""
    x = float(x)
    if dtype == "f16":
        return _f16(f32(x))
    if dtype == "bf16":
        return _bf16(f32(x))
    return f32(x)


def flit(x):
    """A float32 value as an exact CUDA C expression."""
    x = f32(x)
    if math.isnan(x):
        return "__int_as_float(0x7fffffff)"
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return "__int_as_float(0x%08x)" % bits


# -- the expressions ----------------------------------------------------------
#
# Each builder gets the node (its .attrs, .dtype), the input expressions
# (float), and R, the function that rounds a float expression to the node's
# storage dtype (identity for f32). It returns the op's value as a float
# expression *before* the final rounding to storage, which the generator
# adds. In exact mode the last arithmetic of an op is written with the _rn
# intrinsics (never contracted into an FMA with the next op: ATen stores
# between ops); inside an op the expression is ATen's own, so that the
# compiler contracts it as it contracts ATen's.

def _add(n, a, R):
    x, y = a
    al = n.attrs.get("alpha", 1.0)
    if al == 1.0:
        return "__fadd_rn(%s, %s)" % (x, y)
    if al == -1.0:
        return "__fsub_rn(%s, %s)" % (x, y)
    return "fmaf(%s, %s, %s)" % (flit(al), y, x)


def _mul(n, a, R):
    return "__fmul_rn(%s, %s)" % (a[0], a[1])


def _div(n, a, R):
    return "__fdiv_rn(%s, %s)" % (a[0], a[1])


def _div_scalar(n, a, R):
    # BinaryDivTrueKernel: a CPU-scalar divisor b is applied as a * (1/b),
    # 1/b computed on the host in opmath (float)
    return "__fmul_rn(%s, %s)" % (a[0], flit(n.attrs["inv"]))


# How sigmoid rounds for f16/bf16. UnarySpecialOpsKernel computes
# scalar_t{1} / (scalar_t{1} + std::exp(-a)) in the storage type: with
# std::exp(at::Half) resolving to std::exp(float), Half + float and Half /
# float are float operations and only the result rounds ("once"); were
# there a device std::exp(Half), exp and the add would round too ("each").
# tests/gpu/torch_fusion_ops.py checks which one eager ATen gives.
SIGMOID_HALF_ROUNDING = "once"

# neg of f16/bf16: a float negation rounded back to the storage type (a NaN
# comes out as the canonical 0x7fff), not a flip of the sign bit: measured
# against eager on an H100 (tests/gpu/torch_fusion_ops.py, "variants").
NEG_HALF_BITFLIP = False


def _sigmoid(n, a, R):
    x = a[0]
    if n.dtype == "f32" or SIGMOID_HALF_ROUNDING == "once":
        return "(1.0f / (1.0f + expf(-%s)))" % x
    return "(1.0f / %s)" % R("(1.0f + %s)" % R("expf(-%s)" % x))


def _relu(n, a, R):
    x = a[0]
    return "((%s != %s) ? %s : fmaxf(%s, 0.0f))" % (x, x, x, x)


def _clamp(n, a, R):
    x = a[0]
    lo, hi = n.attrs.get("lo"), n.attrs.get("hi")
    e = x
    if lo is not None:
        e = "fmaxf(%s, %s)" % (e, flit(lo))
    if hi is not None:
        e = "fminf(%s, %s)" % (e, flit(hi))
    return "((%s != %s) ? %s : %s)" % (x, x, x, e)


_K_BETA = f32(1.41421356237309504880 * 1.12837916709551257390 * 0.5)
_K_KAPPA = f32(0.044715)
_K_ALPHA = f32(0.70710678118654752440)


def _gelu(n, a, R):
    x = a[0]
    if n.attrs.get("approximate") == "tanh":
        # ActivationGeluKernel, approximate == Tanh
        return ("__fmul_rn(0.5f * %s, (1.0f + tanhf(%s * (%s + %s * (%s * %s * %s)))))"
                % (x, flit(_K_BETA), x, flit(_K_KAPPA), x, x, x))
    return "__fmul_rn(%s * 0.5f, (1.0f + erff(%s * %s)))" % (x, x, flit(_K_ALPHA))


def _silu(n, a, R):
    x = a[0]
    return "(%s / (1.0f + expf(-%s)))" % (x, x)


def _pow(n, a, R):
    x = a[0]
    e = n.attrs["exp"]
    if e == 2.0:
        return "__fmul_rn(%s, %s)" % (x, x)
    if e == 3.0:
        # base * base * base in the storage type: rounds after each product
        return "__fmul_rn(%s, %s)" % (R("__fmul_rn(%s, %s)" % (x, x)), x)
    if e == -2.0:
        # 1.0 / (base * base): a double division, converted to float
        return "((float)(1.0 / (double)%s))" % R("__fmul_rn(%s, %s)" % (x, x))
    return "powf(%s, %s)" % (x, flit(n.attrs["exp_s"]))


def _where(n, a, R):
    return "(%s ? %s : %s)" % (a[0], a[1], a[2])


def _masked_fill(n, a, R):
    return "(%s ? %s : %s)" % (a[1], flit(n.attrs["value"]), a[0])


def _fill(n, a, R):
    return flit(n.attrs["value"])


def _iota(n, a, R):
    raise Refuse("dtype", "iota is an int64 op")


def _unary(fmt):
    return lambda n, a, R: fmt % a[0]


# name -> (builder, tensor inputs, out variant for a lone op or None)
OPS = {
    "add": (_add, 2, "add.out"),
    "mul": (_mul, 2, "mul.out"),
    "div": (_div, 2, "div.out"),
    "div_scalar": (_div_scalar, 1, None),
    "neg": (_unary("(-%s)"), 1, "neg.out"),
    "abs": (_unary("fabsf(%s)"), 1, "abs.out"),
    "exp": (_unary("expf(%s)"), 1, "exp.out"),
    "log": (_unary("logf(%s)"), 1, "log.out"),
    "tanh": (_unary("tanhf(%s)"), 1, "tanh.out"),
    "sqrt": (_unary("sqrtf(%s)"), 1, "sqrt.out"),
    "rsqrt": (_unary("rsqrtf(%s)"), 1, "rsqrt.out"),
    "reciprocal": (_unary("(1.0f / %s)"), 1, "reciprocal.out"),
    "sigmoid": (_sigmoid, 1, "sigmoid.out"),
    "relu": (_relu, 1, None),
    "clamp": (_clamp, 1, None),
    "gelu": (_gelu, 1, "gelu.out"),
    "silu": (_silu, 1, "silu.out"),
    "pow": (_pow, 1, None),
    "where": (_where, 3, "where.self_out"),
    "masked_fill": (_masked_fill, 2, None),
    "copy": (_unary("%s"), 1, None),
    "fill": (_fill, 1, None),
    "iota": (_iota, 0, None),
}


class Node(object):
    """One op of a chain: ins are ("n", k) an earlier node, ("x", j) an
    external tensor, ("s", v) a host scalar (float, converted to opmath)."""

    __slots__ = ("op", "ins", "dtype", "attrs")

    def __init__(self, op, ins, dtype, attrs=None):
        self.op = op
        self.ins = list(ins)
        self.dtype = dtype
        self.attrs = dict(attrs or {})

    def __repr__(self):
        return "Node(%s, %r, %s, %r)" % (self.op, self.ins, self.dtype, self.attrs)


def expr(node, args, R):
    """The node's float value (before the final rounding) over the float
    expressions args (one per input, in node.ins order)."""
    b = OPS[node.op][0]
    return b(node, args, R)


def int_lit(v):
    """A host scalar of an int64 node as a CUDA C literal (an exact integer
    below 2^53 in magnitude: the floats recognize() keeps are exact there)."""
    v = float(v)
    if v != int(v) or abs(v) >= 2.0 ** 53:
        raise Refuse("args", "int64 scalar %r" % v)
    return "%dll" % int(v)


def int_expr(node, args, index="i"):
    """The value of an int64 node over the int64 expressions args, wrapping
    (unsigned arithmetic: a signed overflow is undefined in C); iota's is
    start + step * index over the chain's elements (a 1-D chain)."""
    w = "(long long)((unsigned long long)(%s) %s (unsigned long long)(%s))"
    if node.op == "iota":
        return w % (int_lit(node.attrs["start"]), "+",
                    w % (int_lit(node.attrs["step"]), "*", index))
    if node.op == "mul":
        return w % (args[0], "*", args[1])
    if node.op == "add":
        al = node.attrs.get("alpha", 1.0)
        y = args[1] if al == 1.0 else w % (int_lit(al), "*", args[1])
        return w % (args[0], "+", y)
    raise Refuse("dtype", "%s on int64" % node.op)


# -- reading ATen ops ---------------------------------------------------------

def _scalar(v):
    """A Python number usable as an ATen Scalar of a floating op, or None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


_UNARY = {"neg", "abs", "exp", "log", "tanh", "sqrt", "rsqrt", "reciprocal", "sigmoid",
          "relu", "silu"}


def _keeps_layout(mf):
    # preserve or contiguous: the output's strides are what eager gives (aten_fuse
    # reads them from the op on meta tensors); other formats are not taken
    return mf is None or str(mf) in ("torch.preserve_format", "torch.contiguous_format")


def recognize(name, args, kwargs, is_tensor):
    """Read one dispatcher op. name: "aten::add.Tensor" (or "add.Tensor").
    Returns (op, tensor_args, attrs, scalar_ins): tensor_args the tensor
    arguments in input order, scalar_ins {input position: value} for host
    scalars, so that the node's inputs are tensor_args with the scalars
    inserted at their positions. Raises Refuse when the op is not in the
    catalog or takes arguments the catalog does not cover. The output dtype
    is checked by the caller (same floating dtype as the tensor inputs)."""
    if name.startswith("aten::"):
        name = name[6:]
    base, _, overload = name.partition(".")
    overload = overload or "default"
    kwargs = kwargs or {}
    a = list(args)

    def t(i):
        if i >= len(a) or not is_tensor(a[i]):
            raise Refuse("args", "%s: argument %d is not a tensor" % (name, i))
        return a[i]

    def rest_ok(n):
        # no arguments beyond the first n, no keyword arguments but alpha
        if len(a) > n:
            raise Refuse("args", "%s: %d arguments" % (name, len(a)))

    if base in ("add", "sub", "rsub") and overload in ("Tensor", "Scalar"):
        alpha = kwargs.get("alpha", a[2] if len(a) > 2 else 1)
        al = _scalar(alpha)
        if al is None or set(kwargs) - {"alpha"}:
            raise Refuse("args", "%s: alpha %r" % (name, alpha))
        rest_ok(3)
        if base != "add":
            al = -al
        x = t(0)
        y = a[1] if len(a) > 1 else None
        if base == "rsub":
            # rsub(self, other, alpha) = other - alpha * self
            if is_tensor(y):
                return ("add", [y, x], {"alpha": al}, {})
            s = _scalar(y)
            if s is None:
                raise Refuse("args", "%s: other %r" % (name, y))
            return ("add", [x], {"alpha": al}, {0: s})
        if is_tensor(y):
            return ("add", [x, y], {"alpha": al}, {})
        s = _scalar(y)
        if s is None:
            raise Refuse("args", "%s: other %r" % (name, y))
        return ("add", [x], {"alpha": al}, {1: s})
    if base == "mul" and overload in ("Tensor", "Scalar"):
        rest_ok(2)
        if kwargs:
            raise Refuse("args", name)
        x, y = t(0), a[1] if len(a) > 1 else None
        if is_tensor(y):
            return ("mul", [x, y], {}, {})
        s = _scalar(y)
        if s is None:
            raise Refuse("args", "%s: other %r" % (name, y))
        return ("mul", [x], {}, {1: s})
    if base == "div" and overload in ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode"):
        mode = kwargs.get("rounding_mode", a[2] if len(a) > 2 else None)
        if mode is not None:
            raise Refuse("div-mode", "%s: rounding_mode %r" % (name, mode))
        x, y = t(0), a[1] if len(a) > 1 else None
        if is_tensor(y):
            return ("div", [x, y], {}, {})
        s = _scalar(y)
        if s is None:
            raise Refuse("args", "%s: other %r" % (name, y))
        # opmath_t(1.0) / scalar_value<opmath_t>: a float division on the host
        return ("div_scalar", [x], {"inv": f32(1.0 / f32(s)) if f32(s) != 0.0 else
                                    math.copysign(float("inf"), f32(s))}, {})
    if base in _UNARY and overload == "default":
        rest_ok(1)
        if kwargs:
            raise Refuse("args", name)
        return (base, [t(0)], {}, {})
    if base == "gelu" and overload == "default":
        approx = kwargs.get("approximate", a[1] if len(a) > 1 else "none")
        if approx not in ("none", "tanh"):
            raise Refuse("args", "%s: approximate %r" % (name, approx))
        return ("gelu", [t(0)], {"approximate": approx}, {})
    if base == "pow" and overload == "Tensor_Scalar":
        rest_ok(2)
        e = _scalar(a[1] if len(a) > 1 else None)
        if e is None:
            raise Refuse("args", "%s: exponent %r" % (name, a[1] if len(a) > 1 else None))
        x = t(0)
        # pow_out: 0 -> fill 1, 1 -> copy; PowKernel: .5, -.5, -1 -> sqrt,
        # rsqrt, reciprocal kernels; 2, 3, -2 special forms; else pow_
        if e == 0.0:
            return ("fill", [x], {"value": 1.0}, {})
        if e == 1.0:
            return ("copy", [x], {}, {})
        if e == 0.5:
            return ("sqrt", [x], {}, {})
        if e == -0.5:
            return ("rsqrt", [x], {}, {})
        if e == -1.0:
            return ("reciprocal", [x], {}, {})
        return ("pow", [x], {"exp": e}, {})
    if base in ("clamp", "clamp_min", "clamp_max") and overload == "default":
        if base == "clamp":
            lo = kwargs.get("min", a[1] if len(a) > 1 else None)
            hi = kwargs.get("max", a[2] if len(a) > 2 else None)
        elif base == "clamp_min":
            lo, hi = kwargs.get("min", a[1] if len(a) > 1 else None), None
        else:
            lo, hi = None, kwargs.get("max", a[1] if len(a) > 1 else None)
        attrs = {}
        for k, v in (("lo", lo), ("hi", hi)):
            if v is None:
                continue
            s = _scalar(v)
            if s is None or math.isnan(s):
                raise Refuse("args", "%s: %s %r" % (name, k, v))
            attrs[k + "_raw"] = s
        if not attrs:
            raise Refuse("args", "%s: no bounds" % name)
        return ("clamp", [t(0)], attrs, {})
    if base == "where" and overload == "self":
        rest_ok(3)
        return ("where", [t(0), t(1), t(2)], {}, {})
    if base == "masked_fill" and overload == "Scalar":
        rest_ok(3)
        s = _scalar(a[2] if len(a) > 2 else None)
        if s is None:
            raise Refuse("args", "%s: value" % name)
        return ("masked_fill", [t(0), t(1)], {"value_raw": s}, {})
    if base == "_to_copy" and overload == "default":
        rest_ok(1)
        extra = set(kwargs) - {"dtype", "layout", "device", "memory_format", "non_blocking",
                               "pin_memory"}
        if extra or not _keeps_layout(kwargs.get("memory_format")) or \
                kwargs.get("pin_memory") or \
                str(kwargs.get("layout", None)) not in ("None", "torch.strided"):
            raise Refuse("args", "%s: %s" % (name, sorted(kwargs)))
        # a device, when given, must be the input's (the caller checks)
        return ("copy", [t(0)], {"to": kwargs.get("dtype"), "device": kwargs.get("device")}, {})
    if base == "clone" and overload == "default":
        rest_ok(1)
        if set(kwargs) - {"memory_format"} or not _keeps_layout(kwargs.get("memory_format")):
            raise Refuse("args", "%s: %s" % (name, sorted(kwargs)))
        return ("copy", [t(0)], {}, {})
    raise Refuse("not-pointwise", name)


def finish_attrs(op, attrs, dtype):
    """Attributes that depend on the storage dtype (bounds and fill values
    converted to it, pow's exponent as ATen converts it), filled in once the
    chain's dtype is known."""
    attrs = dict(attrs)
    if op == "clamp":
        if "lo_raw" in attrs:
            attrs["lo"] = to_storage(attrs["lo_raw"], dtype)
        if "hi_raw" in attrs:
            attrs["hi"] = to_storage(attrs["hi_raw"], dtype)
    elif op == "masked_fill":
        attrs["value"] = to_storage(attrs["value_raw"], dtype)
    elif op == "pow":
        # exp_scalar.to<scalar_t>(): the exponent in the storage type
        attrs["exp_s"] = to_storage(attrs["exp"], dtype)
    return attrs
