//! Image GC and container GC, as root: image GC on a small real filesystem (tmpfs
//! and a loop-mounted ext4) filled with synthetic images past the high threshold;
//! leases, pins, re-tagged in-use images, max age and concurrent loads; container GC
//! on fake attempt dirs with exit records, logs and real mounts.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

macro_rules! require_root {
    () => {
        assert!(is_root(), "this test needs root (mounts): run it as root");
    };
}

#[path = "gc/container.rs"]
mod container;
#[path = "gc/fixtures.rs"]
mod fixtures;
#[path = "gc/image.rs"]
mod image;
