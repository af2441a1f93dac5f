"""A plain PyTorch DDP training script, written for torchrun and run unchanged by dtrain:

    torchrun --nproc_per_node 4 train.py --epochs 2
    dtrain launch --nproc-per-node 4 train.py --epochs 2
    dtrain launch --nproc-per-node 4 train.py --epochs 2 --backend dtrain

The process group comes from torch's env:// contract (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK), or from --init-method (file:// or tcp://, with RANK and WORLD_SIZE from the
environment). The backend is gloo unless --backend names another: "dtrain" imports dtrain.torch,
which registers dtrain's collectives as a torch.distributed backend; nothing else in the script
knows of dtrain. CPU only. Linear regression on a fixed synthetic dataset, each rank on its shard
of every batch; at the end every replica must hold the same weights.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--backend", default="gloo", help="torch.distributed backend (gloo, dtrain)")
    parser.add_argument("--init-method", default="env://", help="env://, file://PATH or tcp://HOST:PORT")
    parser.add_argument("--float64", action="store_true", help="train in float64 (default float32)")
    parser.add_argument("--weights-out", default="", help="rank 0 writes the final parameters here, one a line")
    return parser.parse_args()


def init(args):
    if args.backend == "dtrain":
        import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    if args.init_method == "env://":
        dist.init_process_group(args.backend)
    else:  # file:// and tcp:// carry no rank: torch wants it passed in
        dist.init_process_group(args.backend, init_method=args.init_method,
                                rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))


def main():
    args = parse_args()
    init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    torch.set_num_threads(1)
    dtype = torch.float64 if args.float64 else torch.float32
    print(f"rank {rank}/{world} (local rank {local_rank}) up", flush=True)

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(1024, 16, generator=g, dtype=dtype)
    true_w = torch.linspace(-1, 1, 16, dtype=dtype).unsqueeze(1)
    y = x @ true_w + 0.5

    torch.manual_seed(0)
    model = DDP(nn.Linear(16, 1).to(dtype))
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
        if args.weights_out:
            with open(args.weights_out, "w") as f:
                f.writelines(f"{v!r}\n" for v in flat.tolist())
        print(f"done: {world} replicas agree ({args.backend})", flush=True)
    dist.barrier()  # earlier ops' tensors freed first (torch 1.13 joins a group's threads holding the GIL)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
