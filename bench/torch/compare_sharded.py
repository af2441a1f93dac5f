#!/usr/bin/env python3
"""What sharded training asks of torch.distributed, through dtrain against gloo, in one run (torch 2.x;
on this project's machines Debian 13's torch 2.6, in the tree of scripts/ci-trixie.sh):

    compare_sharded.py --build DIR [--rounds N] [--quick] [--results FILE] [--command TEXT]
                       [--python PATH] [--shard auto|fsdp2|zero]

Each round, under `dtrain launch` with 2 ranks on one node: all_reduce, reduce_scatter_tensor and
all_gather_into_tensor (float32 sum; 64 KiB .. 64 MiB, the whole tensor's bytes) through the dtrain
backend and through gloo in the same job, taking turns per size (bench/torch/torch_collectives.py);
then a sharded training step (bench/torch/train_step.py: FSDP2's fully_shard, or DDP with
ZeroRedundancyOptimizer; --shard auto, the default, takes FSDP2 where this torch's FSDP2 trains on
the CPU and ZeRO where it refuses, and the report says why) on dtrain, on gloo, and as one process without sharding (the
no-communication floor), for a communication-bound model (25M float32 parameters) and a compute-bound
one. The order of the jobs is reversed every other round. Then min/median/max over the rounds, ratios
of medians, the targets (reduce_scatter_tensor >= 3x and all_gather_into_tensor >= 2x gloo from 1 MiB,
the sharded step faster than gloo's), and a markdown section (stdout and, with --results, appended to
that file). The two backends' sharded runs start from the same weights and data: their parameter
checksums must agree (relative difference < 1e-4), or the run is a failure. --quick: 1 round, 2 sizes
and small models, a check that the script and both sides' results work.

Exit status: 0; 1 when a run failed, computed wrong results or the checksums disagree (listed under
"Failures"); 2 on bad usage; 77 when torch, its FSDP2 or the dtrain backend cannot be imported (the
reason printed).
"""
import argparse
import os
import subprocess
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_stats import fmt3, human, med, parse_size, ratio, report, run_rounds  # noqa: E402
from compare import Runner, check_checksums, header, worst  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OPS = ["all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor"]
FULL_SIZES = "64K,256K,1M,4M,16M,64M"
QUICK_SIZES = "64K,1M"
SIDES = ["dtrain", "gloo"]
STEP_SIDES = ["dtrain", "gloo", "none"]
TARGETS = {"reduce_scatter_tensor": 3.0, "all_gather_into_tensor": 2.0}  # gloo time / dtrain time from 1 MiB


class ShardedRunner(Runner):
    def collectives(self, flip):
        args = [os.path.join(HERE, "torch_collectives.py"), "--ops", ",".join(OPS), "--backends", ",".join(SIDES),
                "--sizes", self.a.sizes]
        out = self.launch("torch collectives", 2, args + (["--flip"] if flip else []))
        rows = 0
        for f in (line.split() for line in out.splitlines()):
            if len(f) == 6 and f[0] in OPS:
                self.add((f[0], f[1], int(f[2])), float(f[4]))
                rows += 1
                if int(f[5]) != 0:
                    self.failures.append(f"{f[0]} {f[1]}: {f[5]} wrong elements at {f[2]} bytes")
        if rows == 0:
            self.failures.append("torch collectives: no result rows")


def one_round(r, i):
    flip = (lambda xs: list(reversed(xs))) if i % 2 else list
    jobs = [lambda: r.collectives(i % 2 == 1)]
    jobs += [lambda m=m, b=b: r.step(r.a.shard, m, b) for m in ("comm", "compute") for b in flip(STEP_SIDES)]
    for job in flip(jobs):
        job()


def target_rows(r, sizes):
    """(figure, measured, target, met) for the targets."""
    from_1m = [b for b in sizes if b >= 1 << 20]
    rows = []
    for op, goal in TARGETS.items():
        if from_1m:
            xs = [ratio(med(r, (op, "gloo", b)), med(r, (op, "dtrain", b))) for b in from_1m]
            w = worst(xs)
            rows.append((f"{op} dtrain vs gloo, {human(from_1m[0])} .. {human(from_1m[-1])} (gloo time / dtrain time)",
                         f"{w:.2f}x .. {worst(xs, False):.2f}x", f">= {goal:g}x", w >= goal))
    x = ratio(med(r, ("step", "comm", "gloo")), med(r, ("step", "comm", "dtrain")))
    rows.append((f"{r.a.shard} step, communication-bound model, gloo time / dtrain time", f"{x:.2f}x", "> 1x", x > 1))
    return rows


