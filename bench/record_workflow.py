#!/usr/bin/env python3
"""record_workflow.py - a Hugging Face step recorded the way python/README.md
tells users to: the step in kplan.torch.region("step"), no plan, run under
`kplan record`, so that the trace holds the path kplan's graph of the
region takes where the library branches on capture (its eager path, unless
the eager step synchronises where the library asked, then its graph's path;
KPLAN_TORCH_LIB_PATH=graph: always the graph's path; python/README.md).

    kplan record -o W.db -- python3 bench/record_workflow.py WORKLOAD [--steps 8]
    python3 bench/record_workflow.py --graph WORKLOAD...   (no kplan record)

WORKLOAD is one of bench/cost_corpus.py's (gpt2_fp16_t1, bert_fp16_b1,
gpt2_fp16_b8, ...). The first form runs 3 warm-up and --steps steps, each
synchronised, and prints how many steps ran, how many of them on the
graph's path and the path recorded ("path: eager|graph|none", kplan.torch's
stats); the second measures each workload's step as one CUDA graph captured
as kplan.torch captures it (graph_step.kplan_path), timed the way
cost_corpus.py does (the fastest of 9 batches of 30 replays), prints
ground_truth.csv rows (workload,eager_ms,graph_ms,...) for `kplan validate`
and on stderr "WORKLOAD: captured path: eager|graph".
bench/record_workflow.sh runs both and validates.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_corpus                       # noqa: E402  (bench/, beside this file)
from graph_step import hand_written_graph  # noqa: E402


def record(name, steps):
    import torch
    import kplan.torch as kt
    fn, inputs, train = cost_corpus.build(name)
    step = kt.region("step")(fn)
    with torch.no_grad():
        for _ in range(3 + steps):
            step(*inputs)
            torch.cuda.synchronize()
    st = kt.stats()
    print("%s: %d steps recorded, %d on the graph's path" % (
        name, 3 + steps, st.get("graph_path_calls", 0)), flush=True)
    print("%s: recorded path: %s" % (name, st["regions"]["step"]["lib_path"] or "none"),
          flush=True)


def graph(name):
    import torch
    fn, inputs, train = cost_corpus.build(name)
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        ts = []
        for _ in range(30):
            s = time.perf_counter()
            fn(*inputs)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - s)
        eager_ms = statistics.median(ts) * 1e3
        gstep, g = hand_written_graph(fn, inputs, path="kplan")
        torch.cuda.synchronize()
        print("%s: captured path: %s" % (name, gstep.path), file=sys.stderr, flush=True)
        graph_ms = cost_corpus.replay_period_ms(g)
        del gstep, g
    print("%s_rec,%.4f,%.4f,,,,%s,%s,step" % (name, eager_ms, graph_ms,
                                            torch.cuda.get_device_name(), torch.__version__),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--graph", action="store_true", help="measure the graphs instead")
    a = ap.parse_args()
    for w in a.workloads:
        if a.graph:
            graph(w)
        else:
            record(w, a.steps)


if __name__ == "__main__":
    main()
