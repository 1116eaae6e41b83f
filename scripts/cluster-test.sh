#!/usr/bin/env bash
# scripts/cluster-test.sh — cluster mode end to end against a real control plane.
#
# The control plane is Kubernetes' own: kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl of the release pinned in tests/cluster/controlplane/go.mod,
# and metrics-server, built from Go modules (or found cached) by
# scripts/cluster/build-control-plane.sh, with etcd of the version the release pins
# (Debian's etcd-server when KUBE_APISERVER has none beside it). KUBE_APISERVER
# (with KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBECTL, METRICS_SERVER) runs it against
# binaries of your own instead; without
# KUBE_CONTROLLER_MANAGER each node gets its own --pod-cidr and a late node waits for a
# podCIDR set by hand.
#
# Two podhost daemons (separate root dirs, sockets and node names) join one API server
# at once; for each it checks: the Node registers with its labels, taints, capacity,
# allocatable and nodeInfo; Ready and the pressure conditions; the Lease in
# kube-node-lease is held by the node, owned by its Node and renewed (10 s of 40 s);
# a restart with other labels re-registers without a second Node; the API request
# rate of an idle node. Pods bound to a node by the API server: Running with their
# status in the API; a graceful delete runs preStop, then the stop signal, reports the
# final status and deletes the object (grace 0, UID precondition); a second delete
# shortens the grace; a force delete leaves no process; pods survive a restart of
# their node; admission rejects with the kubelet's reasons (OutOfcpu, NodeAffinity) and
# follows the Node's labels when an administrator changes them; a pod status changed
# by someone else is written again;
# ConfigMaps and Secrets from the API (a configMap volume updated in a running
# container, a secretKeyRef env, an optional envFrom, a missing Secret's
# CreateContainerConfigError until it is created, a volume's missing ConfigMap; one
# object per request); the pods' events in the API (Pulled, Created, Started, Failed)
# from the kubelet; projected service account tokens (TokenRequest bound to the pod,
# TokenReview); start latency of 10 pods at once, as the API reports it. Static pods
# get mirror pods: created with the mirror annotation and the Node as owner, Running;
# created again when deleted with kubectl (the containers keep running); replaced when
# the manifest is edited; gone when it is removed, also while the node was down.
# kubectl logs (--tail, -f, --previous) and exec (stdout, stdin, stderr, exit code; over
# websocket and SPDY/3.1; -it with a pty and its size) go through the API server to each
# node's kubelet API (TLS on its own --port, the API server's client certificate; other
# callers refused); an exec's round trip over each protocol is measured; kubectl
# port-forward reaches a server in the pod.
# Each node runs in its own network namespace (scripts/cluster/node-netns.sh: a veth to
# a host-side bridge on a free private /16; the API server on the bridge's address,
# reaching each kubelet API at the node's --node-ip) with podhost's pod network
# (bridge, IPAM, NAT; NODE_POD_NETWORK=none for loopback-only pods): pod IPs from the
# node's CIDR (the Node's spec.podCIDR from kube-controller-manager when
# KUBE_CONTROLLER_MANAGER is set, else a distinct --pod-cidr per node), podIP/hostIP in
# the API, a pod's httpd answering on its podIP from its node's namespace, and nothing
# left behind (namespaces, links, mounts, cgroups, processes).
# With KUBE_CONTROLLER_MANAGER: TLS bootstrap (a node, podhost-boot, on a control plane
# of its own, starts with only a bootstrap-token kubeconfig: its CSR is auto-approved, the
# pair and kubeconfig are written, the Node goes Ready and runs a pod, a restart does not
# bootstrap again) and rotation (7 min certificates: a new serial by the node's own CSR,
# lease renewed after the first certificate expired); start-to-Ready time against a node
# with a ready kubeconfig.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "cluster-test: run as root" >&2; exit 1; }
if [ -z "${KUBE_APISERVER:-}" ]; then
  bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
  export KUBE_APISERVER=$bin/kube-apiserver KUBE_CONTROLLER_MANAGER=$bin/kube-controller-manager
  export KUBE_SCHEDULER=$bin/kube-scheduler KUBECTL=${KUBECTL:-$bin/kubectl}
  export METRICS_SERVER=$bin/metrics-server
fi
echo "control plane: $("$KUBE_APISERVER" --version)"
command -v etcd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
[ -n "$KUBECTL" ] || { echo "cluster-test: kubectl not found (set KUBECTL)" >&2; exit 1; }
PODHOST=${PODHOST:-target/release/podhost}
[ -x "$PODHOST" ] || cargo build --release --locked >/dev/null

WORK=$(mktemp -d /tmp/podhost-cluster-test.XXXXXX)
# Each daemon's cgroup root, removed (in every hierarchy) at the end.
CGROUP_ROOT=/podhost-cluster-test-$$
NODES=(podhost-a podhost-b)
# A third node, started late without --pod-cidr: its pods wait for the Node's podCIDR.
LATE=podhost-c
PIDS=()
# The running daemon of each node (PIDS keeps every one started, for the cleanup).
declare -A PID_OF
# Nodes' network namespaces: the first thing made, the last removed.
NODE_POD_NETWORK=${NODE_POD_NETWORK:-bridge}
KUBE_CONTROLLER_MANAGER=${KUBE_CONTROLLER_MANAGER:-}
cleanup() {
  local rc=$?
  # Every step of the clean-up runs, whatever an earlier one returned (set -e would end
  # the trap at the first failing test and leave etcd, the API server and namespaces).
  set +e
  # A failed run stops its pods first: the daemons leave running containers behind.
  if [ -n "${KUBECONFIG:-}" ] && [ -f "$KUBECONFIG" ]; then
    timeout 40 "$KUBECTL" --kubeconfig "$KUBECONFIG" delete pods --all --grace-period=1 --timeout=30s >/dev/null 2>&1 || true
  fi
  # A node paused by a failed check (SIGSTOP) must run again to act on its TERM.
  for pid in "${PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  bash scripts/cluster/control-plane-down.sh "$WORK/cp" --keep >/dev/null 2>&1 || true
  local state="" left="" kind name
  [ -f "$WORK/net/netns.state" ] && state=$(cat "$WORK/net/netns.state")
  # Processes still in a node's namespace once its daemon stopped (node-netns.sh down
  # would kill them) are leftovers of the run.
  while read -r kind name; do
    [ "$kind" = netns ] && [ -n "$(ip netns pids "$name" 2>/dev/null)" ] \
      && left="$left processes-in-$name:$(ip netns pids "$name" | tr '\n' ,)"
  done <<<"$state"
  bash scripts/cluster/node-netns.sh down "$WORK/net" || true
  # Processes still in the run's cgroups are its containers (their pods could not be
  # deleted, say with the API server down): reported, and killed.
  local stray
  stray=$(find /sys/fs/cgroup -path "*/${CGROUP_ROOT#/}/*" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | tr '\n' ' ')
  if [ -n "${stray// /}" ]; then
    left="$left processes-in-cgroups:${stray// /,}"
    # shellcheck disable=SC2086
    kill -9 $stray 2>/dev/null
    sleep 1
  fi
  find /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  find /sys/fs/cgroup -maxdepth 1 -type d -name "${CGROUP_ROOT#/}" -exec rmdir {} + 2>/dev/null || true
  # Nothing of the run may be left: namespaces, links, mounts, cgroups, processes.
  while read -r kind name; do
    case $kind in
      netns) [ -e "/run/netns/$name" ] && left="$left netns:$name" ;;
      link) ip link show "$name" >/dev/null 2>&1 && left="$left link:$name" ;;
    esac
  done <<<"$state"
  if grep -q -- "$WORK" /proc/self/mountinfo; then
    left="$left mounts:$(grep -c -- "$WORK" /proc/self/mountinfo)"
    # Reported, and not left on the machine (a failed run's containers, say).
    awk -v w="$WORK" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  fi
  ls -d /sys/fs/cgroup/"${CGROUP_ROOT#/}" /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" >/dev/null 2>&1 && left="$left cgroup:$CGROUP_ROOT"
  pgrep -f -- "$WORK/" >/dev/null && left="$left processes:$(pgrep -f -- "$WORK/" | tr '\n' ,)"
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  if [ -n "$left" ]; then
    echo "FAIL: left after the run:$left" >&2
    exit 1
  elif [ "$rc" -eq 0 ]; then
    echo "ok: nothing left after the run (network namespaces, links, mounts, cgroups, processes)"
  fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for n in "${NODES[@]}"; do tail -20 "$WORK/$n/daemon.log" >&2 || true; done; exit 1; }
pass() { echo "ok: $*"; }

# Each node in its own network namespace; the API server on the host side of their bridge.
bash scripts/cluster/node-netns.sh up "$WORK/net" "${NODES[@]}" "$LATE" >/dev/null
# shellcheck disable=SC1091
source "$WORK/net/netns.env"
node_ips=""
for n in "${NODES[@]}" "$LATE"; do node_ips="$node_ips $n=${NODE_ADDR[$n]}"; done
cidr_env=()
[ -n "$KUBE_CONTROLLER_MANAGER" ] && cidr_env=(CLUSTER_CIDR="$CLUSTER_CIDR")
env API_ADDRESS="$HOST_ADDR" NODE_IPS="$node_ips" "${cidr_env[@]}" \
  bash scripts/cluster/control-plane-up.sh "$WORK/cp" "${NODES[@]}" "$LATE" >/dev/null
# Each node's kubelet API port: free, below the ephemeral range (as control-plane-up picks).
declare -A KPORT
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
for n in "${NODES[@]}" "$LATE"; do
  for _ in $(seq 1 200); do
    p=$(( 10000 + RANDOM % (ephemeral_low - 10000) ))
    if ! ss -Htan "sport = :$p" | grep -q . && [[ " ${KPORT[*]} " != *" $p "* ]]; then KPORT[$n]=$p; break; fi
  done
done
# The built-in busybox image, offline, loaded into each node's store; and a second
# version of it (another digest) that a pod's image is updated to.
bash oci/busybox/build.sh "$WORK/busybox-oci" >/dev/null
bash oci/busybox/build.sh --ref localhost/busybox:v2 --dir v2 "$WORK/busybox-v2-oci" >/dev/null
for n in "${NODES[@]}" "$LATE"; do
  for layout in busybox-oci busybox-v2-oci; do
    "$PODHOST" load --socket "$WORK/$n/podhost.sock" --root-dir "$WORK/$n/root" "$WORK/$layout" >/dev/null
  done
done
IMAGE=localhost/busybox:latest
# shellcheck disable=SC1091
source "$WORK/cp/env.sh"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

