"""A plain PyTorch DDP training script, written for torchrun and run unchanged by dtrain:

    torchrun --nproc-per-node 4 train.py --epochs 2
    dtrain launch --nproc-per-node 4 train.py --epochs 2

It reads nothing of dtrain: the process group comes from torch's env:// contract (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK). CPU and the gloo backend, so it runs anywhere torch
does. Linear regression on a fixed synthetic dataset, each rank on its shard of every batch; at the
end every replica must hold the same weights.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.set_num_threads(1)
    print(f"rank {rank}/{world} (local rank {local_rank}) up", flush=True)

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(1024, 16, generator=g)
    true_w = torch.linspace(-1, 1, 16).unsqueeze(1)
    y = x @ true_w + 0.5

    torch.manual_seed(0)
    model = DDP(nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    per_rank = args.batch // world
    for epoch in range(args.epochs):
        for start in range(0, len(x), args.batch):
            lo = start + rank * per_rank
            xb, yb = x[lo:lo + per_rank], y[lo:lo + per_rank]
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"epoch {epoch}: loss {mean.item() / world:.6f}", flush=True)

    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    replicas = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(replicas, flat)
    if not all(torch.equal(replicas[0], r) for r in replicas):
        raise SystemExit(f"rank {rank}: the replicas differ")
    if rank == 0:
        print(f"done: {world} replicas agree", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
