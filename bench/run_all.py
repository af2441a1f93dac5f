#!/usr/bin/env python3
"""Every figure of dtrain's performance table, each next to its peer, in one run (bench/run-all.sh).

Per round, alternately (the order reversed every other round, so no side always runs first):
allreduce float32 sum with 2 ranks through dtrain's shm engine, Open MPI's shared memory, dtrain's
TCP engine, Open MPI's TCP BTL and torch's gloo (loopback), each reusing one buffer pair per size
(the MPI probe's and gloo's way; coll_bench --buffers 1); one core's memcpy; `dtrain launch`,
mpirun and a bare fork+exec of N x /bin/true; SIGKILL of one of two workers until every process
of the job is gone, for dtrain and mpirun. Then min/median/max over the rounds, ratios of medians,
the target table, a markdown section (stdout and, with --results, appended to that file) and a
busbw-vs-size plot (--plot).

    run_all.py --build DIR --mpi-probe BIN [--rounds N] [--quick] [--results FILE] [--plot FILE]
               [--command TEXT] [--no-gloo]

Exit status: 0, 1 when a run failed or computed wrong sums, 2 on bad usage.
"""

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

from bench_stats import fmt3, human, med, parse_size, ratio, report, run_probe, run_rounds

FULL_SIZES = "8,64,512,4K,32K,256K,1M,4M,16M,64M"
QUICK_SIZES = "8,64K,1M"
AR_IMPLS = ["dtrain-shm", "ompi-shm", "dtrain-tcp", "ompi-tcp", "gloo-tcp"]


