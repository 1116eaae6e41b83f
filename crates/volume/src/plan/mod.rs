//! The pure volume plan of a pod: which volumes it declares, where each lives on the
//! host, and for each container (init containers too) the mounts it gets, checked as
//! the API server checks them. No I/O: everything here is a function of the spec.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::expand::{expand_sub_path_expr, subpath_env};
use podhost_model::quantity::bytes;
use podhost_model::volume_confinement::memory_volume_size;

/// The sub-directory of `pods/<uid>/volumes/` of each kind of volume podhost makes.
pub const EMPTY_DIR_KIND: &str = "empty-dir";
/// configMap, secret, downwardAPI and projected volumes: a tmpfs each.
pub const CONTENT_KIND: &str = "content";
/// The safely resolved subPath bind mounts (`subpaths/<container>/<index>`).
pub const SUBPATHS_KIND: &str = "subpaths";

/// A volume the spec declares, as podhost makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// `emptyDir`: on disk, or a tmpfs with `medium: Memory` (`tmpfs_size`: the tmpfs's
    /// `size=`, see [`memory_volume_size`]; `None` on disk, or the kernel's default when
    /// nothing bounds it). `size_limit`: its `sizeLimit` in bytes.
    EmptyDir {
        memory: bool,
        size_limit: Option<u64>,
        tmpfs_size: Option<u64>,
    },
    /// `hostPath`, with its `type` check.
    HostPath { path: PathBuf, check: HostPathType },
    /// configMap, secret, downwardAPI or projected: an empty tmpfs filled by `content`,
    /// sized as a memory-backed volume (`tmpfs_size` as `EmptyDir`'s), and mounted
    /// read-only into every container.
    Content {
        kind: ContentKind,
        tmpfs_size: Option<u64>,
    },
    /// A volume type podhost does not make (persistentVolumeClaim, nfs, …).
    Unsupported { kind: String },
}

/// The volumes whose files podhost writes itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
}

/// `hostPath.type`: what must be at the path (the kubelet's `HostPathType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPathType {
    /// `""`: no check.
    Unchecked,
    DirectoryOrCreate,
    Directory,
    FileOrCreate,
    File,
    Socket,
    CharDevice,
    BlockDevice,
}

impl HostPathType {
    fn parse(s: Option<&str>) -> Option<Self> {
        Some(match s.unwrap_or("") {
            "" => Self::Unchecked,
            "DirectoryOrCreate" => Self::DirectoryOrCreate,
            "Directory" => Self::Directory,
            "FileOrCreate" => Self::FileOrCreate,
            "File" => Self::File,
            "Socket" => Self::Socket,
            "CharDevice" => Self::CharDevice,
            "BlockDevice" => Self::BlockDevice,
            _ => return None,
        })
    }
}

/// One declared volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedVolume {
    pub name: String,
    pub source: VolumeSource,
    /// Where the volume's root is on the host: under the pod's volumes dir, or the
    /// hostPath itself.
    pub host_path: PathBuf,
}

/// `mountPropagation`, as the OCI mount option it becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// `None` (the default): rprivate.
    #[default]
    Private,
    /// `HostToContainer`: rslave.
    HostToContainer,
    /// `Bidirectional`: rshared (privileged containers only).
    Bidirectional,
}

/// One mount of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMount {
    pub volume: String,
    /// The volume's root on the host (see [`PlannedVolume::host_path`]).
    pub volume_path: PathBuf,
    /// `subPath`, or `subPathExpr` expanded: relative, without `..`; empty for none.
    pub sub_path: String,
    pub destination: String,
    /// The mount's `readOnly`, or always for a content volume (see
    /// [`podhost_model::volume_confinement`]).
    pub read_only: bool,
    pub propagation: Propagation,
}

/// The whole plan of a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumePlan {
    pub volumes: Vec<PlannedVolume>,
    /// Container name → its mounts, in the spec's order.
    pub containers: BTreeMap<String, Vec<PlannedMount>>,
    /// `securityContext.fsGroup`, applied to emptyDir volumes.
    pub fs_group: Option<u32>,
    /// `fsGroupChangePolicy: OnRootMismatch` (else Always).
    pub fs_group_on_root_mismatch: bool,
}

