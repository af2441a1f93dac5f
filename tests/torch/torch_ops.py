"""Every ProcessGroup op of the dtrain backend, checked against gloo's result (the same op on a gloo
group of the same ranks) and against a reference computed here, on the world and on a subgroup.
Run on 2 or 3 ranks by `dtrain launch`, torchrun (env://) or run_ranks.py (--init file:// or
tcp://). Exit 0 when every check passed; a failure names the rank and the op."""

import time

from torch_common import (DTYPES, FLOATING, TORCH2, Checks, data, dist, init, parse_args, reference,
                          run_main, torch)
import torch_ops_more

R = dist.ReduceOp
OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR, R.AVG]


class Group:
    """A dtrain group, its gloo twin over the same ranks, and this rank's place in them."""

    def __init__(self, name, ranks, world, dtrain_group, gloo_group):
        self.name, self.ranks, self.g, self.gloo = name, ranks, dtrain_group, gloo_group
        self.size = len(ranks)
        self.rank = dist.get_rank(dtrain_group)
        self.world = world

    def global_rank(self, r):
        return self.ranks[r]


def ops_for(dtype):
    if dtype.is_complex:
        return [R.SUM, R.AVG]
    if dtype == torch.bool:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    if dtype.is_floating_point:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG]
    return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]


def tolerance(dtype, op):
    if isinstance(op, str) or op == R.AVG:  # "premul"
        return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
    return None


def gloo_try(c, fn):
    """Runs fn on the gloo group; returns its result, or None when gloo lacks the op or dtype."""
    try:
        out = fn()
    except RuntimeError:
        return None
    c.gloo += 1
    return out


def check_allreduce(c, G):
    for dtype in DTYPES:
        mine = data(G.rank, dtype)
        all_data = [data(r, dtype) for r in range(G.size)]
        for op in ops_for(dtype):
            t = mine.clone()
            dist.all_reduce(t, op=op, group=G.g)
            what = f"{G.name}: all_reduce {op} {dtype}"
            c.equal(t, reference(op, all_data, dtype), what, tolerance(dtype, op))
            if op != R.AVG and not dtype.is_complex and dtype != torch.bool:
                g = mine.clone()
                if gloo_try(c, lambda: dist.all_reduce(g, op=op, group=G.gloo)) is not None:
                    c.equal(t, g, what + " (against gloo)")
        if (dtype in FLOATING or dtype.is_complex):
            t = mine.clone()
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5), group=G.g)
            c.equal(t, reference("premul", all_data, dtype, 0.5), f"{G.name}: all_reduce PREMUL_SUM {dtype}",
                    tolerance(dtype, "premul"))
    # the factor as a 1-element tensor (torch 1.13 takes it in a list), and a large buffer (past the
    # small-message paths)
    t = data(G.rank, torch.float64, 1 << 18)
    factor = torch.tensor([2.0], dtype=torch.float64)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor if TORCH2 else [factor]), group=G.g)
    c.equal(t, reference("premul", [data(r, torch.float64, 1 << 18) for r in range(G.size)], torch.float64, 2.0),
            f"{G.name}: all_reduce PREMUL_SUM (tensor factor, 256K)", 1e-12)


def check_noncontiguous(c, G):
    base = torch.stack([data(G.rank, torch.float32, 12) * (k + 1) for k in range(3)])  # 3 x 12
    view = base.t()[::2]  # 6 x 3, strided
    keep = base.t()[1::2].clone()
    dist.all_reduce(view, group=G.g)
    want = torch.stack([data(r, torch.float32, 12) * (k + 1) for r in range(G.size) for k in range(3)])
    want = want.reshape(G.size, 3, 12).sum(0).t()[::2]
    c.equal(view, want, f"{G.name}: all_reduce of a strided view")
    c.equal(base.t()[1::2], keep, f"{G.name}: all_reduce left the view's neighbours alone")
    outs = [torch.zeros(7, 2, dtype=torch.int32)[:, 0] for _ in range(G.size)]
    dist.all_gather(outs, data(G.rank, torch.int32, 14).reshape(7, 2)[:, 1], group=G.g)
    for r in range(G.size):
        c.equal(outs[r], data(r, torch.int32, 14).reshape(7, 2)[:, 1], f"{G.name}: all_gather into strided outputs")


def check_coalesced_and_reduce(c, G):
    shapes = [(3,), (2, 4), (5,)]
    mine = [data(G.rank, torch.float64, 8 * (i + 1))[: torch.Size(s).numel()].reshape(s) for i, s in enumerate(shapes)]
    ts = [t.clone() for t in mine]
    dist.all_reduce_coalesced(ts, op=R.MAX, group=G.g)
    for i, s in enumerate(shapes):
        want = reference(R.MAX, [data(r, torch.float64, 8 * (i + 1))[: torch.Size(s).numel()].reshape(s)
                                 for r in range(G.size)], torch.float64)
        c.equal(ts[i], want, f"{G.name}: all_reduce_coalesced tensor {i}")
    for root in range(G.size):
        for dtype, op in ((torch.float32, R.SUM), (torch.int16, R.MAX), (torch.bfloat16, R.PRODUCT),
                          (torch.int64, R.BXOR), (torch.float64, R.AVG)):
            t = data(G.rank, dtype)
            dist.reduce(t, G.global_rank(root), op=op, group=G.g)
            if G.rank == root:
                c.equal(t, reference(op, [data(r, dtype) for r in range(G.size)], dtype),
                        f"{G.name}: reduce {op} {dtype} to {root}", tolerance(dtype, op))
            if op != R.AVG:
                g = data(G.rank, dtype)
                if gloo_try(c, lambda: dist.reduce(g, G.global_rank(root), op=op, group=G.gloo)) is not None \
                        and G.rank == root:
                    c.equal(t, g, f"{G.name}: reduce {op} {dtype} (against gloo)")


