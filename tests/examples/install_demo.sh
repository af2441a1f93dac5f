#!/usr/bin/env bash
# Installs dtrain to a temporary prefix and runs the built-in demo job from there: the installed
# dtrain finds <prefix>/libexec/dtrain/dtrain-demo-worker, which loads the installed collectives
# library (its RPATH), not the build tree's; the installed pipeline example (dtrain-examples(7), also
# installed) runs from there too.   usage: install_demo.sh BUILD_DIR CMAKE
set -euo pipefail
build=$1 cmake=$2
tmp=$(mktemp -d -t dtrain-install-demo-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
worker=$(find "$prefix" -path '*/libexec/dtrain/dtrain-demo-worker' | head -1)
[ -n "$worker" ] || { echo "FAIL: dtrain-demo-worker not installed under libexec/dtrain"; exit 1; }
libs=$(ldd "$worker")  # (not piped into grep -q: with pipefail an early grep exit fails the pipe)
grep -q "$prefix/.*libdtrain_collectives" <<<"$libs" ||
  { echo "FAIL: the installed worker does not load the installed library"; echo "$libs"; exit 1; }

cd "$tmp"
out=$(env -i PATH=/usr/bin:/bin HOME=/tmp LC_ALL=C DTRAIN_TEST_GPUS=0 "$prefix/bin/dtrain" launch 2>&1) ||
  { echo "FAIL: the installed dtrain launch:"; echo "$out"; exit 1; }
for want in '[0/0] rank 0/2 on node 0' '[0/1] rank 1/2 on node 0' 'weights identical on all 2 ranks'; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: '$want' missing from:"; echo "$out"; exit 1; }
done

pipe_worker=$prefix/libexec/dtrain/dtrain-pipeline-example
[ -x "$pipe_worker" ] || pipe_worker=$(find "$prefix" -path '*/libexec/dtrain/dtrain-pipeline-example' | head -1)
[ -n "$pipe_worker" ] || { echo "FAIL: dtrain-pipeline-example not installed under libexec/dtrain"; exit 1; }
[ -n "$(find "$prefix" -path '*/man7/dtrain-examples.7')" ] || { echo "FAIL: dtrain-examples(7) not installed"; exit 1; }
printf '{ "version": 1, "command": ["%s"], "cluster": { "procs_per_instance": 2 }, "parallel": { "pipeline": 2 },
  "batch": { "global": 8, "micro_batches": 2, "dataset_size": 64, "epochs": 1 } }\n' "$pipe_worker" >"$tmp/pipeline.json"
out=$(env -i PATH=/usr/bin:/bin HOME=/tmp LC_ALL=C DTRAIN_TEST_GPUS=0 "$prefix/bin/dtrain" launch "$tmp/pipeline.json" 2>&1) ||
  { echo "FAIL: the installed pipeline example:"; echo "$out"; exit 1; }
grep -qF 'the weights of every stage identical on its 1 replicas' <<<"$out" ||
  { echo "FAIL: no final line from the pipeline example:"; echo "$out"; exit 1; }
echo "installed demo job and pipeline example: ok"
