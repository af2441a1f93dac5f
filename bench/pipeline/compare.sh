#!/usr/bin/env bash
# GPipe vs 1F1B in the pipeline example (examples/pipeline) on this machine: for p = 2 and 4 stages
# (data 1) and m = 1, 2, 4, 8 micro-batches of MB samples each, the time per iteration and the
# measured bubble (the stages' idle time over their wall time, idle = anything but forward and
# backward compute) next to the formula (p-1)/(m+p-1). Each layer spends WORK_US microseconds of CPU
# time per micro-batch in the forward and again in the backward (--stage-work-us), so compute
# dominates the messages; the 4 dense layers are split evenly over the stages. The two schedules
# alternate, ROUNDS times (default 3); each cell is the median. The 1-minute load average is read
# before every run and printed (the machine may be shared).
#   usage: bench/pipeline/compare.sh [BUILD_DIR]   (default build/release)
#   env: ROUNDS (3), WORK_US (500), ITERS (timed iterations + 1 warm-up, 21), MB (4), TRANSPORT (auto)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
rounds=${ROUNDS:-3} work=${WORK_US:-500} iters=${ITERS:-21} mb=${MB:-4}
dtrain=$build/dtrain
worker=$build/dtrain-pipeline-example
for f in "$dtrain" "$worker"; do [ -x "$f" ] || { echo "compare.sh: $f missing; build first" >&2; exit 2; }; done
tmp=$(mktemp -d -t dtrain-pipeline-compare-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# run P M SCHEDULE: appends "P M SCHEDULE ms_per_iteration bubble formula peak" to $tmp/all.
run() {
  local p=$1 m=$2 sched=$3 global=$(($2 * mb))
  printf '{ "version": 1, "name": "pipeline-bench", "command": ["%s", "--stage-work-us", "%s"],
  "cluster": { "procs_per_instance": %s }, "parallel": { "pipeline": %s, "schedule": "%s" },
  "batch": { "global": %s, "micro_batches": %s, "dataset_size": %s, "epochs": 1 } }\n' \
    "$worker" "$work" "$p" "$p" "$sched" "$global" "$m" $((global * iters)) >"$tmp/job.json"
  cut -d' ' -f1 /proc/loadavg >>"$tmp/load"
  DTRAIN_TRANSPORT=${TRANSPORT:-auto} "$dtrain" launch --no-tag "$tmp/job.json" >"$tmp/out" 2>"$tmp/err" ||
    { cat "$tmp/out" "$tmp/err" >&2; exit 1; }
  sed -n 's/^timing: .*: \([0-9.]*\) ms per iteration, bubble \(-*[0-9.]*\) measured, \([0-9.]*\) formula .*at most \([0-9]*\) micro-batches.*/\1 \2 \3 \4/p' "$tmp/out" |
    awk -v p="$p" -v m="$m" -v s="$sched" 'NF == 4 { print p, m, s, $1, $2, $3, $4; ok = 1 } END { exit !ok }' >>"$tmp/all" ||
    { echo "compare.sh: no timing line from p=$p m=$m $sched" >&2; cat "$tmp/out" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
  for p in 2 4; do
    for m in 1 2 4 8; do
      run "$p" "$m" gpipe
      run "$p" "$m" 1f1b
    done
  done
done

# median KEY_FIELDS -> "p m sched ms bubble formula peak" with the medians of ms and bubble
median() {
  awk -v p="$1" -v m="$2" -v s="$3" -v col="$4" '$1 == p && $2 == m && $3 == s { print $col }' "$tmp/all" | sort -g |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
load=$(sort -g "$tmp/load" | awk '{ v[NR] = $1 } END { printf "%s .. %s", v[1], v[NR] }')
echo "# pipeline example, data 1, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), median of $rounds alternating rounds;"
echo "# ${mb} samples per micro-batch, --stage-work-us $work, $((iters - 1)) timed iterations; 1-min load average $load"
printf '%2s %2s | %8s | %9s %7s %5s | %9s %7s %5s\n' p m formula gpipe_ms bubble peak 1f1b_ms bubble peak
for p in 2 4; do
  for m in 1 2 4 8; do
    f=$(awk -v p="$p" -v m="$m" '$1 == p && $2 == m { print $6; exit }' "$tmp/all")
    printf '%2s %2s | %8.3f | %9.2f %7.3f %5s | %9.2f %7.3f %5s\n' "$p" "$m" "$f" \
      "$(median "$p" "$m" gpipe 4)" "$(median "$p" "$m" gpipe 5)" "$(median "$p" "$m" gpipe 7)" \
      "$(median "$p" "$m" 1f1b 4)" "$(median "$p" "$m" 1f1b 5)" "$(median "$p" "$m" 1f1b 7)"
  done
done
