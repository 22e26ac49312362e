"""kplan.torch: apply a kplan plan to an eager PyTorch program.

    import kplan.torch as kt

    kt.open("model.kplan")                # optional: kt.open() or none reads KPLAN_PLAN

    @kt.region("decode")                  # a label of the plan
    def decode(ids, pos):
        return model(ids, position_ids=pos).logits

Per region and shape key (every tensor argument's shape, dtype, device,
strides and requires_grad, the VALUES of Python scalars and strings, the
identity of any other object, the current device and stream, and what the
region's `key` callable returns), a call goes through:

    warm-up    the plan's count of eager calls (at least 1); the last one runs
               on the capture stream under kp_rt_watch_begin/end: a body that
               would break a capture (a sync, .item(), a pageable copy...)
               stays eager for the process (would-break-capture)
    capture    torch.cuda.graph on a side stream with a private memory pool
               (capture_error_mode "thread_local"), the tensor arguments
               copied first into static tensors of this key
    replay     the arguments copied into the static tensors, one graph
               launch, arguments the body writes to copied back, outputs
               returned as clones (static_outputs=True: the static tensors)

and on any failure falls back to eager with a reason code (REASONS), one log
line, and counters (stats()). Nothing here raises on a fallback unless
strict mode asks for it; exceptions inside a capture never reach the caller:
the call is run again eagerly and its result returned.

torch is imported on the first region call, not by `import kplan.torch`.
"""
import atexit
import collections
import enum
import functools
import os
import sys
import threading
import traceback
import types

from . import _rt

__all__ = [
    "open", "close", "current", "region", "mark", "stats", "reset", "save_fusion",
    "Region", "Runtime", "KplanError", "REASONS", "TORCH_REASONS",
]

# Reason codes: the C runtime's (same names, same meaning where they overlap)
# plus the ones only the PyTorch binding has.
TORCH_REASONS = (
    "cpu-tensor",          # a tensor argument is not on a CUDA device
    "unsupported-tensor",  # a sparse, nested or other non-strided tensor argument
    "multi-device",        # tensors on several devices, or not on the current one
    "requires-grad",       # autograd through the region: inputs or outputs need grad
    "non-tensor-output",   # the region returned something else than tensors/None
    "aliased-inputs",      # two arguments share memory and the body writes to one
    "no-cuda",             # torch has no CUDA device here
    "path-retry",          # a library's eager path failed in the capture: its graph's path next
)
REASONS = _rt.REASONS + TORCH_REASONS

# Reasons that strict mode does not turn into errors (the C runtime's list).
NOT_STRICT = frozenset((
    "none", "no-plan", "disabled", "planned-eager", "warmup", "nested", "busy",
    "backoff", "key-thrash", "ambiguous-bind", "path-retry",
))

# The C runtime's constants (runtime/core.c), same meaning.
BACKOFF_BASE = 16       # eager calls after the first failure, doubled per failure
THRASH_WINDOW = 64      # region calls per thrash window
THRASH_EVICTIONS = 4    # evictions in one window that pause the region
THRASH_PAUSE = 256      # first pause in region calls, doubled each time
MAX_FAILURES = 3        # failures of one key before it stays eager (gave-up)
_WATCH_ON_CURRENT = os.environ.get("KPLAN_TORCH_WATCH_STREAM") == "current"
# The binding's own defaults.
DEFAULT_MAX_KEYS = 8    # graphs kept per region (kp_rt_region_info has no shape-keys)
DEFAULT_WARMUP = 2      # eager calls before capture when the plan does not say
# In a job of several ranks (torch.distributed up), at least this many eager
# calls, the last one watched, unless kt.open(warmup=) says otherwise:
# DistributedDataParallel times its first 10 iterations (and every 100th)
# with cudaEventSynchronize, read at the next iteration's forward, so a watch
# of call 11 or earlier reports a sync (measured: watched at call 11, a sync;
# at call 12, none); PyTorch's CUDA-graph notes ask for 11 DDP-enabled eager
# iterations before a capture.
MULTI_RANK_WARMUP = 12

_WARMUP, _READY, _BACKOFF, _DISABLED = range(4)
_STATE_NAMES = ("warmup", "ready", "backoff", "disabled")


class KplanError(RuntimeError):
    """open() could not read the plan, or strict mode met a fallback.
    .reason is the reason code (None for open errors)."""

    def __init__(self, msg, reason=None):
        RuntimeError.__init__(self, msg)
        self.reason = reason


class _Fallback(Exception):
    def __init__(self, reason, detail):
        Exception.__init__(self, detail)
        self.reason = reason
        self.detail = detail


# ---------------------------------------------------------------------------
# logging (KPLAN_LOG=error|info|debug, like the C runtime; warnings by default)

def _log_level():
    return {"error": 0, "info": 2, "debug": 3}.get(os.environ.get("KPLAN_LOG", ""), 1)


def _log(level, msg):
    if level <= _log_level():
        sys.stderr.write("kplan: %s%s\n" % ({0: "error: ", 1: "warning: "}.get(level, ""),
                                              msg))
        sys.stderr.flush()


def _env_int(name, default):
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        _log(1, "torch: %s=%r is not an integer; ignored" % (name, v))
        return default


def _env_flag(name):
    return os.environ.get(name, "") not in ("", "0")


# ---------------------------------------------------------------------------
# torch, imported on first use

_T = None
_Tensor = None
_VALUE_TYPES = set()
_raw = [None]
_fast = {}
_tl = threading.local()


def _torch():
    global _T, _Tensor
    if _T is None:
        import torch as T  # the real torch (absolute import)
        vt = {int, float, bool, str, bytes, complex, type(None), type(Ellipsis)}
        for n in ("dtype", "device", "layout", "memory_format", "Size"):
            t = getattr(T, n, None)
            if isinstance(t, type):
                vt.add(t)
        _VALUE_TYPES.clear()
        _VALUE_TYPES.update(vt)
        _Tensor = T.Tensor
        # the current stream as an int without a Stream object (what Inductor
        # uses); else torch.cuda.current_stream(dev).cuda_stream
        C = getattr(T, "_C", None)
        _raw[0] = getattr(C, "_cuda_getCurrentRawStream", None)
        # the per-call checks, bound once: torch's C entry points where they
        # exist (the Python wrappers cost a microsecond or more per call)
        _fast["capturing"] = (getattr(C, "_cuda_isCurrentStreamCapturing", None)
                              or T.cuda.is_current_stream_capturing)
        _fast["compiling"] = getattr(getattr(T, "compiler", None), "is_compiling", None)
        _fast["inference"] = getattr(T, "is_inference_mode_enabled", None)
        _fast["device"] = getattr(C, "_cuda_getDevice", None) or T.cuda.current_device
        _fast["strided"] = getattr(T, "strided", None)
        # CUDAGraph.replay is a Python method that calls the C one: the
        # replay path calls the C one directly (one Python frame less)
        _fast["graph_base"] = getattr(C, "_CUDAGraph", None)
        _T = T
    return _T


def _depth():
    return getattr(_tl, "depth", 0)


# ---------------------------------------------------------------------------
# shape keys and argument trees

def _disturb(t):
    """Change t's contents (the patch check: a kernel still reading t would
    then give another result), keeping every value one t already holds or a
    finite float: floats + 1, anything else (ids, masks) rotated by one
    element, which leaves a tensor of one repeated value as it was."""
    if getattr(t.dtype, "is_floating_point", False) or getattr(t.dtype, "is_complex", False):
        t.add_(1)
    else:
        t.copy_(t.reshape(-1).roll(1).reshape(t.shape))


def _tool_listens():
    """Whether an NVTX tool is attached, so that region ranges are seen:
    NVTX_INJECTION64_PATH is set by `kplan record` (its collector sets it when
    CUDA starts) and by Nsight Systems. Without one a range costs two
    foreign calls per region call (several microseconds from Python) for
    nothing. KPLAN_TORCH_NVTX=1 keeps them, =0 drops them."""
    force = os.environ.get("KPLAN_TORCH_NVTX", "")
    if force in ("0", "1"):
        return force == "1"
    return bool(os.environ.get("NVTX_INJECTION64_PATH"))


# Libraries that take another path while a stream captures: their code
# asks torch.cuda.is_current_stream_capturing() (transformers' is_tracing
# skips the attention mask's host check and keeps the mask, so the graph
# runs other kernels than the eager call).
GRAPH_PATH_LIBS = ("transformers",)


def _graph_path_setting(value):
    """open(graph_path=) or $KPLAN_TORCH_GRAPH_PATH as "libs", "all" or None
    (off). The default is "libs" under `kplan record` (which sets KPLAN_OUT
    for its collector) and off under any other tool (Nsight Systems: a
    profile of the program as it runs)."""
    if value is None:
        value = os.environ.get("KPLAN_TORCH_GRAPH_PATH", "")
    if value == "":
        return "libs" if os.environ.get("KPLAN_OUT") else None
    if value is True or value in ("1", "on", "libs"):
        return "libs"
    if value is False or value in ("0", "off"):
        return None
    if value == "all":
        return "all"
    raise ValueError("graph_path (KPLAN_TORCH_GRAPH_PATH) must be 'libs', 'all' or 'off', "
                     "not %r" % (value,))


# The path captures take in GRAPH_PATH_LIBS by default (see
# Runtime._capture_path): "eager", the library's eager path (eager's kernels
# and bits; BERT's graph 1.66x faster than torch.cuda.graph's on an H100,
# docs/PERFORMANCE.md), falling back to "graph", torch.cuda.graph's path,
# where that path cannot be captured.
DEFAULT_LIB_PATH = "eager"


def _lib_path_setting(value):
    """open(lib_path=) or $KPLAN_TORCH_LIB_PATH: "eager" or "graph"
    (DEFAULT_LIB_PATH; see Runtime._capture_path)."""
    if value is None:
        value = os.environ.get("KPLAN_TORCH_LIB_PATH", "") or DEFAULT_LIB_PATH
    if value not in ("eager", "graph"):
        raise ValueError("lib_path (KPLAN_TORCH_LIB_PATH) must be 'eager' or 'graph', not %r"
                         % (value,))
    return value


