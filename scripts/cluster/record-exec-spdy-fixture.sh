#!/usr/bin/env bash
# scripts/cluster/record-exec-spdy-fixture.sh [OUT.jsonl] — records the bytes a real
# kubectl sends when it execs over SPDY/3.1 (KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false),
# for tests/kubelet_exec_spdy.rs. kubectl talks to recording-proxy.py (TLS, no
# credentials of its own), which forwards to the API server as admin; the 1.20 API
# server passes the upgraded connection through to the node's kubelet API unchanged,
# so the client's SPDY bytes are what a kubelet receives. Each connection is kept as
# JSON lines {conn, from: client|server, ms, b64}; the test replays the client's side.
# Scenarios (one connection each, in this order):
#   1. printf 'hello spdy\n' | kubectl exec -i spdy -- sh -c 'cat; echo to-stderr >&2; exit 3'
#   2. kubectl exec spdy -- echo ok
#   3. kubectl exec -it spdy -- sh -c 'tty; stty size' on a 30x100 terminal (script(1))
# Needs KUBE_APISERVER and KUBECTL (kubectl 1.32: /work/k8s/toolchains/kubectl-trixie)
# as scripts/cluster-test.sh; PODHOST defaults to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-tests/fixtures/cluster/exec-spdy.jsonl}
NODE=spdy-rec
RECORD_NAME=exec-spdy
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
# shellcheck source=scripts/cluster/record-proxy-common.sh
source scripts/cluster/record-proxy-common.sh
record_setup
record_kubelet_flags
record_start_node "${RECORD_NODE_FLAGS[@]}"
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: spdy}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers:
  - {name: app, image: localhost/busybox:latest, imagePullPolicy: Never, command: [sleep, "3600"]}
YAML
wait_for 60 bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get pod spdy -o jsonpath='{.status.phase}')\" = Running ]"

record_start_proxy spdy
px() { KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false "$KUBECTL" --kubeconfig "$WORK/proxy.kubeconfig" "$@"; }
rc=0
out=$(printf 'hello spdy\n' | px exec -i spdy -- sh -c 'cat; echo to-stderr >&2; exit 3' 2>"$WORK/err") || rc=$?
[ "$out" = "hello spdy" ] && grep -qx to-stderr "$WORK/err" && [ $rc = 3 ] \
  || { echo "scenario 1: stdout '$out', stderr '$(cat "$WORK/err")', exit $rc" >&2; tail -20 "$WORK/daemon.log" >&2; exit 1; }
[ "$(px exec spdy -- echo ok)" = ok ] || { echo "scenario 2 failed" >&2; exit 1; }
# 3: a terminal (script(1) gives kubectl one, 30 rows by 100 columns): kubectl sends
# that size on the resize stream; the command's stdin is the terminal.
export -f px; export WORK KUBECTL
script -qec "stty rows 30 cols 100; px exec -it spdy -- sh -c 'tty; stty size'" /dev/null >"$WORK/tty.out" </dev/null || true
# (script(1) types a NUL when its own stdin ends; the container's terminal echoes it as ^@.)
tty_out=$(tr -d '\r' <"$WORK/tty.out" | sed 's/^\(\^@\)*//')
grep -qx '/dev/pts/[0-9]*' <<<"$tty_out" && grep -qx '30 100' <<<"$tty_out" \
  || { echo "scenario 3 (tty): $(od -c "$WORK/tty.out")" >&2; exit 1; }
record_keep_connections /exec? "$OUT"
