#!/usr/bin/env bash
# scripts/cluster/record-review-fixture.sh OUT.jsonl — records a real API server's answers
# to the TokenReviews and SubjectAccessReviews one podhost node (node-1) asks while its
# kubelet API (--port) is called, for tests/kubelet_api.rs. The calls, in the order the
# tests make them: the API server's kubelet client certificate (O=system:masters) on
# /healthz and /pods; bob (a certificate of the cluster CA, O=devs, no RBAC) on
# /containerLogs (refused); a service account token allowed nodes/proxy by RBAC on
# /healthz; a token nobody issued on /healthz; then the kubelet client certificate on
# /containerLogs six times. The node keeps answers as the kubelet does (5 min allowed,
# 30 s denied, 2 min per token), so the record holds five reviews: one per distinct
# question. Only the review exchanges are kept. Needs KUBE_APISERVER (and etcd, kubectl)
# as scripts/cluster-test.sh; PODHOST defaults to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT.jsonl}
NODE=node-1
RECORD_NAME=record-review
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
record_setup
PKI=$WORK/cp/pki

# A service account whose token may get nodes/proxy (what `kubectl logs` is checked as).
k create serviceaccount reader >/dev/null
k create clusterrole node-proxy-reader --verb=get --resource=nodes/proxy >/dev/null
k create clusterrolebinding reader-node-proxy --clusterrole=node-proxy-reader \
  --serviceaccount=default:reader >/dev/null
TOKEN=$(k create token reader)

# bob: a client certificate of the cluster CA that RBAC gives nothing.
openssl req -new -newkey rsa:2048 -nodes -keyout "$WORK/bob.key" -out "$WORK/bob.csr" \
  -subj "/O=devs/CN=bob" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' >"$WORK/bob.ext"
openssl x509 -req -in "$WORK/bob.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
  -days 1 -sha256 -extfile "$WORK/bob.ext" -out "$WORK/bob.crt" 2>/dev/null

record_kubelet_flags
KPORT=$RECORD_KUBELET_PORT
record_start_node "${RECORD_NODE_FLAGS[@]}"
# Serving yet? An anonymous call is refused without a review (nothing is cached).
wait_for 20 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt https://127.0.0.1:$KPORT/healthz)\" = 401 ]"
marker=$(wc -l <"$WORK/api.jsonl")

call() { # WHO PATH — prints the HTTP status
  local who=$1 path=$2 auth=()
  case $who in
    apiserver) auth=(--cert "$PKI/apiserver-kubelet-client.crt" --key "$PKI/apiserver-kubelet-client.key");;
    bob) auth=(--cert "$WORK/bob.crt" --key "$WORK/bob.key");;
    token) auth=(-H "Authorization: Bearer $TOKEN");;
    badtoken) auth=(-H "Authorization: Bearer not-a-token-anyone-issued");;
  esac
  curl -sS -o /dev/null -w '%{http_code} ' --cacert "$PKI/ca.crt" "${auth[@]}" \
    "https://127.0.0.1:$KPORT$path"
}
echo -n "who: "
call apiserver /healthz; call apiserver /pods; call bob /containerLogs/default/web/app
call token /healthz; call badtoken /healthz; echo
echo -n "logs: "
for q in "" "?tailLines=1" "?timestamps=true&limitBytes=40" "?previous=true"; do
  call apiserver "/containerLogs/default/web/app$q"
done
call apiserver /containerLogs/default/nope/app; call apiserver /containerLogs/default/web/other; echo

kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
tail -n +"$((marker + 1))" "$WORK/api.jsonl" \
  | grep -E '"path":"/apis/(authentication|authorization)\.k8s\.io/v1/(tokenreviews|subjectaccessreviews)"' >"$OUT"
echo "recorded $(wc -l <"$OUT") review exchanges into $OUT"
