#!/usr/bin/env bash
# The container churn where users run podhost, a pure cgroup v2 kernel: podhost against
# crun in one run, inside the throwaway QEMU guest of scripts/vm-test.sh (Debian 12's
# kernel, full root; see vm/README.md), on the same image (the built-in busybox). The
# host's own cgroups are hybrid, so scripts/bench.sh's churn is not measured there.
#
# usage: scripts/bench-vm.sh                      # as root; N = 300
#        CHURN_PODS=100 scripts/bench-vm.sh       # a shorter run
#
# In the guest (tests/vm/bench/churn.sh), one after the other:
#   - podhost: the release daemon with --pod-network none (and --eviction-hard=, as
#     bench.sh runs it), then scripts/bench_podhost.py's churn series alone
#     (CHURN_ONLY=1): N one-container pods running /bin/true, restartPolicy Never, 8 in
#     flight, created -> Succeeded -> manifest removed -> gone. Its figure: wall time / N.
#   - crun: scripts/bench_peers.py's crun part alone (PEERS=crun): `crun run` (create,
#     start, wait, delete) of /bin/true, N times back to back, in the bundle bench.sh's
#     run makes (bench_peers.py unpacks it with umoci, here on the host). Its figure: the
#     p50 of one run, as bench.sh's table takes it (the mean is shown too).
# Then it prints one table: ms per container of both, the ratio, the goal (podhost <= 1.5x
# crun) and whether it is met, with the guest's kernel, cgroup mode, CPUs and qemu's
# accelerator, and the host CPU that other processes used while each series ran (a
# build next to the run skews the figures, one series more than the other: run it on an
# idle host). Under TCG (no vmx/svm here) everything runs many times slower than on the
# host: the ratio is the figure to compare, not the milliseconds.
#
# Env: CHURN_PODS (N, default 300), SMP (2) and MEM (1024 MiB) as vm-test.sh, PODHOST_BIN
#      (the podhost binary to test, with podhost-shim and podhost-monitor next to it;
#      default: `cargo build --release --locked`, then target/release/podhost), RESULTS
#      (summary.json, the guest's guest/podhost/crun.json, host-cpu.json, the table and
#      the logs; default /tmp/bench-results/vm-<UTC stamp>), TIMEOUT (the whole VM run, s;
#      default 900 + 10 s per pod), ACCEL and VM_DIR as vm-test.sh.
# The guest has no network and no package manager: crun and python3 are installed on the
# host (scripts/install-deps.sh, as bench.sh does) and go into the initramfs with their
# libraries (vm-test.sh's VM_EXTRA_BINS); the Python standard library, the bench scripts
# and crun's bundle go over the share (VM_SHARE_EXTRA).
# Exit: 0 when both figures were measured (met or not), else non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
t_start=${EPOCHREALTIME/./}
say() { printf 'bench-vm: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "scripts/bench-vm.sh must run as root (vm-test.sh: apt, 9p passthrough share)"
CHURN_PODS=${CHURN_PODS:-300}
case "$CHURN_PODS" in '' | *[!0-9]* | 0) die "CHURN_PODS must be a positive number, not '$CHURN_PODS'" ;; esac
TIMEOUT=${TIMEOUT:-$((900 + 10 * CHURN_PODS))}
case "$TIMEOUT" in '' | *[!0-9]*) die "TIMEOUT must be a number of seconds, not '$TIMEOUT'" ;; esac
[ "$TIMEOUT" -ge 300 ] || die "TIMEOUT=$TIMEOUT is too short for a VM run (300 s at least)"
VM_DIR=${VM_DIR:-$REPO/target/vm}
RESULTS=${RESULTS:-/tmp/bench-results/vm-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)

# ---- host tools -----------------------------------------------------------------------
bash scripts/install-deps.sh python3 crun umoci
for t in /usr/bin/python3 /usr/bin/crun umoci; do
  command -v "$t" >/dev/null || die "$t is missing after scripts/install-deps.sh (apt-get install python3 crun umoci)"
done

# ---- podhost --------------------------------------------------------------------------
if [ -z "${PODHOST_BIN:-}" ]; then
  command -v cargo >/dev/null || die "cargo (Rust, see scripts/install-deps.sh) is needed to build podhost, or set PODHOST_BIN"
  say "building the release podhost (waits while another cargo holds the build lock)"
  cargo build --release --locked
  PODHOST_BIN=$REPO/target/release/podhost
fi
PODHOST_BIN=$(realpath "$PODHOST_BIN")
for b in "$PODHOST_BIN" "$(dirname "$PODHOST_BIN")/podhost-shim" "$(dirname "$PODHOST_BIN")/podhost-monitor"; do
  [ -x "$b" ] || die "$b is missing: podhost-shim and podhost-monitor must sit next to PODHOST_BIN (cargo build --release builds all three)"
done

