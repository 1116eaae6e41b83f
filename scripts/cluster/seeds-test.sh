#!/usr/bin/env bash
# scripts/cluster/seeds-test.sh — the seeds' paths (issue 30) end to end: podhost nodes
# under Kubernetes' own scheduler and controller manager, as a Deployment's pods live
# through scale-down, a drain and a node's death.
#
# A control plane of its own (etcd, kube-apiserver, kube-controller-manager with
# --allocate-node-cidrs and a short --node-monitor-grace-period, kube-scheduler; built by
# scripts/cluster/build-control-plane.sh unless KUBE_APISERVER, KUBE_CONTROLLER_MANAGER,
# KUBE_SCHEDULER and KUBECTL name binaries of your own) and three untainted podhost nodes,
# seed-a, seed-b and seed-c, each in its own network namespace (node-netns.sh) with the
# bridge pod network on the podCIDR the controller manager gives its Node. Checks:
# 1. A Deployment of 3 replicas without nodeName (the offline busybox image, a preStop
#    hook, a readinessProbe, grace 5 s, one replica per node by a topology spread
#    constraint) is scheduled onto the nodes, Running and Ready. Scaled to 1: the two
#    pods the ReplicaSet deletes get a deletionTimestamp (grace 5), run their preStop,
#    get TERM, and their node writes the final status (Succeeded, exit 0) then deletes
#    the object with grace 0 and the UID precondition (checked in its --kube-record).
# 2. `kubectl drain` of the remaining replica's node: the pod is evicted through the
#    Eviction API (drain says so, DisruptionTarget EvictionByEvictionAPI) and goes the
#    same graceful way, the node is cordoned, the replacement runs on another node;
#    then `kubectl uncordon`.
# 3. Scaled to 3 again. A node's daemon killed -9 and restarted at once: its pod keeps
#    its container (same containerID, same host processes, restartCount 0), the Node
#    never went NotReady. Another node's daemon killed -9 for good (its containers keep
#    running): the Node goes Ready=Unknown ("Kubelet stopped posting node status."), the
#    node lifecycle controller taints it node.kubernetes.io/unreachable:NoExecute, the
#    taint eviction controller deletes its pods after their tolerationSeconds (5) —
#    they stay Terminating, the API server waits for the node — and the Deployment is
#    back to 3 available on the other nodes. A bare pod of that node is force-deleted
#    meanwhile (its object gone). The daemon restarted (same root dir): the Node Ready
#    again and untainted, the Terminating pod stopped the graceful way and its object
#    deleted by the node, the force-deleted pod stopped; no process of either is left.
# 4. Everything torn down on exit; nothing left (namespaces, links, mounts, cgroups,
#    processes).
# The measured times are printed in one block at the end; the last line is
# `seeds-test: PASS`, or the script exits non-zero after `seeds-test: FAIL …`.
#
# Run as root: bash scripts/cluster/seeds-test.sh
# Environment: PODHOST (default target/debug/podhost, built when missing), KUBE_*,
# KUBECTL as above; KEEP_WORK=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "seeds-test: run as root" >&2; exit 1; }
if [ -z "${KUBE_APISERVER:-}" ]; then
  bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
  export KUBE_APISERVER=$bin/kube-apiserver KUBE_CONTROLLER_MANAGER=$bin/kube-controller-manager
  export KUBE_SCHEDULER=$bin/kube-scheduler KUBECTL=${KUBECTL:-$bin/kubectl}
fi
: "${KUBE_CONTROLLER_MANAGER:?seeds-test needs KUBE_CONTROLLER_MANAGER (node lifecycle, ReplicaSets, pod CIDRs)}"
: "${KUBE_SCHEDULER:?seeds-test needs KUBE_SCHEDULER (the pods of the Deployment have no nodeName)}"
export KUBE_CONTROLLER_MANAGER KUBE_SCHEDULER
KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
[ -n "$KUBECTL" ] || { echo "seeds-test: kubectl not found (set KUBECTL)" >&2; exit 1; }
echo "control plane: $("$KUBE_APISERVER" --version)"
command -v etcd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
PODHOST=${PODHOST:-target/debug/podhost}
[ -x "$PODHOST" ] || cargo build --locked >/dev/null

