"""Tests of kplan.aten_fuse's deferral and flush rules, CPU only, no torch.

A small stand-in torch (below) gives tensors with shapes, strides, dtypes and
fake addresses, and ATen ops with schemas; a stand-in runtime records the
kernels kplan compiles and launches. What is checked: which ops join a chain,
which outputs the fused kernel writes (only those still held), that a lone op
runs through its out= overload, which ops flush the chain and which run
before it, and the reasons counted for ops left alone.
"""
import gc
import os
import sys
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

from kplan import aten_fuse  # noqa: E402


def make_torch():
    T = types.ModuleType("torch")
    log = []
    T.log = log

    class dtype(object):
        def __init__(self, n, size):
            self.n, self.itemsize = n, size

        def __repr__(self):
            return "torch." + self.n
    T.float32, T.float16, T.bfloat16, T.bool, T.int64 = (
        dtype("float32", 4), dtype("float16", 2), dtype("bfloat16", 2), dtype("bool", 1),
        dtype("int64", 8))

    class device(object):
        def __init__(self, t, index=None):
            self.type, _, i = str(t).partition(":")
            self.index = int(i) if i else index

        def __eq__(self, o):
            return self.type == o.type

        def __ne__(self, o):
            return not self == o
    T.device = device
    addr = [0x10000]

    class Tensor(object):
        def __init__(self, shape, dt, strides=None, dev="cuda", requires_grad=False, base=None):
            self.shape = tuple(shape)
            self.dtype = dt
            self.device = device(dev)
            self.requires_grad = requires_grad
            st, acc = [], 1
            for s in reversed(self.shape):
                st.insert(0, acc)
                acc *= s
            self._strides = tuple(strides) if strides else tuple(st)
            self._contig = strides is None or all(
                n == 1 or a == b for n, a, b in zip(self.shape, self._strides, st))
            self._ptr = addr[0]
            addr[0] += 0x10000
            # a view (base=...) shares its base's storage
            self._storage = base._storage if base is not None else self._ptr

        def untyped_storage(self):
            return types.SimpleNamespace(data_ptr=lambda: self._storage)

        def dim(self):
            return len(self.shape)

        def is_contiguous(self):
            return self._contig

        def stride(self):
            return self._strides

        def numel(self):
            n = 1
            for s in self.shape:
                n *= s
            return n

        def data_ptr(self):
            return self._ptr

        def copy_(self, src):
            log.append(("copy_", self, src))
            return self

        def fill_(self, v):
            log.append(("fill_", self, v))
            return self
    T.Tensor = Tensor
    T.strided = "strided"
    T.get_default_dtype = lambda: T.float32
    T.empty = lambda shape, dtype, device: Tensor(shape, dtype)
    T.empty_strided = lambda shape, strides, dtype, device: Tensor(
        shape, dtype, strides, dev=str(device) if not isinstance(device, T.device) else
        device.type)
    T.is_grad_enabled = lambda: False

    def broadcast_shapes(*shapes):
        n = max(len(s) for s in shapes)
        out = []
        for d in range(n):
            dims = [s[len(s) - n + d] for s in shapes if len(s) - n + d >= 0]
            big = max(dims)
            if any(x not in (1, big) for x in dims):
                raise RuntimeError("shapes")
            out.append(big)
        return tuple(out)
    T.broadcast_shapes = broadcast_shapes

    class Stream(object):
        cuda_stream = 0x5

        def __eq__(self, o):
            return True

        def __ne__(self, o):
            return False
    stream = Stream()

    class _Ctx(object):
        def __init__(self, s):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False
    class CudaStream(object):
        def wait_event(self, e):
            log.append(("wait_event",))

    class Event(object):
        def record(self, stream=None):
            log.append(("record",))
    T.cuda = types.SimpleNamespace(current_stream=lambda d=None: stream, stream=_Ctx,
                                   Stream=CudaStream, Event=Event, current_device=lambda: 0)
    pd = types.ModuleType("torch.utils._python_dispatch")

    class TorchDispatchMode(object):
        # as torch's: a subclass whose _should_skip_dynamo() says True gets its
        # __torch_dispatch__ wrapped in torch._disable_dynamo, whose first call
        # imports torch._dynamo (recorded in T.dynamo_imports)
        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            if cls._should_skip_dynamo() and "__torch_dispatch__" in cls.__dict__:
                raw = cls.__dict__["__torch_dispatch__"]

                def wrapped(*a, **k):
                    T.dynamo_imports += 1
                    return raw(*a, **k)
                cls.__torch_dispatch__ = wrapped

        @classmethod
        def _should_skip_dynamo(cls):
            return True

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False
    pd.TorchDispatchMode = TorchDispatchMode
    pd._disable_current_modes = lambda: _Ctx(None)
    pytree = types.ModuleType("torch.utils._pytree")

    def tree_map(f, x):
        if isinstance(x, tuple):
            return tuple(tree_map(f, y) for y in x)
        if isinstance(x, list):
            return [tree_map(f, y) for y in x]
        if isinstance(x, dict):
            return {k: tree_map(f, v) for k, v in x.items()}
        return f(x)

    def tree_leaves(x):
        out = []
        tree_map(out.append, x)
        return out
    pytree.tree_map, pytree.tree_leaves = tree_map, tree_leaves
    utils = types.ModuleType("torch.utils")
    utils._pytree = pytree
    utils._python_dispatch = pd
    T.utils = utils
    return T, {"torch": T, "torch.utils": utils, "torch.utils._pytree": pytree,
               "torch.utils._python_dispatch": pd}


class Arg(object):
    def __init__(self, name, typ, write=False):
        self.name, self.type, self.kwarg_only = name, typ, name == "out"
        self.alias_info = types.SimpleNamespace(is_write=True) if write else None


class Op(object):
    """An ATen op overload: name(), _schema.arguments, overloadpacket."""

    def __init__(self, T, name, args, impl, packet=None):
        self.T, self._name, self.impl = T, name, impl
        self._schema = types.SimpleNamespace(arguments=args)
        self.overloadpacket = packet

    def name(self):
        return self._name

    def __call__(self, *a, **kw):
        # a call on meta tensors (the fuser asking eager's output layout)
        # launches nothing: not logged
        if not any(getattr(getattr(x, "device", None), "type", None) == "meta" for x in a):
            self.T.log.append((self._name,) + a + tuple(sorted(kw.items())))
        return self.impl(*a, **kw)


def layout_of(T, x, shape):
    """TensorIterator's output layout, roughly: the dims in the memory order
    of the first tensor of the output's shape (its strides descending), dense."""
    if tuple(x.shape) != tuple(shape) or x.is_contiguous():
        return None
    order = sorted(range(len(shape)), key=lambda d: -x.stride()[d])
    st, acc = [0] * len(shape), 1
    for d in reversed(order):
        st[d] = acc
        acc *= shape[d]
    return tuple(st)


