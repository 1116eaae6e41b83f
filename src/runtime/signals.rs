//! Signals to container processes, sent from the daemon with plain kill(2), and this
//! process's own SIGPIPE disposition.

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::sys::{Kernel, LinuxKernel};

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
    send_with(&LinuxKernel, pid, signal)
}

/// [`send`] through `kernel`.
pub fn send_with(kernel: &dyn Kernel, pid: i32, signal: Signal) -> Result<(), nix::Error> {
    match kernel.kill(Pid::from_raw(pid), Some(signal)) {
        Err(nix::Error::ESRCH) => Ok(()),
        other => other,
    }
}

/// Whether a process with this pid exists.
pub fn process_alive(pid: i32) -> bool {
    LinuxKernel.kill(Pid::from_raw(pid), None).is_ok()
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

    #[test]
    fn a_process_already_gone_is_not_an_error_but_a_refusal_is() {
        use crate::runtime::sys::recording::{Call, RecordingKernel};
        let k = RecordingKernel::new();
        k.fail_nth(1, nix::Error::ESRCH, |_| true);
        send_with(&k, 41, Signal::SIGTERM).unwrap();
        k.fail_nth(1, nix::Error::EPERM, |_| true);
        assert_eq!(send_with(&k, 42, Signal::SIGKILL), Err(nix::Error::EPERM));
        assert_eq!(
            k.calls(),
            vec![
                Call::Kill {
                    pid: 41,
                    signal: Some(Signal::SIGTERM)
                },
                Call::Kill {
                    pid: 42,
                    signal: Some(Signal::SIGKILL)
                },
            ]
        );
    }
}
