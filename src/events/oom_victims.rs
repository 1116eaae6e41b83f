//! The victims the kernel named in its OOM reports, kept briefly so that a container's
//! exit can say which process died (none of the peers tells the user).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A process the kernel OOM-killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomVictim {
    /// The memory cgroup of the task (as the kernel printed it).
    pub task_memcg: String,
    pub comm: String,
    pub pid: i32,
}

/// Recent victims; bounded, oldest dropped first.
#[derive(Debug, Default)]
pub struct OomVictims {
    recent: Mutex<VecDeque<(Instant, OomVictim)>>,
    changed: tokio::sync::Notify,
}

const KEEP: usize = 256;
const KEEP_FOR: Duration = Duration::from_secs(600);

impl OomVictims {
    pub fn record(&self, victim: OomVictim) {
        let mut q = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        while q.len() >= KEEP || q.front().is_some_and(|(t, _)| t.elapsed() > KEEP_FOR) {
            q.pop_front();
        }
        q.push_back((Instant::now(), victim));
        drop(q);
        self.changed.notify_waiters();
    }

    /// The first victim whose memcg ends with `cgroup_suffix` (the container's cgroup path
    /// below the hierarchy root; the kernel prints it relative to the reader's cgroup
    /// namespace, hence the suffix match).
    pub fn find(&self, cgroup_suffix: &str) -> Option<OomVictim> {
        let q = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        q.iter()
            .map(|(_, v)| v)
            .find(|v| {
                v.task_memcg.ends_with(cgroup_suffix) || cgroup_suffix.ends_with(&v.task_memcg)
            })
            .cloned()
    }

    /// Like [`find`](Self::find), waiting up to `timeout` for the kernel's report (it may be
    /// read after the container's exit was).
    pub async fn wait_for(&self, cgroup_suffix: &str, timeout: Duration) -> Option<OomVictim> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(v) = self.find(cgroup_suffix) {
                return Some(v);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_victim_reported_late_is_still_found() {
        let v = std::sync::Arc::new(OomVictims::default());
        let v2 = v.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            v2.record(OomVictim {
                task_memcg: "/podhost/kubepods/burstable/podu1/main".into(),
                comm: "tail".into(),
                pid: 142,
            });
        });
        let got = v
            .wait_for("/kubepods/burstable/podu1/main", Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!((got.comm.as_str(), got.pid), ("tail", 142));
        assert!(
            v.wait_for("/kubepods/besteffort/podu2/x", Duration::from_millis(20))
                .await
                .is_none()
        );
    }
}