def ops(T):
    def fresh(x, *a, **kw):
        # on meta tensors (the fuser asks the layout) as eager would: x's memory order
        ts = [x] + [y for y in a if isinstance(y, T.Tensor)]
        shape = T.broadcast_shapes(*[t.shape for t in ts])
        for t in ts:
            if tuple(t.shape) == tuple(shape):
                return T.Tensor(shape, x.dtype, layout_of(T, t, shape), dev=x.device.type)
        return T.Tensor(shape, x.dtype, dev=x.device.type)

    class Packet(object):
        def __init__(me, **ovs):
            me.ovs = ovs
            for k, v in ovs.items():
                setattr(me, k, v)

        def overloads(me):
            return list(me.ovs)
    ts, tt = "Tensor", "Tensor"
    mul_out = Op(T, "aten::mul.out", [Arg("self", ts), Arg("other", tt), Arg("out", ts, True)],
                 lambda *a, **k: k["out"])
    mul = Op(T, "aten::mul.Tensor", [Arg("self", ts), Arg("other", tt)], fresh)
    mul.overloadpacket = Packet(Tensor=mul, out=mul_out)
    O = types.SimpleNamespace(
        mul=mul, mul_out=mul_out,
        tanh=Op(T, "aten::tanh", [Arg("self", ts)], fresh),
        add=Op(T, "aten::add.Tensor", [Arg("self", ts), Arg("other", tt),
                                       Arg("alpha", "Scalar")], fresh),
        mm=Op(T, "aten::mm", [Arg("self", ts), Arg("mat2", ts)], fresh),
        add_=Op(T, "aten::add_.Tensor", [Arg("self", ts, True), Arg("other", tt),
                                         Arg("alpha", "Scalar")], lambda x, *a, **k: x),
        sum=Op(T, "aten::sum", [Arg("self", ts)], lambda x: T.Tensor((), x.dtype)),
        scalar_tensor=Op(T, "aten::scalar_tensor", [Arg("s", "Scalar")],
                         lambda v, dtype=None, device=None: T.Tensor((), dtype or T.float32)),
        where=Op(T, "aten::where.self", [Arg("condition", ts), Arg("self", ts),
                                         Arg("other", ts)],
                 lambda c, a, b: fresh(c, a, b)))
    where_out = Op(T, "aten::where.self_out", [Arg("condition", ts), Arg("self", ts),
                                               Arg("other", ts), Arg("out", ts, True)],
                   lambda *a, **k: k["out"])
    O.where.overloadpacket = Packet(**{"self": O.where, "self_out": where_out})

    def layer_norm(x, shape, w=None, b=None, eps=1e-5):
        st = tuple(x.shape[:-1]) + (1,)
        return (T.Tensor(x.shape, x.dtype), T.Tensor(st, T.float32), T.Tensor(st, T.float32))
    O.layer_norm = Op(T, "aten::native_layer_norm", [
        Arg("input", ts), Arg("normalized_shape", "SymInt[]"), Arg("weight", "Tensor?"),
        Arg("bias", "Tensor?"), Arg("eps", "float")], layer_norm)

    def pad(x, p, value=0.0):
        shape = list(x.shape)
        for j in range(len(p) // 2):
            shape[len(shape) - 1 - j] += p[2 * j] + p[2 * j + 1]
        return T.Tensor(tuple(shape), x.dtype, dev=x.device.type)
    O.pad = Op(T, "aten::constant_pad_nd", [Arg("self", ts), Arg("pad", "SymInt[]"),
                                            Arg("value", "Scalar")], pad)
    # RMSNorm written as ops: x.float(), pow(2), mean(-1, keepdim=True), rsqrt
    O.pow = Op(T, "aten::pow.Tensor_Scalar", [Arg("self", ts), Arg("exponent", "Scalar")], fresh)
    O.rsqrt = Op(T, "aten::rsqrt", [Arg("self", ts)], fresh)
    O.to_copy = Op(T, "aten::_to_copy", [Arg("self", ts), Arg("dtype", "ScalarType?")],
                   lambda x, dtype=None: T.Tensor(x.shape, dtype or x.dtype, dev=x.device.type))
    mean_args = [Arg("self", ts), Arg("dim", "int[1]?"), Arg("keepdim", "bool"),
                 Arg("dtype", "ScalarType?")]
    O.mean = Op(T, "aten::mean.dim", mean_args, lambda x, dim, keepdim=False, dtype=None:
                T.Tensor(tuple(x.shape[:-1]) + (1,), x.dtype, dev=x.device.type))
    O.mean_out = Op(T, "aten::mean.out", mean_args + [Arg("out", ts, True)],
                    lambda *a, **k: k["out"])
    O.mean.overloadpacket = Packet(dim=O.mean, out=O.mean_out)

    def cat(ts, dim=0):
        shape = list(ts[0].shape)
        shape[dim] = sum(t.shape[dim] for t in ts)
        return T.Tensor(tuple(shape), ts[0].dtype, dev=ts[0].device.type)
    O.cat = Op(T, "aten::cat", [Arg("tensors", "Tensor[]"), Arg("dim", "int")], cat)
    O.index_copy_ = Op(T, "aten::index_copy_", [Arg("self", ts, True), Arg("dim", "int"),
                                                Arg("index", ts), Arg("source", ts)],
                       lambda x, *a: x)
    O.arange = Op(T, "aten::arange", [Arg("end", "Scalar"), Arg("dtype", "ScalarType?"),
                                      Arg("device", "Device?")],
                  lambda end, dtype=None, device=None: T.Tensor((end,), T.int64))
    O.clone = Op(T, "aten::clone", [Arg("self", ts), Arg("memory_format", "MemoryFormat?")],
                 fresh)
    T.ops = types.SimpleNamespace(aten=types.SimpleNamespace(
        clone=types.SimpleNamespace(default=O.clone)))
    for o in (O.tanh, O.add, O.mm, O.add_, O.sum, O.scalar_tensor, O.layer_norm, O.pad, O.pow,
              O.rsqrt, O.to_copy, O.cat, O.index_copy_, O.clone, O.arange):
        o.overloadpacket = Packet(default=o)
    return O


class FakeCRT(object):
    can_fuse = True

    def __init__(self):
        self.loads, self.launches = [], []

    def kernel_load(self, src, name):
        self.loads.append((name, src))
        return 0x1000 + len(self.loads)

    def kernel_launch(self, fn, grid, block, stream, ptrs):
        self.launches.append((fn, grid, block, stream, list(ptrs)))
        return 0


def run_op(fz, op, *args, **kw):
    """What FuseMode.__torch_dispatch__ does."""
    out = fz.defer_norm(op, args, kw) if fz.is_norm(op) else \
        fz.defer_mean(op, args, kw) if fz.means_on and fz.is_mean(op) else \
        fz.defer(op, args, kw)
    if out is not None:
        return out
    fz.before(op, args, kw)
    return op(*args, **kw)


def fake_torch(tc):
    """Put the fake torch in sys.modules for test case tc (undone at its
    cleanup), empty aten_fuse's caches: (T, its ops)."""
    T, mods = make_torch()
    p = mock.patch.dict(sys.modules, mods)
    p.start()
    tc.addCleanup(p.stop)
    for c in (aten_fuse._DT, aten_fuse._kernels, aten_fuse._out_ops, aten_fuse._writes,
              aten_fuse._layouts):
        c.clear()
    return T, ops(T)


class TestFuser(unittest.TestCase):
    def setUp(self):
        self.T, self.O = fake_torch(self)
        self.crt = FakeCRT()
        self.fz = aten_fuse.Fuser(self.crt)

    def run_op(self, op, *args, **kw):
        return run_op(self.fz, op, *args, **kw)

    def x(self, *shape, **kw):
        return self.T.Tensor(shape or (4, 768), kw.pop("dtype", self.T.float16), **kw)

    def test_chain_writes_only_what_is_held(self):
        O, x = self.O, self.x()
        t = self.run_op(O.mul, x, 0.5)
        u = self.run_op(O.tanh, t)
        y = self.run_op(O.add, u, 1.0)
        del t, u
        gc.collect()
        self.assertEqual(self.crt.launches, [])         # nothing launched yet
        self.run_op(O.sum, y)                          # reads y: flush first
        self.assertEqual(len(self.crt.launches), 1)
        fn, grid, block, stream, ptrs = self.crt.launches[0]
        self.assertEqual(ptrs, [x.data_ptr(), y.data_ptr()])
        self.assertEqual((grid, block, stream), (12, 256, 0x5))
        st = self.fz.stats
        self.assertEqual((st.chains, st.ops_fused, st.dead_outputs), (1, 3, 2))
        src = self.crt.loads[0][1]
        self.assertIn("tanhf(", src)
        self.assertIn("y0[i] = h2;", src)

    def test_held_intermediate_is_written(self):
        O, x = self.O, self.x()
        t = self.run_op(O.mul, x, 0.5)
        y = self.run_op(O.tanh, t)
        self.fz.flush()
        self.assertEqual(self.crt.launches[0][4], [x.data_ptr(), t.data_ptr(), y.data_ptr()])

    def test_fresh_output_op_runs_before_the_chain(self):
        O, x, w = self.O, self.x(), self.x()
        g = self.run_op(O.tanh, x)                     # SwiGLU-like: act(gate) ...
        up = self.run_op(O.mm, w, w)                   # ... a GEMM in between ...
        self.assertEqual(self.crt.launches, [])
        y = self.run_op(O.mul, g, up)                  # ... joins the same chain
        del g
        self.fz.flush()
        self.assertEqual(self.fz.stats.ops_fused, 2)
        self.assertEqual(self.crt.launches[0][4], [x.data_ptr(), up.data_ptr(), y.data_ptr()])

    def test_writing_op_flushes(self):
        O, x, z = self.O, self.x(), self.x()
        y = self.run_op(O.tanh, x)
        self.run_op(O.mul, y, 2.0)
        self.run_op(O.add_, z, x)                       # writes what no chain reads
        self.assertEqual(self.crt.launches, [])
        view = self.T.Tensor(x.shape, x.dtype, base=x)
        self.run_op(O.add_, view, z)                    # changes what the chain read
        self.assertEqual(len(self.crt.launches), 1)
        del y

    def test_writing_op_of_unknown_schema_flushes(self):
        O, x = self.O, self.x()
        y = self.run_op(O.tanh, x)
        self.run_op(O.mul, y, 2.0)
        odd = aten_fuse.written
        with mock.patch.object(aten_fuse, "written", lambda *a: None):
            self.run_op(O.add_, self.x(), x)
        self.assertIs(aten_fuse.written, odd)
        self.assertEqual(len(self.crt.launches), 1)
        del y

    def test_lone_op_runs_through_out(self):
        O, x, y = self.O, self.x(), self.x()
        r = self.run_op(O.mul, x, y)
        self.fz.flush()
        self.assertEqual(self.crt.launches, [])
        self.assertEqual(self.T.log[-1][0], "aten::mul.out")
        self.assertIs(dict(self.T.log[-1][3:])["out"], r)
        self.assertEqual((self.fz.stats.ops_alone, self.fz.stats.alone_copies), (1, 0))

    def test_refusals(self):
        O = self.O
        cases = [((self.x(4, 768), self.x(4, 768, dtype=self.T.float32)), "mixed-dtypes"),
                 ((self.x(4, 768), self.x(3, 768)), "broadcast"),
                 ((self.x(4, 768, dtype=self.T.int64), 2.0), "dtype"),
                 ((self.x(4, 768, dev="cpu"), 2.0), "device")]
        for args, reason in cases:
            self.assertIsNone(self.fz.defer(O.mul, args, {}), reason)
            self.assertEqual(self.fz.stats.refused.get(reason, 0) > 0, True, reason)

    def test_row_and_scalar_inputs_join(self):
        O, x = self.O, self.x()
        b, s = self.x(768), self.x(1)
        y = self.run_op(O.add, x, b)
        y = self.run_op(O.mul, y, s)
        self.fz.flush()
        src = self.crt.loads[0][1]
        self.assertIn("x1[i % 768u]", src)
        self.assertIn("x2[0]", src)

    def test_copy_to_another_device_is_not_deferred(self):
        to = Op(self.T, "aten::_to_copy", [Arg("self", "Tensor")], lambda x, **k: x)
        x = self.x()
        self.assertIsNone(self.fz.defer(to, (x,), {"device": "cpu"}))
        self.assertEqual(self.fz.stats.refused, {"device": 1})
        self.assertIsNotNone(self.fz.defer(to, (x,), {"dtype": self.T.float32,
                                                      "device": "cuda"}))

    def test_trailing_broadcast_joins(self):
        # an RMSNorm's x * rsqrt(var + eps): var is [.., S, 1]
        O = self.O
        x, v, m = self.x(2, 4, 768), self.x(2, 4, 1), self.x(4, 1)
        y = self.run_op(O.mul, x, v)
        y = self.run_op(O.add, y, m)
        self.fz.flush()
        src = self.crt.loads[0][1]
        self.assertIn("x1[i / 768u]", src)
        self.assertIn("x2[(i / 768u) % 4u]", src)
        # not one range [a, b) of the chain's dims: read strided (0 on dim 1)
        z = self.run_op(O.mul, x, self.x(2, 1, 768))
        z = self.run_op(O.mul, z, 2.0)
        self.fz.flush()
        self.assertIn("x1[c0 * 768u + c2]", self.crt.loads[1][1])
        del y, z

    # -- strided inputs and outputs ----------------------------------------
    def test_transposed_input_gives_a_permuted_output(self):
        # x.t() of a [768, 4] tensor: eager's output follows its memory order
        O, xt = self.O, self.x(4, 768, strides=(1, 4))
        y = self.run_op(O.tanh, xt)
        self.assertEqual((y.shape, y.stride()), ((4, 768), (1, 4)))
        z = self.run_op(O.mul, y, 0.5)
        self.assertEqual(z.stride(), (1, 4))
        self.fz.flush()
        self.assertEqual(self.fz.stats.chains, 1)
        self.assertEqual(self.fz.stats.strided, 2)
        self.assertEqual(self.fz.stats.refused, {})
        src = self.crt.loads[0][1]
        self.assertIn("x0[c0 + c1 * 4u]", src)        # read and written in one order
        self.assertIn("y0[c0 + c1 * 4u]", src)
        self.assertEqual(self.crt.launches[0][4], [xt.data_ptr(), y.data_ptr(), z.data_ptr()])

    def test_sliced_inputs(self):
        # x[..., :32] and x[..., 32:] of a contiguous [4, 64]: a gap after each row
        O, base = self.O, self.x(4, 64)
        lo = self.T.Tensor((4, 32), self.T.float16, strides=(64, 1))
        hi = self.T.Tensor((4, 32), self.T.float16, strides=(64, 1))
        hi._ptr = lo._ptr = base.data_ptr()
        hi._ptr += 32 * 2                       # the storage offset is in data_ptr
        y = self.run_op(O.mul, lo, hi)
        self.assertEqual(y.stride(), (32, 1))   # dense: contiguous
        y = self.run_op(O.add, y, self.x(4, 32))
        self.fz.flush()
        src = self.crt.loads[0][1]
        self.assertIn("x0[c0 * 64u + c1]", src)
        self.assertIn("x1[c0 * 64u + c1]", src)
        self.assertIn("x2[i]", src)
        self.assertIn("y0[i]", src)
        self.assertEqual(self.crt.launches[0][4][:2], [base.data_ptr(), base.data_ptr() + 64])
        del y

    def test_expanded_and_outer_product_inputs(self):
        O = self.O
        e = self.x(4, 768, strides=(0, 1))           # w.expand(4, 768)
        y = self.run_op(O.mul, self.x(4, 768), e)
        y = self.run_op(O.add, y, 1.0)
        self.fz.flush()
        self.assertIn("x1[c1]", self.crt.loads[0][1])
        # both operands broadcast: an outer product
        a, b = self.x(4, 1), self.x(1, 768)
        z = self.run_op(O.mul, a, b)
        z = self.run_op(O.tanh, z)
        self.assertEqual(z.shape, (4, 768))
        self.fz.flush()
        self.assertEqual(self.fz.stats.chains, 2)
        self.assertEqual(self.fz.stats.refused, {})
        del y, z

    def test_overlapping_output_layout_is_refused(self):
        T = self.T
        odd = Op(T, "aten::neg", [Arg("self", "Tensor")],
                 lambda x: T.Tensor(x.shape, x.dtype, (0, 1), dev=x.device.type))
        x = self.x(4, 768, strides=(1, 4))
        self.assertIsNone(self.fz.defer(odd, (x,), {}))
        self.assertEqual(self.fz.stats.refused, {"layout": 1})

    def test_layout_is_cached(self):
        O, calls = self.O, []
        orig = self.T.empty_strided

        def es(*a, **k):
            calls.append(k.get("device") if isinstance(k.get("device"), str) else "real")
            return orig(*a, **k)
        self.T.empty_strided = es
        xt = self.x(4, 768, strides=(1, 4))
        for _ in range(3):
            y = self.run_op(O.tanh, xt)
        self.assertEqual(calls, ["meta", "real", "real", "real"])
        del y

    def test_strided_outputs_op_by_op(self):
        # no compiler: the out= variants write into the permuted tensors handed out
        self.crt.can_fuse = False
        O, xt = self.O, self.x(4, 768, strides=(1, 4))
        y = self.run_op(O.mul, xt, 0.5)
        z = self.run_op(O.mul, y, 2.0)
        self.fz.flush()
        outs = [dict(e[3:])["out"] for e in self.T.log if e[0] == "aten::mul.out"]
        self.assertEqual(len(outs), 2)
        self.assertIs(outs[0], y)
        self.assertIs(outs[1], z)
        self.assertEqual(z.stride(), (1, 4))

    def test_shape_change_starts_a_new_chain(self):
        O = self.O
        a = self.run_op(O.tanh, self.x(4, 768))
        a = self.run_op(O.tanh, a)
        b = self.run_op(O.tanh, self.x(8, 768))
        b = self.run_op(O.tanh, b)
        self.fz.flush()
        self.assertEqual(self.fz.stats.chains, 2)
        del a, b

    def test_no_compiler_runs_op_by_op(self):
        self.crt.can_fuse = False
        O, x = self.O, self.x()
        y = self.run_op(O.tanh, self.run_op(O.mul, x, 0.5))
        self.fz.flush()
        self.assertEqual(self.fz.stats.fallbacks, {"no-compiler": 1})
        self.assertEqual(self.fz.stats.ops_alone, 2)
        del y

    def test_event_record_launches_the_chain_first(self):
        O, x = self.O, self.x()
        rec, we = self.T.cuda.Event.record, self.T.cuda.Stream.wait_event
        with aten_fuse.mode(self.fz):
            self.assertIsNot(self.T.cuda.Event.record, rec)
            y = self.run_op(O.tanh, self.run_op(O.mul, x, 0.5))
            self.assertEqual(self.crt.launches, [])
            self.T.cuda.Event().record()       # another stream will wait for this
            self.assertEqual(len(self.crt.launches), 1)
            self.assertEqual(self.T.log[-1], ("record",))
            self.T.cuda.Stream().wait_event(None)   # nothing pending: no launch
            self.assertEqual(len(self.crt.launches), 1)
        self.assertIs(self.T.cuda.Event.record, rec)
        self.assertIs(self.T.cuda.Stream.wait_event, we)
        del y

    def test_mode_imports_no_dynamo(self):
        # torch's dynamo wrapper around the mode (its first call imports
        # torch._dynamo: seconds) only in a process that has imported dynamo
        O, x = self.O, self.x()
        self.T.dynamo_imports = 0
        saved = sys.modules.pop("torch._dynamo", None)
        try:
            m = aten_fuse.mode(self.fz)
            with m:
                y = m.__torch_dispatch__(O.tanh, (), (x,), {})
            self.assertEqual(self.T.dynamo_imports, 0)
            sys.modules["torch._dynamo"] = types.ModuleType("torch._dynamo")
            m = aten_fuse.mode(self.fz)
            with m:
                z = m.__torch_dispatch__(O.tanh, (), (y,), {})
            self.assertEqual(self.T.dynamo_imports, 1)
        finally:
            sys.modules.pop("torch._dynamo", None)
            if saved is not None:
                sys.modules["torch._dynamo"] = saved
        self.assertEqual(self.fz.stats.ops_alone, 2)   # both went through the fuser
        del y, z

    def test_op_log(self):
        import json
        import tempfile
        O, x = self.O, self.x()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "aten.jsonl")
            m = aten_fuse.mode(self.fz, oplog=aten_fuse.OpLog("mlp"), oplog_path=path)
            with m:
                t = m.__torch_dispatch__(O.mul, (), (x, 0.5), {})
                y = m.__torch_dispatch__(O.tanh, (), (t,), {})
                m.__torch_dispatch__(O.sum, (), (y,), {})
                m.__torch_dispatch__(O.mul, (), (x, self.x(4, 768, dtype=self.T.float32)), {})
            with open(path) as f:
                recs = [json.loads(line) for line in f]
        self.assertEqual([r["op"] for r in recs],
                         ["aten::mul.Tensor", "aten::tanh", "aten::sum", "aten::mul.Tensor"])
        self.assertEqual([(r.get("chain"), r.get("node"), r.get("fate")) for r in recs[:2]],
                         [(0, 0, "fused"), (0, 1, "fused")])
        self.assertEqual(recs[2]["reason"], "not-pointwise")
        self.assertEqual(recs[3]["reason"], "mixed-dtypes")
        self.assertEqual(recs[0]["args"][0], {"shape": [4, 768], "stride": [768, 1],
                                              "dtype": "float16", "ptr": "0x%x" % x.data_ptr()})
        self.assertEqual(recs[0]["args"][1], 0.5)
        self.assertEqual(recs[0]["region"], "mlp")
        del t, y

    # -- scalar_tensor values baked into the chain -----------------------
    def consts(self, m=None):
        T, O = self.T, self.O
        mk = (lambda v: m.__torch_dispatch__(O.scalar_tensor, (), (v,),
                                              {"dtype": T.float16, "device": "cuda"})) \
            if m is not None else \
            (lambda v: self.fz.defer_const(O.scalar_tensor, (v,),
                                           {"dtype": T.float16, "device": "cuda"}))
        return mk(float("-inf")), mk(0.0)

    def test_where_between_two_scalar_tensors_is_one_kernel(self):
        T, O = self.T, self.O
        mask = self.x(1, 1, 1, 8, dtype=T.bool)
        lo, zero = self.consts()
        w = self.run_op(O.where, mask, zero, lo)      # SDPA's mask as a bias
        del lo, zero
        gc.collect()
        self.run_op(O.sum, w)
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [mask.data_ptr(), w.data_ptr()])
        src = self.crt.loads[0][1]
        self.assertIn("0xfc00", src)                  # -inf in half, a literal
        self.assertNotIn("fill_", [e[0] for e in T.log])
        st = self.fz.stats.as_dict()
        self.assertEqual((st["consts"], st["consts_filled"], st["chains"]), (2, 0, 1))

    def test_scalar_tensor_read_outside_a_chain_is_filled_first(self):
        T, O = self.T, self.O
        m = aten_fuse.mode(self.fz)
        with m:
            lo, zero = self.consts(m)
            self.assertEqual([e[0] for e in T.log], [])     # nothing run yet
            m.__torch_dispatch__(O.sum, (), (lo,), {})
            names = [e[0] for e in T.log]
            self.assertEqual(names, ["fill_", "aten::sum"])
            self.assertIs(T.log[0][1], lo)
            self.assertEqual(T.log[0][2], float("-inf"))
        # zero, still held, is filled when the capture ends; lo only once
        self.assertEqual([(e[0], e[2]) for e in T.log if e[0] == "fill_"],
                         [("fill_", float("-inf")), ("fill_", 0.0)])
        self.assertEqual(self.fz.stats.consts_filled, 2)
        del zero

    def test_scalar_tensor_beyond_the_range_is_eager(self):
        T, O = self.T, self.O
        # eager raises (no half holds 1e6): the op runs as it is and raises there
        self.assertIsNone(self.fz.defer_const(O.scalar_tensor, (1e6,),
                                              {"dtype": T.float16, "device": "cuda"}))
        self.assertIsNotNone(self.fz.defer_const(O.scalar_tensor, (1e6,),
                                                 {"dtype": T.float32, "device": "cuda"}))

    def test_dropped_scalar_tensor_is_never_filled(self):
        T = self.T
        m = aten_fuse.mode(self.fz)
        with m:
            lo, zero = self.consts(m)
            del lo, zero
            gc.collect()
        self.assertEqual(T.log, [])
        self.assertEqual(self.fz.consts, {})

    def test_op_by_op_chain_fills_its_scalar_tensors(self):
        T, O = self.T, self.O
        self.crt.can_fuse = False
        mask = self.x(1, 1, 1, 8, dtype=T.bool)
        lo, zero = self.consts()
        w = self.run_op(O.where, mask, zero, lo)
        self.fz.flush()
        names = [e[0] for e in T.log]
        self.assertEqual(names, ["fill_", "fill_", "aten::where.self_out"])
        self.assertIs(dict(T.log[-1][4:])["out"], w)
        del lo, zero

    # -- constant_pad_nd ending a chain ----------------------------------
    def sdpa_bias(self, m=None):
        """SDPA's mask as a bias, padded to 8 elements: where between two
        scalar_tensors, then constant_pad_nd."""
        T, O = self.T, self.O
        mask = self.x(1, 1, 1, 1, dtype=T.bool)
        lo, zero = self.consts(m)
        run = (lambda op, *a: m.__torch_dispatch__(op, (), a, {})) if m is not None \
            else self.run_op
        w = run(O.where, mask, zero, lo)
        del lo, zero
        if m is None:
            p = self.fz.defer_pad(O.pad, (w, [0, 7], 0.0), {})
        else:
            p = run(O.pad, w, [0, 7], 0.0)
        del w
        gc.collect()
        return mask, p

    def test_where_then_pad_is_one_kernel(self):
        mask, p = self.sdpa_bias()
        self.assertEqual(tuple(p.shape), (1, 1, 1, 8))
        self.assertEqual(self.crt.launches, [])
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 1)
        fn, grid, block, stream, ptrs = self.crt.launches[0]
        self.assertEqual(ptrs, [mask.data_ptr(), p.data_ptr()])   # the where's value: dead
        src = self.crt.loads[0][1]
        self.assertIn("kp_in &= (c >= 0) & (c < 1ll)", src)
        self.assertIn("yp[p] = (unsigned short)0x0000;", src)       # the pad value
        st = self.fz.stats.as_dict()
        self.assertEqual((st["pads"], st["chains"], st["ops_fused"], st["consts_filled"]),
                         (1, 1, 2, 0))
        self.assertNotIn("fill_", [e[0] for e in self.T.log])

    def test_pad_through_the_mode_and_its_reader(self):
        self.fz = aten_fuse.Fuser(self.crt, pads=True)
        m = aten_fuse.mode(self.fz, oplog=aten_fuse.OpLog())
        with m:
            mask, p = self.sdpa_bias(m)
            self.assertEqual(self.crt.launches, [])
            m.__torch_dispatch__(self.O.sum, (), (p,), {})    # SDPA reads the bias
            self.assertEqual(len(self.crt.launches), 1)

    def test_pad_is_on_unless_turned_off(self):
        self.assertTrue(aten_fuse.Fuser(self.crt).pads_on)
        # KPLAN_TORCH_FUSE_PAD=0 (or pads=False) leaves constant_pad_nd to ATen
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_PAD": "0"}):
            self.fz = aten_fuse.Fuser(self.crt)
        self.assertFalse(self.fz.pads_on)
        m = aten_fuse.mode(self.fz)
        with m:
            mask, p = self.sdpa_bias(m)
        self.assertEqual(self.fz.stats.pads, 0)
        self.assertFalse(aten_fuse.Fuser(self.crt, pads=False).pads_on)

    def test_pad_refusals(self):
        T, O = self.T, self.O
        x = self.x(2, 6)
        self.assertIsNone(self.fz.defer_pad(O.pad, (x, [0, 2], 0.0), {}))    # no chain
        t = self.run_op(O.tanh, x)
        self.assertIsNone(self.fz.defer_pad(O.pad, (t, [0, -2], 0.0), {}))   # a crop
        self.assertIsNone(self.fz.defer_pad(O.pad, (t, [0, 2], 1e6), {}))    # beyond f16
        self.assertEqual(self.fz.stats.refused, {"pad-input": 1, "pad-args": 2})
        p = self.fz.defer_pad(O.pad, (t, [1, 2, 0, 1], -1.0), {})
        self.assertEqual(tuple(p.shape), (3, 9))
        u = self.run_op(O.tanh, t)                     # sealed: launched, a new chain
        self.assertEqual(len(self.crt.launches), 1)
        self.assertIn("yp[p] = (unsigned short)0xbc00;", self.crt.loads[0][1])   # -1.0
        self.assertEqual(self.crt.launches[0][4][-1], p.data_ptr())
        del u

    def test_pad_op_by_op(self):
        self.crt.can_fuse = False
        mask, p = self.sdpa_bias()
        self.fz.flush()
        names = [e[0] for e in self.T.log]
        self.assertEqual(names, ["fill_", "fill_", "aten::where.self_out",
                                 "aten::constant_pad_nd", "copy_"])
        self.assertIs(self.T.log[-1][1], p)

    # -- cat ending a chain -------------------------------------------------
    def test_cat_of_a_chain_value_is_one_kernel(self):
        """rotate_half's cat(-x2, x1): the chain's value and another tensor."""
        O = self.O
        x, x1 = self.x(1, 4, 1, 4), self.x(1, 4, 1, 4, strides=(32, 8, 8, 1))
        t = self.run_op(O.tanh, x)
        c = self.fz.defer_cat(O.cat, ([t, x1], -1), {})
        self.assertEqual(tuple(c.shape), (1, 4, 1, 8))
        del t
        gc.collect()
        self.assertEqual(self.crt.launches, [])
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [x.data_ptr(), c.data_ptr(), x1.data_ptr()])
        src = self.crt.loads[0][1]
        self.assertIn("if (o3 >= 0ll && o3 < 4ll) {", src)             # the chain's part
        self.assertIn("const unsigned long long i = (unsigned long long)(o3 - 0ll) * 1ull + "
                      "(unsigned long long)o2 * 4ull + (unsigned long long)o1 * 4ull + "
                      "(unsigned long long)o0 * 16ull;", src)
        self.assertIn("} else if (o3 >= 4ll && o3 < 8ll) {", src)      # x1's, at its strides
        self.assertIn("yp[p] = xq0[(o0) * 32ll + (o1) * 8ll + (o2) * 8ll + (o3 - 4ll) * 1ll];",
                      src)
        st = self.fz.stats.as_dict()
        self.assertEqual((st["cats"], st["chains"], st["ops_fused"]), (1, 1, 2))

    def test_cat_refusals(self):
        O, T = self.O, self.T
        x, y = self.x(2, 4), self.x(2, 4)
        self.assertIsNone(self.fz.defer_cat(O.cat, ([x, y], 1), {}))          # no chain
        t = self.run_op(O.tanh, x)
        u = self.run_op(O.add, t, 1.0)
        self.assertIsNone(self.fz.defer_cat(O.cat, ([t, u], 1), {}))          # two pending
        self.assertIsNone(self.fz.defer_cat(O.cat, ([u, self.x(2, 4, dtype=T.float32)], 1),
                                            {}))                              # another dtype
        self.assertIsNone(self.fz.defer_cat(O.cat, ([u, self.x(3, 4)], 1), {}))   # a shape
        self.assertEqual(self.fz.stats.refused, {"cat-input": 2, "cat-args": 2})
        c = self.fz.defer_cat(O.cat, ([y, u], 0), {})                         # the chain second
        self.assertEqual(tuple(c.shape), (4, 4))
        self.fz.flush()
        src = self.crt.loads[0][1]
        self.assertIn("if (o0 >= 2ll && o0 < 4ll) {", src)
        self.assertIn("} else if (o0 >= 0ll && o0 < 2ll) {", src)
        del t

    def test_cat_op_by_op_and_off(self):
        self.crt.can_fuse = False
        O = self.O
        x, x1 = self.x(2, 4), self.x(2, 4)
        c = self.fz.defer_cat(O.cat, ([self.run_op(O.tanh, x), x1], 1), {})
        self.fz.flush()
        names = [e[0] for e in self.T.log]
        self.assertEqual(names[-2:], ["aten::cat", "copy_"])
        self.assertIs(self.T.log[-1][1], c)
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_CAT": "0"}):
            self.assertFalse(aten_fuse.Fuser(self.crt).cats_on)
        self.assertTrue(aten_fuse.Fuser(self.crt).cats_on)

    def rope(self):
        """Llama's q * cos + rotate_half(q) * sin, rotate_half as cat(-x2, x1)
        of q's halves: (q, cos, rot, sin, y)."""
        O = self.O
        q, cos, sin = self.x(1, 4, 1, 8), self.x(1, 1, 1, 8), self.x(1, 1, 1, 8)
        x1, x2 = self.x(1, 4, 1, 4, strides=(32, 8, 8, 1)), self.x(1, 4, 1, 4, strides=(32, 8, 8, 1))
        qc = self.run_op(O.mul, q, cos)
        rot = self.fz.defer_cat(O.cat, ([self.run_op(O.tanh, x2), x1], -1), {})
        y = self.run_op(O.add, qc, self.run_op(O.mul, rot, sin))
        return q, cos, rot, sin, y

    def test_parked_chain_resumes_after_another_shape(self):
        """q * cos waits while rotate_half runs over half the shape: two
        kernels, no op alone."""
        q, cos, rot, sin, y = self.rope()
        gc.collect()
        self.assertEqual(len(self.crt.launches), 1)      # rotate_half's, when rot was read
        self.assertIsNone(self.fz.parked)
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 2)
        self.assertEqual(self.crt.launches[1][4], [q.data_ptr(), cos.data_ptr(), rot.data_ptr(),
                                                   sin.data_ptr(), y.data_ptr()])
        st = self.fz.stats
        self.assertEqual((st.chains, st.ops_fused, st.ops_alone), (2, 5, 0))

    def test_park_is_on_unless_turned_off(self):
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_PARK": "0"}):
            self.fz = aten_fuse.Fuser(self.crt)
        self.assertFalse(self.fz.park_on)
        y = self.rope()
        self.fz.flush()
        st = self.fz.stats
        self.assertEqual((st.chains, st.ops_fused, st.ops_alone), (2, 4, 1))   # q * cos alone
        self.assertEqual(self.T.log[0][0], "aten::mul.out")
        self.assertTrue(aten_fuse.Fuser(self.crt).park_on)
        del y

    def test_reading_a_parked_value_launches_it_first(self):
        O = self.O
        x, z = self.x(8), self.x(4, 8)
        t = self.run_op(O.tanh, self.run_op(O.mul, x, 2.0))   # over (8,): parked next
        u = self.run_op(O.tanh, self.run_op(O.mul, z, 2.0))   # over (4, 8)
        self.assertIsNotNone(self.fz.parked)
        self.assertEqual(self.crt.launches, [])
        v = self.run_op(O.add, u, t)                          # joins u's chain, reads t
        self.assertIsNone(self.fz.parked)
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [x.data_ptr(), t.data_ptr()])
        self.run_op(O.sum, v)                                 # reads v: the rest launches
        self.assertEqual(len(self.crt.launches), 2)
        self.assertIn(t.data_ptr(), self.crt.launches[1][4])
        self.assertFalse(self.fz.pending())

    def test_reading_the_current_chain_leaves_the_parked_one_pending(self):
        """rope over a transposed q (prefill): the cat refuses -x2's layout and
        runs eagerly; it reads -x2 only, so q * cos stays parked."""
        O = self.O
        x, z = self.x(8), self.x(4, 8)
        t = self.run_op(O.tanh, self.run_op(O.mul, x, 2.0))
        u = self.run_op(O.tanh, self.run_op(O.mul, z, 2.0))
        self.run_op(O.sum, u)
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [z.data_ptr(), u.data_ptr()])
        self.assertIsNone(self.fz.chain)
        self.assertIsNotNone(self.fz.parked)
        w = self.run_op(O.add, t, 1.0)                      # resumes the parked chain
        self.assertIsNone(self.fz.parked)
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 2)
        self.assertEqual(self.crt.launches[1][4], [x.data_ptr(), t.data_ptr(), w.data_ptr()])
        del t, w

    def test_a_third_shape_evicts_the_parked_chain(self):
        O = self.O
        a = self.run_op(O.tanh, self.run_op(O.mul, self.x(8), 2.0))
        b = self.run_op(O.tanh, self.run_op(O.mul, self.x(4, 8), 2.0))
        self.assertEqual(self.crt.launches, [])
        c = self.run_op(O.tanh, self.run_op(O.mul, self.x(2, 8), 2.0))
        self.assertEqual(len(self.crt.launches), 1)           # a's: b took its place
        self.assertIs(self.fz.parked.outs[-1](), b)
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 3)
        del a, c

    def test_writing_op_launches_the_chains_that_read_it(self):
        O = self.O
        x, w = self.x(8), self.x(4, 8)
        t = self.run_op(O.tanh, self.run_op(O.mul, x, 2.0))
        u = self.run_op(O.tanh, self.run_op(O.mul, w, 2.0))
        self.run_op(O.add_, x, 1.0)                           # writes what the parked chain read
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4][0], x.data_ptr())
        self.assertIsNone(self.fz.parked)
        self.assertIsNotNone(self.fz.chain)                   # u's reads nothing written
        self.run_op(O.add_, w, 1.0)
        self.assertEqual(len(self.crt.launches), 2)
        self.assertFalse(self.fz.pending())
        del t, u

    def test_lone_copy_of_an_expanded_tensor_is_generated(self):
        """repeat_kv: expand(...).clone() runs in a generated kernel even alone;
        a lone copy of a transposed tensor stays ATen's."""
        O = self.O
        kv = self.x(2, 4, 3, 8, strides=(32, 0, 8, 1))             # expanded over dim 1
        y = self.run_op(O.to_copy, kv)
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [kv.data_ptr(), y.data_ptr()])
        self.assertEqual((self.fz.stats.chains, self.fz.stats.ops_alone), (1, 0))
        z = self.run_op(O.to_copy, self.x(8, 4, strides=(1, 8)))
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.fz.stats.ops_alone, 1)
        del y, z

    def kv_update(self):
        """StaticCache's update after RoPE: cache.index_copy_(2, pos, k * cos):
        (k, cos, cache, pos), the value deferred and dropped."""
        O, T = self.O, self.T
        k, cos = self.x(1, 4, 1, 8), self.x(1, 1, 1, 8)
        cache, pos = self.x(1, 4, 16, 8), self.x(1, dtype=T.int64)
        t = self.run_op(O.mul, k, cos)
        self.assertIs(self.fz.defer_index_copy(O.index_copy_, (cache, 2, pos, t), {}), cache)
        del t
        gc.collect()
        return k, cos, cache, pos

    def test_index_copy_ends_the_chain(self):
        k, cos, cache, pos = self.kv_update()
        self.assertEqual(self.crt.launches, [])
        u = self.run_op(self.O.tanh, self.x(1, 4, 1, 8))
        self.assertEqual(len(self.crt.launches), 1)      # sealed: the next chain launches it
        self.assertEqual(self.crt.launches[0][4], [k.data_ptr(), cos.data_ptr(),
                                                   pos.data_ptr(), cache.data_ptr()])
        src = self.crt.loads[0][1]
        self.assertIn("const long long *xs_index, unsigned short *ys", src)
        self.assertIn("ys[kp_o + (unsigned long long)kp_j * 8ull] = h0;", src)
        st = self.fz.stats.as_dict()
        self.assertEqual((st["index_copies"], st["ops_fused"]), (1, 2))
        del u

    def test_reading_a_view_of_the_written_tensor_launches_the_chain(self):
        """repeat_kv reads cache[:, :, None].expand(...): a view, another
        tensor object over the cache's storage."""
        k, cos, cache, pos = self.kv_update()
        view = self.T.Tensor((1, 4, 4, 16, 8), self.T.float16, (512, 128, 0, 8, 1), base=cache)
        self.assertTrue(self.fz.touches((view,), {}))
        self.run_op(self.O.sum, view)
        self.assertEqual(len(self.crt.launches), 1)
        self.assertFalse(self.fz.pending())

    def test_index_copy_resumes_the_parked_chain_of_its_source(self):
        """Llama: the position arithmetic runs between RoPE and the update,
        parking the RoPE chain; the update ends it all the same."""
        O, T = self.O, self.T
        k, cos = self.x(1, 4, 1, 8), self.x(1, 1, 1, 8)
        cache, pos = self.x(1, 4, 16, 8), self.x(1, dtype=T.int64)
        t = self.run_op(O.mul, k, cos)
        u = self.run_op(O.tanh, self.x(8))                    # another shape: t's chain parked
        self.assertIs(self.fz.parked.outs[0](), t)
        self.assertIs(self.fz.defer_index_copy(O.index_copy_, (cache, 2, pos, t), {}), cache)
        self.assertIs(self.fz.parked.outs[0](), u)            # swapped
        self.assertIsNotNone(self.fz.chain.scatter)
        self.assertEqual(self.crt.launches, [])
        del t
        self.fz.flush()
        st = self.fz.stats.as_dict()
        self.assertEqual((st["index_copies"], st["ops_alone"]), (1, 1))   # u's tanh alone
        self.assertEqual(len(self.crt.launches), 1)
        del u

    def test_index_copy_of_a_tensor_no_chain_computes(self):
        """V's update straight from its GEMM: a copy node reads v, the
        update is one generated kernel."""
        O, T = self.O, self.T
        v = self.x(1, 4, 1, 8, strides=(32, 8, 32, 1))              # a transposed view
        cache, pos = self.x(1, 4, 16, 8), self.x(1, dtype=T.int64)
        self.assertIs(self.fz.defer_index_copy(O.index_copy_, (cache, 2, pos, v), {}), cache)
        self.fz.flush()
        self.assertEqual(self.crt.launches[0][4], [v.data_ptr(), pos.data_ptr(),
                                                   cache.data_ptr()])
        st = self.fz.stats.as_dict()
        self.assertEqual((st["index_copies"], st["ops_fused"], st["ops_alone"]), (1, 2, 0))

    def test_index_copy_at_pending_positions(self):
        """cache.index_copy_(2, arange(5, 6), v): the positions' chain
        launches first, the update is a chain of its own."""
        O, T = self.O, self.T
        v, cache = self.x(1, 4, 1, 8, strides=(32, 8, 32, 1)), self.x(1, 4, 16, 8)
        pos = self.fz.defer_arange(O.arange, (5, 6), {"device": "cuda"})
        self.assertIs(self.fz.defer_index_copy(O.index_copy_, (cache, 2, pos, v), {}), cache)
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [pos.data_ptr()])
        self.fz.flush()
        self.assertEqual(self.crt.launches[1][4], [v.data_ptr(), pos.data_ptr(),
                                                   cache.data_ptr()])

    def test_index_copy_refusals(self):
        O, T = self.O, self.T
        cache, pos = self.x(1, 4, 16, 8), self.x(1, dtype=T.int64)
        k = self.x(1, 4, 1, 8)
        ic = self.fz.defer_index_copy
        self.assertIsNone(ic(O.index_copy_, (cache, 2, pos, self.x(1, 4, 2, 8)), {}))  # a shape
        self.fz.flush()
        t = self.run_op(O.mul, k, 2.0)
        self.assertIsNone(ic(O.index_copy_, (cache, 2, self.x(1), t), {}))     # a float index
        self.assertIsNone(ic(O.index_copy_, (cache, 2, self.x(2, dtype=T.int64), t), {}))
        self.assertIsNone(ic(O.index_copy_, (self.x(1, 4, 16, 8, strides=(0, 0, 8, 1)), 2,
                                             pos, t), {}))                   # broadcast dst
        u = self.run_op(O.mul, self.T.Tensor((1, 4, 1, 8), T.float16, base=cache), t)
        self.assertIsNone(ic(O.index_copy_, (cache, 2, pos, u), {}))          # reads the cache
        self.assertEqual(self.fz.stats.refused, {
            "index-copy-args": 3, "index-copy-layout": 1,
            "index-copy-overlap": 1})
        other = self.x(1, 4, 16, 8)
        self.assertIs(ic(O.index_copy_, (other, -2, pos, u), {}), other)       # dim from the end
        del t, u

    def test_index_copy_op_by_op_and_off(self):
        self.crt.can_fuse = False
        k, cos, cache, pos = self.kv_update()
        self.fz.flush()
        names = [e[0] for e in self.T.log]
        self.assertEqual(names[-2:], ["aten::mul.out", "aten::index_copy_"])
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_INDEX_COPY": "0"}):
            self.assertFalse(aten_fuse.Fuser(self.crt).index_copies_on)
        self.assertTrue(aten_fuse.Fuser(self.crt).index_copies_on)

    def test_position_arithmetic_is_one_int64_kernel(self):
        """StaticCache: arange(1) + cumulative_length, one kernel of int64."""
        O, T = self.O, self.T
        cl = T.Tensor((), T.int64)
        pos = self.fz.defer_arange(O.arange, (1,), {"device": "cuda"})
        self.assertEqual((tuple(pos.shape), pos.dtype), ((1,), T.int64))
        p2 = self.run_op(O.add, pos, cl)
        del pos
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.crt.launches[0][4], [cl.data_ptr(), p2.data_ptr()])
        src = self.crt.loads[0][1]
        self.assertIn("const long long *x0, long long *y0", src)
        self.assertIn("const long long v0 = (long long)((unsigned long long)(0ll) + ", src)
        st = self.fz.stats
        self.assertEqual((st.chains, st.ops_fused), (1, 2))

    def test_int64_refusals(self):
        O, T = self.O, self.T
        i = T.Tensor((4,), T.int64)
        self.assertIsNone(self.fz.defer(O.mul, (i, 0.5), {}))                 # promotes
        self.assertIsNone(self.fz.defer(O.tanh, (i,), {}))
        self.assertIsNone(self.fz.defer(O.add, (i, self.x(4, dtype=T.float32)), {}))
        self.assertIsNone(self.fz.defer_arange(O.arange, (4.0,), {"device": "cuda"}))
        self.assertIsNone(self.fz.defer_arange(O.arange, (4,), {"device": "cpu"}))
        self.assertIsNone(self.fz.defer_arange(O.arange, (4,), {"device": "cuda",
                                                                "dtype": T.float32}))
        self.assertIsNone(self.fz.defer_arange(O.arange, (0,), {"device": "cuda"}))
        self.assertEqual(self.fz.stats.refused, {"dtype": 2, "mixed-dtypes": 1,
                                                 "arange-args": 3, "device": 1})
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_INT": "0"}):
            fz = aten_fuse.Fuser(self.crt)
        self.assertFalse(fz.ints_on)
        self.assertIsNone(fz.defer(O.mul, (i, 2), {}))
        self.assertEqual(fz.stats.refused, {"dtype": 1})
        r = self.fz.defer(O.mul, (i, 2), {})                                  # on: an int
        self.assertEqual(r.dtype, T.int64)

    def test_int64_chain_op_by_op(self):
        """A plan that ships no group for the chain (or no compiler): each op
        through ATen, the arange nobody holds into a fresh int64 tensor."""
        self.crt.can_fuse = False
        O, T = self.O, self.T
        cl = T.Tensor((), T.int64)
        p = self.run_op(O.add, self.fz.defer_arange(O.arange, (1,), {"device": "cuda"}), cl)
        self.fz.flush()
        self.assertEqual([e[0] for e in T.log], ["aten::arange", "copy_", "aten::add.Tensor",
                                                 "copy_"])
        self.assertEqual(T.log[1][1].dtype, T.int64)
        self.assertIs(T.log[-1][1], p)

    def test_lone_arange_is_one_generated_kernel(self):
        O = self.O
        pos = self.fz.defer_arange(O.arange, (2, 9, 3), {"device": "cuda"})
        self.assertEqual(tuple(pos.shape), (3,))
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.T.log, [])                                      # no ATen op, no copy
        self.assertIn("(unsigned long long)(2ll) + ", self.crt.loads[0][1])
        self.assertIn("(unsigned long long)(3ll) * (unsigned long long)(i)", self.crt.loads[0][1])

    def test_llama_update_sequence(self):
        """RoPE of k, then arange(1) + cumulative_length, the counter's add_,
        the update: the RoPE chain waits through the int64 chain and ends in
        the update; the int64 chain launches when the counter is written."""
        O, T = self.O, self.T
        k, cos = self.x(1, 4, 1, 8), self.x(1, 1, 1, 8)
        cache, cl = self.x(1, 4, 16, 8), T.Tensor((), T.int64)
        t = self.run_op(O.mul, k, cos)
        pos = self.run_op(O.add, self.fz.defer_arange(O.arange, (1,), {"device": "cuda"}), cl)
        self.assertIs(self.fz.parked.outs[0](), t)
        self.run_op(O.add_, cl, 1)                                            # the counter
        self.assertEqual(len(self.crt.launches), 1)                           # the int64 chain
        self.assertIn(pos.data_ptr(), self.crt.launches[0][4])
        self.assertIs(self.fz.defer_index_copy(O.index_copy_, (cache, 2, pos, t), {}), cache)
        del t
        self.fz.flush()
        self.assertEqual(len(self.crt.launches), 2)
        self.assertEqual(self.crt.launches[1][4], [k.data_ptr(), cos.data_ptr(),
                                                   pos.data_ptr(), cache.data_ptr()])

    def test_data_ptr_of_a_chain_output_launches_the_chain(self):
        O, x = self.O, self.x()
        orig = self.T.Tensor.__dict__["data_ptr"]
        with aten_fuse.mode(self.fz):
            y = self.run_op(O.tanh, self.run_op(O.mul, x, 0.5))
            x.data_ptr()                        # not a chain output: nothing
            self.assertEqual(self.crt.launches, [])
            p = y.data_ptr()                    # a Triton kernel is about to read y
            self.assertEqual(len(self.crt.launches), 1)
            self.assertEqual(self.crt.launches[0][4][-1], p)
        self.assertIs(self.T.Tensor.__dict__["data_ptr"], orig)