# With the controller manager the bridge takes the Node's spec.podCIDR; without it each
# node gets its own --pod-cidr (but $LATE, which waits for its Node's podCIDR).
pod_net_flags() { # NAME
  if [ "$NODE_POD_NETWORK" = none ]; then echo "--pod-network none"
  elif [ -n "$KUBE_CONTROLLER_MANAGER" ] || [ "$1" = "$LATE" ]; then echo "--pod-network $NODE_POD_NETWORK"
  else echo "--pod-network $NODE_POD_NETWORK --pod-cidr ${NODE_POD_CIDR[$1]}"; fi
}
start_node() { # NAME LABELS
  local n=$1 labels=$2 dir=$WORK/$1
  mkdir -p "$dir/manifests"
  # No image GC: the test's images are loaded once, offline, and a build machine's disk
  # is often past the kubelet's 85 % (the GC would delete them under the pods to come).
  # nsenter, not `ip netns exec`: the daemon keeps the host's mounts and /sys/fs/cgroup.
  # shellcheck disable=SC2046
  nsenter --net="/run/netns/${NODE_NETNS[$n]}" \
  "$PODHOST" --socket "$dir/podhost.sock" daemon --node-name "$n" \
    --root-dir "$dir/root" --pod-manifest-path "$dir/manifests" --log-dir "$dir/logs" \
    --config-dir "$dir/config" $(pod_net_flags "$n") --eviction-hard= --image-gc-high-threshold 100 \
    --cgroup-root "$CGROUP_ROOT/$n" \
    --kubeconfig "$WORK/cp/node-$n.kubeconfig" --kube-record "$dir/api.jsonl" \
    --node-labels "$labels" --register-with-taints "dedicated=$n:NoSchedule" \
    --kube-reserved cpu=100m,memory=128Mi --max-pods 50 \
    --node-ip "${NODE_ADDR[$n]}" --port "${KPORT[$n]}" --client-ca-file "$WORK/cp/pki/ca.crt" \
    --tls-cert-file "$WORK/cp/pki/kubelet-$n.crt" --tls-private-key-file "$WORK/cp/pki/kubelet-$n.key" \
    >>"$dir/daemon.log" 2>&1 &
  PIDS+=($!)
  PID_OF[$n]=$!
}
wait_for() { # SECONDS DESCRIPTION COMMAND...
  local secs=$1 until=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $until ] || fail "$what (not within ${secs} s)"
    sleep 0.2
  done
}
node_field() { k get node "$1" -o jsonpath="$2"; }

