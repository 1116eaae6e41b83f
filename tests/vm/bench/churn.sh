# shellcheck shell=bash
# churn: the guest side of scripts/bench-vm.sh (a benchmark, not a check of the suite:
# vm-test.sh runs it instead of tests/vm/checks/ when VM_CHECKS=tests/vm/bench). On this
# kernel (pure cgroup v2), one after the other, on the same busybox image:
#   1. podhost. The suite's daemon is stopped, and a daemon is started the way
#      scripts/bench.sh starts one: --pod-network none, --eviction-hard= (no eviction),
#      the default logging, the same dirs (the image is loaded already), in a service
#      cgroup delegated as systemd does (bench.slice/podhost.service, see below). Then
#      scripts/bench_podhost.py runs its churn series alone (CHURN_ONLY=1): CHURN_PODS
#      one-container pods running /bin/true, restartPolicy Never, 8 in flight, created ->
#      Succeeded -> manifest removed -> gone. The daemon is stopped before crun runs.
#   2. crun. scripts/bench_peers.py's crun part (PEERS=crun): `crun run` of /bin/true,
#      CHURN_PODS times back to back, in the bundle bench-vm.sh unpacked on the host with
#      bench_peers.py's own code (copied to /tmp, the tmpfs podhost's root dir is on too).
# The share's extra/ (vm-test.sh's VM_SHARE_EXTRA) holds bench.env (CHURN_PODS), the bench
# scripts, python/ (the host's Python standard library, as PYTHONHOME) and
# crun-bundle.tar; python3 and crun are in the initramfs (VM_EXTRA_BINS). Results, in
# $CHECK_OUT: guest.json (kernel, cgroup mode, versions), podhost.json, crun.json,
# daemon.log (the benchmark daemon's). Nothing here is timed against a bound.

EXTRA=$(dirname "$SUITE_DIR")/extra
[ -f "$EXTRA/bench.env" ] || fail "no $EXTRA/bench.env: run this through scripts/bench-vm.sh"
# shellcheck disable=SC1091 # written by scripts/bench-vm.sh
. "$EXTRA/bench.env"
: "${CHURN_PODS:?bench.env sets no CHURN_PODS}"
mkdir -p "$CHECK_OUT"

# ---- the tools ------------------------------------------------------------------------
export PYTHONHOME=$EXTRA/python PYTHONDONTWRITEBYTECODE=1
# The initramfs has the interpreter under its real name (bench.env's PYTHON, python3.X);
# the bench scripts run "python3".
command -v "${PYTHON:-python3}" >/dev/null || fail "${PYTHON:-python3} is not in the initramfs (VM_EXTRA_BINS)"
command -v python3 >/dev/null || ln -s "$(command -v "$PYTHON")" /usr/local/bin/python3
command -v crun >/dev/null || fail "crun is not in the initramfs (VM_EXTRA_BINS)"
out=$(python3 -c 'import json, http.client, statistics, subprocess, threading, glob' 2>&1) ||
  fail "python3 cannot import the bench's modules with PYTHONHOME=$PYTHONHOME: $out"
out=$(crun --version 2>&1) || fail "crun --version failed: $out"
info "versions: $(printf '%s\n' "$out" | head -1); $(podhost --version); python $(python3 -c 'import platform; print(platform.python_version())')"

# The guest as the benchmark sees it: kernel, cgroup hierarchy, CPUs, memory.
python3 - "$CHECK_OUT/guest.json" <<'EOF' || fail "could not describe the guest"
import json, os, platform, subprocess, sys
mounts = [line.split() for line in open("/proc/mounts")]
v2 = [m[1] for m in mounts if m[2] == "cgroup2"]
v1 = [m[1] for m in mounts if m[2] == "cgroup"]
if v2 == ["/sys/fs/cgroup"] and not v1:
    mode = "unified (cgroup v2 only)"
elif v2 and v1:
    mode = "hybrid"
elif v1:
    mode = "legacy (cgroup v1)"
else:
    mode = "none"
mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal:"))
def first_line(cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
json.dump({
    "kernel": platform.release(),
    "kernel_version": platform.version(),
    "cgroup_mode": mode,
    "cgroup2_mounts": v2,
    "cgroup1_mounts": v1,
    "cgroup_controllers": open("/sys/fs/cgroup/cgroup.subtree_control").read().split(),
    "cpus": os.cpu_count(),
    "mem_mib": mem // 1024,
    "crun": first_line(["crun", "--version"]),
    "podhost": first_line(["podhost", "--version"]),
}, open(sys.argv[1], "w"), indent=1)
EOF
info "guest: $(tr -d '\n' <"$CHECK_OUT/guest.json" | tr -s ' ')"

# ---- podhost --------------------------------------------------------------------------
# stopped PID: the process has exited (run.sh's daemon stays a zombie until run.sh reaps it).
stopped() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  case "$st" in '' | Z | X) return 0 ;; *) return 1 ;; esac
}
kill -TERM "$DAEMON_PID" 2>/dev/null
wait_until 60 "the suite's daemon (pid $DAEMON_PID) to exit on SIGTERM" stopped "$DAEMON_PID"