def _capture_answer(real):
    """torch.cuda.is_current_stream_capturing as the thread's path
    (_tl.path) says. "libs": True for callers in GRAPH_PATH_LIBS (the graph's
    path, recorded); "all": True for every caller; "eager": False for them,
    inside a capture (the library's eager path, captured); None (threads
    outside kplan's calls): torch's answer. Except with "all", callers
    outside GRAPH_PATH_LIBS (torch's own checks, the user's code) get
    torch's answer. A listed library's question sets _tl.asked."""
    def is_current_stream_capturing():
        mode = getattr(_tl, "path", None)
        if mode is None:
            return real()
        if mode == "all":
            return True
        try:
            name = sys._getframe(1).f_globals.get("__name__") or ""
        except ValueError:
            name = ""
        if name.partition(".")[0] in GRAPH_PATH_LIBS:
            _tl.asked = True
            return mode == "libs"
        return real()
    is_current_stream_capturing.__wrapped__ = real
    return is_current_stream_capturing


_gp_lock = threading.Lock()
_gp = {"depth": 0, "real": None}


def _call_on_path(mode, fn, args, kwargs):
    """fn(*args, **kwargs) with torch.cuda.is_current_stream_capturing
    answering as _capture_answer says for `mode` in this thread (nested and
    concurrent calls share one replacement; the last one out restores
    torch's). A listed library's question sets _tl.asked (the caller
    clears it first)."""
    cuda = (_T or _torch()).cuda
    with _gp_lock:
        if _gp["depth"] == 0:
            _gp["real"] = cuda.is_current_stream_capturing
            cuda.is_current_stream_capturing = _capture_answer(_gp["real"])
        _gp["depth"] += 1
    prev = getattr(_tl, "path", None)
    _tl.path = mode
    try:
        return fn(*args, **kwargs)
    finally:
        _tl.path = prev
        with _gp_lock:
            _gp["depth"] -= 1
            if _gp["depth"] == 0:
                cuda.is_current_stream_capturing = _gp["real"]
                _gp["real"] = None


# torch's sync debug mode warns "called a synchronizing CUDA operation" at
# each sync, and once per process, when first turned on, "Synchronization
# debug mode is a prototype feature and does not yet detect all
# synchronizing operations": no sync, though a looser match would take it
# for one (and send a process's first recorded region to the graph's path)
_SYNC_WARNING = "called a synchronizing CUDA operation"
_SYNC_MODE_NOTICE = "Synchronization debug mode is a prototype"


def _call_noting_syncs(fn, args, kwargs):
    """(fn(*args, **kwargs), whether it synchronised with the host) by
    torch's sync debug mode (torch.cuda.set_sync_debug_mode): turned to
    "warn" for the call and back, its warnings kept from the program. A
    program that set the mode itself keeps it: "warn" sees its warnings
    still; "error" raises on a sync anyway (None: not known)."""
    import warnings
    cuda = (_T or _torch()).cuda
    get = getattr(cuda, "get_sync_debug_mode", None)
    mode = get() if get is not None else None
    if mode is None or mode not in (0, 1):
        return fn(*args, **kwargs), None
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if mode == 0:
            cuda.set_sync_debug_mode(1)
        try:
            out = fn(*args, **kwargs)
        finally:
            if mode == 0:
                cuda.set_sync_debug_mode(0)
    synced = False
    for w in seen:
        msg = str(w.message)
        if _SYNC_WARNING in msg:
            synced = True
            if mode == 0:
                continue
        elif mode == 0 and msg.startswith(_SYNC_MODE_NOTICE):
            continue            # kplan turned the mode on, not the program
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out, synced


def _eager_path_call(fn, args, kwargs):
    """(fn(*args, **kwargs) run eagerly on the listed libraries' eager
    path, the path a capture of it should take): "graph" when it
    synchronised where a library in GRAPH_PATH_LIBS asked whether a
    capture is on (the library's graph's path skips such a host check),
    "eager" when one asked and it did not, "none" when none asked."""
    _tl.asked = False
    out, synced = _call_on_path("eager", _call_noting_syncs, (fn, args, kwargs), {})
    return out, ("graph" if synced else "eager") if _tl.asked else "none"


def _tensor_problem(t, d, dev, strided, needs_grad):
    """Why tensor t (on device d) keeps the call eager, or None."""
    if d.type != "cuda":
        return "cpu-tensor" if d.type == "cpu" else "unsupported-tensor"
    if d.index != dev:
        return "multi-device"
    if t.layout is not strided:
        return "unsupported-tensor"
    if needs_grad:
        return "requires-grad"
    return None


def _walk(x, parts, tensors, pins):
    """Append x's key parts; collect its tensors (in order) and the objects
    keyed by identity (kept alive by the entry so that an id is never
    reused while a graph of it exists)."""
    if isinstance(x, _Tensor):
        tensors.append(x)
        parts.append((x.shape, x.dtype, x.device, x.stride(), x.requires_grad))
        return
    t = type(x)
    if t is float:
        parts.append((float, x.hex()))  # -0.0 and nan are values too
    elif t in _VALUE_TYPES:
        parts.append((t, x))
    elif t is tuple or t is list or (isinstance(x, tuple) and hasattr(t, "_fields")):
        parts.append((t, len(x)))
        for v in x:
            _walk(v, parts, tensors, pins)
    elif isinstance(x, dict):
        keys = tuple(x)
        try:
            hash(keys)
        except TypeError:
            keys = tuple(id(k) for k in keys)
            pins.append(x)
        parts.append((t, keys))
        for v in x.values():
            _walk(v, parts, tensors, pins)
    elif isinstance(x, enum.Enum):
        parts.append((t, x.name))
    elif isinstance(x, (int, str)):  # subclasses (IntEnum handled above)
        parts.append((t, x))
    else:
        # modules, configs, functions...: by identity. Their state is assumed
        # constant for a given object (a key callable can add what changes).
        parts.append((t, id(x)))
        pins.append(x)


def _subst(x, it):
    """x with every tensor replaced by next(it) (same traversal as _walk)."""
    if isinstance(x, _Tensor):
        return next(it)
    t = type(x)
    if t in _VALUE_TYPES or t is float:
        return x
    if t is tuple:
        return tuple(_subst(v, it) for v in x)
    if t is list:
        return [_subst(v, it) for v in x]
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return t(*[_subst(v, it) for v in x])
    if isinstance(x, dict):
        return _mk_dict(t, list(x.keys()), [_subst(v, it) for v in x.values()])
    return x


def _mk_dict(t, keys, vals):
    if t is dict:
        return dict(zip(keys, vals))
    if all(type(k) is str for k in keys):
        try:
            return t(**dict(zip(keys, vals)))  # ModelOutput-style dataclass dicts
        except Exception:
            pass
    try:
        return t(zip(keys, vals))
    except Exception:
        return dict(zip(keys, vals))


_LEAF = object()
_NONE = object()


def _flatten_out(x, leaves):
    """Spec of an output tree; tensors appended to leaves. Tensors, None,
    and tuples/lists/namedtuples/dicts of them; anything else raises."""
    if isinstance(x, _Tensor):
        leaves.append(x)
        return _LEAF
    if x is None:
        return _NONE
    t = type(x)
    if t is tuple or t is list:
        return (t, [_flatten_out(v, leaves) for v in x])
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return ("nt", t, [_flatten_out(v, leaves) for v in x])
    if isinstance(x, dict):
        return ("dict", t, list(x.keys()), [_flatten_out(v, leaves) for v in x.values()])
    raise _Fallback("non-tensor-output",
                    "the region returned a %s (only tensors, None and tuples, lists "
                    "and dicts of them can be replayed)" % t.__name__)


def _unflatten(spec, it):
    if spec is _LEAF:
        return next(it)
    if spec is _NONE:
        return None
    tag = spec[0]
    if tag is tuple:
        return tuple([_unflatten(s, it) for s in spec[1]])
    if tag is list:
        return [_unflatten(s, it) for s in spec[1]]
    if tag == "nt":
        return spec[1](*[_unflatten(s, it) for s in spec[2]])
    return _mk_dict(spec[1], spec[2], [_unflatten(s, it) for s in spec[3]])


def _same_spec(a, b):
    if a is _LEAF or a is _NONE or b is _LEAF or b is _NONE:
        return a is b
    if a[0] != b[0] or len(a) != len(b):
        return False
    if a[0] == "dict" and (a[1] is not b[1] or a[2] != b[2]):
        return False
    if a[0] == "nt" and a[1] is not b[1]:
        return False
    sa, sb = a[-1], b[-1]
    return len(sa) == len(sb) and all(_same_spec(x, y) for x, y in zip(sa, sb))


# ---------------------------------------------------------------------------
# state

class _Entry(object):
    """One shape key of one region: its state machine and its graph."""
    __slots__ = ("key", "device", "pins", "lock", "state", "reason", "warm_done",
                 "watched", "fails", "retry_at", "calls", "graph", "static_in",
                 "spec", "static_out", "mutated", "verify_left", "logged", "rp",
                 "patch", "pcur", "fused", "fuse_next", "path")

    def __init__(self, key, device, pins):
        self.key = key
        self.device = device
        self.pins = pins
        self.lock = threading.Lock()
        self.state = _WARMUP
        self.reason = None
        self.warm_done = 0
        self.watched = False
        self.fails = 0
        self.retry_at = 0
        self.calls = 0
        self.graph = None
        self.static_in = None
        self.spec = None
        self.static_out = None
        self.mutated = ()
        self.verify_left = 0
        self.fuse_next = False   # captured without fusion: capture again with it
        self.logged = set()
        self.rp = None            # the C replay of graph, when it has one
        self.patch = None         # per input: kp_rt_gpatch handle, None: copied
        self.pcur = None          # per input: the address the graph reads now
        self.fused = 0            # chains fused in the graph (kplan.aten_fuse)
        self.path = None          # the capture's library path ("eager", "libs"), None: none asked


class _RegionState(object):
    def __init__(self, name):
        self.name = name
        self.bname = name.encode("utf-8")
        self.static_reason = None
        self.watch_msg = None     # what the watched call did that a capture cannot hold
        self.lib_path = None      # the library path captured: "eager", "graph", None (none asked)
        self.rec_path = None      # recording: the path taken ("eager", "graph", "none": none asked)
        self.plan = None
        self.warmup = DEFAULT_WARMUP
        self.max_keys = DEFAULT_MAX_KEYS
        self.entries = collections.OrderedDict()   # LRU order
        self.calls = 0
        self.eager_until = 0
        self.pause = THRASH_PAUSE
        self.win_calls = 0
        self.win_evict = 0
        self.captured = False
        self.fuse_off = None      # why fusion is off for this region (verify dropped it)
        self.fails = 0            # failed captures of any key while none succeeded
        self.logged = set()
        self.n = collections.Counter()             # calls, replays, captures, eager
        self.fast_n = 0           # calls on the fast path (Runtime.fast), not in n
        self.fast_reason = None   # the reason they are eager


