#!/usr/bin/env bash
# bench/run-all.sh --quick into a scratch folder, then the shape of its output: the section header
# and command, a row per size with five parsable medians (min-max), both launch rows, every target
# row, no failures, a PNG plot. No figure is compared with any speed.
#   usage: test_run_all.sh SOURCE_DIR BUILD_DIR    exit: 0 pass, 1 fail, 77 skipped
set -uo pipefail
src=$1 build=$2
tmp=$(mktemp -d -t dtrain-test-run-all-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$src/bench/run-all.sh" --quick --build "$build" --results "$tmp/r.md" --plot "$tmp/p.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
# Skipped only where an optional peer is not installed; any other refusal (a build product missing,
# a bad argument, run_all.py's own exit 2) is a failure.
if ((rc == 2)) && grep -Eq 'mpicc/mpirun not found|cannot import (matplotlib|torch\.distributed)' "$tmp/err"; then
  echo "SKIP: $(head -n 1 "$tmp/err")"
  exit 77
fi
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"; exit 1; }
((rc == 0)) || fail "run-all.sh exited $rc"
cmp -s "$tmp/out" <(tail -n +2 "$tmp/r.md") || fail "--results does not hold what stdout printed"
r=$tmp/r.md
grep -q '^## run-all [0-9-]* [0-9:]*Z (quick)$' "$r" || fail "no dated section header"
grep -q '^Command: `bench/run-all.sh --quick ' "$r" || fail "no command line"
grep -Eq '^Load average .*[0-9]+\.[0-9]+ [0-9]+\.[0-9]+ [0-9]+\.[0-9]+' "$r" || fail "no load average"
num='[0-9]+\.[0-9]+'
m3="$num \($num-$num\)"
for b in 8 65536 1048576; do
  grep -Eq "^\| $b \| $m3 \| $m3 \| $m3 \| $m3 \| $m3 \| ${num}x \| ${num}x \| ${num}x \| $num \|$" "$r" ||
    fail "allreduce row for $b bytes missing or malformed"
done
grep -Eq "^memcpy \(one core, 64 MiB\): $m3 GB/s\.$" "$r" || fail "memcpy line"
for n in 2 8; do
  grep -Eq "^\| $n \| $m3 \| $m3 \| $m3 \| $num \| [+-]$num ms \|$" "$r" || fail "launch row for N=$n"
done
for fig in 'shm allreduce 1 MiB busbw / memcpy' 'shm allreduce vs Open MPI, 8 B' \
           'shm allreduce vs Open MPI, every size' 'TCP allreduce vs torch gloo' 'TCP allreduce vs Open MPI tcp, 8 B' \
           'launch 2 x /bin/true vs mpirun' 'launch 2 x /bin/true minus fork+exec floor' 'launch 8 x /bin/true vs 2 x' \
           'SIGKILL of one worker'; do
  grep -F "| $fig" "$r" | grep -Eq ' \| (yes|no) \|$' || fail "target row '$fig'"
done
grep -q nan "$r" && fail "a figure did not parse (nan)"
grep -q '^Failures' "$r" && fail "the run reported failures"
[ "$(head -c 8 "$tmp/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "plot is not a PNG"
echo "run-all.sh --quick: output has every row"
