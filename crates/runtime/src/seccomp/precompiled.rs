//! Moving a container's filter from libcontainer (compile in every container's init)
//! to podhost's executor (load the program compiled once by the daemon).
//!
//! The executor runs after libcontainer dropped to the spec's capabilities. Without
//! no_new_privs, loading a filter needs CAP_SYS_ADMIN, so the spec then gives the
//! process CAP_SYS_ADMIN and CAP_SETPCAP on top of its own sets; the executor loads the
//! program and drops to the container's exact sets before execve (runc's order: filter,
//! then capabilities; the one `podhost exec` has always used). With no_new_privs the
//! capabilities are the container's own throughout. Either way the workload starts
//! with the same capabilities, no_new_privs and single filter as before.

use std::collections::HashSet;

use oci_spec::runtime::{Capability, LinuxCapabilities, LinuxCapabilitiesBuilder};
use serde::{Deserialize, Serialize};

use super::cache::ProgramCache;
use super::error::ProgramError;
use super::program::CompiledFilter;
use crate::spec::Confinement;

/// Added while the filter loads without no_new_privs (CAP_SYS_ADMIN), and to drop the
/// bounding set back afterwards (CAP_SETPCAP).
pub const FILTER_LOADING_CAPS: [Capability; 2] = [Capability::SysAdmin, Capability::Setpcap];

/// What a container's process loads before execve, in the shim config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecompiledSeccomp {
    pub filter: CompiledFilter,
    /// The container's own capability sets, restored once the filter is loaded, when
    /// its process starts with [`FILTER_LOADING_CAPS`] added (None: it starts with
    /// exactly its own, as with no_new_privs).
    pub restore_capabilities: Option<LinuxCapabilities>,
}

/// The precompiled filter in a shim config file (`ShimConfig::seccomp`), if any.
pub fn read_precompiled(
    shim_config: &std::path::Path,
) -> Result<Option<PrecompiledSeccomp>, podhost_disk::DiskError> {
    #[derive(Deserialize)]
    struct SeccompOnly {
        #[serde(default)]
        seccomp: Option<PrecompiledSeccomp>,
    }
    Ok(podhost_disk::read_json::<SeccompOnly>(shim_config)?.and_then(|c| c.seccomp))
}

/// The capability sets `spec::build_spec` gives a container with `caps`.
fn spec_capabilities(caps: &[Capability]) -> Result<LinuxCapabilities, ProgramError> {
    let set: HashSet<Capability> = caps.iter().copied().collect();
    LinuxCapabilitiesBuilder::default()
        .bounding(set.clone())
        .effective(set.clone())
        .permitted(set)
        .inheritable(HashSet::new())
        .ambient(HashSet::new())
        .build()
        .map_err(|e| ProgramError::Capabilities(e.to_string()))
}

/// Takes `conf`'s filter off the libcontainer path: returns the precompiled program
/// for the executor and leaves `conf` with no filter and, without no_new_privs, with
/// [`FILTER_LOADING_CAPS`] added. A filter podhost does not precompile (one that uses
/// SCMP_ACT_NOTIFY) stays in `conf` for libcontainer (`Ok(None)`).
pub fn take_precompiled(
    cache: &ProgramCache,
    conf: &mut Confinement,
) -> Result<Option<PrecompiledSeccomp>, ProgramError> {
    let Some(seccomp) = &conf.seccomp else {
        return Ok(None);
    };
    let filter = match cache.program(seccomp) {
        Ok(p) => (*p).clone(),
        Err(ProgramError::Notify) => return Ok(None),
        Err(e) => return Err(e),
    };
    let restore_capabilities = if conf.no_new_privileges {
        None
    } else {
        let own = spec_capabilities(&conf.capabilities)?;
        for cap in FILTER_LOADING_CAPS {
            if !conf.capabilities.contains(&cap) {
                conf.capabilities.push(cap);
            }
        }
        Some(own)
    };
    conf.seccomp = None;
    Ok(Some(PrecompiledSeccomp {
        filter,
        restore_capabilities,
    }))
}
