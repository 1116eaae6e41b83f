//! How the kubelet confines the volumes whose files it writes itself — configMap,
//! secret, downwardAPI and projected (the service-account token is a projected volume):
//!
//! - every mount of one is read-only, whatever its `readOnly` says (the kubelet's
//!   `mustMountRO`, the fix for CVE-2017-1002102: a container that could write its
//!   payload could turn the kubelet's next refresh against the host);
//! - a memory-backed volume (podhost makes all of these a tmpfs, and an emptyDir with
//!   `medium: Memory`) gets a tmpfs sized as the kubelet's
//!   `calculateEmptyDirMemorySize` sizes one: the node's allocatable memory, lowered to
//!   the pod's memory limit, lowered to the emptyDir's `sizeLimit`, each only when it
//!   is set and smaller.
//!
//! Pure: the node's allocatable memory is passed in.

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::quantity::{bytes, format_bytes};

/// The reason a mount's `readOnly: false` is not applied (`podhost validate`, the
/// daemon's `FieldNotHonoured` warning).
pub const READ_ONLY_REASON: &str = "configMap, secret, downwardAPI and projected volumes are always mounted read-only, as the kubelet mounts them (CVE-2017-1002102)";

/// The API's names of the volume kinds that are always mounted read-only.
pub const ALWAYS_READ_ONLY_KINDS: [&str; 4] = ["configMap", "secret", "downwardAPI", "projected"];

/// The API's name of `v`'s kind when it is one whose files podhost writes itself (and
/// which is therefore always mounted read-only); `None` for any other kind.
pub fn written_content_kind(v: &Volume) -> Option<&'static str> {
    let [config_map, secret, downward_api, projected] = ALWAYS_READ_ONLY_KINDS;
    if v.config_map.is_some() {
        Some(config_map)
    } else if v.secret.is_some() {
        Some(secret)
    } else if v.downward_api.is_some() {
        Some(downward_api)
    } else if v.projected.is_some() {
        Some(projected)
    } else {
        None
    }
}

/// What decided a memory-backed volume's tmpfs size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmpfsBound {
    /// The emptyDir's `sizeLimit` (smaller than the pod's limit and the node's memory).
    SizeLimit,
    /// The pod's memory limit (every container has one).
    PodMemoryLimit,
    /// The node's allocatable memory: nothing of the pod bounds it lower.
    NodeAllocatable,
}

/// A memory-backed volume's tmpfs size and what decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmpfsSize {
    pub bytes: u64,
    pub bound: TmpfsBound,
}

/// The tmpfs size of a memory-backed volume of `pod` with `size_limit` (an emptyDir's
/// `sizeLimit`; `None` for the content volumes), on a node with `node_allocatable`
/// bytes of allocatable memory. `node_allocatable` 0 means unknown (`podhost
/// validate`, without a node): then only the pod's own bounds count, and `None` says
/// the size is the node's allocatable memory.
pub fn memory_volume_size(
    pod: &Pod,
    size_limit: Option<u64>,
    node_allocatable: u64,
) -> Option<TmpfsSize> {
    // The kubelet's order: each bound replaces the size only when it is set (> 0) and
    // not larger than what is already there.
    let mut size = (node_allocatable > 0).then_some(TmpfsSize {
        bytes: node_allocatable,
        bound: TmpfsBound::NodeAllocatable,
    });
    let lower = |size: Option<TmpfsSize>, bound: Option<u64>, kind: TmpfsBound| match bound {
        Some(b) if b > 0 && size.is_none_or(|s| b <= s.bytes) => Some(TmpfsSize {
            bytes: b,
            bound: kind,
        }),
        _ => size,
    };
    size = lower(size, pod_memory_limit(pod), TmpfsBound::PodMemoryLimit);
    lower(size, size_limit, TmpfsBound::SizeLimit)
}

/// The pod's memory limit as the kubelet sets its cgroup's (`ResourceConfigForPod`
/// with `PodLimits`), `None` unless every container, init containers included, has a
/// non-zero one:
///
/// - the app containers' limits summed, plus every restartable init (sidecar)
///   container's, which runs beside them;
/// - at least, for each regular init container, its own limit plus those of the
///   sidecars started before it.
pub fn pod_memory_limit(pod: &Pod) -> Option<u64> {
    let spec = pod.spec.as_ref()?;
    let limit = |c: &Container| {
        let q = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
        u64::try_from(bytes(&q.0)?).ok().filter(|b| *b > 0)
    };
    let mut total = 0u64;
    for c in &spec.containers {
        total = total.checked_add(limit(c)?)?;
    }
    let (mut sidecars, mut init_peak) = (0u64, 0u64);
    for c in spec.init_containers.iter().flatten() {
        let own = limit(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            total = total.checked_add(own)?;
            sidecars = sidecars.checked_add(own)?;
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(own.checked_add(sidecars)?);
        }
    }
    Some(total.max(init_peak))
}

