#!/usr/bin/env bash
# Benchmark: what pod networking costs and gives, with the release build, each daemon
# in a network namespace of its own (the machine's network is never touched).
#
#   1. pod start, manifest written -> Running (scripts/bench_lifecycle.py), with
#      `--pod-network none` (loopback only) and with the built-in bridge, back to back;
#      the difference is the bridge's cost per pod (goal: under 5 ms);
#   2. pod-to-pod TCP throughput over the bridge (iperf3 between two pods, from an image
#      of Debian's iperf3 built offline) relative to TCP over a pod's loopback.
#
# Usage: scripts/bench-network.sh [RUNS]   (RUNS pod starts per mode, default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
runs=${1:-20}
bash scripts/install-deps.sh python3 iperf3
cargo build --release --locked -q
podhost=$(pwd)/target/release/podhost
work=$(mktemp -d /tmp/podhost-bench-net.XXXXXX)
netns=podhost-bench-$$
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  for p in $(grep -l -s -F "$work" /proc/[0-9]*/cmdline | cut -d/ -f3); do
    kill -9 "$p" 2>/dev/null || true
  done
  sleep 0.3
  grep -F " $work" /proc/self/mountinfo | awk '{print $5}' | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done || true
  ip netns del "$netns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$netns"
ip -n "$netns" link set lo up
bash oci/busybox/build.sh "$work/layout" >/dev/null 2>&1
iperf_layout=${CARGO_TARGET_DIR:-target}/tmp/debian-images/iperf3
bash scripts/build-debian-image.sh "$iperf_layout" iperf3 iperf3 >/dev/null

# Starts a daemon on its own root with FLAGS in the bench namespace.
start_daemon() {
  local root=$1
  shift
  mkdir -p "$root/manifests"
  "$podhost" load --socket "$root/sock" --root-dir "$root/root" "$work/layout" >/dev/null 2>&1
  nsenter --net="/run/netns/$netns" -- "$podhost" daemon \
    --pod-manifest-path "$root/manifests" --root-dir "$root/root" --log-dir "$root/logs" \
    --socket "$root/sock" --node-name "bench$$" "$@" >"$root/daemon.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$root/sock" ] && break; sleep 0.05; done
}

stop_daemon() {
  kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  pid=
}

echo "== pod start without a pod network (--pod-network none), $runs pods"
start_daemon "$work/none" --pod-network none
python3 scripts/bench_lifecycle.py "$work/none/sock" "$work/none/manifests" "bench$$" "$runs" \
  "$work/none/root" | tee "$work/none.txt"
stop_daemon
echo "== pod start with the built-in bridge, $runs pods"
start_daemon "$work/bridge" --pod-network bridge
python3 scripts/bench_lifecycle.py "$work/bridge/sock" "$work/bridge/manifests" "bench$$" "$runs" \
  "$work/bridge/root" | tee "$work/bridge.txt"
none_ms=$(awk '/-> Running/ {print $6}' "$work/none.txt")
bridge_ms=$(awk '/-> Running/ {print $6}' "$work/bridge.txt")
echo "bridge cost per pod start (median difference): $(python3 -c "print(f'{$bridge_ms - $none_ms:.1f}')") ms"

echo "== pod-to-pod TCP throughput (iperf3, 5 s) vs a pod's loopback"
"$podhost" --socket "$work/bridge/sock" load "$iperf_layout" >/dev/null
iperf_pod() {
  cat >"$work/bridge/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/iperf3:latest
    imagePullPolicy: Never
    command: [iperf3, -s]
EOF
}
iperf_pod server
iperf_pod client
ip_of() {
  for _ in $(seq 200); do
    ip=$("$podhost" --socket "$work/bridge/sock" get pods -A -o json | python3 -c "
import json, sys
for p in json.load(sys.stdin)['items']:
    if p['metadata']['name'] == '$1-bench$$' and p.get('status', {}).get('phase') == 'Running':
        print(p['status'].get('podIP', ''))")
    [ -n "$ip" ] && { echo "$ip"; return; }
    sleep 0.1
  done
  echo "pod $1 did not start; see $work/bridge/daemon.log" >&2
  exit 1
}
server_ip=$(ip_of server)
ip_of client >/dev/null
sleep 0.5
gbps() {
  "$podhost" --socket "$work/bridge/sock" exec "client-bench$$" -- iperf3 -c "$1" -t 5 -J |
    python3 -c "import json,sys; print(f\"{json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e9:.2f}\")"
}
bridge_gbps=$(gbps "$server_ip")
"$podhost" --socket "$work/bridge/sock" exec "client-bench$$" -- sh -c 'iperf3 -s -D -p 5202' >/dev/null
sleep 0.3
loop_gbps=$("$podhost" --socket "$work/bridge/sock" exec "client-bench$$" -- iperf3 -c 127.0.0.1 -p 5202 -t 5 -J |
  python3 -c "import json,sys; print(f\"{json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e9:.2f}\")")
echo "pod -> pod over podhost0:  $bridge_gbps Gbit/s"
echo "pod loopback:              $loop_gbps Gbit/s"
echo "bridge / loopback:         $(python3 -c "print(f'{$bridge_gbps / $loop_gbps:.2f}')")"
stop_daemon
