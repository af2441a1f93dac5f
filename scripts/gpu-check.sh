#!/usr/bin/env bash
# GPU check of dtrain's NCCL backend, for a machine with (at least) one NVIDIA GPU and its driver.
#
#   scripts/gpu-check.sh            # from anywhere; about 3-5 minutes on an H200 with 16 cores
#
# 1. configures a Release build with the NCCL backend required and the fill kernel for sm_90
#    (GPU_CHECK_ARCHS), builds only what the check needs (-j GPU_CHECK_JOBS, default 16);
# 2. runs the NCCL unit tests, which on a GPU include a real one-rank communicator;
# 3. runs a 1-rank job through `dtrain launch` (bench/gpu/allreduce_gpu.cpp) that allreduces device
#    buffers of 8 B .. 1 GiB, checks every result against a host reference, and times dtrain next
#    to a raw NCCL loop in the same process; prints the table (goal: dtrain overhead < 2%);
# 4. runs tests/nccl/nccl_p2p_worker.cpp under `dtrain launch` (GPU_CHECK_NPROC ranks): send/recv/
#    sendrecv on device buffers around the ring (itself with one rank), a split made before any
#    device call (its own NCCL unique id), ncclCommSplit and a split of that split, and a count
#    mismatch reported before NCCL runs.
#
# Output: a short summary on stdout; logs and gpu-allreduce.md (the table, ready for
# bench/RESULTS.md) under $OUT when set (the device runner), else under the build folder.
# Exit status: 0 when everything built and every result was correct; 1 otherwise (the overhead
# goal is reported, not enforced: it is a measurement).
#
# Environment: GPU_CHECK_BUILD (build folder, default build/gpu-check), GPU_CHECK_ARCHS (default
# 90), GPU_CHECK_JOBS (16), GPU_CHECK_MAX_BYTES (1073741824), GPU_CHECK_NPROC (ranks = GPUs to
# use, default 1).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_CHECK_BUILD:-$root/build/gpu-check}
archs=${GPU_CHECK_ARCHS:-90}
jobs=${GPU_CHECK_JOBS:-16}
max_bytes=${GPU_CHECK_MAX_BYTES:-1073741824}
nproc=${GPU_CHECK_NPROC:-1}
out=${OUT:-$build}
mkdir -p "$build" "$out"

say() { printf 'gpu-check: %s\n' "$*"; }
die() {
  printf 'gpu-check: FAILED: %s\n' "$*" >&2
  exit 1
}
# run_logged NAME TIMEOUT_S CMD...: runs CMD with its output in $out/NAME.log; on failure shows the
# end of the log and stops.
run_logged() {
  local name=$1 limit=$2
  shift 2
  local rc=0
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$out/$name.log" >&2
    [ "$rc" -eq 124 ] && die "$name did not finish within $limit s (log: $out/$name.log)"
    die "$name failed with status $rc (log: $out/$name.log)"
  fi
}

# ---- 0. is there a GPU? ----
command -v nvidia-smi >/dev/null 2>&1 ||
  die "nvidia-smi not found: this check needs a machine with an NVIDIA GPU and its driver"
gpu_list=$(nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1) ||
  die "nvidia-smi cannot talk to the driver: $gpu_list"
[ -n "$gpu_list" ] || die "nvidia-smi lists no GPU"
ngpus=$(printf '%s\n' "$gpu_list" | wc -l)
[ "$nproc" -le "$ngpus" ] || die "GPU_CHECK_NPROC=$nproc but only $ngpus GPU(s) here"
printf '%s\n' "$gpu_list" | sed 's/^/gpu-check: GPU /'
if ! command -v nvcc >/dev/null 2>&1; then
  [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc not found (install the CUDA toolkit or put it on PATH)"
  export PATH=/usr/local/cuda/bin:$PATH
fi

# ---- 1. configure and build ----
start=$SECONDS
cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WITH_NCCL=ON
  "-DCMAKE_CUDA_ARCHITECTURES=$archs" -DDTRAIN_WARNINGS_AS_ERRORS=OFF)
targets=(dtrain dtrain_collectives dtrain_gpu_allreduce)
if timeout 240 cmake "${cmake_args[@]}" -DBUILD_TESTING=ON >"$out/configure.log" 2>&1; then
  targets+=(test_nccl_core nccl_p2p_worker)
else
  say "configure with tests failed (doctest missing?); building without tests (see $out/configure.log)"
  run_logged configure 240 cmake "${cmake_args[@]}" -DBUILD_TESTING=OFF
fi
grep -q "NCCL backend ON" "$out/configure.log" || die "configure did not enable the NCCL backend (see $out/configure.log)"
run_logged build 420 cmake --build "$build" --target "${targets[@]}" -- -j"$jobs"
say "built ${targets[*]} for sm_$archs in $((SECONDS - start)) s"

# ---- 2. unit tests on the GPU ----
if [ -x "$build/tests/nccl/test_nccl_core" ]; then
  run_logged unit-tests 120 "$build/tests/nccl/test_nccl_core"
  say "NCCL unit tests: $(grep -E '^\[doctest\] test cases' "$out/unit-tests.log" | sed 's/\[doctest\] //')"
fi

# ---- 3. the allreduce check through dtrain launch ----
job=$build/gpu-check-job.json
table=$out/gpu-allreduce.md
rm -f "$table"
cat >"$job" <<EOF
{
  "version": 1,
  "name": "gpu-check",
  "command": ["$build/bench/dtrain_gpu_allreduce", "--max-bytes", "$max_bytes", "--out", "$table"],
  "cluster": { "instances": 1, "gpus_per_instance": $nproc },
  "output": { "tag": true }
}
EOF
start=$SECONDS
status=0
timeout --kill-after=10 300 "$build/dtrain" launch "$job" >"$out/launch.log" 2>&1 || status=$?
say "dtrain launch: exit status $status after $((SECONDS - start)) s (log: $out/launch.log)"
if [ ! -s "$table" ]; then
  tail -n 40 "$out/launch.log" >&2
  die "no table was written"
fi
echo
cat "$table"
echo
[ "$status" -eq 0 ] || die "the allreduce job failed (status $status); see $out/launch.log"

# ---- 4. point-to-point and split on device buffers ----
if [ -x "$build/tests/nccl/nccl_p2p_worker" ]; then
  p2p_job=$build/gpu-check-p2p-job.json
  printf '{ "version": 1, "name": "gpu-p2p", "command": ["%s"], "cluster": { "instances": 1, "gpus_per_instance": %s } }\n' \
    "$build/tests/nccl/nccl_p2p_worker" "$nproc" >"$p2p_job"
  run_logged p2p-launch 300 "$build/dtrain" launch "$p2p_job"
  [ "$(grep -c 'nccl p2p ok' "$out/p2p-launch.log")" -eq "$nproc" ] ||
    { tail -n 40 "$out/p2p-launch.log" >&2; die "the point-to-point job did not report ok from every rank"; }
  say "device send/recv/sendrecv and split: ok on $nproc rank(s) (log: $out/p2p-launch.log)"
else
  say "tests/nccl/nccl_p2p_worker was not built (no tests configured): point-to-point not checked"
fi
say "PASS (table in $table, for bench/RESULTS.md)"
