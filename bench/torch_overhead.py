#!/usr/bin/env python3
"""torch_overhead.py - host time per call of kplan.torch's replay path against
a hand-written torch.cuda.graph step, on a GPU.

    PYTHONPATH=python KPLAN_RT_LIB=build/lib/libkplanrt.so \
        python3 bench/torch_overhead.py [--calls 3000] [--profile]

The body is tiny (two elementwise kernels on 1024 floats), so the figure is
the host cost of a call: the hand-written step (copy the input into the
static tensor, replay) and kplan.torch's region (static outputs, and cloned
outputs), each the median of 5 batches of --calls calls, the queue drained
every 100 calls. --profile prints cProfile's top functions of kplan's path.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from graph_step import hand_written_graph  # noqa: E402  (bench/, beside this file)


def per_call_us(step, xs, calls):
    import torch
    res = []
    for _ in range(5):
        torch.cuda.synchronize()
        t = 0.0
        for i in range(calls):
            s = time.perf_counter()
            step(xs[i & 1])
            t += time.perf_counter() - s
            if i % 100 == 99:
                torch.cuda.synchronize()
        res.append(t / calls * 1e6)
    return statistics.median(res)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    import torch
    import kplan.torch as kt
    torch.set_grad_enabled(False)
    xs = [torch.randn(1024, device="cuda") for _ in range(2)]

    def body(x):
        return x * 2 + 1

    graph_step, _g = hand_written_graph(body, (xs[0],))

    kt.open("", policy="graph")
    k_static = kt.region("ovh_static", static_outputs=True)(body)
    k_clone = kt.region("ovh_clone")(body)
    for _ in range(10):
        k_static(xs[0])
        k_clone(xs[0])
    torch.cuda.synchronize()
    rows = [("eager", per_call_us(body, xs, a.calls)),
            ("graph (copy + replay)", per_call_us(graph_step, xs, a.calls)),
            ("kplan static_outputs", per_call_us(k_static, xs, a.calls)),
            ("kplan cloned outputs", per_call_us(k_clone, xs, a.calls))]
    st = kt.stats()
    print("host us per call (median of 5 x %d calls); kplan replays %d eager %d"
          % (a.calls, st["replays"], st["eager"]))
    for n, v in rows:
        print("  %-24s %7.2f" % (n, v))
    if a.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for i in range(a.calls):
            k_static(xs[i & 1])
        pr.disable()
        torch.cuda.synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    kt.close()


if __name__ == "__main__":
    sys.exit(main())
