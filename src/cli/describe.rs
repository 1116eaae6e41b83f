//! `podhost describe pod`: status, containers, conditions and events, kubectl-style.

use std::fmt::Write;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::age::age_of;
use super::table::{align, pod_status_text};
use crate::status::Event;

fn time_text(t: Option<&Time>) -> String {
    t.map(|t| t.0.to_string())
        .unwrap_or_else(|| "<unknown>".into())
}

fn state_lines(out: &mut String, title: &str, s: &ContainerState) {
    if let Some(r) = &s.running {
        let _ = writeln!(out, "    {title:<14}Running");
        let _ = writeln!(
            out,
            "      Started:      {}",
            time_text(r.started_at.as_ref())
        );
    } else if let Some(w) = &s.waiting {
        let _ = writeln!(out, "    {title:<14}Waiting");
        let _ = writeln!(
            out,
            "      Reason:       {}",
            w.reason.clone().unwrap_or_default()
        );
        if let Some(m) = &w.message {
            let _ = writeln!(out, "      Message:      {m}");
        }
    } else if let Some(t) = &s.terminated {
        let _ = writeln!(out, "    {title:<14}Terminated");
        let _ = writeln!(
            out,
            "      Reason:       {}",
            t.reason.clone().unwrap_or_default()
        );
        if let Some(m) = &t.message {
            let _ = writeln!(out, "      Message:      {m}");
        }
        let _ = writeln!(out, "      Exit Code:    {}", t.exit_code);
        if let Some(sig) = t.signal {
            let _ = writeln!(out, "      Signal:       {sig}");
        }
        let _ = writeln!(
            out,
            "      Started:      {}",
            time_text(t.started_at.as_ref())
        );
        let _ = writeln!(
            out,
            "      Finished:     {}",
            time_text(t.finished_at.as_ref())
        );
    }
}

/// Renders the description of `pod` with its `events`.
pub fn render_describe(pod: &Pod, events: &[Event], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "Name:         {}",
        meta.name.clone().unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "Namespace:    {}",
        meta.namespace.clone().unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "UID:          {}",
        meta.uid.clone().unwrap_or_default()
    );
    // kubectl's "node/hostIP".
    let node = spec.node_name.clone().unwrap_or_default();
    match status.host_ip.as_deref() {
        Some(ip) => {
            let _ = writeln!(out, "Node:         {node}/{ip}");
        }
        None => {
            let _ = writeln!(out, "Node:         {node}");
        }
    }
    let _ = writeln!(
        out,
        "Start Time:   {}",
        time_text(status.start_time.as_ref())
    );
    let _ = writeln!(out, "Status:       {}", pod_status_text(pod));
    if let Some(src) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubernetes.io/config.source"))
    {
        let _ = writeln!(out, "Source:       {src}");
    }
    let _ = writeln!(
        out,
        "Restart Policy: {}",
        spec.restart_policy.clone().unwrap_or_default()
    );
    let _ = writeln!(out, "Host Network: {}", spec.host_network.unwrap_or(false));
    let _ = writeln!(
        out,
        "IP:           {}",
        status.pod_ip.clone().unwrap_or_default()
    );
    let ips = status.pod_ips.clone().unwrap_or_default();
    if ips.is_empty() {
        let _ = writeln!(out, "IPs:          <none>");
    } else {
        let _ = writeln!(out, "IPs:");
        for ip in ips {
            let _ = writeln!(out, "  IP:           {}", ip.ip);
        }
    }
    let _ = writeln!(out, "Containers:");
    for c in &spec.containers {
        let cs = status
            .container_statuses
            .iter()
            .flatten()
            .find(|s| s.name == c.name);
        let _ = writeln!(out, "  {}:", c.name);
        if let Some(id) = cs.and_then(|s| s.container_id.clone()) {
            let _ = writeln!(out, "    Container ID: {id}");
        }
        let _ = writeln!(
            out,
            "    Image:        {}",
            c.image.clone().unwrap_or_default()
        );
        if let Some(id) = cs.map(|s| s.image_id.clone()).filter(|s| !s.is_empty()) {
            let _ = writeln!(out, "    Image ID:     {id}");
        }
        // kubectl's Port / Host Port lines.
        let ports = c.ports.clone().unwrap_or_default();
        let join = |f: &dyn Fn(&k8s_openapi::api::core::v1::ContainerPort) -> Option<i32>| {
            let listed: Vec<String> = ports
                .iter()
                .filter_map(|p| {
                    f(p).map(|n| format!("{n}/{}", p.protocol.as_deref().unwrap_or("TCP")))
                })
                .collect();
            if listed.is_empty() {
                "<none>".to_string()
            } else {
                listed.join(", ")
            }
        };
        let _ = writeln!(
            out,
            "    Port:         {}",
            join(&|p| Some(p.container_port))
        );
        let _ = writeln!(out, "    Host Port:    {}", join(&|p| p.host_port));
        if let Some(cmd) = &c.command {
            let _ = writeln!(out, "    Command:      {}", cmd.join(" "));
        }
        if let Some(args) = &c.args {
            let _ = writeln!(out, "    Args:         {}", args.join(" "));
        }
        if let Some(s) = cs.and_then(|s| s.state.clone()) {
            state_lines(&mut out, "State:", &s);
        }
        if let Some(s) = cs.and_then(|s| s.last_state.clone()) {
            state_lines(&mut out, "Last State:", &s);
        }
        let _ = writeln!(
            out,
            "    Ready:        {}",
            cs.map(|s| s.ready).unwrap_or(false)
        );
        let _ = writeln!(
            out,
            "    Restart Count: {}",
            cs.map(|s| s.restart_count).unwrap_or(0)
        );
    }
    let _ = writeln!(out, "Conditions:");
    let mut rows = vec![vec!["  Type".to_string(), "Status".to_string()]];
    for c in status.conditions.iter().flatten() {
        rows.push(vec![format!("  {}", c.type_), c.status.clone()]);
    }
    out.push_str(&align(&rows));
    let _ = writeln!(out, "Events:");
    if events.is_empty() {
        let _ = writeln!(out, "  <none>");
    } else {
        let mut rows = vec![
            ["  Type", "Reason", "Age", "From", "Message"]
                .map(String::from)
                .to_vec(),
        ];
        for e in events {
            rows.push(vec![
                format!("  {:?}", e.kind),
                e.reason.clone(),
                age_of(Some(&crate::status::k8s_time(e.time)), now),
                "podhost".to_string(),
                e.message.clone(),
            ]);
        }
        out.push_str(&align(&rows));
    }
    out
}