class Runner:
    """Runs the probes and keeps every sample: key -> list of values."""

    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.dtrain = os.path.join(args.build, "dtrain")
        self.samples = {}
        self.failures = []
        self.loads = []

    def add(self, key, value):
        self.samples.setdefault(key, []).append(value)

    def job(self, name, command, env=None, nproc=2):
        path = os.path.join(self.tmp, name + ".json")
        spec = {"version": 1, "name": name, "command": command, "cluster": {"procs_per_instance": nproc}}
        if env:
            spec["env"] = env
        with open(path, "w") as f:
            json.dump(spec, f)
        return path

    def parse_rows(self, impl, out):
        """coll_bench's columns -> samples (time_us per size); a nonzero #wrong is a failure."""
        seen = 0
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 10 and f[0] == "allreduce":
                self.add(("ar", impl, int(f[1])), float(f[6]))
                seen += 1
                if int(f[9]) != 0:
                    self.failures.append(f"{impl}: {f[9]} wrong elements at {f[1]} bytes")
        if seen == 0:
            self.failures.append(f"{impl}: no result rows")

    def run(self, what, cmd, env=None, timeout=600):
        return run_probe(self.failures, what, cmd, dict(os.environ, **(env or {})), timeout)

    def allreduce(self, impl):
        sizes = self.a.sizes
        mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
        if impl.startswith("dtrain"):
            bench = os.path.join(self.a.build, "bench", "allreduce", "coll_bench")
            # One send and one receive buffer per size, as the Open MPI probe and gloo (in place) use.
            job = self.job("coll", [bench, "--op", "allreduce", "--sizes", sizes, "--buffers", "1"])
            transport = "tcp" if impl.endswith("tcp") else "auto"
            out = self.run(impl, [self.dtrain, "launch", "--no-tag", job], {"DTRAIN_TRANSPORT": transport})
        elif impl.startswith("ompi"):
            extra = ["--mca", "btl", "tcp,self"] if impl.endswith("tcp") else []
            out = self.run(impl, mpirun + extra + [self.a.mpi_probe, "--sizes", sizes])
        else:
            script = os.path.join(self.a.root, "bench", "python", "gloo_allreduce.py")
            job = self.job("gloo", [self.a.python, script, "--sizes", sizes],
                           {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
            out = self.run(impl, [self.dtrain, "launch", "--no-tag", job])
        self.parse_rows(impl, out)

    def memcpy(self):
        out = self.run("memcpy", [os.path.join(self.a.build, "bench", "allreduce", "coll_bench"), "--memcpy"])
        for line in out.splitlines():  # "memcpy 67108864 bytes: 5012.3 us, 13.389 GB/s"
            if line.startswith("memcpy"):
                self.add(("memcpy",), float(line.split()[-2]))

    def launch_cmd(self, launcher, n):
        if launcher == "dtrain":
            return [self.dtrain, "launch", self.job("true", ["/bin/true"], nproc=n), "--nproc-per-node", str(n)]
        if launcher == "mpirun":
            return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), "/bin/true"]
        return [os.path.join(self.a.build, "bench", "launch", "bench_forkexec"), str(n), "/bin/true"]

    def launch(self, launcher, n):
        cmd = self.launch_cmd(launcher, n)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        ms = (time.perf_counter() - t0) * 1e3
        if rc != 0:
            self.failures.append(f"launch {launcher} x{n}: exit {rc}")
        else:
            self.add(("launch", launcher, n), ms)

    def kill(self, launcher):
        """SIGKILL rank 1 of two `sleep` workers; ms until the launcher exited and rank 0 is gone."""
        d = tempfile.mkdtemp(dir=self.tmp)
        rank_var = "RANK" if launcher == "dtrain" else "OMPI_COMM_WORLD_RANK"
        body = f'echo $$ >"{d}/p.${rank_var}.t" && mv "{d}/p.${rank_var}.t" "{d}/p.${rank_var}"; exec sleep 60'
        worker = ["/bin/sh", "-c", body]
        if launcher == "dtrain":
            cmd = [self.dtrain, "launch", "--no-tag", self.job("sleep", worker)]
        else:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"] + worker
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        pids = {}
        deadline = time.monotonic() + 20
        while len(pids) < 2 and time.monotonic() < deadline and p.poll() is None:
            for r in (0, 1):
                try:
                    with open(f"{d}/p.{r}") as f:
                        pids[r] = int(f.read())
                except (OSError, ValueError):
                    pass
            time.sleep(0.005)
        if len(pids) < 2:
            self.failures.append(f"kill {launcher}: workers did not start")
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return
        time.sleep(0.05)  # let the launcher settle into supervising
        t0 = time.perf_counter()
        os.kill(pids[1], signal.SIGKILL)
        try:
            p.wait(timeout=10)
            while time.perf_counter() - t0 < 10 and alive(pids[0]):
                time.sleep(0.0005)
            ms = (time.perf_counter() - t0) * 1e3
        except subprocess.TimeoutExpired:
            ms = math.inf
        if alive(pids[0]) or ms == math.inf:
            self.failures.append(f"kill {launcher}: the job was not torn down within 10 s")
            for pid in pids.values():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        else:
            self.add(("kill", launcher), ms)


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def one_round(r, i):
    flip = (lambda xs: list(reversed(xs))) if i % 2 else list
    impls = [x for x in AR_IMPLS if r.a.gloo or not x.startswith("gloo")]
    for impl in flip(impls):
        r.allreduce(impl)
    r.memcpy()
    for n in (2, 8):
        for _ in range(r.a.launch_reps):
            for launcher in flip(["dtrain", "mpirun", "forkexec"]):
                r.launch(launcher, n)
    for launcher in flip(["dtrain", "mpirun"]):
        r.kill(launcher)


