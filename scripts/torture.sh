#!/usr/bin/env bash
# The kill -9 torture test: a churn of pods while the daemon is kill -9'd and restarted
# at random moments and a few shims are kill -9'd; the containers' own records (their
# log lines) are compared with podhost's, and nothing may be left behind (see
# scripts/torture.py). Run as root, with the release build (PODHOST_BIN=path: that
# binary instead, e.g. target/debug/podhost as scripts/test.sh runs it).
# Usage: scripts/torture.sh [--short] [--cluster] [torture.py options, e.g. --seed N]
#   full (default): 200 pods, 50 daemon kills, 5 shim kills over 5 minutes
#   --short (CI):    40 pods, 10 daemon kills, 2 shim kills over 1 minute
#   --cluster:       the daemon is a node of a live control plane (etcd, kube-apiserver
#                    and kube-controller-manager from scripts/cluster/build-control-plane.sh,
#                    in the run's network namespace) without --pod-cidr: every restart
#                    waits for the Node's podCIDR again while the last one's pods run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "scripts/torture.sh must run as root" >&2; exit 1; }
size=(--pods 200 --kills 50 --shim-kills 5 --duration 300)
if [ "${1:-}" = "--short" ]; then
  shift
  size=(--pods 40 --kills 10 --shim-kills 2 --duration 60 --live 12)
fi
cluster=0
if [ "${1:-}" = "--cluster" ]; then
  shift
  cluster=1
fi
command -v python3 >/dev/null || bash scripts/install-deps.sh python3
PODHOST=${PODHOST_BIN:-target/release/podhost}
[ -n "${PODHOST_BIN:-}" ] || cargo build --release --locked -q
[ -x "$PODHOST" ] || { echo "torture: $PODHOST missing" >&2; exit 1; }
PODHOST=$(cd "$(dirname "$PODHOST")" && pwd)/$(basename "$PODHOST")
work=$(mktemp -d /tmp/podhost-torture.XXXXXX)
export PODHOST_TORTURE_CGROUP_ROOT=/podhost-torture-$$
# The daemon's "host" network namespace (see torture.py).
export PODHOST_TORTURE_NETNS=podhost-torture-$$
ip netns add "$PODHOST_TORTURE_NETNS"
ip -n "$PODHOST_TORTURE_NETNS" link set lo up
cleanup() {
  local rc=$?
  # A failed run shows what its daemon said last; its work dir goes below.
  if [ "$rc" -ne 0 ] && [ -f "$work/daemon.log" ]; then
    echo "---- the daemon's log (last 40 lines) ----"
    tail -40 "$work/daemon.log" | cut -c1-400
  elif [ "$rc" -ne 0 ] && [ -d "$work/cp/logs" ]; then
    # Failed before the daemon ran: bringing the control plane up.
    for log in "$work"/cp/logs/*.log; do
      echo "---- $(basename "$log") (last 15 lines) ----"
      tail -15 "$log" | cut -c1-400
    done
  fi
  [ "$cluster" = 0 ] || bash scripts/cluster/control-plane-down.sh "$work/cp" --keep >/dev/null 2>&1 || true
  # Only what this run started: processes whose command line names its work dir.
  for p in $(grep -l -s -F "$work" /proc/[0-9]*/cmdline | cut -d/ -f3); do
    kill -9 "$p" 2>/dev/null || true
  done
  sleep 0.5
  grep -F " $work" /proc/self/mountinfo | awk '{print $5}' | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done || true
  # The daemon's cgroup root in every hierarchy (emptied above), deepest first.
  find /sys/fs/cgroup/*/"${PODHOST_TORTURE_CGROUP_ROOT#/}" -depth -type d \
    -exec rmdir {} + 2>/dev/null || true
  ip netns del "$PODHOST_TORTURE_NETNS" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
bash oci/busybox/build.sh "$work/layout" >/dev/null 2>&1
"$PODHOST" load --socket "$work/sock" --root-dir "$work/root" "$work/layout" >/dev/null
mode=()
if [ "$cluster" = 1 ]; then
  bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
  command -v etcd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
  # The control plane on the namespace's loopback, where the daemon reaches it; the
  # controller manager allocates the Node a /24 of CLUSTER_CIDR.
  ip netns exec "$PODHOST_TORTURE_NETNS" env KUBE_APISERVER="$bin/kube-apiserver" \
    KUBE_CONTROLLER_MANAGER="$bin/kube-controller-manager" KUBE_SCHEDULER= CLUSTER_CIDR=10.88.0.0/16 \
    bash scripts/cluster/control-plane-up.sh "$work/cp" torture-node >/dev/null
  mode=(--kubeconfig "$work/cp/node-torture-node.kubeconfig" --node-name torture-node)
fi
python3 scripts/torture.py --podhost "$PODHOST" --work "$work" "${size[@]}" "${mode[@]}" "$@"
