"""The torch 2.x surface of the backend "dtrain", on 2 or 3 ranks (run_ranks.py): the group's
backend is a ProcessGroupDtrain, a torch Backend, for "cpu" (and "cuda"); functional collectives and
their coalesced forms; _coalescing_manager (fast path and a batch of sends and receives as one
Work); sequence numbers; asyncOp; shutdown and abort with an op in flight; and what torch itself
refuses on the CPU (eager init with device_id, split_group). Skips (77) on torch 1.13."""

import threading
import time

from torch_common import (TORCH_VERSION, Checks, data, dist, init, parse_args, require_torch2, run_main,
                          torch)

require_torch2("the Backend surface (functional collectives, coalescing, abort, split)")

import torch.distributed._functional_collectives as funcol  # noqa: E402
from torch.distributed.distributed_c10d import _coalescing_manager  # noqa: E402

import dtrain.torch  # noqa: E402

CPU = torch.device("cpu")


def check_backend_object(c, rank):
    pg = dist.group.WORLD
    backend = pg._get_backend(CPU)
    c.true(isinstance(backend, dtrain.torch.ProcessGroupDtrain), f"the cpu backend is {type(backend)}")
    c.true(isinstance(backend, torch._C._distributed_c10d.Backend), "ProcessGroupDtrain is a torch Backend")
    # (the ProcessGroup's own name() is torch's "custom" for every plugin backend)
    c.true(backend.name() == "dtrain" and dist.get_backend() == "dtrain",
           f"the backend's name is {backend.name()}, the group's {dist.get_backend()}")
    cuda = pg._get_backend(torch.device("cuda"))  # registered for both devices: one object serves both
    c.true(cuda is backend or cuda == backend, "the cuda backend is the cpu one")
    c.true(pg.group_name != "", "the group has a name (functional collectives resolve it)")


def check_functional(c, rank, world):
    g = dist.group.WORLD
    t = data(rank, torch.float64, 12)
    want_sum = sum(data(r, torch.float64, 12) for r in range(world))
    c.equal(funcol.all_reduce(t, "sum", g).wait(), want_sum, "funcol.all_reduce")
    c.equal(funcol.all_gather_tensor(t, 0, g).wait(), torch.cat([data(r, torch.float64, 12) for r in range(world)]),
            "funcol.all_gather_tensor")
    big = torch.cat([data(rank, torch.float64, 12) * (j + 1) for j in range(world)])
    c.equal(funcol.reduce_scatter_tensor(big, "sum", 0, g).wait(), want_sum * (rank + 1),
            "funcol.reduce_scatter_tensor")
    rows = torch.arange(world * 2, dtype=torch.float64) + 100 * rank
    got = funcol.all_to_all_single(rows, [2] * world, [2] * world, g).wait()
    want = torch.cat([torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float64) + 100 * r for r in range(world)])
    c.equal(got, want, "funcol.all_to_all_single")
    ins = [data(rank, torch.float32, 5), data(rank + 1, torch.float64, 3)]
    outs = funcol.all_gather_into_tensor_coalesced(ins, g)
    for i, o in enumerate(outs):
        c.equal(funcol.wait_tensor(o), torch.cat([data(r + i, ins[i].dtype, ins[i].numel()) for r in range(world)]),
                f"funcol.all_gather_into_tensor_coalesced [{i}]")
    ins = [torch.cat([data(rank, torch.float64, 4) * (j + 1) for j in range(world)]),
           torch.cat([data(rank, torch.float32, 6) + j for j in range(world)])]
    outs = funcol.reduce_scatter_tensor_coalesced(ins, "sum", [0, 0], g)
    c.equal(funcol.wait_tensor(outs[0]), sum(data(r, torch.float64, 4) for r in range(world)) * (rank + 1),
            "funcol.reduce_scatter_tensor_coalesced [0]")
    c.equal(funcol.wait_tensor(outs[1]), sum(data(r, torch.float32, 6) for r in range(world)) + world * rank,
            "funcol.reduce_scatter_tensor_coalesced [1]")
    # the same through the traced (compiled) ops' entry, torch.ops._c10d_functional
    out = torch.ops._c10d_functional.all_reduce(t, "avg", g.group_name)
    c.equal(torch.ops._c10d_functional.wait_tensor(out), want_sum / world, "_c10d_functional.all_reduce avg", 1e-12)


