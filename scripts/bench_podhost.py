#!/usr/bin/env python3
"""podhost's side of scripts/bench.sh, against a running daemon (release build).

usage: bench_podhost.py SOCKET MANIFEST_DIR NODE ROOT_DIR DAEMON_PID PODS OUT.json

Measures, each on pods of the built-in busybox image:
- start: manifest written -> API shows the pod Running, PODS pods one after the other
  (p50, p99), and (after exit, stop and churn, measured with no other pod) PODS pods
  written at once -> all Running (wall time);
- exit: the container's exit (the shim's exit.json `finished_at`, taken right after
  waitpid) -> API shows it Terminated (p50, p99; the time the watch event that showed
  it arrived);
- stop: manifest removed -> the container exited on the stop signal (its exit.json
  `finished_at`; the container exits at once on SIGTERM, so this is the removal ->
  stop signal reaction plus the signal's delivery);
- churn: one-container pods running /bin/true (restartPolicy Never), 8 in flight,
  created -> Succeeded -> manifest removed -> gone; pods per second sustained;
- memory: RSS and PSS of every shim (per running container) and of the daemon, with
  PODS pods running;
- idle: the daemon's CPU (% of one core) over 30 s with IDLE_PODS (env, default 250)
  pods running, and its RSS then. With LOG_DIR (env: the daemon's --log-dir) it first
  waits (up to 150 s) for container GC to remove the logs of the earlier series' pods:
  that one-off pass (a minute after the pods are gone, ~2 ms of CPU each) is the
  clean-up of the series, not the cost of running pods, and fell into the window.
CHURN_PODS (default 300) and IDLE_SECONDS (default 30) shorten the series for
scripts/text-order.sh, which runs the daemon under valgrind. CHURN_ONLY=1 runs the churn
alone (scripts/bench-vm.sh; PODS is then unused).

Until the burst, the script follows the daemon's watch (GET /pods?watch=true on its unix
socket: the time a change's event arrived); then it polls /pods, every 0.5 s, and not
during the idle measurement.
Writes the figures as JSON to OUT.json and prints them.
"""
import glob
import json
import os
import statistics
import sys
import time
from datetime import datetime

from bench_common import PodWatch, api_pods, pct, rss_pss_kib



SOCK, MANIFESTS, NODE, ROOT, DAEMON_PID = sys.argv[1:6]
PODS = int(sys.argv[6])
OUT = sys.argv[7]
IDLE_PODS = int(os.environ.get("IDLE_PODS", "250"))
CHURN_PODS = int(os.environ.get("CHURN_PODS", "300"))
IDLE_SECONDS = float(os.environ.get("IDLE_SECONDS", "30"))
CHURN_ONLY = os.environ.get("CHURN_ONLY") == "1"
LOG_DIR = os.environ.get("LOG_DIR")


def pods():
    return api_pods(SOCK)


# The daemon's watch, open for the reaction-time series (closed before the memory and
# idle figures: its copy of every pod would count in the daemon's RSS).
WATCH = None


def wait_for(pred, timeout=120, every=0.002):
    """(when the API showed it, what pred found): from the watch's events while it is
    open, else by polling /pods every `every` s."""
    if WATCH is not None:
        return WATCH.wait(pred, timeout)
    end = time.time() + timeout
    while time.time() < end:
        got = pred(pods())
        if got is not None:
            return time.time(), got
        time.sleep(every)
    raise SystemExit("bench: timed out waiting for the daemon")


def parse_time(s):
    head, _, frac = s.rstrip("Z").partition(".")
    t = datetime.fromisoformat(head + "+00:00").timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def write(name, text):
    path = os.path.join(MANIFESTS, name + ".yaml")
    tmp = os.path.join(MANIFESTS, "." + name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def remove(name):
    os.unlink(os.path.join(MANIFESTS, name + ".yaml"))


def manifest(name, command, restart="Always", grace=2):
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n"
        "  restartPolicy: %s\n  terminationGracePeriodSeconds: %d\n  containers:\n"
        "  - name: c\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n"
        "    command: %s\n" % (name, restart, grace, json.dumps(command))
    )


