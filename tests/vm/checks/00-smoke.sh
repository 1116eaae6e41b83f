# shellcheck shell=bash
# 00-smoke: podhost on a pure cgroup v2 kernel. The daemon does not fall back to degraded
# mode; a busybox pod reaches Running; `podhost exec` works; the container's init lives
# in a real cgroup v2 directory below the daemon's; deleting the manifest removes the pod,
# the container's cgroup and the pod's cgroup.

problems=()

# The daemon's view of the host: pure v2, so no degraded-mode warning. (Asserted at the
# end, so that the rest of the check still runs and reports.)
if daemon_log_has 'degraded mode'; then
  info "daemon log reports degraded mode:"
  grep 'degraded mode' "$DAEMON_LOG" | sed 's/^/  /'
  problems+=("the daemon runs in degraded mode on a pure cgroup v2 kernel")
fi

apply_manifest smoke.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: smoke
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo smoke up; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
YAML
pod=smoke-$NODE
wait_phase "$pod" Running 60
wait_running "$pod" main 30
info "pod $pod Running (uid $(pod_uid "$pod"))"

out=$(podhost_cli exec "$pod" -c main -- sh -c 'echo exec-ok; hostname' 2>&1) ||
  fail "podhost exec failed: $out"
assert_eq "podhost exec output" "exec-ok
$pod" "$out"

pid=$(container_pid "$pod" main)
[ -n "$pid" ] || fail "no init_pid in $(attempt_dir "$pod" main)/started.json"
[ -d "/proc/$pid" ] || fail "container init pid $pid is not running"
cg=$(cgroup_of "$pid")
dir=$(cgroup_dir "$pid")
info "container init pid $pid, cgroup $cg"
case "$cg" in
  /*/*) ;;
  *) fail "container cgroup '$cg' is not a cgroup below the root" ;;
esac
[ -d "$dir" ] || fail "container cgroup $dir does not exist"
grep -qx "$pid" "$dir/cgroup.procs" || fail "pid $pid not listed in $dir/cgroup.procs"
daemon_cg=$(cgroup_of "$DAEMON_PID")
info "daemon cgroup $daemon_cg"
# Below the daemon's own cgroup, or below its parent when the daemon sits in a leaf of
# its own (design: <own>/daemon next to <own>/kubepods); never elsewhere.
own=${daemon_cg%/}
[ "${own##*/}" = daemon ] && own=${own%/daemon}
[ "${cg#"$own"/}" != "$cg" ] || problems+=("container cgroup $cg is not below the daemon's cgroup subtree $own")
# The pod's cgroup: the container cgroup's parent (…/pod<uid>/<container>).
pod_dir=$(dirname "$dir")
info "cgroup.controllers of the container cgroup: $(cat "$dir/cgroup.controllers")"
# The chain from the root down: which controllers each level hands to its children.
p=/sys/fs/cgroup
for part in ${cg//\// }; do
  info "  subtree_control of ${p#/sys/fs/cgroup}/: $(cat "$p/cgroup.subtree_control") (type $(cat "$p/cgroup.type" 2>/dev/null || echo root))"
  p=$p/$part
done
[ "$daemon_cg" = / ] ||
  info "cgroup.procs of the daemon's cgroup: $(tr '\n' ' ' <"/sys/fs/cgroup${daemon_cg%/}/cgroup.procs")"

delete_manifest smoke.yaml
wait_pod_gone "$pod" 60
kill -0 "$pid" 2>/dev/null && problems+=("container init $pid still runs after its pod was removed")
# The shim removes the container cgroup as it exits; the pod cgroup follows.
deadline=$(($(date +%s) + 15))
while { [ -e "$dir" ] || [ -e "$pod_dir" ]; } && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.25; done
[ -e "$dir" ] && problems+=("container cgroup $dir still exists after the pod was removed")
[ -e "$pod_dir" ] && problems+=("pod cgroup $pod_dir still exists after the pod was removed")

if [ "${#problems[@]}" -gt 0 ]; then
  fail "$(printf '%s; ' "${problems[@]}")"
fi
