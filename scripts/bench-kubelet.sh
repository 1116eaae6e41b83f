#!/usr/bin/env bash
# scripts/bench-kubelet.sh [N...] — podhost and the kubelet side by side: the same pods on
# two nodes of one live control plane, in one run (a benchmark: it prints figures and
# asserts none of them).
#
# Node podhost-node is podhost (its pod network: bridge); node kubelet-node is the
# kubelet of the release the control plane is pinned to (built from the pinned Go modules
# by scripts/cluster/build-conformance.sh) with Debian's containerd and runc, and the CNI
# bridge plugin of Debian's containernetworking-plugins. Each node runs in its own network
# namespace (scripts/cluster/node-netns.sh), with the kubelet's client defaults (50 QPS,
# burst 100), its own cgroup root, no eviction and no image GC. Both nodes have the same
# busybox image (oci/busybox/build.sh) and pause image (scripts/cluster/e2e-images.sh).
#
# For each N (default: 100 300), node by node: N pods bound to the node at once
# (spec.nodeName) -> all Running in the API, p50/p99/max and when the last got there;
# delete (grace 5 s) -> object gone; the API requests each node made per pod (the API
# server's audit log, by user system:node:NAME). Then 100 pods on each node at the same
# time: each agent's memory (PSS of the daemon, the runtime and the shims; pause
# processes apart) and idle CPU over 60 s.
#
#   sudo bash scripts/bench-kubelet.sh          # 100 then 300 pods
#   sudo bash scripts/bench-kubelet.sh 20       # a quick look
# Env: PODHOST (default target/release/podhost, built if missing), KEEP_WORK=1.
#
# The kubelet changes a few kernel settings of the host when it starts (vm.overcommit_memory,
# vm.panic_on_oom, kernel.panic, kernel.panic_on_oops, kernel.keys.*); they are put back
# as they were when the run ends.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench-kubelet: run as root" >&2; exit 1; }
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(100 300)
max=100
for n in "${COUNTS[@]}"; do [ "$n" -gt "$max" ] && max=$n; done
cp_bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
test_bin=$(bash scripts/cluster/build-conformance.sh | tail -1)
export KUBE_APISERVER=$cp_bin/kube-apiserver
KUBECTL=$cp_bin/kubectl
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
# Debian's containerd package starts its own service; this run uses a containerd of its own.
PODHOST=${PODHOST:-target/release/podhost}
[ -x "$PODHOST" ] || cargo build --release --locked >/dev/null
PODHOST=$(realpath "$PODHOST")

