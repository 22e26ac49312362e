"""collector_gpt2.py - GPT-2 small (GPT2Config(), random weights, no
download), fp16, batch 1, one token forward per step, each step inside
torch.cuda.nvtx.range_push/pop("step"). Prints the median step time.

    python3 collector_gpt2.py [plain|torchprof|window] [STEPS]

torchprof runs the measured steps under torch.profiler (CPU + CUDA) to
compare its cost with kplan record's. window alternates blocks of 10 steps
outside and inside torch.cuda.profiler.start()/stop() (cudaProfilerStart and
Stop): under `kplan record --profiler-api` the two medians are the step
without and with tracing, measured in one process.
"""
import statistics
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def measure_n(step, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).half().cuda().eval()
    ids = torch.tensor([[464]], device="cuda")

    def step():
        torch.cuda.nvtx.range_push("step")
        with torch.no_grad():
            out = model(ids, use_cache=False)
        torch.cuda.nvtx.range_pop()
        return out

    for _ in range(10):
        step()
    torch.cuda.synchronize()

    def measure():
        return measure_n(step, steps)

    if mode == "window":
        outside, inside = [], []
        for b in range(max(steps // 10, 2)):
            on = b % 2 == 1
            if on:
                torch.cuda.profiler.start()
            (inside if on else outside).extend(
                t for t in measure_n(step, 10))
            if on:
                torch.cuda.profiler.stop()
        mo = statistics.median(outside) * 1e3
        mi = statistics.median(inside) * 1e3
        print(f"gpt2 mode window steps {len(outside)}+{len(inside)} median_step_ms_out {mo:.3f}"
              f" median_step_ms_in {mi:.3f} ratio {mi / mo:.3f}")
        return
    if mode == "torchprof":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            times = measure()
        n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        print(f"torch.profiler cuda events {n}")
    else:
        times = measure()
    med = statistics.median(times) * 1e3
    print(f"gpt2 mode {mode} steps {steps} median_step_ms {med:.3f} min_ms {min(times)*1e3:.3f}")


if __name__ == "__main__":
    main()