class _Counters(object):
    def __init__(self):
        self.calls = self.replays = self.captures = self.eager = 0
        self.verified = self.evictions = self.graphs = 0
        self.watched = self.unwatched = 0
        self.patched_inputs = 0
        self.graph_path = 0
        self.path_retries = 0
        self.eager_by_reason = collections.Counter()
        self.failures = collections.Counter()


# Capture failures that the next try would meet again: the body does what a
# capture cannot hold, whatever its shapes. (substring of the exception's
# text, what to do about it). The first such failure makes the region eager
# for good, where other failures back off and retry (a lazy first-use set-up
# can fail one capture and not the next).
PERMANENT_FAILURES = (
    ("capturable is False",
     "pass capturable=True to the optimizer (e.g. torch.optim.AdamW(params, "
     "capturable=True)), or keep optimizer.step() out of the region"),
    ("operation not permitted when stream is capturing",
     "the body synchronizes with the host (.item(), .cpu(), .tolist(), printing a "
     "tensor, torch.nonzero, a data-dependent Python branch): move that out of the "
     "region"),
    ("operation would make the legacy stream depend on a capturing blocking stream",
     "the body uses the legacy default stream (a library call on stream 0): give "
     "that library the current stream"),
    ("Cannot copy between CPU and CUDA tensors during CUDA graph capture",
     "the body copies between CPU and GPU: make the CPU tensor a pinned buffer "
     "outside the region, or move the copy out"),
    ("during CUDA graph capture",
     "the body calls something torch refuses while a graph is captured: move that "
     "call out of the region"),
)


DDP_STREAM_HINT = (
    "; with DistributedDataParallel, build it on a side stream (`with torch.cuda.stream("
    "torch.cuda.Stream()): model = DDP(model)`) as PyTorch's CUDA-graph recipe does: DDP "
    "keeps autograd's AccumulateGrad nodes on the stream it was built on, and a capture "
    "cannot join the legacy default stream")


# Permanent failures that no library's capture branch avoids (an
# optimizer's own check): a capture of the graph's path (path-retry) would
# fail alike, one more failed capture for nothing
PATH_INDEPENDENT = ("capturable is False",)


def _exc_chain(exc):
    """exc, then its cause (or else its context), and so on: at most 8. The
    body's own exception is the context of the one capture_end raises
    ("operation failed due to a previous error during capture")."""
    seen = 0
    while exc is not None and seen < 8:
        yield exc
        exc = exc.__cause__ or exc.__context__
        seen += 1


def _without_frames(exc):
    """exc, its causes and contexts without their tracebacks, the finished
    frames in them cleared. A failed capture's exceptions hold the body's
    frames (a training step's loss, and through it the autograd graph with
    AccumulateGrad nodes made on the capture stream: torch then warns of a
    stream mismatch at later steps), in cycles with kplan's own frames
    that only the cyclic GC breaks; kplan reads only their texts."""
    for x in _exc_chain(exc):
        traceback.clear_frames(x.__traceback__)     # skips the frames still running
        x.__traceback__ = None
    return exc


def _permanent(exc):
    """The fix when exc is a capture failure that cannot change, else None."""
    for x in _exc_chain(exc):
        text = str(x)
        for needle, fix in PERMANENT_FAILURES:
            if needle in text:
                return fix
    return None


def _path_independent(exc):
    """exc is a failure that the graph's path would meet too (PATH_INDEPENDENT)."""
    return any(n in str(x) for x in _exc_chain(exc) for n in PATH_INDEPENDENT)


def _multi_rank(T):
    """torch.distributed is up with more than one rank: one rank's failed
    capture of a collective leaves the others waiting in it."""
    try:
        d = T.distributed
        return d.is_available() and d.is_initialized() and d.get_world_size() > 1
    except Exception:
        return False


def _ranks_all(T, ok, what):
    """True when `ok` holds on every rank: one all-reduce (MIN) of a flag,
    reached by every rank at the same call. Any error: False (the caller
    stays eager, which every rank can do without the others)."""
    d = T.distributed
    try:
        flag = T.tensor([1 if ok else 0], dtype=T.int32,
                        device="cuda:%d" % T.cuda.current_device())
        d.all_reduce(flag, op=d.ReduceOp.MIN)
        return bool(flag.item())
    except Exception as exc:
        _log(1, "torch: the ranks could not agree on a region's %s (%s); eager"
             % (what, _first_line(exc)))
        return False


def _key_hex(key):
    return "%#018x" % (hash(key) & 0xFFFFFFFFFFFFFFFF)


def _first_line(exc):
    s = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, s[0] if s else "")


