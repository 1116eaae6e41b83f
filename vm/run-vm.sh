#!/usr/bin/env bash
# Boots podhost's test VM, runs one command from a host directory inside it and exits
# with that command's status. The guest's console (the command's output) streams to
# stdout as it comes.
#
# usage: vm/run-vm.sh SHARE_DIR CMD
#   SHARE_DIR  host directory the guest mounts read-write over 9p at /mnt/host (also cwd)
#   CMD        executable inside SHARE_DIR, relative path (e.g. suite/run.sh)
# Env:
#   INITRD   initramfs (default: target/vm/initramfs.cpio.gz)
#   KERNEL   vmlinux (PVH direct boot) or a bzImage (default: vmlinux next to INITRD)
#   ACCEL    auto|kvm|tcg; auto = kvm only when the CPU shows vmx/svm (a /dev/kvm without
#            them, e.g. kvm_pvm, cannot run a stock kernel at a usable speed) (default auto)
#   SMP (2)  MEM (MiB, 1024)  TIMEOUT (whole run in s, 600; the guest stops its command
#            45 s earlier so that the partial results still reach the share)
#   VERBOSE=1 (kernel messages on the console)  APPEND (more kernel command line)
#   QEMU_EXTRA (more qemu arguments)
# Exit: CMD's status; 124 when TIMEOUT was hit; 125 when the guest died without
#       reporting a status (kernel panic, qemu failure).
set -uo pipefail

if [ "$#" -ne 2 ]; then
  echo "usage: $0 SHARE_DIR CMD" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=$(cd "$1" && pwd) || exit 2
CMD=$2
[ -x "$SHARE/$CMD" ] || {
  echo "run-vm: $SHARE/$CMD is not an executable file" >&2
  exit 2
}
INITRD=${INITRD:-$HERE/../target/vm/initramfs.cpio.gz}
KERNEL=${KERNEL:-$(dirname "$INITRD")/vmlinux}
for f in "$INITRD" "$KERNEL"; do
  [ -s "$f" ] || {
    echo "run-vm: $f missing (vm/build-initramfs.sh builds it)" >&2
    exit 2
  }
done
TIMEOUT=${TIMEOUT:-600}
GUEST_TIMEOUT=$((TIMEOUT > 90 ? TIMEOUT - 45 : TIMEOUT * 3 / 4))

ACCEL=${ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  if [ -w /dev/kvm ] && [ "$(grep -cwE 'vmx|svm' /proc/cpuinfo)" -gt 0 ]; then ACCEL=kvm; fi
fi
case "$ACCEL" in
  kvm) accel_args=(-accel kvm -cpu host) ;;
  tcg) accel_args=(-accel "tcg,thread=multi" -cpu max) ;;
  *)
    echo "run-vm: ACCEL must be auto, kvm or tcg" >&2
    exit 2
    ;;
esac

RCFILE=.podvm-rc.$$
rm -f "$SHARE/$RCFILE"
append="console=ttyS0 panic=-1 podvm.cmd=$CMD podvm.rc=$RCFILE podvm.timeout=$GUEST_TIMEOUT"
if [ -n "${VERBOSE:-}" ]; then append+=" podvm.verbose=1"; else append+=" quiet"; fi
append+=" ${APPEND:-}"

t0=${EPOCHREALTIME/./}
secs() { local now=${EPOCHREALTIME/./}; printf '%d.%02d' $(((now - t0) / 1000000)) $(((now - t0) / 10000 % 100)); }

printf 'run-vm: accel=%s smp=%s mem=%sM kernel=%s timeout=%ss\n' "$ACCEL" "${SMP:-2}" "${MEM:-1024}" "$(basename "$KERNEL")" "$TIMEOUT" >&2
# -no-reboot + panic=-1: a kernel panic ends qemu instead of looping. -nodefaults and the
# sercon-port fw_cfg keep SeaBIOS and the VGA/network defaults off the serial line.
# shellcheck disable=SC2086
timeout --foreground -k 10 "$TIMEOUT" \
  qemu-system-x86_64 "${accel_args[@]}" -m "${MEM:-1024}" -smp "${SMP:-2}" \
  -nographic -no-reboot -nodefaults -no-user-config -serial stdio \
  -kernel "$KERNEL" -initrd "$INITRD" -append "$append" \
  -fw_cfg name=etc/sercon-port,string=0 \
  -virtfs "local,path=$SHARE,mount_tag=host,security_model=passthrough,id=host" \
  ${QEMU_EXTRA:-} </dev/null 2> >(grep --line-buffered -v 'sercon-port' >&2) |
  while IFS= read -r line; do
    line=${line%$'\r'}
    case "$line" in
      VM-START*) printf '%s (host: %s s after qemu start)\n' "$line" "$(secs)" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
qrc=${PIPESTATUS[0]}
printf 'run-vm: qemu exited with %s after %s s\n' "$qrc" "$(secs)" >&2

if [ -f "$SHARE/$RCFILE" ]; then
  rc=$(cat "$SHARE/$RCFILE")
  rm -f "$SHARE/$RCFILE"
  case "$rc" in '' | *[!0-9]*) exit 125 ;; esac
  exit "$rc"
fi
case "$qrc" in 124 | 137) exit 124 ;; esac
exit 125
