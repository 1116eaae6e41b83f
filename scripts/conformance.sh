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
#
# Env: PODHOST (default target/release/podhost, built if missing), FOCUS (a regexp
# narrowing the focus further, e.g. FOCUS='Container Lifecycle Hook'), PROCS (parallel
# ginkgo processes, default 4), KEEP_WORK=1 (keep the work dir: reports, logs).
# Prints ginkgo's progress, the failed specs, then as its last line
# "N passed, M failed, K skipped"; exits non-zero when a spec failed.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "conformance: run as root" >&2; exit 1; }
SHORT=0
case "${1:-}" in
  --short) SHORT=1 ;;
  "") ;;
  *) echo "usage: $0 [--short]" >&2; exit 2 ;;
esac
cp_bin=$(bash scripts/cluster/build-control-plane.sh | tail -1)
test_bin=$(bash scripts/cluster/build-conformance.sh | tail -1)
export KUBE_APISERVER=$cp_bin/kube-apiserver KUBE_CONTROLLER_MANAGER=$cp_bin/kube-controller-manager
export KUBE_SCHEDULER=$cp_bin/kube-scheduler
KUBECTL=$cp_bin/kubectl
command -v etcd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
PODHOST=${PODHOST:-target/release/podhost}
[ -x "$PODHOST" ] || cargo build --release --locked >/dev/null
PODHOST=$(realpath "$PODHOST")
PROCS=${PROCS:-4}

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
  bash scripts/cluster/control-plane-up.sh "$CP" "$NODE" >"$WORK/control-plane-up.log" 2>&1 ||
  { tail -20 "$WORK/control-plane-up.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "$CP/env.sh"

dir=$WORK/node
while read -r ref layout; do
  "$PODHOST" load --socket "$dir/podhost.sock" --root-dir "$dir/root" --name "$ref" "$layout" >>"$WORK/load.log" 2>&1 ||
    { cat "$WORK/load.log" >&2; exit 1; }
done < <(bash scripts/cluster/e2e-images.sh "$test_bin" "${CARGO_TARGET_DIR:-target}/tmp/e2e-images")
podhost_node_start "$PODHOST" "$NODE" "$dir" "${NODE_POD_CIDR[$NODE]}" "$CGROUP_ROOT"

focus='\[NodeConformance\]'
[ -n "${FOCUS:-}" ] && focus="$focus.*$FOCUS|$FOCUS.*$focus"
skip='\[Feature:|\[Alpha\]|\[Beta\]'
[ "$SHORT" = 1 ] && skip="$skip|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]"
echo "conformance: podhost $("$PODHOST" --version 2>/dev/null | head -1), $("$KUBE_APISERVER" --version), focus $focus, skip $skip, $PROCS processes"
mkdir -p "$WORK/report"
(cd "$WORK/report" && exec setsid "$test_bin/ginkgo" --procs="$PROCS" --timeout=50m --no-color \
  --focus="$focus" --skip="$skip" --json-report=report.json \
  "$test_bin/e2e.test" -- \
  --kubeconfig="$KUBECONFIG" --provider=skeleton --kubectl-path="$KUBECTL" \
  --report-dir="$WORK/report" --node-os-distro=debian --allowed-not-ready-nodes=0 \
  --system-pods-startup-timeout=1m --e2e-verify-service-account=true) >"$WORK/ginkgo.log" 2>&1 &
GINKGO_PID=$!
rc=0
wait "$GINKGO_PID" || rc=$?
GINKGO_PID=""
python3 scripts/cluster/conformance-summary.py "$WORK/report/report.json" "$WORK/ginkgo.log"
exit "$rc"