class Runtime(object):
    """An open kplan runtime for PyTorch (see open())."""

    def __init__(self, crt, plan_path, policy="plan", verify=0, strict=False,
                 warmup=None, max_keys=None, capture_error_mode="thread_local",
                 disabled=False, print_stats=False, key_warmup=False, watch=True,
                 verify_tol=None, global_reason=None, fuse="off", fuse_save=False,
                 graph_path="libs", lib_path=DEFAULT_LIB_PATH):
        if policy not in ("plan", "graph", "eager"):
            raise ValueError("policy must be 'plan', 'graph' or 'eager', not %r" % (policy,))
        self.crt = crt
        self.plan_path = plan_path
        self.policy = policy
        self.verify = max(0, int(verify or 0))
        self.verify_tol = verify_tol
        self.strict = bool(strict)
        self.warmup = warmup
        self.max_keys = max_keys
        self.capture_error_mode = capture_error_mode
        self.print_stats = print_stats
        self.key_warmup = key_warmup
        self.watch = watch
        # fusion of pointwise ATen chains in captured graphs (kplan.aten_fuse),
        # with the groups shipped beside the plan when it has some
        # (kplan.aten_plan): then only those, with their sources
        if fuse not in ("off", "plan", "exact", "tolerant"):
            raise ValueError("fuse must be 'off', 'plan', 'exact' or 'tolerant', not %r"
                             % (fuse,))
        self.shipped = None
        if fuse != "off" and plan_path is not None:
            from . import aten_plan
            self.shipped = _load_shipped(crt, plan_path)
            if self.shipped is not None:
                if self.shipped.error:
                    _log(1, "torch: fusion: the plan's torch fusion groups cannot be used "
                            "(%s); chains run op by op" % self.shipped.error)
                else:
                    _log(2, "torch: fusion: %d torch fusion groups shipped with %s"
                         % (len(self.shipped.groups), plan_path))
        if fuse == "plan" and self.shipped is None:
            fuse = "off"              # the plan ships none
        self.fuse = fuse
        self.fuse_save = bool(fuse_save)
        self.found = {}               # (region, key) -> (aten_plan.Group, source)
        self.fuse_dropped = {}        # region -> why verify turned its fusion off
        self.fusion = None
        self.lock = threading.RLock()
        self.states = {}
        # regions eager for good (static_reason or global_reason) whose calls
        # need nothing of kplan, neither ranges nor checks: Region.__call__
        # runs their body straight away and counts it in the state's fast_n
        # (stats() adds them; reset() folds them in). A plan that leaves a
        # region eager costs an attribute lookup and a dict get per call.
        self.fast = {}
        self.plan_info = {}
        self.c = _Counters()
        self.side = {}
        self.logged = set()
        self.closed = False
        self.cuda_ok = False
        # NVTX ranges around region calls: until CUDA is up, then only when
        # a tool listens (see _tool_listens)
        self.ranges = True
        # region bodies run without a plan while a tool records take the
        # path their graph will (see _recorded_call)
        self.graph_path = graph_path if _tool_listens() else None
        # the path captures take where libraries branch on capture (_capture_path)
        self.lib_path = lib_path
        if global_reason is None:
            if disabled:
                global_reason = "disabled"
            elif policy == "eager":
                global_reason = "planned-eager"
            elif policy == "plan" and plan_path is None:
                global_reason = "no-plan"
        self.global_reason = global_reason
        self.plan_choice = ""      # a bundle: the entry libkplanrt chose and why

    # -- the plan -------------------------------------------------------
    def region_plan(self, name):
        """What the plan says about region `name` (a dict), or None."""
        if name not in self.plan_info:
            info = None
            if self.crt is not None and self.plan_path is not None:
                info = self.crt.region_plan(name)
            self.plan_info[name] = info
        return self.plan_info[name]

    def _state(self, region):
        st = self.states.get(region)
        if st is not None:
            return st
        with self.lock:
            st = self.states.get(region)
            if st is not None:
                return st
            st = _RegionState(region.name)
            info = self.region_plan(region.name) if self.global_reason is None else None
            st.plan = info
            w = self.warmup
            if w is None:
                w = info["warmup"] if info is not None else DEFAULT_WARMUP
            st.warmup = max(1, int(w))
            T = _T or sys.modules.get("torch")    # no torch yet: no process group
            if self.warmup is None and T is not None and _multi_rank(T):
                st.warmup = max(st.warmup, MULTI_RANK_WARMUP)
            st.max_keys = max(1, region.max_keys or self.max_keys or DEFAULT_MAX_KEYS)
            if self.global_reason is None and self.policy == "plan":
                if info is None:
                    st.static_reason = "unknown-region"
                    _log(1, "torch: region '%s': unknown-region: the plan has no region of "
                            "that name (or does not apply on this GPU); eager" % region.name)
                elif info["decision"] != "graph":
                    st.static_reason = "planned-eager"
                    _log(2, "torch: region '%s': planned %s (%s)"
                         % (region.name, info["decision"], info["reason"]))
            self.states[region] = st
            return st

    # -- a call ---------------------------------------------------------
    def _call(self, region, args, kwargs):
        st = self.states.get(region) or self._state(region)
        crt = self.crt
        if crt is not None and self.ranges:
            crt.range_push(st.bname, _rt.KIND_BINDING)
            try:
                return self._dispatch(region, st, args, kwargs)
            finally:
                crt.range_pop()
        return self._dispatch(region, st, args, kwargs)

    def _count_eager(self, st, reason):
        c = self.c
        c.eager += 1
        c.eager_by_reason[reason] += 1
        st.n["eager"] += 1
        if self.strict and reason not in NOT_STRICT:
            raise KplanError("region '%s': %s (strict mode)" % (st.name, reason), reason)

    def _eager(self, st, reason, region, args, kwargs):
        self._count_eager(st, reason)
        if reason == "no-plan" and self.graph_path is not None:
            return self._recorded_call(st, region, args, kwargs)
        return region.fn(*args, **kwargs)

    def _recorded_call(self, st, region, args, kwargs):
        """A region call recorded to make a plan: on the path its graph will
        take where libraries branch on capture (GRAPH_PATH_LIBS; see
        _capture_path). With lib_path "graph", the graph's path from the
        first call. With "eager", kplan's capture runs the library's eager
        path unless the eager call did what a capture cannot hold, so the
        region's first call runs eagerly with its host syncs noted, and the
        later calls take the graph's path only when it synchronised (GPT-2's
        mask check: a capture skips it) and a library asked.
        graph_path="all" answers True to every caller from the first call."""
        mode = self.graph_path
        if mode == "libs" and self.lib_path == "eager":
            if st.rec_path is None:
                out, st.rec_path = _eager_path_call(region.fn, args, kwargs)
                if st.rec_path == "graph":
                    _log(2, "torch: region '%s': its eager call synchronised where %s asked "
                            "whether a capture is on: recording the graph's path (a capture "
                            "takes it)" % (st.name, ", ".join(GRAPH_PATH_LIBS)))
                return out
            if st.rec_path != "graph":
                return region.fn(*args, **kwargs)
        if "graph-path" not in self.logged:
            self.logged.add("graph-path")
            _log(1, "torch: recording the graph's path: in regions, %s see "
                    "torch.cuda.is_current_stream_capturing() True, as in a capture "
                    "(KPLAN_TORCH_GRAPH_PATH=0 records the run as it is)"
                 % ("all callers" if mode == "all"
                    else "the libraries that branch on it (%s)" % ", ".join(GRAPH_PATH_LIBS)))
        self.c.graph_path += 1
        _tl.asked = False
        out = _call_on_path(mode, region.fn, args, kwargs)
        if _tl.asked and st.rec_path is None:
            st.rec_path = "graph"
        return out

    def _dispatch(self, region, st, args, kwargs):
        self.c.calls += 1
        st.n["calls"] += 1
        reason = self.global_reason or st.static_reason
        if reason is not None:
            if reason == "no-plan" and "no-plan" not in self.logged:
                self.logged.add("no-plan")
                _log(1, "torch: no plan (neither kt.open(PATH) nor KPLAN_PLAN): every region "
                        "runs eagerly (no-plan), each call an NVTX range for `kplan record`")
            if self.ranges and not self.cuda_ok:
                # NVTX ranges only while a tool listens, as on the other paths
                # without importing torch: a program that never did has no CUDA
                T = _T or sys.modules.get("torch")
                ini = getattr(getattr(T, "cuda", None), "is_initialized", None)
                if ini is not None and ini():
                    self.cuda_ok = True
                    self.ranges = _tool_listens()
            if not self.ranges and not (reason == "no-plan" and self.graph_path is not None) \
                    and not (self.strict and reason not in NOT_STRICT):
                with self.lock:         # stats() and reset() iterate it
                    st.fast_reason = reason
                    self.fast[region] = st
            return self._eager(st, reason, region, args, kwargs)
        T = _T or _torch()
        fast = _fast
        comp = fast["compiling"]
        if _depth() or fast["capturing"]() or (comp is not None and comp()):
            return self._eager(st, "nested", region, args, kwargs)
        if not self.cuda_ok:
            if not T.cuda.is_available():
                self.global_reason = "no-cuda"
                _log(1, "torch: no CUDA device: every region runs eagerly (no-cuda)")
                return self._eager(st, "no-cuda", region, args, kwargs)
            self.cuda_ok = True
            self.ranges = _tool_listens()

        # the shape key
        dev = fast["device"]()
        grad = T.is_grad_enabled()
        parts, pins = [], []
        problem = None
        tensors = None
        if not kwargs and all(isinstance(a, _Tensor) for a in args):
            # the common call, tensors only: key parts and checks in one pass,
            # with the cheapest accessors (no device objects; every tensor is
            # on `dev`, which the key holds once). Anything unusual (stride()
            # raises for sparse tensors) takes the general path below.
            try:
                for t in args:
                    rg = t.requires_grad
                    parts.append((t.shape, t.dtype, t.stride(), rg))
                    if not t.is_cuda or t.get_device() != dev or (grad and rg):
                        parts = None
                        break
                else:
                    tensors = args
            except Exception:
                parts = None
            if tensors is None:
                parts = []
        if tensors is None:
            tensors = []
            _walk(args, parts, tensors, pins)
            if kwargs:
                _walk(kwargs, parts, tensors, pins)
            strided = fast["strided"]
            for t in tensors:
                problem = _tensor_problem(t, t.device, dev, strided, grad and t.requires_grad)
                if problem is not None:
                    break
        if problem is not None:
            return self._eager(st, problem, region, args, kwargs)
        # what the body does depends on the autograd mode too
        inf = fast["inference"]
        parts.append((grad, bool(inf()) if inf is not None else False))
        parts.append(dev)
        raw = _raw[0]
        parts.append(raw(dev) if raw is not None else T.cuda.current_stream(dev).cuda_stream)
        if region.key is not None:
            parts.append(region.key(*args, **kwargs))
        key = tuple(parts)

        with self.lock:
            st.calls += 1
            st.win_calls += 1
            if st.win_calls >= THRASH_WINDOW:
                st.win_calls = st.win_evict = 0
            if st.calls < st.eager_until:
                e = None
            else:
                e = st.entries.get(key)
                if e is None:
                    e = self._new_entry(st, key, dev, pins)
                else:
                    st.entries.move_to_end(key)
        if e is None:
            return self._eager(st, "key-thrash", region, args, kwargs)
        if not e.lock.acquire(False):
            return self._eager(st, "busy", region, args, kwargs)
        try:
            if e.state == _READY and not e.mutated and not e.verify_left:
                # the steady state, inline (_replay without its general
                # cases): copy the arguments in unless they are the static
                # tensors, replay
                e.calls += 1
                stage = "cuda-error"
                try:
                    if e.patch is not None:
                        self._patch_in(e, tensors)
                    elif len(tensors) == 1:
                        t, sin = tensors[0], e.static_in[0]
                        if t is not sin and t.data_ptr() != sin.data_ptr():
                            sin.copy_(t)
                    elif tensors:
                        self._copy_in(e, tensors)
                    stage = "launch"
                    if e.rp is not None:
                        e.rp(e.graph)
                    else:
                        e.graph.replay()
                except Exception as exc:
                    return self._replay_failed(st, e, stage, exc, region, args, kwargs)
                self.c.replays += 1
                st.n["replays"] += 1
                if e.spec is _LEAF:
                    return e.static_out[0] if region.static_outputs else e.static_out[0].clone()
                if region.static_outputs:
                    return _unflatten(e.spec, iter(e.static_out))
                return _unflatten(e.spec, iter([o.clone() for o in e.static_out]))
            return self._step(region, st, e, args, kwargs, tensors)
        finally:
            e.lock.release()

    def _new_entry(self, st, key, dev, pins):
        """A new shape key (self.lock held): evict the least recently used
        idle key when the region is full; too many evictions pause it."""
        if len(st.entries) >= st.max_keys:
            for k, old in st.entries.items():
                if old.lock.acquire(False):
                    try:
                        self._drop(old)
                    finally:
                        old.lock.release()
                    del st.entries[k]
                    self.c.evictions += 1
                    st.win_evict += 1
                    break
            if st.win_evict >= THRASH_EVICTIONS:
                st.eager_until = st.calls + st.pause
                if "key-thrash" not in st.logged:
                    st.logged.add("key-thrash")
                    _log(1, "torch: region '%s': key-thrash: %d shape keys evicted within "
                            "%d calls; eager for %d calls, then retried"
                         % (st.name, st.win_evict, THRASH_WINDOW, st.pause))
                self.c.failures["key-thrash"] += 1
                if st.pause < (1 << 20):
                    st.pause *= 2
                st.win_evict = 0
        e = _Entry(key, dev, pins)
        if st.captured and not self.key_warmup:
            # like the C runtime: a new key of a region that already captured
            # (watched, on this side stream) captures on its first call
            e.warm_done = st.warmup
            e.watched = True
        st.entries[key] = e
        return e

    def _step(self, region, st, e, args, kwargs, tensors):
        e.calls += 1
        s = e.state
        if s == _READY:
            return self._replay(region, st, e, args, kwargs, tensors)
        if s == _DISABLED:
            return self._eager(st, e.reason or "gave-up", region, args, kwargs)
        if s == _BACKOFF:
            if e.calls < e.retry_at:
                return self._eager(st, "backoff", region, args, kwargs)
            # retry: one more call on the capture stream (watched again), then capture
            e.state = _WARMUP
            e.warm_done = st.warmup - 1
            e.watched = False
        # _WARMUP
        if e.warm_done < st.warmup - 1:
            e.warm_done += 1
            return self._eager(st, "warmup", region, args, kwargs)
        if not e.watched:
            e.warm_done += 1
            e.watched = True
            return self._watched_call(region, st, e, args, kwargs)
        return self._capture_and_replay(region, st, e, args, kwargs, tensors)

    # -- side stream, watch ----------------------------------------------
    def _side_stream(self, dev):
        s = self.side.get(dev)
        if s is None:
            s = self.side[dev] = _T.cuda.Stream(device=dev)
        return s

    def _region_off(self, st, reason, msg):
        """The region's body cannot be replayed: eager for the process."""
        with self.lock:
            first = st.static_reason is None
            if first:
                st.static_reason = reason
        if first:
            self.c.failures[reason] += 1
            _log(1, "torch: region '%s': %s: %s; eager for good" % (st.name, reason, msg))

    def _ranks_agree(self, T, verdict):
        """Every rank's watch found the region capturable (or could not
        check): one all-reduce of a flag, at the same call on every rank
        (the last warm-up call, which each rank reaches alike)."""
        return _ranks_all(T, not (verdict is not None and verdict[0] == 1), "watch")

    def _watch_coming(self, me):
        """Another key has begun its warm-up and not been watched yet: CUPTI
        stays attached for its watch (each attachment costs 12-22 ms);
        otherwise the runtime detaches it now, and the process runs on
        without CUPTI."""
        with self.lock:
            for st in self.states.values():
                if st.static_reason is not None:
                    continue
                for x in st.entries.values():
                    if x is not me and x.state == _WARMUP and not x.watched and x.warm_done > 0:
                        return True
        return False

    def _watched_call(self, region, st, e, args, kwargs):
        """The last warm-up call: eager on the capture stream (so that its
        lazy per-stream set-up happens before the capture), watched by the C
        runtime when it can."""
        T = _T
        self._count_eager(st, "warmup")
        dev = e.device
        cur = T.cuda.current_stream(dev)
        # KPLAN_TORCH_WATCH_STREAM=current: the watched call on the caller's
        # stream (autograd's AccumulateGrad nodes that DDP keeps stay on it)
        side = cur if _WATCH_ON_CURRENT else self._side_stream(dev)
        side.wait_stream(cur)
        crt = self.crt
        watching = crt is not None and self.watch
        verdict = None
        if watching:
            crt.watch_begin(side.cuda_stream, _rt.KP_RT_WATCH_ALLOW_ALLOC)
        _tl.depth = _depth() + 1
        try:
            with T.cuda.stream(side):
                out = region.fn(*args, **kwargs)
        finally:
            _tl.depth -= 1
            if watching:
                verdict = crt.watch_end()
                if not self._watch_coming(e):
                    crt.watch_release()
            cur.wait_stream(side)
        if _multi_rank(T) and not self._ranks_agree(T, verdict):
            # some rank's watch objected: every rank keeps the region eager,
            # so no rank replays a graph whose collectives the others run
            # eagerly (and no capture is tried: one that fails on one rank
            # leaves the others waiting in its collectives)
            self.c.watched += 1
            mine = verdict is not None and verdict[0] == 1
            why = (verdict[3] or verdict[1]) if mine else "another rank's watch objected"
            self._region_off(st, "would-break-capture", "%s (several ranks decide together: "
                             "not tried as a capture)" % why)
            return out
        if verdict is None or verdict[0] < 0:
            self.c.unwatched += 1
            if "watch" not in self.logged:
                self.logged.add("watch")
                why = verdict[3] if verdict and verdict[3] else (
                    "no runtime library" if crt is None else "watching is off (KPLAN_RT_WATCH=0)")
                _log(2 if not watching else 1,
                     "torch: could not check the warm-up calls before capture (%s); "
                     "captures go ahead unchecked" % why)
        elif verdict[0] == 1:
            # The watched call ran eagerly, and libraries take other paths
            # while a capture is on (transformers skips its mask checks'
            # host syncs when torch.cuda.is_current_stream_capturing()).
            # A torch capture that fails raises inside this binding, which
            # falls back, so the capture is tried; if it fails, the region
            # is eager for good with what the watch saw.
            self.c.watched += 1
            v, call, kernel, msg = verdict
            st.watch_msg = msg or ("%s%s" % (call, " after kernel %s" % kernel if kernel else ""))
            _log(2, "torch: region '%s': the watched eager call did what a capture cannot hold "
                 "(%s); trying the capture, where libraries may avoid it" % (st.name, st.watch_msg))
        else:
            self.c.watched += 1
        leaves = []
        try:
            _flatten_out(out, leaves)
        except _Fallback as f:
            self._region_off(st, f.reason, f.detail)
            return out
        # The outputs were allocated on the side stream and are used on cur.
        # No record_stream (its event queries at later allocations would look
        # like blockers to the next watch): their blocks go back to the side
        # stream's pool when freed and are only reused by the next watched call
        # or capture, which start after side.wait_stream(cur) (captures after a
        # device synchronize), so after everything cur did with them.
        if any(t.requires_grad for t in leaves):
            self._region_off(st, "requires-grad", "an output requires grad (autograd through "
                             "a replayed graph is not supported: run the region under "
                             "torch.no_grad(), or put backward() inside it)")
        return out

    # -- capture ------------------------------------------------------------
    def _capture_and_replay(self, region, st, e, args, kwargs, tensors):
        T = _T
        dev = e.device
        prev = T.cuda.current_stream(dev)
        fail = None
        try:
            self._capture(region, st, e, args, kwargs, tensors)
        except Exception as exc:    # _Fallback included
            fail = _without_frames(exc)
            self._drop(e)
            self._restore_stream(prev)
        multi = _multi_rank(T)
        # The region's first capture comes at the same call on every rank
        # (the same warm-up count), so the ranks can agree on it; a later
        # key's capture need not (one rank may meet a shape the others do
        # not), and an all-reduce only some ranks make would pair with the
        # others' collectives.
        if multi and not st.captured and not _ranks_all(T, fail is None, "capture"):
            # some rank's capture failed: no rank replays (its collectives
            # would wait for ranks that run the step eagerly), and no rank
            # tries again alone: the region is eager on all of them
            if fail is None:
                self._drop(e)
                self._region_off(st, "capture-failed", "another rank's capture failed "
                                 "(several ranks decide together)")
                return self._eager(st, "capture-failed", region, args, kwargs)
        if isinstance(fail, _Fallback):
            self._region_off(st, fail.reason, fail.detail)
            return self._eager(st, fail.reason, region, args, kwargs)
        if fail is not None:
            exc = fail
            # a failed capture can leave the capture stream routed to the dead
            # graph's pool: the next capture gets a new stream
            self.side.pop(dev, None)
            if e.path == "eager" and st.lib_path is None and not multi \
                    and not _path_independent(exc):
                # a library asked and its eager path failed in the capture
                # (a host check its graph's path skips): the next call
                # captures the graph's path, as torch.cuda.graph would
                st.lib_path = "graph"
                self.c.path_retries += 1
                _log(2, "torch: region '%s': the capture of %s's eager path failed (%s); "
                        "the next call captures its graph's path"
                     % (st.name, ", ".join(GRAPH_PATH_LIBS), _first_line(exc)))
                self._rearm(st, e)
                return self._eager(st, "path-retry", region, args, kwargs)
            if st.watch_msg:
                self._region_off(st, "would-break-capture", "%s (the capture failed: %s)"
                                 % (st.watch_msg, _first_line(exc)))
                return self._eager(st, "would-break-capture", region, args, kwargs)
            fix = _permanent(exc)
            if fix is not None and multi and "legacy" in fix:
                fix += DDP_STREAM_HINT
            st.fails += 1
            if fix is not None or multi or (not st.captured and st.fails >= MAX_FAILURES):
                # it would fail again: decided once, for every key
                self._region_off(st, "capture-failed", "the capture failed: %s%s" % (
                    _first_line(exc), "; fix: " + fix if fix else
                    " (several ranks decide together: not retried)" if multi else
                    " (%d failed captures, none succeeded)" % st.fails))
                return self._eager(st, "capture-failed", region, args, kwargs)
            self._fail(st, e, "capture-failed", _first_line(exc))
            return self._eager(st, "capture-failed", region, args, kwargs)
        e.state = _READY
        e.verify_left = self.verify
        st.captured = True
        if e.path is not None and st.lib_path is None:
            st.lib_path = "eager" if e.path == "eager" else "graph"
        self.c.captures += 1
        self.c.graphs += 1
        st.n["captures"] += 1
        _log(3, "torch: region '%s' key %s: captured (%d inputs, %d outputs, %d written)"
             % (st.name, _key_hex(e.key), len(e.static_in), len(e.static_out), len(e.mutated)))
        out = self._replay(region, st, e, args, kwargs, tensors)
        if e.fuse_next and e.state == _READY:
            # the doubted capture held: the next call captures with fusion
            e.fuse_next = False
            self._drop(e)
            self._rearm(st, e)
        return out

    @staticmethod
    def _rearm(st, e):
        """The entry's next call captures (its warm-up and watch done)."""
        e.state = _WARMUP
        e.warm_done = st.warmup
        e.watched = True

    def _restore_stream(self, prev):
        try:
            _T.cuda.set_stream(prev)
        except Exception:
            pass

    def _capture(self, region, st, e, args, kwargs, tensors):
        T = _T
        static = []
        for t in tensors:
            s = T.empty_like(t)
            s.copy_(t)
            static.append(s)
        it = iter(static)
        sargs = _subst(args, it)
        skw = _subst(kwargs, it) if kwargs else {}
        v0 = [s._version for s in static]
        keep = region.patch_inputs and self._can_patch(T)
        g = T.cuda.CUDAGraph(keep_graph=True) if keep else T.cuda.CUDAGraph()
        side = self._side_stream(e.device)
        e.fused = 0
        # A capture the watch doubted (the eager call did what no capture holds:
        # libraries may avoid it while capturing) is tried without the fusion
        # mode first: the mode's work (every op through Python, the chains'
        # compiles) is wasted on a region that stays eager. When it holds, the
        # next call captures again with fusion (e.fuse_next). The mode imports
        # nothing heavy (aten_fuse.mode: no torch._dynamo).
        doubted = st.watch_msg is not None and not st.captured
        e.fuse_next = doubted and self.fuse != "off" and st.fuse_off is None
        path = self._capture_path(T, st)
        e.path = None
        _tl.depth = _depth() + 1
        _tl.asked = False
        try:
            with T.cuda.graph(g, stream=side, capture_error_mode=self.capture_error_mode):
                if self.fuse == "off" or st.fuse_off is not None or doubted:
                    out = _call_on_path(path, region.fn, sargs, skw)
                else:
                    fmode, fuser = self._fuse_mode(st)
                    with fmode:
                        out = _call_on_path(path, region.fn, sargs, skw)
                    e.fused = fuser.n_fused
        finally:
            _tl.depth -= 1
            e.path = path if _tl.asked else None   # None: no library asked
        leaves = []
        spec = _flatten_out(out, leaves)
        for t in leaves:
            if t.requires_grad:
                raise _Fallback("requires-grad", "an output requires grad (autograd through "
                                "a replayed graph is not supported: run the region under "
                                "torch.no_grad(), or put backward() inside it)")
        e.graph = g
        base = _fast.get("graph_base")
        rp = getattr(base, "replay", None) if isinstance(base, type) else None
        e.rp = rp if rp is not None and isinstance(g, base) else None
        e.static_in = static
        e.spec = spec
        e.static_out = leaves
        e.mutated = tuple(i for i, s in enumerate(static) if s._version != v0[i])
        if keep:
            g.instantiate()
            self._patch_setup(st, e, tensors)

    def _capture_path(self, T, st):
        """The path a capture runs where libraries branch on capture
        (GRAPH_PATH_LIBS): their eager path ("eager": the graph runs eager's
        kernels, with eager's bits) unless the watched eager call did what
        a capture cannot hold (a library may avoid it on the graph's path),
        an eager-path capture failed where a library asked (path-retry),
        or ranks decide together (one capture each, no retry): then "libs",
        the graph's path, as under torch.cuda.graph; always with
        lib_path="graph"."""
        if (self.lib_path == "graph" or st.lib_path == "graph" or st.watch_msg is not None
                or _multi_rank(T)):
            return "libs"
        return "eager"

    def _fuse_mode(self, st):
        from . import aten_fuse
        if self.fusion is None:
            self.fusion = aten_fuse.Stats()
        path = os.environ.get("KPLAN_TORCH_ATEN_LOG")
        fuser = aten_fuse.Fuser(self.crt, mode=self.fuse, stats=self.fusion, log=_log,
                                region=st.name, shipped=self.shipped, found=self.found)
        return (aten_fuse.mode(fuser, oplog=aten_fuse.OpLog(st.name) if path else None,
                               oplog_path=path), fuser)

    # -- pointer patching (region(..., patch_inputs=True)) ---------------------
    def _can_patch(self, T):
        crt = self.crt
        if crt is None or not getattr(crt, "can_patch", False):
            return False
        G = T.cuda.CUDAGraph
        return all(hasattr(G, n) for n in ("raw_cuda_graph", "raw_cuda_graph_exec",
                                            "instantiate"))

    def _patch_setup(self, st, e, tensors):
        """Patch handles for the inputs the graph reads only through kernel
        parameters (not written, same strides as the argument), then a
        check: the graph replayed with the inputs patched to copies and the
        static buffers changed must give what it gives unpatched. Anything
        short of that: the inputs are copied, as without patch_inputs."""
        crt, g = self.crt, e.graph
        try:
            graph, exec_ = g.raw_cuda_graph(), g.raw_cuda_graph_exec()
        except Exception as exc:
            self._patch_off(st, "the graph's handles are not available (%s)" % _first_line(exc))
            return
        handles, found = [], 0
        for i, s in enumerate(e.static_in):
            h = None
            if (i not in e.mutated and s.numel() > 0 and tuple(s.stride()) ==
                    tuple(tensors[i].stride())):
                n, h = crt.gpatch_open(graph, exec_, s.data_ptr(),
                                       s.untyped_storage().nbytes())
                if n <= 0:
                    crt.gpatch_close(h)
                    h = None
            found += h is not None
            handles.append(h)
        if not found:
            self._patch_off(st, "no input is read through kernel parameters alone")
            return
        why = self._patch_check(e, handles)
        if why is not None:
            for h in handles:
                crt.gpatch_close(h)
            self._patch_off(st, why)
            return
        e.patch = handles
        e.pcur = [None] * len(handles)
        self.c.patched_inputs += found

    def _patch_check(self, e, handles):
        """None when a patched replay equals an unpatched one; else why not."""
        T, crt = _T, self.crt
        static = e.static_in
        try:
            e.graph.replay()
            ref = [o.clone() for o in e.static_out]
            probes = {}
            for i, h in enumerate(handles):
                if h is None:
                    continue
                probes[i] = static[i].clone()
                if crt.gpatch_set(h, probes[i].data_ptr()) < 0:
                    return "kp_rt_gpatch_set failed"
                _disturb(static[i])
            e.graph.replay()
            got = [o.clone() for o in e.static_out]
            T.cuda.synchronize()
            same = all(a.shape == b.shape and bool(T.equal(a, b)) for a, b in zip(ref, got))
            for i, p in probes.items():     # back to the captured buffers
                static[i].copy_(p)
                crt.gpatch_set(handles[i], static[i].data_ptr())
            T.cuda.synchronize()
        except Exception as exc:
            return "the check failed: %s" % _first_line(exc)
        if not same:
            return ("a patched replay differs from an unpatched one (an input is read "
                    "through a pointer kept in device memory, or the graph is not "
                    "deterministic)")
        return None

    def _patch_off(self, st, why):
        self.c.failures["patch-off"] += 1
        if "patch-off" not in st.logged:
            st.logged.add("patch-off")
            _log(1, "torch: region '%s': inputs copied, not patched: %s" % (st.name, why))

    def _drop(self, e):
        """Free e's graph and static tensors (after the GPU is done with them)."""
        if e.graph is not None:
            try:
                _T.cuda.synchronize(e.device)
            except Exception:
                pass
            if e.state == _READY:      # counted when it became ready
                self.c.graphs -= 1
        if e.patch is not None:
            for h in e.patch:
                self.crt.gpatch_close(h)
        e.patch = e.pcur = None
        e.graph = e.static_in = e.static_out = e.spec = e.rp = None
        e.mutated = ()

    def _fail(self, st, e, reason, detail):
        """A graph failed: back off (doubling), or give up after MAX_FAILURES."""
        e.fails += 1
        self.c.failures[reason] += 1
        gave_up = e.fails >= MAX_FAILURES
        if gave_up:
            e.state = _DISABLED
            e.reason = "gave-up"
        else:
            e.state = _BACKOFF
            e.retry_at = e.calls + (BACKOFF_BASE << (e.fails - 1))
        if reason not in e.logged or gave_up:
            e.logged.add(reason)
            _log(1, "torch: region '%s' key %s: %s: %s; eager %s"
                 % (st.name, _key_hex(e.key), reason, detail,
                    "for good (gave-up)" if gave_up else "for a while, then retried"))

    # -- replay ---------------------------------------------------------------
    def _patch_in(self, e, tensors):
        """Point the graph at the arguments it patches, copy the others."""
        patch, pcur, static, crt = e.patch, e.pcur, e.static_in, self.crt
        for i, t in enumerate(tensors):
            h = patch[i]
            p = t.data_ptr()
            if h is not None:
                if p != pcur[i]:
                    if crt.gpatch_set(h, p) < 0:
                        pcur[i] = None
                        raise RuntimeError("kp_rt_gpatch_set failed (a CUDA error)")
                    pcur[i] = p
            elif t is not static[i] and p != static[i].data_ptr():
                static[i].copy_(t)

    def _copy_in(self, e, tensors):
        if e.patch is not None:
            return self._patch_in(e, tensors)
        static = e.static_in
        dst, src = [], []
        for i, t in enumerate(tensors):
            s = static[i]
            if t is not s and t.data_ptr() != s.data_ptr():
                dst.append(s)
                src.append(t)
        if not dst:
            return
        fe = getattr(_T, "_foreach_copy_", None)
        if fe is not None and len(dst) > 1:
            try:
                fe(dst, src)
                return
            except Exception:
                pass
        for s, t in zip(dst, src):
            s.copy_(t)

    def _aliased(self, e, tensors):
        if not e.mutated or len(tensors) < 2:
            return False
        ptrs = set()
        for t in tensors:
            p = t.untyped_storage().data_ptr()
            if p in ptrs:
                return True
            ptrs.add(p)
        return False

    def _replay(self, region, st, e, args, kwargs, tensors):
        if self._aliased(e, tensors):
            return self._eager(st, "aliased-inputs", region, args, kwargs)
        try:
            self._copy_in(e, tensors)
        except Exception as exc:
            return self._replay_failed(st, e, "cuda-error", exc, region, args, kwargs)
        if e.verify_left > 0:
            return self._verify(region, st, e, args, kwargs, tensors)
        try:
            e.graph.replay()
        except Exception as exc:
            return self._replay_failed(st, e, "launch", exc, region, args, kwargs)
        static = e.static_in
        for i in e.mutated:
            t = tensors[i]
            if t is not static[i]:
                t.copy_(static[i])
        self.c.replays += 1
        st.n["replays"] += 1
        if region.static_outputs:
            if e.spec is _LEAF:
                return e.static_out[0]
            return _unflatten(e.spec, iter(e.static_out))
        return _unflatten(e.spec, iter([t.clone() for t in e.static_out]))

    def _replay_failed(self, st, e, reason, exc, region, args, kwargs):
        """Copying the arguments in (reason cuda-error) or launching the
        graph (launch) raised: drop the graph, back off, run eagerly."""
        self._drop(e)
        self._fail(st, e, reason, ("copying the arguments in: " if reason == "cuda-error"
                                   else "") + _first_line(exc))
        return self._eager(st, reason, region, args, kwargs)

    def _verify(self, region, st, e, args, kwargs, tensors):
        """The static inputs hold this call's arguments: run the body eagerly
        on the caller's tensors (the truth, returned), replay the graph, and
        compare its outputs and the arguments it writes to."""
        e.verify_left -= 1
        out = region.fn(*args, **kwargs)
        try:
            e.graph.replay()
        except Exception as exc:
            self._drop(e)
            self._fail(st, e, "launch", _first_line(exc))
            self._count_eager(st, "launch")
            return out
        why = self._compare(e, out, tensors)
        if why is None:
            self.c.verified += 1
            self.c.replays += 1
            st.n["replays"] += 1
            return out
        self._drop(e)
        if e.fused:
            # the fused graph differs from the body: the region captures
            # again without fusion (the next call), with the reason kept
            self._fusion_off(st, e, why)
            return out
        e.state = _DISABLED
        e.reason = "verify-mismatch"
        self.c.failures["verify-mismatch"] += 1
        _log(1, "torch: region '%s' key %s: verify-mismatch: %s; eager for good"
             % (st.name, _key_hex(e.key), why))
        self._count_eager(st, "verify-mismatch")
        return out

    def _fusion_off(self, st, e, why):
        """Verify found the fused graph of e different from the body: fusion
        is off for the region from now on (every key captures again)."""
        reason = "verify: %s with %d fused chains" % (why, e.fused)
        st.fuse_off = reason
        self.fuse_dropped[st.name] = reason
        self.c.failures["fusion-verify"] += 1
        _log(1, "torch: region '%s' key %s: fusion-verify: %s; fusion off for the region, "
                "captured again without it" % (st.name, _key_hex(e.key), reason))
        for other in st.entries.values():
            if other is not e and not other.lock.acquire(False):
                continue
            try:
                if other.fused:
                    self._drop(other)
                    other.fused = 0
                    other.state = _WARMUP
                    other.warm_done = st.warmup
                    other.watched = True
            finally:
                if other is not e:
                    other.lock.release()
        self._count_eager(st, "verify-mismatch")

    def _fuse_exact(self):
        if self.fuse == "exact":
            return True
        return self.fuse == "plan" and self.shipped is not None and self.shipped.exact

    def _equal(self, a, b, fused=False):
        T = _T
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if self.verify_tol is None and fused and self.fuse != "off" and \
                not self._fuse_exact() and a.is_floating_point():
            # tolerant fusion: values kept in float between ops, rounded
            # once; within a few units in the last place of the dtype
            rtol = {T.float16: 4e-3, T.bfloat16: 3e-2}.get(a.dtype, 1e-5)
            return bool(T.allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True))
        if self.verify_tol is None:
            if self._fuse_exact():
                # fused in exact mode: bit for bit (NaN payloads, the sign of 0)
                from .aten_fuse import bits_equal
                eq = bits_equal(T, a, b)
                if eq is not None:
                    return eq
            return bool(T.equal(a, b))
        rtol, atol = self.verify_tol
        return bool(T.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))

    def _compare(self, e, out, tensors):
        leaves = []
        try:
            spec = _flatten_out(out, leaves)
        except _Fallback as f:
            return f.detail
        if not _same_spec(spec, e.spec) or len(leaves) != len(e.static_out):
            return "the outputs' structure differs from the capture's"
        for i, (a, b) in enumerate(zip(leaves, e.static_out)):
            if not self._equal(a, b, e.fused):
                return "output %d differs from eager" % i
        for i in e.mutated:
            if not self._equal(tensors[i], e.static_in[i], e.fused):
                return "argument tensor %d (written by the region) differs from eager" % i
        return None

    # -- housekeeping ---------------------------------------------------------
    def _fast_counts(self):
        """The fast path's calls (Runtime.fast), not in the counters: (calls,
        Counter of reasons) (self.lock held). Only read: stats() never writes
        st.fast_n, so no call is counted twice (threads calling one region
        at once can lose an increment, as with the other counters)."""
        n, why = 0, collections.Counter()
        for st in self.fast.values():
            k = st.fast_n
            if k:
                n += k
                why[st.fast_reason] += k
        return n, why

    def reset(self):
        """Drop every graph and every region's state (after replacing a
        module's parameters by new tensors, say): regions warm up again."""
        with self.lock:
            n, why = self._fast_counts()      # the states go: keep their fast calls
            self.c.calls += n
            self.c.eager += n
            self.c.eager_by_reason.update(why)
            self.fast = {}
            for st in self.states.values():
                for e in st.entries.values():
                    with e.lock:
                        self._drop(e)
            self.states.clear()

    def save_fusion(self, plan_path=None):
        """Write the torch fusion groups fused so far (every region) beside
        the plan: PLAN.aten and one kpaten-<hash>.cu per group (see
        kplan.aten_plan). plan_path: the plan to write them for (default:
        the open plan); sign it again afterwards. Returns the path of
        PLAN.aten, or raises KplanError."""
        from . import aten_plan
        path = plan_path if plan_path is not None else self.plan_path
        if path is None:
            raise KplanError("save_fusion: no plan to write the fusion groups beside "
                             "(kt.open(PLAN) or KPLAN_PLAN)")
        with self.lock:
            items = sorted(self.found.values(), key=lambda gs: gs[0].region)
        groups = [g for g, _src in items]
        sources = dict((g.source, src) for g, src in items)
        try:
            out = aten_plan.save(os.fspath(path), groups, sources)
        except (OSError, ValueError) as exc:
            raise KplanError("save_fusion: %s" % exc)
        _log(2, "torch: fusion: %d groups written to %s" % (len(groups), out))
        return out

    def close(self):
        if self.closed:
            return
        if self.fuse_save:
            self.fuse_save = False
            try:
                self.save_fusion()
            except KplanError as exc:
                _log(0, "torch: %s" % exc)
        if self.print_stats:
            self.print_stats_to(sys.stderr)
        self.reset()
        self.closed = True
        if self.crt is not None:
            try:
                self.crt.close()
            except Exception:
                pass

    def stats(self):
        c = self.c
        regions = {}
        with self.lock:
            fast_n, fast_why = self._fast_counts()
            for st in self.states.values():
                r = regions.setdefault(st.name, {"calls": 0, "replays": 0, "captures": 0,
                                                 "eager": 0, "keys": 0, "graphs": 0,
                                                 "state": None, "keys_by_state": {},
                                                 "lib_path": None})
                for k in ("calls", "replays", "captures", "eager"):
                    r[k] += st.n[k]
                r["calls"] += st.fast_n
                r["eager"] += st.fast_n
                r["keys"] += len(st.entries)
                for e in st.entries.values():
                    n = _STATE_NAMES[e.state]
                    r["keys_by_state"][n] = r["keys_by_state"].get(n, 0) + 1
                    r["graphs"] += e.graph is not None
                r["state"] = st.static_reason or self.global_reason or "active"
                # the library path captured, or recorded (eager, graph), None: none asked
                r["lib_path"] = st.lib_path or (
                    st.rec_path if st.rec_path in ("eager", "graph") else None)
        rt = None
        if self.crt is not None and not self.closed:
            try:
                rt = self.crt.stats()
            except Exception:
                rt = None
        return {
            "calls": c.calls + fast_n, "replays": c.replays, "captures": c.captures,
            "eager": c.eager + fast_n, "verified": c.verified, "evictions": c.evictions,
            "graphs": c.graphs, "watched": c.watched, "unwatched": c.unwatched,
            "graph_path_calls": c.graph_path,
            "path_retries": c.path_retries,
            "patched_inputs": c.patched_inputs,
            "eager_by_reason": dict(c.eager_by_reason + fast_why),
            "failures": dict(c.failures),
            "regions": regions,
            "plan": self.plan_path, "policy": self.policy,
            "plan_choice": self.plan_choice,
            "fusion": self._fusion_stats(),
            "rt": rt,
        }

    def _fusion_stats(self):
        if self.fusion is None and self.shipped is None and not self.fuse_dropped:
            return None
        from . import aten_fuse
        d = (self.fusion or aten_fuse.Stats()).as_dict()
        d["mode"] = self.fuse
        d["groups_shipped"] = len(self.shipped.groups) if self.shipped is not None else None
        d["groups_error"] = self.shipped.error if self.shipped is not None else None
        d["groups_found"] = len(self.found)
        d["dropped"] = dict(self.fuse_dropped)
        return d

    def print_stats_to(self, f):
        s = self.stats()
        for k in ("calls", "replays", "captures", "eager", "verified", "evictions",
                  "graphs", "watched", "unwatched"):
            f.write("kplan-torch: %s %d\n" % (k, s[k]))
        for k in ("graph_path_calls", "path_retries"):
            if s[k]:
                f.write("kplan-torch: %s %d\n" % (k, s[k]))
        for r, n in sorted(s["eager_by_reason"].items()):
            f.write("kplan-torch: eager.%s %d\n" % (r, n))
        for r, n in sorted(s["failures"].items()):
            f.write("kplan-torch: failures.%s %d\n" % (r, n))
        fz = s.get("fusion")
        if fz:
            f.write("kplan-torch: fusion chains %d ops %d alone %d unwritten %d compiled %d "
                    "(%.1f ms, nvrtc %d, cache %d) shipped %d strided %d foreach %d (ops %d, "
                    "kernels %d)%s%s\n" % (
                        fz["chains"], fz["ops_fused"], fz["ops_alone"], fz["dead_outputs"],
                        fz["compiled"], fz["compile_ms"], fz["nvrtc"], fz["cache_hits"],
                        fz["shipped"], fz.get("strided", 0), fz.get("foreach", 0),
                        fz.get("foreach_ops", 0), fz.get("foreach_kernels", 0),
                        "".join(" refused.%s %d" % kv for kv in sorted(fz["refused"].items())),
                        "".join(" fallback.%s %d" % kv for kv in sorted(fz["fallbacks"].items()))))
        for name, r in sorted(s["regions"].items()):
            f.write("kplan-torch: region %s calls %d replays %d captures %d eager %d state %s\n"
                    % (name, r["calls"], r["replays"], r["captures"], r["eager"], r["state"]))
        f.flush()


