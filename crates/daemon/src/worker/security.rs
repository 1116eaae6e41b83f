//! The node's side of confinement: its defaults (seccomp), its allowances (unsafe
//! sysctls), what the host can enforce (AppArmor), the pod admission that follows
//! from them (the kubelet's `SysctlForbidden` and `AppArmor` rejections), and the
//! [`Confinement`] of each container.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;

use oci_spec::runtime::Capability;

use super::context::PodInfo;
use super::error::ConfigError;
use podhost_image::ImageUser;
use podhost_model::security::{ContainerSecurity, GroupsPolicy, ProfileChoice, container_security};
use podhost_model::sysctl::{FORBIDDEN_REASON, SysctlAllowlist, check_sysctl, normalize};
use podhost_runtime::spec::Confinement;

/// The node's security settings (daemon flags and host facts).
#[derive(Debug, Clone)]
pub struct NodeSecurity {
    /// RuntimeDefault seccomp for containers that say nothing (`--seccomp-default`).
    pub seccomp_default: bool,
    /// Where Localhost seccomp profiles live: `<root-dir>/seccomp/`.
    pub seccomp_dir: PathBuf,
    pub sysctls: SysctlAllowlist,
    /// The host enforces AppArmor.
    pub apparmor_enabled: bool,
    /// podhost's default AppArmor profile is loaded: containers that name no profile
    /// get it, as containerd gives its own on AppArmor hosts.
    pub apparmor_default: bool,
    /// The capabilities podhost itself may hand out (its bounding set): a container
    /// cannot get more than its runtime has.
    pub host_capabilities: u64,
    /// Seccomp filters compiled once each: `<root-dir>/seccomp-programs/`.
    pub seccomp_programs: std::sync::Arc<podhost_runtime::seccomp::ProgramCache>,
}

impl NodeSecurity {
    /// A node with podhost's defaults: RuntimeDefault seccomp, the safe sysctls only.
    pub fn new(root_dir: &std::path::Path) -> Self {
        Self {
            seccomp_default: true,
            seccomp_dir: root_dir.join("seccomp"),
            sysctls: SysctlAllowlist::default_safe(),
            apparmor_enabled: podhost_runtime::apparmor::host_enabled(),
            apparmor_default: false,
            host_capabilities: own_bounding_set(),
            seccomp_programs: std::sync::Arc::new(podhost_runtime::seccomp::ProgramCache::new(
                root_dir.join(podhost_runtime::seccomp::PROGRAMS_DIR),
            )),
        }
    }
}

/// `CapBnd` of this process (all bits when it cannot be read).
fn own_bounding_set() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapBnd:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(u64::MAX)
}

/// A pod the node refuses to run: its phase becomes Failed with this reason, and the
/// message reads "Pod was rejected: {message}" (the kubelet's wording).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// `OutOf<resource>` reasons name the resource, so it is not always a constant.
    pub reason: std::borrow::Cow<'static, str>,
    pub message: String,
}

