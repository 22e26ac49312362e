"""The row-mean kernels of kplan.aten_rms against eager ATen, bit for bit,
without libkplanrt: each kernel is compiled with nvcc (-arch=sm_90 by
default) and launched through the CUDA driver (ctypes) on the inputs of
Hugging Face's LlamaRMSNorm run eagerly:

    s = x + r                                   # with a residual, or s = x
    h = s.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    rstd = torch.rsqrt(var + 1e-6)
    y = w * (h * rstd).to(x.dtype)

    PYTHONPATH=python python3 tests/gpu/aten_rms_kernels.py [--arch sm_90] [--quick]

f32/f16/bf16, M in {1, 3, 16, 128}, N in {64, 128, 256, 1000, 1001, 1024,
2048, 4096, 5120, 8192}, with and without the residual add; rows of large
values, of a constant and of values whose squares are denormal (f16: tiny
values). Compares s, var, rstd and y (var is the mean itself: a mismatch
there is the reduction order). When a configuration mismatches, its kernel
is built again with each other choice of aten_rms's VARIANTS that changes
it, and the choices that give eager's bits are printed: set those flags in
python/kplan/aten_rms.py. Prints a table per (M, N) with ATen's launch
configuration; exit 0 when all are bit-identical; last line
"aten_rms_kernels: ...". Takes about 30 s on 16 cores (nvcc).
"""
import argparse
import ctypes
import itertools
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from kplan import aten_rms as R  # noqa: E402
from test_aten_rms import hf_rms  # noqa: E402  (the chain, as the CPU tests build it)
import torch_fusion_ops  # noqa: E402  (tests/gpu: its RMSNorm inputs)

ap = argparse.ArgumentParser()
ap.add_argument("--arch", default="sm_90")
ap.add_argument("--nvcc", default=os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc"))
ap.add_argument("--quick", action="store_true", help="M in {1, 16}, N in {1000, 1024, 8192}")
ARGS = ap.parse_args()
TMP = tempfile.mkdtemp(prefix="kp-aten-rms-")
EPS = 1e-6
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ROWS = (1, 16) if ARGS.quick else (1, 3, 16, 128)
COLS = (1000, 1024, 8192) if ARGS.quick else (64, 128, 256, 1000, 1001, 1024, 2048, 4096,
                                              5120, 8192)
FLAGS = ("SHUFFLE_DESCENDING", "X_BEFORE_Y", "VECTORIZE_AT_128")
torch.cuda.init()
torch.zeros(1, device="cuda")
cu = ctypes.CDLL("libcuda.so.1")


def chain(dt, m, n, res):
    """The chain the fuser records for the code above and its row-reduce
    node (tests/python/test_aten_rms.hf_rms); written: s (with the
    residual), var, rstd, y. Parameters: x, (r,) w, then those."""
    return hf_rms(dt, m, n, res, outs="stats", eps=EPS)


def build(job):
    """(kernel name, cubin path, (grid, block)) of a configuration under flag values."""
    c, flags = job
    saved = {f: getattr(R, f) for f in FLAGS}
    try:
        for f, v in flags.items():
            setattr(R, f, v)
        name, src = R.generate(*chain(*c))
        dims = R.launch_dims(c[1], c[2])
    finally:
        for f, v in saved.items():
            setattr(R, f, v)
    p = os.path.join(TMP, name)
    if not os.path.exists(p + ".cubin"):
        with open(p + ".cu", "w") as f:
            f.write(src)
        r = subprocess.run([ARGS.nvcc, "-arch=" + ARGS.arch, "-cubin", "-o", p + ".cubin",
                            p + ".cu"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    return name, p + ".cubin", dims


def inputs(dt, m, n, seed):
    """x, r: [m, n], w: [n]: torch_fusion_ops's RMSNorm inputs (rows of
    large values, a constant, squares below float's normal range)."""
    x, r, w = torch_fusion_ops.rms_inputs(dt, m, n, seed)
    return x[0], r[0], w


def eager(x, r, w, res):
    with torch.no_grad():
        s = x + r if res else x
        h = s.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        rstd = torch.rsqrt(var + EPS)
        y = w * (h * rstd).to(x.dtype)
    return ([s] if res else []) + [var, rstd, y]


def bits(t):
    return t.contiguous().view(torch.int32 if t.element_size() == 4 else torch.int16)


def launch(name, cubin, dims, c, x, r, w):
    dt, m, n, res = c
    outs = ([torch.empty_like(x)] if res else []) + \
        [torch.empty(m, 1, device="cuda"), torch.empty(m, 1, device="cuda"), torch.empty_like(x)]
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    with open(cubin, "rb") as f:
        data = f.read()
    assert cu.cuModuleLoadData(ctypes.byref(mod), data) == 0
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0
    ptrs = [x] + ([r] if res else []) + [w] + outs
    vals = [ctypes.c_void_p(t.data_ptr()) for t in ptrs]
    args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    grid, block = dims
    rc = cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0,
                           ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), args, None)
    assert rc == 0, rc
    torch.cuda.synchronize()
    cu.cuModuleUnload(mod)
    return outs


def mismatches(ref, out):
    return [int((bits(a) != bits(b)).sum()) for a, b in zip(ref, out)]


t0 = time.time()
cfgs = [(d, m, n, res) for d in DT for m in ROWS for n in COLS for res in (False, True)]
with ThreadPoolExecutor(16) as ex:
    built = list(ex.map(build, [(c, {}) for c in cfgs]))
bad = []
data = {}
for c, (name, cub, dims) in zip(cfgs, built):
    d, m, n, res = c
    x, r, w = inputs(DT[d], m, n, (m * 131 + n * 7 + res) % 1000)
    mis = mismatches(eager(x, r, w, res), launch(name, cub, dims, c, x, r, w))
    if any(mis):
        bad.append((c, mis))
        data[c] = (x, r, w)
        print("MISMATCH %-5s M=%-4d N=%-5d %-8s elements differing in %s: %s" % (
            d, m, n, "residual" if res else "", "s, var, rstd, y" if res else "var, rstd, y",
            mis))
# the variants: for the first mismatching configuration of each (M, N)
found = {}
for c, _mis in bad:
    d, m, n, res = c
    if (m, n) in found:
        continue
    default = R.generate(*chain(*c))[0]
    tried, matching = 0, []
    for vals in itertools.product((True, False), repeat=len(FLAGS)):
        flags = dict(zip(FLAGS, vals))
        name, cub, dims = build((c, flags))
        if name == default:
            continue                  # the same kernel (names hash the code)
        tried += 1
        x, r, w = data[c]
        if not any(mismatches(eager(x, r, w, res), launch(name, cub, dims, c, x, r, w))):
            matching.append(", ".join("%s=%s" % kv for kv in flags.items()))
    found[(m, n)] = matching
    print("  M=%d N=%d (%s): of %d other variants, eager's bits with %s" % (
        m, n, R.config(m, n), tried, "; ".join(matching) if matching else "none"))
print("\n| M | N | ATen's launch (aten_rms.config) | configurations | mismatching |")
print("| --- | --- | --- | --- | --- |")
for m in ROWS:
    for n in COLS:
        k = [c for c in cfgs if c[1:3] == (m, n)]
        print("| %d | %d | %r | %d | %d |" % (m, n, R.config(m, n), len(k),
                                             sum(1 for c, _ in bad if c in k)))
print("aten_rms_kernels: %d configurations, %d mismatching, variant %s, %s, torch %s, "
      "%.1f s" % (len(cfgs), len(bad), R.variant(), torch.cuda.get_device_name(),
                  torch.__version__, time.time() - t0))
sys.exit(1 if bad else 0)
