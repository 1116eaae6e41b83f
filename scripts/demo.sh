#!/usr/bin/env bash
# The main job on a fresh Debian 12 host, as root: installs what podhost needs, builds
# it, builds the built-in busybox image (no network), starts the daemon on
# examples/manifests/, waits until the example pods are Running, and shows them.
#
# The daemon keeps running afterwards (that is the product); stop it with
#   kill "$(cat /run/podhost/demo.pid)"
# Settings (environment): PODHOST_ROOT (/var/lib/podhost), PODHOST_LOGS (/var/log/pods),
# PODHOST_SOCKET (/run/podhost/podhost.sock).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "scripts/demo.sh must run as root" >&2; exit 1; }

root=${PODHOST_ROOT:-/var/lib/podhost}
logs=${PODHOST_LOGS:-/var/log/pods}
socket=${PODHOST_SOCKET:-/run/podhost/podhost.sock}
manifests=$(pwd)/examples/manifests
pidfile=/run/podhost/demo.pid
daemon_log=/run/podhost/demo-daemon.log

bash scripts/install-deps.sh
# A toolchain install-deps.sh installed with rustup lives here.
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
echo "== building podhost (release)"
cargo build --release --locked
podhost=$(pwd)/target/release/podhost

if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "== stopping the previous demo daemon (its containers keep running and are adopted)"
  kill "$(cat "$pidfile")"
  for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
fi

echo "== building the built-in busybox image from Debian's busybox-static"
layout=$(pwd)/target/busybox-oci
rm -rf "$layout"
bash oci/busybox/build.sh "$layout" >/dev/null
"$podhost" load --socket "$socket" --root-dir "$root" "$layout"

echo "== starting: podhost daemon --pod-manifest-path $manifests"
mkdir -p /run/podhost
nohup "$podhost" daemon --pod-manifest-path "$manifests" --root-dir "$root" \
  --log-dir "$logs" --socket "$socket" >"$daemon_log" 2>&1 &
echo $! >"$pidfile"

want=$(ls "$manifests" | grep -vc '^\.')
echo "== waiting for $want pods to be Running"
for i in $(seq 120); do
  running=$("$podhost" --socket "$socket" get pods -A -o json 2>/dev/null \
    | grep -c '"phase": "Running"' || true)
  [ "$running" -ge "$want" ] && break
  [ "$i" -eq 120 ] && { echo "pods did not start; daemon log:" >&2; cat "$daemon_log" >&2; exit 1; }
  sleep 0.5
done
sleep 2
echo
echo "\$ podhost get pods"
"$podhost" --socket "$socket" get pods
node=$(hostname | tr 'A-Z' 'a-z')
echo
echo "\$ podhost logs hello-$node"
"$podhost" --socket "$socket" logs "hello-$node"
echo
echo "The daemon runs as pid $(cat "$pidfile") (log: $daemon_log). Try:"
echo "  $podhost describe pod hello-$node"
echo "  $podhost exec hello-$node -- ps"
echo "  $podhost logs -f counter-$node -c writer"
echo "Stop it with: kill \$(cat $pidfile)   (its containers keep running until it is back)"
echo
echo "Real servers (examples/real/: kubeadm's etcd, an nginx web pod with an init container):"
echo "  scripts/build-debian-image.sh target/debian-images/nginx nginx nginx-light   # offline, ~25 MB"
echo "  $podhost load target/debian-images/nginx && cp examples/real/web.yaml $manifests/"
echo "  (the images they use are listed in oci/debian/images)"
