# 40-system-oom: a machine-wide OOM (a hog outside every pod, no memcg limit) is read from
# /dev/kmsg and reported as a SystemOOM node event naming the victim; the daemon (−999)
# survives it and a pod's OOM report is not replayed as a new event.

before=$(podhost_cli get events -o json | grep -c '"reason": "SystemOOM"')
# The hog volunteers as the victim (oom_score_adj 1000) and has no memory limit.
sh -c 'echo 1000 > /proc/self/oom_score_adj; exec tail /dev/zero' &
hog=$!
wait "$hog"
rc=$?
info "hog exited with $rc"
assert_eq "hog killed by SIGKILL" 137 "$rc"
system_ooms() { [ "$(podhost_cli get events -o json | grep -c '"reason": "SystemOOM"')" -gt "$before" ]; }
wait_until 30 "a SystemOOM node event" system_ooms
line=$(podhost_cli get events | grep SystemOOM | tail -1)
info "$line"
case "$line" in
  *"node/$NODE"*"System OOM encountered, victim process: tail, pid: $hog"*) ;;
  *) fail "SystemOOM event does not name the victim tail (pid $hog): $line" ;;
esac
kill -0 "$DAEMON_PID" || fail "the daemon died in the system OOM"
podhost_cli get pods >/dev/null || fail "the daemon does not answer after the system OOM"