class TestLayerNorm(TestFuser):
    """A residual add, then native_layer_norm of the sum: one row kernel."""

    def ln(self, x, w=None, b=None, shape=None, eps=1e-5):
        return self.run_op(self.O.layer_norm, x, list(shape or [x.shape[-1]]), w, b, eps)

    def test_add_layer_norm_is_one_kernel(self):
        O = self.O
        x, r = self.x(4, 768), self.x(4, 768)
        w, b = self.x(768), self.x(768)
        s = self.run_op(O.add, x, r)                   # the residual sum (held)
        y, mean, rstd = self.ln(s, w, b)
        self.assertEqual(self.crt.launches, [])        # deferred: nothing launched
        self.assertEqual((y.shape, y.dtype), ((4, 768), self.T.float16))
        self.assertEqual((mean.shape, mean.dtype), ((4, 1), self.T.float32))
        self.assertEqual((rstd.shape, rstd.dtype), ((4, 1), self.T.float32))
        del mean, rstd                                 # F.layer_norm drops them
        gc.collect()
        self.run_op(O.mm, y, w)                        # reads y: flush first
        self.assertEqual(len(self.crt.launches), 1)
        fn, grid, block, stream, ptrs = self.crt.launches[0]
        self.assertEqual((grid, block), (4, 128))      # a row per block, ATen's 32 x 4 threads
        self.assertEqual(ptrs, [p.data_ptr() for p in (x, r, w, b, s, y)])
        name, src = self.crt.loads[0]
        self.assertTrue(name.startswith("kp_atenln_"))
        self.assertIn("kp_wonk(kp_x[v * 4 + ii], kp_m, kp_s, kp_rcp[v * 4 + ii]);", src)
        self.assertIn("y0[i] = h0;", src)              # the sum, stored for the next add
        self.assertIn("ln_y[i] = kp_f2h(__fmaf_rn(kp_g[v * 4 + ii], __fmul_rn(rstd, xm)"
                      ", kp_b[v * 4 + ii]));", src)
        self.assertNotIn("ln_mean", src)               # nobody holds mean and rstd
        self.assertNotIn("ln_rstd", src)
        st = self.fz.stats
        self.assertEqual((st.chains, st.ops_fused, st.norms, st.ops_alone), (1, 2, 1, 0))
        self.assertEqual(self.T.log, [("aten::mm", y, w)])
        del s

    def test_dead_sum_is_not_stored(self):
        O = self.O
        x, r = self.x(2, 1024, dtype=self.T.float32), self.x(2, 1024, dtype=self.T.float32)
        s = self.run_op(O.add, x, r)
        y, mean, rstd = self.ln(s)
        del s
        gc.collect()
        self.fz.flush()
        fn, grid, block, stream, ptrs = self.crt.launches[0]
        self.assertEqual(ptrs, [p.data_ptr() for p in (x, r, y, mean, rstd)])
        src = self.crt.loads[0][1]
        self.assertNotIn("y0[i]", src)
        self.assertIn("ln_mean[blockIdx.x] = mean;", src)
        self.assertIn("ln_y[i] = __fmul_rn(rstd, xm);", src)
        self.assertEqual(self.fz.stats.dead_outputs, 1)

    def test_chain_is_sealed_after_the_norm(self):
        O = self.O
        x = self.x()
        s = self.run_op(O.tanh, self.run_op(O.mul, x, 0.5))
        y, _m, _r = self.ln(s)
        del _m, _r
        t = self.run_op(O.tanh, y)                     # reads y: the norm chain first
        self.assertEqual(len(self.crt.launches), 1)
        self.assertIsNotNone(self.fz.chain)            # t begins the next chain
        self.assertNotIn(id(y), self.fz.chain.ids)
        del s, t

    def test_refusals_run_the_op(self):
        O, T = self.O, self.T
        cases = [
            (lambda s: (self.x(4, 768), [768], None, None), "layer-norm-input"),
            (lambda s: (s, [4, 768], None, None), "layer-norm-shape"),
            (lambda s: (s, [768], self.x(768, dtype=T.float32), None), "layer-norm-dtype"),
            (lambda s: (s, [768], self.x(767), None), "layer-norm-params"),
            (lambda s: (s, [768], self.x(768, strides=(2,)), None), "layer-norm-params"),
            (lambda s: (s, [768], misaligned(self.x(768)), None), "layer-norm-path"),
            (lambda s: (s, [768], None, self.x(768)), "layer-norm-bias-only"),
        ]

        def misaligned(t):
            t._ptr += 2          # a view at an odd element: ATen's non-vectorized kernels
            return t
        for make, reason in cases:
            self.T.log.clear()
            s = self.run_op(O.add, self.x(4, 768), self.x(4, 768))
            args = make(s)
            out = self.run_op(O.layer_norm, *(args + (1e-5,)))
            self.assertEqual(self.fz.last_reason, reason)
            self.assertGreater(self.fz.stats.refused.get(reason, 0), 0, reason)
            self.assertEqual(self.T.log[-1][0], "aten::native_layer_norm", reason)
            if reason != "layer-norm-input":
                self.assertIsNone(self.fz.chain)       # it read the sum: flushed first
            else:
                self.assertIsNotNone(self.fz.chain)    # it did not: the chain goes on
            self.assertEqual(len(out), 3)
        # N % 4 != 0: ATen's RowwiseMoments + LayerNormForward kernels
        s = self.run_op(O.add, self.x(4, 766), self.x(4, 766))
        self.ln(s)
        self.assertEqual(self.fz.last_reason, "layer-norm-path")
        self.assertEqual(self.fz.stats.norms, 0)

    def test_strided_chain_is_not_normed(self):
        O = self.O
        xt = self.x(768, 4, strides=(1, 768))          # a transposed view
        s = self.run_op(O.add, xt, 1.0)                # eager's output: column-major too
        self.ln(s, self.x(4))
        self.assertEqual(self.fz.stats.refused.get("layer-norm-layout"), 1)
        self.assertEqual(self.fz.stats.norms, 0)

    def test_scalar_tensor_in_a_normed_chain(self):
        T, O = self.T, self.O
        x = self.x()
        c = self.fz.defer_const(O.scalar_tensor, (0.5,), {"dtype": T.float16, "device": "cuda"})
        s = self.run_op(O.mul, x, c)
        del c
        y, mean, rstd = self.ln(s, self.x(768))
        del mean, rstd
        gc.collect()
        self.fz.flush()
        self.assertEqual(self.fz.stats.norms, 1)
        src = self.crt.loads[0][1]
        self.assertIn("(unsigned short)0x3800", src)   # 0.5 in half, a literal
        self.assertNotIn("fill_", [e[0] for e in T.log])
        del y

    def test_op_by_op_path(self):
        self.crt.can_fuse = False
        O = self.O
        x, r, w = self.x(), self.x(), self.x(768)
        s = self.run_op(O.add, x, r)
        y, mean, rstd = self.ln(s, w)
        del rstd
        gc.collect()
        self.fz.flush()
        self.assertEqual(self.fz.stats.fallbacks, {"no-compiler": 1})
        names = [e[0] for e in self.T.log if e[0].startswith("aten::")]
        self.assertEqual(names[:2], ["aten::add.Tensor", "aten::native_layer_norm"])
        # the functional op, then a copy into each output still held
        at = [e[0] for e in self.T.log].index("aten::native_layer_norm")
        ln = self.T.log[at]
        self.assertIs(ln[1], s)
        copies = [e for e in self.T.log[at:] if e[0] == "copy_"]
        self.assertEqual([c[1] for c in copies], [y, mean])
        self.assertEqual(self.fz.stats.ops_alone, 2)
        self.assertEqual(self.fz.stats.alone["aten::native_layer_norm"], 1)

    def test_describe_names_the_norm(self):
        O = self.O
        found = {}
        self.fz = aten_fuse.Fuser(self.crt, region="blk", found=found)
        x, r, w, b = self.x(), self.x(), self.x(768), self.x(768)
        s = self.run_op(O.add, x, r)
        y, _m, _r = self.ln(s, w, b)
        del _m, _r
        gc.collect()
        self.fz.flush()
        (g, src), = found.values()
        self.assertEqual(g.ops, "aten::add.Tensor -> aten::native_layer_norm")
        self.assertEqual(g.outputs, 2)                 # the sum and the norm's out
        self.assertEqual(g.saved_kernels, 1)
        self.assertIn("kp_atenln_", src)
        # the same chain without the norm has another key
        from kplan import aten_plan
        ch_desc = aten_plan.describe(["aten::add.Tensor"], [aten_fuse.A.Node(
            "add", [("x", 0), ("x", 1)], "f16", {"alpha": 1.0})],
            [aten_fuse.G.Ext("f16"), aten_fuse.G.Ext("f16")], [(4, 768), (4, 768)],
            [(768, 1), (768, 1)], (4, 768), [0])
        self.assertNotEqual(ch_desc.key, g.key)
        del s, y


