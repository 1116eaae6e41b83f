#!/bin/bash
# scripts/cluster/coredns-up.sh DIR IMAGE DNS_IP [DOMAIN]
#
# Deploys the cluster DNS of the control plane of `control-plane-up.sh DIR` as `kubeadm
# init` does: CoreDNS as the Deployment `coredns` in kube-system, behind the Service
# `kube-dns` at DNS_IP (the address every node's `--cluster-dns` names: by convention
# the tenth of the Service range), its ServiceAccount bound to the ClusterRole
# `system:coredns` (read Services, EndpointSlices, Pods and Namespaces), and kubeadm's
# Corefile in the ConfigMap `coredns`: DOMAIN (default cluster.local) and the reverse
# zones answered from the API, everything else forwarded to the node's resolver.
#
#   IMAGE   the CoreDNS image the nodes have (e2e-images.sh builds
#           registry.k8s.io/coredns/coredns:<version> from build-conformance.sh's coredns)
#
# Needs kube-proxy on the nodes (kube-proxy-up.sh): the Service is how pods reach it.
# Returns once the Deployment is available and DNS_IP answers for
# kubernetes.default.svc.DOMAIN from a node's pod network; one replica (kubeadm runs two
# for availability; these clusters have one node).
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 DIR IMAGE DNS_IP [DOMAIN]" >&2
  exit 2
fi
DIR=$(cd "$1" && pwd)
IMAGE=$2
DNS_IP=$3
DOMAIN=${4:-cluster.local}
# shellcheck disable=SC1091
source "$DIR/env.sh"
KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
[ -n "$KUBECTL" ] || { echo "coredns-up: kubectl not found (set KUBECTL)" >&2; exit 1; }
k() { "$KUBECTL" --kubeconfig "$DIR/admin.kubeconfig" "$@"; }

# The Corefile is kubeadm's, less `loop` and `prometheus` (not built in: the node's
# resolver is no loop here, and nothing scrapes metrics). `lameduck` keeps a stopping
# replica answering while the Service's endpoints drop it.
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health {
           lameduck 5s
        }
        ready
        kubernetes $DOMAIN in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }
        forward . /etc/resolv.conf {
           max_concurrent 1000
        }
        cache 30
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      dnsPolicy: Default
      nodeSelector: {kubernetes.io/os: linux}
      tolerations: [{key: CriticalAddonsOnly, operator: Exists}, {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
      containers:
      - name: coredns
        image: $IMAGE
        imagePullPolicy: IfNotPresent
        args: [-conf, /etc/coredns/Corefile]
        resources:
          limits: {memory: 170Mi}
          requests: {cpu: 100m, memory: 70Mi}
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
          readOnlyRootFilesystem: true
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 60
          timeoutSeconds: 5
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        volumeMounts:
        - {name: config-volume, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config-volume
        configMap:
          name: coredns
          items: [{key: Corefile, path: Corefile}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/cluster-service: "true", kubernetes.io/name: CoreDNS}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $DNS_IP
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
YAML
if ! k -n kube-system rollout status deployment/coredns --timeout=120s >/dev/null; then
  echo "coredns-up: the Deployment coredns did not become available:" >&2
  k -n kube-system get pods -l k8s-app=kube-dns -o wide >&2
  k -n kube-system logs -l k8s-app=kube-dns --tail=20 >&2 || true
  exit 1
fi
# One A query for the API server's Service through the Service address, from here (the
# host routes the Service range to the nodes): proves kube-proxy, the Service and
# CoreDNS's view of the API together. Python's standard library: no dig on the host.
if ! python3 - "$DNS_IP" "kubernetes.default.svc.$DOMAIN" <<'PY'
import socket, struct, sys, time
server, name = sys.argv[1], sys.argv[2]
query = struct.pack(">HHHHHH", 0x5068, 0x0100, 1, 0, 0, 0)
query += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
query += struct.pack(">HH", 1, 1)
deadline = time.time() + 60
last = "no answer"
while time.time() < deadline:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(query, (server, 53))
        reply = s.recv(512)
        flags, answers = struct.unpack(">H", reply[2:4])[0], struct.unpack(">H", reply[6:8])[0]
        if flags & 0xF == 0 and answers > 0:
            sys.exit(0)
        last = f"rcode {flags & 0xF}, {answers} answers"
    except OSError as e:
        last = str(e)
    finally:
        s.close()
    time.sleep(1)
print(f"coredns-up: {server} did not answer {name}: {last}", file=sys.stderr)
sys.exit(1)
PY
then
  k -n kube-system logs -l k8s-app=kube-dns --tail=20 >&2 || true
  exit 1
fi
echo "# CoreDNS ready at $DNS_IP ($DOMAIN): kubectl -n kube-system get deploy coredns" >&2
