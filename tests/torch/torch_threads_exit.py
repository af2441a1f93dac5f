"""Two process groups, each driven from its own Python thread, then the interpreter exits without
destroying them. Each thread checks its results, then leaves async all_reduces in flight whose
tensors only the groups still hold (their Python objects are gone): rank 1 issues its part a second
late, so rank 0's interpreter reaches its exit while its groups' threads still wait in them. An
object freed with __main__ keeps each interpreter in its finalization for 2.5 s, so without a fix
such an op ends there, every time. At exit dtrain.torch shuts every group down (the ops run to the
end) before the interpreter finalizes; before it did, a group's thread that finished such an op
during the finalization took the GIL to free the tensor's Python object, the finalizing interpreter
ended that thread (pthread_exit) and its unwinding through a noexcept destructor ended the process
("terminate called without an active exception", SIGABRT). Run by run_ranks.py, which fails on any
exit status but 0."""

import threading
import time

from torch_common import Checks, dist, init, parse_args, run_main, torch


def drive(c, group, name, rank, world, errors):
    try:
        for i in range(50):
            t = torch.full((1000,), float(rank + i))
            dist.all_reduce(t, group=group)
            c.equal(t, torch.full((1000,), float(sum(range(world)) + world * i)), f"{name}: all_reduce #{i}")
        if rank == 1:
            time.sleep(1.0)
        for _ in range(3):
            dist.all_reduce(torch.ones(1 << 18), group=group, async_op=True)  # no wait; the tensor's only owner
    except BaseException as e:  # reported by the main thread
        errors.append(f"{name}: {e!r}")


class HoldFinalization:
    """Freed with __main__'s globals, in the interpreter's finalization: stays there a while."""

    def __del__(self):
        time.sleep(2.5)


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    groups = [dist.new_group(backend="dtrain") for _ in range(2)]
    errors = []
    threads = [threading.Thread(target=drive, args=(c, g, f"group {i}", rank, world, errors))
               for i, g in enumerate(groups)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError(f"rank {rank}: " + "; ".join(errors))
    print(f"rank {rank}: {c.count} checks passed on two groups from two threads; exiting with ops in flight",
          flush=True)


if __name__ == "__main__":
    run_main(main)
    hold = HoldFinalization()
