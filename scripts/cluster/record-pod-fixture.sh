#!/usr/bin/env bash
# scripts/cluster/record-pod-fixture.sh OUT.jsonl — records a real API server's answers
# to one podhost node running pods bound to it, for tests/cluster_replay.rs:
#   - a pod `web` created with spec.nodeName, Running, deleted with grace 5: preStop,
#     TERM, final status, deleted by the node with grace 0 and its UID;
#   - a pod `stubborn` ignoring TERM, force deleted (grace 0): the node's final status
#     write finds it gone (404);
#   - a mirror pod's look-alike (a pod carrying kubernetes.io/config.mirror), which the
#     pod watch must not take for a pod to run. (Since mirror pods are kept, the node
#     also deletes it as an orphan — no static pod has its name; pods.jsonl was recorded
#     before that, and record-mirror-fixture.sh records that case.)
# Needs KUBE_APISERVER (and etcd, kubectl) as scripts/cluster-test.sh; PODHOST defaults
# to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT.jsonl}
: "${KUBE_APISERVER:?set KUBE_APISERVER}"
KUBECTL=${KUBECTL:-$(command -v kubectl)}
PODHOST=${PODHOST:-target/debug/podhost}
WORK=$(mktemp -d /tmp/podhost-record.XXXXXX)
NODE=podhost-a
CGROUP_ROOT=/podhost-record-$$
PID=
cleanup() {
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  bash scripts/cluster/control-plane-down.sh "$WORK/cp" >/dev/null 2>&1 || true
  find /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
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
# The look-alike mirror pod exists before the node starts: it is in the first list.
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: static-web-$NODE, annotations: {kubernetes.io/config.mirror: "0123abcd"}}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers: [{name: app, image: localhost/busybox:latest, imagePullPolicy: Never}]
YAML
mkdir -p "$WORK/manifests"
"$PODHOST" --socket "$WORK/podhost.sock" daemon --node-name "$NODE" --root-dir "$WORK/root" \
  --pod-manifest-path "$WORK/manifests" --log-dir "$WORK/logs" --config-dir "$WORK/config" \
  --pod-network none --eviction-hard= --cgroup-root "$CGROUP_ROOT" \
  --kubeconfig "$WORK/cp/node-$NODE.kubeconfig" --kube-record "$WORK/api.jsonl" \
  >"$WORK/daemon.log" 2>&1 &
PID=$!
wait_for 30 bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
pod() { # NAME COMMAND [PRESTOP]
  local prestop=""
  [ -n "${3:-}" ] && prestop="    lifecycle: {preStop: {exec: {command: [sh, -c, '$3']}}}"
  k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, '$2']
$prestop
YAML
}
running() { [ "$(k get pod "$1" -o jsonpath='{.status.phase}/{.status.containerStatuses[0].ready}')" = Running/true ]; }
gone() { ! k get pod "$1" >/dev/null 2>&1; }
pod web 'trap "exit 0" TERM; while :; do sleep 1; done' 'sleep 1'
wait_for 30 running web
k delete pod web --grace-period=5 --wait=false >/dev/null
wait_for 30 gone web
pod stubborn 'trap "" TERM; while :; do sleep 1; done'
wait_for 30 running stubborn
k delete pod stubborn --grace-period=0 --force >/dev/null 2>&1
sleep 5
# SIGTERM: the daemon drops its watch, which writes the watch's events to the record.
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
cp "$WORK/api.jsonl" "$OUT"
echo "recorded $(wc -l <"$OUT") exchanges into $OUT"
