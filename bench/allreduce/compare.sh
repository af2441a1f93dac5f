#!/usr/bin/env bash
# dtrain vs Open MPI allreduce (float32 sum, 2 ranks) on this machine, in one run:
#   shared memory: dtrain (shm engine) vs `mpirun -np 2` (Open MPI's default shared-memory BTL)
#   TCP:           dtrain (DTRAIN_TRANSPORT=tcp) vs `mpirun --mca btl tcp,self`
# plus this machine's memcpy bandwidth as the ceiling. The dtrain side runs under `dtrain launch`.
# ratio = dtrain busbw / Open MPI busbw (= Open MPI time / dtrain time); > 1: dtrain is faster.
#   usage: bench/allreduce/compare.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
dtrain=$build/dtrain
bench=$build/bench/allreduce/coll_bench
for f in "$dtrain" "$bench"; do [ -x "$f" ] || { echo "compare.sh: $f missing; build first" >&2; exit 2; }; done
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
  { echo "compare.sh: mpicc/mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
anchor=${DTRAIN_MPI_ANCHOR:-$root/../shared/anchors/mpi_allreduce.c}
[ -f "$anchor" ] || anchor=/work/shared/anchors/mpi_allreduce.c
mpi_bin=$build/bench/allreduce/mpi_allreduce
mpicc -O2 -o "$mpi_bin" "$anchor"
tmp=$(mktemp -d -t dtrain-compare-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sizes=8,1K,64K,1M,16M,64M
printf '{ "version": 1, "name": "allreduce-bench", "command": ["%s", "--op", "allreduce", "--sizes", "%s"],
  "cluster": { "procs_per_instance": 2 } }\n' "$bench" "$sizes" >"$tmp/job.json"

run_dtrain() {  # transport -> "bytes busbw" lines
  DTRAIN_TRANSPORT=$1 "$dtrain" launch --no-tag "$tmp/job.json" 2>"$tmp/err" |
    awk '$1 == "allreduce" { print $2, $9, $7, $10 }' ||
    { cat "$tmp/err" >&2; exit 1; }
}
run_mpi() {  # extra mpirun args -> "bytes busbw time_us"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$@" "$mpi_bin" 2>"$tmp/mpierr" |
    awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1, $5, $3 }' || { cat "$tmp/mpierr" >&2; exit 1; }
}

run_dtrain auto >"$tmp/d_shm"
run_mpi >"$tmp/m_shm"
run_dtrain tcp >"$tmp/d_tcp"
run_mpi --mca btl tcp,self >"$tmp/m_tcp"
memcpy=$("$bench" --memcpy | awk '{ print $(NF-1) }')

echo "# allreduce float32 sum, 2 ranks, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ); busbw in GB/s; memcpy $memcpy GB/s"
printf '%10s | %9s %9s %9s %7s | %9s %9s %9s %7s | %8s\n' bytes mpi_us dtrain_us mpi_bw dtr_bw \
  mpitcp_us dtcp_us mpitcp_bw dtcp_bw shm/memcpy
printf '%10s | %9s %9s %9s %7s | %9s %9s %9s %7s | %8s\n' "" "" "" "" "ratio" "" "" "" "ratio" ""
paste "$tmp/m_shm" "$tmp/d_shm" "$tmp/m_tcp" "$tmp/d_tcp" | awk -v mc="$memcpy" '
  { # m_shm: bytes bw us | d_shm: bytes bw us wrong | m_tcp: bytes bw us | d_tcp: bytes bw us wrong
    printf "%10s | %9.2f %9.2f %9.3f %7.3f | %9.2f %9.2f %9.3f %7.3f | %8.3f\n", $1, $3, $6, $2, $5, $10, $13, $9, $12, $5/mc
    printf "%10s | %9s %9s %9s %6.2fx | %9s %9s %9s %6.2fx | %s\n", "", "", "", "", ($6 > 0 ? $3/$6 : 0), "", "", "", ($13 > 0 ? $10/$13 : 0), (($7 + $14) > 0 ? "WRONG RESULTS" : "")
  }'
