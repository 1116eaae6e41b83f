#!/usr/bin/env bash
# Runs the VM suite (tests/vm/) inside a throwaway QEMU guest with a real Debian 12 kernel,
# pure cgroup v2 and full root: what the dev/CI host cannot show (cgroup v2 limits, memcg
# OOM kills, oom_score_adj, rlimits). Run as root; needs no stdin. See vm/README.md.
#
#   bash scripts/vm-test.sh            # install (once), build, boot, run every check
#   CHECKS='00-*' bash scripts/vm-test.sh       # only the checks whose file name matches
#
# Env: CHECKS (glob on tests/vm/checks/ names, default all), TIMEOUT (whole VM run, 900 s),
#      CHECK_TIMEOUT (one check, 180 s), SMP (2), MEM (1024 MiB), ACCEL (auto|kvm|tcg),
#      VERBOSE=1 (kernel messages on the console), VM_DIR (cache and share, target/vm),
#      DAEMON_CGROUP (where the guest starts the daemon: system.slice/podhost, or "/" for
#      the root cgroup), SKIP_BUILD=1 (reuse target/release/podhost), PODHOST_BIN (test
#      this binary instead of building one).
#      For other guest-side runs (scripts/bench-vm.sh), all unset by default:
#      VM_CHECKS (a directory, absolute or relative to the repository, whose *.sh the guest
#      runs instead of tests/vm/checks/: it becomes the share's suite/checks/, with
#      whatever else it holds; the lifecycle test binary is then not built),
#      VM_SHARE_EXTRA (a directory copied into the share as extra/: /mnt/host/extra in the
#      guest), VM_EXTRA_BINS (more host binaries for the initramfs, with their libraries:
#      /usr/local/bin/NAME in the guest).
# Exit: the suite's status (non-zero if any check failed); 124 when the VM run timed out;
#       125 when the guest died without reporting a status (kernel panic, qemu error).
# The last line is always `vm-suite: N passed, M failed`.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/vm-test.sh must run as root (apt, 9p passthrough share)" >&2
  exit 1
fi

VM_DIR=${VM_DIR:-$REPO/target/vm}
mkdir -p "$VM_DIR"
VM_DIR=$(cd "$VM_DIR" && pwd)
for v in VM_CHECKS VM_SHARE_EXTRA; do
  if [ -n "${!v:-}" ] && [ ! -d "${!v}" ]; then
    echo "vm-test: $v=${!v} is not a directory (absolute, or relative to $REPO)" >&2
    exit 1
  fi
done
for b in ${VM_EXTRA_BINS:-}; do
  [ -x "$b" ] || { echo "vm-test: VM_EXTRA_BINS: $b is not an executable file" >&2; exit 1; }
done
export DEBIAN_FRONTEND=noninteractive
APT_GET=(apt-get -o DPkg::Lock::Timeout=600)

t_start=${EPOCHREALTIME/./}
step() { printf 'vm-test: %s\n' "$*" >&2; }
since() { local now=${EPOCHREALTIME/./}; printf '%d.%01d s' $(((now - $1) / 1000000)) $(((now - $1) / 100000 % 10)); }

# One run at a time per VM_DIR: the share and the initramfs are rebuilt in place.
exec 9>"$VM_DIR/.lock"
if ! flock -n 9; then
  step "another vm-test.sh holds $VM_DIR/.lock; waiting"
  flock -w 1800 9
fi

# ---- 1. host packages -------------------------------------------------------------
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = 'install ok installed' ]; }
t=${EPOCHREALTIME/./}
missing=()
for p in qemu-system-x86 busybox-static cpio kmod xz-utils apparmor nftables; do
  installed "$p" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  step "installing: ${missing[*]}"
  "${APT_GET[@]}" update -qq
  install=("${missing[@]}")
  extra=()
  # Pitfall: this image ships qemu-utils 10 from bookworm-backports, which Breaks
  # qemu-system-common (<< 8.0). A plain install of qemu-system-x86 (7.2) would silently
  # REMOVE qemu-utils (qemu-img). Keep it, at bookworm's version, when apt says so.
  sim() { "${APT_GET[@]}" install -s -y --no-install-recommends "${extra[@]}" "${install[@]}" 2>&1; }
  if sim | grep '^Remv qemu-utils ' >/dev/null; then # no -q: under pipefail, SIGPIPE
    step "qemu-system-x86 would remove qemu-utils $(dpkg-query -W -f='${Version}' qemu-utils); installing qemu-utils/bookworm alongside (a downgrade)"
    install+=(qemu-utils/bookworm)
    extra=(--allow-downgrades)
  fi
  # Never remove anything silently: stop and say what apt wants to remove.
  if removes=$(sim | grep '^Remv ') && [ -n "$removes" ]; then
    echo "vm-test: installing ${install[*]} would remove packages; refusing:" >&2
    echo "$removes" >&2
    exit 1
  fi
  "${APT_GET[@]}" install -y -qq --no-install-recommends "${extra[@]}" "${install[@]}"
