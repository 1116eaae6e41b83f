#!/usr/bin/env bash
# scripts/cluster/record-podcidr-fixture.sh OUT.jsonl — records a real API server's answers
# to one podhost node with the bridge pod network and no --pod-cidr, for
# tests/cluster_replay.rs: the Node registers without a podCIDR, the node watches its
# Node (metadata.name; the watch admission follows too), the podCIDR is set (as
# kube-controller-manager would) and the
# watch delivers it. The node runs in its own network namespace (node-netns.sh), as its
# bridge must not touch the host's.
# Needs KUBE_APISERVER (and etcd, kubectl) as scripts/cluster-test.sh; PODHOST defaults
# to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT.jsonl}
NODE=podhost-a
RECORD_NAME=record-podcidr
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
# the namespace first (its state file is in WORK, which record_cleanup removes)
trap 'bash scripts/cluster/node-netns.sh down "$WORK/net"; record_cleanup' EXIT
bash scripts/cluster/node-netns.sh up "$WORK/net" "$NODE" >/dev/null
# shellcheck disable=SC1091
source "$WORK/net/netns.env"
export API_ADDRESS=$HOST_ADDR NODE_IPS="$NODE=${NODE_ADDR[$NODE]}"
record_setup
nsenter --net="/run/netns/${NODE_NETNS[$NODE]}" \
  "$PODHOST" --socket "$WORK/podhost.sock" daemon --node-name "$NODE" --root-dir "$WORK/root" \
  --pod-manifest-path "$WORK/manifests" --log-dir "$WORK/logs" --config-dir "$WORK/config" \
  --pod-network bridge --eviction-hard= --cgroup-root "$CGROUP_ROOT" \
  --kubeconfig "$WORK/cp/node-$NODE.kubeconfig" --kube-record "$WORK/api.jsonl" \
  --node-ip "${NODE_ADDR[$NODE]}" >"$WORK/daemon.log" 2>&1 &
PID=$!
wait_for 30 bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
wait_for 30 grep -q "the Node has no spec.podCIDR yet" "$WORK/daemon.log"
sleep 2
k patch node "$NODE" --type merge -p '{"spec":{"podCIDR":"10.244.7.0/24","podCIDRs":["10.244.7.0/24"]}}' >/dev/null
wait_for 30 grep -q "the Node has its podCIDR" "$WORK/daemon.log"
wait_for 30 grep -q 'reason="PodCIDR"' "$WORK/daemon.log"
sleep 1
record_finish "$OUT"