def full(name):
    return "%s-%s" % (name, NODE)


def state(pod):
    st = (pod.get("status") or {}).get("containerStatuses") or []
    return st[0]["state"] if st else {}


def running(name):
    return lambda ps: True if full(name) in ps and "running" in state(ps[full(name)]) else None


def gone(names):
    return lambda ps: True if not any(full(n) in ps for n in names) else None



def ms(x):
    return round(x * 1000, 1)


def exit_record(uid):
    found = glob.glob(os.path.join(ROOT, "pods", uid, "containers", "c", "*", "exit.json"))
    if not found:
        return None
    with open(sorted(found)[-1]) as f:
        return json.load(f)


SLEEP = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]


def bench_start():
    lat = []
    names = ["start%d" % i for i in range(PODS)]
    for n in names:
        t0 = time.time()
        write(n, manifest(n, SLEEP))
        t1, _ = wait_for(running(n))
        lat.append(t1 - t0)
    for n in names:
        remove(n)
    wait_for(gone(names), every=0.05)
    return {
        "start_p50_ms": ms(statistics.median(lat)),
        "start_p99_ms": ms(pct(lat, 99)),
    }


def bench_burst():
    burst = ["burst%d" % i for i in range(PODS)]
    t0 = time.time()
    for n in burst:
        write(n, manifest(n, SLEEP))
    t1, _ = wait_for(
        lambda ps: True
        if all(full(n) in ps and "running" in state(ps[full(n)]) for n in burst)
        else None,
        every=0.01,
    )
    return {"burst_all_running_ms": ms(t1 - t0)}, burst


def shim_pids():
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and os.path.basename(argv[0]) in (b"podhost", b"podhost-monitor") and argv[1] == b"shim":
            pids.append(int(d[6:]))
    return pids



def bench_memory():
    shims = [rss_pss_kib(p) for p in shim_pids()]
    rss, pss = rss_pss_kib(int(DAEMON_PID))
    return {
        "shims_counted": len(shims),
        "shim_rss_mib": round(statistics.median(s[0] for s in shims) / 1024, 2),
        "shim_pss_mib": round(statistics.median(s[1] for s in shims) / 1024, 2),
        "daemon_rss_mib_%d_pods" % PODS: round(rss / 1024, 1),
    }


def bench_exit():
    lat = []
    for i in range(min(PODS, 30)):
        n = "exit%d" % i
        write(n, manifest(n, ["sh", "-c", "sleep 0.2"], restart="Never"))
        t_seen, pod = wait_for(
            lambda ps: ps[full(n)]
            if full(n) in ps and "terminated" in state(ps[full(n)])
            else None,
            every=0.0005,
        )
        # The exit is shown before its record is durable: wait for the file.
        rec = None
        for _ in range(5000):
            rec = exit_record(pod["metadata"]["uid"])
            if rec:
                break
            time.sleep(0.001)
        if rec and rec.get("finished_at"):
            lat.append(t_seen - parse_time(rec["finished_at"]))
        remove(n)
        wait_for(gone([n]), every=0.01)
    return {"exit_seen_p50_ms": ms(statistics.median(lat)), "exit_seen_p99_ms": ms(pct(lat, 99))}


def bench_stop():
    lat = []
    for i in range(min(PODS, 30)):
        n = "stop%d" % i
        write(n, manifest(n, SLEEP))
        _, pod = wait_for(lambda ps: ps[full(n)] if running(n)(ps) else None)
        uid = pod["metadata"]["uid"]
        time.sleep(0.05)
        t0 = time.time()
        remove(n)
        end = time.time() + 30
        rec = None
        while time.time() < end:
            rec = exit_record(uid)
            if rec and rec.get("finished_at"):
                break
            time.sleep(0.002)
        if rec and rec.get("finished_at"):
            lat.append(parse_time(rec["finished_at"]) - t0)
        wait_for(gone([n]), every=0.01)
    return {"removal_to_exit_p50_ms": ms(statistics.median(lat)), "removal_to_exit_p99_ms": ms(pct(lat, 99))}


