//! configMap, secret, downwardAPI and projected volumes of a pod: their files are
//! written (the `..data` swap of `volume::content`) into the tmpfs `volume` made for
//! each, before a container that mounts one starts, and kept fresh while the pod runs
//! (a changed `--config-dir` object, or for an API pod a changed object of the API
//! server, is in the volume within a few seconds).

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use tokio::task::JoinSet;

use super::context::{Ctx, PodInfo};
use super::error::ConfigError;
use podhost_status::EventKind;
use podhost_volume::content::{ContentVolume, keep_fresh, refresh_volume};
use podhost_volume::plan::{VolumeSource, plan_pod_volumes};

/// How often content volumes are re-written besides on each config-dir change (the
/// downward API's labels and annotations cannot change for a static pod; this catches
/// a missed change).
const REFRESH_PERIOD: Duration = Duration::from_secs(5);

/// The pod's content volumes: each spec volume with the tmpfs dir it lives in.
fn content_volumes(ctx: &Ctx, pod: &PodInfo) -> Vec<ContentVolume> {
    let dir = ctx.layout.pod_volumes_dir(&pod.uid);
    let Ok(plan) = plan_pod_volumes(&pod.pod, &dir, ctx.allocatable_memory()) else {
        return Vec::new(); // a spec error is each container's config error
    };
    let specs = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    plan.volumes
        .iter()
        .filter(|v| matches!(v.source, VolumeSource::Content { .. }))
        .filter_map(|v| {
            let volume = specs.iter().find(|s| s.name == v.name)?.clone();
            Some(ContentVolume {
                record: ctx.layout.content_payload_record(&pod.uid, &v.name),
                volume,
                dir: v.host_path.clone(),
            })
        })
        .collect()
}

fn fs_group(pod: &PodInfo) -> Option<u32> {
    let gid = pod.pod.spec.as_ref()?.security_context.as_ref()?.fs_group?;
    u32::try_from(gid).ok()
}

/// Writes the files of the content volumes `c` mounts; `Err` says why one cannot be
/// (a missing ConfigMap, Secret or key that is not optional), as the kubelet's
/// `MountVolume.SetUp failed` message.
pub fn fill_for_container(ctx: &Ctx, pod: &PodInfo, c: &Container) -> Result<(), ConfigError> {
    let mounted: Vec<&str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .collect();
    let objects = super::config_source::current(ctx, pod);
    let inputs = pod.downward_inputs(ctx);
    for v in content_volumes(ctx, pod) {
        if !mounted.contains(&v.volume.name.as_str()) {
            continue;
        }
        refresh_volume(&v, &pod.pod, objects.lookup(), &inputs, fs_group(pod)).map_err(
            |source| ConfigError::ContentVolume {
                volume: v.volume.name.clone(),
                source: Box::new(source),
            },
        )?;
    }
    Ok(())
}

/// Keeps the pod's content volumes fresh until the task is aborted with the pod's tasks;
/// a volume that cannot be refreshed keeps its last files and is a `FailedMount` event.
/// `latest` is the pod's object as its source has it now (its labels and annotations).
pub fn spawn_refresher(
    ctx: &std::sync::Arc<Ctx>,
    pod: &std::sync::Arc<PodInfo>,
    latest: tokio::sync::watch::Receiver<std::sync::Arc<k8s_openapi::api::core::v1::Pod>>,
    tasks: &mut JoinSet<()>,
) {
    let volumes = content_volumes(ctx, pod);
    if volumes.is_empty() {
        return;
    }
    let store = ctx.store.clone();
    let (uid, object) = (pod.uid.clone(), format!("pod/{}", pod.name));
    let report = move |volume: &str, e: &podhost_volume::content::ContentError| {
        store.pod_event(
            &uid,
            EventKind::Warning,
            "FailedMount",
            &object,
            format!("MountVolume.SetUp failed for volume \"{volume}\": {e}"),
        );
    };
    let (inputs, group) = (pod.downward_inputs(ctx), fs_group(pod));
    match super::config_source::api_channel(ctx, pod) {
        Some(api) => tasks.spawn(keep_fresh(
            volumes,
            latest,
            inputs,
            group,
            api,
            REFRESH_PERIOD,
            report,
        )),
        None => tasks.spawn(keep_fresh(
            volumes,
            latest,
            inputs,
            group,
            ctx.config_objects.clone(),
            REFRESH_PERIOD,
            report,
        )),
    };
}
