#!/usr/bin/env bash
# scripts/cluster/record-port-forward-fixture.sh [OUT.jsonl] — records the bytes a real
# kubectl sends for `kubectl port-forward` over SPDY/3.1 (portforward.k8s.io;
# KUBECTL_PORT_FORWARD_WEBSOCKETS=false: a 1.20 API server cannot tunnel it over a
# websocket), for tests/kubelet_port_forward_spdy.rs. As record-exec-spdy-fixture.sh:
# kubectl talks to recording-proxy.py, the API server passes the upgraded connection
# through to the node's kubelet API unchanged. One port-forward session (one SPDY
# connection) carrying:
#   1. an HTTP GET / to busybox httpd on the pod's port 8080 (curl);
#   2. a second GET on a new local connection (a second stream pair, requestID 1);
#   3. a connection to the pod's port 8081, where nothing listens: the refusal on the
#      error stream, which kubectl reports and then ends the port-forward.
# Needs KUBE_APISERVER, KUBECTL (kubectl 1.32) and curl; PODHOST defaults to
# target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-tests/fixtures/cluster/port-forward-spdy.jsonl}
NODE=pf-rec
RECORD_NAME=port-forward
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
metadata: {name: web}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers:
  - name: app
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && echo hello-from-the-pod >/www/index.html && exec httpd -f -p 8080 -h /www']
YAML
wait_for 60 bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get pod web -o jsonpath='{.status.phase}')\" = Running ]"
record_start_proxy web
LPORT=$(free_port); LPORT2=$(free_port)
KUBECTL_PORT_FORWARD_WEBSOCKETS=false "$KUBECTL" --kubeconfig "$WORK/proxy.kubeconfig" \
  port-forward pod/web "$LPORT:8080" "$LPORT2:8081" >"$WORK/pf.out" 2>"$WORK/pf.err" &
PF=$!
wait_for 20 bash -c "ss -Htln 'sport = :$LPORT' | grep -q ."
for i in 1 2; do
  body=$(curl -sf --max-time 10 "http://127.0.0.1:$LPORT/") || { echo "GET $i through the port-forward failed" >&2; cat "$WORK/pf.err" >&2; kill $PF; exit 1; }
  [ "$body" = hello-from-the-pod ] || { echo "GET $i: $body" >&2; kill $PF; exit 1; }
done
curl -s --max-time 10 "http://127.0.0.1:$LPORT2/" >/dev/null 2>&1 && { echo "port 8081 answered" >&2; kill $PF; exit 1; }
# kubectl ends the whole port-forward on a connection's error (it reports it first).
wait_for 10 bash -c "! kill -0 $PF"
wait $PF 2>/dev/null || true
grep -q "8081" "$WORK/pf.err" || { echo "kubectl did not report the refused port: $(cat "$WORK/pf.err")" >&2; exit 1; }
record_keep_connections /portforward "$OUT"
