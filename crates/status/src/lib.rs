//! The single writer of pod status (v1.PodStatus shape) and events, persisted atomically.
//!
//! Workers publish what the pod-sync core computed (phase, conditions, container states);
//! the API and the CLI only read. One writer thread rewrites
//! `<root>/pods/<uid>/status.json` (temp, fsync, rename), batched, newest state wins.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, disk, metrics. It may
//! not: decide a status (the pod-sync core does) or write another daemon's pods.

mod changes;
mod error;
mod events;
mod pod_lookup;
mod store;
mod writer;

#[cfg(test)]
pub(crate) mod tests;

pub use changes::PodChanges;
pub use error::StatusError;
pub use events::{Event, EventKind};
pub use pod_lookup::PodLookupError;
pub use store::{PodRecord, StatusStore, k8s_time};
pub use writer::WriterStats;
