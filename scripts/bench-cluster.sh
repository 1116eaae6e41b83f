#!/usr/bin/env bash
# scripts/bench-cluster.sh [N...] — cluster mode's pod figures against a live control
# plane (a benchmark: it prints figures and asserts none of them).
#
# One podhost node (its own network namespace and pod network, as in
# scripts/cluster-test.sh) joins a kube-apiserver of the pinned release (built or found
# cached by scripts/cluster/build-control-plane.sh). For each N (default: 100 300), N
# busybox pods bound to the node at once (spec.nodeName, as the scheduler binds them):
# create -> Running in the API and delete (grace 5 s) -> object gone, p50/p99/max, when
# the last one got there, and the API requests the node made per pod (from its
# --kube-record). The node runs with the kubelet's client defaults (50 QPS, burst 100).
#
#   sudo bash scripts/bench-cluster.sh          # 100 then 300 pods
#   sudo bash scripts/bench-cluster.sh 20       # a quick look
# Env: PODHOST (default target/release/podhost, built if missing), KUBE_APISERVER and
# KUBECTL (default: the pinned build), KEEP_WORK=1 (keep the work dir: logs, record).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench-cluster: run as root" >&2; exit 1; }
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(100 300)
if [ -z "${KUBE_APISERVER:-}" ]; then
  bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
  KUBE_APISERVER=$bin/kube-apiserver
  KUBECTL=${KUBECTL:-$bin/kubectl}
fi
export KUBE_APISERVER
command -v etcd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
PODHOST=${PODHOST:-target/release/podhost}
[ -x "$PODHOST" ] || cargo build --release --locked >/dev/null
max=0
for n in "${COUNTS[@]}"; do [ "$n" -gt "$max" ] && max=$n; done

NODE=bench-node
WORK=$(mktemp -d /tmp/podhost-bench-cluster.XXXXXX)
CGROUP_ROOT=/podhost-bench-cluster-$$
PODHOST_NODE_PID=""
cleanup() {
  set +e
  if [ -f "$WORK/cp/env.sh" ]; then
    timeout 120 "$KUBECTL" --kubeconfig "$WORK/cp/admin.kubeconfig" delete pods --all --grace-period=1 --timeout=100s >/dev/null 2>&1
  fi
  [ -n "$PODHOST_NODE_PID" ] && kill "$PODHOST_NODE_PID" 2>/dev/null && wait "$PODHOST_NODE_PID" 2>/dev/null
  bash scripts/cluster/control-plane-down.sh "$WORK/cp" --keep >/dev/null 2>&1
  bash scripts/cluster/node-netns.sh down "$WORK/net" >/dev/null 2>&1
  podhost_node_leftovers "$CGROUP_ROOT" "$WORK"
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
# shellcheck source=cluster/podhost-node.sh
. scripts/cluster/podhost-node.sh
trap cleanup EXIT
trap 'exit 143' TERM INT

bash scripts/cluster/node-netns.sh up "$WORK/net" "$NODE" >/dev/null
# shellcheck disable=SC1091
source "$WORK/net/netns.env"
env API_ADDRESS="$HOST_ADDR" NODE_IPS="$NODE=${NODE_ADDR[$NODE]}" \
  bash scripts/cluster/control-plane-up.sh "$WORK/cp" "$NODE" >/dev/null 2>&1
# shellcheck disable=SC1091
source "$WORK/cp/env.sh"
# A /24 holds 254 pods (the kubelet's 110 max-pods fits one); more need a wider CIDR: the
# first /22 of the unused cluster CIDR that node-netns.sh reserved.
pod_cidr=${NODE_POD_CIDR[$NODE]}
if [ "$max" -gt 250 ]; then
  pod_cidr=$(python3 -c 'import ipaddress,sys; print(next(ipaddress.ip_network(sys.argv[1]).subnets(new_prefix=22)))' "$CLUSTER_CIDR")
fi
dir=$WORK/node
bash oci/busybox/build.sh "$WORK/busybox-oci" >/dev/null
"$PODHOST" load --socket "$dir/podhost.sock" --root-dir "$dir/root" "$WORK/busybox-oci" >/dev/null
CP=$WORK/cp
podhost_node_start "$PODHOST" "$NODE" "$dir" "$pod_cidr" "$CGROUP_ROOT" --max-pods $((max + 10))

# Without kube-controller-manager nothing creates the namespace's ServiceAccount, which
# the ServiceAccount admission wants to exist (the pods mount no token).
"$KUBECTL" --kubeconfig "$KUBECONFIG" create serviceaccount default >/dev/null

echo "bench-cluster: podhost $("$PODHOST" --version 2>/dev/null | head -1), $("$KUBE_APISERVER" --version), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${COUNTS[@]}"; do
  before=$(wc -l <"$dir/api.jsonl")
  python3 scripts/cluster/pod-latency.py "$NODE" "$n" localhost/busybox:latest | sed "s/^/  $n pods: /"
  sleep 2
  after=$(wc -l <"$dir/api.jsonl")
  echo "  $n pods: API requests of the node per pod (created, run, deleted): $(( (after - before) / n ))"
  sleep 5
done
echo "  node daemon: RSS $(awk '/VmRSS/ {print $2 " kB"}' "/proc/$PODHOST_NODE_PID/status")"