def markdown(r, sizes, started, finished):
    out = header(r, started, finished, "torch sharded")
    out += ["torch.distributed collectives, float32 sum, 2 ranks on one node: median (min-max) time per call in us "
            "over the rounds; bytes = the whole tensor (all_reduce's buffer, reduce_scatter_tensor's input, "
            "all_gather_into_tensor's output). dtrain and gloo run in the same job, taking turns per size. "
            "vs gloo = gloo median / dtrain median (> 1: dtrain faster).", ""]
    for op in OPS:
        out += [f"{op}:", "", "| bytes | dtrain us | gloo us | vs gloo |", "|---|---|---|---|"]
        for b in sizes:
            d, g = (med(r, (op, s, b)) for s in SIDES)
            out.append(f"| {b} | {fmt3(r, (op, 'dtrain', b))} | {fmt3(r, (op, 'gloo', b))} | {ratio(g, d):.2f}x |")
        out.append("")
    what = ("FSDP2 (fully_shard per Linear and the root, a 1-D CPU mesh)" if r.a.shard == "fsdp2"
            else "DDP with ZeroRedundancyOptimizer (SGD)" + (f"; not FSDP2: {r.a.refusal}" if r.a.refusal else ""))
    out += [f"Sharded training step, {what}: forward, backward, SGD step; ms, median (min-max) over the rounds of "
            "each job's mean step, slowest rank; 2 ranks on dtrain and on gloo, and 1 process without sharding "
            "(no communication, the floor; the same per-rank batch). comm = 4 x Linear(2500, 2500), 4 samples a "
            f"rank; compute = 4 x Linear(256, 256), 4096 samples a rank{' (--small in a quick run)' if r.a.quick else ''}. "
            "The parameters' checksums of the dtrain and gloo runs agree (checked).", "",
            "| model | parameters | 1 process | dtrain | gloo | gloo / dtrain | dtrain - floor | gloo - floor |",
            "|---|---|---|---|---|---|---|---|"]
    for m in ("comm", "compute"):
        d, g, f = (med(r, ("step", m, s)) for s in STEP_SIDES)
        out.append(f"| {m} | {r.params.get(m, 0)} | {fmt3(r, ('step', m, 'none'))} | {fmt3(r, ('step', m, 'dtrain'))} | "
                   f"{fmt3(r, ('step', m, 'gloo'))} | {ratio(g, d):.2f}x | {d - f:+.2f} ms | {g - f:+.2f} ms |")
    out += ["", "Targets:", "", "| figure | measured | target | met |", "|---|---|---|---|"]
    for fig, measured, goal, met in target_rows(r, sizes):
        out.append(f"| {fig} | {measured} | {goal} | {'yes' if met else 'no'} |")
    if r.failures:
        out += ["", "Failures:", ""] + [f"- {x}" for x in r.failures]
    return "\n".join(out) + "\n"


def check_prerequisites(a):
    """Exits 2 without dtrain, 77 (the reason printed) without torch 2.x and the backend; sets a.shard
    (auto: FSDP2 where it trains on the CPU) and a.refusal (why not FSDP2, or "")."""
    if not os.access(os.path.join(a.build, "dtrain"), os.X_OK):
        print(f"compare_sharded.py: {a.build}/dtrain missing; build it", file=sys.stderr)
        sys.exit(2)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(a.build, "python"), HERE]))
    probe = ("import torch, torch.distributed, dtrain.torch, train_step; "
             "assert torch.__version__ >= '2', 'torch ' + torch.__version__ + ' is not 2.x'; "
             "print(train_step.fsdp2_refusal())")
    p = subprocess.run([a.python, "-c", probe], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: {a.python} with {a.build}/python: {last}; this needs torch 2.x and the dtrain backend built "
              "against it (scripts/ci-trixie.sh build: Debian 13's torch 2.6)")
        sys.exit(77)
    a.refusal = p.stdout.strip()
    if a.shard == "auto":
        a.shard = "zero" if a.refusal else "fsdp2"
    elif a.shard == "fsdp2" and a.refusal:
        print(f"compare_sharded.py: --shard fsdp2: {a.refusal}", file=sys.stderr)
        sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", default="")
    ap.add_argument("--command", default="bench/torch/compare_sharded.py")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--shard", choices=["auto", "fsdp2", "zero"], default="auto")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    check_prerequisites(a)
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.sizes = QUICK_SIZES if a.quick else FULL_SIZES
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    started = datetime.now(timezone.utc)
    r = ShardedRunner(a)
    run_rounds(r, a.rounds, one_round, "torch sharded round")
    check_checksums(r, r.a.shard)
    report(markdown(r, sizes, started, datetime.now(timezone.utc)), a.results)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