# ---------------------------------------------------------------------------
# module-level API

def _load_shipped(crt, plan_path):
    """The torch fusion groups of the plan libkplanrt applies: the file it
    names (kp_rt_aten_groups: PLAN.aten beside a plan file, the chosen
    entry's in a bundle), else those beside a plan file; a bundle with no
    entry for this GPU (or a library too old to say) has none."""
    from . import aten_plan
    f = getattr(crt, "aten_groups", None)
    ag = f() if f is not None else None
    if ag is not None:
        return aten_plan.Shipped.load(plan_path, path=ag[0], phash=ag[1])
    if os.path.isdir(plan_path):
        return None
    return aten_plan.Shipped.load(plan_path)


_current = None
_open_lock = threading.RLock()
_atexit_done = []


def open(plan_path=None, *, policy=None, verify=None, strict=None, warmup=None,
         max_keys=None, capture_error_mode="thread_local", verify_tol=None,
         disable=None, lib=None, runtime=None, fuse=None, fuse_save=None,
         graph_path=None, lib_path=None):
    """Open the runtime (replacing the current one) and return it.

    plan_path   a plan written by `kplan plan`, or a bundle (`kplan bundle`:
                one model's plans for several GPUs; libkplanrt applies the
                entry for this GPU, logged and in stats()["plan_choice"],
                none: plan-mismatch); None (default): $KPLAN_PLAN,
                as every other setting falls back to its variable; "" (or
                neither): no plan, every region eager (policy "plan", one
                line says so) but still an NVTX range in the "kplan" domain,
                so that `kplan record -- python3 app.py` finds them
    policy      "plan" (default; $KPLAN_TORCH_POLICY): what the plan says;
                "graph": capture every region (the plan's warm-up where it
                has the region), for trying kplan without a trace;
                "eager": nothing captured (ranges only)
    verify      the first N replays of each graph also run eagerly and are
                compared (torch.equal, or allclose with verify_tol=(rtol,
                atol)); a mismatch leaves that key eager (verify-mismatch).
                Default $KPLAN_RT_VERIFY or 0. The region must be idempotent.
    strict      fallbacks other than the expected ones (NOT_STRICT) raise
                KplanError; default $KPLAN_RT_STRICT
    warmup      eager calls before capture for every region (default: the
                plan's, DEFAULT_WARMUP without one; at least 1; in a job of
                several ranks at least MULTI_RANK_WARMUP, past the iterations
                DistributedDataParallel times with a host sync)
    max_keys    graphs kept per region (default DEFAULT_MAX_KEYS)
    disable     every region eager; default $KPLAN_RT_DISABLE
    lib         path of libkplanrt.so (default: kplan._rt.find_library())
    runtime     an open kplan._rt.Runtime (or an object with its methods)
    fuse        "plan" (default; $KPLAN_TORCH_FUSE): the torch fusion groups
                shipped with the plan (PLAN.aten, written by save_fusion),
                none when it has none; "exact" or "tolerant": fuse chains
                of pointwise ATen ops in each captured graph, generating
                their kernels unless the plan ships groups (kplan.aten_fuse;
                python/README.md, "Fusion"); "off"
    fuse_save   write the groups fused beside the plan at close()
                (save_fusion); default $KPLAN_TORCH_FUSE_SAVE
    graph_path  without a plan, while a tool records, the path region bodies
                take where libraries branch on capture (GRAPH_PATH_LIBS:
                transformers): "libs" (default under `kplan record`;
                $KPLAN_TORCH_GRAPH_PATH): the path kplan's capture will
                take, the library's eager path unless the region's first
                call synchronised where a library asked, then its graph's
                path (is_current_stream_capturing() True for the library),
                so that the trace holds the kernels the region's graph will
                run; "all": True everywhere; "off" (default under other
                tools): the run as it is. A body on the graph's path gives
                the graph's results (e.g. the attention mask kept), not
                those of an eager call.

    lib_path    the path captures take in the libraries that branch on
                capture (GRAPH_PATH_LIBS; $KPLAN_TORCH_LIB_PATH, default
                DEFAULT_LIB_PATH): "eager": their eager path, eager's
                kernels and bits, unless the watched call synchronised where
                the graph's path would not, or that capture failed
                (path-retry); "graph": their graph's path, as
                torch.cuda.graph captures it (and recorded so from a
                region's first call).

    Raises KplanError when the plan cannot be read, or when the library is
    missing and a plan was asked for. Without a plan, a missing library or
    no CUDA only logs one line: regions then run eagerly without ranges.
    """
    global _current
    if policy is None:
        policy = os.environ.get("KPLAN_TORCH_POLICY", "") or "plan"
    if verify is None:
        verify = _env_int("KPLAN_RT_VERIFY", 0)
    if strict is None:
        strict = _env_flag("KPLAN_RT_STRICT")
    if disable is None:
        disable = _env_flag("KPLAN_RT_DISABLE")
    print_stats = _env_flag("KPLAN_RT_STATS")
    key_warmup = _env_flag("KPLAN_RT_KEY_WARMUP")
    watch = os.environ.get("KPLAN_RT_WATCH", "1") != "0"
    if fuse is None:
        fuse = os.environ.get("KPLAN_TORCH_FUSE", "") or "plan"
    if fuse_save is None:
        fuse_save = _env_flag("KPLAN_TORCH_FUSE_SAVE")
    graph_path = _graph_path_setting(graph_path)
    lib_path = _lib_path_setting(lib_path)
    if plan_path is None:
        plan_path = os.environ.get("KPLAN_PLAN")
    plan_path = os.fspath(plan_path) if plan_path else None
    crt = runtime
    global_reason = None
    if crt is None:
        # without a plan the graph policy still wants the CUDA backend: the
        # watch before a capture and pointer patching need it
        flags = ((_rt.KP_RT_STRICT if strict else 0) | (_rt.KP_RT_DISABLE if disable else 0) |
                 (_rt.KP_RT_CUDA if policy == "graph" else 0))
        want_plan = plan_path is not None and not disable
        try:
            crt = _rt.Runtime.open(plan_path, flags=flags, verify_calls=int(verify),
                                   warmup=-1 if warmup is None else int(warmup), lib=lib)
        except OSError as exc:
            if want_plan or strict:
                raise KplanError("cannot load libkplanrt to read %s: %s" % (plan_path, exc))
            _log(1, "torch: cannot load libkplanrt (%s); regions run without NVTX ranges%s"
                 % (exc, "" if policy == "graph" else ", eagerly"))
            crt = None
        except _rt.RtError as exc:
            if exc.code == -9 and not strict:   # CUDA cannot start
                _log(1, "torch: libkplanrt: %s; every region runs eagerly" % exc)
                crt = None
                global_reason = "no-cuda"
            else:
                raise KplanError("cannot open %s: %s" % (plan_path or "the runtime", exc))
    choice = crt.plan_choice() if hasattr(crt, "plan_choice") else ""
    if choice:
        # a bundle: libkplanrt chose the entry for this GPU, or found none
        st = crt.stats() or {}
        if st.get("bundle_entries") and not st.get("bundle_entry"):
            _log(1, "torch: %s: plan-mismatch: %s; every region eager" % (plan_path, choice))
            global_reason = global_reason or "plan-mismatch"
        else:
            _log(2, "torch: %s: %s" % (plan_path, choice))
    rt = Runtime(crt, plan_path, policy=policy, verify=verify, strict=strict,
                 warmup=warmup, max_keys=max_keys, capture_error_mode=capture_error_mode,
                 disabled=disable, print_stats=print_stats, key_warmup=key_warmup,
                 watch=watch, verify_tol=verify_tol, global_reason=global_reason, fuse=fuse,
                 fuse_save=fuse_save, graph_path=graph_path, lib_path=lib_path)
    with _open_lock:
        old, _current = _current, rt
        if not _atexit_done:
            _atexit_done.append(1)
            atexit.register(_at_exit)
    rt.plan_choice = choice
    if old is not None:
        old.close()
    return rt