for n in "${NODES[@]}"; do start_node "$n" "tier=edge,podhost.io/test=$n"; done
for n in "${NODES[@]}"; do
  wait_for 30 "node $n Ready" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $n -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
  pass "$n registered and Ready"
  [ "$(node_field "$n" '{.metadata.labels.tier}')" = edge ] || fail "$n: label tier"
  [ "$(node_field "$n" '{.metadata.labels.kubernetes\.io/hostname}')" = "$n" ] || fail "$n: hostname label"
  [ "$(node_field "$n" '{.spec.taints[0].key}')" = dedicated ] || fail "$n: taint"
  [ "$(node_field "$n" '{.status.capacity.pods}')" = 50 ] || fail "$n: pods capacity"
  cpus=$(grep -c ^processor /proc/cpuinfo)
  [ "$(node_field "$n" '{.status.allocatable.cpu}')" = "$((cpus * 1000 - 100))m" ] || fail "$n: allocatable cpu"
  [[ "$(node_field "$n" '{.status.nodeInfo.containerRuntimeVersion}')" == podhost://* ]] || fail "$n: nodeInfo"
  for c in MemoryPressure DiskPressure PIDPressure; do
    [ "$(node_field "$n" "{.status.conditions[?(@.type==\"$c\")].status}")" = False ] || fail "$n: $c"
  done
  pass "$n: labels, taints, capacity, allocatable, nodeInfo, conditions"
  images=$(node_field "$n" '{range .status.images[*]}{.sizeBytes} {.names}{"\n"}{end}')
  busybox_line=$(grep -F '"localhost/busybox:latest"' <<<"$images") || fail "$n: status.images lacks localhost/busybox:latest: $images"
  [[ "$busybox_line" =~ ^[1-9][0-9]*\ \[\"localhost/busybox@sha256:[0-9a-f]{64}\" ]] || fail "$n: status.images entry '$busybox_line'"
  pass "$n: status.images lists the loaded busybox by digest and tag with its size"
  [ "$(k -n kube-node-lease get lease "$n" -o jsonpath='{.spec.holderIdentity}/{.spec.leaseDurationSeconds}/{.metadata.ownerReferences[0].name}')" = "$n/40/$n" ] \
    || fail "$n: lease holder, duration, owner"
done
first=$(k -n kube-node-lease get lease podhost-a -o jsonpath='{.spec.renewTime}')
wait_for 25 "lease of podhost-a renewed" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG -n kube-node-lease get lease podhost-a -o jsonpath='{.spec.renewTime}')\" != '$first' ]"
pass "leases renewed"

# The node identity may only touch its own Node (NodeRestriction).
if "$KUBECTL" --kubeconfig "$WORK/cp/node-podhost-a.kubeconfig" label node podhost-b x=y >/dev/null 2>&1; then
  fail "node podhost-a could label node podhost-b"
fi
pass "NodeRestriction: a node cannot change another node"

# Restart podhost-a with other labels: the same Node, labels brought up to date.
uid=$(node_field podhost-a '{.metadata.uid}')
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true
start_node podhost-a "tier=core,podhost.io/test=podhost-a"
wait_for 30 "podhost-a relabelled" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node podhost-a -o jsonpath='{.metadata.labels.tier}')\" = core ]"
[ "$(node_field podhost-a '{.metadata.uid}')" = "$uid" ] || fail "podhost-a: a new Node after restart"
pass "restart re-registers the same Node with the new labels"

# ---------- pods bound by the API server ----------
# Without kube-controller-manager nothing creates the namespace's ServiceAccount,
# which the ServiceAccount admission wants to exist; the pods mount no token.
k create serviceaccount default >/dev/null 2>&1 || true
# pod NAME NODE GRACE COMMAND [PRESTOP]: a busybox pod bound to NODE, /shared a hostPath.
pod() {
  local prestop=""
  [ -n "${5:-}" ] && prestop="    lifecycle: {preStop: {exec: {command: [sh, -c, '$5']}}}"
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: $3
  volumes: [{name: shared, hostPath: {path: $WORK/shared, type: DirectoryOrCreate}}]
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, '$4']
    volumeMounts: [{name: shared, mountPath: /shared}]
$prestop
YAML
}
pod_field() { k get pod "$1" -o jsonpath="$2"; }
running() { [ "$(pod_field "$1" '{.status.phase}/{.status.containerStatuses[0].ready}')" = Running/true ]; }
gone() { ! k get pod "$1" >/dev/null 2>&1; }
mkdir -p "$WORK/shared"

# A graceful delete: preStop, then TERM, the final status, the object deleted.
pod web podhost-b 20 'echo started > /shared/web; trap "echo term >> /shared/web; exit 0" TERM; while :; do sleep 1; done' \
  'echo prestop >> /shared/web' | k create -f - >/dev/null
wait_for 30 "pod web Running in the API" running web
[ "$(pod_field web '{.status.hostIP}')" != "" ] || fail "web: no hostIP in its status"
[ "$(pod_field web '{.status.conditions[?(@.type=="Ready")].status}')" = True ] || fail "web: Ready condition"
[ "$(pod_field web '{.status.qosClass}')" = BestEffort ] || fail "web: qosClass"
pass "pod web runs on podhost-b, its status in the API (phase, Ready, hostIP, qosClass)"
uid=$(pod_field web '{.metadata.uid}')
t0=$SECONDS
k delete pod web --grace-period=20 --wait=false >/dev/null
wait_for 25 "pod web deleted from the API" gone web
[ $((SECONDS - t0)) -lt 15 ] || fail "web took $((SECONDS - t0)) s to go although it stops at once on TERM"
[ "$(tr '\n' ' ' <"$WORK/shared/web")" = "started prestop term " ] || fail "web: preStop then TERM expected, got: $(cat "$WORK/shared/web")"
python3 - "$WORK/podhost-b/api.jsonl" "$uid" <<'PY' || fail "web: final status then delete with grace 0 and the UID precondition"
import json, sys
path, uid = sys.argv[1], sys.argv[2]
ex = [json.loads(l) for l in open(path)]
mine = [e for e in ex if e["path"].endswith("/pods/web/status") or e["path"].endswith("/pods/web")]
last_patch = [e for e in mine if e["method"] == "PATCH"][-1]
st = last_patch["request"]["status"]["containerStatuses"][0]["state"]
assert "terminated" in st and st["terminated"]["exitCode"] == 0, st
assert last_patch["request"]["status"]["phase"] == "Succeeded", last_patch["request"]["status"]["phase"]
assert last_patch["request"]["metadata"]["uid"] == uid
dele = [e for e in mine if e["method"] == "DELETE"]
assert len(dele) == 1 and dele[0]["status"] == 200, dele
body = dele[0]["request"]
assert body["gracePeriodSeconds"] == 0 and body["preconditions"]["uid"] == uid, body
assert mine.index(last_patch) < mine.index(dele[0])
PY
pass "graceful delete: preStop → TERM → final status (exit 0, Succeeded) → deleted with grace 0 and the UID precondition, in $((SECONDS - t0)) s"

# A second delete shortens the grace: a pod ignoring TERM goes at the new deadline.
pod slow podhost-b 60 'trap "" TERM; while :; do sleep 1; done' | k create -f - >/dev/null
wait_for 30 "pod slow Running" running slow
t0=$SECONDS
k delete pod slow --grace-period=50 --wait=false >/dev/null
sleep 1
k delete pod slow --grace-period=3 --wait=false >/dev/null 2>&1 || true
wait_for 20 "pod slow deleted after its shortened grace" gone slow
[ $((SECONDS - t0)) -lt 15 ] || fail "slow took $((SECONDS - t0)) s: the grace was not shortened"
pass "a second delete shortened the grace (50 → 3 s): gone in $((SECONDS - t0)) s"

# A force delete (grace 0): the object goes at once; the node still stops the pod, fast.
pod stubborn podhost-b 60 'trap "" TERM; while :; do sleep 4711; done' | k create -f - >/dev/null
wait_for 30 "pod stubborn Running" running stubborn
pgrep -f "sleep 471[1]" >/dev/null || fail "stubborn: its process is not seen on the host"
k delete pod stubborn --grace-period=0 --force >/dev/null 2>&1
wait_for 10 "stubborn's processes gone after a force delete" bash -c '! pgrep -f "sleep 471[1]"'
pass "force delete: no process left"

# Pods survive a restart of their node (adopted, not restarted).
pod keep podhost-b 30 'while :; do sleep 1; done' | k create -f - >/dev/null
wait_for 30 "pod keep Running" running keep
started=$(pod_field keep '{.status.containerStatuses[0].state.running.startedAt}')
kill "${PIDS[1]}"; wait "${PIDS[1]}" 2>/dev/null || true
start_node podhost-b "tier=edge,podhost.io/test=podhost-b"
sleep 3
wait_for 30 "pod keep Running after the node restarted" running keep
[ "$(pod_field keep '{.status.containerStatuses[0].restartCount}')" = 0 ] || fail "keep restarted with its node"
[ "$(pod_field keep '{.status.containerStatuses[0].state.running.startedAt}')" = "$started" ] || fail "keep: a new container after the node restarted"
pass "a pod survives its node's restart"
# An image update restarts the container with the new image, as the kubelet does when a
# container's definition changes: killed with the pod's grace, started again at once.
image_now() { [ "$(pod_field keep '{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].image}/{.status.containerStatuses[0].ready}')" = "$1/$2/true" ]; }
k set image pod/keep app=localhost/busybox:v2 >/dev/null
# Its sh ignores SIGTERM (pid 1): the kill takes the pod's 30 s grace.
wait_for 60 "keep restarted with localhost/busybox:v2" image_now 1 localhost/busybox:v2
k get events --field-selector involvedObject.name=keep,reason=Killing -o jsonpath='{.items[*].message}' |
  grep -q "Container app definition changed, will be restarted" || fail "keep: the Killing event does not say the definition changed"
# Changed while its node is down: the restarted node tells the running container's image
# from the spec's (recorded with the attempt) and restarts it.
kill "${PID_OF[podhost-b]}"; wait "${PID_OF[podhost-b]}" 2>/dev/null || true
k set image pod/keep app=$IMAGE >/dev/null
start_node podhost-b "tier=edge,podhost.io/test=podhost-b"
wait_for 75 "keep restarted with $IMAGE after its node restarted" image_now 2 "$IMAGE"
k delete pod keep --grace-period=2 >/dev/null
pass "an image update restarts the container with it (Killing: definition changed), also one made while the node was down; deleted afterwards"

# ---------- a watch that expired (410 Gone) and status writes for a replaced pod ----------
# podhost-a is paused (SIGSTOP) while the cluster changes under it: a pod bound to it is
# deleted and another bound to it; two pods whose containers exit meanwhile are deleted
# and created again under their names (new UIDs), gap-renamed on podhost-a itself and
# gap-moved on podhost-b. Then the API server restarts with etcd compacted, so the
# node's watches resume from a resourceVersion the new server no longer has: 410 Gone,
# and a list again. Its status writes for the exited pods carry their old UIDs: for
# gap-renamed the UID does not match (409 Conflict; v1.36 answers 422 "metadata.uid:
# field is immutable"); for gap-moved NodeRestriction refuses first (403, the pod is
# bound elsewhere). One read of the pod shows it is another (or is refused: a node may
# read only its own pods), the write is dropped and the new pod left alone.
pod gap-deleted podhost-a 2 'sleep 3600' | k create -f - >/dev/null
pod gap-renamed podhost-a 2 'sleep 8; exit 0' | k create -f - >/dev/null
pod gap-moved podhost-a 2 'sleep 9; exit 0' | k create -f - >/dev/null
for p in gap-deleted gap-renamed gap-moved; do wait_for 30 "pod $p Running" running "$p"; done
old_renamed=$(pod_field gap-renamed '{.metadata.uid}')
record=$WORK/podhost-a/api.jsonl
record_from=$(wc -l <"$record")
kill -STOP "${PID_OF[podhost-a]}"
k delete pod gap-deleted --wait=false >/dev/null
pod gap-created podhost-a 2 'sleep 3600' | k create -f - >/dev/null
# The containers exit while their node is paused (their shims record it).
wait_for 20 "gap-renamed's and gap-moved's containers to exit" bash -c '! pgrep -f "sleep [89]; exit 0" >/dev/null'
k delete pod gap-renamed gap-moved --grace-period=0 --force >/dev/null 2>&1
pod gap-renamed podhost-a 2 'sleep 3600' | k create -f - >/dev/null
pod gap-moved podhost-b 2 'sleep 3600' | k create -f - >/dev/null
bash scripts/cluster/restart-apiserver.sh "$WORK/cp" --compact 2>&1 | sed 's/^/  /' ||
  { kill -CONT "${PID_OF[podhost-a]}"; fail "the API server did not come back"; }
kill -CONT "${PID_OF[podhost-a]}"
wait_for 60 "gap-created (bound while podhost-a was away) Running" running gap-created
wait_for 60 "gap-deleted (deleted while podhost-a was away) stopped and its object gone" gone gap-deleted
wait_for 60 "gap-renamed, the new one, Running on podhost-a" running gap-renamed
wait_for 30 "gap-moved, the new one, Running on podhost-b" running gap-moved
[ "$(pod_field gap-renamed '{.metadata.uid}')" != "$old_renamed" ] || fail "gap-renamed: still the old pod"
[ "$(pod_field gap-moved '{.spec.nodeName}')" = podhost-b ] || fail "gap-moved: not on podhost-b"
# What podhost-a met, from its own record of the exchanges since the pause.
answers_since() { # CODE: "METHOD PATH" of each exchange since the pause answered with CODE (or a watch event carrying it)
  tail -n +"$((record_from + 1))" "$record" | python3 -c '
import json, sys
code = int(sys.argv[1])
for line in sys.stdin:
    x = json.loads(line)
    events = []
    if x["status"] == 200 and "watch=" in x.get("query", ""):
        for e in x["response"].splitlines():
            try:
                events.append(json.loads(e))
            except ValueError:
                pass
    if x["status"] == code or any(e.get("type") == "ERROR" and e.get("object", {}).get("code") == code for e in events):
        print(x["method"], x["path"])
' "$1"
}
expired=$(answers_since 410)
grep -q "^GET /api/v1/pods$" <<<"$expired" ||
  fail "podhost-a's pod watch met no 410 Gone although the API server restarted with etcd compacted (410s: ${expired:-none})"
# A write is refused once or twice (a status change may be under way), then dropped.
refusals() { # POD CODE: how many of podhost-a's status writes for POD got CODE since the pause
  answers_since "$2" | grep -c "^PATCH /api/v1/namespaces/default/pods/$1/status$" || true
}
renamed_code=""
for code in 409 422; do [ "$(refusals gap-renamed $code)" -ge 1 ] && renamed_code=$code; done
[ -n "$renamed_code" ] || fail "podhost-a's status write for the old gap-renamed was not refused (409 or 422 on its UID)"
moved=$(refusals gap-moved 403)
[ "$moved" -ge 1 ] || fail "podhost-a's status write for the old gap-moved was not refused (403) by NodeRestriction"
renamed=$(refusals gap-renamed "$renamed_code")
sleep 12
[ "$(refusals gap-moved 403)" = "$moved" ] && [ "$(refusals gap-renamed "$renamed_code")" = "$renamed" ] ||
  fail "podhost-a keeps writing the old pods' statuses: gap-renamed $(refusals gap-renamed "$renamed_code") x $renamed_code, gap-moved $(refusals gap-moved 403) x 403"
sleep 2
[ "$(pod_field gap-renamed '{.status.phase}/{.status.containerStatuses[0].restartCount}')" = Running/0 ] ||
  fail "the new gap-renamed: $(pod_field gap-renamed '{.status.phase}') — the old pod's status written over it?"
[ "$(pod_field gap-moved '{.status.phase}/{.status.containerStatuses[0].restartCount}')" = Running/0 ] ||
  fail "the new gap-moved on podhost-b: $(pod_field gap-moved '{.status.phase}') — the old pod's status written over it?"
wait_for 30 "the old gap-renamed's and gap-moved's processes gone" bash -c '! pgrep -f "sleep [89]; exit 0"'
k delete pod gap-created gap-renamed gap-moved --grace-period=1 --wait=false >/dev/null
pass "410 Gone live (API server restarted, etcd compacted; watches listed again: $(awk '{print $2}' <<<"$expired" | sort -u | tr '\n' ' ')): a pod bound and a pod deleted while podhost-a was away are run and removed; status writes for pods recreated under their names refused ($renamed_code on the same node: the UID; 403 for one bound elsewhere: NodeRestriction) and dropped after one read; the new pods keep their own status"

# Node-side admission: the kubelet's reasons and messages, as a Failed status.
rejected() { [ "$(pod_field "$1" '{.status.phase}/{.status.reason}')" = "Failed/$2" ]; }
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: hungry}
spec:
  nodeName: podhost-b
  automountServiceAccountToken: false
  containers: [{name: app, image: $IMAGE, imagePullPolicy: Never, resources: {requests: {cpu: "64"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: picky}
spec:
  nodeName: podhost-b
  automountServiceAccountToken: false
  nodeSelector: {tier: core}
  containers: [{name: app, image: $IMAGE, imagePullPolicy: Never}]
YAML
wait_for 30 "hungry rejected with OutOfcpu" rejected hungry OutOfcpu
[[ "$(pod_field hungry '{.status.message}')" == "Pod was rejected: Node didn't have enough resource: cpu, requested: 64000, used: 0, capacity: "* ]] \
  || fail "hungry: message $(pod_field hungry '{.status.message}')"
wait_for 30 "picky rejected with NodeAffinity" rejected picky NodeAffinity
[ "$(pod_field picky '{.status.message}')" = "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" ] \
  || fail "picky: message $(pod_field picky '{.status.message}')"
k delete pod hungry picky --grace-period=1 >/dev/null
# The Node relabelled by an administrator: the node admits against the new labels.
k label node podhost-b relabelled=yes >/dev/null
sleep 1
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: picky2}
spec:
  nodeName: podhost-b
  automountServiceAccountToken: false
  nodeSelector: {relabelled: "yes"}
  containers: [{name: app, image: $IMAGE, imagePullPolicy: Never, command: [sleep, "3600"]}]
YAML
wait_for 30 "picky2 Running after the relabel" running picky2
# Someone else overwrites the status: the node writes its own again (the status
# manager's reconcile, every 10 s).
k patch pod picky2 --subresource=status --type=merge -p '{"status":{"phase":"Failed","reason":"Tampered"}}' >/dev/null
[ "$(pod_field picky2 '{.status.reason}')" = Tampered ] || fail "picky2: the status patch did not take"
wait_for 40 "picky2's status written again after someone else changed it" running picky2
k delete pod picky2 --grace-period=1 >/dev/null
k label node podhost-b relabelled- >/dev/null
pass "admission: OutOfcpu and NodeAffinity rejections with the kubelet's messages; rejected pods deleted; a relabelled Node admits by its new labels"

# ---------- kubectl logs and exec through the API server ----------
# The API server reaches podhost-a's kubelet API at ${NODE_ADDR[podhost-a]}:${KPORT[podhost-a]} with its
# --kubelet-client-certificate (O=system:masters); the pod restarts once, for --previous.
pod talk podhost-a 5 'echo one; echo two; echo three; if [ -e /shared/talk-restarted ]; then while :; do echo tick; sleep 1; done; else touch /shared/talk-restarted; sleep 1; exit 3; fi' \
  | k create -f - >/dev/null
wait_for 60 "pod talk Running after one restart" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get pod talk -o jsonpath='{.status.containerStatuses[0].restartCount}/{.status.phase}')\" = 1/Running ]"
sleep 2
out=$(k logs talk) || fail "kubectl logs talk: $out"
[[ "$out" == $'one\ntwo\nthree\ntick'* ]] || fail "kubectl logs talk: $out"
[ "$(k logs talk --tail=1)" = tick ] || fail "kubectl logs --tail=1: $(k logs talk --tail=1)"
[ "$(k logs talk --previous)" = $'one\ntwo\nthree' ] || fail "kubectl logs --previous: $(k logs talk --previous)"
timeout 4 "$KUBECTL" --kubeconfig "$KUBECONFIG" logs -f --tail=0 talk >"$WORK/follow.out" 2>&1 || true
ticks=$(grep -c '^tick$' "$WORK/follow.out" || true)
[ "$ticks" -ge 2 ] || fail "kubectl logs -f: $ticks new lines in 4 s: $(cat "$WORK/follow.out")"
pass "kubectl logs through the API server: whole, --tail=1, --previous after a restart, -f ($ticks lines in 4 s)"
# A container that cannot start has no log: kubectl says why, as with the kubelet.
pod nopull podhost-a 1 'true' | sed "s#image: $IMAGE#image: localhost/not-loaded:1#" | k create -f - >/dev/null
nopull_waits() { [ "$(pod_field nopull '{.status.containerStatuses[0].state.waiting.reason}')" = ErrImageNeverPull ]; }
wait_for 30 "pod nopull waiting with ErrImageNeverPull" nopull_waits
out=$(k logs nopull 2>&1) && fail "kubectl logs of a container that never started succeeded: $out"
[ "$out" = 'Error from server (BadRequest): container "app" in pod "nopull" is waiting to start: ErrImageNeverPull' ] \
  || fail "kubectl logs nopull: $out"
k delete pod nopull --grace-period=1 >/dev/null
pass "kubectl logs of a container waiting to start: the kubelet's BadRequest naming the reason"
# Other callers of the kubelet API: none without credentials, a node's own identity
# may not proxy (no nodes/proxy for system:node), the masters' certificate may.
kapi="https://${NODE_ADDR[podhost-a]}:${KPORT[podhost-a]}"
pki=$WORK/cp/pki
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" "$kapi/healthz")
[ "$code" = 401 ] || fail "kubelet API without credentials: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" --cert "$pki/node-podhost-b.crt" --key "$pki/node-podhost-b.key" "$kapi/containerLogs/default/talk/app")
[ "$code" = 403 ] || fail "kubelet API as system:node:podhost-b: $code"
[ "$(curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$kapi/containerLogs/default/talk/app?tailLines=1")" = tick ] \
  || fail "kubelet API as admin: containerLogs"
pass "kubelet API: anonymous 401, system:node:podhost-b 403 (SubjectAccessReview), system:masters served"
# Statistics as the kubelet serves them: through the API server's node proxy, and
# straight to a caller allowed nodes/stats and nodes/metrics only (metrics-server's
# RBAC), which may not read logs.
summary=$(k get --raw /api/v1/nodes/podhost-a/proxy/stats/summary) || fail "stats/summary through the API server: $summary"
python3 - "$summary" <<'PY' || fail "stats/summary of podhost-a: $(head -c 600 <<<"$summary")"
import json, sys
s = json.loads(sys.argv[1])
assert s["node"]["nodeName"] == "podhost-a", s["node"]["nodeName"]
assert s["node"]["cpu"]["usageCoreNanoSeconds"] > 0
assert s["node"]["memory"]["workingSetBytes"] > 0
talk = [p for p in s["pods"] if (p["podRef"]["namespace"], p["podRef"]["name"]) == ("default", "talk")]
assert talk, [p["podRef"] for p in s["pods"]]
app = [c for c in talk[0]["containers"] if c["name"] == "app"][0]
assert app["memory"]["workingSetBytes"] > 0 and app["cpu"]["usageCoreNanoSeconds"] > 0, app
PY
resource=$(k get --raw /api/v1/nodes/podhost-a/proxy/metrics/resource) || fail "metrics/resource: $resource"
for series in 'node_cpu_usage_seconds_total' 'node_memory_working_set_bytes' \
  'container_cpu_usage_seconds_total\{container="app",namespace="default",pod="talk"\}' \
  'container_memory_working_set_bytes\{container="app",namespace="default",pod="talk"\}' \
  'container_start_time_seconds\{container="app",namespace="default",pod="talk"\}' \
  'pod_memory_working_set_bytes\{namespace="default",pod="talk"\}'; do
  grep -qE "^$series [0-9.]+ [0-9]{13}\$" <<<"$resource" || fail "metrics/resource lacks $series: $resource"
done
cadvisor=$(k get --raw /api/v1/nodes/podhost-a/proxy/metrics/cadvisor) || fail "metrics/cadvisor: $cadvisor"
grep -q '^container_cpu_usage_seconds_total{.*pod="talk"' <<<"$cadvisor" || fail "metrics/cadvisor lacks talk's cpu"
# The node agent's own metrics, where Kubernetes' e2e framework reads the kubelet's.
own=$(k get --raw /api/v1/nodes/podhost-a/proxy/metrics) || fail "metrics: $own"
grep -qE '^kubelet_running_pods [0-9]+' <<<"$own" || fail "metrics lacks kubelet_running_pods: $(head -c 300 <<<"$own")"
openssl req -new -newkey rsa:2048 -nodes -keyout "$WORK/reader.key" -out "$WORK/reader.csr" -subj "/CN=stats-reader" 2>/dev/null
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$WORK/reader.ext"
openssl x509 -req -in "$WORK/reader.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 1 \
  -extfile "$WORK/reader.ext" -out "$WORK/reader.crt" 2>/dev/null
k create clusterrole stats-reader --verb=get --resource=nodes/stats,nodes/metrics >/dev/null
k create clusterrolebinding stats-reader --clusterrole=stats-reader --user=stats-reader >/dev/null
reader=(--cacert "$pki/ca.crt" --cert "$WORK/reader.crt" --key "$WORK/reader.key")
# (a refusal before the binding is seen is cached for 30 s, as the kubelet's is)
wait_for 45 "stats-reader allowed /stats/summary" curl -sf "${reader[@]}" "$kapi/stats/summary"
curl -sf "${reader[@]}" "$kapi/metrics/resource" | grep -q '^node_cpu_usage_seconds_total ' || fail "stats-reader: /metrics/resource"
code=$(curl -s -o /dev/null -w '%{http_code}' "${reader[@]}" "$kapi/containerLogs/default/talk/app")
[ "$code" = 403 ] || fail "stats-reader read logs: $code"
pass "kubelet API statistics: /stats/summary, /metrics/resource (metrics-server's series with timestamps), /metrics/cadvisor through the API server; a nodes/stats+nodes/metrics identity served them and refused logs (403)"
# kubectl top: metrics-server (built with the control plane) as the aggregated API
# metrics.k8s.io, scraping the podhost nodes' /metrics/resource as it scrapes kubelets.
if [ -n "${METRICS_SERVER:-}" ]; then
  KUBECTL=$KUBECTL bash scripts/cluster/metrics-server-up.sh "$WORK/cp" "$METRICS_SERVER"
  t0=$SECONDS
  top_node() { "$KUBECTL" --kubeconfig "$KUBECONFIG" top node podhost-a --no-headers 2>/dev/null | grep -E '^podhost-a +[0-9]+m +[0-9]+% +[1-9][0-9]*Mi +[0-9]+%'; }
  wait_for 90 "kubectl top node podhost-a" top_node
  top_pod() { "$KUBECTL" --kubeconfig "$KUBECONFIG" top pod talk --containers --no-headers 2>/dev/null | grep -E '^talk +app +[0-9]+m +[0-9]+Mi'; }
  wait_for 60 "kubectl top pod talk --containers" top_pod
  pass "kubectl top node: '$(top_node | tr -s ' ')'; kubectl top pod talk --containers: '$(top_pod | tr -s ' ')' ($((SECONDS - t0)) s after metrics-server started)"
else
  echo "SKIP kubectl top: METRICS_SERVER is not set (scripts/cluster/build-control-plane.sh builds it)"
fi
# kubectl exec: kubectl 1.30+ asks for a websocket (v5.channel.k8s.io); the 1.20 API
# server passes the upgrade through to the kubelet API.
[ "$(k exec talk -- cat /etc/hostname)" = talk ] || fail "kubectl exec talk -- cat /etc/hostname: $(k exec talk -- cat /etc/hostname 2>&1)"
[ "$(printf 'via stdin\n' | k exec -i talk -- cat)" = "via stdin" ] || fail "kubectl exec -i: $(printf 'via stdin\n' | k exec -i talk -- cat 2>&1)"
[ "$(k exec talk -- sh -c 'echo to-stderr >&2' 2>&1 >/dev/null)" = to-stderr ] || fail "kubectl exec: stderr"
rc=0; k exec talk -- sh -c 'exit 7' >/dev/null 2>&1 || rc=$?
[ "$rc" = 7 ] || fail "kubectl exec: exit code 7 expected, got $rc"
pass "kubectl exec through the API server: stdout, stdin (-i), stderr, exit code 7"
# kubectl exec over SPDY/3.1 (websockets off, as kubectl before 1.30 and API servers
# before 1.30 speak to a kubelet): the API server passes the SPDY upgrade through.
ks() { KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
[ "$(ks exec talk -- cat /etc/hostname)" = talk ] || fail "SPDY exec: stdout: $(ks exec talk -- cat /etc/hostname 2>&1)"
[ "$(printf 'via spdy\n' | ks exec -i talk -- cat)" = "via spdy" ] || fail "SPDY exec -i: $(printf 'via spdy\n' | ks exec -i talk -- cat 2>&1)"
[ "$(ks exec talk -- sh -c 'echo to-stderr >&2' 2>&1 >/dev/null)" = to-stderr ] || fail "SPDY exec: stderr"
rc=0; ks exec talk -- sh -c 'exit 5' >/dev/null 2>&1 || rc=$?
[ "$rc" = 5 ] || fail "SPDY exec: exit code 5 expected, got $rc"
# Far more than SPDY's 64 KiB initial window, which kubectl never widens.
n=$(ks exec talk -- head -c 3000000 /dev/zero | wc -c)
[ "$n" = 3000000 ] || fail "SPDY exec: 3000000 bytes of output expected, got $n"
pass "kubectl exec over SPDY/3.1 through the API server: stdout, stdin (-i), stderr, exit code 5, 3 MB of output"
# -t: script(1) gives kubectl a terminal of 30 rows by 100 columns; the command gets a
# pty of the container's own (tty names it) sized by kubectl's resize message. Both
# protocols. (script types a NUL when its stdin ends, echoed back as ^@: dropped.) The
# command is started once the first size came or after 1 s; on a loaded machine kubectl
# sends it later, so the size is read until it is set (busybox's stty fails on 0x0).
size_loop='for i in 1 2 3 4 5 6 7 8 9 10; do s=$(stty size 2>/dev/null) && [ "$s" != "0 0" ] && break; sleep 0.5; done; echo "$s"'
for ws in true false; do
  out=$(KUBECTL_REMOTE_COMMAND_WEBSOCKETS=$ws script -qec "stty rows 30 cols 100; $KUBECTL --kubeconfig $KUBECONFIG exec -it talk -- sh -c 'tty; $size_loop'" /dev/null </dev/null | tr -d '\r' | sed 's/^\(\^@\)*//')
  grep -qx '/dev/pts/[0-9]*' <<<"$out" && grep -qx '30 100' <<<"$out" \
    || fail "kubectl exec -it (websockets $ws): tty and stty size: $out"
done
pass "kubectl exec -it over websocket and SPDY: tty is a /dev/pts of the container, stty size 30 100 from the resize"
# Round trip of an exec (kubectl exec talk -- true): median of 10 per protocol.
median_exec_ms() { # WEBSOCKETS(true|false)
  local i t0 t1 times=()
  for i in $(seq 1 10); do
    t0=$(date +%s%N)
    KUBECTL_REMOTE_COMMAND_WEBSOCKETS=$1 "$KUBECTL" --kubeconfig "$KUBECONFIG" exec talk -- true >/dev/null 2>&1 || fail "kubectl exec talk -- true (websockets $1)"
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n '5,6p' | awk '{ s += $1 } END { print s / 2 }'
}
pass "kubectl exec talk -- true, median of 10: websocket $(median_exec_ms true) ms, SPDY $(median_exec_ms false) ms"
# kubectl port-forward through the API server to the kubelet API's /portForward (SPDY/3.1,
# portforward.k8s.io) and into talk's network namespace, where an exec starts busybox
# httpd; with KUBECTL_PORT_FORWARD_WEBSOCKETS=false, and with kubectl's default (a
# websocket tunnel the 1.20 API server cannot make, refused, then SPDY).
k exec talk -- sh -c 'mkdir -p /tmp/www && echo port-forward-ok >/tmp/www/index.html && httpd -p 8080 -h /tmp/www' \
  || fail "starting httpd in talk"
for pfws in false true; do
  for _ in $(seq 1 200); do
    lport=$(( 10000 + RANDOM % (ephemeral_low - 10000) ))
    ss -Htan "sport = :$lport" | grep -q . || break
  done
  KUBECTL_PORT_FORWARD_WEBSOCKETS=$pfws "$KUBECTL" --kubeconfig "$KUBECONFIG" port-forward pod/talk "$lport:8080" >"$WORK/pf.out" 2>&1 &
  pf=$!; PIDS+=("$pf")
  wait_for 20 "kubectl port-forward listening (websockets $pfws)" bash -c "ss -Htln 'sport = :$lport' | grep -q ."
  body=$(curl -sf --max-time 10 "http://127.0.0.1:$lport/") || fail "GET through kubectl port-forward (websockets $pfws): $(cat "$WORK/pf.out")"
  body2=$(curl -sf --max-time 10 "http://127.0.0.1:$lport/") || fail "second GET through kubectl port-forward (websockets $pfws): $(cat "$WORK/pf.out")"
  kill "$pf"; wait "$pf" 2>/dev/null || true
  [ "$body/$body2" = port-forward-ok/port-forward-ok ] || fail "kubectl port-forward (websockets $pfws): $body / $body2"
done
pass "kubectl port-forward through the API server (SPDY; kubectl's websocket default falls back to it): two GETs to httpd in the pod"
k delete pod talk --grace-period=1 >/dev/null
wait_for 20 "pod talk deleted" gone talk

# ---------- what changes in a running pod's object ----------
# Readiness gates (spec.readinessGates): Ready waits for the gate's condition, which
# someone else writes into the status, and the node's own writes leave it alone.
pod gated podhost-a 1 'while :; do sleep 1; done' \
  | sed 's/^spec:$/spec:\n  readinessGates: [{conditionType: example.com\/lb}]/' | k create -f - >/dev/null
ready_of() { pod_field "$1" '{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}'; }
gate_held() { [ "$(pod_field gated '{.status.containerStatuses[0].ready}')" = true ] && [ "$(ready_of gated)" = False/ReadinessGatesNotReady ]; }
wait_for 30 "pod gated: containers ready, Ready held by its gate" gate_held
msg=$(pod_field gated '{.status.conditions[?(@.type=="Ready")].message}')
[ "$msg" = 'corresponding condition of pod readiness gate "example.com/lb" does not exist.' ] || fail "gated: Ready's message: $msg"
k patch pod gated --subresource=status --type=strategic \
  -p '{"status":{"conditions":[{"type":"example.com/lb","status":"True"}]}}' >/dev/null
wait_for 20 "pod gated Ready once its gate's condition is True" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get pod gated -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
k patch pod gated --subresource=status --type=strategic \
  -p '{"status":{"conditions":[{"type":"example.com/lb","status":"False"}]}}' >/dev/null
gate_false() { [ "$(ready_of gated)" = False/ReadinessGatesNotReady ] && [ "$(pod_field gated '{.status.conditions[?(@.type=="example.com/lb")].status}')" = False ]; }
wait_for 20 "pod gated held again when its gate's condition turns False" gate_false
pass "readiness gates: Ready held (ReadinessGatesNotReady, the kubelet's message) until the gate's condition is True, held again when it turns False; the condition stays the writer's"
# activeDeadlineSeconds set on a running pod: it fails with DeadlineExceeded, as the kubelet.
k patch pod gated -p '{"spec":{"activeDeadlineSeconds":5}}' >/dev/null
deadline() { [ "$(pod_field gated '{.status.phase}/{.status.reason}')" = Failed/DeadlineExceeded ]; }
wait_for 30 "pod gated Failed with DeadlineExceeded after its new activeDeadlineSeconds" deadline
pass "activeDeadlineSeconds added to a running pod: Failed, DeadlineExceeded"
k delete pod gated --grace-period=1 >/dev/null
# An ephemeral container added through the API (kubectl debug: pods/ephemeralcontainers)
# starts in the running pod, in its target container's pid namespace.
pod debugged podhost-a 1 'while :; do sleep 1; done' | k create -f - >/dev/null
wait_for 30 "pod debugged Running" running debugged
k debug debugged --image="$IMAGE" --image-pull-policy=Never --container=dbg --target=app -- sleep 3600 >/dev/null 2>&1 \
  || fail "kubectl debug debugged"
dbg_runs() { [ -n "$(pod_field debugged '{.status.ephemeralContainerStatuses[?(@.name=="dbg")].state.running.startedAt}')" ]; }
wait_for 30 "ephemeral container dbg running" dbg_runs
procs=$(k exec debugged -c dbg -- ps -o comm) || fail "kubectl exec into the ephemeral container"
grep -q '^sh$' <<<"$procs" || fail "dbg does not see app's processes (its target's pid namespace): $procs"
pass "kubectl debug: the ephemeral container runs in the pod, sees its target's processes, kubectl exec reaches it"
# A log read over a websocket through the API server (the e2e framework's way).
k exec debugged -c app -- sh -c 'echo over the websocket > /proc/1/fd/1'
logs=$(python3 scripts/cluster/ws-log.py "$KUBE_APISERVER_URL/api/v1/namespaces/default/pods/debugged/log?container=app" \
  "$pki/ca.crt" "$pki/admin.crt" "$pki/admin.key") || fail "websocket log read"
[ "$logs" = "over the websocket" ] || fail "log over a websocket through the API server: '$logs'"
pass "a container's log read over a websocket through the API server"
k delete pod debugged --grace-period=1 >/dev/null

# ---------- service environment variables ----------
# As the kubelet: the default/kubernetes service's variables in every pod (client-go's
# in-cluster config needs KUBERNETES_SERVICE_HOST/PORT), the pod's namespace's services'
# unless enableServiceLinks is false.
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: web-svc}
spec:
  selector: {app: none}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: metrics, port: 9090, protocol: TCP}
YAML
kip=$(k get service kubernetes -o jsonpath='{.spec.clusterIP}')
wip=$(k get service web-svc -o jsonpath='{.spec.clusterIP}')
[ -n "$kip" ] && [ -n "$wip" ] || fail "service cluster IPs: kubernetes=$kip web-svc=$wip"
pod svc-links podhost-a 1 'while :; do sleep 1; done' | k create -f - >/dev/null
pod svc-nolinks podhost-a 1 'while :; do sleep 1; done' | sed 's/^spec:$/spec:\n  enableServiceLinks: false/' | k create -f - >/dev/null
wait_for 30 "pod svc-links Running" running svc-links
wait_for 30 "pod svc-nolinks Running" running svc-nolinks
links=$(k exec svc-links -- env)
for want in "KUBERNETES_SERVICE_HOST=$kip" KUBERNETES_SERVICE_PORT=443 KUBERNETES_SERVICE_PORT_HTTPS=443 \
  "KUBERNETES_PORT=tcp://$kip:443" "WEB_SVC_SERVICE_HOST=$wip" WEB_SVC_SERVICE_PORT=80 \
  WEB_SVC_SERVICE_PORT_HTTP=80 WEB_SVC_SERVICE_PORT_METRICS=9090 "WEB_SVC_PORT=tcp://$wip:80" \
  "WEB_SVC_PORT_9090_TCP_ADDR=$wip"; do
  grep -qx -- "$want" <<<"$links" || fail "svc-links: no $want in its env: $links"
done
pass "service environment variables: the kubernetes service's and the namespace's web-svc's"
# envFrom keys that are not shell identifiers (Kubernetes' ConfigMap and Secret env specs
# use data-1 and a p- prefix) reach the container's process as they are.
k create configmap env-names --from-literal=data-1=value-1 >/dev/null
pod env-names podhost-a 1 'while :; do sleep 1; done' \
  | sed 's/^    command:/    envFrom: [{configMapRef: {name: env-names}}, {prefix: p-, configMapRef: {name: env-names}}]\n    command:/' \
  | k create -f - >/dev/null
wait_for 30 "pod env-names Running" running env-names
names=$(k exec env-names -- env)
grep -qx data-1=value-1 <<<"$names" && grep -qx p-data-1=value-1 <<<"$names" || fail "env-names: data-1 and p-data-1 not in env: $names"
pass "envFrom names that are not identifiers (data-1, p-data-1) in the container's environment"
k delete pod env-names --grace-period=1 --wait=false >/dev/null
nolinks=$(k exec svc-nolinks -- env)
grep -qx "KUBERNETES_SERVICE_HOST=$kip" <<<"$nolinks" && grep -qx KUBERNETES_SERVICE_PORT=443 <<<"$nolinks" \
  || fail "svc-nolinks: no KUBERNETES_SERVICE_HOST/PORT: $nolinks"
! grep -q '^WEB_SVC_' <<<"$nolinks" || fail "svc-nolinks (enableServiceLinks: false) has web-svc's variables: $nolinks"
pass "enableServiceLinks: false gives only the kubernetes service's variables"
k delete pod svc-links svc-nolinks --grace-period=1 >/dev/null
k delete service web-svc >/dev/null

# ---------- ConfigMaps and Secrets from the API server (issue 13) ----------
# A configMap volume, a secretKeyRef env and an optional envFrom of a missing
# ConfigMap; the node reads only what its pods name (Node authorizer), one watch each.
k create configmap app-config --from-literal=greeting=hello >/dev/null
k create secret generic app-secret --from-literal=password=s3cret >/dev/null
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: conf}
spec:
  nodeName: podhost-a
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: shared, hostPath: {path: $WORK/shared, type: DirectoryOrCreate}}
  - {name: cfg, configMap: {name: app-config}}
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'echo "\$PASSWORD/\${OPTIONAL:-unset}" > /shared/conf-env; while :; do cat /etc/app/greeting > /shared/conf-file.tmp; mv /shared/conf-file.tmp /shared/conf-file; sleep 0.2; done']
    env: [{name: PASSWORD, valueFrom: {secretKeyRef: {name: app-secret, key: password}}}]
    envFrom: [{configMapRef: {name: not-there, optional: true}}]
    volumeMounts: [{name: shared, mountPath: /shared}, {name: cfg, mountPath: /etc/app}]
