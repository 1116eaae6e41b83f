//! podhost: runs Kubernetes static pods on one Linux host without a CRI.
//!
//! Module order follows the one-way data flow in `../shared/design.md`:
//! `source` → `worker` → `runtime` → `status` → `api`, with `model` holding pure
//! types and functions shared by all of them.
pub mod api;
pub mod cli;
pub mod daemon;
pub mod gc;
pub mod image;
pub mod logs;
pub mod model;
pub mod oom;
pub mod runtime;
pub mod shim;
pub mod source;
pub mod status;
pub mod worker;
