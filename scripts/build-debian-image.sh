#!/usr/bin/env bash
# Builds an OCI image layout of real server software from Debian's packages, offline
# (only Debian's package mirror is needed), for
# `podhost load OUT_DIR`. The image is referenced as localhost/NAME:latest.
#
# usage: scripts/build-debian-image.sh [--cmd JSON] [--entrypoint JSON] [--put SRC:DEST[:MODE]]...
#                                      [--append FILE:LINE]... [--link TARGET:DEST]... OUT_DIR NAME PKG...
#
#   --cmd JSON         the image's Cmd as a JSON array (default: none; manifests say what to run)
#   --entrypoint JSON  the image's Entrypoint as a JSON array (default: none)
#   --put SRC:DEST[:MODE]  also install the host file SRC at /DEST (mode MODE, default 0755)
#   --append FILE:LINE     append LINE to /FILE of the root filesystem (e.g. etc/passwd)
#   --link TARGET:DEST     a symlink /DEST -> TARGET
#
# e.g.  scripts/build-debian-image.sh target/debian-images/etcd etcd etcd-server etcd-client
#       scripts/build-debian-image.sh target/debian-images/nginx nginx nginx-light
#
# The root filesystem is mmdebstrap's "essential" variant of the host's Debian suite plus
# PKG... (merged /usr through usr-is-merged, so no perl comes along), without docs other
# than copyright files, man pages, info, locales, apt's lists and caches, device nodes or
# logs; packed into one layer by oci/layout.sh (owners kept as dpkg set them).
#
# Cached: OUT_DIR/podhost-image.key records what the layout was built from (suite,
# architecture, name, packages, --cmd and this script's and oci/layout.sh's contents);
# when it matches, nothing is built and the layout's digest is printed at once. The
# manifest digest is the last line on stdout; progress goes to stderr.
set -euo pipefail

usage() {
  echo "usage: $0 [--cmd JSON] OUT_DIR NAME PKG..." >&2
  exit 2
}
CMD=
ENTRYPOINT=
PUT=()
APPEND=()
LINKS=()
while [ "$#" -gt 0 ] && [ "${1#--}" != "$1" ]; do
  case "$1" in
    --cmd) [ "$#" -ge 2 ] || usage; CMD=$2; shift 2 ;;
    --entrypoint) [ "$#" -ge 2 ] || usage; ENTRYPOINT=$2; shift 2 ;;
    --put) [ "$#" -ge 2 ] || usage; PUT+=("$2"); shift 2 ;;
    --append) [ "$#" -ge 2 ] || usage; APPEND+=("$2"); shift 2 ;;
    --link) [ "$#" -ge 2 ] || usage; LINKS+=("$2"); shift 2 ;;
    *) usage ;;
  esac
done
[ "$#" -ge 3 ] || usage
OUT=$1
NAME=$2
shift 2
case "$NAME" in
  *[!a-z0-9._-]* | "" | [._-]*)
    echo "build-debian-image.sh: NAME must be lowercase letters, digits, '.', '_' or '-': $NAME" >&2
    exit 2
    ;;
esac
case "$CMD" in
  "" | \[*\]) ;;
  *) echo "build-debian-image.sh: --cmd must be a JSON array, e.g. '[\"nginx\"]'" >&2; exit 2 ;;
esac
case "$ENTRYPOINT" in
  "" | \[*\]) ;;
  *) echo "build-debian-image.sh: --entrypoint must be a JSON array, e.g. '[\"/agnhost\"]'" >&2; exit 2 ;;
esac
for p in "${PUT[@]}"; do
  case "$p" in *:*) ;; *) echo "build-debian-image.sh: --put takes SRC:DEST[:MODE], not $p" >&2; exit 2 ;; esac
  [ -f "${p%%:*}" ] || { echo "build-debian-image.sh: --put $p: no such file ${p%%:*}" >&2; exit 1; }
