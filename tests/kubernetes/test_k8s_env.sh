#!/usr/bin/env bash
# Kubernetes' env on 3 hosts in network namespaces (tests/multinode/netns.sh): each host gets only
# what a pod gets (env -i: the variables Kubeflow's PyTorchJob or an indexed Job set, the pod's
# host name, and a hosts file as the kubelet and the cluster DNS answer),
# runs `dtrain launch job.json` with no identity flag, and the three must form one job whose
# c_allreduce workers allreduce across the hosts: a PyTorchJob before and since training-operator
# 1.8, an indexed Job with a headless service, and an elastic PyTorchJob (PET_* only). Node ranks, the node count and the master come
# from that env alone, so a wrong identity fails the case (a duplicate rank, a wrong size, a master
# that does not resolve). Exit 77 (reason printed) where namespaces cannot be made.
#
#   test_k8s_env.sh DTRAIN_BIN NETNS_SH C_ALLREDUCE
set -uo pipefail

bin=${1:?usage: test_k8s_env.sh DTRAIN_BIN NETNS_SH C_ALLREDUCE}
netns=${2:?usage: test_k8s_env.sh DTRAIN_BIN NETNS_SH C_ALLREDUCE}
worker=${3:?usage: test_k8s_env.sh DTRAIN_BIN NETNS_SH C_ALLREDUCE}

if ! why=$(bash "$netns" check 2>&1); then
  echo "SKIP: network namespaces cannot be made here: $why"
  exit 77
fi

