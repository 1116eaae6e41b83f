//! `podhost_model`: the kubelet's semantics as pure functions over Kubernetes API types:
//! the pod-sync core (`podsync`: observed state in, actions and status out), admission,
//! probes' thresholds, restart back-off, grace periods, environment, downward API, DNS,
//! security contexts, QoS, resize decisions, node status and the events' correlator.
//!
//! It owns no I/O, no clock, no threads and no `unsafe` (its dependencies are
//! `k8s-openapi`, serde and `podhost-model-core`, whose modules it re-exports under the
//! same names): every other crate of the workspace may use it, and everything here is
//! unit-tested without root.

pub mod admission;
pub mod backoff;
pub use podhost_model_core::cgroup_enforcement;
pub use podhost_model_core::cgroup_math;
pub mod cni;
pub mod command;
pub mod config_refs;
pub use podhost_model_core::convert;
pub mod dns;
pub mod downward;
pub mod env;
pub mod event_correlator;
pub mod eviction;
pub mod grace;
pub mod host_ports;
pub mod image_ref;
pub mod k8s_time;
pub mod kubelet_auth;
pub mod log_target;
pub mod net;
pub mod node;
pub mod phase;
pub mod podsync;
pub mod probe;
pub mod pull_secrets;
pub mod qos;
pub use podhost_model_core::quantity;
pub mod readiness_gates;
pub mod resize;
pub use podhost_model_core::resources;
pub use podhost_model_core::spelling;
pub mod restart;
pub mod review_cache;
pub mod rlimits;
pub mod security;
pub mod service_env;
pub mod stats;
pub mod status_reconcile;
pub use podhost_model_core::sysctl;
pub mod terminal_status;
pub mod token_bucket;
pub mod volume_confinement;
