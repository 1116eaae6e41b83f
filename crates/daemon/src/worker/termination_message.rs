//! `terminationMessagePath` and `terminationMessagePolicy`: the message of a terminated
//! state, as the kubelet fills it. The container writes to a file podhost bind-mounts at
//! its `terminationMessagePath` (`TERMINATION_LOG_FILE` in the attempt's dir); with
//! `FallbackToLogsOnError` an empty file on a failed exit is replaced by the tail of the
//! container's log.

use std::path::Path;

use k8s_openapi::api::core::v1::Container;

use super::context::{Ctx, PodInfo};
use podhost_logs::{ReadOptions, read_log};
use podhost_rooted::RootedDir;

/// The file (in the attempt's dir) mounted at the container's `terminationMessagePath`.
pub const TERMINATION_LOG_FILE: &str = "termination-log";
/// The kubelet's `MaxContainerTerminationMessageLength`.
const MAX_MESSAGE_BYTES: u64 = 4096;
/// The kubelet's `MaxContainerTerminationMessageLogLines` and `…LogLength`.
const FALLBACK_LOG_LINES: usize = 80;
const FALLBACK_LOG_BYTES: usize = 2048;

/// The message the container left, if any (at most 4096 bytes, as the kubelet reads).
pub fn termination_message(
    ctx: &Ctx,
    pod: &PodInfo,
    container: &str,
    attempt: u32,
    exit_code: i32,
) -> Option<String> {
    let spec = container_spec(pod, container)?;
    let bundle = ctx.layout.attempt_dir(&pod.uid, container, attempt);
    let from_file = read_capped(&bundle, TERMINATION_LOG_FILE);
    if from_file.as_deref().is_some_and(|m| !m.is_empty()) {
        return from_file;
    }
    let fallback = spec.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
    if !fallback || exit_code == 0 {
        return None;
    }
    let log = ctx
        .layout
        .container_log(&pod.namespace, &pod.name, &pod.uid, container, attempt);
    log_tail(&log)
}

fn container_spec<'a>(pod: &'a PodInfo, name: &str) -> Option<&'a Container> {
    let spec = pod.pod.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
}

/// The container wrote this file's content (it is bind-mounted into it): read through
/// the rooted layer, a regular file only (never a fifo that would block the daemon),
/// at most 4096 bytes.
fn read_capped(bundle: &Path, name: &str) -> Option<String> {
    let bytes = RootedDir::open(bundle)
        .and_then(|dir| dir.read_file(name, MAX_MESSAGE_BYTES))
        .map_err(|e| tracing::debug!(error = %e, "no termination message file"))
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The last 80 lines of the log, at most their last 2048 bytes.
fn log_tail(log: &Path) -> Option<String> {
    let opts = ReadOptions {
        tail: Some(FALLBACK_LOG_LINES),
        ..Default::default()
    };
    let mut out = Vec::new();
    if let Err(e) = read_log(log, &opts, &mut out) {
        tracing::debug!(error = %e, "no log for the termination message");
        return None;
    }
    let start = out.len().saturating_sub(FALLBACK_LOG_BYTES);
    let text = String::from_utf8_lossy(&out[start..]).into_owned();
    (!text.is_empty()).then_some(text)
}
