# shellcheck shell=bash
# 55-seccomp: containers run under podhost's RuntimeDefault seccomp filter on the real
# kernel. A pod of the seccomp-probe image (tests/vm/seccomp-probe.c, built static by
# scripts/vm-test.sh) prints what the kernel answered to calls the filter decides.
# The filter is compiled once by the daemon and loaded as a BPF program by podhost's
# executor, in the container's init and in a process started with `podhost exec`
# (which also gets default signal dispositions).

layout=$(dirname "$SUITE_DIR")/seccomp-probe-oci
[ -f "$layout/index.json" ] || fail "no seccomp-probe image at $layout (scripts/vm-test.sh builds it)"
out=$(podhost_cli load "$layout" 2>&1) || fail "podhost load $layout: $out"

apply_manifest seccomp.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: seccomp
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/seccomp-probe:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "seccomp-probe; echo probe-done; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]
YAML
pod=seccomp-$NODE
wait_phase "$pod" Running 60
wait_running "$pod" main 30
wait_until 30 "the probe's output in the container log" sh -c \
  "podhost --socket '$PODHOST_SOCKET' logs '$pod' -c main | grep -q probe-done"

expected='getpid ok
socket_inet ok
socket_unix ok
socket_vsock EPERM
socket_alg EPERM
clone_fork ok
clone_newuser EPERM
clone3 ENOSYS
unshare_newuser EPERM
personality_linux ok
personality_no_randomize EPERM
add_key EPERM
keyctl EPERM
mount EPERM
Seccomp: 2
Seccomp_filters: 1'

# normalize: the probe's lines only, tabs as spaces.
normalize() { grep -v '^probe-done$' | tr '\t' ' ' | tr -s ' '; }

got=$(podhost_cli logs "$pod" -c main | normalize)
info "container init:"
printf '%s\n' "$got" | sed 's/^/  /'
assert_eq "probe output of the container's init" "$expected" "$got"

got=$(podhost_cli exec "$pod" -c main -- seccomp-probe 2>&1 | normalize)
assert_eq "probe output of a process started by podhost exec" "$expected" "$got"
got=$(podhost_cli exec "$pod" -c main -- grep -E '^Sig(Ign|Blk)' /proc/self/status | normalize)
assert_eq "signal dispositions of an exec'd process" "SigBlk: 0000000000000000
SigIgn: 0000000000000000" "$got"

# The same filter seen from outside: the container's init is in seccomp mode 2.
pid=$(container_pid "$pod" main)
[ -n "$pid" ] || fail "no init_pid for $pod"
assert_eq "Seccomp: of the container init (pid $pid)" 2 "$(awk '/^Seccomp:/ {print $2}' "/proc/$pid/status")"

delete_manifest seccomp.yaml
wait_pod_gone "$pod" 60
