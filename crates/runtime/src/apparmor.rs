//! AppArmor on the host: whether it is enforced, whether a profile is loaded, and
//! podhost's RuntimeDefault profile (`oci/apparmor/podhost-default`, embedded),
//! loaded with `apparmor_parser` the first time a container asks for it.

use std::io::Write;
use std::process::{Command, Stdio};

/// The profile's name, as containers' `process.apparmorProfile`.
pub const DEFAULT_PROFILE: &str = "podhost-default";
const DEFAULT_PROFILE_TEXT: &str = include_str!("../../../oci/apparmor/podhost-default");
const ENABLED: &str = "/sys/module/apparmor/parameters/enabled";
const PROFILES: &str = "/sys/kernel/security/apparmor/profiles";

/// Why the default profile cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AppArmorError {
    #[error(
        "cannot load podhost's RuntimeDefault AppArmor profile: apparmor_parser is not available ({0}); install the apparmor package"
    )]
    NoParser(std::io::Error),
    #[error("apparmor_parser refused podhost's RuntimeDefault profile: {0}")]
    Refused(String),
}

/// AppArmor is enforced on this host (the kubelet's and containerd's test).
pub fn host_enabled() -> bool {
    std::path::Path::new("/sys/kernel/security/apparmor").is_dir()
        && std::fs::read_to_string(ENABLED).is_ok_and(|s| s.starts_with('Y'))
}

/// Whether a profile named `name` is loaded (`name (enforce)` in the kernel's list).
pub fn profile_loaded(name: &str) -> bool {
    std::fs::read_to_string(PROFILES).is_ok_and(|list| {
        list.lines()
            .any(|l| l.rsplit_once(' ').is_some_and(|(n, _)| n == name))
    })
}

/// Loads podhost's default profile unless it is loaded already; returns its name.
pub fn ensure_default_profile() -> Result<String, AppArmorError> {
    if profile_loaded(DEFAULT_PROFILE) {
        return Ok(DEFAULT_PROFILE.to_string());
    }
    load_default_profile()
}

/// Loads (or replaces) podhost's default profile with this binary's text; returns its
/// name. The daemon calls it at start, so a profile left loaded by an older podhost
/// does not stay in force after an upgrade.
pub fn load_default_profile() -> Result<String, AppArmorError> {
    let mut child = Command::new("apparmor_parser")
        .args(["--replace", "--skip-cache"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(AppArmorError::NoParser)?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(DEFAULT_PROFILE_TEXT.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| AppArmorError::Refused(e.to_string()))?;
    if !out.status.success() {
        return Err(AppArmorError::Refused(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(DEFAULT_PROFILE.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_profile_is_named_as_used() {
        assert!(DEFAULT_PROFILE_TEXT.contains(&format!("profile {DEFAULT_PROFILE} ")));
        assert!(DEFAULT_PROFILE_TEXT.contains("deny mount,"));
    }
}
