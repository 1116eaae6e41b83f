#!/usr/bin/env bash
# scripts/cluster/record-bootstrap-fixture.sh OUT.jsonl KEY.pem [DENIED.jsonl DENIED-KEY.pem]
# — records a real control
# plane's answers to one podhost node's TLS bootstrap, for tests/cluster_bootstrap.rs:
# the node (podhost-boot) starts with only a bootstrap kubeconfig (a bootstrap token,
# kubeadm's RBAC bindings; control-plane-up.sh BOOTSTRAP_TOKEN), posts its
# CertificateSigningRequest, kube-controller-manager approves and signs it, the node
# writes its kubeconfig and registers. Only the CSR exchanges are kept (OUT); the key
# the request was made with goes to KEY (the test makes the same request with it, so
# its CSR has the recorded name) — a throwaway key of a cluster that is gone when this
# ends. With DENIED.jsonl, a second node (podhost-denied) then asks with kubeadm's
# auto-approval binding removed, the request is denied with `kubectl certificate deny`,
# and its CSR exchanges and key are kept likewise. Needs KUBE_APISERVER and KUBE_CONTROLLER_MANAGER (and etcd, kubectl) as
# scripts/cluster-test.sh; PODHOST defaults to target/debug/podhost.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT.jsonl KEY.pem}
KEY=${2:?usage: $0 OUT.jsonl KEY.pem}
: "${KUBE_CONTROLLER_MANAGER:?set KUBE_CONTROLLER_MANAGER: it approves and signs the request}"
NODE=podhost-boot
RECORD_NAME=record-bootstrap
export BOOTSTRAP_TOKEN=podhst.0123456789abcdef
# shellcheck source=scripts/cluster/record-common.sh
source scripts/cluster/record-common.sh
record_setup
"$PODHOST" --socket "$WORK/podhost.sock" daemon --node-name "$NODE" --root-dir "$WORK/root" \
  --pod-manifest-path "$WORK/manifests" --log-dir "$WORK/logs" --config-dir "$WORK/config" \
  --pod-network none --eviction-hard= --cgroup-root "$CGROUP_ROOT" --port 0 \
  --kubeconfig "$WORK/node.kubeconfig" --bootstrap-kubeconfig "$BOOTSTRAP_KUBECONFIG" \
  --kube-record "$WORK/api.jsonl" >"$WORK/daemon.log" 2>&1 &
PID=$!
wait_for 60 bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
grep -E '"path":"/apis/certificates\.k8s\.io/v1/certificatesigningrequests' "$WORK/api.jsonl" >"$OUT"
sed -n '/-----BEGIN [A-Z ]*PRIVATE KEY-----/,/-----END [A-Z ]*PRIVATE KEY-----/p' \
  "$WORK/root/pki/kubelet-client-current.pem" >"$KEY"
echo "recorded $(wc -l <"$OUT") CSR exchanges into $OUT, the request's key into $KEY"

DENIED=${3:-}
DENIED_KEY=${4:-}
[ -n "$DENIED" ] || exit 0
: "${DENIED_KEY:?usage: $0 OUT.jsonl KEY.pem DENIED.jsonl DENIED-KEY.pem}"
k delete clusterrolebinding kubeadm:node-autoapprove-bootstrap >/dev/null
D=$WORK/denied
"$PODHOST" --socket "$D/podhost.sock" daemon --node-name podhost-denied --root-dir "$D/root" \
  --pod-manifest-path "$D/manifests" --log-dir "$D/logs" --config-dir "$D/config" \
  --pod-network none --eviction-hard= --cgroup-root "$CGROUP_ROOT/denied" --port 0 \
  --kubeconfig "$D/node.kubeconfig" --bootstrap-kubeconfig "$BOOTSTRAP_KUBECONFIG" \
  --kube-record "$D/api.jsonl" >"$WORK/denied.log" 2>&1 &
PID=$!
pending_csr() { # the one CSR with no condition yet
  k get csr -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[0].type}{"\n"}{end}' | awk 'NF == 1 {print $1}'
}
for _ in $(seq 150); do [ -n "$(pending_csr)" ] && break; sleep 0.2; done
[ -n "$(pending_csr)" ] || { echo "podhost-denied posted no CSR" >&2; exit 1; }
# The pending key, before the denial ends the request (the daemon then drops it).
cp "$D/root/pki/kubelet-client.key.tmp" "$DENIED_KEY"
k certificate deny "$(pending_csr)" >/dev/null
# It stops by itself on the denial; the watchdog only bounds a failure to.
( sleep 30; kill "$PID" 2>/dev/null ) &
wait "$PID" 2>/dev/null || true; PID=
grep -q "was denied" "$WORK/denied.log" || { echo "the denied node did not stop with the denial:" >&2; tail -5 "$WORK/denied.log" >&2; exit 1; }
grep -E '"path":"/apis/certificates\.k8s\.io/v1/certificatesigningrequests' "$D/api.jsonl" >"$DENIED"
echo "recorded $(wc -l <"$DENIED") CSR exchanges of a denied request into $DENIED, its key into $DENIED_KEY"
