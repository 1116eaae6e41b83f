#!/usr/bin/env bash
# Two revisions of podhost side by side in one run on this machine: what a build costs
# (cold and warm release builds, an incremental rebuild after a one-line change in the
# model) and what it gives (binary sizes, the shims' memory, start latency, churn).
# Written for the workspace split (issue 32): BEFORE the single crate, AFTER the crates.
#
# usage: scripts/bench-build.sh BEFORE_REV [AFTER_REV]      (as root; AFTER_REV: HEAD)
#   e.g. scripts/bench-build.sh 512c4ba HEAD
#
# For each revision, in a git worktree of its own with a target directory of its own:
#   1. cold: `cargo build --release --locked`, every dependency compiled (wall and CPU);
#   2. warm: the same command again, nothing changed (wall);
#   3. incremental: one line appended to the model's root file (a `pub const`; the
#      crate's lib.rs after the split, src/model/mod.rs before), then the same command;
#   4. the sizes of podhost, podhost-shim and podhost-monitor (as built in 1);
#   5. scripts/bench_podhost.py (this checkout's, the same harness for both) against a
#      daemon of that build with --pod-network none: start p50/p99, churn, the shims'
#      RSS/PSS, the daemon's idle CPU and RSS.
# The revisions build one after the other, never at once: run it on an idle machine
# (the figures are wall times; the load is printed). ~1 h on 2 cores.
# Env: PODS (bench_podhost.py's start series and burst, default 100), CHURN_PODS (300),
#      IDLE_PODS (100), RESULTS (default /tmp/bench-results/build-<UTC stamp>),
#      KEEP_WORK=1 (keep the worktrees and their target directories).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
[ "$(id -u)" -eq 0 ] || { echo "scripts/bench-build.sh must run as root (the daemon runs pods)" >&2; exit 1; }
[ $# -ge 1 ] || { sed -n '2,22p' "$0"; exit 2; }
before=$(git rev-parse --short "$1")
after=$(git rev-parse --short "${2:-HEAD}")
export PODS=${PODS:-100} CHURN_PODS=${CHURN_PODS:-300} IDLE_PODS=${IDLE_PODS:-100}
RESULTS=${RESULTS:-/tmp/bench-results/build-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS"
bash scripts/install-deps.sh python3 time >/dev/null
base=$(mktemp -d /tmp/podhost-bench-build.XXXXXX)
# shellcheck source=scripts/bench_daemon.sh
. scripts/bench_daemon.sh
finish() {
  bench_daemon_stop
  if [ -z "${KEEP_WORK:-}" ]; then
    for rev in "$before" "$after"; do
      git -C "$REPO" worktree remove --force "$base/$rev" 2>/dev/null || true
    done
    rm -rf "$base"
  else
    echo "kept: $base" >&2
  fi
}
trap finish EXIT

# wall seconds and CPU seconds (user + system, children included) of "$@", into $2 as
# "WALL CPU"; the command's output into $1.
timed() {
  local log=$1 out=$2
  shift 2
  /usr/bin/time -f '%e %U %S' -o "$out.time" "$@" >"$log" 2>&1
  awk '{ printf "%.1f %.1f\n", $1, $2 + $3 }' "$out.time" >"$out"
  rm -f "$out.time"
}

for rev in "$before" "$after"; do
  work=$base/$rev
  git worktree add --detach "$work" "$rev" >/dev/null 2>&1
  export CARGO_TARGET_DIR=$work/target
  echo "== $rev: load before $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd "$work" && timed "$RESULTS/$rev-cold.log" "$RESULTS/$rev-cold" cargo build --release --locked)
  echo "cold release build: $(cut -d' ' -f1 "$RESULTS/$rev-cold") s wall, $(cut -d' ' -f2 "$RESULTS/$rev-cold") s CPU"
  (cd "$work" && timed "$RESULTS/$rev-warm.log" "$RESULTS/$rev-warm" cargo build --release --locked)
  echo "warm release build: $(cut -d' ' -f1 "$RESULTS/$rev-warm") s"
  mkdir -p "$work/bin"
  for b in podhost podhost-shim podhost-monitor; do
    cp "$CARGO_TARGET_DIR/release/$b" "$work/bin/"
  done
  stat -c '%n %s' "$work"/bin/* | sed "s|$work/bin/||" >"$RESULTS/$rev-sizes"
  model_root=$work/crates/model/src/lib.rs
  [ -f "$model_root" ] || model_root=$work/src/model/mod.rs
  echo 'pub const BENCH_BUILD_ONE_LINE: u32 = 1;' >>"$model_root"
  (cd "$work" && timed "$RESULTS/$rev-incr.log" "$RESULTS/$rev-incr" cargo build --release --locked)
  echo "incremental release build (one line in ${model_root#"$work"/}): $(cut -d' ' -f1 "$RESULTS/$rev-incr") s"
  unset CARGO_TARGET_DIR
  echo "== $rev: bench_podhost.py ($PODS pods, churn $CHURN_PODS, $IDLE_PODS idle)"
  run=$base/run-$rev
  mkdir -p "$run"
  bench_daemon_start "$work/bin/podhost" "$run" "bb$$" "podhost-bench-build-$$" \
    "$RESULTS/$rev-daemon.log" --pod-network none --eviction-hard=
  LOG_DIR=$run/logs python3 scripts/bench_podhost.py "$run/sock" "$run/manifests" "bb$$" \
    "$run/root" "$pid" "$PODS" "$RESULTS/$rev-podhost.json" >"$RESULTS/$rev-podhost.txt"
  bench_daemon_stop
  bench_work= pid=
done

python3 - "$RESULTS" "$before" "$after" <<'EOF' | tee "$RESULTS/table.md"
import json, sys
res, revs = sys.argv[1], sys.argv[2:]
def pair(name):
    return [open("%s/%s-%s" % (res, r, name)).read().split() for r in revs]
def sizes(r):
    return dict((l.split()[0], int(l.split()[1])) for l in open("%s/%s-sizes" % (res, r)))
bench = [json.load(open("%s/%s-podhost.json" % (res, r))) for r in revs]
rows = []
c = pair("cold")
rows.append(("cold release build, wall (CPU), s", "%s (%s)" % tuple(c[0]), "%s (%s)" % tuple(c[1]), float(c[1][0]) / float(c[0][0])))
w = pair("warm")
rows.append(("warm release build (nothing changed), s", w[0][0], w[1][0], None))
i = pair("incr")
rows.append(("incremental release build (one line in the model), wall (CPU), s", "%s (%s)" % tuple(i[0]), "%s (%s)" % tuple(i[1]), float(i[1][0]) / float(i[0][0])))
s = [sizes(r) for r in revs]
for b in ("podhost", "podhost-shim", "podhost-monitor"):
    rows.append(("%s, MB" % b, "%.1f" % (s[0][b] / 1e6), "%.1f" % (s[1][b] / 1e6), s[1][b] / s[0][b]))
for key, label in (("shim_rss_mib", "per-container process RSS, MiB"),
                   ("shim_pss_mib", "per-container process PSS, MiB"),
                   ("churn_ms_per_pod", "churn, ms per pod"),
                   ("start_p50_ms", "start p50, ms"),
                   ("start_p99_ms", "start p99, ms"),
                   ("daemon_rss_mib_idle", "daemon RSS with the idle pods, MiB"),
                   ("daemon_idle_cpu_pct", "daemon idle CPU, % of a core")):
    a, b = bench[0].get(key), bench[1].get(key)
    rows.append((label, a, b, (b / a) if a and b else None))
print("| | %s (before) | %s (after) | after/before |" % tuple(revs))
print("|---|---|---|---|")
for label, a, b, r in rows:
    print("| %s | %s | %s | %s |" % (label, a, b, "%.2f" % r if r is not None else ""))
EOF
echo "results: $RESULTS"