YAML
wait_for 30 "pod conf Running" running conf
wait_for 10 "conf's env written" test -s "$WORK/shared/conf-env"
[ "$(cat "$WORK/shared/conf-env")" = "s3cret/unset" ] || fail "conf: env from the Secret: $(cat "$WORK/shared/conf-env")"
wait_for 10 "conf's configMap file read" test -s "$WORK/shared/conf-file"
[ "$(cat "$WORK/shared/conf-file")" = hello ] || fail "conf: configMap volume: $(cat "$WORK/shared/conf-file")"
pass "pod conf: env from a Secret, an optional missing envFrom left out, a configMap volume, all from the API"
t0=$SECONDS
k patch configmap app-config -p '{"data":{"greeting":"bye"}}' >/dev/null
wait_for 30 "the changed ConfigMap in conf's volume" bash -c "[ \"\$(cat $WORK/shared/conf-file)\" = bye ]"
pass "a changed ConfigMap reached the running container's volume in $((SECONDS - t0)) s"
python3 - "$WORK/podhost-a/api.jsonl" <<'PY' || fail "the node read more than the objects its pods name"
import json, sys
ex = [json.loads(l) for l in open(sys.argv[1])]
reads = [e for e in ex if "/configmaps" in e["path"] or "/secrets" in e["path"]]
assert reads, "no ConfigMap or Secret read at all"
for e in reads:
    assert e["method"] == "GET", e["method"]
    q = e.get("query") or e["path"]
    assert "metadata.name" in q, "a read of a whole collection: " + e["path"]
