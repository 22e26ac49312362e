#!/usr/bin/env python3
"""never_slower.py - whole PyTorch runs eager and under kplan.torch.

A plan must never make a program slower than eager, including the runs in
which every region ends up eager. Each invocation runs ONE workload in ONE
variant in this process (CUPTI's state is per process) and prints one JSON
line:

  {"workload", "variant", "steps", "total_ms", "step_ms", "losses", "stats"}

total_ms is the whole run of --steps steps from the first call (warm-up,
watch, capture and failures included), synchronised once at the end;
step_ms the median of --timed further steps, each synchronised; losses a
hash of every step's loss (bit-identical runs hash alike). With --window
N, blocks of N steps then alternate outside and inside a
cudaProfilerStart/Stop window (what `kplan record --profiler-api` traces),
each block synchronised at its end, and "window" gives the median step of
the blocks outside and inside: the collector's cost in one process, free of
the spread between processes. With --ab N, blocks of N steps then
alternate the bare step and the kplan region ("ab": median ms per step of
each and speed = bare / region; aa_speed the same with the bare step on
both sides, the measurement's own noise): the region's steady state against
eager in one process. With --first N the run's first N calls are
each synchronised and timed ("first_ms"): where a one-time cost (warm-up,
watch, a capture that fails) lands.

Workloads (tests/gpu/never_slower_check.sh runs them all):
  gpt2_adamw      GPT-2 (4 layers) training step, AdamW(capturable=False):
                  the capture cannot hold the optimizer, the region stays eager
  gpt2_adamw_cap  the same with AdamW(capturable=True): the step is graphed
  ddp             DistributedDataParallel step of 16 Linear+GELU layers
  ddp_side        the same with DDP built on a side stream (PyTorch's
                  CUDA-graph recipe), which a capture can hold
                  (run under torchrun; one rank per GPU)
  mlp_sync        an MLP whose step reads its loss with .item() inside the
                  region: the watch keeps it eager

Variants:
  eager           no kplan at all
  forced-eager    kplan.torch with every region eager (policy "eager")
  graph           kplan.torch, policy "graph" (watch, capture, replay)
  graph-nowatch   the same with the watch off (KPLAN_RT_WATCH=0)
  graph-attached  the same with CUPTI kept attached after the watch
                  (KPLAN_RT_WATCH_DETACH=0: the behaviour before detaching)
  graph-curwatch  the same with the watched warm-up call on the caller's
                  stream instead of the capture stream
                  (KPLAN_TORCH_WATCH_STREAM=current)
  graph-fuse      policy "graph" with fusion of ATen chains
                  (KPLAN_TORCH_FUSE=exact)
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

VARIANT_ENV = {
    "eager": {},
    "forced-eager": {"KPLAN_TORCH_POLICY": "eager"},
    "graph": {"KPLAN_TORCH_POLICY": "graph"},
    "graph-nowatch": {"KPLAN_TORCH_POLICY": "graph", "KPLAN_RT_WATCH": "0"},
    "graph-attached": {"KPLAN_TORCH_POLICY": "graph", "KPLAN_RT_WATCH_DETACH": "0"},
    "graph-curwatch": {"KPLAN_TORCH_POLICY": "graph", "KPLAN_TORCH_WATCH_STREAM": "current"},
    "graph-fuse": {"KPLAN_TORCH_POLICY": "graph", "KPLAN_TORCH_FUSE": "exact"},
}


def gpt2_adamw(torch, capturable):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_embd=768, n_head=12, n_positions=256, vocab_size=8192,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=capturable)
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (4, 128), device="cuda", generator=g)

    def step(x):
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step, (ids,)


def mlp_sync(torch):
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(512, 512), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(64, 512, device="cuda")

    def step(inp):
        with torch.no_grad():
            y = model(inp)
            if y.abs().max().item() > 1e6:     # a host read inside the region
                y = y / 2
            return y.sum()
    return step, (x,)


def ddp(torch, side=False):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(0)
    layers = []
    for _ in range(16):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    net = torch.nn.Sequential(*layers).cuda()
    if side:
        # PyTorch's CUDA-graph recipe: DDP built on a side stream (it keeps
        # autograd's AccumulateGrad nodes on the stream it was built on)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            model = DDP(net)
        torch.cuda.current_stream().wait_stream(s)
    else:
        model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    x = torch.randn(32, 1024, device="cuda", generator=g)

    def step(inp):
        loss = model(inp).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step, (x,)


def build(torch, name):
    if name == "gpt2_adamw":
        return gpt2_adamw(torch, False)
    if name == "gpt2_adamw_cap":
        return gpt2_adamw(torch, True)
    if name == "ddp":
        return ddp(torch)
    if name == "ddp_side":
        return ddp(torch, side=True)
    if name == "mlp_sync":
        return mlp_sync(torch)
    raise SystemExit("never_slower: unknown workload %r" % name)


def alternate(torch, fa, fb, args, sink, n, blocks, b_on=None, b_off=None):
    """Median ms per step of blocks of n steps, alternating fa and fb in the
    order a b b a a b b a ... (so that neither always follows the other, and
    a drift over the run weighs on both alike; fb's blocks between b_on() and
    b_off()), each block synchronised."""
    ta, tb = [], []
    for b in range(2 * blocks):
        on = (b + 1) % 4 in (2, 3)
        f = fb if on else fa
        if on and b_on:
            b_on()
        s = time.perf_counter()
        for _ in range(n):
            sink.append(f(*args))
        torch.cuda.synchronize()
        (tb if on else ta).append((time.perf_counter() - s) * 1e3 / n)
        if on and b_off:
            b_off()
    return statistics.median(ta), statistics.median(tb)


def profiler_window(torch, step, args, losses, n, blocks):
    """Median ms per step of blocks outside and inside cudaProfilerStart/Stop."""
    o, i = alternate(torch, step, step, args, losses, n, blocks,
                     torch.cuda.profiler.start, torch.cuda.profiler.stop)
    return {"out_ms": round(o, 4), "in_ms": round(i, 4), "ratio": round(i / o, 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("variant", choices=sorted(VARIANT_ENV))
    ap.add_argument("--steps", type=int, default=100, help="steps of the whole run")
    ap.add_argument("--timed", type=int, default=30, help="synchronised steps after it")
    ap.add_argument("--window", type=int, default=0, metavar="N",
                    help="then blocks of N steps outside and inside a profiler window")
    ap.add_argument("--blocks", type=int, default=20, help="block pairs with --window or --ab")
    ap.add_argument("--ab", type=int, default=0, metavar="N",
                    help="then blocks of N steps alternating the bare step and the region")
    ap.add_argument("--first", type=int, default=0, metavar="N",
                    help="time the run's first N calls one by one (synchronised)")
    a = ap.parse_args()
    os.environ.update(VARIANT_ENV[a.variant])
    import torch
    step, args = build(torch, a.workload)
    kt = None
    bare = step
    if a.variant != "eager":
        import kplan.torch as kt
        kt.open(policy=os.environ["KPLAN_TORCH_POLICY"])
        step = kt.region("step")(step)
    torch.cuda.synchronize()
    losses = []
    first = []
    t0 = time.perf_counter()
    for i in range(a.steps):
        if i >= a.first:        # the whole run's loop: nothing but the step
            losses.append(step(*args))
            continue
        s = time.perf_counter()
        losses.append(step(*args))
        torch.cuda.synchronize()
        first.append(round((time.perf_counter() - s) * 1e3, 3))
    torch.cuda.synchronize()
    total = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(a.timed):
        s = time.perf_counter()
        losses.append(step(*args))
        torch.cuda.synchronize()
        times.append((time.perf_counter() - s) * 1e3)
    window = None
    if a.window > 0:
        window = profiler_window(torch, step, args, losses, a.window, a.blocks)
    ab = None
    if a.ab > 0 and kt is not None:
        # after the run, in one process: the region as it ended up (graphed,
        # eager for good, planned eager) against the bare step, free of the
        # spread between processes; these steps are not in the losses' hash
        b, k = alternate(torch, bare, step, args, [], a.ab, a.blocks)
        ab = {"bare_ms": round(b, 4), "region_ms": round(k, 4), "speed": round(b / k, 4)}
        # the same with the bare step on both sides: how far apart two
        # identical halves come out here (the A/B's noise)
        b2, k2 = alternate(torch, bare, bare, args, [], a.ab, a.blocks)
        ab["aa_speed"] = round(b2 / k2, 4)
    h = hashlib.sha256()
    for l in losses:
        h.update(l.float().cpu().numpy().tobytes())
    out = {"workload": a.workload, "variant": a.variant, "steps": a.steps,
           "total_ms": round(total, 3), "step_ms": round(statistics.median(times), 4),
           "losses": h.hexdigest()[:16], "rank": int(os.environ.get("RANK", "0"))}
    if window:
        out["window"] = window
    if first:
        out["first_ms"] = first
    if ab:
        out["ab"] = ab
    if kt is not None:
        st = kt.stats()
        rt = st.get("rt") or {}
        out["stats"] = {k: st.get(k) for k in ("calls", "replays", "captures", "eager",
                                               "eager_by_reason", "failures")}
        out["stats"]["cupti"] = [rt.get("cupti_attaches"), rt.get("cupti_detaches"),
                                 rt.get("cupti_attached")]
        kt.close()
    print(json.dumps(out), flush=True)
    if a.workload.startswith("ddp"):
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