WORK=$(mktemp -d /tmp/podhost-seeds-test.XXXXXX)
CGROUP_ROOT=/podhost-seeds-test-$$
NODES=(seed-a seed-b seed-c)
# Every daemon started (for the cleanup), and the running one of each node.
PIDS=()
declare -A PID_OF
# The node's --kube-record of its current daemon (each start writes a new one).
declare -A RECORD_OF
declare -A STARTS
WATCH_PID=""
FAILED=""
SHARED=$WORK/shared
# Marks this run's pods' processes (SEEDMARK=RUN/POD), apart from another run's.
RUN=${WORK##*/}
mkdir -p "$SHARED"

k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
daemon_alive() { [ -n "${PID_OF[$1]:-}" ] && kill -0 "${PID_OF[$1]}" 2>/dev/null; }
cleanup() {
  local rc=$?
  # Every step runs, whatever an earlier one returned (set -e would end the trap early).
  set +e
  [ -z "$WATCH_PID" ] || { kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null; }
  if [ -n "${KUBECONFIG:-}" ] && [ -f "$KUBECONFIG" ]; then
    # A node killed by a failed run comes back to stop its pods (the daemons leave
    # running containers behind); the Deployment goes first so nothing replaces them.
    local n
    for n in "${NODES[@]}"; do
      [ -n "${PID_OF[$n]:-}" ] && ! daemon_alive "$n" && start_node "$n"
    done
    timeout 30 "$KUBECTL" --kubeconfig "$KUBECONFIG" delete deployment --all --wait=false >/dev/null 2>&1
    timeout 60 "$KUBECTL" --kubeconfig "$KUBECONFIG" delete pods --all --grace-period=1 --timeout=50s >/dev/null 2>&1
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  bash scripts/cluster/control-plane-down.sh "$WORK/cp" --keep >/dev/null 2>&1
  local state="" left="" kind name
  [ -f "$WORK/net/netns.state" ] && state=$(cat "$WORK/net/netns.state")
  # Processes still in a node's namespace once its daemon stopped are leftovers.
  while read -r kind name; do
    [ "$kind" = netns ] && [ -n "$(ip netns pids "$name" 2>/dev/null)" ] \
      && left="$left processes-in-$name:$(ip netns pids "$name" | tr '\n' ,)"
  done <<<"$state"
  # So is any process of a pod of the run (they carry SEEDMARK=RUN/POD in their environment).
  local marked_left
  marked_left=$(grep -lzF "SEEDMARK=$RUN/" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\n' ,)
  [ -z "$marked_left" ] || left="$left pod-processes:$marked_left"
  bash scripts/cluster/node-netns.sh down "$WORK/net"
  find /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null
  find /sys/fs/cgroup -maxdepth 1 -type d -name "${CGROUP_ROOT#/}" -exec rmdir {} + 2>/dev/null
  while read -r kind name; do
    case $kind in
      netns) [ -e "/run/netns/$name" ] && left="$left netns:$name" ;;
      link) ip link show "$name" >/dev/null 2>&1 && left="$left link:$name" ;;
    esac
  done <<<"$state"
  grep -q -- "$WORK" /proc/self/mountinfo && left="$left mounts:$(grep -c -- "$WORK" /proc/self/mountinfo)"
  ls -d /sys/fs/cgroup/"${CGROUP_ROOT#/}" /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" >/dev/null 2>&1 && left="$left cgroup:$CGROUP_ROOT"
  pgrep -f -- "$WORK/" >/dev/null && left="$left processes:$(pgrep -f -- "$WORK/" | tr '\n' ,)"
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  if [ -n "$left" ]; then
    echo "FAIL: left after the run:$left" >&2
    echo "seeds-test: FAIL ${FAILED:-leftovers after the run}"
    exit 1
  elif [ "$rc" -ne 0 ]; then
    echo "seeds-test: FAIL ${FAILED:-exit status $rc}"
    exit "$rc"
  fi
  echo "ok: nothing left after the run (network namespaces, links, mounts, cgroups, processes)"
  echo "seeds-test: PASS"
}
trap cleanup EXIT
# A command that fails outside a check ends the run (set -e): its line is the reason.
set -E
trap 'FAILED=${FAILED:-"line $LINENO: $BASH_COMMAND"}' ERR
fail() {
  FAILED=$*
  echo "FAIL: $*" >&2
  local n
  for n in "${NODES[@]}"; do
    echo "--- $n (daemon.log, last 20 lines)" >&2
    tail -20 "$WORK/$n/daemon.log" >&2 2>/dev/null
  done
  echo "--- kube-controller-manager (last 10 lines)" >&2
  tail -10 "$WORK/cp/logs/kube-controller-manager.log" >&2 2>/dev/null
  exit 1
}
pass() { echo "ok: $*"; }
wait_for() { # SECONDS DESCRIPTION COMMAND...
  local secs=$1 until=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $until ] || fail "$what (not within ${secs} s)"
    sleep 0.2
  done
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# SINCE_MS [UNTIL_MS]: the seconds between, with one decimal.
secs() { local d=$(( ${2:-$(now_ms)} - $1 )); printf '%d.%d' $((d / 1000)) $(((d % 1000) / 100)); }