def _at_exit():
    rt = _current
    if rt is not None and rt.fuse_save and not rt.closed:
        rt.fuse_save = False
        try:
            rt.save_fusion()
        except KplanError as exc:
            _log(0, "torch: %s" % exc)
    if rt is not None and rt.print_stats and not rt.closed:
        rt.print_stats_to(sys.stderr)
        rt.print_stats = False


def current():
    """The open runtime; opened on first use from the environment
    (KPLAN_PLAN: the plan, KPLAN_TORCH_POLICY...) when open() was not called."""
    rt = _current
    if rt is not None:
        return rt
    with _open_lock:
        if _current is None:
            try:
                open()
            except KplanError as exc:
                _log(1, "torch: %s; every region runs eagerly" % exc)
                try:
                    open("", policy="plan")
                except KplanError:
                    open("", policy="plan", runtime=_NullRuntime())
        return _current


def close():
    """Close the current runtime (drop its graphs, print its counters when
    KPLAN_RT_STATS=1). A later region call opens one from the environment."""
    global _current
    with _open_lock:
        rt, _current = _current, None
    if rt is not None:
        rt.close()


def stats():
    """Counters of the current runtime (a dict; see Runtime.stats)."""
    return current().stats()


def reset():
    """Drop every graph of the current runtime; regions warm up again."""
    current().reset()


