//! Turns a pod's container and its image into a ready OCI bundle and shim config.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;
use nix::sys::signal::Signal;

use super::context::{Ctx, PodInfo};
use super::error::ConfigError;
use podhost_disk::container_id;
use podhost_disk::records::{IMAGE_NAME_FILE, IMAGE_REF_FILE};
use podhost_image::{ImageUser, ResolvedImage, UserError, UserRequest, resolve_user};
use podhost_model::command::{expand_env_refs, merge_command};
use podhost_model::security::{
    ContainerSecurity, ImageUserId, container_security, pod_ref, verify_run_as_non_root,
};
use podhost_runtime::RuntimeError;
use podhost_runtime::process_handle::ProcessHandle;
use podhost_runtime::sandbox::SandboxPaths;
use podhost_runtime::shim_config::ShimConfig;
use podhost_runtime::signals::parse_signal;
use podhost_runtime::spec::{ContainerSpecInput, build_spec, write_bundle_config};

/// A bundle on disk, ready for a shim.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub shim: ShimConfig,
    pub stop_signal: Signal,
    /// The attempt's durable records written ahead of their fsyncs (the log dir's owner
    /// mark, the image reference): completed while the shim starts the container.
    pub durability: podhost_disk::PendingDurability,
}

/// The pod's namespaces; an ephemeral container with a target joins the target's pid
/// namespace, as `kubectl debug --target` does, named by its init's pid while that init
/// still exists: a reaped init's pid may be any host process's, and its namespace the
/// host's. The shim opens `/proc/<pid>/ns/pid` a moment later; only that moment is
/// left for the pid to change hands.
fn sandbox_paths(ctx: &Ctx, pod: &PodInfo, target: Option<&ProcessHandle>) -> SandboxPaths {
    let mut paths = SandboxPaths::new(&ctx.layout.pod_ns_dir(&pod.uid), pod.sandbox_shape());
    match target {
        Some(init) if init.is_alive() => {
            paths.pid = Some(PathBuf::from(format!("/proc/{}/ns/pid", init.pid())));
        }
        Some(init) => {
            tracing::warn!(pod = %pod.name, pid = init.pid(), "the target container's init is gone; the ephemeral container gets the pod's pid namespace");
        }
        None => {}
    }
    paths
}

/// The file bind-mounted at the container's `terminationMessagePath` (as the kubelet, mode
/// 0666 so that any user in the container can write it), read when it exits.
fn termination_log(bundle: &Path, c: &Container) -> Result<Vec<(PathBuf, String)>, RuntimeError> {
    let Some(dest) = c
        .termination_message_path
        .clone()
        .filter(|p| p.starts_with('/'))
    else {
        return Ok(Vec::new());
    };
    let host = bundle.join(super::termination_message::TERMINATION_LOG_FILE);
    let io = |source| RuntimeError::Io {
        what: "creating the termination log",
        path: host.clone(),
        source,
    };
    // Through the rooted layer, mode set on the new file's fd: the attempt dir is
    // podhost's, but the file becomes the container's to write.
    let dir = podhost_rooted::RootedDir::open(bundle).map_err(|e| io(e.into()))?;
    let name = super::termination_message::TERMINATION_LOG_FILE;
    dir.remove_file(name).map_err(|e| io(e.into()))?;
    dir.create_file(name, b"", 0o666, None)
        .map_err(|e| io(e.into()))?;
    Ok(vec![(host, dest)])
}

/// The container's environment: image env first, then the service variables (cluster
/// mode), then the pod's `envFrom` and `env` (later wins; ConfigMaps and Secrets from
/// `--config-dir`, or the API server for an API pod; the downward API). A pod
/// value may refer to variables defined before it with `$(VAR)`, as in Kubernetes.
fn merged_env(
    ctx: &Ctx,
    pod: &PodInfo,
    image: &ResolvedImage,
    c: &Container,
) -> Result<podhost_model::env::ResolvedEnv, podhost_model::env::EnvError> {
    let image_env: Vec<(String, String)> = image
        .config
        .config()
        .as_ref()
        .and_then(|c| c.env().clone())
        .unwrap_or_default()
        .into_iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (kv, String::new()),
        })
        .collect();
    // The kubelet gives the service variables to the runtime as container env, which
    // overrides the image's; the container's own envFrom/env override them in turn.
    let mut base = image_env;
    base.extend(super::service_source::service_vars(ctx, pod)?);
    let objects = super::config_source::current(ctx, pod);
    let mut env = podhost_model::env::resolve_env(
        &base,
        &pod.pod,
        c,
        objects.lookup(),
        &pod.downward_inputs(ctx),
    )?;
    // An image with no PATH (umoci new, scratch builds) would leave `sh` unfindable;
    // docker, podman and containerd's CRI give it this default, so does podhost.
    if !env.vars.iter().any(|(k, _)| k == "PATH") {
        env.vars.insert(0, ("PATH".into(), DEFAULT_PATH.into()));
    }
    Ok(env)
}

