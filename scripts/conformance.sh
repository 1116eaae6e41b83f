#!/usr/bin/env bash
# scripts/conformance.sh [--short] — Kubernetes' node conformance suite against podhost.
#
# Kubernetes' own e2e.test and ginkgo (scripts/cluster/build-conformance.sh: built from
# the pinned Go modules, or found cached) run the specs labelled [NodeConformance]
# against a live control plane of the same release (kube-apiserver, controller manager
# and scheduler: scripts/cluster/build-control-plane.sh) whose one node is podhost, in
# its own network namespace with its pod network. The test images are built offline
# under the names the framework uses (scripts/cluster/e2e-images.sh, kept in
# target/tmp/e2e-images) and loaded into podhost's store; nothing is pulled from the
# internet.
#
#   sudo bash scripts/conformance.sh --short   # CI: skips [Serial], [Disruptive], [Flaky], [Slow]
#   sudo bash scripts/conformance.sh           # every [NodeConformance] spec
#   sudo bash scripts/conformance.sh --conformance [--short]
#                                  # the [Conformance] specs that are not [NodeConformance]
#                                  # (with kube-proxy on the node: cluster/kube-proxy-up.sh,
#                                  # and CoreDNS behind kube-dns: cluster/coredns-up.sh)
#
# Env: PODHOST (default target/release/podhost, built if missing), FOCUS (a regexp
# narrowing the focus further, e.g. FOCUS='Container Lifecycle Hook'), PROCS (parallel
# ginkgo processes, default 16: most specs wait on pods and probes, not on the CPU),
# TIMEOUT (ginkgo's limit for the run, default 50m with --short, else 150m),
# KEEP_WORK=1 (keep the work dir: reports, logs), KUBE_PROXY_MODE (nftables, the
# default, or iptables; --conformance), SPECS (a regexp that replaces the label focus,
# e.g. SPECS='should preserve source pod IP' with --conformance for kube-proxy; the
# last line then counts the specs it selected, whatever their labels).
# Specs that cannot pass here for reasons that are not the node's are skipped and named
# with their reason on every run: tests/cluster/conformance/not-applicable, and
# PrivilegedPod on a host kernel without the dummy link type.
# Prints ginkgo's progress, the failed specs, then as its last line
# "N passed, M failed, K skipped"; exits non-zero when a spec failed.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "conformance: run as root" >&2; exit 1; }
SHORT=0 CONFORMANCE=0
for arg in "$@"; do
  case "$arg" in
    --short) SHORT=1 ;;
    --conformance) CONFORMANCE=1 ;;
    *) echo "usage: $0 [--short] [--conformance]" >&2; exit 2 ;;
  esac
done
cp_bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
test_bin=$(bash scripts/cluster/build-conformance.sh | tail -1)
export KUBE_APISERVER=$cp_bin/kube-apiserver KUBE_CONTROLLER_MANAGER=$cp_bin/kube-controller-manager
export KUBE_SCHEDULER=$cp_bin/kube-scheduler
KUBECTL=$cp_bin/kubectl
command -v etcd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
PODHOST=${PODHOST:-target/release/podhost}
[ -x "$PODHOST" ] || cargo build --release --locked >/dev/null
PODHOST=$(realpath "$PODHOST")
PROCS=${PROCS:-16}
# ginkgo's limit for the whole run: the [Serial] specs of a run without --short run one
# at a time after the others (--conformance: 35 more, StatefulSet and CronJob ones for
# minutes each).
TIMEOUT=${TIMEOUT:-$([ "$SHORT" = 1 ] && echo 50m || echo 150m)}

