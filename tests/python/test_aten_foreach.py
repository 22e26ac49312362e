"""kplan.aten_foreach with a fake torch: which `_foreach_*` runs become one
program, what its kernels store and read, the tables they are launched with,
what flushes the program, what is refused, and the op-by-op path.

The numerics (each expression against ATen's foreach kernels, bit for bit)
need a GPU: tests/gpu/torch_foreach_ops.py.
"""
import gc
import os
import struct
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

from kplan import aten_foreach as FE  # noqa: E402
from kplan import aten_fuse  # noqa: E402
from test_aten_fuse import Arg, FakeCRT, Op, fake_torch  # noqa: E402


class BlobCRT(FakeCRT):
    def __init__(self, fail_load=False):
        FakeCRT.__init__(self)
        self.fail_load = fail_load
        self.blobs = []

    def kernel_load(self, src, name):
        if self.fail_load:
            raise RuntimeError("nvrtc: no")
        return FakeCRT.kernel_load(self, src, name)

    def kernel_launch_blob(self, fn, grid, block, stream, blob):
        self.blobs.append((fn, grid, block, stream, blob))
        return 0


def foreach_ops(T):
    """The fake `_foreach_*` overloads AdamW(capturable=True) and SGD call."""
    L, W = "Tensor[]", True

    def inplace(*a, **k):
        return None

    def fresh(lst, *a, **k):
        if not isinstance(lst, list):           # pow(scalar, list)
            lst = a[0]
        return [T.Tensor(t.shape, t.dtype) for t in lst]

    def op(name, args, impl):
        o = Op(T, name, args, impl)
        return o
    F = {}
    for n in ("add", "sub", "mul", "div"):
        F[n + "_s_"] = op("aten::_foreach_%s_.Scalar" % n, [Arg("self", L, W),
                                                            Arg("scalar", "Scalar")], inplace)
        F[n + "_l_"] = op("aten::_foreach_%s_.List" % n, [Arg("self", L, W), Arg("other", L)],
                          inplace)
        F[n + "_l"] = op("aten::_foreach_%s.List" % n, [Arg("self", L), Arg("other", L)], fresh)
    F["lerp_"] = op("aten::_foreach_lerp_.Scalar", [Arg("self", L, W), Arg("tensors1", L),
                                                     Arg("weight", "Scalar")], inplace)
    F["addcmul_"] = op("aten::_foreach_addcmul_.Scalar", [
        Arg("self", L, W), Arg("tensor1", L), Arg("tensor2", L), Arg("value", "Scalar")], inplace)
    F["addcdiv_"] = op("aten::_foreach_addcdiv_.Scalar", [
        Arg("self", L, W), Arg("tensor1", L), Arg("tensor2", L), Arg("value", "Scalar")], inplace)
    F["pow"] = op("aten::_foreach_pow.ScalarAndTensor", [Arg("self", "Scalar"),
                                                         Arg("exponent", L)], fresh)
    for n in ("neg", "reciprocal", "sqrt"):
        F[n + "_"] = op("aten::_foreach_%s_" % n, [Arg("self", L, W)], inplace)
    F["sqrt"] = op("aten::_foreach_sqrt", [Arg("self", L)], fresh)
    F["maximum_"] = op("aten::_foreach_maximum_.List", [Arg("self", L, W), Arg("other", L)],
                       inplace)
    return F


