#!/usr/bin/env bash
# One `dtrain launch -H` (or --hostfile) for 3 hosts in network namespaces (multinode/netns.sh),
# the hosts reached through a launch agent: AGENT=ssh, Debian's sshd in each host (keys made here)
# with the head on host 0 and -H; AGENT=netns, `ip netns exec` with the head outside the hosts and
# a hostfile. Cases: the job runs and every host's output comes back tagged; the token is in no
# command line or agent's environment; a worker's failure is the head's exit status; Ctrl-C at the
# head, the cut of a host and the head's death each leave no dtrain or worker process on any host.
# Exit 77 (skipped, reason printed) where namespaces (or, for ssh, sshd) are not there.
#
#   test_hosts_netns.sh DTRAIN_BIN NETNS_SH ssh|netns
set -uo pipefail

bin=${1:?usage: test_hosts_netns.sh DTRAIN_BIN NETNS_SH ssh|netns}
netns=${2:?usage: test_hosts_netns.sh DTRAIN_BIN NETNS_SH ssh|netns}
agent=${3:?usage: test_hosts_netns.sh DTRAIN_BIN NETNS_SH ssh|netns}

if [ "$agent" = ssh ]; then
  for p in /usr/sbin/sshd ssh ssh-keygen; do
    command -v "$p" >/dev/null || { echo "SKIP: $p is not installed (openssh-server, openssh-client)"; exit 77; }
  done
fi

. "$(dirname "$netns")/netns_lib.sh"
netns_begin dtr remote-hosts 3 $([ "$agent" = ssh ] && echo 7 || echo 3)
hosts="$prefix-n0,$prefix-n1,$prefix-n2"

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"

declare -a sshd_pids
if [ "$agent" = ssh ]; then
  mkdir -p /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/hostkey" || { fail "ssh-keygen"; exit 1; }
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/id" || { fail "ssh-keygen"; exit 1; }
  cp "$tmp/id.pub" "$tmp/authorized_keys"
  cat >"$tmp/ssh_config" <<EOF2
Host *
  User root
  IdentityFile $tmp/id
  IdentitiesOnly yes
  BatchMode yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOF2
  for i in 0 1 2; do
    cat >"$tmp/sshd_config$i" <<EOF2
ListenAddress $(addr "$i")
HostKey $tmp/hostkey
PidFile $tmp/sshd$i.pid
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
EOF2
    ip netns exec "$prefix-n$i" /usr/sbin/sshd -D -e -f "$tmp/sshd_config$i" 2>"$tmp/sshd$i.log" &
    sshd_pids[$i]=$!
  done
  for i in 0 1 2; do
    waited=0
    until ip netns exec "$prefix-n$i" ss -ltn | grep -q "$(addr "$i"):22 "; do
      sleep 0.1
      waited=$((waited + 1))
      [ "$waited" -lt 100 ] || { fail "sshd on host $i does not listen"; cat "$tmp/sshd$i.log"; exit 1; }
    done
  done
  launch_agent="ssh -F $tmp/ssh_config"
  hosts_words=(-H "$hosts")
  # the head on host 0 (its own node started directly), the others over ssh
  head_cmd() { exec bash "$netns" exec "$prefix" 0 "$@"; }
else
  launch_agent="ip netns exec"
  head_cmd() { exec "$@"; }  # outside the hosts: every node through the agent
  # the hosts from a hostfile of the head's, as mpirun's and DeepSpeed's are written
  printf '# the test hosts\n%s slots=1\n%s:1   # the second\n%s\n' "$prefix-n0" "$prefix-n1" "$prefix-n2" >"$tmp/hostfile"
  hosts_words=(--hostfile "$tmp/hostfile")
