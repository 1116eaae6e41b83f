//! Performs the core's `Start`: the image per its pull policy, the bundle, the shim.
//! Everything that happens is reported back; nothing here decides what comes next.

use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::core::v1::Container;

use super::context::{Ctx, PodInfo};
use super::error::WorkerError;
use super::prepare::prepare_attempt;
use super::report::{Report, ReportSender, Running};
use podhost_disk::container_id;
use podhost_disk::records::{EXIT_FILE, ExitRecord};
use podhost_disk::write_json_atomic;
use podhost_image::ResolvedImage;
use podhost_model::podsync::{BlockKind, PullDecision, Termination, pull_decision};
use podhost_runtime::process_handle::ProcessHandle;
use podhost_runtime::shim_client;
use podhost_status::EventKind;

/// The exit code a start that failed counts as (as containerd reports it).
const START_FAILED_EXIT_CODE: i32 = 128;

/// Starts attempt `attempt` of `c` and reports how it went; `target` is the init of
/// the container whose pid namespace an ephemeral container joins.
pub async fn start(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    c: Container,
    attempt: u32,
    target: Option<ProcessHandle>,
    reports: ReportSender,
) {
    let _ = reports.send(start_report(&ctx, &pod, &c, attempt, target).await);
}

async fn start_report(
    ctx: &Arc<Ctx>,
    pod: &Arc<PodInfo>,
    c: &Container,
    attempt: u32,
    target: Option<ProcessHandle>,
) -> Report {
    let name = c.name.clone();
    let container_type = container_type(pod, &name);
    podhost_metrics::container_started(container_type);
    let image = match ensure_image(ctx, pod, c).await {
        Ok(image) => image,
        Err(e) => {
            let (kind, code) = match e {
                WorkerError::ImageNotPresent { .. } | WorkerError::LocalImageNotPresent { .. } => {
                    (BlockKind::ImageNeverPull, "ErrImageNeverPull")
                }
                _ => (BlockKind::Image, "ErrImagePull"),
            };
            podhost_metrics::container_start_failed(container_type, code);
            let message = e.to_string();
            event(ctx, pod, c, EventKind::Warning, "Failed", message.clone());
            return Report::Blocked {
                container: name,
                kind,
                message,
            };
        }
    };
    let _ = ctx.images.touch(&image.reference);
    let image_id = image.manifest_digest.clone();
    let id = container_id(&pod.uid, &c.name, attempt);
    // An API pod's service variables need the Services listed once (the kubelet's
    // "services have not yet been read at least once"), retried like any config error.
    if let Err(e) =
        super::service_source::wait_for_services(ctx, pod, super::config_source::FIRST_ANSWER_WAIT)
            .await
    {
        podhost_metrics::container_start_failed(container_type, "CreateContainerConfigError");
        return config_error(ctx, pod, c, attempt, e.to_string());
    }
    // An API pod's ConfigMaps and Secrets: their watches answer once before the env
    // and volumes are built from them (else a missing one would be only unknown).
    if let Err(message) = super::config_source::wait_for_first_answers(
        ctx,
        pod,
        super::config_source::FIRST_ANSWER_WAIT,
    )
    .await
    {
        podhost_metrics::container_start_failed(container_type, "CreateContainerConfigError");
        return config_error(ctx, pod, c, attempt, message.to_string());
    }
    // The shim's start will wait on the kernel's cgroup-migration grace period: it
    // begins now, during the bundle's preparation, and the shim's own primer takes over
    // once it runs (see runtime::cgroup_attach_primer).
    let primer = podhost_runtime::cgroup_attach_primer::prime_own_cgroup();
    // Off the async threads: it reads the image's files and writes the bundle.
    let prepared = {
        let (ctx, pod, c) = (ctx.clone(), pod.clone(), c.clone());
        tokio::task::spawn_blocking(move || {
            prepare_attempt(&ctx, &pod, &c, &image, attempt, target.as_ref())
        })
        .await
    };
    let mut prepared = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            podhost_metrics::container_start_failed(container_type, "CreateContainerConfigError");
            return config_error(ctx, pod, c, attempt, e.to_string());
        }
        Err(source) => {
            let e = WorkerError::Task {
                what: "preparing the bundle",
                container: name.clone(),
                source,
            };
            podhost_metrics::container_start_failed(container_type, "CreateContainerConfigError");
            return config_error(ctx, pod, c, attempt, e.to_string());
        }
    };
    // The durable records' fsyncs run while the shim starts the container; the start
    // is reported only once they are done.
    let durability = std::mem::take(&mut prepared.durability);
    let durable = tokio::task::spawn_blocking(move || durability.complete());
    let spawned = shim_client::spawn(&ctx.exe, &prepared.shim).await;
    drop(primer);
    match durable.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::error!(pod = %pod.name, container = %name, error = %e, "the attempt's records may not survive a power loss");
        }
        Err(e) => {
            tracing::error!(pod = %pod.name, container = %name, error = %e, "the attempt's records' fsync task failed")
        }
    }
    match spawned {
        Ok(handle) => {
            if attempt > 0 {
                podhost_metrics::container_restarted(&pod.namespace, &pod.name, &name);
            }
            // The shim creates and starts in one step; the kubelet's two events.
            event(
                ctx,
                pod,
                c,
                EventKind::Normal,
                "Created",
                format!("Created container {name}"),
            );
            event(
                ctx,
                pod,
                c,
                EventKind::Normal,
                "Started",
                format!("Started container {name}"),
            );
            // What the shim could not apply (e.g. oom_score_adj without CAP_SYS_RESOURCE).
            for n in podhost_runtime::not_applied::read(&handle.bundle) {
                event(ctx, pod, c, EventKind::Warning, &n.reason, n.message());
            }
            let run = Running {
                started: handle.started.clone(),
                init: handle.init.clone(),
                attempt,
                container_id: id,
                stop_signal: prepared.stop_signal,
            };
            Report::Started {
                container: name,
                run,
                image_id,
                exit: Box::pin(handle.wait()),
            }
        }
        Err(e) => {
            podhost_metrics::container_start_failed(container_type, "StartError");
            event(
                ctx,
                pod,
                c,
                EventKind::Warning,
                "Failed",
                format!("Error: {e}"),
            );
            Report::Exited {
                container: name,
                attempt,
                termination: start_failed(ctx, pod, c, attempt, &id, e.to_string()),
                released: true,
                recorded: true,
            }
        }
    }
}

