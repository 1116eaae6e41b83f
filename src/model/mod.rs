//! Pure types and functions shared by every module: no I/O, no root, unit-tested.

pub mod backoff;
pub mod cgroup_math;
pub mod cni;
pub mod command;
pub mod convert;
pub mod dns;
pub mod downward;
pub mod env;
pub mod eviction;
pub mod grace;
pub mod host_ports;
pub mod image_ref;
pub mod k8s_time;
pub mod net;
pub mod node;
pub mod phase;
pub mod podsync;
pub mod probe;
pub mod qos;
pub mod quantity;
pub mod resources;
pub mod restart;
pub mod rlimits;
pub mod security;
pub mod stats;
pub mod sysctl;
