# shellcheck shell=bash
# scripts/cluster/podhost-node.sh — sourced by the scripts that run one podhost node
# against a live control plane (bench-cluster.sh, conformance.sh): starts it in its own
# network namespace (node-netns.sh) and waits for its Node to be Ready.
#
#   podhost_node_start PODHOST NODE DIR POD_CIDR CGROUP_ROOT [DAEMON FLAG...]
#
# Needs netns.env (node-netns.sh) and env.sh (control-plane-up.sh) sourced, the control
# plane's work dir in $CP and kubectl in $KUBECTL. The daemon's root, socket, manifests,
# logs and API record (--kube-record DIR/api.jsonl) live in DIR; its log is
# DIR/daemon.log; its pid is left in PODHOST_NODE_PID. The kubelet API listens on the
# kubelet's port, 10250, in the node's namespace (Kubernetes' e2e framework reaches some
# kubelet endpoints there whatever the Node says), with the node's serving certificate;
# the pod network is podhost's bridge on POD_CIDR; eviction and image GC are off (a test
# run must not lose pods or images to a full disk of the developer's machine).
podhost_node_start() {
  local podhost=$1 node=$2 dir=$3 pod_cidr=$4 cgroup_root=$5 i
  shift 5
  mkdir -p "$dir/manifests"
  nsenter --net="/run/netns/${NODE_NETNS[$node]}" \
    "$podhost" --socket "$dir/podhost.sock" daemon --node-name "$node" \
    --root-dir "$dir/root" --pod-manifest-path "$dir/manifests" --log-dir "$dir/logs" \
    --pod-network bridge --pod-cidr "$pod_cidr" --eviction-hard= --image-gc-high-threshold 100 \
    --cgroup-root "$cgroup_root" \
    --kubeconfig "$CP/node-$node.kubeconfig" --kube-record "$dir/api.jsonl" \
    --node-ip "${NODE_ADDR[$node]}" --port 10250 --client-ca-file "$CP/pki/ca.crt" \
    --tls-cert-file "$CP/pki/kubelet-$node.crt" --tls-private-key-file "$CP/pki/kubelet-$node.key" \
    "$@" >>"$dir/daemon.log" 2>&1 &
  PODHOST_NODE_PID=$!
  for i in $(seq 1 300); do
    [ "$("$KUBECTL" --kubeconfig "$KUBECONFIG" get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && return 0
    kill -0 "$PODHOST_NODE_PID" 2>/dev/null || { echo "podhost node $node exited:" >&2; tail -20 "$dir/daemon.log" >&2; return 1; }
    sleep 0.2
  done
  echo "podhost node $node not Ready after 60 s:" >&2
  tail -20 "$dir/daemon.log" >&2
  return 1
}

# Kills what a node left behind when its daemon stopped with pods still running (a
# stopped podhost leaves its containers running, by design): every process in the cgroup
# root's cgroups and the shims and monitors of the work dir WORK; then removes the cgroups.
#
#   podhost_node_leftovers CGROUP_ROOT WORK
podhost_node_leftovers() {
  local cgroup_root=${1#/} work=$2 stray
  stray=$(find /sys/fs/cgroup -path "*/$cgroup_root/*" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
  # shellcheck disable=SC2086
  [ -z "$stray" ] || kill -9 $stray 2>/dev/null
  pkill -9 -f "podhost-(shim|monitor) shim $work/" 2>/dev/null
  sleep 0.5
  find /sys/fs/cgroup/*/"$cgroup_root" /sys/fs/cgroup/"$cgroup_root" -depth -type d -exec rmdir {} + 2>/dev/null
  return 0
}
