#!/usr/bin/env python3
"""The daemon's idle cost with PODS pods running (scripts/bench-idle.sh's measurement).

usage: bench_idle.py SOCKET MANIFEST_DIR NODE DAEMON_PID PODS SECONDS [--keep]

Writes PODS busybox pods (`sleep`, restartPolicy Always), waits until the API shows all
of them Running, lets the daemon settle for 10 s, then measures it for SECONDS without
touching its API:
- CPU: utime + stime of the daemon (every thread) from /proc/PID/stat, in % of a core;
- wakeups: the daemon's context switches (voluntary + involuntary, summed over its
  threads from /proc/PID/task/*/status) per second: each one is a thread that slept
  and was woken (by a timer, a file descriptor or a lock). Only threads alive at both
  ends count (a blocking-pool thread that exits in the window takes its counters with
  it: summed totals went negative); so this is a lower bound;
- memory at the end: RSS, PSS, anonymous memory (smaps_rollup), threads.
Then (unless --keep) removes the manifests and waits for the pods to be gone.
"""
import glob
import json
import os
import sys
import time

from bench_common import api_pods, smaps_kib



SOCK, MANIFESTS, NODE, PID = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PODS, SECONDS = int(sys.argv[5]), float(sys.argv[6])
KEEP = sys.argv[7:] == ["--keep"]
SLEEP = ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]


def pods():
    return api_pods(SOCK)


def running(pod):
    st = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(st) and "running" in st[0]["state"]


def wait_until(pred, what, timeout=900):
    end = time.time() + timeout
    while time.time() < end:
        if pred(pods()):
            return
        time.sleep(0.5)
    raise SystemExit("bench-idle: timed out waiting for %s" % what)


def manifest(name):
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n"
        "  terminationGracePeriodSeconds: 2\n  containers:\n"
        "  - name: c\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n"
        "    command: %s\n" % (name, json.dumps(SLEEP))
    )


def cpu_ticks():
    with open("/proc/%d/stat" % PID) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def switches():
    """Context switches so far of each of the daemon's threads, by thread id."""
    by_thread = {}
    for status in glob.glob("/proc/%d/task/*/status" % PID):
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        by_thread[status] = by_thread.get(status, 0) + int(line.split()[1])
        except OSError:
            pass  # a thread that ended between the listing and the read
    return by_thread


def switched_between(before, after):
    """Context switches between two `switches()` of the threads alive at both."""
    return sum(after[t] - before[t] for t in after.keys() & before.keys())


def memory_kib():
    return smaps_kib(PID, ("Rss", "Pss", "Anonymous"))


def main():
    names = ["idle%d" % i for i in range(PODS)]
    for n in names:
        path = os.path.join(MANIFESTS, n + ".yaml")
        tmp = os.path.join(MANIFESTS, "." + n + ".tmp")
        with open(tmp, "w") as f:
            f.write(manifest(n))
        os.rename(tmp, path)
    full = ["%s-%s" % (n, NODE) for n in names]
    t0 = time.time()
    wait_until(lambda ps: all(n in ps and running(ps[n]) for n in full), "%d pods Running" % PODS)
    print("%d pods Running after %.1f s; settling 10 s" % (PODS, time.time() - t0), flush=True)
    time.sleep(10)
    hz = os.sysconf("SC_CLK_TCK")
    c0, w0, t0 = cpu_ticks(), switches(), time.time()
    time.sleep(SECONDS)
    c1, w1, t1 = cpu_ticks(), switches(), time.time()
    mem = memory_kib()
    threads = len(os.listdir("/proc/%d/task" % PID))
    print("pods                 %d" % PODS)
    print("daemon RSS           %.1f MiB" % (mem["Rss"] / 1024))
    print("daemon PSS           %.1f MiB" % (mem["Pss"] / 1024))
    print("daemon anonymous     %.1f MiB" % (mem["Anonymous"] / 1024))
    print("daemon threads       %d" % threads)
    print("idle CPU             %.2f %% of a core (%.0f s)" % ((c1 - c0) / hz / (t1 - t0) * 100, t1 - t0))
    print("wakeups              %.1f /s" % (switched_between(w0, w1) / (t1 - t0)))
    if KEEP:
        return
    for n in names:
        os.unlink(os.path.join(MANIFESTS, n + ".yaml"))
    wait_until(lambda ps: not any(n in ps for n in full), "the pods to be gone")


main()
