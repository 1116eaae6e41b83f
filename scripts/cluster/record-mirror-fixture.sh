#!/usr/bin/env bash
# scripts/cluster/record-mirror-fixture.sh OUT.jsonl — records a real API server's answers
# to one podhost node keeping the mirror pods of its static pods, for
# tests/cluster_replay.rs:
#   - a pod carrying kubernetes.io/config.mirror that no static pod of the node has
#     exists before the node starts (as one a previous daemon left): deleted as an orphan;
#   - a static pod `sweb`: its mirror pod created, its status written there;
#   - the mirror pod deleted with kubectl: deleted by the node (grace 0, UID) and created
#     again;
#   - the manifest edited: the mirror pod replaced;
#   - the manifest removed: the mirror pod deleted once the static pod terminated.
# Needs KUBE_APISERVER (and etcd, kubectl) as scripts/cluster-test.sh; PODHOST defaults
# to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT.jsonl}
: "${KUBE_APISERVER:?set KUBE_APISERVER}"
KUBECTL=${KUBECTL:-$(command -v kubectl)}
PODHOST=${PODHOST:-target/debug/podhost}
WORK=$(mktemp -d /tmp/podhost-record-mirror.XXXXXX)
NODE=podhost-m
CGROUP_ROOT=/podhost-record-mirror-$$
PID=
cleanup() {
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  bash scripts/cluster/control-plane-down.sh "$WORK/cp" >/dev/null 2>&1 || true
  find /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  find /sys/fs/cgroup -maxdepth 1 -type d -name "${CGROUP_ROOT#/}" -exec rmdir {} + 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
bash scripts/cluster/control-plane-up.sh "$WORK/cp" "$NODE" >/dev/null
# shellcheck disable=SC1091
source "$WORK/cp/env.sh"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $until ] || { echo "timed out: $*" >&2; exit 1; }; sleep 0.2; done; }
bash oci/busybox/build.sh "$WORK/busybox-oci" >/dev/null
"$PODHOST" load --socket "$WORK/podhost.sock" --root-dir "$WORK/root" "$WORK/busybox-oci" >/dev/null
k create serviceaccount default >/dev/null 2>&1 || true
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: sold-$NODE, annotations: {kubernetes.io/config.mirror: "0123abcd"}}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers: [{name: app, image: localhost/busybox:latest, imagePullPolicy: Never}]
YAML
mkdir -p "$WORK/manifests"
static() { # MARK
  cat >"$WORK/manifests/sweb.yaml.tmp" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: sweb, labels: {mark: "$1"}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
YAML
  mv "$WORK/manifests/sweb.yaml.tmp" "$WORK/manifests/sweb.yaml"
}
static 1
"$PODHOST" --socket "$WORK/podhost.sock" daemon --node-name "$NODE" --root-dir "$WORK/root" \
  --pod-manifest-path "$WORK/manifests" --log-dir "$WORK/logs" --config-dir "$WORK/config" \
  --pod-network none --eviction-hard= --cgroup-root "$CGROUP_ROOT" \
  --kubeconfig "$WORK/cp/node-$NODE.kubeconfig" --kube-record "$WORK/api.jsonl" \
  >"$WORK/daemon.log" 2>&1 &
PID=$!
field() { k get pod "sweb-$NODE" -o jsonpath="$1"; }
running() { [ "$(field '{.status.phase}/{.status.containerStatuses[0].ready}')" = Running/true ]; }
gone() { ! k get pod "$1" >/dev/null 2>&1; }
wait_for 60 running
wait_for 30 gone "sold-$NODE"
uid=$(field '{.metadata.uid}')
k delete pod "sweb-$NODE" --wait=false >/dev/null
again() { local u; u=$(field '{.metadata.uid}') && [ -n "$u" ] && [ "$u" != "$uid" ] && running; }
wait_for 30 again
static 2
edited() { [ "$(field '{.metadata.labels.mark}')" = 2 ] && running; }
wait_for 40 edited
rm "$WORK/manifests/sweb.yaml"
wait_for 30 gone "sweb-$NODE"
sleep 2
# SIGTERM: the daemon drops its watch, which writes the watch's events to the record.
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
cp "$WORK/api.jsonl" "$OUT"
echo "recorded $(wc -l <"$OUT") exchanges into $OUT"
