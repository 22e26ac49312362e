"""Every op of kplan's ATen pointwise catalog, fused, against eager ATen, bit for bit.

    PYTHONPATH=python python3 tests/gpu/torch_fusion_ops.py [--lib build/lib/libkplanrt.so]

For each dtype (fp32, fp16, bf16) and each op (and each special case of
pow, scalar and broadcast operand), on random inputs seeded with NaN, +-inf,
+-0, denormals and values at the dtype's edges: the op alone through a
generated kernel (min_ops=1), then random chains of 2..8 ops and the chains
models have (GPT-2's GELU, Llama's SwiGLU, RMSNorm's tail), each compared
with eager ATen bit for bit (NaN payloads included). Then chains over
strided tensors (transposed and permuted views, slices with gaps or steps,
expands, outer products, a RoPE of q/k made by view + transpose, a SwiGLU of
a fused gate_up projection's halves): bit for bit again, AND the fused
outputs' sizes and strides must be eager's (ATen gives a pointwise op's
output its inputs' memory order; a later GEMM or SDPA may choose by it), and
each must fuse at least the ops it names. Outside a capture the fused kernel
simply runs, so this needs no graph. Exit status 0 when every case in exact
mode is bit-identical (and, for the strided cases, of eager's layout and
fused). The last lines are a table.

Chains ending in a LayerNorm (kplan.aten_norm): native_layer_norm after a
one-op chain and after a residual add (F.layer_norm, and the op itself with
mean and rstd), M in {1, 7, 128}, N in {768, 1024, 1600, 4096, 5120, 256,
12}, f32/f16/bf16, weight+bias / weight / none, rows of large magnitude, of
a large offset and of constants: out, mean, rstd and the kept sum against
eager ATen bit for bit; an unaligned weight and N % 4 != 0 must run unfused
(ATen's other kernels). Only these: --layer-norm (last line
"torch_fusion_ops layer_norm: ...").

RMSNorm written as ops (kplan.aten_rms: the mean over the last dim and the
ops after it join the chain): Hugging Face's LlamaRMSNorm on [1, M, N] after
nothing and after a residual add, its variance and rstd kept too, and
Gemma's (1 + w.float()) form, M in {1, 3, 16, 128}, N in {64, 1001, 1024,
4096, 5120, 8192}, f32/f16/bf16, with rows of large values, of a constant
and of tiny values (the last two forms for N in {1001, 1024, 8192}): every
output against eager ATen bit for bit, and each case must fuse its mean
(kt.stats()["fusion"]["reductions"]); a mean of f16, one without keepdim
and one ATen reduces across blocks must not. Only these: --rms-norm (last
line "torch_fusion_ops rms_norm: ..."). The chain "rms_norm" above (inputs
with NaN and inf) fuses its mean too.
"""
import argparse
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

from kplan import _rt, aten_fuse, aten_ops  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
N = 4096 + 64


def specials(dt):
    if dt == torch.float16:
        den = [2 ** -24, -2 ** -24, 2 ** -15, 6.1e-5, -3e-6]
        big = [65504.0, -65504.0, 60000.0, 11.0, -11.0]
    elif dt == torch.bfloat16:
        den = [1e-39, -1e-39, 9.2e-41, 1e-38]
        big = [3.0e38, -3.0e38, 1e20, 89.0, -89.0]
    else:
        den = [1e-40, -1e-40, 1.4e-45, 1.1e-38, -1e-45]
        big = [3.0e38, -3.0e38, 1e20, 89.0, -104.0]
    return [float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0,
            0.5, -0.5, 2.0, 3.0, 1e-3, -1e-3] + den + big


