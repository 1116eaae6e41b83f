#!/bin/bash
# The VM suite's entry point, run inside the guest by vm/init (cwd: the 9p share at
# /mnt/host; this file is the share's suite/run.sh). Starts one podhost daemon the way a
# host would run it (in its own service cgroup, system.slice/podhost), then runs every
# checks/*.sh in name order, each in a fresh bash with lib.sh loaded (own session,
# watchdog: CHECK_TIMEOUT), and prints
#   PASS name | FAIL name: reason         for each check, and at the end
#   vm-suite: N passed, M failed
# Add a check by adding a file to checks/; nothing here changes.
#
# Share layout (made by scripts/vm-test.sh): bin/podhost, busybox-oci/ and
# seccomp-probe-oci/ (OCI layouts), apparmor-podhost-default (the profile's text),
# suite/ (tests/vm), suite.env (CHECKS, CHECK_TIMEOUT, DAEMON_CGROUP), out/ (results).
# Results: out/results (one line per check), out/daemon.log, out/checks/NAME.log (the
# check's output) and out/checks/NAME/ (artefacts a check keeps), out/checks/NAME.state/
# after a failure (the daemon's pods/ records: shim.log, started.json, exit.json,
# config.json; and the containers' CRI logs), out/dmesg.txt (written by vm/init).
set -uo pipefail
SUITE_DIR=$(cd "$(dirname "$0")" && pwd)
SHARE=$(dirname "$SUITE_DIR")
OUT=$SHARE/out
CHECKS='*' CHECK_TIMEOUT=180 DAEMON_CGROUP=system.slice/podhost
# shellcheck disable=SC1091
[ -f "$SHARE/suite.env" ] && . "$SHARE/suite.env"

export SUITE_DIR NODE=vm
export VM_WORK=/tmp/podhost-vm
export PODHOST_MANIFESTS=$VM_WORK/manifests PODHOST_ROOT=$VM_WORK/root PODHOST_LOGS=$VM_WORK/logs
export PODHOST_SOCKET=/run/podhost/podhost.sock
export PODS_PIDS_LIMIT=1024 # the daemon's --pod-pids-limit, checked in the pod cgroups
export DAEMON_LOG=$OUT/daemon.log
mkdir -p "$OUT/checks" "$PODHOST_MANIFESTS" "$PODHOST_ROOT" "$PODHOST_LOGS" /run/podhost
: >"$OUT/results"

