#!/usr/bin/env bash
# scripts/cluster/record-bootstrap-fixture.sh OUT.jsonl KEY.pem — records a real control
# plane's answers to one podhost node's TLS bootstrap, for tests/cluster_bootstrap.rs:
# the node (podhost-boot) starts with only a bootstrap kubeconfig (a bootstrap token,
# kubeadm's RBAC bindings; control-plane-up.sh BOOTSTRAP_TOKEN), posts its
# CertificateSigningRequest, kube-controller-manager approves and signs it, the node
# writes its kubeconfig and registers. Only the CSR exchanges are kept (OUT); the key
# the request was made with goes to KEY (the test makes the same request with it, so
# its CSR has the recorded name) — a throwaway key of a cluster that is gone when this
# ends. Needs KUBE_APISERVER and KUBE_CONTROLLER_MANAGER (and etcd, kubectl) as
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
