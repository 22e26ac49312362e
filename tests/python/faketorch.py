"""faketorch - a stand-in for the parts of torch that kplan.torch uses.

It keeps the CUDA semantics the binding depends on, so that a wrong state
machine gives wrong numbers here as it would on a GPU:
- work issued while a graph captures on the capturing stream is RECORDED,
  not run (its outputs hold garbage until a replay); replay runs it again on
  the tensors it was captured with;
- a synchronising call (item(), synchronize(), equal()) during a capture
  invalidates it, and torch.cuda.graph's exit then raises without restoring
  the current stream (as torch does when capture_end fails);
- in-place ops bump the tensor's _version; each tensor has its own address.

Tensors are 1-D lists of Python floats. `install()` puts the module in
sys.modules['torch'] and returns it; `uninstall()` removes it.
"""
import contextlib
import itertools
import sys
import threading
import types
import weakref

# counters the tests read
launches = 0          # kernels "launched" (run or recorded)
executed = 0          # kernels run (eagerly or by a replay)
captures_begun = 0
graphs_alive = 0


class dtype(object):
    def __init__(self, name):
        self.name = name
        self.is_floating_point = name.startswith("float")
        self.is_complex = False

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32")
float16 = dtype("float16")
bfloat16 = dtype("bfloat16")
int64 = dtype("int64")
int32 = dtype("int32")
int16 = dtype("int16")


class layout(object):
    def __init__(self, name):
        self.name = name


strided = layout("strided")
sparse_coo = layout("sparse_coo")


class memory_format(object):
    pass


class Size(tuple):
    pass


class device(object):
    def __init__(self, type_, index=None):
        if ":" in type_:
            type_, index = type_.split(":")
            index = int(index)
        if type_ == "cuda" and index is None:
            index = 0
        self.type = type_
        self.index = index

    def __eq__(self, o):
        return isinstance(o, device) and (self.type, self.index) == (o.type, o.index)

    def __ne__(self, o):
        return not self == o

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return "device(%r, %r)" % (self.type, self.index)


_addr = itertools.count(0x7f0000000000, 0x10000)


class _Storage(object):
    def __init__(self, ptr, n=0):
        self._ptr = ptr
        self._n = n

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return 4 * self._n


# Pointer patching (kp_rt_gpatch) on a fake graph: while a graph replays,
# its ops read a tensor through _r(), which follows the graph's redirections
# (static input -> the tensor its "pointer" was patched to).
_redir = {}
_live = weakref.WeakValueDictionary()   # address -> tensor
_graphs = weakref.WeakValueDictionary()  # raw handle -> CUDAGraph


def _r(t):
    return _redir.get(id(t), t) if _redir else t


class Tensor(object):
    def __init__(self, data, device_="cuda:0", dtype_=float32, requires_grad=False,
                 layout_=strided, _base=None):
        self.data = [float(v) for v in data]
        self.shape = Size((len(self.data),))
        self.dtype = dtype_
        self.device = device_ if isinstance(device_, device) else device(device_)
        self.requires_grad = requires_grad
        self.layout = layout_
        self._version = 0
        self._base = _base
        self._ptr = next(_addr) if _base is None else _base._ptr
        self.streams = []
        if _base is None:
            _live[self._ptr] = self

    def stride(self):
        if self.layout is not strided:
            raise RuntimeError("sparse tensors do not have strides")
        return (1,)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def get_device(self):
        return self.device.index if self.device.type == "cuda" else -1

    def data_ptr(self):
        return self._ptr

    def untyped_storage(self):
        return _Storage(self._ptr, len(self.data))

    def numel(self):
        return len(self.data)

    def view(self, dtype_=None):
        """Another tensor over the same memory (data list shared); with a
        dtype, its values stand for the bits (as equal as the floats)."""
        t = Tensor([], self.device, dtype_ or self.dtype, _base=self)
        t.data = self.data
        t.shape = self.shape
        return t

    def contiguous(self):
        return self

    def record_stream(self, s):
        self.streams.append(s)

    def copy_(self, src):
        dst = self
        _launch(lambda: _r(dst).data.__setitem__(slice(None), list(_r(src).data)),
                reads=(src,), writes=(dst,))
        self._version += 1
        return self

    def clone(self):
        out = Tensor([0.0] * len(self.data), self.device, self.dtype)
        src = self
        _launch(lambda: out.data.__setitem__(slice(None), list(_r(src).data)), reads=(src,))
        return out

    def add_(self, v):
        t = self
        _launch(lambda: _r(t).data.__setitem__(slice(None), [a + v for a in _r(t).data]),
                reads=(t,), writes=(t,))
        self._version += 1
        return self

    def reshape(self, *shape):
        return self.view()

    def roll(self, k):
        out = Tensor([0.0] * len(self.data), self.device, self.dtype)
        src = self
        _launch(lambda: out.data.__setitem__(slice(None), _r(src).data[-k:] + _r(src).data[:-k]),
                reads=(src,))
        return out

    def item(self):
        _sync("item()")
        return self.data[0]

    def tolist(self):
        return list(self.data)

    def __repr__(self):
        return "Tensor(%r)" % (self.data,)