# ---------- the nodes' namespaces, the control plane, the image ----------
bash scripts/cluster/node-netns.sh up "$WORK/net" "${NODES[@]}" >/dev/null
# shellcheck disable=SC1091
source "$WORK/net/netns.env"
node_ips=""
for n in "${NODES[@]}"; do node_ips="$node_ips $n=${NODE_ADDR[$n]}"; done
# 16 s without a lease renewal makes a Node NotReady (the default 50 s would make this
# test wait minutes); the nodes renew every 5 s (lease 20 s) so a loaded machine does
# not make a live node look dead.
env API_ADDRESS="$HOST_ADDR" NODE_IPS="$node_ips" CLUSTER_CIDR="$CLUSTER_CIDR" \
  KCM_EXTRA_ARGS="--node-monitor-grace-period=16s --node-monitor-period=2s" \
  bash scripts/cluster/control-plane-up.sh "$WORK/cp" "${NODES[@]}" >/dev/null
# shellcheck disable=SC1091
source "$WORK/cp/env.sh"
declare -A KPORT
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
for n in "${NODES[@]}"; do
  for _ in $(seq 1 200); do
    p=$(( 10000 + RANDOM % (ephemeral_low - 10000) ))
    if ! ss -Htan "sport = :$p" | grep -q . && [[ " ${KPORT[*]} " != *" $p "* ]]; then KPORT[$n]=$p; break; fi
  done
done
bash oci/busybox/build.sh "$WORK/busybox-oci" >/dev/null
for n in "${NODES[@]}"; do
  "$PODHOST" load --socket "$WORK/$n/podhost.sock" --root-dir "$WORK/$n/root" "$WORK/busybox-oci" >/dev/null
done
IMAGE=localhost/busybox:latest

