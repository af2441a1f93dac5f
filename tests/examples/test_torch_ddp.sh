#!/usr/bin/env bash
# A real, unchanged PyTorch DDP script (examples/torch_ddp/train.py, gloo on CPU) launched the way a
# torchrun user would: `dtrain launch --nproc-per-node 4 train.py --epochs 2`, with 2 workers, with
# --backend dtrain (the README's PyTorch command) where the backend was built, and as one job of two
# `dtrain launch --nnodes 2 --node-rank i --rdzv-endpoint 127.0.0.1:P` processes.
# Exit 77 (skipped, the reason printed) only where no Python on this machine can import torch.
#
#   test_torch_ddp.sh DTRAIN_BIN SCRIPT_DIR
set -uo pipefail

bin=${1:?usage: test_torch_ddp.sh DTRAIN_BIN SCRIPT_DIR}
src=${2:?usage: test_torch_ddp.sh DTRAIN_BIN SCRIPT_DIR}

# Debian's python3-torch lives in /usr/bin/python3 (scripts/install-deps.sh); a python3 earlier in
# PATH (pyenv) may not have it: the test names the interpreter with --python, as a user would.
python=""
for p in /usr/bin/python3 "$(command -v python3 || true)"; do
  [ -n "$p" ] && [ -x "$p" ] && "$p" -c "import torch" >/dev/null 2>&1 && { python=$p; break; }
done
if [ -z "$python" ]; then
  echo "SKIP: no Python here can import torch (tried /usr/bin/python3 and python3 on PATH); install python3-torch (scripts/install-deps.sh)"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-ddp-XXXXXX")
failures=0
cleanup() {
  if [ "$failures" -eq 0 ] && [ -z "${DTRAIN_TEST_KEEP:-}" ]; then rm -rf "$tmp"; else echo "kept: $tmp"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
cp "$src/train.py" "$tmp/train.py"
cd "$tmp" || exit 1
export DTRAIN_TEST_GPUS=0 OMP_NUM_THREADS=1

# single node: N workers, 2 epochs; rank 0 prints each epoch's loss and the replicas agree
for n in 4 2; do
  timeout 300 "$bin" launch --python "$python" --nproc-per-node "$n" train.py --epochs 2 >"single$n.out" 2>"single$n.err"
  rc=$?
  if [ $rc -ne 0 ]; then fail "$n workers: exit $rc"; cat "single$n.out" "single$n.err"; continue; fi
  grep -q "epoch 1: loss" "single$n.out" || fail "$n workers: no epoch 1 line"
  grep -q "done: $n replicas agree" "single$n.out" || fail "$n workers: replicas"
  [ "$(grep -c ' up$' "single$n.out")" -eq "$n" ] || fail "$n workers: not every rank came up"
  grep -q "dtrain: job finished: $n ranks exited 0" "single$n.err" || fail "$n workers: no summary line"
  ok "$n workers on one node"
done

# the README's command: the same script on the dtrain backend, which dtrain launch's workers import
# with no PYTHONPATH of their own; where the backend was not built (no libtorch-dev), said and left out
if compgen -G "$(dirname "$bin")/python/dtrain/_torch_backend*.so" >/dev/null; then
  env -u PYTHONPATH timeout 300 "$bin" launch --python "$python" --nproc-per-node 2 train.py --epochs 2 --backend dtrain \
    >dtrain.out 2>dtrain.err
  rc=$?
  if [ $rc -ne 0 ]; then
    fail "backend dtrain: exit $rc"; cat dtrain.out dtrain.err
  else
    grep -q "done: 2 replicas agree (dtrain)" dtrain.out || fail "backend dtrain: replicas"
    ok "2 workers on the dtrain backend"
  fi
else
  echo "not run: the dtrain backend (no $(dirname "$bin")/python/dtrain/_torch_backend*.so; libtorch-dev was missing)"
fi

# two nodes of 2 workers each, torchrun's flags, a shared token of 32 random characters
head -c 24 /dev/urandom | base64 | tr -d '\n' >token
chmod 600 token
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
flags=(--python "$python" --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --token-file token --nproc-per-node 2)
timeout 300 "$bin" launch "${flags[@]}" --node-rank 1 train.py --epochs 2 >node1.out 2>node1.err &
n1=$!
timeout 300 "$bin" launch "${flags[@]}" --node-rank 0 train.py --epochs 2 >node0.out 2>node0.err
rc0=$?
wait $n1
rc1=$?
if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then
  fail "two nodes: exit $rc0 / $rc1"
  cat node0.out node0.err node1.out node1.err
else
  grep -q "done: 4 replicas agree" node0.out || fail "two nodes: replicas"
  grep -q "rank 3/4 (local rank 1) up" node1.out || fail "two nodes: rank 3 on node 1"
  grep -q "dtrain: job finished: 4 ranks (2 on this node) exited 0" node1.err || fail "two nodes: summary line"
  ok "two nodes x 2 workers"
fi
[ "$failures" -eq 0 ]
