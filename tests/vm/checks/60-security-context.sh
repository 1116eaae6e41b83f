# shellcheck shell=bash
# 60-security-context: securityContext seen from inside containers on a real cgroup v2
# kernel with full root: user and groups (id), capabilities (CapEff/CapInh/CapAmb),
# no_new_privs, a read-only root (EROFS), masked /proc, privileged (every capability,
# /sys read-write), sysctls in the pod's namespaces, hostPID, shareProcessNamespace, the
# pod's 64 MiB /dev/shm, and a runAsNonRoot refusal in `get pods` and `describe`.

problems=()

probe='s() { grep "^$1:" /proc/self/status | sed "s/^$1:[[:space:]]*/$1=/"; }
echo "id=$(id)"; s CapEff; s CapInh; s CapAmb; s NoNewPrivs
if err=$(touch /probe-root 2>&1); then echo root=rw; else echo "root=${err##*: }"; fi
echo "shmsize=$(df -k /dev/shm | awk "NR==2 {print \$2}")"
echo "interrupts=$(head -c 64 /proc/interrupts 2>/dev/null | wc -c)"
echo "sys=$(awk "\$2 == \"/sys\" {print \$4}" /proc/mounts | cut -d, -f1)"
echo "shm_rmid=$(cat /proc/sys/kernel/shm_rmid_forced)"
echo "pidns=$(readlink /proc/self/ns/pid)"
echo "uid_map=$(tr -s " " < /proc/self/uid_map)"
echo done; sleep 1000'
probe_json=$(printf '%s' "$probe" | json_string)

apply_manifest sec.yaml <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: sec
spec:
  terminationGracePeriodSeconds: 1
  securityContext:
    supplementalGroups: [4000]
    fsGroup: 5000
    sysctls: [{name: kernel.shm_rmid_forced, value: "1"}]
  containers:
  - name: plain
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", $probe_json]
  - name: user
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", $probe_json]
    securityContext: {runAsUser: 1000, runAsGroup: 3000}
  - name: locked
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", $probe_json]
    securityContext:
      capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
  - name: priv
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", $probe_json]
    securityContext: {privileged: true}
YAML
pod=sec-$NODE
wait_phase "$pod" Running 60

plain=$(logs_done "$pod" plain)
check "default CapEff" 00000000a80425fb "$(value CapEff "$plain")"
check "default CapInh" 0000000000000000 "$(value CapInh "$plain")"
check "default CapAmb" 0000000000000000 "$(value CapAmb "$plain")"
check "default NoNewPrivs" 0 "$(value NoNewPrivs "$plain")"
check "default root" rw "$(value root "$plain")"
check "pod /dev/shm KiB" 65536 "$(value shmsize "$plain")"
check "masked /proc/interrupts bytes" 0 "$(value interrupts "$plain")"
check "default /sys" ro "$(value sys "$plain")"
check "sysctl kernel.shm_rmid_forced" 1 "$(value shm_rmid "$plain")"
check "host shm_rmid_forced untouched" 0 "$(cat /proc/sys/kernel/shm_rmid_forced)"
check "no user namespace" "0 0 4294967295" "$(value uid_map "$plain" | sed 's/^ //')"

user=$(logs_done "$pod" user)
id=$(value id "$user")
case "$id" in
  "uid=1000 gid=3000 groups="*4000*5000*) info "ok: user id = $id" ;;
  *) problems+=("runAsUser/runAsGroup/supplementalGroups/fsGroup: id is '$id'") ;;
esac
check "non-root CapEff" 0000000000000000 "$(value CapEff "$user")"

locked=$(logs_done "$pod" locked)
check "drop ALL + NET_BIND_SERVICE CapEff" 0000000000000400 "$(value CapEff "$locked")"
check "allowPrivilegeEscalation: false" 1 "$(value NoNewPrivs "$locked")"
check "readOnlyRootFilesystem" "Read-only file system" "$(value root "$locked")"

priv=$(logs_done "$pod" priv)
check "privileged CapEff (the daemon's bounding set)" \
  "$(sed -n 's/^CapBnd:[[:space:]]*//p' "/proc/$DAEMON_PID/status")" "$(value CapEff "$priv")"
check "privileged /sys" rw "$(value sys "$priv")"
[ "$(value interrupts "$priv")" != 0 ] || problems+=("privileged: /proc/interrupts is masked")

# hostPID and shareProcessNamespace.
apply_manifest pids.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: pids
spec:
  terminationGracePeriodSeconds: 1
  shareProcessNamespace: true
  containers:
  - name: a
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sleep", "1001"]
  - name: b
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 1; echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); echo peers=$(ps -o args | grep -c '^sleep 1001'); echo done; sleep 1000"]
YAML
apply_manifest hostpid.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: hostpid
spec:
  terminationGracePeriodSeconds: 1
  hostPID: true
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo pidns=$(readlink /proc/self/ns/pid); echo done; sleep 1000"]
YAML
shared=$(logs_done "pids-$NODE" b)
case "$(value pid1 "$shared")" in
  *pause*) info "ok: PID 1 of the shared namespace is $(value pid1 "$shared")" ;;
  *) problems+=("shareProcessNamespace: PID 1 is '$(value pid1 "$shared")'") ;;
esac
check "shareProcessNamespace: b sees a's sleep" 1 "$(value peers "$shared")"
hostpid=$(logs_done "hostpid-$NODE" main)
check "hostPID" "$(readlink /proc/self/ns/pid)" "$(value pidns "$hostpid")"

# runAsNonRoot refused as the kubelet refuses it.
apply_manifest nonroot.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: nonroot
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sleep", "1000"]
YAML
nonroot=nonroot-$NODE
reason_is_config_error() {
  [ "$(container_status "$nonroot" main | sed -n 's/^state\.waiting\.reason=//p')" = CreateContainerConfigError ]
}
wait_until 30 "$nonroot to be refused with CreateContainerConfigError" reason_is_config_error
check "runAsNonRoot phase" Pending "$(pod_field "$nonroot" status.phase)"
row=$(podhost_cli get pods | grep "^$nonroot ")
case "$row" in
  *CreateContainerConfigError*) info "ok: get pods: $row" ;;
  *) problems+=("get pods does not show CreateContainerConfigError: $row") ;;
esac
podhost_cli describe pod "$nonroot" | grep -q 'container has runAsNonRoot and image will run as root' ||
  problems+=("describe does not show the runAsNonRoot message")

for f in sec pids hostpid nonroot; do delete_manifest "$f.yaml"; done
for p in "$pod" "pids-$NODE" "hostpid-$NODE" "$nonroot"; do wait_pod_gone "$p" 60; done
ps -o args | grep -q '[p]odhost pause' && problems+=("a podhost pause process outlived its pod")

if [ "${#problems[@]}" -gt 0 ]; then
  fail "$(printf '%s; ' "${problems[@]}")"
fi
