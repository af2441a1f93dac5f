#!/usr/bin/env bash
# Every performance figure of dtrain next to its peer, measured in one run: allreduce (2 ranks,
# float32 sum) of dtrain's shm and TCP engines against Open MPI's shared memory and TCP and torch's
# gloo, one core's memcpy, the launch of N x /bin/true against mpirun and a bare fork+exec, and the
# teardown after SIGKILL of one worker against mpirun's; then PyTorch through the dtrain backend
# against gloo (torch.distributed.all_reduce, the C call, a DDP step; bench/torch/compare.py). Rounds
# alternate the sides; the tables give min/median/max and ratios of medians, with the load average of
# every round (bench/run_all.py).
#
#   bench/run-all.sh [--quick] [--rounds N] [--build DIR] [--results FILE] [--plot FILE] [--no-gloo]
#                    [--no-torch | --torch-only]
#
# Default: 3 rounds (a few minutes on a quiet machine), a new dated section appended to bench/RESULTS.md and the plot
# bench/allreduce-busbw.png. --quick: 1 round of 3 sizes (under 2 minutes, to check the script);
# it prints to stdout and writes files only where --results/--plot are given, and leaves out the torch
# rows (bench_torch_quick checks those). --torch-only: just the torch rows (with --quick, one tiny round).
# Needs: a release build (dtrain, coll_bench, bench_forkexec), mpicc/mpirun (openmpi-bin,
# libopenmpi-dev), /usr/bin/python3 with python3-torch (gloo) and python3-matplotlib (plot); the
# packages come from scripts/install-deps.sh; the torch rows need the dtrain torch backend built
# (dtrain_python and its extension). Exit status: 0; 1 when a run failed or computed wrong sums (listed
# under "Failures"); 2 when something needed is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$root/build/release
quick=0 results="" plot="" rounds="" gloo=1 torch=1 torch_only=0
cmdline="bench/run-all.sh${*:+ $*}"
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --build) build=${2:?--build needs a folder}; shift ;;
    --results) results=${2:?--results needs a file}; shift ;;
    --plot) plot=${2:?--plot needs a file}; shift ;;
    --no-gloo) gloo=0 ;;
    --no-torch) torch=0 ;;
    --torch-only) torch_only=1 ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) echo "run-all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ((!quick)); then
  : "${results:=$here/RESULTS.md}" "${plot:=$here/allreduce-busbw.png}"
fi
if ((torch_only)); then
  ((torch)) || { echo "run-all.sh: --torch-only and --no-torch exclude each other" >&2; exit 2; }
elif ((quick)); then
  torch=0
fi
python=${PYTHON:-/usr/bin/python3}
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run-all.sh: no build folder (build first: cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
for f in dtrain bench/allreduce/coll_bench bench/launch/bench_forkexec; do
  [ -x "$build/$f" ] || { echo "run-all.sh: $build/$f missing; build it (cmake --build --preset release)" >&2; exit 2; }
done
if ((torch)) && ! PYTHONPATH=$build/python "$python" -c 'import torch.distributed, dtrain.torch' 2>/dev/null; then
  echo "run-all.sh: $python cannot import torch.distributed and dtrain.torch from $build/python (python3-torch," \
       "libtorch-dev and a build of the torch backend; or pass --no-torch)" >&2; exit 2
fi
rc=0
if ((!torch_only)); then
  command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "run-all.sh: mpicc/mpirun not found (scripts/install-deps.sh installs openmpi-bin libopenmpi-dev)" >&2; exit 2; }
  "$python" -c 'import matplotlib' 2>/dev/null ||
    { echo "run-all.sh: $python cannot import matplotlib (scripts/install-deps.sh; or set PYTHON)" >&2; exit 2; }
  if ((gloo)) && ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    echo "run-all.sh: $python cannot import torch.distributed (python3-torch; or pass --no-gloo)" >&2; exit 2
  fi
  probe=$build/bench/allreduce/mpi_allreduce_probe
  if [ ! -x "$probe" ] || [ "$here/allreduce/mpi_allreduce.c" -nt "$probe" ]; then
    mpicc -O2 -Wall -o "$probe" "$here/allreduce/mpi_allreduce.c"
  fi
  args=(--build "$build" --mpi-probe "$probe" --root "$root" --command "$cmdline" --python "$python")
  ((quick)) && args+=(--quick)
  ((gloo)) || args+=(--no-gloo)
  [ -n "$rounds" ] && args+=(--rounds "$rounds")
  [ -n "$results" ] && args+=(--results "$results")
  [ -n "$plot" ] && args+=(--plot "$plot")
  "$python" "$here/run_all.py" "${args[@]}" || rc=$?
  ((rc == 2)) && exit 2
fi
if ((torch)); then
  args=(--build "$build" --command "$cmdline" --python "$python")
  ((quick)) && args+=(--quick)
  [ -n "$rounds" ] && args+=(--rounds "$rounds")
  [ -n "$results" ] && args+=(--results "$results")
  ((torch_only)) || echo  # the sections apart, on stdout as in the results file
  "$python" "$here/torch/compare.py" "${args[@]}" || { t=$?; if ((t > rc)); then rc=$t; fi; }
fi
exit $rc