def make(dt, seed, scale=3.0, positive=False, n=N):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, generator=g, device="cuda", dtype=torch.float32) * scale
    if positive:
        x = x.abs()
    sp = torch.tensor(specials(dt), dtype=torch.float32, device="cuda")
    k = sp.numel()
    pos = torch.randperm(n, generator=g, device="cuda")[:3 * k]
    x[pos] = sp.repeat(3)
    return x.to(dt).reshape(4, n // 4)


def bits(t):
    return t.view({8: torch.int64, 4: torch.int32}.get(t.element_size(), torch.int16))


def mismatches(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return -1, "shape/dtype %s %s vs %s %s" % (tuple(a.shape), a.dtype, tuple(b.shape),
                                                   b.dtype)
    ne = bits(a) != bits(b)
    n = int(ne.sum())
    if not n:
        return 0, ""
    i = int(ne.flatten().nonzero()[0])
    fa, fb = a.flatten()[i], b.flatten()[i]
    return n, "first at %d: eager %r (0x%x) fused %r (0x%x)" % (
        i, float(fa), int(bits(fa.reshape(1))) & 0xffffffff, float(fb),
        int(bits(fb.reshape(1))) & 0xffffffff)


def unary_ops():
    F = torch.nn.functional
    return [
        ("neg", lambda x: -x), ("abs", torch.abs), ("exp", torch.exp), ("log", torch.log),
        ("tanh", torch.tanh), ("sigmoid", torch.sigmoid), ("relu", torch.relu),
        ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
        ("silu", F.silu), ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt),
        ("reciprocal", torch.reciprocal),
        ("pow2", lambda x: x ** 2), ("pow3", lambda x: torch.pow(x, 3.0)),
        ("pow0.5", lambda x: x ** 0.5), ("pow-0.5", lambda x: x ** -0.5),
        ("pow-1", lambda x: x ** -1), ("pow-2", lambda x: x ** -2),
        ("pow1.7", lambda x: x ** 1.7), ("pow-2.5", lambda x: x ** -2.5),
        ("pow0", lambda x: x ** 0), ("pow1", lambda x: x ** 1),
        ("clamp", lambda x: x.clamp(-1.0, 2.5)), ("clamp_min", lambda x: x.clamp_min(0.1)),
        ("clamp_max", lambda x: x.clamp(max=-0.5)),
        ("to_f32", lambda x: x.float()), ("to_f16", lambda x: x.half()),
        ("to_bf16", lambda x: x.bfloat16()), ("clone", lambda x: x.clone()),
        ("add_s", lambda x: x + 1.5), ("rsub_s", lambda x: 1.5 - x), ("mul_s", lambda x: x * 0.1),
        ("div_s3", lambda x: x / 3.0), ("div_s8", lambda x: x / 0.125),
        ("rdiv_s", lambda x: 2.0 / x), ("sub_s", lambda x: x - 0.7),
    ]


def binary_ops():
    return [
        ("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
        ("div", lambda x, y: x / y), ("add_a2", lambda x, y: torch.add(x, y, alpha=2)),
        ("sub_a.5", lambda x, y: torch.sub(x, y, alpha=0.5)),
        ("add_row", lambda x, y: x + y[0]), ("mul_scal", lambda x, y: x * y[0, :1]),
        ("mul_col", lambda x, y: x * y[:, :1].contiguous()),
        ("where", lambda x, y: torch.where(x > y, x, y)),
        ("masked_fill", lambda x, y: x.masked_fill(y > 0, -1e4)),
    ]


def chains():
    F = torch.nn.functional
    c = 0.7978845608028654
    return [
        ("gelu_new", lambda x, y: 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 *
                                                                   torch.pow(x, 3.0))))),
        ("swiglu", lambda x, y: F.silu(x) * y),
        # a GEMM between the activation and the product runs first, the chain goes on
        ("silu_gemm_mul", lambda x, y: F.silu(x) * torch.mm(
            y, torch.eye(y.shape[1], dtype=y.dtype, device=y.device))),
        ("bias_gelu_res", lambda x, y: F.gelu(x + y[0], approximate="tanh") + y),
        ("rms_tail", lambda x, y: (x.float() * torch.rsqrt(y.float().abs() + 1e-6)).to(x.dtype)
         * y[0]),
        ("sigmoid_gate", lambda x, y: torch.sigmoid(x) * y + (1 - torch.sigmoid(x)) * x),
        ("softplusish", lambda x, y: torch.log(1.0 + torch.exp(-x.abs())) + x.clamp_min(0)),
        ("mask_scale", lambda x, y: (x / 8.0).masked_fill(y < 0, float("-inf")) * 2),
        # an RMSNorm: the per-row scale is broadcast over the row
        ("rms_norm", lambda x, y: (x.float() * torch.rsqrt(
            x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * y[0]),
        ("two_streams", two_streams),
        ("data_ptr", lambda x, y: _read_ptr(torch.tanh(x) * 2) + y),
        # scalar_tensor values baked into the kernel: SDPA's bool mask as a bias,
        # values that round (0.1), f16's extremes, inf and NaN (a finite value
        # beyond the dtype's range raises in eager, and so it does under kplan)
        ("sdpa_mask", lambda x, y: torch.where(y > 0, _st(0.0, x), _st(float("-inf"), x))),
        ("scalar_consts", lambda x, y: torch.where(y > 0, x * _st(0.1, x), _st(-65504.0, x))
         + _st(65504.0, x) * torch.where(y > 1, _st(float("inf"), x), _st(float("nan"), x))),
        # a value read by a view first: filled, then read as a one-element tensor
        ("const_viewed", lambda x, y: x * _st(3.0, x).reshape(1) + y),
        # constant_pad_nd ending the chain: SDPA's padded mask bias, a padded
        # chain on every side with a value that rounds
        ("sdpa_mask_pad", lambda x, y: torch.nn.functional.pad(
            torch.where(y > 0, _st(0.0, x), _st(float("-inf"), x)), (0, 5, 1, 0))),
        ("pad_of_chain", lambda x, y: torch.nn.functional.pad(torch.tanh(x) * 2 + y,
                                                              (3, 1, 0, 2), value=-0.1)),
        # cat ending the chain: the chain's value with other tensors (strided
        # views among them), first, in the middle, along either dim
        ("cat_of_chain", lambda x, y: torch.cat((torch.tanh(x) * 2, y), dim=-1)),
        ("cat_chain_middle", lambda x, y: torch.cat((y[:, :7], -(x + y), y.t().t()[:, 3:5]),
                                                    dim=1)),
        ("cat_dim0", lambda x, y: torch.cat((y[1:3], torch.exp(x) - 1.0), dim=0)),
        ("rotate_half_chain", lambda x, y: rotate_half(x * 0.5) * y),
    ]


def _st(v, like):
    return torch.scalar_tensor(v, dtype=like.dtype, device=like.device)


def two_streams(x, y):
    """A chain value read on another stream after wait_stream."""
    a = torch.tanh(x) * 2
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        b = (a + y) * 0.5
    torch.cuda.current_stream().wait_stream(s)
    return b


def _read_ptr(t):
    t.data_ptr()        # as a Triton launcher would
    return t


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat((-t[..., h:], t[..., :h]), dim=-1)


def rope(B, S, H, D):
    """HF Llama's apply_rotary_pos_emb on q of [B, H, S, D] made as the
    attention makes it, view(B, S, H, D).transpose(1, 2); cos and sin
    [B, 1, S, D] (unsqueeze(1) of the rotary embedding's [B, S, D])."""
    def f(x, y):
        q = x.reshape(-1)[:B * S * H * D].view(B, S, H, D).transpose(1, 2)
        cs = y.reshape(-1)[:2 * B * S * D]
        cos = cs[:B * S * D].view(B, S, D).unsqueeze(1)
        sin = cs[B * S * D:].view(B, S, D).unsqueeze(1)
        return q * cos + rotate_half(q) * sin
    return f


def kv_update(S, rope=True):
    """StaticCache's update after RoPE: a cache (zeros) gets k * w + 1 for S
    tokens at positions 5.. along dim 2 (index_copy_), k made as the
    attention makes it, view(1, S, 4, 64).transpose(1, 2); returns the cache.
    rope=False: k itself (V's update, straight from its GEMM)."""
    def f(x, y):
        cache = torch.zeros(1, 4, 16, 64, dtype=x.dtype, device=x.device)
        k = x.reshape(-1)[:4 * S * 64].view(1, S, 4, 64).transpose(1, 2)
        pos = torch.arange(5, 5 + S, device=x.device)
        cache.index_copy_(2, pos, k * y.reshape(-1)[:64] + 1.0 if rope else k)
        return cache
    return f


def positions(x, y):
    """StaticCache's position arithmetic at each layer: arange + a 0-dim
    int64 counter, the counter then advanced in place; then arithmetic on
    the positions (int64 products and differences, wrapping)."""
    cl = torch.full((), 7, dtype=torch.int64, device=x.device)
    p = torch.arange(3, device=x.device) + cl
    cl.add_(1)
    big = torch.arange(5, 2 ** 40, 2 ** 37, device=x.device)
    return torch.cat([p * 2 - cl, big * (2 ** 30) + 9, torch.arange(3, -4, -2, device=x.device) - p[:1]])


def strided_cases():
    """(name, fn(x, y) of [4, 1040] inputs, the least ops fused): chains over
    non-contiguous views. Each must match eager bit for bit AND in strides."""
    F = torch.nn.functional
    return [
        ("transposed", lambda x, y: torch.tanh(x.t()) * y.t() + 1.0, 3),
        ("transposed_one", lambda x, y: F.silu(x.t()) * y.t().contiguous(), 3),
        ("transposed_cast", lambda x, y: (x.t().float() * 2.0).to(x.dtype) - y.t(), 2),
        ("permuted_3d", lambda x, y: torch.exp(x.reshape(4, 40, 26).permute(2, 0, 1)) *
         y.reshape(4, 40, 26).permute(2, 0, 1), 2),
        ("permuted_vs_contig", lambda x, y: x.reshape(4, 40, 26).permute(2, 0, 1) *
         y.reshape(26, 4, 40) + 0.5, 2),
        ("slices_halves", lambda x, y: F.silu(x[:, :520]) * x[:, 520:] + y[:, 1::2], 3),
        ("slice_step", lambda x, y: torch.sigmoid(x[:, ::2]) * y[:, 1::2], 2),
        ("slice_rows", lambda x, y: torch.rsqrt(x[1:3].abs() + 1e-3) * y[::2], 4),
        ("expand_row", lambda x, y: torch.tanh(y) * x[:1].expand(4, -1) + x[2:3], 3),
        ("expand_col", lambda x, y: (y - x[:, :1].expand(-1, 1040)) * 0.25, 2),
        ("outer", lambda x, y: torch.tanh(x[:, :1] * y[:1, :]) - 1.0, 3),
        ("where_t", lambda x, y: torch.where(x.t() > 0, y.t() * 2.0, x.t()) / 3.0, 3),
        ("mask_fill_t", lambda x, y: (x.t() * 0.125).masked_fill(y.t() < 0, -1e4) + 1.0, 3),
        ("swiglu_gate_up", lambda x, y: F.silu(x.reshape(2, 2080)[:, :1040]) *
         x.reshape(2, 2080)[:, 1040:] * y[0], 3),
        # RoPE: q*cos waits (parked) while -x2 (another shape) and the cat run
        # in one kernel; the mul and add after the cat join q*cos: all 5 ops.
        # Prefill's q is transposed, so is -x2: the cat refuses that layout
        # and runs eagerly, reading -x2 only; q*cos, *sin and + still fuse
        ("rope_decode", rope(1, 1, 16, 64), 5),
        ("rope_prefill", rope(1, 4, 16, 64), 3),
        # the KV cache's index_copy_ ends the chain: mul, add and the copy
        ("kv_update_decode", kv_update(1), 3),
        ("kv_update_prefill", kv_update(4), 3),
        ("kv_update_v", kv_update(1, rope=False), 2),
        # int64 position arithmetic: arange + counter (2 ops), * 2 - counter
        # (2), big * 2^30 + 9 wrapping past 2^63 (3 with its arange), the
        # last arange's difference (2)
        ("int64_positions", positions, 9),
        # GQA's repeat_kv: expand().reshape() copies the KV heads, a lone clone
        # that the generated kernel runs
        ("repeat_kv", lambda x, y: x.reshape(1, 4, 260, 4)[:, :, None].expand(
            1, 4, 4, 260, 4).reshape(1, 16, 260, 4), 1),
    ]


def layout_mismatch(ref, out):
    """'' when out has ref's sizes and strides, else what differs."""
    if tuple(ref.shape) != tuple(out.shape) or ref.stride() != out.stride():
        return "layout: eager %s strides %s, fused %s strides %s" % (
            tuple(ref.shape), ref.stride(), tuple(out.shape), out.stride())
    return ""


def random_chain(rng):
    un = unary_ops()
    bi = [b for b in binary_ops() if b[0] not in ("where", "masked_fill")]
    steps = []
    for _ in range(rng.randint(2, 8)):
        if rng.random() < 0.6:
            steps.append(("u",) + rng.choice(un))
        else:
            steps.append(("b",) + rng.choice(bi))
    name = "+".join(s[1] for s in steps)

    def f(x, y):
        v = x
        for kind, _n, fn in steps:
            dt = v.dtype
            v = fn(v) if kind == "u" else fn(v, y.to(v.dtype))
            if v.dtype != dt:
                v = v.to(dt)
        return v
    return name, f


def run_case(crt, fn, args, min_ops, mode="exact"):
    with torch.no_grad():
        ref = fn(*args)
        st = aten_fuse.Stats()
        fz = aten_fuse.Fuser(crt, mode=mode, min_ops=min_ops, stats=st)
        with aten_fuse.mode(fz):
            out = fn(*args)
        torch.cuda.synchronize()
    return ref, out, st


# -- a chain ending in a LayerNorm (kplan.aten_norm) ------------------------

LN_ROWS = (1, 7, 128)
LN_COLS = (768, 1024, 1600, 4096, 5120, 256, 12)


def ln_inputs(dt, m, n, seed):
    """x, r: [m, n] with rows of large magnitude, a large offset (mean far
    from 0 against the spread: Welford's case) and a row of constants."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, n, generator=g, device="cuda", dtype=torch.float32) * 2.0
    r = torch.randn(m, n, generator=g, device="cuda", dtype=torch.float32)
    big = 3.0e4 if dt == torch.float16 else 1.0e6
    if m > 1:
        x[1] *= big / 8                      # large magnitudes
        x[-1] = 3.0                          # a row of constants: var 0, rstd = rsqrt(eps)
        r[-1] = 0.25
    if m > 2:
        x[2] += 1000.0 if dt != torch.bfloat16 else 100.0   # mean >> spread
    if m == 1:
        x[0, ::3] *= 100.0
    return x.to(dt), r.to(dt)


def ln_params(dt, n, kind, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    w = (torch.randn(n, generator=g, device="cuda") * 0.5 + 1.0).to(dt)
    b = (torch.randn(n, generator=g, device="cuda") * 0.1).to(dt)
    if kind == "wb":
        return w, b
    if kind == "w":
        return w, None
    if kind == "b":
        return None, b
    return None, None


def _ln_alone(x, r, w, b, eps):
    # a one-op chain (a copy), then native_layer_norm of it: out, mean, rstd
    return torch.ops.aten.native_layer_norm(x.clone(), [x.shape[-1]], w, b, eps)


def _ln_residual(x, r, w, b, eps):
    # GPT-2's block: the residual sum (kept, the next add reads it), then the norm
    s = x + r
    y = torch.nn.functional.layer_norm(s, [x.shape[-1]], w, b, eps)
    return s, y


def _ln_residual_stats(x, r, w, b, eps):
    s = (x + r) * 0.5
    y, mean, rstd = torch.ops.aten.native_layer_norm(s, [x.shape[-1]], w, b, eps)
    return y, mean, rstd


def layer_norm_cases(crt, quick=False):
    """(dtype, case, mismatching elements, fused norms, detail) rows."""
    rows = []
    seed = 100
    for dn, dt in DTYPES.items():
        for m in LN_ROWS:
            for n in LN_COLS:
                kinds = ("wb", "w", "none") if not quick or n == 768 else ("wb",)
                for kind in kinds:
                    seed += 1
                    x, r = ln_inputs(dt, m, n, seed)
                    w, b = ln_params(dt, n, kind, seed)
                    for cname, fn in (("ln_alone", _ln_alone), ("ln_residual", _ln_residual),
                                      ("ln_residual_stats", _ln_residual_stats)):
                        if cname != "ln_alone" and kind == "w" and quick:
                            continue
                        rows.append(_ln_row(crt, dn, "%s %dx%d %s" % (cname, m, n, kind), fn,
                                            (x, r, w, b, 1e-5), 1))
        # an unaligned weight (a view at element 1): ATen's other kernels, not fused
        x, r = ln_inputs(dt, 7, 768, 7)
        wb = (torch.randn(769, device="cuda") * 0.5 + 1.0).to(dt)
        rows.append(_ln_row(crt, dn, "ln_residual unaligned-weight (not fused)", _ln_residual,
                            (x, r, wb[1:], None, 1e-5), 0))
        # a bias without a weight: not fused (aten_norm.BIAS_ONLY)
        x, r = ln_inputs(dt, 7, 768, 10)
        rows.append(_ln_row(crt, dn, "ln_residual bias-only (not fused)", _ln_residual,
                            (x, r) + ln_params(dt, 768, "b", 10) + (1e-5,), 0))
        # N % 4 != 0: the same
        x, r = ln_inputs(dt, 7, 770, 8)
        rows.append(_ln_row(crt, dn, "ln_residual 7x770 (not fused)", _ln_residual,
                            (x, r, None, None, 1e-5), 0))
        # another eps
        x, r = ln_inputs(dt, 7, 1024, 9)
        rows.append(_ln_row(crt, dn, "ln_residual eps=1e-6", _ln_residual,
                            (x, r) + ln_params(dt, 1024, "wb", 9) + (1e-6,), 1))
    return rows


def _fused_row(crt, dn, name, fn, args, want, counter):
    """One case through the dispatch mode against eager: (dtype, name,
    mismatching elements (-3: none, but Stats.<counter> is not want; -2: an
    error), Stats.<counter>, details)."""
    try:
        with torch.no_grad():
            ref = fn(*args)
            st = aten_fuse.Stats()
            fz = aten_fuse.Fuser(crt, mode="exact", min_ops=2, stats=st)
            with aten_fuse.mode(fz):
                out = fn(*args)
            torch.cuda.synchronize()
        if not isinstance(ref, tuple):
            ref, out = (ref,), (out,)
        n, det = 0, ""
        for i, (a, b) in enumerate(zip(ref, out)):
            k, d = mismatches(a, b)
            if k:
                n += k if k > 0 else 1
                det += "[output %d] %s " % (i, d)
        got = getattr(st, counter)
        if got != want:
            det = ("%s: refused %s fallbacks %s " % (
                "not fused" if want else "fused unexpectedly", st.refused, st.fallbacks) + det)
            if n == 0:
                n = -3
        return (dn, name, n, got, det)
    except Exception as e:  # noqa: BLE001
        return (dn, name, -2, 0, "error: %s: %s" % (type(e).__name__, e))


def _ln_row(crt, dn, name, fn, args, want_norms):
    return _fused_row(crt, dn, name, fn, args, want_norms, "norms")


# -- RMSNorm written as ops: a row mean inside the chain (kplan.aten_rms) --

RMS_ROWS = (1, 3, 16, 128)
RMS_COLS = (64, 1001, 1024, 4096, 5120, 8192)


def rms_inputs(dt, m, n, seed):
    """x, r: [1, m, n] with rows of large values, a constant and tiny values
    (squares below float's normal range; f16: its subnormals); w: [n]."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, n, generator=g, device="cuda", dtype=torch.float32) * 2.0
    r = torch.randn(m, n, generator=g, device="cuda", dtype=torch.float32)
    if m > 1:
        x[1] *= 100.0
        x[-1] = 3.0
        r[-1] = 0.25
    if m > 2:
        x[2] = x[2] * (1e-5 if dt == torch.float16 else 1e-21)
        r[2] = 0.0
    if m == 1:
        x[0, ::3] *= 100.0
    w = (torch.randn(n, generator=g, device="cuda") * 0.5 + 1.0).to(dt)
    return x.to(dt).unsqueeze(0), r.to(dt).unsqueeze(0), w


def _llama_rms(x, w, eps):
    # transformers' LlamaRMSNorm.forward
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return w * h.to(input_dtype)


def _rms_alone(x, r, w, eps):
    return _llama_rms(x, w, eps)


def _rms_residual(x, r, w, eps):
    # a decoder layer's residual add, kept for the next one, then the norm
    s = x + r
    return s, _llama_rms(s, w, eps)


def _rms_stats(x, r, w, eps):
    # the variance and rstd held as well: written once a row
    h = (x + r).to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return var, rstd, w * (h * rstd).to(x.dtype)


def _rms_gemma(x, r, w, eps):
    # Gemma's form: the weight's own ops (another shape) end the chain after the mul
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + w.float())).type_as(x)


