# Shell helpers of the network-namespace tests (sourced by test_netns*.sh, which set $netns to
# netns.sh): the hosts brought up and torn down, results, exit statuses with a limit, env dumps, and
# leftovers.

# netns_begin TAG NAME HOSTS NET_OFFSET: where namespaces cannot be made, prints the reason and exits
# 77 (skipped); else sets prefix, net, tmp (a scratch folder named NAME-*) and failures, brings up
# HOSTS hosts (addresses: addr I), and tears them down at exit (the folder kept after a failure or
# with DTRAIN_TEST_KEEP set).
netns_begin() {
  local why
  if ! why=$(bash "$netns" check 2>&1); then
    echo "SKIP: network namespaces cannot be made here: $why"
    exit 77
  fi
  prefix="$1$$"
  net=$((100 + ($$ + $4) % 150))
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$2-XXXXXX")
  failures=0
  trap netns_end EXIT
  trap 'exit 1' INT TERM
  bash "$netns" up "$prefix" "$net" "$3" || { echo "FAIL: netns.sh up"; failures=1; exit 1; }
}
netns_end() {
  bash "$netns" down "$prefix" "$net" >/dev/null 2>&1 || true
  if [ "$failures" -eq 0 ] && [ -z "${DTRAIN_TEST_KEEP:-}" ]; then rm -rf "$tmp"; else echo "kept: $tmp"; fi
}
addr() { echo "10.77.$net.$((10 + $1))"; }

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# wait_rc PID SECONDS: sets rc to the exit status of PID, or 255 after SECONDS (then it is killed)
wait_rc() {
  local pid=$1 limit=$2 waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then break; fi
    sleep 0.1
    waited=$((waited + 1))
    if [ "$waited" -ge $((limit * 10)) ]; then kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rc=255; return; fi
  done
  wait "$pid"
  rc=$?
}

# wait_files DIR N SECONDS [PATTERN]: until N files named like PATTERN (default env-<rank>) exist
wait_files() {
  local dir=$1 n=$2 limit=$3 pattern=${4:-'^env-[0-9]*$'} waited=0
  while [ "$(ls "$dir" | grep -c "$pattern")" -lt "$n" ]; do
    sleep 0.1
    waited=$((waited + 1))
    [ "$waited" -lt $((limit * 10)) ] || return 1
  done
}

# no process with the job's marker anywhere (the namespaces share the pid space)
no_workers_left() {
  local marker=$1 waited=0 found
  while :; do
    # one grep over every environment (NUL-separated entries), not a process per /proc entry
    found=$(grep -lzxF "NETNS_MARKER=$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\n' ' ')
    [ -z "$found" ] && return 0
    sleep 0.2
    waited=$((waited + 1))
    [ "$waited" -lt 100 ] || { echo "left behind: $found"; return 1; }
  done
}
