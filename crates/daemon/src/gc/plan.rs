//! Which dead containers to delete (pure): the kubelet's `kuberuntime_gc.go` rules.
//!
//! Evictable: exited at least `min_age` ago. Grouped by (pod UID, container name). Every
//! evictable container of a pod that no longer exists goes. Otherwise each group keeps
//! its newest `max_per_pod_container`; then, if `max_containers` is set and exceeded,
//! each group keeps at most `max(1, max_containers / groups)` and the oldest go first
//! across groups until the total fits. Unlike the kubelet, the newest dead attempt of
//! each container of a live pod is never deleted (it is the current attempt while the
//! pod waits in back-off or has completed, and `logs --previous` reads it otherwise).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{ContainerGcPolicy, DeadContainer};

fn old_enough(d: &DeadContainer, min_age: Duration, now: DateTime<Utc>) -> bool {
    (now - d.finished_at)
        .to_std()
        .is_ok_and(|age| age >= min_age)
        || (min_age.is_zero() && d.finished_at > now)
}

/// Newest first: by attempt number, then finish time.
fn newest_first(a: &DeadContainer, b: &DeadContainer) -> std::cmp::Ordering {
    (b.attempt, b.finished_at).cmp(&(a.attempt, a.finished_at))
}

/// The dead containers to delete, oldest first.
pub fn plan(
    dead: &[DeadContainer],
    live_pods: &HashSet<String>,
    policy: &ContainerGcPolicy,
    now: DateTime<Utc>,
) -> Vec<DeadContainer> {
    // The newest dead attempt of every container of a live pod, evictable or not.
    let mut protected: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for d in dead.iter().filter(|d| live_pods.contains(&d.pod_uid)) {
        let newest = protected
            .entry((&d.pod_uid, &d.container))
            .or_insert(d.attempt);
        *newest = (*newest).max(d.attempt);
    }
    let is_protected = |d: &DeadContainer| {
        protected.get(&(d.pod_uid.as_str(), d.container.as_str())) == Some(&d.attempt)
    };

    let mut groups: BTreeMap<(&str, &str), Vec<&DeadContainer>> = BTreeMap::new();
    for d in dead.iter().filter(|d| old_enough(d, policy.min_age, now)) {
        groups
            .entry((&d.pod_uid, &d.container))
            .or_default()
            .push(d);
    }
    let mut out: Vec<&DeadContainer> = Vec::new();
    let mut kept: Vec<Vec<&DeadContainer>> = Vec::new();
    for ((uid, _), mut group) in groups {
        if !live_pods.contains(uid) {
            out.extend(group);
            continue;
        }
        group.sort_by(|a, b| newest_first(a, b));
        let (keep, drop) = split_keeping(group, policy.max_per_pod_container, &is_protected);
        out.extend(drop);
        if !keep.is_empty() {
            kept.push(keep);
        }
    }
    if let Some(max) = policy.max_containers {
        let total: usize = kept.iter().map(Vec::len).sum();
        if total > max && !kept.is_empty() {
            let per_group = (max / kept.len()).max(1);
            let mut rest = Vec::new();
            for group in kept {
                let (keep, drop) = split_keeping(group, per_group, &is_protected);
                out.extend(drop);
                rest.extend(keep);
            }
            if rest.len() > max {
                rest.sort_by_key(|d| (d.finished_at, d.attempt));
                let mut excess = rest.len() - max;
                for d in rest {
                    if excess == 0 {
                        break;
                    }
                    if !is_protected(d) {
                        out.push(d);
                        excess -= 1;
                    }
                }
            }
        }
    }
    out.sort_by_key(|d| {
        (
            d.finished_at,
            d.pod_uid.clone(),
            d.container.clone(),
            d.attempt,
        )
    });
    out.into_iter().cloned().collect()
}

