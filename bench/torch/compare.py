#!/usr/bin/env python3
"""PyTorch through dtrain against gloo, in one run (bench/run-all.sh runs it; so can anyone):

    compare.py --build DIR [--rounds N] [--quick] [--results FILE] [--command TEXT] [--python PATH]

Each round, under `dtrain launch` with 2 ranks on one node: torch.distributed.all_reduce (float32
sum, in place, 8 B .. 64 MiB) through the dtrain backend and through gloo in the same job, taking
turns per size (bench/torch/torch_collectives.py); the same sizes through dtrain's C call
(bench/allreduce/coll_bench --buffers 1), the backend's own floor; then a DDP training step
(bench/torch/train_step.py --wrap ddp) on the dtrain backend, on gloo, and as one process without DDP (the
no-communication floor) for a communication-bound model (25M float32 parameters) and a
compute-bound one. The order of the jobs is reversed every other round. Then min/median/max over
the rounds, ratios of medians, the targets of issue 21, and a markdown section (stdout and, with
--results, appended to that file). --quick: 1 round, 2 sizes and small models, a check that the
script and both sides' sums work.

Exit status: 0; 1 when a run failed, computed wrong sums, or the DDP runs on dtrain and gloo (the
same initial weights and data) ended with weights that differ beyond rounding (listed under
"Failures"); 2 on bad usage; 77 when torch or the dtrain backend cannot be imported (the reason printed).
"""
import argparse
import math
import os
import subprocess
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_stats import fmt3, human, med, parse_size, ratio, report, run_probe, run_rounds  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FULL_SIZES = "8,64,512,4K,32K,64K,256K,1M,4M,16M,64M"
QUICK_SIZES = "8,64K"
SIDES = ["dtrain", "gloo", "C"]
DDP_SIDES = ["dtrain", "gloo", "none"]


class Runner:
    def __init__(self, a):
        self.a = a
        self.samples, self.failures, self.loads, self.params, self.checksums = {}, [], [], {}, {}
        self.env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
                        PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(a.build, "python"),
                                                                 os.environ.get("PYTHONPATH")])))

    def add(self, key, value):
        self.samples.setdefault(key, []).append(value)

    def launch(self, what, nproc, args):
        cmd = [os.path.join(self.a.build, "dtrain"), "launch", "--no-tag", "--nproc-per-node", str(nproc)]
        cmd += args if args[0] == "--no-python" else ["--python", self.a.python] + args
        timeout = 180 if self.a.quick else 900
        return run_probe(self.failures, what, cmd, self.env, timeout)

    def torch_allreduce(self, flip):
        args = [os.path.join(HERE, "torch_collectives.py"), "--ops", "all_reduce", "--backends", "dtrain,gloo",
                "--sizes", self.a.sizes]
        out = self.launch("torch all_reduce", 2, args + (["--flip"] if flip else []))
        rows = 0
        for f in (line.split() for line in out.splitlines()):
            if len(f) == 6 and f[0] == "all_reduce":
                self.add(("ar", f[1], int(f[2])), float(f[4]))
                rows += 1
                if int(f[5]) != 0:
                    self.failures.append(f"torch all_reduce {f[1]}: {f[5]} wrong elements at {f[2]} bytes")
        if rows == 0:
            self.failures.append("torch all_reduce: no result rows")

    def c_allreduce(self):
        bench = os.path.join(self.a.build, "bench", "allreduce", "coll_bench")
        out = self.launch("C allreduce", 2, ["--no-python", bench, "--op", "allreduce", "--sizes", self.a.sizes,
                                             "--buffers", "1"])
        rows = 0
        for f in (line.split() for line in out.splitlines()):
            if len(f) >= 10 and f[0] == "allreduce":
                self.add(("ar", "C", int(f[1])), float(f[6]))
                rows += 1
                if int(f[9]) != 0:
                    self.failures.append(f"C allreduce: {f[9]} wrong elements at {f[1]} bytes")
        if rows == 0:
            self.failures.append("C allreduce: no result rows")

    def step(self, wrap, model, backend):
        """A training step of bench/torch/train_step.py: its time under ("step", model, backend), its
        checksum in self.checksums."""
        args = [os.path.join(HERE, "train_step.py"), "--model", model, "--wrap", wrap, "--backend", backend]
        args += ["--steps", "2", "--warmup", "1", "--small"] if self.a.quick else []
        out = self.launch(f"{wrap} {model} {backend}", 1 if backend == "none" else 2, args)
        f = next((line.split() for line in out.splitlines() if line.startswith("step ")), None)
        if f is None or len(f) != 9:
            self.failures.append(f"{wrap} {model} {backend}: no result line")
            return
        self.params[model] = int(f[5])
        self.add(("step", model, backend), float(f[6]))
        self.checksums.setdefault((model, backend), []).append(float(f[8]))


