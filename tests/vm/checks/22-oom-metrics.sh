# 22-oom-metrics: the read-only endpoint of the suite's daemon (--read-only-port 10255) on
# a real cgroup v2 kernel: /healthz is ok, and /metrics (Prometheus text) counts the kernel
# OOM kills of 20-oom's container as podhost_oom_kills_total{scope="pod"}, its restarts,
# and its starts. Runs after 20-oom (checks run in name order); on its own it makes its
# own OOM kill first.

get() { wget -q -O - "http://127.0.0.1:10255$1" 2>/dev/null; }
metric() { get /metrics | sed -n "s/^$1 //p" | head -1; }

[ "$(get /healthz)" = ok ] || fail "/healthz is not ok: '$(get /healthz)'"

oom_kills() { v=$(metric 'podhost_oom_kills_total{scope="pod"}'); [ -n "$v" ] && [ "$v" -ge 1 ]; }
if ! oom_kills; then
  info "no pod OOM kill counted yet: making one"
  apply_manifest oom-metrics.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: oom-metrics
spec:
  restartPolicy: Never
  containers:
  - name: hog
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exec tail /dev/zero"]
    resources:
      limits: {memory: 32Mi}
YAML
  wait_until 90 "podhost_oom_kills_total{scope=\"pod\"} >= 1" oom_kills
  delete_manifest oom-metrics.yaml
  wait_pod_gone "oom-metrics-$NODE" 60
fi
info "podhost_oom_kills_total{scope=\"pod\"} $(metric 'podhost_oom_kills_total{scope="pod"}')"
started=$(metric 'kubelet_started_containers_total{container_type="container"}')
[ -n "$started" ] && [ "$started" -ge 1 ] || fail "kubelet_started_containers_total is '$started'"
get /metrics | grep -q '^# TYPE kubelet_pod_start_duration_seconds histogram$' ||
  fail "no pod start histogram in /metrics"
[ "$(get /healthz)" = ok ] || fail "/healthz is not ok after the OOM kills: '$(get /healthz)'"
