"""Tests of the kplan Python package (python/kplan), CPU only, no torch.

    PYTHONPATH=python python3 -m unittest discover -s tests/python -t tests/python

kplan.torch runs against faketorch (tests/python/faketorch.py: a stand-in
torch whose captured work is recorded and only runs at replay, so a wrong
static copy or a missed write-back gives wrong numbers) and FakeCRT (a
pure-Python stand-in for the C runtime). The ctypes layer is checked against
include/kplan/runtime.h: by reading the header's text, by compiling a program
that prints offsetof() of every field (when a C compiler is there), and by
driving kplan.torch through a fake libkplanrt.so compiled from
fake_kplanrt.c against the real header.
"""
import contextlib
import ctypes
import gc
import io
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import weakref
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)

import faketorch  # noqa: E402
import kplan  # noqa: E402,F401  (the package itself imports)
import kplan._rt as _rt  # noqa: E402
import kplan.torch as kt  # noqa: E402

HEADER = os.path.join(REPO, "include", "kplan", "runtime.h")
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
ENV_KEYS = ("KPLAN_RT_DISABLE", "KPLAN_RT_STRICT", "KPLAN_RT_VERIFY", "KPLAN_RT_STATS",
            "KPLAN_RT_KEY_WARMUP", "KPLAN_RT_WATCH", "KPLAN_PLAN", "KPLAN_TORCH_POLICY",
            "KPLAN_LOG", "KPLAN_RT_LIB", "KPLAN_TORCH_NVTX", "NVTX_INJECTION64_PATH",
            "KPLAN_TORCH_FUSE", "KPLAN_TORCH_FUSE_SAVE", "KPLAN_TORCH_ATEN_LOG",
            "KPLAN_TORCH_GRAPH_PATH", "KPLAN_OUT", "KPLAN_TORCH_LIB_PATH")


def plan(decision="graph", warmup=2, reason=None):
    return {"decision": decision, "warmup": warmup, "kernels": 10, "n_patches": 0,
            "n_scalar_patches": 0, "fingerprint": 0,
            "reason": reason or ("launch-bound" if decision == "graph" else "predicted-loss")}


class FakeCRT(object):
    """The methods of kplan._rt.Runtime, in Python."""

    def __init__(self, plans=None, verdict=0, can_watch=True):
        self.plans = plans or {}
        self.verdict = verdict
        self.can_watch = can_watch
        self.events = []
        self.closed = False

    def region_plan(self, name):
        return self.plans.get(name)

    def range_push(self, bname, kind=2):
        self.events.append(("push", bname.decode(), kind))

    def range_pop(self):
        self.events.append(("pop",))

    def watch_begin(self, stream, flags=0):
        self.events.append(("watch", stream, flags))
        return 0 if self.can_watch else -1

    def watch_release(self):
        self.events.append(("release",))

    def watch_end(self):
        self.events.append(("unwatch",))
        if not self.can_watch:
            return (-1, "", "", "another CUPTI client is attached")
        if self.verdict == 1:
            return (1, "cudaStreamSynchronize", "gemm",
                    "cudaStreamSynchronize on the capture stream after gemm")
        return (self.verdict, "", "", "")

    def stats(self):
        return {"calls": 0, "replays": 0, "eager_by_reason": {}}

    def close(self):
        self.closed = True

    # kp_rt_gpatch over faketorch's graphs: the sites are the ops whose
    # parameters name the tensor at ptr; set redirects the graph's reads
    can_patch = True

    def gpatch_open(self, graph, exec_, ptr, nbytes):
        g = faketorch._graphs.get(graph)
        if g is None or exec_ != graph + 8:
            return -1, None
        n = sum(1 for params in g._params for t in params if t._ptr == ptr)
        self.events.append(("gpatch_open", n))
        return n, {"g": g, "static": faketorch._live.get(ptr)}

    def gpatch_set(self, h, ptr):
        target = faketorch._live.get(ptr)
        if target is None:
            return -4
        if target is h["static"]:
            h["g"]._redirect.pop(id(target), None)
        else:
            h["g"]._redirect[id(h["static"])] = target
        self.events.append(("gpatch_set",))
        return 0

    def gpatch_close(self, h):
        if h is not None:
            self.events.append(("gpatch_close",))


class Base(unittest.TestCase):
    def setUp(self):
        self._env = mock.patch.dict(os.environ, {})
        self._env.start()
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        os.environ["KPLAN_RT_LIB"] = os.path.join(HERE, "no-such-libkplanrt.so")
        # an NVTX tool listens, as under `kplan record` (see test_ranges_*)
        os.environ["NVTX_INJECTION64_PATH"] = "/nonexistent/libtool.so"
        kt.close()
        self.T = faketorch.install()
        faketorch.reset_state()
        kt._T = None
        self.err = io.StringIO()
        self._redir = contextlib.redirect_stderr(self.err)
        self._redir.__enter__()

    def tearDown(self):
        kt.close()
        self._redir.__exit__(None, None, None)
        kt._T = None
        faketorch.uninstall()
        self._env.stop()

    def open(self, plans=None, verdict=0, plan_path="model.kplan", **kw):
        self.crt = FakeCRT(plans, verdict=verdict, can_watch=kw.pop("can_watch", True))
        return kt.open(plan_path, runtime=self.crt, **kw)

    def x(self, *v, **kw):
        return self.T.tensor(list(v), **kw)

    def logs(self, word=None):
        lines = [l for l in self.err.getvalue().splitlines() if l.startswith("kplan:")]
        return [l for l in lines if word is None or word in l]


def lib_probe(T, module):
    """A function of another module asking whether a capture is on, as
    transformers' is_tracing() does."""
    g = {"__name__": module, "T": T}
    exec("def probe():\n    return T.cuda.is_current_stream_capturing()\n", g)
    return g["probe"]


def mask_body(T, sync_on_eager):
    """A step shaped like transformers' attention: the library asks whether
    a capture is on; on its eager path it may check the mask on the host
    (item(): a sync) and drops it (x + 1), on the graph's path it keeps the
    mask (x + 1 + 0.5: other kernels, other bits). seen: what it was told."""
    lib = lib_probe(T, "transformers.modeling_utils")
    seen = []

    def body(x):
        tracing = lib()
        seen.append(tracing)
        if tracing:
            return T.add(T.add(x, 1.0), 0.5)
        if sync_on_eager:
            x.item()
        return T.add(x, 1.0)
    return body, seen


class TestGraphPath(Base):
    """Recording without a plan: region bodies take the path kplan's graph
    of them will take in the libraries that branch on
    is_current_stream_capturing(): their eager path, unless the eager call
    synchronised (then the capture takes the graph's path)."""

    def setUp(self):
        Base.setUp(self)
        os.environ["KPLAN_OUT"] = "run.db"     # as `kplan record` sets it

    def probe(self, module):
        return lib_probe(self.T, module)

    def run_step(self, sync=False, n=1, **kw):
        """(library sees, user code sees) inside the body per call, then
        outside; sync: the body's eager path synchronises, as GPT-2's mask
        check does."""
        T = self.T
        self.open(None, plan_path=None, **kw)
        lib = self.probe("transformers.utils.import_utils")
        seen = []

        @kt.region("step")
        def step(x):
            lt = lib()
            seen.append((lt, T.cuda.is_current_stream_capturing()))
            if sync and not lt:
                x.item()
            return T.add(x, 1.0)
        for _ in range(n):
            self.assertEqual(step(self.x(1.0)).tolist(), [2.0])
        return seen, (lib(), T.cuda.is_current_stream_capturing())

    def test_library_callers_see_a_capture_after_an_eager_sync(self):
        real = self.T.cuda.is_current_stream_capturing
        inside, outside = self.run_step(sync=True, n=3)
        # the first call noted the sync; the later ones take the graph's path
        self.assertEqual(inside, [(False, False), (True, False), (True, False)])
        self.assertEqual(outside, (False, False))
        self.assertIs(self.T.cuda.is_current_stream_capturing, real)
        s = kt.stats()
        self.assertEqual(s["graph_path_calls"], 2)
        self.assertEqual(s["regions"]["step"]["lib_path"], "graph")
        out = io.StringIO()
        kt.current().print_stats_to(out)
        self.assertIn("kplan-torch: graph_path_calls 2\n", out.getvalue())
        self.assertEqual(len(self.logs("graph's path")), 1)
        self.assertIn("transformers", self.logs("graph's path")[0])
        # the sync debug mode is back as it was, its warning kept from the program
        self.assertEqual(self.T.cuda.get_sync_debug_mode(), 0)

    def test_graph_lib_path_records_the_graphs_path(self):
        """lib_path "graph": the graph's path from the first call."""
        os.environ["KPLAN_TORCH_LIB_PATH"] = "graph"
        inside, _ = self.run_step(n=2)
        self.assertEqual(inside, [(True, False)] * 2)
        self.assertEqual(kt.stats()["regions"]["step"]["lib_path"], "graph")
        self.assertEqual(kt.stats()["graph_path_calls"], 2)
        lines = self.logs("graph's path")
        self.assertEqual(len(lines), 1)
        self.assertIn("transformers", lines[0])
        # a region no listed library asks in: no library path
        other = kt.region("other")(lambda x: self.T.add(x, 1.0))
        other(self.x(1.0))
        self.assertIsNone(kt.stats()["regions"]["other"]["lib_path"])

    def test_eager_path_without_a_sync(self):
        """No sync in the eager call: kplan's capture will run the library's
        eager path, so the recording does too (BERT). torch's notice when
        its sync debug mode is first turned on is no sync, and the program
        never sees it (kplan turned the mode on)."""
        import warnings
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            inside, _ = self.run_step(n=3)
        self.assertEqual([str(w.message) for w in seen if "ynchroniz" in str(w.message)], [])
        self.assertEqual(inside, [(False, False)] * 3)
        s = kt.stats()
        self.assertEqual(s["graph_path_calls"], 0)
        self.assertEqual(s["regions"]["step"]["lib_path"], "eager")
        self.assertEqual(self.logs("graph's path"), [])

    def test_a_sync_no_library_asked(self):
        T = self.T
        self.open(None, plan_path=None)

        @kt.region("step")
        def step(x):
            x.item()
            return T.add(x, 1.0)
        for _ in range(3):
            step(self.x(1.0))
        s = kt.stats()
        self.assertEqual((s["graph_path_calls"], s["regions"]["step"]["lib_path"]), (0, None))

    def test_program_sync_debug_mode_kept(self):
        import warnings
        self.T.cuda.set_sync_debug_mode(1)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            inside, _ = self.run_step(sync=True, n=2)
        self.assertEqual(inside, [(False, False), (True, False)])
        self.assertEqual(self.T.cuda.get_sync_debug_mode(), 1)
        # the program asked for the warning: it still gets it
        self.assertEqual(len([w for w in seen if "synchronizing" in str(w.message)]), 1)
        kt.close()
        self.T.cuda.set_sync_debug_mode(2)     # errors on syncs: not changed
        inside, _ = self.run_step(n=2)
        self.assertEqual(inside, [(False, False)] * 2)
        self.assertEqual(self.T.cuda.get_sync_debug_mode(), 2)

    def test_only_the_listed_libraries(self):
        self.open(None, plan_path=None, graph_path="libs")
        other = self.probe("transformers_extra.models")
        step = kt.region("step")(lambda: (other(), self.x(1.0).item()))
        for _ in range(2):
            self.assertFalse(step()[0])

    def test_off(self):
        os.environ["KPLAN_TORCH_GRAPH_PATH"] = "0"
        self.assertEqual(self.run_step(sync=True, n=2)[0], [(False, False)] * 2)
        self.assertEqual(kt.stats()["graph_path_calls"], 0)
        self.assertEqual(self.logs("graph's path"), [])

    def test_all_callers(self):
        self.assertEqual(self.run_step(graph_path="all", n=2),
                         ([(True, True)] * 2, (False, False)))

    def test_other_tools_only_when_asked(self):
        # Nsight Systems listens too, but profiles the program as it runs
        del os.environ["KPLAN_OUT"]
        self.assertEqual(self.run_step(sync=True, n=2)[0], [(False, False)] * 2)
        kt.close()
        os.environ["KPLAN_TORCH_GRAPH_PATH"] = "libs"
        self.assertEqual(self.run_step(sync=True, n=2)[0], [(False, False), (True, False)])

    def test_no_tool_no_change(self):
        del os.environ["NVTX_INJECTION64_PATH"]
        self.assertEqual(self.run_step(sync=True, n=2)[0], [(False, False)] * 2)

    def test_not_with_a_plan(self):
        # a planned program records what it runs: its eager regions' eager path
        self.assertEqual(self.run_step(sync=True, n=2, policy="eager")[0],
                         [(False, False)] * 2)

    def test_restored_after_an_exception_and_nested(self):
        T = self.T
        real = T.cuda.is_current_stream_capturing
        self.open(None, plan_path=None, graph_path="all")
        lib = self.probe("transformers.modeling_utils")
        seen = []
        inner = kt.region("inner")(lambda: seen.append(lib()))

        @kt.region("outer")
        def outer():
            inner()
            seen.append(lib())
            raise RuntimeError("body failed")
        with self.assertRaises(RuntimeError):
            outer()
        self.assertEqual(seen, [True, True])
        self.assertIs(T.cuda.is_current_stream_capturing, real)
        self.assertFalse(lib())

    def test_bad_value(self):
        with self.assertRaisesRegex(ValueError, "KPLAN_TORCH_GRAPH_PATH.*'sometimes'"):
            self.open(None, plan_path=None, graph_path="sometimes")


