# The part of package-test.sh that runs as pid 1 of new mount, network and pid
# namespaces (sourced; not run alone): $1 = the fresh Debian 12 root, $2 = the name of
# the cgroup the daemon gets in every hierarchy (as systemd gives a unit one).
# When this shell exits, the kernel kills every process left in the pid namespace and
# the mounts and the network namespace go with it, so a failure leaks nothing.
root=$1
cgroup=$2
say() { printf 'package-test: %s\n' "$*" >&2; }
fail() {
  printf 'package-test: FAILED: %s\n' "$*" >&2
  if [ -f "$root.log" ]; then
    echo "--- daemon log (last 40 lines):" >&2
    tail -n 40 "$root.log" >&2
  fi
  exit 1
}
in_root() { chroot "$root" "$@"; }
cgroup_mounts() {
  awk '{ for (i = 7; $i != "-"; i++) {}; if ($(i+1) == "cgroup" || $(i+1) == "cgroup2") print $5 }' \
    /proc/self/mountinfo | grep -v "^$root/"
}
# Waits until "$@" succeeds, up to $WAIT seconds (a deadline for failing, not a timing).
WAIT=${WAIT:-90}
wait_for() {
  local what=$1
  shift
  for _ in $(seq $((WAIT * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    if [ -n "${daemon:-}" ] && ! kill -0 "$daemon" 2>/dev/null; then
      fail "$what: the daemon exited"
    fi
    sleep 0.2
  done
  fail "$what"
}
# Pids whose command line contains $1.
pids_with() {
  local d
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$BASHPID" ] && continue
    { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null | grep -qF -- "$1" && echo "${d#/proc/}"
  done
  return 0
}
# The root's file list (path, type, mode) and the contents of /etc, without the files
# dpkg itself rewrites on every operation (its status database and log), and without
# /run/mount, util-linux's state dir that any umount(8) creates (a booted host has it).
snapshot() {
  (
    cd "$root" || exit 1
    { find . -xdev -printf '%p %y %m\n'; find ./run -printf '%p %y %m\n'; } |
      grep -Ev '^\./(var/lib/dpkg/(status|status-old|available|lock[^ ]*|triggers/[^ ]*) |var/log/dpkg\.log |var/cache/debconf/[^ ]* |tmp/podhost\.deb |run/mount[ /])'
    find ./etc -xdev -type f -exec sha256sum {} +
  ) | sort
}

ip link set lo up
# The root must be a mount point, as a host's / is: a container's runtime makes its
# mounts slaves of "/" (EINVAL when "/" is only a directory of a chroot).
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"

# ---- install ---------------------------------------------------------------------
snapshot >"$root.before"
in_root dpkg -i /tmp/podhost.deb >&2 || fail "dpkg -i failed"
[ "$(in_root dpkg-query -W -f='${Status}' podhost)" = "install ok installed" ] ||
  fail "podhost is not 'install ok installed'"
for f in usr/bin/podhost usr/lib/podhost/podhost-monitor usr/lib/podhost/podhost-shim lib/systemd/system/podhost.service etc/podhost/config.yaml \
  usr/share/doc/podhost/examples/hello.yaml usr/share/doc/podhost/copyright \
  usr/share/podhost/load-busybox-image usr/share/podhost/oci/busybox/build.sh \
  usr/share/podhost/oci/layout.sh usr/share/man/man8/podhost.8.gz; do
  [ -f "$root/$f" ] || fail "/$f is not installed"
done
[ -d "$root/etc/podhost/manifests" ] || fail "/etc/podhost/manifests is not installed"
grep -qx 'staticPodPath: /etc/podhost/manifests' "$root/etc/podhost/config.yaml" ||
  fail "/etc/podhost/config.yaml does not set staticPodPath"
in_root dpkg-query -W -f='${Conffiles}\n' podhost | grep -q '^ /etc/podhost/config.yaml ' ||
  fail "/etc/podhost/config.yaml is not a conffile"
[ "$(readlink "$root/etc/systemd/system/multi-user.target.wants/podhost.service")" = \
  /lib/systemd/system/podhost.service ] || fail "postinst did not enable podhost.service"
! readelf -S "$root/usr/bin/podhost" | grep -q '\.symtab' || fail "/usr/bin/podhost is not stripped"
in_root podhost --help >/dev/null || fail "the installed podhost does not run in the fresh root"
! pids_with 'podhost daemon' | grep -q . || fail "postinst started a daemon without systemd"
say "installed: files, conffile, enabled unit, stripped binary that runs"

# ---- run the installed service ------------------------------------------------------------
read -ra exec_start <<<"$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/podhost.service")"
[ "${#exec_start[@]}" -gt 0 ] || fail "the unit has no ExecStart"
for mnt in $(cgroup_mounts); do
  mkdir -p "$mnt/$cgroup"
  # A v1 cpuset cgroup takes no process until it has cpus and mems (ENOSPC).
  for f in cpuset.cpus cpuset.mems; do
    [ -f "$mnt/$cgroup/$f" ] && cat "$mnt/$f" >"$mnt/$cgroup/$f"
  done
done
(
  for mnt in $(cgroup_mounts); do echo "$BASHPID" >"$mnt/$cgroup/cgroup.procs"; done
  exec chroot "$root" "${exec_start[@]}"
) >"$root.log" 2>&1 &
daemon=$!
wait_for "the daemon did not answer on /run/podhost/podhost.sock" in_root podhost get pods
in_root /usr/share/podhost/load-busybox-image >&2 || fail "load-busybox-image failed"
in_root podhost images | grep -q 'localhost/busybox' || fail "podhost images lacks localhost/busybox"
cp "$root/usr/share/doc/podhost/examples/hello.yaml" "$root/etc/podhost/manifests/"
running() { in_root podhost get pods -o json | grep -q '"ready": true'; }
wait_for "the example pod did not reach Running" running
node=$(hostname | tr 'A-Z' 'a-z')
greeted() { in_root podhost logs "hello-$node" | grep -q 'hello from podhost'; }
wait_for "the example pod did not log its greeting" greeted
workload=$(pids_with 'SIGTERM: shutting down' | head -1)
[ -n "$workload" ] || fail "no process of the example pod found"
ip link show podhost0 >/dev/null 2>&1 || fail "the daemon made no bridge podhost0"
# The container's parent, its shim, is the packaged small monitor once the container runs.
monitor=$(readlink "/proc/$(awk '{print $4}' "/proc/$workload/stat")/exe")
case "$monitor" in
  */usr/lib/podhost/podhost-monitor) ;;
  *) fail "the example pod's shim runs $monitor, not /usr/lib/podhost/podhost-monitor" ;;
esac
say "running: the example pod (pid $workload) on localhost/busybox:latest"

# ---- stop, remove, purge ----------------------------------------------------------
kill -TERM "$daemon"
wait "$daemon" || fail "the daemon exited with status $? on SIGTERM"
[ -d "/proc/$workload" ] || fail "stopping the daemon stopped the pod"
in_root dpkg -r podhost >&2 || fail "dpkg -r failed"
[ ! -e "$root/usr/bin/podhost" ] || fail "dpkg -r left /usr/bin/podhost"
[ -f "$root/etc/podhost/config.yaml" ] || fail "dpkg -r removed the conffile"
[ -d "/proc/$workload" ] || fail "dpkg -r stopped the pod (only purge should)"
say "removed: the config stays, the pod keeps running"
in_root dpkg -P podhost >&2 || fail "dpkg -P failed"
[ ! -d "/proc/$workload" ] || fail "dpkg -P left the pod's process $workload running"
left=$(pids_with "/var/lib/podhost/")
[ -z "$left" ] || fail "dpkg -P left podhost processes: $left"
mounts=$(grep -E " $root/(var/lib/podhost|run/podhost|var/log/pods)" /proc/self/mountinfo || true)
[ -z "$mounts" ] || fail "dpkg -P left mounts: $mounts"
for mnt in $(cgroup_mounts); do
  left=$(find "$mnt/$cgroup" -mindepth 1 -type d)
  [ -z "$left" ] || fail "dpkg -P left cgroups: $left; their tasks: $(find "$mnt/$cgroup" -mindepth 2 -name tasks -exec cat {} + | tr '\n' ' '); processes: $(for d in /proc/[0-9]*; do printf '%s=%s; ' "${d#/proc/}" "$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)"; done)"
done
! ip link show podhost0 >/dev/null 2>&1 || fail "dpkg -P left the bridge podhost0"
! nft list table inet podhost >/dev/null 2>&1 || fail "dpkg -P left the nftables table inet podhost"
rm -f "$root/tmp/podhost.deb"
snapshot >"$root.after"
if ! diff -u "$root.before" "$root.after" >&2; then
  fail "the root differs from before the install (above: - before, + after)"
fi
say "purged: no process, mount, cgroup, bridge, nftables table or file left"
