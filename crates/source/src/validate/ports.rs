//! `ports`: numbers in range, known protocols, unique IANA names; and the number-or-
//! name port references of probes and hooks.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Errs;
use super::container::Ctx;
use super::names::iana_svc_name;
use crate::error::ValueError;

pub(super) fn validate(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    let mut names: HashMap<&str, String> = HashMap::new();
    for (i, p) in c.ports.iter().flatten().enumerate() {
        let at = ctx.field(&format!("ports[{i}]"));
        if !(1..=65535).contains(&p.container_port) {
            errs.invalid(
                format!("{at}.containerPort"),
                p.container_port,
                ValueError::PortRange { min: 1 },
            );
        }
        if let Some(h) = p.host_port {
            if !(0..=65535).contains(&h) {
                errs.invalid(
                    format!("{at}.hostPort"),
                    h,
                    ValueError::PortRange { min: 0 },
                );
            } else if ctx.host_network && h != 0 && h != p.container_port {
                errs.invalid(format!("{at}.hostPort"), h, ValueError::HostPortMismatch);
            }
        }
        if let Some(proto) = p.protocol.as_deref() {
            errs.one_of(format!("{at}.protocol"), proto, &["TCP", "UDP", "SCTP"]);
        }
        if let Some(ip) = p.host_ip.as_deref()
            && !ip.is_empty()
            && ip.parse::<std::net::IpAddr>().is_err()
        {
            errs.invalid(
                format!("{at}.hostIP"),
                ip,
                ValueError::Forbidden {
                    why: "unless it is an IP address (e.g. 127.0.0.1)",
                },
            );
        }
        if let Some(name) = p.name.as_deref()
            && !name.is_empty()
        {
            let field = format!("{at}.name");
            errs.check(&field, name, iana_svc_name(name));
            if let Some(first) = names.get(name) {
                errs.bare(
                    field,
                    ValueError::Duplicate {
                        what: "port",
                        name: name.to_string(),
                        first: first.clone(),
                    },
                );
            } else {
                names.insert(name, at);
            }
        }
    }
}

/// A probe's or hook's `port`: 1–65535, or the name of a container port
/// (IANA_SVC_NAME; the kubelet resolves it when it runs the probe).
pub(super) fn port_ref(field: &str, port: &IntOrString, errs: &mut Errs) {
    match port {
        IntOrString::Int(n) if !(1..=65535).contains(n) => {
            errs.invalid(field, n, ValueError::PortRange { min: 1 });
        }
        IntOrString::Int(_) => {}
        IntOrString::String(name) => errs.check(field, name, iana_svc_name(name)),
    }
}