class TestCapturePath(Base):
    """kplan's capture runs a library's eager path (eager's kernels and
    bits) unless the watch saw what no capture holds, or that path fails in
    the capture (path-retry: the graph's path next)."""

    def steps(self, body, n=8):
        T = self.T
        step = kt.region("step")(body)
        return [step(self.x(i)).tolist() for i in range(n)]

    def test_eager_path_captured(self):
        """BERT: no sync on the eager path: the graph replays eager's result."""
        T = self.T
        real = T.cuda.is_current_stream_capturing
        self.open({"step": plan(warmup=2)})
        body, seen = mask_body(T, sync_on_eager=False)
        self.assertEqual(self.steps(body), [[i + 1.0] for i in range(8)])
        s = kt.stats()
        self.assertEqual((s["captures"], s["replays"], s["path_retries"]), (1, 6, 0))
        self.assertEqual(s["regions"]["step"]["lib_path"], "eager")
        self.assertEqual(seen, [False] * 3)     # two warm-up calls and the capture
        self.assertIs(T.cuda.is_current_stream_capturing, real)

    def test_eager_path_fails_then_graph_path(self):
        """GPT-2 unwatched: the eager path's host check fails in the capture;
        the next call captures the graph's path (not a failure, not strict)."""
        T = self.T
        self.open({"step": plan(warmup=2)}, can_watch=False, strict=True)
        body, seen = mask_body(T, sync_on_eager=True)
        out = self.steps(body)
        self.assertEqual(out[:3], [[i + 1.0] for i in range(3)])
        self.assertEqual(out[3:], [[i + 1.5] for i in range(3, 8)])
        s = kt.stats()
        self.assertEqual((s["captures"], s["replays"], s["path_retries"]), (1, 5, 1))
        self.assertEqual(s["eager_by_reason"], {"warmup": 2, "path-retry": 1})
        self.assertEqual(s["failures"], {})
        self.assertEqual(s["regions"]["step"]["lib_path"], "graph")
        self.assertEqual(seen, [False, False, False, False, True])
        self.assertEqual(len(self.logs("graph's path")), 0)    # said at -v 2

    def test_watched_sync_takes_the_graph_path_at_once(self):
        T = self.T
        self.open({"step": plan(warmup=2)}, verdict=1)
        body, seen = mask_body(T, sync_on_eager=True)
        out = self.steps(body)
        self.assertEqual(out[2:], [[i + 1.5] for i in range(2, 8)])
        s = kt.stats()
        self.assertEqual((s["captures"], s["path_retries"]), (1, 0))
        self.assertEqual(s["regions"]["step"]["lib_path"], "graph")
        self.assertEqual(seen, [False, False, True])

    def test_graph_path_fails_too(self):
        """Both paths fail: eager for good after the retry, with the reason."""
        T = self.T
        self.open({"step": plan(warmup=2)}, can_watch=False)
        lib = lib_probe(T, "transformers.modeling_utils")

        def body(x):
            lib()
            x.item()
            return T.add(x, 1.0)
        self.assertEqual(self.steps(body, 12), [[i + 1.0] for i in range(12)])
        s = kt.stats()
        self.assertEqual((s["captures"], s["path_retries"]), (0, 1))
        self.assertEqual(faketorch.captures_begun, 2)
        self.assertEqual(s["eager_by_reason"]["path-retry"], 1)

    def test_optimizer_not_capturable_is_not_retried(self):
        """AdamW(capturable=False) under a model whose library asked: its
        check fails on either path, so one capture, no path-retry."""
        T = self.T
        self.open({"step": plan(warmup=2)}, can_watch=False)
        lib = lib_probe(T, "transformers.modeling_utils")

        def body(x):
            lib()
            if T.cuda.is_current_stream_capturing():
                raise RuntimeError("Attempting CUDA graph capture of step() for an instance "
                                   "of AdamW but param_groups' capturable is False.")
            return T.add(x, 1.0)
        self.assertEqual(self.steps(body, 10), [[i + 1.0] for i in range(10)])
        s = kt.stats()
        self.assertEqual((s["captures"], s["path_retries"]), (0, 0))
        self.assertEqual(faketorch.captures_begun, 1)
        self.assertEqual(s["regions"]["step"]["state"], "capture-failed")
        self.assertIn("capturable=True", self.logs("capture-failed")[0])

    def test_failed_capture_frees_the_body_at_once(self):
        """What the body held when its capture failed (a training step's
        loss, and through it the autograd graph, whose AccumulateGrad nodes
        were made on the capture stream) is freed when the call returns,
        not at the next cyclic collection: kplan keeps no frame of it."""
        T = self.T

        class Held(object):
            pass
        held = []

        def body(x):
            loss = Held()          # noqa: F841  (a local of the failing frame)
            held.append(weakref.ref(loss))
            if T.cuda.is_current_stream_capturing():
                raise RuntimeError("Attempting CUDA graph capture of step() for an instance "
                                   "of AdamW but param_groups' capturable is False.")
            return T.add(x, 1.0)
        self.open({"step": plan(warmup=2)}, can_watch=False)
        gc.collect()
        gc.disable()
        try:
            self.assertEqual(self.steps(body, 4), [[i + 1.0] for i in range(4)])
            self.assertEqual(faketorch.captures_begun, 1)
            self.assertEqual([r() is None for r in held], [True] * len(held))
        finally:
            gc.enable()

    def test_no_library_asked_no_retry(self):
        T = self.T
        self.open({"step": plan(warmup=2)}, can_watch=False)

        def body(x):
            x.item()
            return T.add(x, 1.0)
        self.steps(body, 6)
        s = kt.stats()
        self.assertEqual((s["path_retries"], s["regions"]["step"]["lib_path"]), (0, None))
        self.assertNotIn("path-retry", s["eager_by_reason"])

    def test_lib_path_graph(self):
        """lib_path="graph": torch.cuda.graph's path, recorded so from the
        first call."""
        T = self.T
        os.environ["KPLAN_TORCH_LIB_PATH"] = "graph"
        self.assertEqual(kt.DEFAULT_LIB_PATH, "eager")
        self.assertEqual(kt._lib_path_setting(None), "graph")
        try:
            self.open({"step": plan(warmup=2)})
            body, seen = mask_body(T, sync_on_eager=False)
            self.assertEqual(self.steps(body)[2:], [[i + 1.5] for i in range(2, 8)])
            self.assertEqual(kt.stats()["regions"]["step"]["lib_path"], "graph")
            kt.close()
            os.environ["KPLAN_OUT"] = "run.db"
            self.open(None, plan_path=None)
            body, seen = mask_body(T, sync_on_eager=False)
            self.steps(body, 2)
            self.assertEqual(seen, [True, True])
            self.assertEqual(kt.stats()["graph_path_calls"], 2)
        finally:
            os.environ.pop("KPLAN_OUT", None)
        with self.assertRaisesRegex(ValueError, "KPLAN_TORCH_LIB_PATH.*'libs'"):
            self.open(None, plan_path=None, lib_path="libs")

    def test_multi_rank_keeps_the_graph_path(self):
        T = self.T
        faketorch.distributed.world = 2
        try:
            self.open({"step": plan(warmup=2)})
            body, seen = mask_body(T, sync_on_eager=False)
            n = kt.MULTI_RANK_WARMUP + 3
            out = self.steps(body, n)
        finally:
            faketorch.distributed.world = 0
        s = kt.stats()
        self.assertEqual(s["regions"]["step"]["lib_path"], "graph")
        self.assertEqual(seen[-1], True)
        self.assertEqual(out[-1], [n - 1 + 1.5])


