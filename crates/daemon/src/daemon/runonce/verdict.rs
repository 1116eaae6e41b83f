//! Whether a pod of a `--runonce` run has come up, finished, or failed, and the table
//! that reports it. Pure: the pods' statuses in, text out.

use k8s_openapi::api::core::v1::{ContainerState, Pod};

/// Container waiting reasons that do not go away without a change on the node: the pod
/// counts as failed at once instead of at the time bound.
const HOPELESS_WAITING: [&str; 4] = [
    "CrashLoopBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
];

/// Where one pod of the run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Phase Running with every container running (the kubelet's `isPodRunning`).
    Running,
    /// Phase Succeeded: every container exited 0 and will not restart.
    Succeeded,
    /// Phase Failed, a container in a state that will not fix itself, or not up in time.
    Failed(String),
    /// Not there yet.
    Waiting,
}

impl Verdict {
    /// The pod is Running or Succeeded, or it failed: waiting longer changes nothing.
    pub fn is_settled(&self) -> bool {
        !matches!(self, Verdict::Waiting)
    }
}

/// The verdict on `pod` (`None`: the pod has no status yet).
pub fn judge(pod: Option<&Pod>) -> Verdict {
    let Some(status) = pod.and_then(|p| p.status.as_ref()) else {
        return Verdict::Waiting;
    };
    match status.phase.as_deref() {
        Some("Succeeded") => return Verdict::Succeeded,
        Some("Failed") => {
            let why = status.message.clone().or(status.reason.clone());
            return Verdict::Failed(why.unwrap_or_else(|| "the pod failed".to_string()));
        }
        _ => {}
    }
    let all = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for c in all {
        if let Some(reason) = c
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            && HOPELESS_WAITING.contains(&reason)
        {
            return Verdict::Failed(format!("container {} is in {reason}", c.name));
        }
    }
    let containers = status.container_statuses.as_deref().unwrap_or_default();
    let expected = pod
        .and_then(|p| p.spec.as_ref())
        .map_or(0, |s| s.containers.len());
    let all_running = containers.len() == expected
        && containers
            .iter()
            .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
    if status.phase.as_deref() == Some("Running") && all_running {
        Verdict::Running
    } else {
        Verdict::Waiting
    }
}

/// One line of the report.
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub pod: Option<Pod>,
    pub verdict: Verdict,
}

/// The report, a kubectl-like table: NAMESPACE NAME PHASE CONTAINERS RESULT, where
/// CONTAINERS is `name=state` per container (`running`, `waiting(Reason)`,
/// `terminated(Reason, exit N)`) and RESULT is `ok` or `FAILED: why`.
pub fn table(rows: &[Row]) -> String {
    let mut lines = vec![[
        "NAMESPACE".to_string(),
        "NAME".to_string(),
        "PHASE".to_string(),
        "CONTAINERS".to_string(),
        "RESULT".to_string(),
    ]];
    for row in rows {
        let status = row.pod.as_ref().and_then(|p| p.status.as_ref());
        let phase = status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".to_string());
        let containers: Vec<String> = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| format!("{}={}", c.name, state_text(c.state.as_ref())))
            .collect();
        let result = match &row.verdict {
            Verdict::Running | Verdict::Succeeded => "ok".to_string(),
            Verdict::Failed(why) => format!("FAILED: {why}"),
            Verdict::Waiting => "FAILED: not up".to_string(),
        };
        let containers = if containers.is_empty() {
            "-".to_string()
        } else {
            containers.join(",")
        };
        lines.push([
            row.namespace.clone(),
            row.name.clone(),
            phase,
            containers,
            result,
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, cell) in line.iter().enumerate() {
            if i + 1 == line.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

fn state_text(state: Option<&ContainerState>) -> String {
    let Some(state) = state else {
        return "unknown".to_string();
    };
    if state.running.is_some() {
        "running".to_string()
    } else if let Some(t) = &state.terminated {
        let reason = t.reason.as_deref().unwrap_or("Terminated");
        format!("terminated({reason}, exit {})", t.exit_code)
    } else if let Some(w) = &state.waiting {
        format!("waiting({})", w.reason.as_deref().unwrap_or("Waiting"))
    } else {
        "unknown".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, states: &[serde_json::Value]) -> Pod {
        let containers: Vec<_> = (0..states.len())
            .map(|i| serde_json::json!({"name": format!("c{i}"), "image": "i"}))
            .collect();
        let statuses: Vec<_> = states
            .iter()
            .enumerate()
            .map(|(i, s)| serde_json::json!({"name": format!("c{i}"), "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": s}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": containers},
            "status": {"phase": phase, "containerStatuses": statuses},
        }))
        .unwrap()
    }

    fn running() -> serde_json::Value {
        serde_json::json!({"running": {}})
    }

    fn waiting(reason: &str) -> serde_json::Value {
        serde_json::json!({"waiting": {"reason": reason}})
    }

    #[test]
    fn running_needs_every_container_running() {
        assert_eq!(
            judge(Some(&pod("Running", &[running(), running()]))),
            Verdict::Running
        );
        assert_eq!(
            judge(Some(&pod(
                "Running",
                &[running(), waiting("ContainerCreating")]
            ))),
            Verdict::Waiting
        );
        assert_eq!(judge(Some(&pod("Pending", &[]))), Verdict::Waiting);
        assert_eq!(judge(None), Verdict::Waiting);
    }

    #[test]
    fn finished_phases_and_hopeless_waits_settle() {
        assert_eq!(judge(Some(&pod("Succeeded", &[]))), Verdict::Succeeded);
        assert!(matches!(
            judge(Some(&pod("Failed", &[]))),
            Verdict::Failed(_)
        ));
        let crashing = judge(Some(&pod(
            "Running",
            &[running(), waiting("CrashLoopBackOff")],
        )));
        assert_eq!(
            crashing,
            Verdict::Failed("container c1 is in CrashLoopBackOff".into())
        );
        assert_eq!(
            judge(Some(&pod("Pending", &[waiting("ImagePullBackOff")]))),
            Verdict::Waiting,
            "a pull may still succeed"
        );
    }

    #[test]
    fn the_table_lines_up_and_names_each_containers_state() {
        let rows = [
            Row {
                namespace: "default".into(),
                name: "web-n".into(),
                pod: Some(pod("Running", &[running()])),
                verdict: Verdict::Running,
            },
            Row {
                namespace: "kube-system".into(),
                name: "job-n".into(),
                pod: Some(pod(
                    "Failed",
                    &[serde_json::json!({"terminated": {"exitCode": 3, "reason": "Error"}})],
                )),
                verdict: Verdict::Failed("the pod failed".into()),
            },
            Row {
                namespace: "default".into(),
                name: "slow-n".into(),
                pod: None,
                verdict: Verdict::Waiting,
            },
        ];
        let text = table(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].starts_with("NAMESPACE     NAME     PHASE"),
            "{text}"
        );
        assert!(
            lines[1].contains("Running")
                && lines[1].contains("c0=running")
                && lines[1].ends_with("ok"),
            "{text}"
        );
        assert!(
            lines[2].contains("c0=terminated(Error, exit 3)")
                && lines[2].ends_with("FAILED: the pod failed"),
            "{text}"
        );
        assert!(
            lines[3].contains("Pending") && lines[3].ends_with("FAILED: not up"),
            "{text}"
        );
        let col = lines[0].find("PHASE").unwrap();
        assert!(
            lines
                .iter()
                .all(|l| l[col..].starts_with(|c: char| c.is_ascii_uppercase())),
            "{text}"
        );
    }
}
