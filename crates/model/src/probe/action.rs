//! What a probe or lifecycle handler does, resolved from the spec: named ports looked up
//! in the container's ports, the API's defaults filled in (path `/`, scheme HTTP).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerPort, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::convert::non_negative_u64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// Run the command in the container; exit 0 is success.
    Exec {
        command: Vec<String>,
    },
    Http(HttpAction),
    /// Connect; a connection is success.
    Tcp {
        host: Option<String>,
        port: u16,
    },
    /// `grpc.health.v1.Health/Check` on the port; SERVING is success. `tls`: `mode: TLS`
    /// (no certificate verification), plaintext otherwise.
    Grpc {
        port: u16,
        service: Option<String>,
        tls: bool,
    },
    /// A lifecycle hook's `sleep`.
    Sleep(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpScheme {
    Http,
    Https,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAction {
    pub scheme: HttpScheme,
    /// `None`: the pod's address (for podhost: loopback in the pod's network).
    pub host: Option<String>,
    pub port: u16,
    /// Path and query, always starting with `/`.
    pub path: String,
    /// The probe's httpHeaders, in order (a `Host` or `User-Agent` among them wins).
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    #[error("{field} has no handler: set one of exec, httpGet, tcpSocket, grpc")]
    NoHandler { field: String },
    #[error("{field} has more than one handler ({names}): keep exactly one")]
    ManyHandlers { field: String, names: String },
    #[error(
        "{field}: the container has no port named {name:?}; name one of its ports or give a number"
    )]
    UnknownPort { field: String, name: String },
    #[error("{field}: port {value} is outside 1-65535")]
    BadPort { field: String, value: i64 },
    #[error("{field}: scheme {value:?} is neither HTTP nor HTTPS")]
    BadScheme { field: String, value: String },
    #[error("{field}: exec has no command; give the command to run")]
    EmptyCommand { field: String },
    #[error(
        "{field}: tcpSocket is not supported for lifecycle hooks (as the kubelet); use exec or httpGet"
    )]
    TcpHook { field: String },
}

/// The number `port` names: itself, or the containerPort of the container's port with
/// that name.
pub fn resolve_port(
    port: &IntOrString,
    ports: &[ContainerPort],
    field: &str,
) -> Result<u16, ActionError> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => match name.parse::<i64>() {
            Ok(n) => n,
            Err(_) => ports
                .iter()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| ActionError::UnknownPort {
                    field: field.to_string(),
                    name: name.clone(),
                })?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or(ActionError::BadPort {
            field: field.to_string(),
            value: number,
        })
}

fn one_handler(field: &str, present: &[(&str, bool)]) -> Result<(), ActionError> {
    let names: Vec<&str> = present
        .iter()
        .filter(|(_, p)| *p)
        .map(|(n, _)| *n)
        .collect();
    match names.len() {
        1 => Ok(()),
        0 => Err(ActionError::NoHandler {
            field: field.to_string(),
        }),
        _ => Err(ActionError::ManyHandlers {
            field: field.to_string(),
            names: names.join(", "),
        }),
    }
}

fn exec_action(command: Option<&Vec<String>>, field: &str) -> Result<ProbeAction, ActionError> {
    match command {
        Some(c) if !c.is_empty() => Ok(ProbeAction::Exec { command: c.clone() }),
        _ => Err(ActionError::EmptyCommand {
            field: format!("{field}.exec.command"),
        }),
    }
}

fn http_action(
    h: &k8s_openapi::api::core::v1::HTTPGetAction,
    ports: &[ContainerPort],
    field: &str,
) -> Result<ProbeAction, ActionError> {
    let scheme = match h.scheme.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("") | Some("HTTP") => HttpScheme::Http,
        Some("HTTPS") => HttpScheme::Https,
        Some(_) => {
            return Err(ActionError::BadScheme {
                field: format!("{field}.httpGet.scheme"),
                value: h.scheme.clone().unwrap_or_default(),
            });
        }
    };
    let path = match h.path.as_deref() {
        None | Some("") => "/".to_string(),
        Some(p) if p.starts_with('/') => p.to_string(),
        Some(p) => format!("/{p}"),
    };
    Ok(ProbeAction::Http(HttpAction {
        scheme,
        host: h.host.clone().filter(|h| !h.is_empty()),
        port: resolve_port(&h.port, ports, &format!("{field}.httpGet.port"))?,
        path,
        headers: h
            .http_headers
            .iter()
            .flatten()
            .map(|hh| (hh.name.clone(), hh.value.clone()))
            .collect(),
    }))
}

