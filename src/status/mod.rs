//! The single writer of pod status (v1.PodStatus shape) and events, persisted atomically.
//!
//! Workers report container states here; the API and the CLI only read. Every change
//! recomputes phase and conditions in memory; one writer thread rewrites
//! `<root>/pods/<uid>/status.json` (temp, fsync, rename), batched, newest state wins.

mod conditions;
mod error;
mod events;
mod store;
mod writer;

#[cfg(test)]
mod tests;

pub use error::StatusError;
pub use events::{Event, EventKind};
pub use store::{PodRecord, StatusStore, k8s_time};
pub use writer::WriterStats;