impl PodVolumePlan {
    pub fn volume(&self, name: &str) -> Option<&PlannedVolume> {
        self.volumes.iter().find(|v| v.name == name)
    }
}

/// Why a pod's volumes cannot be planned: the API server's checks, naming the pod, the
/// container and the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error(
        "pod {pod}: spec.volumes[{index}].name: Duplicate value: \"{name}\": volume names must be unique"
    )]
    DuplicateVolume {
        pod: String,
        index: usize,
        name: String,
    },
    #[error(
        "pod {pod}: spec.volumes[{index}].hostPath.type: Unsupported value: \"{value}\": use one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice or \"\""
    )]
    BadHostPathType {
        pod: String,
        index: usize,
        value: String,
    },
    #[error(
        "pod {pod}: spec.volumes[{index}].hostPath.path: Invalid value: \"{path}\": must be an absolute path"
    )]
    RelativeHostPath {
        pod: String,
        index: usize,
        path: String,
    },
    #[error(
        "pod {pod}: spec.volumes[{index}].emptyDir.sizeLimit: Invalid value: \"{value}\": not a quantity of bytes (e.g. 1Gi)"
    )]
    BadSizeLimit {
        pod: String,
        index: usize,
        value: String,
    },
    #[error(
        "pod {pod}: {field}.name: Not found: \"{volume}\": container {container} mounts a volume the pod does not declare in spec.volumes"
    )]
    UnknownVolume {
        pod: String,
        container: String,
        field: String,
        volume: String,
    },
    #[error(
        "pod {pod}: {field}.mountPath: Invalid value: \"{path}\": container {container}: must be an absolute path"
    )]
    RelativeMountPath {
        pod: String,
        container: String,
        field: String,
        path: String,
    },
    #[error(
        "pod {pod}: {field}.mountPath: Invalid value: \"{path}\": container {container}: must be unique"
    )]
    DuplicateMountPath {
        pod: String,
        container: String,
        field: String,
        path: String,
    },
    #[error(
        "pod {pod}: {field}: Invalid value: \"{path}\": container {container}: must be a relative path without '..'"
    )]
    BadSubPath {
        pod: String,
        container: String,
        field: String,
        path: String,
    },
    #[error(
        "pod {pod}: {field}: Invalid value: container {container}: subPathExpr and subPath are mutually exclusive"
    )]
    SubPathAndExpr {
        pod: String,
        container: String,
        field: String,
    },
    #[error("pod {pod}: {field}.subPathExpr: container {container}: missing value for {vars}")]
    MissingSubPathVar {
        pod: String,
        container: String,
        field: String,
        vars: String,
    },
    #[error(
        "pod {pod}: {field}.mountPropagation: Unsupported value: \"{value}\": container {container}: use None, HostToContainer or Bidirectional"
    )]
    BadPropagation {
        pod: String,
        container: String,
        field: String,
        value: String,
    },
    #[error(
        "pod {pod}: {field}.mountPropagation: Forbidden: container {container}: Bidirectional mount propagation is available only to privileged containers"
    )]
    BidirectionalUnprivileged {
        pod: String,
        container: String,
        field: String,
    },
    #[error(
        "pod {pod}: spec.securityContext.fsGroupChangePolicy: Unsupported value: \"{value}\": use OnRootMismatch or Always"
    )]
    BadFsGroupPolicy { pod: String, value: String },
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Plans the pod's volumes; `volumes_dir` is `Layout::pod_volumes_dir(uid)`,
/// `node_allocatable_memory` the node's allocatable memory in bytes (the size of a
/// memory-backed volume that nothing of the pod bounds lower; 0 when unknown).
pub fn plan_pod(
    pod: &Pod,
    volumes_dir: &Path,
    node_allocatable_memory: u64,
) -> Result<PodVolumePlan, PlanError> {
    let mut plan = plan_pod_volumes(pod, volumes_dir, node_allocatable_memory)?;
    let spec = pod.spec.clone().unwrap_or_default();
    let init = spec.init_containers.iter().flatten().enumerate();
    let init = init.map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let app = spec.containers.iter().enumerate();
    let app = app.map(|(i, c)| (format!("spec.containers[{i}]"), c));
    for (field, c) in init.chain(app) {
        let mounts = plan_container(pod, &plan, &field, c)?;
        plan.containers.insert(c.name.clone(), mounts);
    }
    Ok(plan)
}

