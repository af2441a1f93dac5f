"""One rank of the CPU-binding benchmark (bench/bind/run.sh): a DDP training step on the CPU (gloo),
an MLP big enough that the step is compute (its matmuls run on OMP_NUM_THREADS threads, as the
launcher set them) and an all_reduce of its gradients (about 6 MB). Rank 0 prints "median_ms p90_ms"
of the timed steps."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(5):  # warm-up: buckets, connections, caches
        step()
    took = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        took.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        took.sort()
        print(f"{statistics.median(took) * 1e3:.2f} {took[int(len(took) * 0.9)] * 1e3:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("USE_LIBUV", "0")
    main()
