"""The progress page's cost per torch.distributed call in a Python worker: dtrain's start-up hook's
page writer (python/dtrain/_startup/sitecustomize.py, _Page.begin/end, version 2: end adds the call's
time inside to its op's accumulators) against the same pair with version 1's end (one store of
end_ns). Rounds alternate the two; printed: each side's minimum and median ns per pair.

    python3 bench/progress/page_cost.py [ROUNDS] [CALLS]
"""

import importlib.util
import os
import statistics
import sys
import tempfile
import time

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dtrain", "_startup",
                    "sitecustomize.py")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    spec = importlib.util.spec_from_file_location("dtrain_startup_hook", HOOK)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)  # without DTRAIN_* variables it only defines its classes
    fd, path = tempfile.mkstemp(prefix="dtrain-page-cost-")
    os.ftruncate(fd, 4096)
    os.close(fd)
    try:
        page = hook._Page(path)
    finally:
        os.unlink(path)

    def end_v1():
        page.i64[7] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def per_pair(end):
        t0 = time.perf_counter()
        for _ in range(calls):
            page.begin(2, 64)
            end()
        return (time.perf_counter() - t0) / calls * 1e9

    v1, v2 = [], []
    for _ in range(rounds):
        v1.append(per_pair(end_v1))
        v2.append(per_pair(page.end))
    if page.u64[8 + 2] == 0:
        sys.exit("page_cost.py: the page counted no call")
    print("# dtrain start-up hook's page writer, begin+end, %d alternating rounds of %d calls" % (rounds, calls))
    print("%-28s %10s %10s" % ("# ns per call", "min", "median"))
    print("%-28s %10.0f %10.0f" % ("without accumulators (v1)", min(v1), statistics.median(v1)))
    print("%-28s %10.0f %10.0f" % ("with accumulators (v2)", min(v2), statistics.median(v2)))
    print("%-28s %+10.0f %+10.0f" % ("difference", min(v2) - min(v1), statistics.median(v2) - statistics.median(v1)))


if __name__ == "__main__":
    main()
