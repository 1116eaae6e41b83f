//! The metrics' label sets (each a Prometheus series key).

use prometheus_client::encoding::EncodeLabelSet;

/// Which list of the pod spec a container is in (the kubelet's `container_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerType {
    Container,
    Init,
    Ephemeral,
}

impl ContainerType {
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerType::Container => "container",
            ContainerType::Init => "init_container",
            ContainerType::Ephemeral => "ephemeral_container",
        }
    }
}

/// The probed container, built once per prober (its labels on `prober_probe_total`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ProbeSeries {
    pub namespace: String,
    pub pod: String,
    pub pod_uid: String,
    pub container: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ContainerTypeLabels {
    pub container_type: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct StartErrorLabels {
    pub container_type: &'static str,
    pub code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ContainerLabels {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ProbeLabels {
    pub probe_type: &'static str,
    pub result: &'static str,
    pub container: String,
    pub pod: String,
    pub namespace: String,
    pub pod_uid: String,
}

impl ProbeLabels {
    pub fn of(series: &ProbeSeries, probe_type: &'static str, result: &'static str) -> Self {
        Self {
            probe_type,
            result,
            container: series.container.clone(),
            pod: series.pod.clone(),
            namespace: series.namespace.clone(),
            pod_uid: series.pod_uid.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ImageSizeLabels {
    pub image_size_in_bytes: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct EvictionLabels {
    pub eviction_signal: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct OomLabels {
    /// `pod`, `system` (the machine ran out), or `other` (a cgroup not podhost's).
    pub scope: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ContainerStateLabels {
    pub container_state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct PhaseLabels {
    pub phase: &'static str,
}

/// The kubelet's `image_size_in_bytes` label: the size range the image falls in.
pub(super) fn image_size_range(bytes: u64) -> &'static str {
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    const RANGES: [(u64, &str); 11] = [
        (10 * MIB, "0-10MB"),
        (100 * MIB, "10MB-100MB"),
        (500 * MIB, "100MB-500MB"),
        (GIB, "500MB-1GB"),
        (5 * GIB, "1GB-5GB"),
        (10 * GIB, "5GB-10GB"),
        (20 * GIB, "10GB-20GB"),
        (30 * GIB, "20GB-30GB"),
        (40 * GIB, "30GB-40GB"),
        (60 * GIB, "40GB-60GB"),
        (100 * GIB, "60GB-100GB"),
    ];
    RANGES
        .iter()
        .find(|(below, _)| bytes < *below)
        .map_or("GT100GB", |(_, label)| label)
}

#[cfg(test)]
mod tests {
    use super::image_size_range;

    #[test]
    fn image_sizes_fall_in_the_kubelets_ranges() {
        assert_eq!(image_size_range(0), "0-10MB");
        assert_eq!(image_size_range(10 * 1024 * 1024 - 1), "0-10MB");
        assert_eq!(image_size_range(10 * 1024 * 1024), "10MB-100MB");
        assert_eq!(image_size_range(3 << 30), "1GB-5GB");
        assert_eq!(image_size_range(200 << 30), "GT100GB");
    }
}
