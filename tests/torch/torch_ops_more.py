"""The rest of torch_ops.py's checks: reduce_scatter, all-to-all (even and uneven), point-to-point
(also from any source), refusals, futures and overlap, timeouts."""

import copy
import datetime
import time
import warnings

from torch_common import DTYPES, TORCH2, data, dist, reference, torch

R = dist.ReduceOp


def check_reduce_scatter(c, G):
    for dtype, op in ((torch.float32, R.SUM), (torch.int64, R.MAX), (torch.float64, R.AVG), (torch.int8, R.BOR),
                      (torch.complex128, R.SUM)):
        ins = [data(G.rank, dtype, 5) * (j + 1) if dtype != torch.int8 else data(G.rank, dtype, 5) + j
               for j in range(G.size)]
        out = torch.zeros(5, dtype=dtype)
        dist.reduce_scatter(out, ins, op=op, group=G.g)

        def block(r, j):
            return data(r, dtype, 5) * (j + 1) if dtype != torch.int8 else data(r, dtype, 5) + j
        want = reference(op, [block(r, G.rank) for r in range(G.size)], dtype)
        c.equal(out, want, f"{G.name}: reduce_scatter {op} {dtype}", 1e-12 if op == R.AVG else None)
    big_in = torch.cat([data(G.rank, torch.float32, 1000) * (j + 1) for j in range(G.size)])
    out = torch.zeros(1000, dtype=torch.float32)
    dist._reduce_scatter_base(out, big_in, group=G.g)
    c.equal(out, reference(R.SUM, [data(r, torch.float32, 1000) * (G.rank + 1) for r in range(G.size)],
                           torch.float32), f"{G.name}: _reduce_scatter_base")
    out = torch.zeros(1000, dtype=torch.float32)
    dist._reduce_scatter_base(out, big_in, op=dist._make_nccl_premul_sum(0.25), group=G.g)
    c.equal(out, reference("premul", [data(r, torch.float32, 1000) * (G.rank + 1) for r in range(G.size)],
                           torch.float32, 0.25), f"{G.name}: _reduce_scatter_base PREMUL_SUM", 1e-6)


def _rows(sender, dest, n, width):
    """The n rows `sender` sends `dest` in the all-to-all checks: values that say who and which."""
    base = torch.arange(n * width, dtype=torch.float64).reshape(n, width)
    return base + 1000 * sender + 100 * dest


def check_alltoall(c, G):
    n, width = G.size, 3
    # equal splits: two rows per peer
    inp = torch.cat([_rows(G.rank, j, 2, width) for j in range(n)])
    out = torch.zeros_like(inp)
    dist.all_to_all_single(out, inp, group=G.g)
    want = torch.cat([_rows(j, G.rank, 2, width) for j in range(n)])
    c.equal(out, want, f"{G.name}: all_to_all_single, equal splits")
    gout = torch.zeros_like(inp)
    if _gloo(c, lambda: dist.all_to_all_single(gout, inp, group=G.gloo)):
        c.equal(out, gout, f"{G.name}: all_to_all_single (against gloo)")

    # uneven splits, zeros included: sender a sends (a + 2b) % 3 rows to b
    def split(a, b):
        return (a + 2 * b) % 3
    in_splits = [split(G.rank, j) for j in range(n)]
    out_splits = [split(j, G.rank) for j in range(n)]
    inp = torch.cat([_rows(G.rank, j, split(G.rank, j), width) for j in range(n)])
    out = torch.full((sum(out_splits), width), -1.0, dtype=torch.float64)
    dist.all_to_all_single(out, inp, out_splits, in_splits, group=G.g)
    want = torch.cat([_rows(j, G.rank, split(j, G.rank), width) for j in range(n)])
    c.equal(out, want, f"{G.name}: all_to_all_single, uneven splits {in_splits} -> {out_splits}")
    gout = torch.full_like(out, -1.0)
    if _gloo(c, lambda: dist.all_to_all_single(gout, inp, out_splits, in_splits, group=G.gloo)):
        c.equal(out, gout, f"{G.name}: all_to_all_single uneven (against gloo)")

    # the list form: tensors of different sizes per peer, every dtype
    for dtype in DTYPES:
        ins = [data(G.rank * 7 + j, dtype, 1 + split(G.rank, j)) for j in range(n)]
        outs = [torch.zeros(1 + split(j, G.rank), dtype=dtype) for j in range(n)]
        dist.all_to_all(outs, ins, group=G.g)
        for j in range(n):
            c.equal(outs[j], data(j * 7 + G.rank, dtype, 1 + split(j, G.rank)), f"{G.name}: all_to_all {dtype} from {j}")


