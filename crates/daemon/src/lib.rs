//! The node agent: what `podhost daemon` runs.
//!
//! - [`daemon`]: the wiring, the only code that knows every part: flags and config
//!   file, start-up checks, the pod sources, the manager that owns one worker per pod,
//!   the API and read-only servers, cluster mode's loops, supervision of its tasks.
//! - [`worker`]: one task per pod: observe the containers, ask the pod-sync core
//!   (`podhost_model::podsync`) what to do, do it through the runtime, volumes, network
//!   and probes, publish the status.
//! - [`gc`]: dead containers, pod directories, logs; drives the image store's GC.
//! - [`eviction`]: node pressure: signals, conditions, reclaim, evicting one pod.
//! - [`oom`]: the kernel's OOM reports from /dev/kmsg, matched to containers.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses every crate but the shim (a
//! process of its own). It may not: be used by any crate but the podhost binary (src/),
//! or repair a running pod by tearing it down.

pub mod daemon;
pub mod eviction;
pub mod gc;
pub mod oom;
pub mod worker;
