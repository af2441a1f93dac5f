#!/usr/bin/env python3
"""torch.distributed.all_reduce through several backends in one job, measured as coll_bench measures
dtrain's C call (bench/torch/compare.py runs it under `dtrain launch`):

    torch_allreduce.py [--backends dtrain,gloo] [--sizes 8,64M] [--flip]

The first backend is the default process group, the others groups of the whole world made with
dist.new_group(backend=...), so every backend runs in the same processes on the same tensors' sizes.
Per size the backends take turns (the order reversed every other size, and once more with --flip):
float32 sum of a torch tensor, in place; warm-up calls (a tenth of the timed ones, at least 5), a
barrier, then 2000 (up to 64 KiB), 200 (up to 1 MiB) or 20 timed calls, the slowest rank's mean
time, then a checked call on fresh data. Rank 0 prints one line per size and backend:

    allreduce BACKEND BYTES ITERS TIME_US WRONG

Exit status 3 when a sum was wrong.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def measure(group, nbytes, rank, n):
    count = max(nbytes // 4, 1)
    pattern = (rank + torch.arange(count) % 7).to(torch.float32)
    buf = pattern.clone()
    iters = 2000 if count * 4 <= 65536 else 200 if count * 4 <= 1 << 20 else 20
    for _ in range(max(iters // 10, 5)):
        dist.all_reduce(buf, group=group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf, group=group)
    elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    buf.copy_(pattern)
    dist.all_reduce(buf, group=group)
    want = (torch.arange(count) % 7 * n + n * (n - 1) // 2).to(torch.float32)
    wrong = torch.tensor([int((buf != want).sum())], dtype=torch.int64)
    dist.all_reduce(wrong, group=group)
    return count * 4, iters, float(elapsed[0]), int(wrong[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="dtrain,gloo")
    ap.add_argument("--sizes", default="8,64,512,4K,32K,64K,256K,1M,4M,16M,64M")
    ap.add_argument("--flip", action="store_true", help="start with the other order")
    args = ap.parse_args()
    backends = args.backends.split(",")
    if "dtrain" in backends:
        import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    torch.set_num_threads(1)
    dist.init_process_group(backends[0], init_method="env://")
    groups = {backends[0]: None}
    for b in backends[1:]:
        groups[b] = dist.new_group(backend=b)
    rank, n = dist.get_rank(), dist.get_world_size()
    status = 0
    for i, nbytes in enumerate(parse_size(s) for s in args.sizes.split(",")):
        order = backends if (i % 2 == 0) != args.flip else list(reversed(backends))
        for b in order:
            size, iters, t, wrong = measure(groups[b], nbytes, rank, n)
            if rank == 0:
                print(f"allreduce {b} {size} {iters} {t * 1e6:.2f} {wrong}", flush=True)
            status = status or (3 if wrong else 0)
    for g in groups.values():  # earlier ops' tensors freed first (torch 1.13 joins a group's threads
        dist.barrier(group=g)  # holding the GIL)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
