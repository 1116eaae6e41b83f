//! The last gate before a pod's sysctls go into the OCI spec. libcontainer writes each
//! one to `/proc/sys/` + its name with every `.` turned into `/`, as root, before the
//! container's own confinement applies: whatever admitted the pod, a name that is not
//! made of sysctl segments (`net.ipv4/../../kernel.core_pattern`) or a value that is
//! not one line never reaches it.

use std::collections::HashMap;

use podhost_model_core::sysctl::{SysctlError, check_sysctl};

/// Why a container's sysctls cannot go into its spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecSysctlError {
    /// A name or value the API server's rules refuse.
    #[error("spec.securityContext.sysctls: {0}")]
    Syntax(#[from] SysctlError),
    /// A (normalized) name with a `/` inside a segment, written `eth0.100` by the pod:
    /// libcontainer turns that `/` into a path separator too, so it would write another
    /// file than the sysctl.
    #[error(
        "spec.securityContext.sysctls: {0:?}: a part of the name holds a '.' (an interface such as eth0.100), which the runtime cannot write (it turns every '.' into '/' below /proc/sys); remove this sysctl from the pod"
    )]
    DotInSegment(String),
}

/// Checks every (normalized) sysctl of a container before it is written into its spec.
pub fn check_spec_sysctls(sysctls: &HashMap<String, String>) -> Result<(), SpecSysctlError> {
    for (name, value) in sysctls {
        check_sysctl(name, value)?;
        if name.contains('/') {
            return Err(SpecSysctlError::DotInSegment(name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, value: &str) -> Result<(), SpecSysctlError> {
        check_spec_sysctls(&HashMap::from([(name.to_string(), value.to_string())]))
    }

    #[test]
    fn sysctl_segments_pass() {
        assert_eq!(one("net.core.somaxconn", "1024"), Ok(()));
        assert_eq!(one("kernel.shm_rmid_forced", "1"), Ok(()));
        assert_eq!(check_spec_sysctls(&HashMap::new()), Ok(()));
    }

    #[test]
    fn a_path_a_line_break_or_an_unwritable_name_is_refused() {
        assert_eq!(
            one("net.ipv4/../../kernel.core_pattern", "x"),
            Err(SpecSysctlError::Syntax(SysctlError::BadName(
                "net.ipv4/../../kernel.core_pattern".into()
            )))
        );
        assert!(matches!(
            one("net.core.somaxconn", "1\nkernel.core_pattern=x"),
            Err(SpecSysctlError::Syntax(SysctlError::BadValue { .. }))
        ));
        assert_eq!(
            one("net.ipv4.conf.eth0/100.forwarding", "1"),
            Err(SpecSysctlError::DotInSegment(
                "net.ipv4.conf.eth0/100.forwarding".into()
            ))
        );
    }
}
