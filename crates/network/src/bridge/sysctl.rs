//! The few sysctls the bridge network needs, set in the daemon's network namespace:
//! forwarding (IPv4, and IPv6 with an IPv6 CIDR) and route_localnet on the bridge only
//! (so that a hostPort on 127.0.0.1 can be DNATed out of the bridge). Nothing else
//! global is changed: the bridge-netfilter switches kube-proxy needs are only read
//! ([`bridged_traffic_problem`]).

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

/// The bridge-netfilter switches: bridged IPv4 (and IPv6) traffic goes through the
/// iptables/nftables hooks only with `br_netfilter` loaded and
/// `net.bridge.bridge-nf-call-iptables` (`-ip6tables`) at 1, as kubeadm's preflight
/// requires of a node. Without it, a pod reaching a Service whose endpoint is on the
/// same bridge bypasses kube-proxy's rules on the way back. They are host-wide switches
/// (they apply to every bridge, another tool's too), so podhost reports them and does
/// not set them.
pub fn bridged_traffic_problem() -> Option<String> {
    let read = |name: &str| {
        std::fs::read_to_string(Path::new("/proc/sys/net/bridge").join(name))
            .ok()
            .map(|v| v.trim().to_string())
    };
    problem_of(
        read("bridge-nf-call-iptables"),
        ipv6_available().then(|| read("bridge-nf-call-ip6tables")),
    )
}

/// The problem `bridge-nf-call-iptables` (and, where IPv6 exists, `-ip6tables`) make:
/// `None` for a missing file (no br_netfilter), the value otherwise.
fn problem_of(ipv4: Option<String>, ipv6: Option<Option<String>>) -> Option<String> {
    let Some(v4) = ipv4 else {
        return Some(
            "the br_netfilter module is not loaded, so kube-proxy's Service rules do not see \
             traffic between pods on this node's bridge: modprobe br_netfilter and set \
             net.bridge.bridge-nf-call-iptables=1 (and -ip6tables), as kubeadm requires"
                .to_string(),
        );
    };
    let off: Vec<&str> = [
        (v4.as_str() != "1").then_some("net.bridge.bridge-nf-call-iptables"),
        match &ipv6 {
            Some(Some(v6)) if v6.as_str() != "1" => Some("net.bridge.bridge-nf-call-ip6tables"),
            _ => None,
        },
    ]
    .into_iter()
    .flatten()
    .collect();
    (!off.is_empty()).then(|| {
        format!(
            "{} not 1, so kube-proxy's Service rules do not see that family's traffic \
             between pods on this node's bridge: set it to 1, as kubeadm requires",
            off.join(" and ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridged_traffic_is_a_problem_unless_every_family_goes_through_the_hooks() {
        let on = || Some("1".to_string());
        let off = || Some("0".to_string());
        assert_eq!(problem_of(on(), Some(on())), None);
        assert_eq!(problem_of(on(), None), None, "no IPv6 on the host");
        let missing = problem_of(None, Some(None)).unwrap();
        assert!(missing.contains("modprobe br_netfilter"), "{missing}");
        let v4 = problem_of(off(), Some(on())).unwrap();
        assert!(
            v4.starts_with("net.bridge.bridge-nf-call-iptables not 1"),
            "{v4}"
        );
        let both = problem_of(off(), Some(off())).unwrap();
        assert!(
            both.starts_with(
                "net.bridge.bridge-nf-call-iptables and net.bridge.bridge-nf-call-ip6tables not 1"
            ),
            "{both}"
        );
    }
}
