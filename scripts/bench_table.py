#!/usr/bin/env python3
"""Prints scripts/bench.sh's table (Markdown) from RESULTS/{podhost,peers,pull}.json:
each figure, the peer's figure, the ratio, the goal of issue 12 and whether it is met.

usage: bench_table.py RESULTS
"""
import json
import os
import platform
import subprocess
import sys
import time

results = sys.argv[1]


def load(name):
    try:
        with open(os.path.join(results, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


ph, peers, pull = load("podhost"), load("peers"), load("pull")


def version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
        return out.splitlines()[0].split()[-1] if out else "-"
    except (OSError, subprocess.TimeoutExpired):
        return "-"


def fmt(v, unit=""):
    if v is None:
        return "–"
    return "%s%s" % (v, unit)


rows = []


def row(what, ours, peer_name, peer, goal_text, met):
    ratio = "–"
    if isinstance(ours, (int, float)) and isinstance(peer, (int, float)) and peer:
        ratio = "%.2f" % (ours / peer)
    verdict = "–" if met is None else ("yes" if met else "**no**")
    rows.append((what, fmt(ours), "%s %s" % (peer_name, fmt(peer)) if peer_name else "–", ratio, goal_text, verdict))


def le(v, bound):
    return None if v is None else v <= bound


g = ph.get
row("container churn, ms per pod (/bin/true: create → exit → removed)", g("churn_ms_per_pod"),
    "crun run", peers.get("crun_run_p50_ms"), "≤ crun", le(g("churn_ms_per_pod"), peers.get("crun_run_p50_ms") or -1))
row("", None, "runc run", peers.get("runc_run_p50_ms"), "", None)
row("churn, pods/s sustained (8 in flight)", g("churn_pods_per_s"), "crun", peers.get("crun_containers_per_s"),
    "≥ 150", None if g("churn_pods_per_s") is None else g("churn_pods_per_s") >= 150)
row("pod start p50, ms (manifest → Running)", g("start_p50_ms"), "podman kube play", peers.get("podman_play_p50_ms"),
    "≤ 25", le(g("start_p50_ms"), 25))
row("pod start p99, ms", g("start_p99_ms"), "podman kube play", peers.get("podman_play_p99_ms"), "≤ 60", le(g("start_p99_ms"), 60))
row("100 pods at once → all Running, ms", g("burst_all_running_ms"), None, None, "≤ 2000", le(g("burst_all_running_ms"), 2000))
row("exit → status p50, ms", g("exit_seen_p50_ms"), None, None, "", None)
row("exit → status p99, ms", g("exit_seen_p99_ms"), None, None, "≤ 5", le(g("exit_seen_p99_ms"), 5))
row("removal → container exited on SIGTERM p50, ms", g("removal_to_exit_p50_ms"), None, None, "≤ 10 (to the stop signal)",
    le(g("removal_to_exit_p50_ms"), 10))
row("removal → container exited p99, ms", g("removal_to_exit_p99_ms"), None, None, "", None)
row("per-container monitor PSS, MiB", g("shim_pss_mib"), "conmon", peers.get("conmon_pss_mib"), "≤ 0.5", le(g("shim_pss_mib"), 0.5))
row("per-container monitor RSS, MiB", g("shim_rss_mib"), "conmon", peers.get("conmon_rss_mib"), "≤ 2.5", le(g("shim_rss_mib"), 2.5))
row("daemon RSS with %s pods, MiB" % g("idle_pods", "?"), g("daemon_rss_mib_idle"), None, None, "≤ 30", le(g("daemon_rss_mib_idle"), 30))
row("daemon idle CPU with %s pods, %% of a core" % g("idle_pods", "?"), g("daemon_idle_cpu_pct"), None, None, "< 0.5",
    None if g("daemon_idle_cpu_pct") is None else g("daemon_idle_cpu_pct") < 0.5)
for image in ("small", "big"):
    for peer in ("skopeo", "podman"):
        for way in ("podhost", "daemon"):
            v = pull.get("pull_%s_%s_vs_%s" % (way, image, peer))
            row("pull %s image, %s / %s (wall)" % (image, "podhost pull" if way == "daemon" else "one process", peer),
                v, None, None, "≤ 1.0", le(v, 1.0))

print("scripts/bench.sh — %s, %s, %d cores, kernel %s, load %.2f; runc %s, crun %s, podman %s" % (
    time.strftime("%Y-%m-%d", time.gmtime()), platform.machine(), os.cpu_count(), platform.release(),
    os.getloadavg()[0], version(["runc", "--version"]), version(["crun", "--version"]), version(["podman", "--version"])))
fs = os.path.join(results, "filesystem.txt")
if os.path.exists(fs):
    print("everything the run wrote was on %s" % open(fs).read().strip())
for k in ("runc_error", "crun_error", "podman_error"):
    if k in peers:
        print("%s: %s" % (k, peers[k]))
print()
print("| measurement | podhost | peer | ratio | goal | met |")
print("|---|---|---|---|---|---|")
for r in rows:
    print("| %s |" % " | ".join(str(c) for c in r))
