# shellcheck shell=bash
# 75-shim-kill: a shim killed with SIGKILL leaves no orphan on a cgroup v2 kernel. The
# container shares the pod's pid namespace (shareProcessNamespace), so killing its init
# alone would leave its background children running: the daemon must kill them through
# the container's cgroup (cgroup.kill), report the attempt as ContainerStatusUnknown with
# exit code 137, and restart it under the restart policy.

apply_manifest shimkill.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: shimkill
spec:
  shareProcessNamespace: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 1001 & sleep 1002 & wait"]
YAML
pod=shimkill-$NODE
wait_running "$pod" main 60
dir=$(attempt_dir "$pod" main)
shim=$(json_flat <"$dir/started.json" | sed -n 's/^shim_pid=//p')
init=$(container_pid "$pod" main)
cg=$(cgroup_dir "$init")
children=
for c in /proc/[0-9]*/cmdline; do
  case "$(tr '\0' ' ' <"$c" 2>/dev/null)" in
    "sleep 1001 " | "sleep 1002 ") p=${c#/proc/}; children="$children ${p%/cmdline}" ;;
  esac
done
info "shim $shim, init $init, children $children, cgroup $cg"
[ -n "$children" ] || fail "the container's children are not running"
kill -9 "$shim"
restarted() { [ "$(value restartCount "$(container_status "$pod" main)")" = 1 ]; }
wait_until 30 "a restart after the shim's death" restarted
st=$(container_status "$pod" main)
assert_eq "lastState reason" ContainerStatusUnknown "$(value lastState.terminated.reason "$st")"
assert_eq "lastState exit code" 137 "$(value lastState.terminated.exitCode "$st")"
info "message: $(value lastState.terminated.message "$st")"
for p in $init $children; do
  if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status"; then
    fail "process $p of the lost container still runs"
  fi
done
daemon_log_has 'reaped a container whose shim is gone' || fail "no reap in the daemon log"
wait_running "$pod" main 30
delete_manifest shimkill.yaml
wait_pod_gone "$pod" 60
[ ! -d "$cg" ] || fail "the container's cgroup $cg is left behind"