/// Which list of the pod's spec `container` is in (an added ephemeral container is in
/// neither of the others).
fn container_type(pod: &PodInfo, container: &str) -> podhost_metrics::ContainerType {
    let spec = pod.pod.spec.as_ref();
    let named =
        |list: Option<&Vec<Container>>| list.is_some_and(|l| l.iter().any(|c| c.name == container));
    if named(spec.map(|s| &s.containers)) {
        podhost_metrics::ContainerType::Container
    } else if named(spec.and_then(|s| s.init_containers.as_ref())) {
        podhost_metrics::ContainerType::Init
    } else {
        podhost_metrics::ContainerType::Ephemeral
    }
}

/// The container cannot be configured: nothing ran in the attempt, so its dir goes and
/// its number is used by the next try.
fn config_error(ctx: &Ctx, pod: &PodInfo, c: &Container, attempt: u32, message: String) -> Report {
    let dir = ctx.layout.attempt_dir(&pod.uid, &c.name, attempt);
    if let Err(e) = std::fs::remove_dir_all(&dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, dir = %dir.display(), "cannot remove an unused attempt dir");
    }
    event(
        ctx,
        pod,
        c,
        EventKind::Warning,
        "Failed",
        format!("Error: {message}"),
    );
    Report::Blocked {
        container: c.name.clone(),
        kind: BlockKind::Config,
        message,
    }
}

