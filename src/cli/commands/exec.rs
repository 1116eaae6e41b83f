//! `podhost exec [-i] [-t] POD [-c C] -- CMD…`: asks the daemon which container, then
//! execs into it from this (single-threaded) process; with `-i -t` on a terminal of its
//! own (`exec_tty`). As kubectl: without `-i` the command reads no input, and `-t`
//! needs `-i` and a terminal to read from (said on stderr when it is dropped).

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::api::client::Client;
use crate::api::percent_encode;
use crate::api::types::ExecTarget;
use crate::cli::pod_containers::default_container;
use crate::cli::pod_ref::{NamespaceFlag, PodRef};

/// What `podhost exec` is asked to run, and where.
pub struct ExecRequest {
    pub pod: String,
    pub namespace: NamespaceFlag,
    pub container: Option<String>,
    /// `-i`: pass this process's input on.
    pub stdin: bool,
    /// `-t`: a terminal (with `-i`, when the input is one).
    pub tty: bool,
    pub command: Vec<String>,
}

pub fn run(client: &Client, req: ExecRequest) -> Result<i32> {
    let pod: k8s_openapi::api::core::v1::Pod =
        client.get_json(&PodRef::parse(&req.pod, &req.namespace)?.path())?;
    let container = match req.container {
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
    // kubectl's rule: a terminal only for -i -t with a terminal to read from.
    let tty = req.tty && req.stdin && std::io::stdin().is_terminal();
    if req.tty && req.stdin && !tty {
        eprintln!("Unable to use a TTY - input is not a terminal or the right kind of file");
    }
    if req.tty && !req.stdin {
        // kubectl drops -t without -i silently; a flag that has no effect is said.
        eprintln!("-t needs -i (a terminal to read from): running without a terminal");
    }
    if tty {
        return super::exec_tty::exec_on_terminal(&target, req.command, true);
    }
    if !req.stdin {
        // The command reads nothing, as kubectl's without -i.
        let null = std::fs::File::open("/dev/null").context("opening /dev/null")?;
        nix::unistd::dup2_stdin(null).context("replacing stdin with /dev/null")?;
    }
    // This process has a single thread (no runtime was started), so libcontainer may fork here.
    let code = crate::runtime::exec::exec_in_container(
        Path::new(&target.libcontainer_root),
        &target.container_id,
        req.command,
        None,
    )?;
    Ok(code)
}