NODE=podhost-conformance
WORK=$(mktemp -d /tmp/podhost-conformance.XXXXXX)
CGROUP_ROOT=/podhost-conformance-$$
CP=$WORK/cp
PODHOST_NODE_PID=""
GINKGO_PID=""
cleanup() {
  set +e
  # ginkgo and its e2e.test processes: a process group of their own.
  [ -n "$GINKGO_PID" ] && kill -- "-$GINKGO_PID" 2>/dev/null && wait "$GINKGO_PID" 2>/dev/null
  if [ -f "$CP/env.sh" ]; then
    timeout 120 "$KUBECTL" --kubeconfig "$CP/admin.kubeconfig" delete pods --all-namespaces --all --grace-period=1 --timeout=100s >/dev/null 2>&1
  fi
  [ -n "$PODHOST_NODE_PID" ] && kill "$PODHOST_NODE_PID" 2>/dev/null && wait "$PODHOST_NODE_PID" 2>/dev/null
  bash scripts/cluster/control-plane-down.sh "$CP" --keep >/dev/null 2>&1
  bash scripts/cluster/node-netns.sh down "$WORK/net" >/dev/null 2>&1
  podhost_node_leftovers "$CGROUP_ROOT" "$WORK"
  grep -F " $WORK/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l 2>/dev/null
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
# shellcheck source=cluster/podhost-node.sh
. scripts/cluster/podhost-node.sh
trap cleanup EXIT
trap 'exit 143' TERM INT

bash scripts/cluster/node-netns.sh up "$WORK/net" "$NODE" >/dev/null
# shellcheck disable=SC1091
source "$WORK/net/netns.env"
env API_ADDRESS="$HOST_ADDR" NODE_IPS="$NODE=${NODE_ADDR[$NODE]}" CLUSTER_CIDR="$CLUSTER_CIDR" \
  SERVICE_CIDR="$SERVICE_CIDR" ENDPOINT_RECONCILER=lease \
  bash scripts/cluster/control-plane-up.sh "$CP" "$NODE" >"$WORK/control-plane-up.log" 2>&1 ||
  { tail -20 "$WORK/control-plane-up.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "$CP/env.sh"

dir=$WORK/node
ETCD=$cp_bin/etcd bash scripts/cluster/e2e-images.sh "$test_bin" "${CARGO_TARGET_DIR:-target}/tmp/e2e-images" >"$WORK/images"
while read -r ref layout; do
  "$PODHOST" load --socket "$dir/podhost.sock" --root-dir "$dir/root" --name "$ref" "$layout" >>"$WORK/load.log" 2>&1 ||
    { cat "$WORK/load.log" >&2; exit 1; }
done <"$WORK/images"
# --conformance: the cluster DNS's address (the Service range's tenth, as kubeadm's
# kube-dns) is the node's --cluster-dns, as a kubelet's clusterDNS.
NODE_FLAGS=()
if [ "$CONFORMANCE" = 1 ]; then
  service_base=${SERVICE_CIDR%/*}
  DNS_IP=${service_base%.*}.10
  NODE_FLAGS=(--cluster-dns "$DNS_IP" --cluster-domain cluster.local)
fi
podhost_node_start "$PODHOST" "$NODE" "$dir" "${NODE_POD_CIDR[$NODE]}" "$CGROUP_ROOT" "${NODE_FLAGS[@]}"
# --conformance: Services (the Services, DNS, Proxy and webhook specs need them).
# kube-proxy on the node as kubeadm runs it (a DaemonSet, nftables mode), and the
# Services' range routed from the host (where e2e.test and the API server run) to the
# node, whose kube-proxy rules translate it. KUBE_PROXY_MODE=iptables for the other.
# The [NodeConformance] specs test the node agent alone and were measured without a
# proxy: that run stays as it was.
if [ "$CONFORMANCE" = 1 ]; then
  ip route add "$SERVICE_CIDR" via "${NODE_ADDR[$NODE]}"
  KUBECTL=$KUBECTL bash scripts/cluster/kube-proxy-up.sh "$CP" "$(awk '$1 ~ /kube-proxy:/ { print $1 }' "$WORK/images")" \
    "${NODE_POD_CIDR[$NODE]}" "${KUBE_PROXY_MODE:-nftables}" 2>>"$WORK/kube-proxy-up.log" ||
    { cat "$WORK/kube-proxy-up.log" >&2; exit 1; }
  # CoreDNS behind kube-dns, as kubeadm deploys it (the Services and DNS specs resolve
  # names through it).
  KUBECTL=$KUBECTL bash scripts/cluster/coredns-up.sh "$CP" "$(awk '$1 ~ /coredns\/coredns:/ { print $1 }' "$WORK/images")" \
    "$DNS_IP" 2>>"$WORK/coredns-up.log" || { cat "$WORK/coredns-up.log" >&2; exit 1; }
fi

focus='\[NodeConformance\]'
[ "$CONFORMANCE" = 1 ] && focus='\[Conformance\]'
[ -n "${FOCUS:-}" ] && focus="$focus.*($FOCUS)|($FOCUS).*$focus"
# SPECS: exactly the specs it selects, labelled or not (the skips below still apply).
[ -n "${SPECS:-}" ] && focus=$SPECS
skip='\[Feature:|\[Alpha\]|\[Beta\]'
# --conformance: the [NodeConformance] specs are the other mode's.
[ "$CONFORMANCE" = 1 ] && skip="$skip|\[NodeConformance\]"
[ "$SHORT" = 1 ] && skip="$skip|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]"
# Specs that cannot pass here for reasons that are not the node's: named, with why.
not_applicable() { # REGEXP REASON
  echo "conformance: not applicable here, skipped: $1 ($2)"
  skip="$skip|$1"
}
while IFS=$'\t' read -r spec reason; do
  case "$spec" in "" | "#"*) continue ;; esac
  not_applicable "$spec" "$reason"
done <tests/cluster/conformance/not-applicable
# PrivilegedPod makes a dummy link in a privileged container: the host kernel needs the
# dummy module.
if ! unshare -n sh -c 'ip link add phconf0 type dummy' 2>/dev/null; then
  not_applicable 'PrivilegedPod .*should enable privileged commands' "this host's kernel has no dummy link type"
fi
echo "conformance: podhost $("$PODHOST" --version 2>/dev/null | head -1), $("$KUBE_APISERVER" --version), focus $focus, skip $skip, $PROCS processes"
mkdir -p "$WORK/report"
api_metrics() { "$KUBECTL" --kubeconfig "$CP/admin.kubeconfig" get --raw /metrics >"$1" 2>/dev/null; }
api_metrics "$WORK/report/apiserver-metrics-before.txt" || true
(cd "$WORK/report" && exec setsid "$test_bin/ginkgo" --procs="$PROCS" --timeout="$TIMEOUT" --no-color \
  --focus="$focus" --skip="$skip" --json-report=report.json \
  "$test_bin/e2e.test" -- \
  --kubeconfig="$KUBECONFIG" --provider=skeleton --kubectl-path="$KUBECTL" \
  --report-dir="$WORK/report" --node-os-distro=debian --allowed-not-ready-nodes=0 \
  --system-pods-startup-timeout=1m --e2e-verify-service-account=true) >"$WORK/ginkgo.log" 2>&1 &
GINKGO_PID=$!
rc=0
wait "$GINKGO_PID" || rc=$?
GINKGO_PID=""
# The API server's own view of the run, for failures no node takes part in (API-only
# specs whose watches end early): its metrics before and after the specs, kept with the
# report (KEEP_WORK=1), and a line naming the resources whose watch cache made reads
# wait past its 3 s limit during the specs (such a read fails; a watch gets an error
# event and its channel closes).
api_metrics "$WORK/report/apiserver-metrics-after.txt" &&
  python3 scripts/cluster/watch-cache-waits.py "$WORK/report/apiserver-metrics-before.txt" \
    "$WORK/report/apiserver-metrics-after.txt" || true
summary_args=()
[ "$CONFORMANCE" = 1 ] && summary_args=(--conformance)
# SPECS chose the specs itself: count those, whatever their labels.
[ -n "${SPECS:-}" ] && summary_args=(--selected)
python3 scripts/cluster/conformance-summary.py "${summary_args[@]}" "$WORK/report/report.json" "$WORK/ginkgo.log"
exit "$rc"
