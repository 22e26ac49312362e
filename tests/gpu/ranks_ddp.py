"""ranks_ddp.py - a two-rank DDP job for tests/gpu/ranks_check.sh.

    torchrun --standalone --nproc_per_node 2 tests/gpu/ranks_ddp.py [--steps N] [--late-ms MS]

Each rank trains a small MLP under DistributedDataParallel (NCCL all-reduce
of the gradients) and all-reduces its loss, one NVTX range "step" per
step. Rank 1 sleeps --late-ms on the host before each step, so its
collectives arrive late and rank 0 waits for it: the straggler the
analysis must name. Prints one line per rank with its last loss.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--late-ms", type=float, default=2.0)
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in
                                  (torch.nn.Linear(512, 512), torch.nn.GELU())]).cuda()
    ddp = DDP(model, device_ids=[local], static_graph=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(64, 512, device="cuda", generator=None)
    loss_sum = torch.zeros((), device="cuda")
    for _ in range(args.steps):
        if rank == 1 and args.late_ms > 0:
            time.sleep(args.late_ms / 1e3)
        torch.cuda.nvtx.range_push("step")
        opt.zero_grad(set_to_none=True)
        loss = ddp(x).square().mean()
        loss.backward()
        opt.step()
        loss_sum.copy_(loss.detach())
        dist.all_reduce(loss_sum)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print("rank %d: loss %.6f" % (rank, loss_sum.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
