//! The pure policy the kernel side applies: resource quantities, QoS classes and
//! oom_score_adj, cgroup arithmetic, which sysctls a pod may set, capability names, the
//! cgroup writes of a resize, and the nearest known name to a misspelt one.
//!
//! It owns no I/O, no clock, no `unsafe`, and no Kubernetes API types: the shim and the
//! runtime link it without `k8s-openapi`. `podhost_model` re-exports each module under
//! the same name and adds what reads a pod's spec.

pub mod capabilities;
pub mod cgroup_enforcement;
pub mod cgroup_math;
pub mod convert;
pub mod qos;
pub mod quantity;
pub mod resize;
pub mod resources;
pub mod spelling;
pub mod sysctl;
