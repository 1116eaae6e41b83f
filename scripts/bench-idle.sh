#!/usr/bin/env bash
# Benchmark: the daemon's idle cost with PODS pods running (default 250): its RSS, PSS,
# anonymous memory, threads, CPU (% of one core) and wakeups per second over SECONDS.
# Usage: scripts/bench-idle.sh [PODS]
#   SECONDS_IDLE   how long the idle daemon is measured (default 60)
#   PODHOST        the podhost binary to measure (default: a fresh release build;
#                  podhost-monitor must be beside it), for A/B runs of two builds
#   PODHOST_FLAGS  daemon flags (default: --pod-network none --eviction-hard=)
#   KEEP=1         leave the daemon and its pods running after the figures (prints how
#                  to stop them), to profile it (perf, strace)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
pods=${1:-250}
seconds=${SECONDS_IDLE:-60}
flags=${PODHOST_FLAGS:---pod-network none --eviction-hard=}
bash scripts/install-deps.sh python3
if [ -z "${PODHOST:-}" ]; then
  cargo build --release --locked -q
  PODHOST=$(pwd)/target/release/podhost
fi
work=$(mktemp -d /tmp/podhost-idle.XXXXXX)
node=idle$$
cleanup() {
  if [ -n "${pid:-}" ]; then
    rm -f "$work"/manifests/*.yaml
    for _ in $(seq 600); do
      "$PODHOST" --socket "$work/sock" get pods -o json 2>/dev/null \
        | grep -q '"items": \[\]' && break
      sleep 0.5
    done
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  fi
  umount -R "$work/root" 2>/dev/null || true
  rm -rf "$work"
  for top in /sys/fs/cgroup /sys/fs/cgroup/*/; do
    [ -d "$top/podhost-idle-$$" ] &&
      find "$top/podhost-idle-$$" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  true
}
mkdir -p "$work/manifests"
bash oci/busybox/build.sh "$work/layout" >/dev/null 2>&1
"$PODHOST" load --socket "$work/sock" --root-dir "$work/root" "$work/layout" >/dev/null
# shellcheck disable=SC2086 # the flags are words
"$PODHOST" daemon --pod-manifest-path "$work/manifests" --root-dir "$work/root" \
  --log-dir "$work/logs" --socket "$work/sock" --node-name "$node" \
  --cgroup-root "podhost-idle-$$" $flags >"$work/daemon.log" 2>&1 &
pid=$!
if [ -n "${KEEP:-}" ]; then
  trap 'echo "kept: daemon $pid, manifests $work/manifests; stop: rm $work/manifests/*.yaml, then kill $pid"' EXIT
else
  trap cleanup EXIT
fi
for _ in $(seq 200); do [ -S "$work/sock" ] && break; sleep 0.05; done
echo "daemon $pid ($PODHOST), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/bench_idle.py "$work/sock" "$work/manifests" "$node" "$pid" "$pods" \
  "$seconds" ${KEEP:+--keep}
