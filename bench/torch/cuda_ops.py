#!/usr/bin/env python3
"""Every op of the torch.distributed backend "dtrain" on a device's tensors against the same op
through a reference backend of the same ranks, under `dtrain launch` (scripts/gpu-check.sh: CUDA
tensors against torch's own "nccl"; on any machine: CPU tensors against gloo):

    cuda_ops.py [--device cuda|cpu] [--reference nccl|gloo] [--require-all]

The default group is dtrain's, the reference a group of the whole world (dist.new_group(backend=)).
Each case runs on both with the same inputs (each rank's own, made on the device: rank r's CUDA
tensors on GPU LOCAL_RANK) and compares the outputs: bitwise ("same"), or for floating point within
1e-6 relative (1e-2 for float16 and bfloat16: "close"). Rank 0 prints one line per case,

    case OP DTYPE RESULT      RESULT: same, close, DIFFERENT, ERROR (dtrain raised: the text
                              follows) or reference-lacks (the reference raised)

and then `cases N: S same, C close, D different, E errors, L not compared`; other ranks print only
their DIFFERENT and ERROR lines (to stderr, with their rank). Exit status 1 when a case differed or
dtrain raised on any rank, and with --require-all when the reference lacked a case (nccl has them
all); 0 otherwise.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]


def make(rank, shape, dtype, dev, salt):
    """Rank `rank`'s input: random but the same for both backends (seeded by rank and case)."""
    g = torch.Generator().manual_seed(1009 * rank + salt)
    if dtype == torch.bool:
        t = torch.randint(0, 2, shape, generator=g).bool()
    elif dtype.is_floating_point:
        t = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    else:
        t = torch.randint(0 if dtype == torch.uint8 else -9, 10, shape, generator=g).to(dtype)
    return t.to(dev)


class Cases:
    """Each case: fn(group, inp) -> output tensors; inp(shape, dtype, salt) gives this rank's input."""

    def __init__(self, rank, world, dev):
        self.rank, self.n, self.dev = rank, world, dev
        self.items = []

    def add(self, name, dtype, fn):
        self.items.append((name, dtype, fn))

    def inp(self, shape, dtype, salt, rank=None):
        return make(self.rank if rank is None else rank, shape, dtype, self.dev, salt)


def all_reduce_cases(c):
    for dtype in FLOATS + INTS + [torch.bool]:
        ops = [("sum", R.SUM), ("min", R.MIN), ("max", R.MAX), ("product", R.PRODUCT)]
        if dtype.is_floating_point:
            ops += [("avg", R.AVG), ("premul_sum", None)]
        for name, op in ops:
            def fn(g, dtype=dtype, op=op):
                t = c.inp((1000,), dtype, 1)
                dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5) if op is None else op, group=g)
                return [t]
            c.add(f"all_reduce.{name}", dtype, fn)


