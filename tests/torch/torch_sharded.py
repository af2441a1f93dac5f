"""Torch's sharded layers on the backend "dtrain", on the CPU, against one process (float64, relative
difference < 1e-9): DTensor (a row-sharded and a column-sharded matmul, redistributions between
Shard, Partial and Replicate) and FSDP2 (fully_shard) training steps. Run on 2 or 3 ranks by
run_ranks.py. Skips (77) on torch 1.13, which has neither."""

import copy
import time

from torch_common import Checks, dist, init, parse_args, require_torch2, run_main, torch

require_torch2("DTensor and FSDP2 (fully_shard)")

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import Replicate, Shard, distribute_tensor  # noqa: E402

try:
    from torch.distributed.fsdp import fully_shard
except ImportError:  # torch < 2.6 has it under _composable
    from torch.distributed._composable.fsdp import fully_shard


def calls_on_dtrain():
    return dist.group.WORLD._get_backend(torch.device("cpu"))._get_sequence_number_for_group()


def check_dtensor(c, rank, world, mesh):
    torch.manual_seed(0)
    a = torch.randn(8 * world, 6 * world, dtype=torch.float64)
    b = torch.randn(6 * world, 5, dtype=torch.float64)
    want = a @ b
    before = calls_on_dtrain()
    # rows of A on each rank, B everywhere: the product is row-sharded; full_tensor all-gathers it
    c_rows = distribute_tensor(a, mesh, [Shard(0)]) @ distribute_tensor(b, mesh, [Replicate()])
    c.true(c_rows.placements == (Shard(0),), f"row-sharded matmul placements {c_rows.placements}")
    c.close(c_rows.to_local(), want.chunk(world)[rank], "row-sharded matmul, the local shard")
    c.close(c_rows.full_tensor(), want, "row-sharded matmul, gathered")
    # columns of A times rows of B: partial sums; Replicate all-reduces, Shard(0) reduce-scatters them
    partial = distribute_tensor(a, mesh, [Shard(1)]) @ distribute_tensor(b, mesh, [Shard(0)])
    c.true(partial.placements[0].is_partial(), f"column x row matmul placements {partial.placements}")
    c.close(partial.redistribute(mesh, [Replicate()]).to_local(), want, "Partial -> Replicate (all_reduce)")
    c.close(partial.redistribute(mesh, [Shard(0)]).to_local(), want.chunk(world)[rank],
            "Partial -> Shard(0) (reduce_scatter)")
    # between shardings: Shard(0) -> Shard(1) (all-to-all), Shard(1) -> Replicate (all-gather)
    cols = c_rows.redistribute(mesh, [Shard(1)])
    c.close(cols.to_local(), want.chunk(world, dim=1)[rank], "Shard(0) -> Shard(1)")
    c.close(cols.redistribute(mesh, [Replicate()]).to_local(), want, "Shard(1) -> Replicate")
    c.true(calls_on_dtrain() > before, "DTensor's collectives ran on dtrain")


def check_fsdp2(c, rank, world, mesh):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 24), torch.nn.Tanh(),
                                torch.nn.Linear(24, 3)).double()
    ref = copy.deepcopy(model)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    per_rank = 4
    before = calls_on_dtrain()
    for step in range(6):
        gen = torch.Generator().manual_seed(100 + step)
        x = torch.randn(world * per_rank, 12, dtype=torch.float64, generator=gen)
        y = torch.randn(world * per_rank, 3, dtype=torch.float64, generator=gen)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = torch.nn.functional.mse_loss(model(x[mine]), y[mine])
        loss.backward()
        opt.step()
        opt.zero_grad()
        # one process, the whole batch: FSDP averages the ranks' gradients of equal-sized batches
        ref_loss = torch.nn.functional.mse_loss(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        c.close(mean / world, ref_loss.detach(), f"FSDP2 step {step}: the ranks' mean loss")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        c.close(p.full_tensor(), q.detach(), f"FSDP2 after 6 steps: {name}")
        c.close(p.to_local(), q.detach().chunk(world)[rank], f"FSDP2: this rank's shard of {name}")
    c.true(calls_on_dtrain() > before, "FSDP2's all-gathers and reduce-scatters ran on dtrain")


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    start = time.monotonic()
    mesh = init_device_mesh("cpu", (world,))
    c.true(mesh.get_group()._get_backend(torch.device("cpu")) is not None, "the mesh's group")
    check_dtensor(c, rank, world, mesh)
    check_fsdp2(c, rank, world, mesh)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {c.count} checks passed on {world} ranks (torch {torch.__version__}) "
          f"in {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    run_main(main)