prefix="dtk$$"
net=$((100 + ($$ + 75) % 150))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-k8s-XXXXXX")
failures=0
cleanup() {
  bash "$netns" down "$prefix" "$net" >/dev/null 2>&1 || true
  if [ "$failures" -eq 0 ] && [ -z "${DTRAIN_TEST_KEEP:-}" ]; then rm -rf "$tmp"; else echo "kept: $tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

bash "$netns" up "$prefix" "$net" 3 || { echo "FAIL: netns.sh up"; failures=1; exit 1; }
. "$(dirname "$netns")/netns_lib.sh"
addr() { echo "10.77.$net.$((10 + $1))"; }
# the Secret's token file, where the ConfigMap's job.json names it
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"

# hosts_file I LINE...: host I's /etc/hosts (ip netns exec mounts it there), as the kubelet writes it
# plus what the cluster DNS would answer for the other pods
hosts_file() {
  local i=$1
  shift
  printf '127.0.0.1 localhost\n' >"/etc/netns/$prefix-n$i/hosts"
  printf '%s\n' "$@" >>"/etc/netns/$prefix-n$i/hosts"
}

# job NAME PROCS [EXTRA]: the ConfigMap's job.json (no endpoint, no rank; EXTRA: more cluster
# fields); each worker dumps its env to $T/env-$RANK and runs c_allreduce
job() {
  local name=$1 procs=$2 extra=${3:-}
  mkdir -p "$tmp/$name"
  cat >"$tmp/$name/job.json" <<EOF
{"version": 1, "name": "$name",
 "command": ["sh", "-c", "env > \"\$T/env-\$RANK\"; exec \"$worker\" --count 5000 --iters 3"],
 "cluster": {"procs_per_instance": $procs $extra},
 "rendezvous": {"token_file": "$tmp/token", "heartbeat_s": 0.5, "heartbeat_timeout_s": 5, "join_timeout_s": 40},
 "env": {"T": "$tmp/$name", "NETNS_MARKER": "$prefix-$name"}, "grace_s": 2}
EOF
}

declare -a pids
# pod I HOSTNAME NAME VAR=VALUE...: the container's `dtrain launch job.json` (--no-progress: no live
# lines in the logs) inside host I, with host name HOSTNAME and exactly the pod's env (sanitizer
# settings passed on)
pod() {
  local i=$1 host=$2 name=$3
  shift 3
  local keep=() v
  for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS LSAN_OPTIONS LD_PRELOAD; do
    [ -z "${!v:-}" ] || keep+=("$v=${!v}")
  done
  ip netns exec "$prefix-n$i" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$host" \
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root HOSTNAME="$host" \
    KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 "${keep[@]}" "$@" \
    "$bin" launch "$tmp/$name/job.json" --no-progress \
    >"$tmp/$name/node$i.out" 2>"$tmp/$name/node$i.err" </dev/null &
  pids[$i]=$!
}

show() { for i in 0 1 2; do echo "--- $1 host $i stdout"; cat "$tmp/$1/node$i.out"; echo "--- stderr"; cat "$tmp/$1/node$i.err"; done; }

# check NAME PROCS STORE: every pod exits 0; host I is node I with ranks I*PROCS.., each rank's
# allreduces checked by c_allreduce ("rank R/N ok"); the workers meet at STORE
check() {
  local name=$1 procs=$2 store=$3 before=$failures i l r n=$((3 * $2))
  for i in 0 1 2; do
    wait_rc "${pids[$i]}" 90
    [ "$rc" = 0 ] || fail "$name: host $i exited $rc"
  done
  for i in 0 1 2; do
    for ((l = 0; l < procs; l++)); do
      r=$((i * procs + l))
      e="$tmp/$name/env-$r"
      grep -qx "GROUP_RANK=$i" "$e" 2>/dev/null || fail "$name: rank $r is not on node $i (host $i): $(grep GROUP_RANK= "$e" 2>/dev/null)"
      grep -qx "WORLD_SIZE=$n" "$e" 2>/dev/null || fail "$name: rank $r: $(grep ^WORLD_SIZE= "$e" 2>/dev/null), expected $n"
      grep -qx "DTRAIN_LOCAL_ADDR=$(addr "$i")" "$e" 2>/dev/null || fail "$name: rank $r does not run on host $i"
      grep -qx "DTRAIN_STORE_ADDR=$store" "$e" 2>/dev/null || fail "$name: rank $r: $(grep DTRAIN_STORE_ADDR= "$e" 2>/dev/null), expected $store"
      grep -q "rank $r/$n ok" "$tmp/$name/node$i.out" || fail "$name: no 'rank $r/$n ok' from host $i"
    done
  done
  no_workers_left "$prefix-$name" || fail "$name: workers left behind"
  if [ "$failures" -eq "$before" ]; then ok "$name: one job of $n ranks on 3 hosts"; else show "$name"; fi
}

# 1. PyTorchJob (training-operator before 1.8): pods pt-master-0, pt-worker-0, pt-worker-1, each with
# MASTER_ADDR (the master's Service), MASTER_PORT (its container port), WORLD_SIZE = pods, RANK
pt_hosts=("$(addr 0) pt-master-0" "$(addr 1) pt-worker-0" "$(addr 2) pt-worker-1")
for i in 0 1 2; do hosts_file "$i" "${pt_hosts[@]}"; done
job pt 1
pod 2 pt-worker-1 pt MASTER_ADDR=pt-master-0 MASTER_PORT=23456 WORLD_SIZE=3 RANK=2 PYTHONUNBUFFERED=0
pod 1 pt-worker-0 pt MASTER_ADDR=pt-master-0 MASTER_PORT=23456 WORLD_SIZE=3 RANK=1 PYTHONUNBUFFERED=0
pod 0 pt-master-0 pt MASTER_ADDR=pt-master-0 MASTER_PORT=23456 WORLD_SIZE=3 RANK=0 PYTHONUNBUFFERED=0
check pt 1 "pt-master-0:29400"
for r in 0 1 2; do
  grep -qx "MASTER_PORT=23456" "$tmp/pt/env-$r" 2>/dev/null || fail "pt: rank $r did not get the pod's MASTER_PORT"
done

# 2. PyTorchJob since training-operator 1.8 with nprocPerNode 2: WORLD_SIZE = 3 pods x 2, the node
# count in PET_NNODES, the PET_* copies of the rest
for i in 0 1 2; do hosts_file "$i" "${pt_hosts[@]}"; done
job pt18 2
pet() { echo MASTER_ADDR=pt-master-0 PET_MASTER_ADDR=pt-master-0 MASTER_PORT=23457 PET_MASTER_PORT=23457 \
  WORLD_SIZE=6 RANK="$1" PET_NODE_RANK="$1" PET_NNODES=3 PET_NPROC_PER_NODE=2 PYTHONUNBUFFERED=0; }
pod 1 pt-worker-0 pt18 $(pet 1)
pod 0 pt-master-0 pt18 $(pet 0)
pod 2 pt-worker-1 pt18 $(pet 2)
check pt18 2 "pt-master-0:29400"

# 3. indexed Job "ij" (completions 3) with headless Service "ij-svc" as the pods' subdomain: host
# names ij-0..2, the kubelet's line for the pod's own fully qualified name, JOB_COMPLETION_INDEX;
# the node count is the ConfigMap's (cluster.instances). Node 0's name enters the other pods' DNS
# 2 s after they start (a headless service publishes a pod once it is ready): they wait for it.
fq() { echo "ij-$1.ij-svc.default.svc.cluster.local"; }
for i in 0 1 2; do
  lines=("$(addr "$i") $(fq "$i") ij-$i")
  for j in 1 2; do [ "$j" = "$i" ] || lines+=("$(addr "$j") $(fq "$j")"); done
  hosts_file "$i" "${lines[@]}"
done
job ij 1 ', "instances": 3'
pod 1 ij-1 ij JOB_COMPLETION_INDEX=1
pod 2 ij-2 ij JOB_COMPLETION_INDEX=2
pod 0 ij-0 ij JOB_COMPLETION_INDEX=0
sleep 2
for i in 1 2; do echo "$(addr 0) $(fq 0)" >>"/etc/netns/$prefix-n$i/hosts"; done
check ij 1 "$(fq 0):29400"

# 4. elastic PyTorchJob (elasticPolicy minReplicas 1, maxReplicas 3, Worker replicas only): no
# MASTER_ADDR, RANK or WORLD_SIZE; torchrun's PET_* name the range and the endpoint (the first
# worker's name, the Worker's container port), and the rendezvous numbers the nodes as they join
el_hosts=("$(addr 0) el-worker-0" "$(addr 1) el-worker-1" "$(addr 2) el-worker-2")
for i in 0 1 2; do hosts_file "$i" "${el_hosts[@]}"; done
job el 1
elastic() { echo PET_RDZV_ENDPOINT=el-worker-0:23456 PET_RDZV_BACKEND=c10d PET_NNODES=1:3 PYTHONUNBUFFERED=0; }
pod 2 el-worker-2 el $(elastic)
pod 1 el-worker-1 el $(elastic)
pod 0 el-worker-0 el $(elastic)
before=$failures
for i in 0 1 2; do
  wait_rc "${pids[$i]}" 90
  [ "$rc" = 0 ] || fail "el: host $i exited $rc"
done
seen=""
for r in 0 1 2; do
  e="$tmp/el/env-$r"
  grep -qx "WORLD_SIZE=3" "$e" 2>/dev/null || fail "el: rank $r: $(grep ^WORLD_SIZE= "$e" 2>/dev/null), expected 3"
  grep -qx "GROUP_RANK=$r" "$e" 2>/dev/null || fail "el: rank $r: $(grep GROUP_RANK= "$e" 2>/dev/null)"
  grep -qx "DTRAIN_STORE_ADDR=el-worker-0:23456" "$e" 2>/dev/null || fail "el: rank $r does not meet at el-worker-0:23456"
  a=$(sed -n 's/^DTRAIN_LOCAL_ADDR=//p' "$e" 2>/dev/null)
  case " $seen " in *" $a "*) fail "el: two ranks on host $a" ;; esac
  seen="$seen $a"
  grep -q "rank $r/3 ok" "$tmp"/el/node*.out || fail "el: no 'rank $r/3 ok'"
done
no_workers_left "$prefix-el" || fail "el: workers left behind"
if [ "$failures" -eq "$before" ]; then ok "el: one elastic job of 3 ranks on 3 hosts"; else show el; fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all Kubernetes env cases passed"
