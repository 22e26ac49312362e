"""The row-norm kernels of kplan.aten_norm against eager ATen, bit for bit,
without libkplanrt: each kernel is compiled with nvcc (-arch=sm_90 by
default) and launched through the CUDA driver (ctypes), after x + r, on
the same inputs as torch.ops.aten.native_layer_norm(x + r, ...).

    PYTHONPATH=python python3 tests/gpu/aten_norm_kernels.py [--arch sm_90]

f32/f16/bf16, M in {1, 7, 128}, N in {768, 1024, 1600, 4096, 5120, 256, 12,
16384}, weight and bias / weight / neither; rows of large magnitude, of a
large offset and of constants. Checks the sum, out, mean and rstd. Exit 0
when all are bit-identical; last line "aten_norm_kernels: ...". Ran on an
H100 with torch 2.11.0+cu130: 216 of 216 configurations bit-identical (the
bias-only branch, not fused, is the one that was not: aten_norm.BIAS_ONLY).
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import torch
from concurrent.futures import ThreadPoolExecutor
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), 'python'))
ap = argparse.ArgumentParser()
ap.add_argument('--arch', default='sm_90')
ap.add_argument('--nvcc', default=os.environ.get('NVCC', '/usr/local/cuda/bin/nvcc'))
ARGS = ap.parse_args()
TMP = tempfile.mkdtemp(prefix='kp-aten-norm-')
from kplan import aten_gen as G, aten_ops as A, aten_norm as NM
torch.cuda.init(); torch.zeros(1, device='cuda')
cu = ctypes.CDLL('libcuda.so.1')
DT = {'f32': torch.float32, 'f16': torch.float16, 'bf16': torch.bfloat16}
def inputs(dt, m, n, seed):
    g = torch.Generator(device='cuda').manual_seed(seed)
    x = torch.randn(m, n, generator=g, device='cuda') * 2.0
    r = torch.randn(m, n, generator=g, device='cuda')
    big = 3.0e4 if dt == torch.float16 else 1.0e6
    if m > 1:
        x[1] *= big / 8; x[-1] = 3.0; r[-1] = 0.25
    if m > 2:
        x[2] += 1000.0 if dt != torch.bfloat16 else 100.0
    if m == 1:
        x[0, ::3] *= 100.0
    w = (torch.randn(n, generator=g, device='cuda') * 0.5 + 1).to(dt)
    b = (torch.randn(n, generator=g, device='cuda') * 0.1).to(dt)
    return x.to(dt), r.to(dt), w, b
cfgs = []
for d in DT:
    for m in (1, 7, 128):
        for n in (768, 1024, 1600, 4096, 5120, 256, 12, 16384):
            for aff in ('wb', 'w', 'none'):   # 'b' alone: not fused (BIAS_ONLY)
                cfgs.append((d, m, n, aff))
def build(c):
    d, m, n, aff = c
    exts = [G.Ext(d), G.Ext(d)]
    gi = bi = None
    if 'w' in aff:
        gi = len(exts); exts.append(G.Ext(d, 'row', n))
    if aff in ('wb', 'b'):
        bi = len(exts); exts.append(G.Ext(d, 'row', n))
    ch = G.Chain([A.Node('add', [('x', 0), ('x', 1)], d, {'alpha': 1.0})], exts, m * n, [0])
    name, src = NM.generate(ch, NM.Norm(0, n, 1e-5, gi, bi, d, (1, 1, 1)))
    p = os.path.join(TMP, '%s_%d_%d_%s' % c)
    open(p + '.cu', 'w').write(src)
    r = subprocess.run([ARGS.nvcc, '-arch=' + ARGS.arch, '-cubin', '-o', p + '.cubin', p + '.cu'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return name, p + '.cubin'
with ThreadPoolExecutor(16) as ex:
    built = list(ex.map(build, cfgs))
bad = 0
def bits(t):
    return t.contiguous().view(torch.int32 if t.element_size() == 4 else torch.int16)
for c, (name, cub) in zip(cfgs, built):
    d, m, n, aff = c
    dt = DT[d]
    x, r, w, b = inputs(dt, m, n, (m * 131 + n * 7 + len(aff)) % 1000)
    W = w if 'w' in aff else None
    B = b if aff in ('wb', 'b') else None
    with torch.no_grad():
        s = x + r
        ref = (s,) + tuple(torch.ops.aten.native_layer_norm(s, [n], W, B, 1e-5))
    out = (torch.empty_like(s), torch.empty_like(s), torch.empty(m, 1, device='cuda'), torch.empty(m, 1, device='cuda'))
    mod = ctypes.c_void_p(); fn = ctypes.c_void_p()
    data = open(cub, 'rb').read()
    assert cu.cuModuleLoadData(ctypes.byref(mod), data) == 0
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0
    ptrs = [x, r] + [t for t in (W, B) if t is not None] + list(out)
    vals = [ctypes.c_void_p(t.data_ptr()) for t in ptrs]
    args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    st = torch.cuda.current_stream().cuda_stream
    rc = cu.cuLaunchKernel(fn, m, 1, 1, 128, 1, 1, 0, ctypes.c_void_p(st), args, None)
    assert rc == 0, rc
    torch.cuda.synchronize()
    mis = [int((bits(a) != bits(o)).sum()) for a, o in zip(ref, out)]
    if any(mis):
        bad += 1
        i = next(k for k in range(4) if mis[k])
        ne = (bits(ref[i]) != bits(out[i])).flatten().nonzero()[0]
        print('MISMATCH', c, mis, 'first', i, int(ne), float(ref[i].flatten()[ne]), float(out[i].flatten()[ne]))
print('aten_norm_kernels: %d configurations, %d mismatching, %s, torch %s' % (
    len(cfgs), bad, torch.cuda.get_device_name(), torch.__version__))
sys.exit(1 if bad else 0)
