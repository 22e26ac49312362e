"""Tests of kplan.aten_plan (torch fusion groups shipped with a plan), CPU
only, no torch: the PLAN.aten format (against the fixture the C reader's
test parses), kp_hash64, saving beside a plan, and the Fuser using shipped
groups: a matching chain uses the shipped source without generating one, a
chain with other shapes, strides or ops runs op by op with the reason, a
changed or missing source and a source refused under a trust key too.
"""
import gc
import os
import re
import shutil
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)

from kplan import aten_fuse, aten_gen, aten_ops, aten_plan  # noqa: E402
import test_aten_fuse as TF  # noqa: E402

FIXTURE = os.path.join(REPO, "tests", "fixtures", "aten", "groups.aten")
FIXTURE_V1 = os.path.join(REPO, "tests", "fixtures", "aten", "groups-v1.aten")
PLAN = os.path.join(REPO, "tests", "golden", "planner_fixture.kplan")


def fixture_groups():
    g1 = aten_plan.Group("decode", 0x0123456789abcdef, True,
                         "aten::mul.Tensor -> aten::pow.Tensor_Scalar -> aten::tanh",
                         "1x1x3072", "f16 full 1x1x3072 s3072,3072,1; f16 row 3072 3072 s1", 2,
                         "kp_aten_00112233aabbccdd", "kpaten-1111111111111111.cu",
                         0x1111111111111111, saved_kernels=2, saved_bytes=24576,
                         per_call=12)
    g2 = aten_plan.Group("step 2%", 0xfedcba9876543210, False,
                         "aten::silu -> aten::mul.Tensor", "4x768",
                         "bf16 full 4x768 s768,1; bf16 full 4x768 s768,1", 1,
                         "kp_aten_ffeeddccbbaa9988", "kpaten-2222222222222222.cu",
                         0x2222222222222222, saved_kernels=1, saved_bytes=12288)
    return [g1, g2]


class TestFormat(unittest.TestCase):
    def test_hash64_is_kp_hash64(self):
        # values of common/hash.c's kp_hash64(s, len, KP_HASH_SEED)
        self.assertEqual(aten_plan.hash64(b""), 0xf52a15e9a9b5e89b)
        self.assertEqual(aten_plan.hash64(b"a"), 0x02c0bdbf481420f8)
        self.assertEqual(aten_plan.hash64(b"kplan-aten-groups 1\n"), 0xfcf82a3669c20105)

    def test_writer_gives_the_fixture_the_c_reader_parses(self):
        text = aten_plan.format_groups(0x5c1f0d0e8a9b7c6d, fixture_groups(), "model.kplan")
        with open(FIXTURE) as f:
            self.assertEqual(text, f.read())

    def test_round_trip(self):
        gs = fixture_groups()
        phash, back = aten_plan.parse(aten_plan.format_groups(7, gs))
        self.assertEqual(phash, 7)
        self.assertEqual([(g.id, g.region, g.key, g.exact, g.ops, g.shape, g.inputs, g.outputs,
                           g.kernel, g.source, g.source_hash) for g in back],
                         [(i + 1, g.region, g.key, g.exact, g.ops, g.shape, g.inputs, g.outputs,
                           g.kernel, g.source, g.source_hash) for i, g in enumerate(gs)])

    def test_refusals(self):
        with open(FIXTURE) as f:
            good = f.read()
        bad = [good.replace("kplan-aten-groups 2", "kplan-aten-groups 3"),
               good.replace("gain-ns 1008\n", ""),
               good.replace("saved-bytes 12288", "saved-bytes -1"),
               good.replace("saved-kernels 1\n", "saved-kernels 01\n"),
               good.replace("saved-kernels 2", "saved-kernels 65"),
               good.replace("per-call 12", "per-call 0"),
               good.replace("per-call 1\n", ""),
               good.replace("plan-hash", "plan-hush"),
               good.replace("source-hash 2222222222222222\n", ""),
               good.replace("key 0123456789abcdef", "key 0123456789ABCDEF"),
               good.replace("[group 2]", "[group 3]"),
               good.replace("numerics exact", "numerics fast"),
               good.replace("outputs 2", "outputs 65"),
               good.replace("source kpaten-1111111111111111.cu", "source ../x.cu"),
               good.replace("region decode", "region a%0Ab"),
               good.replace("region decode", "region a%4"),
               good.replace("shape 1x1x3072", "colour red"),
               good.rstrip("\n")]
        for i, text in enumerate(bad):
            with self.assertRaises(aten_plan.FormatError, msg="case %d" % i):
                aten_plan.parse(text)
        aten_plan.parse(good)

    def test_version_1_read_without_gains(self):
        with open(FIXTURE_V1) as f:
            v1 = f.read()
        phash, groups = aten_plan.parse(v1)
        self.assertEqual(phash, 0x5c1f0d0e8a9b7c6d)
        self.assertEqual([(g.saved_kernels, g.saved_bytes, g.gain_ns) for g in groups],
                         [(-1, -1, -1)] * 2)
        self.assertEqual([g.per_call for g in groups], [1, 1])
        with self.assertRaisesRegex(aten_plan.FormatError, "format version 1 has none"):
            aten_plan.parse(v1.replace("outputs 1\n", "outputs 1\ngain-ns 5\n"))

    def test_gain_is_the_cost_model_with_its_defaults(self):
        # the constants are the C cost model's documented defaults (the one
        # table of quantities, common/cost_quantities.def)
        with open(os.path.join(REPO, "common", "cost_quantities.def")) as f:
            table = f.read()
        with open(os.path.join(REPO, "analyzer", "cost.h")) as f:
            cost_h = f.read()
        for name, v in (("dram_bytes_per_ns", aten_plan.DRAM_BYTES_PER_NS),
                        ("graph_node_ns", aten_plan.GRAPH_NODE_NS)):
            m = re.search(r'"%s", \w+, \w+, ([0-9.]+),' % name, table)
            self.assertIsNotNone(m, name)
            self.assertEqual(float(m.group(1)), v, name)
        m = re.search(r"#define KP_COST_SHORT_BW_SHARE ([0-9.]+)", cost_h)
        self.assertEqual(float(m.group(1)), aten_plan.SHORT_BW_SHARE)
        self.assertEqual(aten_plan.predict_gain_ns(24576, 2), 2016)
        self.assertEqual(aten_plan.predict_gain_ns(0, 0), 0)
        self.assertEqual([g.gain_ns for g in fixture_groups()], [2016, 1008])

    def test_traffic(self):
        Ext, Node = aten_gen.Ext, aten_ops.Node
        # x*w + b then tanh, f16 over 4x768, w a row of 768, b one value;
        # only the tanh written
        exts = [Ext("f16", "full", 0, 1), Ext("f16", "row", 768, 1), Ext("f32", "scalar", 1, 1)]
        nodes = [Node("mul", [("x", 0), ("x", 1)], "f16", {}),
                 Node("add", [("n", 0), ("x", 2)], "f16", {}),
                 Node("tanh", [("n", 1)], "f16", {})]
        eager = (6144 + 1536 + 6144) + (6144 + 4 + 6144) + (6144 + 6144)
        fused = 6144 + 1536 + 4 + 6144
        self.assertEqual(aten_plan.traffic(nodes, exts, (4, 768), [2]), (2, eager - fused))
        # every value written: nothing saved but the kernels and the re-reads
        self.assertEqual(aten_plan.traffic(nodes, exts, (4, 768), [0, 1, 2]),
                         (2, eager - fused - 2 * 6144))


