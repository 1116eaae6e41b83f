#!/usr/bin/env python3
"""The kill -9 torture test's driver (run by scripts/torture.sh).

A churn of pods (adds, edits, removals; containers that run on, exit with random codes,
crash-loop, or stop slowly through a preStop hook) while the daemon is kill -9'd and
restarted at random moments and a few shims are kill -9'd too. The truth is what the
containers write themselves: each prints `T START` when it starts and `T EXIT <code>`
before it exits by itself or on SIGTERM; podhost's CRI log files keep those lines (one
file per attempt). A sampler also watches /proc for two live instances of one pod at once.
At the end it compares that truth with podhost's records and status, removes every pod and
looks for anything left behind. Prints the counts; exits 1 unless every bad count is 0.
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(self.path)


# Container GC's grace for the dir of a pod no source wants (gc::ORPHAN_GRACE), plus slack.
ORPHAN_GRACE_S = 62


def collect_unclaimed_pod_dirs(a):
    """A daemon killed after it made a pod's dir but before that pod's status record was
    written leaves a dir no later daemon knows; when the pod's manifest was edited or
    removed meanwhile, nothing claims it and container GC removes it once it is
    ORPHAN_GRACE old. Let that happen (`podhost gc` after the grace) before leftovers are
    counted: a dir container GC does not remove then is one."""
    pods_dir = os.path.join(a.root, "pods")
    dirs = os.listdir(pods_dir) if os.path.isdir(pods_dir) else []
    if not dirs:
        return
    def mtimes(d):  # the dir and its entries, as container GC looks at them
        # A dir or entry the daemon removes meanwhile is simply no longer there.
        try:
            yield os.stat(d).st_mtime
            for e in os.scandir(d):
                try:
                    yield e.stat(follow_symlinks=False).st_mtime
                except FileNotFoundError:
                    pass
        except FileNotFoundError:
            pass
    newest = max((m for d in dirs for m in mtimes(os.path.join(pods_dir, d))), default=0)
    wait = newest + ORPHAN_GRACE_S - time.time()
    print(f"{len(dirs)} pod dir(s) left; container GC in {max(wait, 0):.0f}s", flush=True)
    if wait > 0:
        time.sleep(wait)
    subprocess.run([a.podhost, "gc", "--socket", a.sock], capture_output=True, timeout=60)


def api_pods(sock):
    try:
        c = UnixConnection(sock)
        c.request("GET", "/pods")
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status != 200:
            return None
        return json.loads(body).get("items", [])
    except (OSError, ValueError, http.client.HTTPException):
        return None


def parse_ts(s):
    # RFC 3339 with up to nanoseconds; Python keeps microseconds.
    s = s.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        frac, tz = rest[:rest.index("+")], rest[rest.index("+"):]
        s = f"{head}.{frac[:6].ljust(6, '0')}{tz}"
    return datetime.fromisoformat(s)


def is_ip(name):
    """Whether a file name is an IP address (an IPAM entry)."""
    import ipaddress
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class Daemon:
    def __init__(self, a):
        self.a = a
        self.proc = None
        self.kills = 0

    def start(self):
        log = open(os.path.join(self.a.work, "daemon.log"), "ab")
        # In its own network namespace (torture.sh makes it): the pods' bridge,
        # veths and nftables rules live there, never on the machine's network.
        netns = os.environ.get("PODHOST_TORTURE_NETNS")
        prefix = ["nsenter", f"--net=/run/netns/{netns}", "--"] if netns else []
        self.proc = subprocess.Popen(
            prefix + [self.a.podhost, "daemon", "--pod-manifest-path", self.a.manifests,
             "--root-dir", self.a.root, "--log-dir", self.a.logs, "--socket", self.a.sock,
             "--node-name", self.a.node, "--cgroup-root", self.a.cgroup_root,
             "--crashloop-initial-backoff", "1", "--crashloop-max-backoff", "2",
             "--rescan-interval", "2", "--container-gc-period", "100000",
             "--maximum-dead-containers-per-container", "100000",
             # No node-pressure eviction: a build host's disk may be under the kubelet's
             # defaults, and an evicted pod is not what this run checks.
             "--eviction-hard=",
             # The built-in bridge whatever /etc/cni/net.d holds (podman installs a
             # config there, which --pod-network auto would pick).
             "--pod-network", "bridge",
             # The configMap shape's ConfigMap.
             "--config-dir", self.a.config] + self.cluster_flags(),
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env=dict(os.environ, RUST_LOG="info"))
        for _ in range(400):
            if api_pods(self.a.sock) is not None:
                return
            if self.proc.poll() is not None:
                sys.exit(f"the daemon exited at start; see {self.a.work}/daemon.log")
            time.sleep(0.025)
        sys.exit("the daemon did not answer within 10 s")

    def cluster_flags(self):
        """Cluster mode (--kubeconfig): a node without --pod-cidr, so that every start
        waits for the Node's podCIDR again while the pods of the last one run on."""
        if not self.a.kubeconfig:
            return []
        return ["--kubeconfig", self.a.kubeconfig, "--port", "0"]

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


