//! The terminal of `kubectl exec -t`: `podhost exec-helper --console-socket` has
//! libcontainer open a pty inside the container (its own devpts, so `tty` there names
//! a `/dev/pts/N` that exists), make the slave the command's stdio and controlling
//! terminal, and send the master here over a unix socket (runc's console socket).
//! The master is the command's input and output; resize messages set its size.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::net::unix::pipe;

use super::resize::TerminalSize;

/// The console socket (podhost-runtime's), accepted on through tokio's reactor.
pub struct ConsoleSocket {
    socket: podhost_runtime::console_socket::ConsoleSocket,
    listener: UnixListener,
}

impl ConsoleSocket {
    pub fn bind() -> std::io::Result<Self> {
        let socket = podhost_runtime::console_socket::ConsoleSocket::bind()?;
        let listener = UnixListener::from_std(socket.listener().try_clone()?)?;
        Ok(Self { socket, listener })
    }

    pub fn path(&self) -> PathBuf {
        self.socket.path()
    }

    /// The pty master libcontainer sends on the first connection.
    pub async fn receive(&self) -> std::io::Result<OwnedFd> {
        let (stream, _) = self.listener.accept().await?;
        let stream = stream.into_std()?;
        stream.set_nonblocking(false)?;
        tokio::task::spawn_blocking(move || {
            podhost_runtime::terminal_fd::receive_fd(stream.as_raw_fd())
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

/// The command's terminal, seen from its master.
pub struct Terminal {
    master: OwnedFd,
    input: Option<pipe::Sender>,
    output: Option<pipe::Receiver>,
}

impl Terminal {
    /// Wraps the master; reads and writes go through tokio's reactor.
    pub fn new(master: OwnedFd) -> std::io::Result<Self> {
        set_nonblocking(&master)?;
        let reader = master.try_clone()?;
        let writer = master.try_clone()?;
        Ok(Self {
            input: Some(pipe::Sender::from_owned_fd_unchecked(writer)?),
            output: Some(pipe::Receiver::from_owned_fd_unchecked(reader)?),
            master,
        })
    }

    /// What the command writes (once; it ends with EIO when the last slave closes).
    pub fn take_output(&mut self) -> Option<pipe::Receiver> {
        self.output.take()
    }

    /// Types `data` on the terminal.
    pub async fn write_input(&mut self, data: &[u8]) {
        if let Some(input) = self.input.as_mut()
            && input.write_all(data).await.is_err()
        {
            self.input = None;
        }
    }

    /// TIOCSWINSZ on the master: the command sees the new size (and SIGWINCH).
    pub fn resize(&self, size: TerminalSize) {
        let set = podhost_runtime::terminal_fd::set_window_size(
            self.master.as_fd(),
            size.height,
            size.width,
        );
        if let Err(error) = set {
            tracing::debug!(%error, "exec: cannot resize the terminal");
        }
    }
}

fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = fcntl(fd, FcntlArg::F_GETFL).map_err(std::io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(flags)).map_err(std::io::Error::from)?;
    Ok(())
}
