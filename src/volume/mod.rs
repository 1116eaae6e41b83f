//! Pod volumes.

pub mod content;
