#!/usr/bin/env bash
# The Python package's allreduce against the C call: bench/python/py_allreduce.py and
# bench/allreduce/coll_bench (float32 sum, the same buffers and iteration counts) under `dtrain launch`,
# alternately, ROUNDS times each, so both see the same drift of a shared machine's load. Prints per
# size the min/median/max time of each, the ratio of the medians (Python / C) and the median overhead
# per call; the load average before and after. Exit status 1 when a run computed wrong sums.
#   usage: bench/python/compare.sh BUILD_DIR [ROUNDS] [SIZES] [RANKS]
#   e.g.   bench/python/compare.sh build/release 10 8,64M 2
#   (PYTHON: the interpreter with numpy, default /usr/bin/python3; DTRAIN_TRANSPORT as for any job)
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,10p "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
rounds=${2:-10}
sizes=${3:-8,64M}
ranks=${4:-2}
python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
for f in "$build/dtrain" "$build/bench/allreduce/coll_bench" "$build/python/dtrain/__init__.py"; do
  [ -e "$f" ] || { echo "compare.sh: $f missing (build dtrain, coll_bench and dtrain_python)" >&2; exit 2; }
done
"$python" -c 'import numpy' 2>/dev/null || { echo "compare.sh: $python cannot import numpy (set PYTHON)" >&2; exit 2; }
tmp=$(mktemp -d -t dtrain-pybench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
printf '{ "version": 1, "name": "allreduce-c", "command": ["%s", "--op", "allreduce", "--sizes", "%s"],
  "cluster": { "procs_per_instance": %s } }\n' "$build/bench/allreduce/coll_bench" "$sizes" "$ranks" >"$tmp/c.json"
# numpy asks for transparent huge pages for large arrays (madvise), malloc in coll_bench does not:
# NUMPY_MADVISE_HUGEPAGE=0 keeps the buffers alike, so the difference is the Python layer's.
printf '{ "version": 1, "name": "allreduce-python", "command": ["%s", "%s", "--sizes", "%s"],
  "cluster": { "procs_per_instance": %s }, "env": { "NUMPY_MADVISE_HUGEPAGE": "0" } }\n' \
  "$python" "$here/py_allreduce.py" "$sizes" "$ranks" >"$tmp/py.json"
run() {  # job label -> "label bytes time_us wrong" lines
  PYTHONPATH=$build/python "$build/dtrain" launch --no-tag "$tmp/$1.json" 2>"$tmp/err" |
    awk -v l="$2" '$1 == "allreduce" { print l, $2, $7, $10 }' || { cat "$tmp/err" >&2; exit 1; }
}
echo "# allreduce float32 sum, $ranks ranks, transport ${DTRAIN_TRANSPORT:-auto}, $rounds alternating rounds," \
     "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < rounds; ++i)); do
  run c C >>"$tmp/all"
  run py Python >>"$tmp/all"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%10s %-7s %11s %11s %11s %9s %13s\n" bytes impl min_us median_us max_us "Py/C" "overhead_us"
awk '
  function sorted(l, key,   m, i, j, v) {
    m = n[l, key]
    for (i = 1; i <= m; ++i) a[i] = t[l, key, i]
    for (i = 2; i <= m; ++i) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; --j) a[j + 1] = a[j]; a[j + 1] = v }
    return m
  }
  function median(m) { return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  { t[$1, $2, ++n[$1, $2]] = $3 + 0; if ($4 != 0) bad = 1; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
  END {
    for (i = 1; i <= k; ++i) {
      key = order[i]
      m = sorted("C", key); cmed = median(m)
      printf "%10s %-7s %11.2f %11.2f %11.2f\n", key, "C", a[1], cmed, a[m]
      m = sorted("Python", key); pmed = median(m)
      printf "%10s %-7s %11.2f %11.2f %11.2f %8.2fx %13.2f\n", key, "Python", a[1], pmed, a[m], pmed / cmed, pmed - cmed
    }
    if (bad) { print "WRONG RESULTS in some run"; exit 1 }
  }' "$tmp/all"
