"""Where a step's GPU time goes: kplan.torch (with and without fusion) against
torch.compile(mode="reduce-overhead"), kernel by kernel.

    PYTHONPATH=python python3 bench/torch_kernels.py [--workloads gpt2,llama,train] [--out DIR]

(train: bench/torch_fusion.py's GPT-2 (4 layers) training step with
AdamW(capturable=True), one model stepped by every variant.)

Each variant is warmed up (captured, compiled), then STEPS steps run under
torch.profiler (CUDA activity: kernels inside graph replays included). For
each variant it prints the kernels per step, the GPU time in kernels per
step, the step's span on the GPU (first kernel start to last kernel end) and
the kernels grouped by name (count and time per step), largest first. The
gap between span and kernel time is what the launches between kernels cost
inside the graph. --out writes one JSON per workload with every group.
"""
import argparse
import collections
import contextlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import torch_fusion as tf  # noqa: E402  (bench/torch_fusion.py: the same workloads)
import kplan.torch as kt  # noqa: E402


WARM = 10      # un-profiled calls before the profile (--warm)


def short(name, n=90):
    return name if len(name) <= n else name[:n - 3] + "..."


def profile(f, steps, grad=False):
    from torch.profiler import ProfilerActivity, profile as prof
    with (contextlib.nullcontext() if grad else torch.no_grad()):
        # past kplan.torch's warm-up, watch and capture (and the fusion
        # mode's compiles), so that the profile holds steady steps only
        for _ in range(WARM):
            f()
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(steps):
                f()
            torch.cuda.synchronize()
    ks = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA
          and getattr(e, "device_time", getattr(e, "cuda_time", 0)) >= 0]
    groups = collections.defaultdict(lambda: [0, 0.0])
    t0 = t1 = None
    busy = 0.0
    for e in ks:
        if "Memcpy" in e.name or "Memset" in e.name:
            continue
        d = e.time_range.elapsed_us()
        groups[e.name][0] += 1
        groups[e.name][1] += d
        busy += d
        s, t = e.time_range.start, e.time_range.end
        t0 = s if t0 is None else min(t0, s)
        t1 = t if t1 is None else max(t1, t)
    n = sum(c for c, _ in groups.values())
    span = (t1 - t0) if t0 is not None else 0
    return {"kernels_per_step": n / steps, "busy_us_per_step": busy / steps,
            "span_us_per_step": span / steps,
            "groups": sorted(([k, c / steps, d / steps] for k, (c, d) in groups.items()),
                             key=lambda g: -g[2])}


def main():
    global WARM
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="gpt2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--warm", type=int, default=WARM,
                    help="calls before the profile (past warm-up and capture)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    WARM = a.warm
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    for w in a.workloads.split(","):
        if w == "llama":
            step, decode = tf.build_llama()
            decode(step, 2)                 # prefill: the cache holds 16 tokens
            ids = torch.ones(1, 1, dtype=torch.long, device="cuda")
            pos = torch.tensor([16], device="cuda")
            fn, args = step, (ids, pos)     # one token at position 16, every step
        elif w == "train":
            fn, args = tf.build_train()     # one model: every variant steps it on
        else:
            fn, args = tf.build(w, 128)
        grad = w == "train"
        variants = {"eager": lambda fn=fn: fn(*args)}
        for v, fuse in (("kplan", "off"), ("kplan-fuse", "exact")):
            rt = tf.runtime(fuse)
            reg = kt.Region(fn, w + "-" + v)
            variants[v] = (lambda rt=rt, reg=reg: rt._call(reg, args, {}))
        cf = torch.compile(fn, mode="reduce-overhead")

        def ro(cf=cf):
            torch.compiler.cudagraph_mark_step_begin()
            return cf(*args)
        with (contextlib.nullcontext() if grad else torch.no_grad()):
            for _ in range(3):
                ro()
        variants["reduce-overhead"] = ro
        res = {}
        for v, f in variants.items():
            r = res[v] = profile(f, a.steps, grad)
            print("\n== %s %s: %.1f kernels/step, kernels %.1f us, span %.1f us" % (
                w, v, r["kernels_per_step"], r["busy_us_per_step"], r["span_us_per_step"]))
            for name, c, d in r["groups"][:a.top]:
                print("  %6.2f x %8.2f us  %s" % (c, d, short(name)))
        print("\n| %s | kernels/step | kernel us | span us |" % w)
        print("| --- | --- | --- | --- |")
        for v, r in res.items():
            print("| %s | %.1f | %.1f | %.1f |" % (v, r["kernels_per_step"],
                                                 r["busy_us_per_step"], r["span_us_per_step"]))
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "kernels_%s.json" % w), "w") as fp:
                json.dump(res, fp, indent=1)


if __name__ == "__main__":
    main()
