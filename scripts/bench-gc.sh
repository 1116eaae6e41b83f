#!/usr/bin/env bash
# Image GC timings over a store of many small images (release build).
#
# usage: scripts/bench-gc.sh [IMAGES]     (default 1000)
#
# As root the store lives on a private 1 GiB tmpfs (unmounted on exit), so the numbers
# measure podhost and not the disk; otherwise in a temp dir. Goal: a pass when nothing
# needs freeing < 100 ms (it is a statvfs), and the full candidate computation fast too.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${1:-1000}

cargo build --release --example gc_bench >&2
WORK=$(mktemp -d)
cleanup() {
  if mountpoint -q "$WORK"; then umount "$WORK" || umount -l "$WORK"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ "$(id -u)" -eq 0 ]; then
  mount -t tmpfs -o size=1g,mode=0700 podhost-bench-gc "$WORK"
  echo "store on tmpfs $WORK" >&2
else
  echo "not root: store on $(df --output=source "$WORK" | tail -1) at $WORK" >&2
fi
target/release/examples/gc_bench "$WORK" "$IMAGES"
