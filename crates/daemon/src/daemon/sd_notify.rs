//! systemd's notify protocol (`Type=notify`, sd_notify(3)): datagrams of `KEY=VALUE`
//! lines sent to `$NOTIFY_SOCKET`, a path or, with a leading `@`, an abstract socket.
//!
//! Our own ~50 lines over `std::os::unix::net::UnixDatagram` rather than a crate: std
//! already speaks abstract addresses (`SocketAddrExt::from_abstract_name`), the
//! protocol is one `send_to` per message, and the daemon needs no `unsafe` for it.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// A connection to the service manager's notify socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    to: SocketAddr,
}

/// Why `$NOTIFY_SOCKET` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET={value:?} is not a socket path or @abstract name: {source}")]
    Address {
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open a datagram socket for NOTIFY_SOCKET: {0}")]
    Socket(#[source] std::io::Error),
}

impl Notifier {
    /// The notifier of `$NOTIFY_SOCKET`; `Ok(None)` when the daemon was not started by
    /// a service manager that asks for notifications.
    pub fn from_env() -> Result<Option<Self>, NotifyError> {
        match std::env::var("NOTIFY_SOCKET") {
            Ok(value) if !value.is_empty() => Self::new(&value).map(Some),
            _ => Ok(None),
        }
    }

    /// A notifier sending to `address` (a path, or `@name` for an abstract socket).
    pub fn new(address: &str) -> Result<Self, NotifyError> {
        let to = match address.strip_prefix('@') {
            Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
            None => SocketAddr::from_pathname(address),
        }
        .map_err(|source| NotifyError::Address {
            value: address.to_string(),
            source,
        })?;
        let socket = UnixDatagram::unbound().map_err(NotifyError::Socket)?;
        Ok(Self { socket, to })
    }

    /// Sends `message` (`KEY=VALUE` lines). A failure is logged, never fatal: the
    /// service manager may be gone while the daemon stops.
    pub fn send(&self, message: &str) {
        if let Err(e) = self.socket.send_to_addr(message.as_bytes(), &self.to) {
            tracing::warn!(error = %e, message, "cannot notify the service manager");
        }
    }

    /// `RELOADING=1` with `MONOTONIC_USEC`, as systemd 253+ wants it for
    /// `Type=notify-reload` (and accepts for `notify`).
    pub fn reloading(&self) {
        let usec = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| {
                u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000
                    + u64::try_from(t.tv_nsec()).unwrap_or(0) / 1000
            })
            .unwrap_or(0);
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }
}

/// How often systemd wants `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when the watchdog
/// is on and meant for this process (`$WATCHDOG_PID` unset or ours).
pub fn watchdog_interval() -> Option<Duration> {
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.trim() != std::process::id().to_string()
    {
        return None;
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_reach_a_path_socket_and_an_abstract_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        Notifier::new(path.to_str().unwrap())
            .unwrap()
            .send("READY=1");
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        let name = format!("podhost-test-notify-{}", std::process::id());
        let abstract_listener =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let notifier = Notifier::new(&format!("@{name}")).unwrap();
        notifier.reloading();
        let n = abstract_listener.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(text.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{text}");
        let usec: u64 = text.rsplit('=').next().unwrap().parse().unwrap();
        assert!(usec > 0, "{text}");
    }

    #[test]
    fn a_relative_or_empty_abstract_name_is_still_an_address() {
        assert!(Notifier::new("@x").is_ok());
        assert!(Notifier::new("relative.sock").is_ok());
    }
}
