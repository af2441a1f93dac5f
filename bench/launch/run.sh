#!/usr/bin/env bash
# Launch overhead: wall time of `dtrain launch` for N workers of /bin/true against
# `mpirun -np N /bin/true` (Debian's openmpi-bin), torchrun where installed, and the floor under any
# launcher, `bench_forkexec N /bin/true` (fork N children that exec the program, wait for them).
# The launchers alternate run by run in one go (the order reversed every other round), so that all
# see the same machine load. Prints min/median/max of each, the ratio dtrain/peer, dtrain's distance
# from the floor, the 8-worker time over the 2-worker time, and the load average before and after.
#
#   bash bench/launch/run.sh [DTRAIN_BIN] [RUNS]      (default: build/release/dtrain, 20 runs)
#
# Environment: DTRAIN_BASE=PATH also times a second dtrain binary (a build of another commit, with
# its dtrain-shim next to it) in the same rounds, as the launcher "base"; FORKEXEC=PATH the floor's
# program (default: bench/launch/bench_forkexec of the build folder DTRAIN_BIN is in).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dtrain=${1:-$here/../../build/release/dtrain}
runs=${2:-20}
sizes=(2 8)
[ -x "$dtrain" ] || { echo "bench/launch: no dtrain binary at $dtrain (build first, or pass its path)" >&2; exit 2; }
forkexec=${FORKEXEC:-$(dirname "$dtrain")/bench/launch/bench_forkexec}
base=${DTRAIN_BASE:-}
[ -z "$base" ] || [ -x "$base" ] || { echo "bench/launch: DTRAIN_BASE=$base is not an executable" >&2; exit 2; }

work=$(mktemp -d -t dtrain-bench-launch.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo '{"command": ["/bin/true"]}' >"$work/true.json"

launchers=(dtrain)
[ -n "$base" ] && launchers+=(base)
if [ -x "$forkexec" ]; then launchers+=(forkexec); else echo "bench/launch: no $forkexec: no fork+exec floor (build bench_forkexec)" >&2; fi
command -v mpirun >/dev/null && launchers+=(mpirun)
# torchrun's underscore spellings, which every version takes
torchrun --standalone --nproc_per_node 1 --no_python /bin/true >/dev/null 2>&1 && launchers+=(torchrun)

now() { echo "${EPOCHREALTIME/./}"; }  # microseconds

run_one() {  # launcher N -> prints microseconds
  local launcher=$1 n=$2 t0 t1
  t0=$(now)
  case $launcher in
    dtrain) "$dtrain" launch "$work/true.json" --nproc-per-node "$n" >/dev/null 2>&1 ;;
    base) "$base" launch "$work/true.json" --nproc-per-node "$n" >/dev/null 2>&1 ;;
    forkexec) "$forkexec" "$n" /bin/true >/dev/null 2>&1 ;;
    mpirun) mpirun --allow-run-as-root --oversubscribe -np "$n" /bin/true >/dev/null 2>&1 ;;
    torchrun) torchrun --standalone --nproc_per_node "$n" --no_python /bin/true >/dev/null 2>&1 ;;
  esac || echo "bench/launch: $launcher with $n workers failed" >&2
  t1=$(now)
  echo $((t1 - t0))
}

# stdin: one number a line -> "median min max"
stats() { sort -n | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; print m, a[1], a[NR] }'; }
ms() { awk -v x="$1" 'BEGIN { printf "%.2f", x / 1000 }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "launch overhead, $runs alternating runs per launcher and size, $(nproc) cores, $(uname -r)"
echo "dtrain: $dtrain ($("$dtrain" --version))"
[ -n "$base" ] && echo "base: $base ($("$base" --version))"
for p in "${launchers[@]}"; do
  case $p in
    forkexec) echo "forkexec: $forkexec N /bin/true" ;;
    mpirun) echo "mpirun: $(mpirun --version 2>/dev/null | head -n 1)" ;;
    torchrun) echo "torchrun: $(head -n 1 "$(command -v torchrun)" | cut -c3-) $("$(head -n 1 "$(command -v torchrun)" | cut -c3-)" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')" ;;
  esac
done
echo "load average before: $(load)"
echo
printf '%-4s %-10s %10s %10s %10s %12s\n' N launcher "median ms" "min" "max" "dtrain/this"
declare -A med=()
for n in "${sizes[@]}"; do
  declare -A samples=()
  for launcher in "${launchers[@]}"; do run_one "$launcher" "$n" >/dev/null; done  # warm-up
  order=("${launchers[@]}")
  for ((i = 0; i < runs; i++)); do
    for launcher in "${order[@]}"; do samples[$launcher]+="$(run_one "$launcher" "$n") "; done
    reversed=()
    for ((k = ${#order[@]} - 1; k >= 0; k--)); do reversed+=("${order[k]}"); done
    order=("${reversed[@]}")
  done
  for launcher in "${launchers[@]}"; do
    read -r m lo hi < <(tr ' ' '\n' <<<"${samples[$launcher]}" | grep . | stats)
    med[$launcher.$n]=$m
    ratio=-
    [ "$launcher" = dtrain ] || ratio=$(awk -v a="${med[dtrain.$n]}" -v b="$m" 'BEGIN { printf "%.3f", a / b }')
    printf '%-4s %-10s %10s %10s %10s %12s\n' "$n" "$launcher" "$(ms "$m")" "$(ms "$lo")" "$(ms "$hi")" "$ratio"
  done
  unset samples
done
echo
for n in "${sizes[@]}"; do
  [ -n "${med[forkexec.$n]:-}" ] &&
    echo "N=$n: dtrain - fork+exec floor = $(awk -v a="${med[dtrain.$n]}" -v b="${med[forkexec.$n]}" 'BEGIN { printf "%+.2f", (a - b) / 1000 }') ms"
done
echo "dtrain 8 workers / 2 workers = $(awk -v a="${med[dtrain.8]}" -v b="${med[dtrain.2]}" 'BEGIN { printf "%.2f", a / b }')"
echo "load average after: $(load)"
