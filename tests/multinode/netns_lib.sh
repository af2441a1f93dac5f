# Shell helpers of the network-namespace tests (sourced by test_netns*.sh after they set $tmp and
# $failures): results, exit statuses with a limit, env dumps, and leftovers.

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
  local marker=$1 waited=0 p
  while :; do
    local found=""
    for p in /proc/[0-9]*; do
      grep -qz "^NETNS_MARKER=$marker\$" "$p/environ" 2>/dev/null && found="$found ${p#/proc/}"
    done
    [ -z "$found" ] && return 0
    sleep 0.2
    waited=$((waited + 1))
    [ "$waited" -lt 100 ] || { echo "left behind:$found"; return 1; }
  done
}
