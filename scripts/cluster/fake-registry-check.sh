#!/usr/bin/env bash
# scripts/cluster/fake-registry-check.sh [OUT_DIR] — checks the fake registry of the agnhost
# image e2e-images.sh builds, the way Kubernetes' "Container Runtime ... with a new image"
# specs use it (test/e2e/framework/registry): a podhost of its own, in a network namespace
# of its own, runs `/agnhost fake-registry-server --private` from the image as a
# hostNetwork pod (user 5123, as the framework's pod), which listens on localhost:5000 in
# plain HTTP; then localhost:5000/pause:testing is pulled through that podhost without
# credentials (refused) and with the framework's (user:password, as User1DockerSecret
# writes them in a docker config.json), and runs as a pod (imagePullPolicy Always). podhost
# tries HTTPS first and falls back to plain HTTP once: its log must say so once.
#
# OUT_DIR: e2e-images.sh's output (default target/tmp/e2e-images). Env: PODHOST (default
# target/debug/podhost). Prints what it checks; the last line is "fake registry: ok", and
# it exits non-zero at the first check that fails (with the daemon's log). Run as root.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
[ "$(id -u)" -eq 0 ] || { echo "fake-registry-check: run as root" >&2; exit 1; }
OUT=$(realpath "${1:-target/tmp/e2e-images}")
PODHOST=$(realpath "${PODHOST:-target/debug/podhost}")
AGNHOST=registry.k8s.io/e2e-test-images/agnhost:2.63.0
IMAGE=localhost:5000/pause:testing
[ -f "$OUT/agnhost-2.63.0/index.json" ] || { echo "fake-registry-check: no $OUT/agnhost-2.63.0 (run scripts/cluster/e2e-images.sh)" >&2; exit 1; }

if [ -z "${FAKE_REGISTRY_NETNS:-}" ]; then
  # Again, in a network namespace of its own with loopback up: localhost:5000 is free there.
  # shellcheck disable=SC2016 # "$0" and "$@" are the inner shell's
  exec unshare --net env FAKE_REGISTRY_NETNS=1 bash -c 'ip link set lo up && exec bash "$0" "$@"' "$SELF" "$OUT"
fi

W=$(mktemp -d /tmp/podhost-fake-registry.XXXXXX)
CGROUP_ROOT=/podhost-fake-registry-$$
DAEMON_PID=""
cleanup() {
  set +e
  if [ -n "$DAEMON_PID" ]; then
    rm -f "$W"/manifests/*.yaml
    for _ in $(seq 1 100); do
      [ "$(pod_phase registry)$(pod_phase pause)" = "" ] && break
      sleep 0.2
    done
    kill "$DAEMON_PID" && wait "$DAEMON_PID"
  fi
  # A failed run can leave pods running (a stopped podhost keeps them): their
  # processes, shims and cgroups go, then any mount under the work dir.
  podhost_node_leftovers "$CGROUP_ROOT" "$W"
  grep -F " $W/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$W"
}
# shellcheck source=scripts/cluster/podhost-node.sh
. "$(dirname "$SELF")/podhost-node.sh"
trap cleanup EXIT
podhost() { "$PODHOST" --socket "$W/podhost.sock" "$@"; }
fail() {
  echo "fake-registry-check: $*" >&2
  tail -30 "$W/daemon.log" >&2
  exit 1
}
# The phase of the static pod NAME (named NAME-fake-registry), empty when there is none.
pod_phase() { # NAME
  podhost get pods -A -o json 2>/dev/null | python3 -c '
import json, sys
for pod in json.load(sys.stdin).get("items", []):
    if pod["metadata"]["name"] == sys.argv[1] + "-fake-registry":
        print(pod.get("status", {}).get("phase", ""))' "$1"
}
# Waits up to 60 s for pod NAME to be Running.
wait_running() { # NAME
  for _ in $(seq 1 300); do
    [ "$(pod_phase "$1")" = Running ] && return 0
    sleep 0.2
  done
  podhost get pods -A -o json >&2 || true
  fail "pod $1: not Running within 60 s"
}

mkdir -p "$W/manifests" "$W/no-cni"
"$PODHOST" load --socket "$W/podhost.sock" --root-dir "$W/root" --name "$AGNHOST" "$OUT/agnhost-2.63.0" \
  >"$W/load.out" 2>&1 || { cat "$W/load.out" >&2; exit 1; }
RUST_LOG=info "$PODHOST" --socket "$W/podhost.sock" daemon --node-name fake-registry \
  --root-dir "$W/root" --pod-manifest-path "$W/manifests" --log-dir "$W/logs" \
  --pod-network none --cni-conf-dir "$W/no-cni" --eviction-hard= --cgroup-root "$CGROUP_ROOT" \
  --rescan-interval 1 --image-credentials "$W/config.json" >"$W/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 150); do podhost get pods -A >/dev/null 2>&1 && break; sleep 0.2; done

cat >"$W/manifests/registry.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: registry}
spec:
  hostNetwork: true
  containers:
  - name: registry
    image: $AGNHOST
    imagePullPolicy: IfNotPresent
    args: [fake-registry-server, --private]
    securityContext: {runAsUser: 5123, runAsNonRoot: true, allowPrivilegeEscalation: false}
EOF
wait_running registry
for _ in $(seq 1 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' http://localhost:5000/v2/)" = 401 ] && break
  sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -u user:password http://localhost:5000/v2/)" = 200 ] ||
  fail "the registry does not answer localhost:5000/v2/ with user:password"
echo "fake registry: serving localhost:5000 (private)"

if podhost pull "$IMAGE" >"$W/pull.out" 2>&1; then fail "$IMAGE was pulled without credentials"; fi
grep -q unauthorized "$W/pull.out" || { cat "$W/pull.out" >&2; fail "pulling $IMAGE without credentials: not refused as unauthorized"; }
echo "fake registry: $IMAGE refused without credentials: $(tail -1 "$W/pull.out")"

# The docker config.json of the framework's User1DockerSecret.
printf '{"auths":{"localhost:5000":{"auth":"dXNlcjpwYXNzd29yZA=="}}}\n' >"$W/config.json"
podhost pull "$IMAGE" >"$W/pull.out" 2>&1 || { cat "$W/pull.out" >&2; fail "pulling $IMAGE with user:password failed"; }
echo "fake registry: $IMAGE pulled with user:password"
fallbacks=$(grep -c 'answered TLS in plain HTTP' "$W/daemon.log" || true)
[ "$fallbacks" = 1 ] || fail "the daemon's log names the fall back to plain HTTP $fallbacks times, not once"

cat >"$W/manifests/pause.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: pause}
spec:
  restartPolicy: Never
  containers:
  - name: pause
    image: $IMAGE
    imagePullPolicy: Always
EOF
wait_running pause
echo "fake registry: a pod of $IMAGE (imagePullPolicy Always) is Running"
echo "fake registry: ok"