class TestFuserWithPlan(unittest.TestCase):
    """A chain fused and saved beside a plan, then a fresh Fuser that finds
    it among the shipped groups."""

    def setUp(self):
        self.T, self.O = TF.fake_torch(self)
        self.dir = tempfile.mkdtemp(prefix="kplan-aten-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.plan = os.path.join(self.dir, "model.kplan")
        shutil.copy(PLAN, self.plan)

    def fuser(self, **kw):
        self.crt = TF.FakeCRT()
        return aten_fuse.Fuser(self.crt, region="step", **kw)

    def chain(self, fz, shape=(4, 768), op2=None, strides=None):
        """tanh(x * 0.5) then op2 (add 1.0 by default), flushed; returns the
        output. strides: x's (a transposed view, a slice)."""
        O = self.O
        x = self.T.Tensor(shape, self.T.float16, strides)
        t = TF.run_op(fz, O.mul, x, 0.5)
        u = TF.run_op(fz, O.tanh, t)
        y = TF.run_op(fz, O.mul, u, 3.0) if op2 == "mul" else TF.run_op(fz, O.add, u, 1.0)
        del t, u
        gc.collect()
        fz.flush()
        return y

    def save(self):
        found = {}
        fz = self.fuser(found=found)
        self.chain(fz)
        self.assertEqual(len(found), 1)
        g, src = list(found.values())[0]
        self.assertEqual(g.ops, "aten::mul.Tensor -> aten::tanh -> aten::add.Tensor")
        self.assertEqual(g.shape, "4x768")
        self.assertEqual(g.inputs, "f16 full 4x768 s768,1")
        # three f16 kernels of 4x768 become one: the two intermediates are
        # neither written nor read back, the input is read once
        self.assertEqual((g.saved_kernels, g.saved_bytes), (2, 4 * 6144))
        self.assertEqual(g.gain_ns, aten_plan.predict_gain_ns(4 * 6144, 2))
        self.assertEqual(src, self.crt.loads[0][1])
        path = aten_plan.save(self.plan, [g], {g.source: src})
        self.assertEqual(path, self.plan + ".aten")
        return g, src

    def shipped_fuser(self, mode="plan"):
        sh = aten_plan.Shipped.load(self.plan)
        self.assertIsNotNone(sh)
        aten_fuse._kernels.clear()      # as in another process
        return self.fuser(mode=mode, shipped=sh)

    def test_per_call_counts_one_capture(self):
        # the same chain twice in one capture (two layers): per_call 2; a
        # later capture running it once does not lower it
        found = {}
        fz = self.fuser(found=found)
        self.chain(fz)
        self.chain(fz)
        self.assertEqual(len(found), 1)
        g = list(found.values())[0][0]
        self.assertEqual(g.per_call, 2)
        self.chain(self.fuser(found=found))
        self.assertEqual(g.per_call, 2)
        phash, back = aten_plan.parse(aten_plan.format_groups(1, [g]))
        self.assertEqual(back[0].per_call, 2)

    def test_saved_files(self):
        g, src = self.save()
        with open(os.path.join(self.dir, g.source)) as f:
            self.assertEqual(f.read(), src)
        with open(self.plan + ".aten") as f:
            phash, groups = aten_plan.parse(f.read())
        self.assertEqual(phash, aten_plan.plan_hash(self.plan))
        self.assertEqual([x.key for x in groups], [g.key])

    def test_shipped_source_used_without_generating(self):
        g, src = self.save()
        fz = self.shipped_fuser()
        with mock.patch.object(aten_gen, "generate", side_effect=AssertionError("generated")):
            self.chain(fz)
        self.assertEqual(fz.stats.shipped, 1)
        self.assertEqual(fz.stats.chains, 1)
        self.assertEqual(self.crt.loads, [(g.kernel, src)])

    def norm_chain(self, fz):
        """x + r, then native_layer_norm of the sum (weight and bias): the
        sum is held, mean and rstd are not."""
        O, T = self.O, self.T
        x, r = T.Tensor((4, 768), T.float16), T.Tensor((4, 768), T.float16)
        w, b = T.Tensor((768,), T.float16), T.Tensor((768,), T.float16)
        s = TF.run_op(fz, O.add, x, r)
        y, m, rs = TF.run_op(fz, O.layer_norm, s, [768], w, b, 1e-5)
        del m, rs
        gc.collect()
        fz.flush()
        return s, y

    def test_norm_group_shipped_and_used(self):
        found = {}
        fz = self.fuser(found=found)
        self.norm_chain(fz)
        (g, src), = found.values()
        self.assertEqual(g.ops, "aten::add.Tensor -> aten::native_layer_norm")
        aten_plan.save(self.plan, [g], {g.source: src})
        fz = self.shipped_fuser()
        with mock.patch.object(aten_gen, "generate", side_effect=AssertionError("generated")):
            self.norm_chain(fz)
        self.assertEqual((fz.stats.shipped, fz.stats.norms), (1, 1))
        self.assertEqual(self.crt.loads, [(g.kernel, src)])
        # one block of the row kernel per row, not the pointwise grid
        self.assertEqual(self.crt.launches[0][1:3], (4, 128))

    def test_scalar_tensor_value_is_in_the_key(self):
        T, O = self.T, self.O

        def where(fz, v):
            mask = T.Tensor((1, 1, 1, 8), T.bool)
            c = fz.defer_const(O.scalar_tensor, (v,), {"dtype": T.float16, "device": "cuda"})
            z = fz.defer_const(O.scalar_tensor, (0.0,), {"dtype": T.float16, "device": "cuda"})
            w = TF.run_op(fz, O.where, mask, z, c)
            del c, z
            gc.collect()
            fz.flush()
            return w
        found = {}
        fz = self.fuser(found=found)
        where(fz, float("-inf"))
        (g, src), = found.values()
        self.assertIn("f16 const 0xfc00", g.inputs)
        aten_plan.save(self.plan, [g], {g.source: src})
        fz = self.shipped_fuser()
        where(fz, float("-inf"))
        self.assertEqual(fz.stats.shipped, 1)
        fz = self.shipped_fuser()
        where(fz, -65504.0)                     # another value: another kernel
        self.assertEqual(fz.stats.shipped, 0)
        self.assertEqual(sum(fz.stats.fallbacks.values()), 1)

    def test_other_shape_runs_op_by_op(self):
        self.save()
        fz = self.shipped_fuser()
        self.chain(fz, shape=(8, 768))
        self.assertEqual(fz.stats.fallbacks, {"plan-mismatch": 1})
        self.assertEqual(fz.stats.ops_alone, 3)
        self.assertEqual(self.crt.loads, [])

    def test_other_ops_run_op_by_op(self):
        self.save()
        fz = self.shipped_fuser()
        self.chain(fz, op2="mul")
        self.assertEqual(fz.stats.fallbacks, {"not-in-plan": 1})

    def test_other_region_runs_op_by_op(self):
        self.save()
        sh = aten_plan.Shipped.load(self.plan)
        self.crt = TF.FakeCRT()
        fz = aten_fuse.Fuser(self.crt, mode="plan", region="other", shipped=sh)
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"not-in-plan": 1})

    def test_numerics_must_agree(self):
        self.save()
        fz = self.shipped_fuser(mode="tolerant")
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"plan-mismatch": 1})

    def test_changed_and_missing_source(self):
        g, src = self.save()
        p = os.path.join(self.dir, g.source)
        with open(p, "w") as f:
            f.write(src.replace("tanhf", "expf"))
        fz = self.shipped_fuser()
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"source-changed": 1})
        os.unlink(p)
        fz = self.shipped_fuser()
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"source-missing": 1})

    def test_groups_of_another_plan_are_not_used(self):
        self.save()
        with open(self.plan, "rb") as f:
            data = f.read()
        # another plan body (the header's hash follows it)
        lines = data.split(b"\n")
        lines[2] = b"body-hash 0000000000000000"
        with open(self.plan, "wb") as f:
            f.write(b"\n".join(lines))
        sh = aten_plan.Shipped.load(self.plan)
        self.assertIn("stale", sh.error)
        fz = self.fuser(mode="plan", shipped=sh)
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"plan-groups": 1})

    def test_untrusted_source_refused(self):
        self.save()
        fz = self.shipped_fuser()

        def refuse(src, name):
            raise RuntimeError("untrusted-source: a trust key is set and the plan's "
                               "signature does not cover this source")
        self.crt.kernel_load = refuse
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"untrusted-source": 1})

    def test_nvrtc_and_cache_counted(self):
        fz = self.fuser()
        self.crt.last_load = "cache"
        self.chain(fz)
        self.assertEqual((fz.stats.nvrtc, fz.stats.cache_hits), (0, 1))

    def test_no_file_no_groups(self):
        self.assertIsNone(aten_plan.Shipped.load(self.plan))
        fz = self.fuser(mode="plan", shipped=None)
        self.chain(fz)
        self.assertEqual(fz.stats.fallbacks, {"not-in-plan": 1})

    def test_strides_are_in_the_key(self):
        # a chain over a transposed x (its outputs permuted as eager's) saved:
        # used again only for the same strides, never for other layouts
        found = {}
        fz = self.fuser(found=found)
        y = self.chain(fz, strides=(1, 4))
        self.assertEqual(y.stride(), (1, 4))
        g, src = list(found.values())[0]
        self.assertEqual(g.inputs, "f16 strided e1,4 4x768 s1,4")
        self.assertIn("y0[c0 + c1 * 4u]", src)
        aten_plan.save(self.plan, [g], {g.source: src})
        fz = self.shipped_fuser()
        self.chain(fz, strides=(1, 4))
        self.assertEqual((fz.stats.shipped, fz.stats.fallbacks), (1, {}))
        for other in (None, (1024, 1), (1, 8)):
            fz = self.shipped_fuser()
            self.chain(fz, strides=other)
            self.assertEqual((fz.stats.shipped, fz.stats.fallbacks),
                             (0, {"plan-mismatch": 1}), other)

    def test_describe_keys_follow_strides(self):
        Ext, Node = aten_gen.Ext, aten_ops.Node
        nodes = [Node("neg", [("x", 0)], "f16", {})]

        def key(st, ost=None, xshape=(4, 768)):
            x = Ext("f16", "strided", strides=st) if st else Ext("f16")
            xs = st or (768, 1)
            return aten_plan.describe(["aten::neg"], nodes, [x], [xshape], [xs], (4, 768),
                                      [0], ost).key
        base = key(None)
        self.assertEqual(key(None, [None]), base)     # row-major outputs: the key of before
        keys = {base, key((1, 4)), key((1024, 1)), key((0, 1), xshape=(768,)),
                key(None, [(1, 4)]), key((1, 4), [(1, 4)])}
        self.assertEqual(len(keys), 6)
        # an expanded input is read once per distinct element
        x = Ext("f16", "strided", strides=(0, 1))
        two = nodes + [Node("neg", [("n", 0)], "f16", {})]
        eager = (768 * 2 + 6144) + (6144 + 6144)
        self.assertEqual(aten_plan.traffic(two, [x], (4, 768), [1]),
                         (1, eager - 768 * 2 - 6144))

    def test_save_refuses_a_bundle(self):
        with self.assertRaises(ValueError):
            aten_plan.save(self.dir, [], {})


if __name__ == "__main__":
    unittest.main()
