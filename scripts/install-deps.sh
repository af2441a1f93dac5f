#!/usr/bin/env bash
# Installs from Debian's archive what dtrain needs. Idempotent: packages already present are left
# alone and nothing is fetched.
#   scripts/install-deps.sh          everything: the build, the whole test suite with its sanitizer,
#                                    fuzz and torch 2.6 stages (scripts/ci-test.sh), bench/
#   scripts/install-deps.sh --demo   only what the demo needs (the README's first command): the
#                                    compiler, cmake, ninja and the libraries of the dtrain binary
#                                    and its demo worker (the "demo" preset builds just those two)
set -euo pipefail

demo_packages=(
  g++ cmake ninja-build pkg-config
  libcli11-dev libuv1-dev nlohmann-json3-dev libfmt-dev libssl-dev
)
packages=(
  "${demo_packages[@]}"
  build-essential git doctest-dev
  openmpi-bin libopenmpi-dev   # peer for bench/ and MPI_Allreduce probe
  iproute2 procps util-linux   # network-namespace tests, process checks; unshare, setpriv, flock (scripts/ci-trixie.sh)
  groff-base                   # man page rendering check
  python3 python3-numpy        # the dtrain Python package's tests, examples/python_sgd.py, bench/python
  clang libclang-rt-dev        # libFuzzer targets (fuzz/, the fuzz preset)
  python3-torch                # the torchrun-style launch of a real PyTorch DDP script (tests/examples), gloo peer of bench/run-all.sh
  libtorch-dev pybind11-dev    # the PyTorch backend's extension (python/torch_backend, cmake/DtrainTorch.cmake)
  python3-matplotlib           # bench/run-all.sh: the busbw-vs-size plot (bench/allreduce-busbw.png)
  libcurl4-openssl-dev         # the etcd rendezvous backend (rendezvous/store/etcd: etcd's v3 JSON gateway over HTTP/TLS)
  etcd-server etcd-client      # a real etcd (and etcdctl) that the etcd backend's tests start on loopback
  python3-yaml                 # the Kubernetes manifests test (tests/kubernetes)
  openssl                      # the etcd tests' TLS certificates (tests/rendezvous/etcd_server.cpp)
  mmdebstrap gpg debian-archive-keyring  # the Debian 13 tree with torch 2.6 of CI's trixie stage (scripts/ci-trixie.sh)
)

case "${1:-}" in
  "") ;;
  --demo) packages=("${demo_packages[@]}") ;;
  *)
    echo "install-deps: unknown argument '$1' (no argument: everything; --demo: what the demo needs)" >&2
    exit 2
    ;;
esac

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
