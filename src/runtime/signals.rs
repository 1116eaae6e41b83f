//! Signals to container processes, sent from the daemon with plain kill(2).

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Restores SIGPIPE's default action (the Rust runtime ignores it), so that a user
/// command whose output pipe closes (`podhost get pods | head`) dies quietly.
pub fn restore_default_sigpipe() {
    // SAFETY: restoring the default disposition installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Parses a stop signal as images and specs write it: "SIGTERM", "TERM", "15".
pub fn parse_signal(text: &str) -> Option<Signal> {
    let t = text.trim();
    if let Ok(n) = t.parse::<i32>() {
        return Signal::try_from(n).ok();
    }
    let upper = t.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse().ok()
}

/// Sends `signal` to `pid`; a process that is already gone is not an error.
pub fn send(pid: i32, signal: Signal) -> Result<(), nix::Error> {
    match kill(Pid::from_raw(pid), signal) {
        Err(nix::Error::ESRCH) => Ok(()),
        other => other,
    }
}

/// Whether a process with this pid exists.
pub fn process_alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(parse_signal("SIGTERM"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("quit"), Some(Signal::SIGQUIT));
        assert_eq!(parse_signal("9"), Some(Signal::SIGKILL));
        assert_eq!(parse_signal("SIGNOPE"), None);
    }
}
