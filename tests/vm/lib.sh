# shellcheck shell=bash
# Helpers for the VM checks (bash). run.sh sources this before every check; a check is
# a plain bash file in checks/ that runs top to bottom and ends in one of:
#   - falling off the end / exit 0   -> PASS
#   - fail "reason"                  -> FAIL name: reason
#   - any other non-zero exit        -> FAIL name: exited with N
# Environment set by run.sh: PODHOST_SOCKET PODHOST_ROOT PODHOST_MANIFESTS PODHOST_LOGS
# NODE (pod names are <metadata.name>-$NODE) DAEMON_LOG CHECK_NAME CHECK_OUT (a per-check
# dir in the share for artefacts) SUITE_DIR.
# The guest has dash, bash and busybox; no jq: JSON goes through json.awk (flattened to
# PATH=VALUE lines, see there).

# fail MSG: the check fails with MSG (ends the check).
fail() {
  printf '%s\n' "$*" >"${CHECK_REASON:-/dev/null}"
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

# info MSG: a line in the check's output (kept in out/checks/NAME.log).
info() { printf '%s\n' "$*"; }

# assert_eq WHAT EXPECTED ACTUAL
assert_eq() {
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
}

# podhost_cli ARGS...: the CLI against the suite's daemon.
podhost_cli() { podhost --socket "$PODHOST_SOCKET" "$@"; }

# apply_manifest FILE_NAME <<YAML: writes a manifest atomically (temp name + rename, like
# editors and config tools), so the daemon never reads half a file.
apply_manifest() {
  local tmp="$PODHOST_MANIFESTS/.$1.tmp"
  cat >"$tmp" && mv -f "$tmp" "$PODHOST_MANIFESTS/$1"
}

# delete_manifest FILE_NAME
delete_manifest() { rm -f "$PODHOST_MANIFESTS/$1"; }

# json_flat < JSON: PATH=VALUE lines (see json.awk).
json_flat() { awk -f "$SUITE_DIR/json.awk"; }

# pods_flat: `podhost get pods -o json`, flattened.
pods_flat() {
  local json
  json=$(podhost_cli get pods -o json) || return 1
  printf '%s\n' "$json" | json_flat
}

# pod_json POD: the pod object from `podhost get pods -o json`, flattened: PATH=VALUE
# lines relative to the pod (metadata.uid=..., status.phase=Running,
# status.containerStatuses.0.restartCount=0). Prints nothing if there is no such pod.
pod_json() {
  local flat i
  flat=$(pods_flat) || return 1
  i=$(printf '%s\n' "$flat" | sed -n "s/^items\.\([0-9]*\)\.metadata\.name=$1\$/\1/p" | head -1)
  [ -n "$i" ] || return 0
  printf '%s\n' "$flat" | sed -n "s/^items\.$i\.//p"
}

# pod_field POD PATH: one value of pod_json (empty if absent).
pod_field() { pod_json "$1" | sed -n "s/^$(printf '%s' "$2" | sed 's/\./\\./g')=//p" | head -1; }

# wait_until TIMEOUT DESCRIPTION CMD...: polls CMD (every 0.25 s) until it succeeds;
# fails the check after TIMEOUT seconds.
wait_until() {
  local timeout=$1 what=$2 deadline
  shift 2
  deadline=$(($(date +%s) + timeout))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out after ${timeout}s waiting for $what"
    sleep 0.25
  done
}

# wait_phase POD PHASE TIMEOUT: waits until the pod reports PHASE; fails the check (with
# the phase and container states seen last) otherwise.
wait_phase() {
  local pod=$1 want=$2 timeout=$3 deadline phase=""
  deadline=$(($(date +%s) + timeout))
  while :; do
    phase=$(pod_field "$pod" status.phase)
    [ "$phase" = "$want" ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      pod_json "$pod" | grep -E '^status\.(containerStatuses|reason|message)' | head -20 >&2
      fail "pod $pod not $want after ${timeout}s (phase: '${phase:-no such pod}')"
    fi
    sleep 0.25
  done
}

# container_status POD CONTAINER: the container's entry of status.containerStatuses,
# flattened like pod_json (state.running.startedAt=..., restartCount=0, ...).
container_status() {
  local flat i
  flat=$(pod_json "$1") || return 1
  i=$(printf '%s\n' "$flat" | sed -n "s/^status\.containerStatuses\.\([0-9]*\)\.name=$2\$/\1/p" | head -1)
  [ -n "$i" ] || return 0
  printf '%s\n' "$flat" | sed -n "s/^status\.containerStatuses\.$i\.//p"
}

# wait_running POD CONTAINER TIMEOUT: waits until the container is running (phase Running
# alone is not enough: a pod stays Running while a container crash-loops); fails the check
# with the container's last state otherwise.
wait_running() {
  local pod=$1 c=$2 timeout=$3 deadline st
  deadline=$(($(date +%s) + timeout))
  while :; do
    st=$(container_status "$pod" "$c")
    printf '%s\n' "$st" | grep -q '^state\.running\.' && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      shim_log_tail "$pod" "$c" >&2
      fail "container $c of $pod not running after ${timeout}s: $(printf '%s\n' "$st" |
        grep -E '^(state|lastState)\.[a-z]+\.(reason|message|exitCode)=|^restartCount=' | tr '\n' ' ')"
    fi
    sleep 0.25
  done
}

# shim_log_tail POD CONTAINER [LINES]: the end of the newest attempt's shim.log (the
# shims log libcgroups at debug level in the VM: controllers it could not enable).
shim_log_tail() {
  local dir
  dir=$(attempt_dir "$1" "$2") || return 0
  [ -f "$dir/shim.log" ] || return 0
  echo "-- $dir/shim.log (last ${3:-15} lines):"
  tail -n "${3:-15}" "$dir/shim.log"
}

# wait_pod_gone POD TIMEOUT
pod_absent() { [ -z "$(pod_field "$1" metadata.name)" ]; }
wait_pod_gone() { wait_until "$2" "pod $1 to disappear" pod_absent "$1"; }

# pod_uid POD
pod_uid() { pod_field "$1" metadata.uid; }

# attempt_dir POD CONTAINER: the container's newest attempt dir in the daemon's root dir
# (pods/<uid>/containers/<name>/<attempt>/: config.json, started.json, exit.json...).
attempt_dir() {
  local uid dir a n=-1
  uid=$(pod_uid "$1")
  [ -n "$uid" ] || return 1
  dir=$PODHOST_ROOT/pods/$uid/containers/$2
  for a in "$dir"/*/; do
    a=$(basename "$a")
    case "$a" in '' | *[!0-9]*) continue ;; esac
    [ "$a" -gt "$n" ] && n=$a
  done
  [ "$n" -ge 0 ] || return 1
  printf '%s\n' "$dir/$n"
}

# container_pid POD CONTAINER: the host pid of the container's init process (from the
# shim's started.json), or nothing.
container_pid() {
  local dir
  dir=$(attempt_dir "$1" "$2") || return 1
  [ -f "$dir/started.json" ] || return 1
  json_flat <"$dir/started.json" | sed -n 's/^init_pid=//p'
}

# cgroup_of PID: the process's cgroup v2 path (the `0::` line of /proc/PID/cgroup).
cgroup_of() { sed -n 's/^0:://p' "/proc/$1/cgroup"; }

# cgroup_dir PID: the same as a directory under /sys/fs/cgroup.
cgroup_dir() {
  local cg
  cg=$(cgroup_of "$1") || return 1
  [ -n "$cg" ] || return 1
  printf '/sys/fs/cgroup%s\n' "${cg%/}"
}

# daemon_log_has PATTERN: grep -E on the daemon's log.
daemon_log_has() { grep -qE "$1" "$DAEMON_LOG"; }

# check WHAT EXPECTED ACTUAL: records a mismatch in the caller's `problems` array (the
# check fails at its end with all of them) or logs the match.
check() {
  if [ "$2" != "$3" ]; then
    problems+=("$1: expected '$2', got '$3'")
  else
    info "ok: $1 = $3"
  fi
}

# value KEY TEXT: what follows KEY= on the first line of TEXT that starts with it.
value() { printf '%s\n' "$2" | sed -n "s/^$1=//p" | head -1; }

# json_string: stdin as one JSON string (quotes, backslashes and newlines escaped), for
# embedding a script in a manifest.
json_string() { awk 'BEGIN{ORS=""; print "\""} {gsub(/\\/,"\\\\"); gsub(/"/,"\\\""); if (NR>1) print "\\n"; print} END{print "\""}'; }

# logs_done POD CONTAINER: the container's log once it printed a line "done" (waits up
# to 30 s; prints what there is otherwise).
logs_done() {
  local out i
  for i in $(seq 1 120); do
    out=$(podhost_cli logs "$1" -c "$2" 2>/dev/null)
    if printf '%s\n' "$out" | grep -qx done; then
      printf '%s\n' "$out"
      return 0
    fi
    sleep 0.25
  done
  printf '%s\n' "$out"
}
