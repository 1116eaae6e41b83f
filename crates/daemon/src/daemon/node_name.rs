//! The node name, as the kubelet derives it (`nodeutil.GetHostname`): `--node-name`,
//! or the host name when the flag is absent or empty; surrounding whitespace trimmed;
//! lowercased. It must then be a valid Node object name, a DNS-1123 subdomain (the API
//! server's `ValidateNodeName`), since it becomes part of every static pod's name
//! (`<name>-<node>`), directory and log path.

use podhost_source::dns1123_subdomain;

/// Where the raw name came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeNameOrigin {
    Flag,
    HostName,
}

impl std::fmt::Display for NodeNameOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Flag => "--node-name",
            Self::HostName => "the host name (no --node-name given)",
        })
    }
}

/// The node name is unusable.
#[derive(Debug, thiserror::Error)]
pub enum NodeNameError {
    #[error("cannot read the host name: {0}; give --node-name NAME")]
    HostName(#[source] nix::Error),
    #[error(
        "the node name from {origin} is empty after trimming whitespace; give --node-name NAME, a lowercase DNS-1123 subdomain such as node-1 or node-1.example.com"
    )]
    Empty { origin: NodeNameOrigin },
    #[error(
        "node name {name:?} from {origin} (trimmed and lowercased) is not valid: it {why}; {fix}"
    )]
    Invalid {
        name: String,
        origin: NodeNameOrigin,
        why: podhost_source::ValueError,
        fix: &'static str,
    },
}

/// `--node-name` if given and not empty, else the host name; then [`normalize_node_name`].
pub fn resolve_node_name(flag: Option<&str>) -> Result<String, NodeNameError> {
    match flag {
        Some(name) if !name.is_empty() => normalize_node_name(name, NodeNameOrigin::Flag),
        _ => {
            let host = nix::unistd::gethostname().map_err(NodeNameError::HostName)?;
            normalize_node_name(&host.to_string_lossy(), NodeNameOrigin::HostName)
        }
    }
}

/// Trims, lowercases and validates a raw node name.
pub fn normalize_node_name(raw: &str, origin: NodeNameOrigin) -> Result<String, NodeNameError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(NodeNameError::Empty { origin });
    }
    let name = trimmed.to_lowercase();
    if let Err(why) = dns1123_subdomain(&name) {
        return Err(NodeNameError::Invalid {
            why,
            fix: match origin {
                NodeNameOrigin::Flag => {
                    "give --node-name a name such as node-1 or node-1.example.com"
                }
                NodeNameOrigin::HostName => {
                    "give --node-name NAME (such as node-1), or set a valid host name"
                }
            },
            name,
            origin,
        });
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(raw: &str) -> Result<String, NodeNameError> {
        normalize_node_name(raw, NodeNameOrigin::Flag)
    }

    #[test]
    fn trimmed_and_lowercased_like_the_kubelet() {
        assert_eq!(flag("node-1").unwrap(), "node-1");
        assert_eq!(
            flag("  Node-A.Example.COM\n").unwrap(),
            "node-a.example.com"
        );
        assert_eq!(flag("10.0.0.1").unwrap(), "10.0.0.1");
        assert_eq!(flag(&"a".repeat(63)).unwrap(), "a".repeat(63));
    }

    #[test]
    fn blank_is_refused_with_what_to_do() {
        let e = flag(" \t ").unwrap_err();
        assert!(matches!(
            e,
            NodeNameError::Empty {
                origin: NodeNameOrigin::Flag
            }
        ));
        assert!(e.to_string().contains("give --node-name"), "{e}");
    }

    #[test]
    fn not_a_dns_subdomain_is_refused() {
        for bad in [
            "node_1",
            "-node",
            "node-",
            "node..a",
            ".node",
            "node.",
            "node/1",
            "nöde",
            "node 1",
            &"a".repeat(64),
            &format!("{}.{}", "a".repeat(63), "b".repeat(190)),
        ] {
            let e = flag(bad).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, NodeNameError::Invalid { .. }), "{bad:?}: {msg}");
            assert!(msg.contains("DNS-1123 subdomain"), "{msg}");
            assert!(msg.contains("--node-name"), "{msg}");
        }
    }

    #[test]
    fn the_longest_valid_subdomain_is_253() {
        let label = "a".repeat(63);
        let name = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(name.len(), 253);
        assert!(flag(&name).is_ok());
        assert!(flag(&format!("{name}c")).is_err());
    }

    #[test]
    fn a_bad_host_name_says_where_it_came_from() {
        let e = normalize_node_name("My_Host", NodeNameOrigin::HostName).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("\"my_host\" from the host name"), "{msg}");
        assert!(msg.contains("set a valid host name"), "{msg}");
    }
}