def one_round(r, i):
    flip = (lambda xs: list(reversed(xs))) if i % 2 else list
    jobs = [lambda: r.torch_allreduce(i % 2 == 1), r.c_allreduce]
    jobs += [lambda m=m, b=b: r.step("ddp", m, b) for m in ("comm", "compute") for b in flip(DDP_SIDES)]
    for job in flip(jobs):
        job()


def check_checksums(r, wrap):
    """dtrain's and gloo's runs of a model start alike, so they must end alike (to rounding)."""
    for model in ("comm", "compute"):
        d, g = r.checksums.get((model, "dtrain"), []), r.checksums.get((model, "gloo"), [])
        for x, y in zip(d, g):
            if abs(x - y) > 1e-4 * max(abs(x), abs(y), 1e-30):
                r.failures.append(f"{wrap} {model}: the parameters' checksums differ: dtrain {x:.9g}, gloo {y:.9g}")


def worst(xs, lowest=True):
    xs = [x for x in xs if not math.isnan(x)]
    return (min(xs) if lowest else max(xs)) if xs else math.nan


def target_rows(r, sizes):
    """(figure, measured, target, met) for issue 21's targets."""
    big = [b for b in sizes if b >= 64 << 10]
    huge = [b for b in sizes if b >= 1 << 20]
    rows = []
    if big:
        xs = [ratio(med(r, ("ar", "gloo", b)), med(r, ("ar", "dtrain", b))) for b in big]
        w = worst(xs)
        rows.append((f"all_reduce dtrain vs gloo, {human(big[0])} .. {human(big[-1])} (gloo time / dtrain time)",
                     f"{w:.2f}x .. {worst(xs, False):.2f}x", ">= 3x", w >= 3))
    if huge:
        xs = [ratio(med(r, ("ar", "dtrain", b)), med(r, ("ar", "C", b))) for b in huge]
        w = worst(xs, False)
        rows.append((f"all_reduce through torch vs the C call, {human(huge[0])} .. {human(huge[-1])} "
                     "(torch time / C time)", f"{worst(xs):.2f} .. {w:.2f}", "<= 1.2", w <= 1.2))
    x = ratio(med(r, ("step", "comm", "gloo")), med(r, ("step", "comm", "dtrain")))
    rows.append(("DDP step, communication-bound model, gloo time / dtrain time", f"{x:.2f}x", ">= 1.5x", x >= 1.5))
    return rows


def header(r, started, finished, title="torch"):
    a = r.a
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return [f"## {title} {started:%Y-%m-%d %H:%MZ}{' (quick)' if a.quick else ''}", "",
            f"Command: `{a.command}`", "",
            f"Machine: {os.cpu_count()} CPUs ({cpu}), kernel {os.uname().release}, torch {torch_version(a)}; "
            f"{a.rounds} rounds, the order of the jobs reversed every other round; "
            f"{(finished - started).seconds} s in all.",
            f"Load average (1/5/15 min) before each round and at the end: {'; '.join(r.loads)}.", ""]


