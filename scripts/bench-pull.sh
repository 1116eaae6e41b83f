#!/usr/bin/env bash
# Registry pull benchmark, three ways to get the same image from the same local
# registry:
#   podhost  examples/pull.rs: one process, Puller::pull into a fresh image store,
#            layers unpacked (pays for building the registry client each time)
#   daemon   `podhost pull` through a running daemon (what users run; the image is
#            removed with `podhost rmi`, content included, between runs)
#   skopeo   `skopeo copy` into a fresh OCI layout dir (no unpack)
#   podman   `podman pull` into one podman storage of the run's own (layers unpacked,
#            like podhost; the image is removed with `podman rmi` between runs)
#
# usage: scripts/bench-pull.sh [-n RUNS] [-P PORT] [-H]
#   RUNS  timed runs per tool and image (default 10), alternating which tool goes first
#   PORT  registry port on 127.0.0.1 (default: a free one)
#   -H    write the pulled images under the results dir on the host's filesystem
#         instead of a fresh ext4 (with journal, mkfs defaults) loop-mounted for the run
#
# Where the images land matters: an image store is normally on a journaled fs
# (/var/lib on ext4 or xfs). Without a journal, ext4 checks every candidate inode
# for a recent deletion when allocating (recently_deleted()), which on a busy
# build host costs ~50 us per inode: a pull that unpacks busybox's ~400 symlinks
# pays for it and `skopeo copy`, which writes 3 files, does not.
#
# Images: "small" = the built-in busybox (oci/busybox/build.sh, ~1 MiB layer) and "big" =
# busybox plus one 32 MiB layer of pseudo-random data (seeded, so every run of this script
# pushes the same bytes). The registry is Debian's docker-registry, started offline with
# its storage in the results dir and stopped (by PID) on exit.
#
# Prints per tool and image the median wall and CPU time (for the daemon: the CLI's
# plus the daemon's), and each podhost way's ratio to skopeo and to podman (median of
# the per-run ratios; goal <= 1.0). Results and raw
# timings go to $RESULTS (default /tmp/bench-results/pull-podhost-<UTC stamp>).
# Needs root (unpacking layers creates device nodes and chowns).
set -euo pipefail

RUNS=10
PORT=
HOST_FS=
while getopts "n:P:H" o; do
  case $o in
    n) RUNS=$OPTARG ;;
    P) PORT=$OPTARG ;;
    H) HOST_FS=1 ;;
    *) sed -n '2,25p' "$0"; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
REPO=$PWD
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/bench-pull.sh must run as root (layers are unpacked with their owners and devices)" >&2
  exit 1
fi
bash scripts/install-deps.sh --test
command -v podman >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman >/dev/null
command -v python3 >/dev/null || bash scripts/install-deps.sh python3

RESULTS=${RESULTS:-/tmp/bench-results/pull-podhost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS"
echo "results: $RESULTS"

echo "building examples/pull.rs (release)"
cargo build --release --example pull --bin podhost -q
PULL=$REPO/target/release/examples/pull
PODHOST=$REPO/target/release/podhost

# ---- images ---------------------------------------------------------------------
SMALL=$RESULTS/small-oci
BIG=$RESULTS/big-oci
bash oci/busybox/build.sh "$SMALL" >/dev/null 2>"$RESULTS/build.log" || { cat "$RESULTS/build.log" >&2; exit 1; }
python3 - "$SMALL" "$BIG" <<'EOF'
# big = small + one layer holding /big.bin: 32 MiB from a seeded generator.
import gzip, hashlib, io, json, os, random, shutil, sys, tarfile
src, dst = sys.argv[1], sys.argv[2]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
blobs = os.path.join(dst, "blobs", "sha256")
def put(data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, h), "wb") as f:
        f.write(data)
    return "sha256:" + h, len(data)
def get(digest):
    with open(os.path.join(blobs, digest.split(":")[1]), "rb") as f:
        return f.read()
payload = random.Random(20261121).randbytes(32 << 20)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    info = tarfile.TarInfo("big.bin")
    info.size, info.mtime, info.mode, info.uid, info.gid = len(payload), 0, 0o644, 0, 0
    t.addfile(info, io.BytesIO(payload))
layer_tar = buf.getvalue()
diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
layer, layer_size = put(gzip.compress(layer_tar, compresslevel=1, mtime=0))
index = json.load(open(os.path.join(dst, "index.json")))
manifest = json.loads(get(index["manifests"][0]["digest"]))
config = json.loads(get(manifest["config"]["digest"]))
config["rootfs"]["diff_ids"].append(diff_id)
config.setdefault("history", []).append({"created": "1970-01-01T00:00:00Z", "created_by": "bench-pull.sh: 32 MiB"})
manifest["config"]["digest"], manifest["config"]["size"] = put(json.dumps(config).encode())
manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                           "digest": layer, "size": layer_size})
m, m_size = put(json.dumps(manifest).encode())
entry = index["manifests"][0]
entry["digest"], entry["size"] = m, m_size
entry["annotations"] = {"org.opencontainers.image.ref.name": "localhost/busybox:big"}
json.dump(index, open(os.path.join(dst, "index.json"), "w"))
print(f"big image: extra layer {layer} ({layer_size} bytes), manifest {m}")
EOF

