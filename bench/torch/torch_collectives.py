#!/usr/bin/env python3
"""torch.distributed collectives through several backends in one job, measured as coll_bench measures
dtrain's C call (bench/torch/compare.py and compare_sharded.py run it under `dtrain launch`):

    torch_collectives.py [--ops all_reduce,...] [--backends dtrain,gloo] [--sizes 8,64M] [--flip]

Ops: all_reduce (in place), reduce_scatter_tensor and all_gather_into_tensor (out of place). A size
is the whole tensor's bytes: the all_reduce buffer, reduce_scatter_tensor's input (each rank gets
1/world of it), all_gather_into_tensor's output (each rank gives 1/world of it); float32, sum.
The first backend is the default process group, the others groups of the whole world made with
dist.new_group(backend=...), so every backend runs in the same processes on the same tensors' sizes.
Per op and size the backends take turns (the order reversed every other size, and once more with
--flip): warm-up calls (a tenth of the timed ones, at least 5), a barrier, then 2000 (up to 64 KiB),
200 (up to 1 MiB) or 20 timed calls, the slowest rank's mean time, then a checked call on fresh
data. Rank 0 prints one line per op, size and backend:

    OP BACKEND BYTES ITERS TIME_US WRONG

Exit status 3 when a result was wrong.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist

OPS = ("all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor")


def parse_size(text):
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def pattern(base, count, offset=0):
    """base + (offset + i) % 7 for i < count: small integers, exact in float32 sums."""
    return (base + (torch.arange(count) + offset) % 7).to(torch.float32)


def buffers(op, count, rank, n):
    """(first, inp, out, call, want): call(group) runs the op once from inp into out (one tensor for
    all_reduce, in place); with `first` copied into inp, out's contents afterwards must be want."""
    chunk = count // n
    sums = lambda offset, m: ((torch.arange(m) + offset) % 7 * n + n * (n - 1) // 2).to(torch.float32)
    if op == "all_reduce":
        first = pattern(rank, count)
        buf = first.clone()
        return first, buf, buf, lambda g: dist.all_reduce(buf, group=g), sums(0, count)
    if op == "reduce_scatter_tensor":
        first = pattern(rank, count)
        inp, out = first.clone(), torch.empty(chunk)
        return first, inp, out, lambda g: dist.reduce_scatter_tensor(out, inp, group=g), sums(rank * chunk, chunk)
    first = pattern(10 * rank, chunk, rank)
    inp, out = first.clone(), torch.empty(count)
    want = torch.cat([pattern(10 * r, chunk, r) for r in range(n)])
    return first, inp, out, lambda g: dist.all_gather_into_tensor(out, inp, group=g), want


def measure(op, group, nbytes, rank, n):
    count = max(nbytes // 4 // n, 1) * n
    first, inp, out, call, want = buffers(op, count, rank, n)
    iters = 2000 if count * 4 <= 65536 else 200 if count * 4 <= 1 << 20 else 20
    for _ in range(max(iters // 10, 5)):
        call(group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        call(group)
    elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    out.zero_()
    inp.copy_(first)
    call(group)
    wrong = torch.tensor([int((out != want).sum())], dtype=torch.int64)
    dist.all_reduce(wrong, group=group)
    return count * 4, iters, float(elapsed[0]), int(wrong[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="all_reduce")
    ap.add_argument("--backends", default="dtrain,gloo")
    ap.add_argument("--sizes", default="8,64,512,4K,32K,64K,256K,1M,4M,16M,64M")
    ap.add_argument("--flip", action="store_true", help="start with the other order")
    args = ap.parse_args()
    ops, backends = args.ops.split(","), args.backends.split(",")
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        ap.error(f"unknown op {unknown[0]!r} (one of {', '.join(OPS)})")
    if "dtrain" in backends:
        import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    torch.set_num_threads(1)
    dist.init_process_group(backends[0], init_method="env://")
    groups = {backends[0]: None}
    for b in backends[1:]:
        groups[b] = dist.new_group(backend=b)
    rank, n = dist.get_rank(), dist.get_world_size()
    status = 0
    for op in ops:
        for i, nbytes in enumerate(parse_size(s) for s in args.sizes.split(",")):
            order = backends if (i % 2 == 0) != args.flip else list(reversed(backends))
            for b in order:
                size, iters, t, wrong = measure(op, groups[b], nbytes, rank, n)
                if rank == 0:
                    print(f"{op} {b} {size} {iters} {t * 1e6:.2f} {wrong}", flush=True)
                status = status or (3 if wrong else 0)
    for g in groups.values():  # earlier ops' tensors freed first (torch 1.13 joins a group's threads
        dist.barrier(group=g)  # holding the GIL)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
