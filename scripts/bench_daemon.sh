# shellcheck shell=bash
# Sourced by scripts/bench.sh and scripts/bench-idle.sh: a release daemon on temp dirs
# with the built-in busybox image, and its clean-up.
#
# bench_daemon_start PODHOST WORK NODE CGROUP_ROOT LOG [FLAGS...]
#   loads the image into WORK/root, starts the daemon (manifests in WORK/manifests, API
#   socket WORK/sock, cgroups under CGROUP_ROOT, its log in LOG) with FLAGS, sets $pid
#   and waits for the socket.
# bench_daemon_stop
#   removes the manifests, waits (up to 2 min) for the pods to be gone, stops the
#   daemon, unmounts and removes WORK and the daemon's cgroup root in every hierarchy.

bench_daemon_start() {
  bench_podhost=$1 bench_work=$2 bench_cgroup=$4
  local node=$3 log=$5
  shift 5
  mkdir -p "$bench_work/manifests"
  bash oci/busybox/build.sh "$bench_work/layout" >/dev/null 2>&1
  "$bench_podhost" load --socket "$bench_work/sock" --root-dir "$bench_work/root" \
    "$bench_work/layout" >/dev/null
  "$bench_podhost" daemon --pod-manifest-path "$bench_work/manifests" \
    --root-dir "$bench_work/root" --log-dir "$bench_work/logs" --socket "$bench_work/sock" \
    --node-name "$node" --cgroup-root "$bench_cgroup" "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -S "$bench_work/sock" ] && break; sleep 0.05; done
}

bench_daemon_stop() {
  [ -n "${bench_work:-}" ] || return 0
  if [ -n "${pid:-}" ]; then
    rm -f "$bench_work"/manifests/*.yaml
    for _ in $(seq 600); do
      "$bench_podhost" --socket "$bench_work/sock" get pods -A -o json 2>/dev/null \
        | grep -q '"items": \[\]' && break
      sleep 0.2
    done
    if kill "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; fi
  fi
  umount -R "$bench_work/root" 2>/dev/null || true
  rm -rf "$bench_work"
  # The daemon's cgroup root, in every hierarchy (v2, or each v1 controller).
  for top in /sys/fs/cgroup /sys/fs/cgroup/*/; do
    [ -d "$top/$bench_cgroup" ] &&
      find "$top/$bench_cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  true
}
