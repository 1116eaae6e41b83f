#!/bin/bash
# scripts/cluster/metrics-server-up.sh DIR METRICS_SERVER_BINARY
#
# Starts metrics-server beside the control plane of `control-plane-up.sh DIR` as the
# aggregated API metrics.k8s.io (`kubectl top`, the HPA), as a cluster runs it, but as a
# process on the API server's address rather than a pod: a serving certificate from the
# cluster CA for metrics-server.kube-system.svc, a Service without selector whose
# EndpointSlice names that address (the API server routes to the endpoints:
# --enable-aggregator-routing), and the APIService v1beta1.metrics.k8s.io. It scrapes
# each node's kubelet API (`/metrics/resource`) at the Node's InternalIP and kubelet
# port, verifying the kubelet's serving certificate against the cluster CA.
# Returns once the APIService is Available; control-plane-down.sh stops it.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 DIR METRICS_SERVER_BINARY" >&2; exit 2; }
DIR=$(cd "$1" && pwd)
BIN=$2
[ -x "$BIN" ] || { echo "metrics-server not found at $BIN" >&2; exit 1; }
# shellcheck disable=SC1091
source "$DIR/env.sh"
PKI=$DIR/pki
KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
[ -n "$KUBECTL" ] || { echo "metrics-server-up: kubectl not found (set KUBECTL)" >&2; exit 1; }
k() { "$KUBECTL" --kubeconfig "$DIR/admin.kubeconfig" "$@"; }
addr=$KUBE_API_ADDRESS

# A free port below the ephemeral range, as control-plane-up.sh picks its own.
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
port=""
for _ in $(seq 1 200); do
  p=$((10000 + RANDOM % (ephemeral_low - 10000)))
  if ! ss -Htan "sport = :$p" | grep -q .; then port=$p; break; fi
done
[ -n "$port" ] || { echo "metrics-server-up: no free port" >&2; exit 1; }

ossl() { openssl "$@" 2>>"$DIR/logs/openssl.log"; }
ossl req -new -newkey rsa:2048 -nodes -keyout "$PKI/metrics-server.key" -out "$PKI/metrics-server.csr" \
  -subj "/CN=metrics-server"
printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
  "extendedKeyUsage=serverAuth" \
  "subjectAltName=DNS:metrics-server.kube-system.svc,DNS:metrics-server.kube-system.svc.cluster.local,IP:$addr" \
  >"$PKI/metrics-server.ext"
ossl x509 -req -in "$PKI/metrics-server.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
  -days 365 -sha256 -extfile "$PKI/metrics-server.ext" -out "$PKI/metrics-server.crt"
rm -f "$PKI/metrics-server.csr" "$PKI/metrics-server.ext"
chmod 600 "$PKI/metrics-server.key"

setsid "$BIN" --secure-port="$port" --bind-address="$addr" \
  --tls-cert-file="$PKI/metrics-server.crt" --tls-private-key-file="$PKI/metrics-server.key" \
  --kubeconfig="$DIR/admin.kubeconfig" --authentication-kubeconfig="$DIR/admin.kubeconfig" \
  --authorization-kubeconfig="$DIR/admin.kubeconfig" \
  --kubelet-preferred-address-types=InternalIP --kubelet-use-node-status-port \
  --kubelet-certificate-authority="$PKI/ca.crt" --metric-resolution=10s \
  --kubelet-request-timeout=5s --v=1 \
  </dev/null >"$DIR/logs/metrics-server.log" 2>&1 &
echo $! >"$DIR/metrics-server.pid"

k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec:
  ports: [{port: 443, targetPort: $port, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server-host
  namespace: kube-system
  labels: {kubernetes.io/service-name: metrics-server}
addressType: IPv4
ports: [{port: $port, protocol: TCP}]
endpoints: [{addresses: ["$addr"], conditions: {ready: true}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  service: {name: metrics-server, namespace: kube-system, port: 443}
  caBundle: $(base64 -w0 <"$PKI/ca.crt")
  groupPriorityMinimum: 100
  versionPriority: 100
YAML
if ! k wait --for=condition=Available apiservice/v1beta1.metrics.k8s.io --timeout=90s >/dev/null; then
  echo "metrics-server-up: the APIService did not become Available; see $DIR/logs/metrics-server.log" >&2
  tail -20 "$DIR/logs/metrics-server.log" >&2
  exit 1
fi
echo "# metrics-server on https://$addr:$port (pid $(cat "$DIR/metrics-server.pid")), APIService v1beta1.metrics.k8s.io Available" >&2
