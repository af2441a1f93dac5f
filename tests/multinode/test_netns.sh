#!/usr/bin/env bash
# Multi-node jobs on 3 hosts in network namespaces (netns.sh), each with its own address, every
# process of the test inside the namespaces: a 3-node job succeeds; a host whose link is cut
# mid-job is named as lost by the others, which exit with node_lost (69); an agent SIGKILLed on one
# host stops the job everywhere. Exit 77 (skipped, reason printed) where namespaces cannot be made.
#
#   test_netns.sh DTRAIN_BIN NETNS_SH
set -uo pipefail

bin=${1:?usage: test_netns.sh DTRAIN_BIN NETNS_SH}
netns=${2:?usage: test_netns.sh DTRAIN_BIN NETNS_SH}

. "$(dirname "$0")/netns_lib.sh"
netns_begin dtm dtrain-netns 3 0

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"

# job NAME PORT SCRIPT: a 3-node spec, one worker per host; workers dump their env to $T/NAME-env-$RANK
job() {
  local name=$1 port=$2 script=$3
  mkdir -p "$tmp/$name"
  cat >"$tmp/$name/job.json" <<EOF
{"version": 1, "name": "$name",
 "command": ["sh", "-c", "env > \"\$T/env-\$RANK.tmp\" && mv \"\$T/env-\$RANK.tmp\" \"\$T/env-\$RANK\"; $script"],
 "cluster": {"instances": 3, "procs_per_instance": 1},
 "rendezvous": {"endpoint": "$(addr 0):$port", "token_file": "$tmp/token", "heartbeat_s": 0.5,
                "heartbeat_timeout_s": 2, "join_timeout_s": 40},
 "env": {"T": "$tmp/$name", "NETNS_MARKER": "$prefix-$name"}, "grace_s": 2}
EOF
}

declare -a pids
# start NAME: one `dtrain launch` per host (inside it), node 0 last
start() {
  local name=$1 i
  for i in 2 1 0; do
    bash "$netns" exec "$prefix" "$i" "$bin" launch "$tmp/$name/job.json" --node-rank "$i" --no-progress \
      >"$tmp/$name/node$i.out" 2>"$tmp/$name/node$i.err" </dev/null &
    pids[$i]=$!
  done
}

show() { for i in 0 1 2; do echo "--- $1 node $i stderr"; cat "$tmp/$1/node$i.err"; done; }

# 1. a 3-node job succeeds, each node with its own address
job ok 29401 "exit 0"
start ok
for i in 0 1 2; do
  wait_rc "${pids[$i]}" 60
  [ "$rc" = 0 ] || fail "3-node job: node $i exited $rc"
done
for r in 0 1 2; do
  e="$tmp/ok/env-$r"
  grep -qx "RANK=$r" "$e" 2>/dev/null || fail "3-node job: rank $r has no env dump or wrong RANK"
  grep -qx "WORLD_SIZE=3" "$e" 2>/dev/null || fail "3-node job: rank $r WORLD_SIZE"
  grep -qx "GROUP_RANK=$r" "$e" 2>/dev/null || fail "3-node job: rank $r GROUP_RANK"
  grep -qx "MASTER_ADDR=$(addr 0)" "$e" 2>/dev/null || fail "3-node job: rank $r MASTER_ADDR"
  grep -qx "DTRAIN_LOCAL_ADDR=$(addr "$r")" "$e" 2>/dev/null || fail "3-node job: rank $r DTRAIN_LOCAL_ADDR"
  grep -qx "DTRAIN_STORE_ADDR=$(addr 0):29401" "$e" 2>/dev/null || fail "3-node job: rank $r DTRAIN_STORE_ADDR"
done
[ "$failures" -eq 0 ] && ok "3-node job on 3 hosts" || show ok

# 2. the link of host 2 is cut mid-job: nodes 0 and 1 name node 2 as lost and exit 69
before=$failures
job cut 29402 "exec sleep 60"
start cut
if wait_files "$tmp/cut" 3 40; then
  bash "$netns" cut "$prefix" 2
  for i in 0 1; do
    wait_rc "${pids[$i]}" 30
    [ "$rc" = 69 ] || fail "cut link: node $i exited $rc, expected 69 (node_lost)"
    grep -q "node 2 ($prefix-n2) lost" "$tmp/cut/node$i.err" || fail "cut link: node $i does not name node 2 ($prefix-n2) as lost"
  done
else
  fail "cut link: the workers did not start"
fi
kill -9 "${pids[2]}" 2>/dev/null; wait "${pids[2]}" 2>/dev/null
bash "$netns" plug "$prefix" 2
[ "$failures" -eq "$before" ] && ok "cut link: host 2 named as lost, the others exit 69" || show cut

# 3. the agent on host 1 is SIGKILLed: the job stops everywhere, nothing is left behind
before=$failures
job kill 29403 "exec sleep 60"
start kill
if wait_files "$tmp/kill" 3 40; then
  [ "$(cat "/proc/${pids[1]}/comm" 2>/dev/null)" = dtrain ] || fail "SIGKILL: pid ${pids[1]} is not the agent"
  kill -9 "${pids[1]}"
  wait "${pids[1]}" 2>/dev/null
  for i in 0 2; do
    wait_rc "${pids[$i]}" 30
    [ "$rc" = 69 ] || fail "SIGKILL: node $i exited $rc, expected 69 (node_lost)"
    grep -q "node 1 ($prefix-n1)" "$tmp/kill/node$i.err" || fail "SIGKILL: node $i does not name node 1"
  done
  no_workers_left "$prefix-kill" || fail "SIGKILL: workers left behind"
else
  fail "SIGKILL: the workers did not start"
fi
[ "$failures" -eq "$before" ] && ok "agent SIGKILLed on host 1: the job stops everywhere" || show kill

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all namespace cases passed"
