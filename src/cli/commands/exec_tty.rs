//! `podhost exec -i -t`: the command on a terminal of its own, as `kubectl exec -it`
//! gives one. `podhost exec-helper --console-socket` (a fresh process, for libcontainer
//! forks) has libcontainer open a pty in the container and send its master here; this
//! process puts the user's terminal in raw mode — so Ctrl-C reaches the container's
//! terminal, whose line discipline sends the foreground process SIGINT — copies the
//! keys in and the output out, passes every SIGWINCH on as the terminal's new size, and
//! ends with the command's exit status once its output is drained.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::termios::{SetArg, Termios, cfmakeraw, tcgetattr, tcsetattr};

use crate::api::types::ExecTarget;
use crate::runtime::console_socket::ConsoleSocket;
use crate::runtime::terminal_fd::{set_window_size, window_size};

/// Runs `command` in the target's container on a new terminal; `stdin` copies this
/// process's input to it (`-i`).
pub fn exec_on_terminal(target: &ExecTarget, command: Vec<String>, stdin: bool) -> Result<i32> {
    let console = ConsoleSocket::bind().context("binding the console socket")?;
    let exe = std::env::current_exe().context("locating the podhost binary")?;
    let mut helper = Command::new(exe)
        .arg("exec-helper")
        .arg("--libcontainer-root")
        .arg(&target.libcontainer_root)
        .arg("--id")
        .arg(&target.container_id)
        .arg("--console-socket")
        .arg(console.path())
        .arg("--")
        .args(&command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting podhost exec-helper")?;
    let Some(master) = receive_terminal(&console, &mut helper)? else {
        // The helper ended before the terminal came (its error is on stderr).
        return Ok(helper.wait()?.code().unwrap_or(1));
    };
    // Blocked here, before any thread starts, so that only the resizer waits for it.
    let mut winch = SigSet::empty();
    winch.add(Signal::SIGWINCH);
    winch.thread_block().context("blocking SIGWINCH")?;
    let raw = RawMode::enable(stdin)?;
    copy_window_size(&master);
    let resizer = master.try_clone()?;
    std::thread::spawn(move || {
        while winch.wait() == Ok(Signal::SIGWINCH) {
            copy_window_size(&resizer);
        }
    });
    if stdin {
        let mut keys = std::fs::File::from(master.try_clone()?);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut keys);
        });
    }
    let mut output = std::fs::File::from(master);
    let (drained, output_done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        copy_until_hangup(&mut output);
        let _ = drained.send(());
    });
    let status = helper.wait().context("waiting for podhost exec-helper")?;
    // The terminal's last output, until its slave side is closed (EIO) — or a moment,
    // when something the command left in the background holds the terminal open.
    let _ = output_done.recv_timeout(OUTPUT_DRAIN);
    drop(raw);
    Ok(status.code().unwrap_or(1))
}

/// The terminal's master, or `None` when the helper exits without sending one.
fn receive_terminal(console: &ConsoleSocket, helper: &mut Child) -> Result<Option<OwnedFd>> {
    loop {
        // Looked at before the accept: a helper that sent the terminal and ended (a
        // quick command) has its connection waiting all the same.
        let ended = helper.try_wait()?.is_some();
        if let Some(master) = console
            .try_receive()
            .context("receiving the container's terminal")?
        {
            return Ok(Some(master));
        }
        if ended {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How long the output may go on once the command has exited.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// Copies the terminal's output to stdout until the command's side closes.
fn copy_until_hangup(master: &mut std::fs::File) {
    let mut stdout = std::io::stdout();
    let mut buf = [0u8; 8192];
    loop {
        match master.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // EIO: the last slave closed.
            Err(_) => return,
        }
    }
}

/// Gives the container's terminal the size of this process's (stdout's, else stdin's).
fn copy_window_size(master: &OwnedFd) {
    let size =
        window_size(std::io::stdout().as_fd()).or_else(|_| window_size(std::io::stdin().as_fd()));
    if let Ok((rows, cols)) = size
        && let Err(error) = set_window_size(master.as_fd(), rows, cols)
    {
        tracing::debug!(%error, "exec: cannot resize the terminal");
    }
}

/// The user's terminal in raw mode (keys pass unchanged, Ctrl-C included) until drop.
struct RawMode(Option<Termios>);

impl RawMode {
    fn enable(stdin: bool) -> Result<RawMode> {
        if !stdin || !std::io::stdin().is_terminal() {
            return Ok(RawMode(None));
        }
        let saved = tcgetattr(std::io::stdin()).context("reading the terminal's mode")?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(std::io::stdin(), SetArg::TCSANOW, &raw).context("setting raw mode")?;
        Ok(RawMode(Some(saved)))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, saved);
        }
    }
}
