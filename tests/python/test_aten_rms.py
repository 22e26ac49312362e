"""Tests of kplan.aten_rms (a chain with a mean over the last dim inside:
RMSNorm written as ops, one kernel in the order of ATen's gpu_reduce_kernel):
CPU only, no torch. The config follows setReduceConfig as read in
aten/src/ATen/native/cuda/Reduce.cuh (line numbers of the copy read, see
aten_rms's docstring); the sources go through nvcc (-arch=sm_90 -ptx, then
ptxas) when the machine has it. Their numerics are checked against eager
ATen on a GPU by tests/gpu/aten_rms_kernels.py and tests/gpu/torch_fusion_ops.py
(--rms-norm).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

from kplan import aten_gen as G  # noqa: E402
from kplan import aten_ops as A  # noqa: E402
from kplan import aten_rms as R  # noqa: E402

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def hf_rms(dt="f16", rows=1, n=1024, residual=True, outs=None, eps=1e-6):
    """LlamaRMSNorm as the fuser records it: (x + r), .float(), pow(2),
    mean, + eps, rsqrt, h * rstd, .to(dt), w * (f32: no copies, as eager
    dispatches none). Returns (chain, red); outs default: the sum and the
    output; "stats": the sum, the mean, rstd and the output (what
    tests/gpu/aten_rms_kernels.py compares)."""
    N = A.Node
    nodes, exts = [], [G.Ext(dt)]
    h = ("x", 0)
    if residual:
        exts.append(G.Ext(dt))
        nodes.append(N("add", [("x", 0), ("x", 1)], dt, {"alpha": 1.0}))
        h = ("n", 0)
    if dt != "f32":
        nodes.append(N("copy", [h], "f32", {}))
        h = ("n", len(nodes) - 1)
    p = len(nodes)
    nodes.append(N("pow", [h], "f32", A.finish_attrs("pow", {"exp": 2.0}, "f32")))
    nodes.append(N("mean", [("n", p)], "f32", {}))
    nodes.append(N("add", [("n", p + 1), ("s", eps)], "f32", {"alpha": 1.0}))
    nodes.append(N("rsqrt", [("n", p + 2)], "f32", {}))
    nodes.append(N("mul", [h, ("n", p + 3)], "f32", {}))
    y = ("n", p + 4)
    if dt != "f32":
        nodes.append(N("copy", [y], dt, {}))
        y = ("n", len(nodes) - 1)
    exts.append(G.Ext(dt, "row", n))
    nodes.append(N("mul", [("x", len(exts) - 1), y], dt, {}))
    if outs is None or outs == "stats":
        outs = ([0] if residual else []) + ([p + 1, p + 3] if outs else []) + [len(nodes) - 1]
    return (G.Chain(nodes, exts, rows * n, list(outs)),
            R.Red(p + 1, n, [p + 1, p + 2, p + 3]))


class TestConfig(unittest.TestCase):
    """setReduceConfig<float, float, vt0 4, input_vec_size 4> (Reduce.cuh
    1039-1186) for a contiguous [rows, N] float reduced over its last dim:
    dim0 = N, dim1 = rows (1069-1075); vec4 loads when dim0 >= 128, then
    dim0 /= 4 (1105-1111); set_block_dimension (98-107); input_mult[0] =
    split_input(bw) (1125-1129); the warps split a row when
    values_per_thread (div_up(N, bw): elements) >= min(bh * 16, 256)
    (1142-1156); global reduction when they do and values_per_thread >= 256
    (1163)."""

    def cfg(self, rows, n):
        c = R.config(rows, n)
        return (c.vec, c.bw, c.bh, c.step, c.split, c.grid)

    def test_one_row(self):
        # decode: dim0 = 1024 / 4 = 256 < 512 -> bw 256; 4 values a thread < 16
        self.assertEqual(self.cfg(1, 1024), (True, 256, 1, 256, False, 1))
        self.assertEqual(self.cfg(1, 1000), (True, 128, 1, 128, False, 1))   # last_pow2(250)
        self.assertEqual(self.cfg(1, 4096), (True, 512, 1, 512, False, 1))   # 8 values < 16
        self.assertEqual(self.cfg(1, 64), (False, 64, 1, 64, False, 1))      # no vec4 below 128
        # 8192: 16 values a thread: input_mult[1] = 512 with bh 1 (a no-op block_y_reduce)
        self.assertEqual(self.cfg(1, 8192), (True, 512, 1, 512, True, 1))

    def test_rows(self):
        # rows = 3: dim1 = 3 -> bh 2, bw = min(256, 512 / 2); two rows a block
        self.assertEqual(self.cfg(3, 1024), (True, 256, 2, 256, False, 2))
        # 16 rows: bw 32, bh 16: a warp per row, its lanes striding by 32 vectors
        self.assertEqual(self.cfg(16, 1024), (True, 32, 16, 32, False, 1))
        self.assertEqual(self.cfg(128, 5120), (True, 32, 16, 32, False, 8))
        self.assertEqual(self.cfg(16, 64), (False, 32, 16, 32, False, 1))
        # 8192: 256 values a lane >= min(16 * 16, 256): the 16 warps split a row
        self.assertEqual(self.cfg(16, 8192), (True, 32, 16, 512, True, 16))
        self.assertEqual(self.cfg(3, 8192), (True, 256, 2, 512, True, 3))
        c = R.config(16, 8192)
        self.assertEqual((c.mult1, c.step_out), (32, 1))
        c = R.config(16, 1024)
        self.assertEqual((c.mult1, c.step_out), (0, 16))

    def test_vectorize_threshold_variant(self):
        self.assertTrue(R.config(1, 128).vec)
        keep = R.VECTORIZE_AT_128
        try:
            R.VECTORIZE_AT_128 = False                 # dim0 > 128 (older Reduce.cuh)
            self.assertFalse(R.config(1, 128).vec)
            self.assertTrue(R.config(1, 132).vec)
        finally:
            R.VECTORIZE_AT_128 = keep

    def test_refusals(self):
        self.assertIsNone(R.refusal(128, 8192))
        self.assertIn("across blocks", R.refusal(1, 200000))       # values_per_thread >= 256
        self.assertIsNotNone(R.refusal(1, 1))
        self.assertIsNotNone(R.refusal(1 << 16, 1 << 14))          # 2^30 elements

    def test_factor(self):
        # float(rows) / (rows * N), rounded to float once
        self.assertEqual(R.factor(1, 1024), 2.0 ** -10)
        self.assertEqual(R.factor(1, 1000), A.f32(1 / 1000))
        self.assertEqual(R.factor(7, 1000), A.f32(1 / 1000))
        self.assertEqual(R.launch_dims(16, 8192), (16, 512))


class TestSource(unittest.TestCase):
    def test_decode(self):
        name, src = R.generate(*hf_rms())
        self.assertTrue(name.startswith("kp_atenrms_"))
        self.assertIn("__launch_bounds__(256) %s(const unsigned short *x0, const unsigned short "
                      "*x1, const unsigned short *x2, unsigned short *y0, unsigned short *y1)"
                      % name, src)
        # one vec4 a thread, 4 accumulators, ((a0 + a1) + a2) + a3
        self.assertIn("const unsigned int i = row0 + (unsigned int)(kp_iv * 4 + ii);", src)
        self.assertIn("kp_a[ii] = __fadd_rn(kp_a[ii], v2);", src)
        self.assertIn("__fadd_rn(__fadd_rn(__fadd_rn(kp_a[0], kp_a[1]), kp_a[2]), kp_a[3])", src)
        # block_x_reduce: shared memory 128, 64, 32, then the shuffles
        self.assertIn("for (int off = 128; off >= 32; off >>= 1)", src)
        shfl = re.findall(r"__shfl_down_sync\(0xffffffffu, kp_v, (\d+), 32\)", src)
        self.assertEqual(shfl, ["16", "8", "4", "2", "1"])
        self.assertNotIn("ty < off", src)                      # no block_y_reduce
        self.assertIn("kp_row[ty] = __fmul_rn(kp_v, __int_as_float(0x3a800000));", src)
        # the row nodes once, the h the mul reads kept in registers by pass 1
        self.assertIn("const float v5 = rsqrtf(v4);", src)
        self.assertIn("kp_c1[v * 4 + ii] = v1;", src)
        self.assertIn("const float v6 = __fmul_rn(kp_c1[v * 4 + ii], v5);", src)
        self.assertIn("y0[i] = h0;", src)
        self.assertIn("y1[i] = h8;", src)

    def test_row_outputs(self):
        ch, red = hf_rms("bf16", rows=3, n=256, residual=False, outs=(1, 2, 3, 7))
        src = R.generate(ch, red)[1]
        # the mean (node 2) and the rsqrt (node 4) held: written once a row by its leader
        self.assertIn("if (kp_in && tx == 0) {", src)
        self.assertIn("y1[row] = kp_mean;", src)
        self.assertIn("y2[row] = v3;", src)
        self.assertIn("y0[i] = v1;", src)                      # the pow, in pass 1

    def test_split_rows(self):
        ch, red = hf_rms(rows=3, n=8192)
        src = R.generate(ch, red)[1]
        self.assertIn("const int kp_i0 = tx + ty * 256;", src)  # input_mult[1]
        self.assertIn("kp_v = __fadd_rn(kp_v, kp_sh[tid + off * 256]);", src)
        self.assertIn("if (tid == 0)\n\t\tkp_row[0] =", src)
        x, y = src.index("__shfl_down_sync"), src.index("ty < off")
        self.assertLess(x, y)                                  # x, then y
        keep = R.X_BEFORE_Y
        try:
            R.X_BEFORE_Y = False
            src2 = R.generate(ch, red)[1]
        finally:
            R.X_BEFORE_Y = keep
        self.assertGreater(src2.index("__shfl_down_sync"), src2.index("ty < off"))

    def test_unaligned_rows(self):
        # 1001 elements a row: row r starts (r * 1001) % 4 elements past 16 bytes
        src = R.generate(*hf_rms("f32", rows=3, n=1001))[1]
        self.assertIn("const int kp_shift = (int)(row0 & 3u);", src)
        self.assertIn("if (kp_shift > 0 && tx >= kp_shift && tx < 4) {", src)
        self.assertIn("if (!(kp_iv * 4 + 3 < kp_end))", src)
        self.assertIn("const int kp_t = (kp_end & ~3) + tx;", src)

    def test_scalar_loads(self):
        src = R.generate(*hf_rms(rows=16, n=64))[1]
        self.assertIn("thread_reduce_impl", src)
        self.assertIn("const int kp_col = kp_q + ii * 32;", src)
        self.assertNotIn("kp_iv", src)

    def test_long_rows_recompute(self):
        # 40 vectors a lane: pass 2 computes the chain again rather than keeping it
        ch, red = hf_rms(rows=16, n=5120)
        src = R.generate(ch, red)[1]
        self.assertNotIn("kp_c", src)
        self.assertEqual(src.count("const float v1 = v0;"), 2)   # h = x.float(), twice
        self.assertIn("for (int kp_iv = kp_i0; kp_iv < 1280; kp_iv += 32) {", src)

    def test_variants_differ(self):
        a = R.generate(*hf_rms())
        keep = R.SHUFFLE_DESCENDING
        try:
            R.SHUFFLE_DESCENDING = False
            b = R.generate(*hf_rms())
        finally:
            R.SHUFFLE_DESCENDING = keep
        self.assertNotEqual(a[0], b[0])
        self.assertEqual(re.findall(r"kp_v, (\d+), 32\)", b[1]), ["1", "2", "4", "8", "16"])
        self.assertIn("aten=shfl-asc", b[1])

    def test_bad(self):
        ch, red = hf_rms()
        red.rows = red.rows + (6,)                             # reads h: not a row node
        with self.assertRaises(G.GenError):
            R.generate(ch, red)
        for make in (lambda: hf_rms(rows=1, n=200000),          # ATen reduces across blocks
                     lambda: hf_rms(outs=())):
            with self.assertRaises(G.GenError):
                R.generate(*make())
        ch, red = hf_rms()
        ch.exts[0] = G.Ext("f16", "strided", strides=(1, 1))
        with self.assertRaises(G.GenError):
            R.generate(ch, red)
        ch, red = hf_rms()
        ch.nodes[red.node].ins = [("n", 0)]                   # the mean of an f16 node
        with self.assertRaises(G.GenError):
            R.generate(ch, red)

    @unittest.skipUnless(NVCC, "no nvcc")
    def test_sources_compile(self):
        srcs = []
        for d in ("f32", "f16", "bf16"):
            for rows, n in ((1, 1024), (16, 1024), (3, 8192), (3, 1001), (128, 64), (16, 5120)):
                srcs.append(R.generate(*hf_rms(d, rows, n, residual=d != "f32"))[1])
        srcs.append(R.generate(*hf_rms("bf16", 3, 256, False, outs=(1, 2, 3, 7)))[1])
        ptxas = os.path.join(os.path.dirname(NVCC), "ptxas")

        def build(i_src):
            # -ptx to read the float ops, then ptxas: what -cubin does
            i, src = i_src
            p = os.path.join(tmp, "r%d.cu" % i)
            with open(p, "w") as f:
                f.write(src)
            r = subprocess.run([NVCC, "-arch=sm_90", "-ptx", "-o", p + ".ptx", p],
                               capture_output=True, text=True)
            if r.returncode == 0 and os.path.exists(ptxas):
                r = subprocess.run([ptxas, "-arch=sm_90", "-o", os.devnull, p + ".ptx"],
                                   capture_output=True, text=True)
            return r, p + ".ptx"
        with tempfile.TemporaryDirectory() as tmp:
            with ThreadPoolExecutor(8) as ex:
                built = list(ex.map(build, enumerate(srcs)))
            for i, (r, path) in enumerate(built):
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                with open(path) as f:
                    ptx = f.read()
                # every sum and product an _rn intrinsic: nothing left to contract
                self.assertIsNone(re.search(r"\b(add|sub|mul|fma)\.f32\b", ptx), i)
                # the values kept for pass 2 stay in registers
                self.assertNotIn("st.local", ptx, i)

# The generated kernel run on the host: a block is blockDim host threads, a
# std::barrier is __syncthreads, shuffles go through a buffer between two
# barriers, the _rn intrinsics are plain float operations (x86-64 SSE: round
# to nearest, no FMA contraction with -ffp-contract=off, no FTZ).
HOST = r"""
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
struct kp_dim3 { unsigned x, y, z; };
static thread_local kp_dim3 threadIdx, blockIdx;
static std::barrier<> *kp_bar;
static void __syncthreads() { kp_bar->arrive_and_wait(); }
static float __int_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static float __fadd_rn(float a, float b) { return a + b; }
static float __fmul_rn(float a, float b) { return a * b; }
static float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static float kp_buf[512];
static float __shfl_down_sync(unsigned, float v, int off, int)
{
	const int t = (int)threadIdx.x;
	kp_buf[t] = v;
	__syncthreads();
	const float r = (t % 32) + off < 32 ? kp_buf[t + off] : v;
	__syncthreads();
	return r;
}
#define __global__
#define __launch_bounds__(n)
#define __shared__ static
"""

DRIVER = r"""
int main(int argc, char **argv)
{
	std::vector<float> x0(NUMEL), x1(NUMEL), y0(NUMEL), y1(ROWS), y2(NUMEL);
	FILE *f = fopen(argv[1], "rb");
	if (!f || fread(x0.data(), 4, NUMEL, f) != NUMEL || fread(x1.data(), 4, NUMEL, f) != NUMEL)
		return 2;
	fclose(f);
	for (unsigned b = 0; b < GRID; b++) {
		std::barrier<> bar(BLOCK);
		kp_bar = &bar;
		std::vector<std::thread> ts;
		for (unsigned t = 0; t < BLOCK; t++)
			ts.emplace_back([&, t, b] {
				threadIdx = {t, 0, 0};
				blockIdx = {b, 0, 0};
				KERNEL(x0.data(), x1.data(), y0.data(), y1.data(), y2.data());
			});
		for (auto &t : ts)
			t.join();
	}
	f = fopen(argv[2], "wb");
	fwrite(y0.data(), 4, NUMEL, f);
	fwrite(y1.data(), 4, ROWS, f);
	fwrite(y2.data(), 4, NUMEL, f);
	fclose(f);
	return 0;
}
"""
GXX = shutil.which("g++")


def f32s(vals):
    return [A.f32(v) for v in vals]


def aten_mean(X, rows, n):
    """ATen's mean of each row of X (floats of float32 values), as
    Reduce.cuh computes it for aten_rms's config and variant flags: an
    independent transcription of run(), input_vectorized_thread_reduce_impl,
    thread_reduce_impl, block_x_reduce and block_y_reduce as loops over
    threads, every add rounded to float."""
    c = R.config(rows, n)
    bw, bh = c.bw, c.bh
    add = lambda a, b: A.f32(a + b)
    out = [None] * rows
    for blk in range(c.grid):
        vals = []
        for tid in range(bw * bh):
            tx, ty = tid % bw, tid // bw
            row = blk * c.step_out + (0 if c.split else ty)
            idx = tx + ty * c.mult1
            rt = not c.split or ty == 0
            if row >= rows or idx >= n:
                vals.append(0.0)
                continue
            acc = [0.0] * 4
            if c.vec:
                base, end, shift = row * n, n, (row * n) % 4     # 16-byte aligned tensor
                if shift > 0:
                    base -= shift
                    end += shift
                    if shift <= tx < 4 and rt:
                        acc[0] = add(acc[0], X[base + tx])
                    end -= 4
                    base += 4
                while idx * 4 + 3 < end:
                    for i in range(4):
                        acc[i] = add(acc[i], X[base + idx * 4 + i])
                    idx += c.step
                j = end - end % 4 + tx
                if rt and j < end:
                    acc[0] = add(acc[0], X[base + j])
            else:
                while idx + 3 * c.step < n:
                    for i in range(4):
                        acc[i] = add(acc[i], X[row * n + idx + i * c.step])
                    idx += 4 * c.step
                for i in range(4):
                    if idx >= n:
                        break
                    acc[i] = add(acc[i], X[row * n + idx])
                    idx += c.step
            vals.append(add(add(add(acc[0], acc[1]), acc[2]), acc[3]))

        def block_x(v):
            dim_x = bw
            if dim_x > 32:
                off = dim_x // 2
                while off >= 32:
                    v = [add(v[t], v[t + off]) if t % bw < off else v[t] for t in range(len(v))]
                    off //= 2
                dim_x = 32
            offs = [1 << k for k in range(dim_x.bit_length() - 1)]
            for off in (reversed(offs) if R.SHUFFLE_DESCENDING else offs):
                v = [add(v[t], v[t + off] if t % 32 + off < 32 else v[t]) for t in range(len(v))]
            return v

        def block_y(v):
            off = bh // 2
            while off > 0:
                v = [add(v[t], v[t + off * bw]) if t // bw < off else v[t] for t in range(len(v))]
                off //= 2
            return v
        if R.X_BEFORE_Y:
            vals = block_x(vals)
            vals = block_y(vals) if c.split else vals
        else:
            vals = block_x(block_y(vals) if c.split else vals)
        for ty in range(1 if c.split else bh):
            row = blk * c.step_out + ty
            if row < rows:
                out[row] = A.f32(vals[ty * bw] * R.factor(rows, n))
    return out


@unittest.skipUnless(GXX, "no g++")
class TestHostRun(unittest.TestCase):
    """s = x0 + x1 (kept), mean(s * s) (kept), v = s * (mean + 1e-6) (f32):
    the generated kernel run on the host against aten_mean and the
    elementwise values, bit for bit: every element summed once into the
    accumulator ATen uses, in its order, and written once."""

    # one vec4 a thread; unaligned rows; a warp a row; warps splitting a row;
    # two rows a warp; no vec4; pass 2 computing again
    CASES = ((1, 1024), (3, 1001), (16, 1024), (3, 8192), (4, 16), (2, 64), (2, 5120))

    def chain(self, rows, n):
        N = A.Node
        nodes = [N("add", [("x", 0), ("x", 1)], "f32", {"alpha": 1.0}),
                 N("mul", [("n", 0), ("n", 0)], "f32", {}),
                 N("mean", [("n", 1)], "f32", {}),
                 N("add", [("n", 2), ("s", 1e-6)], "f32", {"alpha": 1.0}),
                 N("mul", [("n", 0), ("n", 3)], "f32", {})]
        return (G.Chain(nodes, [G.Ext("f32"), G.Ext("f32")], rows * n, [0, 2, 4]),
                R.Red(2, n, [2, 3]))

    def test_host_run(self):
        import random
        import struct
        rng = random.Random(5)

        def build(case):
            rows, n = case
            name, src = R.generate(*self.chain(rows, n))
            grid, block = R.launch_dims(rows, n)
            p = os.path.join(tmp, "h%d_%d" % (rows, n))
            with open(p + ".cc", "w") as f:
                f.write(HOST + src.replace(G._PRELUDE, "") + DRIVER.replace(
                    "NUMEL", str(rows * n)).replace("ROWS", str(rows)).replace(
                    "GRID", str(grid)).replace("BLOCK", str(block)).replace("KERNEL", name))
            r = subprocess.run([GXX, "-std=c++20", "-O1", "-ffp-contract=off", "-pthread",
                                "-w", "-o", p, p + ".cc"], capture_output=True, text=True)
            return r, p
        with tempfile.TemporaryDirectory() as tmp:
            with ThreadPoolExecutor(8) as ex:
                built = list(ex.map(build, self.CASES))
            for (rows, n), (r, exe) in zip(self.CASES, built):
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                x0 = f32s(rng.gauss(0, 2) * (100 if i % 7 == 0 else 1) for i in range(rows * n))
                x1 = f32s(rng.gauss(0, 1) for i in range(rows * n))
                with open(exe + ".in", "wb") as f:
                    f.write(struct.pack("<%df" % (2 * rows * n), *(x0 + x1)))
                r = subprocess.run([exe, exe + ".in", exe + ".out"], capture_output=True)
                self.assertEqual(r.returncode, 0, (rows, n))
                with open(exe + ".out", "rb") as f:
                    out = struct.unpack("<%df" % (2 * rows * n + rows), f.read())
                s = [A.f32(a + b) for a, b in zip(x0, x1)]
                mean = aten_mean([A.f32(v * v) for v in s], rows, n)
                v = [A.f32(s[i] * A.f32(mean[i // n] + A.f32(1e-6))) for i in range(rows * n)]
                self.assertEqual(list(out[:rows * n]), s, (rows, n))
                self.assertEqual(list(out[rows * n:rows * n + rows]), mean, (rows, n))
                self.assertEqual(list(out[rows * n + rows:]), v, (rows, n))


if __name__ == "__main__":
    unittest.main()