def _rms_f16_mean(x, r, w, eps):
    # the mean of a 16-bit value: ATen's other config (vec 8), not fused
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rms_no_keepdim(x, r, w, eps):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1) + eps).unsqueeze(-1)).to(x.dtype)


def rms_norm_cases(crt):
    """(dtype, case, mismatching elements, fused reductions, detail) rows."""
    rows = []
    seed = 500
    for dn, dt in DTYPES.items():
        for m in RMS_ROWS:
            for n in RMS_COLS:
                seed += 1
                x, r, w = rms_inputs(dt, m, n, seed)
                for cname, fn in (("rms_alone", _rms_alone), ("rms_residual", _rms_residual),
                                  ("rms_stats", _rms_stats), ("rms_gemma", _rms_gemma)):
                    if cname in ("rms_stats", "rms_gemma") and n not in (1001, 1024, 8192):
                        continue
                    rows.append(_rms_row(crt, dn, "%s %dx%d" % (cname, m, n), fn,
                                         (x, r, w, 1e-6), 1))
        x, r, w = rms_inputs(dt, 3, 1024, 7)
        rows.append(_rms_row(crt, dn, "rms_alone eps=1e-5", _rms_alone, (x, r, w, 1e-5), 1))
        if dt != torch.float32:
            rows.append(_rms_row(crt, dn, "f16/bf16 mean (not fused)", _rms_f16_mean,
                                 (x, r, w, 1e-6), 0))
        rows.append(_rms_row(crt, dn, "mean without keepdim (not fused)", _rms_no_keepdim,
                             (x, r, w, 1e-6), 0))
        # 65536 values a row in one block: ATen may reduce across blocks, not fused
        x, r, w = rms_inputs(dt, 1, 1 << 17, 8)
        rows.append(_rms_row(crt, dn, "rms_alone 1x131072 (not fused)", _rms_alone,
                             (x, r, w, 1e-6), 0))
    return rows


