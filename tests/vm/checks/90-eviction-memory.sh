# shellcheck shell=bash
# 90-eviction-memory: the eviction manager under REAL memory pressure on the v2 kernel. A
# daemon of this check's own (root dir, socket, cgroup root, node name) runs with
# --eviction-hard=memory.available<T, T chosen 150 MiB under what the guest has available
# now, checked every second. A "hog" pod grows by 25 MiB a second (dd buffers held by
# blocked pipes: anonymous memory, no CPU); a "small" pod holds 20 MiB. The hog is evicted
# (phase Failed, reason Evicted, the kubelet's memory message, DisruptionTarget), its
# container stopped by the eviction (not OOM-killed); the small pod keeps running; the
# node goes through MemoryPressure and back (NodeHasInsufficientMemory/…Sufficient…).

SHARE_DIR=$(dirname "$SUITE_DIR")
EVICT_WORK=$VM_WORK/eviction
export PODHOST_ROOT=$EVICT_WORK/root PODHOST_MANIFESTS=$EVICT_WORK/manifests
export PODHOST_SOCKET=/run/podhost/eviction.sock NODE=vm-evict
EVICT_LOG=$CHECK_OUT/eviction-daemon.log
mkdir -p "$PODHOST_ROOT" "$PODHOST_MANIFESTS" "$EVICT_WORK/logs" "$CHECK_OUT"

# memory.available as the kubelet computes it on v2: MemTotal − (MemTotal − MemFree −
# inactive_file) = MemFree + inactive_file of the root cgroup, in MiB.
available_mib() {
  local free inactive
  free=$(sed -n 's/^MemFree: *\([0-9]*\) kB$/\1/p' /proc/meminfo)
  inactive=$(sed -n 's/^inactive_file //p' /sys/fs/cgroup/memory.stat)
  echo $(((free * 1024 + inactive) >> 20))
}

evict_daemon=
cleanup() {
  rm -f "$PODHOST_MANIFESTS"/*.yaml
  if [ -n "$evict_daemon" ] && kill -0 "$evict_daemon" 2>/dev/null; then
    for _ in $(seq 1 60); do
      [ -z "$(podhost_cli get pods -o json 2>/dev/null | json_flat | grep '^items\.[0-9]*\.metadata\.name=')" ] && break
      sleep 0.5
    done
    kill -TERM "$evict_daemon" 2>/dev/null
    wait "$evict_daemon" 2>/dev/null
  fi
  # Whatever a failed run left: every container init and shim this daemon started.
  for f in "$PODHOST_ROOT"/pods/*/containers/*/*/started.json; do
    [ -f "$f" ] || continue
    for key in init_pid shim_pid; do
      pid=$(json_flat <"$f" | sed -n "s/^$key=//p")
      [ -n "$pid" ] && [ "$pid" -gt 1 ] && kill -KILL "$pid" 2>/dev/null
    done
  done
  tail -n 30 "$EVICT_LOG" 2>/dev/null | sed 's/^/eviction daemon: /'
}
trap cleanup EXIT

avail=$(available_mib)
threshold=$((avail - 150))
info "memory.available now: ${avail} MiB; threshold: ${threshold} MiB (MemTotal $(sed -n 's/^MemTotal: *//p' /proc/meminfo))"
# The suite's daemon evicts below 100Mi (the kubelet's default): stay well above it, and
# leave the hog room to grow past the threshold without an OOM.
[ "$threshold" -ge 250 ] || fail "the guest has too little memory available (${avail} MiB) for this check (MEM=...)"

NO_COLOR=1 RUST_LOG=info podhost daemon --pod-manifest-path "$PODHOST_MANIFESTS" \
  --root-dir "$PODHOST_ROOT" --log-dir "$EVICT_WORK/logs" --socket "$PODHOST_SOCKET" \
  --node-name "$NODE" --cgroup-root /podhost-eviction --pod-network none \
  --rescan-interval 2 --eviction-hard="memory.available<${threshold}Mi" \
  --eviction-monitoring-period=1 --eviction-pressure-transition-period=5 \
  </dev/null >"$EVICT_LOG" 2>&1 &
