"""Fusion of PyTorch's multi-tensor ops (`_foreach_*`) while kplan.torch captures.

An optimizer step of torch.optim's foreach implementation (the default on
CUDA: AdamW, Adam, SGD, ...) is a run of `_foreach_*` ops over the same lists
of tensors: parameters, gradients, moments, step counters. Each op is one
pass over every tensor. ATen runs each op as one multi_tensor_apply kernel,
or, when its second list holds 0-dim tensors (AdamW's bias corrections with
capturable=True), one kernel per tensor. AdamW's step on a 4-layer GPT-2
(52 tensors) is 18 ops, 120 kernels and 22 passes over the parameters.

`Program` defers such a run. List index i is a *lane* (the i-th parameter
with its gradient and moments); each op is a node that every lane runs over
its own elements. A list of 0-dim tensors (the step counters and what is
computed from them) is *small*; the others are *big*. At the flush the
program is at most two generated kernels:

- the small nodes, one thread per lane. They store the small tensors written
  in place (the step counter) and the fresh ones still held, and leave in a
  scratch buffer each lane scalar that a big node reads;
- the big nodes, over every lane's elements. Blocks are assigned to lanes by
  a table passed by value (`__grid_constant__`: read in place, never copied).
  Every element is loaded once, at the top, and stored once, at the end.

Every tensor written in place is stored once, with its final value. A fresh
output (what `_foreach_sqrt` returns) is stored only while something holds
it. Nodes are SSA values, so an op reads a list as it was at that op, even
when a later op changes it in place.

Numerics: each node computes what ATen's foreach functor computes, in float
(opmath) with the same roundings. `a + s * (b * c)` (addcmul) and lerp are
contracted as nvcc contracts them in ATen (fmaf); division is true division;
sqrtf and powf are IEEE. The expressions use the _rn intrinsics, so that
NVRTC contracts nothing else. Only float32 tensors are fused: the lists of
an fp32 optimizer. The checks are in tests/gpu/torch_fusion_ops.py (every op,
bit for bit against eager).

Torch-free apart from `T` passed in (tests use a fake).
"""

import hashlib
import weakref

from . import aten_ops as A

NOT = object()        # the op is not deferred: it runs as usual

BLOCK = 256           # threads of a block over elements
ILP = 4               # elements per thread
PARAM_BYTES = 4000    # a launch's table: under the classic 4 KiB kernel-parameter limit
MAX_NODES = 96        # a longer program is launched and another begun
MAX_VARS = 16

# kind of arguments, per op: "scalar" (list, scalar), "list" (list, list
# [, alpha]), "unary" (list), "lerp" (list, list, weight), "pointwise"
# (list, list, list, value), "rpow" (scalar, list)
_OPS = {}


def _register():
    for op in ("add", "sub", "mul", "div"):
        for ov in ("Scalar", "List"):
            kind = "scalar" if ov == "Scalar" else "list"
            _OPS["aten::_foreach_%s_.%s" % (op, ov)] = (kind, op, True)
            _OPS["aten::_foreach_%s.%s" % (op, ov)] = (kind, op, False)
    for op in ("neg", "reciprocal", "sqrt"):
        _OPS["aten::_foreach_%s_" % op] = ("unary", op, True)
        _OPS["aten::_foreach_%s" % op] = ("unary", op, False)
    _OPS["aten::_foreach_lerp_.Scalar"] = ("lerp", "lerp", True)
    _OPS["aten::_foreach_lerp.Scalar"] = ("lerp", "lerp", False)
    for op in ("addcmul", "addcdiv"):
        _OPS["aten::_foreach_%s_.Scalar" % op] = ("pointwise", op, True)
        _OPS["aten::_foreach_%s.Scalar" % op] = ("pointwise", op, False)
    _OPS["aten::_foreach_pow.ScalarAndTensor"] = ("rpow", "rpow", False)


_register()


class Refuse(Exception):
    """This op is not deferred; .reason is a short stable word for the stats."""

    def __init__(self, reason, detail=""):
        Exception.__init__(self, "%s%s" % (reason, ": " + detail if detail else ""))
        self.reason = reason


class Full(Exception):
    """The program takes no more ops: launch it and begin another."""


