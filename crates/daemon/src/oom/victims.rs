//! The victims the kernel named in its OOM reports, kept briefly so that a container's
//! exit can say which process died (none of the peers tells the user).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A process the kernel OOM-killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomVictim {
    /// The memory cgroup of the task, as the kernel printed it.
    pub task_memcg: String,
    pub comm: String,
    pub pid: i32,
}

/// Recent victims in the order the kernel reported them; bounded, oldest dropped first.
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

    /// The first victim recorded at or after `since` whose memcg ends with
    /// `cgroup_suffix` (the container's cgroup below podhost's root; the kernel prints
    /// paths from the hierarchy's root, which may lie above podhost's). The first one is
    /// the victim the kernel chose: with memory.oom.group the other members follow it.
    pub fn find(&self, cgroup_suffix: &str, since: Instant) -> Option<OomVictim> {
        let q = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        q.iter()
            .filter(|(t, v)| *t >= since && v.task_memcg.ends_with(cgroup_suffix))
            .map(|(_, v)| v.clone())
            .next()
    }

    /// Like [`find`](Self::find), waiting up to `timeout` for the kernel's report (it may
    /// be read after the container's exit was).
    pub async fn wait_for(
        &self,
        cgroup_suffix: &str,
        since: Instant,
        timeout: Duration,
    ) -> Option<OomVictim> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(v) = self.find(cgroup_suffix, since) {
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

    fn victim(comm: &str, pid: i32) -> OomVictim {
        OomVictim {
            task_memcg: "/system.slice/podhost/kubepods/burstable/podu1/main".into(),
            comm: comm.into(),
            pid,
        }
    }

    #[tokio::test]
    async fn the_victim_of_this_run_is_found_even_when_reported_late() {
        let v = std::sync::Arc::new(OomVictims::default());
        let before_old = Instant::now();
        v.record(victim("old", 1));
        tokio::time::sleep(Duration::from_millis(5)).await;
        let since = Instant::now();
        let v2 = v.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            v2.record(victim("tail", 142));
            v2.record(victim("sleep", 143));
        });
        let got = v
            .wait_for(
                "/kubepods/burstable/podu1/main",
                since,
                Duration::from_secs(2),
            )
            .await
            .unwrap();
        assert_eq!(
            (got.comm.as_str(), got.pid),
            ("tail", 142),
            "not the older victim"
        );
        assert_eq!(
            v.find("/kubepods/burstable/podu1/main", before_old)
                .unwrap()
                .comm,
            "old"
        );
        let none = v
            .wait_for(
                "/kubepods/besteffort/podu2/x",
                since,
                Duration::from_millis(20),
            )
            .await;
        assert!(none.is_none());
    }
}
