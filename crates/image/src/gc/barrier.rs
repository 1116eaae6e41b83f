//! The GC barrier `images/gc.lock`: image GC deletes blobs and snapshots only while it
//! holds an exclusive flock on it; whoever writes content that a reference will name
//! (a load, a pull) or resolves an image for a container holds a shared one meanwhile.
//!
//! Without it, GC could list a blob a concurrent load has just written (or skipped,
//! because it was already there) as unreferenced and delete it a moment before the
//! load records the reference. flock works across processes (the daemon and
//! `podhost load`) and between threads (each guard opens its own file description).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use crate::error::{ImageError, IoContext};

/// GC retries the exclusive lock while loads hold it: every 1 ms at first, backing
/// off to every 20 ms (flock has no writer preference, so short gaps must be caught).
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(20);

/// A held shared lock on the GC barrier: no image GC deletes content while it lives.
/// Get one with [`crate::ImageStore::content_guard`].
#[derive(Debug)]
pub struct ContentGuard {
    _lock: Flock<File>,
}

/// The exclusive side, held by GC while it computes what is referenced and deletes.
#[derive(Debug)]
pub(crate) struct GcLock {
    _lock: Flock<File>,
}

/// `<root>/images/gc.lock`.
pub(crate) fn barrier_path(root_dir: &Path) -> PathBuf {
    root_dir.join("images").join("gc.lock")
}

fn open(path: &Path) -> Result<File, ImageError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ctx("open lock file", path)
}

/// Blocks until no GC is deleting, then holds GC off until the guard is dropped.
pub(crate) fn shared(root_dir: &Path) -> Result<ContentGuard, ImageError> {
    let path = barrier_path(root_dir);
    let lock = Flock::lock(open(&path)?, FlockArg::LockShared)
        .map_err(|(_, errno)| ImageError::io("lock", &path, io::Error::from(errno)))?;
    Ok(ContentGuard { _lock: lock })
}

/// Takes the exclusive lock, waiting at most `wait` for loads and resolves in
/// progress to finish. `Ok(None)` when they still hold it at the deadline.
pub(crate) fn exclusive(root_dir: &Path, wait: Duration) -> Result<Option<GcLock>, ImageError> {
    let path = barrier_path(root_dir);
    let started = Instant::now();
    let mut file = open(&path)?;
    let mut logged = false;
    let mut poll = POLL_MIN;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Some(GcLock { _lock: lock })),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) => file = f,
            Err((_, errno)) => {
                return Err(ImageError::io("lock", &path, io::Error::from(errno)));
            }
        }
        let waited = started.elapsed();
        if waited >= wait {
            return Ok(None);
        }
        if !logged && waited >= Duration::from_secs(1) {
            tracing::info!(lock = %path.display(), "image GC: waiting for image loads in progress");
            logged = true;
        }
        std::thread::sleep(poll.min(wait - waited));
        poll = (poll * 2).min(POLL_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holders_keep_gc_out_until_released() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("images")).unwrap();
        let a = shared(dir.path()).unwrap();
        let b = shared(dir.path()).unwrap();
        assert!(
            exclusive(dir.path(), Duration::from_millis(50))
                .unwrap()
                .is_none()
        );
        drop(a);
        assert!(
            exclusive(dir.path(), Duration::from_millis(50))
                .unwrap()
                .is_none()
        );
        drop(b);
        let gc = exclusive(dir.path(), Duration::ZERO).unwrap();
        assert!(gc.is_some());
        // A reader waits for GC: released from another thread after 100 ms.
        let root = dir.path().to_path_buf();
        let started = Instant::now();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(gc);
        });
        let _c = shared(&root).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(90));
        t.join().unwrap();
    }
}
