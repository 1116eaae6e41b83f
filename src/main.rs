//! The `podhost` command line: the daemon, the user commands that talk to it over its
//! unix socket, and the hidden helper processes (shim, sandbox, exec-helper). This file
//! only parses and dispatches; each command's body is in `cli::commands`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches};

use podhost::api::client::Client;
use podhost::cli::args::{Cli, Command, DEFAULT_SOCKET};
use podhost::cli::commands::{
    daemon, debug, describe, exec, get, helpers, images, load, logs, port_forward, pull, validate,
};

// The text-order list (link/, see build.rs) is an input of this binary's link that
// cargo cannot see; included here, a changed list makes cargo relink this binary (and
// nothing else). The bytes are never used, so none of them reach the binary.
const _: &[u8] = include_bytes!("../link/podhost-text-order.txt");

// jemalloc instead of glibc's malloc (its options and why: .cargo/config.toml). The
// daemon keeps a few kB per pod for as long as the pod runs, made amid the short-lived
// allocations of its start; glibc's heap kept every page that held one of them,
// however little: with 250 pods, 21 MiB of anonymous memory for 9 MiB in use, and after
// a churn of 300 pods 9–12 MiB for 1.5 MiB. jemalloc puts objects of one size class in
// slabs of their own and hands free pages back: 14.7 MiB for the same 250 pods.
// Only this binary: the shim and the monitor keep the C library's allocator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    // The matches are kept: `--config` yields to the daemon flags given on the line.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let code = match run(cli, daemon::flags_given(&matches)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", podhost::cli::error_text::error_text(&e));
            1
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli, daemon_flags_given: std::collections::BTreeSet<String>) -> Result<i32> {
    // User-facing commands die quietly on a closed pipe (`podhost get pods | head`), as
    // other CLIs do; the daemon and helpers keep ignoring SIGPIPE.
    if !cli.command.is_daemon_side() {
        podhost::runtime::signals::restore_default_sigpipe();
    }
    let socket = cli.socket.unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    let client = || Client::new(&socket);
    match cli.command {
        Command::Daemon(flags) => daemon::run(*flags, socket.clone(), daemon_flags_given),
        Command::Get(args) => get::run(&client(), &args),
        Command::Describe {
            resource,
            name,
            namespace,
        } => describe::run(&client(), &resource, name.as_deref(), &namespace),
        Command::Logs {
            pod,
            flags,
            namespace,
        } => logs::run(&client(), &pod, &flags, &namespace),
        Command::Exec {
            pod,
            namespace,
            container,
            stdin,
            tty,
            command,
        } => exec::run(
            &client(),
            exec::ExecRequest {
                pod,
                namespace,
                container,
                stdin,
                tty,
                command,
            },
        ),
        Command::Debug {
            pod,
            namespace,
            image,
            target,
            name,
            image_pull_policy,
            command,
        } => debug::run(
            &client(),
            debug::DebugRequest {
                pod,
                namespace,
                image,
                target,
                name,
                image_pull_policy,
                command,
            },
        ),
        Command::PortForward {
            pod,
            namespace,
            ports,
            addresses,
        } => port_forward::run(
            &socket,
            port_forward::PortForwardRequest {
                pod,
                namespace,
                ports,
                addresses,
            },
        ),
        Command::Load {
            path,
            name,
            root_dir,
        } => load::run(&client(), &path, name, root_dir.as_deref()),
        Command::Images => images::list(&client()),
        Command::Pull {
            reference,
            root_dir,
        } => pull::run(&client(), &reference, root_dir.as_deref()),
        Command::Rmi {
            reference,
            root_dir,
        } => images::remove(&client(), reference, root_dir.as_deref()),
        Command::Gc { root_dir } => images::gc(&client(), root_dir.as_deref()),
        Command::Top {
            resource,
            namespace,
            all_namespaces,
            containers,
            sort_by,
            psi,
            output,
        } => {
            let opts = podhost::cli::top::TopOptions {
                namespace_column: all_namespaces,
                containers,
                sort_by: sort_by.map(|s| s.parse()).transpose()?,
                psi,
            };
            match output.as_deref() {
                None => podhost::cli::commands::top::run(&client(), &resource, &namespace, &opts),
                Some(format) => podhost::cli::commands::top::raw(&client(), format),
            }
        }
        Command::Validate {
            paths,
            output,
            node_name,
        } => validate::run(&paths, output.as_deref(), node_name.as_deref()),
        Command::Shim { config } => Ok(podhost::shim::run(&config)),
        Command::ShimCleanup { config } => Ok(podhost::shim::cleanup_after_monitor(&config)),
        Command::Pause { .. } => Ok(podhost::runtime::pause::run()),
        Command::Sandbox(args) => helpers::sandbox(args),
        Command::ExecHelper {
            libcontainer_root,
            id,
            timeout_ms,
            console_socket,
            command,
        } => helpers::exec_helper(
            &libcontainer_root,
            &id,
            timeout_ms,
            console_socket.as_deref(),
            command,
        ),
        Command::MountPropagation { rootfs, entries } => {
            helpers::mount_propagation(&rootfs, &entries)
        }
    }
}