def save_fusion(plan_path=None):
    """Write the torch fusion groups the current runtime fused beside the
    plan (Runtime.save_fusion): PLAN.aten and its sources. Returns its path."""
    return current().save_fusion(plan_path)


class _NullRuntime(object):
    """Stands for the C runtime when there is none: no plan, no ranges."""
    can_watch = False

    def region_plan(self, name):
        return None

    def range_push(self, bname, kind=2):
        pass

    def range_pop(self):
        pass

    def watch_begin(self, stream, flags=0):
        return -1

    def watch_end(self):
        return (-1, "", "", "no runtime library")

    def stats(self):
        return None

    def close(self):
        pass


class Region(object):
    """A function marked as a kplan region (see region())."""

    def __init__(self, fn, name, key=None, static_outputs=False, max_keys=None,
                 patch_inputs=False):
        if not callable(fn):
            raise TypeError("kplan.torch.region: %r is not callable" % (fn,))
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.name = str(name)
        self.key = key
        self.static_outputs = bool(static_outputs)
        self.patch_inputs = bool(patch_inputs)
        self.max_keys = max_keys

    def __call__(self, *args, **kwargs):
        rt = _current
        if rt is None:
            rt = current()
        st = rt.fast.get(self)
        if st is not None:        # eager for good: the body, nothing else
            st.fast_n += 1
            return self.fn(*args, **kwargs)
        return rt._call(self, args, kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return "<kplan region %r of %r>" % (self.name, self.fn)

    # hash/eq by identity: the runtime keeps one state per Region object


def region(name, key=None, static_outputs=False, max_keys=None, patch_inputs=False):
    """Decorator: mark a function as region `name` (a label of the plan).

        @kplan.torch.region("step")
        def step(x, y): ...

        fwd = kplan.torch.region("fwd")(model)     # any callable

    key             callable(*args, **kwargs) -> hashable: more of the shape
                    key (what the body depends on that the arguments do not show)
    static_outputs  return the graph's own output tensors instead of clones:
                    no copy, but the next call of the same key overwrites
                    them (as torch.compile's reduce-overhead outputs)
    max_keys        graphs kept for this region (default: open()'s)
    patch_inputs    point the graph at each call's tensor arguments instead of
                    copying them into its static inputs (kp_rt_gpatch, PyGraph's
                    indirection): no copy per call. For bodies without side
                    effects beyond their outputs (inference): at capture the
                    graph is replayed twice more, patched and unpatched, and
                    the outputs compared; inputs written by the body, inputs
                    read through pointers kept in device memory, a graph that
                    gives another result, or a torch without
                    CUDAGraph.raw_cuda_graph_exec: copied as without it

    The body must be skippable: at replay only its CUDA work is repeated,
    its Python side effects are not (they happen at warm-up and capture).
    """
    if callable(name) and not isinstance(name, str):
        raise TypeError("kplan.torch.region needs a name: @kplan.torch.region(\"step\")")

    def deco(fn):
        return Region(fn, name, key=key, static_outputs=static_outputs, max_keys=max_keys,
                      patch_inputs=patch_inputs)
    return deco


class mark(object):
    """Context manager: an NVTX range in the "kplan" domain named `name`,
    nothing else (the block always runs; a `with` block cannot be skipped,
    so it cannot be replayed). For recording code that is not a function."""

    def __init__(self, name):
        self.bname = str(name).encode("utf-8")
        self.crt = None

    def __enter__(self):
        self.crt = current().crt
        if self.crt is not None:
            self.crt.range_push(self.bname, _rt.KIND_BINDING)
        return self

    def __exit__(self, *exc):
        if self.crt is not None:
            self.crt.range_pop()
        return False
