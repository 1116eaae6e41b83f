#!/bin/bash
# scripts/cluster/kube-proxy-up.sh DIR IMAGE CLUSTER_CIDR [MODE]
#
# Runs kube-proxy on every node of the control plane of `control-plane-up.sh DIR` the way
# kubeadm does: a DaemonSet in kube-system (a privileged hostNetwork pod per node) whose
# ServiceAccount `kube-proxy` is bound to the ClusterRole system:node-proxier, reading
# its KubeProxyConfiguration and a kubeconfig from the ConfigMap `kube-proxy`. A
# DaemonSet rather than a static pod: it is what `kubeadm init` makes and what an
# operator looks for (`kubectl -n kube-system get ds kube-proxy`), it needs no file on
# the node and no client certificate per node (the pod's own ServiceAccount token), and
# a node added later gets its proxy without anyone touching it.
#
#   IMAGE         the kube-proxy image the nodes have (e2e-images.sh builds
#                 registry.k8s.io/kube-proxy:<release>)
#   CLUSTER_CIDR  the pods' addresses (the nodes' pod networks): traffic
#                 to a Service from outside it is masqueraded
#   MODE          nftables (default) or iptables
#
# The kubeconfig names the API server by address (control-plane-up.sh's server URL),
# not the `kubernetes` Service: kube-proxy is what makes that Service reachable (as
# kubeadm's names the control plane's endpoint).
# Returns once every node's kube-proxy pod is Ready (its /healthz on :10256 answers),
# i.e. it has synced the Services once.
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 DIR IMAGE CLUSTER_CIDR [nftables|iptables]" >&2
  exit 2
fi
DIR=$(cd "$1" && pwd)
IMAGE=$2
CLUSTER_CIDR=$3
MODE=${4:-nftables}
case "$MODE" in nftables | iptables) ;; *) echo "kube-proxy-up: MODE is nftables or iptables, not $MODE" >&2; exit 2 ;; esac
# shellcheck disable=SC1091
source "$DIR/env.sh"
KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
[ -n "$KUBECTL" ] || { echo "kube-proxy-up: kubectl not found (set KUBECTL)" >&2; exit 1; }
k() { "$KUBECTL" --kubeconfig "$DIR/admin.kubeconfig" "$@"; }

# kubeadm mounts the host's /lib/modules (kube-proxy looks up and loads the netfilter
# modules there); a kernel with them built in may have no such directory (this VM's),
# and a hostPath that does not exist fails the container's start, so it is mounted only
# where it exists.
MODULES_MOUNT="" MODULES_VOLUME=""
if [ -d /lib/modules ]; then
  MODULES_MOUNT="        - {name: lib-modules, mountPath: /lib/modules, readOnly: true}"
  MODULES_VOLUME="      - {name: lib-modules, hostPath: {path: /lib/modules}}"
fi

# conntrack.maxPerCore 0: leave nf_conntrack_max alone. Each node here is a network
# namespace, and the kernel lets only the initial namespace set that table size (kind
# sets the same for the same reason); tcpEstablishedTimeout/tcpCloseWaitTimeout are
# per-namespace and kept at kube-proxy's defaults.
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: kube-proxy, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kubeadm:node-proxier}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects: [{kind: ServiceAccount, name: kube-proxy, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system, labels: {app: kube-proxy}}
data:
  config.conf: |
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    mode: $MODE
    clusterCIDR: $CLUSTER_CIDR
    clientConnection:
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
    conntrack:
      maxPerCore: 0
  kubeconfig.conf: |
    apiVersion: v1
    kind: Config
    clusters:
    - name: default
      cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: $KUBE_APISERVER_URL
    contexts:
    - name: default
      context: {cluster: default, namespace: default, user: default}
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, labels: {k8s-app: kube-proxy}}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      priorityClassName: system-node-critical
      serviceAccountName: kube-proxy
      hostNetwork: true
      nodeSelector: {kubernetes.io/os: linux}
      tolerations: [{operator: Exists}]
      containers:
      - name: kube-proxy
        image: $IMAGE
        imagePullPolicy: IfNotPresent
        command: [/usr/local/bin/kube-proxy, --config=/var/lib/kube-proxy/config.conf, --hostname-override=\$(NODE_NAME)]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        securityContext: {privileged: true}
        readinessProbe:
          httpGet: {path: /healthz, port: 10256}
          periodSeconds: 2
        volumeMounts:
        - {name: kube-proxy, mountPath: /var/lib/kube-proxy}
        - {name: xtables-lock, mountPath: /run/xtables.lock}
$MODULES_MOUNT
      volumes:
      - name: kube-proxy
        configMap: {name: kube-proxy}
      - name: xtables-lock
        hostPath: {path: /run/xtables.lock, type: FileOrCreate}
$MODULES_VOLUME
YAML
if ! k -n kube-system rollout status daemonset/kube-proxy --timeout=120s >/dev/null; then
  echo "kube-proxy-up: the DaemonSet kube-proxy did not become ready:" >&2
  k -n kube-system get pods -l k8s-app=kube-proxy -o wide >&2
  k -n kube-system logs -l k8s-app=kube-proxy --tail=20 >&2 || true
  exit 1
fi
echo "# kube-proxy ($MODE) ready on every node: kubectl -n kube-system get ds kube-proxy" >&2