KINDS = ["long", "exiter", "crasher", "slowstop"]

# The pod shapes whose sandbox a restarted daemon must keep whole (issue 29): an emptyDir
# with fsGroup its container churns files in, a shared PID namespace (a pause process),
# a hostPort on the pod network, a configMap volume.
SHAPES = ["plain", "fsgroup", "sharedpid", "hostport", "configmap"]

CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: torture}\ndata: {greeting: hello}\n"


def shape_parts(name, shape):
    """(pod spec lines, container lines, a shell prefix) of a shape."""
    if shape == "fsgroup":
        return ("  securityContext: {fsGroup: 2345}\n  volumes:\n  - name: data\n    emptyDir: {}\n",
                "    volumeMounts: [{name: data, mountPath: /data}]\n",
                "(i=0; while true; do i=$((i+1)); echo $i > /data/f$((i%9)); "
                "rm -f /data/f$(((i+4)%9)); done) & ")
    if shape == "sharedpid":
        return ("  shareProcessNamespace: true\n", "", "")
    if shape == "hostport":
        # One port per pod name: a new version waits for the old one to be gone.
        port = 20000 + int(name[1:]) % 20000
        return ("", f"    ports: [{{containerPort: 8080, hostPort: {port}}}]\n", "")
    if shape == "configmap":
        return ("  volumes:\n  - name: conf\n    configMap: {name: torture}\n",
                "    volumeMounts: [{name: conf, mountPath: /conf}]\n",
                "cat /conf/greeting >/dev/null; ")
    return ("", "", "")


def manifest(name, version, kind, policy, shape="plain"):
    mark = f"{name}.v{version}"
    pod_lines, container_lines, prefix = shape_parts(name, shape)
    head = 'echo "T START"; trap \'echo "T EXIT 143"; exit 143\' TERM; ' + prefix
    if kind in ("long", "slowstop"):
        body = "while true; do sleep 1 & wait $!; done"
    elif kind == "exiter":
        body = ('sleep $((RANDOM % 4 + 1)) & wait $!; c=$((RANDOM % 4)); '
                'echo "T EXIT $c"; exit $c')
    else:
        body = 'c=$((RANDOM % 3 + 1)); echo "T EXIT $c"; exit $c'
    lifecycle = ""
    grace = 2
    if kind == "slowstop":
        grace = 5
        lifecycle = ('    lifecycle:\n      preStop:\n        exec:\n'
                     '          command: ["sh", "-c", "sleep 3"]\n')
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n"
            f"  annotations:\n    torture/version: \"{version}\"\n"
            f"spec:\n  restartPolicy: {policy}\n  terminationGracePeriodSeconds: {grace}\n"
            f"{pod_lines}"
            f"  containers:\n  - name: main\n    image: localhost/busybox:latest\n"
            f"    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {json.dumps(head + body)}]\n"
            f"{container_lines}"
            f"    env:\n    - name: MARK\n      value: {mark}\n{lifecycle}")


