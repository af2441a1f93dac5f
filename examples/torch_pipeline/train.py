"""Pipeline- and data-parallel training of an nn.Sequential with torch.distributed, under `dtrain launch`:

    dtrain launch examples/jobs/torch-pipeline.json
    dtrain launch --nproc-per-node 4 --set /parallel/pipeline=2 --set /batch/global=16 \
        --set /batch/micro_batches=4 --set /batch/dataset_size=256 examples/torch_pipeline/train.py

One multilayer perceptron (8 inputs, --hidden units, tanh between dense layers, one output) is built
the same way in every process (float64, fixed seeds) and cut into DTRAIN_PP_SIZE stages; this
worker keeps stage DTRAIN_PP_RANK of replica DTRAIN_DP_RANK. Each step takes the global batch's
share of this replica in DTRAIN_MICRO_BATCHES micro-batches through the stages in the order of
DTRAIN_PP_SCHEDULE (gpipe or 1f1b): activations to the next stage and gradients back with
dist.send / dist.recv, the gradients of every stage averaged over its data group (dist.new_group),
then an SGD step. Every layout trains the weights of one process, up to rounding.
See dtrain-examples(7), TORCH PIPELINE EXAMPLE.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import layout as layout_mod
import schedule

INPUTS = 8


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    ap.add_argument("--layers", type=int, default=4, help="dense layers, at least the stages (default 4)")
    ap.add_argument("--hidden", type=int, default=16, help="units of each hidden layer (default 16)")
    ap.add_argument("--backend", default="dtrain", help="torch.distributed backend (default dtrain; gloo to compare)")
    ap.add_argument("--weights-out", default="", metavar="PREFIX",
                    help="replica 0 of each stage writes its parameters to PREFIX.STAGE, one a line")
    a = ap.parse_args()
    if not (a.lr > 0 and 1 <= a.layers <= 64 and 1 <= a.hidden <= 4096):
        ap.error("--lr must be > 0, --layers 1 to 64, --hidden 1 to 4096")
    return a


def build_model(layers, hidden):
    """The whole nn.Sequential, the same in every process: [Linear, Tanh] x (layers - 1), Linear."""
    torch.manual_seed(0)
    widths = [INPUTS] + [hidden] * (layers - 1) + [1]
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(widths[i], widths[i + 1], dtype=torch.float64))
        if i < layers - 1:
            mods.append(nn.Tanh())
    return nn.Sequential(*mods), widths


def dataset(n):
    """Sample i of a synthetic regression, the same in every process."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, INPUTS, generator=g, dtype=torch.float64)
    w = torch.linspace(-1, 1, INPUTS, dtype=torch.float64)
    y = 0.8 * torch.sin(x @ w) + 0.3 * x[:, 0] * x[:, 1] + 0.01 * torch.randn(n, generator=g, dtype=torch.float64)
    return x, y.unsqueeze(1)