evict_daemon=$!
daemon_up() { podhost_cli get pods >/dev/null; }
wait_until 60 "the eviction daemon's API" daemon_up
podhost_cli load "$SHARE_DIR/busybox-oci" >"$CHECK_OUT/load.log" 2>&1 ||
  fail "podhost load through $PODHOST_SOCKET failed: $(tail -3 "$CHECK_OUT/load.log")"

apply_manifest small.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: small
spec:
  containers:
  - name: small
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "dd if=/dev/zero bs=20M count=1 2>/dev/null | sleep 100000 & echo holding; exec sleep 100000"]
YAML
wait_running small-$NODE small 90

# Each dd reads 25 MiB into its buffer, then blocks writing it into a pipe nobody reads.
apply_manifest hog.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: hog
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: hog
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "i=0; while [ $i -lt 12 ]; do dd if=/dev/zero bs=25M count=1 2>/dev/null | sleep 100000 & i=$((i+1)); echo held=$((i*25))Mi; sleep 1; done; exec sleep 100000"]
YAML
pod=hog-$NODE
wait_running "$pod" hog 90
evicted() { [ "$(pod_field "$pod" status.reason)" = Evicted ]; }
wait_until 90 "the hog to be evicted" evicted
info "available after the eviction order: $(available_mib) MiB"
info "hog's log: $(podhost_cli logs "$pod" -c hog 2>/dev/null | tail -1)"
problems=()
check "hog phase" Failed "$(pod_field "$pod" status.phase)"
message=$(pod_field "$pod" status.message)
info "message: $message"
case "$message" in
  "The node was low on resource: memory. Threshold quantity: ${threshold}Mi, available: "*". Container hog was using "*", request is 0, has larger consumption of memory. ") ;;
  *) problems+=("not the kubelet's message: $message") ;;
esac
flat=$(pod_json "$pod")
dt=$(printf '%s\n' "$flat" | sed -n 's/^status\.conditions\.\([0-9]*\)\.type=DisruptionTarget$/\1/p')
[ -n "$dt" ] || problems+=("no DisruptionTarget condition")
check "DisruptionTarget reason" TerminationByKubelet "$(value "status.conditions.$dt.reason" "$flat")"
stopped() { [ -n "$(value state.terminated.exitCode "$(container_status "$pod" hog)")" ]; }
wait_until 60 "the hog's container to stop" stopped
st=$(container_status "$pod" hog)
info "hog container: $(printf '%s\n' "$st" | grep -E '^state\.terminated\.(reason|exitCode)=' | tr '\n' ' ')"
[ "$(value state.terminated.reason "$st")" != OOMKilled ] || problems+=("the hog was OOM-killed, not evicted")
podhost_cli get events | grep -q "Evicted" || problems+=("no Evicted event")
podhost_cli get events | grep -q "NodeHasInsufficientMemory" || problems+=("no NodeHasInsufficientMemory node event")
grep -q "eviction manager: evicting pod" "$EVICT_LOG" || problems+=("no eviction in the daemon log")
# The hog's memory is freed with its processes: the pressure ends (after the 5 s
# transition period) and nothing else is evicted.
recovered() { podhost_cli get events | grep -q NodeHasSufficientMemory; }
wait_until 60 "MemoryPressure to end (NodeHasSufficientMemory)" recovered
check "small phase" Running "$(pod_field small-$NODE status.phase)"
check "small reason" "" "$(pod_field small-$NODE status.reason)"
check "small restarts" 0 "$(value restartCount "$(container_status small-$NODE small)")"
check "evictions in the daemon log" 1 "$(grep -c 'eviction manager: evicting pod' "$EVICT_LOG")"
info "available at the end: $(available_mib) MiB"
[ ${#problems[@]} -eq 0 ] || fail "${problems[*]}"
true
