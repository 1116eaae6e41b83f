#!/usr/bin/env python3
"""Memory and idle CPU of node agents holding the same pods.

usage: agent-footprint.py N IMAGE NODE_SPEC...
  NODE_SPEC  podhost:NODE:DAEMON_PID:DIR          (its shims, monitors and pause
                                                   processes name DIR on their command line)
             kubelet:NODE:KUBELET_PID,CONTAINERD_PID:CONTAINERD_SOCKET

Binds N pods of IMAGE to every node at once (env and pods as pod-latency.py), waits until
all are Running in the API and 10 s more, then for each node sums the proportional set
size (PSS, /proc/PID/smaps_rollup) of its agent (podhost's daemon; the kubelet and
containerd), its per-container processes (podhost's shims and monitors; containerd's
shims) and its pause processes, and their CPU time over 60 s while nothing changes. It
deletes the pods and waits for them to be gone. A benchmark: it prints and asserts
nothing.
"""
import importlib.util
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("pod_latency", os.path.join(HERE, "pod-latency.py"))
pod_latency = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pod_latency)

BASE = "/api/v1/namespaces/default/pods"
TICKS = os.sysconf("SC_CLK_TCK")


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def cgroup(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return f.read()
    except OSError:
        return ""


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def groups(spec_text, pids):
    """The node's processes by role: agent, per-container, pause."""
    kind, node, agents, where = spec_text.split(":", 3)
    agent = [int(p) for p in agents.split(",")]
    per_container, pause = [], []
    for pid in pids:
        if pid in agent:
            continue
        args = cmdline(pid)
        line = " ".join(args)
        if kind == "podhost":
            if where in line:
                (pause if len(args) > 1 and args[1] == "pause" else per_container).append(pid)
        elif kind == "kubelet":
            if "containerd-shim" in line and where in line:
                per_container.append(pid)
            elif comm(pid) == "pause" and "/kubepods" in cgroup(pid) and "kubelet-bench" in cgroup(pid):
                pause.append(pid)
    return node, {"agent": agent, "per-container": per_container, "pause": pause}


def create(node, n, image, run_id):
    threads = []
    for i in range(n):
        name = f"fp-{run_id}-{node}-{i}"
        body = pod_latency.pod(name, node, image, run_id)
        t = threading.Thread(target=pod_latency.request, args=("POST", BASE, body))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def count(run_id, phase=None):
    items = pod_latency.request("GET", f"{BASE}?labelSelector=podhost-latency%3D{run_id}")["items"]
    if phase is None:
        return len(items)
    return sum(1 for p in items if p.get("status", {}).get("phase") == phase)


def main():
    n, image, specs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    run_id = f"f{os.getpid()}"
    nodes = [s.split(":")[1] for s in specs]
    for node in nodes:
        create(node, n, image, run_id)
    deadline = time.monotonic() + max(120, n * len(nodes))
    while count(run_id, "Running") < n * len(nodes):
        if time.monotonic() > deadline:
            raise SystemExit(f"footprint: only {count(run_id, 'Running')} of {n * len(nodes)} pods Running")
        time.sleep(1)
    time.sleep(10)
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    found = [groups(s, pids) for s in specs]
    start = {pid: cpu_ticks(pid) for _, g in found for ps in g.values() for pid in ps}
    time.sleep(60)
    for node, g in found:
        parts = []
        total_pss, total_cpu = 0, 0.0
        for role, ps in g.items():
            pss = sum(pss_kib(p) for p in ps)
            ticks = sum((cpu_ticks(p) or 0) - (start[p] or 0) for p in ps if start.get(p) is not None)
            cpu = 100.0 * ticks / TICKS / 60
            parts.append(f"{role} {len(ps)} processes {pss / 1024:.1f} MiB PSS, {cpu:.2f} % CPU")
            if role != "pause":
                total_pss += pss
                total_cpu += cpu
        print(f"  {node}, {n} pods idle: " + "; ".join(parts)
              + f"; without pause {total_pss / 1024:.1f} MiB PSS, {total_cpu:.2f} % of a CPU")
    pod_latency.request("DELETE", f"{BASE}?labelSelector=podhost-latency%3D{run_id}",
                        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 1})
    deadline = time.monotonic() + 300
    while count(run_id) and time.monotonic() < deadline:
        time.sleep(1)


if __name__ == "__main__":
    main()
