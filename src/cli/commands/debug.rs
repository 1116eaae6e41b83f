//! `podhost debug POD --image I [--target C] [--name N] -- CMD…`: adds an ephemeral
//! container to a running pod, as `kubectl debug` does (the pod's namespaces, and the
//! target container's pid namespace), waits for it to start, prints its output until it
//! exits, and exits with its exit code. `podhost logs POD -c NAME` and `podhost exec POD
//! -c NAME` reach it too while it runs.

use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{ContainerStatus, EphemeralContainer, Pod};

use crate::api::client::Client;
use crate::cli::logs_query::LogsFlags;
use crate::cli::pod_ref::{NamespaceFlag, PodRef};

/// What `podhost debug` asks for.
#[derive(Debug, Clone)]
pub struct DebugRequest {
    pub pod: String,
    pub namespace: NamespaceFlag,
    pub image: String,
    pub target: Option<String>,
    pub name: Option<String>,
    pub image_pull_policy: Option<String>,
    pub command: Vec<String>,
}

/// How long the container may take to start (an image pull included).
const START_TIMEOUT: Duration = Duration::from_secs(300);

pub fn run(client: &Client, req: DebugRequest) -> Result<i32> {
    let found: Pod = client.get_json(&PodRef::parse(&req.pod, &req.namespace)?.path())?;
    let at = PodRef::of(&found);
    let name = req.name.clone().unwrap_or_else(default_name);
    let container = EphemeralContainer {
        name: name.clone(),
        image: Some(req.image.clone()),
        image_pull_policy: req.image_pull_policy.clone(),
        command: (!req.command.is_empty()).then(|| req.command.clone()),
        target_container_name: req.target.clone(),
        ..Default::default()
    };
    let body = serde_json::to_vec(&container)?;
    let path = format!("{}/ephemeral", at.path());
    client.request("POST", &path, Some(&body))?;
    eprintln!("Defaulting debug container name to {name}.");
    wait_started(client, &at, &name)?;
    let flags = LogsFlags {
        container: Some(name.clone()),
        follow: true,
        ..Default::default()
    };
    super::logs::run(client, &at.display(), &flags, &NamespaceFlag::default())?;
    let status = wait_status(client, &at, &name, |s| {
        s.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code)
    })?;
    Ok(status)
}

/// kubectl's default: `debugger-` and five random letters or digits.
fn default_name() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default()
        ^ std::process::id();
    let mut n = seed;
    let suffix: String = (0..5)
        .map(|_| {
            let c = ALPHABET[(n % 27) as usize] as char;
            n = n / 27 + seed.rotate_left(7);
            c
        })
        .collect();
    format!("debugger-{suffix}")
}

/// Waits until the container runs or has ended; a start error stops the wait.
fn wait_started(client: &Client, pod: &PodRef, name: &str) -> Result<()> {
    wait_status(client, pod, name, |s| {
        let state = s.state.as_ref()?;
        if state.running.is_some() || state.terminated.is_some() {
            return Some(Ok(()));
        }
        let waiting = state.waiting.as_ref()?;
        match waiting.reason.as_deref() {
            None | Some("ContainerCreating") => None,
            Some(reason) => Some(Err(format!(
                "{reason}: {}",
                waiting.message.clone().unwrap_or_default()
            ))),
        }
    })?
    .map_err(|why| anyhow::anyhow!("debug container {name} did not start: {why}"))
}

/// Polls the pod until `f` finds what it wants in the container's status.
fn wait_status<T>(
    client: &Client,
    pod: &PodRef,
    name: &str,
    f: impl Fn(&ContainerStatus) -> Option<T>,
) -> Result<T> {
    let start = std::time::Instant::now();
    loop {
        let p: Pod = client.get_json(&pod.path())?;
        let status = p
            .status
            .and_then(|s| s.ephemeral_container_statuses)
            .and_then(|l| l.into_iter().find(|c| c.name == name));
        if let Some(found) = status.as_ref().and_then(&f) {
            return Ok(found);
        }
        if start.elapsed() > START_TIMEOUT {
            bail!(
                "debug container {name} of pod {}: no progress in {START_TIMEOUT:?}",
                pod.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
