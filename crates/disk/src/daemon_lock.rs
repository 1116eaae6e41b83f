//! `<root>/daemon.lock`: the daemon holds an exclusive flock on it for its life (one
//! daemon per root dir) and writes into it the API socket it serves. The socket is a
//! flag of its own, not derived from the root dir, so this record is how a CLI given
//! `--root-dir` can name the socket of the daemon on that root.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The lock file's name in the root dir.
pub const DAEMON_LOCK: &str = "daemon.lock";

/// `<root>/daemon.lock`.
pub fn path(root: &Path) -> PathBuf {
    root.join(DAEMON_LOCK)
}

/// Replaces the lock file's content with the socket path (nothing for a `--runonce`
/// run, which serves no API). The caller holds the lock.
pub fn record_socket(file: &std::fs::File, socket: Option<&Path>) -> std::io::Result<()> {
    file.set_len(0)?;
    if let Some(socket) = socket {
        let mut line = socket.as_os_str().as_encoded_bytes().to_vec();
        line.push(b'\n');
        // At offset 0 whatever the file position: the file was just emptied.
        file.write_all_at(&line, 0)?;
    }
    Ok(())
}

/// The socket the last daemon on `root` recorded, or `None` (no daemon ever ran there,
/// an older one recorded nothing, or it ran `--runonce`). The daemon may have stopped
/// since: ask the socket before trusting it.
pub fn recorded_socket(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(path(root)).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| PathBuf::from(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_socket_is_read_back_and_replaced() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(recorded_socket(root.path()), None, "no file");
        let file = std::fs::File::create(path(root.path())).unwrap();
        record_socket(
            &file,
            Some(Path::new("/run/podhost/a-much-longer-name.sock")),
        )
        .unwrap();
        assert_eq!(
            recorded_socket(root.path()),
            Some(PathBuf::from("/run/podhost/a-much-longer-name.sock"))
        );
        // A shorter path replaces it whole (no tail of the old one).
        record_socket(&file, Some(Path::new("/run/b.sock"))).unwrap();
        assert_eq!(
            recorded_socket(root.path()),
            Some(PathBuf::from("/run/b.sock"))
        );
        record_socket(&file, None).unwrap();
        assert_eq!(recorded_socket(root.path()), None, "--runonce: no socket");
    }
}
