//! TODO crate doc

pub mod daemon;
pub mod eviction;
pub mod gc;
pub mod oom;
pub mod worker;