# ---- registry -------------------------------------------------------------------
[ -n "$PORT" ] || PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ADDR=127.0.0.1:$PORT
mkdir -p "$RESULTS/registry/data"
cat >"$RESULTS/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $RESULTS/registry/data
  cache:
    blobdescriptor: inmemory
http:
  addr: $ADDR
EOF
/usr/bin/docker-registry serve "$RESULTS/registry/config.yml" >"$RESULTS/registry/registry.log" 2>&1 </dev/null &
REGISTRY_PID=$!
DEST=$RESULTS/dest
mkdir -p "$DEST"
DAEMON_PID=
PODMAN_RUN=
cleanup() {
  if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
  kill "$REGISTRY_PID" 2>/dev/null || true
  wait "$REGISTRY_PID" 2>/dev/null || true
  if [ -d "$DEST/podman-root" ]; then
    podman --root "$DEST/podman-root" --runroot "$PODMAN_RUN" --storage-driver overlay \
      system reset -f >/dev/null 2>&1 || true
    # overlay's own mounts under its root, if any are left.
    grep -o " $DEST/podman-root[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  fi
  [ -z "$PODMAN_RUN" ] || rm -rf "$PODMAN_RUN"
  rm -rf "$RESULTS/podman-tmp"
  if mountpoint -q "$DEST"; then umount "$DEST" || umount -l "$DEST"; fi
  rm -rf "$RESULTS/registry/data" "$DEST" "$RESULTS/dest.img" "$SMALL" "$BIG"
}
trap cleanup EXIT
if [ -z "$HOST_FS" ]; then
  command -v mkfs.ext4 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q e2fsprogs >/dev/null
  # Allocated up front: a sparse backing file would make later runs pay for
  # growing it on the host's filesystem.
  fallocate -l 4G "$RESULTS/dest.img"
  mkfs.ext4 -q -F "$RESULTS/dest.img"
  mount -o loop "$RESULTS/dest.img" "$DEST"
fi
for _ in $(seq 100); do
  python3 - "$ADDR" <<'EOF' && break
import sys, urllib.request
try:
    urllib.request.urlopen(f"http://{sys.argv[1]}/v2/", timeout=1)
except Exception:
    sys.exit(1)
EOF
  kill -0 "$REGISTRY_PID" 2>/dev/null || { cat "$RESULTS/registry/registry.log" >&2; exit 1; }
  sleep 0.1
done
echo "registry on $ADDR (pid $REGISTRY_PID)"
skopeo copy -q --dest-tls-verify=false "oci:$SMALL:localhost/busybox:latest" "docker://$ADDR/busybox:latest"
skopeo copy -q --dest-tls-verify=false "oci:$BIG:localhost/busybox:big" "docker://$ADDR/busybox:big"

# ---- sanity: both tools get the same manifest -----------------------------------
ours=$("$PULL" --quiet --insecure "$ADDR" "$DEST/verify-store" "$ADDR/busybox:big" | awk '{print $2}')
skopeo copy -q --src-tls-verify=false "docker://$ADDR/busybox:big" "oci:$DEST/verify-oci:big"
theirs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$DEST/verify-oci/index.json")
echo "manifest digests: podhost $ours skopeo $theirs" | tee "$RESULTS/verify.txt"
[ "$ours" = "$theirs" ] || { echo "digest mismatch" >&2; exit 1; }

# ---- the daemon, for `podhost pull` -------------------------------------------
# What users run: the CLI asks a running daemon, whose registry client (and its
# TLS roots, ~9 ms to load here) lives as long as the daemon does.
SOCK=$RESULTS/podhost.sock
mkdir -p "$RESULTS/daemon-manifests"
"$PODHOST" daemon --root-dir "$DEST/daemon-root" --log-dir "$DEST/daemon-logs" \
  --pod-manifest-path "$RESULTS/daemon-manifests" --socket "$SOCK" --node-name bench \
  --insecure-registry "$ADDR" --image-credentials "$RESULTS/no-credentials.json" \
  >"$RESULTS/daemon.log" 2>&1 </dev/null &
DAEMON_PID=$!
for _ in $(seq 100); do
  "$PODHOST" images --socket "$SOCK" >/dev/null 2>&1 && break
  kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$RESULTS/daemon.log" >&2; exit 1; }
  sleep 0.1
done