class TestForeach(unittest.TestCase):
    def setUp(self):
        self.T, self.O = fake_torch(self)
        self.F = foreach_ops(self.T)
        self.crt = BlobCRT()
        self.fz = aten_fuse.Fuser(self.crt)
        self.shapes = [(8192, 768), (768,), (3, 5)]

    def lst(self, small=False, dtype=None):
        T = self.T
        return [T.Tensor(() if small else s, dtype or T.float32) for s in self.shapes]

    def call(self, op, *args, **kw):
        """What FuseMode.__torch_dispatch__ does with a foreach op."""
        out = self.fz.defer_foreach(op, args, kw)
        if out is not FE.NOT:
            return out
        self.fz.before(op, args, kw)
        return op(*args, **kw)

    def adamw(self, p, g, m, v, steps, lr=1e-4, wd=0.01, b1=0.9, b2=0.999, eps=1e-8):
        """torch.optim's _multi_tensor_adam, capturable=True, decoupled decay."""
        F, r = self.F, self.call
        r(F["add_s_"], steps, 1)
        r(F["mul_s_"], p, 1 - lr * wd)
        r(F["lerp_"], m, g, 1 - b1)
        r(F["mul_s_"], v, b2)
        r(F["addcmul_"], v, g, g, 1 - b2)
        bc1 = r(F["pow"], b1, steps)
        bc2 = r(F["pow"], b2, steps)
        r(F["sub_s_"], bc1, 1)
        r(F["sub_s_"], bc2, 1)
        r(F["neg_"], bc2)
        r(F["div_s_"], bc1, lr)
        r(F["reciprocal_"], bc1)
        r(F["sqrt_"], bc2)
        d = r(F["sqrt"], v)
        r(F["div_l_"], d, bc2)
        r(F["add_s_"], d, eps)
        r(F["div_l_"], d, bc1)
        r(F["addcdiv_"], p, m, d)

    def test_adamw_step_is_two_kernels(self):
        p, g, m, v = self.lst(), self.lst(), self.lst(), self.lst()
        steps = self.lst(small=True)
        self.adamw(p, g, m, v, steps)
        gc.collect()
        self.assertEqual(self.crt.blobs, [])           # nothing launched yet
        prog = self.fz.multi
        self.assertEqual(len(prog.nodes), 18)
        self.fz.flush()
        self.assertIsNone(self.fz.multi)
        st = self.fz.stats
        self.assertEqual((st.foreach, st.foreach_ops, st.foreach_kernels), (1, 18, 2))
        (na, sa), (nb, sb) = self.crt.loads
        self.assertTrue(na.startswith("kp_foreach_s_") and nb.startswith("kp_foreach_b_"))
        # lane scalars: the step counter stored in place, powf of it, two
        # values left for the elements (the bias corrections)
        self.assertIn("powf(__int_as_float(0x3f666666), n0)", sa)      # 0.9f ** step
        self.assertEqual(sa.count("*p.v["), 2)     # the step loaded and stored
        self.assertEqual(sa.count("p.scratch[i * 2 +"), 2)
        # elements: p, m, v stored, the fresh sqrt's list (dead) not
        self.assertEqual(sb.count("p.v[") - sb.count("const float m"), 3)
        self.assertIn("fmaf(__int_as_float(0x3dcccccd), __fsub_rn(", sb)       # lerp 0.1
        self.assertIn("sqrtf(", sb)
        self.assertIn("__grid_constant__", sb)
        # the tables: one launch each, small first
        (fa, ga, ba, _, blob_a), (fb, gb, bb, stream, blob_b) = self.crt.blobs
        self.assertEqual((ga, ba, bb, stream), (1, 128, FE.BLOCK, 0x5))
        blocks = [-(-8192 * 768 // 1024), 1, 1]
        self.assertEqual(gb, sum(blocks))
        words = struct.unpack("<%dQ" % (len(blob_b) // 8), blob_b)
        # 4 rows of pointers, the unused row of direct lane scalars, numel,
        # bstart (one more), scratch, n
        per = (len(words) - 3) // 7
        self.assertLessEqual(len(blob_b), FE.PARAM_BYTES)
        self.assertEqual(words[-1], 3)
        numel = words[5 * per:5 * per + 3]
        self.assertEqual(list(numel), [8192 * 768, 768, 15])
        bstart = words[6 * per:6 * per + 4]
        self.assertEqual(list(bstart), [0, blocks[0], blocks[0] + 1, sum(blocks)])
        rows = [words[k * per:k * per + 3] for k in range(4)]
        for lst in (p, g, m, v):
            self.assertIn(tuple(t.data_ptr() for t in lst), rows)

    def test_held_output_is_stored(self):
        x = self.lst()
        y = self.call(self.F["sqrt"], x)
        self.call(self.F["mul_s_"], y, 2.0)
        self.fz.flush()
        src = self.crt.loads[0][1]
        self.assertEqual(src.count("p.v[1][l][j] = n1;"), 1)
        words = struct.unpack("<%dQ" % (len(self.crt.blobs[0][4]) // 8), self.crt.blobs[0][4])
        self.assertIn(y[0].data_ptr(), words)

    def test_reading_an_output_launches_the_program(self):
        O = self.O
        p, g = self.lst(), self.lst()
        self.call(self.F["add_l_"], p, g, alpha=-0.5)
        self.call(self.F["mul_s_"], p, 0.5)
        # an op over something else leaves it pending
        z = self.T.Tensor((4, 768), self.T.float16)
        self.fz.multi_before((z,), {})
        self.assertIsNotNone(self.fz.multi)
        # a view of a parameter is its memory
        view = self.T.Tensor(p[1].shape, p[1].dtype, base=p[1])
        self.fz.multi_before((view,), {})
        self.assertIsNone(self.fz.multi)
        self.assertEqual(len(self.crt.blobs), 1)
        self.assertIn("fmaf(__int_as_float(0xbf000000), m1, m0)", self.crt.loads[0][1])
        del O

    def test_chain_it_reads_goes_first(self):
        O, T = self.O, self.T
        p = self.lst()
        x = T.Tensor((768,), T.float32)
        t = aten_fuse.Fuser.defer(self.fz, O.mul, (x, 0.5), {})
        u = self.fz.defer(O.tanh, (t,), {})
        self.assertIsNotNone(self.fz.chain)
        g = [p[0], u, p[2]]                # a list holding the chain's output ...
        with self.assertRaises(AssertionError):
            self.assertIsNone(self.fz.chain)
        out = self.call(self.F["mul_l"], [T.Tensor(s, T.float32) for s in self.shapes], g)
        # ... its tensors are new to the program, the chain launched first
        self.assertIsNone(self.fz.chain)
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(len(out), 3)

    def test_refusals(self):
        F, T = self.F, self.T
        half = self.lst(dtype=T.float16)
        self.assertIs(self.fz.defer_foreach(F["mul_s_"], (half, 2.0), {}), FE.NOT)
        self.assertEqual(self.fz.last_reason, "foreach-dtype")
        a = self.lst()
        views = [T.Tensor(t.shape, t.dtype, base=a[0]) for t in a]
        self.assertIs(self.fz.defer_foreach(F["mul_s_"], (views, 2.0), {}), FE.NOT)
        self.assertEqual(self.fz.last_reason, "foreach-alias")
        self.assertIs(self.fz.defer_foreach(F["maximum_"], (a, a), {}), FE.NOT)
        self.assertEqual(self.fz.last_reason, "foreach-op")
        # a list that mixes tensors of the program with new ones
        self.call(F["mul_s_"], a, 2.0)
        mixed = [a[0]] + self.lst()[1:]
        self.assertIs(self.fz.defer_foreach(F["add_l_"], (mixed, a), {}), FE.NOT)
        self.assertEqual(self.fz.last_reason, "foreach-lists")
        self.assertIsNone(self.fz.multi)              # launched before the op runs
        # small and big lists of one op, other than a .List op's second
        steps = self.lst(small=True)
        self.assertIs(self.fz.defer_foreach(F["lerp_"], (steps, a, 0.1), {}), FE.NOT)
        self.assertEqual(self.fz.last_reason, "foreach-shape")
        self.assertEqual(self.fz.stats.refused["foreach-dtype"], 1)

    def test_no_compiler_runs_the_ops(self):
        self.crt = BlobCRT(fail_load=True)
        self.fz = aten_fuse.Fuser(self.crt)
        F = self.F
        x, g = self.lst(), self.lst()
        y = self.call(F["sqrt"], x)
        self.call(F["addcmul_"], y, g, g, 0.5)
        self.call(F["div_l_"], x, y)
        self.fz.flush()
        self.assertEqual(self.fz.stats.fallbacks, {"compile-failed": 1})
        names = [e[0] for e in self.T.log if e[0].startswith("aten::")]
        self.assertEqual(names, ["aten::_foreach_sqrt", "aten::_foreach_addcmul_.Scalar",
                                 "aten::_foreach_div_.List"])
        # sqrt's result copied into the list handed out, which the next ops use
        copies = [e for e in self.T.log if e[0] == "copy_"]
        self.assertEqual([c[1] for c in copies], y)
        addcmul = self.T.log[[e[0] for e in self.T.log].index("aten::_foreach_addcmul_.Scalar")]
        self.assertTrue(all(a is b for a, b in zip(addcmul[1], y)))
        self.assertEqual(addcmul[4], 0.5)

    def test_many_lanes_split_into_launches(self):
        T = self.T
        self.shapes = [(100 + k,) for k in range(300)]
        a, b = self.lst(), self.lst()
        self.call(self.F["mul_s_"], a, 0.5)
        self.call(self.F["add_l_"], a, b, alpha=2.0)
        self.fz.flush()
        blobs = self.crt.blobs
        self.assertGreater(len(blobs), 1)
        self.assertTrue(all(len(x[4]) <= FE.PARAM_BYTES for x in blobs))
        # every lane in exactly one launch
        n = [struct.unpack("<Q", x[4][-8:])[0] for x in blobs]
        self.assertEqual(sum(n), 300)
        del T

    def test_one_op_alone_runs_as_eager(self):
        x = self.lst()
        self.call(self.F["mul_s_"], x, 0.5)
        self.fz.flush()
        self.assertEqual(self.crt.loads, [])
        self.assertEqual(self.T.log[-1][0], "aten::_foreach_mul_.Scalar")

    def test_shipped_with_a_plan(self):
        """A run that saves its groups records the program's two kernels; a
        process of mode "plan" uses them, and runs a program they do not
        describe op by op."""
        import tempfile
        from kplan import aten_plan
        found = {}
        self.fz = aten_fuse.Fuser(self.crt, region="train", found=found)
        p, g, m, v = self.lst(), self.lst(), self.lst(), self.lst()
        self.adamw(p, g, m, v, self.lst(small=True))
        self.fz.flush()
        self.assertEqual(len(found), 2)
        groups = [x[0] for x in found.values()]
        big = [x for x in groups if "elements" in x.shape][0]
        self.assertEqual(big.outputs, 3)
        self.assertEqual(big.ops.count("aten::_foreach_"), 18)
        self.assertGreater(big.saved_bytes, 0)
        self.assertGreater(big.saved_kernels, 0)
        d = tempfile.mkdtemp()
        plan = os.path.join(d, "m.kplan")
        sources = {x[0].source: x[1] for x in found.values()}
        shipped = aten_plan.Shipped(plan, [x[0] for x in found.values()])
        shipped.sources = dict(sources)
        crt = BlobCRT()
        aten_fuse._kernels.clear()          # another process: nothing loaded yet
        fz = aten_fuse.Fuser(crt, mode="plan", region="train", shipped=shipped)
        self.fz = fz
        p, g, m, v = self.lst(), self.lst(), self.lst(), self.lst()
        self.adamw(p, g, m, v, self.lst(small=True))
        fz.flush()
        self.assertEqual((fz.stats.foreach, fz.stats.shipped, len(crt.blobs)), (1, 1, 2))
        self.assertEqual(sorted(s for _, s in crt.loads), sorted(sources.values()))
        # another learning rate: the plan's ops with another scalar
        p, g, m, v = self.lst(), self.lst(), self.lst(), self.lst()
        self.adamw(p, g, m, v, self.lst(small=True), lr=3e-4)
        fz.flush()
        self.assertEqual(fz.stats.fallbacks, {"plan-mismatch": 1})
        self.assertEqual(len(crt.blobs), 2)
        # a changed source is not used
        for k in shipped.sources:
            shipped.sources[k] = shipped.sources[k].replace("4;", "3;")
        p, g, m, v = self.lst(), self.lst(), self.lst(), self.lst()
        self.adamw(p, g, m, v, self.lst(small=True))
        fz.flush()
        self.assertEqual(fz.stats.fallbacks, {"plan-mismatch": 2})
        self.assertEqual(len(crt.blobs), 2)

    def test_switch_off(self):
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_FOREACH": "0"}):
            fz = aten_fuse.Fuser(self.crt)
        self.assertFalse(fz.foreach_on)

    def test_parse_binds_keywords(self):
        T, F = self.T, self.F
        a, b = self.lst(), self.lst()
        sp = FE.parse(T, F["add_l_"].name(), (a, b), {"alpha": -2})
        self.assertEqual((sp.kind, sp.op, sp.inplace, sp.scalar, sp.lanes),
                         ("list", "add", True, -2.0, 3))
        sp = FE.parse(T, F["addcdiv_"].name(), (a, b, b), {})
        self.assertEqual(sp.scalar, 1.0)
        sp = FE.parse(T, F["pow"].name(), (0.9, self.lst(small=True)), {})
        self.assertEqual((sp.kind, sp.scalar), ("rpow", 0.9))
        with self.assertRaises(FE.Refuse):
            FE.parse(T, F["mul_s_"].name(), (a, True), {})
        with self.assertRaises(FE.Refuse):
            FE.parse(T, F["add_l_"].name(), (a, b[:2]), {})


if __name__ == "__main__":
    unittest.main()
