"""Torch's sharded layers on the backend "dtrain", on the CPU, against one process (float64, relative
difference < 1e-9): DTensor (a row-sharded and a column-sharded matmul, redistributions between
Shard, Partial and Replicate), FSDP2 (fully_shard) training steps, and ZeRO (DDP with
ZeroRedundancyOptimizer) training steps. FSDP2 itself refuses the CPU in torch 2.6: its all-gather
records an event on its all-gather stream, and torch.cpu.Stream has no record_event
(torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_all_gather); the test then shows
that refusal (on the first forward, after fully_shard sharded the model over dtrain) instead of the
comparison. Run on 2 or 3 ranks by run_ranks.py. Skips (77) on torch 1.13, which has neither."""

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
        try:
            out = model(x[mine])
        except AttributeError as e:
            if step != 0 or "record_event" not in str(e):
                raise
            print(f"rank {rank}: torch's FSDP2 refuses the CPU (_fsdp_collectives.py, foreach_all_gather, "
                  f"on torch.cpu.Stream): {e}", flush=True)
            c.true(calls_on_dtrain() > before, "fully_shard sharded the model over dtrain before the refusal")
            return False
        loss = torch.nn.functional.mse_loss(out, y[mine])
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
    return True


def check_zero(c, rank, world):
    """DDP with ZeroRedundancyOptimizer (each rank steps its shard of the optimizer state, then
    broadcasts its parameters) against one process."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 2)).double()
    ref = copy.deepcopy(model)
    ddp = DDP(model)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    per_rank = 4
    for step in range(6):
        gen = torch.Generator().manual_seed(200 + step)
        x = torch.randn(world * per_rank, 10, dtype=torch.float64, generator=gen)
        y = torch.randn(world * per_rank, 2, dtype=torch.float64, generator=gen)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        torch.nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
        opt.step()
        opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        c.close(p.detach(), q.detach(), f"ZeRO after 6 Adam steps: {name}")


def main():
    args = parse_args()
    rank, world = init(args)
    c = Checks(rank)
    start = time.monotonic()
    mesh = init_device_mesh("cpu", (world,))
    c.true(mesh.get_group()._get_backend(torch.device("cpu")) is not None, "the mesh's group")
    check_dtensor(c, rank, world, mesh)
    fsdp2 = check_fsdp2(c, rank, world, mesh)
    check_zero(c, rank, world)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {c.count} checks passed on {world} ranks (torch {torch.__version__}; FSDP2 "
          f"{'trained' if fsdp2 else 'refused by torch on the CPU'}) in {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    run_main(main)
