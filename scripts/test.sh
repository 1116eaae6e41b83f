#!/usr/bin/env bash
# Runs every podhost test suite: formatting, lints, unit tests and the root integration
# tests (real namespaces, overlayfs, libcontainer). Installs what it needs. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh must run as root (the integration tests create namespaces and mounts)" >&2
  exit 1
fi
# --test: the tests' own tools; etcd-server: the cluster-mode tests' control plane stores in it.
bash scripts/install-deps.sh --test etcd-server
# A toolchain install-deps.sh installed with rustup lives here.
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
# One build from scratch per run: cargo's incremental caches (about 1 GB for each of
# podhost's targets) would only take disk.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# The Kubernetes control plane for the cluster-mode tests (Go), then Kubernetes' node
# conformance suite (e2e.test, ginkgo, the test images' programs), one after the other
# (the second reuses the first's Go build cache) while cargo builds and tests: cached
# by release outside the checkout, they take seconds once built here.
# Their Go build cache (~5 GB) is this run's own and is removed once both are built:
# only the programs are kept, and the disk it took is what cargo's test build needs.
mkdir -p "${CARGO_TARGET_DIR:-target}"
control_plane_log=${CARGO_TARGET_DIR:-target}/control-plane-build.log
conformance_log=${CARGO_TARGET_DIR:-target}/conformance-build.log
go_build_cache=$(mktemp -d "${TMPDIR:-/tmp}/podhost-go-build.XXXXXX")
(
  trap 'rm -rf "$go_build_cache"' EXIT
  export GOCACHE=$go_build_cache
  bash scripts/cluster/build-control-plane.sh >"$control_plane_log" 2>&1 &&
    bash scripts/cluster/build-conformance.sh >"$conformance_log" 2>&1
) &
control_plane_build=$!

if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all -- --check
else
  echo "warning: rustfmt is not installed; skipping the format check" >&2
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --locked -- -D warnings
else
  echo "warning: clippy is not installed; skipping lints" >&2
fi
# The real server images of examples/real/ for tests/examples.rs, from Debian's packages
# (oci/debian/images); cached by package list, so this is instant once they are built.
while read -r name packages; do
  case "$name" in "" | "#"*) continue ;; esac
  read -ra packages <<<"$packages"
  bash scripts/build-debian-image.sh "${CARGO_TARGET_DIR:-target}/tmp/debian-images/$name" \
    "$name" "${packages[@]}" >/dev/null
done <oci/debian/images
# Two threads: the integration tests each run a daemon with containers; timings in them
# have generous margins, but a 2-core machine should not run more at once.
cargo_test_log=${CARGO_TARGET_DIR:-target}/cargo-test.log
if ! cargo test --workspace --all-targets --locked -- --test-threads=2 2>&1 | tee "$cargo_test_log"; then
  # Again at the very end, where a reader of only the run's last lines (CI) sees them:
  # each failed test's panic, which cargo prints before the tests' captured logs.
  echo "==== the failed tests' panics ($cargo_test_log) ====" >&2
  grep -A6 "panicked at" "$cargo_test_log" | cut -c1-300 | tail -80 >&2 || true
  grep -A20 "^failures:$" "$cargo_test_log" | grep -E "^    [A-Za-z0-9_:]+$" >&2 || true
  echo "scripts/test.sh: cargo test failed (the panics above)" >&2
  exit 1
fi
# The suites below run the debug build `cargo test` just made, the same code as the
# release build users run: a release build of podhost and its dependencies takes ~25
# minutes on 2 cores, which would push this run past an hour (scripts/vm-test.sh and
# scripts/torture.sh build and test the release binary when run alone).
target_dir=${CARGO_TARGET_DIR:-target}
[[ "$target_dir" == /* ]] || target_dir=$(pwd)/$target_dir
debug_podhost=$target_dir/debug/podhost
# The control plane built above, for the cluster-mode torture and tests.
if ! wait "$control_plane_build"; then
  cat "$control_plane_log" "$conformance_log" >&2 2>/dev/null || true
  echo "scripts/test.sh: building the control plane or the conformance suite failed (log above)" >&2
  exit 1
fi
bin=$(tail -1 "$control_plane_log")
# The suites that need a whole host, side by side to keep this run under an hour: the
# VM suite (its own kernel under KVM, its processes out of the host's sight) beside the
# two short kill -9 torture runs (the full one: scripts/torture.sh), alone and as a node
# of a live control plane without --pod-cidr, then cluster mode against the live
# control plane and the seeds' paths on three nodes. Each has its own network
# namespaces, cgroup roots, ports and work dirs. Their output follows in turn.
failed=()
start() { # NAME COMMAND...: in the background, its output in $target_dir/NAME.log
  local name=$1
  shift
  "$@" >"$target_dir/$name.log" 2>&1 &
}
finish() { # NAME PID: waits for it and prints its output
  wait "$2" || failed+=("$1")
  cat "$target_dir/$1.log"
}
start vm-suite env PODHOST_BIN="$debug_podhost" bash scripts/vm-test.sh
vm_suite=$!
# The torture runs one after the other: each checks every process on the host for its
# pods' marks, which the other's pods would carry too.
start torture env PODHOST_BIN="$debug_podhost" bash scripts/torture.sh --short
finish torture $!
start torture-cluster env PODHOST_BIN="$debug_podhost" bash scripts/torture.sh --short --cluster
finish torture-cluster $!
start cluster-test env KUBE_APISERVER="$bin/kube-apiserver" \
  KUBE_CONTROLLER_MANAGER="$bin/kube-controller-manager" KUBE_SCHEDULER="$bin/kube-scheduler" \
  KUBECTL="$bin/kubectl" METRICS_SERVER="$bin/metrics-server" PODHOST="$debug_podhost" \
  bash scripts/cluster-test.sh
finish cluster-test $!
# The seeds' paths: a Deployment on three nodes under the scheduler and controller
# manager, scaled, drained, and a node killed -9 and restarted.
start seeds-test env KUBE_APISERVER="$bin/kube-apiserver" \
  KUBE_CONTROLLER_MANAGER="$bin/kube-controller-manager" KUBE_SCHEDULER="$bin/kube-scheduler" \
  KUBECTL="$bin/kubectl" PODHOST="$debug_podhost" bash scripts/cluster/seeds-test.sh
finish seeds-test $!
finish vm-suite "$vm_suite"
# Kubernetes' node conformance suite against a podhost node (docs/conformance.md), last
# and alone: its 16 ginkgo processes mostly watch pods and probes for minutes.
start conformance env PODHOST="$debug_podhost" bash scripts/conformance.sh --short
finish conformance $!
if [ "${#failed[@]}" -gt 0 ]; then
  # Again at the very end, where a reader of only the run's last lines (CI) sees them.
  for name in "${failed[@]}"; do
    echo "==== the end of $name's output ($target_dir/$name.log) ====" >&2
    # (the torture's verdict, not the daemon log it prints after it)
    sed "/^---- the daemon's log/,\$d" "$target_dir/$name.log" | tail -40 | cut -c1-300 >&2
  done
  echo "scripts/test.sh: failed: ${failed[*]} (their output above)" >&2
  exit 1
fi
echo "scripts/test.sh: every suite passed"
