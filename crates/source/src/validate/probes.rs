//! Probes (`livenessProbe`, `readinessProbe`, `startupProbe`) and lifecycle handlers
//! (`postStart`, `preStop`): exactly one handler each, valid ports and headers, the
//! API server's bounds on timings and thresholds.

use k8s_openapi::api::core::v1::{
    Container, ExecAction, HTTPGetAction, LifecycleHandler, Probe, TCPSocketAction,
};

use super::Errs;
use super::container::{Ctx, one_source};
use super::names::http_header_name;
use super::ports::port_ref;
use crate::error::ValueError;

const PROBE_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "grpc"];
const HOOK_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "sleep"];

pub(super) fn validate(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    for (name, probe, liveness_like) in [
        ("livenessProbe", &c.liveness_probe, true),
        ("readinessProbe", &c.readiness_probe, false),
        ("startupProbe", &c.startup_probe, true),
    ] {
        if let Some(p) = probe {
            validate_probe(&ctx.field(name), p, liveness_like, errs);
        }
    }
    if let Some(lc) = &c.lifecycle {
        for (name, hook) in [("postStart", &lc.post_start), ("preStop", &lc.pre_stop)] {
            if let Some(h) = hook {
                validate_hook(&ctx.field(&format!("lifecycle.{name}")), h, errs);
            }
        }
    }
}

fn validate_probe(at: &str, p: &Probe, liveness_like: bool, errs: &mut Errs) {
    let set = [
        ("exec", p.exec.is_some()),
        ("httpGet", p.http_get.is_some()),
        ("tcpSocket", p.tcp_socket.is_some()),
        ("grpc", p.grpc.is_some()),
    ];
    one_source(at, &set, PROBE_HANDLERS, errs);
    if let Some(e) = &p.exec {
        exec(&format!("{at}.exec"), e, errs);
    }
    if let Some(h) = &p.http_get {
        http_get(&format!("{at}.httpGet"), h, errs);
    }
    if let Some(t) = &p.tcp_socket {
        tcp_socket(&format!("{at}.tcpSocket"), t, errs);
    }
    if let Some(g) = &p.grpc
        && !(1..=65535).contains(&g.port)
    {
        errs.invalid(
            format!("{at}.grpc.port"),
            g.port,
            ValueError::PortRange { min: 1 },
        );
    }
    for (field, value) in [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        errs.non_negative(format!("{at}.{field}"), value.map(i64::from));
    }
    if liveness_like
        && let Some(s) = p.success_threshold
        && s != 1
        && s >= 0
    {
        errs.invalid(
            format!("{at}.successThreshold"),
            s,
            ValueError::SuccessThresholdNotOne,
        );
    }
    if let Some(g) = p.termination_grace_period_seconds {
        if !liveness_like {
            errs.bare(
                format!("{at}.terminationGracePeriodSeconds"),
                ValueError::Forbidden {
                    why: "on a readinessProbe (a failed readiness probe kills nothing); remove it",
                },
            );
        } else if g <= 0 {
            errs.invalid(
                format!("{at}.terminationGracePeriodSeconds"),
                g,
                ValueError::NotPositive,
            );
        }
    }
}

fn validate_hook(at: &str, h: &LifecycleHandler, errs: &mut Errs) {
    let set = [
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
        ("sleep", h.sleep.is_some()),
    ];
    one_source(at, &set, HOOK_HANDLERS, errs);
    if let Some(e) = &h.exec {
        exec(&format!("{at}.exec"), e, errs);
    }
    if let Some(g) = &h.http_get {
        http_get(&format!("{at}.httpGet"), g, errs);
    }
    if let Some(t) = &h.tcp_socket {
        tcp_socket(&format!("{at}.tcpSocket"), t, errs);
    }
    if let Some(s) = &h.sleep {
        errs.non_negative(format!("{at}.sleep.seconds"), Some(s.seconds));
    }
}

fn exec(at: &str, e: &ExecAction, errs: &mut Errs) {
    if e.command.as_deref().unwrap_or_default().is_empty() {
        errs.bare(
            format!("{at}.command"),
            ValueError::Required {
                hint: "give the command to run, e.g. [cat, /tmp/healthy]",
            },
        );
    }
}

fn http_get(at: &str, h: &HTTPGetAction, errs: &mut Errs) {
    port_ref(&format!("{at}.port"), &h.port, errs);
    if let Some(scheme) = h.scheme.as_deref() {
        errs.one_of(format!("{at}.scheme"), scheme, &["HTTP", "HTTPS"]);
    }
    for (i, header) in h.http_headers.iter().flatten().enumerate() {
        errs.check(
            format!("{at}.httpHeaders[{i}].name"),
            &header.name,
            http_header_name(&header.name),
        );
    }
}

fn tcp_socket(at: &str, t: &TCPSocketAction, errs: &mut Errs) {
    port_ref(&format!("{at}.port"), &t.port, errs);
}
