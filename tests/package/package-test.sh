#!/usr/bin/env bash
# The Debian package, end to end, on a fresh Debian 12 root (run as root):
#
#  1. builds it (scripts/package-deb.sh; PODHOST_BIN=PATH packages that binary instead of
#     a release build) and runs lintian on it (errors and warnings fail the test);
#  2. unpacks a fresh Debian 12 root made by mmdebstrap from the Debian mirror (minbase,
#     systemd, and what a stock host has: apparmor, iproute2, nftables, busybox-static;
#     cached as a tarball under target/package-test/, so reruns need no network);
#  3. in namespaces of its own (mount, network, pid: nothing leaks to the host even on a
#     failure) installs the .deb with dpkg into that root and checks its files, the
#     conffile, the enabled unit, the stripped binary and that it runs there;
#  4. starts the daemon as the installed unit's ExecStart says, in a cgroup of its own
#     (as systemd would), loads the built-in image with the installed recipe, copies the
#     installed example manifest into /etc/podhost/manifests and waits for it to run;
#  5. stops the daemon (SIGTERM: the container must keep running), `dpkg -r` (keeps the
#     config, the container still runs), `dpkg -P` (the container is stopped), and
#     proves that nothing is left: the root's file list (and /etc's contents) equals the
#     one before the install, no mount below the package's dirs, no podhost process,
#     no cgroup below the daemon's, no podhost0 bridge, no nftables table inet podhost.
#
# The last line is `package-test: ok` on success; any failure exits non-zero.
set -euo pipefail

if [ "${1:-}" = --inside ]; then
  shift
  # shellcheck source=inside.sh
  . "$(dirname "$0")/inside.sh"
  exit 0
fi

cd "$(dirname "$0")/../.."
REPO=$PWD
[ "$(id -u)" -eq 0 ] || { echo "package-test: must run as root" >&2; exit 1; }
say() { printf 'package-test: %s\n' "$*" >&2; }
fail() { printf 'package-test: FAILED: %s\n' "$*" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-$REPO/target}
cache=$target/package-test
mkdir -p "$cache"

# ---- 1. the package -----------------------------------------------------------------
if [ -n "${PODHOST_BIN:-}" ]; then
  deb=$(bash scripts/package-deb.sh --binary "$PODHOST_BIN" --out "$cache/deb" | tail -1)
else
  deb=$(bash scripts/package-deb.sh --out "$cache/deb" | tail -1)
fi
[ -f "$deb" ] || fail "scripts/package-deb.sh printed no .deb"
command -v lintian >/dev/null || fail "lintian is missing: bash scripts/install-deps.sh --test installs it"
say "lintian $deb"
status=0
tags=$(lintian --fail-on error,warning "$deb" 2>&1) || status=$?
printf '%s\n' "$tags" | grep -v '^running with root privileges' >&2 || true
[ "$status" -eq 0 ] || fail "lintian reports errors or warnings (status $status)"

# ---- 2. a fresh Debian 12 root --------------------------------------------------------
base_packages=systemd,systemd-sysv,apparmor,iproute2,nftables,busybox-static,libseccomp2
key=$(printf '%s %s' bookworm-minbase "$base_packages" | sha256sum | cut -c1-16)
base=$cache/debian12-$key.tar
if [ ! -f "$base" ]; then
  command -v mmdebstrap >/dev/null || fail "mmdebstrap is missing: bash scripts/install-deps.sh --test installs it"
  say "building a fresh Debian 12 root with mmdebstrap (once; cached as $base)"
  mmdebstrap --mode=root --format=tar --variant=minbase --quiet --include="$base_packages" \
    bookworm "$base.tmp" </dev/null >&2 ||
    fail "mmdebstrap could not build a Debian 12 root (is the Debian mirror reachable?)"
  mv "$base.tmp" "$base"
fi
root=$(mktemp -d "$cache/root.XXXXXX")
cgroup=podhost-package-test-$$
cleanup() {
  # Everything in the namespaces died with them; only the cgroups and the root stay.
  for mnt in $(awk '{ for (i = 7; $i != "-"; i++) {}; if ($(i+1) ~ /^cgroup2?$/) print $5 }' /proc/self/mountinfo); do
    [ -d "$mnt/$cgroup" ] && find "$mnt/$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  if grep -q " $root" /proc/self/mountinfo; then
    say "mounts left below $root (not removing it): $(grep " $root" /proc/self/mountinfo)"
  else
    rm -rf --one-file-system "$root"
  fi
  rm -f "$root.log" "$root.before" "$root.after"
}
trap cleanup EXIT
tar -C "$root" -xf "$base"
cp "$deb" "$root/tmp/podhost.deb"

# ---- 3-5. in namespaces of its own ------------------------------------------------------
say "installing, running and purging in $root"
unshare --mount --net --pid --fork --mount-proc --propagation private \
  bash "$REPO/tests/package/package-test.sh" --inside "$root" "$cgroup"
say ok
