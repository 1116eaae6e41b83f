//! `podhost get pods`: kubectl's table (NAME READY STATUS RESTARTS AGE [IP NODE]).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

use super::age::age_of;

/// The STATUS column as kubectl computes it: the pod's reason or phase, overridden by an
/// init container's progress (`Init:N/M`, `Init:CrashLoopBackOff`, `Init:Error`) or a
/// container's waiting/terminated reason, and `Terminating` while the pod is being
/// deleted.
pub fn pod_status_text(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let mut reason = status
        .reason
        .clone()
        .or_else(|| status.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let initializing = match init_status_text(pod) {
        Some(init) => {
            reason = init;
            true
        }
        None => false,
    };
    let initialized = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Initialized" && c.status == "True");
    if initializing && !initialized {
        if pod.metadata.deletion_timestamp.is_some() {
            reason = "Terminating".into();
        }
        return reason;
    }
    let mut has_running = false;
    for c in status.container_statuses.iter().flatten().rev() {
        let state = c.state.clone().unwrap_or_default();
        if let Some(w) = state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.clone())
            .filter(|r| !r.is_empty())
        {
            reason = w;
        } else if let Some(t) = state.terminated.as_ref() {
            reason = t.reason.clone().unwrap_or_else(|| match t.signal {
                Some(s) => format!("Signal:{s}"),
                None => format!("ExitCode:{}", t.exit_code),
            });
        } else if state.running.is_some() && c.ready {
            has_running = true;
        }
    }
    if reason == "Completed" && has_running {
        reason = "Running".into();
    }
    if pod.metadata.deletion_timestamp.is_some() {
        reason = "Terminating".into();
    }
    reason
}

/// kubectl's init-container part of STATUS: `None` once every init container completed
/// (and every sidecar started).
fn init_status_text(pod: &Pod) -> Option<String> {
    let total = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    let statuses = pod.status.as_ref()?.init_container_statuses.as_ref()?;
    let sidecar = |name: &str| {
        pod.spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .and_then(|l| l.iter().find(|c| c.name == name))
            .is_some_and(|c| c.restart_policy.as_deref() == Some("Always"))
    };
    for (i, c) in statuses.iter().enumerate() {
        let state = c.state.clone().unwrap_or_default();
        if let Some(t) = &state.terminated
            && t.exit_code == 0
        {
            continue;
        }
        if sidecar(&c.name) && c.started == Some(true) {
            continue;
        }
        if let Some(t) = &state.terminated {
            return Some(match (&t.reason, t.signal) {
                (Some(r), _) if !r.is_empty() => format!("Init:{r}"),
                (_, Some(s)) if s != 0 => format!("Init:Signal:{s}"),
                _ => format!("Init:ExitCode:{}", t.exit_code),
            });
        }
        if let Some(r) = state.waiting.as_ref().and_then(|w| w.reason.as_deref())
            && !r.is_empty()
            && r != "PodInitializing"
        {
            return Some(format!("Init:{r}"));
        }
        return Some(format!("Init:{i}/{total}"));
    }
    None
}

fn restarts_text(pod: &Pod, now: DateTime<Utc>) -> String {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let total: i32 = statuses.iter().map(|c| c.restart_count).sum();
    let last = statuses
        .iter()
        .filter_map(|c| {
            c.last_state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .clone()
        })
        .max_by_key(|t| t.0);
    match last {
        Some(t) if total > 0 => format!("{total} ({} ago)", age_of(Some(&t), now)),
        _ => total.to_string(),
    }
}

/// READY as kubectl counts it: regular containers, plus sidecars that have started.
fn ready_text(pod: &Pod) -> String {
    let mut total = pod.spec.as_ref().map(|s| s.containers.len()).unwrap_or(0);
    let status = pod.status.clone().unwrap_or_default();
    let mut ready = status
        .container_statuses
        .iter()
        .flatten()
        .filter(|c| c.ready)
        .count();
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    for c in status.init_container_statuses.iter().flatten() {
        if sidecars.contains(&c.name.as_str()) && c.started == Some(true) {
            total += 1;
            ready += usize::from(c.ready);
        }
    }
    format!("{ready}/{total}")
}

/// kubectl's tabwriter's least column width, its three spaces of padding included.
pub const KUBECTL_MIN_WIDTH: usize = 6;

/// The columns of `get pods` besides the five every table has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodColumns {
    /// `-o wide`: IP, NODE, NOMINATED NODE, READINESS GATES.
    pub wide: bool,
    /// `-A`: NAMESPACE first.
    pub namespace: bool,
    /// `--show-labels`: LABELS last.
    pub labels: bool,
    /// `--no-headers`.
    pub no_headers: bool,
}