# ---- podman, for `podman pull` ---------------------------------------------------
# Its own storage and run dirs on the same filesystem as the others; cgroupfs and a
# file event log, so that nothing of the host's podman or systemd is touched.
# podman refuses a run root longer than 50 characters.
PODMAN_RUN=$(mktemp -d /run/podhost-bench-podman.XXXXXX)
PODMAN=(podman --root "$DEST/podman-root" --runroot "$PODMAN_RUN" --storage-driver overlay
  --cgroup-manager cgroupfs --events-backend file --tmpdir "$RESULTS/podman-tmp")
PODMAN_CMD=$(printf '%s\n' "${PODMAN[@]}")

# ---- timings --------------------------------------------------------------------
python3 - "$RUNS" "$RESULTS" "$PULL" "$ADDR" "$DEST" "$PODHOST" "$SOCK" "$DAEMON_PID" "$PODMAN_CMD" <<'EOF' | tee "$RESULTS/summary.txt"
import os, resource, shutil, statistics, subprocess, sys, time
runs, results, pull, addr, dest_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
podhost, sock, daemon_pid = sys.argv[6], sys.argv[7], sys.argv[8]
podman = sys.argv[9].splitlines()
def daemon_cpu():
    fields = open(f"/proc/{daemon_pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
# Every run writes to a new dir, removed after it (and synced before the next), so
# every run starts on the same nearly empty filesystem. (With -H on a host fs
# without a journal, the removals make later pulls skip recently deleted inodes.)
runs_dir = os.path.join(dest_dir, "runs")
seq = iter(range(1 << 30))
def cmd(tool, tag, dest):
    if tool == "daemon":
        return [podhost, "pull", "--socket", sock, f"{addr}/busybox:{tag}"]
    if tool == "podman":
        return podman + ["pull", "-q", "--tls-verify=false", f"{addr}/busybox:{tag}"]
    if tool == "podhost":
        return [pull, "--quiet", "--insecure", addr, dest, f"{addr}/busybox:{tag}"]
    return ["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{addr}/busybox:{tag}", f"oci:{dest}:{tag}"]
def timed(tool, tag):
    dest = os.path.join(runs_dir, f"{next(seq)}-{tool}-{tag}")
    subprocess.run(["sync"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    daemon_before = daemon_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(cmd(tool, tag, dest), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{tool} failed (exit {done.returncode}): {done.stderr.decode(errors='replace')}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if tool == "daemon":
        cpu += daemon_cpu() - daemon_before
        # Image, blobs and snapshots all go: the next pull downloads everything.
        subprocess.run([podhost, "rmi", "--socket", sock, f"{addr}/busybox:{tag}"],
                       check=True, stdout=subprocess.DEVNULL)
    elif tool == "podman":
        # Layers too (no other image shares them): the next pull downloads everything.
        subprocess.run(podman + ["rmi", f"{addr}/busybox:{tag}"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        shutil.rmtree(dest)
    return wall, cpu
raw = open(os.path.join(results, "raw.tsv"), "w")
raw.write("image\trun\ttool\twall_s\tcpu_s\n")
print(f"bench-pull.sh {time.strftime('%Y-%m-%d', time.gmtime())}  {os.cpu_count()} cores  "
      f"loadavg {os.getloadavg()[0]:.2f}  dest {'fresh ext4 loop' if os.path.ismount(dest_dir) else 'host fs'} "
      f"({subprocess.run(['stat', '-f', '-c', '%T', dest_dir], capture_output=True, text=True).stdout.strip()})  "
      f"runs {runs} (alternating order, 1 warm-up each)")
print(f"{'image':6} {'tool':8} {'wall ms':>9} {'cpu ms':>9}")
for tag, label in (("latest", "small"), ("big", "big")):
    tools = ("podhost", "daemon", "skopeo", "podman")
    for tool in tools:  # warm-up
        timed(tool, tag)
    t = {tool: [] for tool in tools}
    for i in range(runs):
        order = tools if i % 2 == 0 else tools[::-1]
        for tool in order:
            w, c = timed(tool, tag)
            t[tool].append((w, c))
            raw.write(f"{label}\t{i}\t{tool}\t{w:.6f}\t{c:.6f}\n")
    for tool in tools:
        print(f"{label:6} {tool:8} {statistics.median(w for w, _ in t[tool]) * 1000:9.1f} "
              f"{statistics.median(c for _, c in t[tool]) * 1000:9.1f}")
    for peer in ("skopeo", "podman"):
        for ours, what in (("podhost", "one process"), ("daemon", "podhost pull via the daemon")):
            ratio_w = statistics.median(a[0] / b[0] for a, b in zip(t[ours], t[peer]))
            ratio_c = statistics.median(a[1] / b[1] for a, b in zip(t[ours], t[peer]))
            verdict = "goal met" if ratio_w <= 1.0 else "goal missed"
            print(f"{label:6} {ours}/{peer} wall ratio {ratio_w:.2f} (cpu {ratio_c:.2f})  [{verdict}: <= 1.0]  ({what})")
raw.close()
shutil.rmtree(runs_dir, ignore_errors=True)
EOF
echo "raw timings: $RESULTS/raw.tsv"