/// The PATH of a container whose image and pod set none (docker's and runc's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The user the container runs as, and the kubelet's runAsNonRoot check on it. A
/// named image user that is not in the image's /etc/passwd gets the kubelet's
/// "non-numeric user" refusal when runAsNonRoot is asked, else a plain error.
fn container_user(
    pod: &PodInfo,
    c: &Container,
    sec: &ContainerSecurity,
    image_user: &str,
    layers: &[PathBuf],
) -> Result<ImageUser, ConfigError> {
    let req = UserRequest {
        image_user: image_user.to_string(),
        run_as_user: sec.run_as_user,
        run_as_group: sec.run_as_group,
    };
    let who = pod_ref(&pod.pod);
    match resolve_user(layers, &req) {
        Ok(user) => {
            verify_run_as_non_root(sec, &ImageUserId::Uid(user.uid), &who, &c.name)?;
            Ok(user)
        }
        Err(UserError::UnknownUser { user }) if sec.run_as_non_root => {
            verify_run_as_non_root(sec, &ImageUserId::Unresolved(user.clone()), &who, &c.name)?;
            Err(UserError::UnknownUser { user }.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Builds attempt `attempt` of container `c`: bundle dir, config.json and shim config.
pub fn prepare_attempt(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
    image: &ResolvedImage,
    attempt: u32,
    target: Option<&ProcessHandle>,
) -> Result<Prepared, RuntimeError> {
    let bundle = ctx.layout.attempt_dir(&pod.uid, &c.name, attempt);
    std::fs::create_dir_all(&bundle)
        .map_err(|e| RuntimeError::io("create directory", &bundle, e))?;
    // Marked as this podhost's, so that container GC never takes another's log dir.
    let mut durability = podhost_disk::PendingDurability::default();
    podhost_runtime::log_owner::claim_pod_log_dir(
        &ctx.layout,
        &pod.namespace,
        &pod.name,
        &pod.uid,
        &mut durability,
    )?;
    let lower_dirs: Vec<PathBuf> = image.layers.iter().rev().cloned().collect();
    let img = image.config.config().clone().unwrap_or_default();
    let resolved =
        merged_env(ctx, pod, image, c).map_err(|e| RuntimeError::ContainerConfig(e.to_string()))?;
    for skipped in &resolved.skipped {
        ctx.store.pod_event(
            &pod.uid,
            podhost_status::EventKind::Warning,
            "InvalidEnvironmentVariableNames",
            &pod.object(&c.name),
            skipped.message(),
        );
    }
    let env = resolved.vars;
    let expand = |list: &Option<Vec<String>>| {
        list.as_ref().map(|l| {
            l.iter()
                .map(|s| expand_env_refs(s, &env))
                .collect::<Vec<_>>()
        })
    };
    let command = expand(&c.command);
    let args = expand(&c.args);
    let argv = merge_command(
        img.entrypoint().as_deref().unwrap_or_default(),
        img.cmd().as_deref().unwrap_or_default(),
        command.as_deref(),
        args.as_deref(),
    );
    let spec_err = |message: String| RuntimeError::Spec {
        container: c.name.clone(),
        message,
    };
    if argv.is_empty() {
        return Err(spec_err(
            "no command: neither the image nor the pod gives one; set command in the manifest"
                .into(),
        ));
    }
    let index = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().position(|x| x.name == c.name))
        .unwrap_or(0);
    let config_err = |e: ConfigError| RuntimeError::ContainerConfig(e.to_string());
    let sec =
        container_security(&pod.pod, c, index).map_err(|e| config_err(ConfigError::Security(e)))?;
    let image_user = img.user().clone().unwrap_or_default();
    let user = container_user(pod, c, &sec, &image_user, &lower_dirs).map_err(config_err)?;
    let (mut confinement, confinement_warnings) =
        super::security::confinement(&ctx.security, pod, &sec, &user).map_err(config_err)?;
    // Compiled once per distinct filter (this runs on a blocking thread), loaded by the
    // container's process instead of compiled in it.
    let seccomp = podhost_runtime::seccomp::take_precompiled(
        &ctx.security.seccomp_programs,
        &mut confinement,
    )
    .map_err(|e| spec_err(format!("seccomp filter: {e}")))?;
    let cwd = c
        .working_dir
        .clone()
        .filter(|w| !w.is_empty())
        .or_else(|| img.working_dir().clone().filter(|w| !w.is_empty()))
        .unwrap_or_else(|| "/".into());
    let hostname = if pod.host_network {
        None
    } else {
        Some(
            pod.hostname(&ctx.dns.settings)
                .map_err(|e| spec_err(e.to_string()))?,
        )
    };
    let writable_files = termination_log(&bundle, c)?;
    let rootfs = bundle.join("rootfs");
    super::content::fill_for_container(ctx, pod, c)
        .map_err(|e| RuntimeError::ContainerConfig(e.to_string()))?;
    let volumes_dir = ctx.layout.pod_volumes_dir(&pod.uid);
    let volume_mounts =
        podhost_volume::container_mounts(&pod.pod, &volumes_dir, ctx.allocatable_memory(), &c.name)
            .map_err(|e| RuntimeError::ContainerConfig(e.to_string()))?;
    let settings =
        super::limits::kernel_settings(ctx, pod, c).map_err(|e| spec_err(e.to_string()))?;
    let mut annotations = HashMap::new();
    annotations.insert("io.kubernetes.pod.name".into(), pod.name.clone());
    annotations.insert("io.kubernetes.pod.namespace".into(), pod.namespace.clone());
    annotations.insert("io.kubernetes.pod.uid".into(), pod.uid.clone());
    annotations.insert("io.kubernetes.container.name".into(), c.name.clone());
    let input = ContainerSpecInput {
        container_name: c.name.clone(),
        args: argv,
        env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        cwd,
        hostname,
        sandbox: sandbox_paths(ctx, pod, target),
        rootfs: rootfs.clone(),
        cgroups_path: ctx.cgroups.container_path(pod.qos, &pod.uid, &c.name),
        bind_files: Vec::new(),
        writable_files,
        pod_files: super::dns_files::container_dns_binds(ctx, pod, c),
        volume_mounts,
        hook_exe: Some(ctx.exe.clone()),
        rlimits: settings.rlimits,
        resources: settings.resources,
        annotations,
        confinement,
    };
    let spec = build_spec(&input)?;
    for w in &confinement_warnings {
        ctx.store.pod_event(
            &pod.uid,
            podhost_status::EventKind::Warning,
            "CapabilityUnavailable",
            &pod.object(&c.name),
            w.clone(),
        );
    }
    for w in &settings.warnings {
        ctx.store.pod_event(
            &pod.uid,
            podhost_status::EventKind::Warning,
            "LimitClamped",
            &pod.object(&c.name),
            w.clone(),
        );
    }
    if let Some(w) = &settings.v1_not_enforced {
        ctx.store.pod_event(
            &pod.uid,
            podhost_status::EventKind::Warning,
            podhost_model::cgroup_enforcement::V1_POD_EVENT_REASON,
            &pod.object(&c.name),
            w.clone(),
        );
    }
    write_bundle_config(&bundle, &spec)?;
    let stop_signal = img
        .stop_signal()
        .as_deref()
        .and_then(parse_signal)
        .unwrap_or(Signal::SIGTERM);
    // The image this container uses, for image GC's in-use set (exited containers count).
    podhost_disk::write_durable_later(
        &bundle.join(IMAGE_REF_FILE),
        image.manifest_digest.as_bytes(),
        &mut durability,
    )?;
    podhost_disk::write_durable_later(
        &bundle.join(IMAGE_NAME_FILE),
        c.image.as_deref().unwrap_or_default().as_bytes(),
        &mut durability,
    )?;
    // Kept beside the bundle so that a restarted daemon stops an adopted container with
    // the same signal (boot-scoped: only a running container is stopped).
    podhost_disk::write_boot_scoped(&bundle.join("stop-signal"), stop_signal.as_str().as_bytes())?;
    Ok(Prepared {
        shim: ShimConfig {
            container_id: container_id(&pod.uid, &c.name, attempt),
            bundle,
            libcontainer_root: ctx.layout.libcontainer_root(),
            log_path: ctx.layout.container_log(
                &pod.namespace,
                &pod.name,
                &pod.uid,
                &c.name,
                attempt,
            ),
            lower_dirs,
            rootfs,
            oom_score_adj: Some(settings.oom_score_adj),
            cgroup_dir: ctx
                .cgroups
                .memory_accounting_dir(pod.qos, &pod.uid, &c.name),
            shim_cgroup: ctx.cgroups.shims_dir(),
            userns: pod
                .userns
                .map(|map| podhost_runtime::userns::rootfs::UsernsRootfs {
                    map,
                    userns_path: ctx.layout.pod_ns_dir(&pod.uid).join("user"),
                    root_dir: ctx.layout.root_dir.clone(),
                }),
            log_rotation: *ctx.log_rotation.borrow(),
            seccomp,
        },
        stop_signal,
        durability,
    })
}
