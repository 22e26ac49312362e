"""Can a DistributedDataParallel training step be one CUDA graph, and what does
kplan.torch do with it? One variant per torchrun job:

    torchrun --nproc_per_node 2 bench/ddp_capture.py VARIANT [--steps N]

Variants:
  eager          the step as written (forward, backward with DDP's all-reduce,
                 SGD step, zero_grad)
  hand           PyTorch's documented recipe: TORCH_NCCL_ASYNC_ERROR_HANDLING=0
                 before init, DDP built on a side stream, 11 warm-up steps
                 there, torch.cuda.graph of the whole step, then replays
  kplan-wN       kplan.torch, policy "graph", N eager warm-up calls (default
                 plan warm-up is 2); add "-side" to build DDP on a side stream
                 as the recipe does, "-noaeh" to set
                 TORCH_NCCL_ASYNC_ERROR_HANDLING=0
Each rank prints one JSON line: the whole run's ms, the median synchronised
step, a hash of every loss (equal across variants when the numerics are),
and for kplan its stats (captures, replays, why calls ran eagerly, the
watch's blocker).
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variant")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--timed", type=int, default=30)
    a = ap.parse_args()
    v = a.variant
    side = v == "hand" or "-side" in v
    if v == "hand" or "-noaeh" in v:
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    import torch
    import torch.distributed as dist
    import never_slower   # bench/never_slower.py: the same DDP step
    step, (x,) = never_slower.ddp(torch, side=side)
    rank = dist.get_rank()
    s = torch.cuda.Stream()

    kt = None
    graph = None
    losses = []
    t0 = time.perf_counter()
    if v == "hand":
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(11):
                losses.append(step(x).clone())
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step(x)

        def run(_inp):
            graph.replay()
            return static_loss.clone()
        # the captured step ran nothing: replay it as step 12
        n = a.steps - 11
    elif v.startswith("kplan"):
        import kplan.torch as kt
        w = int(v.split("-w")[1].split("-")[0]) if "-w" in v else None   # else the default
        kt.open(policy="graph", warmup=w)
        run = kt.region("step")(step)
        n = a.steps
    else:
        run = step
        n = a.steps
    err = None
    try:
        for _ in range(n):
            losses.append(run(x))
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001  (report, do not hang the other rank)
        err = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
    total = (time.perf_counter() - t0) * 1e3
    times = []
    if err is None:
        for _ in range(a.timed):
            t = time.perf_counter()
            losses.append(run(x))
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
    h = hashlib.sha256()
    for l in losses[:a.steps]:
        h.update(l.float().cpu().numpy().tobytes())
    out = {"variant": v, "rank": rank, "steps": a.steps, "total_ms": round(total, 2),
           "step_ms": round(statistics.median(times), 4) if times else None,
           "losses": h.hexdigest()[:16], "last_loss": float(losses[-1]) if losses else None,
           "error": err}
    if kt is not None:
        st = kt.stats()
        out["stats"] = {k: st.get(k) for k in ("calls", "replays", "captures", "eager",
                                               "eager_by_reason", "failures")}
        out["stats"]["regions"] = st.get("regions")
        kt.close()
    print(json.dumps(out, default=str), flush=True)
    # a graph holding NCCL work kept past destroy_process_group hung the
    # hand variant's exit (torchrun killed it after the results were out)
    run = graph = None  # noqa: F841
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
