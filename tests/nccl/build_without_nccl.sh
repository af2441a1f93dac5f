#!/usr/bin/env bash
# The collectives library without CUDA/NCCL: configure with DTRAIN_WITH_NCCL=OFF from scratch in the
# build tree OFF_DIR, build only libdtrain_collectives, and check it does not link NCCL or the CUDA
# runtime; and DTRAIN_WITH_NCCL=ON without the CUDA toolkit stops at configure, naming what is missing.
# With DTRAIN_BIN, also drives the OFF library's device-buffer path through the C ABI under
# `dtrain launch`, with a fake CUDA driver (fake_libcuda.c) that makes a buffer look like device memory.
# OFF_DIR is kept from run to run, as a build tree is: each run configures it afresh (cmake --fresh:
# a new cache, as a first configure) and its build compiles what changed since the last run (the
# first run compiles the library's 40-odd units, a minute of CPU; a run with nothing changed none).
#   build_without_nccl.sh SOURCE_DIR CMAKE_COMMAND OFF_DIR [DTRAIN_BIN]
set -euo pipefail
src=$1
cmake=$2
off=$3
work=$(mktemp -d -t dtrain-nccl-off.XXXXXX)
keep=1
trap '[ "$keep" = 0 ] && rm -rf "$work" || echo "kept $work"' EXIT

echo "== configure with -DDTRAIN_WITH_NCCL=OFF"
# Built for the check only, in the least CPU: no optimisation and no debug info, unity batches, and
# without the etcd plugin (no libcurl found), which the library would otherwise wait for at link
# time with the membership it carries: less than half the compile time of a plain Debug build.
"$cmake" --fresh -S "$src" -B "$off" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= -DCMAKE_C_FLAGS_DEBUG= \
  -DDTRAIN_UNITY_BUILD=ON -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DBUILD_TESTING=OFF \
  -DDTRAIN_WITH_NCCL=OFF -DDTRAIN_WARNINGS_AS_ERRORS=ON >"$work/off.log" 2>&1 || { cat "$work/off.log"; exit 1; }
grep -q "NCCL backend OFF" "$work/off.log" || { cat "$work/off.log"; echo "FAIL: configure did not report 'NCCL backend OFF'"; exit 1; }

echo "== build dtrain_collectives"
"$cmake" --build "$off" --target dtrain_collectives -- -j2 >"$work/build.log" 2>&1 || { tail -n 60 "$work/build.log"; exit 1; }
lib=$(find "$off" -name 'libdtrain_collectives.so*' -type f | head -n 1)
[ -n "$lib" ] || { echo "FAIL: no libdtrain_collectives.so was built"; exit 1; }
needed=$(readelf -d "$lib" | grep NEEDED || true)
echo "$needed"
if grep -Eq 'libnccl|libcudart|libcuda\.' <<<"$needed"; then
  echo "FAIL: $lib links NCCL/CUDA although built with DTRAIN_WITH_NCCL=OFF"
  exit 1
fi
# What is compiled: build.ninja's sources and, for the unity batches it builds (not one an earlier
# configure left behind), the files each batch includes.
compiled=("$off/build.ninja")
for u in $(find "$off" -path '*/Unity/*.cxx'); do
  if grep -qF "${u#"$off"/}" "$off/build.ninja"; then compiled+=("$u"); fi
done
grep -q 'nccl_stub.cpp' "${compiled[@]}" || { echo "FAIL: nccl_stub.cpp is not part of the OFF build"; exit 1; }
for f in nccl_core.cpp nccl_bootstrap.cpp nccl_comm.cpp nccl_backend.cpp; do
  if grep -q "$f" "${compiled[@]}"; then echo "FAIL: $f is in the OFF build"; exit 1; fi
done

echo "== configure with -DDTRAIN_WITH_NCCL=ON but no CUDA toolkit"
if "$cmake" -S "$src" -B "$work/on" -G Ninja -DBUILD_TESTING=OFF -DDTRAIN_WITH_NCCL=ON \
     -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >"$work/on.log" 2>&1; then
  cat "$work/on.log"
  echo "FAIL: DTRAIN_WITH_NCCL=ON configured without the CUDA toolkit"
  exit 1
fi
grep -q "DTRAIN_WITH_NCCL=ON but not found: the CUDA toolkit" "$work/on.log" || { cat "$work/on.log"; echo "FAIL: the configure error does not name the CUDA toolkit"; exit 1; }
grep -A3 "DTRAIN_WITH_NCCL=ON but not found" "$work/on.log" | sed 's/^/  | /'

if [ -n "${4:-}" ]; then
  echo "== device buffers at the C ABI of the OFF build (fake CUDA driver, 2 ranks under dtrain launch)"
  dtrain=$4 libdir=$(dirname "$lib") fake=$work/fake
  mkdir -p "$fake"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$fake/libcuda.so.1" "$src/tests/nccl/fake_libcuda.c"
  cc -std=c11 -Wall -Wextra -Werror -I"$src/collectives/include" "$src/tests/nccl/stub_device_worker.c" \
    -o "$fake/stub_device_worker" "$fake/libcuda.so.1" -L"$libdir" -ldtrain_collectives -Wl,-rpath,"$libdir:$fake"
  printf '{ "version": 1, "command": ["%s"], "cluster": { "procs_per_instance": 2 } }\n' "$fake/stub_device_worker" \
    >"$fake/job.json"
  out=$(env -i PATH=/usr/bin:/bin HOME=/tmp LC_ALL=C DTRAIN_TEST_GPUS=0 "$dtrain" launch "$fake/job.json" 2>&1) ||
    { echo "$out"; echo "FAIL: the device-buffer worker of the OFF build failed"; exit 1; }
  [ "$(grep -c ' ok$' <<<"$out")" -eq 2 ] || { echo "$out"; echo "FAIL: want 'rank R ok' from both ranks"; exit 1; }
  echo "$out" | sed 's/^/  | /'
fi

keep=0
echo "PASS"