def check_broadcast_gather(c, G):
    for root in range(G.size):
        for dtype in DTYPES:
            t = data(G.rank, dtype, 9)
            dist.broadcast(t, G.global_rank(root), group=G.g)
            c.equal(t, data(root, dtype, 9), f"{G.name}: broadcast {dtype} from {root}")
        big = data(G.rank, torch.float32, 1 << 20)
        dist.broadcast(big, G.global_rank(root), group=G.g)
        c.equal(big, data(root, torch.float32, 1 << 20), f"{G.name}: broadcast 4 MiB from {root}")
        # gather and scatter
        outs = [torch.zeros(5, dtype=torch.int64) for _ in range(G.size)] if G.rank == root else None
        dist.gather(data(G.rank, torch.int64, 5), outs, dst=G.global_rank(root), group=G.g)
        if G.rank == root:
            for r in range(G.size):
                c.equal(outs[r], data(r, torch.int64, 5), f"{G.name}: gather to {root}, block {r}")
        out = torch.zeros(6, dtype=torch.complex64)
        ins = [data(r, torch.complex64, 6) * (root + 1) for r in range(G.size)] if G.rank == root else None
        dist.scatter(out, ins, src=G.global_rank(root), group=G.g)
        c.equal(out, data(G.rank, torch.complex64, 6) * (root + 1), f"{G.name}: scatter from {root}")
        gout = torch.zeros(6, dtype=torch.complex64)
        if gloo_try(c, lambda: dist.scatter(gout, ins, src=G.global_rank(root), group=G.gloo)) is not None:
            c.equal(out, gout, f"{G.name}: scatter from {root} (against gloo)")
    for dtype in DTYPES:
        outs = [torch.zeros(4, 3, dtype=dtype) for _ in range(G.size)]
        dist.all_gather(outs, data(G.rank, dtype, 12, (4, 3)), group=G.g)
        for r in range(G.size):
            c.equal(outs[r], data(r, dtype, 12, (4, 3)), f"{G.name}: all_gather {dtype} block {r}")
    flat = torch.zeros(G.size * 10, dtype=torch.float32)
    dist._all_gather_base(flat, data(G.rank, torch.float32, 10), group=G.g)
    c.equal(flat, torch.cat([data(r, torch.float32, 10) for r in range(G.size)]), f"{G.name}: _all_gather_base")
    gflat = torch.zeros_like(flat)
    if gloo_try(c, lambda: dist._all_gather_base(gflat, data(G.rank, torch.float32, 10), group=G.gloo)) is not None:
        c.equal(flat, gflat, f"{G.name}: _all_gather_base (against gloo)")
    ins = [data(G.rank, torch.float64, 3), data(G.rank, torch.float64, 8, (2, 4))]
    outs = [[torch.zeros(3, dtype=torch.float64), torch.zeros(2, 4, dtype=torch.float64)] for _ in range(G.size)]
    dist.all_gather_coalesced(outs, ins, group=G.g)
    for r in range(G.size):
        c.equal(outs[r][0], data(r, torch.float64, 3), f"{G.name}: all_gather_coalesced [{r}][0]")
        c.equal(outs[r][1], data(r, torch.float64, 8, (2, 4)), f"{G.name}: all_gather_coalesced [{r}][1]")


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    start = time.monotonic()
    gloo_world = dist.new_group(backend="gloo")
    sub_ranks = [0, world - 1] if world > 2 else [1, 0]
    sub = dist.new_group(sorted(sub_ranks), backend="dtrain")
    gloo_sub = dist.new_group(sorted(sub_ranks), backend="gloo")
    groups = [Group("world", list(range(world)), world, dist.group.WORLD, gloo_world)]
    if rank in sub_ranks:
        groups.append(Group(f"subgroup {sorted(sub_ranks)}", sorted(sub_ranks), world, sub, gloo_sub))
    c.true(dist.get_backend() == "dtrain", f"the default group's backend is {dist.get_backend()!r}")
    for G in groups:
        check_allreduce(c, G)
        check_noncontiguous(c, G)
        check_coalesced_and_reduce(c, G)
        check_broadcast_gather(c, G)
        torch_ops_more.check_reduce_scatter(c, G)
        torch_ops_more.check_alltoall(c, G)
        torch_ops_more.check_p2p(c, G)
    torch_ops_more.check_refusals(c, rank)
    torch_ops_more.check_futures_and_overlap(c, rank, world)
    torch_ops_more.check_ddp_hook(c, rank, world, gloo_world)
    torch_ops_more.check_timeouts(c, rank, world)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {c.count} checks passed ({c.gloo} gloo comparisons) on {world} ranks "
          f"in {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    run_main(main)
