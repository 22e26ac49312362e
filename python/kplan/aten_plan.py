"""Torch fusion groups shipped with a plan: PLAN.aten and its sources.

kplan.torch fuses pointwise ATen chains while it captures (kplan.aten_fuse).
`kt.save_fusion()` writes the chains it fused next to the plan it ran with:
PLAN.aten lists one group per fused chain (region, the chain's key, its ops,
iteration space, inputs with dtypes and strides, numerics, kernel name and
source), and each generated source is a file kpaten-<kp_hash64>.cu beside
it. A later process that opens the plan fuses exactly these chains with
these sources: a chain found at capture must have the key of one of its
region's groups, else it runs op by op with the reason counted. `kplan
sign` covers the file and the sources, `kplan check` finds a missing or
changed one, `kplan show` lists the groups (plan/aten_groups.c reads the
same format; spec: plan/FORMAT.md, "Torch fusion groups").

Torch-free: chains are described from aten_ops.Node / aten_gen.Ext lists,
shapes and strides as tuples.
"""

import errno
import os
import tempfile

MAGIC = "kplan-aten-groups 2"
MAGICS = {"kplan-aten-groups 1": 1, MAGIC: 2}   # the versions read
SUFFIX = ".aten"
BUNDLE_FMT = "plan-%016x" + SUFFIX   # a bundle entry's groups, by its body-hash
SEED = 0xcbf29ce484222325
_M64 = (1 << 64) - 1
MAX_SOURCE_BYTES = 64 << 20
_FIELDS = ("region", "key", "numerics", "ops", "shape", "inputs", "outputs", "kernel",
           "source", "source-hash")
_FIELDS_V2 = ("saved-kernels", "saved-bytes", "gain-ns", "per-call")   # version 2 added these

# The analyzer's cost model of a fusion of memory-bound kernels
# (analyzer/cost.h, kp_cost_fusion_gain_ns), with the documented defaults of
# its constants (common/cost_quantities.def: dram_bytes_per_ns, graph_node_ns): short
# kernels move bytes at about half the DRAM bandwidth, and each kernel of a
# graph costs at least one node's time. tests/python checks these against
# the C sources.
DRAM_BYTES_PER_NS = 3000.0
SHORT_BW_SHARE = 0.5
GRAPH_NODE_NS = 1000.0
_DT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "b8": 1, "i64": 8}


def predict_gain_ns(saved_bytes, saved_kernels):
    """The predicted saving of a fusion per occurrence, in ns: the traffic
    removed at the short-kernel bandwidth plus a graph node per kernel saved
    (the same formula as kp_cost_fusion_gain_ns, with the defaults)."""
    return int(round(saved_bytes / (DRAM_BYTES_PER_NS * SHORT_BW_SHARE) +
                     saved_kernels * GRAPH_NODE_NS))


class FormatError(ValueError):
    """PLAN.aten cannot be read (the message names the file and line)."""


def hash64(data, seed=SEED):
    """kp_hash64 (common/hash.c): FNV-1a 64 with a splitmix64 finaliser."""
    h = seed
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & _M64
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & _M64
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & _M64
    h ^= h >> 31
    return h


def path_for(plan_path):
    """PLAN.aten of the plan at plan_path."""
    return os.fspath(plan_path) + SUFFIX


def plan_hash(plan_path):
    """The body-hash of the plan file at plan_path (its third line), or None
    when it is not a plan file (a bundle's directory, unreadable)."""
    try:
        with open(plan_path, "rb") as f:
            head = f.read(256).split(b"\n")
    except (IsADirectoryError, OSError):
        return None
    if len(head) < 3 or not head[0].startswith(b"kplan-plan ") or \
            not head[2].startswith(b"body-hash "):
        return None
    try:
        return int(head[2][10:].decode("ascii"), 16)
    except ValueError:
        return None


def _canon(v):
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (bool, int, str)) or v is None:
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(_canon(x) for x in v) + ")"
    return str(v)