/// The pod's volumes alone ([`PodVolumePlan::containers`] empty): what the sandbox
/// sets up. A container's mounts that cannot be planned (a `subPathExpr` whose
/// variable is missing until an annotation is set) fail only that container's start,
/// never the volumes the others mount.
pub fn plan_pod_volumes(
    pod: &Pod,
    volumes_dir: &Path,
    node_allocatable_memory: u64,
) -> Result<PodVolumePlan, PlanError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut plan = PodVolumePlan::default();
    let mut names = HashSet::new();
    for (index, v) in spec.volumes.iter().flatten().enumerate() {
        if !names.insert(v.name.clone()) {
            return Err(PlanError::DuplicateVolume {
                pod: pod_name(pod),
                index,
                name: v.name.clone(),
            });
        }
        plan.volumes.push(plan_volume(
            pod,
            index,
            v,
            volumes_dir,
            node_allocatable_memory,
        )?);
    }
    let sc = spec.security_context.clone().unwrap_or_default();
    plan.fs_group = sc.fs_group.and_then(|g| u32::try_from(g).ok());
    plan.fs_group_on_root_mismatch = match sc.fs_group_change_policy.as_deref() {
        None | Some("Always") => false,
        Some("OnRootMismatch") => true,
        Some(other) => {
            return Err(PlanError::BadFsGroupPolicy {
                pod: pod_name(pod),
                value: other.to_string(),
            });
        }
    };
    Ok(plan)
}

fn plan_volume(
    pod: &Pod,
    index: usize,
    v: &Volume,
    volumes_dir: &Path,
    node_allocatable_memory: u64,
) -> Result<PlannedVolume, PlanError> {
    let under = |kind: &str| volumes_dir.join(kind).join(&v.name);
    let tmpfs_size = |size_limit: Option<u64>| {
        memory_volume_size(pod, size_limit, node_allocatable_memory).map(|s| s.bytes)
    };
    let (source, host_path) = if let Some(e) = &v.empty_dir {
        let size_limit =
            match &e.size_limit {
                None => None,
                Some(q) => Some(bytes(&q.0).and_then(|b| u64::try_from(b).ok()).ok_or_else(
                    || PlanError::BadSizeLimit {
                        pod: pod_name(pod),
                        index,
                        value: q.0.clone(),
                    },
                )?),
            };
        let memory = e.medium.as_deref() == Some("Memory");
        let tmpfs_size = memory.then(|| tmpfs_size(size_limit)).flatten();
        (
            VolumeSource::EmptyDir {
                memory,
                size_limit,
                tmpfs_size,
            },
            under(EMPTY_DIR_KIND),
        )
    } else if let Some(h) = &v.host_path {
        let check =
            HostPathType::parse(h.type_.as_deref()).ok_or_else(|| PlanError::BadHostPathType {
                pod: pod_name(pod),
                index,
                value: h.type_.clone().unwrap_or_default(),
            })?;
        if !h.path.starts_with('/') {
            return Err(PlanError::RelativeHostPath {
                pod: pod_name(pod),
                index,
                path: h.path.clone(),
            });
        }
        let path = PathBuf::from(&h.path);
        (
            VolumeSource::HostPath {
                path: path.clone(),
                check,
            },
            path,
        )
    } else if let Some(kind) = content_kind(v) {
        (
            VolumeSource::Content {
                kind,
                tmpfs_size: tmpfs_size(None),
            },
            under(CONTENT_KIND),
        )
    } else {
        let kind = unsupported_kind(v);
        (VolumeSource::Unsupported { kind }, under("unsupported"))
    };
    Ok(PlannedVolume {
        name: v.name.clone(),
        source,
        host_path,
    })
}

fn content_kind(v: &Volume) -> Option<ContentKind> {
    if v.config_map.is_some() {
        Some(ContentKind::ConfigMap)
    } else if v.secret.is_some() {
        Some(ContentKind::Secret)
    } else if v.downward_api.is_some() {
        Some(ContentKind::DownwardApi)
    } else if v.projected.is_some() {
        Some(ContentKind::Projected)
    } else {
        None
    }
}

