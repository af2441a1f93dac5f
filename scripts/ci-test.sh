#!/usr/bin/env bash
# The CI test run, after scripts/install-deps.sh, in stages: the release build and the whole test
# suite ("release"); the whole suite again under ASan + UBSan ("asan"); the threaded tests
# (collectives ranks as threads, the rendezvous server and its clients) under TSan ("tsan"); each
# libFuzzer target for a bounded time ("fuzz"); and the tests of torch and of the Python package on
# Debian 13's torch 2.6 and Python 3.13, built in a Debian 13 tree that mmdebstrap makes ("trixie",
# scripts/ci-trixie.sh; the release stage runs them on this machine's torch 1.13).
# Most tests wait (on processes, sockets, timeouts) more than they compute, so while one stage's
# tests run, the next stage's tree is configured and built beside them at the lowest CPU priority
# (nice 19): it takes the CPU the tests leave idle and yields it whenever a test wants it. The
# trixie stage's Debian 13 tree (downloads, unpacking) and build start so from the beginning.
# DTRAIN_CI_OVERLAP=0 builds each stage only after the previous one's tests.
# With the overlap, the -Og test programs (the release preset sets DTRAIN_TEST_CODE_OPT;
# tests/CMakeLists.txt) and the unity builds (cmake/DtrainUnity.cmake), from a fresh clone on 2 cores
# (2026-12-04): 18.5 minutes, release 8.2, asan 7.0, tsan 1.8, fuzz 1.6 (37 before them).
# Any failure, sanitizer report, leak or fuzzer finding fails the run. Each stage's wall time is
# printed at the end.
#   DTRAIN_CI_FUZZ_SECONDS  seconds per fuzz target (default 45)
#   DTRAIN_CI_STAGES        stages to run (default "release asan tsan fuzz trixie")
#   DTRAIN_CI_OVERLAP       1 (default): build the next stage during this one's tests (and the
#                           trixie stage from the start); 0: do not
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${DTRAIN_CI_FUZZ_SECONDS:-45}
stages=${DTRAIN_CI_STAGES:-release asan tsan fuzz trixie}
overlap=${DTRAIN_CI_OVERLAP:-1}
# The threaded tests TSan checks (built alone: the rest of the suite runs under ASan): collectives
# ranks as threads, the rendezvous server with its clients, and multi-node launches (the agent's
# control thread, session threads and embedded server). Of the ranks-as-threads matrix, the
# shared-memory engine's world sizes 1-8 (its TCP and hierarchical cases take minutes under TSan).
tsan_targets=(test_collectives_comm test_collectives_in_place test_collectives_failures test_collectives_shm
              test_rendezvous_store test_rendezvous_membership test_rendezvous_server test_rendezvous_hostile test_multinode)
tsan_regex="^(test_collectives_in_place|test_collectives_failures|test_collectives_shm|test_rendezvous_store|test_rendezvous_membership|test_rendezvous_server|test_rendezvous_hostile|test_multinode|test_multinode_messages|test_multinode_elastic)$"
# Sanitizer reports fail the test that triggers them (the TSan defaults built into the executables,
# and why: common/include/dtrain/common/sanitizer_defaults.hpp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# Line tables only (-g1), not full debug info: enough for the sanitizers' and gdb's backtraces, and
# the builds take about a quarter less CPU (-g's variable tracking at -O2). A tree configured here
# keeps these flags in its cache; `cmake --preset release --fresh` gives the preset's own again.
# Unity builds of the targets cmake/DtrainUnity.cmake lists (a third to a half of their CPU).
g1=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
    -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DDTRAIN_UNITY_BUILD=ON)

