//! `podhost exec POD [-c C] -- CMD…`: asks the daemon which container, then execs into
//! it from this (single-threaded) process.

use std::path::Path;

use anyhow::{Result, bail};

use crate::api::client::Client;
use crate::api::percent_encode;
use crate::api::types::ExecTarget;

pub fn run(
    client: &Client,
    pod: &str,
    container: Option<String>,
    command: Vec<String>,
) -> Result<i32> {
    let mut path = format!("/pods/{}/exec", percent_encode(pod));
    if let Some(c) = container {
        path.push_str(&format!("?container={}", percent_encode(&c)));
    }
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
