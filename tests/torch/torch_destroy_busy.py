"""A group destroyed from Python while its thread still runs an op on a tensor whose Python object
is gone: the thread's last reference to that tensor needs the GIL, which the destroying thread holds.
The group lets the GIL go while it joins its thread; before it did, every run hung here. Bounded by
ctest's timeout (a hang fails the test)."""

from torch_common import Checks, dist, init, parse_args, run_main, torch


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    for _ in range(5):
        group = dist.new_group(list(range(world)))
        t = torch.ones(1 << 22)
        work = dist.all_reduce(t, async_op=True, group=group)
        del t, work
        dist.destroy_process_group(group)
    t = torch.ones(4)
    dist.all_reduce(t)
    c.equal(t, torch.full((4,), float(world)), "all_reduce on the world after destroying busy groups")
    dist.destroy_process_group()
    print(f"rank {rank}: destroyed 5 busy groups", flush=True)


if __name__ == "__main__":
    run_main(main)