class Desc(object):
    """What a captured chain must be to use a shipped group: key is the
    kp_hash64 of `text`, which names every op with its attributes, dtype and
    inputs, every external input with its dtype, how it is read, its shape
    and strides, the iteration space and the values written; ops, shape,
    inputs and outputs are the group's fields for people (and say what
    differs when the key does not match)."""

    __slots__ = ("key", "text", "ops", "shape", "inputs", "outputs", "saved_kernels",
                 "saved_bytes")

    def __init__(self, key, text, ops, shape, inputs, outputs, saved_kernels=-1,
                 saved_bytes=-1):
        self.key = key
        self.text = text
        self.ops = ops
        self.shape = shape
        self.inputs = inputs
        self.outputs = outputs
        self.saved_kernels = saved_kernels
        self.saved_bytes = saved_bytes


def traffic(nodes, exts, shape, outs, rows=()):
    """(kernels saved, DRAM bytes saved) by running nodes as one kernel over
    the iteration space shape: eagerly each op is a kernel that reads its
    inputs (an external one as it is read: full, one element, a row) and
    writes its whole output; fused, each external input is read once and
    only the outputs in outs (node indices) are written. rows: the nodes of
    one value per row of the last dim (a row mean and the ops over it)."""
    numel = 1
    for d in shape:
        numel *= int(d)
    per_row = numel // int(shape[-1]) if shape and int(shape[-1]) else numel

    def ext_bytes(x):
        size = _DT_BYTES.get(x.dtype, 4)
        if x.mode == "full":
            return numel * size
        if x.mode == "scalar":
            return size
        if x.mode == "const":
            return 0                    # a literal of the kernel
        if x.mode == "strided":
            # the distinct elements: the dims it is not broadcast over
            n = 1
            for d, st in zip(shape, x.strides or ()):
                if int(st) != 0:
                    n *= int(d)
            return n * size
        return int(x.n) * size          # row or bcast: n values, each reused

    def out_bytes(k):
        return (per_row if k in rows else numel) * _DT_BYTES.get(nodes[k].dtype, 4)
    eager = 0
    for k, n in enumerate(nodes):
        for c, v in n.ins:
            if c == "x":
                eager += ext_bytes(exts[v])
            elif c == "n":
                eager += out_bytes(v)
        eager += out_bytes(k)
    fused = sum(ext_bytes(x) for x in exts) + sum(out_bytes(int(k)) for k in outs)
    return max(0, len(nodes) - 1), max(0, eager - fused)


