#!/usr/bin/env bash
# Test hosts in network namespaces (see MULTINODE notes in the docs): N hosts <prefix>-n<i> with
# 10.77.<net>.(10+i)/24 on eth0, their veth peers on a bridge that lives in its own namespace
# <prefix>-br, names in /etc/netns/<ns>/hosts, and a blackhole route for the subnet in the root
# namespace while the hosts exist, so that nothing addressed to them can leave the machine.
#
#   netns.sh up PREFIX NET N      create hosts (PREFIX: short, unique per run; NET: 0-255)
#   netns.sh exec PREFIX I CMD..  run CMD inside host I with its own hostname <prefix>-n<I>
#   netns.sh cut PREFIX I         unplug host I (its bridge port goes down: silent loss)
#   netns.sh plug PREFIX I        plug it back
#   netns.sh down PREFIX NET      kill everything inside, remove hosts, bridge and route
#   netns.sh check                exit 0 when namespaces can be made here, else print why, exit 1
set -euo pipefail

cmd=${1:?usage: netns.sh up|exec|cut|plug|down|check ...}
shift || true

host_ns() { echo "$1-n$2"; }
bridge_ns() { echo "$1-br"; }

case "$cmd" in
  check)
    if [ "$(id -u)" -ne 0 ]; then echo "network namespaces need root"; exit 1; fi
    command -v ip >/dev/null || { echo "iproute2 (ip) is not installed"; exit 1; }
    probe="dtprobe$$"
    if ! ip netns add "$probe" 2>/dev/null; then echo "ip netns add failed (no CAP_SYS_ADMIN?)"; exit 1; fi
    if ! ip -n "$probe" link add a0 type veth peer name a1 2>/dev/null; then
      ip netns del "$probe"; echo "veth pairs cannot be made here"; exit 1
    fi
    ip netns del "$probe"
    ;;
  up)
    prefix=$1 net=$2 n=$3
    br=$(bridge_ns "$prefix")
    ip route add blackhole "10.77.$net.0/24" 2>/dev/null || true
    ip netns add "$br"
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
    hosts=""
    for ((i = 0; i < n; i++)); do hosts+="10.77.$net.$((10 + i)) $(host_ns "$prefix" "$i")"$'\n'; done
    for ((i = 0; i < n; i++)); do
      ns=$(host_ns "$prefix" "$i")
      ip netns add "$ns"
      mkdir -p "/etc/netns/$ns"
      printf '127.0.0.1 localhost\n%s' "$hosts" >"/etc/netns/$ns/hosts"
      ip -n "$ns" link add eth0 type veth peer name "v$i" netns "$br"
      ip -n "$br" link set "v$i" master br0 up
      ip -n "$ns" addr add "10.77.$net.$((10 + i))/24" dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" link set lo up
    done
    ;;
  exec)
    prefix=$1 i=$2
    shift 2
    ns=$(host_ns "$prefix" "$i")
    exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
    ;;
  cut) ip -n "$(bridge_ns "$1")" link set "v$2" down ;;
  plug) ip -n "$(bridge_ns "$1")" link set "v$2" up ;;
  down)
    prefix=$1 net=$2
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-(n[0-9]+|br)\$" || true); do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
      rm -rf "/etc/netns/$ns"
    done
    ip route del blackhole "10.77.$net.0/24" 2>/dev/null || true
    ;;
  *) echo "netns.sh: unknown command '$cmd'" >&2; exit 2 ;;
esac
