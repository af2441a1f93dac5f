#!/usr/bin/env bash
# The CI test run, after scripts/install-deps.sh, in stages: the release build and the whole test
# suite ("release"); the whole suite again under ASan + UBSan ("asan"); the threaded tests
# (collectives ranks as threads, the rendezvous server and its clients) under TSan ("tsan"); and
# each libFuzzer target for a bounded time ("fuzz"). From scratch on 2 cores about 37 minutes:
# release 12, asan 16, tsan 6, fuzz 3 (a fresh clone, 2026-12-04).
# Any failure, sanitizer report, leak or fuzzer finding fails the run. Each stage's wall time is
# printed at the end.
#   DTRAIN_CI_FUZZ_SECONDS  seconds per fuzz target (default 45)
#   DTRAIN_CI_STAGES        stages to run (default all four: "release asan tsan fuzz")
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${DTRAIN_CI_FUZZ_SECONDS:-45}
stages=${DTRAIN_CI_STAGES:-release asan tsan fuzz}
# The threaded tests TSan checks (built alone: the rest of the suite runs under ASan): collectives
# ranks as threads, the rendezvous server with its clients, and multi-node launches (the agent's
# control thread, session threads and embedded server). Of the ranks-as-threads matrix, the
# shared-memory engine's world sizes 1-8 (its TCP and hierarchical cases take minutes under TSan).
tsan_targets=(test_collectives_comm test_collectives_inplace test_collectives_failures test_collectives_shm_box
              test_rendezvous_store test_rendezvous_node_session test_rendezvous_hostile test_multinode)
tsan_regex="^(test_collectives_inplace|test_collectives_failures|test_collectives_shm_box|test_rendezvous_store|test_rendezvous_node_session|test_rendezvous_hostile|test_multinode)$"
# Sanitizer reports fail the test that triggers them (the TSan defaults built into the executables,
# and why: common/include/dtrain/common/sanitizer_defaults.hpp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

times=""
stage() {
  local name=$1
  shift
  echo "== ci: $name"
  local t0=$SECONDS
  "$@"
  times+=$(printf '%-8s %4d s' "$name" $((SECONDS - t0)))$'\n'
}

# Line tables only (-g1), not full debug info: enough for the sanitizers' and gdb's backtraces, and
# the builds take about a quarter less CPU (-g's variable tracking at -O2). A tree configured here
# keeps these flags in its cache; `cmake --preset release --fresh` gives the preset's own again.
g1=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
    -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1)

release() { cmake --preset release "${g1[@]}" && cmake --build --preset release && ctest --preset release; }
# Tests labelled "build" check the install tree and builds of user projects against it: they run in
# the release stage (a consumer built without the sanitizer cannot link an instrumented library).
asan() { cmake --preset asan "${g1[@]}" && cmake --build --preset asan && ctest --preset asan -LE '^build$'; }
tsan() {
  cmake --preset tsan "${g1[@]}" && cmake --build --preset tsan --target "${tsan_targets[@]}" &&
    ctest --preset tsan -R "$tsan_regex" &&
    build/tsan/tests/collectives/test_collectives_comm --test-case='shared memory*'
}
fuzz() { cmake --preset fuzz "${g1[@]}" && cmake --build --preset fuzz && bash scripts/fuzz.sh build/fuzz "$fuzz_seconds"; }

t_all=$SECONDS
for s in $stages; do stage "$s" "$s"; done
printf '\n== ci: wall time per stage\n%s%-8s %4d s\n' "$times" total $((SECONDS - t_all))