def is_foreach(name):
    return name.startswith("aten::_foreach_")


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class Spec(object):
    """One foreach call read: op, kind, in place, its lists (self first; for
    rpow the exponents), its scalar (the scalar, alpha, weight or value)."""

    def __init__(self, kind, op, inplace, lists, scalar):
        self.kind, self.op, self.inplace = kind, op, inplace
        self.lists, self.scalar = lists, scalar
        self.lanes = len(lists[0])
        self.device = lists[0][0].device if lists[0] else None


def parse(T, name, args, kwargs):
    """The call as a Spec, or raises Refuse."""
    e = _OPS.get(name)
    if e is None:
        raise Refuse("foreach-op", name)
    kind, op, inplace = e
    kwargs = dict(kwargs or {})
    args = list(args)
    named = {"scalar": ("self", "scalar"), "list": ("self", "other", "alpha"),
             "unary": ("self",), "lerp": ("self", "tensors1", "weight"),
             "pointwise": ("self", "tensor1", "tensor2", "value"),
             "rpow": ("self", "exponent")}[kind]
    if len(args) > len(named):
        raise Refuse("foreach-args")
    vals = dict(zip(named, args))
    for k, v in kwargs.items():
        if k not in named or k in vals:
            raise Refuse("foreach-args", k)
        vals[k] = v
    if kind == "rpow":
        lists, scalar = [vals.get("exponent")], vals.get("self")
    else:
        lists = [vals.get(k) for k in named if k in ("self", "other", "tensors1", "tensor1",
                                                      "tensor2")]
        scalar = {"scalar": vals.get("scalar"), "list": vals.get("alpha", 1),
                  "unary": 0, "lerp": vals.get("weight"),
                  "pointwise": vals.get("value", 1)}[kind]
    if not _number(scalar):
        raise Refuse("foreach-scalar")
    if kind == "list" and op in ("mul", "div") and "alpha" in vals:
        raise Refuse("foreach-args", "alpha")
    n = None
    for lst in lists:
        if not isinstance(lst, (list, tuple)) or not lst:
            raise Refuse("foreach-args")
        if n is not None and len(lst) != n:
            raise Refuse("foreach-args", "lists of different lengths")
        n = len(lst)
        for t in lst:
            if not isinstance(t, T.Tensor):
                raise Refuse("foreach-args")
            if t.dtype != T.float32:
                raise Refuse("foreach-dtype")
            if t.device.type != "cuda" or t.device != lst[0].device or \
                    t.device != lists[0][0].device:
                raise Refuse("foreach-device")
            if not t.is_contiguous():
                raise Refuse("foreach-layout")
            if getattr(t, "requires_grad", False) and T.is_grad_enabled():
                raise Refuse("foreach-autograd")
    return Spec(kind, op, inplace, [list(x) for x in lists], float(scalar))


class _Call(object):
    """An op as the program recorded it, for the op-by-op path: its lists
    as var indices."""

    def __init__(self, kind, op, lists, scalar):
        self.kind, self.op, self.lists, self.scalar = kind, op, lists, scalar


