#!/usr/bin/env python3
"""torch.distributed's gloo allreduce, measured the way bench/allreduce/coll_bench measures dtrain's.

The peer for dtrain's TCP engine in bench/run-all.sh. Run as a ranked worker under `dtrain launch`
(it reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun's workers do; set
GLOO_SOCKET_IFNAME=lo for loopback):

    gloo_allreduce.py [--sizes 8,64M]

float32 sum of a torch tensor, in place (gloo's only form). Per size: warm-up calls (a tenth of the
timed ones, at least 5), a barrier, then 2000 (up to 64 KiB), 200 (up to 1 MiB) or 20 timed calls,
the slowest rank's mean time, then a checked call on fresh data. Rank 0 prints coll_bench's columns.
"""

import argparse
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,64M")
    args = ap.parse_args()
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    status = 0
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        count = max(nbytes // 4, 1)
        pattern = (rank + torch.arange(count) % 7).to(torch.float32)
        buf = pattern.clone()
        iters = 2000 if count * 4 <= 65536 else 200 if count * 4 <= 1 << 20 else 20
        for _ in range(max(iters // 10, 5)):
            dist.all_reduce(buf)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        buf.copy_(pattern)
        dist.all_reduce(buf)
        want = (torch.arange(count) % 7 * n + n * (n - 1) // 2).to(torch.float32)
        wrong = torch.tensor([int((buf != want).sum())], dtype=torch.int64)
        dist.all_reduce(wrong)
        t = float(elapsed[0])
        alg = count * 4 / t / 1e9
        if rank == 0:
            print(f"{'allreduce':<15} {count * 4:>12} {count:>12} {'float':>6} {'sum':>6} {iters:>8} {t * 1e6:>12.2f} "
                  f"{alg:>10.3f} {alg * 2 * (n - 1) / n:>10.3f} {int(wrong[0]):>7}", flush=True)
        status = status or (3 if int(wrong[0]) else 0)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
