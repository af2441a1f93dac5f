#!/usr/bin/env bash
# Elastic jobs on hosts in network namespaces (netns.sh): three hosts of a 2:3 job, each with its
# own address, every process inside the namespaces.
#   1. built-in rendezvous on host 0: host 2's link is cut mid-job; hosts 0 and 1 go on in
#      generation 1 at world size 2 and finish.
#   2. etcd backend, etcd on a fourth host: the agent of node 0 is SIGKILLed mid-job; hosts 1 and 2
#      go on in generation 1 at world size 2 and finish.
# One case a run. Exit 77 (skipped, the reason printed) where namespaces cannot be made, or for
# case etcd where etcd is not installed.
#
#   test_netns_elastic.sh DTRAIN_BIN NETNS_SH cut|etcd
set -uo pipefail

usage="usage: test_netns_elastic.sh DTRAIN_BIN NETNS_SH cut|etcd"
bin=${1:?$usage}
netns=${2:?$usage}
case=${3:?$usage}
[ "$case" = cut ] || [ "$case" = etcd ] || { echo "$usage" >&2; exit 2; }

if [ "$case" = etcd ] && { ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; }; then
  echo "SKIP: etcd is not installed (etcd-server, etcd-client; scripts/install-deps.sh)"
  exit 77
fi

. "$(dirname "$0")/netns_lib.sh"
netns_begin dte dtrain-netns-elastic 4 75

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"

# job NAME RENDEZVOUS_JSON: a 2:3 elastic spec (three hosts fill its barrier at once), one worker per host; generation 0 runs until the job
# changes, later ones end at once; workers dump their env to $T/env-$RANK-$DTRAIN_GENERATION
job() {
  local name=$1 rdzv=$2
  mkdir -p "$tmp/$name"
  cat >"$tmp/$name/job.json" <<EOF
{"version": 1, "name": "$name",
 "command": ["sh", "-c", "env > \"\$T/env-\$RANK-\$DTRAIN_GENERATION.tmp\" && mv \"\$T/env-\$RANK-\$DTRAIN_GENERATION.tmp\" \"\$T/env-\$RANK-\$DTRAIN_GENERATION\"; [ \"\$DTRAIN_GENERATION\" = 0 ] && exec sleep 60; exit 0"],
 "cluster": {"instances": {"min": 2, "max": 3}, "procs_per_instance": 1},
 "rendezvous": {$rdzv, "heartbeat_s": 0.5, "heartbeat_timeout_s": 2, "join_timeout_s": 40, "last_call_s": 3},
 "restart": {"max_restarts": 2},
 "env": {"T": "$tmp/$name", "NETNS_MARKER": "$prefix-$name"}, "grace_s": 2}
EOF
}

declare -a pids
# start NAME [FLAGS...]: one `dtrain launch` per host 0-2 (inside it), node 0 last
start() {
  local name=$1 i
  shift
  for i in 2 1 0; do
    bash "$netns" exec "$prefix" "$i" "$bin" launch "$tmp/$name/job.json" --node-rank "$i" --no-progress "$@" \
      >"$tmp/$name/node$i.out" 2>"$tmp/$name/node$i.err" </dev/null &
    pids[$i]=$!
  done
}

show() { for i in 0 1 2; do echo "--- $1 node $i stderr"; cat "$tmp/$1/node$i.err"; done; }

# check_shrunk NAME SURVIVOR...: the survivors exit 0 and generation 1 runs at world size 2
check_shrunk() {
  local name=$1 i r
  shift
  for i in "$@"; do
    wait_rc "${pids[$i]}" 60
    [ "$rc" = 0 ] || fail "$name: node $i exited $rc, expected 0"
  done
  for r in 0 1; do
    grep -qx "WORLD_SIZE=2" "$tmp/$name/env-$r-1" 2>/dev/null || fail "$name: rank $r of generation 1 has no WORLD_SIZE=2"
  done
  [ ! -e "$tmp/$name/env-2-1" ] || fail "$name: generation 1 has a third rank"
  grep -q "the elastic job goes on with the nodes left" "$tmp/$name/node$1.err" ||
    fail "$name: node $1 does not say the job goes on"
}

# 1. built-in rendezvous on host 0; host 2's link is cut
if [ "$case" = cut ]; then
  job cut "\"endpoint\": \"$(addr 0):29411\", \"token_file\": \"$tmp/token\""
  start cut
  if wait_files "$tmp/cut" 3 40 '^env-[0-9]*-0$'; then
    bash "$netns" cut "$prefix" 2
    check_shrunk cut 0 1
    grep -q "node 2 ($prefix-n2) lost" "$tmp/cut/node0.err" || fail "cut: node 0 does not name node 2 as lost"
  else
    fail "cut: the workers of generation 0 did not start"
  fi
  kill -9 "${pids[2]}" 2>/dev/null; wait "${pids[2]}" 2>/dev/null
  bash "$netns" plug "$prefix" 2
  no_workers_left "$prefix-cut" || fail "cut: workers left behind"
  [ "$failures" -eq 0 ] && ok "elastic, built-in rendezvous: host 2 cut off, hosts 0 and 1 finish at world size 2" || show cut
fi

# 2. etcd on host 3; node 0's agent is SIGKILLed
before=$failures
if [ "$case" = etcd ]; then
  ep="$(addr 3):2379"
  # not a job of this shell: `netns.sh down` kills it with the namespaces
  (bash "$netns" exec "$prefix" 3 etcd --name n3 --data-dir "$tmp/etcd" --listen-client-urls "http://$ep" \
    --advertise-client-urls "http://$ep" --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster n3=http://127.0.0.1:2380 \
    >"$tmp/etcd.log" 2>&1 </dev/null &)
  up=0
  for _ in $(seq 100); do
    if bash "$netns" exec "$prefix" 0 env ETCDCTL_API=3 etcdctl --endpoints "http://$ep" endpoint health >/dev/null 2>&1; then up=1; break; fi
    sleep 0.2
  done
  if [ "$up" = 1 ]; then
    job etcd "\"backend\": \"etcd\", \"endpoint\": \"$ep\""
    start etcd --insecure
    if wait_files "$tmp/etcd" 3 40 '^env-[0-9]*-0$'; then
      grep -qx "DTRAIN_STORE_ADDR=etcd://$ep" "$tmp/etcd/env-1-0" || fail "etcd: the workers' store is not etcd"
      [ "$(cat "/proc/${pids[0]}/comm" 2>/dev/null)" = dtrain ] || fail "etcd: pid ${pids[0]} is not the agent"
      kill -9 "${pids[0]}"
      wait "${pids[0]}" 2>/dev/null
      check_shrunk etcd 1 2
      grep -q "node 0 ($prefix-n0)" "$tmp/etcd/node1.err" || fail "etcd: node 1 does not name node 0"
    else
      fail "etcd: the workers of generation 0 did not start"
    fi
    no_workers_left "$prefix-etcd" || fail "etcd: workers left behind"
  else
    fail "etcd did not start on host 3: $(tail -5 "$tmp/etcd.log")"
  fi
  [ "$failures" -eq "$before" ] && ok "elastic, etcd on host 3: node 0 killed, hosts 1 and 2 finish at world size 2" || show etcd
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "elastic namespace case $case passed"
