# shellcheck shell=bash
# 70-apparmor: AppArmor confinement on a real AppArmor kernel (Debian's, securityfs
# mounted by vm/init, apparmor_parser in the initramfs). The daemon loaded
# podhost-default at start (no AppArmorDefaultUnavailable event); a container that names
# no profile and one with RuntimeDefault run under `podhost-default (enforce)`, and
# AppArmor itself denies what the profile denies: mount(2) with CAP_SYS_ADMIN (which
# succeeds for the same container when Unconfined), while a normal write works.
# Unconfined and privileged containers run `unconfined`; a Localhost profile loaded here
# with apparmor_parser is applied (its deny rule bites); a Localhost profile that is not
# loaded leaves the container in CreateContainerConfigError naming it.

problems=()

[ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] ||
  fail "AppArmor is not enabled in the guest kernel (/sys/module/apparmor/parameters/enabled)"
profiles=/sys/kernel/security/apparmor/profiles
[ -r "$profiles" ] || fail "$profiles missing: securityfs not mounted by vm/init?"
command -v apparmor_parser >/dev/null || fail "apparmor_parser is not in the initramfs"

# The daemon loaded its default profile at start.
grep -qx 'podhost-default (enforce)' "$profiles" ||
  fail "podhost-default is not loaded: $(tr '\n' ';' <"$profiles")"
events=$(podhost_cli get events) || fail "podhost get events failed"
if printf '%s\n' "$events" | grep -q AppArmorDefaultUnavailable; then
  problems+=("node event: $(printf '%s\n' "$events" | grep AppArmorDefaultUnavailable | head -1)")
fi

