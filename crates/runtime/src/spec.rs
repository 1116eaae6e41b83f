//! The OCI runtime spec of one container, built with oci-spec from the pod and the image.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxDevice, LinuxIdMappingBuilder,
    LinuxNamespaceBuilder, LinuxNamespaceType, LinuxSeccomp, Mount, MountBuilder,
    PosixRlimitBuilder, PosixRlimitType, ProcessBuilder, RootBuilder, Spec, UserBuilder,
};

use super::RuntimeError;
use super::sandbox::SandboxPaths;

/// Everything the spec is made of, already resolved from the pod and the image.
#[derive(Debug, Clone)]
pub struct ContainerSpecInput {
    pub container_name: String,
    pub args: Vec<String>,
    /// `KEY=value` entries, image env first, pod env last (later wins).
    pub env: Vec<String>,
    pub cwd: String,
    /// The pod's hostname, or `None` with hostNetwork (the host's UTS namespace is used).
    pub hostname: Option<String>,
    pub sandbox: SandboxPaths,
    pub rootfs: PathBuf,
    pub cgroups_path: String,
    /// Files bind-mounted read-only into the container: (host path, container path).
    pub bind_files: Vec<(PathBuf, String)>,
    /// Files bind-mounted writable (the termination log): (host path, container path).
    pub writable_files: Vec<(PathBuf, String)>,
    /// The container's volumes (volume::container_mounts), bind-mounted in this order.
    pub volume_mounts: Vec<VolumeBind>,
    /// The pod's /etc/hosts, /etc/resolv.conf and /etc/hostname: (host path, container
    /// path), bound after the volumes (so above a volume at /etc, as containerd orders
    /// them), read-only with a read-only root filesystem, else writable (containerd's).
    pub pod_files: Vec<(PathBuf, String)>,
    /// The podhost binary, run as the createContainer hook that sets the volumes'
    /// propagation (`runtime::mount_propagation`) when one needs it.
    pub hook_exe: Option<PathBuf>,
    /// rlimits: (type, soft, hard).
    pub rlimits: Vec<(PosixRlimitType, u64, u64)>,
    /// cgroup resources (cgroup v2, or v1 through its hierarchies; none where limits are
    /// not enforced).
    pub resources: Option<oci_spec::runtime::LinuxResources>,
    pub annotations: HashMap<String, String>,
    pub confinement: Confinement,
}

/// A pod volume bind-mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeBind {
    /// On the host: the volume's dir, a hostPath, or a resolved subPath's bind.
    pub source: PathBuf,
    pub destination: String,
    pub read_only: bool,
    pub propagation: BindPropagation,
    /// A hostPath volume (where the host may mount later, so propagation matters).
    pub host_path: bool,
}

/// A volume mount's propagation (mountPropagation None, HostToContainer, Bidirectional).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindPropagation {
    #[default]
    Private,
    Slave,
    Shared,
}

impl BindPropagation {
    fn option(self) -> &'static str {
        match self {
            Self::Private => "rprivate",
            Self::Slave => "rslave",
            Self::Shared => "rshared",
        }
    }
}

/// How the container is confined: its user, privileges and kernel-facing limits,
/// resolved from its securityContext, the image and the node's settings.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    pub uid: u32,
    pub gid: u32,
    pub additional_gids: Vec<u32>,
    /// Bounding, effective and permitted; never inheritable or ambient.
    pub capabilities: Vec<Capability>,
    pub no_new_privileges: bool,
    pub read_only_root: bool,
    /// No masked or read-only paths, /sys and cgroupfs read-write, the host's devices.
    pub privileged: bool,
    /// procMount: Unmasked.
    pub proc_unmasked: bool,
    pub sysctls: HashMap<String, String>,
    /// hostPID: the host's pid namespace instead of the container's own.
    pub host_pid: bool,
    pub seccomp: Option<LinuxSeccomp>,
    pub apparmor_profile: Option<String>,
    /// Device nodes created in the container's /dev beyond the runtime's standard set
    /// (the host's, for a privileged container).
    pub devices: Vec<LinuxDevice>,
}

/// Masked /proc and /sys paths of a container that is not privileged (containerd's
/// and moby's current list).
pub const MASKED_PATHS: [&str; 12] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
];

/// Read-only /proc paths of a container that is not privileged.
pub const READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

fn spec_err(input: &ContainerSpecInput, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Spec {
        container: input.container_name.clone(),
        message: e.to_string(),
    }
}

