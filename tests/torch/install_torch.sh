#!/usr/bin/env bash
# dtrain.torch from an install tree: `cmake --install` puts the extension next to the package, and a
# 2-rank job of the installed (then moved) dtrain runs a worker that imports dtrain.torch with no
# PYTHONPATH (the agent puts the install's site folder on it) and all_reduces on the backend; the
# extension and the library it runs on are the installed ones.
#   usage: install_torch.sh BUILD_DIR CMAKE PYTHON SITEDIR
set -euo pipefail
build=$1 cmake=$2 python=$3 sitedir=$4
tmp=$(mktemp -d -t dtrain-install-torch-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
ls "$tmp/prefix/$sitedir"/dtrain/_torch_backend*.so >/dev/null 2>&1 ||
  { echo "FAIL: no dtrain/_torch_backend*.so under $tmp/prefix/$sitedir"; exit 1; }
[ -f "$tmp/prefix/$sitedir/dtrain/torch/__init__.py" ] || { echo "FAIL: dtrain/torch/__init__.py not installed"; exit 1; }
mv "$tmp/prefix" "$tmp/moved"
prefix=$tmp/moved

cat >"$tmp/worker.py" <<'PY'
import os, torch, torch.distributed as dist
import dtrain.torch
dist.init_process_group("dtrain")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
lib = [l.split()[-1] for l in open("/proc/self/maps") if "libdtrain_collectives" in l][0]
print(f"rank {dist.get_rank()}: sum {t[0]:g} with {dtrain.torch.__file__} on {lib}; PYTHONPATH={os.environ['PYTHONPATH']}")
PY
# A clean environment but for torch's own USE_LIBUV (Debian 13's torch 2.6 has no libuv: tests/torch)
out=$(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME=/tmp LC_ALL=C DTRAIN_TEST_GPUS=0 ${USE_LIBUV:+USE_LIBUV=$USE_LIBUV} \
      "$prefix/bin/dtrain" launch --python "$python" --nproc-per-node 2 worker.py 2>&1) ||
  { echo "FAIL: the installed dtrain launch:"; echo "$out"; exit 1; }
for r in 0 1; do
  grep -qE "rank $r: sum 3 with $prefix/.*/dtrain/torch/__init__.py on $prefix/" <<<"$out" ||
    { echo "FAIL: rank $r did not run on the installed package and library:"; echo "$out"; exit 1; }
done
echo "installed dtrain.torch ($sitedir): ok"
