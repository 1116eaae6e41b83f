# shellcheck shell=bash
# 50-devices: default device confinement on cgroup v2 (podhost's own eBPF device program
# on the container's cgroup). Inside a busybox container mknod works for any device, but
# the console (5:1), /dev/kmsg (1:11), tun (10:200), /dev/mem (1:1) and a block device
# of the guest cannot be opened (EPERM); null, zero, full, random and urandom work; /dev
# holds exactly the default set; `podhost exec` is confined too; the shim reports how long
# loading and attaching the program took.

# A block device that exists in the guest (the loop driver gives loop0..7).
modprobe loop 2>/dev/null || true
blk=""
for b in /sys/class/block/*; do
  [ -e "$b/dev" ] && { blk=$b; break; }
done
[ -n "$blk" ] || fail "no block device in the guest (/sys/class/block is empty; is loop in the initramfs?)"
IFS=: read -r blk_major blk_minor <"$blk/dev"
info "guest block device ${blk##*/} $blk_major:$blk_minor"

apply_manifest devices.yaml <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: devices
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      for d in "console c 5 1 w" "kmsg c 1 11 r" "tun c 10 200 r" "mem c 1 1 r" "blk b $blk_major $blk_minor r"; do
        set -- \$d
        if mknod "/tmp/\$1" "\$2" "\$3" "\$4" 2>/dev/null; then echo "mknod \$1 ok"; else echo "mknod \$1 denied"; fi
        if [ "\$5" = w ]; then (exec 3>"/tmp/\$1") 2>/tmp/err; else (exec 3<"/tmp/\$1") 2>/tmp/err; fi &&
          echo "open \$1 ok" || echo "open \$1 denied: \$(cat /tmp/err)"
      done
      echo x >/dev/null && echo "null ok"
      for d in zero urandom random full; do echo "\$d \$(head -c 4 /dev/\$d | wc -c)"; done
      echo "dev \$(ls -A /dev | tr '\n' ' ')"
      [ -L /dev/kcore ] && echo "kcore \$(head -c 16 /dev/kcore 2>/dev/null | wc -c)"
      echo "nodes \$(find /dev -type c -o -type b | sort | tr '\n' ' ')"
      echo done
      trap 'exit 0' TERM; while :; do sleep 1 & wait \$!; done
YAML
pod=devices-$NODE
wait_phase "$pod" Running 60
wait_running "$pod" main 30
uid=$(pod_uid "$pod")
log=$PODHOST_LOGS/default_${pod}_${uid}/main/0.log
report() { sed -n 's/^[^ ]* stdout [FP] //p' "$log" 2>/dev/null; }
report_done() { report | grep -qx done; }
wait_until 30 "the probe's report in $log" report_done
lines=$(report)
info "$lines"
line() { printf '%s\n' "$lines" | grep -m1 "^$1" || true; }

problems=()
for dev in console kmsg tun mem blk; do
  [ "$(line "mknod $dev ")" = "mknod $dev ok" ] || problems+=("mknod $dev: '$(line "mknod $dev ")'")
  case "$(line "open $dev ")" in
    "open $dev denied"*"Operation not permitted"*) ;;
    *) problems+=("$dev must be refused with EPERM: '$(line "open $dev ")'") ;;
  esac
done
[ "$(line 'null ')" = "null ok" ] || problems+=("/dev/null: '$(line 'null ')'")
for d in zero urandom random full; do
  [ "$(line "$d ")" = "$d 4" ] || problems+=("/dev/$d: '$(line "$d ")'")
done
# libcontainer also links /dev/kcore to /proc/kcore when the host has it (as runc links
# /dev/core); /proc/kcore itself is masked, so the link reads nothing.
kcore=""
[ -e /proc/kcore ] && kcore="kcore "
[ "$(line 'dev ')" = "dev fd full ${kcore}mqueue null ptmx pts random shm stderr stdin stdout termination-log tty urandom zero " ] ||
  problems+=("ls /dev: '$(line 'dev ')'")
if [ -n "$kcore" ]; then
  [ "$(line 'kcore ')" = "kcore 0" ] || problems+=("/dev/kcore is readable: '$(line 'kcore ')'")
fi
[ "$(line 'nodes ')" = "nodes /dev/full /dev/null /dev/pts/ptmx /dev/random /dev/tty /dev/urandom /dev/zero " ] ||
  problems+=("device nodes: '$(line 'nodes ')'")

out=$(podhost_cli exec "$pod" -c main -- sh -c 'cat /tmp/kmsg >/dev/null 2>&1 && echo exec-kmsg-open || echo exec-kmsg-denied' 2>&1)
[ "$out" = exec-kmsg-denied ] || problems+=("podhost exec opened /dev/kmsg: '$out'")

# The shim's record of the confinement: an eBPF program on the container's cgroup v2.
shim_log=$(attempt_dir "$pod" main)/shim.log
applied=$(grep -m1 'device rules applied' "$shim_log" || true)
info "shim: ${applied:-no 'device rules applied' line}"
case "$applied" in
  *CgroupV2*) ;;
  *) problems+=("the shim did not attach a cgroup v2 device program: '${applied}'") ;;
esac

delete_manifest devices.yaml
wait_pod_gone "$pod" 60

if [ "${#problems[@]}" -gt 0 ]; then
  fail "$(printf '%s; ' "${problems[@]}")"
fi
