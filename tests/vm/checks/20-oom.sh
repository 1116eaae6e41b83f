# 20-oom: a container that exceeds its memory limit is OOM-killed by the kernel (no swap:
# memory.swap.max=0) and reported as Terminated, reason OOMKilled, exit code 137, with a
# message naming the victim process, the limit and the peak; an event; a restart under
# the restart policy; and, with the single-process opt-out, a killed child is still
# reported as OOMKilled though the container's init survives.

apply_manifest oom.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: oom
spec:
  restartPolicy: OnFailure
  containers:
  - name: hog
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo start; exec tail /dev/zero"]
    resources:
      limits: {memory: 32Mi}
YAML
pod=oom-$NODE
# One snapshot of the container's status per look: it restarts ~1 s after each kill, so
# separate reads could mix two instances.
snap() { container_status "$pod" hog; }
field() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -1; }
oom_snapshot() {
  local st
  st=$(snap)
  for which in state lastState; do
    if [ "$(field "$st" "$which.terminated.reason")" = OOMKilled ]; then
      printf '%s\n' "$st" | sed -n "s/^$which\.terminated\.//p"
      return 0
    fi
  done
  return 1
}
# Watch tightly, to measure the time from the kernel's kill to the status.
deadline=$(($(date +%s) + 90))
until podhost_cli get pods -o json | grep -q '"reason": "OOMKilled"'; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "timed out waiting for OOMKilled"
done
seen=$(cut -d' ' -f1 /proc/uptime)
killed=$(dmesg | grep 'oom-kill:' | tail -1 | sed 's/^\[ *\([0-9.]*\)\].*/\1/')
info "kernel kill at ${killed}s, status OOMKilled seen at ${seen}s: $(echo "$seen $killed" | awk '{printf "%.0f ms", ($1 - $2) * 1000}') (TCG guest)"
wait_until 10 "the OOMKilled snapshot" oom_snapshot
t=$(oom_snapshot)
assert_eq "exit code" 137 "$(field "$t" exitCode)"
msg=$(field "$t" message)
info "termination message: $msg"
case "$msg" in
  "OOMKilled: tail (pid "*") at memory limit 32Mi, peak "*) ;;
  *) fail "termination message does not name the victim, limit and peak: '$msg'" ;;
esac
podhost_cli describe pod "$pod" | grep -q 'OOMKilled' || fail "no OOMKilled event in describe"
# OnFailure: it is restarted (with back-off).
restarted() { [ "$(field "$(snap)" restartCount)" -ge 1 ]; }
wait_until 60 "a restart after the OOM kill" restarted
delete_manifest oom.yaml
wait_pod_gone "$pod" 60

# Single-process OOM kill (memory.oom.group=0): only the hog child dies; sh goes on.
apply_manifest oom1.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: oom1
  annotations:
    podhost.io/single-process-oom-kill: "true"
spec:
  restartPolicy: Never
  containers:
  - name: hog
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "tail /dev/zero; echo survived; exit 0"]
    resources:
      limits: {memory: 32Mi}
YAML
pod=oom1-$NODE
finished() { [ -n "$(field "$(snap)" state.terminated.reason)" ]; }
wait_until 90 "the single-process pod to finish" finished
grep -q '"memory.oom.group": "0"' "$(attempt_dir "$pod" hog)/config.json" ||
  fail "the opt-out container's spec does not set memory.oom.group=0"
st=$(snap)
assert_eq "reason" OOMKilled "$(field "$st" state.terminated.reason)"
assert_eq "exit code of the surviving init" 0 "$(field "$st" state.terminated.exitCode)"
podhost_cli logs "$pod" | grep -q survived || fail "the init did not survive the child's OOM kill"
delete_manifest oom1.yaml
wait_pod_gone "$pod" 60
true
