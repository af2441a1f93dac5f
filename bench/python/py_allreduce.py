#!/usr/bin/env python3
"""dtrain.allreduce from Python, measured the way bench/allreduce/coll_bench measures the C call.

Run as a ranked worker under `dtrain launch` (bench/python/compare.sh runs it alternately with
coll_bench):

    py_allreduce.py [--sizes 8,64M] [--warmup N] [--iters N] [--check 0|1]

float32 sum through the module-level dtrain.allreduce(send, out=recv), as a user would call it. Per
size: warm-up calls, a barrier, then timed iterations (default: 2000 up to 64 KiB, 200 up to 1 MiB,
20 above, as coll_bench), the slowest rank's mean time, then a checked call on fresh data. Buffers
rotate exactly as coll_bench's do (enough to exceed 256 MiB per rank at large sizes, at most 8).
Rank 0 prints coll_bench's columns: op, size, count, type, redop, iters, time_us, algbw, busbw, #wrong.
"""

import argparse
import sys
import time

import numpy as np

import dtrain


def parse_size(text):
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def bench_size(world, nbytes, args):
    """(iterations, slowest rank's mean seconds, wrong elements) for one message size."""
    n = world.size
    count = max(nbytes // 4, 1)
    nbuf = min(max((256 << 20) // (2 * count * 4) + 1, 2), 8)
    pattern = (world.rank + np.arange(count) % 7).astype(np.float32)
    send = [pattern.copy() for _ in range(nbuf)]
    recv = [np.zeros(count, np.float32) for _ in range(nbuf)]
    iters = args.iters or (2000 if nbytes <= 65536 else 200 if nbytes <= 1 << 20 else 20)
    for w in range(args.warmup):
        dtrain.allreduce(send[w % nbuf], out=recv[w % nbuf])
    dtrain.barrier()
    t0 = time.perf_counter()
    for it in range(iters):
        dtrain.allreduce(send[it % nbuf], out=recv[it % nbuf])
    elapsed = (time.perf_counter() - t0) / iters
    slowest = float(dtrain.allreduce(np.array([elapsed]), op="max")[0])
    wrong = 0
    if args.check:
        recv[0][:] = 0
        dtrain.allreduce(pattern, out=recv[0])
        want = (np.arange(count) % 7 * n + n * (n - 1) // 2).astype(np.float32)
        wrong = int(dtrain.allreduce(np.array([np.count_nonzero(recv[0] != want)], np.int64))[0])
    return iters, slowest, wrong, count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,64M")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--check", type=int, default=1)
    args = ap.parse_args()
    world = dtrain.init()
    n = world.size
    if world.rank == 0:
        print(f"# dtrain python {dtrain.version()}, {n} ranks, numpy {np.__version__}, float32 sum")
        print(f"{'# op':<15} {'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'iters':>8} {'time_us':>12} "
              f"{'algbw_GBs':>10} {'busbw_GBs':>10} {'#wrong':>7}")
    status = 0
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        iters, t, wrong, count = bench_size(world, nbytes, args)
        alg = count * 4 / t / 1e9
        if world.rank == 0:
            print(f"{'allreduce':<15} {count * 4:>12} {count:>12} {'float':>6} {'sum':>6} {iters:>8} {t * 1e6:>12.2f} "
                  f"{alg:>10.3f} {alg * 2 * (n - 1) / n:>10.3f} {wrong:>7}", flush=True)
        status = status or (3 if wrong else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
