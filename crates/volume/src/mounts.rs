//! One container's volume mounts, ready for its OCI spec: hostPath checks, subPath
//! binds and propagation checks, done at each start of the container.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use super::VolumeError;
use super::hostpath::check_host_path;
use super::mountinfo;
use super::plan::{
    PlannedMount, PodVolumePlan, Propagation, SUBPATHS_KIND, VolumeSource, plan_pod,
};
use super::subpath::{SubPathRequest, bind_sub_path};
use podhost_runtime::spec::{BindPropagation, VolumeBind};

/// The mounts of `container` (an init or app container of `pod`), its volumes checked
/// and its subPaths bound; `volumes_dir` is `Layout::pod_volumes_dir(uid)`,
/// `node_allocatable_memory` as [`plan_pod`] takes it. An error is the container's
/// config error (CreateContainerConfigError).
pub fn container_mounts(
    pod: &Pod,
    volumes_dir: &Path,
    node_allocatable_memory: u64,
    container: &str,
) -> Result<Vec<VolumeBind>, VolumeError> {
    let plan = plan_pod(pod, volumes_dir, node_allocatable_memory)?;
    let Some(mounts) = plan.containers.get(container) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(mounts.len());
    for (index, m) in mounts.iter().enumerate() {
        check_volume(&plan, m)?;
        let source = if m.sub_path.is_empty() {
            m.volume_path.clone()
        } else {
            let req = SubPathRequest {
                volume: &m.volume,
                container,
                volume_path: &m.volume_path,
                sub_path: &m.sub_path,
            };
            let point = volumes_dir
                .join(SUBPATHS_KIND)
                .join(container)
                .join(index.to_string());
            bind_sub_path(&req, &point)?
        };
        check_propagation_source(m, container, &source)?;
        let host_path = matches!(
            plan.volume(&m.volume).map(|v| &v.source),
            Some(VolumeSource::HostPath { .. })
        );
        out.push(VolumeBind {
            host_path,
            source,
            destination: m.destination.clone(),
            read_only: m.read_only,
            propagation: match m.propagation {
                Propagation::Private => BindPropagation::Private,
                Propagation::HostToContainer => BindPropagation::Slave,
                Propagation::Bidirectional => BindPropagation::Shared,
            },
        });
    }
    Ok(out)
}

/// The volume exists as it must: a hostPath passes its type check (made when it is
/// an `…OrCreate`), an emptyDir or content dir was set up.
fn check_volume(plan: &PodVolumePlan, m: &PlannedMount) -> Result<(), VolumeError> {
    let Some(v) = plan.volume(&m.volume) else {
        return Ok(());
    };
    match &v.source {
        VolumeSource::HostPath { path, check } => check_host_path(&v.name, path, *check),
        VolumeSource::Unsupported { kind } => Err(VolumeError::Unsupported {
            volume: v.name.clone(),
            kind: kind.clone(),
        }),
        VolumeSource::EmptyDir { .. } | VolumeSource::Content { .. } => {
            if v.host_path.is_dir() {
                Ok(())
            } else {
                Err(VolumeError::io(
                    "use the volume",
                    &v.host_path,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ))
            }
        }
    }
}

/// HostToContainer needs a source mount that receives events (shared or slave),
/// Bidirectional one that also sends them (shared), as containerd checks.
fn check_propagation_source(
    m: &PlannedMount,
    container: &str,
    source: &Path,
) -> Result<(), VolumeError> {
    let (propagation, need) = match m.propagation {
        Propagation::Private => return Ok(()),
        Propagation::HostToContainer => ("HostToContainer", "shared or slave"),
        Propagation::Bidirectional => ("Bidirectional", "shared"),
    };
    let entry = mountinfo::mount_of(source)?;
    let fits = entry.is_some_and(|e| match m.propagation {
        Propagation::Bidirectional => e.shared,
        _ => e.shared || e.slave,
    });
    if fits {
        Ok(())
    } else {
        Err(VolumeError::PropagationSource {
            volume: m.volume.clone(),
            container: container.to_string(),
            propagation,
            path: source.to_path_buf(),
            need,
        })
    }
}
