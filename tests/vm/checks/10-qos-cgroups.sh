# 10-qos-cgroups: the kubelet's cgroup v2 layout and values (kubelet-semantics §8) for a
# Guaranteed, a Burstable and a BestEffort pod: QoS class, pod and container cgroup paths
# under the daemon's subtree, cpu.max / cpu.weight / memory.max / memory.oom.group /
# memory.swap.max / pids.max, the QoS cgroups' weights, and removal of the pod cgroups.
# cpu.weight uses libcontainer's shares→weight mapping (1024 → 100) at every level.

pod_manifest() { # name resources-yaml
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; echo up; while :; do sleep 1 & wait \$!; done"]
$2
YAML
}
pod_manifest qg "    resources:
      limits: {cpu: 500m, memory: 64Mi}" | apply_manifest qg.yaml
pod_manifest qb "    resources:
      requests: {cpu: 250m, memory: 32Mi}
      limits: {cpu: '1', memory: 64Mi}" | apply_manifest qb.yaml
pod_manifest qbe "" | apply_manifest qbe.yaml
for p in qg qb qbe; do wait_phase "$p-$NODE" Running 90; done

assert_eq "qosClass of qg" Guaranteed "$(pod_field "qg-$NODE" status.qosClass)"
assert_eq "qosClass of qb" Burstable "$(pod_field "qb-$NODE" status.qosClass)"
assert_eq "qosClass of qbe" BestEffort "$(pod_field "qbe-$NODE" status.qosClass)"

daemon_cg=$(cgroup_of "$DAEMON_PID")
if [ "$daemon_cg" = / ]; then
  root= # started in the root cgroup (DAEMON_CGROUP=/), which may hold processes
else
  root=${daemon_cg%/daemon}
  assert_eq "the daemon sits in its own leaf" "$root/daemon" "$daemon_cg"
fi
info "daemon cgroup $daemon_cg, podhost root '$root'"
kp=/sys/fs/cgroup$root/kubepods

check_container() { # pod qos-dir cpu.max cpu.weight memory.max
  local pod=$1-$NODE uid pid cg dir want
  uid=$(pod_uid "$pod")
  pid=$(container_pid "$pod" main)
  cg=$(cgroup_of "$pid")
  want="$root/kubepods${2:+/$2}/pod$uid/main"
  assert_eq "$pod container cgroup" "$want" "$cg"
  dir=/sys/fs/cgroup$cg
  assert_eq "$pod cpu.max" "$3" "$(cat "$dir/cpu.max")"
  assert_eq "$pod cpu.weight" "$4" "$(cat "$dir/cpu.weight")"
  assert_eq "$pod memory.max" "$5" "$(cat "$dir/memory.max")"
  assert_eq "$pod memory.oom.group" 1 "$(cat "$dir/memory.oom.group")"
  assert_eq "$pod memory.swap.max" 0 "$(cat "$dir/memory.swap.max")"
  assert_eq "$pod pids.max" "$PODS_PIDS_LIMIT" "$(cat "$dir/pids.max")"
  info "$pod: $cg cpu.max=$(cat "$dir/cpu.max") cpu.weight=$(cat "$dir/cpu.weight") memory.max=$(cat "$dir/memory.max")"
}
# Guaranteed: 500m → shares 512 → weight 59, quota 50000; 64Mi.
check_container qg "" "50000 100000" 59 67108864
# Burstable: request 250m → shares 256 → weight 35; limit 1 CPU → quota 100000; 64Mi.
check_container qb burstable "100000 100000" 35 67108864
# BestEffort: shares 2 → weight 1, no limits.
check_container qbe besteffort "max 100000" 1 max

check_pod() { # pod qos-dir cpu.max cpu.weight memory.max
  local dir
  dir=$kp${2:+/$2}/pod$(pod_uid "$1-$NODE")
  [ -d "$dir" ] || fail "pod cgroup $dir missing"
  assert_eq "$1 pod cpu.max" "$3" "$(cat "$dir/cpu.max")"
  assert_eq "$1 pod cpu.weight" "$4" "$(cat "$dir/cpu.weight")"
  assert_eq "$1 pod memory.max" "$5" "$(cat "$dir/memory.max")"
  if [ -n "${PODS_PIDS_LIMIT:-}" ]; then
    assert_eq "$1 pod pids.max" "$PODS_PIDS_LIMIT" "$(cat "$dir/pids.max")"
  fi
}
check_pod qg "" "50000 100000" 59 67108864
check_pod qb burstable "100000 100000" 35 67108864
check_pod qbe besteffort "max 100000" 1 max
assert_eq "besteffort QoS cpu.weight" 1 "$(cat "$kp/besteffort/cpu.weight")"
assert_eq "burstable QoS cpu.weight (Σ requests 250m)" 35 "$(cat "$kp/burstable/cpu.weight")"

# The shims live in their own leaf.
shim=$(json_flat <"$(attempt_dir "qg-$NODE" main)/started.json" | sed -n 's/^shim_pid=//p')
assert_eq "shim cgroup" "$root/shims" "$(cgroup_of "$shim")"

# Removal removes the pod cgroups; nothing is left behind.
dirs="$kp/pod$(pod_uid "qg-$NODE") $kp/burstable/pod$(pod_uid "qb-$NODE") $kp/besteffort/pod$(pod_uid "qbe-$NODE")"
delete_manifest qg.yaml
delete_manifest qb.yaml
delete_manifest qbe.yaml
for p in qg qb qbe; do wait_pod_gone "$p-$NODE" 60; done
for d in $dirs; do
  [ -e "$d" ] && fail "pod cgroup $d left behind after the pod was removed"
done
assert_eq "burstable QoS cpu.weight with no Burstable pods" 1 "$(cat "$kp/burstable/cpu.weight")"
true
