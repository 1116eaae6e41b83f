# shellcheck shell=bash
# 65-userns: hostUsers: false on the VM's kernel: each pod's container root is host ID
# <base> of its own block of 65536 (uid_map "0 <base> 65536"), root inside, the
# image's files root's inside (idmapped snapshots, or chowned copies where the kernel
# or the root dir's filesystem has no idmapped mounts: the shim log says which), the
# pod's shm its root's; two pods get different blocks, and a block is released with
# its pod (blocks.json).

probe='echo "uidmap=$(tr -s " " < /proc/self/uid_map | sed "s/^ //")"
echo "id=$(id -u):$(id -g)"
echo "binowner=$(stat -c %u:%g /bin/busybox)"
if touch /probe && chown 1000:1000 /probe; then echo write=ok; else echo write=no; fi
echo "shmowner=$(stat -c %u:%g /dev/shm)"
echo done; exec sleep 1000'
probe_json=$(printf '%s' "$probe" | json_string)
# This check's own logs_done: one container, and a failure when it never finishes.
logs_done() {
  local out i
  for i in $(seq 1 160); do
    out=$(podhost_cli logs "$1" -c main 2>/dev/null)
    if printf '%s\n' "$out" | grep -qx done; then
      printf '%s\n' "$out"
      return 0
    fi
    sleep 0.25
  done
  shim_log_tail "$1" main >&2
  fail "$1 never printed done: $out"
}

for p in una unb; do
  apply_manifest "$p.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $p
spec:
  hostUsers: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", $probe_json]
YAML
done

bases=()
for p in una unb; do
  logs=$(logs_done "$p-$NODE")
  map=$(value uidmap "$logs")
  set -- $map
  [ "$1" = 0 ] && [ "$3" = 65536 ] || fail "$p: uid_map '$map'"
  base=$2
  [ $((base % 65536)) = 0 ] && [ "$base" -ge 65536 ] || fail "$p: base $base"
  bases+=("$base")
  assert_eq "$p id inside" 0:0 "$(value id "$logs")"
  assert_eq "$p image files owned by root inside" 0:0 "$(value binowner "$logs")"
  assert_eq "$p root writes its rootfs" ok "$(value write "$logs")"
  assert_eq "$p shm owner" 0:0 "$(value shmowner "$logs")"
  pid=$(container_pid "$p-$NODE" main)
  host_uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
  assert_eq "$p host uid of the container's root" "$base" "$host_uid"
  # podhost exec joins the pod's user namespace (libcontainer 0.7's exec alone does not).
  exec_map=$(podhost_cli exec "$p-$NODE" -c main -- sh -c 'tr -s " " < /proc/self/uid_map | sed "s/^ //"') \
    || fail "$p: podhost exec failed"
  assert_eq "$p uid_map of an exec'd process" "$map" "$exec_map"
  way=$(grep -o 'way=[A-Za-z]*' "$(attempt_dir "$p-$NODE" main)/shim.log" | head -1)
  info "ok: $p uid_map '$map', host uid $host_uid, rootfs $way ($(uname -r), root dir on $(stat -f -c %T "$PODHOST_ROOT"))"
done
[ "${bases[0]}" != "${bases[1]}" ] || fail "both pods got block ${bases[0]}"

uid_a=$(pod_uid "una-$NODE")
grep -q "\"$uid_a\"" "$PODHOST_ROOT/userns/blocks.json" || fail "no block recorded for una"
delete_manifest una.yaml
wait_pod_gone "una-$NODE" 60
if grep -q "\"$uid_a\"" "$PODHOST_ROOT/userns/blocks.json"; then
  fail "una's block not released: $(cat "$PODHOST_ROOT/userns/blocks.json")"
fi
info "ok: una's block ${bases[0]} released"
delete_manifest unb.yaml
wait_pod_gone "unb-$NODE" 60