/// The header row of the table with these columns.
pub fn pod_header(columns: PodColumns) -> Vec<String> {
    let mut h = Vec::new();
    if columns.namespace {
        h.push("NAMESPACE");
    }
    h.extend(["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    if columns.wide {
        h.extend(["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]);
    }
    if columns.labels {
        h.push("LABELS");
    }
    h.into_iter().map(String::from).collect()
}

/// One pod's row.
pub fn pod_row(p: &Pod, columns: PodColumns, now: DateTime<Utc>) -> Vec<String> {
    let none = || "<none>".to_string();
    let mut row = Vec::new();
    if columns.namespace {
        row.push(
            p.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
        );
    }
    row.extend([
        p.metadata.name.clone().unwrap_or_default(),
        ready_text(p),
        pod_status_text(p),
        restarts_text(p, now),
        age_of(p.metadata.creation_timestamp.as_ref(), now),
    ]);
    if columns.wide {
        let status = p.status.as_ref();
        let spec = p.spec.as_ref();
        row.push(status.and_then(|s| s.pod_ip.clone()).unwrap_or_else(none));
        row.push(spec.and_then(|s| s.node_name.clone()).unwrap_or_else(none));
        row.push(
            status
                .and_then(|s| s.nominated_node_name.clone())
                .unwrap_or_else(none),
        );
        row.push(readiness_gates_text(p).unwrap_or_else(none));
    }
    if columns.labels {
        row.push(labels_text(p).unwrap_or_else(|| "<none>".into()));
    }
    row
}

/// READINESS GATES: how many of the pod's gates' conditions are True, of how many.
fn readiness_gates_text(p: &Pod) -> Option<String> {
    let gates = p
        .spec
        .as_ref()?
        .readiness_gates
        .as_ref()
        .filter(|g| !g.is_empty())?;
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    let met = gates
        .iter()
        .filter(|g| {
            conditions
                .into_iter()
                .flatten()
                .any(|c| c.type_ == g.condition_type && c.status == "True")
        })
        .count();
    Some(format!("{met}/{}", gates.len()))
}

/// LABELS: `k=v` pairs by key, comma separated.
fn labels_text(p: &Pod) -> Option<String> {
    let labels = p.metadata.labels.as_ref().filter(|l| !l.is_empty())?;
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The table of `pods` with these columns.
pub fn render_pod_table(pods: &[Pod], columns: PodColumns, now: DateTime<Utc>) -> String {
    let mut rows = Vec::new();
    if !columns.no_headers {
        rows.push(pod_header(columns));
    }
    rows.extend(pods.iter().map(|p| pod_row(p, columns, now)));
    align_min(&rows, KUBECTL_MIN_WIDTH)
}

/// Renders the table; `wide` adds IP, NODE, NOMINATED NODE and READINESS GATES.
pub fn render_pods(pods: &[Pod], wide: bool, now: DateTime<Utc>) -> String {
    render_pod_table(
        pods,
        PodColumns {
            wide,
            ..PodColumns::default()
        },
        now,
    )
}

/// Left-aligned columns separated by three spaces, as kubectl's tabwriter.
pub fn align(rows: &[Vec<String>]) -> String {
    align_min(rows, 0)
}

/// As [`align`], each column (but the last) at least `min_width` wide, padding included
/// (kubectl top's tabwriter: 10).
pub fn align_min(rows: &[Vec<String>], min_width: usize) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
                .saturating_add(3)
                .max(min_width)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateWaiting, ContainerStatus, PodSpec, PodStatus,
    };

    fn pod(reason: Option<&str>, ready: bool, restarts: i32) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web-node1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Default::default()],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![ContainerStatus {
                    ready,
                    restart_count: restarts,
                    state: Some(ContainerState {
                        waiting: reason.map(|r| ContainerStateWaiting {
                            reason: Some(r.into()),
                            message: None,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn init_pod(init: &[(&str, ContainerState)], initialized: bool) -> Pod {
        let mut p = pod(Some("PodInitializing"), false, 0);
        let spec = p.spec.get_or_insert_default();
        spec.init_containers = Some(
            init.iter()
                .map(|(n, _)| k8s_openapi::api::core::v1::Container {
                    name: (*n).into(),
                    restart_policy: (*n == "sidecar").then(|| "Always".into()),
                    ..Default::default()
                })
                .collect(),
        );
        let status = p.status.get_or_insert_default();
        status.phase = Some("Pending".into());
        status.init_container_statuses = Some(
            init.iter()
                .map(|(n, state)| ContainerStatus {
                    name: (*n).into(),
                    started: Some(state.running.is_some()),
                    ready: state.running.is_some(),
                    state: Some(state.clone()),
                    ..Default::default()
                })
                .collect(),
        );
        status.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
            type_: "Initialized".into(),
            status: if initialized { "True" } else { "False" }.into(),
            ..Default::default()
        }]);
        p
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..Default::default()
        }
    }

    fn terminated(code: i32, reason: &str) -> ContainerState {
        ContainerState {
            terminated: Some(k8s_openapi::api::core::v1::ContainerStateTerminated {
                exit_code: code,
                reason: Some(reason.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn status_column_shows_init_progress_as_kubectl() {
        let running = ContainerState {
            running: Some(Default::default()),
            ..Default::default()
        };
        let cases = [
            (
                init_pod(
                    &[("a", running.clone()), ("b", waiting("PodInitializing"))],
                    false,
                ),
                "Init:0/2",
            ),
            (
                init_pod(
                    &[("a", terminated(0, "Completed")), ("b", running.clone())],
                    false,
                ),
                "Init:1/2",
            ),
            (
                init_pod(&[("a", waiting("CrashLoopBackOff"))], false),
                "Init:CrashLoopBackOff",
            ),
            (
                init_pod(&[("a", terminated(1, "Error"))], false),
                "Init:Error",
            ),
            (
                init_pod(
                    &[("sidecar", running.clone()), ("b", running.clone())],
                    false,
                ),
                "Init:1/2",
            ),
            (
                init_pod(&[("a", terminated(0, "Completed"))], true),
                "PodInitializing",
            ),
        ];
        for (p, want) in cases {
            assert_eq!(pod_status_text(&p), want);
        }
        let p = init_pod(&[("sidecar", running)], true);
        assert_eq!(ready_text(&p), "1/2", "a started sidecar counts");
        let mut p = pod(None, false, 0);
        let status = p.status.get_or_insert_default();
        status.phase = Some("Failed".into());
        status.reason = Some("DeadlineExceeded".into());
        status.container_statuses = Some(vec![]);
        assert_eq!(pod_status_text(&p), "DeadlineExceeded");
    }

    #[test]
    fn status_column_prefers_container_reason() {
        assert_eq!(
            pod_status_text(&pod(Some("CrashLoopBackOff"), false, 3)),
            "CrashLoopBackOff"
        );
        assert_eq!(pod_status_text(&pod(None, true, 0)), "Running");
        let mut p = pod(None, true, 0);
        p.metadata.deletion_timestamp = Some(crate::status::k8s_time(Utc::now()));
        assert_eq!(pod_status_text(&p), "Terminating");
    }

    #[test]
    fn table_layout() {
        let out = render_pods(
            &[pod(Some("CrashLoopBackOff"), false, 3)],
            false,
            Utc::now(),
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("NAME      "));
        assert!(lines[0].contains("READY   STATUS"));
        assert!(lines[1].starts_with("web-node1   0/1     CrashLoopBackOff   3"));
    }

    /// Two pods of one name in two namespaces, as `kubectl get pods -A -o wide
    /// --show-labels` prints them (golden/get-pods-all-namespaces-wide-labels.txt,
    /// written from kubectl's columns and its tabwriter: padding 3, least width 6).
    #[test]
    fn all_namespaces_wide_with_labels_as_kubectl() {
        let at = |t: &str| -> DateTime<Utc> { t.parse().unwrap() };
        let pod = |v: serde_json::Value| -> Pod { serde_json::from_value(v).unwrap() };
        let running = pod(serde_json::json!({
            "metadata": {"name": "dup", "namespace": "team-a", "labels": {"team": "a"},
                         "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": "10.88.0.5", "containerStatuses": [{
                "name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "",
                "state": {"running": {"startedAt": "2026-11-30T10:00:01Z"}}}]}
        }));
        let crashing = pod(serde_json::json!({
            "metadata": {"name": "dup", "namespace": "team-b", "creationTimestamp": "2026-11-30T09:55:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "c", "ready": false, "restartCount": 3, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-30T10:03:00Z"}}}]}
        }));
        let columns = PodColumns {
            wide: true,
            namespace: true,
            labels: true,
            no_headers: false,
        };
        let text = render_pod_table(&[running, crashing], columns, at("2026-11-30T10:05:00Z"));
        assert_eq!(
            text,
            include_str!("golden/get-pods-all-namespaces-wide-labels.txt")
        );
    }
}
