//! The few sysctls the bridge network needs, set in the daemon's network namespace:
//! forwarding (IPv4, and IPv6 with an IPv6 CIDR) and route_localnet on the bridge only
//! (so that a hostPort on 127.0.0.1 can be DNATed out of the bridge). Nothing else
//! global is changed.

use std::path::Path;

use super::BridgeError;

/// Sets `key` (a path under /proc/sys, e.g. `net/ipv4/ip_forward`) to `value`; returns
/// whether it had another value before. /proc/sys/net is the namespace of the thread
/// that opens it: call this on the daemon's (or the test's "host") thread.
pub(super) fn ensure(key: &str, value: &str) -> Result<bool, BridgeError> {
    let path = Path::new("/proc/sys").join(key);
    let sysctl = |source| BridgeError::Sysctl {
        key: key.replace('/', "."),
        value: value.into(),
        source,
    };
    let before = std::fs::read_to_string(&path).map_err(sysctl)?;
    if before.trim() == value {
        return Ok(false);
    }
    std::fs::write(&path, value).map_err(sysctl)?;
    Ok(true)
}

/// Whether this network namespace has IPv6 at all (the kernel may be booted with
/// ipv6.disable=1).
pub(super) fn ipv6_available() -> bool {
    Path::new("/proc/sys/net/ipv6/conf/all/forwarding").exists()
}
