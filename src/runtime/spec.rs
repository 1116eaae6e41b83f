//! The OCI runtime spec of one container, built with oci-spec from the pod and the image.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxNamespaceBuilder, LinuxNamespaceType,
    LinuxSeccomp, MountBuilder, PosixRlimitBuilder, PosixRlimitType, ProcessBuilder, RootBuilder,
    Spec, UserBuilder, get_default_maskedpaths, get_default_mounts, get_default_readonly_paths,
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
    pub uid: u32,
    pub gid: u32,
    /// The pod's hostname, or `None` with hostNetwork (the host's UTS namespace is used).
    pub hostname: Option<String>,
    pub sandbox: SandboxPaths,
    pub rootfs: PathBuf,
    pub cgroups_path: String,
    /// Files bind-mounted read-only into the container: (host path, container path).
    pub bind_files: Vec<(PathBuf, String)>,
    /// rlimits: (type, soft, hard).
    pub rlimits: Vec<(PosixRlimitType, u64, u64)>,
    /// cgroup resources (full cgroup v2 mode only).
    pub resources: Option<oci_spec::runtime::LinuxResources>,
    pub annotations: HashMap<String, String>,
    /// The seccomp filter (`linux.seccomp`); `None` is Unconfined.
    pub seccomp: Option<LinuxSeccomp>,
}

/// The capabilities a container gets by default (the container runtimes' default set).
pub const DEFAULT_CAPABILITIES: [Capability; 14] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Mknod,
    Capability::NetRaw,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::SysChroot,
    Capability::Kill,
    Capability::AuditWrite,
];

fn spec_err(input: &ContainerSpecInput, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Spec {
        container: input.container_name.clone(),
        message: e.to_string(),
    }
}

/// Builds the spec. Each container has its own pid, mount and cgroup namespaces and
/// joins the pod's ipc (and, without hostNetwork, net and uts) namespaces by path.
pub fn build_spec(input: &ContainerSpecInput) -> Result<Spec, RuntimeError> {
    let caps: std::collections::HashSet<Capability> = DEFAULT_CAPABILITIES.into_iter().collect();
    let capabilities = LinuxCapabilitiesBuilder::default()
        .bounding(caps.clone())
        .effective(caps.clone())
        .permitted(caps)
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
    let user = UserBuilder::default()
        .uid(input.uid)
        .gid(input.gid)
        .build()
        .map_err(|e| spec_err(input, e))?;
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
        .rlimits(rlimits)
        .build()
        .map_err(|e| spec_err(input, e))?;
    // no_new_privileges unset means false, as allowPrivilegeEscalation's default wants
    // (the builder's default is true). Unset, not Some(false): libcontainer 0.7 loads the
    // seccomp filter before dropping capabilities only when it is unset; when it is set,
    // even to false, it loads it after, without CAP_SYS_ADMIN and without
    // no_new_privs, and the kernel refuses the filter (EACCES).
    process.set_no_new_privileges(None);

    let mut namespaces = Vec::new();
    let own = [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Cgroup,
    ];
    for typ in own {
        namespaces.push(
            LinuxNamespaceBuilder::default()
                .typ(typ)
                .build()
                .map_err(|e| spec_err(input, e))?,
        );
    }
    let shared = [
        (LinuxNamespaceType::Ipc, Some(&input.sandbox.ipc)),
        (LinuxNamespaceType::Uts, input.sandbox.uts.as_ref()),
        (LinuxNamespaceType::Network, input.sandbox.net.as_ref()),
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
    let mut linux = LinuxBuilder::default();
    if let Some(r) = &input.resources {
        linux = linux.resources(r.clone());
    }
    if let Some(seccomp) = &input.seccomp {
        // In the order libcontainer reads masked comparisons (see the function).
        linux = linux.seccomp(super::seccomp::for_libcontainer(seccomp));
    }
    let linux = linux
        .namespaces(namespaces)
        .cgroups_path(PathBuf::from(&input.cgroups_path))
        .masked_paths(get_default_maskedpaths())
        .readonly_paths(get_default_readonly_paths())
        .build()
        .map_err(|e| spec_err(input, e))?;

    let mut mounts = get_default_mounts();
    for (host, dest) in &input.bind_files {
        mounts.push(
            MountBuilder::default()
                .destination(PathBuf::from(dest))
                .typ("bind")
                .source(host.clone())
                .options(vec![
                    "rbind".to_string(),
                    "ro".to_string(),
                    "nosuid".to_string(),
                    "nodev".to_string(),
                ])
                .build()
                .map_err(|e| spec_err(input, e))?,
        );
    }

    let root = RootBuilder::default()
        .path(input.rootfs.clone())
        .readonly(false)
        .build()
        .map_err(|e| spec_err(input, e))?;

    let mut spec = Spec::default();
    spec.set_process(Some(process))
        .set_root(Some(root))
        .set_hostname(input.hostname.clone())
        .set_mounts(Some(mounts))
        .set_linux(Some(linux))
        .set_annotations(Some(input.annotations.clone()));
    Ok(spec)
}

/// Writes `config.json` into the bundle dir.
pub fn write_bundle_config(bundle: &Path, spec: &Spec) -> Result<(), RuntimeError> {
    let bytes = serde_json::to_vec_pretty(spec).map_err(|source| RuntimeError::Json {
        path: bundle.join("config.json"),
        source,
    })?;
    super::fsutil::write_atomic(&bundle.join("config.json"), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(host_network: bool) -> ContainerSpecInput {
        ContainerSpecInput {
            container_name: "web".into(),
            args: vec!["sh".into()],
            env: vec!["A=1".into()],
            cwd: String::new(),
            uid: 0,
            gid: 0,
            hostname: (!host_network).then(|| "pod-node".to_string()),
            sandbox: SandboxPaths::new(Path::new("/p/ns"), host_network),
            rootfs: "/p/rootfs".into(),
            cgroups_path: "/x/kubepods/podu/web".into(),
            bind_files: vec![("/p/hosts".into(), "/etc/hosts".into())],
            rlimits: vec![(PosixRlimitType::RlimitNofile, 1024, 1024)],
            resources: None,
            annotations: HashMap::new(),
            seccomp: None,
        }
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
        let caps = DEFAULT_CAPABILITIES.into_iter().collect();
        with_filter.seccomp = crate::runtime::seccomp::linux_seccomp(
            &crate::runtime::seccomp::SeccompProfile::RuntimeDefault,
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
