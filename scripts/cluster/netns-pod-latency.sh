#!/bin/bash
# scripts/cluster/netns-pod-latency.sh [ROUNDS]
#
# Pod create -> Running latency (pod-latency.py, 10 pods at once, as the API server
# reports it) on a node in its own network namespace (node-netns.sh), with podhost's
# pod network (bridge, --pod-cidr) and with --pod-network none, alternating ROUNDS
# times (default 3) so that the machine's other load hits both alike.
# Needs KUBE_APISERVER and KUBECTL as cluster-test.sh; PODHOST (default target/debug/podhost).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
: "${KUBE_APISERVER:?set KUBE_APISERVER}" "${KUBECTL:?set KUBECTL}"
PODHOST=${PODHOST:-target/debug/podhost}
W=$(mktemp -d /tmp/podhost-netns-latency.XXXXXX)
CG=/podhost-netns-latency-$$
NODE=podhost-lat
DPID=""
stop_node() { [ -n "$DPID" ] && { kill "$DPID" 2>/dev/null || true; wait "$DPID" 2>/dev/null || true; }; DPID=""; rm -f "$W/podhost.sock"; }
cleanup() {
  stop_node
  bash scripts/cluster/control-plane-down.sh "$W/cp" --keep >/dev/null 2>&1 || true
  bash scripts/cluster/node-netns.sh down "$W/net" || true
  find /sys/fs/cgroup/*/"${CG#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  find /sys/fs/cgroup -maxdepth 1 -type d -name "${CG#/}" -exec rmdir {} + 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
bash scripts/cluster/node-netns.sh up "$W/net" "$NODE" >/dev/null
# shellcheck disable=SC1091
source "$W/net/netns.env"
API_ADDRESS=$HOST_ADDR NODE_IPS="$NODE=${NODE_ADDR[$NODE]}" \
  bash scripts/cluster/control-plane-up.sh "$W/cp" "$NODE" >/dev/null 2>&1
# shellcheck disable=SC1091
source "$W/cp/env.sh"
"$KUBECTL" --kubeconfig "$KUBECONFIG" create serviceaccount default >/dev/null
bash oci/busybox/build.sh "$W/bb" >/dev/null 2>&1
"$PODHOST" load --socket "$W/podhost.sock" --root-dir "$W/root" "$W/bb" >/dev/null 2>&1

start_node() { # POD-NETWORK FLAGS...
  nsenter --net="/run/netns/${NODE_NETNS[$NODE]}" \
    "$PODHOST" --socket "$W/podhost.sock" daemon --node-name "$NODE" --root-dir "$W/root" \
    --pod-manifest-path "$W/manifests" --log-dir "$W/logs" --config-dir "$W/config" \
    --eviction-hard= --cgroup-root "$CG" --kubeconfig "$W/cp/node-$NODE.kubeconfig" \
    --node-ip "${NODE_ADDR[$NODE]}" --port 10250 "$@" >"$W/daemon.log" 2>&1 &
  DPID=$!
  # the Node stays Ready in the API across restarts: wait for this daemon's socket and
  # its pod watch instead
  for _ in $(seq 1 150); do
    [ -S "$W/podhost.sock" ] && grep -q "pod network ready" "$W/daemon.log" && { sleep 3; return; }
    sleep 0.2
  done
  echo "node did not start; see $W/daemon.log" >&2; exit 1
}
for r in $(seq 1 "$ROUNDS"); do
  for mode in bridge none; do
    if [ "$mode" = bridge ]; then start_node --pod-network bridge --pod-cidr "${NODE_POD_CIDR[$NODE]}"
    else start_node --pod-network none; fi
    echo "round $r, --pod-network $mode: $(python3 scripts/cluster/pod-latency.py "$NODE" 10 localhost/busybox:latest | grep '^start')"
    stop_node
  done
done