/// The kubelet's admission checks that depend on the node: sysctls, AppArmor; and the
/// pod features podhost does not run yet but must not ignore (they would loosen or
/// change isolation silently).
pub fn admit(node: &NodeSecurity, pod: &PodInfo) -> Result<(), Rejection> {
    let spec = pod.pod.spec.clone().unwrap_or_default();
    let sysctls = spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.clone())
        .unwrap_or_default();
    // The API server's syntax first, for every source: a static manifest was checked
    // when it was loaded, but a pod from the API server (or one admitted by an older
    // podhost) meets it only here.
    for (i, sysctl) in sysctls.iter().enumerate() {
        check_sysctl(&sysctl.name, &sysctl.value).map_err(|e| Rejection {
            reason: FORBIDDEN_REASON.into(),
            message: format!(
                "forbidden sysctl in pod {}/{}: spec.securityContext.sysctls[{i}].{}: {e}",
                pod.namespace,
                pod.name,
                e.field().unwrap_or("name")
            ),
        })?;
    }
    node.sysctls
        .admit(
            sysctls.iter().map(|s| s.name.as_str()),
            pod.host_network,
            pod.host_ipc,
        )
        .map_err(|e| Rejection {
            reason: FORBIDDEN_REASON.into(),
            message: e.to_string(),
        })?;
    for (i, c) in spec.containers.iter().enumerate() {
        let Ok(sec) = container_security(&pod.pod, c, i) else {
            continue; // refused when the manifest was loaded
        };
        let asks_apparmor = matches!(
            sec.apparmor,
            Some(ProfileChoice::RuntimeDefault | ProfileChoice::Localhost(_))
        );
        if asks_apparmor && !node.apparmor_enabled {
            return Err(Rejection {
                reason: "AppArmor".into(),
                message: "Cannot enforce AppArmor: AppArmor is not enabled on the host".into(),
            });
        }
    }
    if spec.host_users == Some(false) {
        // The API server's rule: a pod in its own user namespace shares none of the
        // host's namespaces (they are owned by the host's user namespace).
        for (field, set) in [
            ("hostNetwork", pod.host_network),
            ("hostIPC", pod.host_ipc),
            ("hostPID", pod.host_pid),
        ] {
            if set {
                return Err(Rejection {
                    reason: "UserNamespacesInvalid".into(),
                    message: format!(
                        "spec.{field}: Forbidden: when `hostUsers` is false; remove one of them"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The confinement of a container with settings `sec` running as `user`, and the
/// warnings about what the host cannot give it (a `CapabilityUnavailable` event
/// each). Errors are `CreateContainerConfigError` messages.
pub fn confinement(
    node: &NodeSecurity,
    pod: &PodInfo,
    sec: &ContainerSecurity,
    user: &ImageUser,
) -> Result<(Confinement, Vec<String>), ConfigError> {
    let mut groups: Vec<u32> = Vec::new();
    if sec.groups_policy == GroupsPolicy::Merge {
        groups.extend(&user.member_of);
    }
    groups.extend(&sec.pod_groups);
    let mut seen = std::collections::BTreeSet::new();
    groups.retain(|g| seen.insert(*g));
    let mut warnings = Vec::new();
    let mut capabilities = Vec::new();
    for name in &sec.capabilities {
        let bit = podhost_model::security::ALL_CAPABILITIES
            .iter()
            .position(|c| c == name)
            .unwrap_or(0);
        if node.host_capabilities & (1u64 << bit) == 0 {
            warnings.push(format!(
                "{name} is not in podhost's own capability bounding set on this host; the container runs without it"
            ));
            continue;
        }
        // oci-spec parses the name without its CAP_ prefix.
        let bare = name.strip_prefix("CAP_").unwrap_or(name);
        capabilities.push(
            Capability::from_str(bare).map_err(|e| ConfigError::Capability {
                name: name.clone(),
                reason: e.to_string(),
            })?,
        );
    }
    let sysctls: HashMap<String, String> = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.sysctls.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| (normalize(&s.name), s.value))
        .collect();
    let apparmor_profile = match (&sec.apparmor, sec.privileged) {
        (Some(ProfileChoice::Localhost(name)), _) => {
            if !podhost_runtime::apparmor::profile_loaded(name) {
                return Err(ConfigError::AppArmorNotLoaded { name: name.clone() });
            }
            Some(name.clone())
        }
        (Some(ProfileChoice::RuntimeDefault), false) => {
            Some(podhost_runtime::apparmor::ensure_default_profile()?)
        }
        (None, false) if node.apparmor_default => {
            Some(podhost_runtime::apparmor::DEFAULT_PROFILE.to_string())
        }
        _ => None,
    };
    if let Some(map) = pod.userns {
        let limit = podhost_runtime::userns::BLOCK_SIZE;
        let outside = std::iter::once(user.uid)
            .chain(std::iter::once(user.gid))
            .chain(groups.iter().copied())
            .find(|id| *id >= limit);
        if let Some(id) = outside {
            return Err(ConfigError::OutsideUserNamespace {
                id,
                base: map.base,
                last: map.host_id(limit - 1),
            });
        }
    }
    let seccomp = seccomp_filter(node, sec, &capabilities)?;
    let confinement = Confinement {
        uid: user.uid,
        gid: user.gid,
        additional_gids: groups,
        capabilities,
        no_new_privileges: sec.no_new_privileges,
        read_only_root: sec.read_only_root,
        privileged: sec.privileged,
        proc_unmasked: sec.proc_unmasked,
        sysctls,
        host_pid: pod.host_pid,
        seccomp,
        apparmor_profile,
        devices: if sec.privileged {
            podhost_runtime::host_devices::host_devices()
        } else {
            Vec::new()
        },
    };
    Ok((confinement, warnings))
}

/// The container's seccomp filter: its (or its pod's) seccompProfile, else the node's
/// default (RuntimeDefault unless `--seccomp-default=false`); none for a privileged
/// container, as containerd does. The capability-conditional groups of RuntimeDefault
/// follow the capabilities the container really gets.
fn seccomp_filter(
    node: &NodeSecurity,
    sec: &ContainerSecurity,
    capabilities: &[Capability],
) -> Result<Option<oci_spec::runtime::LinuxSeccomp>, ConfigError> {
    use podhost_runtime::seccomp::{SeccompProfile, linux_seccomp};
    if sec.privileged {
        return Ok(None);
    }
    let profile = match &sec.seccomp {
        Some(ProfileChoice::Unconfined) => SeccompProfile::Unconfined,
        Some(ProfileChoice::RuntimeDefault) => SeccompProfile::RuntimeDefault,
        Some(ProfileChoice::Localhost(path)) => SeccompProfile::Localhost(path.clone()),
        None if node.seccomp_default => SeccompProfile::RuntimeDefault,
        None => SeccompProfile::Unconfined,
    };
    let caps = capabilities.iter().copied().collect();
    Ok(linux_seccomp(&profile, &caps, &node.seccomp_dir)?)
}

#[cfg(test)]
#[path = "security_tests.rs"]
mod tests;
