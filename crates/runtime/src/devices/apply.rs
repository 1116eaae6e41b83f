//! Applying a container's device rules to its cgroup, on whichever cgroup version the
//! host runs.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxDeviceCgroup, Spec};

use super::DevicesError;
use super::policy::DevicePolicy;
use super::rules::{default_rules, normalize};
use super::{bpf, cgroup_v1, program};
use crate::cgroup_root::{CgroupMode, detect_mode};

/// How a container was confined (for the shim's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// An eBPF program of `instructions` instructions attached to `cgroup`.
    CgroupV2 {
        cgroup: PathBuf,
        instructions: usize,
    },
    /// The rules written to the v1 devices cgroup `cgroup`.
    CgroupV1 { cgroup: PathBuf },
}

/// Confines the container of the bundle config `config_json` (its
/// `linux.resources.devices` in its `linux.cgroupsPath`). A config without device rules
/// gets [`default_rules`]: a container never runs unconfined.
pub fn confine_container(config_json: &Path) -> Result<Confinement, DevicesError> {
    let spec = Spec::load(config_json).map_err(|e| DevicesError::Config {
        path: config_json.to_path_buf(),
        message: e.to_string(),
    })?;
    let linux = spec.linux().as_ref();
    let cgroups_path = linux
        .and_then(|l| l.cgroups_path().clone())
        .ok_or_else(|| DevicesError::Config {
            path: config_json.to_path_buf(),
            message: "no linux.cgroupsPath".into(),
        })?;
    let rules = linux
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().clone())
        .unwrap_or_else(|| {
            tracing::warn!(
                config = %config_json.display(),
                "no linux.resources.devices; applying the default device rules"
            );
            default_rules()
        });
    let relative = cgroups_path.strip_prefix("/").unwrap_or(&cgroups_path);
    match detect_mode() {
        CgroupMode::Unified => {
            let dir = Path::new("/sys/fs/cgroup").join(relative);
            let instructions = confine_v2_dir(&dir, &rules)?;
            Ok(Confinement::CgroupV2 {
                cgroup: dir,
                instructions,
            })
        }
        CgroupMode::Legacy => {
            let dir = cgroup_v1::devices_mount()?.join(relative);
            confine_v1_dir(&dir, &rules)?;
            Ok(Confinement::CgroupV1 { cgroup: dir })
        }
    }
}

/// Attaches the program of `rules` to the cgroup v2 directory `dir`; returns the
/// program's length in instructions.
pub fn confine_v2_dir(dir: &Path, rules: &[LinuxDeviceCgroup]) -> Result<usize, DevicesError> {
    let policy = DevicePolicy::from_rules(&normalize(rules)?);
    let insns = program::compile(&policy)?;
    let prog = bpf::load_device_program(&insns)?;
    bpf::attach_device_program(&prog, dir)?;
    Ok(insns.len())
}

/// Writes `rules` into the v1 devices cgroup directory `dir` and checks devices.list.
pub fn confine_v1_dir(dir: &Path, rules: &[LinuxDeviceCgroup]) -> Result<(), DevicesError> {
    cgroup_v1::apply(dir, &normalize(rules)?)
}
