#!/usr/bin/env bash
# Installs what building, testing and packaging podhost needs on Debian 12 (as root, no
# prompts, idempotent: a second run changes nothing).
# Usage: scripts/install-deps.sh [--package] [--test] [extra apt packages...]
#   (nothing)  what building podhost and running it need (scripts/demo.sh);
#   --package  also what scripts/package-deb.sh needs (dpkg-dev, binutils);
#   --test     also what the test suites need (a registry, skopeo, umoci, lintian,
#              mmdebstrap, ...; scripts/test.sh), --package included.
#
# A Rust toolchain at least as new as Cargo.toml's rust-version is installed when `cargo`
# is missing or older (Debian 12's own cargo is 1.63):
#   1. with rustup, when static.rust-lang.org is reachable: the `rustup` already
#      installed, else Debian's `rustup` package where the release has one (Debian 13
#      on), else rustup-init from static.rust-lang.org (checked against its published
#      sha256); toolchain `stable`, profile minimal plus rustfmt and clippy, in
#      ${CARGO_HOME:-~/.cargo}/bin (scripts/test.sh and demo.sh put it on PATH);
#   2. else from the Debian mirror alone: bookworm-security's rustc-web and cargo-web
#      (rustfmt-web, rust-web-clippy), when their version is new enough;
#   3. else it stops and says what to do.
# PODHOST_RUST=rustup|debian forces one way; PODHOST_RUST=none only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
APT_GET=(apt-get -o DPkg::Lock::Timeout=600)
# Building (gcc, make, pkg-config, libseccomp) and running (busybox-static for the
# built-in image; nftables, iproute2 and iptables for the pod network; the CNI plugins
# for --pod-network cni).
packages=(busybox-static libseccomp-dev pkg-config gcc make libc6-dev nftables iproute2 iptables
  containernetworking-plugins)
package_tools=(dpkg-dev binutils)
# The tests' own tools: a registry on 127.0.0.1, other tools' images (skopeo, umoci), a
# gRPC probe server, the package's checks (lintian, a fresh Debian root by mmdebstrap),
# certificates for the cluster tests.
test_tools=(docker-registry skopeo umoci openssl python3-grpcio mmdebstrap lintian)
while [ "$#" -gt 0 ]; do
  case "$1" in
    --package) packages+=("${package_tools[@]}"); shift ;;
    --test) packages+=("${package_tools[@]}" "${test_tools[@]}"); shift ;;
    *) break ;;
  esac
done
packages+=("$@")
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = 'install ok installed' ]; }
apt_install() {
  local missing=() p
  for p in "$@"; do installed "$p" || missing+=("$p"); done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "installing: ${missing[*]}"
  "${APT_GET[@]}" update -qq
  "${APT_GET[@]}" install -y -qq --no-install-recommends "${missing[@]}"
}
apt_install "${packages[@]}"

# ---- Rust ---------------------------------------------------------------------------
need=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
export PATH="$cargo_home/bin:$PATH"
# The version of `cargo` on PATH (rustup's first), or nothing.
cargo_version() { { cargo --version 2>/dev/null || true; } | sed -n 's/^cargo \([0-9][0-9.]*\).*/\1/p'; }
new_enough() { [ -n "$1" ] && [ "$(printf '%s\n%s\n' "$need" "$1" | sort -V | head -1)" = "$need" ]; }
have=$(cargo_version)
if new_enough "$have"; then
  exit 0
fi
echo "cargo ${have:-is missing}; podhost needs Rust $need or newer (rust-version in Cargo.toml)"

rust_site=https://static.rust-lang.org
reachable() { curl -fsS --max-time 15 -o /dev/null "$rust_site/rustup/release-stable.toml"; }
with_rustup() {
  apt_install curl ca-certificates
  reachable || return 1
  if ! command -v rustup >/dev/null; then
    if [ -n "$(apt-cache policy rustup 2>/dev/null | sed -n 's/^ *Candidate: \([^(]\)/\1/p')" ]; then
      apt_install rustup
    else
      local triple work
      triple=$(uname -m)-unknown-linux-gnu
      work=$(mktemp -d)
      echo "downloading rustup-init ($triple) from $rust_site"
      curl -fsS --proto '=https' -o "$work/rustup-init" "$rust_site/rustup/dist/$triple/rustup-init"
      curl -fsS --proto '=https' -o "$work/rustup-init.sha256" "$rust_site/rustup/dist/$triple/rustup-init.sha256"
      [ "$(cut -d' ' -f1 "$work/rustup-init.sha256")" = "$(sha256sum "$work/rustup-init" | cut -d' ' -f1)" ] || {
        echo "rustup-init does not match its published sha256; not running it" >&2
        rm -rf "$work"
        return 1
      }
      chmod +x "$work/rustup-init"
      "$work/rustup-init" -y --no-modify-path --profile minimal --default-toolchain none
      rm -rf "$work"
    fi
  fi
  rustup toolchain install stable --profile minimal --component rustfmt --component clippy
  rustup default stable
}
with_debian() {
  local candidate
  candidate=$(apt-cache policy cargo-web 2>/dev/null | sed -n 's/^ *Candidate: \([0-9][0-9.]*\).*/\1/p')
  new_enough "$candidate" || return 1
  echo "installing Rust $candidate from Debian (rustc-web, cargo-web; they replace Debian's older rustc and cargo)"
  "${APT_GET[@]}" install -y -qq --no-install-recommends rustc-web cargo-web rustfmt-web rust-web-clippy
}
case "${PODHOST_RUST:-auto}" in
  auto) with_rustup || with_debian || true ;;
  rustup) with_rustup || true ;;
  debian) with_debian || true ;;
  none) ;;
  *) echo "PODHOST_RUST must be auto, rustup, debian or none" >&2; exit 2 ;;
esac
have=$(cargo_version)
if ! new_enough "$have"; then
  cat >&2 <<EOF
podhost needs Rust $need or newer and cargo is ${have:-missing}. Without the internet
(static.rust-lang.org) and without a new enough rustc-web in the Debian mirror, install
a toolchain by hand, e.g. on a machine with access:
  rustup-init -y --profile minimal --default-toolchain stable   (https://rustup.rs)
and copy ~/.cargo and ~/.rustup to this host's root, or use a Debian 12 mirror that
carries bookworm-security (rustc-web, cargo-web >= $need):
  apt-get install rustc-web cargo-web rustfmt-web rust-web-clippy
Then run this script again.
EOF
  exit 1
fi
echo "Rust ready: $(cargo --version) at $(command -v cargo)"
