"""What the benchmark drivers (run_all.py, torch/compare.py) share: sizes as text, load averages, the
rounds with the load before each, the statistics of a runner's samples (key -> list of values; min,
median, max over the rounds), and the report written out."""

import math
import statistics
import subprocess
import sys


def parse_size(text):
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def human(nbytes):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def stats(xs):
    return (min(xs), statistics.median(xs), max(xs)) if xs else (math.nan,) * 3


def med(r, key):
    return stats(r.samples.get(key, []))[1]


def fmt3(r, key, digits=2):
    lo, m, hi = stats(r.samples.get(key, []))
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def ratio(num, den):
    return num / den if den and not math.isnan(num) and not math.isnan(den) else math.nan


def run_rounds(r, rounds, one_round, label="round"):
    """Runs one_round(r, i) `rounds` times, noting the load average before each and at the end."""
    for i in range(rounds):
        r.loads.append(loadavg())
        print(f"# {label} {i + 1}/{rounds}, load {r.loads[-1]}", file=sys.stderr, flush=True)
        one_round(r, i)
    r.loads.append(loadavg())


def report(text, results):
    """Prints the report and appends it to the results file when there is one."""
    sys.stdout.write(text)
    if results:
        with open(results, "a") as f:
            f.write("\n" + text)


def run_probe(failures, what, cmd, env, timeout):
    """Runs one probe; its stdout, or "" with what went wrong appended to `failures`."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        failures.append(f"{what}: timed out after {timeout} s")
        return ""
    if p.returncode != 0:
        failures.append(f"{what}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout
