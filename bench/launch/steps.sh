#!/usr/bin/env bash
# The launcher's cost per step: the same 2-rank gloo loop (gloo_steps.py: 21-float all_reduces)
# under `dtrain launch`, torchrun and a launch by hand (two python processes with the env:// variables
# set, in the shell's session), and by hand with each rank under setsid(1) (a session, hence a
# scheduler autogroup, of its own), in interleaved rounds (the order reversed every other round),
# quiet and then with a CPU load in another session (one busy loop per core, under setsid). Prints
# the median per-call time of each (the median over rounds of each round's median), and each one's
# ratio to the launch by hand.
#
#   bash bench/launch/steps.sh [DTRAIN_BIN] [ROUNDS] [STEPS]   (default: build/release/dtrain, 5, 2000)
#
# DTRAIN_BASE=PATH also times a second dtrain binary (another commit's build) as "base"; PYTHON=PATH
# the interpreter (default /usr/bin/python3, with Debian's python3-torch).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dtrain=${1:-$here/../../build/release/dtrain}
rounds=${2:-5}
steps=${3:-2000}
base=${DTRAIN_BASE:-}
py=${PYTHON:-/usr/bin/python3}  # Debian's, with python3-torch
script=$here/gloo_steps.py
[ -x "$dtrain" ] || { echo "bench/launch/steps: no dtrain binary at $dtrain" >&2; exit 2; }
"$py" -c 'import torch.distributed' 2>/dev/null || { echo "bench/launch/steps: $py cannot import torch" >&2; exit 2; }
cores=$(nproc)  # before OMP_NUM_THREADS, which nproc(1) obeys
export USE_LIBUV=0  # Debian 13's torch has no libuv (torch 1.13 ignores it)
export OMP_NUM_THREADS=1  # what torchrun sets; the same for every launcher

launchers=(dtrain)
[ -n "$base" ] && launchers+=(base)
command -v torchrun >/dev/null && launchers+=(torchrun)
launchers+=(hand setsid)
port=$((29500 + RANDOM % 2000))

by_hand() {  # $1: "" or setsid
  local pids=() out
  out=$(mktemp)
  for r in 0 1; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
      $1 "$py" "$script" "$steps" >>"$out" &
    pids+=($!)
  done
  wait "${pids[@]}"
  port=$((port + 1))
  cat "$out"
  rm -f "$out"
}

run_one() {  # launcher -> "median_us p90_us"
  case $1 in
    dtrain) "$dtrain" launch --no-tag --nproc-per-node 2 --python "$py" "$script" "$steps" 2>/dev/null ;;
    base) "$base" launch --no-tag --nproc-per-node 2 --python "$py" "$script" "$steps" 2>/dev/null ;;
    # torch 1.13's torchrun on Python 3.11 cannot take its default --redirects 0 --tee 0
    # (tests/torch/torchrun.sh); its tee prefixes the lines with [default<rank>]:
    torchrun) torchrun --standalone --nproc_per_node 2 --redirects 2 --tee 1 "$script" "$steps" 2>/dev/null |
                sed 's/^\[default[0-9]*\]://' ;;
    hand) by_hand "" ;;
    setsid) by_hand setsid ;;
  esac | tail -n 1
}

median() { sort -n | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

measure() {  # $1: condition name
  declare -A got=()
  local order=("${launchers[@]}") i l k rev
  for ((i = 0; i < rounds; i++)); do
    for l in "${order[@]}"; do got[$l]+="$(run_one "$l" | cut -d' ' -f1) "; done
    rev=()
    for ((k = ${#order[@]} - 1; k >= 0; k--)); do rev+=("${order[k]}"); done
    order=("${rev[@]}")
  done
  local hand_m
  hand_m=$(tr ' ' '\n' <<<"${got[hand]}" | grep . | median)
  for l in "${launchers[@]}"; do
    local m
    m=$(tr ' ' '\n' <<<"${got[$l]}" | grep . | median)
    printf '%-7s %-9s %10s %10s   (rounds: %s)\n' "$1" "$l" "$m" \
      "$(awk -v a="$m" -v b="$hand_m" 'BEGIN { printf "%.3f", a / b }')" "${got[$l]% }"
  done
}

echo "per-call time of a 2-rank gloo all_reduce of 21 floats, $steps calls a run, $rounds interleaved rounds,"
echo "$cores cores, $(uname -r), autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo '?')," \
     "torch $("$py" -c 'import torch; print(torch.__version__)'), dtrain $("$dtrain" --version)"
printf '%-7s %-9s %10s %10s\n' load launcher "median us" "/by hand"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
measure quiet
busy=()
for ((c = 0; c < cores; c++)); do setsid sh -c 'while :; do :; done' & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
measure loaded
kill "${busy[@]}" 2>/dev/null || true
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