def tensor(data, device="cuda:0", dtype=float32, requires_grad=False):
    return Tensor(data, device, dtype, requires_grad)


def empty_like(t):
    return Tensor([0.0] * len(t.data), t.device, t.dtype)


def _binary(a, b, f):
    out = Tensor([0.0] * len(a.data), a.device, a.dtype,
                 requires_grad=_grad.enabled and (a.requires_grad or
                                                  getattr(b, "requires_grad", False)))
    if isinstance(b, Tensor):
        _launch(lambda: out.data.__setitem__(
            slice(None), [f(x, y) for x, y in zip(_r(a).data, _r(b).data)]), reads=(a, b))
    else:
        _launch(lambda: out.data.__setitem__(slice(None), [f(x, b) for x in _r(a).data]),
                reads=(a,))
    return out


def scaled_hidden(a, k):
    """a * k by a kernel that finds a's address in device memory, not in its
    parameters: pointer patching cannot see the read."""
    out = Tensor([0.0] * len(a.data), a.device, a.dtype)
    _launch(lambda: out.data.__setitem__(slice(None), [x * k for x in _r(a).data]))
    return out


def add(a, b):
    return _binary(a, b, lambda x, y: x + y)


def mul(a, b):
    return _binary(a, b, lambda x, y: x * y)


def equal(a, b):
    _sync("equal()")
    return a.data == b.data


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    _sync("allclose()")
    return all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a.data, b.data))


class _Grad(threading.local):
    enabled = True
    inference = False


_grad = _Grad()


def is_grad_enabled():
    return _grad.enabled


def is_inference_mode_enabled():
    return _grad.inference


@contextlib.contextmanager
def no_grad():
    old = _grad.enabled
    _grad.enabled = False
    try:
        yield
    finally:
        _grad.enabled = old


# --------------------------------------------------------------------------
# streams, graphs

_stream_ids = itertools.count(0x5000, 0x10)


class Stream(object):
    def __init__(self, device=None, _id=None):
        self.cuda_stream = next(_stream_ids) if _id is None else _id
        self.waits = []

    def wait_stream(self, other):
        self.waits.append(other)

    def __repr__(self):
        return "Stream(%#x)" % self.cuda_stream


_default_stream = Stream(_id=0)


class _Cur(threading.local):
    stream = None


_cur = _Cur()
_capturing = [None]   # [(graph, stream)] while capturing


def _current():
    return _cur.stream or _default_stream


def _launch(fn, reads=(), writes=()):
    """reads/writes: the tensors whose addresses are in the kernel's
    parameters (what kp_rt_gpatch_open sees)."""
    global launches, executed
    launches += 1
    cap = _capturing[0]
    if cap is not None and cap[1] is _current():
        cap[0]._ops.append(fn)
        cap[0]._params.append(tuple(t for t in tuple(reads) + tuple(writes)
                                    if isinstance(t, Tensor)))
        return
    executed += 1
    fn()


_sync_debug = [0]      # torch.cuda.set_sync_debug_mode: 0, 1 (warn), 2 (error)
_sync_debug_noticed = [False]   # its once-per-process notice given


def _sync(what, flagged=True):
    """A host sync: fails a capture; outside one, flagged syncs (item(),
    equal(): not synchronize()) warn or raise as torch's sync debug mode."""
    cap = _capturing[0]
    if cap is not None:
        cap[0]._invalid = what
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing (%s)"
                           % what)
    if flagged and _sync_debug[0] == 1:
        import warnings
        warnings.warn("called a synchronizing CUDA operation (%s)" % what, UserWarning)
    elif flagged and _sync_debug[0] == 2:
        raise RuntimeError("called a synchronizing CUDA operation (%s)" % what)


class _CUDAGraphBase(object):
    """torch._C._CUDAGraph: the C class whose replay does the work."""

    def replay(self):
        global executed, _redir
        if not self._ok:
            raise RuntimeError("replay of a graph that was not captured")
        if self._keep and not self._inst:
            self.instantiate()
        prev, _redir = _redir, self._redirect
        try:
            for op in self._ops:
                executed += 1
                op()
        finally:
            _redir = prev
        self.replays += 1


