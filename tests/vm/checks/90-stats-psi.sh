# 90-stats-psi: /stats/summary on a real cgroup v2 kernel. Three busy loops in one
# container on the guest's 2 CPUs stall each other: the container's and the pod's
# cpu.psi.some.total grow; memory and io PSI are there (objects, not absent) for every
# container, the pod and the node; the numbers are the cgroup files' (cpu.stat,
# memory.current, pids.current); `top pods --psi` shows the pressure and /metrics/cadvisor
# has cadvisor's container_pressure_* series.
# check-timeout: 240

apply_manifest stats.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: stats
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: spin
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "for i in 1 2 3; do (while :; do :; done) & done; wait"]
  - name: idle
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "x=$(yes | head -c 8388608); echo held; while :; do sleep 3600; done"]
    resources:
      limits: {memory: 64Mi}
YAML
pod=stats-$NODE
wait_running "$pod" spin 90
wait_running "$pod" idle 90
held() { podhost_cli logs "$pod" -c idle 2>/dev/null | grep -qx held; }
wait_until 120 "idle to hold its 8 MiB" held
# A sample is reused for a second: the ones below come after the allocation.
sleep 1.1

# flat: the Summary flattened; pod_index/container_index: where ours are in it.
summary_flat() { podhost_cli top pods -o json | json_flat; }
pod_index() { printf '%s\n' "$flat" | sed -n "s/^pods\.\([0-9]*\)\.podRef\.name=$pod\$/\1/p" | head -1; }
container_index() { printf '%s\n' "$flat" | sed -n "s/^pods\.$p\.containers\.\([0-9]*\)\.name=$1\$/\1/p" | head -1; }
get() { printf '%s\n' "$flat" | sed -n "s/^$(printf '%s' "$1" | sed 's/\./\\./g')=//p" | head -1; }

# Until both containers have a CPU rate (two samples) and the spinners have stalled.
rates() {
  flat=$(summary_flat) || return 1
  p=$(pod_index)
  [ -n "$p" ] || return 1
  s=$(container_index spin)
  i=$(container_index idle)
  [ -n "$s" ] && [ -n "$i" ] || return 1
  [ -n "$(get "pods.$p.containers.$s.cpu.usageNanoCores")" ] || { sleep 1.1; return 1; }
  [ -n "$(get "pods.$p.containers.$i.cpu.usageNanoCores")" ] || { sleep 1.1; return 1; }
  [ "$(get "pods.$p.containers.$s.cpu.psi.some.total")" -gt 0 ] 2>/dev/null || { sleep 1.1; return 1; }
}
wait_until 90 "CPU rates and CPU pressure of the spinners" rates

spin_cg=$(cgroup_dir "$(container_pid "$pod" spin)")
idle_cg=$(cgroup_dir "$(container_pid "$pod" idle)")
pod_cg=${idle_cg%/idle}
problems=()

info "spin: $(get "pods.$p.containers.$s.cpu.usageNanoCores") nanocores, cpu psi some total $(get "pods.$p.containers.$s.cpu.psi.some.total") us, avg10 $(get "pods.$p.containers.$s.cpu.psi.some.avg10")"
for what in "containers.$s" "containers.$i" ""; do
  base=pods.$p${what:+.$what}
  for res in cpu memory io; do
    for kind in some full; do
      for f in total avg10 avg60 avg300; do
        [ -n "$(get "$base.$res.psi.$kind.$f")" ] ||
          problems+=("$base.$res.psi.$kind.$f is absent on cgroup v2")
      done
    done
  done
done
[ -n "$(get node.cpu.psi.some.total)" ] || problems+=("node.cpu.psi absent (/proc/pressure/cpu: $(cat /proc/pressure/cpu 2>&1))")
[ -n "$(get node.memory.psi.full.total)" ] || problems+=("node.memory.psi absent")
[ -n "$(get node.io.psi.some.total)" ] || problems+=("node.io.psi absent")
[ "$(get "pods.$p.cpu.psi.some.total")" -ge "$(get "pods.$p.containers.$s.cpu.psi.some.total")" ] ||
  problems+=("the pod's cpu stall total is below its container's")

# The numbers are the cgroup files': counters never ahead of the file read after them.
spin_ns=$(get "pods.$p.containers.$s.cpu.usageCoreNanoSeconds")
file_ns=$(($(sed -n 's/^usage_usec //p' "$spin_cg/cpu.stat") * 1000))
info "spin usageCoreNanoSeconds $spin_ns, cpu.stat afterwards $file_ns"
[ "$spin_ns" -gt 0 ] && [ "$spin_ns" -le "$file_ns" ] ||
  problems+=("spin's usageCoreNanoSeconds $spin_ns vs cpu.stat $file_ns")
psi_total=$(get "pods.$p.containers.$s.cpu.psi.some.total")
file_psi=$(sed -n 's/^some .*total=//p' "$spin_cg/cpu.pressure")
[ "$psi_total" -le "$file_psi" ] || problems+=("spin's cpu psi total $psi_total ahead of cpu.pressure's $file_psi")

idle_usage=$(get "pods.$p.containers.$i.memory.usageBytes")
idle_ws=$(get "pods.$p.containers.$i.memory.workingSetBytes")
idle_avail=$(get "pods.$p.containers.$i.memory.availableBytes")
file_current=$(cat "$idle_cg/memory.current")
info "idle: usage $idle_usage (memory.current $file_current), working set $idle_ws, available $idle_avail"
diff=$((idle_usage - file_current))
[ "${diff#-}" -lt $((4 << 20)) ] || problems+=("idle's usageBytes $idle_usage vs memory.current $file_current")
[ "$idle_ws" -ge $((8 << 20)) ] || problems+=("idle holds 8 MiB, working set $idle_ws")
check "idle's availableBytes = limit - working set" $((64 << 20)) $((idle_avail + idle_ws))

procs=$(get "pods.$p.process_stats.process_count")
check "the pod's process_count is pids.current" "$(cat "$pod_cg/pids.current")" "$procs"

# top --psi: the pressure columns hold percentages.
top=$(podhost_cli top pods --containers --psi)
info "$top"
row=$(printf '%s\n' "$top" | awk -v p="$pod" '$1 == p && $2 == "spin"')
[ -n "$row" ] || problems+=("no spin row in top --containers")
case "$(printf '%s\n' "$row" | awk '{print $5 $6 $7}')" in
  *none*) problems+=("top --psi shows <none> on cgroup v2: $row") ;;
  *%*%*%) ;;
  *) problems+=("top --psi columns: $row") ;;
esac

metrics=$(podhost_cli top pods -o prometheus)
printf '%s\n' "$metrics" | grep -q "^container_pressure_cpu_waiting_seconds_total{container=\"spin\",.*pod=\"$pod\"}" ||
  problems+=("no container_pressure_cpu_waiting_seconds_total of spin")
printf '%s\n' "$metrics" | grep -q "^container_pressure_io_stalled_seconds_total{container=\"idle\"" ||
  problems+=("no container_pressure_io_stalled_seconds_total of idle")

delete_manifest stats.yaml
wait_pod_gone "$pod" 60
[ "${#problems[@]}" -eq 0 ] || fail "$(printf '%s; ' "${problems[@]}")"
true