impl ProbeAction {
    /// The action of the probe at `field` (e.g. `spec.containers[0].livenessProbe`) of a
    /// container with `ports`.
    pub fn of_probe(
        probe: &Probe,
        ports: &[ContainerPort],
        field: &str,
    ) -> Result<Self, ActionError> {
        one_handler(
            field,
            &[
                ("exec", probe.exec.is_some()),
                ("httpGet", probe.http_get.is_some()),
                ("tcpSocket", probe.tcp_socket.is_some()),
                ("grpc", probe.grpc.is_some()),
            ],
        )?;
        if let Some(e) = &probe.exec {
            return exec_action(e.command.as_ref(), field);
        }
        if let Some(h) = &probe.http_get {
            return http_action(h, ports, field);
        }
        if let Some(t) = &probe.tcp_socket {
            return Ok(ProbeAction::Tcp {
                host: t.host.clone().filter(|h| !h.is_empty()),
                port: resolve_port(&t.port, ports, &format!("{field}.tcpSocket.port"))?,
            });
        }
        let g = probe.grpc.as_ref().ok_or_else(|| ActionError::NoHandler {
            field: field.to_string(),
        })?;
        Ok(ProbeAction::Grpc {
            port: resolve_port(
                &IntOrString::Int(g.port),
                ports,
                &format!("{field}.grpc.port"),
            )?,
            service: g.service.clone().filter(|s| !s.is_empty()),
            tls: g
                .mode
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("TLS")),
        })
    }

    /// The action of a postStart/preStop handler at `field`.
    pub fn of_lifecycle(
        handler: &LifecycleHandler,
        ports: &[ContainerPort],
        field: &str,
    ) -> Result<Self, ActionError> {
        one_handler(
            field,
            &[
                ("exec", handler.exec.is_some()),
                ("httpGet", handler.http_get.is_some()),
                ("sleep", handler.sleep.is_some()),
                ("tcpSocket", handler.tcp_socket.is_some()),
            ],
        )?;
        if let Some(e) = &handler.exec {
            return exec_action(e.command.as_ref(), field);
        }
        if let Some(h) = &handler.http_get {
            return http_action(h, ports, field);
        }
        if let Some(s) = &handler.sleep {
            return Ok(ProbeAction::Sleep(Duration::from_secs(non_negative_u64(
                s.seconds,
            ))));
        }
        Err(ActionError::TcpHook {
            field: field.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, SleepAction, TCPSocketAction,
    };

    fn ports() -> Vec<ContainerPort> {
        vec![ContainerPort {
            name: Some("http".into()),
            container_port: 8080,
            ..ContainerPort::default()
        }]
    }

    #[test]
    fn named_and_numbered_ports_resolve() {
        let p = ports();
        assert_eq!(resolve_port(&IntOrString::Int(80), &p, "f"), Ok(80));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &p, "f"),
            Ok(8080)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("81".into()), &p, "f"),
            Ok(81)
        );
        assert!(matches!(
            resolve_port(&IntOrString::String("metrics".into()), &p, "f"),
            Err(ActionError::UnknownPort { .. })
        ));
        for bad in [0, -1, 65536] {
            assert!(matches!(
                resolve_port(&IntOrString::Int(bad), &p, "f"),
                Err(ActionError::BadPort { .. })
            ));
        }
    }

    #[test]
    fn http_get_takes_the_defaults_and_keeps_headers() {
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::String("http".into()),
                path: Some("healthz?full=1".into()),
                scheme: Some("HTTPS".into()),
                http_headers: Some(vec![HTTPHeader {
                    name: "X-A".into(),
                    value: "b".into(),
                }]),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        let a = ProbeAction::of_probe(&probe, &ports(), "p").unwrap();
        assert_eq!(
            a,
            ProbeAction::Http(HttpAction {
                scheme: HttpScheme::Https,
                host: None,
                port: 8080,
                path: "/healthz?full=1".into(),
                headers: vec![("X-A".into(), "b".into())],
            })
        );
        let bare = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(80),
                host: Some(String::new()),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        let ProbeAction::Http(h) = ProbeAction::of_probe(&bare, &[], "p").unwrap() else {
            panic!("not http")
        };
        assert_eq!(
            (h.scheme, h.host, h.path.as_str()),
            (HttpScheme::Http, None, "/")
        );
    }

    #[test]
    fn exactly_one_handler() {
        let none = Probe::default();
        assert!(matches!(
            ProbeAction::of_probe(&none, &[], "p"),
            Err(ActionError::NoHandler { .. })
        ));
        let two = Probe {
            exec: Some(ExecAction {
                command: Some(vec!["true".into()]),
            }),
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(1),
                host: None,
            }),
            ..Probe::default()
        };
        let e = ProbeAction::of_probe(&two, &[], "spec.containers[0].livenessProbe").unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.containers[0].livenessProbe has more than one handler (exec, tcpSocket): keep exactly one"
        );
    }

    #[test]
    fn grpc_exec_and_tcp() {
        let g = Probe {
            grpc: Some(GRPCAction {
                port: 9000,
                service: Some(String::new()),
                ..GRPCAction::default()
            }),
            ..Probe::default()
        };
        assert_eq!(
            ProbeAction::of_probe(&g, &[], "p"),
            Ok(ProbeAction::Grpc {
                port: 9000,
                service: None,
                tls: false,
            })
        );
        let e = Probe {
            exec: Some(ExecAction {
                command: Some(vec![]),
            }),
            ..Probe::default()
        };
        assert!(matches!(
            ProbeAction::of_probe(&e, &[], "p"),
            Err(ActionError::EmptyCommand { .. })
        ));
        let t = Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("http".into()),
                host: Some("10.0.0.1".into()),
            }),
            ..Probe::default()
        };
        assert_eq!(
            ProbeAction::of_probe(&t, &ports(), "p"),
            Ok(ProbeAction::Tcp {
                host: Some("10.0.0.1".into()),
                port: 8080
            })
        );
    }

    #[test]
    fn lifecycle_handlers() {
        let s = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 3 }),
            ..LifecycleHandler::default()
        };
        assert_eq!(
            ProbeAction::of_lifecycle(&s, &[], "h"),
            Ok(ProbeAction::Sleep(Duration::from_secs(3)))
        );
        let t = LifecycleHandler {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(1),
                host: None,
            }),
            ..LifecycleHandler::default()
        };
        assert!(matches!(
            ProbeAction::of_lifecycle(&t, &[], "h"),
            Err(ActionError::TcpHook { .. })
        ));
    }
}