# start_node NAME: its daemon in its namespace, no taints (the scheduler may place pods
# there), the pod network on the Node's podCIDR; the same root dir on every start.
start_node() {
  local n=$1 dir=$WORK/$1
  mkdir -p "$dir/manifests"
  STARTS[$n]=$(( ${STARTS[$n]:-0} + 1 ))
  RECORD_OF[$n]=$dir/api.${STARTS[$n]}.jsonl
  # nsenter, not `ip netns exec`: the daemon keeps the host's mounts and /sys/fs/cgroup.
  # No image GC and no hard eviction: the image is loaded once, offline, and a build
  # machine's disk is often past the kubelet's thresholds.
  nsenter --net="/run/netns/${NODE_NETNS[$n]}" \
  "$PODHOST" --socket "$dir/podhost.sock" daemon --node-name "$n" \
    --root-dir "$dir/root" --pod-manifest-path "$dir/manifests" --log-dir "$dir/logs" \
    --config-dir "$dir/config" --pod-network bridge --eviction-hard= --image-gc-high-threshold 100 \
    --cgroup-root "$CGROUP_ROOT/$n" --node-lease-duration-seconds 20 \
    --kubeconfig "$WORK/cp/node-$n.kubeconfig" --kube-record "${RECORD_OF[$n]}" \
    --node-ip "${NODE_ADDR[$n]}" --port "${KPORT[$n]}" --client-ca-file "$WORK/cp/pki/ca.crt" \
    --tls-cert-file "$WORK/cp/pki/kubelet-$n.crt" --tls-private-key-file "$WORK/cp/pki/kubelet-$n.key" \
    >>"$dir/daemon.log" 2>&1 &
  PIDS+=($!)
  PID_OF[$n]=$!
}
node_field() { k get node "$1" -o jsonpath="$2"; }
node_ready() { node_field "$1" '{.status.conditions[?(@.type=="Ready")].status}'; }
is_ready() { [ "$(node_ready "$1")" = True ]; }
taints() { node_field "$1" '{range .spec.taints[*]}{.key}:{.effect} {end}'; }
pod_field() { k get pod "$1" -o jsonpath="$2"; }
gone() { ! k get pod "$1" >/dev/null 2>&1; }
# The Deployment's pods as "name node uid deleting" lines (deleting: its deletionTimestamp).
seeds_pods() {
  k get pods -l app=seeds -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.metadata.uid} {.metadata.deletionTimestamp}{"\n"}{end}'
}
# N pods of the Deployment, none terminating, all Running and Ready, none on the nodes
# given, and the Deployment says N available.
seeds_ready() { # N [NODE-TO-AVOID...]
  local want=$1 out avoid
  shift
  out=$(k get pods -l app=seeds -o jsonpath='{range .items[*]}{.spec.nodeName}/{.metadata.deletionTimestamp}/{.status.phase}/{.status.containerStatuses[0].ready}{"\n"}{end}')
  [ "$(grep -c '^[^/]*//Running/true$' <<<"$out" || true)" = "$want" ] || return 1
  [ "$(grep -c '^[^/]*//' <<<"$out" || true)" = "$want" ] || return 1
  for avoid in "$@"; do grep -q "^$avoid//" <<<"$out" && return 1; done
  [ "$(k get deployment seeds -o jsonpath='{.status.availableReplicas}')" = "$want" ]
}
# How many nodes the Deployment's live pods are on.
seeds_nodes() {
  k get pods -l app=seeds -o jsonpath='{range .items[*]}{.spec.nodeName}/{.metadata.deletionTimestamp}{"\n"}{end}' | grep '/$' | sort -u | grep -c .
}
spread() { # the Deployment's pods as name→node, "(terminating)" after those being deleted
  local pod node deleting
  while read -r pod node _ deleting; do
    printf '%s→%s%s ' "$pod" "$node" "${deleting:+ (terminating)}"
  done <<<"$(seeds_pods)"
}
# The host processes of a pod of this run: its containers carry SEEDMARK=RUN/POD.
marked() { grep -lzxF "SEEDMARK=$RUN/$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | sort -n | tr '\n' ' '; }
no_marked() { [ -z "$(marked "$1")" ]; }
# The pod's container's own process (its probes, hooks and `sleep 1` carry the mark too).
main_pid() {
  local pid
  for pid in $(marked "$1"); do
    grep -qF 'touch /tmp/ready' "/proc/$pid/cmdline" 2>/dev/null && { echo "$pid"; return; }
  done
}
# Written by the pod's container and its preStop hook in the hostPath /shared.
marks() { tr '\n' ' ' <"$SHARED/$1" 2>/dev/null; }
# final_then_deleted NODE POD UID: in the node's record, the pod's last status patch is
# terminal (Succeeded, its container exited 0) and precedes the delete with grace 0 and
# the UID precondition; the kubelet's way of finishing a graceful deletion.
final_then_deleted() {
  python3 - "${RECORD_OF[$1]}" "$2" "$3" <<'PY'
import json, sys
path, name, uid = sys.argv[1:]
pod = f"/api/v1/namespaces/default/pods/{name}"
ex = [json.loads(line) for line in open(path)]
mine = [e for e in ex if e["path"] in (pod, pod + "/status")]
patches = [e for e in mine if e["method"] == "PATCH" and e["request"]["metadata"]["uid"] == uid]
assert patches, f"no status patch of {name}"
last = patches[-1]["request"]["status"]
assert last["phase"] == "Succeeded", last["phase"]
state = last["containerStatuses"][0]["state"]
assert state["terminated"]["exitCode"] == 0, state
deletes = [e for e in mine if e["method"] == "DELETE"]
assert len(deletes) == 1 and deletes[0]["status"] == 200, deletes
body = deletes[0]["request"]
assert body["gracePeriodSeconds"] == 0 and body["preconditions"]["uid"] == uid, body
assert mine.index(patches[-1]) < mine.index(deletes[0]), "the delete came before the final status"
PY
}
# What the pod watch saw of a pod: "deletionTimestamp|grace|DisruptionTarget reason" lines.
watched() { grep "^$1|" "$WORK/watch.log" | cut -d'|' -f2- || true; }
deleted_with_grace() { # POD GRACE
  watched "$1" | grep -q "^20[^|]*|$2|"
}
# graceful POD NODE UID: the pod went the kubelet's way (see the header).
graceful() {
  local pod=$1 node=$2 uid=$3
  deleted_with_grace "$pod" 5 || fail "$pod: no deletionTimestamp with grace 5 seen by the watch: $(watched "$pod" | tr '\n' ' ')"
  [ "$(marks "$pod")" = "started prestop term " ] || fail "$pod: preStop then TERM expected, marks: '$(marks "$pod")'"
  final_then_deleted "$node" "$pod" "$uid" || fail "$pod: final status then delete (grace 0, UID) by $node"
  wait_for 10 "$pod: its processes gone" no_marked "$pod"
}

for n in "${NODES[@]}"; do start_node "$n"; done
for n in "${NODES[@]}"; do
  wait_for 60 "node $n Ready" is_ready "$n"
  wait_for 30 "node $n without the controller manager's not-ready taint" bash -c "! $KUBECTL --kubeconfig $KUBECONFIG get node $n -o jsonpath='{.spec.taints[*].key}' | grep -q node.kubernetes.io"
done
pass "nodes ${NODES[*]} Ready, untainted, podCIDRs $(for n in "${NODES[@]}"; do node_field "$n" '{.spec.podCIDR} '; done)"

# ---------- 1. a Deployment scheduled onto the nodes; scale 3 → 1 ----------
# The pod watch, for what happens between two polls (deletionTimestamp, grace,
# DisruptionTarget): one line per change.
"$KUBECTL" --kubeconfig "$KUBECONFIG" get pods --watch -o jsonpath='{.metadata.name}|{.metadata.deletionTimestamp}|{.metadata.deletionGracePeriodSeconds}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}{"\n"}' \
  >"$WORK/watch.log" 2>"$WORK/watch.err" &
WATCH_PID=$!
# pod_spec INDENT: the pods' spec (the Deployment's template and the bare pod's).
# Tolerations of 5 s for a not-ready or unreachable node (the default is 300 s).
pod_spec() {
  sed "s/^/$1/" <<YAML
automountServiceAccountToken: false
terminationGracePeriodSeconds: 5
tolerations:
- {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
- {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
volumes: [{name: shared, hostPath: {path: $SHARED, type: Directory}}]
containers:
- name: app
  image: $IMAGE
  imagePullPolicy: IfNotPresent
  env:
  - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
  - {name: SEEDMARK, value: "$RUN/\$(POD_NAME)"}
  command: [sh, -c, 'echo started >> /shared/\$POD_NAME; touch /tmp/ready; trap "echo term >> /shared/\$POD_NAME; exit 0" TERM; while :; do sleep 1; done']
  readinessProbe: {exec: {command: [cat, /tmp/ready]}, periodSeconds: 2}
  lifecycle: {preStop: {exec: {command: [sh, -c, 'echo prestop >> /shared/\$POD_NAME']}}}
  volumeMounts: [{name: shared, mountPath: /shared}]
YAML
}
t0=$(now_ms)
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: seeds}
spec:
  replicas: 3
  selector: {matchLabels: {app: seeds}}
  template:
    metadata: {labels: {app: seeds}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor, labelSelector: {matchLabels: {app: seeds}}}
$(pod_spec "      ")
YAML
wait_for 120 "Deployment seeds: 3 pods Running and Ready" seeds_ready 3
T_DEPLOY=$(secs "$t0")
[ "$(seeds_nodes)" = 3 ] || fail "Deployment seeds: not one pod per node: $(spread)"
pass "Deployment seeds scheduled onto the podhost nodes, 3 Running and Ready in $T_DEPLOY s: $(spread)"

before=$(seeds_pods)
t0=$(now_ms)
k scale deployment seeds --replicas=1 >/dev/null
one_left() { [ "$(seeds_pods | grep -c .)" = 1 ]; }
wait_for 60 "scale to 1: two pods gone" one_left
T_SCALE=$(secs "$t0")
kept=$(seeds_pods | cut -d' ' -f1)
while read -r pod node uid _; do
  [ "$pod" = "$kept" ] && continue
  graceful "$pod" "$node" "$uid"
  victims="${victims:-}$pod ($node) "
done <<<"$before"
[ "$(wc -w <<<"$victims")" = 4 ] || fail "scale to 1: two victims expected, got: $victims"
pass "scaled to 1 in $T_SCALE s (kubectl scale → both objects gone): $victims: deletionTimestamp (grace 5) → preStop → TERM → final status Succeeded → deleted with grace 0 and the UID precondition by their node; no process left"

# ---------- 2. kubectl drain of the remaining replica's node ----------
read -r pod node uid _ <<<"$(seeds_pods)"
t0=$(now_ms)
out=$(k drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=90s 2>&1) || fail "kubectl drain $node: $out"
T_DRAIN=$(secs "$t0")
grep -qx "pod/$pod evicted" <<<"$out" || fail "kubectl drain $node: no 'pod/$pod evicted' in: $out"
grep -q "node/$node drained" <<<"$out" || fail "kubectl drain $node: not drained: $out"
gone "$pod" || fail "$pod still exists after the drain"
watched "$pod" | grep -q '|EvictionByEvictionAPI$' || fail "$pod: no DisruptionTarget EvictionByEvictionAPI seen: $(watched "$pod" | tr '\n' ' ')"
graceful "$pod" "$node" "$uid"
[ "$(node_field "$node" '{.spec.unschedulable}')" = true ] || fail "$node not cordoned after the drain"
wait_for 60 "the drained replica replaced on another node" seeds_ready 1 "$node"
T_DRAIN_REPLACED=$(secs "$t0")
pass "kubectl drain $node in $T_DRAIN s: $pod evicted through the Eviction API (DisruptionTarget EvictionByEvictionAPI) and gone the graceful way, $node cordoned; replacement Running and Ready $T_DRAIN_REPLACED s after the drain began: $(spread)"
k uncordon "$node" >/dev/null
uncordoned() { [ -z "$(node_field "$node" '{.spec.unschedulable}')" ] && [[ "$(taints "$node")" != *unschedulable* ]]; }
wait_for 30 "$node uncordoned (no unschedulable taint)" uncordoned
pass "kubectl uncordon $node"

# ---------- 3. scale to 3; a node killed -9 ----------
k scale deployment seeds --replicas=3 >/dev/null
wait_for 90 "Deployment seeds back to 3" seeds_ready 3
[ "$(seeds_nodes)" = 3 ] || fail "Deployment seeds: not one pod per node after the scale to 3: $(spread)"
pass "scaled to 3: $(spread)"

# 3a. Killed and restarted at once (within the grace): the pod is adopted.
q=seed-a
read -r qpod _ <<<"$(seeds_pods | grep " $q ")"
cid=$(pod_field "$qpod" '{.status.containerStatuses[0].containerID}')
qpid=$(main_pid "$qpod")
[ -n "$qpid" ] || fail "$qpod: no host process carries its SEEDMARK"
ready_since=$(node_field "$q" '{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
kill -9 "${PID_OF[$q]}"; wait "${PID_OF[$q]}" 2>/dev/null || true
t0=$(now_ms)
start_node "$q"
adopted() { grep -q "adopted running container pod=$qpod " "$WORK/$q/daemon.log"; }
wait_for 30 "$q's new daemon adopted $qpod" adopted
T_QUICK_ADOPTED=$(secs "$t0")
# The new daemon's first Node status, then one pod status reconcile (every 10 s): what
# it says of the node and the pod is in the API by then.
status_posted() { grep -q "\"PATCH\",\"path\":\"/api/v1/nodes/$q/status\"" "${RECORD_OF[$q]}"; }
wait_for 30 "$q's new daemon posted the Node's status" status_posted
T_QUICK_STATUS=$(secs "$t0")
sleep 11
same="$(pod_field "$qpod" '{.status.containerStatuses[0].containerID}/{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].ready}')"
[ "$same" = "$cid/0/true" ] || fail "$qpod after $q's quick restart: containerID/restartCount/ready $same, expected $cid/0/true"
[ "$(main_pid "$qpod")" = "$qpid" ] || fail "$qpod: its container's process was $qpid before the restart, '$(main_pid "$qpod")' after"
[ "$(node_field "$q" '{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')" = "$ready_since" ] \
  || fail "$q: Ready changed during its quick restart (lastTransitionTime $ready_since → $(node_field "$q" '{.status.conditions[?(@.type=="Ready")].lastTransitionTime}'))"
[ "$(marks "$qpod")" = "started " ] || fail "$qpod: marks '$(marks "$qpod")' after its node's quick restart"
pass "$q killed -9 and restarted at once: $qpod adopted $T_QUICK_ADOPTED s after the restart, the Node's status posted after $T_QUICK_STATUS s, Ready throughout; kept its container (same containerID, the same process $qpid, restartCount 0, Ready)"

# 3b. Killed for good: NotReady, tainted, its pods evicted and replaced.
y=seed-b
read -r ypod _ yuid _ <<<"$(seeds_pods | grep " $y ")"
# A bare pod on that node, force-deleted while the node is down: its object is gone.
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: lone}
spec:
  nodeName: $y
$(pod_spec "  ")
YAML
wait_for 30 "pod lone Running on $y" bash -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get pod lone -o jsonpath='{.status.phase}/{.status.containerStatuses[0].ready}')\" = Running/true ]"
kill -9 "${PID_OF[$y]}"; wait "${PID_OF[$y]}" 2>/dev/null || true
t_kill=$(now_ms)
if [ -z "$(marked "$ypod")" ] || [ -z "$(marked lone)" ]; then fail "$y's pods stopped with their daemon"; fi
unknown() {
  [ "$(node_field "$y" '{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].message}')" \
    = "Unknown/Kubelet stopped posting node status." ]
}
wait_for 60 "$y Ready=Unknown after its daemon was killed" unknown
t_notready=$(now_ms)
unreachable() { [[ "$(taints "$y")" == *node.kubernetes.io/unreachable:NoExecute* ]]; }
wait_for 30 "$y tainted node.kubernetes.io/unreachable:NoExecute" unreachable
t_taint=$(now_ms)
evicted() { [ -n "$(pod_field "$ypod" '{.metadata.deletionTimestamp}')" ]; }
wait_for 30 "$ypod deleted by the taint eviction controller" evicted
t_evicted=$(now_ms)
watched "$ypod" | grep -q '|DeletionByTaintManager$' || fail "$ypod: no DisruptionTarget DeletionByTaintManager seen: $(watched "$ypod" | tr '\n' ' ')"
wait_for 60 "Deployment seeds back to 3 available without $y" seeds_ready 3 "$y"
t_replaced=$(now_ms)
# The API server keeps the evicted pod until its node confirms; its containers run on.
[ -n "$(pod_field "$ypod" '{.metadata.deletionTimestamp}')" ] || fail "$ypod: not Terminating while $y is down"
[ -n "$(marked "$ypod")" ] || fail "$ypod: its processes stopped while $y was down"
k delete pod lone --grace-period=0 --force >/dev/null 2>&1
gone lone || fail "pod lone still in the API after a force delete"
[ -n "$(marked lone)" ] || fail "lone: its processes stopped while $y was down"
pass "$y killed -9: Ready=Unknown 'Kubelet stopped posting node status.' after $(secs "$t_kill" "$t_notready") s, tainted unreachable:NoExecute $(secs "$t_notready" "$t_taint") s later, $ypod deleted by the taint eviction controller after its 5 s toleration ($(secs "$t_taint" "$t_evicted") s) and kept Terminating by the API server (its containers still run); Deployment back to 3 available $(secs "$t_notready" "$t_replaced") s after NotReady: $(spread)"

start_node "$y"
t_restart=$(now_ms)
wait_for 60 "$y Ready after its restart" is_ready "$y"
t_ready=$(now_ms)
wait_for 60 "$ypod's object deleted by $y after its restart" gone "$ypod"
t_ypod_gone=$(now_ms)
graceful "$ypod" "$y" "$yuid"
wait_for 30 "lone's processes stopped by $y (its object was force-deleted while $y was down)" no_marked lone
t_lone_gone=$(now_ms)
[[ "$(marks lone)" == "started "* ]] || fail "lone: marks '$(marks lone)'"
untainted() { [[ "$(taints "$y")" != *node.kubernetes.io/unreachable* ]]; }
wait_for 30 "$y's unreachable taints removed" untainted
others=$(ip netns pids "${NODE_NETNS[$y]}" | grep -vx "${PID_OF[$y]}" | tr '\n' ' ' || true)
[ -z "$others" ] || fail "$y's namespace still has processes besides its daemon: $others ($(for p in $others; do tr '\0' ' ' </proc/"$p"/cmdline; echo; done))"
seeds_ready 3 "$y" || fail "Deployment seeds not at 3 available after $y came back"
pass "$y restarted: Ready in $(secs "$t_restart" "$t_ready") s and untainted; the Terminating $ypod stopped the graceful way (preStop, TERM, final status) and its object deleted by $y $(secs "$t_restart" "$t_ypod_gone") s after the restart; lone (force-deleted while down) stopped in $(secs "$t_restart" "$t_lone_gone") s; nothing of them left in $y's namespace"

cat <<EOF
---- seeds-test: measured times (this machine, one run) ----
  Deployment of 3 created → 3 Running and Ready:           $T_DEPLOY s
  kubectl scale 3 → 1 → the two objects gone:              $T_SCALE s
  kubectl drain (one pod, evicted and gone):               $T_DRAIN s
  drain begun → replacement Running and Ready:             $T_DRAIN_REPLACED s
  quick kill -9 + restart → pod adopted:                   $T_QUICK_ADOPTED s
  quick kill -9 + restart → first Node status (Ready):     $T_QUICK_STATUS s
  kill -9 → Node Ready=Unknown (grace 16 s):               $(secs "$t_kill" "$t_notready") s
  NotReady → unreachable:NoExecute taint:                  $(secs "$t_notready" "$t_taint") s
  taint → pod deleted (tolerationSeconds 5):               $(secs "$t_taint" "$t_evicted") s
  NotReady → Deployment back to 3 available:               $(secs "$t_notready" "$t_replaced") s
  restart → Node Ready:                                    $(secs "$t_restart" "$t_ready") s
  restart → the Terminating pod's object deleted:          $(secs "$t_restart" "$t_ypod_gone") s
  restart → the force-deleted pod's processes gone:        $(secs "$t_restart" "$t_lone_gone") s
  whole run so far:                                        $SECONDS s
EOF
