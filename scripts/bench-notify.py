#!/usr/bin/env python3
"""podhost daemon start -> READY=1 and SIGHUP -> READY=1 (config reload), as systemd sees them.

Usage (root): scripts/bench-notify.py [BIN] [RUNS]. Each run uses its own temp dirs, an empty
manifest dir, --pod-network none and a small --config; it plays systemd with a datagram socket."""
import os, socket, subprocess, sys, tempfile, time, signal, statistics
BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/podhost"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
ready, reload_ = [], []
for i in range(runs):
    d = tempfile.mkdtemp(prefix="cfgbench-")
    os.makedirs(f"{d}/manifests")
    cfg = f"{d}/config.yaml"
    open(cfg, "w").write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: 5Mi\nmaxPods: 10\n")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(f"{d}/notify.sock"); s.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET=f"{d}/notify.sock", WATCHDOG_USEC="2000000")
    t0 = time.monotonic()
    p = subprocess.Popen([BIN, "--socket", f"{d}/api.sock", "daemon", "--config", cfg,
        "--pod-manifest-path", f"{d}/manifests", "--root-dir", f"{d}/root", "--log-dir", f"{d}/logs",
        "--node-name", "cfgbench", "--cgroup-root", "podhost-cfgbench", "--pod-network", "none"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(f"{d}/log", "w"))
    while True:
        m = s.recv(4096).decode()
        if m.startswith("READY=1"): break
    ready.append((time.monotonic() - t0) * 1000)
    open(cfg, "w").write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: 6Mi\nmaxPods: 10\n")
    t1 = time.monotonic(); p.send_signal(signal.SIGHUP)
    while True:
        m = s.recv(4096).decode()
        if m == "READY=1": break
    reload_.append((time.monotonic() - t1) * 1000)
    p.send_signal(signal.SIGTERM); p.wait(30)
    subprocess.run(["rm", "-rf", d])
print(f"start -> READY=1: median {statistics.median(ready):.1f} ms, max {max(ready):.1f} ms over {runs}")
print(f"SIGHUP -> READY=1 (reload): median {statistics.median(reload_):.2f} ms, max {max(reload_):.2f} ms over {runs}")
