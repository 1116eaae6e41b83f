# scripts/cluster/record-common.sh — sourced by record-exec-spdy-fixture.sh and
# record-port-forward-fixture.sh (kubectl's SPDY bytes for tests/common_spdy): one
# control plane, one podhost node NODE recording its exchanges, cleaned up on exit.
# The caller sets NODE and RECORD_NAME, then calls record_setup, creates what must exist
# before the node starts, calls record_start_node and drives the scenario.
: "${KUBE_APISERVER:?set KUBE_APISERVER}"
KUBECTL=${KUBECTL:-$(command -v kubectl)}
PODHOST=${PODHOST:-target/debug/podhost}
WORK=$(mktemp -d "/tmp/podhost-$RECORD_NAME.XXXXXX")
CGROUP_ROOT=/podhost-$RECORD_NAME-$$
PID=
record_cleanup() {
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  bash scripts/cluster/control-plane-down.sh "$WORK/cp" >/dev/null 2>&1 || true
  find /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  find /sys/fs/cgroup -maxdepth 1 -type d -name "${CGROUP_ROOT#/}" -exec rmdir {} + 2>/dev/null || true
  rm -rf "$WORK"
}
trap record_cleanup EXIT
# A TERM (timeout(1)) or ^C ends the script through its EXIT trap too.
trap 'exit 143' TERM INT
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $until ] || { echo "timed out: $*" >&2; exit 1; }; sleep 0.2; done; }

# The control plane, the built-in busybox image in the node's store, the namespace's
# ServiceAccount (nothing creates it without kube-controller-manager).
record_setup() {
  bash scripts/cluster/control-plane-up.sh "$WORK/cp" "$NODE" >/dev/null
  # shellcheck disable=SC1091
  source "$WORK/cp/env.sh"
  bash oci/busybox/build.sh "$WORK/busybox-oci" >/dev/null
  "$PODHOST" load --socket "$WORK/podhost.sock" --root-dir "$WORK/root" "$WORK/busybox-oci" >/dev/null
  k create serviceaccount default >/dev/null 2>&1 || true
  mkdir -p "$WORK/manifests"
}

# A free TCP port below the ephemeral range.
free_port() {
  local p low
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  while :; do
    p=$(( 10000 + RANDOM % (low - 10000) ))
    ss -Htan "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
}

# The node's flags for serving the kubelet API (the API server's client certificate is
# accepted), in RECORD_NODE_FLAGS: record_start_node "${RECORD_NODE_FLAGS[@]}"; its port
# in RECORD_KUBELET_PORT.
record_kubelet_flags() {
  local pki=$WORK/cp/pki
  RECORD_KUBELET_PORT=$(free_port)
  RECORD_NODE_FLAGS=(--node-ip 127.0.0.1 --port "$RECORD_KUBELET_PORT" --client-ca-file "$pki/ca.crt"
    --tls-cert-file "$pki/kubelet-$NODE.crt" --tls-private-key-file "$pki/kubelet-$NODE.key")
}

# The node, recording into $WORK/api.jsonl, with the daemon flags given as arguments
# added; returns once the Node is Ready.
record_start_node() {
  "$PODHOST" --socket "$WORK/podhost.sock" daemon --node-name "$NODE" --root-dir "$WORK/root" \
    --pod-manifest-path "$WORK/manifests" --log-dir "$WORK/logs" --config-dir "$WORK/config" \
    --pod-network none --eviction-hard= --cgroup-root "$CGROUP_ROOT" \
    --kubeconfig "$WORK/cp/node-$NODE.kubeconfig" --kube-record "$WORK/api.jsonl" "$@" \
    >"$WORK/daemon.log" 2>&1 &
  PID=$!
  wait_for 30 bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
}