PY
pass "ConfigMaps and Secrets read one object at a time (fieldSelector metadata.name)"

# Events in the API: the kubelet's Pulled/Created/Started about the container, from
# the kubelet on podhost-a (no Scheduled: the pod was bound by nodeName).
pod_events() { # POD → reason/component/host/fieldPath/count lines
  k get events --field-selector "involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.reason}/{.source.component}/{.source.host}/{.involvedObject.fieldPath}/{.count}{"\n"}{end}'
}
has_events() { local got; got=$(pod_events "$1"); shift; for want in "$@"; do grep -qx "$want" <<<"$got" || return 1; done; }
wait_for 30 "conf's events in the API" has_events conf \
  'Pulled/kubelet/podhost-a/spec.containers{app}/1' 'Created/kubelet/podhost-a/spec.containers{app}/1' \
  'Started/kubelet/podhost-a/spec.containers{app}/1'
[ "$(k get events --field-selector involvedObject.name=conf,reason=Started -o jsonpath='{.items[0].involvedObject.uid}')" = "$(pod_field conf '{.metadata.uid}')" ] \
  || fail "conf: the Started event names another pod UID"
pass "kubectl get events: Pulled, Created, Started for conf's container, from the kubelet on podhost-a"

# A required Secret that does not exist: CreateContainerConfigError with the
# kubelet's message, and the pod starts once the Secret is created.
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: needy}
spec:
  nodeName: podhost-a
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'while :; do sleep 1; done']
    env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: late-secret, key: token}}}]