def batch_coalesces_on_cpu():
    """Whether dist.batch_isend_irecv runs a batch of CPU tensors between the backend's start and end of
    coalescing: torch 1.13 for every backend, torch 2.7 and later for a backend that supports_coalescing
    (torch 2.0 to 2.6 for CUDA tensors only: distributed_c10d.py, batch_isend_irecv)."""
    if not TORCH2:
        return True
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    return bool(getattr(backend, "supports_coalescing", False))


def _gloo(c, fn):
    try:
        fn()
    except RuntimeError:
        return False
    c.gloo += 1
    return True


def check_p2p(c, G):
    n = G.size
    nxt, prv = (G.rank + 1) % n, (G.rank - 1) % n
    # a ring of small messages, every dtype: isend and irecv outstanding together
    for dtype in DTYPES:
        out = torch.zeros(6, dtype=dtype)
        s = dist.isend(data(G.rank, dtype, 6), G.global_rank(nxt), group=G.g, tag=5)
        r = dist.irecv(out, G.global_rank(prv), group=G.g, tag=5)
        s.wait()
        r.wait()
        c.equal(out, data(prv, dtype, 6), f"{G.name}: ring send/recv {dtype}")
    # a large message, ordered so neither side sends first into a full pipe
    big = torch.zeros(1 << 20, dtype=torch.float32)
    if G.rank == 0:
        dist.send(data(0, torch.float32, 1 << 20), G.global_rank(1), group=G.g)
        dist.recv(big, G.global_rank(1), group=G.g)
        c.equal(big, data(1, torch.float32, 1 << 20), f"{G.name}: 4 MiB recv")
    elif G.rank == 1:
        dist.recv(big, G.global_rank(0), group=G.g)
        c.equal(big, data(0, torch.float32, 1 << 20), f"{G.name}: 4 MiB recv")
        dist.send(data(1, torch.float32, 1 << 20), G.global_rank(0), group=G.g)
    # both sides post a large isend and then an irecv to each other as one batch: the backend runs
    # the pair as one sendrecv, so neither waits for the other's receive
    if G.rank in (0, 1):
        peer = 1 - G.rank
        out = torch.zeros(1 << 21, dtype=torch.float64)
        ops = [dist.P2POp(dist.isend, data(G.rank, torch.float64, 1 << 21), G.global_rank(peer), G.g, 11),
               dist.P2POp(dist.irecv, out, G.global_rank(peer), G.g, 11)]
        if batch_coalesces_on_cpu():
            works = dist.batch_isend_irecv(ops)
        else:  # torch 2.0 to 2.6 coalesce batch_isend_irecv for CUDA tensors only: the same batch by hand
            with dist.distributed_c10d._coalescing_manager(G.g, torch.device("cpu"), async_ops=True) as cm:
                for op in ops:
                    op.op(op.tensor, op.peer, op.group, op.tag)
            works = cm.works
        for w in works:
            w.wait()
        c.equal(out, data(peer, torch.float64, 1 << 21), f"{G.name}: 16 MiB isend/irecv exchange")
    # from any source: every other rank sends rank 0 one message
    if G.rank == 0:
        seen = set()
        for _ in range(n - 1):
            t = torch.zeros(4, dtype=torch.int64)
            src = dist.recv(t, group=G.g, tag=9)
            c.true(src in G.ranks and src != G.global_rank(0), f"{G.name}: recv from any source said {src}")
            c.equal(t, data(G.ranks.index(src), torch.int64, 4), f"{G.name}: recv from any source (from {src})")
            seen.add(src)
        c.true(len(seen) == n - 1, f"{G.name}: recv from any source got {sorted(seen)}")
    else:
        dist.send(data(G.rank, torch.int64, 4), G.global_rank(0), group=G.g, tag=9)
    dist.barrier(group=G.g)


