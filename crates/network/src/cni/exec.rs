//! Running one plugin as the CNI spec says: exec `<bin dir>/<type>` with the `CNI_*`
//! environment and the config on stdin, under a timeout; its stdout is the result, or
//! on a non-zero exit the error object whose `msg`/`details` become podhost's error.
//! fork+exec from tokio is fine (tokio::process); the plugin inherits the caller's
//! network namespace, which is the host's.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::CniError;
use podhost_model::cni::result::parse_plugin_error;

/// How long one plugin may run before it is killed and the operation fails.
pub const PLUGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// The CNI operation of an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Check,
    Del,
    Status,
    Version,
}

impl Command {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "ADD",
            Self::Check => "CHECK",
            Self::Del => "DEL",
            Self::Status => "STATUS",
            Self::Version => "VERSION",
        }
    }
}

/// The per-pod part of the environment (absent for STATUS and VERSION).
#[derive(Debug, Clone)]
pub struct PodEnv<'a> {
    pub container_id: &'a str,
    /// Empty when the pod's netns is gone (DEL), as libcni passes it.
    pub netns: &'a Path,
    pub ifname: &'a str,
    pub cni_args: &'a str,
}

/// The executable of `plugin_type`: the first of `bin_dirs` that has it.
pub fn find_plugin(bin_dirs: &[PathBuf], plugin_type: &str) -> Result<PathBuf, CniError> {
    bin_dirs
        .iter()
        .map(|d| d.join(plugin_type))
        .find(|p| p.is_file())
        .ok_or_else(|| CniError::PluginNotFound {
            plugin: plugin_type.to_string(),
            bin_dirs: bin_dirs.to_vec(),
        })
}

/// Runs `plugin_type` for `command` and returns its stdout (a successful run).
pub async fn run_plugin(
    bin_dirs: &[PathBuf],
    plugin_type: &str,
    command: Command,
    pod: Option<&PodEnv<'_>>,
    stdin: &Value,
    timeout: Duration,
) -> Result<Vec<u8>, CniError> {
    let exe = find_plugin(bin_dirs, plugin_type)?;
    let cni_path = std::env::join_paths(bin_dirs).unwrap_or_default();
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.env("CNI_COMMAND", command.as_str())
        .env("CNI_PATH", cni_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(pod) = pod {
        cmd.env("CNI_CONTAINERID", pod.container_id)
            .env("CNI_NETNS", pod.netns)
            .env("CNI_IFNAME", pod.ifname)
            .env("CNI_ARGS", pod.cni_args);
    }
    let spawn_error = |source| CniError::Spawn {
        plugin: plugin_type.to_string(),
        path: exe.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let input = serde_json::to_vec(stdin).unwrap_or_default();
    let run = async {
        if let Some(mut pipe) = child.stdin.take() {
            // A plugin that exits without reading its stdin closes the pipe: its exit
            // status and output say why, so a write error here is not the failure.
            let _ = pipe.write_all(&input).await;
        }
        child.wait_with_output().await
    };
    let output = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| CniError::Timeout {
            plugin: plugin_type.to_string(),
            command: command.as_str(),
            seconds: timeout.as_secs(),
        })?
        .map_err(spawn_error)?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let (code, message) = match parse_plugin_error(&output.stdout) {
        Some(e) => (Some(e.code), e.message()),
        None => {
            // No error object: the plugin's own words are on stderr (or stdout).
            let text = if output.stderr.is_empty() {
                &output.stdout
            } else {
                &output.stderr
            };
            let text = String::from_utf8_lossy(text).trim().to_string();
            let text = if text.is_empty() {
                format!("exited with {}", output.status)
            } else {
                text
            };
            (None, text)
        }
    };
    Err(CniError::Plugin {
        plugin: plugin_type.to_string(),
        command: command.as_str(),
        code,
        message,
    })
}