/// Builds the spec. Each container has its own mount and cgroup namespaces (and pid,
/// unless hostPID) and joins the pod's ipc, net and uts namespaces by path (each
/// unless the pod uses the host's).
pub fn build_spec(input: &ContainerSpecInput) -> Result<Spec, RuntimeError> {
    let conf = &input.confinement;
    let caps: std::collections::HashSet<Capability> = conf.capabilities.iter().copied().collect();
    let capabilities = LinuxCapabilitiesBuilder::default()
        .bounding(caps.clone())
        .effective(caps.clone())
        .permitted(caps)
        .inheritable(std::collections::HashSet::new())
        .ambient(std::collections::HashSet::new())
        .build()
        .map_err(|e| spec_err(input, e))?;
    let rlimits = input
        .rlimits
        .iter()
        .map(|(typ, soft, hard)| {
            PosixRlimitBuilder::default()
                .typ(*typ)
                .soft(*soft)
                .hard(*hard)
                .build()
                .map_err(|e| spec_err(input, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut user = UserBuilder::default().uid(conf.uid).gid(conf.gid);
    if !conf.additional_gids.is_empty() {
        user = user.additional_gids(conf.additional_gids.clone());
    }
    let user = user.build().map_err(|e| spec_err(input, e))?;
    let mut process = ProcessBuilder::default()
        .terminal(false)
        .args(input.args.clone())
        .env(input.env.clone())
        .cwd(if input.cwd.is_empty() {
            "/"
        } else {
            input.cwd.as_str()
        })
        .user(user)
        .capabilities(capabilities)
        .rlimits(rlimits);
    if let Some(profile) = &conf.apparmor_profile {
        process = process.apparmor_profile(profile.clone());
    }
    let mut process = process.build().map_err(|e| spec_err(input, e))?;
    // no_new_privs only when asked (allowPrivilegeEscalation: false); otherwise unset,
    // not Some(false): libcontainer 0.7 loads the seccomp filter before dropping
    // capabilities only when it is unset; set (even to false) it loads it after, without
    // CAP_SYS_ADMIN and without no_new_privs, and the kernel refuses the filter.
    process.set_no_new_privileges(conf.no_new_privileges.then_some(true));

    let mut namespaces = Vec::new();
    let mut own = vec![LinuxNamespaceType::Mount, LinuxNamespaceType::Cgroup];
    if !conf.host_pid && input.sandbox.pid.is_none() {
        own.insert(0, LinuxNamespaceType::Pid);
    }
    for typ in own {
        namespaces.push(
            LinuxNamespaceBuilder::default()
                .typ(typ)
                .build()
                .map_err(|e| spec_err(input, e))?,
        );
    }
    let shared = [
        (LinuxNamespaceType::Ipc, input.sandbox.ipc.as_ref()),
        (LinuxNamespaceType::Uts, input.sandbox.uts.as_ref()),
        (LinuxNamespaceType::Network, input.sandbox.net.as_ref()),
        (LinuxNamespaceType::Pid, input.sandbox.pid.as_ref()),
        // hostUsers: false: joined by path, so libcontainer neither creates one nor
        // writes maps (its own new-userns path insists on systemd cgroups).
        (LinuxNamespaceType::User, input.sandbox.user.as_ref()),
    ];
    for (typ, path) in shared {
        if let Some(path) = path {
            namespaces.push(
                LinuxNamespaceBuilder::default()
                    .typ(typ)
                    .path(path.clone())
                    .build()
                    .map_err(|e| spec_err(input, e))?,
            );
        }
    }
    // Device rules in every cgroup mode (the shim enforces them itself; see devices/):
    // the standard set, or every device for a privileged container.
    let mut resources = input.resources.clone().unwrap_or_default();
    resources.set_devices(Some(if conf.privileged {
        super::devices::privileged_rules()
    } else {
        super::devices::default_rules()
    }));
    let mut linux = LinuxBuilder::default().resources(resources);
    let (masked, readonly): (Vec<String>, Vec<String>) = if conf.privileged {
        (Vec::new(), Vec::new())
    } else {
        let keep = |p: &&&str| !(conf.proc_unmasked && p.starts_with("/proc/"));
        (
            MASKED_PATHS
                .iter()
                .filter(keep)
                .map(|p| p.to_string())
                .collect(),
            READONLY_PATHS
                .iter()
                .filter(keep)
                .map(|p| p.to_string())
                .collect(),
        )
    };
    if !conf.sysctls.is_empty() {
        super::spec_sysctl::check_spec_sysctls(&conf.sysctls).map_err(|e| spec_err(input, e))?;
        linux = linux.sysctl(conf.sysctls.clone());
    }
    if !conf.devices.is_empty() {
        linux = linux.devices(conf.devices.clone());
    }
    if let Some(seccomp) = &conf.seccomp {
        // In the order libcontainer reads masked comparisons (see the function).
        linux = linux
            .seccomp(super::seccomp::for_libcontainer(seccomp).map_err(|e| spec_err(input, e))?);
    }
    if let Some(map) = input.sandbox.id_map() {
        // What the pinned namespace maps, for readers of config.json.
        let mapping = LinuxIdMappingBuilder::default()
            .container_id(0u32)
            .host_id(map.base)
            .size(super::userns::BLOCK_SIZE)
            .build()
            .map_err(|e| spec_err(input, e))?;
        linux = linux
            .uid_mappings(vec![mapping])
            .gid_mappings(vec![mapping]);
    }
    // A Bidirectional volume needs the container's mounts to stay peers of the host's
    // (libcontainer makes the root rslave otherwise, which HostToContainer needs).
    if input
        .volume_mounts
        .iter()
        .any(|m| m.propagation == BindPropagation::Shared)
    {
        linux = linux.rootfs_propagation("shared");
    }
    let linux = linux
        .namespaces(namespaces)
        .cgroups_path(PathBuf::from(&input.cgroups_path))
        .masked_paths(masked)
        .readonly_paths(readonly)
        .build()
        .map_err(|e| spec_err(input, e))?;

    let mut mounts =
        standard_mounts(conf.privileged, &input.sandbox.shm).map_err(|e| spec_err(input, e))?;
    let read_only = input.bind_files.iter().map(|f| (f, "ro"));
    let writable = input.writable_files.iter().map(|f| (f, "rw"));
    for ((host, dest), mode) in read_only.chain(writable) {
        mounts.push(
            MountBuilder::default()
                .destination(PathBuf::from(dest))
                .typ("bind")
                .source(host.clone())
                .options(vec![
                    "rbind".to_string(),
                    mode.to_string(),
                    "nosuid".to_string(),
                    "nodev".to_string(),
                ])
                .build()
                .map_err(|e| spec_err(input, e))?,
        );
    }
    for v in &input.volume_mounts {
        let mut options = vec!["rbind".to_string(), v.propagation.option().to_string()];
        options.push(if v.read_only { "ro" } else { "rw" }.to_string());
        mounts.push(
            MountBuilder::default()
                .destination(PathBuf::from(&v.destination))
                .typ("bind")
                .source(v.source.clone())
                .options(options)
                .build()
                .map_err(|e| spec_err(input, e))?,
        );
    }

    let pod_files_mode = if conf.read_only_root { "ro" } else { "rw" };
    for (host, dest) in &input.pod_files {
        mounts.push(
            MountBuilder::default()
                .destination(PathBuf::from(dest))
                .typ("bind")
                .source(host.clone())
                .options(
                    ["rbind", pod_files_mode, "nosuid", "nodev"]
                        .map(String::from)
                        .to_vec(),
                )
                .build()
                .map_err(|e| spec_err(input, e))?,
        );
    }

    let root = RootBuilder::default()
        .path(input.rootfs.clone())
        .readonly(conf.read_only_root)
        .build()
        .map_err(|e| spec_err(input, e))?;

    let mut spec = Spec::default();
    spec.set_hooks(propagation_hooks(input).map_err(|e| spec_err(input, e))?);
    spec.set_process(Some(process))
        .set_root(Some(root))
        .set_hostname(input.hostname.clone())
        .set_mounts(Some(mounts))
        .set_linux(Some(linux))
        .set_annotations(Some(input.annotations.clone()));
    Ok(spec)
}

/// The createContainer hook that gives volume mounts their propagation, when one needs
/// it: a hostPath with None (libcontainer leaves rslave), and every volume when a
/// Bidirectional one makes the root rshared.
fn propagation_hooks(
    input: &ContainerSpecInput,
) -> Result<Option<oci_spec::runtime::Hooks>, oci_spec::OciSpecError> {
    let Some(exe) = &input.hook_exe else {
        return Ok(None);
    };
    let root_shared = input
        .volume_mounts
        .iter()
        .any(|m| m.propagation == BindPropagation::Shared);
    let entries: Vec<String> = input
        .volume_mounts
        .iter()
        .filter(|m| root_shared || (m.host_path && m.propagation == BindPropagation::Private))
        .map(|m| super::mount_propagation::entry(&m.destination, m.propagation))
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut args = vec![
        "podhost".to_string(),
        "mount-propagation".to_string(),
        "--rootfs".to_string(),
        input.rootfs.display().to_string(),
        "--".to_string(),
    ];
    args.extend(entries);
    let hook = oci_spec::runtime::HookBuilder::default()
        .path(exe.clone())
        .args(args)
        .build()?;
    oci_spec::runtime::HooksBuilder::default()
        .create_container(vec![hook])
        .build()
        .map(Some)
}

/// containerd's standard mounts: /proc, a small /dev tmpfs with devpts and mqueue,
/// /sys and the cgroup filesystem read-only (read-write when privileged), and the
/// pod's shm at /dev/shm.
fn standard_mounts(privileged: bool, shm: &Path) -> Result<Vec<Mount>, oci_spec::OciSpecError> {
    let opts = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let ro_unless_privileged = if privileged { "rw" } else { "ro" };
    let table: [(&str, &str, PathBuf, Vec<String>); 7] = [
        (
            "/proc",
            "proc",
            "proc".into(),
            opts(&["nosuid", "noexec", "nodev"]),
        ),
        (
            "/dev",
            "tmpfs",
            "tmpfs".into(),
            opts(&["nosuid", "strictatime", "mode=755", "size=65536k"]),
        ),
        (
            "/dev/pts",
            "devpts",
            "devpts".into(),
            opts(&[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ]),
        ),
        (
            "/dev/mqueue",
            "mqueue",
            "mqueue".into(),
            opts(&["nosuid", "noexec", "nodev"]),
        ),
        (
            "/sys",
            "sysfs",
            "sysfs".into(),
            opts(&["nosuid", "noexec", "nodev", ro_unless_privileged]),
        ),
        (
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup".into(),
            opts(&[
                "nosuid",
                "noexec",
                "nodev",
                "relatime",
                ro_unless_privileged,
            ]),
        ),
        (
            "/dev/shm",
            "bind",
            shm.to_path_buf(),
            opts(&["rbind", "nosuid", "nodev", "noexec"]),
        ),
    ];
    table
        .into_iter()
        .map(|(dest, typ, source, options)| {
            MountBuilder::default()
                .destination(PathBuf::from(dest))
                .typ(typ)
                .source(source)
                .options(options)
                .build()
        })
        .collect()
}

/// Writes `config.json` into the bundle dir (boot-scoped: libcontainer reads it at once,
/// the lost-container reaper only while the container's processes may still exist).
pub fn write_bundle_config(bundle: &Path, spec: &Spec) -> Result<(), RuntimeError> {
    let bytes = serde_json::to_vec_pretty(spec).map_err(|source| RuntimeError::Json {
        path: bundle.join("config.json"),
        source,
    })?;
    Ok(podhost_disk::write_boot_scoped(
        &bundle.join("config.json"),
        &bytes,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::SandboxShape;

    fn input(host_network: bool) -> ContainerSpecInput {
        ContainerSpecInput {
            container_name: "web".into(),
            args: vec!["sh".into()],
            env: vec!["A=1".into()],
            cwd: String::new(),
            hostname: (!host_network).then(|| "pod-node".to_string()),
            sandbox: SandboxPaths::new(
                Path::new("/p/ns"),
                SandboxShape {
                    host_network,
                    ..Default::default()
                },
            ),
            rootfs: "/p/rootfs".into(),
            cgroups_path: "/x/kubepods/podu/web".into(),
            bind_files: vec![("/p/hosts".into(), "/etc/hosts".into())],
            writable_files: Vec::new(),
            volume_mounts: Vec::new(),
            pod_files: Vec::new(),
            hook_exe: None,
            rlimits: vec![(PosixRlimitType::RlimitNofile, 1024, 1024)],
            resources: None,
            annotations: HashMap::new(),
            confinement: Confinement {
                capabilities: vec![Capability::Chown, Capability::Kill],
                ..Default::default()
            },
        }
    }

    fn mount_options(spec: &Spec, dest: &str) -> Vec<String> {
        spec.mounts()
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| m.destination() == Path::new(dest))
            .unwrap()
            .options()
            .clone()
            .unwrap()
    }

    #[test]
    fn default_confinement() {
        let spec = build_spec(&input(false)).unwrap();
        let process = spec.process().as_ref().unwrap();
        let caps = process.capabilities().as_ref().unwrap();
        assert_eq!(caps.bounding().as_ref().unwrap().len(), 2);
        assert!(caps.inheritable().as_ref().unwrap().is_empty());
        assert!(caps.ambient().as_ref().unwrap().is_empty());
        assert_eq!(
            process.no_new_privileges(),
            None,
            "unset, so the seccomp filter loads"
        );
        let linux = spec.linux().as_ref().unwrap();
        assert!(
            linux
                .masked_paths()
                .as_ref()
                .unwrap()
                .contains(&"/proc/kcore".to_string())
        );
        assert!(mount_options(&spec, "/sys").contains(&"ro".to_string()));
        let shm = spec
            .mounts()
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| m.destination() == Path::new("/dev/shm"))
            .unwrap();
        assert_eq!(shm.source().as_deref(), Some(Path::new("/p/ns/shm")));
        assert_eq!(spec.root().as_ref().unwrap().readonly(), Some(false));
    }

    #[test]
    fn sysctls_are_written_only_when_well_formed() {
        let mut i = input(false);
        i.confinement.sysctls = HashMap::from([("net.core.somaxconn".into(), "1024".into())]);
        let spec = build_spec(&i).unwrap();
        assert_eq!(
            spec.linux().as_ref().unwrap().sysctl().as_ref().unwrap()["net.core.somaxconn"],
            "1024"
        );
        i.confinement.sysctls =
            HashMap::from([("net.ipv4/../../kernel.core_pattern".into(), "x".into())]);
        let err = build_spec(&i).unwrap_err().to_string();
        assert!(
            err.starts_with("container web: cannot build the OCI spec: spec.securityContext.sysctls: invalid value \"net.ipv4/../../kernel.core_pattern\""),
            "{err}"
        );
    }

    #[test]
    fn privileged_unmasked_and_read_only_root() {
        let mut i = input(false);
        i.confinement.privileged = true;
        i.confinement.read_only_root = true;
        i.confinement.host_pid = true;
        let spec = build_spec(&i).unwrap();
        let linux = spec.linux().as_ref().unwrap();
        assert!(linux.masked_paths().as_ref().unwrap().is_empty());
        assert!(linux.readonly_paths().as_ref().unwrap().is_empty());
        assert!(mount_options(&spec, "/sys").contains(&"rw".to_string()));
        assert!(mount_options(&spec, "/sys/fs/cgroup").contains(&"rw".to_string()));
        assert_eq!(spec.root().as_ref().unwrap().readonly(), Some(true));
        let ns = linux.namespaces().as_ref().unwrap();
        assert!(!ns.iter().any(|n| n.typ() == LinuxNamespaceType::Pid));

        let mut i = input(false);
        i.confinement.proc_unmasked = true;
        let spec = build_spec(&i).unwrap();
        let linux = spec.linux().as_ref().unwrap();
        assert_eq!(
            linux.masked_paths().as_ref().unwrap(),
            &vec![
                "/sys/devices/virtual/powercap".to_string(),
                "/sys/firmware".to_string()
            ]
        );
        assert!(linux.readonly_paths().as_ref().unwrap().is_empty());
    }

    #[test]
    fn joins_pod_namespaces_by_path() {
        let spec = build_spec(&input(false)).unwrap();
        let ns = spec
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .as_ref()
            .unwrap();
        let net = ns
            .iter()
            .find(|n| n.typ() == LinuxNamespaceType::Network)
            .unwrap();
        assert_eq!(net.path().as_deref(), Some(Path::new("/p/ns/net")));
        let pid = ns
            .iter()
            .find(|n| n.typ() == LinuxNamespaceType::Pid)
            .unwrap();
        assert!(pid.path().is_none());
        assert_eq!(spec.hostname().as_deref(), Some("pod-node"));
        assert_eq!(spec.process().as_ref().unwrap().cwd(), Path::new("/"));
    }

    #[test]
    fn every_container_carries_the_default_device_rules() {
        for resources in [None, Some(oci_spec::runtime::LinuxResources::default())] {
            let mut i = input(false);
            i.resources = resources;
            let spec = build_spec(&i).unwrap();
            let devices = spec
                .linux()
                .as_ref()
                .and_then(|l| l.resources().as_ref())
                .and_then(|r| r.devices().clone());
            assert_eq!(devices, Some(crate::devices::default_rules()));
        }
    }

    #[test]
    fn volume_mounts_are_rbinds_with_propagation_and_ro() {
        let mut i = input(false);
        i.volume_mounts = vec![
            VolumeBind {
                source: "/v/data".into(),
                host_path: true,
                destination: "/data".into(),
                read_only: true,
                propagation: BindPropagation::Private,
            },
            VolumeBind {
                source: "/host/mnt".into(),
                host_path: true,
                destination: "/mnt".into(),
                read_only: false,
                propagation: BindPropagation::Slave,
            },
        ];
        let spec = build_spec(&i).unwrap();
        assert_eq!(
            mount_options(&spec, "/data"),
            vec!["rbind", "rprivate", "ro"]
        );
        assert_eq!(mount_options(&spec, "/mnt"), vec!["rbind", "rslave", "rw"]);
        assert_eq!(spec.linux().as_ref().unwrap().rootfs_propagation(), &None);
        i.volume_mounts[1].propagation = BindPropagation::Shared;
        let spec = build_spec(&i).unwrap();
        assert_eq!(mount_options(&spec, "/mnt"), vec!["rbind", "rshared", "rw"]);
        assert_eq!(
            spec.linux()
                .as_ref()
                .unwrap()
                .rootfs_propagation()
                .as_deref(),
            Some("shared")
        );
    }

    #[test]
    fn pod_files_follow_the_volumes_and_the_root_filesystems_mode() {
        let mut i = input(false);
        i.bind_files = Vec::new();
        i.volume_mounts = vec![VolumeBind {
            source: "/v/etc".into(),
            host_path: false,
            destination: "/etc".into(),
            read_only: false,
            propagation: BindPropagation::Private,
        }];
        i.pod_files = vec![
            ("/p/etc-hosts".into(), "/etc/hosts".into()),
            ("/p/resolv.conf".into(), "/etc/resolv.conf".into()),
        ];
        let spec = build_spec(&i).unwrap();
        let dests: Vec<&Path> = spec
            .mounts()
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.destination().as_path())
            .collect();
        let at = |d: &str| dests.iter().position(|x| *x == Path::new(d)).unwrap();
        // Above a volume at /etc, as containerd orders mounts.
        assert!(at("/etc") < at("/etc/hosts") && at("/etc/hosts") < at("/etc/resolv.conf"));
        assert_eq!(
            mount_options(&spec, "/etc/hosts"),
            vec!["rbind", "rw", "nosuid", "nodev"]
        );
        i.confinement.read_only_root = true;
        let spec = build_spec(&i).unwrap();
        assert_eq!(
            mount_options(&spec, "/etc/resolv.conf"),
            vec!["rbind", "ro", "nosuid", "nodev"]
        );
    }

    #[test]
    fn host_network_shares_host_net_and_uts() {
        let spec = build_spec(&input(true)).unwrap();
        let ns = spec
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .as_ref()
            .unwrap();
        assert!(!ns.iter().any(|n| n.typ() == LinuxNamespaceType::Network));
        assert!(!ns.iter().any(|n| n.typ() == LinuxNamespaceType::Uts));
        assert!(spec.hostname().is_none());
    }

    #[test]
    fn seccomp_goes_to_linux_and_no_new_privileges_stays_unset() {
        let mut with_filter = input(false);
        let caps = with_filter
            .confinement
            .capabilities
            .iter()
            .copied()
            .collect();
        with_filter.confinement.seccomp = crate::seccomp::linux_seccomp(
            &crate::seccomp::SeccompProfile::RuntimeDefault,
            &caps,
            Path::new("/nonexistent"),
        )
        .unwrap();
        let spec = build_spec(&with_filter).unwrap();
        let seccomp = spec.linux().as_ref().unwrap().seccomp().as_ref().unwrap();
        assert!(!seccomp.syscalls().as_ref().unwrap().is_empty());
        // Set (even to false), it makes libcontainer load the filter too late.
        assert_eq!(spec.process().as_ref().unwrap().no_new_privileges(), None);
        let unconfined = build_spec(&input(false)).unwrap();
        assert!(unconfined.linux().as_ref().unwrap().seccomp().is_none());
    }
}