def check_refusals(c, rank):
    warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")
    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    c.raises(lambda: dist.all_reduce(sparse), ["dtrain", "sparse"], "all_reduce of a sparse tensor")
    c.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.complex64), op=R.MAX), ["complex"],
             "all_reduce MAX of complex")
    c.raises(lambda: dist.all_reduce(torch.ones(3), op=R.BAND), ["BAND", "integer"], "all_reduce BAND of float32")
    c.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist._make_nccl_premul_sum(2.0)),
             ["PREMUL_SUM", "floating"], "all_reduce PREMUL_SUM of int32")
    # (dist.all_reduce views complex tensors as real pairs itself; the process group sees them as they are)
    half_complex = torch.zeros(4, dtype=torch.complex32)
    c.raises(lambda: dist.group.WORLD.allreduce([half_complex]), ["cannot reduce", "ComplexHalf"],
             "ProcessGroup.allreduce of complex32")
    # a dtype dtrain has no name for moves as bytes
    moved = (data(rank, torch.float16, 8) + 0.5 * rank).view(torch.complex32)
    dist.broadcast(moved, 1)
    c.equal(moved.view(torch.int16), (data(1, torch.float16, 8) + 0.5).view(torch.int16), "broadcast of complex32")
    world = dist.get_world_size()
    c.raises(lambda: dist.all_to_all_single(torch.zeros(2 * world), torch.zeros(2 * world), [5] + [0] * (world - 1)),
             ["split sizes add up to 5"], "all_to_all_single with output splits that do not add up")
    c.raises(lambda: dist.all_to_all_single(torch.zeros(2 * world), torch.zeros(4 * world)), ["one size"],
             "all_to_all_single with equal splits and sizes that differ")
    dist.barrier()  # nothing was queued by the refused calls: the group still matches


def check_futures_and_overlap(c, rank, world):
    # get_future() completes with the outputs; then() chains as DDP's communication hooks do
    t = torch.ones(8) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    total = sum(range(1, world + 1))
    c.equal(fut.wait(), torch.ones(8) * total * 2, "a future's then() on all_reduce's result")
    c.true(work.is_completed(), "all_reduce's work is completed after its future")
    # ops queue in order and run while the caller goes on: rank 0 issues 4 ops, then computes, while
    # rank 1 joins a second later; the calls return at once and the results come in order
    ts = [torch.full((1 << 16,), float(k + rank)) for k in range(4)]
    start = time.monotonic()
    if rank == 1:
        time.sleep(1.0)
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    issued = time.monotonic() - start
    if rank == 0:
        c.true(issued < 0.5, f"4 async all_reduces took {issued:.2f} s to issue (they should not wait)")
        c.true(not works[0].is_completed(), "an all_reduce completed before its peer joined")
        busy = torch.randn(200, 200)
        for _ in range(5):
            busy = torch.tanh(busy @ busy)
    for w in works:
        w.wait()
    for k, x in enumerate(ts):
        c.equal(x, torch.full((1 << 16,), float(k * world + sum(range(world)))), f"async all_reduce #{k}")
    c.true(all(w.is_completed() for w in works), "works are completed after wait()")


def check_ddp_hook(c, rank, world, gloo):
    """DDP with a communication hook that chains on the backend's future: its gradients are the
    average of every rank's local gradients (computed here without DDP, averaged over gloo)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
    plain = copy.deepcopy(model)
    ddp = DDP(model)
    calls = []

    def hook(state, bucket):
        calls.append(bucket.index())
        fut = dist.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    ddp.register_comm_hook(None, hook)
    torch.manual_seed(10 + rank)
    x = torch.randn(4, 6, dtype=torch.float64)
    ddp(x).square().sum().backward()
    plain(x).square().sum().backward()
    c.true(len(calls) > 0, "DDP called the communication hook")
    for p, q in zip(model.parameters(), plain.parameters()):
        want = q.grad.clone()
        dist.all_reduce(want, group=gloo)
        c.equal(p.grad, want / world, "DDP's hooked gradient is the ranks' average", 1e-12)


def check_timeouts(c, rank, world):
    # the group's timeout: rank 0 alone calls all_reduce on a group with a 2 s timeout
    short = dist.new_group(backend="dtrain", timeout=datetime.timedelta(seconds=2))
    # an op's own timeout on a group whose timeout is long
    long_group = dist.new_group(backend="dtrain", timeout=datetime.timedelta(seconds=600))
    if rank == 0:
        start = time.monotonic()
        text = c.raises(lambda: dist.all_reduce(torch.ones(4), group=short), ["rank 0", "all_reduce", "rank 1"],
                        "all_reduce with a missing peer, 2 s group timeout")
        took = time.monotonic() - start
        c.true(1.5 < took < 30, f"the 2 s timeout took {took:.1f} s: {text}")
        opts = dist.AllreduceOptions()
        opts.timeout = datetime.timedelta(seconds=1)
        start = time.monotonic()
        c.raises(lambda: long_group.allreduce([torch.ones(4)], opts).wait(), ["rank 0", "rank 1"],
                 "all_reduce with a missing peer, 1 s op timeout")
        took = time.monotonic() - start
        c.true(0.5 < took < 30, f"the 1 s op timeout took {took:.1f} s")
    dist.barrier()
