//! The seccomp filter of a container: rendered as an OCI `linux.seccomp` section,
//! compiled once per distinct filter by the daemon (`program`, `cache`), and loaded as
//! a finished BPF program by podhost's executor in the container's process
//! (`precompiled`, `runtime/workload.rs`).
//!
//! Three profiles, as in Kubernetes' `seccompProfile.type`:
//! - `Unconfined`: no filter.
//! - `RuntimeDefault`: podhost's built-in profile (`oci/seccomp/runtime-default.json`,
//!   embedded in the binary), equal in effect to the moby/containerd default profile:
//!   which syscalls a container may call depends on its capabilities, exactly as
//!   containerd decides it.
//! - `Localhost(path)`: an OCI `LinuxSeccomp` JSON file under the node's profile
//!   directory (`<root-dir>/seccomp/`), read without ever leaving it.

mod cache;
mod error;
mod localhost;
mod masked_order;
mod precompiled;
mod profile;
mod program;
#[cfg(test)]
mod program_tests;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::Path;

use oci_spec::runtime::{Capability, LinuxSeccomp};

pub use cache::{ProgramCache, Source as ProgramSource};
pub use error::{ProgramError, RuleError, SeccompError};
pub use localhost::MAX_PROFILE_BYTES;
pub use masked_order::for_libcontainer;
pub use precompiled::{
    FILTER_LOADING_CAPS, PrecompiledSeccomp, read_precompiled, take_precompiled,
};
pub use program::{CompiledFilter, compile, compiler_identity, loaded_program, read_loaded_filter};

/// The directory under the root dir where compiled programs are kept (`cache.rs`).
pub const PROGRAMS_DIR: &str = "seccomp-programs";

/// containerd's default capability set (`model::security::DEFAULT_CAPABILITIES`) as OCI
/// capabilities: what a container gets without changes.
pub fn default_capabilities() -> Vec<Capability> {
    podhost_model_core::capabilities::DEFAULT_CAPABILITIES
        .iter()
        .filter_map(|c| c.trim_start_matches("CAP_").parse().ok())
        .collect()
}

/// podhost's RuntimeDefault profile, in podhost's format (oci/seccomp/README.md).
pub const RUNTIME_DEFAULT_PROFILE: &str =
    include_str!("../../../../oci/seccomp/runtime-default.json");

/// How a container's syscalls are filtered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeccompProfile {
    /// No filter at all.
    Unconfined,
    /// podhost's built-in profile.
    RuntimeDefault,
    /// A file under the node's seccomp profile directory, by its relative path.
    Localhost(String),
}

/// The `linux.seccomp` section for a container with this profile and this capability
/// set (the container's bounding set, which decides the capability-conditional groups
/// of RuntimeDefault); `seccomp_dir` is where Localhost profiles live. `None` means
/// Unconfined.
pub fn linux_seccomp(
    profile: &SeccompProfile,
    caps: &HashSet<Capability>,
    seccomp_dir: &Path,
) -> Result<Option<LinuxSeccomp>, SeccompError> {
    match profile {
        SeccompProfile::Unconfined => Ok(None),
        SeccompProfile::RuntimeDefault => runtime_default(std::env::consts::ARCH, caps).map(Some),
        SeccompProfile::Localhost(rel) => localhost::load(seccomp_dir, rel).map(Some),
    }
}

/// The RuntimeDefault filter for a container of machine `machine` (Rust's
/// `std::env::consts::ARCH` names) with capabilities `caps`.
pub(crate) fn runtime_default(
    machine: &str,
    caps: &HashSet<Capability>,
) -> Result<LinuxSeccomp, SeccompError> {
    const NAME: &str = "RuntimeDefault (built in)";
    profile::Profile::parse(RUNTIME_DEFAULT_PROFILE, NAME)?.render(NAME, machine, caps)
}