/// The volume's type as the API names it (`persistentVolumeClaim`, `nfs`, …).
fn unsupported_kind(v: &Volume) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| {
            j.as_object()?
                .keys()
                .find(|k| k.as_str() != "name")
                .cloned()
        })
        .unwrap_or_else(|| "no source".into())
}

/// A relative path with no `..` component (the API server's subPath rule).
pub fn is_safe_relative(p: &str) -> bool {
    !p.starts_with('/')
        && Path::new(p)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

fn plan_container(
    pod: &Pod,
    plan: &PodVolumePlan,
    container_field: &str,
    c: &Container,
) -> Result<Vec<PlannedMount>, PlanError> {
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let mut seen = HashSet::new();
    let mut mounts = Vec::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let field = format!("{container_field}.volumeMounts[{i}]");
        let err_ctx = || (pod_name(pod), c.name.clone(), field.clone());
        let volume = plan.volume(&m.name).ok_or_else(|| {
            let (pod, container, field) = err_ctx();
            PlanError::UnknownVolume {
                pod,
                container,
                field,
                volume: m.name.clone(),
            }
        })?;
        if !m.mount_path.starts_with('/') {
            let (pod, container, field) = err_ctx();
            return Err(PlanError::RelativeMountPath {
                pod,
                container,
                field,
                path: m.mount_path.clone(),
            });
        }
        let normalized = Path::new(&m.mount_path).components().collect::<PathBuf>();
        if !seen.insert(normalized) {
            let (pod, container, field) = err_ctx();
            return Err(PlanError::DuplicateMountPath {
                pod,
                container,
                field,
                path: m.mount_path.clone(),
            });
        }
        let sub_path = sub_path_of(pod, c, m, &field)?;
        let propagation = match m.mount_propagation.as_deref() {
            None | Some("None") => Propagation::Private,
            Some("HostToContainer") => Propagation::HostToContainer,
            Some("Bidirectional") if privileged => Propagation::Bidirectional,
            Some("Bidirectional") => {
                let (pod, container, field) = err_ctx();
                return Err(PlanError::BidirectionalUnprivileged {
                    pod,
                    container,
                    field,
                });
            }
            Some(other) => {
                let (pod, container, field) = err_ctx();
                return Err(PlanError::BadPropagation {
                    pod,
                    container,
                    field,
                    value: other.to_string(),
                });
            }
        };
        mounts.push(PlannedMount {
            volume: m.name.clone(),
            volume_path: volume.host_path.clone(),
            sub_path,
            destination: m.mount_path.clone(),
            // The kubelet's mustMountRO: a container never writes the files the
            // daemon writes (and refreshes) for it, whatever its mount says.
            read_only: m.read_only.unwrap_or(false)
                || matches!(volume.source, VolumeSource::Content { .. }),
            propagation,
        });
    }
    Ok(mounts)
}

/// `subPath`, or `subPathExpr` expanded from the container's env.
fn sub_path_of(
    pod: &Pod,
    c: &Container,
    m: &k8s_openapi::api::core::v1::VolumeMount,
    field: &str,
) -> Result<String, PlanError> {
    let sub = m.sub_path.clone().unwrap_or_default();
    let expr = m.sub_path_expr.clone().unwrap_or_default();
    let bad = |field: String, path: String| PlanError::BadSubPath {
        pod: pod_name(pod),
        container: c.name.clone(),
        field,
        path,
    };
    if !sub.is_empty() && !expr.is_empty() {
        return Err(PlanError::SubPathAndExpr {
            pod: pod_name(pod),
            container: c.name.clone(),
            field: field.to_string(),
        });
    }
    if !expr.is_empty() {
        let env = subpath_env(pod, c);
        let expanded =
            expand_sub_path_expr(&expr, &env).map_err(|missing| PlanError::MissingSubPathVar {
                pod: pod_name(pod),
                container: c.name.clone(),
                field: field.to_string(),
                vars: missing.join(", "),
            })?;
        if !is_safe_relative(&expanded) {
            return Err(bad(format!("{field}.subPathExpr"), expanded));
        }
        return Ok(expanded);
    }
    if !sub.is_empty() && !is_safe_relative(&sub) {
        return Err(bad(format!("{field}.subPath"), sub));
    }
    Ok(sub)
}

#[cfg(test)]
mod tests;
