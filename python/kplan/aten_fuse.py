"""Fusion of pointwise ATen chains while kplan.torch captures a region.

`FuseMode` is a TorchDispatchMode entered inside the capture. Every ATen op
of the body passes through it:

- a pointwise op of the catalog (kplan.aten_ops) whose tensors fit the
  current chain (one iteration space; external tensors of any layout: full,
  scalar, row-broadcast, or strided, read at the offset of the chain's
  logical index: a transposed view, a slice, an expand; one floating dtype
  per op) is *deferred*: its output is allocated with the dtype, sizes AND
  strides eager ATen gives it (TensorIterator follows its inputs' memory
  order; the layout is read from the op run on meta tensors, cached) and
  returned, nothing is launched;
- `aten::native_layer_norm` over the last dim of an output of the chain
  (what F.layer_norm / nn.LayerNorm reach), when ATen would run its
  vectorized kernel for it (N % 4 == 0, N <= 2^24, weight and bias None or
  contiguous [N] of the input's dtype, every pointer aligned to 4 elements)
  ends the chain in a *row-norm node* (Fuser.defer_norm): its out, mean and
  rstd are allocated as ATen does ([..., N] in the input's dtype, [..., 1]
  float) and returned, nothing launched. The chain is then sealed: the next
  pointwise op flushes it and begins another. Otherwise the op runs as
  usual, with its reason counted ("layer-norm-input", "-shape", "-params",
  "-dtype", "-path", "-bias-only", "-sealed", "-exts", "-args");
- `aten::mean.dim` over the last dim (keepdim, no dtype) of an f32 output of
  the chain (RMSNorm written as ops: Llama's variance), when ATen reduces each
  row in one block, gives the chain a *row-reduce node* (Fuser.defer_mean):
  the [..., 1] mean is returned, nothing launched, and the chain goes on: ops
  over row values and scalars (the add of eps, the rsqrt) are row nodes, ops
  over the full shape may read row values broadcast (the mul by rstd). One
  such node per chain; otherwise the mean runs as usual, its reason counted
  ("mean-input", "-args", "-dtype", "-layout", "-config", "-sealed"; an op
  over row values that reads anything but row values and scalars:
  "mean-row-input"); KPLAN_TORCH_FUSE_MEAN=0 leaves every mean to ATen;
- `aten::constant_pad_nd`, `aten::cat` and `aten::index_copy_` of a chain
  output end the chain in its kernel (Fuser.defer_pad, defer_cat,
  defer_index_copy: the KV cache's update, which may also begin with a copy
  node of a tensor no chain computes); `aten::arange` on the GPU is an int64
  iota node (Fuser.defer_arange), and the int64 adds and products by ints
  over it join chains (KPLAN_TORCH_FUSE_INT=0 leaves them to ATen);
- an op over another shape that reads nothing of the chain *parks* it
  (Fuser._pick: one parked chain at most) and begins its own; the parked
  chain resumes when an op over its shape comes back (RoPE's q * cos waits
  while rotate_half runs over q's halves; KPLAN_TORCH_FUSE_PARK=0: launched
  instead);
- any other op runs as usual, after *launching* the pending chains whose
  outputs it reads, and, when it may write to one of its arguments (an
  in-place or out= op), those that read or write the memory it writes (a
  tensor over the same storage; every chain when the schema does not say
  what it writes). An op that writes only fresh outputs (a GEMM between a
  gate's activation and its product, a view) runs first and the chains go
  on: their inputs are held and unchanged, and a fresh output never shares
  memory with an output a chain will write (those are held too).

A flush launches one generated kernel (kplan.aten_gen) on the chain's
stream, which writes only the outputs something still holds: an output
whose Python object is gone (weakref dead: no Python reference, and no C++
owner either, since PyTorch keeps a tensor's PyObject alive while C++ holds
the tensor) is never read again, so it is not written. A chain of one op, or
one that cannot be compiled, runs op by op through the ops' out= variants
into the tensors already handed out: the same ATen kernels as eager, no
copy. A chain ending in a norm is one kernel of a block per row
(kplan.aten_norm): it computes the chain's elements, stores the chain
outputs still held (the residual sum the next add reads), and normalizes
the row in the order of ATen's vectorized_layer_norm_kernel, bit for bit,
writing out, mean and rstd where they are held (F.layer_norm drops mean and
rstd: not written); op by op, the norm runs as the functional op and its
results are copied into the tensors handed out. A chain with a row mean is
one kernel of ATen's reduction blocks (kplan.aten_rms): the chain up to the
mean per element, the sum in ATen's order, the row nodes, then the rest of
the chain per element; op by op, the mean runs through mean.out like the
other ops. Under capture the fused kernel becomes one node of the graph in
place of the chain's nodes; outside a capture (tests) it simply runs.

Counters per Fuser (kt.stats()["fusion"]): chains fused (of which ending in
a norm, and with a row mean: "reductions"), ops fused, ops run alone,
outputs not written, kernels compiled and their compile time, ops deferred
with a strided input or a non-row-major output ("strided"), scalar_tensors
handed out unfilled and those filled after all, and ops not deferred by
reason ("layout": eager would give the output an overlapping or non-dense
layout, or its layout could not be found).
"""

import sys
import time
import weakref

from . import aten_foreach as FE
from . import aten_gen as G
from . import aten_norm as NORM
from . import aten_ops as A
from . import aten_rms as RMS

_DT = {}          # torch dtype -> aten_gen dtype name (filled on first use)
_kernels = {}     # (device index, source) -> loaded function handle (for the process)
_out_ops = {}     # functional OpOverload -> its out= overload (or None)
_layouts = {}     # (op, its arguments' sizes/strides/dtypes) -> output strides (or None)


def _dtypes(T):
    if not _DT:
        _DT.update({T.float32: "f32", T.float16: "f16", T.bfloat16: "bf16", T.bool: "b8",
                    T.int64: "i64"})
    return _DT


class Stats(object):
    def __init__(self):
        self.chains = 0
        self.ops_fused = 0
        self.ops_alone = 0
        self.dead_outputs = 0
        self.compiled = 0
        self.compile_s = 0.0
        self.nvrtc = 0            # of the kernels loaded: compiled by NVRTC now
        self.cache_hits = 0       # ... or read from the on-disk CUBIN cache
        self.shipped = 0          # chains fused with a source shipped with the plan
        self.strided = 0          # ops deferred with a strided input or non-row-major output
        self.consts = 0           # scalar_tensors handed out unfilled
        self.pads = 0             # constant_pad_nd deferred (ending a chain)
        self.cats = 0             # cat deferred (ending a chain)
        self.index_copies = 0     # index_copy_ deferred (ending a chain)
        self.consts_filled = 0    # ... of them filled after all (read outside a chain)
        self.norms = 0            # of the chains fused: ending in a LayerNorm (aten_norm)
        self.reductions = 0       # ... with a row mean (aten_rms)
        self.refused = {}
        self.fallbacks = {}
        self.alone = {}           # op name -> ops run alone through out=
        self.alone_copies = 0     # of which without an out= variant (one more copy)
        self.foreach = 0          # foreach programs fused (kplan.aten_foreach)
        self.foreach_ops = 0      # ... the _foreach_* ops in them
        self.foreach_kernels = 0  # ... the kernels launched for them

    def refuse(self, reason):
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def as_dict(self):
        return {"chains": self.chains, "ops_fused": self.ops_fused,
                "ops_alone": self.ops_alone, "dead_outputs": self.dead_outputs,
                "norms": self.norms, "reductions": self.reductions,
                "compiled": self.compiled, "compile_ms": round(self.compile_s * 1e3, 1),
                "nvrtc": self.nvrtc, "cache_hits": self.cache_hits, "shipped": self.shipped,
                "strided": self.strided,
                "consts": self.consts, "consts_filled": self.consts_filled, "pads": self.pads,
                "cats": self.cats, "index_copies": self.index_copies,
                "refused": dict(self.refused), "fallbacks": dict(self.fallbacks),
                "alone": dict(self.alone), "alone_copies": self.alone_copies,
                "foreach": self.foreach, "foreach_ops": self.foreach_ops,
                "foreach_kernels": self.foreach_kernels}


_writes = {}      # OpOverload -> whether it writes to an argument


def writes(func):
    """Whether the op may write to one of its arguments (an in-place or
    out= op, or one whose schema is unknown)."""
    w = _writes.get(func)
    if w is None:
        try:
            w = any(a.alias_info is not None and a.alias_info.is_write
                    for a in func._schema.arguments)
        except Exception:
            w = True
        _writes[func] = w
    return w


