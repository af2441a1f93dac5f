#!/bin/bash
# A PyTorch job on the dtrain backend that hangs is diagnosed from the library's progress pages:
# `dtrain launch` with output.hang_timeout_s 3 ends it with status 70 and names the waiting rank's
# call and the rank that stopped calling.   launch_hang.sh DTRAIN PYTHON
set -u
dtrain=$1 python=$2
here=$(cd "$(dirname "$0")" && pwd)
out=$(timeout 120 "$dtrain" launch --python "$python" --nproc-per-node 2 --set /output/hang_timeout_s=3 \
      "$here/torch_hang.py" 2>&1)
rc=$?
fail() { echo "FAIL: $1"; echo "$out" | tail -20; exit 1; }
[ "$rc" = 70 ] || fail "dtrain launch exited $rc, expected 70 (hang)"
grep -q "rank 0 waits in allreduce #6" <<<"$out" || fail "no 'rank 0 waits in allreduce #6'"
grep -q "rank 1 stopped calling: its last collective, allreduce #5" <<<"$out" || fail "no 'rank 1 stopped calling'"
echo "ok: the hang was named"
