#!/usr/bin/env python3
"""torch_gap.py - where kplan.torch's step time differs from a hand-written
torch.cuda.graph step on one model (ResNet-18, fp32, batch 1), on a GPU.

    PYTHONPATH=python KPLAN_RT_LIB=build/lib/libkplanrt.so \
        python3 bench/torch_gap.py [--model resnet18|mlp] [--iters 300]

Interleaved per iteration, each synchronised, medians in microseconds:
  graph step      copy the input in, replay the hand-written graph
  kplan step      the region call (policy graph, static outputs)
  kplan host      the region call alone (host time, no wait)
  graph host      the hand-written step alone (host time, no wait)
  kplan replay    kplan's own graph object replayed directly
  graph replay    the hand-written graph replayed directly
and the kernels each graph replay runs (profiler), with their busy time.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from graph_step import hand_written_graph  # noqa: E402  (bench/, beside this file)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--profile", action="store_true",
                    help="also print cProfile's top functions of the kplan call")
    a = ap.parse_args()
    import torch
    import kplan.torch as kt
    torch.set_grad_enabled(False)
    if a.model == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None).cuda().eval()
        xs = [torch.randn(1, 3, 224, 224, device="cuda") for _ in range(2)]
    else:
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1]).cuda().eval()
        xs = [torch.randn(32, 1024, device="cuda") for _ in range(2)]

    def fn(x):
        return model(x)
    for _ in range(3):
        fn(xs[0])
    gstep, g = hand_written_graph(fn, (xs[0],))
    rt = kt.open("", policy="graph")
    kstep = kt.region("gap", static_outputs=True)(fn)
    for i in range(6):
        kstep(xs[i & 1])
    torch.cuda.synchronize()
    st = next(v for v in rt.states.values() if v.name == "gap")
    kg = next(iter(st.entries.values())).graph

    def sync_t(f, x):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f(x)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e6, (t1 - t0) * 1e6
    T = {k: [] for k in ("graph step", "kplan step", "graph host", "kplan host",
                         "graph replay", "kplan replay")}
    for i in range(a.iters):
        x = xs[i & 1]
        order = [("graph", gstep), ("kplan", kstep)]
        if i & 1:
            order.reverse()
        for n, f in order:
            full, host = sync_t(f, x)
            T[n + " step"].append(full)
            T[n + " host"].append(host)
        for n, gg in ([("graph", g), ("kplan", kg)] if i & 1 else [("kplan", kg), ("graph", g)]):
            full, _ = sync_t(lambda _x: gg.replay(), x)
            T[n + " replay"].append(full)
    print("%s, %d iterations interleaved, median us" % (a.model, a.iters))
    for k, v in T.items():
        print("  %-14s %8.1f" % (k, statistics.median(v[20:])))
    from torch.profiler import ProfilerActivity, profile
    for n, gg in (("graph", g), ("kplan", kg)):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                gg.replay()
            torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        busy = sum(e.device_time for e in ev) / 3
        print("  %s graph: %d GPU ops per replay, busy %.1f us" % (n, len(ev) // 3, busy))
    # the kplan call taken apart: host time of each piece alone (no wait)
    region = kstep
    e = next(iter(st.entries.values()))
    pieces = {
        "graph step (host)": lambda x: gstep(x),
        "kplan call (host)": lambda x: kstep(x),
        "kplan call, no NVTX": None,
        "kplan _dispatch": lambda x: rt._dispatch(region, st, (x,), {}),
        "kplan _replay only": lambda x: rt._replay(region, st, e, (x,), {}, (x,)),
        "copy_ + replay": lambda x: (e.static_in[0].copy_(x), e.graph.replay()),
        "replay only": lambda x: e.graph.replay(),
        "copy_ only": lambda x: e.static_in[0].copy_(x),
        "NVTX push+pop": lambda x: (rt.crt.range_push(st.bname, 2), rt.crt.range_pop()),
    }
    crt = rt.crt

    def no_nvtx(x):
        rt.crt = None
        try:
            return kstep(x)
        finally:
            rt.crt = crt
    pieces["kplan call, no NVTX"] = no_nvtx
    res = {k: [] for k in pieces}
    for i in range(200):
        for k, f in pieces.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            f(xs[i & 1])
            res[k].append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    print("host time of the pieces, median us (each alone, after a synchronize)")
    for k, v in res.items():
        print("  %-22s %8.1f" % (k, statistics.median(v[20:])))
    if a.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        for i in range(200):
            torch.cuda.synchronize()
            pr.enable()
            kstep(xs[i & 1])
            pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    kt.close()


if __name__ == "__main__":
    sys.exit(main())
