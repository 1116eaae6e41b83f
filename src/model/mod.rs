//! Pure types and functions shared by every module: no I/O, no root, unit-tested.

pub mod backoff;
pub mod command;
pub mod grace;
pub mod phase;
pub mod restart;
