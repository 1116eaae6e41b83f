#!/usr/bin/env bash
# Builds the Debian package podhost_<version>-<revision>_<arch>.deb with dpkg-deb (no
# debhelper): the stripped release binary in /usr/bin, the systemd unit, /etc/podhost/
# (an example KubeletConfiguration and the static pod dir), the built-in busybox image
# recipe in /usr/share/podhost/ and the maintainer scripts of contrib/deb/.
#
#   scripts/package-deb.sh [--binary PATH] [--out DIR]
#
# --binary PATH  package this podhost binary instead of building the release one
# --out DIR      where the .deb goes (default $CARGO_TARGET_DIR/deb, or target/deb)
# Env: PODHOST_DEB_REVISION (default 1), PODHOST_DEB_MAINTAINER, SOURCE_DATE_EPOCH (default
#      the last commit's time: two builds of one commit and binary give the same .deb).
# Prints the path of the .deb as the last line of stdout; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

usage() {
  echo "usage: $0 [--binary PATH] [--out DIR]" >&2
  exit 2
}
binary=""
target_dir=${CARGO_TARGET_DIR:-$REPO/target}
out=$target_dir/deb
while [ "$#" -gt 0 ]; do
  case "$1" in
    --binary) [ "$#" -ge 2 ] || usage; binary=$2; shift 2 ;;
    --out) [ "$#" -ge 2 ] || usage; out=$2; shift 2 ;;
    *) usage ;;
  esac
done
log() { printf 'package-deb: %s\n' "$*" >&2; }
for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
  command -v "$tool" >/dev/null || {
    echo "package-deb: $tool is missing: bash scripts/install-deps.sh --package" >&2
    exit 1
  }
done

if [ -z "$binary" ]; then
  log "building the release binary"
  cargo build --release --locked >&2
  binary=$target_dir/release/podhost
fi
[ -x "$binary" ] || { echo "package-deb: $binary is not an executable" >&2; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
revision=${PODHOST_DEB_REVISION:-1}
arch=$(dpkg --print-architecture)
maintainer=${PODHOST_DEB_MAINTAINER:-podhost maintainers <podhost@example.org>}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export LC_ALL=C
umask 022

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/podhost
mkdir -p "$pkg"/{DEBIAN,usr/bin,lib/systemd/system,etc/podhost/manifests} \
  "$pkg"/usr/share/{doc/podhost/examples,podhost/oci/busybox,man/man8,lintian/overrides}

# ---- files ----------------------------------------------------------------------
# Stripped as dh_strip does (debug info and symbols go; the 35 MB binary shrinks).
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
  -o "$pkg/usr/bin/podhost" "$binary"
chmod 0755 "$pkg/usr/bin/podhost"
# The per-container monitor the shim execs: a helper, not a command, so in
# /usr/lib/podhost/ (where the shim looks after its own directory).
monitor=$(dirname "$binary")/podhost-monitor
[ -x "$monitor" ] || { echo "package-deb: $monitor missing (cargo builds it beside podhost)" >&2; exit 1; }
mkdir -p "$pkg/usr/lib/podhost"
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
  -o "$pkg/usr/lib/podhost/podhost-monitor" "$monitor"
chmod 0755 "$pkg/usr/lib/podhost/podhost-monitor"
# The shim's own small binary (podhost execs it per container; see runtime/helper_exe.rs).
shim=$(dirname "$binary")/podhost-shim
[ -x "$shim" ] || { echo "package-deb: $shim missing (cargo builds it beside podhost)" >&2; exit 1; }
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
  -o "$pkg/usr/lib/podhost/podhost-shim" "$shim"
chmod 0755 "$pkg/usr/lib/podhost/podhost-shim"
install -m 0644 contrib/podhost.service "$pkg/lib/systemd/system/podhost.service"
install -m 0644 contrib/deb/config.yaml "$pkg/etc/podhost/config.yaml"
install -m 0644 contrib/deb/example-pod.yaml "$pkg/usr/share/doc/podhost/examples/hello.yaml"
install -m 0644 contrib/deb/copyright "$pkg/usr/share/doc/podhost/copyright"
install -m 0644 README.md "$pkg/usr/share/doc/podhost/README.md"
gzip -9n <contrib/deb/podhost.8 >"$pkg/usr/share/man/man8/podhost.8.gz"
install -m 0644 contrib/deb/lintian-overrides "$pkg/usr/share/lintian/overrides/podhost"
# The built-in image's recipe (see contrib/deb/load-busybox-image for why a recipe).
install -m 0755 contrib/deb/load-busybox-image "$pkg/usr/share/podhost/load-busybox-image"
install -m 0755 oci/busybox/build.sh "$pkg/usr/share/podhost/oci/busybox/build.sh"
install -m 0644 oci/layout.sh "$pkg/usr/share/podhost/oci/layout.sh"
{
  printf 'podhost (%s-%s) unstable; urgency=medium\n\n' "$version" "$revision"
  printf '  * Built by scripts/package-deb.sh from commit %s.\n\n' "$commit"
  printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$pkg/usr/share/doc/podhost/changelog.Debian.gz"

# ---- control --------------------------------------------------------------------
# Library dependencies as dpkg-shlibdeps computes them (libc6, libgcc-s1, libseccomp2),
# plus what podhost runs: nft for the pod bridge's NAT and hostPorts.
mkdir -p "$work/shlibs/debian"
printf 'Source: podhost\n\nPackage: podhost\nArchitecture: any\n' >"$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$pkg/usr/bin/podhost" "$pkg/usr/lib/podhost/podhost-monitor" "$pkg/usr/lib/podhost/podhost-shim" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# podhost and podhost-shim carry packed relocations (build.rs): ld.so needs glibc 2.36
# for them. The binaries name the version GLIBC_ABI_DT_RELR, but no symbol is bound to
# it, so dpkg-shlibdeps does not count it: raise libc6 to 2.36 here.
if grep -q GLIBC_ABI_DT_RELR "$pkg/usr/bin/podhost"; then
  shlibs=$(printf '%s' "$shlibs" | sed -E 's/libc6 \(>= 2\.(3[0-5]|[12][0-9]|[0-9])(\.[0-9]+)?\)/libc6 (>= 2.36)/')
fi
installed_size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: podhost
Version: $version-$revision
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $shlibs, nftables
Recommends: apparmor, busybox-static, iproute2
Suggests: containernetworking-plugins
Section: admin
Priority: optional
Description: Kubernetes static pods without a CRI
 podhost is a node agent that runs Kubernetes Pods on one Linux host without
 containerd or runc: it reads v1.Pod manifests from /etc/podhost/manifests (the
 kubelet's static-pod mode) and builds every container itself, with pod-shared
 namespaces, an overlay root filesystem, cgroups, seccomp and AppArmor.
 .
 The daemon runs as the systemd service podhost.service; stopping or
 upgrading it never stops a pod. /usr/share/podhost/load-busybox-image builds
 and loads the built-in image localhost/busybox:latest offline.
EOF
printf '/etc/podhost/config.yaml\n' >"$pkg/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "contrib/deb/$script" "$pkg/DEBIAN/$script"
done
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' | sort | xargs md5sum) \
  >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

# ---- build ------------------------------------------------------------------------
find "$pkg" -exec touch --no-dereference -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb=$out/podhost_${version}-${revision}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >&2
log "wrote $deb ($(du -h "$deb" | cut -f1), Installed-Size $installed_size KiB; Depends: $shlibs, nftables)"
printf '%s\n' "$deb"
