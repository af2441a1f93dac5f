#!/usr/bin/env bash
# The dtrain Python package from an install tree: `cmake --install` puts it in <prefix>/SITEDIR/dtrain,
# it loads <prefix>/<libdir>/libdtrain_collectives (not the build tree's) through the path recorded
# relative to the package, and a 2-rank job of the installed dtrain runs a worker that imports it.
#   usage: install_python.sh BUILD_DIR CMAKE PYTHON SITEDIR
set -euo pipefail
build=$1 cmake=$2 python=$3 sitedir=$4
# A sanitizer build preloads its runtime into the interpreter (tests/CMakeLists.txt): keep it.
keep=()
for v in LD_PRELOAD ASAN_OPTIONS; do [ -z "${!v:-}" ] || keep+=("$v=${!v}"); done
tmp=$(mktemp -d -t dtrain-install-python-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
site=$prefix/$sitedir
[ -f "$site/dtrain/__init__.py" ] || { echo "FAIL: $site/dtrain/__init__.py not installed"; find "$prefix" -name '*.py'; exit 1; }
grep -q 'KIND = "the install tree"' "$site/dtrain/_location.py" || { echo "FAIL: _location.py is not the install one"; exit 1; }

# Moved elsewhere, the tree still works (the library path is relative to the package).
mv "$prefix" "$tmp/moved"
prefix=$tmp/moved site=$prefix/$sitedir
lib=$(cd /tmp && env -i PATH=/usr/bin:/bin "${keep[@]}" PYTHONPATH="$site" "$python" -c 'import dtrain; print(dtrain.library_info().path)')
case $lib in
  "$prefix"/*) ;;
  *) echo "FAIL: the installed package loaded $lib, not the library under $prefix"; exit 1 ;;
esac

cat >"$tmp/worker.py" <<'PY'
import numpy as np, dtrain
w = dtrain.init()
s = dtrain.allreduce(np.array([w.rank + 1.0]))
print(f"rank {w.rank}/{w.size}: sum {s[0]:g} from {dtrain.library_info().path}")
PY
printf '{ "version": 1, "command": ["%s", "%s"], "cluster": { "procs_per_instance": 2 } }\n' \
  "$python" "$tmp/worker.py" >"$tmp/job.json"
out=$(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME=/tmp LC_ALL=C DTRAIN_TEST_GPUS=0 "${keep[@]}" PYTHONPATH="$site" \
      "$prefix/bin/dtrain" launch job.json 2>&1) || { echo "FAIL: the installed dtrain launch:"; echo "$out"; exit 1; }
for want in "rank 0/2: sum 3 from $prefix/" "rank 1/2: sum 3 from $prefix/"; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: '$want' missing from:"; echo "$out"; exit 1; }
done
echo "installed python package ($sitedir): ok"
