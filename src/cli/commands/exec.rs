//! `podhost exec POD [-c C] -- CMD…`: asks the daemon which container, then execs into
//! it from this (single-threaded) process.

use std::path::Path;

use anyhow::{Result, bail};

use crate::api::client::Client;
use crate::api::percent_encode;
use crate::api::types::ExecTarget;
use crate::cli::pod_containers::default_container;
use crate::cli::pod_ref::{NamespaceFlag, PodRef};

pub fn run(
    client: &Client,
    pod: &str,
    namespace: &NamespaceFlag,
    container: Option<String>,
    command: Vec<String>,
) -> Result<i32> {
    let pod: k8s_openapi::api::core::v1::Pod =
        client.get_json(&PodRef::parse(pod, namespace)?.path())?;
    let container = match container {
        Some(c) => c,
        None => {
            let (picked, notice) = default_container(&pod);
            if let Some(notice) = notice {
                eprintln!("{notice}");
            }
            picked.unwrap_or_default()
        }
    };
    let path = format!(
        "{}/exec?container={}",
        PodRef::of(&pod).path(),
        percent_encode(&container)
    );
    let target: ExecTarget = client.get_json(&path)?;
    if !target.running {
        bail!(
            "container {} in pod {} is not running; exec needs a running container",
            target.container,
            target.pod
        );
    }
    // This process has a single thread (no runtime was started), so libcontainer may fork here.
    let code = crate::runtime::exec::exec_in_container(
        Path::new(&target.libcontainer_root),
        &target.container_id,
        command,
        None,
    )?;
    Ok(code)
}
