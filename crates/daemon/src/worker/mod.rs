//! One task per pod UID: start the sandbox and containers, supervise them (restart policy,
//! CrashLoopBackOff), and terminate them as the kubelet does when the pod goes away.
//!
//! The worker decides nothing about containers: `sync_loop` observes, asks the pure
//! pod-sync core (`model::podsync`) and performs its actions — `start` (image, bundle,
//! shim), `hook` (postStart, preStop), signals — while `exit` and `adopt` turn what the shims report
//! into observations. `pod` holds the pod's own life: admission, sandbox, release.

pub mod admission_ledger;
mod adopt;
mod config_source;
mod content;
mod context;
pub mod dns_files;
pub mod ephemeral;
mod error;
mod exit;
mod facts;
mod hook;
pub mod host_ports;
mod limits;
mod local_storage;
mod pod;
mod prepare;
mod pull_secrets;
mod report;
mod sandbox;
pub mod security;
mod service_source;
mod start;
mod sync_loop;
mod termination_message;

pub use context::{Ctx, PodInfo};
pub use error::WorkerError;
pub use pod::{PodHandle, WorkerEnd, spawn_pod};