fi
cleanup_sshd() { for p in "${sshd_pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; }
trap 'cleanup_sshd; netns_end' EXIT

# job NAME SCRIPT [GRACE_S]: one worker per host; each dumps its env to $T/env-$RANK before SCRIPT
job() {
  local name=$1 script=${2//\"/\\\"} grace=${3:-2}
  mkdir -p "$tmp/$name"
  cat >"$tmp/$name/job.json" <<EOF2
{"version": 1, "name": "$name",
 "command": ["sh", "-c", "env > \"\$T/env-\$RANK.tmp\" && mv \"\$T/env-\$RANK.tmp\" \"\$T/env-\$RANK\"; $script"],
 "cluster": {"procs_per_instance": 1},
 "rendezvous": {"heartbeat_s": 0.5, "heartbeat_timeout_s": 2, "join_timeout_s": 40},
 "env": {"T": "$tmp/$name", "NETNS_MARKER": "$prefix-$name"}, "grace_s": $grace}
EOF2
}

head_pid=
# start NAME PORT [AGENT]: the head, in the background ($! is the head itself: head_cmd execs it)
start() {
  local name=$1 port=$2 agent=${3:-$launch_agent}
  head_cmd "$bin" launch --no-progress "${hosts_words[@]}" --launch-agent "$agent" --token-file "$tmp/token" \
    --rdzv-endpoint "$prefix-n0:$port" "$tmp/$name/job.json" >"$tmp/$name/out" 2>"$tmp/$name/err" </dev/null &
  head_pid=$!
}
show() { echo "--- $1 stdout"; cat "$tmp/$1/out"; echo "--- $1 stderr"; cat "$tmp/$1/err"; }

# no dtrain process inside any host and no worker of the job anywhere
nothing_left() {
  local name=$1 waited=0 i p found
  while :; do
    found=""
    for i in 0 1 2; do
      for p in $(ip netns pids "$prefix-n$i" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dtrain ] && found="$found $p(host $i)"
      done
    done
    [ -z "$found" ] && break
    sleep 0.2
    waited=$((waited + 1))
    [ "$waited" -lt 150 ] || { echo "dtrain left behind:$found"; return 1; }
  done
  no_workers_left "$prefix-$name"
}

# 1. the job runs on the 3 hosts, their output comes back tagged; the token is in no command line
before=$failures
job ok '[ "$RANK" = 0 ] && while [ ! -e "$T/go" ]; do sleep 0.1; done; echo "hello from rank $RANK of $WORLD_SIZE"'
start ok 29411
if wait_files "$tmp/ok" 3 60; then
  # one grep over every command line, one over every environment (a dtrain process's only: the
  # workers' holds the store token); the token comes from its file, so that no grep's own command
  # line holds it
  leaks=""
  for f in $(grep -laFf "$tmp/token" /proc/[0-9]*/cmdline 2>/dev/null); do
    p=${f#/proc/}
    leaks="$leaks ${p%/cmdline}:cmdline"
  done
  for f in $(grep -laFf "$tmp/token" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}
    p=${p%/environ}
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dtrain ] && leaks="$leaks $p:environ"
  done
  [ -z "$leaks" ] || fail "the token is visible in$leaks"
  touch "$tmp/ok/go"
  wait_rc "$head_pid" 60
  [ "$rc" = 0 ] || fail "3-host job: the head exited $rc"
  for r in 0 1 2; do
    grep -q "hello from rank $r of 3" "$tmp/ok/out" || fail "3-host job: no output line of rank $r at the head"
    grep -qx "GROUP_RANK=$r" "$tmp/ok/env-$r" || fail "3-host job: rank $r is not on node $r"
    grep -qx "DTRAIN_LOCAL_ADDR=$(addr "$r")" "$tmp/ok/env-$r" || fail "3-host job: rank $r is not on host $r"
  done
  grep -q "^\[.*\].*hello from rank 2 of 3" "$tmp/ok/out" || grep -q "2.*hello from rank 2 of 3" "$tmp/ok/out" \
    || fail "3-host job: rank 2's line is not tagged"
else
  fail "3-host job: the workers did not start"
  kill -9 "$head_pid" 2>/dev/null
fi
nothing_left ok || fail "3-host job: processes left behind"
[ "$failures" -eq "$before" ] && ok "3 hosts over $agent: output tagged, token in no command line" || show ok

# 2. rank 1 fails with 7: every host stops, the head exits 7
before=$failures
job fail '[ "$RANK" = 1 ] && exit 7; exec sleep 60'
start fail 29412
wait_rc "$head_pid" 90
[ "$rc" = 7 ] || fail "a worker's failure: the head exited $rc, expected 7"
# host 1 had joined: the others hear of its failure through the rendezvous (no stop from the head),
# and the line by which each host said it joined is not in the output
grep -q "ended before it joined" "$tmp/fail/err" && fail "a worker's failure: the head took host 1 for one that never joined"
grep -q $'\001' "$tmp/fail/out" "$tmp/fail/err" && fail "a worker's failure: the hosts' joined lines reached the output"
nothing_left fail || fail "a worker's failure: processes left behind"
[ "$failures" -eq "$before" ] && ok "rank 1 exits 7 on host 1: the head exits 7, nothing left" || show fail

# 3. Ctrl-C at the head: 130, nothing left on any host
before=$failures
job int 'exec sleep 60'
start int 29413
if wait_files "$tmp/int" 3 60; then
  kill -INT "$head_pid"
  wait_rc "$head_pid" 60
  [ "$rc" = 130 ] || fail "Ctrl-C: the head exited $rc, expected 130"
else
  fail "Ctrl-C: the workers did not start"
fi
nothing_left int || fail "Ctrl-C: processes left behind"
[ "$failures" -eq "$before" ] && ok "Ctrl-C at the head: 130, nothing left on any host" || show int

# 4. host 2 is cut off: the head exits 69 (node lost), nothing left on any host
before=$failures
job cut 'exec sleep 60'
start cut 29414
if wait_files "$tmp/cut" 3 60; then
  bash "$netns" cut "$prefix" 2
  wait_rc "$head_pid" 90
  [ "$rc" = 69 ] || fail "cut host: the head exited $rc, expected 69"
  grep -q "node 2 .*lost" "$tmp/cut/out" "$tmp/cut/err" || fail "cut host: node 2 is not named as lost"
else
  fail "cut host: the workers did not start"
fi
nothing_left cut || fail "cut host: processes left behind"
bash "$netns" plug "$prefix" 2
[ "$failures" -eq "$before" ] && ok "host 2 cut off: the head exits 69, nothing left on any host" || show cut

# 5. the head is killed (SIGKILL): every host notices its connection closing and stops
before=$failures
job dead 'exec sleep 60'
start dead 29415
if wait_files "$tmp/dead" 3 60; then
  kill -9 "$head_pid"
  wait "$head_pid" 2>/dev/null
else
  fail "head killed: the workers did not start"
fi
nothing_left dead || fail "head killed: processes left behind"
[ "$failures" -eq "$before" ] && ok "the head killed: nothing left on any host" || show dead

# 6. host 1 cannot be reached (its launch agent fails as ssh does when refused: 255) before it joins:
# the others wait for it in vain, so the head stops them at once, not after its patience period
# (grace_s 30 + heartbeat timeout 2 + 5 s = 37 s here); node lost (69), nothing left
before=$failures
job early 'exec sleep 60' 30
cat >"$tmp/refusing-agent" <<EOF2
#!/bin/sh
[ "\$1" = "$prefix-n1" ] && { echo "ssh: connect to host \$1 port 22: Connection refused" >&2; exit 255; }
exec $launch_agent "\$@"
EOF2
chmod +x "$tmp/refusing-agent"
began=$SECONDS
start early 29416 "$tmp/refusing-agent"
wait_rc "$head_pid" 90
took=$((SECONDS - began))
[ "$rc" = 69 ] || fail "host 1 refused: the head exited $rc, expected 69 (node lost)"
grep -q "host $prefix-n1 (node 1) ended before it joined the rendezvous" "$tmp/early/err" \
  || fail "host 1 refused: the head does not say it ended before joining"
[ "$took" -lt 30 ] || fail "host 1 refused: the head ended after $took s, the others waited out its patience"
nothing_left early || fail "host 1 refused: processes left behind"
[ "$failures" -eq "$before" ] && ok "host 1 refused before joining: the others stopped at once ($took s), 69, nothing left" || show early

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all cases passed ($agent)"
