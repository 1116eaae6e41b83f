//! What to do about mirror pods, as the kubelet decides it (`syncPod`'s mirror part and
//! `deleteOrphanedMirrorPods`): given the static pods the node runs and the mirror pods
//! the API server shows for the node, which mirror pods to delete and which to create.
//! Pure: the daemon feeds it the status store's static pods and the watch's mirrors.
//!
//! - A running static pod has exactly one mirror pod, of its name, carrying its config
//!   hash and not being deleted. A missing one is created; one with another hash (the
//!   manifest was edited) or being deleted (`kubectl delete` of a mirror pod only marks
//!   it: the node finishes the deletion) is deleted with its UID as precondition, then
//!   created again.
//! - A terminating static pod keeps its mirror pod as it is (the kubelet neither
//!   creates nor deletes the mirror of a pod it is tearing down), so its last statuses
//!   still have somewhere to go.
//! - A mirror pod whose name no static pod holds is an orphan (the manifest was removed
//!   and the pod has terminated, or it was removed while the daemon was down): deleted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// A static pod, by what decides its mirror pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticPodState {
    pub namespace: String,
    pub name: String,
    /// Its config hash (`kubernetes.io/config.hash`, its UID on the node).
    pub hash: String,
    /// Being torn down (manifest removed or replaced): its mirror is left as it is.
    pub terminating: bool,
}

/// A mirror pod as the API server shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPodState {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Its `kubernetes.io/config.mirror`: the config hash of the static pod it mirrors.
    pub hash: String,
    /// It carries a deletionTimestamp.
    pub deleting: bool,
}

/// Why a mirror pod is deleted (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeleteReason {
    /// Its static pod's hash changed: it is replaced.
    Outdated,
    /// Someone deleted it: it is deleted at once and created again.
    Deleting,
    /// No static pod of its name is left.
    Orphan,
}

/// One write to the API server about mirror pods.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MirrorAction {
    /// Delete the mirror pod with grace 0 and `uid` as precondition.
    Delete {
        namespace: String,
        name: String,
        uid: String,
        reason: DeleteReason,
    },
    /// Create the mirror pod of the static pod `namespace/name` with `hash`.
    Create {
        namespace: String,
        name: String,
        hash: String,
    },
}

impl MirrorAction {
    /// The pod's `namespace/name`.
    pub fn full_name(&self) -> String {
        match self {
            MirrorAction::Delete {
                namespace, name, ..
            }
            | MirrorAction::Create {
                namespace, name, ..
            } => format!("{namespace}/{name}"),
        }
    }
}

fn full_name(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The writes that bring `mirrors` in line with `statics`: every delete first, then the
/// creates (a replaced mirror pod's name must be free before it is created again).
pub fn plan(statics: &[StaticPodState], mirrors: &[MirrorPodState]) -> Vec<MirrorAction> {
    // Per name: the running static pod's hash, or None when only terminating ones hold it.
    let mut wanted: BTreeMap<String, Option<&StaticPodState>> = BTreeMap::new();
    for s in statics {
        let slot = wanted
            .entry(full_name(&s.namespace, &s.name))
            .or_insert(None);
        if !s.terminating {
            *slot = Some(s);
        }
    }
    let mut deletes = Vec::new();
    let mut kept: BTreeMap<String, ()> = BTreeMap::new();
    for m in mirrors {
        let key = full_name(&m.namespace, &m.name);
        let reason = match wanted.get(&key) {
            None => Some(DeleteReason::Orphan),
            Some(None) => None,
            Some(Some(_)) if m.deleting => Some(DeleteReason::Deleting),
            Some(Some(s)) if s.hash != m.hash => Some(DeleteReason::Outdated),
            Some(Some(_)) => None,
        };
        match reason {
            Some(reason) => deletes.push(MirrorAction::Delete {
                namespace: m.namespace.clone(),
                name: m.name.clone(),
                uid: m.uid.clone(),
                reason,
            }),
            None => {
                kept.insert(key, ());
            }
        }
    }
    let creates = wanted
        .iter()
        .filter(|(key, _)| !kept.contains_key(*key))
        .filter_map(|(_, s)| *s)
        .map(|s| MirrorAction::Create {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            hash: s.hash.clone(),
        });
    deletes.into_iter().chain(creates).collect()
}

/// How long a write that succeeded is not repeated while the watch has not shown its
/// effect yet: the watch lags the write, and the status store changes (and asks for a
/// new plan) many times a second.
pub const SETTLE: Duration = Duration::from_secs(10);

/// What makes two writes the same: a delete is of a UID whatever the reason (a mirror
/// pod deleted as an orphan shows next, until the watch sees it gone, as being deleted).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum WriteKey {
    Delete { uid: String },
    Create { full_name: String, hash: String },
}