P_NODE=podhost-node
K_NODE=kubelet-node
WORK=$(mktemp -d /tmp/podhost-bench-kubelet.XXXXXX)
CP=$WORK/cp
TAG=$$
P_CGROUP=/podhost-bench-kubelet-$TAG
K_CGROUP=/kubelet-bench-kubelet-$TAG
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
declare -A SAVED
for s in "${SYSCTLS[@]}"; do SAVED[$s]=$(sysctl -n "$s"); done
PODHOST_NODE_PID=""
KUBELET_PID=""
CONTAINERD_PID=""
cleanup() {
  set +e
  if [ -f "$CP/env.sh" ]; then
    timeout 180 "$KUBECTL" --kubeconfig "$CP/admin.kubeconfig" delete pods --all --grace-period=1 --timeout=150s >/dev/null 2>&1
  fi
  for p in "$PODHOST_NODE_PID" "$KUBELET_PID"; do [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  # containerd's pods: their shims and containers live on after containerd stops.
  if [ -n "$CONTAINERD_PID" ]; then
    local ctr=(ctr --address "$WORK/kubelet/containerd/containerd.sock" -n k8s.io)
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s KILL "$t" >/dev/null 2>&1; done
    sleep 1
    kill "$CONTAINERD_PID" 2>/dev/null && wait "$CONTAINERD_PID" 2>/dev/null
  fi
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $WORK/kubelet/containerd/containerd.sock" 2>/dev/null
  bash scripts/cluster/control-plane-down.sh "$CP" --keep >/dev/null 2>&1
  bash scripts/cluster/node-netns.sh down "$WORK/net" >/dev/null 2>&1
  grep -F " $WORK/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l 2>/dev/null
  podhost_node_leftovers "$P_CGROUP" "$WORK"
  podhost_node_leftovers "$K_CGROUP" "$WORK"
  for s in "${SYSCTLS[@]}"; do sysctl -qw "$s=${SAVED[$s]}" 2>/dev/null; done
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
# shellcheck source=cluster/podhost-node.sh
. scripts/cluster/podhost-node.sh
trap cleanup EXIT
trap 'exit 143' TERM INT

bash scripts/cluster/node-netns.sh up "$WORK/net" "$P_NODE" "$K_NODE" >/dev/null
# shellcheck disable=SC1091
source "$WORK/net/netns.env"
cat >"$WORK/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
YAML
env API_ADDRESS="$HOST_ADDR" NODE_IPS="$P_NODE=${NODE_ADDR[$P_NODE]} $K_NODE=${NODE_ADDR[$K_NODE]}" \
  APISERVER_EXTRA_ARGS="--audit-policy-file=$WORK/audit-policy.yaml --audit-log-path=$WORK/audit.log --audit-log-maxsize=0" \
  bash scripts/cluster/control-plane-up.sh "$CP" "$P_NODE" "$K_NODE" >"$WORK/control-plane-up.log" 2>&1 ||
  { tail -20 "$WORK/control-plane-up.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "$CP/env.sh"
pod_cidr() { # a /22 of the cluster CIDR per node when a /24 is too small
  if [ "$max" -gt 250 ]; then
    python3 -c 'import ipaddress,sys; print(list(ipaddress.ip_network(sys.argv[1]).subnets(new_prefix=22))[int(sys.argv[2])])' "$CLUSTER_CIDR" "$1"
  else
    echo "${NODE_POD_CIDR[$2]}"
  fi
}

# ---- the images, in both stores ----
bash oci/busybox/build.sh "$WORK/images/busybox" >/dev/null
# (in the conformance run's image dir: its Debian images are rebuilt only when their inputs change)
mapfile -t pause_line < <(bash scripts/cluster/e2e-images.sh "$test_bin" "${CARGO_TARGET_DIR:-target}/tmp/e2e-images" | grep '^registry.k8s.io/pause:')
pause_layout=${pause_line[0]#* }

# ---- podhost ----
p_dir=$WORK/podhost
for layout in "$WORK/images/busybox" "$pause_layout"; do
  "$PODHOST" load --socket "$p_dir/podhost.sock" --root-dir "$p_dir/root" "$layout" >/dev/null
done
podhost_node_start "$PODHOST" "$P_NODE" "$p_dir" "$(pod_cidr 0 "$P_NODE")" "$P_CGROUP" --max-pods $((max + 10))

# ---- containerd and the kubelet ----
k_dir=$WORK/kubelet
k_cidr=$(pod_cidr 1 "$K_NODE")
mkdir -p "$k_dir/containerd" "$k_dir/cni" "$k_dir/root" "$k_dir/pod-logs"
cat >"$k_dir/containerd/config.toml" <<TOML
version = 2
root = "$k_dir/containerd/root"
state = "$k_dir/containerd/state"
[grpc]
  address = "$k_dir/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$k_dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  # The kubelet asks for oom_score_adj -998 for sandboxes; on a host that does not give
  # root CAP_SYS_RESOURCE runc fails on it ("failed to update /proc/self/oom_score_adj"),
  # so containerd keeps scores at or above its own (podhost warns and runs with 0).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$k_dir/cni"
TOML
cat >"$k_dir/cni/10-bench.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "bench-kubelet", "plugins": [
  {"type": "bridge", "bridge": "kbr0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$k_cidr"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$k_dir/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
ksock=$k_dir/containerd/containerd.sock
nsenter --net="/run/netns/${NODE_NETNS[$K_NODE]}" \
  containerd --config "$k_dir/containerd/config.toml" >>"$k_dir/containerd.log" 2>&1 &
CONTAINERD_PID=$!
for i in $(seq 1 100); do [ -S "$ksock" ] && break; sleep 0.1; done
for layout in "$WORK/images/busybox" "$pause_layout"; do
  ref=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])' "$layout/index.json")
  tar -C "$layout" -cf "$layout.tar" .
  ctr --address "$ksock" -n k8s.io images import --index-name "$ref" "$layout.tar" >/dev/null
done
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
k_port=$((10000 + RANDOM % (ephemeral_low - 10000)))
cat >"$k_dir/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$CP/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: "$K_CGROUP"
containerRuntimeEndpoint: "unix://$ksock"
failCgroupV1: false
failSwapOn: false
tlsCertFile: "$CP/pki/kubelet-$K_NODE.crt"
tlsPrivateKeyFile: "$CP/pki/kubelet-$K_NODE.key"
port: $k_port
readOnlyPort: 0
healthzPort: 0
maxPods: $((max + 10))
podCIDR: "$k_cidr"
podLogsDir: "$k_dir/pod-logs"
evictionHard: {memory.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
# The kubelet wants its cgroupRoot to exist in every hierarchy (cgroupfs driver).
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  mkdir -p "/sys/fs/cgroup$K_CGROUP"
else
  for h in /sys/fs/cgroup/*/; do mkdir -p "$h${K_CGROUP#/}"; done
  for f in cpuset.cpus cpuset.mems; do
    cat "/sys/fs/cgroup/cpuset/$f" >"/sys/fs/cgroup/cpuset$K_CGROUP/$f"
  done
fi
nsenter --net="/run/netns/${NODE_NETNS[$K_NODE]}" \
  "$test_bin/kubelet" --config "$k_dir/config.yaml" --kubeconfig "$CP/node-$K_NODE.kubeconfig" \
  --root-dir "$k_dir/root" --hostname-override "$K_NODE" --node-ip "${NODE_ADDR[$K_NODE]}" \
  >>"$k_dir/kubelet.log" 2>&1 &
KUBELET_PID=$!
for i in $(seq 1 600); do
  [ "$("$KUBECTL" get node "$K_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
  kill -0 "$KUBELET_PID" 2>/dev/null || { echo "bench-kubelet: the kubelet exited:" >&2; grep -E '^E|^F' "$k_dir/kubelet.log" | tail -15 >&2; exit 1; }
  [ "$i" = 600 ] && { echo "bench-kubelet: $K_NODE not Ready after 120 s" >&2; grep -E '^E|^F' "$k_dir/kubelet.log" | tail -15 >&2; exit 1; }
  sleep 0.2
done
"$KUBECTL" create serviceaccount default >/dev/null

echo "bench-kubelet: podhost $("$PODHOST" --version 2>/dev/null | head -1); kubelet $("$test_bin/kubelet" --version | cut -d' ' -f2) with containerd $(containerd --version | cut -d' ' -f3) and runc $(runc --version | head -1 | cut -d' ' -f3); $("$KUBE_APISERVER" --version); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
node_requests() { grep -c "\"username\":\"system:node:$1\"" "$WORK/audit.log" || true; }
for n in "${COUNTS[@]}"; do
  for node in "$P_NODE" "$K_NODE"; do
    before=$(node_requests "$node")
    python3 scripts/cluster/pod-latency.py "$node" "$n" localhost/busybox:latest | sed "s/^/  $node, $n pods: /"
    sleep 2
    after=$(node_requests "$node")
    echo "  $node, $n pods: API requests of the node per pod (created, run, deleted): $(( (after - before) / n ))"
    sleep 5
  done
done

# ---- 100 pods on each node at once: memory and idle CPU ----
python3 scripts/cluster/agent-footprint.py 100 localhost/busybox:latest \
  "podhost:$P_NODE:$PODHOST_NODE_PID:$p_dir" "kubelet:$K_NODE:$KUBELET_PID,$CONTAINERD_PID:$ksock"
