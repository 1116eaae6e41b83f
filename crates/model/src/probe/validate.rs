//! The API server's rules for probes and lifecycle handlers (`validateProbe`,
//! `validateHandler` in pkg/apis/core/validation), each error naming its field.

use k8s_openapi::api::core::v1::{ContainerPort, LifecycleHandler, Probe};

use super::{ActionError, ProbeAction, ProbeKind};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeSpecError {
    #[error(transparent)]
    Action(#[from] ActionError),
    #[error("{field}: {value} must be greater than or equal to 0")]
    Negative { field: String, value: i64 },
    #[error("{field}: {value} must be 1 for a {kind}")]
    SuccessNotOne {
        field: String,
        value: i32,
        kind: &'static str,
    },
    #[error("{field}: {value} must be greater than 0")]
    GraceNotPositive { field: String, value: i64 },
    #[error(
        "{field}: must not be set for readinessProbes (only a liveness or startup failure kills)"
    )]
    GraceOnReadiness { field: String },
    #[error("{field}: {name:?} is not a valid HTTP header name")]
    BadHeaderName { field: String, name: String },
}

/// Every rule `probe` (the container's `kind` probe at `field`) breaks; empty when valid.
pub fn validate_probe(
    kind: ProbeKind,
    probe: &Probe,
    ports: &[ContainerPort],
    field: &str,
) -> Vec<ProbeSpecError> {
    let mut errors = Vec::new();
    let numbers = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (name, value) in numbers {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(ProbeSpecError::Negative {
                field: format!("{field}.{name}"),
                value: i64::from(v),
            });
        }
    }
    if kind.failure_restarts()
        && let Some(v) = probe.success_threshold.filter(|v| *v != 1 && *v > 0)
    {
        errors.push(ProbeSpecError::SuccessNotOne {
            field: format!("{field}.successThreshold"),
            value: v,
            kind: kind.field(),
        });
    }
    if let Some(g) = probe.termination_grace_period_seconds {
        let f = format!("{field}.terminationGracePeriodSeconds");
        if kind == ProbeKind::Readiness {
            errors.push(ProbeSpecError::GraceOnReadiness { field: f });
        } else if g <= 0 {
            errors.push(ProbeSpecError::GraceNotPositive { field: f, value: g });
        }
    }
    if let Some(h) = &probe.http_get {
        errors.extend(header_errors(h, &format!("{field}.httpGet.httpHeaders")));
    }
    if let Err(e) = ProbeAction::of_probe(probe, ports, field) {
        errors.push(e.into());
    }
    errors
}

/// Every rule the postStart/preStop `handler` at `field` breaks.
pub fn validate_lifecycle_handler(
    handler: &LifecycleHandler,
    ports: &[ContainerPort],
    field: &str,
) -> Vec<ProbeSpecError> {
    let mut errors = Vec::new();
    if let Some(s) = handler.sleep.as_ref().filter(|s| s.seconds < 0) {
        errors.push(ProbeSpecError::Negative {
            field: format!("{field}.sleep.seconds"),
            value: s.seconds,
        });
    }
    if let Some(h) = &handler.http_get {
        errors.extend(header_errors(h, &format!("{field}.httpGet.httpHeaders")));
    }
    if let Err(e) = ProbeAction::of_lifecycle(handler, ports, field) {
        errors.push(e.into());
    }
    errors
}

/// An HTTP token (RFC 7230): what a header name may be.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn header_errors(
    h: &k8s_openapi::api::core::v1::HTTPGetAction,
    field: &str,
) -> Vec<ProbeSpecError> {
    h.http_headers
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, hh)| !is_token(&hh.name))
        .map(|(i, hh)| ProbeSpecError::BadHeaderName {
            field: format!("{field}[{i}].name"),
            name: hh.name.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, HTTPHeader, SleepAction};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn exec_probe() -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: Some(vec!["true".into()]),
            }),
            ..Probe::default()
        }
    }

    #[test]
    fn a_plain_probe_is_valid_for_every_kind() {
        for kind in [
            ProbeKind::Startup,
            ProbeKind::Liveness,
            ProbeKind::Readiness,
        ] {
            assert_eq!(validate_probe(kind, &exec_probe(), &[], "p"), vec![]);
        }
    }

    #[test]
    fn success_threshold_must_be_one_for_liveness_and_startup() {
        let p = Probe {
            success_threshold: Some(2),
            ..exec_probe()
        };
        for kind in [ProbeKind::Startup, ProbeKind::Liveness] {
            let errs = validate_probe(kind, &p, &[], "c.p");
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert!(
                errs[0]
                    .to_string()
                    .starts_with("c.p.successThreshold: 2 must be 1")
            );
        }
        assert_eq!(validate_probe(ProbeKind::Readiness, &p, &[], "c.p"), vec![]);
    }

    #[test]
    fn negative_numbers_and_grace_rules() {
        let p = Probe {
            period_seconds: Some(-1),
            failure_threshold: Some(-3),
            termination_grace_period_seconds: Some(0),
            ..exec_probe()
        };
        let errs: Vec<String> = validate_probe(ProbeKind::Liveness, &p, &[], "p")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "p.periodSeconds: -1 must be greater than or equal to 0",
                "p.failureThreshold: -3 must be greater than or equal to 0",
                "p.terminationGracePeriodSeconds: 0 must be greater than 0",
            ]
        );
        let r = Probe {
            termination_grace_period_seconds: Some(5),
            ..exec_probe()
        };
        assert!(matches!(
            validate_probe(ProbeKind::Readiness, &r, &[], "p").as_slice(),
            [ProbeSpecError::GraceOnReadiness { .. }]
        ));
    }

    #[test]
    fn handler_count_ports_and_header_names() {
        assert!(matches!(
            validate_probe(ProbeKind::Readiness, &Probe::default(), &[], "p").as_slice(),
            [ProbeSpecError::Action(ActionError::NoHandler { .. })]
        ));
        let h = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::String("web".into()),
                http_headers: Some(vec![HTTPHeader {
                    name: "Bad Name".into(),
                    value: "x".into(),
                }]),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        let errs: Vec<String> = validate_probe(ProbeKind::Readiness, &h, &[], "p")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("p.httpGet.httpHeaders[0].name"));
        assert!(errs[1].contains("no port named \"web\""));
    }

    #[test]
    fn lifecycle_handler_rules() {
        let neg = LifecycleHandler {
            sleep: Some(SleepAction { seconds: -1 }),
            ..LifecycleHandler::default()
        };
        assert!(matches!(
            validate_lifecycle_handler(&neg, &[], "h").as_slice(),
            [ProbeSpecError::Negative { .. }]
        ));
        assert!(matches!(
            validate_lifecycle_handler(&LifecycleHandler::default(), &[], "h").as_slice(),
            [ProbeSpecError::Action(ActionError::NoHandler { .. })]
        ));
    }
}
