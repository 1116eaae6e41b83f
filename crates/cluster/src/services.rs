//! The cluster's Services, for the service environment variables of the containers
//! (`model::service_env`): one cluster-wide list + watch of `services`, as the
//! kubelet's Service informer (the Node authorizer lets a node list and watch every
//! Service). Like the kubelet's, it asks only for Services that are not headless
//! (`fieldSelector=spec.clusterIP!=None`): those give no variables. The set is marked
//! synced once the first list has answered; an API pod's containers wait for that.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use podhost_model::service_env::{ServiceEntry, ServiceSet};

/// The field selector of the list and watch: no headless Services.
pub const NOT_HEADLESS: &str = "spec.clusterIP!=None";

/// Lists and watches the Services into `tx` until every receiver is gone (kube-runtime's
/// watcher: relist on 410 Gone, retried with backoff while the server cannot answer).
pub async fn follow_services(client: kube::Client, tx: watch::Sender<Arc<ServiceSet>>) {
    let api: Api<Service> = Api::all(client);
    let config = watcher::Config::default().fields(NOT_HEADLESS);
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    // A (re)list in progress: what it has given so far. The previous set stays what
    // containers see until the list is complete.
    let mut listing: Option<ServiceSet> = None;
    let mut failing = false;
    loop {
        let event = tokio::select! {
            () = tx.closed() => return,
            event = events.next() => event,
        };
        let Some(event) = event else { return };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "listing or watching the Services failed; retrying with backoff");
                }
                failing = true;
                continue;
            }
        };
        if failing {
            tracing::info!("reading the Services again");
            failing = false;
        }
        match event {
            Event::Init => listing = Some(ServiceSet::default()),
            Event::InitApply(svc) => {
                if let (Some(set), Some(key)) = (listing.as_mut(), key(&svc)) {
                    set.services.insert(key, ServiceEntry::of(&svc));
                }
            }
            Event::InitDone => {
                let mut listed = listing.take().unwrap_or_default();
                listed.synced = true;
                tracing::debug!(services = listed.services.len(), "Services listed");
                tx.send_if_modified(|set| {
                    let changed = **set != listed;
                    if changed {
                        *set = Arc::new(listed);
                    }
                    changed
                });
            }
            Event::Apply(svc) => {
                let Some(key) = key(&svc) else { continue };
                let entry = ServiceEntry::of(&svc);
                tx.send_if_modified(|set| {
                    if set.services.get(&key) == Some(&entry) {
                        return false;
                    }
                    Arc::make_mut(set).services.insert(key, entry);
                    true
                });
            }
            Event::Delete(svc) => {
                let Some(key) = key(&svc) else { continue };
                tx.send_if_modified(|set| {
                    if !set.services.contains_key(&key) {
                        return false;
                    }
                    Arc::make_mut(set).services.remove(&key);
                    true
                });
            }
        }
    }
}

/// A Service's (namespace, name); `None` for an object without them (never from a
/// real server).
fn key(svc: &Service) -> Option<(String, String)> {
    Some((svc.metadata.namespace.clone()?, svc.metadata.name.clone()?))
}