def _rms_row(crt, dn, name, fn, args, want):
    return _fused_row(crt, dn, name, fn, args, want, "reductions")


def _section(what, fused, cases, quiet):
    """Run a section's cases (rows of _fused_row), print every one that
    mismatches or is not fused as expected: (rows, its summary line)."""
    t0 = time.time()
    rows = cases()
    for r in rows:
        if r[2] != 0 and not quiet:
            print("%%-5s %%-44.44s mismatches %%6d fused-%s %%d %%s" % fused % r)
    return rows, ("torch_fusion_ops %s: %d cases, %d mismatching or not fused as expected, "
                  "%d fused, %.1f s" % (what, len(rows), sum(1 for r in rows if r[2] != 0),
                                        sum(1 for r in rows if r[3] > 0), time.time() - t0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=None)
    ap.add_argument("--chains", type=int, default=40, help="random chains per dtype")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--layer-norm", action="store_true",
                    help="only the chains ending in a LayerNorm (kplan.aten_norm)")
    ap.add_argument("--no-layer-norm", action="store_true",
                    help="leave out the chains ending in a LayerNorm")
    ap.add_argument("--rms-norm", action="store_true",
                    help="only RMSNorm written as ops (kplan.aten_rms)")
    ap.add_argument("--no-rms-norm", action="store_true",
                    help="leave out RMSNorm written as ops")
    a = ap.parse_args()
    crt = _rt.Runtime.open(None, flags=_rt.KP_RT_CUDA, lib=a.lib)
    print("device: %s, torch %s, cuda %s" % (torch.cuda.get_device_name(), torch.__version__,
                                             torch.version.cuda))
    rms, rms_line = _section("rms_norm", "means", lambda: rms_norm_cases(crt)
                             if not a.no_rms_norm and not a.layer_norm else [], False)
    if a.rms_norm:
        print(rms_line)
        return 1 if any(r[2] for r in rms) else 0
    ln, ln_line = _section("layer_norm", "norms", lambda: layer_norm_cases(crt)
                           if not a.no_layer_norm else [], a.quiet)
    if a.layer_norm:
        print(ln_line)
        return 1 if any(r[2] for r in ln) else 0
    rows = []      # (dtype, case, mismatches, fused ops, detail)
    srows = []     # strided cases: (dtype, case, mismatches, fused ops, strided ops, detail)
    t0 = time.time()
    rng = random.Random(31)
    for dn, dt in DTYPES.items():
        x, y = make(dt, 1), make(dt, 2)
        xp = make(dt, 3, positive=True)
        cases = []
        for name, f in unary_ops():
            cases.append((name, f, (x,), 1))
            if name in ("log", "sqrt", "rsqrt", "pow0.5", "pow-0.5", "pow1.7"):
                cases.append((name + "(+)", f, (xp,), 1))
        for name, f in binary_ops():
            cases.append((name, f, (x, y), 1))
        for name, f in chains():
            cases.append((name, f, (x, y), 2))
        for _ in range(a.chains):
            name, f = random_chain(rng)
            cases.append(("rnd:" + name, f, (x, y), 2))
        for name, f, args, mo in cases:
            try:
                ref, out, st = run_case(crt, f, args, mo)
                n, det = mismatches(ref, out)
                if st.chains == 0:
                    det = ("not fused: refused %s fallbacks %s " % (st.refused, st.fallbacks)
                           + det)
                rows.append((dn, name, n, st.ops_fused, det))
            except Exception as e:  # noqa: BLE001
                rows.append((dn, name, -2, 0, "error: %s" % e))
        # strided inputs: bits, layout, and at least the ops named fused
        for name, f, least in strided_cases():
            try:
                ref, out, st = run_case(crt, f, (x, y), 2)
                n, det = mismatches(ref, out)
                lay = layout_mismatch(ref, out)
                if lay and n == 0:
                    n = -3
                det = " ".join(v for v in (lay, det) if v)
                if st.ops_fused < least:
                    det = ("fused %d ops, expected at least %d: refused %s fallbacks %s "
                           % (st.ops_fused, least, st.refused, st.fallbacks) + det)
                    if n == 0:
                        n = -4
                rows.append((dn, "strided:" + name, n, st.ops_fused, det))
                srows.append((dn, name, n, st.ops_fused, st.strided, det))
            except Exception as e:  # noqa: BLE001
                rows.append((dn, "strided:" + name, -2, 0, "error: %s" % e))
                srows.append((dn, name, -2, 0, 0, "error: %s" % e))
    # the variants the catalog chose between (aten_ops): which one eager gives
    variants = []
    for dn in ("f16", "bf16"):
        dt = DTYPES[dn]
        x = make(dt, 1)
        for flag, vals, fn in (("SIGMOID_HALF_ROUNDING", ("once", "each"), torch.sigmoid),
                               ("NEG_HALF_BITFLIP", (True, False), lambda v: -v)):
            keep = getattr(aten_ops, flag)
            for v in vals:
                setattr(aten_ops, flag, v)
                try:
                    ref, out, st = run_case(crt, fn, (x,), 1)
                    variants.append((dn, flag, v, mismatches(ref, out)[0]))
                except Exception as e:  # noqa: BLE001
                    print("variant %s %s=%s: %s" % (dn, flag, v, e))
                finally:
                    setattr(aten_ops, flag, keep)
    # tolerant mode: how far from eager
    tol = []
    for dn, dt in DTYPES.items():
        x, y = make(dt, 1, scale=2.0), make(dt, 2, scale=2.0)
        for name, f in chains()[:3]:
            try:
                ref, out, st = run_case(crt, f, (x, y), 2, mode="tolerant")
            except Exception as e:  # noqa: BLE001
                print("tolerant %s %s: %s" % (dn, name, e))
                continue
            fin = torch.isfinite(ref.float()) & torch.isfinite(out.float())
            d = (ref.float() - out.float()).abs()[fin]
            rel = d / ref.float().abs()[fin].clamp_min(1e-3)
            tol.append((dn, name, float(d.max()) if d.numel() else 0.0,
                        float(rel.max()) if rel.numel() else 0.0, mismatches(ref, out)[0]))
    # in a captured region with verify: the fused replay against the eager body
    graph = []
    try:
        import kplan.torch as kt
        for dn, dt in DTYPES.items():
            g = torch.Generator(device="cuda").manual_seed(5)
            xs = torch.randn(8, 3072, generator=g, device="cuda").to(dt)
            ys = torch.randn(8, 3072, generator=g, device="cuda").to(dt)
            rt = kt.Runtime(_rt.Runtime.open(None, flags=_rt.KP_RT_CUDA, lib=a.lib), None,
                            policy="graph", verify=3, fuse="exact")
            for name, f in chains()[:4]:
                reg = kt.Region(f, "ops-" + name)
                with torch.no_grad():
                    for _ in range(6):
                        out = rt._call(reg, (xs, ys), {})
                    ref = f(xs, ys)
                torch.cuda.synchronize()
                graph.append((dn, name, mismatches(ref, out)[0]))
            st = rt.stats()
            graph.append((dn, "verified %d, eager %s, failures %s, fusion chains %d"
                          % (st["verified"], st["eager_by_reason"], st["failures"],
                             st["fusion"]["chains"]), 0))
            rt.close()
    except Exception as e:  # noqa: BLE001
        graph.append(("-", "graph check: %s: %s" % (type(e).__name__, e), -2))
    el = time.time() - t0
    bad = [r for r in rows if r[2] != 0]
    nf = [r for r in rows if r[3] == 0]
    for r in rows:      # a mismatch always; --quiet leaves out the cases not fused
        if r[2] != 0 or (r[3] == 0 and not a.quiet):
            print("%-5s %-40.40s mismatches %6d fused-ops %3d %s" % r)
    print("\nvariants (mismatching elements with each choice):")
    for r in variants:
        print("  %-5s %-22s %-6s %d" % r)
    print("\ntolerant mode, max |fused - eager| (abs, rel) and elements differing:")
    for r in tol:
        print("  %-5s %-14s %.3g %.3g %d" % r)
    print("\nin a captured region (verify=3), mismatching elements against eager:")
    for r in graph:
        print("  %-5s %-60s %d" % r)
    print("\nstrided inputs (mismatching elements; -3 layout differs from eager's, -4 fused "
          "fewer ops than expected), fused ops, ops deferred strided:")
    for r in srows:
        print("  %-5s %-20s %3d %3d %3d %s" % r)
    print("\n| dtype | cases | bit-identical | mismatching | not fused |")
    print("| --- | --- | --- | --- | --- |")
    for dn in DTYPES:
        rs = [r for r in rows if r[0] == dn]
        print("| %s | %d | %d | %d | %d |" % (dn, len(rs), sum(1 for r in rs if r[2] == 0),
                                               sum(1 for r in rs if r[2] != 0),
                                               sum(1 for r in rs if r[3] == 0)))
    print("torch_fusion_ops strided: %d cases, %d mismatching bits, %d of another layout, "
          "%d fused fewer ops than expected" % (
              len(srows), sum(1 for r in srows if r[2] not in (0, -3, -4)),
              sum(1 for r in srows if r[2] == -3), sum(1 for r in srows if r[2] == -4)))
    print("torch_fusion_ops: %d cases, %d mismatching, %d not fused, %.1f s"
          % (len(rows), len(bad), len(nf), el))
    print(ln_line)
    print(rms_line)
    return 1 if bad or any(r[2] for r in ln + rms) or any(r[2] != 0 for r in graph) else 0


if __name__ == "__main__":
    sys.exit(main())