/// Splits a newest-first group into the first `keep` (plus any protected one) and the
/// rest.
fn split_keeping<'a>(
    group: Vec<&'a DeadContainer>,
    keep: usize,
    is_protected: &dyn Fn(&DeadContainer) -> bool,
) -> (Vec<&'a DeadContainer>, Vec<&'a DeadContainer>) {
    let (mut kept, mut dropped) = (Vec::new(), Vec::new());
    for d in group {
        if kept.len() < keep || is_protected(d) {
            kept.push(d);
        } else {
            dropped.push(d);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;
    use std::path::PathBuf;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    fn dead(uid: &str, name: &str, attempt: u32, finished: i64) -> DeadContainer {
        DeadContainer {
            pod_uid: uid.into(),
            container: name.into(),
            attempt,
            finished_at: t(finished),
            attempt_dir: PathBuf::from(format!("/pods/{uid}/containers/{name}/{attempt}")),
            log_file: PathBuf::from(format!("/logs/ns_p_{uid}/{name}/{attempt}.log")),
        }
    }

    fn ids(v: &[DeadContainer]) -> Vec<String> {
        v.iter()
            .map(|d| format!("{}/{}/{}", d.pod_uid, d.container, d.attempt))
            .collect()
    }

    fn live(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn keeps_newest_per_container_of_live_pods() {
        let d = vec![
            dead("p", "a", 0, 10),
            dead("p", "a", 1, 20),
            dead("p", "a", 2, 30),
            dead("p", "b", 0, 15),
        ];
        let out = plan(&d, &live(&["p"]), &ContainerGcPolicy::default(), t(100));
        assert_eq!(ids(&out), ["p/a/0", "p/a/1"]);
        let two = ContainerGcPolicy {
            max_per_pod_container: 2,
            ..Default::default()
        };
        assert_eq!(ids(&plan(&d, &live(&["p"]), &two, t(100))), ["p/a/0"]);
    }

    #[test]
    fn everything_of_gone_pods_goes() {
        let d = vec![
            dead("gone", "a", 0, 10),
            dead("gone", "a", 1, 20),
            dead("p", "a", 3, 5),
        ];
        let out = plan(&d, &live(&["p"]), &ContainerGcPolicy::default(), t(100));
        assert_eq!(ids(&out), ["gone/a/0", "gone/a/1"]);
    }

    #[test]
    fn min_age_holds_young_containers() {
        let d = vec![
            dead("gone", "a", 0, 10),
            dead("gone", "a", 1, 95),
            dead("p", "a", 0, 10),
            dead("p", "a", 1, 20),
        ];
        let p = ContainerGcPolicy {
            min_age: Duration::from_secs(10),
            ..Default::default()
        };
        let out = plan(&d, &live(&["p"]), &p, t(100));
        assert_eq!(ids(&out), ["gone/a/0", "p/a/0"]);
    }

    #[test]
    fn newest_attempt_of_a_live_pod_is_never_deleted() {
        let d = vec![dead("p", "a", 0, 10), dead("p", "a", 1, 20)];
        let zero = ContainerGcPolicy {
            max_per_pod_container: 0,
            max_containers: Some(0),
            ..Default::default()
        };
        assert_eq!(ids(&plan(&d, &live(&["p"]), &zero, t(100))), ["p/a/0"]);
        // A too-young newest attempt still protects: the older one is not "newest".
        let p = ContainerGcPolicy {
            min_age: Duration::from_secs(50),
            max_per_pod_container: 0,
            ..Default::default()
        };
        let d = vec![dead("p", "a", 0, 10), dead("p", "a", 1, 90)];
        assert_eq!(ids(&plan(&d, &live(&["p"]), &p, t(100))), ["p/a/0"]);
    }

    #[test]
    fn global_cap_per_group_then_oldest_first() {
        // Three containers with 3 dead attempts each; cap 4 → per group max(1, 4/3)=1,
        // then 3 left ≤ 4: done.
        let mut d = Vec::new();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            for attempt in 0..3u32 {
                d.push(dead("p", name, attempt, (i as i64) * 100 + attempt as i64));
            }
        }
        let p = ContainerGcPolicy {
            max_per_pod_container: 3,
            max_containers: Some(4),
            ..Default::default()
        };
        let out = plan(&d, &live(&["p"]), &p, t(1000));
        assert_eq!(out.len(), 6);
        assert!(
            ids(&out).iter().all(|s| !s.ends_with("/2")),
            "{:?}",
            ids(&out)
        );
        // Cap 2 over 3 groups: per group 1, then oldest first — but the newest attempt
        // of a live pod's container is protected, so all three stay.
        let p = ContainerGcPolicy {
            max_containers: Some(2),
            ..p
        };
        assert_eq!(plan(&d, &live(&["p"]), &p, t(1000)).len(), 6);
    }

    #[test]
    fn global_cap_removes_oldest_first_across_groups() {
        // Pod p1 has a running newer attempt elsewhere; the dead ones here are older
        // attempts only when a newer dead one exists. Use max_per_pod_container 2.
        let d = vec![
            dead("p", "a", 0, 10),
            dead("p", "a", 1, 50),
            dead("p", "b", 0, 20),
            dead("p", "b", 1, 60),
        ];
        let p = ContainerGcPolicy {
            max_per_pod_container: 2,
            max_containers: Some(3),
            ..Default::default()
        };
        // per group max(1, 3/2)=1 → a/0 and b/0 go.
        assert_eq!(
            ids(&plan(&d, &live(&["p"]), &p, t(100))),
            ["p/a/0", "p/b/0"]
        );
    }

    #[test]
    fn clock_skew_with_zero_min_age() {
        let d = vec![dead("gone", "a", 0, 10)];
        let out = plan(
            &d,
            &live(&[]),
            &ContainerGcPolicy::default(),
            t(10) - TimeDelta::seconds(5),
        );
        assert_eq!(out.len(), 1);
    }
}