def check_coalescing(c, rank, world):
    g = dist.group.WORLD
    # fast path: all_gather_into_tensor / reduce_scatter_tensor captured and run as the coalesced op
    outs = [torch.zeros(world * 3, dtype=torch.float64) for _ in range(4)]
    with _coalescing_manager(group=g, async_ops=True) as cm:
        for i in range(4):
            dist.all_gather_into_tensor(outs[i], data(rank, torch.float64, 3) * (i + 1), group=g)
    cm.wait()
    for i in range(4):
        c.equal(outs[i], torch.cat([data(r, torch.float64, 3) * (i + 1) for r in range(world)]),
                f"coalesced all_gather_into_tensor [{i}]")
    outs = [torch.zeros(3, dtype=torch.float64) for _ in range(3)]
    with _coalescing_manager(group=g):
        for i in range(3):
            dist.reduce_scatter_tensor(outs[i], torch.cat([data(rank, torch.float64, 3) + i + j for j in range(world)]),
                                       group=g)
    for i in range(3):
        c.equal(outs[i], sum(data(r, torch.float64, 3) for r in range(world)) + world * (i + rank),
                f"coalesced reduce_scatter_tensor [{i}]")
    # with a device: start/endCoalescing; a ring of large sends and receives in every order, one Work
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for order in ("send first", "recv first"):
        got = torch.zeros(1 << 21, dtype=torch.float64)  # 16 MiB: more than the engines hold in flight
        with _coalescing_manager(group=g, device=CPU, async_ops=True) as cm:
            ops = [lambda: dist.isend(data(rank, torch.float64, 1 << 21), nxt, group=g),
                   lambda: dist.irecv(got, prv, group=g)]
            for op in (ops if order == "send first" else ops[::-1]):
                op()
        c.true(len(cm.works) == 1, f"the batch is one Work, got {len(cm.works)}")
        cm.wait()
        c.equal(got, data(prv, torch.float64, 1 << 21), f"coalesced 16 MiB ring exchange, {order}")
    backend = g._get_backend(CPU)
    if TORCH_VERSION >= (2, 7):
        c.true(backend.supports_coalescing, "supports_coalescing")
        got = torch.zeros(1 << 21, dtype=torch.float64)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, data(rank, torch.float64, 1 << 21), nxt, g),
                                        dist.P2POp(dist.irecv, got, prv, g)])
        for w in works:
            w.wait()
        c.equal(got, data(prv, torch.float64, 1 << 21), "batch_isend_irecv, 16 MiB ring")


def check_sequence_numbers(c, rank, world, gloo):
    g = dist.new_group(backend="dtrain")
    backend = g._get_backend(CPU)
    backend._set_sequence_number_for_group()
    start = backend._get_sequence_number_for_group()
    for _ in range(5):
        dist.all_reduce(torch.ones(3), group=g)
    dist.barrier(group=g)
    n = backend._get_sequence_number_for_group()
    c.true(n - start == 6, f"6 calls advanced the sequence number by {n - start}")
    mine = torch.tensor([n], dtype=torch.int64)
    every = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(every, mine, group=gloo)
    c.true(len({int(x) for x in every}) == 1, f"the ranks agree on the sequence number: {[int(x) for x in every]}")
    try:
        c.true(g._get_sequence_number_for_group() == n, "the process group's sequence number is the backend's")
    except RuntimeError as e:  # torch 2.6's ProcessGroup asks only gloo, NCCL and UCC backends (ProcessGroup.hpp)
        c.true("does not yet support sequence numbers" in str(e), f"the group's sequence number: {e}")
    dist.destroy_process_group(g)


def check_async_op(c, rank):
    backend = dist.group.WORLD._get_backend(CPU)
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    opts.asyncOp = False
    t = data(rank, torch.float32, 4096)
    if rank == 1:
        time.sleep(0.5)  # rank 0's call must wait for rank 1
    work = backend.broadcast([t], opts)
    c.true(work.is_completed(), "asyncOp False: the broadcast is done when the call returns")
    c.equal(t, data(0, torch.float32, 4096), "asyncOp False broadcast")


