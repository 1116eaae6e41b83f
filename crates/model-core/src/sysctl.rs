//! Pod sysctls, admitted as the kubelet admits them: a safe set is always allowed,
//! namespaced others only when the node lists them (`--allowed-unsafe-sysctls`, exact
//! names or `prefix*` patterns); a net sysctl with hostNetwork or an IPC one with
//! hostIPC is refused (it would change the host). A refused pod fails with reason
//! `SysctlForbidden`.
//!
//! Names are checked with the API server's syntax (`IsValidSysctlName`) wherever they
//! come from: the runtime turns a name into a path below `/proc/sys/`, so a prefix
//! match alone would let `net.ipv4/../../kernel.core_pattern` pass as a `net.` sysctl
//! and reach a node-wide one.

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

/// The longest sysctl name the API server accepts.
pub const MAX_NAME_LEN: usize = 253;

/// What a sysctl name must look like, in the API server's words (its
/// `SysctlContainSlashFmt`): segments joined by `.` or `/`, so no empty segment (`..`)
/// and no leading or trailing separator.
pub const NAME_RULE: &str = "must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?";

/// What an `--allowed-unsafe-sysctls` entry must look like (the kubelet's
/// `SysctlContainSlashPatternFmt`): a name, or a prefix of one ending in `*`.
pub const PATTERN_RULE: &str = "must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]";

/// What a sysctl value may not hold: a line break would be a second `name=value` line
/// to anything that writes sysctl.d-style files, and a NUL cuts the value short.
pub const VALUE_RULE: &str = "must not contain a newline, carriage return or NUL character";

/// A name's inner characters: lowercase letters, digits, `-` and `_`.
fn is_inner_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_'
}

/// A name's first and last characters: lowercase letters and digits.
fn is_edge_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// One segment: `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`.
fn is_segment(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_edge_char(first) && is_edge_char(last) && bytes.iter().all(|&c| is_inner_char(c))
        }
        _ => false,
    }
}

/// The API server's `IsValidSysctlName`: at most [`MAX_NAME_LEN`] bytes of segments
/// joined by `.` or `/` (either form, before [`normalize`], and after it too).
pub fn is_valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN && name.split(['.', '/']).all(is_segment)
}

/// The kubelet's `IsValidSysctlPattern`: a valid name, or a prefix of one ending in
/// `*` (`net.*`, `kernel.shm*`, `*`).
pub fn is_valid_pattern(pattern: &str) -> bool {
    if pattern.len() > MAX_NAME_LEN {
        return false;
    }
    let Some(prefix) = pattern.strip_suffix('*') else {
        return is_valid_name(pattern);
    };
    // The part after the last separator is `([a-z0-9][-_a-z0-9]*)?`; the ones before
    // are whole segments.
    let (head, last) = match prefix.rfind(['.', '/']) {
        Some(i) => (Some(&prefix[..i]), &prefix[i + 1..]),
        None => (None, prefix),
    };
    let last_ok = last.bytes().next().is_none_or(is_edge_char) && last.bytes().all(is_inner_char);
    last_ok && head.is_none_or(is_valid_name)
}

/// A value the runtime may write: no line break, no NUL.
pub fn is_valid_value(value: &str) -> bool {
    !value.contains(['\n', '\r', '\0'])
}

/// A pod's sysctl as the API server validates it: its name's syntax, then its value.
/// [`SysctlError::field`] says which of the two is wrong.
pub fn check_sysctl(name: &str, value: &str) -> Result<(), SysctlError> {
    if !is_valid_name(name) {
        return Err(SysctlError::BadName(name.to_string()));
    }
    if !is_valid_value(value) {
        return Err(SysctlError::BadValue {
            name: name.to_string(),
            value: value.to_string(),
        });
    }
    Ok(())
}

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
/// namespaced or is not a pattern at all, a pod's sysctl is malformed, or a pod asks
/// for one the node does not allow (the kubelet's `SysctlForbidden`, with its wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SysctlError {
    /// An `--allowed-unsafe-sysctls` (`allowedUnsafeSysctls`) entry that is neither a
    /// sysctl name nor a `prefix*` pattern.
    #[error(
        "--allowed-unsafe-sysctls (allowedUnsafeSysctls): {0:?} {rule}; give sysctl names such as net.core.somaxconn or patterns such as net.ipv4.*",
        rule = PATTERN_RULE
    )]
    BadPattern(String),
    /// A pod's sysctl name that is not one (the API server's `IsValidSysctlName`).
    /// Worded as the field error after the field's path.
    #[error("invalid value {0:?}: {rule}", rule = NAME_RULE)]
    BadName(String),
    /// A pod's sysctl value with a line break or NUL. Worded as the field error after
    /// the field's path.
    #[error("invalid value {value:?}: {rule} (sysctl {name:?})", rule = VALUE_RULE)]
    BadValue {
        /// The sysctl, as written.
        name: String,
        /// The refused value.
        value: String,
    },
    /// `--allowed-unsafe-sysctls` names a node-wide sysctl (or a pattern of them).
    #[error(
        "--allowed-unsafe-sysctls (allowedUnsafeSysctls): {0:?} is not known to be namespaced (only kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.* and net.* can be allowed)"
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

