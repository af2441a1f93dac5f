#!/usr/bin/env bash
# torchrun (python -m torch.distributed.run --standalone) with 2 ranks. torch 1.13's torchrun on
# Python 3.11 cannot parse its default "--redirects 0 --tee 0" (Std(0) is no longer iterated): stdout
# goes to its logs, stderr also to the terminal. Debian 13's torch 2.6 is built without libuv, and
# every rendezvous of its torchrun makes its TCPStore with libuv whatever USE_LIBUV says
# (torch/distributed/elastic/rendezvous/*.py): there torchrun cannot start, and this skips (77).
#   usage: torchrun.sh PYTHON SCRIPT [args...]
set -euo pipefail
python=$1
shift
if ! why=$("$python" -c 'from datetime import timedelta; from torch.distributed import TCPStore
TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10))' 2>&1); then
  if grep -q "without libuv" <<<"$why"; then
    echo "SKIP: this torch's torchrun cannot make its rendezvous store: $(tail -1 <<<"$why")"
    exit 77
  fi
  echo "FAIL: a TCPStore with torch's defaults: $why"
  exit 1
fi
exec "$python" -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 2 "$@"
