//! One task per pod UID: start the sandbox and containers, supervise them (restart policy,
//! CrashLoopBackOff), and terminate them as the kubelet does when the pod goes away.
//!
//! Side effects live in separate files: `prepare` (bundle), `container` (one container's
//! life), `kill` (preStop → stop signal → SIGKILL), `pod` (sandbox and the pod's life).

mod container;
mod context;
mod kill;
mod limits;
mod pod;
mod prepare;
pub mod security;
mod state;

pub use context::{Ctx, PodInfo};
pub use pod::{PodHandle, spawn_pod};
