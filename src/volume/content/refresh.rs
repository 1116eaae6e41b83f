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
use crate::model::downward::DownwardInputs;
use crate::model::env::ConfigLookup;

/// A content volume of a pod and the directory (VOL's mount) it is written into.
#[derive(Debug, Clone)]
pub struct ContentVolume {
    pub volume: Volume,
    pub dir: PathBuf,
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
    write_atomically(&target.dir, &files, fs_group)
}

/// Refreshes `volumes` whenever `objects` changes and every `period`, until the
/// store's sender is gone (or the task is aborted with the pod). `report` gets each
/// volume's error when it first appears or its message changes (the worker's
/// FailedMount event); a volume keeps its last good payload meanwhile.
pub async fn keep_fresh<T>(
    volumes: Vec<ContentVolume>,
    pod: Pod,
    inputs: DownwardInputs,
    fs_group: Option<u32>,
    mut objects: watch::Receiver<Arc<T>>,
    period: Duration,
    report: impl Fn(&str, &ContentError) + Send + 'static,
) where
    T: ConfigLookup + Send + Sync + 'static,
{
    let pod = Arc::new(pod);
    let inputs = Arc::new(inputs);
    let mut last_error: HashMap<String, String> = HashMap::new();
    let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = objects.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
        let store = objects.borrow_and_update().clone();
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
