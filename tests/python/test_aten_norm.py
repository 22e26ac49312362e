"""Tests of kplan.aten_norm (a pointwise chain ending in a LayerNorm, one
kernel in ATen's vectorized_layer_norm_kernel order): CPU only, no torch.
The sources go through nvcc (-arch=sm_90 -ptx, then ptxas: -cubin) when the machine has it;
their numerics are checked against eager ATen on a GPU by
tests/gpu/torch_fusion_ops.py ("layer_norm" cases).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

from kplan import aten_gen as G  # noqa: E402
from kplan import aten_norm as NORM  # noqa: E402
from kplan import aten_ops as A  # noqa: E402

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def residual_ln(dtype="f16", n=768, rows=4, gamma=True, beta=True, outs=(0,),
                norm_outs=(True, False, False), exact=True):
    """x + r, then layer_norm over the last dim; weight x2, bias x3."""
    nodes = [A.Node("add", [("x", 0), ("x", 1)], dtype, {"alpha": 1.0})]
    exts = [G.Ext(dtype), G.Ext(dtype)]
    g = b = None
    if gamma:
        g = len(exts)
        exts.append(G.Ext(dtype, "row", n))
    if beta:
        b = len(exts)
        exts.append(G.Ext(dtype, "row", n))
    ch = G.Chain(nodes, exts, rows * n, list(outs), exact=exact)
    return ch, NORM.Norm(0, n, 1e-5, g, b, dtype, norm_outs)


class TestNorm(unittest.TestCase):
    def test_vectorized_conditions(self):
        self.assertTrue(NORM.vectorized("f16", 768, [0x1000, 0x2000, 0x3008]))
        self.assertFalse(NORM.vectorized("f16", 768, [0x1000, 0x2000, 0x3004]))  # not 8-aligned
        self.assertTrue(NORM.vectorized("f32", 768, [0x1010]))
        self.assertFalse(NORM.vectorized("f32", 768, [0x1008]))                  # not 16-aligned
        self.assertFalse(NORM.vectorized("f32", 766, [0]))                       # N % 4
        self.assertTrue(NORM.vectorized("bf16", 1 << 24, [0]))
        self.assertFalse(NORM.vectorized("bf16", (1 << 24) + 4, [0]))            # N > 2^24
        self.assertFalse(NORM.vectorized("b8", 768, [0]))

    def test_source_follows_aten(self):
        ch, nm = residual_ln()
        name, src = NORM.generate(ch, nm)
        self.assertTrue(name.startswith("kp_atenln_"))
        self.assertIn("__launch_bounds__(128) %s(" % name, src)
        # Welford per element in read order, then the shuffles and the shared combine
        self.assertIn("kp_won(v0, kp_m, kp_s, kp_c);", src)
        self.assertIn("for (int offset = 16; offset > 0; offset >>= 1)", src)
        self.assertIn("__shfl_down_sync(0xffffffffu, kp_m, offset, 32)", src)
        self.assertIn("for (int offset = 2; offset > 0; offset /= 2)", src)
        self.assertIn("kp_buf[1] = __fdiv_rn(kp_s, __int_as_float(0x44400000));", src)  # / 768.f
        self.assertIn("rsqrtf(__fadd_rn(kp_buf[1], %s))" % A.flit(1e-5), src)
        self.assertIn("mean = __fmaf_rn(nA, am, __fmul_rn(nB, m));", src)
        # the sum is stored as its half bits, and read by the norm rounded
        self.assertIn("y0[i] = h0;", src)
        self.assertIn("kp_x[v * 4 + ii] = v0;", src)
        self.assertNotIn("ln_mean", src)

    def test_normalize_expressions(self):
        want = {(True, True): "__fmaf_rn(kp_b2f(x2[col]), __fmul_rn(rstd, xm), kp_b2f(x3[col]))",
                (True, False): "__fmul_rn(kp_b2f(x2[col]), __fmul_rn(rstd, xm))",
                (False, False): "__fmul_rn(rstd, xm)"}
        for (g, b), e in want.items():
            ch, nm = residual_ln("bf16", gamma=g, beta=b)
            self.assertIn("ln_y[i] = kp_f2b(%s);" % e, NORM.generate(ch, nm)[1], (g, b))

    def test_large_rows_recompute(self):
        ch, nm = residual_ln("f32", n=16384, rows=2, outs=())
        src = NORM.generate(ch, nm)[1]
        self.assertNotIn("kp_x[", src)
        self.assertEqual(src.count("const float v0 = __fadd_rn(a0, a1);"), 2)   # both passes

    def test_bad(self):
        for ch, nm in (residual_ln(n=766, rows=2), residual_ln(outs=(), norm_outs=(0, 0, 0))):
            with self.assertRaises(G.GenError):
                NORM.generate(ch, nm)
        with self.assertRaises(G.GenError):             # a bias alone: not ATen's bits
            NORM.generate(*residual_ln(gamma=False))
        ch, nm = residual_ln()
        nm.node = 3
        with self.assertRaises(G.GenError):
            NORM.generate(ch, nm)

    def test_names_differ(self):
        a = NORM.generate(*residual_ln())[0]
        self.assertEqual(a, NORM.generate(*residual_ln())[0])
        self.assertNotEqual(a, NORM.generate(*residual_ln(beta=False))[0])
        self.assertNotEqual(a, NORM.generate(*residual_ln(norm_outs=(True, True, True)))[0])

    @unittest.skipUnless(NVCC, "no nvcc")
    def test_sources_compile(self):
        srcs = []
        for d in ("f32", "f16", "bf16"):
            for g, b in ((True, True), (True, False), (False, False)):
                srcs.append(NORM.generate(*residual_ln(d, gamma=g, beta=b))[1])
            for n in (12, 16384):     # one vector per thread at most; recomputed rows
                srcs.append(NORM.generate(*residual_ln(d, n=n, rows=3, outs=(),
                                                       norm_outs=(True, True, True)))[1])
        # a longer chain (bias, GELU, residual) with broadcast inputs
        N = A.Node
        nodes = [N("add", [("x", 0), ("x", 1)], "f16", {"alpha": 1.0}),
                 N("gelu", [("n", 0)], "f16", {"approximate": "tanh"}),
                 N("add", [("n", 1), ("x", 2)], "f16", {"alpha": 1.0})]
        ch = G.Chain(nodes, [G.Ext("f16"), G.Ext("f16", "row", 1024), G.Ext("f16"),
                             G.Ext("f16", "scalar", 1), G.Ext("f16", "row", 1024)],
                     7 * 1024, [2])
        srcs.append(NORM.generate(ch, NORM.Norm(2, 1024, 1e-6, 4, None, "f16"))[1])
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, src in enumerate(srcs):
                p = os.path.join(tmp, "n%d.cu" % i)
                with open(p, "w") as f:
                    f.write(src)
                paths.append(p)
            # -ptx to read the float ops, then ptxas: what -cubin does
            ptxas = os.path.join(os.path.dirname(NVCC), "ptxas")
            for p in paths:
                r = subprocess.run([NVCC, "-arch=sm_90", "-ptx", "-o", p + ".ptx", p],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                if os.path.exists(ptxas):
                    r = subprocess.run([ptxas, "-arch=sm_90", "-o", os.devnull, p + ".ptx"],
                                       capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            for i, p in enumerate(paths[:-1]):   # the GELU's own expression contracts, as ATen's
                with open(p + ".ptx") as f:
                    ptx = f.read()
                # no float op left for the compiler to contract: all _rn
                self.assertIsNone(re.search(r"\b(add|sub|mul|fma)\.f32\b", ptx), i)

if __name__ == "__main__":
    unittest.main()
