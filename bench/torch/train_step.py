#!/usr/bin/env python3
"""One data-parallel training step (forward, backward, SGD step), timed, for bench/torch/compare.py
and compare_sharded.py under `dtrain launch`:

    train_step.py --model comm|compute [--wrap ddp|zero|fsdp2] [--backend dtrain|gloo|none]
                  [--steps N] [--warmup N] [--small]

ddp: DistributedDataParallel (the gradients all-reduced). zero: DDP with ZeroRedundancyOptimizer
(each rank steps its share of the parameters, then broadcasts it). fsdp2: torch's fully_shard on a
1-D CPU device mesh, each Linear a unit of its own and the model the root: the forward all-gathers a
unit's parameters (all_gather_into_tensor), the backward all-gathers them again and reduce-scatters
the gradients (reduce_scatter_tensor), and each rank steps its shard.
comm: 4 x Linear(2500, 2500), 25.0M float32 parameters, 4 samples a rank (communication-bound: the
gradients are 100 MB a step). compute: 4 x Linear(256, 256), 0.26M parameters, 4096 samples a rank
(compute-bound). --small shrinks both (a smoke test). --backend none: one process, no process group
and no wrapper (the no-communication floor). Rank 0 prints

    step WRAP MODEL BACKEND WORLD PARAMS STEP_MS LOSS CHECKSUM

STEP_MS the slowest rank's mean over the timed steps, LOSS rank 0's last, CHECKSUM how far training
moved the weights: the sum of |final - initial| over every parameter (the same initial weights and
data on every backend, so the backends' checksums agree to rounding, and a wrong gradient sum moves
them elsewhere). Exit status 3 when the replicas' weights differ (ddp, zero), 77 (the reason
printed) when this torch's FSDP2 cannot train on the CPU (fsdp2_refusal(): none before 2.6, and
2.6's asks the CPU stream for record_event()).
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

SHAPES = {"comm": (2500, 4), "compute": (256, 4096)}  # width, samples a rank


def fsdp2_refusal():
    """Why this torch's FSDP2 cannot train on the CPU, or "" when it can."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return f"torch {torch.__version__} has no torch.distributed.fsdp.fully_shard (FSDP2: torch 2.6 or later)"
    if not hasattr(torch.cpu.Stream, "record_event"):
        # torch 2.6: torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_all_gather()
        return (f"torch {torch.__version__}'s FSDP2 cannot run on the CPU: foreach_all_gather() "
                "(torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py) calls record_event() on the "
                "device's stream, which torch.cpu.Stream lacks (AttributeError in the first forward)")
    return ""


def wrap(a, net, world):
    """The model as trained and its optimizer."""
    if a.backend == "none":
        return net, torch.optim.SGD(net.parameters(), lr=1e-4)
    from torch.nn.parallel import DistributedDataParallel as DDP
    if a.wrap == "ddp":
        return DDP(net), torch.optim.SGD(net.parameters(), lr=1e-4)
    if a.wrap == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        model = DDP(net)
        return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=1e-4)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    for layer in net:
        fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    return net, torch.optim.SGD(net.parameters(), lr=1e-4)


def checksum(a, net, initial):
    """The sum of |final - initial| over every parameter (FSDP2's are sharded DTensors: their full tensors)."""
    total = torch.zeros((), dtype=torch.float64)
    for p, p0 in zip(net.parameters(), initial):
        full = p.full_tensor() if a.wrap == "fsdp2" and a.backend != "none" else p
        total += (full.detach().double() - p0.double()).abs().sum()
    return float(total)


def replicas_differ(net):
    flat = torch.cat([p.detach().flatten() for p in net.parameters()])
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    return not torch.equal(hi, lo)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--wrap", choices=["ddp", "zero", "fsdp2"], default="ddp")
    ap.add_argument("--backend", default="dtrain")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--small", action="store_true")
    return ap.parse_args()


def main():
    a = parse_args()
    width, batch = SHAPES[a.model]
    if a.small:
        width, batch = width // 10, max(batch // 16, 2)
    why = fsdp2_refusal() if a.wrap == "fsdp2" else ""
    if why:  # before any process group
        print(f"SKIP: {why}")
        return 77
    torch.set_num_threads(1)
    distributed = a.backend != "none"
    if a.backend == "dtrain":
        import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    if distributed:
        dist.init_process_group(a.backend, init_method="env://")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(width, width) for _ in range(4)])
    params = sum(p.numel() for p in net.parameters())
    initial = [p.detach().clone() for p in net.parameters()]
    model, opt = wrap(a, net, world)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1 + rank))

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
        if a.wrap != "fsdp2" and replicas_differ(net):
            print(f"train_step: rank {rank}: the replicas' weights differ", file=sys.stderr)
            status = 3
    total = checksum(a, net, initial)
    if rank == 0:
        print(f"step {a.wrap} {a.model} {a.backend} {world} {params} {float(ms[0]):.3f} {loss:.6g} {total:.9g}",
              flush=True)
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
