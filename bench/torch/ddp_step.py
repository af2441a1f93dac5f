#!/usr/bin/env python3
"""One DDP training step (forward, backward with DDP's gradient allreduce, SGD step), timed, for
bench/torch/compare.py under `dtrain launch`:

    ddp_step.py --model comm|compute [--backend dtrain|gloo|none] [--steps N] [--warmup N] [--small]

comm: 4 x Linear(2500, 2500), 25.0M float32 parameters, 4 samples a rank (communication-bound: the
gradients are 100 MB a step). compute: 4 x Linear(256, 256), 0.26M parameters, 4096 samples a rank
(compute-bound). --small shrinks both (a smoke test). --backend none: one process, no process group
and no DDP (the no-communication floor). Rank 0 prints

    ddp MODEL BACKEND WORLD PARAMS STEP_MS LOSS

STEP_MS the slowest rank's mean over the timed steps. Exit status 3 when the replicas' weights differ.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SHAPES = {"comm": (2500, 4), "compute": (256, 4096)}  # width, samples a rank


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--backend", default="dtrain")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    width, batch = SHAPES[a.model]
    if a.small:
        width, batch = width // 10, max(batch // 16, 2)
    torch.set_num_threads(1)
    distributed = a.backend != "none"
    if a.backend == "dtrain":
        import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    if distributed:
        dist.init_process_group(a.backend, init_method="env://")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(width, width) for _ in range(4)])
    model = DDP(net) if distributed else net
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(batch, width, generator=g)

    def step():
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    if distributed:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    ms = torch.tensor([(time.perf_counter() - t0) * 1e3 / a.steps], dtype=torch.float64)
    status = 0
    if distributed:
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        flat = torch.cat([p.detach().flatten() for p in net.parameters()])
        hi, lo = flat.clone(), flat.clone()
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        if not torch.equal(hi, lo):
            print(f"ddp_step: rank {rank}: the replicas' weights differ", file=sys.stderr)
            status = 3
    if rank == 0:
        params = sum(p.numel() for p in net.parameters())
        print(f"ddp {a.model} {a.backend} {world} {params} {float(ms[0]):.3f} {loss:.6g}", flush=True)
    if distributed:
        dist.barrier()
    return status


if __name__ == "__main__":
    # No teardown of the model and its process group: torch 1.13 destroys a group (in DDP's Reducer)
    # joining the group's threads while holding the GIL, and a thread that is just freeing an op's
    # tensor needs the GIL: a hang at exit, seen with gloo in most runs of the small models here.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