YAML
waiting_reason() { [ "$(pod_field "$1" '{.status.containerStatuses[0].state.waiting.reason}')" = "$2" ]; }
wait_for 30 "needy waits with CreateContainerConfigError" waiting_reason needy CreateContainerConfigError
[ "$(pod_field needy '{.status.containerStatuses[0].state.waiting.message}')" = 'secret "late-secret" not found' ] \
  || fail "needy: message $(pod_field needy '{.status.containerStatuses[0].state.waiting.message}')"
k create secret generic late-secret --from-literal=token=t >/dev/null
wait_for 60 "needy Running once its Secret exists" running needy
pass "a missing required Secret: CreateContainerConfigError (secret \"late-secret\" not found), Running once created"
wait_for 20 "needy's Failed event in the API" bash -c "$KUBECTL --kubeconfig $KUBECONFIG get events --field-selector involvedObject.name=needy,reason=Failed -o jsonpath='{.items[0].message}' | grep -qx 'Error: secret \"late-secret\" not found'"
pass "needy's Warning Failed event (Error: secret \"late-secret\" not found) in the API"
# A configMap volume whose ConfigMap does not exist: the container waits with the
# kubelet's "MountVolume.SetUp failed" message (no config-dir hint: it is the API's).
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: unmounted}
spec:
  nodeName: podhost-a
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes: [{name: cfg, configMap: {name: nope}}]
  containers:
  - {name: app, image: $IMAGE, imagePullPolicy: Never, command: [sleep, "3600"], volumeMounts: [{name: cfg, mountPath: /cfg}]}
YAML
wait_for 30 "unmounted waits" waiting_reason unmounted CreateContainerConfigError
[ "$(pod_field unmounted '{.status.containerStatuses[0].state.waiting.message}')" = 'MountVolume.SetUp failed for volume "cfg": volume "cfg": configmap "nope" not found' ] \
  || fail "unmounted: message $(pod_field unmounted '{.status.containerStatuses[0].state.waiting.message}')"
pass "a missing ConfigMap of a volume: the container waits with MountVolume.SetUp failed … configmap \"nope\" not found"
k delete pod conf needy unmounted --grace-period=1 >/dev/null

# A projected service account token (TokenRequest bound to the pod): one for the API
# server's audience (a TokenReview accepts it) and one for another audience.
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: tokened}
spec:
  nodeName: podhost-a
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: shared, hostPath: {path: $WORK/shared, type: DirectoryOrCreate}}
  - name: tokens
    projected:
      sources:
      - serviceAccountToken: {path: api, expirationSeconds: 600}
      - serviceAccountToken: {path: other, audience: podhost-test, expirationSeconds: 3600}
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'cp /var/run/secrets/tokens/api /shared/token-api; cp /var/run/secrets/tokens/other /shared/token-other; while :; do sleep 1; done']
    volumeMounts: [{name: shared, mountPath: /shared}, {name: tokens, mountPath: /var/run/secrets/tokens}]
YAML
wait_for 30 "pod tokened Running" running tokened
wait_for 10 "tokened's tokens copied" test -s "$WORK/shared/token-other"
tuid=$(pod_field tokened '{.metadata.uid}')
python3 - "$WORK/shared/token-api" "$WORK/shared/token-other" "$tuid" <<'PY' || fail "tokened: the tokens' claims"
import base64, json, sys
def claims(path):
    payload = open(path).read().strip().split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
api, other, uid = claims(sys.argv[1]), claims(sys.argv[2]), sys.argv[3]
assert api["sub"] == "system:serviceaccount:default:default", api["sub"]
assert api["kubernetes.io"]["pod"] == {"name": "tokened", "uid": uid}, api["kubernetes.io"]
assert api["exp"] - api["iat"] == 600, api["exp"] - api["iat"]
assert other["aud"] == ["podhost-test"], other["aud"]
assert other["exp"] - other["iat"] == 3600
PY
review=$(k create -o jsonpath='{.status.authenticated}/{.status.user.username}' -f - <<YAML
apiVersion: authentication.k8s.io/v1
kind: TokenReview
spec: {token: $(cat "$WORK/shared/token-api")}
YAML
)
[ "$review" = "true/system:serviceaccount:default:default" ] || fail "tokened: TokenReview of its token: $review"
pass "projected serviceAccountToken: bound to the pod, its audience and lifetime; the API server accepts it"
k delete pod tokened --grace-period=1 >/dev/null

# ---------- mirror pods of static pods (podhost-a) ----------
# static NAME MARK: a static pod manifest on podhost-a; MARK tells its versions apart.
static() {
  cat >"$WORK/podhost-a/manifests/$1.yaml.tmp" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {mark: "$2"}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
YAML
  mv "$WORK/podhost-a/manifests/$1.yaml.tmp" "$WORK/podhost-a/manifests/$1.yaml"
}
mirror_ok() { # NAME: the mirror pod carries its static pod's hash, is owned by the Node, Running and ready
  [ "$(pod_field "$1" '{.metadata.annotations.kubernetes\.io/config\.mirror}')" = "$(pod_field "$1" '{.metadata.annotations.kubernetes\.io/config\.hash}')" ] &&
  [ -n "$(pod_field "$1" '{.metadata.annotations.kubernetes\.io/config\.mirror}')" ] &&
  [ "$(pod_field "$1" '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')" = Node/podhost-a/true ] &&
  [ "$(pod_field "$1" '{.metadata.ownerReferences[0].uid}')" = "$(node_field podhost-a '{.metadata.uid}')" ] &&
  running "$1"
}
t0=$SECONDS
static sweb 1
wait_for 30 "mirror pod of sweb Running in the API" mirror_ok sweb-podhost-a
[ "$(pod_field sweb-podhost-a '{.spec.nodeName}/{.metadata.labels.mark}/{.metadata.annotations.kubernetes\.io/config\.source}')" = podhost-a/1/file ] \
  || fail "sweb mirror: nodeName, labels, config.source"
pass "static pod sweb → mirror pod sweb-podhost-a (config.mirror = config.hash, owned by Node podhost-a, Running) in $((SECONDS - t0)) s"
# The static pod's events are in the API too, naming the static pod (its config hash
# as UID), as the kubelet's.
wait_for 20 "static pod sweb's Started event in the API" bash -c "$KUBECTL --kubeconfig $KUBECONFIG get events --field-selector involvedObject.name=sweb-podhost-a -o jsonpath='{.items[*].reason}' | grep -qw Started"
pass "static pod sweb's events (Started) in the API"
muid=$(pod_field sweb-podhost-a '{.metadata.uid}')
started=$(pod_field sweb-podhost-a '{.status.containerStatuses[0].state.running.startedAt}')
t0=$SECONDS
k delete pod sweb-podhost-a --wait=false >/dev/null
recreated() { local u; u=$(pod_field sweb-podhost-a '{.metadata.uid}') && [ -n "$u" ] && [ "$u" != "$muid" ] && mirror_ok sweb-podhost-a; }
wait_for 30 "mirror pod of sweb created again after kubectl delete" recreated
[ "$(pod_field sweb-podhost-a '{.status.containerStatuses[0].state.running.startedAt}/{.status.containerStatuses[0].restartCount}')" = "$started/0" ] \
  || fail "sweb: its container restarted when its mirror pod was deleted"
pass "kubectl delete of the mirror pod: created again (new UID, Running) in $((SECONDS - t0)) s; the static pod's container kept running"
hash=$(pod_field sweb-podhost-a '{.metadata.annotations.kubernetes\.io/config\.mirror}')
t0=$SECONDS
static sweb 2
replaced() { [ "$(pod_field sweb-podhost-a '{.metadata.labels.mark}')" = 2 ] && [ "$(pod_field sweb-podhost-a '{.metadata.annotations.kubernetes\.io/config\.mirror}')" != "$hash" ] && mirror_ok sweb-podhost-a; }
wait_for 40 "mirror pod of sweb replaced after the manifest was edited" replaced
pass "edited manifest: mirror pod replaced (new hash, Running) in $((SECONDS - t0)) s"
t0=$SECONDS
rm "$WORK/podhost-a/manifests/sweb.yaml"
wait_for 30 "mirror pod of sweb gone after its manifest was removed" gone sweb-podhost-a
pass "manifest removed: mirror pod gone in $((SECONDS - t0)) s"
# A manifest removed while the node is down: the restarted node deletes the orphan.
static sorphan 1
wait_for 30 "mirror pod of sorphan Running" mirror_ok sorphan-podhost-a
kill "${PID_OF[podhost-a]}"; wait "${PID_OF[podhost-a]}" 2>/dev/null || true
rm "$WORK/podhost-a/manifests/sorphan.yaml"
t0=$SECONDS
start_node podhost-a "tier=core,podhost.io/test=podhost-a"
wait_for 40 "orphaned mirror pod sorphan-podhost-a deleted after the node restarted" gone sorphan-podhost-a
pass "a mirror pod whose manifest went while the node was down: deleted after the restart in $((SECONDS - t0)) s"

# ---------- pod networking on nodes in their own network namespaces (issue 13) ----------
if [ "$NODE_POD_NETWORK" != none ]; then
  in_cidr() { python3 -c 'import ipaddress,sys; sys.exit(0 if ipaddress.ip_address(sys.argv[1]) in ipaddress.ip_network(sys.argv[2]) else 1)' "$1" "$2"; }
  declare -A POD_IP CIDR_OF
  for n in "${NODES[@]}"; do
    if [ -n "$KUBE_CONTROLLER_MANAGER" ]; then
      CIDR_OF[$n]=$(node_field "$n" '{.spec.podCIDR}')
      [ -n "${CIDR_OF[$n]}" ] || fail "$n: no spec.podCIDR although kube-controller-manager allocates them"
      in_cidr "${CIDR_OF[$n]%/*}" "$CLUSTER_CIDR" || fail "$n: podCIDR ${CIDR_OF[$n]} outside $CLUSTER_CIDR"
    else
      CIDR_OF[$n]=${NODE_POD_CIDR[$n]}
    fi
    cat <<YAML | k create -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: net-$n}
