# 80-memory-emptydir: a Memory emptyDir is a tmpfs whose pages are charged to the memory
# cgroup of the container that writes them: 40 MiB written show up as shmem in its
# memory.stat, and with a 64Mi limit, writing 100 MiB more ends either in an OOM kill or
# in ENOSPC at the tmpfs size (min(sizeLimit, pod limit) = 64Mi); the check says which.

apply_manifest memvol.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: memvol
spec:
  restartPolicy: Never
  volumes:
  - name: mem
    emptyDir: {medium: Memory}
  containers:
  - name: writer
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "dd if=/dev/zero of=/mem/a bs=1M count=40 2>/dev/null && echo wrote40; while [ ! -e /mem/go ]; do sleep 0.2; done; dd if=/dev/zero of=/mem/b bs=1M count=100; echo dd-exit=$?; sleep 3600"]
    resources:
      limits: {memory: 64Mi}
    volumeMounts:
    - {name: mem, mountPath: /mem}
YAML
pod=memvol-$NODE
wait_running "$pod" writer 90
wrote40() { podhost_cli logs "$pod" -c writer 2>/dev/null | grep -qx wrote40; }
wait_until 60 "40 MiB written to the tmpfs" wrote40
uid=$(pod_uid "$pod")
vol=$PODHOST_ROOT/pods/$uid/volumes/empty-dir/mem
grep -q " $vol tmpfs " /proc/mounts || fail "no tmpfs at $vol"
opts=$(grep " $vol tmpfs " /proc/mounts | cut -d' ' -f4)
info "tmpfs options: $opts"
case "$opts" in *size=65536k*) ;; *) fail "tmpfs not sized at the pod's 64Mi limit: $opts" ;; esac
pid=$(container_pid "$pod" writer)
cg=$(cgroup_dir "$pid")
shmem=$(sed -n 's/^shmem //p' "$cg/memory.stat")
info "writer's cgroup: shmem=$shmem memory.current=$(cat "$cg/memory.current")"
[ "$shmem" -ge $((40 << 20)) ] || fail "40 MiB in the tmpfs are not charged to the writer's cgroup (shmem=$shmem)"
touch "$vol/go"
outcome() {
  st=$(container_status "$pod" writer)
  if [ "$(value state.terminated.reason "$st")" = OOMKilled ]; then
    echo OOMKilled
  elif podhost_cli logs "$pod" -c writer 2>/dev/null | grep -q '^dd-exit=[1-9]'; then
    echo ENOSPC
  else
    return 1
  fi
}
wait_until 90 "the 100 MiB write to end" outcome
result=$(outcome)
info "100 MiB into a Memory emptyDir under a 64Mi limit: $result"
podhost_cli logs "$pod" -c writer 2>/dev/null | tail -3
delete_manifest memvol.yaml
wait_pod_gone "$pod" 60
grep -q " $vol " /proc/mounts && fail "the tmpfs is still mounted after the pod went"
[ ! -e "$PODHOST_ROOT/pods/$uid" ] || fail "the pod dir is still there"
true