def topology(lay):
    """Global ranks of the previous and next stage of this replica, and this stage's data group."""
    me = torch.tensor([lay.pp, lay.dp, dist.get_rank()], dtype=torch.int64)
    every = [torch.zeros(3, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(every, me)
    where = {(int(v[0]), int(v[1])): int(v[2]) for v in every}
    group = None
    for s in range(lay.pp_size):  # every rank creates every group, in the same order (torch's rule)
        g = dist.new_group(sorted(where[(s, d)] for d in range(lay.dp_size)))
        if s == lay.pp:
            group = g
    return where.get((lay.pp - 1, lay.dp)), where.get((lay.pp + 1, lay.dp)), group


class Stage:
    """This worker's layers and the state of one step's micro-batches."""

    def __init__(self, module, lay, width_in, width_out, prev, nxt, data):
        self.m, self.lay, self.prev, self.next = module, lay, prev, nxt
        self.first, self.last = prev is None, nxt is None
        self.width_in, self.width_out = width_in, width_out
        self.x, self.y = data
        self.inputs, self.outputs, self.grads = {}, {}, {}
        self.loss = 0.0

    def recv(self, width, peer):
        buf = torch.empty(self.lay.micro_size, width, dtype=torch.float64)
        dist.recv(buf, src=peer)
        return buf

    def forward(self, u, ids):
        rows = ids[u * self.lay.micro_size:(u + 1) * self.lay.micro_size]
        inp = self.x[rows] if self.first else self.inputs[u].requires_grad_()
        self.inputs[u] = inp
        out = self.m(inp)
        if self.last:  # this micro-batch's part of the replica's mean squared error
            out = ((out - self.y[rows]) ** 2).sum() / self.lay.per_replica
            self.loss += out.item()
        self.outputs[u] = out

    def backward(self, u):
        out = self.outputs.pop(u)
        out.backward() if self.last else out.backward(self.grads.pop(u))

    def run(self, actions, ids):
        for op, u, other in actions:
            if op == "forward":
                self.forward(u, ids)
            elif op == "backward":
                self.backward(u)
            elif op == "recv_act":
                self.inputs[u] = self.recv(self.width_in, self.prev)
            elif op == "recv_grad":
                self.grads[u] = self.recv(self.width_out, self.next)
            elif op == "send_act":
                dist.send(self.outputs[u].detach(), self.next)
            elif op == "send_grad":
                dist.send(self.inputs.pop(u).grad, self.prev)
            elif op == "send_act_recv_grad":  # the lower stage of the pair sends first
                dist.send(self.outputs[u].detach(), self.next)
                self.grads[other] = self.recv(self.width_out, self.next)
            else:  # send_grad_recv_act: the higher stage receives first
                self.inputs[other] = self.recv(self.width_in, self.prev)
                dist.send(self.inputs.pop(u).grad, self.prev)
        self.inputs.clear()


def average_gradients(params, lay, group):
    if lay.dp_size == 1:
        return
    flat = torch.cat([p.grad.flatten() for p in params])
    dist.all_reduce(flat, group=group)  # a sum: gloo in torch 1.13 has no AVG
    flat /= lay.dp_size
    at = 0
    for p in params:
        p.grad.copy_(flat[at:at + p.numel()].view_as(p))
        at += p.numel()


def train(stage, lay, group, lr):
    params = list(stage.m.parameters())
    opt = torch.optim.SGD(params, lr=lr)
    order = schedule.steps(lay.schedule, lay.pp, lay.pp_size, lay.micro)
    actions = schedule.actions(order, lay.pp, lay.pp_size)
    report = stage.last and lay.dp == 0
    timed, t_first = 0, 0.0
    for step in range(lay.iterations * lay.epochs):
        if step == 1:
            t_first = time.perf_counter()
        start = step * lay.global_batch + lay.dp * lay.per_replica
        ids = torch.arange(start, start + lay.per_replica) % lay.dataset
        opt.zero_grad()
        stage.run(actions, ids)
        average_gradients(params, lay, group)
        opt.step()
        timed += step >= 1
        if stage.last and (step + 1) % lay.iterations == 0:
            loss = torch.tensor([stage.loss / lay.iterations], dtype=torch.float64)
            if lay.dp_size > 1:
                dist.all_reduce(loss, group=group)
            epoch = (step + 1) // lay.iterations
            if report:
                print(f"epoch {epoch}/{lay.epochs}: loss {float(loss[0]) / lay.dp_size:.9f}", flush=True)
            stage.loss = 0.0
    if report and timed:
        ms = (time.perf_counter() - t_first) * 1e3 / timed
        print(f"timing: {lay.schedule}, {lay.pp_size} stages, {lay.micro} micro-batches, {timed} timed iterations: "
              f"{ms:.3f} ms per iteration", flush=True)
    return params


def replicas_agree(params, lay, group):
    flat = torch.cat([p.detach().flatten() for p in params])
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX, group=group)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN, group=group)
    return torch.equal(hi, lo)


def main():
    args = parse_args()
    lay = layout_mod.load()
    try:
        first, end = lay.stage_layers(args.layers)
    except layout_mod.LayoutError as e:
        print(f"torch_pipeline: {e}", file=sys.stderr)
        return 2
    if args.backend == "dtrain":
        import dtrain.torch  # noqa: F401  (registers the backend "dtrain")
    torch.set_num_threads(1)
    dist.init_process_group(args.backend)
    model, widths = build_model(args.layers, args.hidden)
    prev, nxt, group = topology(lay)
    stage = Stage(model[2 * first:2 * end], lay, widths[first], widths[end], prev, nxt, dataset(lay.dataset))
    print(f"rank {dist.get_rank()}: stage {lay.pp}/{lay.pp_size} (layers {first}..{end - 1}), replica "
          f"{lay.dp}/{lay.dp_size}, backend {args.backend}", flush=True)
    params = train(stage, lay, group, args.lr)
    if not replicas_agree(params, lay, group):
        print(f"torch_pipeline: stage {lay.pp}: the replicas hold different weights", file=sys.stderr)
        return 3
    if lay.dp == 0:
        print(f"stage {lay.pp}: the weights identical on its {lay.dp_size} replicas", flush=True)
        if args.weights_out:
            try:
                with open(f"{args.weights_out}.{lay.pp}", "w") as f:
                    f.writelines(f"{v!r}\n" for p in params for v in p.detach().flatten().tolist())
            except OSError as e:
                print(f"torch_pipeline: cannot write the weights: {e}", file=sys.stderr)
                return 5
    dist.barrier(group=group)  # earlier ops' tensors freed first (torch 1.13 joins a group's threads
    dist.barrier()  # holding the GIL)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
