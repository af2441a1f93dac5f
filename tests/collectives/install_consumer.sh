#!/usr/bin/env bash
# Installs the collectives component to a temporary prefix, builds a consumer project against it with
# find_package(dtrain) and with pkg-config, checks the exported symbols, and runs the consumers under
# `dtrain launch`.   usage: install_consumer.sh BUILD_DIR SOURCE_DIR CMAKE DTRAIN_BIN
set -euo pipefail
build=$1 src=$2 cmake=$3 dtrain=$4
tmp=$(mktemp -d -t dtrain-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" --component collectives >/dev/null
lib=$(find "$prefix" -name 'libdtrain_collectives.so.*.*' | head -1)
[ -n "$lib" ] || { echo "FAIL: libdtrain_collectives.so.X.Y.Z not installed"; exit 1; }
[ -e "$(dirname "$lib")/libdtrain_collectives.so.0" ] || { echo "FAIL: SONAME link missing"; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[ "$soname" = libdtrain_collectives.so.0 ] || { echo "FAIL: SONAME is '$soname'"; exit 1; }
# Only the C ABI is exported.
extra=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | grep -v '^dtrain_' || true)
[ -z "$extra" ] || { echo "FAIL: symbols beyond the C ABI exported:"; echo "$extra" | head; exit 1; }
# Each function under its version node: 0.1's names stay in DTRAIN_0.1, 0.2's in DTRAIN_0.2, 0.3's in DTRAIN_0.3.
syms=$(nm -D --defined-only "$lib")
for f in dtrain_version dtrain_comm_init_from_env dtrain_init_options_default dtrain_comm_init dtrain_comm_rank \
         dtrain_comm_size dtrain_allreduce dtrain_broadcast dtrain_allgather dtrain_reduce_scatter dtrain_barrier \
         dtrain_comm_destroy dtrain_status_string dtrain_last_error; do
  grep -q " $f@@DTRAIN_0.1\$" <<<"$syms" || { echo "FAIL: $f is not exported as $f@@DTRAIN_0.1"; echo "$syms"; exit 1; }
done
for f in dtrain_comm_split dtrain_comm_init_group_from_env dtrain_send dtrain_recv dtrain_sendrecv; do
  grep -q " $f@@DTRAIN_0.2\$" <<<"$syms" || { echo "FAIL: $f is not exported as $f@@DTRAIN_0.2"; echo "$syms"; exit 1; }
done
for f in dtrain_version_code dtrain_comm_init_config dtrain_comm_set_timeout dtrain_redop_create_premul_sum \
         dtrain_redop_destroy dtrain_reduce dtrain_gather dtrain_scatter dtrain_alltoall dtrain_alltoallv dtrain_recv_any \
         dtrain_comm_abort; do
  grep -q " $f@@DTRAIN_0.3\$" <<<"$syms" || { echo "FAIL: $f is not exported as $f@@DTRAIN_0.3"; echo "$syms"; exit 1; }
done
[ "$(grep -c ' T dtrain_' <<<"$syms")" -eq 31 ] || { echo "FAIL: want 31 exported functions"; echo "$syms"; exit 1; }
# (objdump's table read whole first: `objdump | grep -q` under pipefail fails when grep exits early)
dynsyms=$(objdump -T "$lib")
grep -q 'DTRAIN_0.2' <<<"$dynsyms" || { echo "FAIL: no DTRAIN_0.2 version node"; exit 1; }
[ -f "$prefix/include/dtrain/collectives.h" ] && [ -f "$prefix/include/dtrain/collectives.hpp" ] ||
  { echo "FAIL: headers not installed"; exit 1; }

# 1. CMake package.
"$cmake" -S "$src/tests/collectives/consumer" -B "$tmp/cm" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; exit 1; }
"$cmake" --build "$tmp/cm" >"$tmp/cm-build.log" 2>&1 || { cat "$tmp/cm-build.log"; exit 1; }

# 2. pkg-config.
pcdir=$(dirname "$(find "$prefix" -name dtrain.pc | head -1)")
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs dtrain)
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir dtrain)
cc -std=c11 -Wall -Werror "$src/tests/collectives/consumer/consumer.c" $flags -Wl,-rpath,"$libdir" \
  -o "$tmp/consumer_pc"

# The consumers resolve the installed library, not the build tree's.
for exe in "$tmp/cm/consumer_c" "$tmp/consumer_pc"; do
  libs=$(ldd "$exe")  # (not piped into grep -q: with pipefail an early grep exit fails the pipe)
  grep -q "$prefix/.*libdtrain_collectives" <<<"$libs" ||
    { echo "FAIL: $exe does not load the installed library"; echo "$libs"; exit 1; }
done

# 3. Run them as a 2-rank job.
for exe in "$tmp/cm/consumer_c" "$tmp/cm/consumer_cpp" "$tmp/consumer_pc"; do
  printf '{ "version": 1, "name": "consumer", "command": ["%s"], "cluster": { "procs_per_instance": 2 } }\n' \
    "$exe" >"$tmp/job.json"
  out=$("$dtrain" launch "$tmp/job.json" 2>&1) || { echo "FAIL: $exe under dtrain launch:"; echo "$out"; exit 1; }
  [ "$(grep -c ' ok' <<<"$out")" -eq 2 ] || { echo "FAIL: $exe output:"; echo "$out"; exit 1; }
done
echo "install + find_package + pkg-config consumers: ok"
