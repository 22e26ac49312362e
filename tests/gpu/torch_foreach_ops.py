"""kplan.aten_foreach against eager ATen, bit for bit: every `_foreach_*` op
it fuses, then whole optimizer steps (torch.optim's foreach implementation).

    PYTHONPATH=python python3 tests/gpu/torch_foreach_ops.py [--lib build/lib/libkplanrt.so]

Each op runs alone through a generated program (min_ops=1) on lists of
tensors of several shapes (a 0-dim lane, odd sizes, a 4097-element lane, a
GPT-2-sized matrix), filled with random values seeded with NaN, +-inf, +-0,
denormals and values near float's edges; every list it writes and every list
it returns is compared with eager's bit for bit. The optimizer steps (AdamW
and Adam with capturable=True, AdamW with amsgrad, whose _foreach_maximum_
is not fused, SGD with momentum and Nesterov) run 5 steps on two copies of
the same parameters, eagerly and under the fusion mode, and compare every
parameter and every state tensor after each step; each must fuse a program.
Outside a capture the generated kernels simply run, so this needs no graph.
Exit status 0 when every case matches and fused. The last line is a summary.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

from kplan import _rt, aten_fuse  # noqa: E402

SHAPES = [(1000, 7), (4097,), (768,), (3, 5), (), (768, 3072)]
SPECIALS = [float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0,
            0.5, 2.0, 1e-3, 1e-40, -1e-40, 1.4e-45, 1.1e-38, 3.0e38, -3.0e38, 1e20, 89.0]


def make(seed, shapes=SHAPES, positive=False, specials=True, scale=3.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for s in shapes:
        t = torch.randn(s, generator=g, device="cuda") * scale
        if specials and t.numel() > 40:
            sp = torch.tensor(SPECIALS, device="cuda")
            t.view(-1)[7:7 + sp.numel()] = sp
        out.append(t.abs() if positive else t)
    return out


def clone(ls):
    return [t.clone() for t in ls]


def bits(t):
    return t.contiguous().view(torch.int32)


def mismatches(a, b):
    n = 0
    for x, y in zip(a, b):
        n += int((bits(x) != bits(y)).sum())
    return n


def op_cases():
    """(name, fn(lists) -> outputs or None, lists to make: (seed, small, positive))."""
    F = torch
    cases = []
    for op in ("add", "sub", "mul", "div"):
        for s in (1, 0.999999, 1e-8, -3.5, 0.0001):
            cases.append(("%s_.Scalar %g" % (op, s),
                          lambda ls, op=op, s=s: getattr(F, "_foreach_%s_" % op)(ls[0], s),
                          [(1, False, False)]))
        cases.append(("%s.Scalar" % op, lambda ls, op=op: getattr(F, "_foreach_%s" % op)(
            ls[0], 0.3), [(1, False, False)]))
    for op, alphas in (("add", (1, -0.001, 0.3)), ("sub", (1, 0.3)), ("mul", (None,)),
                       ("div", (None,))):
        for a in alphas:
            kw = {} if a is None else {"alpha": a}
            cases.append(("%s_.List %s" % (op, kw),
                          lambda ls, op=op, kw=kw: getattr(F, "_foreach_%s_" % op)(
                              ls[0], ls[1], **kw), [(1, False, False), (2, False, False)]))
            cases.append(("%s.List %s" % (op, kw),
                          lambda ls, op=op, kw=kw: getattr(F, "_foreach_%s" % op)(
                              ls[0], ls[1], **kw), [(1, False, False), (2, False, False)]))
        cases.append(("%s_.List by 0-dim" % op,
                      lambda ls, op=op: getattr(F, "_foreach_%s_" % op)(ls[0], ls[1]),
                      [(1, False, False), (3, True, False)]))
    for op in ("neg", "reciprocal", "sqrt"):
        cases.append((op + "_", lambda ls, op=op: getattr(F, "_foreach_%s_" % op)(ls[0]),
                      [(1, False, False)]))
    cases.append(("sqrt_ (+)", lambda ls: F._foreach_sqrt_(ls[0]), [(1, False, True)]))
    cases.append(("sqrt", lambda ls: F._foreach_sqrt(ls[0]), [(1, False, True)]))
    for w in (0.1, 0.09999999999999998, 0.9, 0.5, -0.3):
        cases.append(("lerp_ %g" % w, lambda ls, w=w: F._foreach_lerp_(ls[0], ls[1], w),
                      [(1, False, False), (2, False, False)]))
    for op in ("addcmul", "addcdiv"):
        for v in (1, 0.0010000000000000009, -2.0):
            cases.append(("%s_ %g" % (op, v), lambda ls, op=op, v=v: getattr(
                F, "_foreach_%s_" % op)(ls[0], ls[1], ls[2], value=v),
                [(1, False, False), (2, False, False), (4, False, True)]))
        cases.append(("%s_ (x, g, g)" % op, lambda ls, op=op: getattr(
            F, "_foreach_%s_" % op)(ls[0], ls[1], ls[1], value=0.001),
            [(1, False, False), (2, False, False)]))
    for b in (0.9, 0.999, 2.5):
        cases.append(("pow(%g, steps)" % b, lambda ls, b=b: F._foreach_pow(b, ls[0]),
                      [(5, True, "steps")]))
        cases.append(("pow(%g, list)" % b, lambda ls, b=b: F._foreach_pow(b, ls[0]),
                      [(1, False, False)]))
    # AdamW's bias corrections: lane scalars, then the elements reading them
    cases.append(("adamw tail", adamw_tail, [(1, False, False), (2, False, False),
                                             (4, False, True), (5, True, "steps")]))
    return cases


def adamw_tail(ls):
    p, m, v, steps = ls
    torch._foreach_add_(steps, 1)
    bc1 = torch._foreach_pow(0.9, steps)
    bc2 = torch._foreach_pow(0.999, steps)
    torch._foreach_sub_(bc1, 1)
    torch._foreach_sub_(bc2, 1)
    torch._foreach_neg_(bc2)
    torch._foreach_div_(bc1, 1e-3)
    torch._foreach_reciprocal_(bc1)
    torch._foreach_sqrt_(bc2)
    d = torch._foreach_sqrt(v)
    torch._foreach_div_(d, bc2)
    torch._foreach_add_(d, 1e-8)
    torch._foreach_div_(d, bc1)
    torch._foreach_addcdiv_(p, m, d)
    return d


def make_lists(spec):
    out = []
    for seed, small, positive in spec:
        if small:
            vals = [float(1 + (seed + k) % 9) for k in range(len(SHAPES))] \
                if positive == "steps" else None
            ls = make(seed, [()] * len(SHAPES))
            if vals:
                ls = [torch.tensor(v, device="cuda") for v in vals]
            out.append(ls)
        else:
            out.append(make(seed, positive=bool(positive)))
    return out


def run_op(crt, fn, spec):
    ref = make_lists(spec)
    got = [clone(x) for x in ref]
    with torch.no_grad():
        r_out = fn(ref)
        st = aten_fuse.Stats()
        fz = aten_fuse.Fuser(crt, min_ops=1, stats=st)
        with aten_fuse.mode(fz):
            g_out = fn(got)
        torch.cuda.synchronize()
    n = sum(mismatches(a, b) for a, b in zip(ref, got))
    if r_out is not None:
        n += mismatches(r_out, g_out)
    return n, st


def optimizers():
    return [
        ("AdamW capturable", lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01,
                                                         capturable=True, foreach=True)),
        ("Adam capturable wd", lambda ps: torch.optim.Adam(ps, lr=1e-3, weight_decay=0.01,
                                                          capturable=True, foreach=True)),
        ("AdamW amsgrad", lambda ps: torch.optim.AdamW(ps, lr=1e-3, amsgrad=True,
                                                      capturable=True, foreach=True)),
        ("SGD momentum nesterov", lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9,
                                                            nesterov=True, weight_decay=1e-4,
                                                            foreach=True)),
    ]


def run_optimizer(crt, make_opt, steps=5):
    shapes = [(768, 3072), (3072,), (768,), (1000, 7), (4097,)]
    base = make(11, shapes, specials=False, scale=0.02)
    ref = [torch.nn.Parameter(t.clone()) for t in base]
    got = [torch.nn.Parameter(t.clone()) for t in base]
    o_ref, o_got = make_opt(ref), make_opt(got)
    st = aten_fuse.Stats()
    n = 0
    for k in range(steps):
        grads = make(100 + k, shapes, specials=False)
        for p, g in zip(ref, grads):
            p.grad = g.clone()
        for p, g in zip(got, grads):
            p.grad = g.clone()
        o_ref.step()
        fz = aten_fuse.Fuser(crt, stats=st)
        with aten_fuse.mode(fz):
            o_got.step()
        torch.cuda.synchronize()
        n += mismatches([p.detach() for p in ref], [p.detach() for p in got])
        for a, b in zip(ref, got):
            sa, sb = o_ref.state[a], o_got.state[b]
            for key in sorted(sa):
                if torch.is_tensor(sa[key]):
                    n += mismatches([sa[key].float()], [sb[key].float()])
    return n, st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=None)
    a = ap.parse_args()
    crt = _rt.Runtime.open(None, flags=_rt.KP_RT_CUDA, lib=a.lib)
    print("device: %s, torch %s, cuda %s" % (torch.cuda.get_device_name(), torch.__version__,
                                             torch.version.cuda))
    t0 = time.time()
    rows = []
    for name, fn, spec in op_cases():
        try:
            n, st = run_op(crt, fn, spec)
            det = "" if st.foreach else "not fused: refused %s fallbacks %s" % (
                st.refused, st.fallbacks)
            rows.append((name, n, st.foreach, st.foreach_kernels, det))
        except Exception as e:  # noqa: BLE001
            rows.append((name, -2, 0, 0, "error: %s: %s" % (type(e).__name__, e)))
    for name, mk in optimizers():
        try:
            n, st = run_optimizer(crt, mk)
            det = "refused %s fallbacks %s" % (st.refused, st.fallbacks)
            rows.append(("optim: " + name, n, st.foreach, st.foreach_kernels, det))
        except Exception as e:  # noqa: BLE001
            rows.append(("optim: " + name, -2, 0, 0, "error: %s: %s" % (type(e).__name__, e)))
    bad = 0
    for name, n, fused, kernels, det in rows:
        ok = n == 0 and fused > 0
        bad += not ok
        print("%-4s %-40.40s mismatches %6d programs %3d kernels %4d %s" % (
            "ok" if ok else "FAIL", name, n, fused, kernels, det))
    print("torch_foreach_ops: %d cases, %d mismatching or not fused, %.1f s" % (
        len(rows), bad, time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
