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
# shellcheck source=scripts/bench_daemon.sh
. scripts/bench_daemon.sh
# shellcheck disable=SC2086 # the flags are words
bench_daemon_start "$PODHOST" "$work" "$node" "podhost-idle-$$" "$work/daemon.log" $flags
if [ -n "${KEEP:-}" ]; then
  trap 'echo "kept: daemon $pid, manifests $work/manifests; stop: rm $work/manifests/*.yaml, then kill $pid"' EXIT
else
  trap bench_daemon_stop EXIT
fi
echo "daemon $pid ($PODHOST), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/bench_idle.py "$work/sock" "$work/manifests" "$node" "$pid" "$pods" \
  "$seconds" ${KEEP:+--keep}