def describe(names, nodes, exts, ext_shapes, ext_strides, shape, outs, out_strides=None,
             norm=None, pad=None, red=None, scatter=None):
    """The Desc of a chain: names (each node's ATen op, "aten::mul.Tensor",
    then the norm's when there is one), nodes (aten_ops.Node), exts
    (aten_gen.Ext), each external tensor's shape and strides, the iteration
    space, outs (node indices written) and out_strides (per entry of outs:
    the output's strides, None when row-major; the text names them only when
    one is not, so that the key of a chain of contiguous outputs is what it
    was before); norm: the aten_norm.Norm ending the chain (a LayerNorm over
    the last dim), or None. A chain with a norm names it on a line of its own
    ("norm layer_norm n<k> N=.. eps=.. gamma=x<j> beta=x<j> <dtype> outs=<out
    mean rstd written>"), so its key differs from the chain's without; pad:
    the aten_gen.Pad ending it ("pad n<k> lo=.. hi=.. value=0x.."), or None;
    red: the aten_rms.Red of a row mean inside the chain ("red mean n<k> N=..
    rows=<row nodes> aten=<the ATen order followed>"), or None; scatter: the
    aten_gen.Scatter ending it ("index_copy n<k> dim=.. size=.. strides=.."),
    or None."""
    shp = "x".join(str(int(s)) for s in shape) or "scalar"
    ins = []
    for x, xs, st in zip(exts, ext_shapes, ext_strides):
        ins.append("%s %s%s %s s%s" % (
            x.dtype, x.mode, "" if x.mode in ("full", "scalar") else
            " %d" % x.n if x.mode == "row" else
            " e%s" % ",".join(str(int(v)) for v in (x.strides or ())) if x.mode == "strided"
            else " 0x%x" % x.bits if x.mode == "const" else " %dx%d" % (x.n, x.inner),
            "x".join(str(int(s)) for s in xs) or "scalar",
            ",".join(str(int(s)) for s in st) or "-"))
    lines = ["shape %s" % shp]
    lines += ["x%d %s" % (j, s) for j, s in enumerate(ins)]
    for k, n in enumerate(nodes):
        attrs = ";".join("%s=%s" % (a, _canon(v)) for a, v in sorted(n.attrs.items())
                         if a not in ("device", "to"))
        lines.append("n%d %s %s %s [%s] <- %s" % (
            k, names[k] if k < len(names) else "?", n.op, n.dtype, attrs,
            ",".join("%s%s" % (c, _canon(v) if c == "s" else v) for c, v in n.ins)))
    line = "outs %s" % ",".join(str(int(k)) for k in outs)
    if out_strides is not None and any(st is not None for st in out_strides):
        line += " strides %s" % ";".join(
            "-" if st is None else ",".join(str(int(v)) for v in st) for st in out_strides)
    lines.append(line)
    nout = len(outs)
    sk, sb = traffic(nodes, exts, shape, outs, set(red.rows) if red is not None else ())
    if red is not None:
        lines.append(red.text())
    if norm is not None:
        lines.append(norm.text())
        nout += sum(1 for o in norm.outs if o)
        # eagerly the norm is one more kernel that reads its input again
        sk += 1
        numel = 1
        for d in shape:
            numel *= int(d)
        sb += numel * _DT_BYTES.get(norm.dtype, 4)
    if pad is not None:
        lines.append(pad.text())
        nout += 1
        # eagerly a fill and a copy: two kernels, the padded tensor written twice
        sk += 2
        pn = 1
        for d in pad.shape(shape):
            pn *= int(d)
        sb += pn * _DT_BYTES.get(nodes[pad.node].dtype, 4)
    if scatter is not None:
        lines.append(scatter.text())
        nout += 1
        # eagerly one more kernel, reading the value again
        sk += 1
        numel = 1
        for d in shape:
            numel *= int(d)
        sb += numel * _DT_BYTES.get(nodes[scatter.node].dtype, 4)
    text = "\n".join(lines) + "\n"
    return Desc(hash64(text.encode("utf-8")), text, " -> ".join(names), shp,
                "; ".join(ins), nout, sk, sb)


class Group(object):
    """One shipped group (a PLAN.aten section)."""

    __slots__ = ("id", "region", "key", "exact", "ops", "shape", "inputs", "outputs",
                 "kernel", "source", "source_hash", "saved_kernels", "saved_bytes", "gain_ns",
                 "per_call")

    def __init__(self, region, key, exact, ops, shape, inputs, outputs, kernel, source,
                 source_hash, id=0, saved_kernels=-1, saved_bytes=-1, gain_ns=None,
                 per_call=1):
        self.id = id
        self.region = region
        self.key = key
        self.exact = bool(exact)
        self.ops = ops
        self.shape = shape
        self.inputs = inputs
        self.outputs = int(outputs)
        self.kernel = kernel
        self.source = source
        self.source_hash = source_hash
        # the cost model's figures per occurrence (-1: not known, a version 1 file)
        self.saved_kernels = int(saved_kernels)
        self.saved_bytes = int(saved_bytes)
        if gain_ns is None:
            gain_ns = -1 if self.saved_bytes < 0 or self.saved_kernels < 0 else \
                predict_gain_ns(self.saved_bytes, self.saved_kernels)
        self.gain_ns = int(gain_ns)
        # times the chain ran in one call of its region (the most of any capture)
        self.per_call = int(per_call)

    @classmethod
    def of(cls, region, desc, exact, kernel, src):
        """The group of a chain fused with source src (str), named by its hash."""
        h = hash64(src.encode("utf-8"))
        return cls(region, desc.key, exact, desc.ops, desc.shape, desc.inputs, desc.outputs,
                   kernel, "kpaten-%016x.cu" % h, h, saved_kernels=desc.saved_kernels,
                   saved_bytes=desc.saved_bytes)


