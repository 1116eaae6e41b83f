#!/usr/bin/env bash
# Benchmark: `podhost port-forward` with the release build, on temp dirs: the time to
# open a forwarded connection and fetch a small page (curl, sequential, median), and the
# throughput of a large download through the forward versus the same download from
# inside the pod's network namespace (its loopback, no forward).
# Usage: scripts/bench-port-forward.sh [CONNECTIONS] [MIB]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
conns=${1:-200}
mib=${2:-256}
cargo build --release --locked -q
podhost=$(pwd)/target/release/podhost
work=$(mktemp -d /tmp/podhost-bench-pf.XXXXXX)
node=pfbench$$
cleanup() {
  [ -n "${fwd:-}" ] && kill "$fwd" 2>/dev/null && wait "$fwd" 2>/dev/null || true
  if [ -n "${pid:-}" ]; then
    rm -f "$work/manifests/web.yaml"
    for _ in $(seq 100); do
      "$podhost" --socket "$work/sock" get pods 2>&1 | grep -q web || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/manifests"
bash oci/busybox/build.sh "$work/layout" >/dev/null 2>&1
"$podhost" load --socket "$work/sock" --root-dir "$work/root" "$work/layout" >/dev/null 2>&1
"$podhost" daemon --pod-manifest-path "$work/manifests" --root-dir "$work/root" \
  --log-dir "$work/logs" --socket "$work/sock" --node-name "$node" \
  >"$work/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$work/sock" ] && break; sleep 0.05; done
cat >"$work/manifests/web.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir -p /www && echo hi > /www/index.html && dd if=/dev/zero of=/www/big bs=1048576 count=$mib 2>/dev/null && exec httpd -f -p 80 -h /www"]
    readinessProbe:
      tcpSocket:
        port: 80
      periodSeconds: 1
YAML
pod=web-$node
for _ in $(seq 600); do
  "$podhost" --socket "$work/sock" get pods 2>/dev/null | grep -q "web-$node *1/1" && break
  sleep 0.1
done
"$podhost" --socket "$work/sock" port-forward "$pod" :80 >"$work/fwd.out" 2>"$work/fwd.err" &
fwd=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) -> 80$/\1/p' "$work/fwd.out")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { cat "$work/fwd.err" >&2; exit 1; }

for _ in $(seq "$conns"); do
  curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/index.html"
done | sort -n | awk '{t[NR]=$1} END {printf "connection + small GET through the forward: median %.2f ms, p90 %.2f ms (%d sequential)\n", t[int(NR/2)+1]*1000, t[int(NR*0.9)]*1000, NR}'

uid=$("$podhost" --socket "$work/sock" get pods -A -o json | sed -n 's/.*"uid": "\([0-9a-f]*\)".*/\1/p' | head -1)
ns=$work/root/pods/$uid/ns/net
fwd_s=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/big")
direct_s=$(nsenter --net="$ns" curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:80/big")
awk -v m="$mib" -v f="$fwd_s" -v d="$direct_s" 'BEGIN {
  printf "%d MiB download: through the forward %.0f MiB/s, inside the pod (loopback) %.0f MiB/s (%.0f%%)\n", m, m/f, m/d, 100*(m/f)/(m/d) }'
