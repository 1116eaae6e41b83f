#!/usr/bin/env bash
# Installs what building and running podhost needs on Debian 12 (as root, no prompts).
# Usage: scripts/install-deps.sh [extra apt packages...]
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(busybox-static libseccomp-dev pkg-config gcc libc6-dev docker-registry skopeo umoci openssl python3-grpcio mmdebstrap nftables iproute2 "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "cargo (Rust 1.85 or newer) is required" >&2; exit 1; }
