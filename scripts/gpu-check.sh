#!/usr/bin/env bash
# GPU check of dtrain's NCCL backend and of its torch.distributed backend on CUDA tensors, for a
# machine with (at least) one NVIDIA GPU and its driver, a CUDA toolkit (nvcc) and, for the torch
# part, a CUDA build of PyTorch with pip's NCCL (nvidia-nccl-cu13: site-packages/nvidia/nccl/lib/
# libnccl.so.2 and include/nccl.h). Nothing is fetched there.
#
#   scripts/gpu-check.sh [--no-torch | --torch-only]     the check (about 3-6 minutes, 16 cores)
#   scripts/gpu-check.sh --prepare-deps                  on a machine with Debian 12's archive: the
#       build's libraries (CLI11, fmt, nlohmann/json, libuv, OpenSSL, doctest, pkgconf) as Debian
#       packages unpacked into build/gpu-deps/root, for a GPU machine whose image lacks them (carry
#       that folder there; the check uses it when it is there, or GPU_CHECK_DEPS names it)
#
# 0. a GPU? Without nvidia-smi, or with one that lists no GPU: "SKIP: reason" and exit 77.
# 1. the torch (GPU_CHECK_PYTHON, default python3; not with --no-torch): its version, CUDA, the
#    libnccl.so.2 it loaded and the nccl.h beside it, its CMake package, pybind11's, and the pybind11
#    ABI macros torch was built with (as torch.utils.cpp_extension passes them to extensions);
# 2. configures a Release build with the NCCL backend required (torch's NCCL, so that one process
#    loads one NCCL; the toolkit's with --no-torch), the fill kernel for sm_90 (GPU_CHECK_ARCHS) and
#    the torch backend against that torch; builds only what the check needs (-j GPU_CHECK_JOBS);
# 3. the NCCL unit tests (tests/nccl: test_nccl_core, test_nccl_ops), which on a GPU include a real
#    one-rank communicator and the device calls of C ABI 0.3 (reduce, gather, scatter, alltoallv,
#    premultiplied sum, bool);
# 4. a 1-rank job through `dtrain launch` (bench/gpu/allreduce_gpu.cpp) that allreduces device
#    buffers of 8 B .. 1 GiB, checks every result against a host reference, and times dtrain next
#    to a raw NCCL loop in the same process (goal: dtrain overhead < 2%);
# 5. tests/nccl/nccl_p2p_worker.cpp under `dtrain launch` (GPU_CHECK_NPROC ranks): send/recv/
#    sendrecv on device buffers around the ring, splits, a count mismatch reported before NCCL runs;
# 6. torch (not with --no-torch): every op of the backend "dtrain" on CUDA tensors against torch's
#    own "nccl" on the same ranks (bench/torch/cuda_ops.py), and a small DDP model (fp32, 100 steps)
#    on both side by side: the loss curves and the step-time ratio (bench/torch/cuda_ddp.py).
# --torch-only leaves out 3-5.
#
# Output: a short summary on stdout; logs, gpu-allreduce.md and gpu-torch.md (the tables, ready for
# bench/RESULTS.md) under $OUT when set (the device runner), else under the build folder.
# Exit status: 0 when everything built and every result was correct; 1 otherwise; 2 on bad usage;
# 77 when there is no GPU (the overhead goal and the step-time ratio are reported, not enforced).
#
# Environment: GPU_CHECK_BUILD (build folder, default build/gpu-check), GPU_CHECK_ARCHS (default
# 90), GPU_CHECK_JOBS (16), GPU_CHECK_MAX_BYTES (1073741824), GPU_CHECK_NPROC (ranks = GPUs to
# use, default 1), GPU_CHECK_PYTHON (python3), GPU_CHECK_STEPS (DDP steps, 100), GPU_CHECK_DEPS.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_CHECK_BUILD:-$root/build/gpu-check}
archs=${GPU_CHECK_ARCHS:-90}
jobs=${GPU_CHECK_JOBS:-16}
max_bytes=${GPU_CHECK_MAX_BYTES:-1073741824}
nproc=${GPU_CHECK_NPROC:-1}
python=${GPU_CHECK_PYTHON:-python3}
steps=${GPU_CHECK_STEPS:-100}
deps=${GPU_CHECK_DEPS:-$root/build/gpu-deps/root}