def target_rows(r, sizes):
    """(figure, dtrain, peer, ratio text, target, met) for the issue's table."""
    rows = []
    big, mid, small = max(sizes), 16 << 20, 8
    busbw = lambda impl, b: b / med(r, ("ar", impl, b)) / 1e3  # GB/s (2 ranks: busbw = algbw)
    mc = med(r, ("memcpy",))
    x = ratio(busbw("dtrain-shm", big), mc)
    rows.append((f"shm allreduce {human(big)} busbw / memcpy", f"{busbw('dtrain-shm', big):.2f} GB/s",
                 f"memcpy {fmt3(r, ('memcpy',))} GB/s", f"{x:.2f}", ">= 0.5", x >= 0.5))
    def vs(impl, peer, b, goal, label):
        x = ratio(med(r, ("ar", peer, b)), med(r, ("ar", impl, b)))
        rows.append((f"{label}, {human(b)}", f"{fmt3(r, ('ar', impl, b))} us", f"{fmt3(r, ('ar', peer, b))} us",
                     f"{x:.2f}x", f">= {goal}x", x >= goal))
    if mid in sizes:
        vs("dtrain-shm", "ompi-shm", mid, 2, "shm allreduce vs Open MPI")
    vs("dtrain-shm", "ompi-shm", small, 1.2, "shm allreduce vs Open MPI")
    xs = [ratio(med(r, ("ar", "ompi-shm", b)), med(r, ("ar", "dtrain-shm", b))) for b in sizes]
    worst = min(xs)
    rows.append((f"shm allreduce vs Open MPI, every size {human(min(sizes))} .. {human(big)}",
                 "", "", f"{worst:.2f}x .. {max(xs):.2f}x", ">= 1x", worst >= 1))
    if r.a.gloo:
        vs("dtrain-tcp", "gloo-tcp", big, 3, "TCP allreduce vs torch gloo (loopback)")
    vs("dtrain-tcp", "ompi-tcp", small, 1, "TCP allreduce vs Open MPI tcp")
    d2, m2, f2, d8 = (med(r, ("launch", l, n)) for l, n in (("dtrain", 2), ("mpirun", 2), ("forkexec", 2),
                                                           ("dtrain", 8)))
    x = ratio(d2, m2)
    rows.append(("launch 2 x /bin/true vs mpirun", f"{fmt3(r, ('launch', 'dtrain', 2))} ms",
                 f"{fmt3(r, ('launch', 'mpirun', 2))} ms", f"{x:.3f}", "<= 0.08", x <= 0.08))
    rows.append(("launch 2 x /bin/true minus fork+exec floor", f"{d2:.2f} ms", f"{fmt3(r, ('launch', 'forkexec', 2))} ms",
                 f"+{d2 - f2:.2f} ms", "<= +2 ms", d2 - f2 <= 2))
    x = ratio(d8, d2)
    rows.append(("launch 8 x /bin/true vs 2 x", f"{fmt3(r, ('launch', 'dtrain', 8))} ms", f"{d2:.2f} ms",
                 f"{x:.2f}x", "< 2x", x < 2))
    k = med(r, ("kill", "dtrain"))
    rows.append(("SIGKILL of one worker -> every process reaped", f"{fmt3(r, ('kill', 'dtrain'))} ms",
                 f"mpirun {fmt3(r, ('kill', 'mpirun'))} ms", f"{ratio(k, med(r, ('kill', 'mpirun'))):.2f}",
                 "< 200 ms", k < 200))
    return rows


