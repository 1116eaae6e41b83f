//! Typed events from the kernel that the workers consume: for now, OOM victims named by
//! the /dev/kmsg watcher, matched to containers by their cgroup.

mod oom_victims;

pub use oom_victims::{OomVictim, OomVictims};
