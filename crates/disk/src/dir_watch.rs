//! An inotify watch on one directory, as the manifest directory and the config dir are
//! watched: every way a file appears, changes or goes, and the directory itself going.

use std::path::Path;

use inotify::{EventStream, Inotify, WatchMask};

/// The events of a watched directory.
pub type DirEvents = EventStream<[u8; 4096]>;

/// Watches `dir` (not recursively).
pub fn watch_dir(dir: &Path) -> std::io::Result<DirEvents> {
    let mask = WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM
        | WatchMask::DELETE
        | WatchMask::CREATE
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR;
    let inotify = Inotify::init()?;
    inotify.watches().add(dir, mask)?;
    inotify.into_event_stream([0u8; 4096])
}