def markdown(r, sizes, started, finished):
    a = r.a
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out = [f"## run-all {started:%Y-%m-%d %H:%MZ}{' (quick)' if a.quick else ''}", "",
           f"Command: `{a.command}`", "",
           f"Machine: {os.cpu_count()} CPUs ({cpu}), kernel {os.uname().release}; {a.rounds} rounds, each "
           f"running every probe once (allreduce, memcpy, kill) or {a.launch_reps} times per launcher and N "
           f"(launch), alternating, the order reversed every other round; {(finished - started).seconds} s in all.",
           f"Load average (1/5/15 min) before each round and at the end: {'; '.join(r.loads)}.", "",
           "Allreduce float32 sum, 2 ranks: median (min-max) time per call in us over the rounds; busbw = algbw "
           "for 2 ranks, from the median; ratio = peer median / dtrain median (> 1: dtrain faster). Peers: Open "
           "MPI 4.1 `mpirun -np 2` (vader shm BTL) and `--mca btl tcp,self`, torch gloo on loopback (in place). "
           "Every side reuses one buffer pair per size (coll_bench --buffers 1, like the MPI probe).",
           ""]
    impls = [x for x in AR_IMPLS if a.gloo or not x.startswith("gloo")]
    head = "| bytes | " + " | ".join(f"{x} us" for x in impls) + " | shm vs ompi | tcp vs ompi |" + \
        (" tcp vs gloo |" if a.gloo else "") + " dtrain-shm busbw GB/s |"
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for b in sizes:
        cells = [fmt3(r, ("ar", x, b)) for x in impls]
        rs = [ratio(med(r, ("ar", p, b)), med(r, ("ar", d, b))) for d, p in
              [("dtrain-shm", "ompi-shm"), ("dtrain-tcp", "ompi-tcp")] + ([("dtrain-tcp", "gloo-tcp")] if a.gloo else [])]
        out.append(f"| {b} | " + " | ".join(cells) + " | " + " | ".join(f"{x:.2f}x" for x in rs) +
                   f" | {b / med(r, ('ar', 'dtrain-shm', b)) / 1e3:.3f} |")
    out += ["", f"memcpy (one core, 64 MiB): {fmt3(r, ('memcpy',), 3)} GB/s.", "",
            "Launch of N x /bin/true, wall ms, median (min-max); fork+exec = `bench_forkexec N /bin/true`, the floor:",
            "", "| N | dtrain | mpirun | fork+exec | dtrain/mpirun | dtrain - fork+exec |", "|---|---|---|---|---|---|"]
    for n in (2, 8):
        d, m, f = (med(r, ("launch", l, n)) for l in ("dtrain", "mpirun", "forkexec"))
        out.append(f"| {n} | {fmt3(r, ('launch', 'dtrain', n))} | {fmt3(r, ('launch', 'mpirun', n))} | "
                   f"{fmt3(r, ('launch', 'forkexec', n))} | {ratio(d, m):.3f} | {d - f:+.2f} ms |")
    out += ["", "Targets (issue 14):", "", "| figure | dtrain | peer | ratio | target | met |", "|---|---|---|---|---|---|"]
    for row in target_rows(r, sizes):
        out.append("| " + " | ".join(row[:5]) + f" | {'yes' if row[5] else 'no'} |")
    if r.failures:
        out += ["", "Failures:", ""] + [f"- {x}" for x in r.failures]
    return "\n".join(out) + "\n"


def plot(r, sizes, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {"dtrain-shm": "o-", "ompi-shm": "s--", "dtrain-tcp": "o-", "ompi-tcp": "s--", "gloo-tcp": "^:"}
    for impl in AR_IMPLS:
        pts = [(b, b / med(r, ("ar", impl, b)) / 1e3) for b in sizes if r.samples.get(("ar", impl, b))]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[impl], label=impl.replace("ompi", "Open MPI"))
    mc = med(r, ("memcpy",))
    if not math.isnan(mc):
        ax.axhline(mc, color="grey", linestyle="-.", label=f"memcpy, one core ({mc:.1f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s), median of rounds")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--mpi-probe", required=True)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--command", default="bench/run-all.sh")
    ap.add_argument("--no-gloo", dest="gloo", action="store_false")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the scratch folder is removed on the way out
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.launch_reps = 3 if a.quick else 5
    a.sizes = QUICK_SIZES if a.quick else FULL_SIZES
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    started = datetime.now(timezone.utc)
    with tempfile.TemporaryDirectory(prefix="dtrain-run-all-") as tmp:
        r = Runner(a, tmp)
        run_rounds(r, a.rounds, one_round)
    report(markdown(r, sizes, started, datetime.now(timezone.utc)), a.results)
    if a.plot:
        loads = [float(x.split()[0]) for x in r.loads]
        plot(r, sizes, a.plot, f"allreduce float32 sum, 2 ranks, {os.cpu_count()} CPUs, {started:%Y-%m-%d %H:%MZ}, "
             f"load {min(loads):.1f}-{max(loads):.1f}")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
