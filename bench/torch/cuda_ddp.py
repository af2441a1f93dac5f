#!/usr/bin/env python3
"""A small DDP training run on the backend "dtrain" and on a reference backend side by side, in one
job under `dtrain launch` (scripts/gpu-check.sh: CUDA tensors, fp32, against torch's own "nccl"; on
any machine: CPU tensors against gloo):

    cuda_ddp.py [--device cuda|cpu] [--reference nccl|gloo] [--steps 100] [--warmup 5] [--width 1024]

Two copies of one model (an MLP of 3 Linear layers, width x 4*width x 4*width x width, fp32, the same
initial weights) learn a fixed random teacher network with SGD, one wrapped in DDP over dtrain's
group (the default one), the other over a group of the reference backend. They take turns each step
(who goes first alternates) on the same batch (64 samples a rank, new every step), each step timed
from a synchronized start to a synchronized end. Rank 0 prints a line per step and a summary:

    step I LOSS_DTRAIN LOSS_REFERENCE MS_DTRAIN MS_REFERENCE
    ddp STEPS WORLD PARAMS MEAN_MS_DTRAIN MEAN_MS_REFERENCE RATIO MAX_LOSS_DIFF

the means over the steps after the warm-up, RATIO = dtrain / reference (< 1: dtrain faster),
MAX_LOSS_DIFF the largest |loss difference| over all steps. Exit status 3 when the two models'
weights differ by more than 1e-5 relative at the end (both sum the same gradients), else 0.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def mlp(width, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, 4 * width), nn.ReLU(),
                         nn.Linear(4 * width, width))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--reference", default="nccl")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--width", type=int, default=1024)
    a = ap.parse_args()
    import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    dev = torch.device("cpu")
    if a.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as the name says, on both sides
        torch.backends.cudnn.allow_tf32 = False
    dist.init_process_group("dtrain", init_method="env://")
    ref_group = dist.new_group(backend=a.reference)
    rank, world = dist.get_rank(), dist.get_world_size()
    teacher = mlp(a.width, 7).to(dev)
    models = {"dtrain": DDP(mlp(a.width, 0).to(dev), process_group=None),
              "reference": DDP(mlp(a.width, 0).to(dev), process_group=ref_group)}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.05) for k, m in models.items()}
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = {k: [] for k in models}
    max_diff = 0.0
    for i in range(a.steps):
        g = torch.Generator().manual_seed(1000 * i + rank)
        x = torch.randn(64, a.width, generator=g).to(dev)
        with torch.no_grad():
            y = teacher(x)
        losses = {}
        for k in (["dtrain", "reference"] if i % 2 == 0 else ["reference", "dtrain"]):
            sync()
            t0 = time.perf_counter()
            opts[k].zero_grad()
            loss = nn.functional.mse_loss(models[k](x), y)
            loss.backward()
            opts[k].step()
            sync()
            times[k].append((time.perf_counter() - t0) * 1e3)
            losses[k] = loss.item()
        max_diff = max(max_diff, abs(losses["dtrain"] - losses["reference"]))
        if rank == 0:
            print(f"step {i + 1} {losses['dtrain']:.9g} {losses['reference']:.9g} "
                  f"{times['dtrain'][-1]:.3f} {times['reference'][-1]:.3f}", flush=True)
    mean = {k: sum(v[a.warmup:]) / max(len(v) - a.warmup, 1) for k, v in times.items()}
    pa = torch.cat([p.detach().flatten() for p in models["dtrain"].parameters()])
    pb = torch.cat([p.detach().flatten() for p in models["reference"].parameters()])
    apart = float((pa - pb).abs().max()) / max(float(pb.abs().max()), 1e-30)
    if rank == 0:
        params = sum(p.numel() for p in models["dtrain"].parameters())
        print(f"ddp {a.steps} {world} {params} {mean['dtrain']:.3f} {mean['reference']:.3f} "
              f"{mean['dtrain'] / mean['reference']:.3f} {max_diff:.3g}", flush=True)
    if apart > 1e-5:
        print(f"cuda_ddp: rank {rank}: the two models' weights are {apart:.3g} apart (relative)", file=sys.stderr)
    dist.barrier(group=ref_group)
    dist.destroy_process_group()
    return 3 if apart > 1e-5 else 0


if __name__ == "__main__":
    sys.exit(main())
