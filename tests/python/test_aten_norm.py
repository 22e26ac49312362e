"""Tests of kplan.aten_norm (a pointwise chain ending in a LayerNorm, one
kernel in ATen's vectorized_layer_norm_kernel order): CPU only, no torch.
The sources go through nvcc (-arch=sm_90 -ptx, then ptxas: -cubin) when the machine has it;
their numerics are checked against eager ATen on a GPU by
tests/gpu/torch_fusion_ops.py ("layer_norm" cases).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from fractions import Fraction

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
        # Welford per element in read order (1 / count known per place: the
        # loop is unrolled), then the shuffles and the shared combine
        self.assertIn("kp_wonk(kp_x[v * 4 + ii], kp_m, kp_s, kp_rcp[v * 4 + ii]);", src)
        self.assertIn("const float kp_rcp[8] = {__int_as_float(0x3f800000), "
                      "__int_as_float(0x3f000000), __int_as_float(0x3eaaaaab), ", src)
        self.assertIn("__shfl_down_sync(0xffffffffu, kp_m, 16 >> k, 32)", src)
        self.assertIn("const float ac = __shfl_down_sync(0xffffffffu, c, 16 >> k, 32);", src)
        # 192 vectors: threads 0..63 fold 8 elements, 64..127 four; warps 0, 1
        # hold 256, warps 2, 3 128: warp 0 takes warp 2's 128 (1/3, 2/3)
        self.assertIn("kp_wcombk(kp_m, kp_s, kp_buf[0], kp_buf[1], __int_as_float(0x43000000), "
                      "__int_as_float(0x3eaaaaab), __int_as_float(0x3f2aaaab), true);", src)
        self.assertIn("kp_buf[1] = __fdiv_rn(kp_s, __int_as_float(0x44400000));", src)  # / 768.f
        self.assertIn("rsqrtf(__fadd_rn(kp_buf[1], %s))" % A.flit(1e-5), src)
        self.assertIn("const float mean = __fmaf_rn(nA, am, __fmul_rn(nB, m));", src)
        # gamma and beta read in the first pass
        self.assertIn("kp_g[v * 4 + ii] = kp_h2f(x2[col]);", src)
        # the sum is stored as its half bits, and read by the norm rounded
        self.assertIn("y0[i] = h0;", src)
        self.assertIn("kp_x[v * 4 + ii] = v0;", src)
        self.assertNotIn("ln_mean", src)

    def test_normalize_expressions(self):
        want = {(True, True): "__fmaf_rn(kp_g[v * 4 + ii], __fmul_rn(rstd, xm), "
                              "kp_b[v * 4 + ii])",
                (True, False): "__fmul_rn(kp_g[v * 4 + ii], __fmul_rn(rstd, xm))",
                (False, False): "__fmul_rn(rstd, xm)"}
        for (g, b), e in want.items():
            ch, nm = residual_ln("bf16", gamma=g, beta=b)
            self.assertIn("ln_y[i] = kp_f2b(%s);" % e, NORM.generate(ch, nm)[1], (g, b))

    def test_large_rows_recompute(self):
        ch, nm = residual_ln("f32", n=16384, rows=2, outs=())
        src = NORM.generate(ch, nm)[1]
        self.assertNotIn("kp_x[", src)
        self.assertEqual(src.count("const float v0 = __fadd_rn(a0, a1);"), 2)   # both passes
        self.assertIn("kp_won(v0, kp_m, kp_s, kp_c);", src)      # counts in the loop
        self.assertIn("__fmaf_rn(x2[col], __fmul_rn(rstd, xm), x3[col])", src)

    def test_rows_past_prefetch_read_weights_late(self):
        ch, nm = residual_ln("f16", n=4096, rows=1)
        src = NORM.generate(ch, nm)[1]
        self.assertIn("kp_rcp[32]", src)
        self.assertNotIn("kp_g[", src)
        self.assertIn("__fmaf_rn(kp_h2f(x2[col]), __fmul_rn(rstd, xm), kp_h2f(x3[col]))", src)

    def test_reciprocals_correctly_rounded(self):
        def bits(f):
            return struct.unpack("<I", struct.pack("<f", f))[0]

        def flt(b):
            return struct.unpack("<f", struct.pack("<I", b))[0]
        for c in list(range(1, 300)) + [384, 3 * 2 ** 20, 2 ** 24 - 1]:
            f, q = NORM.rcp_rn(c), Fraction(1, c)
            for nb in (flt(bits(f) - 1), flt(bits(f) + 1)):     # no float32 is nearer
                self.assertLessEqual(abs(Fraction(f) - q), abs(Fraction(nb) - q), c)
        self.assertEqual(NORM.rcp_rn(3), flt(0x3eaaaaab))

    def test_inter_warp_counts_are_atens(self):
        """The constants of the inter-warp combines equal what ATen's
        combines compute from the counts at run time (shuffles of the
        counts, lanes past the warp keeping their own, then lane 0 of each
        warp through the shared buffer), for every row length."""
        def comb(c, ac):
            count = A.f32(ac + c)
            if count > 0:
                coef = NORM.rcp_rn(count)
                return count, (ac, A.f32(ac * coef), A.f32(c * coef), True)
            return count, (ac, 0.0, 0.0, False)
        for nv in list(range(1, 300)) + [1024, 2048, 4095]:
            cnt = [float(NORM.thread_count(t, nv)) for t in range(NORM.THREADS)]
            for off in (16, 8, 4, 2, 1):
                cnt = [comb(cnt[t], cnt[t + off] if (t & 31) + off < 32 else cnt[t])[0]
                       for t in range(NORM.THREADS)]
            lane0 = [cnt[w * 32] for w in range(4)]
            want = []
            for off in (2, 1):
                st = []
                for w in range(off):
                    lane0[w], k = comb(lane0[w], lane0[w + off])
                    st.append(k)
                want.append((off, st))
            self.assertEqual(NORM.inter_warp(nv), want, nv)

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