fi
command -v qemu-system-x86_64 >/dev/null || { echo "vm-test: qemu-system-x86_64 missing after install" >&2; exit 1; }
step "host packages ready ($(since "$t"))"

# ---- 2. the guest kernel, downloaded and unpacked, never installed ------------------
t=${EPOCHREALTIME/./}
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null |
  sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -1; }
KPKG=$(kernel_pkg)
if [ -z "$KPKG" ]; then
  "${APT_GET[@]}" update -qq || true
  KPKG=$(kernel_pkg)
fi
if [ -z "$KPKG" ]; then
  # Offline: fall back to the newest kernel already unpacked here.
  KPKG=$(find "$VM_DIR/kernel" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' -printf '%f\n' 2>/dev/null | sort -V | tail -1)
  [ -n "$KPKG" ] || { echo "vm-test: cannot resolve linux-image-amd64 (apt lists?) and no cached kernel" >&2; exit 1; }
  step "apt cannot resolve linux-image-amd64; using the cached $KPKG"
fi
KDIR=$VM_DIR/kernel/$KPKG
KROOT=$KDIR/root
if ! compgen -G "$KROOT/boot/vmlinuz-*" >/dev/null || [ ! -e "$KDIR/.unpacked" ]; then
  step "downloading $KPKG (not installed: apt-get download + dpkg-deb -x)"
  rm -rf "$KDIR"
  mkdir -p "$KDIR"
  if ! (cd "$KDIR" && "${APT_GET[@]}" -o APT::Sandbox::User=root download -qq "$KPKG"); then
    # A stale package list names a version the mirror no longer has.
    "${APT_GET[@]}" update -qq
    KPKG=$(kernel_pkg)
    KDIR=$VM_DIR/kernel/$KPKG
    KROOT=$KDIR/root
    mkdir -p "$KDIR"
    (cd "$KDIR" && "${APT_GET[@]}" -o APT::Sandbox::User=root download -qq "$KPKG")
  fi
  dpkg-deb -x "$KDIR"/"$KPKG"_*.deb "$KROOT"
  rm -f "$KDIR"/"$KPKG"_*.deb
  touch "$KDIR/.unpacked"
fi
step "kernel $KPKG ready ($(since "$t"))"

# ---- 3. podhost, the busybox image, the initramfs, the share ------------------------
t=${EPOCHREALTIME/./}
PODHOST=${PODHOST_BIN:-$REPO/target/release/podhost}
if [ -z "${PODHOST_BIN:-}" ] && [ "${SKIP_BUILD:-}" != 1 ]; then
  command -v cargo >/dev/null || { echo "vm-test: cargo (Rust 1.89+) is required" >&2; exit 1; }
  cargo build --release --locked
fi
[ -x "$PODHOST" ] || { echo "vm-test: $PODHOST missing" >&2; exit 1; }
# tests/lifecycle.rs also runs in the guest (check 15-lifecycle): its release test
# binary, found by cargo's artifact message. Where it was built tells the guest where
# it expects podhost and the busybox layout (compiled-in paths).
LIFECYCLE_TEST=
if [ -z "${VM_CHECKS:-}" ] && command -v cargo >/dev/null; then
  # The same profile as the podhost under test: release, or debug for a target/debug one.
  profile=(--release)
  [[ "$PODHOST" == */debug/podhost ]] && profile=()
  LIFECYCLE_TEST=$(cargo test "${profile[@]}" --locked --test lifecycle --no-run --message-format=json |
    sed -n 's/.*"executable":"\([^"]*\/deps\/lifecycle-[^"]*\)".*/\1/p' | tail -1)
fi
step "podhost built ($(since "$t"))"

t=${EPOCHREALTIME/./}
SHARE=$VM_DIR/share
rm -rf "$SHARE"
mkdir -p "$SHARE/bin" "$SHARE/out"
install -m 0755 "$PODHOST" "$SHARE/bin/podhost"
# The per-container monitor the shim execs (crates/shim/src/monitor.rs), next to podhost.
install -m 0755 "$(dirname "$PODHOST")/podhost-monitor" "$SHARE/bin/podhost-monitor"
# The shim's own binary (src/shim_main.rs), which podhost execs per container.
install -m 0755 "$(dirname "$PODHOST")/podhost-shim" "$SHARE/bin/podhost-shim"
# Without debug info (a debug build's line tables are most of its 400 MB), so the
# guest's 1 GiB is not spent caching it.
strip --strip-debug "$SHARE/bin/podhost" "$SHARE/bin/podhost-monitor" "$SHARE/bin/podhost-shim"
bash oci/busybox/build.sh "$SHARE/busybox-oci" >/dev/null 2>"$VM_DIR/busybox-oci.log" || {
  cat "$VM_DIR/busybox-oci.log" >&2
  exit 1
}
# The seccomp probe (55-seccomp) in an image of its own: a static binary built here,
# since the guest has no compiler.
gcc -static -O2 -o "$VM_DIR/seccomp-probe" tests/vm/seccomp-probe.c ||
  { echo "vm-test: gcc -static failed (apt-get install gcc libc6-dev)" >&2; exit 1; }
bash oci/busybox/build.sh --ref localhost/seccomp-probe:latest --add "$VM_DIR/seccomp-probe" \
  "$SHARE/seccomp-probe-oci" >/dev/null 2>>"$VM_DIR/busybox-oci.log" || {
  cat "$VM_DIR/busybox-oci.log" >&2
  exit 1
}
cp -r tests/vm "$SHARE/suite"
if [ -n "${VM_CHECKS:-}" ]; then
  rm -rf "$SHARE/suite/checks"
  cp -r "$VM_CHECKS" "$SHARE/suite/checks"
fi
[ -z "${VM_SHARE_EXTRA:-}" ] || cp -a "$VM_SHARE_EXTRA" "$SHARE/extra"
if [ -n "$LIFECYCLE_TEST" ]; then
  install -m 0755 "$LIFECYCLE_TEST" "$SHARE/bin/lifecycle-test"
  strip --strip-debug "$SHARE/bin/lifecycle-test"
  # <target>/release/deps/lifecycle-HASH → <target>
  printf 'LIFECYCLE_TARGET_DIR=%q\n' "$(dirname "$(dirname "$(dirname "$LIFECYCLE_TEST")")")" \
    >"$SHARE/bin/lifecycle-test.env"
  # <target>/<profile>/deps/lifecycle-HASH → <profile> (release or debug)
  printf 'LIFECYCLE_PROFILE=%q\n' "$(basename "$(dirname "$(dirname "$LIFECYCLE_TEST")")")" \
    >>"$SHARE/bin/lifecycle-test.env"
fi
# 70-apparmor loads a renamed copy to test its rules on a privileged (rw /proc, /sys) container.
cp oci/apparmor/podhost-default "$SHARE/apparmor-podhost-default"
{
  printf 'CHECKS=%q\n' "${CHECKS:-*}"
  printf 'CHECK_TIMEOUT=%q\n' "${CHECK_TIMEOUT:-180}"
  printf 'DAEMON_CGROUP=%q\n' "${DAEMON_CGROUP:-system.slice/podhost}"
} >"$SHARE/suite.env"
# apparmor_parser (libc only) makes the guest an AppArmor host that can load profiles;
# nft and the nf_tables modules let the pod network publish hostPorts (85-pod-network).
NFT_MODS="nf_tables nft_chain_nat nft_nat nft_masq nft_ct nft_fib_inet nft_fib_ipv4 nft_fib_ipv6"
LIBS_FOR="$PODHOST ${LIFECYCLE_TEST:-}" EXTRA_BINS="/sbin/apparmor_parser /usr/sbin/nft${VM_EXTRA_BINS:+ $VM_EXTRA_BINS}" \
  EXTRA_MODS="veth bridge br_netfilter dummy loop $NFT_MODS" \
  bash vm/build-initramfs.sh "$KROOT" "$VM_DIR"
step "image, initramfs and share ready ($(since "$t"))"

# ---- 4. boot and run ----------------------------------------------------------------
t=${EPOCHREALTIME/./}
set +e
KERNEL=$VM_DIR/vmlinux
[ -s "$KERNEL" ] || KERNEL=$(compgen -G "$KROOT/boot/vmlinuz-*" | sort -V | tail -1)
INITRD=$VM_DIR/initramfs.cpio.gz KERNEL=$KERNEL TIMEOUT=${TIMEOUT:-900} \
  bash vm/run-vm.sh "$SHARE" suite/run.sh 2>&1 | tee "$VM_DIR/console.log"
rc=${PIPESTATUS[0]}
set -e
step "VM run finished with status $rc ($(since "$t"); whole script $(since "$t_start"))"

# ---- 5. verdict -------------------------------------------------------------------
# The guest appends one line per finished check to out/results ("PASS name" / "FAIL name:
# reason"), so a run that timed out or died still counts what it got through.
passed=0 failed=0
if [ -f "$SHARE/out/results" ]; then
  passed=$(grep -c '^PASS ' "$SHARE/out/results" || true)
  failed=$(grep -c '^FAIL ' "$SHARE/out/results" || true)
fi
case "$rc" in
  124) step "the VM run hit its time limit (TIMEOUT=${TIMEOUT:-900} s)" ;;
  125) step "the guest died without reporting a status (see $VM_DIR/console.log)" ;;
esac
# A failed run counts as at least one failure, even if no check got to record one.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
step "guest output kept in $SHARE/out/ (daemon.log, checks/, dmesg.txt)"
echo "vm-suite: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  [ "$rc" -ne 0 ] && exit "$rc"
  exit 1
fi
exit 0
