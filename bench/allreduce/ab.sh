#!/usr/bin/env bash
# Interleaved A/B of two builds of libdtrain_collectives on this machine: runs coll_bench (allreduce,
# float32 sum, 2 ranks (AB_PROCS), shm engine) under `dtrain launch` alternately with library A and library B,
# ROUNDS times each, and prints the median time per size of each. Alternating runs see the same load
# drift, which separate runs on a shared machine do not.
#   usage: bench/allreduce/ab.sh BUILD_DIR LIBDIR_A LIBDIR_B [ROUNDS] [SIZES]
#   (LIBDIR_*: folders holding a libdtrain_collectives.so.0, e.g. a copy of an older build's lib/)
#   AB_ENV_A / AB_ENV_B: extra VAR=value words for side A / B, e.g. one library with and without a
#   setting: AB_ENV_A="DTRAIN_SHM_SLOT_BYTES=1048576" bench/allreduce/ab.sh B L L 6 1M,64M
#   AB_ARGS: more coll_bench arguments for both sides, e.g. "--iters 200000";
#   AB_PROCS: ranks (default 2); 1 times the call path alone (no peer to wait for: on a loaded
#   machine the two ranks' scheduling swamps a small message's own cost)
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,7p "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
liba=$(cd "$2" && pwd)
libb=$(cd "$3" && pwd)
rounds=${4:-6}
sizes=${5:-8,1K,64K,1M,16M,64M}
procs=${AB_PROCS:-2}
for f in "$build/dtrain" "$build/bench/allreduce/coll_bench" "$liba/libdtrain_collectives.so.0" \
         "$libb/libdtrain_collectives.so.0"; do
  [ -e "$f" ] || { echo "ab.sh: $f missing" >&2; exit 2; }
done
tmp=$(mktemp -d -t dtrain-ab-XXXXXX)
trap '[ -n "${DTRAIN_AB_KEEP:-}" ] || rm -rf "$tmp"' EXIT
extra=""
for a in ${AB_ARGS:-}; do extra+=", \"$a\""; done
printf '{ "version": 1, "name": "allreduce-ab", "command": ["%s", "--op", "allreduce", "--sizes", "%s"%s],
  "cluster": { "procs_per_instance": %s } }\n' "$build/bench/allreduce/coll_bench" "$sizes" "$extra" "$procs" >"$tmp/job.json"
run() {  # libdir label -> "label bytes time_us wrong" lines
  local extra=AB_ENV_$2
  # shellcheck disable=SC2086  # word splitting of the VAR=value list is intended
  env ${!extra:-} LD_LIBRARY_PATH=$1 "$build/dtrain" launch --no-tag "$tmp/job.json" 2>"$tmp/err" |
    awk -v l="$2" '$1 == "allreduce" { print l, $2, $7, $10 }' || { cat "$tmp/err" >&2; exit 1; }
}
echo "# A/B allreduce float32 sum, $procs rank(s), $rounds alternating rounds${AB_ARGS:+, $AB_ARGS}${AB_ENV_A:+, A: $AB_ENV_A}${AB_ENV_B:+, B: $AB_ENV_B}, $(date -u +%Y-%m-%dT%H:%MZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < rounds; ++i)); do
  run "$liba" A >>"$tmp/all"
  run "$libb" B >>"$tmp/all"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%10s %12s %12s %8s\n" bytes A_med_us B_med_us A/B
awk '
  function med(l, key,   m, i, j, v, arr) {
    m = n[l, key]
    for (i = 1; i <= m; ++i) arr[i] = t[l, key, i]
    for (i = 2; i <= m; ++i) { v = arr[i]; for (j = i - 1; j >= 1 && arr[j] > v; --j) arr[j + 1] = arr[j]; arr[j + 1] = v }
    return m % 2 ? arr[(m + 1) / 2] : (arr[m / 2] + arr[m / 2 + 1]) / 2
  }
  { key = $2; t[$1, key, ++n[$1, key]] = $3 + 0; if ($4 != 0) bad = 1; if (!(key in seen)) { seen[key] = 1; order[++k] = key } }
  END {
    for (i = 1; i <= k; ++i) {
      key = order[i]; ma = med("A", key); mb = med("B", key)
      printf "%10s %12.3f %12.3f %7.3fx\n", key, ma, mb, (mb > 0 ? ma / mb : 0)
    }
    if (bad) print "WRONG RESULTS in some run"
  }' "$tmp/all"