# A service cgroup the way systemd delegates one (Delegate=yes) on a Debian 12 host: in a
# slice whose children get cpuset, cpu, io, memory and pids, and nothing else (vm/init
# enables hugetlb, rdma and misc for the root's children too). Not run.sh's
# system.slice/podhost: its daemon enabled controllers there for its children, so no
# process may join it again (EBUSY). The suite's DAEMON_CGROUP=/ keeps the root cgroup.
cg=$(sed -n 's/^DAEMON_CGROUP=//p' "$(dirname "$SUITE_DIR")/suite.env" | head -1)
cg=${cg:-system.slice/podhost}
cg=${cg#/}
if [ -n "$cg" ]; then
  slice=/sys/fs/cgroup/bench.slice
  mkdir -p "$slice" || fail "cannot create the cgroup $slice"
  for c in cpuset cpu io memory pids; do
    echo "+$c" >"$slice/cgroup.subtree_control" || fail "cannot enable the $c controller in $slice"
  done
  cg=bench.slice/podhost.service
  mkdir -p "/sys/fs/cgroup/$cg" || fail "cannot create the cgroup /$cg"
fi
# A host has a resolver configuration, which each pod gets a copy of; the guest has none
# (the daemon would warn for every pod instead). No DNS is asked for: a documentation
# address.
[ -e /etc/resolv.conf ] || printf 'nameserver 192.0.2.53\n' >/etc/resolv.conf
bench_log=$CHECK_OUT/daemon.log
(
  [ -z "$cg" ] || echo "$BASHPID" >"/sys/fs/cgroup/$cg/cgroup.procs" ||
    { echo "cannot move the daemon into /$cg"; exit 1; }
  exec podhost daemon --pod-manifest-path "$PODHOST_MANIFESTS" --root-dir "$PODHOST_ROOT" \
    --log-dir "$PODHOST_LOGS" --socket "$PODHOST_SOCKET" --node-name "$NODE" \
    --pod-network none --eviction-hard=
) </dev/null >"$bench_log" 2>&1 &
bench_daemon=$!
# shellcheck disable=SC2317 # called by the trap
stop_bench_daemon() {
  [ -n "${bench_daemon:-}" ] || return 0
  kill -TERM "$bench_daemon" 2>/dev/null && wait "$bench_daemon" 2>/dev/null
  bench_daemon=
}
trap stop_bench_daemon EXIT
daemon_answers() { podhost_cli get pods -o json >/dev/null 2>&1; }
for _ in $(seq 1 300); do
  daemon_answers && break
  if ! kill -0 "$bench_daemon" 2>/dev/null; then
    cat "$bench_log"
    fail "the benchmark daemon exited at start (see out/checks/$CHECK_NAME/daemon.log)"
  fi
  sleep 0.2
done
daemon_answers || fail "the benchmark daemon does not answer on $PODHOST_SOCKET after 60 s"
info "benchmark daemon up (pid $bench_daemon, cgroup $(cgroup_of "$bench_daemon"), controllers there: $(cat "/sys/fs/cgroup${cg:+/$cg}/cgroup.controllers"); --pod-network none)"

info "podhost: churn of $CHURN_PODS pods (8 in flight)"
export CHURN_PODS
CHURN_ONLY=1 python3 "$EXTRA/bench_podhost.py" "$PODHOST_SOCKET" \
  "$PODHOST_MANIFESTS" "$NODE" "$PODHOST_ROOT" "$bench_daemon" "$CHURN_PODS" \
  "$CHECK_OUT/podhost.json" || fail "bench_podhost.py failed (daemon log: $bench_log)"
stop_bench_daemon

# ---- crun -----------------------------------------------------------------------------
work=/tmp/bench-crun
rm -rf "$work"
mkdir -p "$work"
tar -xf "$EXTRA/crun-bundle.tar" -C "$work" || fail "cannot unpack $EXTRA/crun-bundle.tar"
[ -f "$work/bundle/config.json" ] || fail "crun-bundle.tar has no bundle/config.json"
info "crun: $CHURN_PODS runs of /bin/true, one after the other"
# LAYOUT is not read: the bundle is there already.
PEERS=crun python3 "$EXTRA/bench_peers.py" "$work" /nonexistent "$CHURN_PODS" 0 "$CHECK_OUT/crun.json" ||
  fail "bench_peers.py failed"
if grep -q '"crun_error"' "$CHECK_OUT/crun.json"; then
  fail "crun failed: $(tr -d '\n' <"$CHECK_OUT/crun.json" | head -c 400)"
fi
rm -rf "$work"