spec:
  nodeName: $n
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && echo "hello from $n" > /www/index.html && echo serving && exec httpd -f -p 8080 -h /www']
YAML
  done
  for n in "${NODES[@]}"; do
    wait_for 60 "pod net-$n Running" running "net-$n"
    # the status patch carrying podIP may follow the Running one by a moment
    wait_for 10 "pod net-$n has a podIP in the API" bash -c "[ -n \"\$($KUBECTL --kubeconfig $KUBECONFIG get pod net-$n -o jsonpath='{.status.podIP}')\" ]"
    ip=$(pod_field "net-$n" '{.status.podIP}')
    POD_IP[$n]=$ip
    [ "$(pod_field "net-$n" '{.status.podIPs[0].ip}')" = "$ip" ] || fail "net-$n: podIPs[0] is not podIP $ip"
    [ "$(pod_field "net-$n" '{.status.hostIP}')" = "${NODE_ADDR[$n]}" ] \
      || fail "net-$n: hostIP $(pod_field "net-$n" '{.status.hostIP}'), the node's --node-ip is ${NODE_ADDR[$n]}"
    in_cidr "$ip" "${CIDR_OF[$n]}" || fail "net-$n: podIP $ip is not in $n's pod CIDR ${CIDR_OF[$n]}"
    # what the pod has: its eth0 carries the address the API shows (exec through the API server)
    addr=$(k exec "net-$n" -- ip -4 -o addr show eth0) || fail "kubectl exec net-$n: $addr"
    [[ "$addr" == *" $ip/"* ]] || fail "net-$n: eth0 has '$addr', the API says $ip"
    # its httpd answers on the podIP from inside its node's network namespace
    body=$(nsenter --net="/run/netns/${NODE_NETNS[$n]}" curl -sf --max-time 5 "http://$ip:8080/") \
      || fail "net-$n: no HTTP answer on $ip:8080 from $n's namespace"
    [ "$body" = "hello from $n" ] || fail "net-$n: HTTP answer '$body'"
    [ "$(k logs "net-$n")" = serving ] || fail "kubectl logs net-$n: $(k logs "net-$n")"
    # the node said which CIDR it uses, and from where
    msg=$(k get events -A --field-selector "reason=PodCIDR,involvedObject.name=$n" -o jsonpath='{.items[*].message}')
    [[ "$msg" == *"${CIDR_OF[$n]}"* ]] || fail "$n: PodCIDR event '$msg' does not name ${CIDR_OF[$n]}"
    msg=$(k get events -A --field-selector "reason=PodCIDR,involvedObject.name=$n" -o jsonpath='{.items[0].message}')
    pass "$n (netns ${NODE_NETNS[$n]}, --node-ip ${NODE_ADDR[$n]}): pod net-$n has $ip from ${CIDR_OF[$n]} (event: $msg), hostIP and eth0 agree with the API, httpd answers on $ip:8080 from the node's namespace, kubectl logs/exec work"
  done
  [ "${POD_IP[podhost-a]}" != "${POD_IP[podhost-b]}" ] || fail "both nodes' pods have ${POD_IP[podhost-a]}"
  python3 -c 'import ipaddress,sys; sys.exit(1 if ipaddress.ip_network(sys.argv[1]).overlaps(ipaddress.ip_network(sys.argv[2])) else 0)' \
    "${CIDR_OF[podhost-a]}" "${CIDR_OF[podhost-b]}" || fail "the nodes' pod CIDRs overlap: ${CIDR_OF[*]}"
  pass "the nodes' pods do not collide: ${POD_IP[podhost-a]} (${CIDR_OF[podhost-a]}) and ${POD_IP[podhost-b]} (${CIDR_OF[podhost-b]})"

  # Service-account volumes, as every pod of a cluster has them (kube-api-access-*: a
  # bound token, kube-root-ca.crt's CA and the namespace): pods bound at once, each
  # volume written before its container starts, and no FailedMount warning while the
  # token is requested and the ConfigMap listed, neither now nor after the restarts below.
  sa_pods=""
  if [ -n "$KUBE_CONTROLLER_MANAGER" ]; then
    wait_for 30 "ServiceAccount default (the controller manager's)" k get serviceaccount default
    wait_for 30 "ConfigMap kube-root-ca.crt (the controller manager's)" k get configmap kube-root-ca.crt
    sa_pods=$(seq -f 'sa-%g' 1 8)
    for p in $sa_pods; do
      cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $p, labels: {group: sa}}