class TestStateMachine(Base):
    def test_warmup_watch_capture_replay(self):
        T = self.T
        rt = self.open({"step": plan(warmup=3)})
        body = []

        @kt.region("step")
        def step(x, k):
            body.append(T.cuda.current_stream())
            return T.mul(x, k)

        outs = []
        for i in range(7):
            outs.append(step(self.x(i, i + 1.0), 2.0).tolist())
        self.assertEqual(outs, [[2.0 * i, 2.0 * i + 2.0] for i in range(7)])
        # body ran for 3 warm-up calls (the 3rd on the side stream) and the capture
        self.assertEqual(len(body), 4)
        self.assertIs(body[0], faketorch._default_stream)
        self.assertIs(body[1], faketorch._default_stream)
        side = body[2]
        self.assertIsNot(side, faketorch._default_stream)
        self.assertIs(body[3], side)  # captured on the same side stream
        watch = [e for e in self.crt.events if e[0] == "watch"]
        self.assertEqual(watch, [("watch", side.cuda_stream, _rt.KP_RT_WATCH_ALLOW_ALLOC)])
        self.assertEqual(faketorch.captures_begun, 1)
        s = kt.stats()
        self.assertEqual((s["calls"], s["eager"], s["captures"], s["replays"]), (7, 3, 1, 4))
        self.assertEqual(s["eager_by_reason"], {"warmup": 3})
        self.assertEqual(s["watched"], 1)
        self.assertEqual(s["graphs"], 1)
        self.assertEqual(s["regions"]["step"]["replays"], 4)
        # every call an NVTX range of kind 2 named after the region
        pushes = [e for e in self.crt.events if e[0] == "push"]
        self.assertEqual(pushes, [("push", "step", 2)] * 7)
        self.assertEqual(len([e for e in self.crt.events if e[0] == "pop"]), 7)
        self.assertIs(T.cuda.current_stream(), faketorch._default_stream)
        self.assertIs(rt, kt.current())

    def test_cupti_released_once_no_other_watch_is_coming(self):
        T = self.T
        self.open({"a": plan(warmup=2), "b": plan(warmup=2)})
        a = kt.region("a")(lambda x: T.add(x, 1.0))
        b = kt.region("b")(lambda x: T.add(x, 2.0))
        for i in range(4):
            self.assertEqual(a(self.x(i)).tolist(), [i + 1.0])
            self.assertEqual(b(self.x(i)).tolist(), [i + 2.0])
        ev = [e[0] for e in self.crt.events if e[0] in ("watch", "unwatch", "release")]
        # a's watch: b has warmed up once and waits for its own, so CUPTI
        # stays attached; after b's, nothing is coming: released
        self.assertEqual(ev, ["watch", "unwatch", "watch", "unwatch", "release"])
        self.assertEqual(kt.stats()["captures"], 2)

    def _pushes_in_seven_calls(self):
        T = self.T
        self.open({"step": plan(warmup=3)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for i in range(7):
            self.assertEqual(step(self.x(i, i + 1.0)).tolist(), [i + 1.0, i + 2.0])
        pushes = len([e for e in self.crt.events if e[0] == "push"])
        self.assertEqual(pushes, len([e for e in self.crt.events if e[0] == "pop"]))
        self.assertEqual(kt.stats()["replays"], 4)
        return pushes

    def test_steady_replay_calls_the_c_replay(self):
        # the inline replay path calls torch._C._CUDAGraph.replay directly,
        # not CUDAGraph.replay (a Python wrapper); the first replay after
        # the capture goes through the general path
        self.assertEqual(self._pushes_in_seven_calls(), 7)
        (st,) = kt.current().states.values()
        (e,) = st.entries.values()
        self.assertEqual(e.graph.replays, 4)
        self.assertEqual(e.graph.wrapper_replays, 1)
        self.assertIs(e.rp, faketorch._CUDAGraphBase.replay)

    # -- pointer patching (patch_inputs=True) ------------------------------
    def _patched(self, body, n=8, **kw):
        T = self.T
        self.open({"step": plan(warmup=2)})
        step = kt.region("step", patch_inputs=True, **kw)(body)
        outs = []
        for i in range(n):
            outs.append(step(self.x(i, i + 1.0)).tolist())
        (st,) = kt.current().states.values()
        (e,) = st.entries.values()
        return outs, e

    def test_patch_inputs_points_the_graph_at_each_argument(self):
        T = self.T
        outs, e = self._patched(lambda x: T.add(T.mul(x, 2.0), x))
        self.assertEqual(outs, [[3.0 * i, 3.0 * i + 3.0] for i in range(8)])
        self.assertIsNotNone(e.patch)
        self.assertEqual(kt.stats()["patched_inputs"], 1)
        ev = [x[0] for x in self.crt.events]
        self.assertEqual(ev.count("gpatch_open"), 1)
        # one set per call after the capture (each argument is a new tensor),
        # and the check's two
        self.assertEqual(ev.count("gpatch_set"), (8 - 2) + 2)
        # the static input still holds what it was captured with: no copies
        self.assertEqual(e.static_in[0].tolist(), [2.0, 3.0])
        self.assertEqual(ev.count("gpatch_close"), 0)
        kt.close()      # drops the graph: its handle is closed
        self.assertEqual([x for x in self.crt.events if x[0] == "gpatch_close"],
                         [("gpatch_close",)])

    def test_patch_inputs_same_tensor_sets_once(self):
        T = self.T
        self.open({"step": plan(warmup=2)})
        step = kt.region("step", patch_inputs=True)(lambda x: T.mul(x, 2.0))
        x = self.x(1.0, 2.0)
        for _ in range(6):
            self.assertEqual(step(x).tolist(), [2.0, 4.0])
        sets = [e for e in self.crt.events if e[0] == "gpatch_set"]
        self.assertEqual(len(sets), 2 + 1)

    def test_patch_inputs_hidden_read_falls_back_to_copying(self):
        # a kernel that finds its input through device memory: the check sees
        # the patched replay differ, the inputs are copied, results stay right
        T = self.T
        outs, e = self._patched(lambda x: faketorch.scaled_hidden(x, 3.0))
        self.assertEqual(outs, [[3.0 * i, 3.0 * i + 3.0] for i in range(8)])
        self.assertIsNone(e.patch)
        self.assertEqual(kt.stats()["failures"].get("patch-off"), 1)
        self.assertEqual(len(self.logs("inputs copied, not patched")), 1)
        self.assertEqual([x for x in self.crt.events if x[0] == "gpatch_close"],
                         [("gpatch_close",)])

    def test_patch_inputs_written_input_is_copied(self):
        T = self.T

        def body(x):
            x.add_(1.0)
            return T.mul(x, 2.0)
        self.open({"step": plan(warmup=2)})
        step = kt.region("step", patch_inputs=True)(body)
        for i in range(6):
            x = self.x(i)
            self.assertEqual(step(x).tolist(), [2.0 * (i + 1)])
            self.assertEqual(x.tolist(), [i + 1.0])
        (st,) = kt.current().states.values()
        (e,) = st.entries.values()
        self.assertIsNone(e.patch)
        self.assertEqual([x for x in self.crt.events if x[0] == "gpatch_open"], [])

    def test_patch_inputs_without_support_copies(self):
        T = self.T
        FakeCRT.can_patch = False
        try:
            outs, e = self._patched(lambda x: T.mul(x, 2.0))
        finally:
            FakeCRT.can_patch = True
        self.assertEqual(outs, [[2.0 * i, 2.0 * i + 2.0] for i in range(8)])
        self.assertIsNone(e.patch)
        self.assertEqual(kt.stats()["patched_inputs"], 0)

    def test_ranges_only_when_a_tool_listens(self):
        # no NVTX tool: the first call (before CUDA is known to be up) has
        # its range, the others none
        del os.environ["NVTX_INJECTION64_PATH"]
        self.assertEqual(self._pushes_in_seven_calls(), 1)

    def test_ranges_forced_either_way(self):
        del os.environ["NVTX_INJECTION64_PATH"]
        os.environ["KPLAN_TORCH_NVTX"] = "1"
        self.assertEqual(self._pushes_in_seven_calls(), 7)

    def test_ranges_forced_off(self):
        os.environ["KPLAN_TORCH_NVTX"] = "0"
        self.assertEqual(self._pushes_in_seven_calls(), 1)

    def _eager_for_good(self, n, sync=False, **open_kw):
        """n calls of a region that is eager for good (its body synchronises
        with sync); (results, pushes, stats)."""
        T = self.T
        body_calls = [0]

        def body(x):
            body_calls[0] += 1
            y = T.add(x, 1.0)
            if sync:
                faketorch.synchronize()
            return y
        self.open(**open_kw)
        step = kt.region("step")(body)
        outs = [step(self.x(i)).tolist() for i in range(n)]
        # a failed capture runs the body once more
        self.assertEqual(body_calls[0], n + faketorch.captures_begun)
        pushes = len([e for e in self.crt.events if e[0] == "push"])
        self.assertEqual(pushes, len([e for e in self.crt.events if e[0] == "pop"]))
        return outs, pushes, kt.stats()

    def test_forced_eager_calls_the_body_straight(self):
        """policy "eager" without a tool: after the first call, a call is the
        body and a counter (Runtime.fast), and every call is still counted."""
        del os.environ["NVTX_INJECTION64_PATH"]
        outs, pushes, s = self._eager_for_good(7, plans={"step": plan()}, policy="eager")
        self.assertEqual(outs, [[i + 1.0] for i in range(7)])
        self.assertEqual(pushes, 1)     # the first call, before CUDA was known to be up
        self.assertEqual(len(kt.current().fast), 1)
        self.assertEqual((s["calls"], s["eager"], s["replays"]), (7, 7, 0))
        self.assertEqual(s["eager_by_reason"], {"planned-eager": 7})
        self.assertEqual((s["regions"]["step"]["calls"], s["regions"]["step"]["eager"]), (7, 7))
        self.assertEqual(s["regions"]["step"]["state"], "planned-eager")
        # stats() twice counts nothing twice; reset() keeps the counts
        self.assertEqual(kt.stats()["calls"], 7)
        kt.reset()
        self.assertEqual(kt.current().fast, {})
        step = kt.region("step")(lambda x: self.T.add(x, 1.0))
        step(self.x(1)), step(self.x(2))
        s = kt.stats()
        self.assertEqual((s["calls"], s["eager"]), (9, 9))
        self.assertEqual(s["eager_by_reason"], {"planned-eager": 9})

    def test_planned_eager_region_calls_the_body_straight(self):
        """A region the plan leaves eager: no range and no check per call
        (a plan that decided eager must cost nothing)."""
        del os.environ["NVTX_INJECTION64_PATH"]
        outs, pushes, s = self._eager_for_good(6, plans={"step": plan("eager")})
        self.assertEqual(outs, [[i + 1.0] for i in range(6)])
        self.assertEqual(pushes, 1)
        self.assertEqual(s["eager_by_reason"], {"planned-eager": 6})
        self.assertEqual(s["regions"]["step"]["eager"], 6)

    def test_eager_for_good_keeps_ranges_while_a_tool_listens(self):
        outs, pushes, s = self._eager_for_good(6, plans={"step": plan("eager")})
        self.assertEqual(outs, [[i + 1.0] for i in range(6)])
        self.assertEqual(pushes, 6)
        self.assertEqual(kt.current().fast, {})
        self.assertEqual(s["eager_by_reason"], {"planned-eager": 6})

    def test_region_off_calls_the_body_straight(self):
        """A region the watch turned eager for good takes the fast path
        after it, and its calls add up."""
        del os.environ["NVTX_INJECTION64_PATH"]
        outs, pushes, s = self._eager_for_good(9, sync=True, plans={"step": plan(warmup=2)},
                                               verdict=1)
        self.assertEqual(outs, [[i + 1.0] for i in range(9)])
        self.assertEqual(s["regions"]["step"]["state"], "would-break-capture")
        self.assertEqual(len(kt.current().fast), 1)
        self.assertEqual((s["calls"], s["eager"], s["captures"]), (9, 9, 0))
        self.assertEqual(sum(s["eager_by_reason"].values()), 9)
        self.assertEqual(s["eager_by_reason"], {"warmup": 2, "would-break-capture": 7})

    def test_fast_path_under_threads(self):
        """Regions entering the fast path on one thread while another reads
        stats(): no error, and no call counted twice."""
        del os.environ["NVTX_INJECTION64_PATH"]
        T = self.T
        self.open({}, policy="eager")
        errors = []
        done = threading.Event()

        def worker():
            try:
                for i in range(300):
                    r = kt.region("r%d" % i)(lambda x: T.add(x, 1.0))
                    for _ in range(3):
                        r(self.x(1))
            except Exception as exc:       # pragma: no cover - the failure
                errors.append(exc)
            finally:
                done.set()
        th = threading.Thread(target=worker)
        th.start()
        while not done.is_set():
            try:
                kt.stats()
            except Exception as exc:       # pragma: no cover - the failure
                errors.append(exc)
                break
        th.join()
        self.assertEqual(errors, [])
        s = kt.stats()
        self.assertEqual(s["calls"], 900)
        self.assertEqual(s["eager_by_reason"], {"planned-eager": 900})
        self.assertEqual(len(s["regions"]), 300)

    def test_strict_region_off_raises_every_call(self):
        """strict mode raises for a region eager for good on every call: no
        fast path around it."""
        del os.environ["NVTX_INJECTION64_PATH"]
        T = self.T

        def body(x):
            y = T.add(x, 1.0)
            faketorch.synchronize()
            return y
        self.open({"step": plan(warmup=2)}, verdict=1, strict=True)
        step = kt.region("step")(body)
        raised = 0
        for i in range(6):
            try:
                step(self.x(i))
            except kt.KplanError:
                raised += 1
        self.assertEqual(kt.current().fast, {})
        self.assertGreaterEqual(raised, 4)

    def test_warmup_zero_still_watches_once(self):
        T = self.T
        self.open({"step": plan(warmup=0)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for i in range(3):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        s = kt.stats()
        self.assertEqual((s["eager"], s["captures"], s["replays"]), (1, 1, 2))

    def test_warmup_option_overrides_plan(self):
        T = self.T
        self.open({"step": plan(warmup=5)}, warmup=1)
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for i in range(3):
            step(self.x(i))
        self.assertEqual(kt.stats()["captures"], 1)

    def test_scalar_values_are_keys_never_baked(self):
        T = self.T
        self.open({"step": plan(warmup=3)})
        n = [0]

        @kt.region("step")
        def step(x, k, flag=False):
            n[0] += 1
            y = T.mul(x, k)
            return T.add(y, 100.0) if flag else y

        for _ in range(5):
            self.assertEqual(step(self.x(1, 2), 2.0).tolist(), [2.0, 4.0])
        self.assertEqual(step(self.x(1, 2), 3.0).tolist(), [3.0, 6.0])
        self.assertEqual(step(self.x(1, 2), 3).tolist(), [3.0, 6.0])      # int 3 is another key
        self.assertEqual(step(self.x(1, 2), 3, flag=True).tolist(), [103.0, 106.0])
        self.assertEqual(step(self.x(1, 2), 2.0).tolist(), [2.0, 4.0])   # back: replay
        s = kt.stats()
        self.assertEqual(s["captures"], 4)
        self.assertEqual(s["regions"]["step"]["keys"], 4)
        # a new key of a region that already captured captures on its first call
        self.assertEqual(s["eager"], 3)
        self.assertEqual(n[0], 3 + 4)

    def test_key_parts(self):
        kt._torch()

        def key(*args):
            parts, tensors, pins = [], [], []
            kt._walk(args, parts, tensors, pins)
            return tuple(parts), tensors, pins
        self.assertNotEqual(key(0.0)[0], key(-0.0)[0])
        self.assertNotEqual(key(1)[0], key(True)[0])
        self.assertNotEqual(key(1)[0], key(1.0)[0])
        self.assertEqual(key(float("nan"))[0], key(float("nan"))[0])
        self.assertEqual(key("a", None, (1, 2))[0], key("a", None, (1, 2))[0])
        self.assertNotEqual(key((1, 2))[0], key([1, 2])[0])
        a, b = self.x(1, 2), self.x(3, 4)
        self.assertEqual(key(a)[0], key(b)[0])                 # values do not matter
        self.assertNotEqual(key(a)[0], key(self.x(1, 2, 3))[0])  # shapes do
        self.assertNotEqual(key(a)[0], key(self.x(1, 2, dtype=faketorch.float16))[0])
        self.assertNotEqual(key(a)[0], key(self.x(1, 2, requires_grad=True))[0])
        self.assertNotEqual(key(a)[0], key(self.x(1, 2, device="cuda:1"))[0])
        parts, tensors, pins = key({"x": a, "n": 3}, [b])
        self.assertEqual([id(t) for t in tensors], [id(a), id(b)])
        obj = object()
        parts, tensors, pins = key(obj)
        self.assertEqual(pins, [obj])                          # identity keys keep it alive
        self.assertNotEqual(key(object())[0], parts)

    def test_key_callable_and_method(self):
        T = self.T
        self.open({"m": plan(warmup=1)})
        mode = ["a"]

        class M(object):
            def __init__(self, w):
                self.w = w

            @kt.region("m", key=lambda self, x: mode[0])
            def f(self, x):
                return T.add(x, 10.0) if mode[0] == "b" else T.mul(x, self.w)

        m2, m3 = M(2.0), M(3.0)
        for _ in range(3):
            self.assertEqual(m2.f(self.x(1)).tolist(), [2.0])
            self.assertEqual(m3.f(self.x(1)).tolist(), [3.0])
        mode[0] = "b"
        self.assertEqual(m2.f(self.x(1)).tolist(), [11.0])
        self.assertEqual(kt.stats()["regions"]["m"]["keys"], 3)

    def test_would_break_capture_is_eager_for_good(self):
        """The watch saw a sync and the capture fails on it: eager for good,
        one log line naming the call."""
        T = self.T

        def body(x):
            y = T.add(x, 1.0)
            faketorch.synchronize()
            return y

        self.open({"step": plan(warmup=2)}, verdict=1)
        step = kt.region("step")(body)
        for i in range(10):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        self.assertEqual(faketorch.captures_begun, 1)
        s = kt.stats()
        self.assertEqual(s["captures"], 0)
        self.assertEqual(s["eager_by_reason"], {"warmup": 2, "would-break-capture": 8})
        self.assertEqual(s["failures"], {"would-break-capture": 1})
        self.assertEqual(s["regions"]["step"]["state"], "would-break-capture")
        lines = self.logs("would-break-capture")
        self.assertEqual(len(lines), 1)
        self.assertIn("cudaStreamSynchronize", lines[0])

    def test_would_break_but_capture_holds(self):
        """The eager call synced but the captured one does not (a library
        that checks is_current_stream_capturing): graphed."""
        T = self.T
        self.open({"step": plan(warmup=2)}, verdict=1)
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for i in range(10):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        s = kt.stats()
        self.assertEqual((s["captures"], s["replays"], s["watched"]), (1, 8, 1))
        self.assertEqual(s["failures"], {})

    def test_doubted_capture_is_tried_without_fusion_first(self):
        """The watch objected: the capture is tried without the fusion mode
        (whose first use imports torch._dynamo); when it holds, the next call
        captures again with fusion, and a region whose capture fails never
        enters the mode."""
        T = self.T
        rt = self.open({"step": plan(warmup=2)}, verdict=1, fuse="exact")
        entered = []

        class Fuser(object):
            n_fused = 1

        @contextlib.contextmanager
        def mode():
            entered.append(1)
            yield
        rt._fuse_mode = lambda st: (mode(), Fuser())
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for i in range(3):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        self.assertEqual((kt.stats()["captures"], len(entered)), (1, 0))   # unfused
        for i in range(3, 10):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        s = kt.stats()
        self.assertEqual((s["captures"], s["graphs"], len(entered)), (2, 1, 1))
        self.assertEqual(s["replays"], 8)
        self.assertEqual(s["failures"], {})

        def body(x):
            y = T.add(x, 1.0)
            faketorch.synchronize()
            return y
        entered[:] = []
        rt = self.open({"sync": plan(warmup=2)}, verdict=1, fuse="exact")
        rt._fuse_mode = lambda st: (mode(), Fuser())
        sync = kt.region("sync")(body)
        for i in range(5):
            self.assertEqual(sync(self.x(i)).tolist(), [i + 1.0])
        self.assertEqual(kt.stats()["regions"]["sync"]["state"], "would-break-capture")
        self.assertEqual(entered, [])

    def test_could_not_check_logs_once_and_captures(self):
        T = self.T
        self.open({"a": plan(warmup=1), "b": plan(warmup=1)}, can_watch=False)
        a = kt.region("a")(lambda x: T.add(x, 1.0))
        b = kt.region("b")(lambda x: T.add(x, 2.0))
        for i in range(3):
            self.assertEqual(a(self.x(i)).tolist(), [i + 1.0])
            self.assertEqual(b(self.x(i)).tolist(), [i + 2.0])
        s = kt.stats()
        self.assertEqual((s["captures"], s["unwatched"], s["watched"]), (2, 2, 0))
        self.assertEqual(len(self.logs("could not check")), 1)

    def test_capture_exception_backs_off_then_gives_up(self):
        T = self.T
        self.open({"step": plan(warmup=2)})

        streams = []

        @kt.region("step")
        def step(x):
            streams.append(T.cuda.current_stream())
            y = T.add(x, 1.0)
            if T.cuda.is_current_stream_capturing():
                # a failure the binding cannot tell permanent: retried
                raise RuntimeError("CUDA error: operation not supported (lazy set-up)")
            return y

        results = []
        for i in range(60):
            results.append(step(self.x(i)).tolist())
            self.assertIs(T.cuda.current_stream(), faketorch._default_stream)
        self.assertEqual(results, [[i + 1.0] for i in range(60)])
        s = kt.stats()
        # calls 1-2 warm-up, 3 capture fails (retry at 3+16), 4-18 backoff,
        # 19 warm-up on the capture stream, 20 fails (retry at 20+32), 21-51
        # backoff, 52 warm-up, 53 fails: the region never captured, eager for
        # good (every key), 54-60 capture-failed
        self.assertEqual(s["failures"], {"capture-failed": 3})
        self.assertEqual(s["eager_by_reason"], {"warmup": 4, "capture-failed": 3 + 7,
                                                "backoff": 15 + 31})
        self.assertEqual(s["captures"], 0)
        self.assertEqual(faketorch.captures_begun, 3)
        # each retry warms up and captures on a new side stream (a failed
        # capture can leave its stream routed to the dead graph's pool)
        side = [s for s in streams if s is not faketorch._default_stream]
        self.assertEqual(len(side), 6)
        self.assertEqual(len(set(map(id, side))), 3)
        self.assertIs(side[0], side[1])
        lines = self.logs("capture-failed")
        self.assertEqual(len(lines), 2)   # once per reason, and eager for good
        self.assertIn("eager for good", lines[-1])
        self.assertIn("3 failed captures", lines[-1])
        self.assertIn("operation", lines[0])

    def test_permanent_capture_failure_decided_once_with_the_fix(self):
        T = self.T
        self.open({"step": plan(warmup=2)}, can_watch=False)

        @kt.region("step")
        def step(x, n):
            y = T.add(x, float(n))
            y.item()   # a sync: fine eagerly, breaks every capture
            return y

        for i in range(40):
            # from call 20 on, a new shape key each call (n is part of the
            # key): the decision holds for the region, not the key
            n = 1 if i < 20 else i
            self.assertEqual(step(self.x(i), n).tolist(), [i + float(n)])
        s = kt.stats()
        self.assertEqual(faketorch.captures_begun, 1)
        self.assertEqual(s["failures"], {"capture-failed": 1})
        self.assertEqual(s["captures"], 0)
        lines = self.logs("capture-failed")
        self.assertEqual(len(lines), 1)
        self.assertIn("eager for good", lines[0])
        self.assertIn("fix: the body synchronizes with the host", lines[0])

    def test_optimizer_not_capturable_names_the_fix(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, can_watch=False)

        @kt.region("step")
        def step(x):
            if T.cuda.is_current_stream_capturing():
                raise RuntimeError("Attempting CUDA graph capture of step() for an instance "
                                   "of AdamW but param_groups' capturable is False.")
            return T.add(x, 1.0)

        for i in range(30):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        self.assertEqual(faketorch.captures_begun, 1)
        lines = self.logs("capture-failed")
        self.assertEqual(len(lines), 1)
        self.assertIn("capturable=True", lines[0])

    def test_several_ranks_take_the_watch_at_its_word(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, verdict=1, warmup=1)
        T.distributed.world, T.distributed.peers, T.distributed.reduces = 2, (1,), 0

        @kt.region("step")
        def step(x):
            y = T.add(x, 1.0)
            y.item()
            return y

        try:
            for i in range(10):
                self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        finally:
            T.distributed.world, T.distributed.peers = 0, ()
        self.assertEqual(faketorch.captures_begun, 0)
        self.assertEqual(T.distributed.reduces, 1)   # the verdicts, once
        s = kt.stats()
        self.assertEqual(s["failures"], {"would-break-capture": 1})
        self.assertIn("several ranks", self.logs("would-break-capture")[0])

    def _two_ranks(self, peer_ok):
        """Ten calls of a region on this rank (whose watch is clean) in a job
        of two ranks, the other rank's watch `peer_ok`."""
        T = self.T
        faketorch.captures_begun = 0
        self.open({"step": plan(warmup=1)}, verdict=0, warmup=1)
        T.distributed.world, T.distributed.peers, T.distributed.reduces = 2, (peer_ok,), 0
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        try:
            for i in range(10):
                self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        finally:
            T.distributed.world, T.distributed.peers = 0, ()

    def test_a_rank_whose_peer_objects_stays_eager_too(self):
        self._two_ranks(peer_ok=0)
        self.assertEqual(self.T.distributed.reduces, 1)   # the watch's agreement only
        self.assertEqual(faketorch.captures_begun, 0)
        self.assertIn("another rank's watch objected", self.logs("would-break-capture")[0])
        # all ranks clean: captured and replayed
        self._two_ranks(peer_ok=1)
        self.assertEqual(self.T.distributed.reduces, 2)   # the watch's, the capture's
        self.assertEqual(faketorch.captures_begun, 1)
        self.assertEqual(kt.stats()["replays"], 9)   # call 1 watched, 2 captured

    def test_several_ranks_warm_up_past_ddp_timing_iterations(self):
        # the plan says 1 warm-up call; in a job of several ranks the watched
        # call is the 12th (DDP syncs in its first 10 iterations)
        T = self.T
        self.open({"step": plan(warmup=1)}, verdict=0)
        T.distributed.world, T.distributed.peers, T.distributed.reduces = 2, (1,), 0
        seen = []

        @kt.region("step")
        def step(x):
            seen.append(T.cuda.is_current_stream_capturing())
            return T.add(x, 1.0)
        try:
            for i in range(20):
                self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        finally:
            T.distributed.world, T.distributed.peers = 0, ()
        self.assertEqual(seen.index(True), kt.MULTI_RANK_WARMUP)   # 11 eager, then capture
        self.assertEqual(kt.stats()["replays"], 20 - kt.MULTI_RANK_WARMUP)
        self.assertEqual(sum(1 for ev in self.crt.events if ev[0] == "watch"), 1)

    def test_a_later_key_captures_without_asking_the_other_ranks(self):
        # a shape only this rank meets: no all-reduce the others would not make
        T = self.T
        faketorch.captures_begun = 0
        self.open({"step": plan(warmup=1)}, verdict=0, warmup=1)
        T.distributed.world, T.distributed.peers, T.distributed.reduces = 2, (1,), 0
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        try:
            for i in range(4):
                self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
            self.assertEqual(T.distributed.reduces, 2)   # the watch's, the capture's
            for i in range(3):
                self.assertEqual(step(self.x(i, 2.0)).tolist(), [i + 1.0, 3.0])
        finally:
            T.distributed.world, T.distributed.peers = 0, ()
        self.assertEqual(faketorch.captures_begun, 2)
        self.assertEqual(T.distributed.reduces, 2)       # none for the second key
        self.assertEqual(kt.stats()["replays"], 3 + 3)

    def test_a_rank_whose_peer_capture_fails_drops_its_graph(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, verdict=0, warmup=1)
        # the watch: every rank clean; the capture: the other rank failed
        T.distributed.world, T.distributed.reduces = 2, 0
        T.distributed.seq = [(1,), (0,)]
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        try:
            for i in range(10):
                self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        finally:
            T.distributed.world, T.distributed.peers, T.distributed.seq = 0, (), []
        s = kt.stats()
        self.assertEqual(faketorch.captures_begun, 1)   # its own capture worked
        self.assertEqual(s["replays"], 0)               # but it never replays
        self.assertEqual(s["failures"], {"capture-failed": 1})
        self.assertEqual(self.T.distributed.reduces, 2)
        self.assertIn("another rank's capture failed", self.logs("capture-failed")[0])

    def test_several_ranks_never_retry_a_failed_capture_alone(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, verdict=0, warmup=1)
        T.distributed.world, T.distributed.peers, T.distributed.reduces = 2, (1,), 0

        @kt.region("step")
        def step(x):
            if T.cuda.is_current_stream_capturing():
                raise RuntimeError("operation would make the legacy stream depend on a "
                                   "capturing blocking stream")
            return T.add(x, 1.0)
        try:
            for i in range(30):
                self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        finally:
            T.distributed.world, T.distributed.peers = 0, ()
        self.assertEqual(faketorch.captures_begun, 1)   # no retry after backoff
        lines = self.logs("capture-failed")
        self.assertEqual(len(lines), 1)
        self.assertIn("DistributedDataParallel", lines[0])
        self.assertIn("side stream", lines[0])

    def test_user_exception_during_capture_does_not_escape(self):
        T = self.T
        self.open({"step": plan(warmup=1)})

        @kt.region("step")
        def step(x):
            if T.cuda.is_current_stream_capturing():
                raise ValueError("something only a capture trips on")
            return T.add(x, 1.0)

        for i in range(4):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        self.assertEqual(kt.stats()["failures"], {"capture-failed": 1})

    def test_body_exception_reaches_caller_eagerly(self):
        T = self.T
        self.open({"step": plan(warmup=1)})

        @kt.region("step")
        def step(x):
            raise KeyError("user bug")

        with self.assertRaises(KeyError):
            step(self.x(1))
        with self.assertRaises(KeyError):   # capture fails, eager re-run raises it
            step(self.x(1))
        self.assertIs(T.cuda.current_stream(), faketorch._default_stream)

    def test_verify_pass_and_mismatch(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, verify=3)
        scale = [2.0]
        step = kt.region("step")(lambda x: T.mul(x, scale[0]))  # scale read at capture
        self.assertEqual(step(self.x(1)).tolist(), [2.0])   # warm-up
        self.assertEqual(step(self.x(2)).tolist(), [4.0])   # capture, verified
        self.assertEqual(step(self.x(3)).tolist(), [6.0])   # verified
        s = kt.stats()
        self.assertEqual((s["verified"], s["replays"]), (2, 2))
        scale[0] = 3.0   # the graph has 2.0 baked in
        self.assertEqual(step(self.x(4)).tolist(), [12.0])  # mismatch: the eager result
        self.assertEqual(step(self.x(5)).tolist(), [15.0])
        s = kt.stats()
        self.assertEqual(s["failures"], {"verify-mismatch": 1})
        self.assertEqual(s["eager_by_reason"]["verify-mismatch"], 2)
        self.assertEqual(s["graphs"], 0)
        self.assertEqual(len(self.logs("verify-mismatch")), 1)

    def test_verify_env_and_written_arguments(self):
        T = self.T
        os.environ["KPLAN_RT_VERIFY"] = "5"
        self.open({"step": plan(warmup=1)})

        @kt.region("step")
        def step(x):
            x.add_(1.0)
            return T.mul(x, 2.0)

        for i in range(4):
            x = self.x(i)
            self.assertEqual(step(x).tolist(), [(i + 1.0) * 2])
            self.assertEqual(x.tolist(), [i + 1.0])   # written once, not twice
        self.assertEqual(kt.stats()["verified"], 3)

    def test_written_arguments_are_copied_back(self):
        T = self.T
        self.open({"step": plan(warmup=1)})

        @kt.region("step")
        def step(cache, x):
            cache.add_(1.0)
            return T.add(cache, x)

        cache = self.x(0, 0)
        for i in range(5):
            self.assertEqual(step(cache, self.x(i, i)).tolist(), [i + 1.0 + i] * 2)
            self.assertEqual(cache.tolist(), [i + 1.0] * 2)
        self.assertEqual(kt.stats()["replays"], 4)

    def test_aliased_arguments_written_run_eagerly(self):
        T = self.T
        self.open({"step": plan(warmup=1)})

        @kt.region("step")
        def step(a, b):
            a.add_(1.0)
            return T.add(b, 0.0)

        for _ in range(3):
            step(self.x(1), self.x(1))
        a = self.x(5)
        self.assertEqual(step(a, a.view()).tolist(), [6.0])   # b sees a's update
        self.assertEqual(kt.stats()["eager_by_reason"].get("aliased-inputs"), 1)

    def test_static_outputs_alias_and_clones_do_not(self):
        T = self.T
        self.open({"a": plan(warmup=1), "b": plan(warmup=1)})
        a = kt.region("a", static_outputs=True)(lambda x: T.add(x, 1.0))
        b = kt.region("b")(lambda x: T.add(x, 1.0))
        ra = [a(self.x(i)) for i in range(4)]
        rb = [b(self.x(i)) for i in range(4)]
        self.assertIs(ra[2], ra[3])             # the graph's own output tensor
        self.assertEqual(ra[3].tolist(), [4.0])  # ... overwritten by the last replay
        self.assertIsNot(rb[2], rb[3])
        self.assertEqual([t.tolist() for t in rb], [[1.0], [2.0], [3.0], [4.0]])

    def test_output_structures(self):
        T = self.T
        import collections
        P = collections.namedtuple("P", "lo hi")
        self.open({"step": plan(warmup=1)})

        @kt.region("step")
        def step(x):
            return {"p": P(T.add(x, -1.0), T.add(x, 1.0)), "none": None,
                    "l": [T.mul(x, 2.0)]}

        for i in range(3):
            out = step(self.x(i))
            self.assertEqual(sorted(out), ["l", "none", "p"])
            self.assertIsInstance(out["p"], P)
            self.assertEqual((out["p"].lo.tolist(), out["p"].hi.tolist(), out["l"][0].tolist()),
                             ([i - 1.0], [i + 1.0], [2.0 * i]))
            self.assertIsNone(out["none"])
        self.assertEqual(kt.stats()["replays"], 2)

    def test_non_tensor_output(self):
        T = self.T
        self.open({"step": plan(warmup=1)})
        step = kt.region("step")(lambda x: (T.add(x, 1.0), 3))
        for i in range(3):
            y, n = step(self.x(i))
            self.assertEqual((y.tolist(), n), ([i + 1.0], 3))
        s = kt.stats()
        self.assertEqual(s["captures"], 0)
        self.assertEqual(s["regions"]["step"]["state"], "non-tensor-output")

    def test_requires_grad(self):
        T = self.T
        self.open({"step": plan(warmup=1), "w": plan(warmup=1), "w2": plan(warmup=1)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        xg = self.x(1, requires_grad=True)
        step(xg)
        self.assertEqual(kt.stats()["eager_by_reason"], {"requires-grad": 1})
        with T.no_grad():   # inference: fine
            for _ in range(3):
                self.assertEqual(step(xg).tolist(), [2.0])
        self.assertEqual(kt.stats()["replays"], 2)
        # an output that needs grad (a parameter inside): the region stays eager
        w = self.x(2, requires_grad=True)
        wr = kt.region("w")(lambda x: T.mul(x, w))
        for _ in range(3):
            self.assertTrue(wr(self.x(3)).requires_grad)
        self.assertEqual(kt.stats()["regions"]["w"]["state"], "requires-grad")
        # the autograd mode is part of the key: a graph captured under no_grad
        # is not replayed for a call that needs grad
        w2 = kt.region("w2")(lambda x: T.mul(x, w))
        with T.no_grad():
            for _ in range(3):
                self.assertFalse(w2(self.x(3)).requires_grad)
        self.assertTrue(w2(self.x(3)).requires_grad)
        self.assertEqual(kt.stats()["regions"]["w2"]["state"], "requires-grad")

    def test_cpu_and_other_device_tensors(self):
        T = self.T
        self.open({"step": plan(warmup=1)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        step(self.x(1, device="cpu"))
        step(self.x(1, device="cuda:1"))
        self.assertEqual(kt.stats()["eager_by_reason"], {"cpu-tensor": 1, "multi-device": 1})

    def test_key_thrash(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, max_keys=2)
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for n in (1, 1, 2, 3, 4, 5, 6):
            self.assertEqual(step(self.x(*range(n))).tolist(), [v + 1.0 for v in range(n)])
        s = kt.stats()
        self.assertEqual((s["evictions"], s["failures"].get("key-thrash")), (4, 1))
        self.assertEqual(s["regions"]["step"]["keys"], 2)
        self.assertEqual(step(self.x(1, 2, 3, 4, 5, 6, 7)).tolist(), [2.0, 3, 4, 5, 6, 7, 8])
        self.assertEqual(kt.stats()["eager_by_reason"].get("key-thrash"), 1)
        self.assertEqual(len(self.logs("key-thrash")), 1)

    def test_nested_regions_run_inline(self):
        T = self.T
        self.open(None, plan_path=None, policy="graph", warmup=1)
        inner = kt.region("inner")(lambda x: T.add(x, 1.0))
        outer = kt.region("outer")(lambda x: T.mul(inner(x), 2.0))
        for i in range(4):
            self.assertEqual(outer(self.x(i)).tolist(), [(i + 1.0) * 2])
        s = kt.stats()
        self.assertEqual(s["regions"]["inner"]["eager"], 2)   # in the watched call and the capture
        self.assertEqual(s["eager_by_reason"]["nested"], 2)
        self.assertEqual(s["regions"]["outer"]["replays"], 3)
        # inside a capture of the user's own, a region runs inline too
        g = T.cuda.CUDAGraph()
        y = self.x(0)
        with T.cuda.graph(g):
            z = inner(y)
        y.data[0] = 41.0
        g.replay()
        self.assertEqual(z.tolist(), [42.0])

    def test_policies_and_decisions(self):
        T = self.T
        self.open({"hot": plan(), "cold": plan("eager")})
        f = lambda x: T.add(x, 1.0)  # noqa: E731
        hot, cold, new = kt.region("hot")(f), kt.region("cold")(f), kt.region("new")(f)
        for _ in range(4):
            hot(self.x(1)), cold(self.x(1)), new(self.x(1))
        s = kt.stats()
        self.assertEqual(s["regions"]["hot"]["replays"], 2)
        self.assertEqual(s["eager_by_reason"]["planned-eager"], 4)
        self.assertEqual(s["eager_by_reason"]["unknown-region"], 4)
        self.assertEqual(len(self.logs("unknown-region")), 1)
        # graph policy: every region, the plan's warm-up where it has one
        self.open({"hot": plan(warmup=3), "cold": plan("eager")}, policy="graph")
        hot2, cold2 = kt.region("hot")(f), kt.region("cold")(f)
        for _ in range(5):
            hot2(self.x(1)), cold2(self.x(1))
        s = kt.stats()
        self.assertEqual(s["regions"]["hot"]["captures"], 1)
        self.assertEqual(s["regions"]["hot"]["eager"], 3)
        self.assertEqual(s["regions"]["cold"]["eager"], kt.DEFAULT_WARMUP)

    def test_no_plan_is_eager_with_ranges(self):
        T = self.T
        self.open(None, plan_path=None)
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for i in range(3):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        self.assertEqual(kt.stats()["eager_by_reason"], {"no-plan": 3})
        self.assertEqual([e for e in self.crt.events if e[0] == "push"], [("push", "step", 2)] * 3)
        with kt.mark("data"):
            pass
        self.assertEqual(self.crt.events[-2:], [("push", "data", 2), ("pop",)])

    def test_no_plan_says_so_once(self):
        """Regions without a plan run eagerly: one line says so, not one per call."""
        T = self.T
        self.open(None, plan_path=None)
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        other = kt.region("other")(lambda x: T.add(x, 2.0))
        for i in range(3):
            step(self.x(i)), other(self.x(i))
        self.assertEqual(len(self.logs("no plan")), 1)
        self.assertIn("KPLAN_PLAN", self.logs("no plan")[0])
        self.assertIn("(no-plan)", self.logs("no plan")[0])

    def test_open_without_path_reads_kplan_plan(self):
        """KPLAN_PLAN=model.kplan python app.py with an explicit kt.open():
        the plan applies (it used to run every region eager, silently)."""
        T = self.T
        os.environ["KPLAN_PLAN"] = "model.kplan"
        rt = self.open({"step": plan()}, plan_path=None)
        self.assertEqual(rt.plan_path, "model.kplan")
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(5):
            step(self.x(1))
        self.assertEqual(kt.stats()["captures"], 1)
        self.assertEqual(self.logs("no plan"), [])
        # "" is no plan whatever the environment says
        rt = self.open({"step": plan()}, plan_path="")
        self.assertIsNone(rt.plan_path)
        step(self.x(1))
        self.assertEqual(kt.stats()["eager_by_reason"], {"no-plan": 1})

    def test_disable_env(self):
        T = self.T
        os.environ["KPLAN_RT_DISABLE"] = "1"
        self.open({"step": plan()})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(4):
            step(self.x(1))
        self.assertEqual(kt.stats()["eager_by_reason"], {"disabled": 4})

    def test_no_cuda(self):
        T = self.T
        T.cuda.available = False
        self.open({"step": plan()})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(3):
            step(self.x(1))
        self.assertEqual(kt.stats()["eager_by_reason"], {"no-cuda": 3})

    def test_strict(self):
        T = self.T
        self.open({"step": plan(warmup=1)}, strict=True)
        new = kt.region("new")(lambda x: T.add(x, 1.0))
        with self.assertRaises(kt.KplanError) as cm:
            new(self.x(1))
        self.assertEqual(cm.exception.reason, "unknown-region")

        @kt.region("step")
        def step(x):
            x.item()
            return x

        step(self.x(1))   # warm-up: fine in strict mode
        with self.assertRaises(kt.KplanError) as cm:
            step(self.x(1))
        self.assertEqual(cm.exception.reason, "capture-failed")

    def test_stats_and_close(self):
        T = self.T
        os.environ["KPLAN_RT_STATS"] = "1"
        self.open({"step": plan(warmup=1)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(3):
            step(self.x(1))
        s = kt.stats()
        self.assertEqual(s["rt"], {"calls": 0, "replays": 0, "eager_by_reason": {}})
        self.assertEqual(s["plan"], "model.kplan")
        crt = self.crt
        kt.close()
        self.assertTrue(crt.closed)
        out = self.err.getvalue()
        self.assertIn("kplan-torch: replays 2", out)
        self.assertIn("kplan-torch: region step calls 3 replays 2 captures 1 eager 1", out)

    def test_reset_recaptures(self):
        T = self.T
        self.open({"step": plan(warmup=1)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(3):
            step(self.x(1))
        kt.reset()
        for _ in range(3):
            step(self.x(1))
        s = kt.stats()
        self.assertEqual((s["captures"], s["replays"], s["eager"]), (2, 4, 2))
        self.assertEqual(s["regions"]["step"]["calls"], 3)   # the state is new
        self.assertEqual(faketorch.captures_begun, 2)

    def test_busy_key_runs_eagerly(self):
        T = self.T
        self.open({"step": plan(warmup=1)})
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(3):
            step(self.x(1))
        st = kt.current().states[step]
        e = next(iter(st.entries.values()))
        with e.lock:   # as if another thread were replaying this key
            self.assertEqual(step(self.x(1)).tolist(), [2.0])
        self.assertEqual(kt.stats()["eager_by_reason"].get("busy"), 1)

    def test_region_needs_a_name(self):
        with self.assertRaises(TypeError):
            kt.region(lambda x: x)


class TestShippedFusion(Base):
    """Fusion groups shipped with the plan (kplan.aten_plan) as kplan.torch
    opens, saves and verifies them; the matching itself is
    test_aten_plan.py's."""

    def setUp(self):
        Base.setUp(self)
        self.dir = tempfile.mkdtemp(prefix="kplan-ship-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.plan = os.path.join(self.dir, "model.kplan")
        shutil.copy(os.path.join(REPO, "tests", "golden", "planner_fixture.kplan"), self.plan)

    def group(self, src="// a source\n"):
        from kplan import aten_plan
        d = aten_plan.Desc(0x1234, "", "aten::mul.Tensor -> aten::tanh", "4x768",
                           "f16 full 4x768 s768,1", 1)
        return aten_plan.Group.of("step", d, True, "kp_aten_x", src), src

    def test_default_uses_shipped_groups_only_when_there_are_some(self):
        rt = self.open({"step": plan()}, plan_path=self.plan)
        self.assertEqual(rt.fuse, "off")
        self.assertIsNone(kt.stats()["fusion"])
        g, src = self.group()
        rt.found[("step", g.key)] = (g, src)
        path = rt.save_fusion()
        self.assertEqual(path, self.plan + ".aten")
        self.assertTrue(os.path.exists(os.path.join(self.dir, g.source)))
        rt = self.open({"step": plan()}, plan_path=self.plan)
        self.assertEqual(rt.fuse, "plan")
        self.assertEqual([x.key for x in rt.shipped.groups], [g.key])
        self.assertEqual(kt.stats()["fusion"]["groups_shipped"], 1)
        rt = self.open({"step": plan()}, plan_path=self.plan, fuse="off")
        self.assertIsNone(rt.shipped)

    def test_save_at_close(self):
        rt = self.open({"step": plan()}, plan_path=self.plan, fuse="exact", fuse_save=True)
        g, src = self.group()
        rt.found[("step", g.key)] = (g, src)
        kt.close()
        self.assertTrue(os.path.exists(self.plan + ".aten"))
        os.unlink(self.plan + ".aten")
        os.environ["KPLAN_TORCH_FUSE_SAVE"] = "1"
        rt = self.open({"step": plan()}, plan_path=self.plan, fuse="exact")
        rt.found[("step", g.key)] = (g, src)
        kt.close()
        self.assertTrue(os.path.exists(self.plan + ".aten"))

    def test_save_needs_a_plan(self):
        rt = self.open({}, plan_path="", policy="graph", fuse="exact")
        with self.assertRaises(kt.KplanError):
            rt.save_fusion()

    def test_unusable_groups_are_said(self):
        with open(self.plan + ".aten", "w") as f:
            f.write("kplan-aten-groups 1\nnonsense\n")
        rt = self.open({"step": plan()}, plan_path=self.plan)
        self.assertEqual(rt.fuse, "plan")
        self.assertIn("malformed", kt.stats()["fusion"]["groups_error"])
        self.assertEqual(len(self.logs("cannot be used")), 1)

    def test_verify_mismatch_turns_fusion_off(self):
        T = self.T
        rt = self.open({"step": plan(warmup=1)}, verify=2, fuse="exact")
        fusing = [False]

        class Fuser(object):
            n_fused = 1

        @contextlib.contextmanager
        def mode():
            fusing[0] = True     # a fused kernel that computes something else
            try:
                yield
            finally:
                fusing[0] = False
        rt._fuse_mode = lambda st: (mode(), Fuser())
        step = kt.region("step")(lambda x: T.mul(x, 3.0 if fusing[0] else 2.0))
        self.assertEqual(step(self.x(1)).tolist(), [2.0])   # warm-up
        self.assertEqual(step(self.x(2)).tolist(), [4.0])   # fused capture: mismatch
        s = kt.stats()
        self.assertEqual(s["failures"], {"fusion-verify": 1})
        self.assertIn("step", s["fusion"]["dropped"])
        self.assertIn("output 0 differs", s["fusion"]["dropped"]["step"])
        self.assertEqual(len(self.logs("fusion off for the region")), 1)
        self.assertEqual(step(self.x(3)).tolist(), [6.0])   # captured again, unfused
        self.assertEqual(step(self.x(4)).tolist(), [8.0])
        s = kt.stats()
        self.assertEqual((s["verified"], s["captures"]), (2, 2))
        self.assertEqual(step(self.x(5)).tolist(), [10.0])  # replayed
        self.assertEqual(kt.stats()["failures"], {"fusion-verify": 1})


class TestExample(unittest.TestCase):
    def test_readme_example_compiles(self):
        """The README's walk-through program (needs torch and a GPU to run)."""
        d = tempfile.mkdtemp()
        try:
            py_compile.compile(os.path.join(REPO, "examples", "torch", "mlp.py"),
                               cfile=os.path.join(d, "mlp.pyc"), doraise=True)
        finally:
            shutil.rmtree(d)


class TestImport(unittest.TestCase):
    def test_import_does_not_import_torch(self):
        """With a poisoned torch on the path: importing kplan.torch, opening
        without a plan and calling a region must not import it."""
        d = tempfile.mkdtemp()
        try:
            os.makedirs(os.path.join(d, "torch"))
            with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
                f.write("raise ImportError('torch was imported')\n")
            code = ("import sys, kplan, kplan.torch as kt\n"
                    "kt.open(None)\n"
                    "f = kt.region('step')(lambda x: x + 1)\n"
                    "assert f(1) == 2\n"
                    "assert kt.stats()['eager_by_reason'] == {'no-plan': 1}, kt.stats()\n"
                    "assert 'torch' not in sys.modules\n"
                    "print('ok')\n")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([d, os.path.join(REPO, "python")]),
                       KPLAN_RT_LIB=os.path.join(d, "none.so"))
            r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)
            self.assertIn("libkplanrt", r.stderr)   # the one warning about the library
        finally:
            shutil.rmtree(d)


# ---------------------------------------------------------------------------
# the ctypes layer against include/kplan/runtime.h

_C2CT = {
    "uint64_t": ctypes.c_uint64, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "char": ctypes.c_char,
    "size_t": ctypes.c_size_t, "void *": ctypes.c_void_p, "const void *": ctypes.c_void_p,
    "const char *": ctypes.c_char_p,
}


def _header():
    with open(HEADER) as f:
        text = f.read()
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def _header_consts(text):
    consts = {"KP_RT_R_COUNT": len(_reason_names())}
    for m in re.finditer(r"#define\s+(\w+)\s+(\d+)", text):
        consts[m.group(1)] = int(m.group(2))
    return consts


def _parse_fields(body, consts):
    """[(name, ctype, count)] of a struct body; nested anonymous structs as
    (name, [fields], count)."""
    out = []
    body = body.strip()
    while body:
        m = re.match(r"struct\s*\{(.*?)\}\s*(\w+)\s*(?:\[(\w+)\])?\s*;", body, re.S)
        if m:
            out.append((m.group(2), _parse_fields(m.group(1), consts),
                        consts[m.group(3)] if m.group(3) else None))
            body = body[m.end():].strip()
            continue
        m = re.match(r"((?:const\s+)?[A-Za-z_]\w*(?:\s*\*)?)\s*(\w+)\s*(?:\[(\w+)\])?\s*;",
                     body)
        if not m:
            raise AssertionError("cannot parse struct field at: %r" % body[:60])
        ctype = re.sub(r"\s*\*", " *", m.group(1).strip())
        n = m.group(3)
        out.append((m.group(2), ctype, None if n is None else
                    int(n) if n.isdigit() else consts[n]))
        body = body[m.end():].strip()
    return out


def _reason_names():
    with open(HEADER) as f:
        text = f.read()
    enum = re.search(r"enum kp_rt_reason \{(.*?)\};", text, re.S).group(1)
    return re.findall(r"KP_RT_R_\w+\s*(?:=\s*\d+\s*)?,\s*/\*\s*\"([^\"]+)\"", enum)


class TestHeader(unittest.TestCase):
    def check_fields(self, parsed, ct_struct, where):
        fields = ct_struct._fields_
        self.assertEqual([p[0] for p in parsed], [f[0] for f in fields],
                         "%s: field names differ from the header" % where)
        for (name, ctype, count), (_n, t) in zip(parsed, fields):
            if isinstance(ctype, list):
                self.assertTrue(issubclass(t, ctypes.Array), name)
                self.assertEqual(t._length_, count, name)
                self.check_fields(ctype, t._type_, "%s.%s" % (where, name))
                continue
            if count is not None:
                self.assertTrue(issubclass(t, ctypes.Array), "%s.%s: array" % (where, name))
                self.assertEqual(t._length_, count, "%s.%s length" % (where, name))
                t = t._type_
            self.assertIn(ctype, _C2CT, "%s.%s: type %s" % (where, name, ctype))
            self.assertEqual(ctypes.sizeof(t), ctypes.sizeof(_C2CT[ctype]), "%s.%s" % (where, name))
            self.assertEqual(t, _C2CT[ctype], "%s.%s: %s" % (where, name, ctype))

    def test_structs_match_header_text(self):
        text = _header()
        consts = _header_consts(text)
        seen = set()
        for m in re.finditer(r"(typedef\s+)?struct\s+(\w+)\s*\{(.*?)\}\s*(\w*)\s*;", text, re.S):
            name = m.group(2)
            if name not in _rt.STRUCTS:
                continue
            seen.add(name)
            self.check_fields(_parse_fields(m.group(3), consts), _rt.STRUCTS[name], name)
        self.assertEqual(seen, set(_rt.STRUCTS))

    def test_reason_names_match_header(self):
        names = _reason_names()
        self.assertEqual(len(names), len(_rt.REASONS))
        self.assertEqual(tuple(names), _rt.REASONS)
        self.assertEqual(len(set(kt.REASONS)), len(kt.REASONS))   # torch's do not clash

    def test_enum_values_match_header(self):
        text = _header()
        for name in ("KP_RT_STRICT", "KP_RT_DISABLE", "KP_RT_PRINT_STATS", "KP_RT_TIMING",
                     "KP_RT_NO_ENV", "KP_RT_TWO_EXECS", "KP_RT_CUDA", "KP_RT_WATCH_ALLOW_ALLOC",
                     "KP_RT_BIND_OUTPUT", "KP_RT_BIND_VALUE"):
            m = re.search(r"\b%s\s*=\s*1\s*<<\s*(\d+)" % name, text)
            self.assertIsNotNone(m, name)
            self.assertEqual(getattr(_rt, name), 1 << int(m.group(1)), name)
        self.assertEqual(_header_consts(text)["KP_RT_MAX_BINDS"], _rt.KP_RT_MAX_BINDS)
        # the functions the binding declares are the header's
        for fn in ("kp_rt_open", "kp_rt_open_ex", "kp_rt_close", "kp_rt_get_stats",
                   "kp_rt_reason_name", "kp_rt_region_plan", "kp_rt_range_push",
                   "kp_rt_range_pop", "kp_rt_watch_begin", "kp_rt_watch_end",
                   "kp_rt_gpatch_open", "kp_rt_gpatch_set", "kp_rt_gpatch_close",
                   "kp_rt_plan_choice"):
            self.assertRegex(text, r"\b%s\s*\(" % fn)

    @unittest.skipIf(CC is None, "no C compiler")
    def test_offsets_match_compiled_header(self):
        d = tempfile.mkdtemp()
        try:
            lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "kplan/runtime.h"',
                     "#define F(s, t, f) printf(\"%s.%s %zu %zu\\n\", #s, #f, "
                     "offsetof(t, f), sizeof(((t *)0)->f))",
                     "int main(void) {"]
            expect = {}
            for sname, st in sorted(_rt.STRUCTS.items()):
                ctname = "kp_region" if sname == "kp_region" else "struct " + sname
                lines.append('printf("%s.size %%zu 0\\n", sizeof(%s));' % (sname, ctname))
                expect["%s.size" % sname] = (ctypes.sizeof(st), 0)
                for f, t in st._fields_:
                    lines.append("F(%s, %s, %s);" % (sname, ctname, f))
                    expect["%s.%s" % (sname, f)] = (getattr(st, f).offset, ctypes.sizeof(t))
            lines.append("return 0; }")
            src = os.path.join(d, "layout.c")
            with open(src, "w") as fh:
                fh.write("\n".join(lines) + "\n")
            exe = os.path.join(d, "layout")
            subprocess.check_call([CC, "-std=c11", "-I", os.path.join(REPO, "include"),
                                   "-o", exe, src])
            got = {}
            for line in subprocess.check_output([exe], universal_newlines=True).splitlines():
                k, a, b = line.split()
                got[k] = (int(a), int(b))
            self.assertEqual(got, expect)
        finally:
            shutil.rmtree(d)


@unittest.skipIf(CC is None, "no C compiler")
class TestCtypesWithFakeLib(Base):
    """kplan.torch over the real ctypes layer and a fake libkplanrt.so."""
    lib_dir = None

    @classmethod
    def setUpClass(cls):
        cls.lib_dir = tempfile.mkdtemp()
        cls.lib = os.path.join(cls.lib_dir, "libkplanrt.so")
        subprocess.check_call([CC, "-std=c11", "-shared", "-fPIC", "-Wall", "-Werror",
                               "-I", os.path.join(REPO, "include"), "-o", cls.lib,
                               os.path.join(HERE, "fake_kplanrt.c")])
        cls.cdll = ctypes.CDLL(cls.lib)
        cls.cdll.kpfake_log.restype = ctypes.c_char_p

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.lib_dir)

    def setUp(self):
        Base.setUp(self)
        os.environ["KPLAN_RT_LIB"] = self.lib
        self.cdll.kpfake_clear()

    def log(self):
        return self.cdll.kpfake_log().decode().splitlines()

    def test_find_library(self):
        self.assertEqual(_rt.find_library(), self.lib)
        os.environ["KPLAN_RT_LIB"] = self.lib_dir
        self.assertEqual(_rt.find_library(), self.lib)

    def test_open_bundle(self):
        rt = kt.open("model.kplanb")
        self.assertIn("entry #2 Fake H200", kt.stats()["plan_choice"])
        self.assertEqual(kt.stats()["rt"]["bundle_entry"], 2)
        self.assertEqual(rt.region_plan("step")["bundle_entry"], 2)
        self.assertIsNone(rt.global_reason)
        kt.close()
        rt = kt.open("none.kplanb")
        self.assertEqual(rt.global_reason, "plan-mismatch")
        self.assertIn("no entry applies", kt.stats()["plan_choice"])
        self.assertIn("plan-mismatch: no entry applies", self.err.getvalue())
        kt.close()
        rt = kt.open("model.kplan")
        self.assertEqual(kt.stats()["plan_choice"], "")
        kt.close()

    def test_bundle_entry_groups(self):
        # the runtime names the chosen entry's torch fusion groups in the
        # bundle (fake: plan-2222222222222222.aten); their sources beside it
        from kplan import aten_plan
        d = tempfile.mkdtemp(suffix=".kplanb")
        self.addCleanup(shutil.rmtree, d)
        g = aten_plan.Group("step", 1, True, "aten::mul.Tensor -> aten::tanh", "4x768",
                            "f16 full 4x768 s768,1", 1, "kp_aten_a", "kpaten-0000000000000001.cu",
                            1, saved_kernels=1, saved_bytes=12288)
        with open(os.path.join(d, aten_plan.BUNDLE_FMT % 0x2222222222222222), "w") as f:
            f.write(aten_plan.format_groups(0x2222222222222222, [g]))
        rt = kt.open(d)
        self.assertIsNotNone(rt.shipped)
        self.assertIsNone(rt.shipped.error)
        self.assertEqual([x.ops for x in rt.shipped.groups], [g.ops])
        self.assertEqual(rt.shipped.dir, d)
        self.assertEqual(rt.fuse, "plan")
        self.assertEqual(kt.stats()["fusion"]["groups_shipped"], 1)
        kt.close()
        # groups made with another entry's plan: not used, said why
        with open(os.path.join(d, aten_plan.BUNDLE_FMT % 0x2222222222222222), "w") as f:
            f.write(aten_plan.format_groups(0x3333, [g]))
        rt = kt.open(d)
        self.assertIn("stale", rt.shipped.error)
        kt.close()
        # no entry for this GPU: no groups, fusion off
        rt = kt.open(os.path.join(d, "none.kplanb"))
        self.assertIsNone(rt.shipped)
        self.assertEqual(rt.fuse, "off")
        kt.close()

    def test_open_plan_ranges_watch(self):
        T = self.T
        rt = kt.open("model.kplan", verify=2)
        self.assertEqual(self.log(), ["open model.kplan flags 0 verify 2 warmup -1 max_failures 0"])
        info = rt.region_plan("step")
        self.assertEqual(info, {"decision": "graph", "warmup": 3, "kernels": 42, "n_patches": 2,
                                "n_scalar_patches": 1, "fingerprint": 0x0123456789abcdef,
                                "reason": "launch-bound", "bundle_entry": 0})
        self.assertEqual(rt.region_plan("cold")["decision"], "eager")
        self.assertIsNone(rt.region_plan("other"))
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        self.cdll.kpfake_clear()
        for i in range(5):
            self.assertEqual(step(self.x(i)).tolist(), [i + 1.0])
        side = kt.current().side[0].cuda_stream
        self.assertEqual(self.log(), ["push step 2", "pop", "push step 2", "pop",
                                      "push step 2", "watch %d 1" % side, "unwatch", "pop",
                                      "push step 2", "pop", "push step 2", "pop"])
        s = kt.stats()
        self.assertEqual((s["captures"], s["verified"]), (1, 2))
        rts = s["rt"]
        self.assertEqual((rts["calls"], rts["patched_values"], rts["graph_mem_bytes"],
                          rts["watch_ns"], rts["unwatched"]), (1, 18, -11, -17, 16))
        self.assertEqual(rts["eager_by_reason"]["would-break-capture"],
                         100 + _rt.REASONS.index("would-break-capture"))
        self.assertEqual(rts["failures"]["none"], 200)
        self.assertEqual(rt.crt.reason_name(3), "reason3")
        kt.close()
        self.assertEqual(self.log()[-1], "close")

    def test_would_break_from_c(self):
        T = self.T
        os.environ["KPFAKE_VERDICT"] = "1"
        try:
            kt.open("model.kplan", strict=True)
            self.assertEqual(self.log()[0], "open model.kplan flags 1 verify 0 warmup -1 "
                             "max_failures 0")
            def body(x):
                y = T.add(x, 1.0)
                faketorch.synchronize()   # the capture fails on it, as the watch said
                return y

            step = kt.region("step")(body)
            with self.assertRaises(kt.KplanError) as cm:
                for _ in range(4):
                    step(self.x(1))
            self.assertEqual(cm.exception.reason, "would-break-capture")
            self.assertIn("after vectorized_elementwise_kernel", self.logs("would-break")[0])
        finally:
            del os.environ["KPFAKE_VERDICT"]

    def test_open_errors(self):
        with self.assertRaises(kt.KplanError) as cm:
            kt.open("bad.kplan")
        self.assertIn("not a plan (EFORMAT)", str(cm.exception))
        os.environ["KPLAN_RT_LIB"] = os.path.join(self.lib_dir, "missing.so")
        with self.assertRaises(kt.KplanError):
            kt.open("model.kplan")
        rt = kt.open(None)        # no plan: a missing library is only a warning
        self.assertIsNone(rt.crt)
        self.assertEqual(len(self.logs("missing.so")), 1)

    def test_implicit_open_from_env(self):
        T = self.T
        os.environ["KPLAN_PLAN"] = "model.kplan"
        step = kt.region("step")(lambda x: T.add(x, 1.0))
        for _ in range(5):
            step(self.x(1))
        self.assertEqual(kt.stats()["captures"], 1)
        self.assertEqual(kt.current().plan_path, "model.kplan")


class TestRealLibrary(unittest.TestCase):
    """The built libkplanrt.so, when there is one that loads (CUDA's
    libcudart is needed): its reason names are the binding's."""

    def test_reason_names(self):
        path = None
        for p in _rt.library_candidates()[1:]:
            if os.path.isfile(p):
                path = p
                break
        if path is None:
            self.skipTest("no built libkplanrt.so")
        try:
            lib = _rt.Library(path)
        except OSError as exc:
            self.skipTest("cannot load %s: %s" % (path, exc))
        names = tuple(lib.reason_name(i).decode() for i in range(len(_rt.REASONS)))
        self.assertEqual(names, _rt.REASONS)
        self.assertEqual(lib.reason_name(len(_rt.REASONS)), b"?")
        for f in ("region_plan", "range_push", "range_pop", "watch_begin", "watch_end"):
            if getattr(lib, f) is None:
                self.skipTest("this build has no kp_rt_%s yet" % f)


if __name__ == "__main__":
    unittest.main()
