#!/usr/bin/env bash
# The backend's CUDA part (python/torch_backend/cuda_device.cpp), which builds only where torch has
# CUDA, checked for syntax and types (g++ -fsyntax-only) against the c10/cuda headers of torch trees
# that have them, CPU builds included (Debian's libtorch-dev ships them), and the CUDA toolkit's
# headers. Each ROOT is a folder with torch's c10/, ATen/ and torch/ (e.g. /usr/include, or a
# Debian 13 tree's usr/include for torch 2.6); they are linked into a scratch folder so that nothing
# else under ROOT (its C library's headers) is seen.
#   usage: cuda_syntax.sh CXX CUDA_INCLUDE SOURCE_DIR ROOT...
set -euo pipefail
cxx=$1 cuda=$2 src=$3
shift 3
[ -f "$cuda/cuda_runtime_api.h" ] || { echo "SKIP: no CUDA headers at $cuda"; exit 77; }
tmp=$(mktemp -d -t dtrain-cuda-syntax-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
checked=0
for root in "$@"; do
  [ -f "$root/c10/cuda/CUDAStream.h" ] || { echo "no c10/cuda headers under $root: not checked"; continue; }
  version=$(sed -n 's/^#define TORCH_VERSION_M[AI][JN]OR \([0-9]*\)/\1/p' "$root/torch/csrc/api/include/torch/version.h" | paste -sd.)
  inc="$tmp/$checked"
  mkdir -p "$inc"
  for d in c10 ATen torch caffe2; do [ -e "$root/$d" ] && ln -s "$root/$d" "$inc/$d"; done
  "$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Werror -DC10_CUDA_NO_CMAKE_CONFIGURE_FILE \
    -isystem "$inc" -isystem "$inc/torch/csrc/api/include" -isystem "$cuda" \
    -I "$src/collectives/include" -I "$src/python/torch_backend" "$src/python/torch_backend/cuda_device.cpp" ||
    { echo "FAIL: cuda_device.cpp against torch $version ($root) and $cuda"; exit 1; }
  echo "ok: cuda_device.cpp against torch $version's headers ($root) and CUDA's ($cuda)"
  checked=$((checked + 1))
done
[ "$checked" -gt 0 ] || { echo "SKIP: none of the torch trees ($*) has c10/cuda headers"; exit 77; }
