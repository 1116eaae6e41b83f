//! The pod's own sections, in kubectl's order (`describePod`): name and placement,
//! labels and annotations, status, IPs, the three container sections, readiness gates,
//! conditions, volumes, QoS class, node selectors, tolerations, events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Pod, Toleration};

use super::containers::describe_containers;
use super::rfc1123z;
use super::tabbed::Tabbed;
use super::volumes::describe_volumes;
use crate::cli::age::age_of;
use crate::status::Event;

/// Annotations longer than this (key and value) print on lines of their own, shortened.
const MAX_ANNOTATION_LEN: usize = 140;

/// Renders the description of `pod` with its `events`.
pub fn render_describe(pod: &Pod, events: &[Event], now: DateTime<Utc>) -> String {
    let mut w = Tabbed::default();
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    w.write(
        0,
        &format!("Name:\t{}\n", meta.name.as_deref().unwrap_or_default()),
    );
    w.write(
        0,
        &format!(
            "Namespace:\t{}\n",
            meta.namespace.as_deref().unwrap_or("default")
        ),
    );
    if let Some(p) = spec.priority {
        w.write(0, &format!("Priority:\t{p}\n"));
    }
    if let Some(class) = spec
        .priority_class_name
        .as_deref()
        .filter(|c| !c.is_empty())
    {
        w.write(0, &format!("Priority Class Name:\t{class}\n"));
    }
    if let Some(class) = spec.runtime_class_name.as_deref().filter(|c| !c.is_empty()) {
        w.write(0, &format!("Runtime Class Name:\t{class}\n"));
    }
    if let Some(sa) = spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        w.write(0, &format!("Service Account:\t{sa}\n"));
    }
    match spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        None => w.write(0, "Node:\t<none>\n"),
        Some(node) => w.write(
            0,
            &format!(
                "Node:\t{node}/{}\n",
                status.host_ip.as_deref().unwrap_or_default()
            ),
        ),
    }
    if let Some(t) = &status.start_time {
        w.write(0, &format!("Start Time:\t{}\n", rfc1123z(t)));
    }
    key_values(&mut w, "Labels", meta.labels.as_ref());
    annotations(&mut w, meta.annotations.as_ref());
    let phase = status.phase.as_deref().unwrap_or_default();
    match &meta.deletion_timestamp {
        Some(t) if phase != "Failed" && phase != "Succeeded" => {
            w.write(
                0,
                &format!("Status:\tTerminating (lasts {})\n", age_of(Some(t), now)),
            );
            let grace = meta.deletion_grace_period_seconds.unwrap_or(0);
            w.write(0, &format!("Termination Grace Period:\t{grace}s\n"));
        }
        _ => w.write(0, &format!("Status:\t{phase}\n")),
    }
    if let Some(reason) = status.reason.as_deref().filter(|r| !r.is_empty()) {
        w.write(0, &format!("Reason:\t{reason}\n"));
    }
    if let Some(message) = status.message.as_deref().filter(|m| !m.is_empty()) {
        w.write(0, &format!("Message:\t{message}\n"));
    }
    if let Some(profile) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        w.write(0, &format!("SeccompProfile:\t{}\n", profile.type_));
        if let Some(local) = &profile.localhost_profile {
            w.write(0, &format!("LocalhostProfile:\t{local}\n"));
        }
    }
    w.write(
        0,
        &format!("IP:\t{}\n", status.pod_ip.as_deref().unwrap_or_default()),
    );
    let ips = status.pod_ips.clone().unwrap_or_default();
    if ips.is_empty() {
        w.write(0, "IPs:\t<none>\n");
    } else {
        w.write(0, "IPs:\n");
        for ip in ips {
            w.write(1, &format!("IP:\t{}\n", ip.ip));
        }
    }
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    {
        w.write(
            0,
            &format!("Controlled By:\t{}/{}\n", owner.kind, owner.name),
        );
    }
    if let Some(nominated) = status
        .nominated_node_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        w.write(0, &format!("NominatedNodeName:\t{nominated}\n"));
    }
    let init = spec.init_containers.clone().unwrap_or_default();
    if !init.is_empty() {
        let statuses = status.init_container_statuses.clone().unwrap_or_default();
        describe_containers(&mut w, "Init Containers", &init, &statuses, pod);
    }
    let statuses = status.container_statuses.clone().unwrap_or_default();
    describe_containers(&mut w, "Containers", &spec.containers, &statuses, pod);
    let ephemeral: Vec<Container> = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| {
            serde_json::to_value(e)
                .and_then(serde_json::from_value)
                .unwrap_or_default()
        })
        .collect();
    if !ephemeral.is_empty() {
        let statuses = status
            .ephemeral_container_statuses
            .clone()
            .unwrap_or_default();
        describe_containers(&mut w, "Ephemeral Containers", &ephemeral, &statuses, pod);
    }
    let conditions = status.conditions.clone().unwrap_or_default();
    if let Some(gates) = spec.readiness_gates.as_ref().filter(|g| !g.is_empty()) {
        w.write(0, "Readiness Gates:\n  Type\tStatus\n");
        for g in gates {
            let state = conditions
                .iter()
                .find(|c| c.type_ == g.condition_type)
                .map_or("<none>", |c| c.status.as_str());
            w.write(1, &format!("{} \t{state} \n", g.condition_type));
        }
    }
    if !conditions.is_empty() {
        w.write(0, "Conditions:\n  Type\tStatus\n");
        for c in &conditions {
            w.write(1, &format!("{} \t{} \n", c.type_, c.status));
        }
    }
    describe_volumes(&mut w, spec.volumes.as_deref().unwrap_or_default());
    w.write(
        0,
        &format!(
            "QoS Class:\t{}\n",
            qos_class(pod, status.qos_class.as_deref())
        ),
    );
    key_values(&mut w, "Node-Selectors", spec.node_selector.as_ref());
    tolerations(&mut w, spec.tolerations.as_deref().unwrap_or_default());
    describe_events(&mut w, events, now);
    w.finish()
}

