//! The Node object a cluster-mode podhost registers and keeps up to date, as the
//! kubelet's `kubelet_node_status.go` builds it: pure functions from host facts and
//! settings, so they are unit-tested without a host or an API server.

pub mod conditions;
pub mod images;
pub mod labels;
pub mod object;
pub mod reserved;

pub use conditions::{NodePressure, next_conditions};
pub use labels::{NodeLabelError, Taint, parse_node_labels, parse_taints};
pub use object::{DEFAULT_MAX_PODS, HostFacts, NodeSettings, allocatable, capacity, node_object};
pub use reserved::{Reserved, ReservedError};

#[cfg(test)]
mod tests;