def _storage(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


class Var(object):
    """One list of the program: its tensors (held when they came in; weak
    when the program made them), whether they are 0-dim (small), its current
    value (a node index; None: as in memory) and whether that value must be
    stored (written in place, or a fresh output)."""

    def __init__(self, idx, tensors, fresh):
        self.idx = idx
        self.fresh = fresh
        self.small = all(t.dim() == 0 for t in tensors)
        self.shapes = [tuple(t.shape) for t in tensors]
        self.strong = None if fresh else list(tensors)
        self.weak = [weakref.ref(t) for t in tensors] if fresh else None
        self.value = None
        self.written = False
        self.held = None        # at the flush: the fresh tensors stored (temporaries where dead)

    def tensor(self, i):
        if self.strong is not None:
            return self.strong[i]
        if self.held is not None:
            return self.held[i]
        return self.weak[i]()

    def alive(self):
        return self.strong is not None or any(w() is not None for w in self.weak)


class Node(object):
    def __init__(self, op, refs, scalar, small):
        self.op, self.refs, self.scalar, self.small = op, refs, scalar, small


class Program(object):
    """The pending run of foreach ops on one device and stream, over lists of
    one length (lanes). add() takes each op; sources() and tables() give what
    the flush launches; replay() runs the ops as eager did."""

    def __init__(self, T, device, stream, lanes, pid=0):
        self.T = T
        self.device, self.stream, self.lanes = device, stream, lanes
        self.id = pid
        self.vars = []
        self.nodes = []
        self.ids = {}           # id(tensor) -> (var index, lane)
        self.stor = {}          # storage address -> var index
        self.calls = []         # (func, _Call, out var index or None) per op

    def fits(self, spec, stream):
        return spec.lanes == self.lanes and spec.device == self.device and stream == self.stream

    def _var_of(self, lst):
        """The var lst is (its tensors at their lanes), None when no tensor of
        it is known; raises Refuse when only some are."""
        hits = []
        for i, t in enumerate(lst):
            h = self.ids.get(id(t))
            if h is not None and self.vars[h[0]].tensor(h[1]) is not t:
                h = None
            hits.append(h)
        if all(h is None for h in hits):
            return None
        v = hits[0][0] if hits[0] is not None else None
        if v is None or any(h != (v, i) for i, h in enumerate(hits)):
            raise Refuse("foreach-lists", "a list mixes known and new tensors")
        return v

    def _check_new(self, lst, pending):
        """A list that comes in: refused when its memory overlaps another
        list's, or two of its lanes share memory (views of one buffer)."""
        seen = set()
        for t in lst:
            s = _storage(t)
            if s is None or s in seen or s in self.stor or s in pending:
                raise Refuse("foreach-alias")
            seen.add(s)
        return seen

    def add(self, func, spec):
        """Defer one op: its outputs (fresh tensors handed out) or None (in
        place). Raises Refuse (nothing changed) or Full."""
        T = self.T
        if len(self.nodes) >= MAX_NODES:
            raise Full()
        known, new, pending = [], [], set()
        for lst in spec.lists:
            v = self._var_of(lst)
            if v is None:
                # the same new list twice in one call (addcmul(x, g, g)) is one var
                same = [j for j, l2 in enumerate(new) if l2 is not None and
                        all(a is b for a, b in zip(l2, lst))]
                if same:
                    known.append(("new", same[0]))
                    new.append(None)
                    continue
                j = len(new)
                pending |= self._check_new(lst, pending)
                known.append(("new", j))
                new.append(lst)
            else:
                known.append(("var", v))
                new.append(None)
        if len(self.vars) + sum(1 for x in new if x is not None) + 1 > MAX_VARS:
            raise Full()
        # shapes: small lists are 0-dim in every lane; an op over big lists
        # takes big lists of its lanes' shapes, and (the ".List" ops) small ones
        smalls = [all(t.dim() == 0 for t in lst) for lst in spec.lists]
        small = smalls[0]
        for k, lst in enumerate(spec.lists[1:], 1):
            if smalls[k] and not small and spec.kind == "list":
                continue
            if smalls[k] != small:
                raise Refuse("foreach-shape", "0-dim and other tensors mixed")
            if not small and any(tuple(a.shape) != tuple(b.shape)
                                 for a, b in zip(lst, spec.lists[0])):
                raise Refuse("foreach-shape")
        if spec.inplace and known[0][0] == "var" and self.vars[known[0][1]].fresh and \
                not self.vars[known[0][1]].alive():
            raise Refuse("foreach-dead")
        # commit: the new lists become vars
        made, idx = {}, []
        for k, (what, j) in enumerate(known):
            if what == "var":
                idx.append(j)
                continue
            if j not in made:
                v = Var(len(self.vars), new[k], fresh=False)
                self.vars.append(v)
                for i, t in enumerate(new[k]):
                    self.ids[id(t)] = (v.idx, i)
                    self.stor[_storage(t)] = v.idx
                made[j] = v.idx
            idx.append(made[j])
        refs = [self._ref(j) for j in idx]
        # the binary ops' node names say the second operand: a scalar or a list
        node = Node(spec.op + {"scalar": "_s", "list": "_l"}.get(spec.kind, ""), refs,
                    spec.scalar, small)
        self.nodes.append(node)
        k = len(self.nodes) - 1
        call_spec = _Call(spec.kind, spec.op, idx, spec.scalar)
        if spec.inplace:
            v = self.vars[idx[0]]
            v.value, v.written = k, True
            _bump(T, spec.lists[0])
            self.calls.append((func, call_spec, None))
            return None
        outs = [T.empty(t.shape, dtype=t.dtype, device=t.device) for t in spec.lists[0]]
        v = Var(len(self.vars), outs, fresh=True)
        v.value, v.written = k, True
        self.vars.append(v)
        for i, t in enumerate(outs):
            self.ids[id(t)] = (v.idx, i)
            self.stor[_storage(t)] = v.idx
        self.calls.append((func, call_spec, v.idx))
        return outs

    def hold(self):
        """Fix what the flush stores: each fresh list still held is held to the
        end of the launch, with a temporary for a lane nobody holds."""
        T = self.T
        for v in self.vars:
            if v.fresh and v.written and v.alive():
                v.held = [w() if w() is not None else
                          T.empty(v.shapes[i], dtype=T.float32, device=self.device)
                          for i, w in enumerate(v.weak)]

    def release(self):
        for v in self.vars:
            v.held = None
        self.vars = []
        self.ids.clear()
        self.stor.clear()

    def _ref(self, j):
        v = self.vars[j]
        return ("n", v.value) if v.value is not None else ("m", j)

    def touches(self, tensors):
        """Whether any of tensors is a list's tensor or shares its memory."""
        for t in tensors:
            h = self.ids.get(id(t))
            if h is not None and self.vars[h[0]].tensor(h[1]) is t:
                return True
            if _storage(t) in self.stor:
                return True
        return False

    # -- the kernels ------------------------------------------------------
    def plan(self):
        """What the flush stores: ([(var, node)] small stores, [(var, node)]
        big stores, scratch refs (the lane scalars big nodes read through the
        scratch buffer), direct small vars (read by big nodes from memory))."""
        st_small, st_big = [], []
        for v in self.vars:
            if v.written and (not v.fresh or v.alive()):
                (st_small if v.small else st_big).append((v.idx, v.value))
        scratch, direct = [], []
        for nd in self.nodes:
            if nd.small:
                continue
            for r in nd.refs:
                if r[0] == "n" and self.nodes[r[1]].small:
                    if r not in scratch:
                        scratch.append(r)
                elif r[0] == "m" and self.vars[r[1]].small:
                    if self.vars[r[1]].written:
                        if r not in scratch:
                            scratch.append(r)
                    elif r[1] not in direct:
                        direct.append(r[1])
        return st_small, st_big, scratch, direct

    def sources(self):
        """(small kernel or None, big kernel or None, plan): each kernel a
        (name, source, columns, lanes per launch) where columns are the var
        indices of its table's pointer rows (the big kernel: big columns, then
        direct small columns)."""
        st_small, st_big, scratch, direct = self.plan()
        small_nodes = [k for k, nd in enumerate(self.nodes) if nd.small]
        big_nodes = [k for k, nd in enumerate(self.nodes) if not nd.small]
        ka = kb = None
        if st_small or scratch:
            cols = []
            for k in small_nodes:
                for r in self.nodes[k].refs:
                    if r[0] == "m" and r[1] not in cols:
                        cols.append(r[1])
            for r in scratch:
                if r[0] == "m" and r[1] not in cols:
                    cols.append(r[1])
            for j, _ in st_small:
                if j not in cols:
                    cols.append(j)
            ka = _small_source(self, small_nodes, cols, st_small, scratch)
        if st_big:
            cols = []
            for k in big_nodes:
                for r in self.nodes[k].refs:
                    if r[0] == "m" and not self.vars[r[1]].small and r[1] not in cols:
                        cols.append(r[1])
            for j, _ in st_big:
                if j not in cols:
                    cols.append(j)
            kb = _big_source(self, big_nodes, cols, direct, scratch, st_big)
        return ka, kb, (st_small, st_big, scratch, direct)

    def tables(self, kernel, big, scratch_ptr, n_scratch):
        """The by-value tables of one kernel's launches: [(grid, block,
        bytes)], one per group of lanes that fits a table."""
        import struct
        name, src, cols, per = kernel
        out = []
        for a in range(0, self.lanes, per):
            lanes = list(range(a, min(self.lanes, a + per)))
            words = []
            for group in (cols if big else (cols,)):
                for j in group:
                    v = self.vars[j]
                    row = [v.tensor(i).data_ptr() for i in lanes]
                    words += row + [0] * (per - len(row))
                if not group:
                    words += [0] * per          # the struct's one unused row
            sp = scratch_ptr + 4 * a * n_scratch if scratch_ptr else 0
            if big:
                numel, bstart, b = [], [], 0
                ref = self.vars[cols[0][0]]
                for i in lanes:
                    n = 1
                    for s in ref.shapes[i]:
                        n *= s
                    numel.append(n)
                    bstart.append(b)
                    b += (n + BLOCK * ILP - 1) // (BLOCK * ILP)
                bstart.append(b)
                words += numel + [0] * (per - len(lanes))
                words += bstart + [b] * (per - len(lanes))
                words += [sp, len(lanes)]
                if b == 0:
                    continue
                out.append((b, BLOCK, struct.pack("<%dQ" % len(words), *words)))
            else:
                words += [sp, len(lanes)]
                out.append(((len(lanes) + 127) // 128, 128,
                            struct.pack("<%dQ" % len(words), *words)))
        return out

    # -- shipped with a plan ------------------------------------------------
    def text(self, names):
        """What the program is, as a shipped group's key hashes it: every
        list (small or big, came in or made here, each lane's shape), every
        node (its op, scalar bits and operands) and what is stored; names:
        the ops' names in order."""
        import struct
        lines = ["foreach lanes %d" % self.lanes, "ops " + " -> ".join(names)]
        for v in self.vars:
            lines.append("var %d %s %s %s" % (
                v.idx, "small" if v.small else "big", "fresh" if v.fresh else "in",
                ",".join("x".join(str(int(d)) for d in sh) or "scalar" for sh in v.shapes)))
        for k, nd in enumerate(self.nodes):
            lines.append("node %d %s %08x %s" % (
                k, nd.op, struct.unpack("<I", struct.pack("<f", A.f32(nd.scalar)))[0],
                " ".join("%s%d" % r for r in nd.refs)))
        st_small, st_big, _, _ = self.plan()
        lines.append("stores " + " ".join("v%d=n%d" % x for x in st_small + st_big))
        return "\n".join(lines) + "\n"

    def traffic(self):
        """(kernels, bytes) eager moves more than the program: one kernel per
        op (per lane where ATen takes its slow path: a .List op over 0-dim
        tensors), and each op's reads and writes of the big lists against
        one load and one store of each."""
        big = 0
        for v in self.vars:
            if not v.small:
                big = sum(_numel(sh) for sh in v.shapes)
                break
        eager_k = eager_b = 0
        for nd in self.nodes:
            eager_k += self.lanes if nd.op in ("mul_l", "div_l", "add_l", "sub_l") and \
                not nd.small and any(r[0] == "m" and self.vars[r[1]].small or
                                     r[0] == "n" and self.nodes[r[1]].small
                                     for r in nd.refs) else 1
            if not nd.small:
                eager_b += (len(nd.refs) + 1) * big * 4
        _, st_big, _, _ = self.plan()
        loads = set(r[1] for nd in self.nodes if not nd.small for r in nd.refs
                    if r[0] == "m" and not self.vars[r[1]].small)
        fused_b = (len(loads) + len(st_big)) * big * 4
        return eager_k, max(0, eager_b - fused_b)

    # -- op by op ------------------------------------------------------------
    def replay(self):
        """Run the ops as eager does (the kernels could not be had): each op
        on the tensors of its lists, a fresh output copied into the tensors
        handed out (or into temporaries when nobody holds them)."""
        T = self.T
        tmp = {}

        def lst(j):
            v = self.vars[j]
            if not v.fresh:
                return v.strong
            if j not in tmp:
                tmp[j] = [v.tensor(i) if v.tensor(i) is not None else
                          T.empty(v.shapes[i], dtype=T.float32, device=self.device)
                          for i in range(self.lanes)]
            return tmp[j]
        for func, sp, out in self.calls:
            ls = [lst(j) for j in sp.lists]
            a = {"scalar": lambda: (ls[0], sp.scalar), "unary": lambda: (ls[0],),
                 "lerp": lambda: (ls[0], ls[1], sp.scalar),
                 "pointwise": lambda: (ls[0], ls[1], ls[2], sp.scalar),
                 "rpow": lambda: (sp.scalar, ls[0]),
                 "list": lambda: (ls[0], ls[1])}[sp.kind]()
            kw = {"alpha": sp.scalar} if sp.kind == "list" and sp.op in ("add", "sub") else {}
            r = func(*a, **kw)
            if out is not None:
                for dst, src in zip(lst(out), r):
                    dst.copy_(src)


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _bump(T, tensors):
    """Bump the version counters of tensors written in place, as ATen's
    foreach kernels do (autograd's check of saved tensors reads them)."""
    g = getattr(getattr(T, "autograd", None), "graph", None)
    inc = getattr(g, "increment_version", None)
    if inc is None:
        return
    for t in tensors:
        try:
            inc(t)
        except Exception:
            pass


def _expr(nd, ins):
    """One node's value over the float expressions ins, as ATen's foreach
    functor computes it."""
    c = A.flit(nd.scalar)
    op = nd.op
    x = ins[0]
    if op == "add_s":
        return "__fadd_rn(%s, %s)" % (x, c)
    if op == "sub_s":
        return "__fsub_rn(%s, %s)" % (x, c)
    if op == "mul_s":
        return "__fmul_rn(%s, %s)" % (x, c)
    if op == "div_s":
        # ATen multiplies by the reciprocal, taken in double (scalar_reciprocal)
        return "__fmul_rn(%s, %s)" % (x, A.flit(A.f32(1.0 / nd.scalar))) if nd.scalar \
            else "__fdiv_rn(%s, %s)" % (x, c)
    if op == "add_l":
        return "fmaf(%s, %s, %s)" % (c, ins[1], x)
    if op == "sub_l":
        return "fmaf(%s, %s, %s)" % (A.flit(-nd.scalar), ins[1], x)
    if op == "mul_l":
        return "__fmul_rn(%s, %s)" % (x, ins[1])
    if op == "div_l":
        return "__fdiv_rn(%s, %s)" % (x, ins[1])
    if op == "neg":
        return "(-%s)" % x
    if op == "reciprocal":
        return "__fdiv_rn(1.0f, %s)" % x
    if op == "sqrt":
        return "sqrtf(%s)" % x
    if op == "lerp":
        w = A.f32(nd.scalar)
        d = "__fsub_rn(%s, %s)" % (ins[1], x)
        if abs(w) < 0.5:
            return "fmaf(%s, %s, %s)" % (A.flit(w), d, x)
        return "fmaf(-(%s), %s, %s)" % (d, A.flit(A.f32(1.0 - w)), ins[1])
    if op == "addcmul":
        if nd.scalar == 1:
            # value 1: one rounding, b * c + a (eager's bits on torch 2.11)
            return "fmaf(%s, %s, %s)" % (ins[1], ins[2], x)
        return "fmaf(%s, __fmul_rn(%s, %s), %s)" % (c, ins[1], ins[2], x)
    if op == "addcdiv":
        return "fmaf(%s, __fdiv_rn(%s, %s), %s)" % (c, ins[1], ins[2], x)
    if op == "rpow":
        return "powf(%s, %s)" % (c, x)
    raise AssertionError("no expression for %s" % op)


def _body(prog, nodes, load):
    """The statements of nodes (indices, in order): n<k> = ...; load(ref)
    names the value of a ("m", var) ref or of a node outside nodes."""
    lines = []
    mine = set(nodes)
    for k in nodes:
        nd = prog.nodes[k]
        ins = ["n%d" % r[1] if r[0] == "n" and r[1] in mine else load(r) for r in nd.refs]
        lines.append("        const float n%d = %s;" % (k, _expr(nd, ins)))
    return lines


def _name(prefix, body):
    return "%s_%s" % (prefix, hashlib.sha1(body.encode()).hexdigest()[:16])


def _per_launch(words_per_lane, fixed):
    per = (PARAM_BYTES // 8 - fixed) // words_per_lane
    return max(1, min(per, 1024))


def _small_source(prog, nodes, cols, stores, scratch):
    """The kernel of the small nodes: one thread per lane."""
    per = _per_launch(max(1, len(cols)), 2)
    col = {j: c for c, j in enumerate(cols)}
    lines = ["        const float m%d = *p.v[%d][i];" % (j, col[j])
             for j in cols if any(r == ("m", j) for k in nodes for r in prog.nodes[k].refs) or
             ("m", j) in scratch]
    lines += _body(prog, nodes, lambda r: "m%d" % r[1])
    for j, k in stores:
        lines.append("        *p.v[%d][i] = n%d;" % (col[j], k))
    for s, r in enumerate(scratch):
        lines.append("        p.scratch[i * %d + %d] = %s;" % (
            len(scratch), s, "n%d" % r[1] if r[0] == "n" else "m%d" % r[1]))
    body = "\n".join(lines)
    name = _name("kp_foreach_s", body + str(per))
    src = "\n".join([
        "// kplan: a foreach program's lane scalars, one thread per lane",
        "struct P { float *v[%d][%d]; float *scratch; long long n; };" % (max(1, len(cols)), per),
        'extern "C" __global__ void %s(const __grid_constant__ P p)' % name,
        "{",
        "    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
        "    if (i < p.n) {",
        body,
        "    }",
        "}", ""])
    return name, src, cols, per


def _big_source(prog, nodes, cols, direct, scratch, st_big):
    """The kernel of the big nodes: blocks of BLOCK x ILP elements, each
    block in one lane (p.bstart), elements loaded once and stored once."""
    nb, nd_ = len(cols), len(direct)
    per = _per_launch(max(1, nb) + max(1, nd_) + 2, 3)
    col = {j: c for c, j in enumerate(cols)}
    dcol = {j: c for c, j in enumerate(direct)}
    head = []
    for j in direct:
        head.append("    const float d%d = *p.s[%d][l];" % (j, dcol[j]))
    for s, r in enumerate(scratch):
        head.append("    const float s%d = p.scratch[l * %d + %d];" % (s, len(scratch), s))

    def load(r):
        if r in scratch:
            return "s%d" % scratch.index(r)
        if r[0] == "m" and r[1] in dcol:
            return "d%d" % r[1]
        return "m%d" % r[1]
    used = [j for j in cols if any(r == ("m", j) for k in nodes for r in prog.nodes[k].refs)]
    lines = ["            const float m%d = p.v[%d][l][j];" % (j, col[j]) for j in used]
    lines += ["    " + x for x in _body(prog, nodes, load)]
    lines += ["            p.v[%d][l][j] = n%d;" % (col[j], k) for j, k in st_big]
    body = "\n".join(head + lines)
    name = _name("kp_foreach_b", body + str(per))
    src = "\n".join([
        "// kplan: a foreach program's elements, blocks of %d per lane" % (BLOCK * ILP),
        "struct P { float *v[%d][%d]; const float *s[%d][%d]; long long numel[%d];" % (
            max(1, nb), per, max(1, nd_), per, per),
        "           long long bstart[%d]; const float *scratch; long long n; };" % (per + 1),
        'extern "C" __global__ void __launch_bounds__(%d) %s(const __grid_constant__ P p)' % (
            BLOCK, name),
        "{",
        "    const long long b = blockIdx.x;",
        "    int lo = 0, hi = (int)p.n - 1;",
        "    while (lo < hi) {",
        "        const int mid = (lo + hi + 1) >> 1;",
        "        if (p.bstart[mid] <= b)",
        "            lo = mid;",
        "        else",
        "            hi = mid - 1;",
        "    }",
        "    const int l = lo;",
        "    const long long n = p.numel[l];",
        "    const long long base = (b - p.bstart[l]) * %d + threadIdx.x;" % (BLOCK * ILP),
    ] + head + [
        "#pragma unroll",
        "    for (int k = 0; k < %d; k++) {" % ILP,
        "        const long long j = base + k * %d;" % BLOCK,
        "        if (j < n) {",
    ] + lines + [
        "        }",
        "    }",
        "}", ""])
    return name, src, (cols, direct), per
