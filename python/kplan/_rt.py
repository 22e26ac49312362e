"""ctypes binding of libkplanrt (include/kplan/runtime.h).

Only what a language binding needs: open/close, the plan's view of a region
(kp_rt_region_plan), the runtime's NVTX ranges (kp_rt_range_push/pop, kind 2),
the capture watch (kp_rt_watch_begin/end), the counters and the reason names.
The structures below mirror the header field for field; tests/python checks
them against the header (its text, and offsetof() when a C compiler is there).

Nothing here imports torch.
"""
import ctypes
import ctypes.util
import os

__all__ = [
    "REASONS", "ERRORS", "RtError", "Runtime", "find_library", "load_library",
    "KP_RT_STRICT", "KP_RT_DISABLE", "KP_RT_PRINT_STATS", "KP_RT_TIMING",
    "KP_RT_NO_ENV", "KP_RT_TWO_EXECS", "KP_RT_CUDA", "KP_RT_WATCH_ALLOW_ALLOC",
    "KIND_C", "KIND_BINDING",
]

# enum kp_rt_reason, in order: index i is the C value i (kp_rt_reason_name).
REASONS = (
    "none", "no-plan", "disabled", "plan-mismatch", "unknown-region",
    "planned-eager", "warmup", "capture-failed", "fingerprint", "instantiate",
    "patch", "launch", "cuda-error", "bad-bind", "unpatchable", "key-thrash",
    "backoff", "gave-up", "verify-mismatch", "nested", "busy", "ambiguous-bind",
    "would-break-capture", "unbound-change", "untrusted-plan",
)
KP_RT_R_COUNT = len(REASONS)

# enum kp_rt_flags
KP_RT_STRICT = 1 << 0
KP_RT_DISABLE = 1 << 1
KP_RT_PRINT_STATS = 1 << 2
KP_RT_TIMING = 1 << 3
KP_RT_NO_ENV = 1 << 4
KP_RT_TWO_EXECS = 1 << 5
KP_RT_CUDA = 1 << 6
# enum kp_rt_watch_flags
KP_RT_WATCH_ALLOW_ALLOC = 1 << 0
# enum kp_rt_bind_flags (not used by the binding; listed for the layout test)
KP_RT_BIND_OUTPUT = 1 << 0
KP_RT_BIND_VALUE = 1 << 1
KP_RT_MAX_BINDS = 16

# kind argument of kp_rt_range_push
KIND_C = 1        # a region the C API captures on its stream
KIND_BINDING = 2  # a region captured by a language binding (this package)

# kplan's error codes (common/err.h)
ERRORS = {
    -1: "EINVAL", -2: "ENOMEM", -3: "EIO", -4: "EDB", -5: "EFORMAT",
    -6: "EVERSION", -7: "ENOTFOUND", -8: "EBUSY", -9: "ECUDA", -10: "ECUPTI",
    -11: "EUNSUPPORTED", -12: "EMISMATCH",
}

_u64 = ctypes.c_uint64
_i64 = ctypes.c_int64
_u32 = ctypes.c_uint32
_int = ctypes.c_int


class kp_rt_err(ctypes.Structure):
    _fields_ = [("code", _int), ("msg", ctypes.c_char * 512)]


class kp_rt_options(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint),
        ("verify_calls", _int),
        ("warmup", _int),
        ("max_failures", _int),
        ("trust", ctypes.c_char_p),
        ("model", ctypes.c_char_p),
    ]


