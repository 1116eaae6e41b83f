#!/usr/bin/env bash
# Builds a reproducible OCI image layout of busybox from Debian's busybox-static,
# offline, referenced as "localhost/busybox:latest".
#
# usage: oci/busybox/build.sh [--ref REF] [--add FILE]... [--put SRC:DEST[:MODE]]...
#                              [--link TARGET:DEST]... [--dir DEST]... [--passwd LINE]...
#                              [--group LINE]... [--config JSON] OUTDIR
#
# --ref REF     the image's reference (default localhost/busybox:latest)
# --add FILE    also install FILE as /usr/local/bin/<its name> (mode 0755), e.g. a static
#               test program; repeatable. Tests use it for images of their own (with --ref).
# --put SRC:DEST[:MODE]  install SRC at /DEST (mode MODE, default 0755, e.g. 4755)
# --link TARGET:DEST     a symlink /DEST -> TARGET
# --dir DEST             an empty directory /DEST (mode 0755)
# --passwd LINE, --group LINE  a line appended to /etc/passwd, /etc/group
# --config JSON the image config's "config" object (default: PATH in Env, Cmd ["sh"])
# --all-in-bin  every applet's link in /bin (as Docker's busybox image has them), not at
#               the path busybox reports (sysctl in /sbin, env in /usr/bin, ...)
#
# The options other than --ref and --add make images that stand in for other projects'
# (scripts/cluster/e2e-images.sh: Kubernetes' e2e test images).
#
# OUTDIR receives oci-layout, index.json and blobs/sha256/... (an existing layout
# there is replaced; other files are left alone). The manifest digest is printed on
# stdout as the last line; progress goes to stderr.
#
# Reproducible: every timestamp is fixed at the epoch, owners are 0:0, entries are
# sorted, gzip stores no name or time and the JSON documents are written byte for
# byte with printf. Two builds from the same busybox binary give the same digest.
set -euo pipefail

usage() {
  echo "usage: $0 [--ref REF] [--add FILE]... OUTDIR" >&2
  exit 2
}
REF=localhost/busybox:latest
ADD=()
PUT=()
LINKS=()
DIRS=()
PASSWD=()
GROUP=()
ALL_IN_BIN=0
CONFIG='{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["sh"]}'
while [ "$#" -gt 1 ]; do
  case "$1" in
    --ref) REF=$2; shift 2 ;;
    --add) ADD+=("$2"); shift 2 ;;
    --put) PUT+=("$2"); shift 2 ;;
    --link) LINKS+=("$2"); shift 2 ;;
    --dir) DIRS+=("$2"); shift 2 ;;
    --passwd) PASSWD+=("$2"); shift 2 ;;
    --group) GROUP+=("$2"); shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --all-in-bin) ALL_IN_BIN=1; shift ;;
    *) usage ;;
  esac
done
if [ "$#" -ne 1 ] || [ -z "$1" ] || [ "${1#--}" != "$1" ] || [ -z "$REF" ]; then
  usage
fi
OUT=$1
BUSYBOX=/bin/busybox
for f in "${ADD[@]}"; do
  [ -f "$f" ] || { echo "build.sh: --add $f: no such file" >&2; exit 1; }
done
for p in "${PUT[@]}"; do
  [ -f "${p%%:*}" ] || { echo "build.sh: --put $p: no such file ${p%%:*}" >&2; exit 1; }
  case "$p" in *:*) ;; *) echo "build.sh: --put takes SRC:DEST[:MODE], not $p" >&2; exit 2 ;; esac
done
case "$CONFIG" in
  \{*\}) ;;
  *) echo "build.sh: --config must be a JSON object" >&2; exit 2 ;;
esac
export SOURCE_DATE_EPOCH=0
export LC_ALL=C
umask 022

log() { printf 'build.sh: %s\n' "$*" >&2; }

if [ ! -x "$BUSYBOX" ]; then
  log "$BUSYBOX missing: installing busybox-static"
  DEBIAN_FRONTEND=noninteractive apt-get install -y busybox-static >&2
fi
if ! "$BUSYBOX" --list-full >/dev/null 2>&1; then
  echo "build.sh: $BUSYBOX does not run or has no --list-full; install busybox-static" >&2
  exit 1
fi

# shellcheck source=../layout.sh
. "$(dirname "$0")/../layout.sh"
ARCH=$(oci_arch)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
R=$WORK/rootfs

# ---- 1. rootfs ------------------------------------------------------------------
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,root,var,home,tmp}
chmod 0700 "$R/root"
chmod 1777 "$R/tmp"
install -m 0755 "$BUSYBOX" "$R/bin/busybox"

# One symlink per applet at the path busybox reports, relative to bin/busybox so
# that it resolves both inside the container and on the host.
while IFS= read -r applet; do
  case "$applet" in
    bin/busybox | linuxrc | "" | /* | *..*) continue ;;
  esac
  [ "$ALL_IN_BIN" = 1 ] && applet=bin/${applet##*/}
  dir=$(dirname "$applet")
  mkdir -p "$R/$dir"
  up=""
  rest=$dir
  while [ "$rest" != "." ]; do
    up="../$up"
    rest=$(dirname "$rest")
  done
  target="${up}bin/busybox"
  [ "$dir" = bin ] && target=busybox
  ln -sfn "$target" "$R/$applet"
done < <("$BUSYBOX" --list-full | sort -u)

for f in "${ADD[@]}"; do
  mkdir -p "$R/usr/local/bin"
  install -m 0755 "$f" "$R/usr/local/bin/$(basename "$f")"
done

oci_put_files "$R" "${PUT[@]}"
for d in "${DIRS[@]}"; do mkdir -p "$R/${d#/}"; done
oci_link_files "$R" "${LINKS[@]}"

printf '%s\n' \
  'root:x:0:0:root:/root:/bin/sh' \
  'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' "${PASSWD[@]}" >"$R/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' "${GROUP[@]}" >"$R/etc/group"
printf '%s\n' '127.0.0.1 localhost' '::1 localhost ip6-localhost ip6-loopback' >"$R/etc/hosts"
: >"$R/etc/hostname"
: >"$R/etc/resolv.conf"
chmod 0644 "$R"/etc/*

# ---- 2. layer, config, manifest, index ------------------------------------------
DIGEST=$(oci_write_layout "$R" "$OUT" "$REF" "$ARCH" \
  "$CONFIG" \
  'oci/busybox/build.sh (Debian busybox-static)' root)
log "wrote $REF to $OUT"
printf '%s\n' "$DIGEST"
