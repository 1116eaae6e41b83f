#!/usr/bin/env bash
# Builds the initramfs of podhost's test VM and extracts a PVH-bootable vmlinux.
#
# usage: vm/build-initramfs.sh KROOT OUTDIR
#   KROOT   a Debian kernel package unpacked with `dpkg-deb -x` (or / for the host's own
#           installed kernel): has boot/vmlinuz-KVER and lib/modules/KVER/
#   OUTDIR  receives initramfs.cpio.gz, vmlinux (kept while the kernel is unchanged) and
#           kernel.version
# Env:
#   KVER        kernel version (default: the newest KROOT/boot/vmlinuz-*)
#   LIBS_FOR    binaries whose shared libraries (ldd) go into the image, not the binaries
#               themselves (podhost lives on the 9p share so that a rebuild needs no new
#               initramfs)
#   EXTRA_BINS  host binaries copied in with their libraries (into /usr/local/bin)
#   BOOT_MODS   modules /init loads at boot (default: virtio_pci 9pnet_virtio 9p overlay)
#   EXTRA_MODS  more modules copied in; the kernel loads them on demand through busybox
#               modprobe (default: veth bridge br_netfilter dummy loop)
# Needs: busybox-static, kmod (depmod, modprobe), cpio, gzip, xz-utils. ~1 s.
set -euo pipefail

if [ "$#" -ne 2 ]; then
  echo "usage: $0 KROOT OUTDIR" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
KROOT=$(cd "$1" && pwd)
KROOT=${KROOT%/} # "" for the host's /
mkdir -p "$2"
OUTDIR=$(cd "$2" && pwd)
log() { printf 'build-initramfs: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

if [ -z "${KVER:-}" ]; then
  KVER=$(find "$KROOT/boot/" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V | tail -1)
fi
[ -n "$KVER" ] || die "no $KROOT/boot/vmlinuz-*"
VMLINUZ=$KROOT/boot/vmlinuz-$KVER
MODDIR=$KROOT/lib/modules/$KVER
[ -d "$MODDIR" ] || die "no $MODDIR"
# An unpacked (not installed) package never ran its postinst: no modules.dep yet.
[ -s "$MODDIR/modules.dep" ] || depmod -b "${KROOT:-/}" "$KVER"

BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing: apt-get install busybox-static"
if ldd "$BUSYBOX" >/dev/null 2>&1; then die "$BUSYBOX is dynamically linked: apt-get install busybox-static"; fi

BOOT_MODS=${BOOT_MODS:-virtio_pci 9pnet_virtio 9p overlay}
EXTRA_MODS=${EXTRA_MODS-veth bridge br_netfilter dummy loop}

# Relative paths are taken from the caller's directory.
abs_list() { for f in "$@"; do realpath -m -- "$f"; done | tr '\n' ' '; }
# shellcheck disable=SC2086
LIBS_FOR=$(abs_list ${LIBS_FOR:-})
# shellcheck disable=SC2086
EXTRA_BINS=$(abs_list ${EXTRA_BINS:-})

STAGE=$(mktemp -d /tmp/podhost-initramfs.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
cd "$STAGE"
mkdir -p bin sbin usr/bin usr/sbin usr/local/bin etc root proc sys dev tmp run mnt/host \
  lib/x86_64-linux-gnu lib64 "lib/modules/$KVER"

# ---- busybox and its applets (only where nothing else is installed) -----------------
cp "$BUSYBOX" bin/busybox
"$BUSYBOX" --list-full | while read -r applet; do
  [ -e "$applet" ] || [ -L "$applet" ] || ln -s /bin/busybox "$applet"
done

# ---- host binaries and shared libraries -----------------------------------------------
# copy_libs BIN: every library ldd resolves, at the same path (the loader included).
copy_libs() {
  ldd "$1" 2>/dev/null | grep -oE '/[^ )]+' | while read -r lib; do
    [ -e "${lib#/}" ] || install -D -m 0755 "$(readlink -f "$lib")" "${lib#/}"
  done
}
copy_bin() { # copy_bin HOSTPATH [DEST]
  install -D -m 0755 "$(readlink -f "$1")" "${2:-usr/local/bin/$(basename "$1")}"
  copy_libs "$1"
}
# busybox ash prefers its own applets over PATH (FEATURE_SH_STANDALONE) and lacks some
# bash-isms the suite uses; the host's dash is /bin/sh and bash is /bin/bash.
rm -f bin/sh bin/bash
copy_bin /bin/dash bin/dash
ln -s dash bin/sh
copy_bin /bin/bash bin/bash
for b in ${EXTRA_BINS:-}; do
  [ -e "$b" ] || die "EXTRA_BINS: $b missing"
  copy_bin "$b"
done
for b in ${LIBS_FOR:-}; do
  [ -e "$b" ] || die "LIBS_FOR: $b missing"
  copy_libs "$b"
done
# Name resolution of uid 0 (ls -l, id) and a sane hosts file.
printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >etc/passwd
printf 'root:x:0:\nnogroup:x:65534:\n' >etc/group
printf '127.0.0.1 localhost vm\n::1 localhost\n' >etc/hosts

# ---- kernel modules -------------------------------------------------------------------
# modprobe --show-depends resolves dependencies and softdeps on the host, in load order.
MODPROBE=(modprobe -d "${KROOT:-/}" -S "$KVER")
show_depends() {
  for m in "$@"; do
    "${MODPROBE[@]}" --show-depends "$m" 2>/dev/null || die "module $m not found in $MODDIR"
  done | awk '$1 == "insmod" && !seen[$2]++ { print }' | tr -s /
}
# busybox insmod/modprobe cannot read compressed modules: decompress on the host.
guest_path() { # host path -> path inside the image, without a compression suffix
  local p=${1#"$MODDIR"/}
  p=${p%.xz}
  p=${p%.zst}
  p=${p%.gz}
  printf '/lib/modules/%s/%s' "$KVER" "$p"
}
# shellcheck disable=SC2086
show_depends $BOOT_MODS $EXTRA_MODS | while read -r _ path _; do
  dst=$(guest_path "$path")
  mkdir -p ".$(dirname "$dst")"
  case "$path" in
    *.ko.xz) xz -dc "$path" >".$dst" ;;
    *.ko.zst) zstd -qdc "$path" >".$dst" ;;
    *.ko.gz) gzip -dc "$path" >".$dst" ;;
    *) cp "$path" ".$dst" ;;
  esac