def written(func, args, kwargs):
    """The tensors the op writes (its arguments marked written in its
    schema: self of an in-place op, out=), or None when the schema does not
    tell."""
    try:
        out = []
        for i, a in enumerate(func._schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            v = args[i] if i < len(args) and not a.kwarg_only else (kwargs or {}).get(a.name)
            if isinstance(v, (list, tuple)):
                out.extend(v)
            elif v is not None:
                out.append(v)
        return out
    except Exception:
        return None


def _dim(dim, nd):
    """An op's dim argument as an index into nd dims (negative from the
    end), or None when it is no such dim."""
    try:
        d = int(dim)
    except Exception:
        return None
    d = d + nd if d < 0 else d
    return d if 0 <= d < nd else None


def _switch(arg, name):
    """A part of fusion on or off: arg when given, else on unless the
    environment has KPLAN_TORCH_FUSE_<name>=0."""
    import os
    if arg is not None:
        return bool(arg)
    return os.environ.get("KPLAN_TORCH_FUSE_" + name, "1") != "0"


def _has_float(T, args, kwargs):
    """Whether a Python float is among args/kwargs."""
    from torch.utils._pytree import tree_leaves
    return any(isinstance(v, float) for v in tree_leaves((tuple(args), dict(kwargs or {}))))


def _clone_op(T):
    """aten::clone.default, or None."""
    try:
        return T.ops.aten.clone.default
    except AttributeError:
        return None


def _storage(t):
    """The address of t's storage (a view shares its base's), or None."""
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


def bits_equal(T, a, b):
    """Whether two tensors of one floating dtype hold the same bits (NaN
    payloads and signed zeros included), or None for other dtypes."""
    iv = {T.float32: T.int32, T.float16: T.int16, T.bfloat16: T.int16}.get(a.dtype)
    if iv is None or a.dtype != b.dtype or a.shape != b.shape:
        return None
    return bool(T.equal(a.contiguous().view(iv), b.contiguous().view(iv)))


def out_variant(func):
    """The out= overload of a functional ATen op (same arguments plus a
    keyword `out`), or None."""
    if func in _out_ops:
        return _out_ops[func]
    res = None
    try:
        sig = [(a.name, str(a.type)) for a in func._schema.arguments]
        pk = func.overloadpacket
        for ov in pk.overloads():
            op = getattr(pk, ov)
            args = [(a.name, str(a.type)) for a in op._schema.arguments]
            if args[:-1] == sig and args[-1][0] == "out":
                res = op
                break
    except Exception:
        res = None
    _out_ops[func] = res
    return res


class _Chain(object):
    def __init__(self, shape, numel, device, stream):
        self.shape = shape
        self.numel = numel
        self.device = device
        self.stream = stream
        self.nodes = []       # aten_ops.Node
        self.exts = []        # aten_gen.Ext
        self.ext_t = []       # the external tensors (kept alive until the flush)
        self.ext_ids = {}     # id(tensor) -> ext index
        self.outs = []        # weakref to each node's output
        self.ids = {}         # id(output) -> node index
        self.ostr = []        # per node: its output's strides, None when row-major
        self.calls = []       # (func, args, kwargs) per node, for the op-by-op path
        self.norm = None      # a _NormRec: the chain ends in a row norm (sealed)
        self.pad = None       # a _PadRec: the chain ends in constant_pad_nd (sealed)
        self.red = None       # a _RedRec: a row mean inside the chain (aten_rms)
        self.scatter = None   # a _ScatterRec: the chain ends in index_copy_ (sealed)

    def node_of(self, t):
        """The index of the node whose output t is (still), or None."""
        k = self.ids.get(id(t))
        return k if k is not None and self.outs[k]() is t else None

    def has_special(self):
        """Whether the chain already ends in a norm, a pad, a cat or an
        index_copy_, or holds a row mean: a generator takes one of them at
        most."""
        return self.norm is not None or self.pad is not None or self.red is not None or \
            self.scatter is not None


class Fuser(object):
    """One capture's fusion state. crt: the kplan._rt.Runtime (kernel_load /
    kernel_launch); mode "exact" or "tolerant" (generate each chain's
    kernel), or "plan" (only the shipped groups, with their numerics);
    min_ops: shorter chains run op by op; stats: a Stats to count into.
    region: the captured region's name; shipped: an aten_plan.Shipped (a
    chain must match one of the region's groups and uses its source; None:
    kernels are generated); found: a dict that receives (region, key) ->
    (aten_plan.Group, source) for each chain fused (kt.save_fusion)."""

    def __init__(self, crt, mode="exact", min_ops=2, max_ops=32, max_exts=16, stats=None,
                 log=None, region=None, shipped=None, found=None, pads=None,
                 cats=None, means=None, park=None, index_copies=None, ints=None,
                 foreach=None):
        import torch
        self.T = torch
        self.crt = crt
        self.mode = mode
        self.region = region
        self.shipped = shipped
        self.found = found
        self.n_fused = 0          # chains fused in this capture
        self.exact = mode != "tolerant"
        self.min_ops = max(1, int(min_ops))
        self.max_ops = max_ops
        self.max_exts = max_exts
        self.stats = stats if stats is not None else Stats()
        self.log = log or (lambda level, msg: None)
        self.chain = None
        # a chain set aside, still pending, while chains of another shape
        # run (see _pick): one at most
        self.parked = None
        self.last_reason = None
        self.quiet = False        # data_ptr() asked by kplan itself: no flush
        self.n_chains = 0         # chains begun (their ids)
        self.uses = {}            # (region, key) -> chains fused with it in this capture
        self.fate = {}            # chain id -> "fused", "alone", "dead" or "op-by-op: why"
        self.consts = {}          # id -> (weakref, value, bits, stream): scalar_tensors not filled
        # the parts of fusion that can be turned off, to compare with and
        # without: each on unless its argument is False or its variable is 0
        self.pads_on = _switch(pads, "PAD")          # constant_pad_nd ends a chain
        self.cats_on = _switch(cats, "CAT")          # a cat ends a chain
        self.means_on = _switch(means, "MEAN")       # a last-dim mean inside (RMSNorm)
        self.ints_on = _switch(ints, "INT")          # int64 chains: arange, add, mul
        self.index_copies_on = _switch(index_copies, "INDEX_COPY")   # index_copy_ ends one
        self.park_on = _switch(park, "PARK")         # a chain set aside for another shape
        self.foreach_on = _switch(foreach, "FOREACH")  # _foreach_* ops: one program
        # the pending foreach program (kplan.aten_foreach): the optimizer's step
        self.multi = None
        self.n_multi = 0          # foreach programs begun (their ids)

    def _refuse(self, reason):
        self.last_reason = reason
        self.stats.refuse(reason)

    # -- deferring --------------------------------------------------------
    def _ext_mode(self, t, shape):
        """How the chain reads tensor t over its iteration space shape:
        (mode, n, inner, strides) for aten_gen.Ext: the fast paths for
        contiguous tensors (full, scalar, row, bcast), else "strided" with
        t's strides broadcast to shape (0 on broadcast dims), or None."""
        if tuple(t.shape) == shape and t.is_contiguous():
            return ("full", 0, 1, None)
        n = t.numel()
        if n == 1:
            return ("scalar", 1, 1, None)
        if len(t.shape) > len(shape):
            return None
        p = (1,) * (len(shape) - len(t.shape)) + tuple(t.shape)
        if t.is_contiguous():
            # broadcast over leading and/or trailing dims: t's sizes are the
            # chain's on one range of dims [a, b) and 1 elsewhere
            nz = [d for d in range(len(shape)) if p[d] != 1]
            a, b = nz[0], nz[-1] + 1
            if all(p[d] == shape[d] for d in range(a, b)):
                inner = 1
                for d in range(b, len(shape)):
                    inner *= shape[d]
                return ("row", n, 1, None) if inner == 1 else ("bcast", n, inner, None)
        # any other layout: the strides of t expanded to shape
        ts = (0,) * (len(shape) - len(t.shape)) + tuple(t.stride())
        st = []
        for d in range(len(shape)):
            if p[d] == shape[d] and shape[d] != 1:
                st.append(int(ts[d]))
            elif p[d] == 1:
                st.append(0)
            else:
                return None
        if any(v < 0 for v in st):
            return None
        return ("strided", 0, 1, tuple(st))

    def _out_layout(self, func, args, kwargs, targs, shape, out_dtype, dev):
        """The strides eager ATen gives the op's output: the op run on meta
        tensors of its arguments' sizes, strides and dtypes (cached). None
        when they cannot be found (then refused), "dense" checked."""
        T = self.T
        from torch.utils._pytree import tree_leaves, tree_map

        def sig(x):
            if isinstance(x, T.Tensor):
                return ("T", tuple(x.shape), tuple(x.stride()), str(x.dtype), x.device.type)
            if isinstance(x, (bool, int, float)):
                return type(x).__name__
            return repr(x)
        try:
            key = (func, tuple(sig(x) for x in tree_leaves((tuple(args), dict(kwargs or {})))),
                   tuple(sorted((kwargs or {}).keys())))
            hash(key)
        except Exception:
            key = None
        if key is not None and key in _layouts:
            return _layouts[key]
        st = None
        ts = [x for x in tree_leaves((tuple(args), dict(kwargs or {}))) if isinstance(x, T.Tensor)]
        if ts and all(x.dim() == 0 or (tuple(x.shape) == tuple(shape) and x.is_contiguous())
                      for x in ts):
            # every operand row-major over the output's shape (or 0-dim): so
            # is the output. No meta kernel run: its first use imports torch's
            # meta registrations (sympy and the symbolic shapes: seconds)
            st = G.contiguous_strides(shape)
            if key is not None:
                _layouts[key] = st
            return st
        try:
            def meta(x):
                if isinstance(x, T.Tensor) and x.device == dev:
                    return T.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype,
                                           device="meta")
                return x
            ma = tree_map(meta, tuple(args))
            mk = tree_map(meta, dict(kwargs or {}))
            if mk.get("device") is not None:
                mk["device"] = "meta"
            r = func(*ma, **mk)
            if tuple(r.shape) == tuple(shape) and r.dtype == out_dtype:
                st = tuple(int(v) for v in r.stride())
        except Exception:
            st = None
        if st is None and all(t.is_contiguous() for t in targs):
            # no meta kernel: contiguous inputs give a contiguous output
            st = G.contiguous_strides(shape)
        if st is not None and not _dense(shape, st):
            st = None
        if key is not None:
            _layouts[key] = st
        return st

    def defer(self, func, args, kwargs):
        """The op's output tensor when deferred, else None (after flushing
        when the op may read or write what the chain holds)."""
        T = self.T
        try:
            op, targs, attrs, sins = A.recognize(func.name(), args, kwargs,
                                                 lambda x: isinstance(x, T.Tensor))
        except A.Refuse as r:
            if r.reason != "not-pointwise":
                self._refuse(r.reason)
            else:
                self.last_reason = r.reason
            return None
        dt = _dtypes(T)
        if T.is_grad_enabled() and any(t.requires_grad for t in targs):
            self._refuse("autograd")
            return None
        dev = targs[0].device
        if dev.type != "cuda" or any(t.device != dev for t in targs):
            self._refuse("device")
            return None
        if attrs.get("device") is not None and not _same_device(T, attrs["device"], dev):
            self._refuse("device")       # a copy to another device
            return None
        # the op's dtype: its floating inputs' (a where's condition and a
        # masked_fill's mask are bool)
        kinds = []
        for i, t in enumerate(targs):
            d = dt.get(t.dtype)
            want_bool = (op == "where" and i == 0) or (op == "masked_fill" and i == 1)
            if d is None or (d == "b8") != want_bool:
                self._refuse("dtype")
                return None
            kinds.append(d)
        fl = [d for d in kinds if d != "b8"]
        if len(set(fl)) != 1:
            self._refuse("mixed-dtypes")
            return None
        dname = fl[0]
        out_dtype = targs[[i for i, d in enumerate(kinds) if d != "b8"][0]].dtype
        if dname == "i64" and (not self.ints_on or op not in A.INT_OPS or
                               _has_float(T, args, kwargs)):
            # int64: the position arithmetic (add, sub, mul by ints); a float
            # scalar promotes to float, a cast rounds: not taken
            self._refuse("dtype")
            return None
        if op == "copy" and attrs.get("to") is not None:
            out_dtype = attrs["to"]
            if dt.get(out_dtype) not in A.FLOAT_DTYPES:
                self._refuse("dtype")
                return None
            dname = dt[out_dtype]
        try:
            shape = tuple(T.broadcast_shapes(*[tuple(t.shape) for t in targs]))
        except Exception:
            self._refuse("broadcast")
            return None
        numel = 1
        for s in shape:
            numel *= s
        if numel == 0:
            self._refuse("empty")
            return None
        stream = T.cuda.current_stream(dev)
        ch = self.chain
        # an op over row values of the chain's mean (its [..., 1] shape): a row node
        row = ch is not None and ch.red is not None and shape == ch.red.rshape and \
            shape != ch.shape and any(self._row_node(ch, t) is not None for t in targs)
        picked = self._chain_for(shape, dev, stream, targs, row)
        row = row and picked is ch
        ch = picked
        # inputs: earlier nodes of the chain or external tensors
        refs = []
        new_ext = []
        for t in targs:
            k = ch.node_of(t) if ch is not None else None
            if k is not None:
                if row and k not in ch.red.rows:
                    self._refuse("mean-row-input")
                    self.flush()
                    return None
                refs.append(("n", k))
                continue
            if ch is not None and id(t) in ch.ext_ids and ch.ext_t[ch.ext_ids[id(t)]] is t:
                if row and ch.exts[ch.ext_ids[id(t)]].mode not in ("scalar", "const"):
                    self._refuse("mean-row-input")
                    self.flush()
                    return None
                refs.append(("x", ch.ext_ids[id(t)]))
                continue
            c = self._const(t)
            m = ("const", 0, 1, None) if c is not None else \
                ("scalar", 1, 1, None) if row and t.numel() == 1 else self._ext_mode(t, shape)
            if row and m is not None and m[0] not in ("scalar", "const"):
                # a row node reads row values and scalars only (aten_rms)
                self._refuse("mean-row-input")
                self.flush()
                return None
            if m is None:
                self._refuse("broadcast")
                if ch is not None and self._touches(ch, targs):
                    self.flush()
                return None
            refs.append(("new", len(new_ext)))
            new_ext.append((t, m))
        # the output's layout as eager gives it
        ost = self._out_layout(func, args, kwargs, targs, shape, out_dtype, dev)
        if ost is None:
            self._refuse("layout")
            if ch is not None and self._touches(ch, targs):
                self.flush()
            return None
        row_major = G.same_layout(shape, ost, G.contiguous_strides(shape))
        if ch is not None and (len(ch.exts) + len(new_ext) > self.max_exts or (
                ch.red is not None and (not row_major or
                                        any(m[0] == "strided" for _t, m in new_ext)))):
            # too many inputs, or a layout the row kernel does not write: a new chain
            self.flush()
            return self.defer(func, args, kwargs)
        if ch is None:
            ch = self._new_chain(shape, numel, dev, stream)
        for i, r in enumerate(refs):
            if r[0] == "new":
                t, (mode, n, inner, xst) = new_ext[r[1]]
                j = len(ch.exts)
                ch.exts.append(G.Ext(dt[t.dtype], mode, n, inner, xst,
                                     self._const(t)[2] if mode == "const" else None))
                ch.ext_t.append(t)
                ch.ext_ids[id(t)] = j
                refs[i] = ("x", j)
        ins = list(refs)
        for pos in sorted(sins):
            ins.insert(pos, ("s", sins[pos]))
        node = A.Node(op, ins, dname, A.finish_attrs(op, attrs, dname))
        if ost == G.contiguous_strides(shape):
            out = T.empty(shape, dtype=out_dtype, device=dev)
        else:
            out = T.empty_strided(shape, ost, dtype=out_dtype, device=dev)
        if not row_major or any(m[0] == "strided" for _t, m in new_ext) or \
                any(r[0] == "x" and ch.exts[r[1]].mode == "strided" for r in refs):
            self.stats.strided += 1
        self._append(ch, node, None if row_major else ost, out, func, args, kwargs)
        if row:
            ch.red.rows.add(len(ch.nodes) - 1)
        return out

    def _new_chain(self, shape, numel, dev, stream):
        ch = self.chain = _Chain(shape, numel, dev, stream)
        ch.id = self.n_chains
        self.n_chains += 1
        return ch

    def _append(self, ch, node, ost, out, func, args, kwargs):
        """Node `node` joins chain ch: its output tensor out (strides ost,
        None when row-major), the call for the op-by-op path."""
        ch.nodes.append(node)
        ch.ostr.append(ost)
        ch.outs.append(weakref.ref(out))
        ch.ids[id(out)] = len(ch.nodes) - 1
        ch.calls.append((func,) + self._refs(ch, args, kwargs))

    def _fits(self, ch, shape, dev, stream, row=False):
        """Whether chain ch can take an op over shape (row: over its mean's
        rows) on dev and stream."""
        return ch is not None and (ch.shape == shape or row) and ch.device == dev and \
            ch.stream == stream and len(ch.nodes) < self.max_ops and \
            ch.norm is None and ch.pad is None and ch.scatter is None

    def _chain_for(self, shape, dev, stream, targs, row=False):
        """The pending chain an op over shape (reading targs) joins: the
        current one when it fits (a parked one the op reads is launched
        first), else what _pick gives (None: a new chain begins)."""
        if not self._fits(self.chain, shape, dev, stream, row):
            return self._pick(shape, dev, stream, targs)
        if self.parked is not None and self._touches(self.parked, targs):
            self._flush_parked()
        return self.chain

    def _pick(self, shape, dev, stream, targs):
        """The chain for an op over shape that the current chain cannot
        take (another shape, sealed, full): the parked chain when it can
        (resumed), else None (a new chain begins). The current chain is
        parked when the op does not read it and it can still grow, else
        launched; a parked chain the op reads, or one evicted, is launched.
        Llama's RoPE, q * cos + rotate_half(q) * sin: q * cos waits while
        rotate_half runs over half the shape, and the sum joins it, one
        kernel where there were two. Parked and current chains are
        independent (neither reads the other's values: an op reading a
        parked value launches it first) and write only their own fresh
        outputs, or an index_copy_'s tensor that no other pending chain
        reads (an op that writes memory a chain reads launches that chain
        first), so launching one before the other keeps the ops' order."""
        ch, p = self.chain, self.parked
        if p is not None and self._fits(p, shape, dev, stream):
            self._swap_in(targs)
            return p
        keep = self._keeps(ch, targs)
        if p is not None and (keep or self._touches(p, targs)):
            self._flush_parked()
        self.chain = None
        if ch is not None:
            if keep and self.parked is None:
                self.parked = ch
            else:
                self._launch_chain(ch)
        return None

    def _keeps(self, ch, targs):
        """Whether chain ch, current, may be parked for an op reading targs."""
        return ch is not None and self.park_on and not self._touches(ch, targs) and \
            self._fits(ch, ch.shape, ch.device, ch.stream)

    def _swap_in(self, targs):
        """The parked chain becomes the current one; the current one is
        parked in its place, or launched when the op (reading targs) reads
        it or it cannot grow."""
        ch, p = self.chain, self.parked
        keep = self._keeps(ch, targs)
        self.parked = ch if keep else None
        self.chain = p
        if ch is not None and not keep:
            self._launch_chain(ch)

    def _flush_parked(self):
        p, self.parked = self.parked, None
        if p is not None:
            self._launch_chain(p)

    def unpark(self, args, kwargs):
        """Launch the parked chain when args/kwargs read one of its values
        (the ops that end or extend only the current chain take no parked
        value as an input)."""
        if self.parked is not None and self._touches(self.parked,
                                                     self._tensors(args, kwargs)):
            self._flush_parked()

    def pending(self):
        """Whether a chain (current or parked) or a foreach program is pending."""
        return self.chain is not None or self.parked is not None or self.multi is not None

    @staticmethod
    def _row_node(ch, t):
        """The index of t among the chain's row nodes, or None."""
        k = ch.node_of(t)
        return k if k is not None and k in ch.red.rows else None

    # -- a LayerNorm ending the chain -------------------------------------
    @staticmethod
    def is_norm(func):
        """Whether func is an op defer_norm reads (native_layer_norm)."""
        return _named(func, _NORM_OPS)

    def defer_norm(self, func, args, kwargs):
        """native_layer_norm(input, normalized_shape, weight, bias, eps) on
        an output of the pending chain, when ATen would run its vectorized
        kernel (kplan.aten_norm): the chain ends in a row-norm node and the
        op's (out, mean, rstd) are returned, nothing launched. Else None,
        with the reason counted (the op then runs as usual, after a flush:
        it reads a chain output)."""
        T = self.T
        a = list(args)
        kw = dict(kwargs or {})
        names = ("input", "normalized_shape", "weight", "bias", "eps")
        vals = {}
        for i, n in enumerate(names):
            if i < len(a):
                vals[n] = a[i]
            elif n in kw:
                vals[n] = kw.pop(n)
            elif n in ("weight", "bias"):
                vals[n] = None
            else:
                self._refuse("layer-norm-args")
                return None
        if kw or len(a) > len(names):
            self._refuse("layer-norm-args")
            return None
        x, shp, w, b, eps = (vals[n] for n in names)
        ch = self.chain
        k = ch.node_of(x) if ch is not None and isinstance(x, T.Tensor) else None
        if k is None:
            self._refuse("layer-norm-input")        # not an output of the pending chain
            return None
        if ch.has_special():
            self._refuse("layer-norm-sealed")       # a norm, a pad or a mean already
            return None
        if any(e.mode == "strided" for e in ch.exts) or any(st is not None for st in ch.ostr):
            self._refuse("layer-norm-layout")       # the row kernel reads and writes row-major
            return None
        if T.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, b)):
            self._refuse("autograd")
            return None
        dt = _dtypes(T)
        dname = ch.nodes[k].dtype
        if dt.get(x.dtype) != dname or dname not in A.FLOAT_DTYPES:
            self._refuse("layer-norm-dtype")
            return None
        try:
            shp = [int(s) for s in shp]
        except Exception:
            self._refuse("layer-norm-shape")
            return None
        shape = ch.shape
        if len(shp) != 1 or not shape or shp[0] != shape[-1] or shp[0] <= 0:
            self._refuse("layer-norm-shape")        # a norm over more than the last dim
            return None
        N = shp[0]
        for t in (w, b):
            if t is None:
                continue
            if not isinstance(t, T.Tensor) or tuple(t.shape) != (N,) or \
                    not t.is_contiguous() or t.device != ch.device:
                self._refuse("layer-norm-params")
                return None
            if t.dtype != x.dtype:
                self._refuse("layer-norm-dtype")
                return None
        if w is None and b is not None:
            self._refuse("layer-norm-bias-only")     # aten_norm.BIAS_ONLY
            return None
        try:
            eps = float(eps)
        except Exception:
            self._refuse("layer-norm-args")
            return None
        rows = ch.numel // N
        if rows > NORM.MAX_ROWS:
            self._refuse("layer-norm-path")
            return None
        new = [t for t in (w, b) if t is not None]
        if len(ch.exts) + len(new) > self.max_exts:
            self._refuse("layer-norm-exts")
            return None
        dev = ch.device
        out = T.empty(shape, dtype=x.dtype, device=dev)
        mean = T.empty(tuple(shape[:-1]) + (1,), dtype=T.float32, device=dev)
        rstd = T.empty(tuple(shape[:-1]) + (1,), dtype=T.float32, device=dev)
        # ATen's choice of kernel (LayerNormKernelImplInternal): the
        # vectorized one only with N % 4 == 0, N <= 2^24 and X, Y, gamma,
        # beta aligned to 4 * sizeof(T); the others reduce in another order
        self.quiet = True
        try:
            ptrs = [x.data_ptr(), out.data_ptr()] + [t.data_ptr() for t in new]
        finally:
            self.quiet = False
        if not NORM.vectorized(dname, N, ptrs):
            self._refuse("layer-norm-path")
            return None
        ix = []
        for t in (w, b):
            if t is None:
                ix.append(None)
                continue
            j = len(ch.exts)
            ch.exts.append(G.Ext(dname, "row", N))
            ch.ext_t.append(t)
            ix.append(j)
        outs = (out, mean, rstd)
        ch.norm = _NormRec(k, N, eps, ix[0], ix[1], dname, outs,
                           (func,) + self._refs(ch, args, kwargs))
        return outs

    # -- a row mean inside the chain ------------------------------------
    @staticmethod
    def is_mean(func):
        """Whether func is an op defer_mean reads (mean.dim)."""
        return _named(func, _MEAN_OPS)

    def defer_mean(self, func, args, kwargs):
        """mean.dim(x, [-1], keepdim=True) of an f32 output of the pending
        chain (RMSNorm's variance), when ATen reduces each row within one
        block (kplan.aten_rms): the chain gets a row-reduce node and the
        [..., 1] mean is returned, nothing launched; the ops over it join the
        chain (defer). Else None, with the reason counted (the op then runs
        as usual, after a flush: it reads a chain output)."""
        T = self.T
        a = list(args)
        kw = dict(kwargs or {})
        x = a[0] if a else kw.pop("self", None)
        dim = a[1] if len(a) > 1 else kw.pop("dim", None)
        keep = a[2] if len(a) > 2 else kw.pop("keepdim", False)
        dtype = kw.pop("dtype", None)
        ch = self.chain
        k = ch.node_of(x) if ch is not None and isinstance(x, T.Tensor) else None
        if k is None or (ch.red is not None and k in ch.red.rows):
            self._refuse("mean-input")              # not a full value of the pending chain
            return None
        if ch.has_special():
            self._refuse("mean-sealed")             # one mean per chain
            return None
        nd = len(ch.shape)
        try:
            dims = [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]
        except Exception:
            dims = None
        if kw or len(a) > 3 or keep is not True or dtype is not None or \
                dims not in ([-1], [nd - 1]) or nd == 0:
            self._refuse("mean-args")               # another dim, no keepdim, a dtype
            return None
        if T.is_grad_enabled() and x.requires_grad:
            self._refuse("autograd")
            return None
        if ch.nodes[k].dtype != "f32" or x.dtype != T.float32:
            self._refuse("mean-dtype")              # 16-bit inputs: another ATen config
            return None
        self.quiet = True
        try:
            aligned = x.data_ptr() % 16 == 0
        finally:
            self.quiet = False
        if any(e.mode == "strided" for e in ch.exts) or \
                any(st is not None for st in ch.ostr) or not aligned:
            self._refuse("mean-layout")             # the row kernel reads and writes row-major
            return None
        N = ch.shape[-1]
        if RMS.refusal(ch.numel // N, N) is not None:
            self._refuse("mean-config")             # e.g. ATen reducing across blocks
            return None
        rshape = tuple(ch.shape[:-1]) + (1,)
        out = T.empty(rshape, dtype=T.float32, device=ch.device)
        ch.nodes.append(A.Node("mean", [("n", k)], "f32", {}))
        ch.ostr.append(None)
        ch.outs.append(weakref.ref(out))
        ch.ids[id(out)] = len(ch.nodes) - 1
        ch.calls.append((func,) + self._refs(ch, args, kwargs))
        ch.red = _RedRec(len(ch.nodes) - 1, N, rshape)
        return out

    @staticmethod
    def is_pad(func):
        """Whether func is an op defer_pad reads (constant_pad_nd)."""
        return _named(func, _PAD_OPS)

    def defer_pad(self, func, args, kwargs):
        """constant_pad_nd(input, pad, value) of an output of the pending
        chain (SDPA pads its mask bias to a multiple of 8 elements: a fill
        and a copy eagerly): the chain ends in it and one kernel over the
        padded shape writes the chain's value inside, the pad value around.
        Not negative pads (crops), not a value eager refuses for the dtype,
        not a layout other than row-major. The padded tensor is returned,
        nothing launched; else None with the reason counted."""
        T = self.T
        a = list(args)
        kw = dict(kwargs or {})
        x = a[0] if a else kw.pop("self", None)
        pad = a[1] if len(a) > 1 else kw.pop("pad", None)
        value = a[2] if len(a) > 2 else kw.pop("value", 0)
        ch = self.chain
        k = ch.node_of(x) if ch is not None and isinstance(x, T.Tensor) else None
        if not self._may_end(ch, k, kw or len(a) > 3, "pad"):
            return None
        try:
            pad = [int(v) for v in pad]
        except Exception:
            self._refuse("pad-args")
            return None
        nd = len(ch.shape)
        if len(pad) % 2 or len(pad) // 2 > nd or any(v < 0 for v in pad) or \
                isinstance(value, bool) or not isinstance(value, (int, float)):
            self._refuse("pad-args")                # a crop, or an odd value
            return None
        dname = ch.nodes[k].dtype
        if _dtypes(T).get(x.dtype) != dname or dname not in A.FLOAT_DTYPES or \
                not G.const_fits(value, dname) or ch.ostr[k] is not None:
            self._refuse("pad-args")
            return None
        lo, hi = [0] * nd, [0] * nd
        for j in range(len(pad) // 2):             # pairs from the last dim backwards
            lo[nd - 1 - j], hi[nd - 1 - j] = pad[2 * j], pad[2 * j + 1]
        out = self._end_in(ch, G.Pad(k, lo, hi, G.const_bits(value, dname)), func, args,
                           kwargs, [x], x, "pad-layout")
        if out is not None:
            self.stats.pads += 1
        return out

    def _may_end(self, ch, k, odd, what):
        """Whether an op over node k of chain ch (None: its input is no
        output of the pending chain) may end it; odd: its arguments are not
        the ones read. Else refused as "<what>-input", or "<what>-sealed"
        when the chain already ends in another such op."""
        if k is None or odd:
            self._refuse(what + "-input")
            return False
        if ch.has_special():
            self._refuse(what + "-sealed")
            return False
        return True

    def _end_in(self, ch, spec, func, args, kwargs, targs, x, refusal, parts=()):
        """The chain ends in spec (aten_gen.Pad: a pad, or a cat with the
        other tensors parts): its tensor, laid out as eager lays out the
        op's output (constant_pad_nd and cat follow their inputs' suggested
        memory format) when that is row-major, the kernel's addressing; else
        None, refused as refusal."""
        T = self.T
        shape = spec.shape(ch.shape)
        st = self._out_layout(func, args, kwargs, targs, shape, x.dtype, x.device)
        if st is None or not G.same_layout(shape, st, G.contiguous_strides(shape)):
            self._refuse(refusal)
            return None
        out = T.empty_strided(shape, st, dtype=x.dtype, device=x.device)
        ch.pad = _PadRec(spec, out, (func,) + self._refs(ch, args, kwargs), parts=parts)
        return out

    @staticmethod
    def is_cat(func):
        """Whether func is an op defer_cat reads (cat)."""
        return _named(func, _CAT_OPS)

    def defer_cat(self, func, args, kwargs):
        """cat(tensors, dim) where one tensor is an output of the pending
        chain and the others are not pending (Llama's rotate_half:
        cat(-x2, x1) of two halves of q): the chain ends in it like in a pad,
        one kernel over the cat's shape writes the chain's value in its part
        and copies the other tensors' elements into theirs. Same dtype and
        device, the chain's value row-major, the cat's output row-major (as
        eager lays it out). The cat's tensor is returned, nothing launched;
        else None with the reason counted."""
        T = self.T
        a = list(args)
        kw = dict(kwargs or {})
        ts = a[0] if a else kw.pop("tensors", None)
        dim = a[1] if len(a) > 1 else kw.pop("dim", 0)
        ch = self.chain
        if ch is None or kw or len(a) > 2 or not isinstance(ts, (list, tuple)) or \
                not all(isinstance(t, T.Tensor) for t in ts):
            self._refuse("cat-input")
            return None
        mine = [j for j, t in enumerate(ts) if ch.node_of(t) is not None]
        if len(mine) != 1 or self._touches(ch, [t for j, t in enumerate(ts) if j != mine[0]]):
            self._refuse("cat-input")               # one pending value, the rest not pending
            return None
        if ch.has_special():
            self._refuse("cat-sealed")
            return None
        x = ts[mine[0]]
        k = ch.node_of(x)
        shape = ch.shape
        nd = len(shape)
        dim = _dim(dim, nd)
        dname = ch.nodes[k].dtype
        if dim is None or tuple(x.shape) != shape or ch.ostr[k] is not None or \
                _dtypes(T).get(x.dtype) != dname or dname not in A.FLOAT_DTYPES:
            self._refuse("cat-args")
            return None
        parts, at = [], 0
        for j, t in enumerate(ts):
            if j == mine[0]:
                lo = at
                at += shape[dim]
                continue
            if t.dtype != x.dtype or t.device != ch.device or len(t.shape) != nd or \
                    any(t.shape[d] != shape[d] for d in range(nd) if d != dim) or \
                    t.shape[dim] == 0 or self._const(t):
                self._refuse("cat-args")
                return None
            parts.append((at, int(t.shape[dim]), tuple(int(v) for v in t.stride()), t))
            at += int(t.shape[dim])
        if len(ch.exts) + len(parts) > self.max_exts:
            self._refuse("cat-exts")
            return None
        lo_v, hi_v = [0] * nd, [0] * nd
        lo_v[dim], hi_v[dim] = lo, at - lo - shape[dim]
        out = self._end_in(ch, G.Pad(k, lo_v, hi_v, 0, dim=dim, parts=[p[:3] for p in parts]),
                           func, args, kwargs, list(ts), x, "cat-layout",
                           parts=[p[3] for p in parts])
        if out is not None:
            self.stats.cats += 1
        return out

    @staticmethod
    def is_arange(func):
        """Whether func is an op defer_arange reads (arange)."""
        return _named(func, _ARANGE_OPS)

    def defer_arange(self, func, args, kwargs):
        """arange(start, end, step) of int64 on the GPU (the positions Hugging
        Face's StaticCache and masks make at each step): an iota node that
        begins or joins a chain over its 1-D shape, where the adds over it
        join too. The tensor is returned, nothing launched; else None with
        the reason counted."""
        T = self.T
        a = list(args)
        kw = dict(kwargs or {})
        dtype, layout = kw.pop("dtype", None), kw.pop("layout", None)
        device, pin = kw.pop("device", None), kw.pop("pin_memory", None)
        if kw or not 1 <= len(a) <= 3 or any(type(v) is not int for v in a) or \
                (dtype is not None and dtype != T.int64) or pin or \
                layout not in (None, getattr(T, "strided", None)):
            self._refuse("arange-args")             # floats, another dtype
            return None
        start, end, step = (0, a[0], 1) if len(a) == 1 else (a[0], a[1], 1) \
            if len(a) == 2 else tuple(a)
        if step == 0:
            self._refuse("arange-args")
            return None
        n = -((start - end) // step) if step > 0 else -((end - start) // -step)
        if n <= 0 or max(abs(start), abs(start + step * n)) >= 1 << 53:
            self._refuse("arange-args")
            return None
        try:
            dev = device if isinstance(device, T.device) else T.device(
                device if device is not None else "cpu")
            if dev.type == "cuda" and dev.index is None:
                dev = T.device("cuda", T.cuda.current_device())
        except Exception:
            dev = None
        if dev is None or dev.type != "cuda":
            self._refuse("device")
            return None
        shape = (n,)
        stream = T.cuda.current_stream(dev)
        ch = self._chain_for(shape, dev, stream, [])
        if ch is None:
            ch = self._new_chain(shape, n, dev, stream)
        out = T.empty(shape, dtype=T.int64, device=dev)
        self._append(ch, A.Node("iota", [], "i64", {"start": float(start), "step": float(step)}),
                     None, out, func, args, kwargs)
        return out

    @staticmethod
    def is_index_copy(func):
        """Whether func is an op defer_index_copy reads (index_copy_)."""
        return _named(func, _INDEX_COPY_OPS)

    def defer_index_copy(self, func, args, kwargs):
        """dst.index_copy_(dim, index, source) of an output of the pending
        chain (Hugging Face's StaticCache writing the new token's keys after
        RoPE): the chain ends in it and its kernel stores the value into dst
        at the indexed positions. index: a contiguous int64 tensor of
        source.shape[dim] entries, not pending; dst: the source's dtype and
        rank, sizes equal off dim, no dim broadcast, sharing no memory with
        what a pending chain reads. dst is returned, nothing launched; it
        counts as pending (by its storage: any view of it) until the launch.
        Else None with the reason counted."""
        T = self.T
        a = list(args)
        kw = dict(kwargs or {})
        vals = []
        for i, n in enumerate(("self", "dim", "index", "source")):
            vals.append(a[i] if i < len(a) else kw.pop(n, None))
        dst, dim, idx, src = vals
        if self.parked is not None and isinstance(src, T.Tensor) and \
                self.parked.node_of(src) is not None:
            # the source waits in the parked chain (the position arithmetic
            # ran between RoPE and the update): it becomes the current one
            self._swap_in(self._tensors(args, kwargs))
        self.unpark(args, kwargs)
        ch = self.chain
        k = ch.node_of(src) if ch is not None and isinstance(src, T.Tensor) else None
        if k is None and ch is not None and isinstance(idx, T.Tensor) and \
                ch.node_of(idx) is not None:
            # the positions are the pending chain's (an arange): launched
            # first, the copy node below begins a chain of its own
            self._flush_current()
            ch = None
        if k is None and isinstance(src, T.Tensor) and isinstance(dst, T.Tensor) and \
                src.dtype == dst.dtype and not self._touches_any([src]):
            # a source no chain computes (V's update, straight from its GEMM):
            # a copy node reads it, so that the update runs in a generated
            # kernel rather than ATen's indexing kernel (1.8 us for a decode
            # token's 256 elements on an H100)
            clone = _clone_op(T)
            c = self.defer(clone, (src,), {}) if clone is not None else None
            if c is not None:
                ch = self.chain
                k = ch.node_of(c)
                src = c
        if not self._may_end(ch, k, kw or len(a) > 4, "index-copy"):
            return None
        nd = len(ch.shape)
        dim = _dim(dim, nd)
        if not isinstance(dst, T.Tensor) or not isinstance(idx, T.Tensor) or \
                dim is None or tuple(src.shape) != ch.shape or dst.dtype != src.dtype or \
                dst.device != ch.device or idx.device != ch.device or idx.dtype != T.int64 or \
                idx.dim() != 1 or idx.numel() != ch.shape[dim] or not idx.is_contiguous() or \
                dst.dim() != nd or any(dst.shape[d] != ch.shape[d] for d in range(nd) if d != dim):
            self._refuse("index-copy-args")
            return None
        if ch.nodes[k].dtype not in A.FLOAT_DTYPES:
            self._refuse("index-copy-args")         # an int64 value (not taken)
            return None
        if any(int(v) <= 0 and int(n) > 1 for v, n in zip(dst.stride(), dst.shape)):
            self._refuse("index-copy-layout")       # a broadcast dim: writes would overlap
            return None
        if T.is_grad_enabled() and dst.requires_grad:
            self._refuse("autograd")
            return None
        rec = _ScatterRec(None, dst, idx, None)
        if self._const(idx) is not None or \
                any(c is not None and (self._touches(c, [idx, dst]) or
                                       any(rec.holds(t) for t in c.ext_t))
                    for c in (ch, self.parked)):
            self._refuse("index-copy-overlap")      # dst read by a chain, or idx pending
            return None
        rec.spec = G.Scatter(k, dim, dst.stride(), dst.shape[dim])
        rec.call = (func,) + self._refs(ch, args, kwargs)
        ch.scatter = rec
        self.stats.index_copies += 1
        return dst

    def _refs(self, ch, args, kwargs):
        # the call as recorded for the op-by-op path: chain outputs become
        # _Ref(k), so that the record does not keep them alive
        from torch.utils._pytree import tree_map
        T = self.T

        def ref(x):
            if isinstance(x, T.Tensor):
                k = ch.node_of(x)
                if k is not None:
                    return _Ref(k)
            return x
        return tree_map(ref, tuple(args)), tree_map(ref, dict(kwargs or {}))

    def _touches(self, ch, tensors):
        for t in tensors:
            if ch.node_of(t) is not None:
                return True
            if ch.norm is not None and ch.norm.holds(t):
                return True
            if ch.pad is not None and ch.pad.holds(t):
                return True
            if ch.scatter is not None and ch.scatter.holds(t):
                return True
        return False

    def _tensors(self, args, kwargs):
        from torch.utils._pytree import tree_leaves
        return [x for x in tree_leaves((args, kwargs)) if isinstance(x, self.T.Tensor)]

    def touches(self, args, kwargs):
        """Whether any tensor among args/kwargs is a pending output."""
        return self.pending() and self._touches_any(self._tensors(args, kwargs))

    def before(self, func, args, kwargs):
        """Before an op that was not deferred runs: launch the pending
        chains whose memory it writes (a tensor over the storage of one they
        read or write; every chain when what it writes is not known) and
        those whose values it reads. StaticCache's step counter
        (cumulative_length.add_(1)) then leaves the RoPE chain pending for
        the index_copy_ after it."""
        if not self.pending():
            return
        if writes(func):
            ws = written(func, args, kwargs)
            if ws is None:
                self.flush()
                return
            if self.multi is not None and self.multi.touches([t for t in ws if isinstance(
                    t, self.T.Tensor)]):
                self._flush_multi()
            if self.parked is not None and self._shares(self.parked, ws):
                self._flush_parked()
            if self.chain is not None and self._shares(self.chain, ws):
                self._flush_current()
        self.flush_read(args, kwargs)

    def _touches_any(self, tensors):
        return any(c is not None and self._touches(c, tensors) for c in (self.chain, self.parked)) \
            or (self.multi is not None and self.multi.touches(tensors))

    def _shares(self, ch, ws):
        """Whether a tensor of ws (an op's written arguments) may overlap
        what chain ch reads or writes."""
        T = self.T
        ts = [t for t in ws if isinstance(t, T.Tensor)]
        if len(ts) != len(ws):
            return True
        if self._touches(ch, ts):
            return True
        mine = list(ch.ext_t)
        if ch.pad is not None:
            mine += ch.pad.parts
        if ch.norm is not None:
            mine += [t for t in (ch.norm.held or []) if t is not None]
        have = set(_storage(t) for t in mine)
        return any(_storage(t) is None or _storage(t) in have for t in ts)

    def flush_read(self, args, kwargs):
        """Launch the pending chains whose values args/kwargs hold (an op
        that reads them and writes nothing runs next); the others stay
        pending."""
        if not self.pending():
            return
        ts = self._tensors(args, kwargs)
        if self.parked is not None and self._touches(self.parked, ts):
            self._flush_parked()
        if self.chain is not None and self._touches(self.chain, ts):
            self._flush_current()
        if self.multi is not None and self.multi.touches(ts):
            self._flush_multi()

    # -- foreach programs -------------------------------------------------
    @staticmethod
    def is_foreach(func):
        return FE.is_foreach(func.name())

    def defer_foreach(self, func, args, kwargs):
        """A `_foreach_*` op of kplan.aten_foreach's table over float32
        lists: a node of the pending foreach program (begun here, or
        launched first when it runs on another stream or lane count); its
        outputs are handed out unwritten. FE.NOT when it runs as usual, its
        reason counted ("foreach-dtype", "-layout", "-alias", "-shape",
        ...); the program is launched first."""
        T = self.T
        try:
            spec = FE.parse(T, func.name(), args, kwargs)
        except FE.Refuse as e:
            self._refuse(e.reason)
            return FE.NOT
        stream = T.cuda.current_stream(spec.device)
        # the chains it reads, or whose memory it writes, go first
        if self.chain is not None or self.parked is not None:
            multi, self.multi = self.multi, None
            try:
                self.before(func, args, kwargs)
            finally:
                self.multi = multi
        for _ in range(2):
            p = self.multi
            if p is not None and not p.fits(spec, stream):
                self._flush_multi()
                p = None
            if p is None:
                self.n_multi += 1
                p = FE.Program(T, spec.device, stream, spec.lanes, pid=self.n_multi)
            try:
                out = p.add(func, spec)
            except FE.Full:
                self._flush_multi()
                continue
            except FE.Refuse as e:
                self._refuse(e.reason)
                self._flush_multi()
                return FE.NOT
            self.multi = p
            return out
        return FE.NOT

    def multi_before(self, args, kwargs):
        """Before any other op: launch the foreach program when the op's
        tensors are the program's or share their memory (the optimizer's
        outputs read, its inputs written)."""
        if self.multi is not None and self.multi.touches(self._tensors(args, kwargs)):
            self._flush_multi()

    def _flush_multi(self):
        p, self.multi = self.multi, None
        if p is None:
            return
        key = "f%d" % p.id
        try:
            p.hold()
            if len(p.nodes) < self.min_ops:
                self.fate[key] = "alone"
                p.replay()
                return
            try:
                n = self._launch_multi(p)
            except _NoFuse as e:
                self.stats.fallbacks[e.reason] = self.stats.fallbacks.get(e.reason, 0) + 1
                self.log(2, "torch: fusion: a foreach program of %d ops runs op by op (%s)"
                         % (len(p.nodes), e))
                self.fate[key] = "op-by-op: %s" % e.reason
                p.replay()
                return
            self.fate[key] = "fused" if n else "dead"
            if n:
                self.stats.foreach += 1
                self.stats.foreach_ops += len(p.nodes)
                self.stats.foreach_kernels += n
        finally:
            p.release()

    def _launch_multi(self, p):
        """Launch program p's kernels: the number launched (0: nothing is
        stored). Raises _NoFuse before the first launch."""
        T = self.T
        try:
            ka, kb, plan = p.sources()
        except AssertionError as e:
            raise _NoFuse("generate", str(e))
        if ka is None and kb is None:
            return 0
        if not hasattr(self.crt, "kernel_launch_blob"):
            raise _NoFuse("no-compiler", "libkplanrt's binding has no by-value launch")
        ks, descs = [ka, kb], [None, None]
        if self.shipped is not None or self.found is not None:
            descs = self._foreach_descs(p, ks)
        if self.shipped is not None:
            # each kernel must be a group of the region, and its source is used
            for i, k in enumerate(ks):
                if k is None:
                    continue
                g, src = self._shipped_group(descs[i])
                if src != k[1]:
                    # the launch tables are this version's: so must the kernels be
                    raise _NoFuse("plan-mismatch", "group %d's source is not the one this "
                                  "version of kplan generates for the program" % g.id)
                ks[i] = (g.kernel, src) + tuple(k[2:])
        elif self.mode == "plan":
            raise _NoFuse("not-in-plan", "the plan ships no torch fusion groups")
        ka, kb = ks
        fns = [self._kernel(k[1], k[0], p.device) if k is not None else None for k in (ka, kb)]
        scratch = plan[2]
        scr = T.empty((p.lanes * len(scratch),), dtype=T.float32, device=p.device) \
            if scratch else None
        self.quiet = True
        try:
            sp = scr.data_ptr() if scr is not None else 0
            launches = []
            for fn, k, big in ((fns[0], ka, False), (fns[1], kb, True)):
                if k is not None:
                    launches += [(fn, t) for t in p.tables(k, big, sp, len(scratch))]
        finally:
            self.quiet = False
        for i, (fn, (grid, block, blob)) in enumerate(launches):
            rc = self.crt.kernel_launch_blob(fn, grid, block, p.stream.cuda_stream, blob)
            if rc != 0:
                if i == 0:
                    raise _NoFuse("launch-failed", "cuLaunchKernel: %d" % rc)
                # half the program ran: running it again would repeat it
                raise RuntimeError("kplan: a foreach program's kernel %d of %d failed to "
                                   "launch (CUresult %d)" % (i + 1, len(launches), rc))
        if self.shipped is not None:
            self.stats.shipped += 1
        if self.found is not None and self.region is not None:
            for k, d in zip((ka, kb), descs):
                if k is not None:
                    self._found(d, True, k[0], k[1])
        return len(launches)

    def _foreach_descs(self, p, ks):
        """The shipped-group descriptions (aten_plan.Desc) of program p's
        kernels ks (small, big; None where there is none): the program's
        text with the kernel's part; the big kernel's carries the savings."""
        from . import aten_plan
        names = [c[0].name() for c in p.calls]
        text = p.text(names)
        saved_k, saved_b = p.traffic()
        out = []
        for part, k in zip(("lane scalars", "elements"), ks):
            if k is None:
                out.append(None)
                continue
            t = text + "kernel " + part + "\n"
            last = k is ks[1] or ks[1] is None
            out.append(aten_plan.Desc(
                aten_plan.hash64(t.encode("utf-8")), t, " -> ".join(names),
                "%d lanes (%s)" % (p.lanes, part), "%d lists" % len(p.vars),
                sum(1 for v in p.vars if v.written and (not v.fresh or v.alive()) and
                    v.small == (part == "lane scalars")),
                saved_kernels=max(0, saved_k - sum(1 for x in ks if x is not None))
                if last else 0, saved_bytes=saved_b if last else 0))
        return out

    def _found(self, desc, exact, name, src):
        """Record a group fused in this capture for kt.save_fusion, with the
        times it ran in one call of its region."""
        from . import aten_plan
        k = (self.region, desc.key)
        if k not in self.found:
            self.found[k] = (aten_plan.Group.of(self.region, desc, exact, name, src), src)
        # how often one call of the region runs it: a Fuser is one capture
        self.uses[k] = self.uses.get(k, 0) + 1
        g = self.found[k][0]
        g.per_call = max(g.per_call, self.uses[k])

    # -- flushing ---------------------------------------------------------
    def flush(self):
        """Launch every pending chain: the parked one (its ops came first),
        then the current one; and the foreach program (no chain reads or
        writes its memory: see multi_before)."""
        self._flush_parked()
        self._flush_current()
        self._flush_multi()

    def _flush_current(self):
        ch, self.chain = self.chain, None
        if ch is not None:
            self._launch_chain(ch)

    def _launch_chain(self, ch):
        """Launch chain ch (no longer pending): one kernel, its ops one by
        one, or nothing when nobody reads its values."""
        live = [k for k, w in enumerate(ch.outs) if w() is not None]
        if ch.pad is not None:
            ch.pad.held = ch.pad.out()
            if ch.pad.held is None:
                self.stats.dead_outputs += 1     # nobody reads the padded tensor
                ch.pad = None
        nm = ch.norm
        if nm is not None:
            # hold the norm's outputs until the launch (liveness fixed now)
            nm.held = [w() for w in nm.outs]
            if not any(t is not None for t in nm.held):
                self.stats.dead_outputs += 1     # nobody reads the norm: the chain alone
                ch.norm = nm = None
        try:
            if not live and nm is None and ch.pad is None and ch.scatter is None:
                self.stats.dead_outputs += len(ch.nodes)
                self.fate[ch.id] = "dead"
                return
            n_ops = len(ch.nodes) + (1 if nm is not None else 0) + (ch.pad is not None) + \
                (ch.scatter is not None)
            # each value baked in is a fill kernel saved: a where between two
            # scalar_tensors is worth one kernel on its own; so is an op over a
            # strided layout (GQA's repeat_kv, expand().clone() of the KV
            # cache): ATen runs those in its generic, non-vectorized kernel,
            # two divisions per dim and index, at twice the generated one's time;
            # and an arange (one kernel either way: its op-by-op path would copy)
            if n_ops + sum(x.mode == "const" for x in ch.exts) < self.min_ops and \
                    not any(x.mode == "strided" and 0 in x.strides for x in ch.exts) and \
                    not any(n.op == "iota" for n in ch.nodes):
                self.fate[ch.id] = "alone"
                self._run_ops(ch)
                return
            try:
                self._launch(ch, live)
            except _NoFuse as e:
                self.stats.fallbacks[e.reason] = self.stats.fallbacks.get(e.reason, 0) + 1
                self.log(2, "torch: fusion: a chain of %d ops runs op by op (%s)"
                         % (n_ops, e))
                self.fate[ch.id] = "op-by-op: %s" % e.reason
                self._run_ops(ch)
                return
            self.fate[ch.id] = "fused"
            self.n_fused += 1
            self.stats.chains += 1
            self.stats.ops_fused += n_ops
            self.stats.dead_outputs += len(ch.nodes) - len(live)
            if nm is not None:
                self.stats.norms += 1
                self.stats.dead_outputs += sum(1 for t in nm.held if t is None)
            if ch.red is not None:
                self.stats.reductions += 1
        finally:
            if nm is not None:
                nm.held = None
            if ch.pad is not None:
                ch.pad.held = None

    def _kernel(self, src, name, device):
        # a loaded function belongs to the device's context: one per device
        key = (device.index, src)
        fn = _kernels.get(key)
        if fn is None:
            if self.crt is None or not getattr(self.crt, "can_fuse", False):
                raise _NoFuse("no-compiler", "libkplanrt has no kp_rt_kernel_load")
            t0 = time.perf_counter()
            try:
                fn = self.crt.kernel_load(src, name)
            except Exception as e:
                msg = str(e)
                if "untrusted-source" in msg:
                    raise _NoFuse("untrusted-source", msg)
                raise _NoFuse("compile-failed", msg)
            self.stats.compile_s += time.perf_counter() - t0
            self.stats.compiled += 1
            came = getattr(self.crt, "last_load", None)
            if came == "nvrtc":
                self.stats.nvrtc += 1
            elif came == "cache":
                self.stats.cache_hits += 1
            _kernels[key] = fn
        return fn

    # -- scalar_tensor values -------------------------------------------
    def defer_const(self, func, args, kwargs):
        """aten::scalar_tensor on a CUDA device (SDPA turns a boolean mask
        into where(mask, scalar_tensor(0), scalar_tensor(-inf)) in every
        layer): a 0-dim tensor handed out unfilled. A chain that reads it
        bakes the value into its kernel (an Ext of mode const); anything
        else that reads it, a stream or event call, and the capture's end
        while it is still held fill it first (fill_consts), on the stream
        it was made on, with ATen's fill_ as eager did. None when the op is
        another one."""
        T = self.T
        if func.name() != "aten::scalar_tensor" or len(args) != 1:
            return None
        v = args[0]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        dtype = kwargs.get("dtype") or T.get_default_dtype()
        dev = kwargs.get("device")
        if dev is None or kwargs.get("pin_memory") or \
                kwargs.get("layout") not in (None, T.strided):
            return None
        dev = T.device(dev)
        d = _dtypes(T).get(dtype)
        if dev.type != "cuda" or d not in A.FLOAT_DTYPES or not G.const_fits(v, d):
            return None         # eager's op raises (overflow) or is not ours
        if dev.index is None:
            dev = T.device("cuda", T.cuda.current_device())
        t = T.empty((), dtype=dtype, device=dev)
        self.consts[id(t)] = (weakref.ref(t), v, G.const_bits(v, d),
                              T.cuda.current_stream(dev))
        self.stats.consts += 1
        return t

    def _const(self, t):
        c = self.consts.get(id(t))
        return c if c is not None and c[0]() is t else None

    def fill_consts(self, tensors=None):
        """Fill the pending scalar_tensors among tensors (every one still
        held when None); forget the ones nobody holds."""
        if not self.consts:
            return
        T = self.T
        if tensors is None:
            tensors = [c[0]() for c in list(self.consts.values())]
        for t in tensors:
            c = self._const(t) if isinstance(t, T.Tensor) else None
            if c is None:
                continue
            del self.consts[id(t)]
            self.stats.consts_filled += 1
            with T.cuda.stream(c[3]):
                t.fill_(c[1])
        for k, c in list(self.consts.items()):
            if c[0]() is None:
                del self.consts[k]

    def fill_read(self, args, kwargs):
        """fill_consts for the tensors an op is about to read or write."""
        from torch.utils._pytree import tree_leaves
        self.fill_consts([x for x in tree_leaves((tuple(args), dict(kwargs or {})))
                          if id(x) in self.consts])

    def describe(self, ch, live):
        """The chain as a shipped group names it (aten_plan.Desc)."""
        from . import aten_plan
        self.quiet = True
        try:
            names = [c[0].name() for c in ch.calls]
            norm = None
            if ch.norm is not None:
                names.append(ch.norm.call[0].name())
                norm = ch.norm.spec()
            if ch.pad is not None:
                names.append(ch.pad.call[0].name())
            if ch.scatter is not None:
                names.append(ch.scatter.call[0].name())
            return aten_plan.describe(names, ch.nodes, ch.exts,
                                      [tuple(t.shape) for t in ch.ext_t],
                                      [tuple(t.stride()) for t in ch.ext_t], ch.shape, live,
                                      [ch.ostr[k] for k in live], norm=norm,
                                      pad=None if ch.pad is None else ch.pad.spec,
                                      red=None if ch.red is None else ch.red.spec(),
                                      scatter=None if ch.scatter is None else ch.scatter.spec)
        finally:
            self.quiet = False

    def _shipped_group(self, desc, exact=None):
        """(group, source) the plan ships for desc in this region, or raises
        _NoFuse saying why none can be used."""
        g, why = self.shipped.match(self.region, desc, exact)
        if g is None:
            raise _NoFuse(*why)
        try:
            return g, self.shipped.source(g)
        except LookupError as e:
            raise _NoFuse(*e.args[0])

    def _source(self, ch, live):
        """(kernel name, source, exact, desc) of the chain: its shipped
        group's, or generated."""
        desc = None
        if self.shipped is not None or self.found is not None:
            desc = self.describe(ch, live)
        if self.shipped is not None:
            g, src = self._shipped_group(desc, None if self.mode == "plan" else self.exact)
            return g.kernel, src, g.exact, desc
        if self.mode == "plan":
            raise _NoFuse("not-in-plan", "the plan ships no torch fusion groups")
        chain = G.Chain(ch.nodes, ch.exts, ch.numel, live, exact=self.exact, shape=ch.shape,
                        out_strides=[ch.ostr[k] for k in live],
                        pad=None if ch.pad is None else ch.pad.spec,
                        scatter=None if ch.scatter is None else ch.scatter.spec)
        try:
            if ch.norm is not None:
                name, src = NORM.generate(chain, ch.norm.spec())
            elif ch.red is not None:
                name, src = RMS.generate(chain, ch.red.spec())
            else:
                name, src = G.generate(chain)
        except G.GenError as e:
            raise _NoFuse("generate", str(e))
        return name, src, self.exact, desc

    def _launch(self, ch, live):
        name, src, exact, desc = self._source(ch, live)
        fn = self._kernel(src, name, ch.device)
        self.quiet = True
        try:
            ptrs = [t.data_ptr() for t, x in zip(ch.ext_t, ch.exts) if x.mode != "const"] + \
                [ch.outs[k]().data_ptr() for k in live]
            if ch.scatter is not None:
                ptrs += [ch.scatter.idx.data_ptr(), ch.scatter.dst.data_ptr()]
            if ch.norm is not None:
                ptrs += [t.data_ptr() for t in ch.norm.held if t is not None]
            if ch.pad is not None:
                ptrs.append(ch.pad.held.data_ptr())
                ptrs += [t.data_ptr() for t in ch.pad.parts]
        finally:
            self.quiet = False
        if ch.norm is not None:
            grid, block = NORM.launch_dims(ch.numel // ch.norm.n)
        elif ch.pad is not None:
            grid, block = G.launch_dims(ch.pad.held.numel())
        elif ch.red is not None:
            grid, block = RMS.launch_dims(ch.numel // ch.red.n, ch.red.n)
        else:
            grid, block = G.launch_dims(ch.numel)
        rc = self.crt.kernel_launch(fn, grid, block, ch.stream.cuda_stream, ptrs)
        if rc != 0:
            raise _NoFuse("launch-failed", "cuLaunchKernel: %d" % rc)
        if self.shipped is not None:
            self.stats.shipped += 1
        if self.found is not None and self.region is not None:
            self._found(desc, exact, name, src)

    def _run_ops(self, ch):
        """Each op of the chain through its out= variant, into the outputs
        handed out (fresh tensors for the ones nobody holds)."""
        T = self.T
        from torch.utils._pytree import tree_map
        self.fill_consts([t for t, x in zip(ch.ext_t, ch.exts) if x.mode == "const"])
        outs = []
        for k, (func, args, kwargs) in enumerate(ch.calls):
            o = ch.outs[k]()
            if o is None:
                rows = ch.red is not None and k in ch.red.rows
                o = T.empty(ch.red.rshape if rows else ch.shape,
                            dtype=_torch_dtype(T, ch.nodes[k].dtype), device=ch.device)
            outs.append(o)

            def sub(x):
                return outs[x.k] if isinstance(x, _Ref) else x
            a = tree_map(sub, args)
            kw = tree_map(sub, kwargs)
            ov = out_variant(func)
            with T.cuda.stream(ch.stream):
                if ch.nodes[k].op == "copy" and not kw.get("memory_format") and \
                        func.name() in ("aten::_to_copy", "aten::clone"):
                    # both are an empty tensor and copy_: the same kernel
                    o.copy_(a[0])
                elif ov is not None:
                    ov(*a, out=o, **kw)
                else:
                    o.copy_(func(*a, **kw))
                    self.stats.alone_copies += 1
            self.stats.ops_alone += 1
            nm = func.name()
            self.stats.alone[nm] = self.stats.alone.get(nm, 0) + 1
        if ch.scatter is not None:
            # index_copy_ writes dst in place: the op itself
            func, args, kwargs = ch.scatter.call
            a = tree_map(lambda x: outs[x.k] if isinstance(x, _Ref) else x, args)
            kw = tree_map(lambda x: outs[x.k] if isinstance(x, _Ref) else x, kwargs)
            with T.cuda.stream(ch.stream):
                func(*a, **kw)
            self.stats.ops_alone += 1
            self.stats.alone[func.name()] = self.stats.alone.get(func.name(), 0) + 1
        if ch.pad is not None:
            # constant_pad_nd has no out= overload: the op, then a copy
            func, args, kwargs = ch.pad.call
            a = tree_map(lambda x: outs[x.k] if isinstance(x, _Ref) else x, args)
            kw = tree_map(lambda x: outs[x.k] if isinstance(x, _Ref) else x, kwargs)
            o = ch.pad.held if ch.pad.held is not None else ch.pad.out()
            with T.cuda.stream(ch.stream):
                r = func(*a, **kw)
                if o is not None:
                    o.copy_(r)
            self.stats.ops_alone += 1
            self.stats.alone_copies += 1
            self.stats.alone[func.name()] = self.stats.alone.get(func.name(), 0) + 1
        if ch.norm is not None:
            # native_layer_norm has no out= overload of its own (native_layer_norm.out,
            # autogenerated, runs the op and copies too): the op, then a copy
            # into each output handed out that is still held
            func, args, kwargs = ch.norm.call

            def sub2(x):
                return outs[x.k] if isinstance(x, _Ref) else x
            a = tree_map(sub2, args)
            kw = tree_map(sub2, kwargs)
            held = ch.norm.held if ch.norm.held is not None else [w() for w in ch.norm.outs]
            with T.cuda.stream(ch.stream):
                res = func(*a, **kw)
                for o, r in zip(held, res):
                    if o is not None:
                        o.copy_(r)
            self.stats.ops_alone += 1
            self.stats.alone_copies += 1
            nm = func.name()
            self.stats.alone[nm] = self.stats.alone.get(nm, 0) + 1


def _dense(shape, strides):
    """Whether strides lay shape out without overlap or gaps (in some order
    of the dims; size-1 dims do not count)."""
    dims = sorted((int(st), int(sz)) for sz, st in zip(shape, strides) if int(sz) != 1)
    acc = 1
    for st, sz in dims:
        if st != acc:
            return False
        acc *= sz
    return True


def _same_device(T, want, dev):
    try:
        w = want if isinstance(want, T.device) else T.device(want)
    except Exception:
        return False
    return w.type == dev.type and (w.index is None or w.index == dev.index)


def _torch_dtype(T, name):
    """The torch dtype of a node dtype name (the inverse of _dtypes)."""
    return {v: k for k, v in _dtypes(T).items()}[name]


class _Ref(object):
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k


_NORM_OPS = ("aten::native_layer_norm", "aten::native_layer_norm.default")
_PAD_OPS = ("aten::constant_pad_nd", "aten::constant_pad_nd.default")
_CAT_OPS = ("aten::cat", "aten::cat.default")
_MEAN_OPS = ("aten::mean.dim",)
_INDEX_COPY_OPS = ("aten::index_copy_", "aten::index_copy_.default")
_ARANGE_OPS = ("aten::arange", "aten::arange.default", "aten::arange.start",
               "aten::arange.start_step")


def _named(func, names):
    """Whether op func's name is one of names (False for a callable without one)."""
    try:
        return func.name() in names
    except Exception:
        return False


class _PadRec(object):
    """constant_pad_nd or cat ending a chain: spec (aten_gen.Pad), the
    padded tensor (a weakref), the call as recorded for the op-by-op path,
    a cat's other tensors; held: a strong reference during a flush."""

    def __init__(self, spec, out, call, parts=()):
        self.spec = spec
        self.out = weakref.ref(out)
        self.call = call
        self.parts = list(parts)  # a cat's other tensors (held, as externals are)
        self.held = None

    def holds(self, t):
        return self.out() is t


class _ScatterRec(object):
    """index_copy_ ending a chain: spec (aten_gen.Scatter), dst and index
    (held: the chain writes into dst), the call as recorded for the op-by-op
    path. dst is identified by its storage, so that a view of it (repeat_kv's
    expand of the cache) reads as pending too."""

    def __init__(self, spec, dst, idx, call):
        self.spec = spec
        self.dst = dst
        self.idx = idx
        self.call = call
        try:
            self.storage = dst.untyped_storage().data_ptr()
        except Exception:
            self.storage = None

    def holds(self, t):
        if t is self.dst:
            return True
        try:
            return self.storage is None or t.untyped_storage().data_ptr() == self.storage
        except Exception:
            return True


class _NormRec(object):
    """The row norm ending a chain: node (the chain node normalized), n,
    eps, gamma / beta (external indices or None), dtype, its three outputs
    (weakrefs: out, mean, rstd), the call as recorded for the op-by-op
    path; held: strong references during a flush."""

    def __init__(self, node, n, eps, gamma, beta, dtype, outs, call):
        self.node = node
        self.n = n
        self.eps = eps
        self.gamma = gamma
        self.beta = beta
        self.dtype = dtype
        self.outs = [weakref.ref(t) for t in outs]
        self.ids = {id(t): j for j, t in enumerate(outs)}
        self.call = call
        self.held = None

    def holds(self, t):
        j = self.ids.get(id(t))
        return j is not None and self.outs[j]() is t

    def spec(self):
        """The aten_norm.Norm, with the outputs written: those held."""
        if self.held is not None:
            live = [t is not None for t in self.held]
        else:
            live = [w() is not None for w in self.outs]
        return NORM.Norm(self.node, self.n, self.eps, self.gamma, self.beta, self.dtype, live)


class _RedRec(object):
    """The row mean inside a chain: node (its index), n (the row length),
    rshape (the mean's [..., 1] shape), rows (the indices of the row nodes:
    the mean and the ops over row values and scalars)."""

    def __init__(self, node, n, rshape):
        self.node = node
        self.n = n
        self.rshape = rshape
        self.rows = {node}

    def spec(self):
        """The aten_rms.Red."""
        return RMS.Red(self.node, self.n, self.rows)


class _NoFuse(Exception):
    def __init__(self, reason, detail=""):
        Exception.__init__(self, "%s: %s" % (reason, detail) if detail else reason)
        self.reason = reason


# Stream and event calls that order work between streams: a chain still
# pending when one of them runs is launched first, else an event recorded
# now would not cover the chain's kernel (nor a wait made now order it).
# Tensor.data_ptr() of a chain output launches the chain too: whoever asks
# for the address (a Triton kernel's launcher, __cuda_array_interface__)
# reads the memory outside the dispatcher.
_SYNC_CALLS = (("Stream", ("wait_event", "wait_stream", "record_event")),
               ("Event", ("record", "wait")))


def _hook_syncs(T, fuser, owner):
    """Wrap torch.cuda.Stream/Event's ordering calls to flush fuser's chain
    (on the owning thread). Returns what unhook() restores."""
    import contextlib
    import threading
    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:
        # the flush's own ops then pass through the mode, which runs them
        _disable_current_modes = contextlib.nullcontext
    saved = []
    for cname, names in _SYNC_CALLS:
        cls = getattr(T.cuda, cname, None)
        if cls is None:
            continue
        for n in names:
            f = getattr(cls, n, None)
            if f is None:
                continue

            def w(self, *a, __f=f, **k):
                if (fuser.pending() or fuser.consts) and threading.get_ident() == owner:
                    with _disable_current_modes():
                        fuser.flush()
                        fuser.fill_consts()
                return __f(self, *a, **k)
            saved.append((cls, n, cls.__dict__.get(n)))
            setattr(cls, n, w)
    # a chain output's address given out (a Triton kernel or any launcher
    # outside the dispatcher asks data_ptr()): its values must be there
    base_dp = getattr(T.Tensor, "data_ptr", None)
    if base_dp is not None:
        def dp(self):
            if fuser.pending() and not fuser.quiet and threading.get_ident() == owner and \
                    fuser.touches((self,), {}):
                with _disable_current_modes():
                    fuser.flush_read((self,), {})
            if fuser.consts and not fuser.quiet and threading.get_ident() == owner and \
                    fuser._const(self) is not None:
                with _disable_current_modes():
                    fuser.fill_consts([self])
            return base_dp(self)
        saved.append((T.Tensor, "data_ptr", T.Tensor.__dict__.get("data_ptr")))
        T.Tensor.data_ptr = dp
    return saved


def _unhook(saved):
    for cls, n, orig in reversed(saved):
        if orig is None:
            delattr(cls, n)
        else:
            setattr(cls, n, orig)


def _describe(T, x):
    """An argument as the op log writes it."""
    if isinstance(x, T.Tensor):
        return {"shape": list(x.shape), "stride": list(x.stride()),
                "dtype": str(x.dtype).replace("torch.", ""), "ptr": "0x%x" % x.data_ptr()}
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    if isinstance(x, (list, tuple)):
        return [_describe(T, y) for y in x]
    return str(x)


class OpLog(object):
    """The ATen view of a capture: one record per op the body dispatched
    (name, arguments with each tensor's shape, strides, dtype and address,
    outputs) and what fusion did with it: "chain" (its id) and "node", or
    "reason" it was not deferred. write() appends JSON lines."""

    def __init__(self, region=None):
        self.region = region
        self.ops = []

    def add(self, fuser, func, args, kwargs, out, deferred):
        T = fuser.T
        fuser.quiet = True
        try:
            r = {"i": len(self.ops), "op": func.name(),
                 "args": [_describe(T, a) for a in args],
                 "kwargs": {k: _describe(T, v) for k, v in (kwargs or {}).items()},
                 "out": _describe(T, out if isinstance(out, (list, tuple)) else [out])}
        finally:
            fuser.quiet = False
        if self.region is not None:
            r["region"] = self.region
        ch = fuser.chain
        if deferred and FE.is_foreach(r["op"]) and fuser.multi is not None:
            r["foreach"] = fuser.multi.id
            r["node"] = len(fuser.multi.nodes) - 1
        elif deferred and fuser._const(out) is not None:
            r["const"] = True          # a scalar_tensor handed out unfilled
        elif deferred and ch is not None:
            r["chain"] = ch.id
            # a norm or a pad seals its chain: deferred with one, it is this op
            r["node"] = len(ch.nodes) - (1 if ch.norm is None and ch.pad is None and
                                         ch.scatter is None else 0)
        elif fuser.last_reason:
            r["reason"] = fuser.last_reason
        self.ops.append(r)

    def write(self, path, fuser):
        import json
        with open(path, "a") as f:
            for r in self.ops:
                if "chain" in r:
                    r["fate"] = fuser.fate.get(r["chain"], "pending")
                elif "foreach" in r:
                    r["fate"] = fuser.fate.get("f%d" % r["foreach"], "pending")
                f.write(json.dumps(r, sort_keys=True) + "\n")


def mode(fuser, oplog=None, oplog_path=None):
    """A TorchDispatchMode feeding fuser; the chain is flushed on exit and
    before any stream or event call that orders work between streams.
    oplog: an OpLog to record every op into (written to oplog_path, when
    given, at exit)."""
    import threading
    from torch.utils._python_dispatch import TorchDispatchMode
    owner = threading.get_ident()
    hooks = []

    def _run(func, args, kwargs):
        # an op not deferred: after the pending work it depends on
        fuser.before(func, args, kwargs)
        if fuser.consts:
            fuser.fill_read(args, kwargs)
        out = func(*args, **kwargs)
        if oplog is not None:
            oplog.add(fuser, func, args, kwargs, out, False)
        return out

    class FuseMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):
            # TorchDispatchMode.__init_subclass__ wraps __torch_dispatch__ in
            # torch._disable_dynamo when this says True, so that a torch.compile
            # running under the mode does not trace the mode itself; the
            # wrapper's first call imports torch._dynamo (1-7 s on the GPU
            # machines), which a capture that then fails, or a program that
            # never compiles, must not pay. Only a process that has imported
            # dynamo can compile, so the wrapper is asked for then alone.
            return "torch._dynamo" in sys.modules

        def __enter__(self):
            hooks[:] = _hook_syncs(fuser.T, fuser, owner)
            return TorchDispatchMode.__enter__(self)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if threading.get_ident() != owner:
                # another thread (autograd's device threads): never defer
                # there, and nothing it can see is pending (see defer)
                return func(*args, **kwargs)
            fuser.last_reason = None
            if fuser.foreach_on and fuser.is_foreach(func):
                out = fuser.defer_foreach(func, args, kwargs)
                if out is not FE.NOT:
                    if oplog is not None:
                        oplog.add(fuser, func, args, kwargs, out, True)
                    return out
                return _run(func, args, kwargs)
            if fuser.multi is not None:
                fuser.multi_before(args, kwargs)
            if fuser.parked is not None and (fuser.is_norm(func) or fuser.is_mean(func) or
                                             fuser.is_pad(func) or fuser.is_cat(func)):
                fuser.unpark(args, kwargs)      # they extend or end the current chain only
            if fuser.is_norm(func):
                out = fuser.defer_norm(func, args, kwargs)
            elif fuser.means_on and fuser.is_mean(func):
                out = fuser.defer_mean(func, args, kwargs)
            elif fuser.pads_on and fuser.is_pad(func):
                out = fuser.defer_pad(func, args, kwargs)
            elif fuser.cats_on and fuser.is_cat(func):
                out = fuser.defer_cat(func, args, kwargs)
            elif fuser.index_copies_on and fuser.is_index_copy(func):
                out = fuser.defer_index_copy(func, args, kwargs)
            elif fuser.ints_on and fuser.is_arange(func):
                out = fuser.defer_arange(func, args, kwargs)
            else:
                out = fuser.defer_const(func, args, kwargs)
                if out is None:
                    out = fuser.defer(func, args, kwargs)
            if out is not None:
                if oplog is not None:
                    oplog.add(fuser, func, args, kwargs, out, True)
                return out
            return _run(func, args, kwargs)

        def __exit__(self, et, ev, tb):
            try:
                r = TorchDispatchMode.__exit__(self, et, ev, tb)
            finally:
                _unhook(hooks)
                hooks[:] = []
            if et is None:
                fuser.flush()
                fuser.fill_consts()
            else:
                fuser.chain = fuser.parked = fuser.multi = None
                fuser.consts.clear()
            if oplog is not None and oplog_path:
                try:
                    oplog.write(oplog_path, fuser)
                except OSError as e:
                    fuser.log(1, "torch: fusion: cannot write the op log %s: %s"
                              % (oplog_path, e))
            return r

    return FuseMode()
