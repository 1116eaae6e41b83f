//! runc's console socket, for `exec -t` (the kubelet API's and the CLI's): a unix
//! socket in a private directory (0700, so that nobody else can connect and hand over
//! a terminal of their own) on which `podhost exec-helper --console-socket` sends the
//! pty master libcontainer opened in the container. The directory goes on drop.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::terminal_fd::receive_fd;

/// The listening socket (non-blocking) in its private directory.
#[derive(Debug)]
pub struct ConsoleSocket {
    dir: PathBuf,
    listener: UnixListener,
}

impl ConsoleSocket {
    pub fn bind() -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("podhost-tty-{}-{n}", std::process::id()));
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)?;
        let listener = UnixListener::bind(dir.join("s")).and_then(|l| {
            l.set_nonblocking(true)?;
            Ok(l)
        });
        match listener {
            Ok(listener) => Ok(Self { dir, listener }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// The socket's path, for `--console-socket`.
    pub fn path(&self) -> PathBuf {
        self.dir.join("s")
    }

    /// The listener, for an async caller to wrap (it is non-blocking).
    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }

    /// The terminal's master, if a connection is waiting; `None` while none is.
    pub fn try_receive(&self) -> std::io::Result<Option<OwnedFd>> {
        match self.listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                receive_fd(stream.as_raw_fd()).map(Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
