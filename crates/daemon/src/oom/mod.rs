//! Kernel OOM kills, read from `/dev/kmsg`.
//!
//! The kernel reports every OOM kill in its log. This module turns that log into typed
//! [`OomEvent`]s, one per killed process:
//!
//! - [`record`] splits one `/dev/kmsg` record (`prio,seq,usec,flags;message`) and
//!   unescapes its `\xNN` escapes;
//! - [`parse`] is a streaming state machine over records that understands both report
//!   formats (the `oom-kill:` summary of kernels ≥ 5.0 and the legacy `Task in … killed
//!   as a result of limit of …`), `memory.oom.group` kills and system-wide OOMs;
//! - [`cursor`] remembers the last handled sequence number per boot, so a restarted
//!   daemon does not report old kills again;
//! - [`watch`] is the tokio task that reads `/dev/kmsg` (or, for tests, a file or FIFO
//!   with one record per line) and sends events on a channel;
//! - [`attribute`] maps an event's memcg paths to podhost's pod and container cgroups;
//! - [`victims`] keeps the recently named victims, so that a container's exit can say
//!   which of its processes the kernel killed.
//!
//! Only records of the kernel facility (0) are considered: user space can write to
//! `/dev/kmsg`, but the kernel never lets it claim facility 0, so a process cannot
//! forge an OOM report.

pub mod attribute;
pub mod cursor;
pub mod event;
mod fields;
mod lines;
pub mod parse;
pub mod record;
pub mod victims;
pub mod watch;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod watch_tests;

use std::path::PathBuf;

pub use attribute::{attribute, match_pod_cgroup};
pub use cursor::{BOOT_ID_PATH, KmsgCursor, read_boot_id};
pub use event::OomEvent;
pub use parse::{OomParser, parse_records};
pub use record::{KmsgRecord, parse_record};
pub use victims::{OomVictim, OomVictims};
pub use watch::{WatchConfig, spawn_kmsg_watcher, spawn_kmsg_watcher_with};

/// Everything that can go wrong while reading kernel OOM reports.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    /// A `/dev/kmsg` record does not have the `prio,seq,usec,flags;message` shape.
    #[error("malformed /dev/kmsg record: {reason}")]
    MalformedRecord { reason: &'static str },
    /// The cursor file exists but could not be read.
    #[error("cannot read the kmsg cursor {path}: {source}")]
    ReadCursor {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The cursor file is not the JSON podhost writes; remove it to start fresh.
    #[error("kmsg cursor {path} is not valid JSON ({source}); remove it to start fresh")]
    DecodeCursor {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The cursor file could not be written (temp file, fsync or rename failed).
    #[error("cannot write the kmsg cursor {path}: {source}")]
    WriteCursor {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The boot id could not be read, so a saved cursor cannot be trusted.
    #[error("cannot read the boot id from {path}: {source}")]
    BootId {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