class kp_rt_stats(ctypes.Structure):
    _fields_ = [
        ("calls", _u64),
        ("replays", _u64),
        ("captures", _u64),
        ("eager", _u64),
        ("eager_by_reason", _u64 * KP_RT_R_COUNT),
        ("failures", _u64 * KP_RT_R_COUNT),
        ("patched_nodes", _u64),
        ("patched_words", _u64),
        ("evictions", _u64),
        ("verified", _u64),
        ("graphs", _u64),
        ("graph_nodes", _u64),
        ("graph_mem_bytes", _i64),
        ("replay_host_ns", _i64),
        ("replay_launch_ns", _i64),
        ("replay_patch_ns", _i64),
        ("watched", _u64),
        ("unwatched", _u64),
        ("watch_ns", _i64),
        ("patched_values", _u64),
        ("cupti_attaches", _u64),
        ("cupti_detaches", _u64),
        ("cupti_attached", _u64),
        ("bundle_entries", _u64),
        ("bundle_entry", _u64),
        ("bundle_match", _u64),
        ("agreements", _u64),
    ]


class kp_rt_region_info(ctypes.Structure):
    _fields_ = [
        ("decision", _int),
        ("warmup", _int),
        ("kernels", _u32),
        ("n_patches", _u32),
        ("n_scalar_patches", _u32),
        ("fingerprint", _u64),
        ("reason", ctypes.c_char * 64),
        ("bundle_entry", _u32),
        ("bundle_match", _u32),
    ]


class kp_rt_watch_result(ctypes.Structure):
    _fields_ = [
        ("verdict", _int),
        ("call", ctypes.c_char * 64),
        ("kernel", ctypes.c_char * 160),
        ("msg", ctypes.c_char * 320),
    ]


