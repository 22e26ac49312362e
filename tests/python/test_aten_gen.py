"""Tests of the ATen pointwise catalog and chain generator (kplan.aten_ops,
kplan.aten_gen): CPU only, no torch. The generated sources also go through
nvcc (-arch=sm_90, compile only) when the machine has it; their numerics are
checked against eager ATen on a GPU by tests/gpu/torch_fusion_ops.py.
"""
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

from kplan import aten_gen as G  # noqa: E402
from kplan import aten_ops as A  # noqa: E402

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def nvcc_ok(test, path, src):
    """Write src to path and assert nvcc compiles it (sm_90, to a cubin)."""
    with open(path, "w") as f:
        f.write(src)
    r = subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-o", path + ".cubin", path],
                       capture_output=True, text=True)
    test.assertEqual(r.returncode, 0, r.stderr[-2000:])


class T(object):
    """A stand-in tensor: recognize() only asks whether an argument is one."""

    def __init__(self, name):
        self.name = name


def is_t(x):
    return isinstance(x, T)


def rec(name, *args, **kwargs):
    return A.recognize(name, args, kwargs, is_t)


def gelu_new_chain(dtype="f16", exact=True, outs=(7,), n=3072):
    """HF NewGELUActivation: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3)))."""
    N = A.Node
    nodes = [N("pow", [("x", 0)], dtype, A.finish_attrs("pow", {"exp": 3.0}, dtype)),
             N("mul", [("n", 0), ("s", 0.044715)], dtype),
             N("add", [("x", 0), ("n", 1)], dtype),
             N("mul", [("n", 2), ("s", math.sqrt(2.0 / math.pi))], dtype),
             N("tanh", [("n", 3)], dtype),
             N("add", [("n", 4), ("s", 1.0)], dtype),
             N("mul", [("x", 0), ("s", 0.5)], dtype),
             N("mul", [("n", 6), ("n", 5)], dtype)]
    return G.Chain(nodes, [G.Ext(dtype)], n, list(outs), exact=exact)


