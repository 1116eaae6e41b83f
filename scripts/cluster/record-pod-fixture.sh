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
NODE=podhost-a
RECORD_NAME=record
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
record_setup
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
record_start_node
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
record_finish "$OUT"
