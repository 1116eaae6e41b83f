//! Pods of the API server as the pod manager runs them: the object as bound to the
//! node, with the kubelet's `kubernetes.io/config.source: api` and `config.seen`
//! annotations and no status (the node's own status replaces the API's), converted
//! once per version of the object.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use podhost_cluster::pods::BoundPods;
use podhost_source::{ANNOTATION_CONFIG_SEEN, ANNOTATION_CONFIG_SOURCE, StaticPod};

pub use podhost_source::{SOURCE_API, is_api_pod};

/// The grace a pod of the API server is terminated with: its deletion grace once the
/// API server set one (a force delete's 0 included, raised to the pod worker's 1 s
/// minimum), else its spec's.
pub fn api_grace(pod: &Pod) -> Duration {
    let spec_grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds);
    podhost_model::grace::pod_grace(pod.metadata.deletion_grace_period_seconds.or(spec_grace))
}

/// Whether the API server reports the pod in a terminal phase.
pub fn is_terminal_in_api(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .is_some_and(podhost_model::terminal_status::is_terminal)
}

/// Converts the API's pods to the manager's entries, reusing the conversion of an
/// object whose resourceVersion did not change.
#[derive(Debug, Default)]
pub struct ApiPodCache {
    converted: HashMap<String, (Option<String>, StaticPod)>,
}

impl ApiPodCache {
    /// The pods of `bound`, as entries the manager runs, in UID order.
    pub fn entries(&mut self, bound: &BoundPods) -> Vec<StaticPod> {
        let mut fresh = HashMap::with_capacity(bound.pods.len());
        let mut out = Vec::with_capacity(bound.pods.len());
        for (uid, pod) in &bound.pods {
            let version = pod.metadata.resource_version.clone();
            let entry = match self.converted.remove(uid) {
                Some((v, entry)) if v == version => entry,
                _ => convert(uid, pod),
            };
            out.push(entry.clone());
            fresh.insert(uid.clone(), (version, entry));
        }
        self.converted = fresh;
        out
    }
}

fn convert(uid: &str, api: &Pod) -> StaticPod {
    let mut pod = api.clone();
    pod.status = None;
    // Server-side bookkeeping the node never uses; it would only weigh on every copy.
    pod.metadata.managed_fields = None;
    let annotations = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(ANNOTATION_CONFIG_SOURCE.to_string(), SOURCE_API.to_string());
    annotations.insert(
        ANNOTATION_CONFIG_SEEN.to_string(),
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string());
    let warnings = serde_json::to_value(&pod.spec)
        .map(|spec| {
            podhost_source::unhonoured_fields_for(
                &serde_json::json!({ "spec": spec }),
                podhost_source::FieldOrigin::Api,
            )
        })
        .unwrap_or_default();
    StaticPod {
        path: PathBuf::from(format!("api:{namespace}/{name}")),
        pod: Arc::new(pod),
        uid: uid.to_string(),
        name,
        namespace,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn api_pod(uid: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some("web".into()),
                namespace: Some("team".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            spec: Some(Default::default()),
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Running".into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn an_api_pod_runs_with_its_identity_the_api_source_and_no_status() {
        let mut bound = BoundPods::default();
        bound.pods.insert("u1".into(), Arc::new(api_pod("u1", "5")));
        let mut cache = ApiPodCache::default();
        let entries = cache.entries(&bound);
        assert_eq!(entries.len(), 1);
        let e = &entries[0];
        assert_eq!((e.uid.as_str(), e.name.as_str()), ("u1", "web"));
        assert_eq!(e.namespace, "team");
        assert!(is_api_pod(&e.pod));
        assert!(e.pod.status.is_none());
        // The same version is not converted again (its seen time stays).
        let again = cache.entries(&bound);
        assert!(Arc::ptr_eq(&again[0].pod, &e.pod));
        bound.pods.insert("u1".into(), Arc::new(api_pod("u1", "6")));
        assert!(!Arc::ptr_eq(&cache.entries(&bound)[0].pod, &e.pod));
    }

    #[test]
    fn terminal_phases_in_the_api() {
        let mut pod = api_pod("u", "1");
        assert!(!is_terminal_in_api(&pod));
        pod.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(is_terminal_in_api(&pod));
    }

    #[test]
    fn the_deletion_grace_wins_and_a_force_delete_still_gets_a_second() {
        let mut pod = api_pod("u", "1");
        pod.spec.as_mut().unwrap().termination_grace_period_seconds = Some(30);
        assert_eq!(api_grace(&pod), Duration::from_secs(30));
        pod.metadata.deletion_grace_period_seconds = Some(5);
        assert_eq!(api_grace(&pod), Duration::from_secs(5));
        pod.metadata.deletion_grace_period_seconds = Some(0);
        assert_eq!(api_grace(&pod), Duration::from_secs(1));
    }

    #[test]
    fn placement_fields_are_honoured_for_api_pods_only() {
        let spec = serde_json::json!({"spec": {
            "nodeSelector": {"disk": "ssd"},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname"}]}
            }
        }});
        let api = podhost_source::unhonoured_fields_for(&spec, podhost_source::FieldOrigin::Api);
        assert_eq!(api, Vec::<String>::new());
        let manifest = podhost_source::unhonoured_fields(&spec);
        assert_eq!(
            manifest,
            vec![
                "spec.affinity is ignored: a static pod runs on the node whose manifest directory holds it",
                "spec.nodeSelector is ignored: a static pod runs on the node whose manifest directory holds it",
            ]
        );
    }
}
