# shellcheck shell=bash
# 15-lifecycle: tests/lifecycle.rs itself on a pure cgroup v2 kernel. scripts/vm-test.sh
# builds its test binary (release, or debug when it tests a debug podhost) and puts it in
# the share (bin/lifecycle-test, with the target dir and profile it was built with,
# bin/lifecycle-test.env). The binary has two paths compiled in: podhost
# (<target>/<profile>/podhost, CARGO_BIN_EXE_podhost) and the busybox layout it
# would build (<target>/tmp/busybox-layout, CARGO_TARGET_TMPDIR); both are made here,
# from the share. Each test starts its own daemon, dirs and cgroup subtree, as on a host.
# Under TCG on a busy host each test takes 30-40 s, hence a longer watchdog:
# check-timeout: 480

share=$(dirname "$SUITE_DIR")
bin=$share/bin/lifecycle-test
[ -x "$bin" ] && [ -f "$bin.env" ] ||
  fail "no lifecycle test binary in the share: scripts/vm-test.sh builds it with cargo (is cargo on the host's PATH?)"
# shellcheck disable=SC1091
. "$bin.env"
[ -n "${LIFECYCLE_TARGET_DIR:-}" ] || fail "$bin.env names no LIFECYCLE_TARGET_DIR"
profile=${LIFECYCLE_PROFILE:-release}
mkdir -p "$LIFECYCLE_TARGET_DIR/$profile" "$LIFECYCLE_TARGET_DIR/tmp" ||
  fail "cannot make $LIFECYCLE_TARGET_DIR in the guest"
ln -sf "$share/bin/podhost" "$LIFECYCLE_TARGET_DIR/$profile/podhost"
ln -sf "$share/bin/podhost-monitor" "$LIFECYCLE_TARGET_DIR/$profile/podhost-monitor"
ln -sf "$share/bin/podhost-shim" "$LIFECYCLE_TARGET_DIR/$profile/podhost-shim"
rm -rf "$LIFECYCLE_TARGET_DIR/tmp/busybox-layout"
cp -r "$share/busybox-oci" "$LIFECYCLE_TARGET_DIR/tmp/busybox-layout"

# One test at a time: the guest's two vCPUs are slow under TCG.
out=$CHECK_OUT/lifecycle-test.log
mkdir -p "$CHECK_OUT"
# The guest's busybox has no `ip netns`: the test daemons use the guest's own network
# (pod networks have their own check, 85-pod-network).
PODHOST_TEST_SHARED_NETWORK=1 RUST_BACKTRACE=1 "$bin" --test-threads 1 >"$out" 2>&1
rc=$?
grep -E '^test |^test result' "$out" | sed 's/^/  /'
if [ "$rc" -ne 0 ]; then
  sed -n '/^failures:$/,$p' "$out" | head -60 | sed 's/^/  /'
  fail "tests/lifecycle.rs failed on cgroup v2 (exit $rc; whole output in out/checks/$(basename "$CHECK_OUT")/lifecycle-test.log)"
fi
grep -q '^test result: ok\. [1-9]' "$out" || fail "no lifecycle test passed: $(grep '^test result' "$out")"