done
# /etc/modules.boot: "path args" in load order, read by /init.
# shellcheck disable=SC2086
show_depends $BOOT_MODS | while read -r _ path args; do
  printf '%s %s\n' "$(guest_path "$path")" "$args"
done >etc/modules.boot
for f in modules.order modules.builtin modules.builtin.modinfo; do
  [ -e "$MODDIR/$f" ] && cp "$MODDIR/$f" "lib/modules/$KVER/"
done
# modules.dep/alias for the subset: the kernel's request_module -> /sbin/modprobe works.
depmod -b "$STAGE" "$KVER"

# ---- init -----------------------------------------------------------------------------
install -m 0755 "$HERE/init" init
printf 'KVER=%s\n' "$KVER" >etc/podhost-vm.conf

find . -mindepth 1 -printf '%P\0' | LC_ALL=C sort -z |
  cpio --null -o -H newc --quiet | gzip -1 >"$OUTDIR/initramfs.cpio.gz.tmp"
mv "$OUTDIR/initramfs.cpio.gz.tmp" "$OUTDIR/initramfs.cpio.gz"

# ---- vmlinux --------------------------------------------------------------------------
# qemu boots an uncompressed ELF vmlinux through its PVH note: no real-mode setup and no
# in-guest decompression (~2 s less under TCG). The bzImage carries it compressed; try
# every magic offset until one decompresses to an ELF file.
is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' \n')" = '177ELF' ]; }
VMLINUX=$OUTDIR/vmlinux
if [ ! -s "$VMLINUX" ] || [ "$(cat "$OUTDIR/kernel.version" 2>/dev/null)" != "$KVER" ] || [ "$VMLINUZ" -nt "$VMLINUX" ]; then
  rm -f "$VMLINUX"
  for fmt in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
    tool=${fmt%%:*}
    command -v "$tool" >/dev/null || continue
    for off in $(LC_ALL=C grep -obUaP "${fmt#*:}" "$VMLINUZ" | cut -d: -f1 | head -5); do
      tail -c +$((off + 1)) "$VMLINUZ" | "$tool" -dc 2>/dev/null >"$VMLINUX.tmp" || true
      if [ -s "$VMLINUX.tmp" ] && is_elf "$VMLINUX.tmp"; then
        mv "$VMLINUX.tmp" "$VMLINUX"
        break 2
      fi
    done
  done
  rm -f "$VMLINUX.tmp"
  if [ -s "$VMLINUX" ]; then
    log "extracted $VMLINUX ($(du -h --apparent-size "$VMLINUX" | cut -f1))"
  else
    log "could not extract a vmlinux from $VMLINUZ; run-vm.sh will boot the bzImage (slower)"
  fi
fi
printf '%s\n' "$KVER" >"$OUTDIR/kernel.version"

log "built $OUTDIR/initramfs.cpio.gz ($(du -h "$OUTDIR/initramfs.cpio.gz" | cut -f1), kernel $KVER," \
  "$(find "lib/modules/$KVER" -name '*.ko' | wc -l) modules, $(wc -l <etc/modules.boot) loaded at boot)"