def collective_cases(c):
    n, rank, dt = c.n, c.rank, torch.float32

    def broadcast(g):
        t = c.inp((777,), dt, 2)
        dist.broadcast(t, src=n - 1, group=g)
        return [t]

    def reduce(g):
        t = c.inp((777,), dt, 3)
        dist.reduce(t, dst=0, group=g)
        return [t] if rank == 0 else []

    def all_gather(g):
        out = [torch.empty(333, device=c.dev) for _ in range(n)]
        dist.all_gather(out, c.inp((333,), dt, 4), group=g)
        return out

    def all_gather_into_tensor(g):
        out = torch.empty(n * 333, device=c.dev)
        dist.all_gather_into_tensor(out, c.inp((333,), dt, 5), group=g)
        return [out]

    def reduce_scatter(g):
        out = torch.empty(333, device=c.dev)
        dist.reduce_scatter(out, [c.inp((333,), dt, 6 + j) for j in range(n)], group=g)
        return [out]

    def reduce_scatter_tensor(op):
        def fn(g):
            out = torch.empty(333, device=c.dev)
            dist.reduce_scatter_tensor(out, c.inp((n * 333,), dt, 7), op=op, group=g)
            return [out]
        return fn

    def all_to_all_single(uneven):
        # rank r sends r + j + 1 elements to rank j when uneven
        def fn(g):
            send = [rank + j + 1 if uneven else 50 for j in range(n)]
            recv = [j + rank + 1 if uneven else 50 for j in range(n)]
            out = torch.empty(sum(recv), device=c.dev)
            dist.all_to_all_single(out, c.inp((sum(send),), dt, 8), recv if uneven else None,
                                   send if uneven else None, group=g)
            return [out]
        return fn

    def all_to_all(g):
        out = [torch.empty(40, device=c.dev) for _ in range(n)]
        dist.all_to_all(out, [c.inp((40,), dt, 9 + j) for j in range(n)], group=g)
        return out

    def gather(g):
        out = [torch.empty(222, device=c.dev) for _ in range(n)] if rank == 0 else None
        dist.gather(c.inp((222,), dt, 10), out, dst=0, group=g)
        return out or []

    def scatter(g):
        out = torch.empty(222, device=c.dev)
        dist.scatter(out, [c.inp((222,), dt, 11 + j) for j in range(n)] if rank == 0 else None, src=0, group=g)
        return [out]

    def ring(g):  # send to the next rank, receive from the previous one (batched: no ordering deadlock)
        out = torch.empty(555, device=c.dev)
        ops = [dist.P2POp(dist.isend, c.inp((555,), dt, 12), (rank + 1) % n, g),
               dist.P2POp(dist.irecv, out, (rank - 1) % n, g)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return [out]

    def coalesced(g):  # FSDP2's pattern: several gathers and reduce-scatters as one batch
        outs = [torch.empty(n * 100, device=c.dev) for _ in range(3)] + [torch.empty(100, device=c.dev) for _ in range(2)]
        with dist._coalescing_manager(group=g, device=torch.device(c.dev), async_ops=True) as cm:
            for i in range(3):
                dist.all_gather_into_tensor(outs[i], c.inp((100,), dt, 20 + i), group=g)
            for i in range(2):
                dist.reduce_scatter_tensor(outs[3 + i], c.inp((n * 100,), dt, 30 + i), group=g)
        cm.wait()
        return outs

    def barrier(g):
        dist.barrier(group=g)
        return []

    cases = [("broadcast", broadcast), ("reduce", reduce), ("all_gather", all_gather),
             ("all_gather_into_tensor", all_gather_into_tensor), ("reduce_scatter", reduce_scatter),
             ("reduce_scatter_tensor.sum", reduce_scatter_tensor(R.SUM)),
             ("reduce_scatter_tensor.avg", reduce_scatter_tensor(R.AVG)),
             ("all_to_all_single", all_to_all_single(False)), ("all_to_all_single.uneven", all_to_all_single(True)),
             ("all_to_all", all_to_all), ("gather", gather), ("scatter", scatter), ("barrier", barrier)]
    if n > 1:  # a ring needs a peer
        cases.append(("send_recv.ring", ring))
    if hasattr(dist, "_coalescing_manager"):  # torch 2.x
        cases.append(("coalesced.gather_scatter", coalesced))
    for name, fn in cases:
        c.add(name, dt, fn)


def compare(mine, ref, dtype):
    a = torch.cat([t.flatten().cpu() for t in mine]) if mine else torch.empty(0)
    b = torch.cat([t.flatten().cpu() for t in ref]) if ref else torch.empty(0)
    if torch.equal(a, b):
        return "same"
    if dtype.is_floating_point and a.shape == b.shape:
        tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
        if torch.allclose(a.double(), b.double(), rtol=tol, atol=tol):
            return "close"
    return "DIFFERENT"


def run_case(fn, dtype, g, ref):
    try:
        expected = fn(ref)
    except Exception as e:  # noqa: BLE001  (what the reference cannot do is not compared)
        expected = e
    try:
        mine = fn(g)
    except Exception as e:  # noqa: BLE001  (any failure of dtrain is the finding)
        return "ERROR", f"{type(e).__name__}: {e}"
    if isinstance(expected, Exception):
        return "reference-lacks", str(expected).splitlines()[0][:100]
    return compare(mine, expected, dtype), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--reference", default="nccl")
    ap.add_argument("--require-all", action="store_true")
    a = ap.parse_args()
    import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    dev = "cpu"
    if a.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dev = f"cuda:{local}"
    dist.init_process_group("dtrain", init_method="env://")
    ref = dist.new_group(backend=a.reference)
    rank, n = dist.get_rank(), dist.get_world_size()
    c = Cases(rank, n, dev)
    all_reduce_cases(c)
    collective_cases(c)
    counts = {"same": 0, "close": 0, "DIFFERENT": 0, "ERROR": 0, "reference-lacks": 0}
    for name, dtype, fn in c.items:
        result, detail = run_case(fn, dtype, None, ref)
        counts[result] += 1
        line = f"case {name} {str(dtype).replace('torch.', '')} {result}{' ' + detail if detail else ''}"
        if rank == 0:
            print(line, flush=True)
        elif result in ("DIFFERENT", "ERROR"):
            print(f"rank {rank}: {line}", file=sys.stderr, flush=True)
    bad = torch.tensor([counts["DIFFERENT"] + counts["ERROR"] + (counts["reference-lacks"] if a.require_all else 0)],
                       device=dev)
    dist.all_reduce(bad, op=R.MAX, group=ref)
    if rank == 0:
        print(f"cases {len(c.items)}: {counts['same']} same, {counts['close']} close, {counts['DIFFERENT']} different, "
              f"{counts['ERROR']} errors, {counts['reference-lacks']} not compared (the reference lacks them)", flush=True)
    dist.barrier(group=ref)
    dist.destroy_process_group()
    return 1 if int(bad[0]) else 0


if __name__ == "__main__":
    sys.exit(main())
