//! The ConfigMaps and Secrets the node's API pods refer to, followed from the API
//! server as the kubelet's default (`Watch`) configmap and secret managers do: one
//! list + watch per referenced object (`fieldSelector=metadata.name=<name>` in its
//! namespace — the Node authorizer lets a node read exactly the objects its bound pods
//! name, never a namespace's whole set), started when a pod first names the object
//! and stopped when no pod does any more. Each answer lands in one [`ObjectSet`] that
//! the pods' workers read their env and volumes from; a changed object reaches the
//! volumes that hold it through the workers' refreshers.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use podhost_model::config_refs::{ObjectKind, ObjectRef, ObjectSet, ObjectState, TokenRef};

type SetSender = Arc<watch::Sender<Arc<ObjectSet>>>;

/// The watches of the referenced objects; dropping it stops them all.
pub struct ObjectWatches {
    client: kube::Client,
    tasks: HashMap<ObjectRef, JoinHandle<()>>,
    /// Service account tokens, each kept fresh by its task (`tokens`).
    token_tasks: HashMap<TokenRef, JoinHandle<()>>,
    tx: SetSender,
}

impl ObjectWatches {
    /// No object followed yet; `tx` is where the objects go (its receivers are the
    /// workers').
    pub fn new(client: kube::Client, tx: watch::Sender<Arc<ObjectSet>>) -> Self {
        Self {
            client,
            tasks: HashMap::new(),
            token_tasks: HashMap::new(),
            tx: Arc::new(tx),
        }
    }

    /// Follows exactly `refs`: a watch starts for each new reference (pending until its
    /// first list answers), the watch of a reference no pod names any more stops and
    /// its object is forgotten.
    pub fn set_refs(&mut self, refs: &BTreeSet<ObjectRef>) {
        self.tasks.retain(|r, task| {
            let keep = refs.contains(r);
            if !keep {
                tracing::debug!(object = %r, "no pod refers to it any more: watch stopped");
                task.abort();
            }
            keep
        });
        self.tx.send_if_modified(|set| {
            let mut next = (**set).clone();
            next.retain_refs(refs);
            let changed = next != **set;
            *set = Arc::new(next);
            changed
        });
        for r in refs {
            if self.tasks.contains_key(r) {
                continue;
            }
            tracing::debug!(object = %r, "a pod refers to it: watching");
            let task = match r.kind {
                ObjectKind::ConfigMap => {
                    let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &r.namespace);
                    tokio::spawn(follow(api, r.clone(), self.tx.clone(), |set, key, s| {
                        replace(&mut set.config_maps, key, s)
                    }))
                }
                ObjectKind::Secret => {
                    let api: Api<Secret> = Api::namespaced(self.client.clone(), &r.namespace);
                    tokio::spawn(follow(api, r.clone(), self.tx.clone(), |set, key, s| {
                        replace(&mut set.secrets, key, s)
                    }))
                }
            };
            self.tasks.insert(r.clone(), task);
        }
    }
}

impl ObjectWatches {
    /// Keeps exactly the tokens of `refs`: a new one is requested (pending until
    /// issued), one no pod asks for any more is forgotten.
    pub fn set_tokens(&mut self, refs: &BTreeSet<TokenRef>) {
        self.token_tasks.retain(|r, task| {
            let keep = refs.contains(r);
            if !keep {
                task.abort();
            }
            keep
        });
        self.tx.send_if_modified(|set| {
            let mut next = (**set).clone();
            next.retain_tokens(refs);
            let changed = next != **set;
            *set = Arc::new(next);
            changed
        });
        for r in refs {
            if !self.token_tasks.contains_key(r) {
                let task = tokio::spawn(super::tokens::keep_token(
                    self.client.clone(),
                    r.clone(),
                    self.tx.clone(),
                ));
                self.token_tasks.insert(r.clone(), task);
            }
        }
    }
}

impl Drop for ObjectWatches {
    fn drop(&mut self) {
        for task in self.tasks.values().chain(self.token_tasks.values()) {
            task.abort();
        }
    }
}

/// Puts `state` in `map` under `key` if the reference is still followed; true when
/// that changed what the map held.
fn replace<T: PartialEq>(
    map: &mut std::collections::BTreeMap<(String, String), ObjectState<T>>,
    key: &(String, String),
    state: ObjectState<T>,
) -> bool {
    match map.get_mut(key) {
        Some(slot) if *slot != state => {
            *slot = state;
            true
        }
        _ => false,
    }
}

/// A function that stores one object's state in the set; true when it changed.
type Store<K> = fn(&mut ObjectSet, &(String, String), ObjectState<K>) -> bool;

/// One object's list + watch (kube-runtime's watcher: relist on 410 Gone, retried
/// with backoff, e.g. while the Node authorizer has not yet seen the pod that names
/// it), for as long as the task is not aborted.
async fn follow<K>(api: Api<K>, r: ObjectRef, tx: SetSender, store: Store<K>)
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={}", r.name));
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    let key = (r.namespace.clone(), r.name.clone());
    let mut listed: Option<Option<K>> = None;
    let mut failing = false;
    while let Some(event) = events.next().await {
        let state = match event {
            Err(e) => {
                if !failing {
                    tracing::warn!(object = %r, error = %e, "reading a referenced object failed; retrying with backoff");
                }
                failing = true;
                continue;
            }
            Ok(Event::Init) => {
                listed = Some(None);
                continue;
            }
            Ok(Event::InitApply(obj)) => {
                listed = Some(Some(slim(obj)));
                continue;
            }
            Ok(Event::InitDone) => match listed.take().flatten() {
                Some(obj) => ObjectState::Present(obj),
                None => ObjectState::Missing,
            },
            Ok(Event::Apply(obj)) => ObjectState::Present(slim(obj)),
            Ok(Event::Delete(_)) => ObjectState::Missing,
        };
        if failing {
            tracing::info!(object = %r, "reading a referenced object again");
            failing = false;
        }
        let found = matches!(state, ObjectState::Present(_));
        let changed = tx.send_if_modified(|set| {
            let mut next = (**set).clone();
            let changed = store(&mut next, &key, state);
            if changed {
                *set = Arc::new(next);
            }
            changed
        });
        if changed {
            tracing::debug!(object = %r, found, "referenced object changed");
        }
    }
}

/// The object without the server's field bookkeeping, which the node never reads.
fn slim<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_followed_reference_is_stored_and_only_a_change_counts() {
        let mut set = ObjectSet::default();
        let key = ("ns".to_string(), "a".to_string());
        let cm = ConfigMap {
            data: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        };
        // Not followed (its pod went away while the watch answered): dropped.
        assert!(!replace(
            &mut set.config_maps,
            &key,
            ObjectState::Present(cm.clone())
        ));
        assert!(set.config_maps.is_empty());
        set.config_maps.insert(key.clone(), ObjectState::Pending);
        assert!(replace(
            &mut set.config_maps,
            &key,
            ObjectState::Present(cm.clone())
        ));
        assert!(!replace(
            &mut set.config_maps,
            &key,
            ObjectState::Present(cm)
        ));
        assert!(replace(&mut set.config_maps, &key, ObjectState::Missing));
    }
}
