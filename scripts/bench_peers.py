#!/usr/bin/env python3
"""The peers' side of scripts/bench.sh: runc, crun and podman from Debian on the same
busybox image.

usage: bench_peers.py WORKDIR LAYOUT RUNS PODS OUT.json

- runc / crun: `run` of /bin/true in a bundle unpacked from LAYOUT (umoci), RUNS times
  back to back: ms per container (p50) and containers per second. crun refuses hybrid
  cgroup hosts whose cgroup2 mount has controllers ("cgroups in hybrid mode not
  supported"): it then runs in a mount namespace of its own with
  /sys/fs/cgroup/unified unmounted (the host is left alone).
- podman: `podman kube play --network none` of a one-container pod (returns with the pod
  Running), RUNS times, each followed by `kube down` (not timed); then PODS pods at once
  and the RSS/PSS of every conmon (podman's per-container monitor). podman runs with
  its own storage under WORKDIR and a private containers.conf (runtime runc: crun
  refuses this host; nofile/nproc within this host's hard limits: no CAP_SYS_RESOURCE).

PEERS (env, default "runc crun podman"): the peers to measure, space-separated
(scripts/bench-vm.sh measures crun alone). A bundle already in WORKDIR/bundle is used as
it is (then umoci is not needed).
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import time

from bench_common import pct, rss_pss_kib

WORK, LAYOUT = sys.argv[1], sys.argv[2]
RUNS, PODS = int(sys.argv[3]), int(sys.argv[4])
OUT = sys.argv[5]
PEERS = os.environ.get("PEERS", "runc crun podman").split()


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)



def hybrid():
    try:
        with open("/sys/fs/cgroup/unified/cgroup.controllers") as f:
            return bool(f.read().strip())
    except OSError:
        return False


def bundle():
    b = os.path.join(WORK, "bundle")
    if not os.path.exists(b):
        run(["umoci", "unpack", "--image", LAYOUT + ":latest", b])
        path = os.path.join(b, "config.json")
        with open(path) as f:
            spec = json.load(f)
        spec["process"]["args"] = ["/bin/true"]
        spec["process"]["terminal"] = False
        with open(path, "w") as f:
            json.dump(spec, f)
    return b


def time_runtime(tool, b):
    wrap = []
    if tool == "crun" and hybrid():
        wrap = ["unshare", "-m", "sh", "-c", 'umount /sys/fs/cgroup/unified && exec "$@"', "sh"]
    # One timing process inside the namespace, so the wrapper is not counted.
    script = (
        "import subprocess,time,json,sys\n"
        "lat=[]\n"
        "for i in range(%d):\n"
        "  t=time.perf_counter()\n"
        "  subprocess.run(['%s','run','-b','%s','bench-%s-%%d'%%i],check=True,stdout=subprocess.DEVNULL)\n"
        "  lat.append(time.perf_counter()-t)\n"
        "print(json.dumps(lat))\n" % (RUNS, tool, b, tool)
    )
    t0 = time.perf_counter()
    out = subprocess.run(wrap + ["python3", "-c", script], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lat = json.loads(out.stdout)
    return {
        tool + "_run_p50_ms": round(statistics.median(lat) * 1000, 1),
        tool + "_containers_per_s": round(len(lat) / sum(lat), 1),
        tool + "_loop_wall_s": round(wall, 2),
    }


def podman_env():
    conf = os.path.join(WORK, "containers.conf")
    with open(conf, "w") as f:
        f.write(
            '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
            '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
        )
    env = dict(os.environ, CONTAINERS_CONF=conf)
    return env, [
        "podman",
        "--root", os.path.join(WORK, "podman-root"),
        "--runroot", os.path.join(WORK, "podman-run"),
        "--storage-driver", "overlay",
    ]


def pod_yaml(name, command):
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n"
        "  terminationGracePeriodSeconds: 2\n  containers:\n  - name: c\n"
        "    image: localhost/busybox:latest\n    command: %s\n" % (name, json.dumps(command))
    )



def conmons():
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/comm") as f:
                if f.read().strip() == "conmon":
                    pids.append(int(d[6:]))
        except OSError:
            pass
    return pids


def time_podman():
    env, podman = podman_env()
    # podman names the pulled image after the layout's path, which must be lowercase.
    plain = "/tmp/podhost-bench-layout-%d" % os.getpid()
    os.symlink(os.path.abspath(LAYOUT), plain)
    try:
        run(podman + ["pull", "-q", "oci:" + plain + ":latest"], env=env)
    finally:
        os.unlink(plain)
    image = subprocess.run(podman + ["images", "-q"], env=env, check=True, capture_output=True,
                           text=True).stdout.split()[0]
    run(podman + ["tag", image, "localhost/busybox:latest"], env=env)
    sleep = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    path = os.path.join(WORK, "pod.yaml")
    with open(path, "w") as f:
        f.write(pod_yaml("bench", sleep))
    lat = []
    for _ in range(RUNS):
        t = time.perf_counter()
        run(podman + ["kube", "play", "--network", "none", path], env=env)
        lat.append(time.perf_counter() - t)
        run(podman + ["kube", "down", path], env=env)
    many = []
    for i in range(PODS):
        p = os.path.join(WORK, "pod%d.yaml" % i)
        with open(p, "w") as f:
            f.write(pod_yaml("bench%d" % i, sleep))
        many.append(p)
    before = set(conmons())
    for p in many:
        run(podman + ["kube", "play", "--network", "none", p], env=env)
    mine = [pid for pid in conmons() if pid not in before]
    mem = [rss_pss_kib(pid) for pid in mine]
    for p in many:
        run(podman + ["kube", "down", p], env=env)
    # Each podman pod has two conmons (infra and app): per running container = per conmon.
    return {
        "podman_play_p50_ms": round(statistics.median(lat) * 1000, 1),
        "podman_play_p99_ms": round(pct(lat, 99) * 1000, 1),
        "conmons_counted": len(mem),
        "conmon_rss_mib": round(statistics.median(m[0] for m in mem) / 1024, 2),
        "conmon_pss_mib": round(statistics.median(m[1] for m in mem) / 1024, 2),
    }


def unmount_work():
    """podman's overlay driver leaves its storage dir mounted: nothing of the run stays."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for m in sorted((m for m in mounts if m.startswith(os.path.abspath(WORK))), reverse=True):
        subprocess.run(["umount", "-l", m])


def main():
    b = bundle()
    results = {}
    for tool in ("runc", "crun"):
        if tool not in PEERS:
            continue
        try:
            results.update(time_runtime(tool, b))
        except subprocess.CalledProcessError as e:
            results[tool + "_error"] = (e.stderr or "")[-300:]
    if "podman" in PEERS:
        try:
            results.update(time_podman())
        except subprocess.CalledProcessError as e:
            results["podman_error"] = str(e)
        finally:
            unmount_work()
    with open(OUT, "w") as f:
        json.dump(results, f, indent=1)
    for k, v in results.items():
        print("%-32s %s" % (k, v))


main()