impl WriteKey {
    fn of(action: &MirrorAction) -> Self {
        match action {
            MirrorAction::Delete { uid, .. } => WriteKey::Delete { uid: uid.clone() },
            MirrorAction::Create { hash, .. } => WriteKey::Create {
                full_name: action.full_name(),
                hash: hash.clone(),
            },
        }
    }
}

/// Writes done recently whose effect the watch has not shown yet.
#[derive(Debug, Default)]
pub struct RecentWrites {
    done: HashMap<WriteKey, Instant>,
}

impl RecentWrites {
    /// Remembers a write the API server took.
    pub fn record(&mut self, action: &MirrorAction, now: Instant) {
        self.done.insert(WriteKey::of(action), now);
    }

    /// Forgets writes whose effect `mirrors` shows (a created mirror with its hash is
    /// listed, a deleted UID is not) or that are older than [`SETTLE`], then drops from
    /// `actions` the ones still remembered, and the creates of names whose deleted
    /// mirror pod the watch still shows.
    pub fn filter(
        &mut self,
        actions: Vec<MirrorAction>,
        mirrors: &[MirrorPodState],
        now: Instant,
    ) -> Vec<MirrorAction> {
        self.done.retain(|key, at| {
            if now.duration_since(*at) >= SETTLE {
                return false;
            }
            match key {
                WriteKey::Create { full_name: n, hash } => !mirrors
                    .iter()
                    .any(|m| &full_name(&m.namespace, &m.name) == n && &m.hash == hash),
                WriteKey::Delete { uid } => mirrors.iter().any(|m| &m.uid == uid),
            }
        });
        // A name whose mirror pod was deleted but still shows: its create would only
        // meet the old one (409) until the watch shows it gone.
        let still_shown: HashSet<String> = mirrors
            .iter()
            .filter(|m| {
                self.done
                    .contains_key(&WriteKey::Delete { uid: m.uid.clone() })
            })
            .map(|m| full_name(&m.namespace, &m.name))
            .collect();
        actions
            .into_iter()
            .filter(|a| !self.done.contains_key(&WriteKey::of(a)))
            .filter(|a| {
                !matches!(a, MirrorAction::Create { .. }) || !still_shown.contains(&a.full_name())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, hash: &str, terminating: bool) -> StaticPodState {
        StaticPodState {
            namespace: "default".into(),
            name: name.into(),
            hash: hash.into(),
            terminating,
        }
    }

    fn mirror(name: &str, uid: &str, hash: &str, deleting: bool) -> MirrorPodState {
        MirrorPodState {
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
            hash: hash.into(),
            deleting,
        }
    }

    fn create(name: &str, hash: &str) -> MirrorAction {
        MirrorAction::Create {
            namespace: "default".into(),
            name: name.into(),
            hash: hash.into(),
        }
    }

    fn delete(name: &str, uid: &str, reason: DeleteReason) -> MirrorAction {
        MirrorAction::Delete {
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
            reason,
        }
    }

    #[test]
    fn a_running_static_pod_without_a_mirror_gets_one() {
        assert_eq!(
            plan(&[stat("web-n", "h1", false)], &[]),
            [create("web-n", "h1")]
        );
    }

    #[test]
    fn a_mirror_with_the_static_pods_hash_is_left_alone() {
        let statics = [stat("web-n", "h1", false)];
        assert!(plan(&statics, &[mirror("web-n", "u1", "h1", false)]).is_empty());
    }

    #[test]
    fn an_edited_manifest_replaces_the_mirror_delete_first() {
        let statics = [stat("web-n", "h2", false)];
        assert_eq!(
            plan(&statics, &[mirror("web-n", "u1", "h1", false)]),
            [
                delete("web-n", "u1", DeleteReason::Outdated),
                create("web-n", "h2")
            ]
        );
    }

    #[test]
    fn a_mirror_someone_deletes_is_deleted_at_once_and_created_again() {
        let statics = [stat("web-n", "h1", false)];
        assert_eq!(
            plan(&statics, &[mirror("web-n", "u1", "h1", true)]),
            [
                delete("web-n", "u1", DeleteReason::Deleting),
                create("web-n", "h1")
            ]
        );
    }

    #[test]
    fn a_terminating_static_pod_keeps_its_mirror_and_gets_none_new() {
        let statics = [stat("web-n", "h1", true)];
        assert!(plan(&statics, &[mirror("web-n", "u1", "h1", false)]).is_empty());
        assert!(plan(&statics, &[]).is_empty());
        // Even one someone is deleting: its statuses still go there until it goes.
        assert!(plan(&statics, &[mirror("web-n", "u1", "h0", true)]).is_empty());
    }

    #[test]
    fn the_old_version_terminating_beside_the_new_one_running_lets_the_new_one_decide() {
        let statics = [stat("web-n", "h1", true), stat("web-n", "h2", false)];
        assert_eq!(
            plan(&statics, &[mirror("web-n", "u1", "h1", false)]),
            [
                delete("web-n", "u1", DeleteReason::Outdated),
                create("web-n", "h2")
            ]
        );
    }

    #[test]
    fn mirrors_of_no_static_pod_are_orphans() {
        let statics = [stat("web-n", "h1", false)];
        let mirrors = [
            mirror("web-n", "u1", "h1", false),
            mirror("gone-n", "u2", "h9", false),
        ];
        assert_eq!(
            plan(&statics, &mirrors),
            [delete("gone-n", "u2", DeleteReason::Orphan)]
        );
    }

    #[test]
    fn the_namespace_is_part_of_the_name() {
        let statics = [StaticPodState {
            namespace: "kube-system".into(),
            ..stat("web-n", "h1", false)
        }];
        let mirrors = [mirror("web-n", "u1", "h1", false)];
        assert_eq!(
            plan(&statics, &mirrors),
            [
                delete("web-n", "u1", DeleteReason::Orphan),
                MirrorAction::Create {
                    namespace: "kube-system".into(),
                    name: "web-n".into(),
                    hash: "h1".into()
                }
            ]
        );
    }

    #[test]
    fn a_deleted_uid_is_not_deleted_again_for_another_reason() {
        let mut recent = RecentWrites::default();
        let t0 = Instant::now();
        recent.record(&delete("web-n", "u1", DeleteReason::Orphan), t0);
        // The watch shows it marked for deletion before it shows it gone.
        let marked = [mirror("web-n", "u1", "h1", true)];
        let statics = [stat("web-n", "h1", false)];
        // Nor is its successor created while it shows (the name is still taken).
        assert!(
            recent
                .filter(plan(&statics, &marked), &marked, t0)
                .is_empty()
        );
        // Once gone, the create goes.
        assert_eq!(
            recent.filter(plan(&statics, &[]), &[], t0),
            [create("web-n", "h1")]
        );
    }

    #[test]
    fn a_write_is_not_repeated_until_the_watch_shows_it_or_it_settled() {
        let mut recent = RecentWrites::default();
        let t0 = Instant::now();
        recent.record(&create("web-n", "h2"), t0);
        recent.record(&delete("web-n", "u1", DeleteReason::Outdated), t0);
        let statics = [stat("web-n", "h2", false)];
        // The watch still shows the old mirror: both writes are held back.
        let stale = [mirror("web-n", "u1", "h1", false)];
        assert!(recent.filter(plan(&statics, &stale), &stale, t0).is_empty());
        // It shows the new one: nothing is to be done, and nothing is remembered.
        let fresh = [mirror("web-n", "u2", "h2", false)];
        assert!(recent.filter(plan(&statics, &fresh), &fresh, t0).is_empty());
        assert!(recent.done.is_empty());
        // Deleted again by someone afterwards: created again at once.
        assert_eq!(
            recent.filter(plan(&statics, &[]), &[], t0),
            [create("web-n", "h2")]
        );
        // A write the watch never confirmed is tried again once it settled.
        recent.record(&create("web-n", "h2"), t0);
        assert!(recent.filter(plan(&statics, &[]), &[], t0).is_empty());
        assert_eq!(
            recent.filter(plan(&statics, &[]), &[], t0 + SETTLE),
            [create("web-n", "h2")]
        );
    }
}