# A Localhost profile: everything allowed except writes under /tmp.
local_profile=podhost-vm-test
# podhost-default's rules under another name, for a privileged container: /proc and /sys
# are writable there, so only the profile stands between it and the kernel's controls.
default_copy=podhost-vm-default-copy
cleanup() {
  for p in "$local_profile" "$default_copy"; do
    printf 'profile %s {}\n' "$p" | apparmor_parser --remove 2>/dev/null
  done
}
trap cleanup EXIT
apparmor_parser --replace --skip-cache <<PROFILE || fail "apparmor_parser could not load $local_profile"
profile $local_profile flags=(attach_disconnected,mediate_deleted) {
  file,
  network,
  capability,
  mount,
  umount,
  signal,
  ptrace,
  deny /tmp/** w,
}
PROFILE
grep -qx "$local_profile (enforce)" "$profiles" || fail "$local_profile not in $profiles after loading it"
sed "s/^profile podhost-default /profile $default_copy /" "$SUITE_DIR/../apparmor-podhost-default" |
  apparmor_parser --replace --skip-cache || fail "apparmor_parser could not load podhost-default as $default_copy"
grep -qx "$default_copy (enforce)" "$profiles" || fail "$default_copy not in $profiles after loading it"

# Writes a privileged container makes under the copy: each is harmless if it gets through
# (sysrq h prints help; KSM is off and stays off; shm_rmid_forced is the pod's own IPC
# namespace's; oom_score_adj is rewritten unchanged). The profile denies the first three
# and allows the IPC sysctl and the process's own /proc files.
rules_probe='w() { if err=$( (echo "$2" >"$3") 2>&1); then echo "$1=ok"; else echo "$1=${err##*: }"; fi; }
echo "attr=$(cat /proc/self/attr/current 2>&1)"
w sysrq h /proc/sysrq-trigger
w drop_caches 1 /proc/sys/vm/drop_caches
w ksm 0 /sys/kernel/mm/ksm/run
w shm_rmid 0 /proc/sys/kernel/shm_rmid_forced
w oom_score_adj "$(cat /proc/self/oom_score_adj)" /proc/self/oom_score_adj
echo done; sleep 1000'
rules_json=$(printf '%s' "$rules_probe" | json_string)

# attr: the process's confinement; mount: tmpfs with CAP_SYS_ADMIN (podhost-default has
# `deny mount`); sysrq: a kernel control file (not written when unconfined: a privileged
# container would trigger it); tmp: a normal write.
probe='echo "attr=$(cat /proc/self/attr/current 2>&1)"
mkdir -p /probe-mnt
if err=$(mount -t tmpfs probe /probe-mnt 2>&1); then echo mount=ok; umount /probe-mnt; else echo "mount=${err##*: }"; fi
case $(cat /proc/self/attr/current) in
  unconfined) echo sysrq=skipped ;;
  *) if err=$( (echo h >/proc/sysrq-trigger) 2>&1); then echo sysrq=ok; else echo "sysrq=${err##*: }"; fi ;;
esac
if err=$( (echo x >/tmp/probe) 2>&1); then echo tmp=ok; else echo "tmp=${err##*: }"; fi
echo done; sleep 1000'
probe_json=$(printf '%s' "$probe" | json_string)

container() { # container NAME SECURITY_CONTEXT
  printf '  - name: %s\n    image: localhost/busybox:latest\n    imagePullPolicy: IfNotPresent\n' "$1"
  printf '    command: ["sh", "-c", %s]\n    securityContext: %s\n' "$probe_json" "$2"
}
{
  printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: aa\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n'
  container none '{capabilities: {add: [SYS_ADMIN]}}'
  container rtdefault '{capabilities: {add: [SYS_ADMIN]}, appArmorProfile: {type: RuntimeDefault}}'
  container unconfined '{capabilities: {add: [SYS_ADMIN]}, appArmorProfile: {type: Unconfined}}'
  container local "{capabilities: {add: [SYS_ADMIN]}, appArmorProfile: {type: Localhost, localhostProfile: $local_profile}}"
  container priv '{privileged: true}'
  printf '  - name: rules\n    image: localhost/busybox:latest\n    imagePullPolicy: IfNotPresent\n'
  printf '    command: ["sh", "-c", %s]\n' "$rules_json"
  printf '    securityContext: {privileged: true, appArmorProfile: {type: Localhost, localhostProfile: %s}}\n' "$default_copy"
} | apply_manifest aa.yaml
pod=aa-$NODE
wait_phase "$pod" Running 60

for c in none rtdefault; do
  out=$(logs_done "$pod" $c)
  check "$c: confinement" "podhost-default (enforce)" "$(value attr "$out")"
  check "$c: mount with CAP_SYS_ADMIN" "Permission denied" "$(value mount "$out")"
  check "$c: normal write" ok "$(value tmp "$out")"
  sysrq=$(value sysrq "$out")
  if [ -n "$sysrq" ] && [ "$sysrq" != ok ]; then
    info "ok: $c: writing /proc/sysrq-trigger fails: $sysrq"
  else
    problems+=("$c: writing /proc/sysrq-trigger: '$sysrq'")
  fi
done
out=$(logs_done "$pod" unconfined)
check "Unconfined: confinement" unconfined "$(value attr "$out")"
check "Unconfined: mount with CAP_SYS_ADMIN" ok "$(value mount "$out")"
out=$(logs_done "$pod" local)
check "Localhost: confinement" "$local_profile (enforce)" "$(value attr "$out")"
check "Localhost: write under /tmp (denied by its profile)" "Permission denied" "$(value tmp "$out")"
check "Localhost: mount (allowed by its profile)" ok "$(value mount "$out")"
out=$(logs_done "$pod" priv)
check "privileged: confinement" unconfined "$(value attr "$out")"
check "privileged: mount" ok "$(value mount "$out")"
out=$(logs_done "$pod" rules)
check "podhost-default rules (privileged): confinement" "$default_copy (enforce)" "$(value attr "$out")"
check "podhost-default rules: /proc/sysrq-trigger" "Permission denied" "$(value sysrq "$out")"
check "podhost-default rules: /proc/sys/vm/drop_caches" "Permission denied" "$(value drop_caches "$out")"
check "podhost-default rules: /sys/kernel/mm/ksm/run" "Permission denied" "$(value ksm "$out")"
check "podhost-default rules: /proc/sys/kernel/shm_rmid_forced (allowed)" ok "$(value shm_rmid "$out")"
check "podhost-default rules: /proc/self/oom_score_adj (allowed)" ok "$(value oom_score_adj "$out")"
# (The kernel log shows no apparmor="DENIED" lines for these: AppArmor does not audit
# explicit `deny` rules, so the errors above are the evidence.)

# A Localhost profile that is not loaded: CreateContainerConfigError naming it.
apply_manifest aa-missing.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: aa-missing
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sleep", "1000"]
    securityContext:
      appArmorProfile: {type: Localhost, localhostProfile: podhost-vm-not-loaded}
YAML
missing=aa-missing-$NODE
# The reason and its message are read from one status: the retry after the back-off
# shows ContainerCreating (no message) for a moment, which a second read could catch.
missing_status=""
config_error() {
  missing_status=$(container_status "$missing" main)
  [ "$(printf '%s\n' "$missing_status" | sed -n 's/^state\.waiting\.reason=//p')" = CreateContainerConfigError ]
}
wait_until 30 "$missing to be refused with CreateContainerConfigError" config_error
message=$(printf '%s\n' "$missing_status" | sed -n 's/^state\.waiting\.message=//p')
case "$message" in
  *podhost-vm-not-loaded*) info "ok: not-loaded Localhost profile: $message" ;;
  *) problems+=("not-loaded Localhost profile: message does not name it: '$message'") ;;
esac

for f in aa aa-missing; do delete_manifest "$f.yaml"; done
for p in "$pod" "$missing"; do wait_pod_gone "$p" 60; done

if [ "${#problems[@]}" -gt 0 ]; then
  fail "$(printf '%s; ' "${problems[@]}")"
fi
