"""A killed peer surfaces from wait() as an error naming it, never as a hang: rank N-1 kills itself
(SIGKILL) after init; the others' next collectives on the world and on a subgroup that holds it
fail with a message naming that rank. Run by run_ranks.py with --expect N-1=-9."""

import os
import signal
import time

from torch_common import Checks, dist, init, parse_args, run_main, torch


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    victim = world - 1
    sub = dist.new_group([0, victim], backend="dtrain")
    t = torch.ones(1000)
    dist.all_reduce(t)
    c.equal(t, torch.full((1000,), float(world)), "all_reduce before the kill")
    dist.barrier()
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    start = time.monotonic()
    text = c.raises(lambda: dist.all_reduce(torch.ones(1 << 16)), [f"rank {victim}"], "all_reduce after a peer died")
    print(f"rank {rank}: {text}", flush=True)
    if rank == 0:
        work = dist.broadcast(torch.ones(8), victim, group=sub, async_op=True)
        # (the subgroup's own ranks: the victim is its rank 1)
        c.raises(work.wait, ["group 1 (ranks 0,", "rank 1 (pid", "died"], "broadcast from a dead root (subgroup)")
    took = time.monotonic() - start
    c.true(took < 60, f"the dead peer took {took:.1f} s to surface")
    print(f"rank {rank}: {c.count} checks passed; the dead peer surfaced in {took:.1f} s", flush=True)
    os._exit(0)  # the world group has failed: no orderly teardown to wait for


if __name__ == "__main__":
    run_main(main)
