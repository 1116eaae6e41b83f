//! `podhost port-forward`'s arguments as kubectl reads them, as pure functions: the pod
//! (`NAME` or `pod/NAME`), the port pairs (`8080:80`, `80`, `:80`, a named container
//! port), the listen addresses (`--address localhost,10.0.0.1`), which listener
//! failures end the command, and when the pod counts as gone.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use k8s_openapi::api::core::v1::Pod;

/// What is wrong with an argument; each names it and what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortSpecError {
    #[error("Error parsing local port '{port}': give a number 0-65535 (0 or empty: any free port)")]
    BadLocalPort { port: String },
    #[error("Error parsing remote port '{port}': give a number 1-65535 or a named container port")]
    BadRemotePort { port: String },
    #[error("Pod '{pod}' does not have a named port '{name}'")]
    NoNamedPort { pod: String, name: String },
    #[error("{0:?} is not a valid IP address (give localhost or IP addresses, comma separated)")]
    BadAddress(String),
}

/// One forwarded port: local 0 means "any free port" (chosen when listening).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortPair {
    pub local: u16,
    pub remote: u16,
}

/// How a failed listen on an address counts (kubectl's rule): `localhost` stands for
/// 127.0.0.1 and ::1 and only fails when neither works; an address given explicitly
/// must work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Fails the port only if every address of this mode failed.
    All,
    /// Fails the port if this address failed.
    Any,
}

/// One address to listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddress {
    pub ip: IpAddr,
    pub mode: FailureMode,
}

/// `[LOCAL_PORT:]REMOTE_PORT` → a pair; a remote port that is not a number is looked up
/// among the pod's containers' named ports (kubectl's conversion), and `NAME` alone
/// listens on the named port's number.
pub fn parse_pair(arg: &str, pod: &Pod) -> Result<PortPair, PortSpecError> {
    let (local, remote) = match arg.split_once(':') {
        Some((l, r)) => (Some(l), r),
        None => (None, arg),
    };
    let remote_port = match remote.parse::<u16>() {
        Ok(0) => {
            return Err(PortSpecError::BadRemotePort {
                port: remote.into(),
            });
        }
        Ok(p) => p,
        Err(_) if is_port_name(remote) => named_port(pod, remote)?,
        Err(_) => {
            return Err(PortSpecError::BadRemotePort {
                port: remote.into(),
            });
        }
    };
    let local_port = match local {
        None => remote_port,
        Some("") => 0,
        Some(l) => l
            .parse::<u16>()
            .map_err(|_| PortSpecError::BadLocalPort { port: l.into() })?,
    };
    Ok(PortPair {
        local: local_port,
        remote: remote_port,
    })
}

