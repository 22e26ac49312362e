"""kplan.aten_fuse's LayerNorm deferral through a real TorchDispatchMode,
against eager ATen bit for bit, without libkplanrt: a stand-in runtime
compiles each generated kernel with nvcc and launches it through the CUDA
driver (ctypes).

    PYTHONPATH=python python3 tests/gpu/aten_norm_fuse.py

Per dtype (f32, f16, bf16) and shape ([1, 768], [7, 1024], [128, 1600],
[5, 12]): a GPT-2 block (residual add, F.layer_norm, a GEMM, residual add,
F.layer_norm: two chains with a norm each, the sums kept), a GELU chain
ending in native_layer_norm with mean and rstd returned, and a copy then
native_layer_norm. Each output against eager, bit for bit, and the number
of chains fused with a norm. Last line "fuse-harness: N cases, K bad".
Ran on an H100 with torch 2.11.0+cu130: 36 cases, 0 bad.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import torch
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), 'python'))
NVCC = os.environ.get('NVCC', '/usr/local/cuda/bin/nvcc')
ARCH = os.environ.get('KP_ARCH', 'sm_90')
TMP = tempfile.mkdtemp(prefix='kp-aten-norm-fuse-')
from kplan import aten_fuse
F = torch.nn.functional
cu = ctypes.CDLL('libcuda.so.1')
class CRT:
    can_fuse = True
    def kernel_load(self, src, name):
        p = os.path.join(TMP, name)
        open(p + '.cu', 'w').write(src)
        subprocess.run([NVCC, '-arch=' + ARCH, '-cubin', '-o', p + '.cubin', p + '.cu'], check=True, capture_output=True)
        mod = ctypes.c_void_p(); fn = ctypes.c_void_p()
        assert cu.cuModuleLoadData(ctypes.byref(mod), open(p + '.cubin', 'rb').read()) == 0
        assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0
        return fn.value
    def kernel_launch(self, fn, grid, block, stream, ptrs):
        vals = [ctypes.c_void_p(p) for p in ptrs]
        args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        return cu.cuLaunchKernel(ctypes.c_void_p(fn), grid, 1, 1, block, 1, 1, 0, ctypes.c_void_p(stream), args, None)
crt = CRT()
def bits(t):
    return t.contiguous().view(torch.int32 if t.element_size() == 4 else torch.int16)
def block(x, a, w1, b1, w2, b2, W):
    h = x + a
    y = F.layer_norm(h, [x.shape[-1]], w1, b1, 1e-5)
    z = torch.mm(y, W)
    h2 = h + z
    return h, y, h2, F.layer_norm(h2, [x.shape[-1]], w2, b2, 1e-5)
def stats(x, a, w1, b1, w2, b2, W):
    s = F.gelu(x * 0.5 + a, approximate='tanh')
    return torch.ops.aten.native_layer_norm(s, [x.shape[-1]], w1, None, 1e-6)
def alone(x, a, w1, b1, w2, b2, W):
    return torch.ops.aten.native_layer_norm(x.clone(), [x.shape[-1]], None, None, 1e-5)
bad = tot = 0
for dt in (torch.float32, torch.float16, torch.bfloat16):
    for m, n in ((1, 768), (7, 1024), (128, 1600), (5, 12)):
        g = torch.Generator(device='cuda').manual_seed(m * n)
        mk = lambda *s: torch.randn(*s, generator=g, device='cuda').to(dt)
        x, a = mk(m, n) * 3, mk(m, n)
        w1, b1, w2, b2 = mk(n) * 0.3 + 1, mk(n) * 0.1, mk(n) * 0.3 + 1, mk(n) * 0.1
        W = mk(n, n) * 0.02
        args = (x, a, w1, b1, w2, b2, W)
        for name, fn, want in (('block', block, 2), ('stats', stats, 1), ('alone', alone, 1)):
            with torch.no_grad():
                ref = fn(*args)
                st = aten_fuse.Stats()
                fz = aten_fuse.Fuser(crt, mode='exact', min_ops=2, stats=st)
                with aten_fuse.mode(fz):
                    out = fn(*args)
                torch.cuda.synchronize()
            mis = [int((bits(r) != bits(o)).sum()) for r, o in zip(ref, out)]
            tot += 1
            ok = not any(mis) and st.norms == want and all(tuple(r.shape) == tuple(o.shape) for r, o in zip(ref, out))
            bad += not ok
            if not ok:
                print('BAD', dt, m, n, name, mis, st.as_dict())
print('last stats', st.as_dict())
print('fuse-harness: %d cases, %d bad, %s, torch %s' % (tot, bad, torch.cuda.get_device_name(), torch.__version__))
sys.exit(1 if bad else 0)