class TestRecognize(unittest.TestCase):
    def test_binary_with_scalars(self):
        x, y = T("x"), T("y")
        self.assertEqual(rec("aten::add.Tensor", x, y), ("add", [x, y], {"alpha": 1.0}, {}))
        self.assertEqual(rec("aten::add.Tensor", x, 1.0), ("add", [x], {"alpha": 1.0}, {1: 1.0}))
        self.assertEqual(rec("aten::sub.Tensor", x, y, alpha=2), ("add", [x, y], {"alpha": -2.0},
                                                                  {}))
        # rsub(self, other) = other - self: the scalar comes first
        self.assertEqual(rec("aten::rsub.Scalar", x, 1.0), ("add", [x], {"alpha": -1.0},
                                                             {0: 1.0}))
        self.assertEqual(rec("aten::mul.Tensor", x, 0.5), ("mul", [x], {}, {1: 0.5}))

    def test_div_by_scalar_is_a_product(self):
        op, ts, attrs, sc = rec("aten::div.Tensor", T("x"), 3.0)
        self.assertEqual(op, "div_scalar")
        self.assertEqual(attrs["inv"], A.f32(1.0 / A.f32(3.0)))
        self.assertEqual(rec("aten::div.Tensor", T("x"), T("y"))[0], "div")
        with self.assertRaises(A.Refuse) as cm:
            rec("aten::div.Tensor_mode", T("x"), T("y"), rounding_mode="floor")
        self.assertEqual(cm.exception.reason, "div-mode")

    def test_pow_special_cases(self):
        x = T("x")
        want = {0.0: "fill", 1.0: "copy", 0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal",
                2.0: "pow", 3: "pow", -2.0: "pow", 1.7: "pow"}
        for e, op in want.items():
            self.assertEqual(rec("aten::pow.Tensor_Scalar", x, e)[0], op, e)
        at = A.finish_attrs("pow", {"exp": 1.7}, "f16")
        self.assertEqual(at["exp_s"], 1.7001953125)   # the exponent as a half

    def test_activations_and_selects(self):
        x, m = T("x"), T("m")
        self.assertEqual(rec("aten::gelu.default", x, approximate="tanh")[2],
                         {"approximate": "tanh"})
        self.assertEqual(rec("aten::gelu.default", x)[2], {"approximate": "none"})
        self.assertEqual(rec("aten::silu.default", x)[0], "silu")
        self.assertEqual(rec("aten::clamp.default", x, None, 6.0)[2], {"hi_raw": 6.0})
        self.assertEqual(rec("aten::masked_fill.Scalar", x, m, -1e4)[:2], ("masked_fill", [x, m]))
        self.assertEqual(rec("aten::where.self", m, x, x)[0], "where")
        self.assertEqual(rec("aten::_to_copy.default", x, dtype="torch.float32")[2],
                         {"to": "torch.float32", "device": None})
        with self.assertRaises(A.Refuse):
            rec("aten::_to_copy.default", x, pin_memory=True)
        self.assertEqual(rec("aten::clone.default", x, memory_format="torch.contiguous_format")[0],
                         "copy")
        with self.assertRaises(A.Refuse):
            rec("aten::clone.default", x, memory_format="torch.channels_last")

    def test_refusals(self):
        for name, args in (("aten::mm.default", (T("a"), T("b"))),
                           ("aten::add.Tensor", (T("x"), True)),
                           ("aten::clamp.default", (T("x"), float("nan"))),
                           ("aten::clamp.default", (T("x"),))):
            with self.assertRaises(A.Refuse):
                rec(name, *args)

    def test_scalar_conversions(self):
        self.assertEqual(A.to_storage(0.1, "f32"), A.f32(0.1))
        self.assertEqual(A.to_storage(-1e4, "f16"), -10000.0)
        self.assertEqual(A.to_storage(70000.0, "f16"), float("inf"))
        self.assertEqual(A.to_storage(1.0 + 2 ** -9, "bf16"), 1.0)        # ties to even
        self.assertEqual(A.to_storage(1.0 + 3 * 2 ** -9, "bf16"), 1.0 + 2 ** -7)
        self.assertEqual(A.flit(1.0), "__int_as_float(0x3f800000)")
        self.assertEqual(A.flit(-0.0), "__int_as_float(0x80000000)")


