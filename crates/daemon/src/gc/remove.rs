//! Deletes one dead container: its log file, then its attempt dir (after detaching
//! any mount under it), renamed out of the way first so that a crash never leaves a
//! half-deleted attempt under its number.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::mounts::detach_all_under;
use super::{DeadContainer, GcError};
use podhost_disk::proc_start::{changed_at, writer_may_live};

/// Prefix of an attempt dir being deleted (never a number, so never an attempt).
pub(crate) const TRASH_PREFIX: &str = ".gc-";

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Removes the container's log file (with its rotated files) and attempt dir. Absent
/// ones are fine.
pub fn remove(dead: &DeadContainer) -> Result<(), GcError> {
    if !dead.log_file.as_os_str().is_empty() {
        podhost_logs::remove_log_files(&dead.log_file)
            .map_err(|e| GcError::io("remove the log files of", &dead.log_file, e))?;
    }
    remove_tree(&dead.attempt_dir)?;
    tracing::info!(pod_uid = %dead.pod_uid, container = %dead.container, attempt = dead.attempt,
        "container GC: removed dead container");
    Ok(())
}

/// Detaches mounts under `dir`, renames it to `.gc-…` beside itself and deletes that.
pub(crate) fn remove_tree(dir: &Path) -> Result<(), GcError> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    detach_all_under(dir)?;
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("x");
    let trash = dir.with_file_name(format!(
        "{TRASH_PREFIX}{name}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    match std::fs::rename(dir, &trash) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(GcError::io("rename out of the way", dir, e)),
    }
    delete_tree(&trash)
}

/// Deletes `path` and what is below it through the rooted layer: an attempt dir holds
/// the container's overlay upper dir, written by the container, so links in it are
/// removed, never followed, and nothing mounted is entered.
fn delete_tree(path: &Path) -> Result<(), GcError> {
    let io_err = |e: podhost_rooted::RootedError| GcError::io("delete", path, e.into());
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(());
    };
    podhost_rooted::RootedDir::open(parent)
        .and_then(|dir| dir.remove_tree(name))
        .map_err(io_err)
}

/// The pid in a trash name `.gc-<name>-<pid>-<seq>`.
fn trash_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(TRASH_PREFIX)?;
    let mut parts = rest.rsplitn(3, '-');
    let _seq = parts.next()?;
    parts.next()?.parse().ok()
}

/// Deletes `.gc-*` leftovers under `dir` (one level) whose remover has died.
pub(crate) fn sweep_trash(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some(pid) = trash_owner(&name) else {
            continue;
        };
        let path = e.path();
        // The remover is gone when no process has its pid, or the one that has it
        // started after the trash last changed (a later owner of the number).
        let changed = std::fs::symlink_metadata(&path)
            .ok()
            .and_then(|m| changed_at(&m));
        let gone = pid > 0 && changed.is_some() && !writer_may_live(pid, changed);
        if gone {
            let removed = detach_all_under(&path).and_then(|()| delete_tree(&path));
            match removed {
                Ok(()) => tracing::info!(path = %path.display(), "container GC: removed leftover"),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "container GC: cannot remove leftover")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trash_names_carry_the_pid() {
        assert_eq!(trash_owner(".gc-3-1234-7"), Some(1234));
        assert_eq!(trash_owner(".gc-a-b-c-99-0"), Some(99));
        assert_eq!(trash_owner("3"), None);
    }

    #[test]
    fn removes_tree_and_sweeps_dead_removers_trash_only() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("7");
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::write(a.join("sub/f"), b"x").unwrap();
        remove_tree(&a).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        remove_tree(&a).unwrap();
        let dead = dir.path().join(".gc-1-99999999-0");
        let mine = dir.path().join(format!(".gc-2-{}-0", std::process::id()));
        std::fs::create_dir(&dead).unwrap();
        std::fs::create_dir(&mine).unwrap();
        sweep_trash(dir.path());
        assert!(!dead.exists() && mine.exists());
    }
}