def check_shutdown_and_abort(c, rank, world, gloo):
    # shutdown: the op already issued runs; later ops are refused
    g = dist.new_group([0, 1], backend="dtrain")
    if rank in (0, 1):
        backend = g._get_backend(CPU)
        t = torch.ones(1 << 16)
        work = dist.all_reduce(t, group=g, async_op=True)
        backend.shutdown()
        c.true(work.is_completed(), "shutdown ran the op already issued")
        c.equal(t, torch.full((1 << 16,), 2.0), "the op issued before shutdown")
        c.raises(lambda: dist.all_reduce(torch.ones(3), group=g), ["dtrain", "all_reduce", "shut down"],
                 "an op after shutdown")
    dist.destroy_process_group(g)
    # abort: rank 0's op waits for rank 1, which never calls; abort ends it with the reason
    g = dist.new_group([0, 1], backend="dtrain")
    if rank in (0, 1):
        backend = g._get_backend(CPU)
    if rank == 0:
        work = dist.all_reduce(torch.ones(1 << 16), group=g, async_op=True)
        time.sleep(0.5)
        c.true(not work.is_completed(), "the op waits for rank 1")
        if TORCH_VERSION < (2, 7):
            # torch 2.6's _abort_process_group aborts ProcessGroupNCCL only: for any other backend it
            # logs a warning and returns, and in a torch without NCCL (Debian's) it fails on the name
            # ProcessGroupNCCL (torch/distributed/distributed_c10d.py, _abort_process_group)
            try:
                dist.distributed_c10d._abort_process_group(g)
            except NameError as e:
                print(f"rank 0: torch's _abort_process_group: {e!r}", flush=True)
            time.sleep(0.2)
            c.true(not work.is_completed(), "torch < 2.7's _abort_process_group does not reach the backend")
            aborter = threading.Thread(target=backend.abort, args=("the test aborted the group",))
        else:
            aborter = threading.Thread(target=dist.distributed_c10d._abort_process_group, args=(g,))
        start = time.monotonic()
        aborter.start()
        text = c.raises(work.wait, ["dtrain backend", "all_reduce", "abort"], "the op in flight when aborted")
        aborter.join()
        took = time.monotonic() - start
        c.true(took < 10, f"abort took {took:.1f} s to end the op in flight")
        print(f"rank 0: the aborted op said: {text}", flush=True)
        c.raises(lambda: backend.allreduce([torch.ones(3)], dist.AllreduceOptions()), ["dtrain", "abort"],
                 "an op after abort")
    dist.barrier(group=gloo)
    if TORCH_VERSION < (2, 7) or rank != 0:
        dist.destroy_process_group(g)


def check_cpu_refusals(c, rank, world):
    """What torch itself refuses on the CPU, shown: eager init (device_id) and split_group."""
    try:
        g = dist.new_group(backend="dtrain", device_id=torch.device("cpu"))
    except ValueError as e:  # torch 2.6: distributed_c10d.py, _new_process_group_helper
        c.true("must be a cuda device" in str(e), f"device_id=cpu refused for another reason: {e}")
        print(f"rank {rank}: torch refuses eager init on the CPU: {e}", flush=True)
    else:
        t = torch.ones(4)
        dist.all_reduce(t, group=g)
        c.equal(t, torch.full((4,), float(world)), "all_reduce on a group made with device_id=cpu")
        dist.destroy_process_group(g)
    try:
        sub = dist.split_group(split_ranks=[[0, 1]])
    except RuntimeError as e:  # torch 2.6: distributed_c10d.py, split_group (a bound CUDA device, NCCL only)
        c.true("No device associated with the default pg" in str(e) or "does not support splitting" in str(e),
               f"split_group refused for another reason: {e}")
        print(f"rank {rank}: torch refuses split_group on the CPU: {e}", flush=True)
    else:
        if sub is not None:
            t = torch.ones(4)
            dist.all_reduce(t, group=sub)
            c.equal(t, torch.full((4,), 2.0), "all_reduce on a split group")
    backend = dist.group.WORLD._get_backend(CPU)
    c.true(backend.supports_splitting if TORCH_VERSION >= (2, 3) else True, "supports_splitting")


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    start = time.monotonic()
    gloo = dist.new_group(backend="gloo")
    check_backend_object(c, rank)
    check_functional(c, rank, world)
    check_coalescing(c, rank, world)
    check_sequence_numbers(c, rank, world, gloo)
    check_async_op(c, rank)
    check_cpu_refusals(c, rank, world)
    check_shutdown_and_abort(c, rank, world, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    print(f"rank {rank}: {c.count} checks passed on {world} ranks (torch {torch.__version__}) "
          f"in {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    run_main(main)