class TestGenerate(unittest.TestCase):
    def test_gelu_chain_exact(self):
        name, src = G.generate(gelu_new_chain())
        self.assertTrue(name.startswith("kp_aten_"))
        self.assertIn("extern \"C\" __global__ void __launch_bounds__(256) %s(" % name, src)
        # every intermediate rounds to half; only the result is stored
        self.assertEqual(src.count("kp_f2h("), 8 + 1 + 1)   # 8 ops, the inner product, the prelude
        self.assertIn("y0[i] = h7;", src)
        self.assertNotIn("y1", src)
        # the cube rounds after each product (at::Half's operator*)
        self.assertIn("__fmul_rn(kp_h2f(kp_f2h(__fmul_rn(a0, a0))), a0)", src)

    def test_tolerant_keeps_floats(self):
        _n, src = G.generate(gelu_new_chain(exact=False, outs=(3, 7)))
        body = src.split("__global__", 1)[1]
        self.assertEqual(body.count("kp_f2h("), 2)             # the two stores only
        self.assertIn("y1[i] = kp_f2h(v7);", body)

    def test_same_chain_same_name(self):
        a, b = G.generate(gelu_new_chain()), G.generate(gelu_new_chain())
        self.assertEqual(a, b)
        self.assertNotEqual(a[0], G.generate(gelu_new_chain(n=768))[0])

    def test_broadcast_modes(self):
        N = A.Node
        ch = G.Chain([N("add", [("x", 0), ("x", 1)], "f32"),
                      N("mul", [("n", 0), ("x", 2)], "f32"),
                      N("masked_fill", [("n", 1), ("x", 3)], "f32",
                        A.finish_attrs("masked_fill", {"value_raw": -1e9}, "f32"))],
                     [G.Ext("f32"), G.Ext("f32", "row", 768), G.Ext("f32", "scalar", 1),
                      G.Ext("b8", "row", 768)], 4 * 768, [2])
        _n, src = G.generate(ch)
        self.assertIn("x1[i % 768u]", src)
        self.assertIn("x2[0]", src)
        self.assertIn("const bool a3 = x3[i % 768u] != 0;", src)
        ch.exts[2] = G.Ext("f32", "bcast", 4, 768)
        self.assertIn("x2[i / 768u]", G.generate(ch)[1])
        ch.exts[2] = G.Ext("f32", "bcast", 2, 768)
        self.assertIn("x2[(i / 768u) % 2u]", G.generate(ch)[1])

    def test_bad_chains(self):
        N = A.Node
        for ch in (G.Chain([], [], 4, [0]),
                   G.Chain([N("exp", [("n", 0)], "f32")], [], 4, [0]),
                   G.Chain([N("exp", [("x", 3)], "f32")], [G.Ext("f32")], 4, [0]),
                   G.Chain([N("exp", [("x", 0)], "f64")], [G.Ext("f32")], 4, [0]),
                   G.Chain([N("exp", [("x", 0)], "f32")], [G.Ext("f32", "row", 0)], 4, [0])):
            with self.assertRaises(G.GenError):
                G.generate(ch)

    def test_launch_dims(self):
        self.assertEqual(G.launch_dims(1), (1, 256))
        self.assertEqual(G.launch_dims(3072), (12, 256))
        self.assertEqual(G.launch_dims(1 << 30), (G.MAX_BLOCKS, 256))

    def test_strided_reads_and_writes(self):
        N = A.Node
        shape = (2, 16, 8, 32)
        nodes = [N("mul", [("x", 0), ("x", 1)], "f16"), N("neg", [("n", 0)], "f16")]
        exts = [G.Ext("f16", "strided", strides=(8192, 32, 1024, 1)),   # a transposed view
                G.Ext("f16", "strided", strides=(0, 0, 64, 1))]          # a slice, expanded
        ch = G.Chain(nodes, exts, 8192, [1], shape=shape,
                     out_strides=[(4096, 32, 512, 1)])
        src = G.generate(ch)[1]
        self.assertIn("const unsigned int c3 = kp_r % 32u; kp_r /= 32u;", src)
        self.assertIn("x0[c0 * 8192u + c1 * 32u + c2 * 1024u + c3]", src)
        self.assertIn("x1[c2 * 64u + c3]", src)
        self.assertIn("y0[c0 * 4096u + c1 * 32u + c2 * 512u + c3] = h1;", src)
        # merged dims: [2, 16, 8, 32] of a [2, 16, 8, 64] slice is rows of 32 with a gap
        ch = G.Chain(nodes[:1], [G.Ext("f32", "strided", strides=(8192, 512, 64, 1)),
                                 G.Ext("f32")], 8192, [0], shape=shape)
        src = G.generate(ch)[1]
        self.assertIn("x0[c0 * 64u + c1]", src)
        self.assertIn("x1[i]", src)
        self.assertIn("y0[i]", src)
        self.assertNotIn("c2", src)
        # a row-major output given as strides, size-1 dims with any stride: [i]
        ch = G.Chain(nodes[:1], [G.Ext("f32"), G.Ext("f32")], 256, [0], shape=(1, 16, 1, 16),
                     out_strides=[(7, 16, 3, 1)])
        self.assertIn("y0[i] =", G.generate(ch)[1])
        self.assertNotIn("kp_r", G.generate(ch)[1])

    def test_strided_offsets_evaluated(self):
        # the generated index code run in Python for every i: each tensor
        # read and written at sum(c[d] * strides[d]) of i unravelled row-major
        import itertools
        import random
        import re
        rng = random.Random(7)
        N = A.Node
        unravelled = 0
        for _ in range(60):
            rank = rng.randint(1, 4)
            shape = tuple(rng.choice((1, 2, 3, 5)) for _ in range(rank))
            numel = 1
            for d in shape:
                numel *= d

            def layout():
                kind = rng.choice(("perm", "slice", "expand", "contig"))
                if kind == "expand":
                    return tuple(rng.choice((0, 1, 7)) for _ in shape)
                perm = list(range(rank))
                if kind == "perm":
                    rng.shuffle(perm)
                pad = [rng.choice((0, 1)) if kind == "slice" else 0 for _ in shape]
                st, acc = [0] * rank, 1
                for d in reversed(perm):
                    st[d] = acc
                    acc *= shape[d] + pad[d]
                return tuple(st)
            ins = [layout(), layout()]
            outs = [layout() if rng.random() < 0.5 else None]
            nodes = [N("add", [("x", 0), ("x", 1)], "f32", {"alpha": 1.0})]
            exts = [G.Ext("f32", "strided", strides=st) for st in ins]
            src = G.generate(G.Chain(nodes, exts, numel, [0], shape=shape,
                                     out_strides=outs))[1]
            unravelled += "kp_r" in src
            body = src[src.index("{\n", src.index("__global__")) + 2:]
            lines = [ln.strip() for ln in body.split("\n")]
            code = []
            for ln in lines:
                if ln.startswith("unsigned int kp_r") or ln.startswith("const unsigned int c"):
                    ln = re.sub(r"(const )?unsigned int ", "", ln)
                    code += [re.sub(r"(\d)u\b", r"\1", p.strip()).replace("/=", "//=")
                             for p in ln.split(";") if p.strip()]
            idx = {}
            for ln in lines:
                m = re.match(r".*\b([xy]\d+)\[([^\]]*)\]", ln)
                if m:
                    idx[m.group(1)] = re.sub(r"(\d)u\b", r"\1", m.group(2))
            want = {"x0": ins[0], "x1": ins[1],
                    "y0": outs[0] or G.contiguous_strides(shape)}
            for i, c in enumerate(itertools.product(*[range(d) for d in shape])):
                env = {"i": i}
                for stmt in code:
                    exec(stmt, {}, env)
                for name, st in want.items():
                    got = eval(idx[name], {}, env)
                    self.assertEqual(got, sum(a * b for a, b in zip(c, st)),
                                     (shape, ins, outs, name, i, src))
        self.assertGreater(unravelled, 20)

    def test_strided_offsets_beyond_31_bits_are_64_bit(self):
        N = A.Node
        nodes = [N("neg", [("x", 0)], "f32")]
        # a column of a [1 << 20, 4096] tensor: offsets up to 2^32
        ch = G.Chain(nodes, [G.Ext("f32", "strided", strides=(4096, 1))], 1 << 21, [0],
                     shape=(1 << 20, 2))
        src = G.generate(ch)[1]
        self.assertIn("unsigned long long i", src)
        self.assertIn("x0[c0 * 4096ull + c1]", src)
        small = G.Chain(nodes, [G.Ext("f32", "strided", strides=(4096, 1))], 2048, [0],
                        shape=(1024, 2))
        self.assertIn("unsigned int i", G.generate(small)[1])

    def test_bad_strided_chains(self):
        N = A.Node
        nodes = [N("neg", [("x", 0)], "f32")]
        for exts, shape, ost in (
                ([G.Ext("f32", "strided", strides=(1, 4))], None, None),      # no shape
                ([G.Ext("f32", "strided", strides=(1,))], (4, 8), None),      # rank
                ([G.Ext("f32")], (4, 8), [(1, -4)]),                          # negative
                ([G.Ext("f32")], (4, 4), None and [(1, 4)])):                 # numel
            if shape == (4, 4):
                exts = [G.Ext("f32", "strided", strides=(1, 4))]
            with self.assertRaises(G.GenError):
                G.generate(G.Chain(nodes, exts, 32, [0], shape=shape, out_strides=ost))

    def test_const_bits_as_fill_writes_them(self):
        c = G.const_bits
        self.assertEqual([c(v, "f16") for v in (float("-inf"), 0.0, -0.0, -65504.0, 1e6,
                                                65519.0, 65520.0, float("nan"), 0.1)],
                         [0xfc00, 0, 0x8000, 0xfbff, 0x7c00, 0x7bff, 0x7c00, 0x7e00, 0x2e66])
        # bf16: the float first, then round to nearest even; NaN as c10 writes it
        self.assertEqual([c(v, "bf16") for v in (float("-inf"), 1.0, 0.1, 1.00390625,
                                                 1.01171875, float("nan"))],
                         [0xff80, 0x3f80, 0x3dcd, 0x3f80, 0x3f82, 0x7fc0])
        # double -> float first (0.1 is not the double 0.1 any more)
        self.assertEqual(c(0.1, "f32"), 0x3dcccccd)
        self.assertEqual((c(True, "b8"), c(0, "b8")), (1, 0))
        # ATen refuses a finite value beyond the range before rounding it
        f = G.const_fits
        self.assertEqual([f(v, "f16") for v in (65504.0, 65519.0, -1e6, float("inf"),
                                                float("nan"))],
                         [True, False, False, True, True])
        self.assertEqual([f(v, "bf16") for v in (1e38, 3.4e38)], [True, False])
        self.assertEqual([f(v, "f32") for v in (3.4e38, 1e39)], [True, False])

    def test_const_inputs_are_literals(self):
        N = A.Node
        nodes = [N("where", [("x", 0), ("x", 1), ("x", 2)], "f16")]
        exts = [G.Ext("b8"), G.Ext("f16", "const", bits=0), G.Ext("f16", "const", bits=0xfc00)]
        src = G.generate(G.Chain(nodes, exts, 8, [0]))[1]
        self.assertIn("const unsigned short b2 = (unsigned short)0xfc00;", src)
        self.assertNotIn("*x1", src)                  # no pointer for a value
        self.assertNotIn("*x2", src)
        self.assertIn("const unsigned char *x0", src)
        with self.assertRaises(G.GenError):
            G.generate(G.Chain(nodes, [G.Ext("b8"), G.Ext("f16", "const"), exts[2]], 8, [0]))

    def test_pad_index_math(self):
        # the generated lines, run in Python: every padded element maps to
        # the chain's element or to the pad value, as constant_pad_nd does
        import re
        N = A.Node
        shape, lo, hi = (2, 3, 4), (0, 1, 2), (1, 0, 3)
        ch = G.Chain([N("tanh", [("x", 0)], "f32")], [G.Ext("f32")], 24, [], shape=shape,
                     pad=G.Pad(0, lo, hi, G.const_bits(-1.0, "f32")))
        src = G.generate(ch)[1]
        steps = re.findall(r"const long long c = kp_q % (\d+)ll - (\d+)ll; kp_q /= \d+ll; "
                           r"kp_in &= \(c >= 0\) & \(c < (\d+)ll\); i \+= "
                           r"\(unsigned long long\)c \* (\d+)ull;", src)
        self.assertEqual(len(steps), 3)
        P = tuple(s + a + b for s, a, b in zip(shape, lo, hi))
        total = P[0] * P[1] * P[2]
        self.assertIn("p < %dull" % total, src)
        import itertools
        for p, (a, b, c) in enumerate(itertools.product(*[range(d) for d in P])):
            q, inside, i = p, 1, 0
            for dim, low, size, stride in steps:
                cc = q % int(dim) - int(low)
                q //= int(dim)
                inside &= 0 <= cc < int(size)
                i += cc * int(stride)
            want = all(0 <= v - l < s for v, l, s in zip((a, b, c), lo, shape))
            self.assertEqual(bool(inside), want)
            if want:
                self.assertEqual(i, ((a - lo[0]) * 3 + (b - lo[1])) * 4 + (c - lo[2]))
        self.assertIn("yp[p] = __int_as_float(0xbf800000);", src)
        with self.assertRaises(G.GenError):
            G.generate(G.Chain(ch.nodes, ch.exts, 24, [], shape=shape,
                               pad=G.Pad(0, (0, -1, 0), hi, 0)))

    def test_cat_index_math(self):
        # the generated lines, run in Python: every element of the cat maps
        # to the chain's element or to its element of the part that holds it
        import itertools
        import re
        N = A.Node
        shape = (2, 3, 2)                          # the chain's value, the middle part
        parts = [(0, 2, (40, 10, 1)), (5, 4, (1, 2, 8))]     # strided views
        ch = G.Chain([N("neg", [("x", 0)], "f16")], [G.Ext("f16")], 12, [], shape=shape,
                     pad=G.Pad(0, (0, 2, 0), (0, 4, 0), 0, dim=1, parts=parts))
        src = G.generate(ch)[1]
        self.assertIn("const unsigned short *xq0, const unsigned short *xq1", src)
        P = (2, 9, 2)
        self.assertIn("p < 36ull", src)
        head = re.search(r"if \(o1 >= 2ll && o1 < 5ll\) \{\n\t*const unsigned long long i = "
                         r"([^;]*);", src)
        reads = re.findall(r"else if \(o1 >= (\d+)ll && o1 < (\d+)ll\) \{\n\t*yp\[p\] = "
                           r"xq(\d)\[([^;]*)\];", src)
        self.assertIsNotNone(head)
        self.assertEqual([(a, b, m) for a, b, m, _ in reads], [("0", "2", "0"), ("5", "9", "1")])

        def ev(expr, o):
            e = expr.replace("(unsigned long long)", "").replace("ull", "").replace("ll", "")
            return eval(e, {}, {"o0": o[0], "o1": o[1], "o2": o[2]})
        for o in itertools.product(*[range(d) for d in P]):
            if 2 <= o[1] < 5:
                self.assertEqual(ev(head.group(1), o), (o[0] * 3 + o[1] - 2) * 2 + o[2])
                continue
            (a, n, st), expr = [(pt, r[3]) for pt, r in zip(parts, reads)
                                if pt[0] <= o[1] < pt[0] + pt[1]][0]
            self.assertEqual(ev(expr, o), o[0] * st[0] + (o[1] - a) * st[1] + o[2] * st[2])
        with self.assertRaises(G.GenError):              # parts that leave a gap
            G.generate(G.Chain(ch.nodes, ch.exts, 12, [], shape=shape,
                               pad=G.Pad(0, (0, 2, 0), (0, 4, 0), 0, dim=1,
                                         parts=parts[:1])))

    def test_index_copy_index_math(self):
        # the generated lines, run in Python: element c of the chain lands in
        # dst at c with c[dim] replaced by index[c[dim]], nowhere when the
        # index is outside dst's size along dim
        import itertools
        import re
        N = A.Node
        shape, dim = (2, 3, 2, 4), 2
        dst_st = (100, 30, 5, 1)                     # dst (2, 3, 6, 4), padded rows
        ch = G.Chain([N("neg", [("x", 0)], "f16")], [G.Ext("f16")], 48, [], shape=shape,
                     scatter=G.Scatter(0, dim, dst_st, 6))
        src = G.generate(ch)[1]
        self.assertIn("const long long *xs_index, unsigned short *ys", src)
        self.assertIn("if (kp_j >= 0 && kp_j < 6ll)", src)
        steps = re.findall(r"kp_c = kp_s % (\d+)ull; kp_s /= \d+ull;\n\t*"
                           r"(?:kp_o \+= kp_c \* (\d+)ull;|(const unsigned long long kp_d))", src)
        self.assertEqual([int(n) for n, _, _ in steps], [4, 2, 3, 2])
        store = re.search(r"ys\[kp_o \+ \(unsigned long long\)kp_j \* (\d+)ull\] = h0;", src)
        self.assertIsNotNone(store)
        index = [4, -1]                               # the second: outside, not written
        for i, c in enumerate(itertools.product(*[range(d) for d in shape])):
            q, o, d_at = i, 0, None
            for n, st, isd in steps:
                cc = q % int(n)
                q //= int(n)
                if isd:
                    d_at = cc
                else:
                    o += cc * int(st)
            self.assertEqual(d_at, c[dim])
            self.assertEqual(o, sum(c[d] * dst_st[d] for d in range(4) if d != dim))
            j = index[d_at]
            if 0 <= j < 6:
                self.assertEqual(o + j * int(store.group(1)),
                                 sum((j if d == dim else c[d]) * dst_st[d] for d in range(4)))
        # a size-1 dim indexed (decode's one token): the index's first entry
        ch = G.Chain(ch.nodes, ch.exts, 256, [], shape=(1, 4, 1, 64),
                     scatter=G.Scatter(0, 2, (65536, 16384, 64, 1), 256))
        src = G.generate(ch)[1]
        self.assertIn("const unsigned long long kp_d = 0;", src)
        self.assertIn("ys[kp_o + (unsigned long long)kp_j * 64ull] = h0;", src)
        for bad in (G.Scatter(0, 4, (1, 1, 1, 1), 6), G.Scatter(0, 1, (1, 1, 1), 6),
                    G.Scatter(1, 1, (1, 1, 1, 1), 6), G.Scatter(0, 1, (1, 1, 1, 1), 0)):
            with self.assertRaises(G.GenError):
                G.generate(G.Chain(ch.nodes, ch.exts, 256, [], shape=(1, 4, 1, 64),
                                   scatter=bad))

    def test_int64_nodes(self):
        # arange(1) + counter, then * 3 - 1: unsigned arithmetic, stored as long long
        N = A.Node
        nodes = [N("iota", [], "i64", {"start": 2.0, "step": 1.0}),
                 N("add", [("n", 0), ("x", 0)], "i64", {"alpha": 1.0}),
                 N("mul", [("n", 1), ("s", 3.0)], "i64"),
                 N("add", [("n", 2), ("s", 1.0)], "i64", {"alpha": -1.0})]
        ch = G.Chain(nodes, [G.Ext("i64", "scalar", 1)], 4, [3], shape=(4,))
        src = G.generate(ch)[1]
        self.assertIn("const long long *x0, long long *y0", src)
        self.assertIn("const long long a0 = x0[0];", src)
        self.assertIn("(unsigned long long)(v1) * (unsigned long long)(3ll)", src)
        self.assertIn("(unsigned long long)(-1ll) * (unsigned long long)(1ll)", src)
        self.assertIn("y0[i] = v3;", src)
        # no index to count with (a row kernel), a float scalar, a float op
        # over an int64 node, an op int64 does not have: refused
        with self.assertRaises(G.GenError):
            G._node_lines(ch, ["a0"], [None], [])
        bad = [[N("mul", [("x", 0), ("s", 0.5)], "i64")],
               [N("iota", [], "i64", {"start": 0.0, "step": 1.0}),
                N("tanh", [("n", 0)], "f32")],
               [N("tanh", [("x", 0)], "i64")]]
        for nodes in bad:
            with self.assertRaises(G.GenError):
                G.generate(G.Chain(nodes, [G.Ext("i64", "scalar", 1)], 4, [len(nodes) - 1],
                                   shape=(4,)))
        with tempfile.TemporaryDirectory() as tmp:
            if NVCC:
                nvcc_ok(self, os.path.join(tmp, "i64.cu"), src)

    @unittest.skipUnless(NVCC, "no nvcc")
    def test_index_copy_sources_compile(self):
        N = A.Node
        with tempfile.TemporaryDirectory() as tmp:
            for d in ("f32", "f16", "bf16"):
                # RoPE of k, then the cache update; k*cos written too
                nodes = [N("mul", [("x", 0), ("x", 1)], d), N("add", [("n", 0), ("x", 2)], d)]
                exts = [G.Ext(d, "strided", strides=(256, 64, 256, 1)), G.Ext(d, "row", 64),
                        G.Ext(d)]
                ch = G.Chain(nodes, exts, 256, [0], shape=(1, 4, 1, 64),
                             scatter=G.Scatter(1, 2, (65536, 16384, 64, 1), 256))
                nvcc_ok(self, os.path.join(tmp, "i%s.cu" % d), G.generate(ch)[1])

    @unittest.skipUnless(NVCC, "no nvcc")
    def test_pad_sources_compile(self):
        N = A.Node
        with tempfile.TemporaryDirectory() as tmp:
            for d in ("f32", "f16", "bf16"):
                nodes = [N("where", [("x", 0), ("x", 1), ("x", 2)], d)]
                exts = [G.Ext("b8"), G.Ext(d, "const", bits=0),
                        G.Ext(d, "strided", strides=(0, 0, 1, 0))]
                ch = G.Chain(nodes, exts, 16, [0], shape=(1, 1, 16, 1),
                             pad=G.Pad(0, (0, 0, 0, 0), (0, 0, 0, 7), 0))
                nvcc_ok(self, os.path.join(tmp, "p%s.cu" % d), G.generate(ch)[1])
                # rotate_half's cat(-x2, x1), x2 a strided half of q
                nodes = [N("neg", [("x", 0)], d)]
                exts = [G.Ext(d, "strided", strides=(128, 64, 64, 1))]
                ch = G.Chain(nodes, exts, 64, [], shape=(1, 2, 1, 32),
                             pad=G.Pad(0, (0, 0, 0, 0), (0, 0, 0, 32), 0, dim=3,
                                       parts=[(32, 32, (128, 64, 64, 1))]))
                nvcc_ok(self, os.path.join(tmp, "c%s.cu" % d), G.generate(ch)[1])

    @unittest.skipUnless(NVCC, "no nvcc")
    def test_strided_sources_compile(self):
        N = A.Node
        with tempfile.TemporaryDirectory() as tmp:
            for d in ("f32", "f16", "bf16"):
                for wide in (False, True):
                    shape = (3, 16, 5, 64) if not wide else (1 << 14, 16, 2, 64)
                    numel = shape[0] * shape[1] * shape[2] * shape[3]
                    nodes = [N("mul", [("x", 0), ("x", 1)], d),
                             N("add", [("n", 0), ("x", 2)], d, {"alpha": 1.0}),
                             N("where", [("x", 3), ("n", 1), ("x", 0)], d),
                             N("copy", [("n", 2)], "f32")]
                    exts = [G.Ext(d, "strided", strides=((1 << 18) if wide else 64 * 5 * 16 * 2,
                                                          64, 64 * 16 * 2, 1)),
                            G.Ext(d, "strided", strides=(0, 0, 0, 1)),
                            G.Ext(d, "strided", strides=(0, 128, 0, 2)),
                            G.Ext("b8", "strided", strides=(5 * 16 * 64, 64, 16 * 64, 1))]
                    ch = G.Chain(nodes, exts, numel, [1, 3], shape=shape,
                                 out_strides=[(5 * 16 * 64, 64, 16 * 64, 1), None])
                    src = G.generate(ch)[1]
                    self.assertIn("unsigned long long" if wide else "unsigned int i", src)
                    nvcc_ok(self, os.path.join(tmp, "s%s%d.cu" % (d, wide)), src)

    @unittest.skipUnless(NVCC, "no nvcc")
    def test_sources_compile(self):
        N = A.Node
        every = []
        for d in ("f32", "f16", "bf16"):
            x = ("x", 0)
            for op in ("neg", "abs", "exp", "log", "tanh", "sqrt", "rsqrt", "reciprocal",
                       "sigmoid", "relu", "silu"):
                every.append(N(op, [x], d))
            every += [N("gelu", [x], d, {"approximate": "none"}),
                      N("gelu", [x], d, {"approximate": "tanh"}),
                      N("add", [x, ("s", 2.5)], d, {"alpha": 0.5}),
                      N("div", [x, x], d), N("div_scalar", [x], d, {"inv": 0.25}),
                      N("clamp", [x], d, A.finish_attrs("clamp", {"lo_raw": 0, "hi_raw": 6}, d)),
                      N("where", [("x", 1), x, x], d),
                      N("fill", [x], d, {"value": 1.0}),
                      N("copy", [x], "f32")]
            for e in (2.0, 3.0, -2.0, 1.7):
                every.append(N("pow", [x], d, A.finish_attrs("pow", {"exp": e}, d)))
        with tempfile.TemporaryDirectory() as tmp:
            srcs = []
            for d in ("f32", "f16", "bf16"):
                nodes = [n for n in every if n.dtype == d or n.op == "copy"]
                ch = G.Chain(nodes, [G.Ext(d), G.Ext("b8")], 1000,
                             list(range(len(nodes))))
                srcs.append(G.generate(ch)[1])
            srcs.append(G.generate(gelu_new_chain(exact=False))[1])
            for i, s in enumerate(srcs):
                nvcc_ok(self, os.path.join(tmp, "k%d.cu" % i), s)


if __name__ == "__main__":
    unittest.main()