def _escape(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "%" or o < 0x20 or o == 0x7f:
            out.append("%%%02X" % o)
        else:
            out.append(ch)
    return "".join(out)


def _unescape(s, where):
    b = s.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x25:
            hx = b[i + 1:i + 3]
            if len(hx) != 2 or any(x not in b"0123456789abcdefABCDEF" for x in hx):
                raise FormatError("%s: malformed %%XX escape" % where)
            c = int(hx.decode("ascii"), 16)
            i += 2
        if c < 0x20 or c == 0x7f:
            raise FormatError("%s: a control character" % where)
        out.append(c)
        i += 1
    return out.decode("utf-8", "replace")


def format_groups(phash, groups, plan_name=""):
    """The text of PLAN.aten for groups (ids assigned 1, 2, ... in order)."""
    lines = [MAGIC,
             "# kplan.torch fusion groups%s (kt.save_fusion); sources beside it; "
             "spec: plan/FORMAT.md" % (" for " + _escape(plan_name) if plan_name else ""),
             "plan-hash %016x" % phash]
    for i, g in enumerate(groups):
        g.id = i + 1
        lines += ["", "[group %d]" % g.id,
                  "region %s" % _escape(g.region),
                  "key %016x" % g.key,
                  "numerics %s" % ("exact" if g.exact else "tolerant"),
                  "ops %s" % _escape(g.ops),
                  "shape %s" % _escape(g.shape),
                  "inputs %s" % _escape(g.inputs or "-"),
                  "outputs %d" % g.outputs,
                  "kernel %s" % g.kernel,
                  "source %s" % g.source,
                  "source-hash %016x" % g.source_hash,
                  "saved-kernels %d" % max(0, g.saved_kernels),
                  "saved-bytes %d" % max(0, g.saved_bytes),
                  "gain-ns %d" % max(0, g.gain_ns),
                  "per-call %d" % max(1, g.per_call)]
    return "\n".join(lines) + "\n"


def parse(text, name="PLAN.aten"):
    """(plan_hash, [Group]) from the text of a PLAN.aten. Raises FormatError."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    else:
        raise FormatError("%s: no newline at the end of the file" % name)
    if not lines or lines[0] not in MAGICS:
        if lines and lines[0].startswith("kplan-aten-groups "):
            raise FormatError("%s:1: unknown format version %r (this kplan reads %s)"
                              % (name, lines[0], ", ".join(sorted(MAGICS))))
        raise FormatError("%s:1: not a torch fusion group file (expected %r)" % (name, MAGIC))
    version = MAGICS[lines[0]]
    fields = _FIELDS + (_FIELDS_V2 if version >= 2 else ())
    phash = None
    groups = []
    cur = None
    for no, line in enumerate(lines[1:], 2):
        where = "%s:%d" % (name, no)
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if not (line.startswith("[group ") and line.endswith("]") and
                    line[7:-1].isdigit() and int(line[7:-1]) == len(groups) + 1):
                raise FormatError("%s: expected '[group %d]'" % (where, len(groups) + 1))
            if phash is None:
                raise FormatError("%s: a group before 'plan-hash'" % where)
            cur = {}
            groups.append(cur)
            continue
        k, sp, v = line.partition(" ")
        if not sp or not k or not v:
            raise FormatError("%s: expected 'key value'" % where)
        if cur is None:
            if k != "plan-hash" or phash is not None:
                raise FormatError("%s: expected 'plan-hash HASH' before the groups" % where)
            phash = _hex64(v, where)
            continue
        if k not in fields:
            raise FormatError("%s: unknown field %r%s" % (
                where, k, " (format version 1 has none)" if k in _FIELDS_V2 else ""))
        if k in cur:
            raise FormatError("%s: field %r given twice" % (where, k))
        cur[k] = (v, where)
    if phash is None:
        raise FormatError("%s: no 'plan-hash' line" % name)
    out = []
    for i, f in enumerate(groups):
        for k in fields:
            if k not in f:
                raise FormatError("%s: group %d: missing field %r" % (name, i + 1, k))
        num = f["numerics"][0]
        if num not in ("exact", "tolerant"):
            raise FormatError("%s: numerics: expected 'exact' or 'tolerant'" % f["numerics"][1])
        src = f["source"][0]
        if "/" in src or src.startswith("."):
            raise FormatError("%s: source: expected a plain file name" % f["source"][1])
        try:
            nout = int(f["outputs"][0])
        except ValueError:
            nout = 0
        if not 1 <= nout <= 64:
            raise FormatError("%s: outputs: expected an integer 1..64" % f["outputs"][1])
        cost = {}
        if version >= 2:
            for k, lo, hi in (("saved-kernels", 0, 64), ("saved-bytes", 0, 1 << 50),
                              ("gain-ns", 0, 1 << 50), ("per-call", 1, 1000000)):
                v, w = f[k]
                if not v.isdigit() or (len(v) > 1 and v[0] == "0") or not lo <= int(v) <= hi:
                    raise FormatError("%s: %s: expected an integer %d..%d" % (w, k, lo, hi))
                cost[k.replace("-", "_")] = int(v)
        out.append(Group(_unescape(*f["region"]), _hex64(*f["key"]), num == "exact",
                         _unescape(*f["ops"]), _unescape(*f["shape"]),
                         _unescape(*f["inputs"]), nout, f["kernel"][0], src,
                         _hex64(*f["source-hash"]), id=i + 1, **cost))
    return phash, out


def _hex64(v, where):
    if len(v) != 16 or any(c not in "0123456789abcdef" for c in v):
        raise FormatError("%s: expected 16 lowercase hex digits" % where)
    return int(v, 16)


def _write_atomic(path, data):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".kplan-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save(plan_path, groups, sources):
    """Write PLAN.aten for groups next to the plan at plan_path, and each
    group's source (sources: source file name -> text) beside it; sources
    first, the list last (atomically: a reader sees the old or the new).
    A signature made before no longer holds: sign again. Returns the path
    of PLAN.aten. Raises ValueError when plan_path is not a plan file."""
    phash = plan_hash(plan_path)
    if phash is None:
        raise ValueError("%s is not a plan file (save beside the plan file, then kplan "
                         "bundle copies the groups into a bundle)" % plan_path)
    d = os.path.dirname(os.fspath(plan_path)) or "."
    for g in groups:
        data = sources[g.source].encode("utf-8")
        if hash64(data) != g.source_hash:
            raise ValueError("source %s does not hash to its group's source-hash" % g.source)
        p = os.path.join(d, g.source)
        try:
            with open(p, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            pass
        _write_atomic(p, data)
    path = path_for(plan_path)
    _write_atomic(path, format_groups(phash, groups, os.path.basename(
        os.fspath(plan_path))).encode("utf-8"))
    return path


class Shipped(object):
    """The groups shipped with one plan, as a process uses them: per region,
    the group of a chain's key; each source read once and checked against
    its group's hash. `error`: why the groups cannot be used at all (the
    file is malformed, or was made with another plan); then every chain
    runs op by op with that reason."""

    def __init__(self, plan_path, groups=(), error=None, path=None):
        self.plan_path = os.fspath(plan_path)
        self.path = os.fspath(path) if path is not None else path_for(self.plan_path)
        self.dir = os.path.dirname(self.path) or "."     # the sources are beside it
        self.groups = list(groups)
        self.error = error
        self.by_key = {}
        self.by_region = {}
        for g in self.groups:
            self.by_key.setdefault((g.region, g.key), g)
            self.by_region.setdefault(g.region, []).append(g)
        self.sources = {}     # source name -> text, read once

    @classmethod
    def load(cls, plan_path, path=None, phash=None):
        """The groups of the plan at plan_path, or None when it has none.
        Beside a plan file (PLAN.aten) by default; path and phash: the file
        and the plan's body-hash libkplanrt names (kp_rt_aten_groups: a
        bundle's chosen entry, plan-<hash>.aten in the bundle)."""
        if path is None:
            path = path_for(plan_path)
        try:
            with open(path, "rb") as f:
                data = f.read((16 << 20) + 1)
        except OSError as e:
            if e.errno == errno.ENOENT or isinstance(e, IsADirectoryError):
                return None
            return cls(plan_path, error="unreadable: %s: %s" % (path, e.strerror), path=path)
        try:
            ghash, groups = parse(data.decode("utf-8"), path)
        except (FormatError, UnicodeDecodeError) as e:
            return cls(plan_path, error="malformed: %s" % e, path=path)
        ph = plan_hash(plan_path) if phash is None else phash
        if ph is None or ph != ghash:
            return cls(plan_path, error="stale: %s was made with another plan (plan-hash "
                       "%016x, the plan's body-hash %s)" % (
                           path, ghash, "unknown" if ph is None else "%016x" % ph), path=path)
        return cls(plan_path, groups, path=path)

    @property
    def exact(self):
        """Whether every group is exact."""
        return all(g.exact for g in self.groups)

    def match(self, region, desc, exact=None):
        """(group, None) for a chain of region described by desc (exact:
        the numerics asked, None: the group's), else (None, (reason,
        detail)): reason "plan-groups" (the file cannot be used),
        "not-in-plan" (no group of the region has these ops),
        "plan-mismatch" (one has, with another shape, inputs, outputs or
        numerics)."""
        if self.error:
            return None, ("plan-groups", self.error)
        g = self.by_key.get((region, desc.key))
        if g is not None and g.outputs == desc.outputs:
            if exact is not None and g.exact != bool(exact):
                return None, ("plan-mismatch", "group %d is %s, fusion asks %s" % (
                    g.id, "exact" if g.exact else "tolerant",
                    "exact" if exact else "tolerant"))
            return g, None
        same = [c for c in self.by_region.get(region, ()) if c.ops == desc.ops]
        if not same:
            return None, ("not-in-plan", "no group of region '%s' has the ops %s"
                          % (region, desc.ops))
        c = same[0]
        diff = []
        if c.shape != desc.shape:
            diff.append("shape %s, the group's %s" % (desc.shape, c.shape))
        if c.inputs != desc.inputs:
            diff.append("inputs %s, the group's %s" % (desc.inputs, c.inputs))
        if c.outputs != desc.outputs:
            diff.append("%d values written, the group's %d" % (desc.outputs, c.outputs))
        if not diff:
            diff.append("the ops' arguments or the outputs' layouts differ")
        return None, ("plan-mismatch", "group %d: %s" % (c.id, "; ".join(diff)))

    def source(self, g):
        """The text of group g's source, checked against its hash; raises
        LookupError((reason, detail)): "source-missing", "source-changed"."""
        src = self.sources.get(g.source)
        if src is not None:
            return src
        p = os.path.join(self.dir, g.source)
        try:
            with open(p, "rb") as f:
                data = f.read(MAX_SOURCE_BYTES + 1)
        except OSError as e:
            raise LookupError(("source-missing", "%s: %s" % (p, e.strerror)))
        h = hash64(data)
        if h != g.source_hash:
            raise LookupError(("source-changed", "%s hashes to %016x, group %d says %016x"
                               % (p, h, g.id, g.source_hash)))
        src = data.decode("utf-8", "replace")
        self.sources[g.source] = src
        return src
