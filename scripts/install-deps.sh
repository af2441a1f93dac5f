#!/usr/bin/env bash
# Installs what dtrain needs to build, test and benchmark, from Debian's archive.
# Idempotent: packages already present are left alone and nothing is fetched.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libuv1-dev nlohmann-json3-dev libfmt-dev doctest-dev libssl-dev
  openmpi-bin libopenmpi-dev   # peer for bench/ and MPI_Allreduce probe
  iproute2 procps util-linux   # network-namespace tests, process checks
  groff-base                   # man page rendering check
  python3 python3-numpy        # the dtrain Python package's tests, examples/python_sgd.py, bench/python
  clang libclang-rt-dev        # libFuzzer targets (fuzz/, the fuzz preset)
  python3-torch                # the torchrun-style launch of a real PyTorch DDP script (tests/examples), gloo peer of bench/run-all.sh
  python3-matplotlib           # bench/run-all.sh: the busbw-vs-size plot (bench/allreduce-busbw.png)
  libcurl4-openssl-dev         # the etcd rendezvous backend (rendezvous/etcd: etcd's v3 JSON gateway over HTTP/TLS)
  etcd-server etcd-client      # a real etcd (and etcdctl) that the etcd backend's tests start on loopback
)

missing=()
for p in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp -t dtrain-install-deps.XXXXXX.log)
if ! { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "install-deps: apt-get failed; full log in $log" >&2
  exit 1
fi
rm -f "$log"
echo "install-deps: installed ${#missing[@]} packages"
