#!/usr/bin/env bash
# Container log benchmarks through the real daemon and shim (release build, as root):
#
# 1. Writer throughput with rotation on (the kubelet's 10Mi x 5 files): a container
#    cats a 1 MiB block of 100-byte lines N times (default 1000, ~1 GB), then one of
#    2-byte lines ("y", as `yes` prints) 100 times; MB/s of container output and lines/s,
#    from the container's own start and exit times (exit.json: the pipe holds only 64 KiB,
#    so the container cannot run ahead of the writer).
# 2. `podhost logs --tail 5` on a 1 GB log file: end to end through the API, and the
#    reader alone before (whole-file forward read) and after (backward read).
#
# usage: scripts/bench-logs.sh [BLOCKS]
#
# Everything lives on a private tmpfs (unmounted on exit) so the numbers measure podhost
# and not the disk; the daemon, its containers and mounts are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
BLOCKS=${1:-1000}
[ "$(id -u)" -eq 0 ] || { echo "bench-logs.sh needs root (it runs containers)" >&2; exit 1; }

cargo build --release --bin podhost --example log_tail_bench >&2
BIN=$PWD/target/release/podhost
WORK=$(mktemp -d /tmp/podhost-bench-logs.XXXXXX)
DAEMON=
cleanup() {
  if [ -n "$DAEMON" ]; then kill "$DAEMON" 2>/dev/null || true; wait "$DAEMON" 2>/dev/null || true; fi
  for s in "$WORK"/root/pods/*/containers/*/*/started.json; do
    [ -e "$s" ] || continue
    for key in init_pid shim_pid; do
      pid=$(sed -n "s/.*\"$key\":\([0-9]*\).*/\1/p" "$s")
      [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    done
  done
  sleep 0.5
  grep -o " $WORK[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  if mountpoint -q "$WORK"; then umount "$WORK" || umount -l "$WORK"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
mount -t tmpfs -o size=6g,mode=0700 podhost-bench-logs "$WORK"
mkdir -p "$WORK/manifests"
oci/busybox/build.sh "$WORK/busybox" >/dev/null
"$BIN" load --root-dir "$WORK/root" "$WORK/busybox" >/dev/null
"$BIN" daemon --pod-manifest-path "$WORK/manifests" --root-dir "$WORK/root" \
  --log-dir "$WORK/logs" --socket "$WORK/api.sock" --node-name bench \
  --container-log-max-size 10Mi --container-log-max-files 5 >"$WORK/daemon.log" 2>&1 &
DAEMON=$!
cli() { "$BIN" --socket "$WORK/api.sock" "$@"; }
for _ in $(seq 100); do cli get pods >/dev/null 2>&1 && break; sleep 0.1; done

pod() { # NAME COMMAND
  cat >"$WORK/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", $(printf '%s' "$2" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')]
EOF
}
wait_phase() { # NAME PHASE SECONDS
  for _ in $(seq $(($3 * 10))); do
    cli get pods -A -o json | python3 -c "import json,sys; p=[i for i in json.load(sys.stdin)['items'] if i['metadata']['name']=='$1-bench']; sys.exit(0 if p and p[0]['status'].get('phase')=='$2' else 1)" && return 0
    sleep 0.1
  done
  echo "pod $1 did not reach $2; daemon log:" >&2; tail -20 "$WORK/daemon.log" >&2; exit 1
}
throughput() { # NAME BLOCK_LINE_LEN BLOCKS
  local name=$1 len=$2 blocks=$3
  # A 1 MiB block of lines of LEN bytes (newline included), catted BLOCKS times.
  pod "$name" "awk 'BEGIN{s=sprintf(\"%0$((len - 1))d\",0); n=int(1048576/$len); for(i=0;i<n;i++) print s}' >/tmp/block; i=0; while [ \$i -lt $blocks ]; do cat /tmp/block; i=\$((i+1)); done"
  wait_phase "$name" Succeeded 600
  local dir
  dir=$(grep -l "\"$name-bench\"" "$WORK"/root/pods/*/status.json 2>/dev/null | head -1 | xargs dirname)
  python3 - "$dir/containers/main/0/exit.json" "$len" "$blocks" <<'EOF'
import json, sys
from datetime import datetime
r = json.load(open(sys.argv[1]))
length, blocks = int(sys.argv[2]), int(sys.argv[3])
def t(s):
    s = s.rstrip("Z")
    head, _, frac = s.partition(".")
    return datetime.fromisoformat(head).timestamp() + float("0." + (frac or "0"))
secs = t(r["finished_at"]) - t(r["started_at"])
lines = (1048576 // length) * blocks
mb = lines * length / 1e6
print(f"{length}-byte lines: {mb:.0f} MB in {secs:.2f} s = {mb / secs:.0f} MB/s, {lines / secs / 1e6:.2f} M lines/s (rotation 10Mi x 5)")
EOF
  ls "$(dirname "$(ls -d "$WORK"/logs/*_"$name"-bench_*/main/0.log)")" | tr '\n' ' ' >&2; echo >&2
}
echo "== writer throughput through the shim (rotation on)"
throughput big 100 "$BLOCKS"
throughput yes 2 100

echo "== podhost logs --tail 5 on a 1 GB log"
pod quiet "echo first; sleep 3600"
wait_phase quiet Running 60
LOG=$(ls -d "$WORK"/logs/*_quiet-bench_*/main/0.log)
python3 - "$LOG" <<'EOF'
import sys
line = b"2026-01-01T00:00:00.000000000Z stdout F " + b"x" * 59 + b"\n"   # 100 bytes
chunk = line * 10486
with open(sys.argv[1], "ab") as f:
    for _ in range(1024):
        f.write(chunk)
    for i in range(5):
        f.write(b"2026-01-01T00:00:01.000000000Z stdout F last-%d\n" % i)
EOF
ls -l "$LOG" >&2
for i in 1 2 3; do
  /usr/bin/time -f "podhost logs --tail 5 (end to end, run $i): %e s" "$BIN" --socket "$WORK/api.sock" logs quiet-bench --tail 5 >"$WORK/tail.out"
done 2>&1
grep -q "last-4" "$WORK/tail.out" || { echo "wrong tail output:" >&2; cat "$WORK/tail.out" >&2; exit 1; }
target/release/examples/log_tail_bench "$LOG" 3