/// The class the daemon computed, or the one the spec implies.
fn qos_class(pod: &Pod, published: Option<&str>) -> String {
    published.map(str::to_string).unwrap_or_else(|| {
        let resources = crate::model::qos::pod_resources(pod);
        crate::model::qos::qos_class(&resources)
            .as_str()
            .to_string()
    })
}

/// `Title:\tk=v` and further pairs on lines of their own, sorted; `<none>` when empty.
pub(super) fn key_values(w: &mut Tabbed, title: &str, map: Option<&BTreeMap<String, String>>) {
    let Some(map) = map.filter(|m| !m.is_empty()) else {
        w.write(0, &format!("{title}:\t<none>\n"));
        return;
    };
    for (i, (k, v)) in map.iter().enumerate() {
        let lead = if i == 0 {
            format!("{title}:")
        } else {
            String::new()
        };
        w.write(0, &format!("{lead}\t{k}={v}\n"));
    }
}

pub(super) fn annotations(w: &mut Tabbed, map: Option<&BTreeMap<String, String>>) {
    let shown: Vec<(&String, &String)> = map
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
        .collect();
    if shown.is_empty() {
        w.write(0, "Annotations:\t<none>\n");
        return;
    }
    for (i, (k, v)) in shown.into_iter().enumerate() {
        let lead = if i == 0 { "Annotations:" } else { "" };
        let value = v.strip_suffix('\n').unwrap_or(v);
        if value.len() + k.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
            w.write(0, &format!("{lead}\t{k}:\n"));
            for line in value.split('\n') {
                w.write(
                    0,
                    &format!("\t  {}\n", shorten(line, MAX_ANNOTATION_LEN - 2)),
                );
            }
        } else {
            w.write(0, &format!("{lead}\t{k}: {value}\n"));
        }
    }
}

/// kubectl's `shorten`: at most `max` bytes, the cut marked with `...`.
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn tolerations(w: &mut Tabbed, list: &[Toleration]) {
    if list.is_empty() {
        w.write(0, "Tolerations:\t<none>\n");
        return;
    }
    let mut sorted = list.to_vec();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    for (i, t) in sorted.iter().enumerate() {
        let mut text = if i == 0 {
            "Tolerations:\t".to_string()
        } else {
            "\t".to_string()
        };
        let key = t.key.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        text.push_str(key);
        if !value.is_empty() {
            text.push_str(&format!("={value}"));
        }
        if !effect.is_empty() {
            text.push_str(&format!(":{effect}"));
        }
        if t.operator.as_deref() == Some("Exists") && value.is_empty() {
            text.push_str(if key.is_empty() && effect.is_empty() {
                "op=Exists"
            } else {
                " op=Exists"
            });
        }
        if let Some(secs) = t.toleration_seconds {
            text.push_str(&format!(" for {secs}s"));
        }
        w.write(0, &format!("{text}\n"));
    }
}

pub(super) fn describe_events(w: &mut Tabbed, events: &[Event], now: DateTime<Utc>) {
    if events.is_empty() {
        w.write(0, "Events:\t<none>\n");
        return;
    }
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
    w.write(1, "----\t------\t----\t----\t-------\n");
    for e in events {
        let age = age_of(Some(&crate::status::k8s_time(e.time)), now);
        w.write(
            1,
            &format!(
                "{:?}\t{}\t{age}\tpodhost\t{}\n",
                e.kind,
                e.reason,
                e.message.trim()
            ),
        );
    }
}