spec:
  nodeName: podhost-a
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'd=/var/run/secrets/kubernetes.io/serviceaccount; test -s \$d/token && test -s \$d/ca.crt && test "\$(cat \$d/namespace)" = default || exit 3; exec sleep 3600']
YAML
    done | k create -f - >/dev/null
    for p in $sa_pods; do wait_for 60 "pod $p Running with its service-account volume" running "$p"; done
  fi
  failed_mounts() {
    k get events --field-selector reason=FailedMount -o jsonpath='{range .items[*]}{.involvedObject.name}: {.message}{"\n"}{end}' | grep '^sa-' || true
  }

  # A restart never breaks a running pod's sandbox (issue 29): podhost-a restarted
  # (without --pod-cidr when the controller manager allocates: its network backend waits
  # for the Node's podCIDR again until the node is registered), then restarted while the
  # API server answers nothing. Its pod keeps its container, address and veth, answers
  # throughout, and no sandbox event or restart follows.
  n=podhost-a
  cid=$(pod_field "net-$n" '{.status.containerStatuses[0].containerID}')
  answers() { [ "$(nsenter --net="/run/netns/${NODE_NETNS[$n]}" curl -sf --max-time 3 "http://${POD_IP[$n]}:8080/")" = "hello from $n" ]; }
  same_pod() {
    [ "$(pod_field "net-$n" '{.status.containerStatuses[0].containerID}/{.status.containerStatuses[0].restartCount}/{.status.podIP}/{.status.containerStatuses[0].ready}')" \
      = "$cid/0/${POD_IP[$n]}/true" ]
  }
  sandbox_events() {
    k get events --field-selector "involvedObject.name=net-$n" -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' |
      grep -E '^(FailedCreatePodSandBox|FailedSandboxRepair|NetworkMissing|SandboxChanged|NetworkNotReady)$' || true
  }
  kill "${PID_OF[$n]}"; wait "${PID_OF[$n]}" 2>/dev/null || true
  answers || fail "net-$n: no answer on ${POD_IP[$n]} while its node is down"
  start_node "$n" "tier=core,podhost.io/test=$n"
  for _ in 1 2 3 4 5 6 7 8 9 10; do answers || fail "net-$n: no answer on ${POD_IP[$n]} after its node's restart"; sleep 1; done
  wait_for 30 "net-$n Running and Ready with the same container after the restart" same_pod
  [ -z "$(sandbox_events)" ] || fail "net-$n: sandbox events after a restart: $(sandbox_events | tr '\n' ' ')"
  pass "$n restarted$([ -n "$KUBE_CONTROLLER_MANAGER" ] && echo " without --pod-cidr"): net-$n kept its container, ${POD_IP[$n]} and veth, answered throughout; no sandbox event"
  apiserver_pid=$(cat "$WORK/cp/apiserver.pid")
  kill "${PID_OF[$n]}"; wait "${PID_OF[$n]}" 2>/dev/null || true
  kill -STOP "$apiserver_pid"
  start_node "$n" "tier=core,podhost.io/test=$n"
  for _ in $(seq 1 15); do
    answers || { kill -CONT "$apiserver_pid"; fail "net-$n: no answer on ${POD_IP[$n]} while its node restarted with the API server unreachable"; }
    sleep 1
  done
  kill -CONT "$apiserver_pid"
  wait_for 60 "net-$n Running and Ready with the same container once the API server answers" same_pod
  answers || fail "net-$n: no answer on ${POD_IP[$n]} after the API server came back"
  [ -z "$(sandbox_events)" ] || fail "net-$n: sandbox events after a restart without the API server: $(sandbox_events | tr '\n' ' ')"
  pass "$n restarted while the API server answered nothing for 15 s: net-$n kept running and answering, then the same container Running in the API"

  k delete pod net-podhost-a net-podhost-b --grace-period=1 >/dev/null
  if [ -n "$sa_pods" ]; then
    for p in $sa_pods; do
      [ "$(pod_field "$p" '{.status.containerStatuses[0].restartCount}/{.status.phase}')" = 0/Running ] ||
        fail "$p: $(pod_field "$p" '{.status.containerStatuses[0].restartCount} restarts, {.status.phase}') (its token, CA or namespace file was missing at start)"
    done
    [ -z "$(failed_mounts)" ] || fail "FailedMount warnings for service-account volumes: $(failed_mounts | tr '\n' ';')"
    k delete pods -l group=sa --grace-period=1 --wait=false >/dev/null
    pass "8 pods bound at once with the default service-account volume: token, ca.crt and namespace there at start, no FailedMount warning, none after two restarts of their node"
  fi

  # A node without --pod-cidr whose Node has no podCIDR yet: the controller manager is
  # paused (or absent, then the podCIDR is set by hand as it would). The Node is
  # NotReady with the kubelet's "network not ready" so the scheduler places nothing
  # there; a pod bound to it waits (Pending, a NetworkNotReady event) as with the
  # kubelet, and runs once the podCIDR arrives; the Node goes Ready.
  kcm_pid=""
  [ -n "$KUBE_CONTROLLER_MANAGER" ] && kcm_pid=$(cat "$WORK/cp/kcm.pid")
  [ -z "$kcm_pid" ] || kill -STOP "$kcm_pid"
  start_node "$LATE" "podhost.io/test=$LATE"
  node_ready() { node_field "$LATE" '{.status.conditions[?(@.type=="Ready")].status}'; }
  wait_for 30 "node $LATE registered" node_field "$LATE" '{.metadata.uid}'
  wait_for 30 "node $LATE NotReady for want of a pod network" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $LATE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = False ]"
  msg=$(node_field "$LATE" '{.status.conditions[?(@.type=="Ready")].message}')
  [[ "$msg" == "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:"*podCIDR* ]] \
    || { [ -z "$kcm_pid" ] || kill -CONT "$kcm_pid"; fail "$LATE: Ready message '$msg'"; }
  pod late "$LATE" 1 'echo waited; while :; do sleep 1; done' | k create -f - >/dev/null
  # The kubelet's event for a pod that waits for the network (not a sandbox failure).
  network_waits() { k get events --field-selector "reason=NetworkNotReady,involvedObject.name=late" -o jsonpath='{.items[*].message}' | grep -q '^network is not ready: .*podCIDR'; }
  wait_for 30 "pod late's NetworkNotReady event naming the podCIDR" network_waits
  [ "$(pod_field late '{.status.phase}')" = Pending ] || fail "late: $(pod_field late '{.status.phase}') without a pod network"
  t0=$SECONDS
  if [ -n "$kcm_pid" ]; then
    kill -CONT "$kcm_pid"
    has_pod_cidr() { [ -n "$(node_field "$LATE" '{.spec.podCIDR}')" ]; }
    wait_for 30 "the controller manager gave $LATE a podCIDR" has_pod_cidr
    late_cidr=$(node_field "$LATE" '{.spec.podCIDR}')
  else
    late_cidr=${NODE_POD_CIDR[$LATE]}
    k patch node "$LATE" --type merge -p "{\"spec\":{\"podCIDR\":\"$late_cidr\",\"podCIDRs\":[\"$late_cidr\"]}}" >/dev/null
  fi
  wait_for 30 "pod late Running once its Node has a podCIDR" running late
  waited=$((SECONDS - t0))
  wait_for 15 "node $LATE Ready once its pod network started" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get node $LATE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
  ip=$(pod_field late '{.status.podIP}')
  in_cidr "$ip" "$late_cidr" || fail "late: podIP $ip not in the Node's podCIDR $late_cidr"
  msg=$(k get events -A --field-selector "reason=PodCIDR,involvedObject.name=$LATE" -o jsonpath='{.items[*].message}')
  [[ "$msg" == *"$late_cidr (the Node's spec.podCIDR)"* ]] || fail "$LATE: PodCIDR event '$msg'"
  pass "$LATE without a podCIDR: Node NotReady (network not ready), its pod Pending with NetworkNotReady; Running with $ip from $late_cidr ${waited} s after the podCIDR came, Node Ready"
  k delete pod late --grace-period=1 >/dev/null
  wait_for 30 "pod late deleted" gone late
  kill "${PID_OF[$LATE]}"; wait "${PID_OF[$LATE]}" 2>/dev/null || true
fi

# Start latency and API requests per pod, 10 pods at once on podhost-a.
before=$(wc -l <"$WORK/podhost-a/api.jsonl")
python3 scripts/cluster/pod-latency.py podhost-a 10 "$IMAGE" || fail "pod latency run"
sleep 1
after=$(wc -l <"$WORK/podhost-a/api.jsonl")
echo "API requests of podhost-a per pod (created, run, deleted): $(( (after - before) / 10 ))"

# The idle node's request rate: count requests in its record over 30 s.
before=$(wc -l <"$WORK/podhost-b/api.jsonl")
sleep 30
after=$(wc -l <"$WORK/podhost-b/api.jsonl")
echo "idle node: $((after - before)) API requests in 30 s (lease renewals; status posted on change or every 5 min)"
[ $((after - before)) -le 4 ] || fail "idle node podhost-b made $((after - before)) requests in 30 s"
# ---------- TLS bootstrap and client certificate rotation (podhost-boot) ----------
# A control plane of its own (bootstrap token auth, kubeadm's CSR bindings, certificates
# signed for 3 min). The controller manager backdates NotBefore by 5 min; since 1.22 it
# no longer shortens NotAfter of a short-lived certificate by as much, so a certificate
# lives 8 min on paper and 3 min after its issue. The node rotates at 70-90 % of the
# lifetime it reads in the certificate: the wait below is computed from it, not assumed.
# podhost-boot starts with only a bootstrap kubeconfig; podhost-ref, with a ready one,
# is the yardstick.
if [ -z "${KUBE_CONTROLLER_MANAGER:-}" ]; then
  echo "SKIP TLS bootstrap and rotation: KUBE_CONTROLLER_MANAGER is not set (it approves and signs the CSRs)"
else
  # A failed run stops podhost-boot's pods first (its daemon is still running), then the
  # daemons, then this control plane; `cleanup` does the rest.
  boot_cleanup() {
    set +e
    timeout 40 "$KUBECTL" --kubeconfig "$WORK/cp-boot/admin.kubeconfig" delete pods --all \
      --grace-period=1 --timeout=30s >/dev/null 2>&1 || true
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    bash scripts/cluster/control-plane-down.sh "$WORK/cp-boot" --keep >/dev/null 2>&1 || true
  }
  # `cleanup` reads the run's exit status from $?: hand it on.
  trap 'rc=$?; boot_cleanup; (exit $rc); cleanup' EXIT
  KUBE_SCHEDULER= BOOTSTRAP_TOKEN=podhst.0123456789abcdef CLUSTER_SIGNING_DURATION=3m \
    bash scripts/cluster/control-plane-up.sh "$WORK/cp-boot" podhost-ref >/dev/null
  BOOT_ADMIN=$WORK/cp-boot/admin.kubeconfig
  BOOTSTRAP_KUBECONFIG=$WORK/cp-boot/bootstrap.kubeconfig
  kb() { "$KUBECTL" --kubeconfig "$BOOT_ADMIN" "$@"; }
  NODES+=(podhost-boot podhost-ref)
  boot_node() { # NAME KUBECONFIG-FLAGS...
    local n=$1 dir=$WORK/$1; shift
    mkdir -p "$dir/manifests"
    "$PODHOST" --socket "$dir/podhost.sock" daemon --node-name "$n" \
      --root-dir "$dir/root" --pod-manifest-path "$dir/manifests" --log-dir "$dir/logs" \
      --config-dir "$dir/config" --pod-network none --eviction-hard= --image-gc-high-threshold 100 \
      --cgroup-root "$CGROUP_ROOT/$n" --port 0 --kube-record "$dir/api.jsonl" "$@" \
      >>"$dir/daemon.log" 2>&1 &
    PIDS+=($!)
    PID_OF[$n]=$!
  }
  boot_ready() { [ "$(kb get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
  ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
  t0=$(date +%s%N)
  boot_node podhost-ref --kubeconfig "$WORK/cp-boot/node-podhost-ref.kubeconfig"
  wait_for 60 "podhost-ref (ready kubeconfig) Ready" boot_ready podhost-ref
  ready_ms=$(ms_since "$t0")
  kill "${PID_OF[podhost-ref]}"; wait "${PID_OF[podhost-ref]}" 2>/dev/null || true
  "$PODHOST" load --socket "$WORK/podhost-boot/podhost.sock" --root-dir "$WORK/podhost-boot/root" "$WORK/busybox-oci" >/dev/null
  C_KUBECONFIG=$WORK/podhost-boot/node.kubeconfig
  C_PKI=$WORK/podhost-boot/root/pki
  t0=$(date +%s%N)
  boot_node podhost-boot --kubeconfig "$C_KUBECONFIG" --bootstrap-kubeconfig "$BOOTSTRAP_KUBECONFIG" --rotate-certificates
  wait_for 90 "podhost-boot (bootstrap kubeconfig only) Ready" boot_ready podhost-boot
  boot_ms=$(ms_since "$t0")
  echo "daemon start -> Node Ready: ${boot_ms} ms with TLS bootstrap, ${ready_ms} ms with a ready kubeconfig"
  [ "$(kb get csr -o jsonpath='{range .items[*]}{.spec.username}/{.spec.signerName}/{.status.conditions[0].type}{"\n"}{end}')" \
    = "system:bootstrap:podhst/kubernetes.io/kube-apiserver-client-kubelet/Approved" ] || fail "podhost-boot: the bootstrap CSR"
  subject=$(openssl x509 -in "$C_PKI/kubelet-client-current.pem" -noout -subject -nameopt RFC2253)
  [ "$subject" = "subject=CN=system:node:podhost-boot,O=system:nodes" ] || fail "podhost-boot: client certificate subject: $subject"
  [ "$(stat -c %a "$(readlink -f "$C_PKI/kubelet-client-current.pem")")" = 600 ] || fail "podhost-boot: pair file mode"
  grep -q "client-certificate: $C_PKI/kubelet-client-current.pem" "$C_KUBECONFIG" || fail "podhost-boot: kubeconfig written"
  pass "podhost-boot bootstrapped: CSR by the bootstrap token auto-approved, kubelet-client-current.pem (0600), kubeconfig written, Node Ready"
  first_serial=$(openssl x509 -in "$C_PKI/kubelet-client-current.pem" -noout -serial)
  first_expiry=$(date -d "$(openssl x509 -in "$C_PKI/kubelet-client-current.pem" -noout -enddate | cut -d= -f2)" +%s)
  first_start=$(date -d "$(openssl x509 -in "$C_PKI/kubelet-client-current.pem" -noout -startdate | cut -d= -f2)" +%s)
  # The latest moment the node may rotate (90 % of the lifetime), plus 30 s of slack.
  rotate_by=$(( first_start + (first_expiry - first_start) * 9 / 10 + 30 ))
  pod cboot podhost-boot 1 'echo hi > /dev/null; while :; do sleep 1; done' | kb create -f - >/dev/null
  wait_for 60 "pod cboot Running on podhost-boot" bash -c "[ \"\$($KUBECTL --kubeconfig $BOOT_ADMIN get pod cboot -o jsonpath='{.status.phase}')\" = Running ]"
  pass "podhost-boot runs a pod bound to it"
  # A restart with a valid certificate does not bootstrap again.
  bootstrap_csrs() { kb get csr -o jsonpath='{range .items[*]}{.spec.username}{"\n"}{end}' | grep -c '^system:bootstrap:'; }
  kill "${PID_OF[podhost-boot]}"; wait "${PID_OF[podhost-boot]}" 2>/dev/null || true
  boot_node podhost-boot --kubeconfig "$C_KUBECONFIG" --bootstrap-kubeconfig "$BOOTSTRAP_KUBECONFIG" --rotate-certificates
  wait_for 30 "podhost-boot Ready after its restart" grep -q "kubeconfig has a valid client certificate; no bootstrap" "$WORK/podhost-boot/daemon.log"
  sleep 2; wait_for 30 "podhost-boot Ready after restart" boot_ready podhost-boot
  [ "$(bootstrap_csrs)" = 1 ] || fail "podhost-boot: a restart asked for a certificate with the bootstrap token again"
  pass "podhost-boot restarted with its valid certificate: no second bootstrap"
  # Rotation: a new serial, the node keeps its lease after the first certificate expired.
  t0=$SECONDS
  new_serial() { [ "$(openssl x509 -in "$C_PKI/kubelet-client-current.pem" -noout -serial)" != "$first_serial" ]; }
  wait_for $(( rotate_by - $(date +%s) )) "podhost-boot rotated its client certificate (due by 90 % of its lifetime)" new_serial
  pass "podhost-boot rotated its certificate ($(openssl x509 -in "$C_PKI/kubelet-client-current.pem" -noout -serial), $((SECONDS - t0)) s after the restart) by a CSR of system:node:podhost-boot"
  kb get csr -o jsonpath='{range .items[*]}{.spec.username}{"\n"}{end}' | grep -qx system:node:podhost-boot || fail "podhost-boot: no CSR of its own"
  while [ "$(date +%s)" -le $((first_expiry + 12)) ]; do sleep 2; done
  renew=$(date -d "$(kb -n kube-node-lease get lease podhost-boot -o jsonpath='{.spec.renewTime}')" +%s)
  [ "$renew" -gt "$first_expiry" ] || fail "podhost-boot: lease not renewed after its first certificate expired"
  boot_ready podhost-boot || fail "podhost-boot: not Ready after its first certificate expired"
  kb get pod cboot -o jsonpath='{.status.phase}' | grep -qx Running || fail "podhost-boot: pod cboot not Running after rotation"
  pass "podhost-boot: lease renewed and node Ready after its first certificate expired (rotated in the running daemon)"
  kb delete pod cboot --grace-period=1 >/dev/null 2>&1 || true
  kill "${PID_OF[podhost-boot]}"; wait "${PID_OF[podhost-boot]}" 2>/dev/null || true
fi
echo "PASS scripts/cluster-test.sh"
