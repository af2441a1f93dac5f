#!/usr/bin/env bash
# Launch overhead: wall time of `dtrain launch` for N workers of /bin/true against
# `mpirun -np N /bin/true` (Debian's openmpi-bin) and torchrun where installed, alternating the
# launchers run by run in one go, so that all see the same machine load. Prints the median of each
# and the ratio dtrain/peer.
#
#   bash bench/launch/run.sh [DTRAIN_BIN] [RUNS]      (default: build/release/dtrain, 20 runs)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dtrain=${1:-$here/../../build/release/dtrain}
runs=${2:-20}
sizes=(2 8)
[ -x "$dtrain" ] || { echo "bench/launch: no dtrain binary at $dtrain (build first, or pass its path)" >&2; exit 2; }

work=$(mktemp -d -t dtrain-bench-launch.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo '{"command": ["/bin/true"]}' >"$work/true.json"

peers=()
command -v mpirun >/dev/null && peers+=(mpirun)
command -v torchrun >/dev/null && peers+=(torchrun)

now() { echo "${EPOCHREALTIME/./}"; }  # microseconds

run_one() {  # launcher N -> prints microseconds
  local launcher=$1 n=$2 t0 t1
  t0=$(now)
  case $launcher in
    dtrain) "$dtrain" launch "$work/true.json" --nproc-per-node "$n" >/dev/null 2>&1 ;;
    mpirun) mpirun --allow-run-as-root --oversubscribe -np "$n" /bin/true >/dev/null 2>&1 ;;
    torchrun) torchrun --standalone --nproc-per-node "$n" --no-python /bin/true >/dev/null 2>&1 ;;
  esac
  t1=$(now)
  echo $((t1 - t0))
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "launch overhead, $runs alternating runs per launcher and size, $(nproc) cores, $(uname -r)"
echo "dtrain: $dtrain ($("$dtrain" --version))"
for p in "${peers[@]}"; do
  case $p in
    mpirun) echo "mpirun: $(mpirun --version 2>/dev/null | head -n 1)" ;;
    torchrun) echo "torchrun: $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')" ;;
  esac
done
echo
printf '%-4s %-10s %12s %12s\n' N launcher "median ms" "dtrain/peer"
for n in "${sizes[@]}"; do
  declare -A samples=()
  for launcher in dtrain "${peers[@]}"; do run_one "$launcher" "$n" >/dev/null; done  # warm-up
  for ((i = 0; i < runs; i++)); do
    for launcher in dtrain "${peers[@]}"; do samples[$launcher]+="$(run_one "$launcher" "$n") "; done
  done
  d=$(tr ' ' '\n' <<<"${samples[dtrain]}" | grep . | median)
  printf '%-4s %-10s %12.2f %12s\n' "$n" dtrain "$(awk -v x="$d" 'BEGIN { print x / 1000 }')" "-"
  for p in "${peers[@]}"; do
    m=$(tr ' ' '\n' <<<"${samples[$p]}" | grep . | median)
    printf '%-4s %-10s %12.2f %12.3f\n' "$n" "$p" "$(awk -v x="$m" 'BEGIN { print x / 1000 }')" \
      "$(awk -v a="$d" -v b="$m" 'BEGIN { print a / b }')"
  done
  unset samples
done