/// An IANA_SVC_NAME as the API server allows in `ports[].name`: lowercase letters,
/// digits and inner dashes, at least one letter, at most 15 characters.
fn is_port_name(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The number of the TCP container port named `name` (containers, then init
/// containers: sidecars publish ports too).
fn named_port(pod: &Pod, name: &str) -> Result<u16, PortSpecError> {
    let spec = pod.spec.as_ref();
    let init = spec
        .into_iter()
        .flat_map(|s| s.init_containers.iter().flatten());
    spec.into_iter()
        .flat_map(|s| s.containers.iter())
        .chain(init)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .find(|p| p.name.as_deref() == Some(name))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .ok_or_else(|| PortSpecError::NoNamedPort {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            name: name.into(),
        })
}

/// `--address` values (each may be a comma list): `localhost` → 127.0.0.1 and ::1,
/// otherwise IP addresses; duplicates dropped, order kept.
pub fn parse_addresses(values: &[String]) -> Result<Vec<ListenAddress>, PortSpecError> {
    let mut out: Vec<ListenAddress> = Vec::new();
    for item in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        let found: Vec<ListenAddress> = if item == "localhost" {
            [
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]
            .into_iter()
            .map(|ip| ListenAddress {
                ip,
                mode: FailureMode::All,
            })
            .collect()
        } else {
            let bare = item.trim_start_matches('[').trim_end_matches(']');
            let ip = bare
                .parse::<IpAddr>()
                .map_err(|_| PortSpecError::BadAddress(item.into()))?;
            vec![ListenAddress {
                ip,
                mode: FailureMode::Any,
            }]
        };
        for a in found {
            if !out.iter().any(|o| o.ip == a.ip) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// Whether a port's listeners are good enough, given which addresses worked (kubectl's
/// rule): every explicit address, and at least one `localhost` address if any.
pub fn listeners_suffice(results: &[(FailureMode, bool)]) -> bool {
    let count = |mode, ok| {
        results
            .iter()
            .filter(|(m, o)| *m == mode && *o == ok)
            .count()
    };
    let all_failed = count(FailureMode::All, false) > 0 && count(FailureMode::All, true) == 0;
    !all_failed && count(FailureMode::Any, false) == 0
}

/// `127.0.0.1:8080` or `[::1]:8080`, as kubectl prints listeners.
pub fn show(addr: SocketAddr) -> String {
    addr.to_string()
}

/// Why forwarding to the pod whose UID was `uid` must end, seen in the pod the daemon
/// now reports under its name: replaced by a new pod, or ended. `None`: it still runs.
pub fn pod_lost(now: &Pod, uid: Option<&str>) -> Option<String> {
    let name = now.metadata.name.as_deref().unwrap_or_default();
    let now_uid = now.metadata.uid.as_deref();
    if let (Some(wanted), Some(found)) = (uid, now_uid)
        && wanted != found
    {
        return Some(format!(
            "lost connection to pod {name}: it was replaced by a new pod of that name (UID {found})"
        ));
    }
    let phase = now.status.as_ref().and_then(|s| s.phase.as_deref());
    match phase {
        Some(p @ ("Succeeded" | "Failed")) => Some(format!(
            "lost connection to pod {name}: it has ended (phase {p})"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    fn pod_with_ports(ports: &[(&str, i32, &str)]) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    ports: Some(
                        ports
                            .iter()
                            .map(|(n, p, proto)| ContainerPort {
                                name: Some((*n).into()),
                                container_port: *p,
                                protocol: Some((*proto).into()),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pair(local: u16, remote: u16) -> PortPair {
        PortPair { local, remote }
    }

    #[test]
    fn pairs_read_as_kubectl_reads_them() {
        let pod = pod_with_ports(&[]);
        assert_eq!(parse_pair("8080:80", &pod), Ok(pair(8080, 80)));
        assert_eq!(parse_pair("80", &pod), Ok(pair(80, 80)));
        assert_eq!(parse_pair(":80", &pod), Ok(pair(0, 80)));
        assert_eq!(parse_pair("0:80", &pod), Ok(pair(0, 80)));
        for bad in [
            "80:0", "0", "80:", "abc:80", "70000:80", "80:70000", "80:-1", "8:8:8",
        ] {
            assert!(parse_pair(bad, &pod).is_err(), "{bad}");
        }
        assert_eq!(
            parse_pair("abc:80", &pod).unwrap_err().to_string(),
            "Error parsing local port 'abc': give a number 0-65535 (0 or empty: any free port)"
        );
    }

    #[test]
    fn named_ports_are_the_pods_tcp_container_ports() {
        let pod = pod_with_ports(&[("http", 80, "TCP"), ("dns", 53, "UDP")]);
        assert_eq!(parse_pair("http", &pod), Ok(pair(80, 80)));
        assert_eq!(parse_pair("8080:http", &pod), Ok(pair(8080, 80)));
        assert_eq!(parse_pair(":http", &pod), Ok(pair(0, 80)));
        assert_eq!(
            parse_pair("dns", &pod),
            Err(PortSpecError::NoNamedPort {
                pod: "web".into(),
                name: "dns".into()
            }),
            "UDP ports are not forwarded"
        );
        assert_eq!(
            parse_pair("metrics", &pod).unwrap_err().to_string(),
            "Pod 'web' does not have a named port 'metrics'"
        );
    }

    #[test]
    fn localhost_is_both_loopbacks_and_lists_split_on_commas() {
        let v4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let got = parse_addresses(&["localhost".into()]).unwrap();
        assert_eq!(
            got,
            vec![
                ListenAddress {
                    ip: v4,
                    mode: FailureMode::All
                },
                ListenAddress {
                    ip: v6,
                    mode: FailureMode::All
                },
            ]
        );
        let got = parse_addresses(&["localhost,10.1.2.3".into(), "127.0.0.1".into()]).unwrap();
        assert_eq!(got.len(), 3, "127.0.0.1 once: {got:?}");
        assert_eq!(got[2].ip, "10.1.2.3".parse::<IpAddr>().unwrap());
        assert_eq!(got[2].mode, FailureMode::Any);
        assert_eq!(
            parse_addresses(&["[::1]".into()]).unwrap()[0].ip,
            v6,
            "bracketed IPv6"
        );
        assert_eq!(
            parse_addresses(&["example.org".into()]),
            Err(PortSpecError::BadAddress("example.org".into()))
        );
    }

    #[test]
    fn localhost_needs_one_listener_explicit_addresses_need_all() {
        use FailureMode::{All, Any};
        assert!(
            listeners_suffice(&[(All, true), (All, false)]),
            "no IPv6 is fine"
        );
        assert!(!listeners_suffice(&[(All, false), (All, false)]));
        assert!(!listeners_suffice(&[(All, true), (Any, false)]));
        assert!(listeners_suffice(&[(Any, true), (Any, true)]));
    }

    #[test]
    fn a_pod_is_lost_when_replaced_or_ended() {
        let mut pod = pod_with_ports(&[]);
        pod.metadata.uid = Some("u1".into());
        let phase = |p: &str| {
            Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some(p.into()),
                ..Default::default()
            })
        };
        pod.status = phase("Running");
        assert_eq!(pod_lost(&pod, Some("u1")), None);
        assert_eq!(pod_lost(&pod, None), None);
        let why = pod_lost(&pod, Some("u0")).unwrap();
        assert!(
            why.contains("replaced by a new pod") && why.contains("u1"),
            "{why}"
        );
        pod.status = phase("Failed");
        assert_eq!(
            pod_lost(&pod, Some("u1")).as_deref(),
            Some("lost connection to pod web: it has ended (phase Failed)")
        );
    }

    #[test]
    fn listeners_print_as_kubectl_prints_them() {
        assert_eq!(show("127.0.0.1:8080".parse().unwrap()), "127.0.0.1:8080");
        assert_eq!(show("[::1]:8080".parse().unwrap()), "[::1]:8080");
    }
}
