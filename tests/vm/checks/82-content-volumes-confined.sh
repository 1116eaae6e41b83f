# 82-content-volumes-confined: configMap and downwardAPI volumes are read-only in the
# container whatever the mount says (readOnly: false, or nothing): a write gets EROFS, as
# the kubelet's mustMountRO (CVE-2017-1002102) has it. Their tmpfs, and a Memory
# emptyDir's, is bounded as the kubelet bounds memory-backed volumes: the pod's memory
# limit, else the node's allocatable memory (capacity less the 100Mi hard eviction
# threshold) — never the kernel's default of half the RAM. Filling proves the bounds:
# root writing into the content tmpfs stops with ENOSPC at the pod's limit, and a
# container's dd into its Memory emptyDir ends (ENOSPC or an OOM kill) with no more than
# the limit written.

# The VM's daemon has no --config-dir: the configMap is optional and absent, so its
# volume is an empty tmpfs (still mounted, still read-only).
volumes='  volumes:
  - name: cfg
    configMap: {name: absent, optional: true}
  - name: info
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
  - name: mem
    emptyDir: {medium: Memory}'
mounts='    volumeMounts:
    - {name: cfg, mountPath: /cfg, readOnly: false}
    - {name: info, mountPath: /info}
    - {name: mem, mountPath: /mem}'
apply_manifest confined.yaml <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: confined
  labels: {app: confined}
spec:
  restartPolicy: Never
$volumes
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while [ ! -e /mem/go ]; do sleep 0.2; done; dd if=/dev/zero of=/mem/fill bs=1M count=200; echo dd-exit=\$?; sleep 3600"]
    resources:
      limits: {memory: 48Mi}
$mounts
YAML
apply_manifest besteffort.yaml <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: besteffort
spec:
  restartPolicy: Never
$volumes
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
$mounts
YAML
pod=confined-$NODE
be=besteffort-$NODE
wait_running "$pod" main 90
wait_running "$be" main 90
problems=()

# ---- read-only whatever the mount says ------------------------------------------------
for target in /cfg/new /info/labels /info/..data/labels; do
  out=$(podhost_cli exec "$pod" -c main -- sh -c "echo x > $target && echo WROTE" 2>&1)
  info "write $target: $out"
  case "$out" in
  *"Read-only file system"*) ;;
  *) problems+=("a write to $target was not refused with EROFS: $out") ;;
  esac
done
check "the daemon's downwardAPI file, readable" 'app="confined"' \
  "$(podhost_cli exec "$pod" -c main -- cat /info/labels 2>&1)"
for dest in /cfg /info; do
  opts=$(podhost_cli exec "$pod" -c main -- cat /proc/mounts | awk -v d="$dest" '$2 == d {print $4}')
  info "$dest in the container: $opts"
  check "$dest mounted" ro "${opts%%,*}"
done

# ---- tmpfs sizes -----------------------------------------------------------------------
# size= in the host's /proc/mounts, in KiB (tmpfs rounds up to whole pages).
tmpfs_kib() { awk -v d="$1" '$2 == d && $3 == "tmpfs" {n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] ~ /^size=/) {sub(/^size=/, "", o[i]); sub(/k$/, "", o[i]); print o[i]}}' /proc/mounts; }
mem_kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo)
allocatable_kib=$(((mem_kib - 102400 + 3) / 4 * 4))
info "node: MemTotal ${mem_kib} KiB, allocatable ${allocatable_kib} KiB, the kernel's default $((mem_kib / 2)) KiB"
uid=$(pod_uid "$pod")
be_uid=$(pod_uid "$be")
for v in content/cfg content/info empty-dir/mem; do
  check "$v of the 48Mi pod (KiB)" 49152 "$(tmpfs_kib "$PODHOST_ROOT/pods/$uid/volumes/$v")"
  check "$v of the BestEffort pod: node allocatable (KiB)" "$allocatable_kib" \
    "$(tmpfs_kib "$PODHOST_ROOT/pods/$be_uid/volumes/$v")"
done

# ---- filling ---------------------------------------------------------------------------
# Root, on the host, writes into the limited pod's content tmpfs as the daemon would:
# ENOSPC at the pod's limit.
cfg=$PODHOST_ROOT/pods/$uid/volumes/content/cfg
dd_err=/tmp/82-dd.err
if dd if=/dev/zero of="$cfg/fill" bs=1M count=200 2>"$dd_err"; then
  problems+=("200 MiB fitted into the content tmpfs of a 48Mi pod")
fi
grep -q 'No space left on device' "$dd_err" || problems+=("the host's dd did not end in ENOSPC: $(cat "$dd_err")")
written=$(stat -c %s "$cfg/fill")
info "root wrote $written bytes into the content tmpfs (limit $((48 << 20)))"
[ "$written" -le $((48 << 20)) ] || problems+=("$written bytes in a 48Mi content tmpfs")
rm -f "$cfg/fill" "$dd_err"

# The container fills its Memory emptyDir: it ends in ENOSPC or an OOM kill, with at
# most the pod's limit written.
touch "$PODHOST_ROOT/pods/$uid/volumes/empty-dir/mem/go"
outcome() {
  st=$(container_status "$pod" main)
  if [ "$(value state.terminated.reason "$st")" = OOMKilled ]; then
    echo OOMKilled
  elif podhost_cli logs "$pod" -c main 2>/dev/null | grep -q '^dd-exit=[1-9]'; then
    echo ENOSPC
  else
    return 1
  fi
}
wait_until 90 "the container's 200 MiB write to end" outcome
written=$(stat -c %s "$PODHOST_ROOT/pods/$uid/volumes/empty-dir/mem/fill")
info "the container's dd: $(outcome), $written bytes in its Memory emptyDir (limit $((48 << 20)))"
[ "$written" -le $((48 << 20)) ] || problems+=("$written bytes in the Memory emptyDir of a 48Mi pod")

delete_manifest confined.yaml
delete_manifest besteffort.yaml
wait_pod_gone "$pod" 60
wait_pod_gone "$be" 60
[ "${#problems[@]}" -eq 0 ] || fail "${problems[*]}"
true
