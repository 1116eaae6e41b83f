//! Pod sysctls, admitted as the kubelet admits them: a safe set is always allowed,
//! namespaced others only when the node lists them (`--allowed-unsafe-sysctls`, exact
//! names or `prefix*` patterns); a net sysctl with hostNetwork or an IPC one with
//! hostIPC is refused (it would change the host). A refused pod fails with reason
//! `SysctlForbidden`.

/// The kubelet's safe sysctls (namespaced, and unable to hurt other pods).
pub const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The reason of a pod refused for its sysctls.
pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// The kernel namespace a sysctl belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlNamespace {
    Ipc,
    Net,
}

impl SysctlNamespace {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ipc => "ipc",
            Self::Net => "net",
        }
    }
}

/// `net/ipv4/ip_forward` → `net.ipv4.ip_forward` (the kubelet's NormalizeName: when
/// the first separator is `/`, `/` and `.` swap).
pub fn normalize(name: &str) -> String {
    let first = name.find(['.', '/']);
    match first.map(|i| name.as_bytes()[i]) {
        Some(b'/') => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// The namespace of a (normalized) sysctl, or None when it is node-wide.
pub fn namespace_of(name: &str) -> Option<SysctlNamespace> {
    if name == "kernel.sem"
        || name.starts_with("kernel.shm")
        || name.starts_with("kernel.msg")
        || name.starts_with("fs.mqueue.")
    {
        return Some(SysctlNamespace::Ipc);
    }
    name.starts_with("net.").then_some(SysctlNamespace::Net)
}

/// Why a sysctl is refused: the node's `--allowed-unsafe-sysctls` names one that is not
/// namespaced, or a pod asks for one the node does not allow (the kubelet's
/// `SysctlForbidden`, with its wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SysctlError {
    /// `--allowed-unsafe-sysctls` names a node-wide sysctl (or a pattern of them).
    #[error(
        "--allowed-unsafe-sysctls: {0:?} is not known to be namespaced (only kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.* and net.* can be allowed)"
    )]
    NotNamespaced(String),
    /// A pod's sysctl of a namespace it shares with the host (hostNetwork, hostIPC):
    /// setting it would change the host.
    #[error("forbidden sysctl: {name:?} not allowed with host {} enabled", namespace.as_str())]
    HostNamespace {
        /// The sysctl, normalized.
        name: String,
        /// The namespace the pod shares with the host.
        namespace: SysctlNamespace,
    },
    /// A pod's sysctl that is neither safe nor in the node's allowlist.
    #[error("forbidden sysctl: {name:?} not allowlisted")]
    NotAllowlisted {
        /// The sysctl, normalized.
        name: String,
    },
}

/// The sysctls this node allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysctlAllowlist {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl SysctlAllowlist {
    /// The safe set only (the kubelet's default).
    pub fn default_safe() -> Self {
        Self {
            exact: SAFE_SYSCTLS.iter().map(|s| s.to_string()).collect(),
            prefixes: Vec::new(),
        }
    }

    /// The safe set plus `unsafe_patterns` (each namespaced, or an error).
    pub fn new(unsafe_patterns: &[String]) -> Result<Self, SysctlError> {
        let mut list = Self::default_safe();
        for p in unsafe_patterns {
            let p = normalize(p.trim());
            match p.strip_suffix('*') {
                Some(prefix) => {
                    if namespace_of(prefix).is_none()
                        && namespace_of(&format!("{prefix}x")).is_none()
                    {
                        return Err(SysctlError::NotNamespaced(p));
                    }
                    list.prefixes.push(prefix.to_string());
                }
                None => {
                    if namespace_of(&p).is_none() {
                        return Err(SysctlError::NotNamespaced(p));
                    }
                    list.exact.push(p);
                }
            }
        }
        Ok(list)
    }

    /// The kubelet's check of one sysctl.
    pub fn validate(&self, name: &str, host_net: bool, host_ipc: bool) -> Result<(), SysctlError> {
        let name = normalize(name);
        if let Some(namespace) = namespace_of(&name)
            && ((namespace == SysctlNamespace::Ipc && host_ipc)
                || (namespace == SysctlNamespace::Net && host_net))
        {
            return Err(SysctlError::HostNamespace { name, namespace });
        }
        if self.exact.contains(&name) || self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
        {
            return Ok(());
        }
        Err(SysctlError::NotAllowlisted { name })
    }

    /// Admission of a pod's sysctls: the first forbidden one is the error, with the
    /// kubelet's wording (`forbidden sysctl: "x" not allowlisted`).
    pub fn admit<'a>(
        &self,
        sysctls: impl IntoIterator<Item = &'a str>,
        host_net: bool,
        host_ipc: bool,
    ) -> Result<(), SysctlError> {
        sysctls
            .into_iter()
            .try_for_each(|s| self.validate(s, host_net, host_ipc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized() {
        assert_eq!(normalize("net/ipv4/ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(
            normalize("net/ipv4/conf/eth0.100/forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
        assert_eq!(
            normalize("kernel.shm_rmid_forced"),
            "kernel.shm_rmid_forced"
        );
    }

    #[test]
    fn safe_allowed_unsafe_refused_unless_listed() {
        let list = SysctlAllowlist::new(&[]).unwrap();
        assert!(
            list.admit(
                ["kernel.shm_rmid_forced", "net/ipv4/tcp_syncookies"],
                false,
                false
            )
            .is_ok()
        );
        assert_eq!(
            list.admit(["net.core.somaxconn"], false, false)
                .unwrap_err()
                .to_string(),
            "forbidden sysctl: \"net.core.somaxconn\" not allowlisted"
        );
        let list =
            SysctlAllowlist::new(&["net.core.somaxconn".into(), "kernel.msg*".into()]).unwrap();
        assert!(
            list.admit(["net.core.somaxconn", "kernel.msgmax"], false, false)
                .is_ok()
        );
        assert!(list.admit(["kernel.sem"], false, false).is_err());
    }

    #[test]
    fn host_namespaces_forbid_their_sysctls() {
        let list = SysctlAllowlist::new(&[]).unwrap();
        assert_eq!(
            list.admit(["net.ipv4.tcp_syncookies"], true, false)
                .unwrap_err()
                .to_string(),
            "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
        );
        assert!(
            list.admit(["kernel.shm_rmid_forced"], false, true)
                .unwrap_err()
                .to_string()
                .contains("host ipc")
        );
    }

    #[test]
    fn node_wide_sysctls_cannot_be_allowed() {
        for bad in ["kernel.pid_max", "vm.*", "kernel.*"] {
            assert!(SysctlAllowlist::new(&[bad.to_string()]).is_err(), "{bad}");
        }
        assert!(SysctlAllowlist::new(&["fs.mqueue.*".into(), "net.*".into()]).is_ok());
    }
}