class TestRowMean(TestFuser):
    """RMSNorm written as ops (Hugging Face's LlamaRMSNorm): the mean over
    the last dim and the ops after it join the chain: one kernel
    (kplan.aten_rms)."""

    def rms(self, x, w, r=None, eps=1e-6, run=None):
        """LlamaRMSNorm of x (+ r first): (the residual sum or None, the output)."""
        O, T = self.O, self.T
        run = run or self.run_op
        s = run(O.add, x, r) if r is not None else x
        h = run(O.to_copy, s, dtype=T.float32)
        v = run(O.mean, run(O.pow, h, 2), [-1], True)
        h = run(O.mul, h, run(O.rsqrt, run(O.add, v, eps)))
        return (s if r is not None else None), run(O.mul, w, run(O.to_copy, h, dtype=x.dtype))

    def chain_f32(self, *shape, **kw):
        """A chain value of f32: x.float() of a fresh f16 tensor."""
        return self.run_op(self.O.to_copy, self.x(*shape, **kw), dtype=self.T.float32)

    def test_decode_rms_norm_is_one_kernel(self):
        O, T = self.O, self.T
        x, r, w = self.x(1, 1, 1024), self.x(1, 1, 1024), self.x(1024)
        s, y = self.rms(x, w, r)
        self.assertEqual(self.crt.launches, [])        # deferred: nothing launched
        self.assertEqual((y.shape, y.dtype), ((1, 1, 1024), T.float16))
        self.run_op(O.mm, y, w)                        # reads y: flush first
        self.assertEqual(len(self.crt.launches), 1)
        fn, grid, block, stream, ptrs = self.crt.launches[0]
        self.assertEqual((grid, block), (1, 256))      # ATen's block of 256 for one row of 1024
        self.assertEqual(ptrs, [p.data_ptr() for p in (x, r, w, s, y)])
        name, src = self.crt.loads[0]
        self.assertTrue(name.startswith("kp_atenrms_"))
        self.assertIn("kp_a[ii] = __fadd_rn(kp_a[ii], v2);", src)   # the pow, summed
        self.assertIn("const float v5 = rsqrtf(v4);", src)           # a row node
        self.assertIn("y0[i] = h0;", src)                            # the residual sum
        self.assertIn("y1[i] = h8;", src)
        st = self.fz.stats
        self.assertEqual((st.chains, st.ops_fused, st.reductions, st.ops_alone, st.dead_outputs),
                         (1, 9, 1, 0, 7))
        self.assertEqual(self.T.log, [("aten::mm", y, w)])
        del s

    def test_prefill_rows(self):
        x, w = self.x(16, 1024), self.x(1024)
        _s, y = self.rms(x, w)
        self.fz.flush()
        fn, grid, block, stream, ptrs = self.crt.launches[0]
        self.assertEqual((grid, block), (1, 512))      # a warp per row, 16 rows in a block
        self.assertEqual(ptrs, [p.data_ptr() for p in (x, w, y)])
        src = self.crt.loads[0][1]
        self.assertIn("kp_row[ty] = __fmul_rn(kp_v, __int_as_float(0x3a800000));", src)
        self.assertNotIn("kp_sh", src)                 # 32 lanes a row: shuffles only

    def test_through_the_mode(self):
        import json
        import tempfile
        O, x, w = self.O, self.x(2, 1024), self.x(1024)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "aten.jsonl")
            m = aten_fuse.mode(self.fz, oplog=aten_fuse.OpLog(), oplog_path=path)
            with m:
                _s, y = self.rms(x, w, run=lambda op, *a, **k: m.__torch_dispatch__(op, (), a, k))
            with open(path) as f:
                recs = [json.loads(line) for line in f]
        self.assertEqual([r["op"] for r in recs][:3],
                         ["aten::_to_copy", "aten::pow.Tensor_Scalar", "aten::mean.dim"])
        self.assertEqual([(r.get("chain"), r.get("node"), r.get("fate")) for r in recs],
                         [(0, k, "fused") for k in range(8)])
        self.assertEqual(self.fz.stats.reductions, 1)
        del y

    def test_refusals_run_the_mean(self):
        O, T = self.O, self.T
        cases = [
            (lambda: (self.chain_f32() and self.x(4, 768, dtype=T.float32), [-1], True), {},
             "mean-input"),
            (lambda: (self.chain_f32(), [0], True), {}, "mean-args"),
            (lambda: (self.chain_f32(), [-1]), {}, "mean-args"),          # keepdim=False
            (lambda: (self.chain_f32(), [-1], True), {"dtype": T.float32}, "mean-args"),
            (lambda: (self.run_op(O.mul, self.x(), 2.0), [-1], True), {}, "mean-dtype"),
            (lambda: (self.chain_f32(1, 200000), [-1], True), {}, "mean-config"),
            (lambda: (self.chain_f32(768, 4, strides=(1, 768)), [-1], True), {}, "mean-layout"),
        ]
        for make, kw, reason in cases:
            self.T.log.clear()
            args = make()
            out = self.run_op(O.mean, *args, **kw)
            self.assertEqual(self.fz.last_reason, reason)
            self.assertGreater(self.fz.stats.refused.get(reason, 0), 0, reason)
            self.assertEqual(self.T.log[-1][0], "aten::mean.dim", reason)
            if reason == "mean-input":
                self.assertIsNotNone(self.fz.chain)    # it did not read the chain: it goes on
            else:
                self.assertIsNone(self.fz.chain)       # it read the chain: flushed first
            self.assertEqual(out.shape[-1], 1)
        self.assertEqual(self.fz.stats.reductions, 0)

    def test_mean_is_on_unless_turned_off(self):
        self.assertTrue(self.fz.means_on)
        # KPLAN_TORCH_FUSE_MEAN=0 (or means=False) leaves the mean to ATen
        with mock.patch.dict(os.environ, {"KPLAN_TORCH_FUSE_MEAN": "0"}):
            self.fz = aten_fuse.Fuser(self.crt)
        self.assertFalse(self.fz.means_on)
        _s, y = self.rms(self.x(2, 1024), self.x(1024))
        self.fz.flush()
        self.assertEqual(self.fz.stats.reductions, 0)
        self.assertIn("aten::mean.dim", [e[0] for e in self.T.log])
        self.assertFalse(aten_fuse.Fuser(self.crt, means=False).means_on)
        del y

    def test_autograd_is_refused(self):
        h = self.chain_f32()
        h.requires_grad = True
        self.T.is_grad_enabled = lambda: True
        self.run_op(self.O.mean, h, [-1], True)
        self.assertEqual(self.fz.last_reason, "autograd")

    def test_one_mean_per_chain(self):
        O = self.O
        h = self.chain_f32()
        v = self.run_op(O.mean, h, [-1], True)
        t = self.run_op(O.mul, h, v)                   # after the mean, reading it
        self.run_op(O.mean, t, [-1], True)
        self.assertEqual(self.fz.last_reason, "mean-sealed")
        self.assertEqual(len(self.crt.launches), 1)    # the first chain, flushed
        self.assertEqual(self.T.log[-1][0], "aten::mean.dim")
        del v

    def test_row_op_reads_row_values_and_scalars_only(self):
        O, T = self.O, self.T
        h = self.chain_f32()
        v = self.run_op(O.mean, h, [-1], True)
        self.run_op(O.add, v, self.x(4, 1, dtype=T.float32))   # a per-row tensor
        self.assertEqual(self.fz.last_reason, "mean-row-input")
        self.assertEqual(len(self.crt.launches), 1)
        self.assertEqual(self.T.log[-1][0], "aten::add.Tensor")
        # a one-element tensor is a scalar
        h = self.chain_f32()
        v = self.run_op(O.mean, h, [-1], True)
        u = self.run_op(O.add, v, self.x(1, dtype=T.float32))
        self.assertIn(id(u), self.fz.chain.ids)
        self.assertEqual(sorted(self.fz.chain.red.rows), [1, 2])
        del u

    def test_chain_after_the_mean_is_sealed_for_norm_and_pad(self):
        O = self.O
        h = self.chain_f32()
        v = self.run_op(O.mean, h, [-1], True)
        t = self.run_op(O.mul, h, v)
        self.run_op(O.layer_norm, t, [768], None, None, 1e-5)
        self.assertEqual(self.fz.last_reason, "layer-norm-sealed")
        self.assertEqual(self.fz.stats.reductions, 1)
        del v

    def test_strided_op_after_the_mean_begins_a_new_chain(self):
        O, T = self.O, self.T
        h = self.chain_f32(768, 4)
        v = self.run_op(O.mean, h, [-1], True)
        t = self.run_op(O.mul, h, v)
        u = self.run_op(O.mul, t, self.x(768, 4, dtype=T.float32, strides=(1, 768)))
        self.assertEqual(len(self.crt.launches), 1)    # the chain with the mean, flushed
        self.assertIsNone(self.fz.chain.red)           # u begins the next one
        self.assertIn(id(u), self.fz.chain.ids)
        del v

    def test_op_by_op_path(self):
        self.crt.can_fuse = False
        x, w = self.x(4, 768), self.x(768)
        _s, y = self.rms(x, w)
        self.fz.flush()
        self.assertEqual(self.fz.stats.fallbacks, {"no-compiler": 1})
        # the copies are copy_; the fake pow, add and rsqrt have no out= (op + copy_)
        names = [e[0] for e in self.T.log if e[0].startswith("aten::")]
        self.assertEqual(names, ["aten::pow.Tensor_Scalar", "aten::mean.out", "aten::add.Tensor",
                                 "aten::rsqrt", "aten::mul.out", "aten::mul.out"])
        mean = next(e for e in self.T.log if e[0] == "aten::mean.out")
        self.assertEqual(mean[2:4], ([-1], True))
        self.assertEqual(dict(mean[4:])["out"].shape, (4, 1))     # the row's shape
        self.assertEqual(self.fz.stats.ops_alone, 8)
        del y

    def test_describe_names_the_mean(self):
        found = {}
        self.fz = aten_fuse.Fuser(self.crt, region="blk", found=found)
        x, w = self.x(1, 1024), self.x(1024)
        _s, y = self.rms(x, w)
        self.fz.flush()
        (g, src), = found.values()
        self.assertEqual(g.ops, " -> ".join(["aten::_to_copy", "aten::pow.Tensor_Scalar",
                                             "aten::mean.dim", "aten::add.Tensor",
                                             "aten::rsqrt", "aten::mul.Tensor",
                                             "aten::_to_copy", "aten::mul.Tensor"]))
        self.assertEqual((g.outputs, g.saved_kernels), (1, 7))
        self.assertIn("kp_atenrms_", src)
        del y


if __name__ == "__main__":
    unittest.main()