class _bind(ctypes.Structure):
    _fields_ = [
        ("base", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("value", _u64),
    ]


class kp_region(ctypes.Structure):
    """Not used by the binding (it never calls kp_rt_region_begin); kept so
    that the layout test covers every structure of the header."""
    _fields_ = [
        ("entry_", ctypes.c_void_p),
        ("stream_", ctypes.c_void_p),
        ("mode_", _int),
        ("n_binds_", _int),
        ("t0_", _i64),
        ("ranged_", _int),
        ("bind_", _bind * KP_RT_MAX_BINDS),
    ]


STRUCTS = {
    "kp_rt_err": kp_rt_err,
    "kp_rt_options": kp_rt_options,
    "kp_rt_stats": kp_rt_stats,
    "kp_rt_region_info": kp_rt_region_info,
    "kp_rt_watch_result": kp_rt_watch_result,
    "kp_region": kp_region,
}

DECISIONS = {0: "eager", 1: "graph", 2: "split"}


class RtError(RuntimeError):
    """kp_rt_open failed: .code is kplan's negative error code."""

    def __init__(self, code, msg):
        self.code = code
        self.name = ERRORS.get(code, str(code))
        RuntimeError.__init__(self, "%s (%s)" % (msg, self.name))


def _pkg_dir():
    return os.path.dirname(os.path.abspath(__file__))


def library_candidates():
    """Where the library is looked for, in order (the first that exists wins):
    $KPLAN_RT_LIB (a file, or a directory holding libkplanrt.so); a copy
    next to the package (kplan/lib/); the repository's build/lib (the package
    at python/kplan/ in a built checkout); then the dynamic loader's search
    (LD_LIBRARY_PATH, ldconfig)."""
    out = []
    env = os.environ.get("KPLAN_RT_LIB")
    if env:
        out.append(os.path.join(env, "libkplanrt.so") if os.path.isdir(env) else env)
    here = _pkg_dir()
    out.append(os.path.join(here, "lib", "libkplanrt.so"))
    repo = os.path.dirname(os.path.dirname(here))
    build = os.environ.get("BUILD", "build")
    out.append(os.path.join(repo, build, "lib", "libkplanrt.so"))
    if build != "build":
        out.append(os.path.join(repo, "build", "lib", "libkplanrt.so"))
    return out


def find_library():
    """Path of libkplanrt.so, or None."""
    cands = library_candidates()
    if os.environ.get("KPLAN_RT_LIB"):
        # an explicit choice is not silently replaced by another copy
        return cands[0]
    for p in cands:
        if os.path.isfile(p):
            return p
    return ctypes.util.find_library("kplanrt")


def _declare(lib, name, restype, argtypes, required=True):
    f = getattr(lib, name, None)
    if f is None:
        if required:
            raise OSError("%s: no symbol %s (an older libkplanrt?)" % (lib._name, name))
        return None
    f.restype = restype
    f.argtypes = argtypes
    return f


class Library(object):
    """The loaded library with its functions declared. Functions the header
    added late (kp_rt_region_plan, kp_rt_range_*, kp_rt_watch_*) are None in
    a library that lacks them."""

    def __init__(self, path):
        self.path = path
        lib = ctypes.CDLL(path)
        self._lib = lib
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        P = ctypes.POINTER
        self.open = _declare(lib, "kp_rt_open", vp, [cp, P(kp_rt_err)])
        self.open_ex = _declare(lib, "kp_rt_open_ex", vp,
                                [cp, P(kp_rt_options), P(kp_rt_err)])
        self.close = _declare(lib, "kp_rt_close", None, [vp])
        self.get_stats = _declare(lib, "kp_rt_get_stats", None, [vp, P(kp_rt_stats)])
        self.reason_name = _declare(lib, "kp_rt_reason_name", cp, [_int])
        self.region_plan = _declare(lib, "kp_rt_region_plan", _int,
                                    [vp, cp, P(kp_rt_region_info)], required=False)
        self.plan_choice = _declare(lib, "kp_rt_plan_choice", cp, [vp], required=False)
        self.aten_groups = _declare(lib, "kp_rt_aten_groups", cp,
                                    [vp, P(ctypes.c_uint64)], required=False)
        self.range_push = _declare(lib, "kp_rt_range_push", None, [vp, cp, _int],
                                   required=False)
        self.range_pop = _declare(lib, "kp_rt_range_pop", None, [vp], required=False)
        self.watch_begin = _declare(lib, "kp_rt_watch_begin", _int, [vp, vp, ctypes.c_uint],
                                    required=False)
        self.watch_end = _declare(lib, "kp_rt_watch_end", _int,
                                  [vp, P(kp_rt_watch_result)], required=False)
        self.watch_release = _declare(lib, "kp_rt_watch_release", None, [vp],
                                      required=False)
        self.gpatch_open = _declare(lib, "kp_rt_gpatch_open", _int,
                                    [vp, vp, vp, vp, ctypes.c_size_t, P(vp)], required=False)
        self.gpatch_set = _declare(lib, "kp_rt_gpatch_set", _int, [vp, vp], required=False)
        self.gpatch_close = _declare(lib, "kp_rt_gpatch_close", None, [vp], required=False)
        self.kernel_load = _declare(lib, "kp_rt_kernel_load", _int,
                                    [vp, cp, ctypes.c_size_t, cp, P(vp), cp, ctypes.c_size_t],
                                    required=False)
        self.kernel_launch = _declare(lib, "kp_rt_kernel_launch", _int,
                                      [vp, ctypes.c_uint, ctypes.c_uint, vp, P(vp)],
                                      required=False)


_loaded = {}


def load_library(path=None):
    """Load (once per path) and return a Library. Raises OSError when the
    library cannot be found or loaded."""
    if path is None:
        path = find_library()
        if path is None:
            raise OSError("libkplanrt.so not found (looked at %s and the loader's path); "
                          "build it with `make` or set KPLAN_RT_LIB"
                          % ", ".join(library_candidates()))
    lib = _loaded.get(path)
    if lib is None:
        lib = _loaded[path] = Library(path)
    return lib


def _s(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")


def stats_dict(st):
    """A kp_rt_stats as a dict (reason arrays keyed by reason name, zeros left out)."""
    d = {}
    for name, _t in kp_rt_stats._fields_:
        v = getattr(st, name)
        if name in ("eager_by_reason", "failures"):
            d[name] = {REASONS[i]: int(v[i]) for i in range(KP_RT_R_COUNT) if v[i]}
        else:
            d[name] = int(v)
    return d


class Runtime(object):
    """One open kp_rt handle. The methods are what kplan.torch uses; the
    tests give kplan.torch a pure-Python object with the same methods."""

    def __init__(self, lib, handle, plan_path):
        self.lib = lib
        self.handle = ctypes.c_void_p(handle)
        self.plan_path = plan_path
        self.can_watch = lib.watch_begin is not None and lib.watch_end is not None
        self.has_plan_lookup = lib.region_plan is not None
        self.can_fuse = lib.kernel_load is not None and lib.kernel_launch is not None
        self.last_load = None     # kernel_load: "cache" or "nvrtc"
        self.can_patch = (lib.gpatch_open is not None and lib.gpatch_set is not None and
                          lib.gpatch_close is not None)

    @classmethod
    def open(cls, plan_path=None, flags=0, verify_calls=0, warmup=-1, max_failures=0,
             lib=None, trust=None, model=None):
        if lib is None or isinstance(lib, str):
            lib = load_library(lib)
        opt = kp_rt_options(flags=flags, verify_calls=verify_calls, warmup=warmup,
                            max_failures=max_failures,
                            trust=os.fsencode(trust) if trust is not None else None,
                            model=model.encode() if isinstance(model, str) else model)
        err = kp_rt_err()
        p = os.fsencode(plan_path) if plan_path is not None else None
        h = lib.open_ex(p, ctypes.byref(opt), ctypes.byref(err))
        if not h:
            raise RtError(err.code or -1, _s(err.msg) or "kp_rt_open failed")
        return cls(lib, h, plan_path)

    def close(self):
        if self.handle:
            self.lib.close(self.handle)
            self.handle = ctypes.c_void_p(0)

    def region_plan(self, name):
        """The plan's entry for region `name` as a dict, or None when the
        plan has no such region (or no plan applies)."""
        if not self.has_plan_lookup or not self.handle:
            return None
        info = kp_rt_region_info()
        rc = self.lib.region_plan(self.handle, name if isinstance(name, bytes)
                                  else name.encode(), ctypes.byref(info))
        if rc != 0:
            return None
        return {
            "decision": DECISIONS.get(info.decision, str(info.decision)),
            "warmup": int(info.warmup),
            "kernels": int(info.kernels),
            "n_patches": int(info.n_patches),
            "n_scalar_patches": int(info.n_scalar_patches),
            "fingerprint": int(info.fingerprint),
            "reason": _s(info.reason),
            "bundle_entry": int(info.bundle_entry),
        }

    def plan_choice(self):
        """Opened with a bundle: which entry applies and why, or why none
        does (kp_rt_plan_choice); "" for a plan file."""
        f = self.lib.plan_choice
        if f is None or not self.handle:
            return ""
        return _s(f(self.handle))

    def aten_groups(self):
        """The torch fusion groups of the plan applied (kp_rt_aten_groups):
        (path of their file, the plan's body-hash), the chosen entry's for a
        bundle; None when no plan applies, or the library is older."""
        f = self.lib.aten_groups
        if f is None or not self.handle:
            return None
        h = ctypes.c_uint64(0)
        p = f(self.handle, ctypes.byref(h))
        return (_s(p), int(h.value)) if p else None

    def range_push(self, bname, kind=KIND_BINDING):
        """bname: the region name as bytes (encoded once by the caller)."""
        f = self.lib.range_push
        if f is not None:
            f(self.handle, bname, kind)

    def range_pop(self):
        f = self.lib.range_pop
        if f is not None:
            f(self.handle)

    def watch_begin(self, stream, flags=KP_RT_WATCH_ALLOW_ALLOC):
        """stream: a cudaStream_t as an int. 0 watching, -1 cannot."""
        if not self.can_watch:
            return -1
        return int(self.lib.watch_begin(self.handle, ctypes.c_void_p(stream or None), flags))

    def watch_end(self):
        """(verdict, call, kernel, msg): verdict 0 capturable, 1 would break,
        -1 could not check."""
        if not self.can_watch:
            return (-1, "", "", "this libkplanrt has no kp_rt_watch_begin")
        res = kp_rt_watch_result()
        self.lib.watch_end(self.handle, ctypes.byref(res))
        return (int(res.verdict), _s(res.call), _s(res.kernel), _s(res.msg))

    def watch_release(self):
        """No other watch is coming: detach CUPTI now (kp_rt_watch_release)."""
        if self.lib.watch_release is not None and self.handle:
            self.lib.watch_release(self.handle)

    def gpatch_open(self, graph, exec_, ptr, nbytes):
        """Find the kernel-parameter words of a foreign graph pointing into
        [ptr, ptr + nbytes) (ints: cudaGraph_t, cudaGraphExec_t, address).
        (n, handle): n >= 0 words found, or n < 0 (kp_rt_gpatch_open's codes)
        with handle None."""
        if not self.can_patch or not self.handle:
            return -1, None
        h = ctypes.c_void_p()
        n = int(self.lib.gpatch_open(self.handle, ctypes.c_void_p(graph), ctypes.c_void_p(exec_),
                                     ctypes.c_void_p(ptr), nbytes, ctypes.byref(h)))
        return n, (h if n >= 0 and h.value else None)

    def gpatch_set(self, handle, ptr):
        """Point the words at ptr: 0, or < 0 on a CUDA error."""
        return self.lib.gpatch_set(handle, ptr)

    def gpatch_close(self, handle):
        if handle is not None:
            self.lib.gpatch_close(handle)

    # fused kernels of kplan.torch's ATen chains (kp_rt_kernel_*)
    def kernel_load(self, src, name):
        """Compile and load kernel `name` of CUDA source `src` (str): a
        handle (int), or raises RtError(-1, why). last_load then says
        where the CUBIN came from: "cache" or "nvrtc"."""
        lib = self.lib
        if lib.kernel_load is None or not self.handle:
            raise RtError(-1, "libkplanrt has no kp_rt_kernel_load")
        b = src.encode("utf-8")
        fn = ctypes.c_void_p()
        msg = ctypes.create_string_buffer(512)
        rc = lib.kernel_load(self.handle, b, len(b), name.encode("ascii"), ctypes.byref(fn),
                             msg, len(msg))
        if rc != 0 or not fn.value:
            raise RtError(-1, _s(msg.value) or "kp_rt_kernel_load failed")
        # where the CUBIN came from: "cache" (no NVRTC) or "nvrtc"
        self.last_load = _s(msg.value)
        return fn.value

    def kernel_launch(self, fn, grid, block, stream, ptrs):
        """Launch fn on stream (an int cudaStream_t) with one pointer
        argument per entry of ptrs (ints). 0, or the CUresult."""
        lib = self.lib
        if lib.kernel_launch is None:
            return -1
        vals = [ctypes.c_void_p(p) for p in ptrs]
        args = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.addressof(v) for v in vals])
        return lib.kernel_launch(ctypes.c_void_p(fn), grid, block, ctypes.c_void_p(stream),
                                 args)

    def kernel_launch_blob(self, fn, grid, block, stream, blob):
        """Launch fn on stream with one argument passed by value: the bytes
        blob (a struct of the kernel's layout, kplan.aten_foreach's tables).
        0, or the CUresult."""
        lib = self.lib
        if lib.kernel_launch is None:
            return -1
        buf = ctypes.create_string_buffer(bytes(blob), len(blob))
        args = (ctypes.c_void_p * 1)(ctypes.addressof(buf))
        return lib.kernel_launch(ctypes.c_void_p(fn), grid, block, ctypes.c_void_p(stream),
                                 args)

    def stats(self):
        st = kp_rt_stats()
        self.lib.get_stats(self.handle, ctypes.byref(st))
        return stats_dict(st)

    def reason_name(self, i):
        return _s(self.lib.reason_name(i))