# save_state DIR: copies the daemon's records of the pods that exist now (shim.log,
# started.json, exit.json, config.json...) and the containers' logs into DIR.
save_state() {
  mkdir -p "$1"
  (cd "$PODHOST_ROOT" && find pods -name '*.json' -o -name '*.log' | while read -r f; do
    mkdir -p "$1/$(dirname "$f")" && cp "$f" "$1/$f"
  done) 2>/dev/null
  cp -r "$PODHOST_LOGS" "$1/pod-logs" 2>/dev/null
}
# Progress lines; only the summary starts with "vm-suite:" (CI reads that one).
say() { printf 'suite: %s\n' "$*"; }
secs() { cut -d' ' -f1 /proc/uptime; }
passed=0 failed=0
record() { # record PASS|FAIL name [reason]
  local line="$1 $2"
  [ "$1" = FAIL ] && line+=": $3"
  printf '%s\n' "$line" | tee -a "$OUT/results"
  if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
finish() {
  if [ -n "${daemon_pid:-}" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.5; done
  fi
  if [ "$failed" -gt 0 ] && [ -f "$DAEMON_LOG" ]; then
    echo "---- daemon log (last 40 lines of out/daemon.log) ----"
    tail -n 40 "$DAEMON_LOG"
    echo "----"
  fi
  echo "vm-suite: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}
# shellcheck disable=SC2317 # called by the trap
on_signal() {
  [ -n "${pid:-}" ] && kill -KILL -- "-$pid" 2>/dev/null
  record FAIL "${name:-setup}" "stopped by a signal (the VM run's time limit?)"
  finish
}
trap on_signal TERM INT

# ---- podhost ------------------------------------------------------------------------
# A local copy: a rebuild on the host must not change the binary under the running daemon.
cp "$SHARE/bin/podhost" /usr/local/bin/podhost && chmod 0755 /usr/local/bin/podhost
cp "$SHARE/bin/podhost-monitor" /usr/local/bin/podhost-monitor && chmod 0755 /usr/local/bin/podhost-monitor
cp "$SHARE/bin/podhost-shim" /usr/local/bin/podhost-shim && chmod 0755 /usr/local/bin/podhost-shim
say "$(podhost --version 2>&1), kernel $(uname -r), $(nproc) CPUs, $(($(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo) / 1024)) MiB, cgroup controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
t=$(secs)
if ! podhost load --root-dir "$PODHOST_ROOT" "$SHARE/busybox-oci" >"$OUT/load.log" 2>&1; then
  cat "$OUT/load.log"
  record FAIL setup "podhost load failed"
  finish
fi
say "image loaded in $(echo "$(secs) $t" | awk '{printf "%.1f", $1 - $2}') s"

# ---- the daemon, in its own service cgroup ------------------------------------------
# Like a systemd service with Delegate=yes: its parent slice has the controllers enabled
# for it, and the daemon starts in the service's own cgroup (not a leaf it made itself).
# DAEMON_CGROUP=/ keeps it in the root cgroup instead.
DAEMON_CGROUP=${DAEMON_CGROUP#/}
DAEMON_CGROUP=${DAEMON_CGROUP%/}
if [ -n "$DAEMON_CGROUP" ]; then
  cg=/sys/fs/cgroup
  for part in ${DAEMON_CGROUP//\// }; do
    controllers=$(cat "$cg/cgroup.controllers")
    for c in $controllers; do echo "+$c" >"$cg/cgroup.subtree_control" 2>/dev/null || true; done
    cg=$cg/$part
    mkdir -p "$cg"
  done
fi
say "daemon cgroup: /$DAEMON_CGROUP (controllers available there: $(cat "/sys/fs/cgroup/${DAEMON_CGROUP:+$DAEMON_CGROUP/}cgroup.controllers"))"
(
  # Move this subshell into the service cgroup, then become the daemon.
  [ -z "$DAEMON_CGROUP" ] || echo "$BASHPID" >"/sys/fs/cgroup/$DAEMON_CGROUP/cgroup.procs" ||
    { echo "cannot move the daemon into /$DAEMON_CGROUP"; exit 1; }
  # Shims log libcgroups' debug lines (controllers it could not enable, and why).
  export NO_COLOR=1 RUST_LOG=${RUST_LOG:-info} PODHOST_SHIM_LOG=${PODHOST_SHIM_LOG:-info,libcgroups=debug}
  exec podhost daemon --pod-manifest-path "$PODHOST_MANIFESTS" --root-dir "$PODHOST_ROOT" \
    --log-dir "$PODHOST_LOGS" --socket "$PODHOST_SOCKET" --node-name "$NODE" \
    --crashloop-initial-backoff 1 --crashloop-max-backoff 4 --rescan-interval 2 \
    --pod-pids-limit "$PODS_PIDS_LIMIT" --read-only-port 10255
) </dev/null >"$DAEMON_LOG" 2>&1 &
daemon_pid=$!
export DAEMON_PID=$daemon_pid
t=$(secs)
until podhost --socket "$PODHOST_SOCKET" get pods -o json >/dev/null 2>&1; do
  if ! kill -0 "$daemon_pid" 2>/dev/null || [ "$(echo "$(secs) $t" | awk '{print ($1 - $2 > 60)}')" = 1 ]; then
    cat "$DAEMON_LOG"
    record FAIL setup "the daemon did not come up (see out/daemon.log)"
    finish
  fi
  sleep 0.2
done
say "daemon up in $(echo "$(secs) $t" | awk '{printf "%.1f", $1 - $2}') s (pid $daemon_pid, cgroup $(sed -n 's/^0:://p' "/proc/$daemon_pid/cgroup"))"

# ---- checks -------------------------------------------------------------------------
# Between checks: every manifest a check left is removed and its pods must be gone, so
# that no check sees another's pods.
cleanup_pods() {
  local n
  rm -f "$PODHOST_MANIFESTS"/* "$PODHOST_MANIFESTS"/.[!.]* 2>/dev/null
  for _ in $(seq 1 240); do
    n=$(podhost --socket "$PODHOST_SOCKET" get pods -o json 2>/dev/null | awk -f "$SUITE_DIR/json.awk" |
      grep -c '^items\.[0-9]*\.metadata\.name=')
    [ "${n:-0}" -eq 0 ] && return 0
    sleep 0.25
  done
  return 1
}

for check in "$SUITE_DIR"/checks/*.sh; do
  [ -e "$check" ] || continue
  name=$(basename "$check" .sh)
  # shellcheck disable=SC2254
  case "$name" in $CHECKS) ;; *) continue ;; esac
  export CHECK_NAME=$name CHECK_OUT=$OUT/checks/$name CHECK_REASON=/tmp/check-reason.$name
  timeout_mark=/tmp/check-timeout.$name fifo=/tmp/check-out.$name
  rm -f "$CHECK_REASON" "$timeout_mark" "$fifo"
  mkfifo "$fifo"
  t=$(secs)
  echo "== $name"
  # The output goes to out/checks/NAME.log and, indented, to the console as it comes
  # (printf is unbuffered). The reader sits outside the check's session, so a timeout
  # that kills the check does not lose its last lines.
  (tee "$OUT/checks/$name.log" <"$fifo" | while IFS= read -r l; do printf '   %s\n' "$l"; done) &
  reader=$!
  # The check: a fresh bash with lib.sh, in its own session and process group (setsid
  # does not fork here: a background job of a non-interactive shell is no group leader),
  # so that everything it started can be killed with it.
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c '. "$SUITE_DIR/lib.sh" && . "$1"' "$name" "$check" >"$fifo" 2>&1 </dev/null &
  pid=$!
  # A check may ask for a longer watchdog in a "# check-timeout: SECONDS" line.
  limit=$(sed -n 's/^# check-timeout: *\([0-9][0-9]*\) *$/\1/p' "$check" | head -1)
  [ -n "$limit" ] && [ "$limit" -gt "$CHECK_TIMEOUT" ] || limit=$CHECK_TIMEOUT
  setsid sh -c "sleep $limit; : >$timeout_mark; kill -TERM -- -$pid; sleep 3; kill -KILL -- -$pid" >/dev/null 2>&1 &
  watchdog=$!
  wait "$pid"
  rc=$?
  kill -KILL -- "-$watchdog" 2>/dev/null
  kill -KILL -- "-$pid" 2>/dev/null # whatever the check left running in the background
  wait "$watchdog" "$reader" 2>/dev/null
  rm -f "$fifo"
  took=$(echo "$(secs) $t" | awk '{printf "%.1f", $1 - $2}')
  if [ "$rc" -eq 0 ] && [ ! -e "$timeout_mark" ]; then
    record PASS "$name" && echo "   (${took} s)"
  elif [ -e "$timeout_mark" ]; then
    record FAIL "$name" "timed out after ${limit} s"
  elif [ -s "$CHECK_REASON" ]; then
    record FAIL "$name" "$(head -c 400 "$CHECK_REASON" | tr '\n' ' ')"
  else
    record FAIL "$name" "exited with $rc"
  fi
  # A failed check's pods are still there (unless it removed them): keep their records.
  [ "$rc" -eq 0 ] || save_state "$OUT/checks/$name.state"
  if ! cleanup_pods; then
    record FAIL "$name-cleanup" "pods still listed 60 s after their manifests were removed"
  fi
done
finish