class CUDAGraph(_CUDAGraphBase):
    """torch.cuda.CUDAGraph: a Python subclass whose replay() wraps the C one."""

    def __init__(self, keep_graph=False):
        self._ops = []
        self._params = []        # per op: the tensors in its parameters
        self._redirect = {}      # id(tensor) -> tensor read instead (patched)
        self._invalid = None
        self._ok = False
        self._keep = keep_graph
        self._inst = False
        self.replays = 0
        self.wrapper_replays = 0
        _graphs[id(self)] = self

    def instantiate(self):
        self._inst = True

    def raw_cuda_graph(self):
        if not self._keep:
            raise RuntimeError("raw_cuda_graph() needs keep_graph=True")
        return id(self)

    def raw_cuda_graph_exec(self):
        if not self._inst:
            raise RuntimeError("the graph is not instantiated")
        return id(self) + 8

    def replay(self):
        self.wrapper_replays += 1
        super().replay()

    def __del__(self):
        global graphs_alive
        if self._ok:
            graphs_alive -= 1


_C = types.SimpleNamespace(_CUDAGraph=_CUDAGraphBase)


class graph(object):
    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.g = cuda_graph
        self.stream = stream or Stream()
        self.mode = capture_error_mode

    def __enter__(self):
        global captures_begun
        synchronize()
        self.prev = _cur.stream
        _cur.stream = self.stream
        _capturing[0] = (self.g, self.stream)
        captures_begun += 1

    def __exit__(self, et, ev, tb):
        global graphs_alive
        _capturing[0] = None
        if self.g._invalid or et is not None:
            # like torch: capture_end raises and the stream context is not exited
            raise RuntimeError("CUDA error: operation failed due to a previous error during "
                               "capture (%s)" % (self.g._invalid or et.__name__))
        self.g._ok = True
        graphs_alive += 1
        _cur.stream = self.prev
        return False


@contextlib.contextmanager
def _stream_ctx(s):
    prev = _cur.stream
    _cur.stream = s
    try:
        yield
    finally:
        _cur.stream = prev


def synchronize(device=None):
    _sync("synchronize()", flagged=False)


def _make_cuda():
    cuda = types.ModuleType("torch.cuda")
    cuda.available = True
    cuda.is_available = lambda: cuda.available
    cuda.is_initialized = lambda: cuda.available    # CUDA is up from the start
    cuda.current_device = lambda: 0
    cuda.current_stream = lambda device=None: _current()
    cuda.Stream = Stream
    cuda.stream = _stream_ctx

    def set_stream(s):
        _cur.stream = None if s is _default_stream else s
    cuda.set_stream = set_stream
    cuda.synchronize = synchronize
    cuda.is_current_stream_capturing = lambda: (_capturing[0] is not None and
                                                _capturing[0][1] is _current())
    cuda.CUDAGraph = CUDAGraph
    cuda.graph = graph

    def set_sync_debug_mode(m):
        _sync_debug[0] = {"default": 0, "warn": 1, "error": 2}.get(m, m)
        if _sync_debug[0] and not _sync_debug_noticed[0]:
            # torch's TORCH_WARN_ONCE, word for word: not a sync
            _sync_debug_noticed[0] = True
            import warnings
            warnings.warn("Synchronization debug mode is a prototype feature and does not yet "
                          "detect all synchronizing operations", UserWarning)
    cuda.set_sync_debug_mode = set_sync_debug_mode
    cuda.get_sync_debug_mode = lambda: _sync_debug[0]
    return cuda


cuda = _make_cuda()


class _Distributed(object):
    """torch.distributed: `world` ranks once initialized (0: not initialized).
    all_reduce combines this process's tensor with `peers` (the other ranks'
    values, one list per call) and counts its calls."""
    world = 0
    peers = ()
    seq = []      # when not empty: the peers of each call in turn
    reduces = 0

    class ReduceOp(object):
        MIN = "min"
        MAX = "max"

    def all_reduce(self, t, op="sum"):
        self.reduces += 1
        peers = self.seq.pop(0) if self.seq else self.peers
        vals = [t.data[0]] + [p for p in peers]
        t.data[0] = min(vals) if op == "min" else max(vals) if op == "max" else sum(vals)

    def is_available(self):
        return True

    def is_initialized(self):
        return self.world > 0

    def get_world_size(self):
        return self.world


distributed = _Distributed()
compiler = types.SimpleNamespace(is_compiling=lambda: False)


def reset_state():
    """Between tests: counters, grad mode, current stream, capture."""
    global launches, executed, captures_begun
    launches = executed = captures_begun = 0
    _grad.enabled = True
    _grad.inference = False
    _cur.stream = None
    _capturing[0] = None
    _sync_debug[0] = 0
    _sync_debug_noticed[0] = False    # each test a new process
    cuda.available = True


def install():
    mod = sys.modules[__name__]
    sys.modules["torch"] = mod
    return mod


def uninstall():
    if sys.modules.get("torch") is sys.modules[__name__]:
        del sys.modules["torch"]
