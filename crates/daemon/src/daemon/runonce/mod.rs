//! `podhost daemon --runonce`, as the kubelet's `runonce.go`: the sources are read
//! once, their pods run, and the daemon waits until every pod is Running (all its
//! containers running) or finished, or fails, or the time bound passes; then it prints
//! one line per pod and exits, 0 when every pod is Running or Succeeded (and every
//! manifest was usable), 1 otherwise.
//!
//! The pods are left as they are when it exits, as the kubelet does: their containers
//! keep running in their shims, and a daemon started later on the same root dir adopts
//! them (or stops those whose manifests are gone). The run holds the root dir's lock,
//! so it cannot run beside a daemon on the same root; it serves no API socket, so it
//! never clashes with a daemon's.

mod verdict;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::DaemonError;
use podhost_source::ScanResult;
use podhost_status::StatusStore;
use verdict::{Row, Verdict, judge, table};

/// How often the pods' statuses are looked at.
const POLL: Duration = Duration::from_millis(100);
/// A Running pod counts as up once all its containers have been running this long
/// without a restart: a container that exits at once (a crash loop's first round) must
/// not end the run as "Running". The kubelet's runonce takes the first look; CI wants
/// the pod to have come up.
const STEADY: Duration = Duration::from_secs(1);

/// What the run waits for: the pods read from the sources, and the manifests that
/// could not be used.
pub(super) struct Plan {
    pods: Vec<PlannedPod>,
    manifest_errors: Vec<String>,
}

struct PlannedPod {
    uid: String,
    namespace: String,
    name: String,
}

impl Plan {
    pub(super) fn of(scan: &ScanResult) -> Self {
        Self {
            pods: scan
                .pods
                .iter()
                .map(|p| PlannedPod {
                    uid: p.uid.clone(),
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                })
                .collect(),
            manifest_errors: scan.errors.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Waits for the planned pods (at most `bound`), prints the report on stdout, and
/// returns an error when a pod failed or did not come up, or a manifest was unusable.
pub(super) async fn wait_and_report(
    store: Arc<StatusStore>,
    plan: Plan,
    bound: Duration,
) -> Result<(), DaemonError> {
    let deadline = Instant::now() + bound;
    let mut steady = Steadiness::default();
    let rows = loop {
        let rows: Vec<Row> = plan
            .pods
            .iter()
            .map(|p| {
                let pod = store.get(&p.uid).map(|r| r.into_pod());
                Row {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                    verdict: judge(pod.as_ref()),
                    pod,
                }
            })
            .collect();
        let now = Instant::now();
        let steady_now = steady.update(&rows, now);
        let settled = rows.iter().all(|r| {
            r.verdict.is_settled()
                && (r.verdict != Verdict::Running || steady_now.contains(&r.name))
        });
        if settled || now >= deadline {
            break rows;
        }
        tokio::time::sleep(POLL).await;
    };
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|mut r| {
            if r.verdict == Verdict::Waiting {
                r.verdict = Verdict::Failed(format!("not up within {}s", bound.as_secs_f64()));
            }
            r
        })
        .collect();
    let mut report = table(&rows);
    for e in &plan.manifest_errors {
        report.push_str(&format!("manifest error: {e}\n"));
    }
    print!("{report}");
    let failed = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Failed(_)))
        .count();
    tracing::info!(
        pods = rows.len(),
        failed,
        manifest_errors = plan.manifest_errors.len(),
        "runonce finished; the pods are left as they are"
    );
    if failed > 0 || !plan.manifest_errors.is_empty() {
        return Err(DaemonError::RunOnceFailed {
            failed,
            pods: rows.len(),
            manifest_errors: plan.manifest_errors.len(),
        });
    }
    Ok(())
}

/// Since when each Running pod has been Running with the same restart count.
#[derive(Default)]
struct Steadiness {
    since: std::collections::HashMap<String, (Instant, i32)>,
}

impl Steadiness {
    /// Records `rows` seen at `now`; returns the pods Running for at least [`STEADY`].
    fn update(&mut self, rows: &[Row], now: Instant) -> std::collections::HashSet<String> {
        let mut steady = std::collections::HashSet::new();
        for r in rows {
            if r.verdict != Verdict::Running {
                self.since.remove(&r.name);
                continue;
            }
            let restarts: i32 = r
                .pod
                .as_ref()
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum();
            let entry = self.since.entry(r.name.clone()).or_insert((now, restarts));
            if entry.1 != restarts {
                *entry = (now, restarts);
            }
            if now.duration_since(entry.0) >= STEADY {
                steady.insert(r.name.clone());
            }
        }
        steady
    }
}

/// The run's end, or never when there is no run (the daemon).
pub(super) async fn finished(
    run: &mut Option<JoinHandle<Result<(), DaemonError>>>,
) -> Result<(), DaemonError> {
    match run {
        Some(task) => task.await.unwrap_or_else(|e| {
            Err(DaemonError::TaskEnded {
                task: "runonce",
                how: e.to_string(),
            })
        }),
        None => std::future::pending().await,
    }
}
