//! Signal names as images and specs write them, and this process's own SIGPIPE
//! disposition. Signals to a container's processes go through
//! [`super::process_handle::ProcessHandle`], never to a stored pid.

use nix::sys::signal::Signal;

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

/// Restores SIGPIPE's default action (terminate) in this process, undoing the Rust
/// runtime's SIG_IGN: a CLI command then dies quietly on a closed pipe, as other CLIs
/// do. Call it before any thread starts.
pub fn restore_default_sigpipe() {
    // SAFETY: SIG_DFL installs no handler code, so no async-signal-safety rule can be
    // broken; the disposition is process-wide state that nothing else relies on here.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
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
