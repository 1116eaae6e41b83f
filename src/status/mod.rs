//! The single writer of pod status (v1.PodStatus shape) and events, persisted atomically.
//!
//! Workers report container states here; the API and the CLI only read. Every change
//! recomputes phase and conditions and rewrites `<root>/pods/<uid>/status.json`.

mod conditions;
mod events;
mod store;

pub use events::{Event, EventKind};
pub use store::{PodRecord, StatusStore, k8s_time};
