"""Starts N ranks of a test script as plain processes with an explicit init_method (file:// in a
fresh folder, or tcp:// on a free loopback port), passing --init URL --rank R --world N, and waits
for them with a deadline (a hang fails the test). Exit 0 when every rank exits with its expected
status (in each of --repeat runs); 77 (skip) when the first rank skipped.

    run_ranks.py --nproc 3 --init file|tcp [--expect R=CODE ...] [--timeout S] [--repeat N] script.py [args...]
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, required=True)
    p.add_argument("--init", choices=["file", "tcp"], required=True)
    p.add_argument("--expect", action="append", default=[], help="RANK=CODE: that rank's exit status (default 0)")
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--repeat", type=int, default=1, help="runs of the job, each of which must pass")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    expect = {int(k): int(v) for k, v in (e.split("=") for e in a.expect)}
    for run in range(a.repeat):
        rc = run_once(a, expect)
        if rc != 0:
            if rc == 1 and a.repeat > 1:
                print(f"FAIL: in run {run + 1} of {a.repeat}", flush=True)
            return rc
    return 0


def run_once(a, expect):
    with tempfile.TemporaryDirectory(prefix="dtrain-torch-") as tmp:
        url = f"file://{tmp}/store" if a.init == "file" else f"tcp://127.0.0.1:{free_port()}"
        procs = [subprocess.Popen([sys.executable, a.script, "--init", url, "--rank", str(r), "--world",
                                   str(a.nproc)] + a.args) for r in range(a.nproc)]
        # every child reaped as soon as it exits (as torchrun does): a zombie still looks alive to the
        # shared-memory engine's liveness check
        deadline = time.monotonic() + a.timeout
        while None in [q.poll() for q in procs]:  # poll() each one (it reaps)
            if time.monotonic() > deadline:
                late = [r for r, q in enumerate(procs) if q.poll() is None]
                for q in procs:
                    q.kill()
                print(f"FAIL: ranks {late} did not finish within {a.timeout:.0f} s (a hang)", flush=True)
                return 1
            time.sleep(0.05)
        codes = [q.returncode for q in procs]
    if codes[0] == 77:
        return 77
    bad = [f"rank {r} exited {c}, expected {expect.get(r, 0)}" for r, c in enumerate(codes) if c != expect.get(r, 0)]
    if bad:
        print("FAIL: " + "; ".join(bad), flush=True)
        return 1
    print(f"ok: {a.nproc} ranks of {os.path.basename(a.script)} over {url}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
