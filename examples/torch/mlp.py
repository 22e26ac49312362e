"""mlp.py - a small PyTorch program for the README's PyTorch walk-through.

    python3 examples/torch/mlp.py [--steps N]

Inference of a 12-layer MLP (width 512, batch 1, fp32): every step launches
about 36 small kernels from Python, so the GPU waits for the CPU most of the
time, the work kplan finds and turns into CUDA graphs. The step is a kplan
region named "step":

    kplan record -o run.db -- python3 examples/torch/mlp.py   # no plan: eager
    kplan plan run.db -o model.kplan                          # analyzes, plans
    KPLAN_PLAN=model.kplan python3 examples/torch/mlp.py      # step as a graph

It prints the steps' mean time and a checksum of the last output, which is
the same with and without the plan (KPLAN_RT_STATS=1 prints kplan's counters
at exit: replays, and why any call ran eagerly).
"""
import argparse
import time

import torch

import kplan.torch as kt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("mlp.py: needs a CUDA GPU")
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [torch.nn.Linear(512, 512), torch.nn.LayerNorm(512), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda().eval()
    x = torch.randn(1, 512, device="cuda")

    @kt.region("step")       # with no plan: eager, one NVTX range per call
    def step(x):
        return model(x)

    y = None
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            y = step(x)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    print("mlp.py: %d steps, %.1f us per step, checksum %.6f"
          % (args.steps, 1e6 * dt / args.steps, y.double().sum().item()))


if __name__ == "__main__":
    main()
