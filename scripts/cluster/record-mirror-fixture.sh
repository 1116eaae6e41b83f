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
NODE=podhost-m
RECORD_NAME=record-mirror
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
record_setup
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
record_start_node
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
record_finish "$OUT"
