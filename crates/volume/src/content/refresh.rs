//! Keeping a running pod's content volumes current: the kubelet rewrites them within
//! its sync period; podhost does on every change of the config store and every
//! `period` (the downward API's inputs can change too).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Volume};
use tokio::sync::watch;

use super::{ContentError, volume_files, write_atomically};
use podhost_model::downward::DownwardInputs;
use podhost_model::env::ConfigLookup;

/// A content volume of a pod and the directory (VOL's mount) it is written into.
#[derive(Debug, Clone)]
pub struct ContentVolume {
    pub volume: Volume,
    pub dir: PathBuf,
    /// Where what podhost wrote into `dir` is recorded (root-only, outside `dir`).
    pub record: PathBuf,
}

/// Builds `target`'s files and writes them atomically; true when they changed.
pub fn refresh_volume(
    target: &ContentVolume,
    pod: &Pod,
    objects: &dyn ConfigLookup,
    inputs: &DownwardInputs,
    fs_group: Option<u32>,
) -> Result<bool, ContentError> {
    let files = volume_files(&target.volume, pod, objects, inputs)?;
    write_atomically(&target.dir, &files, fs_group, &target.record)
}

/// Refreshes `volumes` whenever `objects` changes and every `period`, until the
/// store's sender is gone (or the task is aborted with the pod). `report` gets each
/// volume's error when it first appears or its message changes (the worker's
/// FailedMount event); a volume keeps its last good payload meanwhile.
pub async fn keep_fresh<T>(
    volumes: Vec<ContentVolume>,
    mut latest: watch::Receiver<Arc<Pod>>,
    inputs: DownwardInputs,
    fs_group: Option<u32>,
    mut objects: watch::Receiver<Arc<T>>,
    period: Duration,
    report: impl Fn(&str, &ContentError) + Send + 'static,
) where
    T: ConfigLookup + Send + Sync + 'static,
{
    let inputs = Arc::new(inputs);
    // The pod's object stops changing once its source forgets it (a static pod's never
    // does): the loop then goes on with the last one.
    let mut pod_followed = true;
    let mut last_error: HashMap<String, String> = HashMap::new();
    let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = objects.changed() => if changed.is_err() { return },
            changed = latest.changed(), if pod_followed => pod_followed = changed.is_ok(),
            _ = tick.tick() => {}
        }
        let store = objects.borrow_and_update().clone();
        let pod = latest.borrow_and_update().clone();
        // Objects or tokens still unanswered (a pod bound a moment ago, a restarted
        // daemon's watches): the volume keeps what it has and nothing is reported; the
        // answer's arrival wakes this loop.
        if !store.answered_for(&pod) {
            continue;
        }
        for target in &volumes {
            let (t, p, i, s) = (target.clone(), pod.clone(), inputs.clone(), store.clone());
            let outcome = tokio::task::spawn_blocking(move || {
                refresh_volume(&t, &p, s.as_ref(), &i, fs_group)
            })
            .await;
            match outcome {
                Ok(Ok(changed)) => {
                    last_error.remove(&target.volume.name);
                    if changed {
                        tracing::debug!(volume = %target.volume.name, dir = %target.dir.display(), "content volume updated");
                    }
                }
                Ok(Err(e)) => {
                    let message = e.to_string();
                    if last_error.get(&target.volume.name) != Some(&message) {
                        report(&target.volume.name, &e);
                        last_error.insert(target.volume.name.clone(), message);
                    }
                }
                Err(e) => {
                    tracing::error!(volume = %target.volume.name, error = %e, "refreshing a content volume panicked")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use std::sync::Mutex;

    /// A store holding at most one ConfigMap, `default/app`, with key `k`.
    struct OneConfigMap(Option<ConfigMap>);

    impl ConfigLookup for OneConfigMap {
        fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
            self.0
                .as_ref()
                .filter(|_| namespace == "default" && name == "app")
        }
        fn secret(&self, _: &str, _: &str) -> Option<&Secret> {
            None
        }
    }

    fn store(value: Option<&str>) -> Arc<OneConfigMap> {
        Arc::new(OneConfigMap(value.map(|v| ConfigMap {
            data: Some([("k".to_string(), v.to_string())].into()),
            ..Default::default()
        })))
    }

    async fn wait_for(path: &std::path::Path, want: &str) {
        for _ in 0..400 {
            if std::fs::read_to_string(path).is_ok_and(|s| s == want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{} never held {want:?}", path.display());
    }

    #[tokio::test]
    async fn a_changed_annotation_reaches_the_downward_api_volume() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let volume: Volume = serde_json::from_value(serde_json::json!({
            "name": "podinfo", "downwardAPI": {"items": [
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
            ]}
        }))
        .unwrap();
        let pod = |builder: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "p", "namespace": "default",
                                 "annotations": {"builder": builder}}
                }))
                .unwrap(),
            )
        };
        let (pod_tx, pod_rx) = watch::channel(pod("bar"));
        let (_objects_tx, objects_rx) = watch::channel(store(None));
        let task = tokio::spawn(keep_fresh(
            vec![ContentVolume {
                volume,
                dir: dir.path().to_path_buf(),
                record: state.path().join("podinfo"),
            }],
            pod_rx,
            DownwardInputs::default(),
            None,
            objects_rx,
            // Far beyond the test: the change itself must wake the refresher.
            Duration::from_secs(3600),
            |_: &str, e: &ContentError| panic!("{e}"),
        ));
        let file = dir.path().join("annotations");
        wait_for(&file, "builder=\"bar\"").await;
        pod_tx.send(pod("foo")).unwrap();
        wait_for(&file, "builder=\"foo\"").await;
        task.abort();
    }

    #[tokio::test]
    async fn store_changes_reach_the_volume_and_errors_keep_the_last_payload() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let volume: Volume = serde_json::from_value(serde_json::json!({
            "name": "cfg", "configMap": {"name": "app"}
        }))
        .unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"}
        }))
        .unwrap();
        let (tx, rx) = watch::channel(store(Some("v1")));
        let reports = Arc::new(Mutex::new(Vec::new()));
        let seen = reports.clone();
        let task = tokio::spawn(keep_fresh(
            vec![ContentVolume {
                volume,
                dir: dir.path().to_path_buf(),
                record: state.path().join("cfg"),
            }],
            watch::channel(Arc::new(pod)).1,
            DownwardInputs::default(),
            None,
            rx,
            Duration::from_secs(3600),
            move |volume: &str, e: &ContentError| {
                seen.lock().unwrap().push(format!("{volume}: {e}"));
            },
        ));
        let file = dir.path().join("k");
        wait_for(&file, "v1").await;
        tx.send(store(Some("v2"))).unwrap();
        wait_for(&file, "v2").await;
        // The object goes away: reported once, the volume keeps its last payload.
        tx.send(store(None)).unwrap();
        for _ in 0..400 {
            if !reports.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(
            reports.lock().unwrap().as_slice(),
            [
                "cfg: volume \"cfg\": configmap \"app\" not found (add it to the config dir, or set optional: true)"
            ]
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "v2");
        drop(tx);
        task.await.unwrap();
    }

    /// The service-account volume every API pod has (kube-api-access-*): a token and
    /// the cluster's CA from kube-root-ca.crt.
    fn api_access_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "team", "uid": "u1"},
            "spec": {"containers": [], "volumes": [{"name": "api", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
            ]}}]}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn nothing_is_reported_until_the_pods_objects_and_tokens_have_answered() {
        use podhost_model::config_refs::{ObjectSet, ObjectState, pod_token_refs};
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let pod = api_access_pod();
        let volume = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0].clone();
        let token = pod_token_refs(&pod).into_iter().next().unwrap();
        // A daemon just (re)started: the token is requested, the ConfigMap's watch has
        // not listed yet.
        let mut set = ObjectSet::default();
        set.tokens.insert(token.clone(), ObjectState::Pending);
        let (tx, rx) = watch::channel(Arc::new(set.clone()));
        let reports = Arc::new(Mutex::new(Vec::new()));
        let seen = reports.clone();
        let task = tokio::spawn(keep_fresh(
            vec![ContentVolume {
                volume,
                dir: dir.path().to_path_buf(),
                record: state.path().join("api"),
            }],
            watch::channel(Arc::new(pod)).1,
            DownwardInputs::default(),
            None,
            rx,
            Duration::from_millis(100),
            move |volume: &str, e: &ContentError| {
                seen.lock().unwrap().push(format!("{volume}: {e}"));
            },
        ));
        // Several periods pass unanswered: no FailedMount, nothing written.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(reports.lock().unwrap().is_empty(), "{reports:?}");
        assert!(!dir.path().join("token").exists());
        // The token is issued, the ConfigMap still unlisted: still nothing to report.
        set.tokens
            .insert(token, ObjectState::Present("t0k3n".into()));
        tx.send(Arc::new(set.clone())).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(reports.lock().unwrap().is_empty(), "{reports:?}");
        // Both answered: the volume is written, still without a report.
        let ca = ConfigMap {
            data: Some([("ca.crt".to_string(), "CA".to_string())].into()),
            ..Default::default()
        };
        set.config_maps.insert(
            ("team".into(), "kube-root-ca.crt".into()),
            ObjectState::Present(ca),
        );
        tx.send(Arc::new(set.clone())).unwrap();
        wait_for(&dir.path().join("token"), "t0k3n").await;
        wait_for(&dir.path().join("ca.crt"), "CA").await;
        assert!(reports.lock().unwrap().is_empty(), "{reports:?}");
        // A listed answer that the object is gone is reported, once.
        set.config_maps.insert(
            ("team".into(), "kube-root-ca.crt".into()),
            ObjectState::Missing,
        );
        tx.send(Arc::new(set)).unwrap();
        for _ in 0..400 {
            if !reports.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let reports = reports.lock().unwrap().clone();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(reports[0].contains("kube-root-ca.crt"), "{reports:?}");
        drop(tx);
        task.await.unwrap();
    }
}
