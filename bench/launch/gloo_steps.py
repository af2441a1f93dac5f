"""One rank of the per-step benchmark (bench/launch/steps.sh): torch.distributed on gloo, env://
(as torchrun, `dtrain launch` and a launch by hand all set it up), a loop of small all_reduces (21
floats, a step's worth of scalars: the launcher's share of a step shows most where the step does
least). Rank 0 prints "median_us p90_us" of the timed calls."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    dist.init_process_group("gloo")
    t = torch.ones(21)
    for _ in range(200):  # warm-up: connections, caches, the scheduler's view of the ranks
        dist.all_reduce(t)
    took = []
    for _ in range(steps):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        took.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        took.sort()
        print(f"{statistics.median(took) * 1e6:.1f} {took[int(len(took) * 0.9)] * 1e6:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("USE_LIBUV", "0")
    main()