/// A start that failed counts as an exit: its end is recorded as a shim's would be, so
/// that a restarted daemon neither loses it nor takes the number again.
fn start_failed(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
    attempt: u32,
    id: &str,
    message: String,
) -> Termination {
    let now = Utc::now();
    let record = ExitRecord {
        exit_code: START_FAILED_EXIT_CODE,
        signal: None,
        started_at: now,
        finished_at: now,
        ..Default::default()
    };
    let bundle = ctx.layout.attempt_dir(&pod.uid, &c.name, attempt);
    if bundle.exists()
        && let Err(e) = write_json_atomic(&bundle.join(EXIT_FILE), &record)
    {
        tracing::warn!(error = %e, "cannot record a failed start");
    }
    Termination {
        exit_code: record.exit_code,
        signal: None,
        started_at: now,
        finished_at: now,
        reason: Some("StartError".into()),
        message: Some(message),
        container_id: Some(format!("podhost://{id}")),
    }
}

/// The image per imagePullPolicy, as the pod-sync core decides it ([`pull_decision`]);
/// a pull uses the pod's image pull secrets before the node's credentials.
async fn ensure_image(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
) -> Result<ResolvedImage, WorkerError> {
    let image_ref = c.image.clone().unwrap_or_default();
    let present = resolve(ctx, &image_ref, &c.name).await;
    let local_only = podhost_image::is_local_only(&image_ref);
    let decision = pull_decision(c.image_pull_policy.as_deref(), local_only, present.is_ok());
    match decision {
        PullDecision::Pull => {}
        PullDecision::UseStored => {
            event(
                ctx,
                pod,
                c,
                EventKind::Normal,
                "Pulled",
                format!("Container image \"{image_ref}\" already present on machine"),
            );
            return present;
        }
        PullDecision::NeverPullMissing { policy } => {
            return Err(match local_only {
                true => WorkerError::LocalImageNotPresent {
                    hint: podhost_image::local_only_hint(&image_ref, &ctx.load_command),
                },
                false => WorkerError::ImageNotPresent {
                    image: image_ref.clone(),
                    policy: policy.to_string(),
                },
            });
        }
    }
    let pod_logins = super::pull_secrets::pod_logins(ctx, pod, &image_ref).await?;
    event(
        ctx,
        pod,
        c,
        EventKind::Normal,
        "Pulling",
        format!("Pulling image \"{image_ref}\""),
    );
    let started = std::time::Instant::now();
    match ctx.puller.pull_with(&image_ref, &pod_logins, None).await {
        Ok(reference) => {
            event(
                ctx,
                pod,
                c,
                EventKind::Normal,
                "Pulled",
                format!(
                    "Successfully pulled image \"{reference}\" in {:.3}s",
                    started.elapsed().as_secs_f64()
                ),
            );
            resolve(ctx, &image_ref, &c.name).await
        }
        Err(source) => Err(WorkerError::Pull {
            image: image_ref,
            source,
        }),
    }
}

/// Looks the image up in the store, off the async threads.
async fn resolve(
    ctx: &Ctx,
    image_ref: &str,
    container: &str,
) -> Result<ResolvedImage, WorkerError> {
    let images = ctx.images.clone();
    let lookup = image_ref.to_string();
    match tokio::task::spawn_blocking(move || images.resolve(&lookup)).await {
        Ok(Ok(image)) => Ok(image),
        Ok(Err(source)) => Err(WorkerError::Resolve {
            image: image_ref.to_string(),
            source,
        }),
        Err(source) => Err(WorkerError::Task {
            what: "resolving the image",
            container: container.to_string(),
            source,
        }),
    }
}

pub(super) fn event(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
    kind: EventKind,
    reason: &str,
    message: String,
) {
    ctx.store
        .pod_event(&pod.uid, kind, reason, &pod.object(&c.name), message);
}