# Each stage: what it builds, then what it runs.
build_release() { cmake --preset release "${g1[@]}" && cmake --build --preset release; }
test_release() { ctest --preset release; }
build_asan() { cmake --preset asan "${g1[@]}" && cmake --build --preset asan; }
# Tests labelled "build" check the install tree and builds of user projects against it: they run in
# the release stage (a consumer built without the sanitizer cannot link an instrumented library).
# So does "bench" (bench/run-all.sh --quick, run alone: the shape of its tables, which ASan adds
# nothing to; the collectives it drives are the ones the suite runs under ASan).
test_asan() { ctest --preset asan -LE '^(build|bench)$'; }
build_tsan() { cmake --preset tsan "${g1[@]}" && cmake --build --preset tsan --target "${tsan_targets[@]}"; }
test_tsan() {
  ctest --preset tsan -R "$tsan_regex" &&
    build/tsan/tests/collectives/test_collectives_comm --test-case='shared memory*'
}
build_fuzz() { cmake --preset fuzz "${g1[@]}" && cmake --build --preset fuzz; }
test_fuzz() { bash scripts/fuzz.sh build/fuzz "$fuzz_seconds"; }
build_trixie() { bash scripts/ci-trixie.sh build "${g1[@]}"; }
test_trixie() { bash scripts/ci-trixie.sh test; }

for s in $stages; do
  case $s in release | asan | tsan | fuzz | trixie) ;; *) echo "ci: unknown stage '$s' (release, asan, tsan, fuzz, trixie)" >&2; exit 2 ;; esac
done
read -r -a order <<<"$stages"

# The build of stage $1 in the background at nice 19 (in this session, so that nice counts against
# the tests), a process group of its own, its output in build/ci-$1-build.log. The EXIT trap below
# ends it with this script; a watchdog in its group ends it too if this script is killed outright.
declare -A bg_pid=() bg_t0=()
start_background_build() {
  mkdir -p build
  bg_t0[$1]=$SECONDS
  echo "== ci: $1: building beside $2 (nice 19; build/ci-$1-build.log)"
  set -m
  (
    group=$BASHPID  # the group's leader (set -m)
    renice -n 19 -p "$group" >/dev/null
    (while kill -0 $$ 2>/dev/null; do sleep 2; done; kill -- "-$group") &
    watchdog=$!
    rc=0
    "build_$1" || rc=$?
    kill "$watchdog"
    exit "$rc"
  ) </dev/null >"build/ci-$1-build.log" 2>&1 &
  bg_pid[$1]=$!
  set +m
}
# Waits for the background build of stage $1; its log's end on failure.
finish_background_build() {
  if ! wait "${bg_pid[$1]}"; then
    tail -n 60 "build/ci-$1-build.log" >&2
    echo "ci: $1: the build failed; its whole log: build/ci-$1-build.log" >&2
    exit 1
  fi
  echo "== ci: $1: built ($((SECONDS - bg_t0[$1])) s since it started in the background)"
  unset "bg_pid[$1]"
}
trap 'for p in "${bg_pid[@]}"; do kill -- "-$p" 2>/dev/null || true; done' EXIT

# The trixie stage's Debian 13 tree is mostly download and unpacking, and its build is as long as a
# stage's tests: both run from the start at nice 19, on the CPU the other stages leave idle.
if [ "$overlap" = 1 ] && [[ " $stages " == *" trixie "* ]]; then
  start_background_build trixie "the other stages (the Debian 13 tree first)"
fi

times=""
t_all=$SECONDS
for i in "${!order[@]}"; do
  s=${order[$i]} next=${order[$((i + 1))]:-}
  echo "== ci: $s"
  t0=$SECONDS
  if [ -n "${bg_pid[$s]:-}" ]; then finish_background_build "$s"; else "build_$s"; fi
  tb=$((SECONDS - t0))
  if [ "$overlap" = 1 ] && [ -n "$next" ] && [ -z "${bg_pid[$next]:-}" ]; then
    start_background_build "$next" "the tests of $s"
  fi
  "test_$s"
  times+=$(printf '%-8s %4d s  (build or wait for it %d s, tests %d s)' "$s" $((SECONDS - t0)) "$tb" $((SECONDS - t0 - tb)))$'\n'
done
printf '\n== ci: wall time per stage\n%s%-8s %4d s\n' "$times" total $((SECONDS - t_all))