def bench_churn(total=CHURN_PODS, in_flight=8):
    t0 = time.time()
    started, done, live = 0, 0, {}
    while done < total:
        while started < total and len(live) < in_flight:
            n = "churn%d" % started
            write(n, manifest(n, ["/bin/true"], restart="Never", grace=1))
            live[n] = "created"
            started += 1

        def moves(ps):
            found = []
            for n, st in live.items():
                p = ps.get(full(n))
                if st == "created" and p and (p.get("status") or {}).get("phase") == "Succeeded":
                    found.append((n, "succeeded"))
                elif st == "removed" and p is None:
                    found.append((n, "gone"))
            return found or None

        _, found = wait_for(moves)
        for n, what in found:
            if what == "succeeded":
                remove(n)
                live[n] = "removed"
            else:
                del live[n]
                done += 1
    wall = time.time() - t0
    return {"churn_pods_per_s": round(total / wall, 1), "churn_ms_per_pod": ms(wall / total)}


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def pod_of_log_dir(name):
    """The pod of a log directory (`<namespace>_<pod>_<uid>`), None for anything else."""
    parts = name.split("_")
    return parts[1] if len(parts) == 3 else None


def wait_for_log_gc(keep, timeout=150):
    """Waits until LOG_DIR holds only the logs of the pods named in `keep`
    (`<namespace>_<pod>_<uid>` directories)."""
    kept = {full(n) for n in keep}
    end = time.time() + timeout
    while time.time() < end:
        left = [d for d in os.listdir(LOG_DIR) if (p := pod_of_log_dir(d)) and p not in kept]
        if not left:
            return
        time.sleep(1)
    print("bench: %d earlier pods' logs still there after %d s" % (len(left), timeout), file=sys.stderr)


def bench_idle(burst):
    names = ["idle%d" % i for i in range(IDLE_PODS)]
    for n in burst:
        remove(n)
    wait_for(gone(burst), every=0.1)
    for n in names:
        write(n, manifest(n, SLEEP))
    wait_for(
        lambda ps: True
        if all(full(n) in ps and "running" in state(ps[full(n)]) for n in names)
        else None,
        timeout=600,
        every=0.5,
    )
    if LOG_DIR:
        wait_for_log_gc(set(names))
    time.sleep(10)
    pid = int(DAEMON_PID)
    hz = os.sysconf("SC_CLK_TCK")
    c0, t0 = cpu_ticks(pid), time.time()
    time.sleep(IDLE_SECONDS)
    c1, t1 = cpu_ticks(pid), time.time()
    rss, _ = rss_pss_kib(pid)
    out = {
        "idle_pods": IDLE_PODS,
        "daemon_idle_cpu_pct": round((c1 - c0) / hz / (t1 - t0) * 100, 2),
        "daemon_rss_mib_idle": round(rss / 1024, 1),
    }
    for n in names:
        remove(n)
    wait_for(gone(names), timeout=600, every=0.5)
    return out


def main():
    global WATCH
    results = {}
    # The reaction times and the churn follow the daemon's watch: nothing is polled, so
    # neither the daemon nor this script spends CPU between the events (until
    # 2026-11-25 /pods was polled every 2 ms: with the start series' 100 pods running,
    # each poll cost 2.5 ms of CPU, about a core in all).
    WATCH = PodWatch(SOCK)
    if CHURN_ONLY:
        results["churn_pods"] = CHURN_PODS
        results.update(bench_churn())
        WATCH.close()
        WATCH = None
    else:
        results.update(bench_start())
        results.update(bench_exit())
        results.update(bench_stop())
        results.update(bench_churn())
        burst_figures, burst = bench_burst()
        results.update(burst_figures)
        WATCH.close()
        WATCH = None
        results.update(bench_memory())
        results.update(bench_idle(burst))
    with open(OUT, "w") as f:
        json.dump(results, f, indent=1)
    for k, v in results.items():
        print("%-32s %s" % (k, v))


main()
