#!/usr/bin/env bash
# Bound against unbound workers (--cpu-bind), side by side in one run: a CPU DDP step (ddp_step.py:
# an MLP on gloo, 2 ranks) and the C allreduce bench (bench/allreduce/coll_bench, 2 ranks, the shm
# engine), each under `dtrain launch --cpu-bind MODE` for every MODE, in interleaved rounds (the
# order reversed every other round), first as the machine is and then with a busy loop on one CPU
# in another session (a neighbour on the machine: a bound rank cannot move away from it), and then as
# two such jobs at once, both with the same mode (as two users of one default would run). Prints the
# median over rounds of each run's figure (DDP: the median step in ms; allreduce: the mean call in
# us per size), its ratio to none, each round's figure, and the load average around each part.
#
#   bash bench/bind/run.sh [BUILD_DIR] [ROUNDS] [DDP_STEPS] [SIZES]
#   (default: build/release, 5, 30, 1K,64K,1M,16M)
#
# MODES="none core numa" picks the modes (default: none and core, and numa where there are several
# NUMA nodes: with one node numa binds every rank to every CPU, as none leaves them); PYTHON=PATH the
# interpreter (default /usr/bin/python3, with Debian's python3-torch). OMP_NUM_THREADS is left to the
# launcher (dtrain sets it to the rank's share when bound, else CPUs / ranks), so each mode runs with
# the threads it would give a user.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build/release}" && pwd)
rounds=${2:-5}
steps=${3:-30}
sizes=${4:-1K,64K,1M,16M}
py=${PYTHON:-/usr/bin/python3}
dtrain=$build/dtrain
bench=$build/bench/allreduce/coll_bench
for f in "$dtrain" "$bench"; do [ -x "$f" ] || { echo "bench/bind: $f missing (build it)" >&2; exit 2; }; done
"$py" -c 'import torch.distributed' 2>/dev/null || { echo "bench/bind: $py cannot import torch" >&2; exit 2; }
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
modes=(${MODES:-none core $([ "$nodes" -le 1 ] || echo numa)})
unset OMP_NUM_THREADS
export USE_LIBUV=0  # Debian 13's torch has no libuv (torch 1.13 ignores it)
tmp=$(mktemp -d -t dtrain-bind-XXXXXX)
busy=()
trap 'kill "${busy[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

ddp() {  # mode [job] -> "median_ms"
  "$dtrain" launch --no-tag --cpu-bind "$1" --nproc-per-node 2 --python "$py" "$here/ddp_step.py" "$steps" \
    2>"$tmp/err${2:-}" | tail -n 1 | cut -d' ' -f1 || { cat "$tmp/err${2:-}" >&2; exit 1; }
}
allreduce() {  # mode [job] -> "bytes time_us" lines
  "$dtrain" launch --no-tag --cpu-bind "$1" --nproc-per-node 2 -- "$bench" --op allreduce --sizes "$sizes" \
    2>"$tmp/err${2:-}" | awk '$1 == "allreduce" { if ($10 != 0) exit 1; print $2, $7 }' || { cat "$tmp/err${2:-}" >&2; exit 1; }
}
pair=0  # 1: every run is two jobs at once, both with the same mode (their figures averaged)
run() {  # ddp|allreduce mode -> its figures
  if [ "$pair" = 0 ]; then "$@"; return; fi
  "$@" 2 >"$tmp/second" &
  local second=$! first
  first=$("$@" 1)
  wait "$second" || exit 1
  paste -d' ' <(echo "$first") "$tmp/second" | awk '{ if (NF == 2) print ($1 + $2) / 2; else print $1, ($2 + $4) / 2 }'
}

median() { sort -g | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

measure() {  # condition -> table rows
  local order=("${modes[@]}") i m k rev out
  : >"$tmp/all"
  echo "# $1: load average before $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((i = 0; i < rounds; i++)); do
    for m in "${order[@]}"; do
      out=$(run ddp "$m")
      echo "$m ddp $out" >>"$tmp/all"
      out=$(run allreduce "$m")
      sed "s/^/$m /" <<<"$out" >>"$tmp/all"
    done
    rev=()
    for ((k = ${#order[@]} - 1; k >= 0; k--)); do rev+=("${order[k]}"); done
    order=("${rev[@]}")
  done
  echo "# $1: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
  local keys key base fig
  keys=$(awk '{ print $2 }' "$tmp/all" | awk '!seen[$0]++')
  for key in $keys; do
    base=$(awk -v k="$key" '$1 == "none" && $2 == k { print $3 }' "$tmp/all" | median)
    for m in "${modes[@]}"; do
      fig=$(awk -v m="$m" -v k="$key" '$1 == m && $2 == k { print $3 }' "$tmp/all" | median)
      printf '%-7s %-10s %-5s %10s %8s   (rounds: %s)\n' "$1" "$key" "$m" "$fig" \
        "$(awk -v a="$fig" -v b="$base" 'BEGIN { printf "%.3f", a / b }')" \
        "$(awk -v m="$m" -v k="$key" '$1 == m && $2 == k { printf "%s ", $3 }' "$tmp/all")"
    done
  done
}

echo "--cpu-bind, 2 ranks: DDP step (ms, median of $steps steps) and allreduce (us per call, float32 sum),"
echo "$rounds interleaved rounds; $(nproc) CPUs, $nodes NUMA node(s), $(uname -r), torch $("$py" -c 'import torch; print(torch.__version__)'), $("$dtrain" --version)"
printf '%-7s %-10s %-5s %10s %8s\n' load what mode median /none
measure as-is
setsid sh -c 'while :; do :; done' &
busy+=($!)
measure busy1
kill "${busy[@]}"
busy=()
pair=1
measure 2jobs