/// One mount podhost makes read-only although its `readOnly` does not say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedReadOnly {
    /// `spec.containers[0].volumeMounts[1]` (or `spec.initContainers[…]`).
    pub field: String,
    pub volume: String,
    /// The volume's kind as the API names it (`configMap`).
    pub kind: &'static str,
    /// The mount says `readOnly: false` (rather than nothing).
    pub asked_read_write: bool,
}

impl ForcedReadOnly {
    /// What `podhost validate` says about it.
    pub fn note(&self) -> String {
        let asked = if self.asked_read_write {
            "is false"
        } else {
            "is not set"
        };
        format!(
            "mounted read-only although readOnly {asked}: \"{}\" is a {} volume; {READ_ONLY_REASON}",
            self.volume, self.kind
        )
    }
}

/// Every mount of `pod` that is read-only only because its volume is always mounted
/// so, in spec order (init containers first).
pub fn forced_read_only_mounts(pod: &Pod) -> Vec<ForcedReadOnly> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let kind_of = |name: &str| {
        spec.volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .and_then(written_content_kind)
    };
    let init = spec.init_containers.iter().flatten();
    let init = init
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let app = spec.containers.iter().enumerate();
    let app = app.map(|(i, c)| (format!("spec.containers[{i}]"), c));
    let mut out = Vec::new();
    for (container_field, c) in init.chain(app) {
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            if m.read_only == Some(true) {
                continue;
            }
            let Some(kind) = kind_of(&m.name) else {
                continue;
            };
            out.push(ForcedReadOnly {
                field: format!("{container_field}.volumeMounts[{j}]"),
                volume: m.name.clone(),
                kind,
                asked_read_write: m.read_only == Some(false),
            });
        }
    }
    out
}

/// One memory-backed volume of a pod and its tmpfs size, for `podhost validate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryVolume {
    /// `spec.volumes[2].secret`, `spec.volumes[0].emptyDir`.
    pub field: String,
    /// `None`: the node's allocatable memory.
    pub size: Option<TmpfsSize>,
}

impl MemoryVolume {
    /// What `podhost validate` says about it.
    pub fn note(&self) -> String {
        let Some(size) = self.size else {
            return "a tmpfs of at most the node's allocatable memory (the kubelet's size of a memory-backed volume when the pod sets no smaller bound: a memory limit on every container, or an emptyDir sizeLimit)".into();
        };
        let bytes = i64::try_from(size.bytes).map_or_else(|_| size.bytes.to_string(), format_bytes);
        let why = match size.bound {
            TmpfsBound::SizeLimit => {
                "its sizeLimit; the node's allocatable memory if that is smaller"
            }
            TmpfsBound::PodMemoryLimit => {
                "the pod's memory limit; the node's allocatable memory if that is smaller"
            }
            TmpfsBound::NodeAllocatable => "the node's allocatable memory",
        };
        format!("a tmpfs of at most {bytes} ({why})")
    }
}

/// Every memory-backed volume of `pod` with its size on a node of `node_allocatable`
/// bytes (0: unknown, see [`memory_volume_size`]).
pub fn memory_volumes(pod: &Pod, node_allocatable: u64) -> Vec<MemoryVolume> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    let mut out = Vec::new();
    for (i, v) in volumes.into_iter().flatten().enumerate() {
        let (kind, size_limit) = match (&v.empty_dir, written_content_kind(v)) {
            (Some(e), _) if e.medium.as_deref() == Some("Memory") => (
                "emptyDir",
                e.size_limit
                    .as_ref()
                    .and_then(|q| bytes(&q.0))
                    .and_then(|b| u64::try_from(b).ok()),
            ),
            (_, Some(kind)) => (kind, None),
            _ => continue,
        };
        out.push(MemoryVolume {
            field: format!("spec.volumes[{i}].{kind}"),
            size: memory_volume_size(pod, size_limit, node_allocatable),
        });
    }
    out
}

#[cfg(test)]
mod tests;
