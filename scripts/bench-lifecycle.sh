#!/usr/bin/env bash
# Benchmark: podhost's reaction times (manifest → Running, exit → status, removal),
# with the release build, on temp dirs. Usage: scripts/bench-lifecycle.sh [RUNS]
# PODHOST_FLAGS adds daemon flags, e.g. PODHOST_FLAGS=--seccomp-default=false measures
# the start without the seccomp filter (the confinement's cost is the difference).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
runs=${1:-10}
bash scripts/install-deps.sh python3
cargo build --release --locked -q
podhost=$(pwd)/target/release/podhost
work=$(mktemp -d /tmp/podhost-bench.XXXXXX)
node=bench$$
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/manifests"
bash oci/busybox/build.sh "$work/layout" >/dev/null 2>&1
"$podhost" load --socket "$work/sock" --root-dir "$work/root" "$work/layout" >/dev/null 2>&1
"$podhost" daemon --pod-manifest-path "$work/manifests" --root-dir "$work/root" \
  --log-dir "$work/logs" --socket "$work/sock" --node-name "$node" ${PODHOST_FLAGS:-} \
  >"$work/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$work/sock" ] && break; sleep 0.05; done
python3 scripts/bench_lifecycle.py "$work/sock" "$work/manifests" "$node" "$runs" "$work/root"
