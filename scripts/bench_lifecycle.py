#!/usr/bin/env python3
"""Measures podhost's reaction times against a running daemon (see bench-lifecycle.sh):

- manifest written -> API shows the pod Running
- container exit (the shim's exit.json finished_at, taken right after waitpid; the API's
  finishedAt has whole seconds only) -> API shows it Terminated
- manifest removed -> pod gone (container exits at once on SIGTERM)

Polls the API on its unix socket every 2 ms; the exit every 0.5 ms, from 100 ms before the
container's planned end (its `sleep 1`) only, so that the polls do not load the daemon
for the whole second. A poll finds a change up to one poll period after it happened: the
exit figure is the time the first response showing it arrived (an upper bound); the
lower bound (the previous poll, which did not show it, was sent then) is printed too.
Prints medians, p99 and ranges in ms; BENCH_RAW=FILE appends the raw samples as JSON.
"""
import json
import os
import statistics
import sys
import time
from datetime import datetime

from bench_common import api_pods, pct



def pods(sock):
    return api_pods(sock)


def poll(sock, pred, timeout=30, every=0.002):
    return poll_bounds(sock, pred, timeout, every)[1:]


def poll_bounds(sock, pred, timeout=30, every=0.002):
    """(time the last poll that did not see it was sent, time the response that saw it
    arrived, what pred found)."""
    end = time.time() + timeout
    sent = time.time()
    while time.time() < end:
        before = time.time()
        got = pred(pods(sock))
        if got is not None:
            return sent, time.time(), got
        sent = before
        time.sleep(every)
    raise SystemExit("timed out")


def parse_time(s):
    # RFC 3339 with up to 9 fractional digits.
    if "." in s:
        head, frac = s.rstrip("Z").split(".")
        return datetime.fromisoformat(head + "+00:00").timestamp() + float("0." + frac)
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def write(path, text):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; {body}"]
"""


def state(p, key):
    for c in p.get("status", {}).get("containerStatuses") or []:
        s = c.get("state", {}).get(key)
        if s:
            return s
    return None


def main():
    sock, manifests, node, runs, root = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    to_running, to_status, to_status_lo, to_gone = [], [], [], []
    for i in range(runs):
        name = f"bench{i}"
        full = f"{name}-{node}"
        path = os.path.join(manifests, name + ".yaml")
        t0 = time.time()
        write(path, POD.format(name=name, body="sleep 1; exit 3"))
        t1, _ = poll(sock, lambda ps: True if ps.get(full, {}).get("status", {}).get("phase") == "Running" else None)
        to_running.append((t1 - t0) * 1000)
        time.sleep(max(0.0, t0 + 0.9 - time.time()))
        t2_lo, t2, pod = poll_bounds(
            sock, lambda ps: ps[full] if full in ps and state(ps[full], "terminated") else None, every=0.0005
        )
        uid = pod["metadata"]["uid"]
        exit_json = os.path.join(root, "pods", uid, "containers", "main", "0", "exit.json")
        # The monitor reports the exit before its record is durable: wait for the file.
        while not os.path.exists(exit_json):
            time.sleep(0.001)
        with open(exit_json) as f:
            finished = parse_time(json.load(f)["finished_at"])
        to_status.append((t2 - finished) * 1000)
        to_status_lo.append(max(0.0, t2_lo - finished) * 1000)
        t3 = time.time()
        os.unlink(path)
        t4, _ = poll(sock, lambda ps: True if full not in ps else None)
        to_gone.append((t4 - t3) * 1000)
    if os.environ.get("BENCH_RAW"):
        # Raw samples (ms), one JSON line per run of the script, to pool runs.
        with open(os.environ["BENCH_RAW"], "a") as f:
            f.write(json.dumps({"running": to_running, "exit": to_status, "exit_lo": to_status_lo, "gone": to_gone}) + "\n")
    for label, xs in [
        ("manifest written -> Running", to_running),
        ("container exit -> status Terminated", to_status),
        ("  (lower bound: previous poll sent)", to_status_lo),
        ("manifest removed -> pod gone (exited container)", to_gone),
    ]:
        print(
            f"{label:50s} median {statistics.median(xs):7.1f} ms   p99 {pct(xs, 99):7.1f}"
            f"   min {min(xs):7.1f}   max {max(xs):7.1f}   (n={len(xs)})"
        )


if __name__ == "__main__":
    main()