say() { printf 'gpu-check: %s\n' "$*"; }
die() {
  printf 'gpu-check: FAILED: %s\n' "$*" >&2
  exit 1
}
usage() {
  printf 'gpu-check: %s\n' "$1" >&2
  echo "usage: scripts/gpu-check.sh [--no-torch | --torch-only] | --prepare-deps | --help" >&2
  exit 2
}

torch=1 nccl_parts=1 prepare=0
while (($#)); do
  case $1 in
    --no-torch) torch=0 ;;
    --torch-only) nccl_parts=0 ;;
    --prepare-deps) prepare=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown argument '$1'" ;;
  esac
  shift
done
((torch || nccl_parts)) || usage "--no-torch and --torch-only exclude each other"
[[ "$nproc" =~ ^[1-9][0-9]*$ ]] || usage "GPU_CHECK_NPROC must be a number of ranks (got '$nproc')"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || usage "GPU_CHECK_STEPS must be a number of steps (got '$steps')"

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

# The build's libraries from Debian 12's archive, unpacked (not installed) into $1/root: for a GPU
# machine whose image has CMake, nvcc and torch but not these.
prepare_deps() {
  local dir=$1
  local pkgs=(libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev libuv1-dev libuv1 libssl-dev libssl3 doctest-dev
              pkgconf-bin libpkgconf3)
  rm -rf "$dir" && mkdir -p "$dir/debs" "$dir/root"
  (cd "$dir/debs" && apt-get download "${pkgs[@]}") >"$dir/download.log" 2>&1 ||
    { cat "$dir/download.log" >&2; die "apt-get download failed (run apt-get update first?)"; }
  local f
  for f in "$dir"/debs/*.deb; do dpkg-deb -x "$f" "$dir/root"; done
  rm -rf "$dir/debs" "$dir/root/usr/share/doc" "$dir/root/usr/share/man" "$dir"/root/usr/lib/x86_64-linux-gnu/*.a
  say "unpacked ${pkgs[*]} into $dir/root ($(du -sh "$dir/root" | cut -f1)); carry build/gpu-deps to the GPU machine"
}

# ---- 0. is there a GPU? ----
check_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "SKIP: nvidia-smi not found: this check needs a machine with an NVIDIA GPU and its driver"
    exit 77
  fi
  local list ngpus
  list=$(nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1) ||
    die "nvidia-smi cannot talk to the driver: $list"
  if [ -z "$list" ]; then
    echo "SKIP: nvidia-smi lists no GPU"
    exit 77
  fi
  ngpus=$(printf '%s\n' "$list" | wc -l)
  [ "$nproc" -le "$ngpus" ] || die "GPU_CHECK_NPROC=$nproc but only $ngpus GPU(s) here"
  printf '%s\n' "$list" | sed 's/^/gpu-check: GPU /'
  gpu_name=$(printf '%s\n' "$list" | head -n 1 | cut -d, -f2 | sed 's/^ *//')
  if ! command -v nvcc >/dev/null 2>&1; then
    [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc not found (install the CUDA toolkit or put it on PATH)"
    export PATH=/usr/local/cuda/bin:$PATH
  fi
}

# ---- 1. the torch to build against: sets torch_* from scripts/gpu_check_probe.py's lines ----
probe_torch() {
  local probe key value
  probe=$("$python" "$root/scripts/gpu_check_probe.py" 2>&1) ||
    die "$python cannot import torch: $probe (GPU_CHECK_PYTHON names another interpreter; --no-torch leaves out the torch part)"
  while IFS='=' read -r key value; do
    printf -v "torch_$key" '%s' "$value"
  done <<<"$probe"
  [ "$torch_cuda" != None ] || die "torch $torch_version ($python) is a CPU build: the torch part needs a CUDA build"
  [ "$torch_gpus" -ge "$nproc" ] || die "torch $torch_version sees $torch_gpus GPU(s), fewer than GPU_CHECK_NPROC=$nproc"
  [ -n "$torch_nccl_lib" ] || die "torch $torch_version loaded no libnccl.so (a build without NCCL?)"
  [ -n "$torch_nccl_include" ] ||
    die "no nccl.h beside torch's NCCL ($torch_nccl_lib): the headers of the NCCL torch loads are needed to build against it"
  say "torch $torch_version (CUDA $torch_cuda, $python); its NCCL $torch_nccl_version: $torch_nccl_lib, headers $torch_nccl_include"
}

# ---- 2. configure and build ----
configure_and_build() {
  local start=$SECONDS
  local args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WITH_NCCL=ON
              "-DCMAKE_CUDA_ARCHITECTURES=$archs" -DDTRAIN_WARNINGS_AS_ERRORS=OFF -DBUILD_TESTING=ON)
  local prefix=() targets=(dtrain dtrain_collectives)
  ((nccl_parts)) && targets+=(dtrain_gpu_allreduce test_nccl_core test_nccl_ops nccl_p2p_worker)
  if [ -d "$deps/usr" ]; then  # --prepare-deps' libraries: CMake packages, pkg-config files, OpenSSL
    prefix+=("$deps/usr")
    args+=("-DOPENSSL_ROOT_DIR=$deps/usr")
    export PKG_CONFIG_SYSROOT_DIR=$deps PKG_CONFIG_LIBDIR=$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig
    if ! command -v pkg-config >/dev/null 2>&1; then
      printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$deps/usr/lib/x86_64-linux-gnu" "$deps/usr/bin/pkgconf" \
        >"$build/pkg-config" && chmod +x "$build/pkg-config"
      args+=("-DPKG_CONFIG_EXECUTABLE=$build/pkg-config")
    fi
    say "the build's libraries from $deps"
  fi
  if ((torch)); then  # torch's NCCL for the library too: one NCCL in a process that imports torch
    prefix+=("$torch_cmake")
    [ -z "$torch_pybind11" ] || prefix+=("$torch_pybind11")
    args+=("-DPython3_EXECUTABLE=$(command -v "$python")" "-DDTRAIN_NCCL_INCLUDE_DIR=$torch_nccl_include"
           "-DDTRAIN_NCCL_LIBRARY=$torch_nccl_lib" "-DCMAKE_CXX_FLAGS=$torch_pybind11_abi")
    targets+=(dtrain_python dtrain_torch_backend)
  fi
  [ ${#prefix[@]} -eq 0 ] || args+=("-DCMAKE_PREFIX_PATH=$(IFS=';'; echo "${prefix[*]}")")
  run_logged configure 240 cmake "${args[@]}"
  grep -q "NCCL backend ON" "$out/configure.log" || die "configure did not enable the NCCL backend (see $out/configure.log)"
  if ((torch)) && ! grep -q "dtrain torch backend: built against torch $torch_version" "$out/configure.log"; then
    die "the torch backend is not configured against torch $torch_version: $(grep 'dtrain torch backend' "$out/configure.log" ||
      echo 'no status line') (see $out/configure.log)"
  fi
  run_logged build 420 cmake --build "$build" --target "${targets[@]}" -- -j"$jobs"
  say "built ${targets[*]} for sm_$archs in $((SECONDS - start)) s"
}

# ---- 3. unit tests on the GPU ----
nccl_unit_tests() {
  local t
  unit_summary=""
  for t in test_nccl_core test_nccl_ops; do
    run_logged "$t" 120 "$build/tests/nccl/$t"
    unit_summary+="${unit_summary:+; }$t: $(sed -n 's/^\[doctest\] test cases: *//p' "$out/$t.log" | sed 's/ *| */, /g')"
  done
  say "NCCL unit tests: $unit_summary"
}

# ---- 4. the allreduce check through dtrain launch ----
allreduce_table() {
  local job=$build/gpu-check-job.json table=$out/gpu-allreduce.md start=$SECONDS status=0
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
  timeout --kill-after=10 300 "$build/dtrain" launch "$job" >"$out/launch.log" 2>&1 || status=$?
  say "dtrain launch: exit status $status after $((SECONDS - start)) s (log: $out/launch.log)"
  if [ ! -s "$table" ]; then
    tail -n 40 "$out/launch.log" >&2
    die "no table was written"
  fi
  printf '\n%s\n\n' "$(cat "$table")"
  [ "$status" -eq 0 ] || die "the allreduce job failed (status $status); see $out/launch.log"
}

# ---- 5. point-to-point and split on device buffers ----
p2p_check() {
  local job=$build/gpu-check-p2p-job.json
  printf '{ "version": 1, "name": "gpu-p2p", "command": ["%s"], "cluster": { "instances": 1, "gpus_per_instance": %s } }\n' \
    "$build/tests/nccl/nccl_p2p_worker" "$nproc" >"$job"
  run_logged p2p-launch 300 "$build/dtrain" launch "$job"
  [ "$(grep -c 'nccl p2p ok' "$out/p2p-launch.log")" -eq "$nproc" ] ||
    { tail -n 40 "$out/p2p-launch.log" >&2; die "the point-to-point job did not report ok from every rank"; }
  say "device send/recv/sendrecv and split: ok on $nproc rank(s) (log: $out/p2p-launch.log)"
}

# ---- 6. torch on CUDA tensors: dtrain against torch's own nccl ----
torch_launch() {
  "$build/dtrain" launch --no-tag --python "$(command -v "$python")" --nproc-per-node "$nproc" "$@"
}
torch_checks() {
  run_logged torch-ops 300 torch_launch "$root/bench/torch/cuda_ops.py" --device cuda --reference nccl --require-all
  ops_summary=$(sed -n 's/^cases //p' "$out/torch-ops.log")
  [ -n "$ops_summary" ] || die "bench/torch/cuda_ops.py printed no summary (log: $out/torch-ops.log)"
  say "torch ops on CUDA tensors, dtrain against nccl: $ops_summary"
  run_logged torch-ddp 300 torch_launch "$root/bench/torch/cuda_ddp.py" --device cuda --reference nccl --steps "$steps"
  grep -q '^ddp ' "$out/torch-ddp.log" || die "bench/torch/cuda_ddp.py printed no summary (log: $out/torch-ddp.log)"
  torch_table >"$out/gpu-torch.md"
  printf '\n%s\n\n' "$(cat "$out/gpu-torch.md")"
}

# The torch table: what was run, the ops' summary, the step-time ratio, the loss curves at ten points.
torch_table() {
  local n world params ms_d ms_n ratio diff
  read -r _ n world params ms_d ms_n ratio diff < <(grep '^ddp ' "$out/torch-ddp.log")
  echo "dtrain's torch backend on CUDA tensors against torch's own nccl, $world rank(s), GPU 0 ($gpu_name);"
  echo "torch $torch_version, CUDA $torch_cuda, NCCL $torch_nccl_version ($torch_nccl_lib)"
  echo
  echo "| check | result |"
  echo "|---|---|"
  [ -z "${unit_summary:-}" ] || echo "| NCCL unit tests (tests/nccl) | $unit_summary |"
  echo "| every op, dtrain vs nccl (bench/torch/cuda_ops.py) | $ops_summary |"
  echo "| DDP, $params fp32 parameters, $n steps (bench/torch/cuda_ddp.py) | mean step after 5: dtrain $ms_d ms, nccl $ms_n ms; dtrain / nccl = $ratio |"
  echo "| DDP loss curves, dtrain vs nccl | largest difference over the steps: $diff |"
  echo
  echo "| step | loss dtrain | loss nccl | ms dtrain | ms nccl |"
  echo "|---:|---:|---:|---:|---:|"
  awk -v n="$n" '$1 == "step" && ($2 == 1 || $2 % int((n + 9) / 10) == 0 || $2 == n) {
    printf "| %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6 }' "$out/torch-ddp.log"
}

if ((prepare)); then
  prepare_deps "$root/build/gpu-deps"
  exit 0
fi

out=${OUT:-$build}
mkdir -p "$build" "$out"
check_gpu
if ((torch)); then probe_torch; fi
configure_and_build
if ((nccl_parts)); then
  nccl_unit_tests
  allreduce_table
  p2p_check
fi
if ((torch)); then torch_checks; fi
say "PASS (the tables in $out, for bench/RESULTS.md)"