def markdown(r, sizes, started, finished):
    out = header(r, started, finished)
    out += ["torch.distributed.all_reduce, float32 sum in place, 2 ranks on one node: median (min-max) time per "
            "call in us over the rounds. dtrain and gloo run in the same job, taking turns per size; C = "
            "dtrain_allreduce from C (bench/allreduce/coll_bench --buffers 1, out of place), the backend's floor. "
            "vs gloo = gloo median / dtrain median (> 1: dtrain faster); vs C = dtrain median / C median.", "",
            "| bytes | dtrain us | gloo us | C us | vs gloo | vs C |", "|---|---|---|---|---|---|"]
    for b in sizes:
        d, g, c = (med(r, ("ar", s, b)) for s in SIDES)
        out.append(f"| {b} | " + " | ".join(fmt3(r, ("ar", s, b)) for s in SIDES) +
                   f" | {ratio(g, d):.2f}x | {ratio(d, c):.2f} |")
    out += ["", "DDP training step (forward, backward with DDP's allreduce, SGD step), ms, median (min-max) over "
            "the rounds of each job's mean step, slowest rank; 2 ranks on dtrain and on gloo, and 1 process "
            "without DDP (no communication, the floor; each rank of the 2-rank jobs has the same per-rank batch). "
            "comm = 4 x Linear(2500, 2500), 4 samples a rank; compute = 4 x Linear(256, 256), 4096 samples a rank"
            f"{' (--small in a quick run)' if r.a.quick else ''}.", "",
            "| model | parameters | 1 process, no DDP | dtrain | gloo | gloo / dtrain | dtrain - floor | gloo - floor |",
            "|---|---|---|---|---|---|---|---|"]
    for m in ("comm", "compute"):
        d, g, f = (med(r, ("step", m, s)) for s in DDP_SIDES)
        out.append(f"| {m} | {r.params.get(m, 0)} | {fmt3(r, ('step', m, 'none'))} | {fmt3(r, ('step', m, 'dtrain'))} | "
                   f"{fmt3(r, ('step', m, 'gloo'))} | {ratio(g, d):.2f}x | {d - f:+.2f} ms | {g - f:+.2f} ms |")
    out += ["", "Targets (issue 21):", "", "| figure | measured | target | met |", "|---|---|---|---|"]
    for fig, measured, goal, met in target_rows(r, sizes):
        out.append(f"| {fig} | {measured} | {goal} | {'yes' if met else 'no'} |")
    if r.failures:
        out += ["", "Failures:", ""] + [f"- {x}" for x in r.failures]
    return "\n".join(out) + "\n"


def torch_version(a):
    p = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return p.stdout.strip() or "?"


def check_prerequisites(a):
    for f in ("dtrain", os.path.join("bench", "allreduce", "coll_bench")):
        if not os.access(os.path.join(a.build, f), os.X_OK):
            print(f"compare.py: {os.path.join(a.build, f)} missing; build it (cmake --build --preset release)",
                  file=sys.stderr)
            sys.exit(2)
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"))
    p = subprocess.run([a.python, "-c", "import torch.distributed, dtrain.torch"], env=env, capture_output=True,
                       text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: {a.python} cannot import torch.distributed and dtrain.torch from {a.build}/python ({last}); "
              "install python3-torch and libtorch-dev (scripts/install-deps.sh) and build the torch backend")
        sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", default="")
    ap.add_argument("--command", default="bench/torch/compare.py")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    check_prerequisites(a)
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.sizes = QUICK_SIZES if a.quick else FULL_SIZES
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    started = datetime.now(timezone.utc)
    r = Runner(a)
    run_rounds(r, a.rounds, one_round, "torch round")
    check_checksums(r, "ddp")
    report(markdown(r, sizes, started, datetime.now(timezone.utc)), a.results)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
