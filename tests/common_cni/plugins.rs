//! Debian's CNI plugins as the tests use them: where they are, a config list over them,
//! and what host-local holds. Shared by the CNI tests and the daemon-level ones.

#![allow(dead_code)]

use std::net::IpAddr;
use std::path::Path;

/// Debian's containernetworking-plugins.
pub const DEBIAN_CNI_BIN: &str = "/usr/lib/cni";

/// A config list over Debian's plugins: loopback, bridge `bridge` with dual-stack
/// host-local IPAM keeping its files in `ipam_dir`, portmap, firewall.
pub fn conflist(bridge: &str, ipam_dir: &Path, v4: &str, v6: &str) -> serde_json::Value {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "podhost-test",
        "plugins": [
            {"type": "loopback"},
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": ipam_dir,
                    "ranges": [[{"subnet": v4}], [{"subnet": v6}]],
                    "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "firewall"}
        ]
    })
}

/// The addresses host-local holds under `ipam_dir` (one file per address).
pub fn ipam_entries(ipam_dir: &Path) -> Vec<String> {
    let Ok(nets) = std::fs::read_dir(ipam_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for net in nets {
        for f in std::fs::read_dir(net.unwrap().path()).unwrap() {
            let name = f.unwrap().file_name().into_string().unwrap();
            if name.parse::<IpAddr>().is_ok() {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}
