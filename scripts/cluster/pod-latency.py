#!/usr/bin/env python3
"""Pod start latency as the API server reports it: N pods created at once with
spec.nodeName set, timed from each create request to the first watch event that shows
the pod Running; then deleted, timed to the object's disappearance.

usage: pod-latency.py NODE N IMAGE  (env from control-plane-up.sh's env.sh:
KUBE_APISERVER_URL, KUBE_CA_FILE, PODHOST_ADMIN_KUBECONFIG's admin.crt/admin.key beside)

Prints one line per figure (p50, p99, max, and when the last pod got there); exits
non-zero if a pod is not Running, or not gone after its deletion, within
max(60 s, N x 0.5 s).
"""
import http.client
import json
import os
import ssl
import statistics
import sys
import threading
import time
import urllib.parse


def connection():
    url = urllib.parse.urlparse(os.environ["KUBE_APISERVER_URL"])
    pki = os.path.join(os.path.dirname(os.environ["PODHOST_ADMIN_KUBECONFIG"]), "pki")
    ctx = ssl.create_default_context(cafile=os.environ["KUBE_CA_FILE"])
    ctx.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    return http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=90)


def request(method, path, body=None):
    c = connection()
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read()
    c.close()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {text[:300]!r}")
    return json.loads(text)


def pod(name, node, image, run_id):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"podhost-latency": run_id}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
            }],
        },
    }


def percentile(sorted_ms, q):
    """The q-quantile (nearest rank) of an ascending list."""
    rank = max(1, -(-len(sorted_ms) * q // 100))
    return sorted_ms[int(rank) - 1]


def figures(sorted_ms):
    return (f"p50 {statistics.median(sorted_ms):.0f} ms, p99 {percentile(sorted_ms, 99):.0f} ms, "
            f"max {sorted_ms[-1]:.0f} ms")


def main():
    node, n, image = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    limit = max(60.0, n * 0.5)
    run_id = f"r{os.getpid()}"
    base = "/api/v1/namespaces/default/pods"
    created, running, gone, deleted = {}, {}, {}, {}
    done = threading.Event()
    listed = request("GET", f"{base}?labelSelector=podhost-latency%3D{run_id}")
    rv = listed["metadata"]["resourceVersion"]

    watch_trouble = []

    def note(items, now):
        """A relisted state: Running pods and, of the created ones, those gone."""
        present = set()
        for item in items:
            name = item["metadata"]["name"]
            present.add(name)
            if item.get("status", {}).get("phase") == "Running":
                running.setdefault(name, now)
        for name in list(created):
            if name not in present and name in deleted:
                gone.setdefault(name, now)

    def watch():
        # A watch that ends (its timeout, a dropped connection) resumes from the last
        # resourceVersion seen; one that expired (410 Gone) relists, as a reflector does.
        since = rv
        while len(gone) < n:
            try:
                c = connection()
                c.request("GET", f"{base}?watch=1&resourceVersion={since}&allowWatchBookmarks=true"
                          f"&labelSelector=podhost-latency%3D{run_id}&timeoutSeconds={int(3 * limit) + 60}")
                r = c.getresponse()
                if r.status != 200:
                    raise RuntimeError(f"watch answered {r.status}: {r.read()[:200]!r}")
                for line in r:
                    now = time.monotonic()
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        watch_trouble.append(obj.get("message", str(obj)))
                        listed_now = request("GET", f"{base}?labelSelector=podhost-latency%3D{run_id}")
                        note(listed_now["items"], time.monotonic())
                        since = listed_now["metadata"]["resourceVersion"]
                        break
                    since = obj["metadata"]["resourceVersion"]
                    if ev["type"] == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    if ev["type"] == "DELETED":
                        gone.setdefault(name, now)
                    elif obj.get("status", {}).get("phase") == "Running":
                        running.setdefault(name, now)
                    if len(gone) == n:
                        break
                c.close()
            except Exception as e:  # noqa: BLE001 - any failure resumes the watch
                watch_trouble.append(repr(e))
                time.sleep(0.5)
        done.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    names = [f"lat-{run_id}-{i}" for i in range(n)]
    creators, refused = [], []
    for name in names:
        def create(name=name):
            created[name] = time.monotonic()
            try:
                request("POST", base, pod(name, node, image, run_id))
            except SystemExit as e:  # a refused create ends only its own thread
                refused.append(str(e))
        th = threading.Thread(target=create)
        th.start()
        creators.append(th)
    for th in creators:
        th.join()
    if refused:
        raise SystemExit(f"{len(refused)} of {n} creates refused, first: {refused[0]}")
    deadline = time.monotonic() + limit
    while len(running) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    if len(running) < n:
        trouble = f"; the watch had trouble: {watch_trouble[:3]}" if watch_trouble else ""
        raise SystemExit(f"only {len(running)} of {n} pods Running after {limit:.0f} s{trouble}")
    first = min(created.values())
    lat = sorted((running[p] - created[p]) * 1000 for p in names)
    print(f"start: {n} pods at once, create -> Running in the API: {figures(lat)}; "
          f"all Running {max(running.values()) - first:.1f} s after the first create")
    deleters = []
    for name in names:
        def delete(name=name):
            deleted[name] = time.monotonic()
            request("DELETE", f"{base}/{name}", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                  "gracePeriodSeconds": 5})
        th = threading.Thread(target=delete)
        th.start()
        deleters.append(th)
    for th in deleters:
        th.join()
    done.wait(limit)
    if len(gone) < n:
        trouble = f"; the watch had trouble: {watch_trouble[:3]}" if watch_trouble else ""
        raise SystemExit(f"only {len(gone)} of {n} pods gone {limit:.0f} s after their deletion{trouble}")
    if watch_trouble:
        print(f"note: the watch resumed {len(watch_trouble)} time(s), first: {watch_trouble[0]}")
    d = sorted((gone[p] - deleted[p]) * 1000 for p in names)
    print(f"delete: grace 5 s, delete sent -> object gone: {figures(d)}")


if __name__ == "__main__":
    main()
