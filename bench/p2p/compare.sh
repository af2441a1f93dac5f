#!/usr/bin/env bash
# dtrain send/recv vs Open MPI MPI_Send/MPI_Recv, 2 ranks on this machine, in one run: a ping-pong
# (p2p_bench.c under `dtrain launch`, mpi_p2p.c under mpirun) of 8 B .. 64 MiB,
#   shared memory: dtrain (shm engine) vs `mpirun -np 2` (Open MPI's shared-memory BTL)
#   TCP loopback:  dtrain (DTRAIN_TRANSPORT=tcp) vs `mpirun --mca btl tcp,self`
# alternating the four, ROUNDS times (default 3); the table gives each one's median one-way time
# (half a round trip) and bandwidth, and ratio = Open MPI time / dtrain time (> 1: dtrain faster).
# The 1-minute load average is read before every run and printed (the machine may be shared).
#   usage: bench/p2p/compare.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
rounds=${ROUNDS:-3}
dtrain=$build/dtrain
bench=$build/bench/p2p/p2p_bench
for f in "$dtrain" "$bench"; do [ -x "$f" ] || { echo "compare.sh: $f missing; build first" >&2; exit 2; }; done
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
  { echo "compare.sh: mpicc/mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
tmp=$(mktemp -d -t dtrain-p2p-compare-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mpi_bin=$tmp/mpi_p2p
mpicc -O2 -o "$mpi_bin" "$here/mpi_p2p.c"
printf '{ "version": 1, "name": "p2p-bench", "command": ["%s"], "cluster": { "procs_per_instance": 2 } }\n' \
  "$bench" >"$tmp/job.json"

# run NAME CMD...: appends "NAME bytes time_us bw wrong" lines to $tmp/all, and the load to $tmp/load.
run() {
  local name=$1
  shift
  cut -d' ' -f1 /proc/loadavg >>"$tmp/load"
  "$@" 2>"$tmp/err" | awk -v n="$name" '$1 == "p2p" { print n, $2, $4, $5, $6 }' >>"$tmp/all" ||
    { cat "$tmp/err" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
  run d_shm env DTRAIN_TRANSPORT=auto "$dtrain" launch --no-tag "$tmp/job.json"
  run m_shm mpirun --allow-run-as-root --oversubscribe -np 2 "$mpi_bin"
  run d_tcp env DTRAIN_TRANSPORT=tcp "$dtrain" launch --no-tag "$tmp/job.json"
  run m_tcp mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self "$mpi_bin"
done
[ "$(awk '$5 != 0' "$tmp/all" | wc -l)" -eq 0 ] || { echo "compare.sh: WRONG RESULTS:"; awk '$5 != 0' "$tmp/all"; exit 1; }

# Medians per (name, bytes): "bytes time bw" per name.
for n in d_shm m_shm d_tcp m_tcp; do
  awk -v n="$n" '$1 == n { print $2, $3, $4 }' "$tmp/all" | sort -k1,1n -k2,2g |
    awk '{ b = $1; t[b, ++c[b]] = $2; w[b, c[b]] = $3; if (!(b in seen)) { seen[b] = 1; order[++k] = b } }
         END { for (i = 1; i <= k; ++i) { b = order[i]; m = int((c[b] + 1) / 2); print b, t[b, m], w[b, m] } }' \
      >"$tmp/$n"
done
load=$(sort -g "$tmp/load" | awk '{ v[NR] = $1 } END { printf "%s .. %s", v[1], v[NR] }')
echo "# send/recv ping-pong, 2 ranks, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), median of $rounds alternating rounds;"
echo "# one-way time in us, bandwidth in GB/s; ratio = Open MPI time / dtrain time; 1-min load average $load"
printf '%10s | %9s %9s %7s %7s %7s | %9s %9s %7s %7s %7s\n' bytes mpi_us dtr_us mpi_bw dtr_bw ratio \
  mpitcp_us dtcp_us mpi_bw dtr_bw ratio
paste "$tmp/m_shm" "$tmp/d_shm" "$tmp/m_tcp" "$tmp/d_tcp" | awk '
  { printf "%10s | %9.2f %9.2f %7.3f %7.3f %6.2fx | %9.2f %9.2f %7.3f %7.3f %6.2fx\n",
      $1, $2, $5, $3, $6, ($5 > 0 ? $2 / $5 : 0), $8, $11, $9, $12, ($11 > 0 ? $8 / $11 : 0) }'