done
mapfile -t PACKAGES < <(printf '%s\n' "$@" | LC_ALL=C sort -u)
REF=localhost/$NAME:latest
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../oci/layout.sh
. "$HERE/../oci/layout.sh"
export LC_ALL=C SOURCE_DATE_EPOCH=0
umask 022

log() { printf 'build-debian-image.sh: %s\n' "$*" >&2; }

ARCH=$(oci_arch)
# The host's suite: its packages are what the mirror in sources.list serves.
SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$SUITE" ] || { echo "build-debian-image.sh: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }

KEY=$(
  printf 'suite=%s\narch=%s\nname=%s\ncmd=%s\nentrypoint=%s\npackages=%s\n' \
    "$SUITE" "$ARCH" "$NAME" "$CMD" "$ENTRYPOINT" "${PACKAGES[*]}"
  for p in "${PUT[@]}"; do printf 'put=%s %s\n' "$p" "$(sha256sum <"${p%%:*}" | cut -d' ' -f1)"; done
  for a in "${APPEND[@]}"; do printf 'append=%s\n' "$a"; done
  for l in "${LINKS[@]}"; do printf 'link=%s\n' "$l"; done
  sha256sum "$HERE/build-debian-image.sh" "$HERE/../oci/layout.sh" | cut -d' ' -f1
)
if [ -f "$OUT/index.json" ] && [ "$(cat "$OUT/podhost-image.key" 2>/dev/null)" = "$KEY" ]; then
  log "$REF is up to date in $OUT (${PACKAGES[*]})"
  grep -o '"digest":"sha256:[0-9a-f]*"' "$OUT/index.json" | head -n1 | cut -d'"' -f4
  exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
  log "installing mmdebstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >&2 || {
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >&2
  }
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
R=$WORK/rootfs

log "building $REF from $SUITE: ${PACKAGES[*]}"
started=$(date +%s)
# No MIRROR argument: mmdebstrap then uses deb.debian.org with the suite's updates and
# security (what a stock Debian 12 host's sources say). --mode=root: we are root and need no user namespace; the merged-usr hook installs
# usr-is-merged before the essential set would pull in usrmerge (and with it perl).
include=$(IFS=,; echo "${PACKAGES[*]}")
mmdebstrap --mode=root --variant=essential --quiet \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="$include" \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  "$SUITE" "$R" </dev/null >&2

# What a container must not inherit from the build host or the package manager.
find "$R/dev" -mindepth 1 -delete
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/* "$R"/var/cache/debconf/*-old \
  "$R"/var/lib/dpkg/*-old "$R"/tmp/* "$R"/var/tmp/*
# The logs of the build, not the directories servers write to (nginx needs /var/log/nginx).
find "$R/var/log" -type f -delete
: >"$R/etc/hostname"
: >"$R/etc/resolv.conf"
: >"$R/etc/machine-id"
printf '%s\n' '127.0.0.1 localhost' '::1 localhost ip6-localhost ip6-loopback' >"$R/etc/hosts"
chmod 0644 "$R/etc/hostname" "$R/etc/resolv.conf" "$R/etc/machine-id" "$R/etc/hosts"

oci_put_files "$R" "${PUT[@]}"
for a in "${APPEND[@]}"; do printf '%s\n' "${a#*:}" >>"$R/${a%%:*}"; done
oci_link_files "$R" "${LINKS[@]}"

config='{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'
[ -n "$ENTRYPOINT" ] && config+=",\"Entrypoint\":$ENTRYPOINT"
[ -n "$CMD" ] && config+=",\"Cmd\":$CMD"
config+='}'
DIGEST=$(oci_write_layout "$R" "$OUT" "$REF" "$ARCH" "$config" \
  "scripts/build-debian-image.sh (Debian $SUITE: ${PACKAGES[*]})" keep)
printf '%s\n' "$KEY" >"$OUT/podhost-image.key"
log "wrote $REF to $OUT in $(($(date +%s) - started)) s ($(du -sh "$OUT/blobs" | cut -f1) of blobs)"
printf '%s\n' "$DIGEST"