impl SysctlError {
    /// The field of the pod's sysctl entry at fault (`name` or `value`), for the
    /// errors about one entry's syntax.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::BadName(_) => Some("name"),
            Self::BadValue { .. } => Some("value"),
            _ => None,
        }
    }
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

    /// The safe set plus `unsafe_patterns` (each a valid pattern and namespaced, or an
    /// error).
    pub fn new(unsafe_patterns: &[String]) -> Result<Self, SysctlError> {
        let mut list = Self::default_safe();
        for p in unsafe_patterns {
            let p = p.trim();
            if !is_valid_pattern(p) {
                return Err(SysctlError::BadPattern(p.to_string()));
            }
            let p = normalize(p);
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

    /// The kubelet's check of one sysctl, after the API server's check of its name (a
    /// prefix only means something for a name made of segments).
    pub fn validate(&self, name: &str, host_net: bool, host_ipc: bool) -> Result<(), SysctlError> {
        if !is_valid_name(name) {
            return Err(SysctlError::BadName(name.to_string()));
        }
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
    fn names_follow_the_api_servers_syntax() {
        for good in [
            "net.ipv4.ip_forward",
            "net/ipv4/conf/eth0.100/forwarding",
            "net.ipv4.conf.eth0/100.forwarding",
            "kernel.shm_rmid_forced",
            "net.ipv4.conf.all.accept-redirects",
            "a",
            "0.1",
        ] {
            assert!(is_valid_name(good), "{good}");
        }
        let longest = format!("net.{}", "a".repeat(MAX_NAME_LEN - 4));
        assert_eq!(longest.len(), MAX_NAME_LEN);
        assert!(is_valid_name(&longest));
        let too_long = format!("{longest}b");
        for bad in [
            "net.ipv4/../../kernel.core_pattern",
            "net/ipv4/../../kernel/core_pattern",
            "/net.ipv4.x",
            ".net.x",
            "net..x",
            "net//x",
            "Net.x",
            "net.ipv4.",
            "net.ipv4/",
            "net.-x",
            "net.x_",
            "net.x y",
            "net.x\n",
            "net.*",
            "",
            too_long.as_str(),
        ] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn values_may_not_break_lines() {
        assert!(is_valid_value("0 2000"));
        assert!(is_valid_value("4096\t87380\t6291456"));
        assert!(is_valid_value(""));
        for bad in ["1\nkernel.x=1", "1\r", "1\0"] {
            assert!(!is_valid_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_entry_names_its_field() {
        let e = check_sysctl("net.ipv4/../../kernel.core_pattern", "x").unwrap_err();
        assert_eq!(e.field(), Some("name"));
        assert_eq!(
            e.to_string(),
            format!("invalid value \"net.ipv4/../../kernel.core_pattern\": {NAME_RULE}")
        );
        let e = check_sysctl("net.core.somaxconn", "1\nkernel.x=1").unwrap_err();
        assert_eq!(e.field(), Some("value"));
        assert_eq!(
            e.to_string(),
            format!(
                "invalid value \"1\\nkernel.x=1\": {VALUE_RULE} (sysctl \"net.core.somaxconn\")"
            )
        );
        assert!(check_sysctl("net/ipv4/conf/eth0.100/forwarding", "1").is_ok());
    }

    #[test]
    fn a_prefix_match_never_admits_a_malformed_name() {
        let list = SysctlAllowlist::new(&["net.*".into()]).unwrap();
        assert!(list.admit(["net.core.somaxconn"], false, false).is_ok());
        let e = list
            .admit(["net.ipv4/../../kernel.core_pattern"], false, false)
            .unwrap_err();
        assert_eq!(
            e,
            SysctlError::BadName("net.ipv4/../../kernel.core_pattern".into())
        );
    }

    #[test]
    fn patterns_follow_the_kubelets_syntax() {
        for good in [
            "net.*",
            "net/ipv4/*",
            "kernel.shm*",
            "net.ipv4.conf.eth-*",
            "net.core.somaxconn",
            "*",
        ] {
            assert!(is_valid_pattern(good), "{good}");
        }
        for bad in [
            "net..*",
            "net.**",
            "net*.x",
            "/net.*",
            "net.*.x",
            "Net.*",
            "net.",
            "net.ipv4/../../kernel.*",
            "",
        ] {
            assert!(!is_valid_pattern(bad), "{bad:?}");
        }
        assert!(!is_valid_pattern(&format!(
            "net.{}*",
            "a".repeat(MAX_NAME_LEN)
        )));
    }

    #[test]
    fn a_malformed_allowance_is_a_clear_error() {
        let e = SysctlAllowlist::new(&["net.ipv4/../../kernel.*".into()]).unwrap_err();
        assert_eq!(e, SysctlError::BadPattern("net.ipv4/../../kernel.*".into()));
        let text = e.to_string();
        assert!(
            text.starts_with("--allowed-unsafe-sysctls (allowedUnsafeSysctls): \"net.ipv4/../../kernel.*\" must have at most 253 characters"),
            "{text}"
        );
        // A valid pattern is still refused when it is not namespaced.
        assert_eq!(
            SysctlAllowlist::new(&["*".into()]).unwrap_err(),
            SysctlError::NotNamespaced("*".into())
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
