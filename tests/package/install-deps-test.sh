#!/usr/bin/env bash
# scripts/install-deps.sh on a fresh Debian 12 root (as root), where cargo is missing:
# it must install every package and a Rust toolchain new enough for Cargo.toml, with no
# stdin, and a second run must change nothing. Needs the Debian mirror and, for the
# rustup way, static.rust-lang.org; downloads a few hundred MB, so it is run by hand
# (not by cargo test):
#
#   bash tests/package/install-deps-test.sh                 # PODHOST_RUST=auto (rustup)
#   PODHOST_RUST=debian bash tests/package/install-deps-test.sh   # Debian's rustc-web
#
# Uses package-test.sh's cached Debian 12 root (run that first). HOST_CA=1 copies the
# host's own CAs (/usr/local/share/ca-certificates, e.g. a TLS-intercepting proxy's)
# into the root, for a network that reaches static.rust-lang.org only through one.
# The last line is `install-deps-test: ok`.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
say() { printf 'install-deps-test: %s\n' "$*" >&2; }
fail() { printf 'install-deps-test: FAILED: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root"
cache=${CARGO_TARGET_DIR:-$REPO/target}/package-test
base=$(ls "$cache"/debian12-*.tar 2>/dev/null | head -1)
[ -n "$base" ] || fail "no cached Debian 12 root in $cache: run tests/package/package-test.sh first"
root=$(mktemp -d "$cache/deps-root.XXXXXX")
trap 'rm -rf --one-file-system "$root"' EXIT
tar -C "$root" -xf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [ -n "${HOST_CA:-}" ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
mkdir -p "$root/src"
need=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)

unshare --mount --propagation private bash -euo pipefail -c '
  root=$1 repo=$2 mode=$3 need=$4
  mount --bind "$repo" "$root/src"
  mount -o remount,bind,ro "$root/src"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/tmp"
  ! chroot "$root" sh -c "command -v cargo" >/dev/null || { echo "cargo already in the fresh root" >&2; exit 1; }
  chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin PODHOST_RUST="$mode" \
    bash /src/scripts/install-deps.sh </dev/null >&2
  version=$(chroot "$root" env -i HOME=/root PATH=/root/.cargo/bin:/usr/bin:/bin cargo --version)
  echo "install-deps-test: first run gave $version" >&2
  printf "%s\n%s\n" "$need" "$(echo "$version" | cut -d" " -f2)" | sort -V -C ||
    { echo "cargo $version is older than $need" >&2; exit 1; }
  second=$(chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    PODHOST_RUST="$mode" bash /src/scripts/install-deps.sh </dev/null 2>&1)
  [ -z "$second" ] || { echo "the second run was not a no-op: $second" >&2; exit 1; }
' _ "$root" "$REPO" "${PODHOST_RUST:-auto}" "$need" || fail "see above"
say ok
