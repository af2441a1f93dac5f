#!/usr/bin/env python3
"""Data-parallel logistic regression in numpy (float64) over dtrain's collectives.

Run it under `dtrain launch` with a job that has a batch section, e.g.

    { "command": ["python3", "examples/python_sgd.py"],
      "cluster": { "procs_per_instance": 4 },
      "batch": { "global": 64, "micro_batches": 2, "dataset_size": 2048, "epochs": 3 } }

    PYTHONPATH=build/release/python dtrain launch job.json

    python_sgd.py [--lr RATE] [--dim N] [--weights-out FILE]

Data: DTRAIN_DATASET_SIZE samples of DIM features uniform in [-1, 1) and a 0/1 label drawn from the
logistic model of fixed true weights, all from one fixed seed, so every rank builds the same dataset
without reading files. Iteration t of an epoch takes the global batch of samples t*G .. t*G+G-1
(mod the dataset size, G = DTRAIN_GLOBAL_BATCH); replica r takes its shard r*P .. r*P+P-1
(P = DTRAIN_PER_REPLICA_BATCH) in DTRAIN_MICRO_BATCHES micro-batches, whose mean gradients are
accumulated with weight 1/micro-batches; the gradients (and the loss) are averaged over the replicas
with one dtrain allreduce (op "avg") and every rank takes the same SGD step. Rank 0 draws the initial
weights and broadcasts them. The mean over the global batch does not depend on how it is split, so
1, 2 or 4 replicas and any micro-batch count give the same weights up to float64 rounding (the sums
are taken in a different order); tests/examples checks that.

Output: one start line per rank, rank 0 one line per epoch (mean loss) and a final line. At the end
every rank checks with allreduce MAX and MIN that all replicas hold bit-identical weights.
--weights-out FILE: rank 0 writes the final weights there, one repr() per line (the DIM weights, then
the bias). Exit status: 0 ok; 1 a dtrain call failed; 2 bad arguments or no batch plan in the
environment; 3 the replicas disagree; 5 the weights file cannot be written.
"""

import argparse
import sys

import numpy as np

import dtrain


def make_dataset(n, dim, seed=20240607):
    """Features, 0/1 labels, and the true weights and bias they were drawn from."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, dim))
    w_true = np.linspace(-2.0, 2.0, dim)
    b_true = 0.3
    p = 1.0 / (1.0 + np.exp(-(x @ w_true + b_true)))
    y = (rng.uniform(size=n) < p).astype(np.float64)
    return x, y, w_true, b_true


def gradient(params, x, y):
    """Mean gradient of the logistic loss over the samples (weights, bias), then the mean loss."""
    z = x @ params[:-1] + params[-1]
    err = 1.0 / (1.0 + np.exp(-z)) - y
    g = np.empty(params.size + 1)
    g[:-2] = x.T @ err / y.size
    g[-2] = err.mean()
    g[-1] = np.mean(np.logaddexp(0.0, z) - y * z)
    return g


def read_plan(prog):
    """The plan, or exit 2 with a message when this worker cannot run under it."""
    try:
        plan = dtrain.plan()
    except dtrain.Error as e:
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(2)
    b = plan.batch
    if b is None or b.dataset_size is None:
        print(f"{prog}: no batch plan with a dataset size in the environment: run under `dtrain launch` with a job "
              f"whose batch section sets global or per_replica, and dataset_size", file=sys.stderr)
        sys.exit(2)
    if plan.dp_size != plan.world_size:
        print(f"{prog}: this example is data-parallel only (parallel.data = {plan.dp_size} of "
              f"{plan.world_size} ranks)", file=sys.stderr)
        sys.exit(2)
    return plan


def train(world, plan, args, x, y):
    """SGD over the epochs of the plan; returns the weights and the last epoch's mean loss."""
    b = plan.batch
    rng = np.random.default_rng(1000 + world.rank)  # rank-dependent on purpose: the broadcast equalises
    params = world.broadcast(rng.uniform(-0.5, 0.5, size=args.dim + 1), root=0)
    first = plan.dp_rank * b.per_replica
    loss = float("nan")
    for epoch in range(b.epochs):
        epoch_loss = 0.0
        for t in range(b.iterations_per_epoch):
            shard = (t * b.global_ + first + np.arange(b.per_replica)) % b.dataset_size
            acc = np.zeros(args.dim + 2)
            for u in range(b.micro_batches):
                idx = shard[u * b.micro_batch_size:(u + 1) * b.micro_batch_size]
                acc += gradient(params, x[idx], y[idx]) / b.micro_batches
            world.allreduce(acc, op="avg", out=acc)
            params -= args.lr * acc[:-1]
            epoch_loss += acc[-1]
        loss = epoch_loss / b.iterations_per_epoch
        if world.rank == 0:
            print(f"epoch {epoch + 1}/{b.epochs}: loss {loss:.6f} ({b.iterations_per_epoch} iterations of "
                  f"{b.global_} samples)", flush=True)
    return params, loss


def replicas_agree(world, params):
    """Every replica holds the same bits: MAX and MIN over the ranks agree."""
    hi = world.allreduce(params, op="max")
    lo = world.allreduce(params, op="min")
    return bool(np.array_equal(hi, lo))


def main():
    prog = "python_sgd.py"
    ap = argparse.ArgumentParser(prog=prog, description="data-parallel logistic regression over dtrain")
    ap.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    ap.add_argument("--dim", type=int, default=8, help="features (default 8)")
    ap.add_argument("--weights-out", metavar="FILE", help="rank 0 writes the final weights here")
    args = ap.parse_args()
    if args.dim < 1 or not args.lr > 0:
        ap.error("--dim must be >= 1 and --lr > 0")
    plan = read_plan(prog)
    b = plan.batch
    x, y, w_true, b_true = make_dataset(b.dataset_size, args.dim)
    try:
        world = dtrain.init()
        print(f"rank {world.rank}/{world.size} on node {plan.node_rank}: shard [{plan.dp_rank * b.per_replica}, "
              f"{(plan.dp_rank + 1) * b.per_replica}) of each global batch of {b.global_}, {b.micro_batches} "
              f"micro-batches of {b.micro_batch_size}", flush=True)
        params, loss = train(world, plan, args, x, y)
        if not replicas_agree(world, params):
            print(f"{prog}: rank {world.rank}: the replicas disagree", file=sys.stderr)
            return 3
    except dtrain.Error as e:
        print(f"{prog}: rank {plan.rank}: {e}", file=sys.stderr)
        return 1
    if world.rank == 0:
        accuracy = np.mean(((x @ params[:-1] + params[-1]) > 0) == (y > 0.5))
        werr = np.max(np.abs(params - np.append(w_true, b_true)))
        print(f"done: {b.epochs} epochs, final loss {loss:.6f}, accuracy {accuracy:.3f}, max |w - w_true| "
              f"{werr:.3f}; weights identical on all {world.size} ranks", flush=True)
        if args.weights_out:
            try:
                with open(args.weights_out, "w") as f:
                    f.writelines(f"{v!r}\n" for v in params.tolist())
            except OSError as e:
                print(f"{prog}: cannot write the weights to {args.weights_out}: {e.strerror}", file=sys.stderr)
                return 5
    return 0


if __name__ == "__main__":
    sys.exit(main())
