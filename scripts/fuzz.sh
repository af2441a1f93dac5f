#!/usr/bin/env bash
# Runs every libFuzzer target of fuzz/ for a bounded time, from its seed corpus (fuzz/corpus/<t>,
# read only) and a scratch corpus in the build tree; prints the executions each reached and fails
# on any crash, leak, timeout, out-of-memory or sanitizer report (the reproducer is kept next to
# the scratch corpus and named in the output).
#   usage: scripts/fuzz.sh [BUILD_DIR (build/fuzz)] [SECONDS per target (60)]
#   DTRAIN_FUZZ_JOBS  targets run at once (default: the number of CPUs)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/fuzz}
secs=${2:-60}
targets=(fuzz_spec fuzz_hostlist fuzz_hosts fuzz_wire fuzz_store)
jobs=${DTRAIN_FUZZ_JOBS:-$(nproc)}

# One target, from its seeds; its log and one result line in its work folder.
fuzz_one() {
  local t=$1 bin="$build/fuzz/$1" seeds="$root/fuzz/corpus/${1#fuzz_}" work="$build/fuzz-work/$1"
  local log="$work/log.txt" rc runs corpus
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: the memory a target may use.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(ls "$work/corpus" | wc -l)
  printf '%s %-14s %12s executions in %ss, %6s new corpus entries, %s\n' "$rc" "$t" "${runs:-?}" "$secs" "$corpus" \
    "$([ "$rc" -eq 0 ] && echo ok || echo FAILED)" >"$work/result"
}

for t in "${targets[@]}"; do
  if [ ! -x "$build/fuzz/$t" ]; then
    echo "fuzz.sh: $build/fuzz/$t is missing; build it with: cmake --preset fuzz && cmake --build --preset fuzz" >&2
    exit 2
  fi
done
# The targets side by side, $jobs at a time (each is one process on one core).
running=0
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  echo "fuzz.sh: $t for ${secs}s"
  fuzz_one "$t" &
  if ((++running >= jobs)); then wait -n || true; running=$((running - 1)); fi
done
wait
failed=0
summary=""
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  read -r rc line <"$work/result" || { rc=1; line="$t: no result"; }
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz.sh: $t FAILED (exit $rc); the end of its log:" >&2
    tail -n 60 "$work/log.txt" >&2
    ls "$work/artifacts" >&2
  fi
  summary+="$line"$'\n'
done
printf '\nfuzz.sh summary:\n%s' "$summary"
exit $failed
