//! The cgroup writes an in-place resize is made of (decided by `podhost_model::resize`).

/// One cgroup write of a resize, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResizeStep {
    /// The pod cgroup's memory limit (`None` = unlimited).
    PodMemory(Option<i64>),
    /// The pod cgroup's CPU weight and quota.
    PodCpu {
        weight: u64,
        cpu_max: Option<(i64, u64)>,
        /// The pod's CPU requests (millicores), for its QoS class cgroup's weight.
        requests_milli: i64,
    },
    /// A container's memory limit (`None` = unlimited).
    ContainerMemory { name: String, limit: Option<i64> },
    /// A container's CPU shares and quota.
    ContainerCpu {
        name: String,
        shares: u64,
        cpu_max: Option<(i64, u64)>,
    },
}
