#!/usr/bin/env bash
# podhost against its peers, side by side in one run on the same image (the built-in
# busybox), with a table of the figures, the goals of issue 12 and the ratios.
#
# usage: scripts/bench.sh [-n RUNS] [-p PODS] [-i IDLE_PODS] [-P] [-L] [-J]
#   RUNS       timed runs of each peer measurement (default 30)
#   PODS       pods for podhost's start latency and burst (default 100), and the
#              podman pods whose conmons are measured (min(PODS, 20))
#   IDLE_PODS  pods running while the daemon's idle CPU and RSS are taken (default 250)
#   -P         skip the pull benchmark (scripts/bench-pull.sh)
#   -L         skip the peers (runc, crun, podman)
#   -J         write everything of the run (podhost's root and log dirs, the peers'
#              bundles, state and storage) on a fresh ext4 with a journal (mkfs
#              defaults, an 8 GiB image loop-mounted for the run) instead of the host's
#              filesystem under /tmp
#
# Where the run writes matters on the dev VM, whose root filesystem is ext4 without a
# journal: there ext4 checks, for every inode it allocates, each free inode nearby that
# was deleted in the last minutes (recently_deleted()), so a run that creates and
# deletes thousands of files (the churn makes ~40 a pod) pays more for each new one the
# longer it runs (perf on a 200-pod churn: ~28 % of the pods' CPU in that scan). On the
# loop-mounted journaled image that scan is gone, but each fsync becomes a journal
# commit plus an fsync of the image file by the loop device: the figures move both
# ways (docs/benchmarks.md).
#
# Installs the peers from Debian (runc, crun, podman, conmon, umoci, jq) with the
# project's install-deps.sh. podhost runs as a release build with --pod-network none
# (podman with --network none): the network's own cost is scripts/bench-network.sh's.
# Raw figures go to $RESULTS (default /tmp/bench-results/bench-<UTC stamp>). Run it on
# an idle machine (see /proc/loadavg): the figures are wall times.
set -euo pipefail
RUNS=30
PODS=100
IDLE=250
PULL=1
PEERS=1
JOURNALED=
while getopts "n:p:i:PLJ" o; do
  case $o in
    n) RUNS=$OPTARG ;;
    p) PODS=$OPTARG ;;
    i) IDLE=$OPTARG ;;
    P) PULL= ;;
    L) PEERS= ;;
    J) JOURNALED=1 ;;
    *) sed -n '2,30p' "$0"; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
REPO=$PWD
[ "$(id -u)" -eq 0 ] || { echo "scripts/bench.sh must run as root" >&2; exit 1; }
bash scripts/install-deps.sh python3 runc crun podman conmon catatonit jq umoci e2fsprogs
cargo build --release --locked -q
# The daemon's RSS depends on its hot functions lying together (build.rs, TEXT_ORDER):
# a list gone stale (new compiler, much changed code) shows here.
python3 scripts/text_order.py report target/release/podhost link/podhost-text-order.txt
RESULTS=${RESULTS:-/tmp/bench-results/bench-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS"
echo "results: $RESULTS (load before: $(cut -d' ' -f1-3 /proc/loadavg))"

base=$(mktemp -d /tmp/podhost-bench.XXXXXX)
image=
if [ -n "$JOURNALED" ]; then
  # Allocated up front: a sparse backing file would make the run pay for growing it.
  image=$base.img
  fallocate -l 8G "$image"
  mkfs.ext4 -q -F "$image"
  mount -o loop "$image" "$base"
fi
work=$base/run
mkdir -p "$work"
if [ -n "$image" ]; then
  echo "a fresh journaled ext4 (loop, -J)" >"$RESULTS/filesystem.txt"
else
  echo "the host's filesystem ($(df --output=fstype "$base" | tail -1))" >"$RESULTS/filesystem.txt"
fi
echo "filesystem: $(cat "$RESULTS/filesystem.txt")"
node=bench$$
# shellcheck source=scripts/bench_daemon.sh
. scripts/bench_daemon.sh
finish() {
  bench_daemon_stop
  if [ -n "$image" ]; then umount "$base" || umount -l "$base"; rm -f "$image"; fi
  rm -rf "$base"
}
trap finish EXIT
podhost=$REPO/target/release/podhost
bench_daemon_start "$podhost" "$work" "$node" "podhost-bench-$$" "$RESULTS/daemon.log" \
  --pod-network none --eviction-hard=

echo "== podhost ($PODS pods, $IDLE idle pods)"
IDLE_PODS=$IDLE LOG_DIR=$work/logs python3 scripts/bench_podhost.py "$work/sock" "$work/manifests" "$node" \
  "$work/root" "$pid" "$PODS" "$RESULTS/podhost.json"
echo "{}" >"$RESULTS/peers.json"
if [ -n "$PEERS" ]; then
  echo "== peers: runc, crun, podman"
  mkdir -p "$work/peers"
  conmon_pods=$(( PODS < 20 ? PODS : 20 ))
  # The same image (same layer and config), named plainly "latest" for umoci and podman.
  bash oci/busybox/build.sh --ref latest "$work/peer-layout" >/dev/null 2>&1
  python3 scripts/bench_peers.py "$work/peers" "$work/peer-layout" "$RUNS" "$conmon_pods" \
    "$RESULTS/peers.json"
fi
echo "{}" >"$RESULTS/pull.json"
if [ -n "$PULL" ]; then
  echo "== pull: podhost vs skopeo and podman (scripts/bench-pull.sh)"
  RESULTS="$RESULTS/pull" bash scripts/bench-pull.sh -n "$(( RUNS < 10 ? RUNS : 10 ))" \
    | tee "$RESULTS/pull.txt"
  python3 - "$RESULTS/pull.txt" "$RESULTS/pull.json" <<'EOF'
import json, re, sys
out = {}
for line in open(sys.argv[1]):
    # bench-pull.sh's summary: "<image> <tool>/<peer> wall ratio R (cpu C) ..."
    m = re.search(r"^(small|big)\s+(podhost|daemon)/(skopeo|podman) wall ratio ([0-9.]+)", line)
    if m:
        out["pull_%s_%s_vs_%s" % (m.group(2), m.group(1), m.group(3))] = float(m.group(4))
json.dump(out, open(sys.argv[2], "w"), indent=1)
EOF
fi
python3 scripts/bench_table.py "$RESULTS" | tee "$RESULTS/table.md"