# ---- what the guest gets --------------------------------------------------------------
stage=$(mktemp -d /tmp/podhost-bench-vm.XXXXXX)
vm_pid=
sampler=
cleanup() {
  local rc=$?
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; fi
  # The VM run (vm-test.sh, qemu under run-vm.sh's timeout) is a process group of its own.
  if [ -n "$vm_pid" ] && kill -0 "$vm_pid" 2>/dev/null; then
    say "stopping the VM run (process group $vm_pid)"
    kill -TERM -- "-$vm_pid" 2>/dev/null || true
    wait "$vm_pid" 2>/dev/null || true
  fi
  rm -rf "$stage"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

extra=$stage/extra
mkdir -p "$extra/python/lib"
cp scripts/bench_podhost.py scripts/bench_peers.py scripts/bench_common.py "$extra/"
# The standard library of the python3 that goes into the initramfs, as its PYTHONHOME
# (compiled modules kept: tar keeps the mtimes they were compiled against). The initramfs
# names the binary after its target (python3.X): the guest links python3 to it.
pyver=$(/usr/bin/python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
printf 'CHURN_PODS=%q\nPYTHON=%q\n' "$CHURN_PODS" "$pyver" >"$extra/bench.env"
[ -f "/usr/lib/$pyver/os.py" ] || die "/usr/lib/$pyver/os.py missing: the standard library of /usr/bin/python3 (apt-get install --reinstall libpython3-stdlib)"
tar -C /usr/lib -cf - --exclude="$pyver/test" --exclude="$pyver/idlelib" \
  --exclude="$pyver/tkinter" --exclude="$pyver/lib2to3" --exclude="$pyver/ensurepip" \
  --exclude="$pyver/pydoc_data" --exclude="$pyver/site-packages" \
  --exclude="$pyver/dist-packages" --exclude="$pyver/config-*" \
  --exclude="$pyver/sitecustomize.py" "$pyver" | tar -C "$extra/python/lib" -xf -
# crun's bundle, made as in bench.sh's run: the same layout, unpacked by bench_peers.py
# (umoci; no peer measured with PEERS empty).
bash oci/busybox/build.sh --ref latest "$stage/layout" >/dev/null 2>"$stage/layout.log" ||
  { cat "$stage/layout.log" >&2; die "oci/busybox/build.sh failed"; }
mkdir -p "$stage/crun"
PEERS='' python3 scripts/bench_peers.py "$stage/crun" "$stage/layout" 0 0 "$stage/none.json" >/dev/null
[ -f "$stage/crun/bundle/config.json" ] || die "bench_peers.py made no bundle in $stage/crun/bundle"
tar -C "$stage/crun" -cf "$extra/crun-bundle.tar" bundle
say "share extra: $(du -sh "$extra" | cut -f1) (python $pyver standard library, bench scripts, crun bundle)"

# ---- the VM run -----------------------------------------------------------------------
say "N = $CHURN_PODS; VM time limit ${TIMEOUT} s; results in $RESULTS"
t_vm=${EPOCHREALTIME/./}
rc=0
# setsid (no fork: a background job is no group leader) makes the run a process group the
# trap can stop whole.
CHECKS='*' VM_CHECKS=tests/vm/bench VM_SHARE_EXTRA=$extra \
  VM_EXTRA_BINS="/usr/bin/python3 /usr/bin/crun" PODHOST_BIN=$PODHOST_BIN VM_DIR=$VM_DIR \
  TIMEOUT=$TIMEOUT CHECK_TIMEOUT=$((TIMEOUT - 120)) \
  setsid bash scripts/vm-test.sh > >(tee "$RESULTS/vm-test.log") 2>&1 &
vm_pid=$!
# The host is shared, and anything else running on it slows the guest (under TCG, by a
# lot). Every 2 s: the host CPU time that neither the VM run (its process group) nor this
# sampler used, by phase of the guest's run (its progress lines in the log). Reported in
# the table, not asserted.
python3 - "$RESULTS/vm-test.log" "$vm_pid" "$RESULTS/host-cpu.json" <<'EOF' &
import json, os, sys, time
log, pgid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
hz = os.sysconf("SC_CLK_TCK")
MARKS = [("podhost: churn of", "podhost"), ("runs of /bin/true", "crun"), ("PASS churn", "after"), ("FAIL churn", "after")]


def host_busy():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system irq softirq steal


def stat(pid):
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[2]), int(f[11]) + int(f[12])  # process group, utime + stime


def ours():
    t = stat("self")[1]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                group, cpu = stat(d)
            except (OSError, IndexError, ValueError):
                continue
            if group == pgid:
                t += cpu
    return t


def phase():
    try:
        text = open(log, errors="replace").read()
    except OSError:
        return "setup"
    at, name = -1, "setup"
    for mark, n in MARKS:
        i = text.rfind(mark)
        if i > at:
            at, name = i, n
    return name


phases = {}
b0, o0, t0 = host_busy(), ours(), time.time()
while True:
    time.sleep(2)
    b1, o1, t1 = host_busy(), ours(), time.time()
    p = phases.setdefault(phase(), {"seconds": 0.0, "other_cpu_s": 0.0})
    p["seconds"] += t1 - t0
    # A process of the group that ended since the last sample counts as "other": only
    # vm-test.sh's short set-up steps, none while the guest measures.
    p["other_cpu_s"] += max(0, (b1 - b0) - (o1 - o0)) / hz
    b0, o0, t0 = b1, o1, t1
    for q in phases.values():
        q["other_cpu_pct_of_a_core"] = round(100 * q["other_cpu_s"] / q["seconds"], 1)
    with open(out + ".tmp", "w") as f:
        json.dump(phases, f, indent=1)
    os.replace(out + ".tmp", out)
EOF
sampler=$!
wait "$vm_pid" || rc=$?
vm_pid=
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=
vm_secs=$(((${EPOCHREALTIME/./} - t_vm) / 1000000))

out=$VM_DIR/share/out
for f in guest.json podhost.json crun.json daemon.log; do
  if [ -f "$out/checks/churn/$f" ]; then cp "$out/checks/churn/$f" "$RESULTS/"; fi
done
cp "$VM_DIR/console.log" "$RESULTS/console.log" 2>/dev/null || true
accel=$(sed -n 's/^run-vm: accel=\([a-z]*\) .*/\1/p' "$VM_DIR/console.log" 2>/dev/null | tail -1)
if [ "$rc" -ne 0 ] || [ ! -f "$RESULTS/podhost.json" ] || [ ! -f "$RESULTS/crun.json" ]; then
  die "the VM run failed (vm-test.sh status $rc); see $RESULTS/vm-test.log, $RESULTS/console.log and $out/"
fi

# ---- the table ------------------------------------------------------------------------
wall_secs=$(((${EPOCHREALTIME/./} - t_start) / 1000000))
rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
python3 - "$RESULTS" "$CHURN_PODS" "${accel:-?}" "$vm_secs" "$wall_secs" "$PODHOST_BIN" "$rev" <<'EOF' | tee "$RESULTS/table.md"
import json, os, sys, time
results, n, accel = sys.argv[1], int(sys.argv[2]), sys.argv[3]
vm_secs, wall_secs, podhost_bin, rev = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
def load(name):
    with open(os.path.join(results, name + ".json")) as f:
        return json.load(f)
guest, ph, cr = load("guest"), load("podhost"), load("crun")
try:
    host = load("host-cpu")
except (OSError, ValueError):
    host = {}
GOAL = 1.5
ours, peer = ph["churn_ms_per_pod"], cr["crun_run_p50_ms"]
peer_mean = round(1000 / cr["crun_containers_per_s"], 1)
ratio = ours / peer
summary = {
    "churn_pods": n,
    "podhost_churn_ms_per_pod": ours,
    "podhost_churn_pods_per_s": ph["churn_pods_per_s"],
    "crun_run_p50_ms": peer,
    "crun_run_mean_ms": peer_mean,
    "crun_containers_per_s": cr["crun_containers_per_s"],
    "ratio_vs_crun_p50": round(ratio, 2),
    "ratio_vs_crun_mean": round(ours / peer_mean, 2),
    "goal_ratio_max": GOAL,
    "goal_met": ratio <= GOAL,
    "guest": guest,
    "accel": accel,
    "podhost_bin": podhost_bin,
    "repo_revision": rev,
    "host_cpu_outside_vm": host,
    "vm_run_s": vm_secs,
    "wall_s": wall_secs,
}
with open(os.path.join(results, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
print("scripts/bench-vm.sh — %s; guest: kernel %s, cgroup %s, %d vCPUs, %d MiB, qemu accel %s; %s (%s, repo %s); %s; N = %d" % (
    time.strftime("%Y-%m-%d", time.gmtime()), guest["kernel"], guest["cgroup_mode"], guest["cpus"],
    guest["mem_mib"], accel, guest["podhost"], podhost_bin, rev, guest["crun"], n))
print()
print("| measurement | podhost | crun | ratio | goal | met |")
print("|---|---|---|---|---|---|")
print("| container churn, ms per container (/bin/true: create → exit → removed) | %s | %s (p50 of `crun run`; mean %s) | %.2f (%.2f to the mean) | ≤ %.1f× crun | %s |" % (
    ours, peer, peer_mean, ratio, ours / peer_mean, GOAL, "yes" if ratio <= GOAL else "**no**"))
print("| containers per second (podhost: 8 in flight; crun: one after the other) | %s | %s | – | – | – |" % (
    ph["churn_pods_per_s"], cr["crun_containers_per_s"]))
print()
busy = []
for name, what in (("podhost", "podhost's series"), ("crun", "crun's")):
    if name in host:
        busy.append("%s %.1f %% of a core (%.0f s)" % (what, host[name]["other_cpu_pct_of_a_core"], host[name]["seconds"]))
print("host CPU used outside the VM: %s" % ("; ".join(busy) or "not sampled"))
if any(host.get(n, {}).get("other_cpu_pct_of_a_core", 0) > 10 for n in ("podhost", "crun")):
    print("**the host was busy while the guest measured: the figures are skewed; run again on an idle host**")
print("VM run %d s, whole script %d s; raw figures in %s" % (vm_secs, wall_secs, results))
EOF
