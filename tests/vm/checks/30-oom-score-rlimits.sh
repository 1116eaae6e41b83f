# 30-oom-score-rlimits: the kubelet's oom_score_adj policy (§6) and rlimits (§7) on real
# processes: the daemon −999 and RLIMIT_NOFILE 1000000, shims −998, Guaranteed −997,
# BestEffort 1000, Burstable 1000 − 1000·request/capacity; containers' RLIMIT_NOFILE
# 1048576 by default and per-container overrides from podhost.io/rlimits.<container>;
# every score applied, so no OOMScoreAdjNotApplied event.

assert_eq "daemon oom_score_adj" -999 "$(cat /proc/$DAEMON_PID/oom_score_adj)"
daemon_nofile=$(awk '/^Max open files/ {print $4 ":" $5}' /proc/$DAEMON_PID/limits)
assert_eq "daemon RLIMIT_NOFILE" "1000000:1000000" "$daemon_nofile"

apply_manifest scores.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: scores
  annotations:
    podhost.io/rlimits.tuned: "nofile=65536:65536,nproc=4096,core=unlimited"
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: plain
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
    resources:
      requests: {memory: 100Mi}
  - name: tuned
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
YAML
apply_manifest gscore.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: gscore
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
    resources:
      limits: {cpu: 100m, memory: 32Mi}
YAML
apply_manifest bescore.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: bescore
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
YAML
for p in scores gscore bescore; do wait_phase "$p-$NODE" Running 90; done

score() { cat "/proc/$(container_pid "$1-$NODE" "$2")/oom_score_adj"; }
mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo)
want_burstable=$((1000 - 1000 * 100 * 1024 / mem_kb))
[ "$want_burstable" -lt 3 ] && want_burstable=3
[ "$want_burstable" -gt 999 ] && want_burstable=999
assert_eq "Guaranteed oom_score_adj" -997 "$(score gscore main)"
assert_eq "BestEffort oom_score_adj" 1000 "$(score bescore main)"
assert_eq "Burstable oom_score_adj (100Mi of ${mem_kb} kB)" "$want_burstable" "$(score scores plain)"
# A child of the container's init inherits the score.
shim=$(json_flat <"$(attempt_dir "gscore-$NODE" main)/started.json" | sed -n 's/^shim_pid=//p')
assert_eq "shim oom_score_adj" -998 "$(cat /proc/$shim/oom_score_adj)"
# With CAP_SYS_RESOURCE every score was applied: no OOMScoreAdjNotApplied event (on a
# host without it, tests/hygiene.rs proves the event).
events=$(podhost_cli get events -o json) || fail "podhost get events failed"
printf '%s\n' "$events" | grep -q '"reason": "Started"' || fail "no Started event in: $events"
not_applied=$(printf '%s\n' "$events" | grep -c '"reason": "OOMScoreAdjNotApplied"')
assert_eq "OOMScoreAdjNotApplied events" 0 "$not_applied"

limit() { # pod container name → soft:hard
  awk -v n="$3" 'index($0, n) == 1 { sub(n, ""); split($0, f, " "); print f[1] ":" f[2] }' \
    "/proc/$(container_pid "$1-$NODE" "$2")/limits"
}
assert_eq "default RLIMIT_NOFILE" "1048576:1048576" "$(limit gscore main 'Max open files')"
assert_eq "annotated RLIMIT_NOFILE" "65536:65536" "$(limit scores tuned 'Max open files')"
assert_eq "annotated RLIMIT_NPROC" "4096:4096" "$(limit scores tuned 'Max processes')"
assert_eq "annotated RLIMIT_CORE" "unlimited:unlimited" "$(limit scores tuned 'Max core file size')"
assert_eq "unannotated sibling keeps the default" "1048576:1048576" "$(limit scores plain 'Max open files')"
true