def marked_processes():
    """(mark, pid namespace) of every live process with a MARK env."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            ns = os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"MARK="):
                out.append((kv[5:].decode(), ns, int(pid)))
    return out


def shims_of(root):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 2 and argv[1] == b"shim" and argv[2].decode().startswith(root):
            out.append((int(pid), os.path.dirname(argv[2].decode())))
    # libcontainer's children carry the shim's command line until the container's exec:
    # a shim is one whose parent is not among them.
    pids = {p for p, _ in out}

    def parent(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return 0
    return [(p, b) for p, b in out if parent(p) not in pids]


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def log_truth(path):
    """(START timestamp or None, exit code or None) from an attempt's CRI log."""
    start = code = None
    try:
        with open(path, errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(" ", 3)
                if len(parts) < 4:
                    continue
                if parts[3] == "T START" and start is None:
                    start = parse_ts(parts[0])
                elif parts[3].startswith("T EXIT "):
                    code = int(parts[3][7:])
    except OSError:
        pass
    return start, code


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--podhost", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--pods", type=int, default=200)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--shim-kills", type=int, default=5)
    p.add_argument("--duration", type=float, default=300)
    p.add_argument("--live", type=int, default=24, help="pods alive at once, about")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--kubeconfig", help="cluster mode: the node's kubeconfig")
    p.add_argument("--node-name", help="the node's name (cluster mode: the kubeconfig's)")
    a = p.parse_args()
    a.manifests = os.path.join(a.work, "manifests")
    a.root = os.path.join(a.work, "root")
    a.logs = os.path.join(a.work, "logs")
    a.sock = os.path.join(a.work, "sock")
    a.config = os.path.join(a.work, "config")
    a.node = a.node_name or f"torture{os.getpid()}"
    # torture.sh names it, so that its exit trap removes it in every hierarchy.
    a.cgroup_root = os.environ.get("PODHOST_TORTURE_CGROUP_ROOT", f"/podhost-torture-{os.getpid()}")
    os.makedirs(a.manifests, exist_ok=True)
    os.makedirs(a.config, exist_ok=True)
    with open(os.path.join(a.config, "torture.yaml"), "w") as f:
        f.write(CONFIG_MAP)
    rng = random.Random(a.seed)
    mode = f"cluster mode as node {a.node}, no --pod-cidr" if a.kubeconfig else "standalone"
    print(f"torture: seed {a.seed}, {a.pods} pods, {a.kills} daemon kills, "
          f"{a.shim_kills} shim kills over {a.duration:.0f}s, {mode}; work dir {a.work}",
          flush=True)

    daemon = Daemon(a)
    daemon.start()
    stop = threading.Event()
    doubles = []  # (mark or name, pid namespaces) seen live at once
    killed_shims = set()  # bundles whose shim the test killed
    lock = threading.Lock()

    def sampler():
        while not stop.is_set():
            by_mark, by_name = {}, {}
            for mark, ns, _ in marked_processes():
                by_mark.setdefault(mark, set()).add(ns)
                by_name.setdefault(mark.rsplit(".v", 1)[0], set()).add(ns)
            for key, nss in list(by_mark.items()) + list(by_name.items()):
                if len(nss) > 1:
                    with lock:
                        doubles.append((key, sorted(nss)))
            time.sleep(0.25)

    def killer():
        # A restart takes about a second of its own: leave room for it in the spacing.
        interval = max(a.duration / max(a.kills, 1) - 1.2, 0.5)
        shim_at = sorted(rng.uniform(0.1, 0.9) * a.duration for _ in range(a.shim_kills))
        began = time.time()
        while not stop.is_set() and daemon.kills < a.kills:
            time.sleep(rng.uniform(0.3, 1.7) * interval)
            if stop.is_set():
                break
            while shim_at and time.time() - began > shim_at[0]:
                shim_at.pop(0)
                shims = shims_of(a.root)
                if shims:
                    pid, bundle = rng.choice(shims)
                    with lock:
                        killed_shims.add(bundle)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            daemon.kill9()
            time.sleep(rng.uniform(0, 1.0))
            daemon.start()

    threads = [threading.Thread(target=sampler), threading.Thread(target=killer)]
    for t in threads:
        t.start()

    created = edits = removals = 0
    live = {}  # name -> version
    serial = 0
    began = time.time()
    every = a.duration / max(a.pods, 1)
    while time.time() - began < a.duration or created < a.pods:
        if time.time() - began > a.duration * 1.5:
            break
        time.sleep(rng.uniform(0.5, 1.5) * every / 2)
        action = rng.random()
        if created < a.pods and (len(live) < a.live or action < 0.5):
            serial += 1
            name = f"t{serial}"
            kind = rng.choice(KINDS)
            policy = rng.choice(["Always", "Always", "OnFailure", "Never"])
            if kind == "crasher":
                policy = "Always"
            live[name] = (1, kind, policy, rng.choice(SHAPES))
            created += 1
        elif live and action < 0.75:
            name = rng.choice(sorted(live))
            v, kind, policy, shape = live[name]
            live[name] = (v + 1, kind, policy, shape)
            created += 1
            edits += 1
        elif live:
            name = rng.choice(sorted(live))
            del live[name]
            os.unlink(os.path.join(a.manifests, f"{name}.yaml"))
            removals += 1
            continue
        else:
            continue
        v, kind, policy, shape = live[name]
        tmp = os.path.join(a.manifests, f".{name}.tmp")
        with open(tmp, "w") as f:
            f.write(manifest(name, v, kind, policy, shape))
        os.rename(tmp, os.path.join(a.manifests, f"{name}.yaml"))
    stop.set()
    for t in threads:
        t.join()
    churn_secs = time.time() - began
    print(f"churn done in {churn_secs:.0f}s: {created} pods created ({edits} of them by edits), "
          f"{removals} removed, {daemon.kills} daemon kills, {len(killed_shims)} shims killed",
          flush=True)

    def manifest_name(pod):
        """A static pod is named <manifest's name>-<node name> (node names have dashes)."""
        return pod["metadata"]["name"].removesuffix(f"-{a.node}")

    # Settle: the daemon runs undisturbed until the API shows exactly the manifests' pods.
    want = set(live)
    deadline = time.time() + 120
    while time.time() < deadline:
        pods = api_pods(a.sock) or []
        names = {manifest_name(p) for p in pods}
        terminating = [p for p in pods if p["metadata"].get("deletionTimestamp")]
        if names == want and not terminating and len(pods) == len(want):
            break
        time.sleep(1)
    time.sleep(6)  # crash-loopers go through a few more attempts
    # One unanswered request (a 5 s timeout on a loaded machine) must not read as "every
    # pod missing": the API is asked again for up to a minute, and a daemon that never
    # answers is a failure of its own.
    pods = None
    for _ in range(60):
        pods = api_pods(a.sock)
        if pods is not None:
            break
        time.sleep(1)
    if pods is None:
        print("torture: FAIL: the daemon's API did not answer GET /pods for a minute after the churn")
        sys.exit(1)

    counts = dict(lost=0, started_twice=0, exits_lost=0, exits_misreported=0,
                  restart_counts_wrong=0, pods_missing=0)
    problems = []

    def bad(kind, msg):
        counts[kind] += 1
        problems.append(f"{kind}: {msg}")

    seen = {manifest_name(p): p for p in pods}
    for name in want - set(seen):
        bad("pods_missing", f"{name} has a manifest but no pod")
    attempts_checked = 0
    for name, pod in seen.items():
        uid = pod["metadata"]["uid"]
        full = pod["metadata"]["name"]
        cs = (pod.get("status", {}).get("containerStatuses") or [{}])[0]
        cdir = os.path.join(a.root, "pods", uid, "containers", "main")
        ldir = os.path.join(a.logs, f"default_{full}_{uid}", "main")
        def listing():
            if not os.path.isdir(cdir):
                return []
            return sorted(int(n) for n in os.listdir(cdir) if n.isdigit())

        # A crash-looper goes on restarting: take the status between two equal listings,
        # once the status shows the last attempt. The shim writes an attempt's records
        # before the daemon has turned them into the status: on a loaded machine that lag
        # is seconds (status is eventually consistent, as the kubelet's); one that lasts
        # 15 s is reported below.
        for _ in range(50):
            nums = listing()
            fresh = [p for p in (api_pods(a.sock) or []) if p["metadata"]["uid"] == uid]
            if fresh:
                cs = (fresh[0].get("status", {}).get("containerStatuses") or [{}])[0]
            # A last attempt without records is being started: its status lags.
            tail = os.path.join(cdir, str(nums[-1])) if nums else None
            settled = tail is None or (
                any(os.path.exists(os.path.join(tail, f)) for f in ("started.json", "exit.json"))
                and cs.get("restartCount") == nums[-1])
            if listing() == nums and settled:
                break
            time.sleep(0.3)
        if not nums:
            continue
        last = nums[-1]
        if nums != list(range(last + 1)):
            bad("restart_counts_wrong", f"{name}: attempt dirs {nums}")
        if cs.get("restartCount") != last:
            bad("restart_counts_wrong", f"{name}: restartCount {cs.get('restartCount')} "
                f"but the last attempt is {last}")
        prev_end = None
        for k in nums:
            attempts_checked += 1
            bundle = os.path.join(cdir, str(k))
            ex = read_json(os.path.join(bundle, "exit.json"))
            start, code = log_truth(os.path.join(ldir, f"{k}.log"))
            killed = bundle in killed_shims
            if start is not None and prev_end is not None and start <= prev_end:
                bad("started_twice", f"{name} attempt {k} started at {start} before "
                    f"attempt {k - 1} ended at {prev_end}")
            if ex is None:
                if k < last:
                    bad("exits_lost", f"{name} attempt {k}: no exit record")
                elif code is not None and "running" in (cs.get("state") or {}):
                    # It exited (it said so), yet is shown running: give it a moment.
                    time.sleep(2)
                    if read_json(os.path.join(bundle, "exit.json")) is None:
                        bad("exits_lost", f"{name} attempt {k} exited {code}, not recorded")
                prev_end = None
                continue
            prev_end = parse_ts(ex["finished_at"])
            if ex.get("unknown"):
                if not killed:
                    bad("lost", f"{name} attempt {k}: {ex['unknown']}")
                continue
            if start is None and ex["exit_code"] != 128:
                bad("exits_misreported", f"{name} attempt {k}: exit {ex['exit_code']} "
                    "recorded but the container never said it started")
            if code is not None and ex["exit_code"] != code:
                bad("exits_misreported", f"{name} attempt {k}: said exit {code}, "
                    f"recorded {ex['exit_code']}")
            if code is None and start is not None and ex["exit_code"] < 128 and not killed:
                bad("exits_misreported", f"{name} attempt {k}: recorded exit "
                    f"{ex['exit_code']} but the container never said so")
        # The status's last exit must be the last record's.
        # Running: lastState is the attempt before; waiting (back-off): the last one.
        state = cs.get("state") or {}
        term = (cs.get("lastState") or {}).get("terminated")
        shown = last - 1 if "running" in state else last
        if term and shown >= 0 and "terminated" not in state:
            ex = read_json(os.path.join(cdir, str(shown), "exit.json")) or {}
            if term.get("exitCode") != ex.get("exit_code"):
                bad("exits_misreported", f"{name}: lastState exit {term.get('exitCode')}, "
                    f"record {ex.get('exit_code')}")
    with lock:
        for key, nss in doubles:
            bad("started_twice", f"{key} live in {len(nss)} pid namespaces at once")

    # Remove everything; nothing may stay behind.
    for f in os.listdir(a.manifests):
        os.unlink(os.path.join(a.manifests, f))
    deadline = time.time() + 120
    while time.time() < deadline and (api_pods(a.sock) or [1]) != []:
        time.sleep(1)
    time.sleep(2)
    collect_unclaimed_pod_dirs(a)
    leftovers = dict(processes=0, shims=0, mounts=0, cgroups=0, dirs=0, network=0)
    for mark, _, pid in marked_processes():
        leftovers["processes"] += 1
        problems.append(f"orphan process {pid} ({mark})")
    for pid, bundle in shims_of(a.root):
        leftovers["shims"] += 1
        problems.append(f"orphan shim {pid} ({bundle})")
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split(" ")[4]
            if mp.startswith(a.root):
                leftovers["mounts"] += 1
                problems.append(f"orphan mount {mp}")
    for h in os.listdir("/sys/fs/cgroup"):
        base = os.path.join("/sys/fs/cgroup", h, a.cgroup_root.lstrip("/"), "kubepods")
        for dirpath, dirnames, _ in os.walk(base):
            for d in dirnames:
                if d.startswith("pod"):
                    leftovers["cgroups"] += 1
                    problems.append(f"orphan cgroup {os.path.join(dirpath, d)}")
    pods_dir = os.path.join(a.root, "pods")
    for d in os.listdir(pods_dir) if os.path.isdir(pods_dir) else []:
        leftovers["dirs"] += 1
        problems.append(f"orphan pod dir {d}")
    # Pod networks: no veth on the bridge, no IPAM entry or pod record left.
    netns = os.environ.get("PODHOST_TORTURE_NETNS")
    if netns:
        links = subprocess.run(["ip", "-n", netns, "-o", "link", "show", "type", "veth"],
                               capture_output=True, text=True).stdout
        for line in links.splitlines():
            if "master podhost0" in line:
                leftovers["network"] += 1
                problems.append(f"orphan veth {line.split(':')[1].strip()}")
    net_dir = os.path.join(a.root, "network")
    for dirpath, _, files in os.walk(net_dir):
        for f in files:
            if dirpath.endswith("/pods") or is_ip(f):
                leftovers["network"] += 1
                problems.append(f"orphan network record {os.path.join(dirpath, f)}")
    lc = os.path.join(a.root, "run", "libcontainer")
    for d in os.listdir(lc) if os.path.isdir(lc) else []:
        leftovers["dirs"] += 1
        problems.append(f"orphan libcontainer state {d}")
    daemon.stop()

    for msg in problems[:60]:
        print("  " + msg)
    print(f"checked {attempts_checked} attempts of {len(seen)} pods still present")
    print("containers lost:            %d" % counts["lost"])
    print("containers started twice:   %d" % counts["started_twice"])
    print("exits lost:                 %d" % counts["exits_lost"])
    print("exits misreported:          %d" % counts["exits_misreported"])
    print("restart counts wrong:       %d" % counts["restart_counts_wrong"])
    print("pods missing:               %d" % counts["pods_missing"])
    print("orphan processes/shims:     %d/%d" % (leftovers["processes"], leftovers["shims"]))
    print("orphan mounts/cgroups/dirs: %d/%d/%d" % (leftovers["mounts"], leftovers["cgroups"],
                                                    leftovers["dirs"]))
    print("orphan pod network entries: %d" % leftovers["network"])
    ok = not any(counts.values()) and not any(leftovers.values())
    print("torture: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
