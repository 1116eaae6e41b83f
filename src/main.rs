//! The `podhost` command line: the daemon, the user commands that talk to it over its
//! unix socket, and the hidden helper processes (shim, sandbox, exec-helper).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use podhost::api::client::{Client, ClientError};
use podhost::api::percent_encode;
use podhost::api::types::{ExecTarget, LoadRequest, LoadResponse};
use podhost::cli::{describe::render_describe, images::render_images, table::render_pods};
use podhost::model::backoff::BackoffPolicy;

const DEFAULT_SOCKET: &str = "/run/podhost/podhost.sock";
const DEFAULT_ROOT: &str = "/var/lib/podhost";

#[derive(Parser)]
#[command(
    name = "podhost",
    version,
    about = "Runs Kubernetes static pods on this host, without a CRI"
)]
struct Cli {
    /// The daemon's API socket [default: /run/podhost/podhost.sock].
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the node agent: watch the manifest dir and run its pods.
    Daemon(Box<DaemonArgs>),
    /// List pods.
    Get {
        /// `pods` (or `pod`, `po`), or `events` (or `ev`): the node's and the pods'.
        resource: String,
        /// Output format: wide, json or yaml.
        #[arg(short = 'o', long = "output")]
        output: Option<String>,
    },
    /// Show a pod's status and events.
    Describe {
        /// Only `pod` (or `pods`, `po`).
        resource: String,
        name: String,
    },
    /// Print a container's logs.
    Logs {
        pod: String,
        #[command(flatten)]
        flags: podhost::cli::logs_query::LogsFlags,
    },
    /// Run a command in a running container.
    Exec {
        pod: String,
        #[arg(short = 'c', long)]
        container: Option<String>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Load an OCI image layout dir, oci-archive or docker-archive tar into the image store.
    Load {
        path: PathBuf,
        /// Name the image REF (a full reference, e.g. localhost/busybox:1), for sources
        /// whose image has no name or only a tag; with several images, the one REF or
        /// its tag names.
        #[arg(long, value_name = "REF")]
        name: Option<String>,
        /// When no daemon answers at the socket, load straight into this root dir (the
        /// daemon's --root-dir, e.g. /var/lib/podhost). Without it, no daemon is an error.
        #[arg(long)]
        root_dir: Option<PathBuf>,
    },
    /// List the images in the store.
    Images,
    /// Pull an image from a registry into the store (progress on stderr).
    Pull { reference: String },
    /// Remove an image (refused while a pod uses it).
    Rmi { reference: String },
    /// Run container GC and image GC now.
    Gc,
    /// (internal) the per-container process.
    #[command(hide = true)]
    Shim { config: PathBuf },
    /// (internal) create a pod's shared namespaces.
    #[command(hide = true)]
    Sandbox {
        #[arg(long)]
        ns_dir: PathBuf,
        #[arg(long)]
        hostname: String,
        #[arg(long)]
        host_network: bool,
        #[arg(long)]
        host_ipc: bool,
        #[arg(long)]
        shared_pid: bool,
        #[arg(long)]
        pause_cgroup: Option<PathBuf>,
        /// hostUsers: false: the first host ID of the pod's block of 65536.
        #[arg(long)]
        userns_base: Option<u32>,
    },
    /// (internal) PID 1 of a pod's shared pid namespace.
    #[command(hide = true)]
    Pause {
        /// The pod's ns dir (informational: shows in `ps` which pod it holds).
        #[arg(long)]
        ns_dir: Option<PathBuf>,
    },
    /// (internal) run a command in a container (hooks).
    #[command(hide = true)]
    ExecHelper {
        #[arg(long)]
        libcontainer_root: PathBuf,
        #[arg(long)]
        id: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Args)]
struct DaemonArgs {
    #[arg(long, default_value = "/etc/podhost/manifests")]
    pod_manifest_path: PathBuf,
    #[arg(long, default_value = DEFAULT_ROOT)]
    root_dir: PathBuf,
    #[arg(long, default_value = "/var/log/pods")]
    log_dir: PathBuf,
    /// Defaults to the host name; trimmed and lowercased, then it must be a DNS-1123
    /// subdomain (as the kubelet's node name).
    #[arg(long)]
    node_name: Option<String>,
    /// A group (name or GID) whose members may use the API socket besides root; the
    /// socket is then 0660 root:GROUP instead of 0600 root:root.
    #[arg(long)]
    socket_group: Option<String>,
    /// Parent cgroup for every cgroup podhost creates (default: the daemon's own; the
    /// daemon then moves itself into its `daemon` leaf).
    #[arg(long)]
    cgroup_root: Option<String>,
    /// Containers' rlimits unless a pod's `podhost.io/rlimits.<container>` annotation
    /// overrides them, as `name=soft:hard,…`.
    #[arg(long, default_value = "nofile=1048576:1048576")]
    default_rlimits: String,
    /// Rotate a container's log before it grows past this size (kubelet's
    /// containerLogMaxSize); 0 or negative turns rotation off.
    #[arg(long, default_value = "10Mi", allow_hyphen_values = true)]
    container_log_max_size: String,
    /// Files kept per container log, the current one included (kubelet's
    /// containerLogMaxFiles; at least 2).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    container_log_max_files: i64,
    /// pids.max of every pod cgroup (the kubelet's podPidsLimit); -1 = unlimited.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pod_pids_limit: i64,
    /// Host IDs for `hostUsers: false` pods, START:LENGTH in multiples of 65536 (one
    /// block of 65536 per pod); default: the kubelet's range, 65536 up.
    #[arg(long, default_value = "65536:4294836224")]
    userns_range: String,
    /// First CrashLoopBackOff delay in seconds (kubelet: 10); tests shorten it.
    #[arg(long, default_value_t = 10.0)]
    crashloop_initial_backoff: f64,
    /// Longest CrashLoopBackOff delay in seconds (kubelet: 300).
    #[arg(long, default_value_t = 300.0)]
    crashloop_max_backoff: f64,
    /// Seconds between authoritative rescans of the manifest dir (kubelet: 20).
    #[arg(long, default_value_t = 20.0)]
    rescan_interval: f64,
    /// Registry credentials: a docker config.json (auths, credHelpers, credsStore).
    #[arg(long, default_value = "/root/.docker/config.json")]
    image_credentials: PathBuf,
    /// A registry (HOST:PORT) to reach over plain HTTP; repeatable.
    #[arg(long = "insecure-registry")]
    insecure_registries: Vec<String>,
    /// Image GC starts at this disk usage of the image filesystem (kubelet: 85).
    #[arg(long, default_value_t = 85)]
    image_gc_high_threshold: u8,
    /// Image GC frees down to this usage (kubelet: 80).
    #[arg(long, default_value_t = 80)]
    image_gc_low_threshold: u8,
    /// Images younger than this (seconds) are kept (kubelet: 120).
    #[arg(long, default_value_t = 120.0)]
    image_minimum_gc_age: f64,
    /// Unused images idle longer than this (seconds) are deleted; 0 = never (kubelet: 0).
    #[arg(long, default_value_t = 0.0)]
    image_maximum_gc_age: f64,
    /// Seconds between image GC passes (kubelet: 300).
    #[arg(long, default_value_t = 300.0)]
    image_gc_period: f64,
    /// Seconds between container GC passes (kubelet: 60).
    #[arg(long, default_value_t = 60.0)]
    container_gc_period: f64,
    /// Dead instances kept per container (kubelet: 1).
    #[arg(long, default_value_t = 1)]
    maximum_dead_containers_per_container: usize,
    /// Dead containers kept on the node in all; -1 = no cap (kubelet: -1).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    maximum_dead_containers: i64,
    /// RuntimeDefault seccomp for containers whose pod names no seccompProfile (the
    /// kubelet's seccompDefault); `--seccomp-default=false` leaves them Unconfined.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", require_equals = true)]
    seccomp_default: bool,
    /// Namespaced sysctls pods may set beyond the safe set: names or `prefix*`
    /// patterns, comma-separated (the kubelet's allowedUnsafeSysctls).
    #[arg(long, value_delimiter = ',')]
    allowed_unsafe_sysctls: Vec<String>,
}

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// User-facing commands die quietly on a closed pipe (`podhost get pods | head`), as
/// other CLIs do; the daemon and helpers keep ignoring SIGPIPE.
fn default_sigpipe_for_cli(command: &Command) {
    if matches!(
        command,
        Command::Daemon(_)
            | Command::Shim { .. }
            | Command::Sandbox { .. }
            | Command::Pause { .. }
            | Command::ExecHelper { .. }
    ) {
        return;
    }
    podhost::runtime::signals::restore_default_sigpipe();
}

fn run(cli: Cli) -> Result<i32> {
    default_sigpipe_for_cli(&cli.command);
    let socket = cli.socket.unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    match cli.command {
        Command::Daemon(args) => daemon(*args, socket),
        Command::Get { resource, output } => match resource.as_str() {
            "events" | "event" | "ev" => get_events(&Client::new(&socket), output.as_deref()),
            _ => {
                pods_resource(&resource)?;
                get_pods(&Client::new(&socket), output.as_deref())
            }
        },
        Command::Describe { resource, name } => {
            pods_resource(&resource)?;
            describe(&Client::new(&socket), &name)
        }
        Command::Logs { pod, flags } => logs(&Client::new(&socket), &pod, &flags),
        Command::Exec {
            pod,
            container,
            command,
        } => exec(&Client::new(&socket), &pod, container, command),
        Command::Load {
            path,
            name,
            root_dir,
        } => load(&Client::new(&socket), &path, name, root_dir.as_deref()),
        Command::Images => {
            let list: Vec<podhost::image::ImageSummary> =
                Client::new(&socket).get_json("/images")?;
            print!("{}", render_images(&list, chrono::Utc::now()));
            Ok(0)
        }
        Command::Pull { reference } => {
            if podhost::image::is_local_only(&reference) {
                bail!(
                    "not pulling {}",
                    podhost::image::local_only_hint(&reference)
                );
            }
            pull(&Client::new(&socket), &reference)
        }
        Command::Rmi { reference } => {
            let body = serde_json::to_vec(&podhost::api::types::PullRequest { reference })?;
            let a = Client::new(&socket).request("POST", "/images/remove", Some(&body))?;
            let v: serde_json::Value = serde_json::from_slice(&a.body)?;
            println!(
                "Deleted: {} ({} bytes freed)",
                v["removed"].as_str().unwrap_or(""),
                v["bytes_freed"]
            );
            Ok(0)
        }
        Command::Gc => {
            let a = Client::new(&socket).request("POST", "/gc", None)?;
            let v: serde_json::Value = serde_json::from_slice(&a.body)?;
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(0)
        }
        Command::Shim { config } => Ok(podhost::shim::run(&config)),
        Command::Pause { .. } => Ok(podhost::runtime::pause::run()),
        Command::Sandbox {
            ns_dir,
            hostname,
            host_network,
            host_ipc,
            shared_pid,
            pause_cgroup,
            userns_base,
        } => {
            let shape = podhost::runtime::sandbox::SandboxShape {
                host_network,
                host_ipc,
                shared_pid,
                userns: userns_base.map(|base| podhost::runtime::userns::IdMap { base }),
            };
            let exe = std::env::current_exe().context("locating the podhost binary")?;
            podhost::runtime::sandbox::create_in_helper(
                &ns_dir,
                &hostname,
                shape,
                &exe,
                pause_cgroup.as_deref(),
            )?;
            Ok(0)
        }
        Command::ExecHelper {
            libcontainer_root,
            id,
            command,
        } => Ok(podhost::runtime::exec::exec_in_container(
            &libcontainer_root,
            &id,
            command,
        )?),
    }
}

fn pods_resource(resource: &str) -> Result<()> {
    match resource {
        "pods" | "pod" | "po" => Ok(()),
        other => bail!("unknown resource type {other:?}: podhost knows pods and events"),
    }
}

fn daemon(args: DaemonArgs, socket: PathBuf) -> Result<i32> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let node_name = podhost::daemon::resolve_node_name(args.node_name.as_deref())?;
    let socket_access = podhost::api::SocketAccess {
        group: args
            .socket_group
            .as_deref()
            .map(podhost::api::resolve_socket_group)
            .transpose()?,
    };
    let secs = |s: f64, flag: &str| {
        Duration::try_from_secs_f64(s)
            .with_context(|| format!("--{flag} must be a positive number of seconds"))
    };
    let cfg = podhost::daemon::DaemonConfig {
        manifest_dir: args.pod_manifest_path,
        root_dir: args.root_dir,
        log_dir: args.log_dir,
        node_name,
        socket,
        socket_access,
        cgroup_root: args.cgroup_root,
        pod_pids_limit: (args.pod_pids_limit > 0).then_some(args.pod_pids_limit),
        log_rotation: podhost::logs::RotationPolicy::from_flags(
            &args.container_log_max_size,
            args.container_log_max_files,
        )?,
        userns_range: args.userns_range.parse()?,
        default_rlimits: podhost::model::rlimits::parse_rlimits(&args.default_rlimits)
            .map_err(|e| anyhow::anyhow!("--default-rlimits: {e}"))?,
        backoff: BackoffPolicy {
            initial: secs(args.crashloop_initial_backoff, "crashloop-initial-backoff")?,
            max: secs(args.crashloop_max_backoff, "crashloop-max-backoff")?,
        },
        rescan_every: secs(args.rescan_interval, "rescan-interval")?,
        seccomp_default: args.seccomp_default,
        sysctls: podhost::model::sysctl::SysctlAllowlist::new(&args.allowed_unsafe_sysctls)?,
        image_credentials: Some(args.image_credentials),
        gc: podhost::gc::runner::GcSettings {
            image: podhost::image::gc::ImageGcPolicy {
                high_threshold_percent: args.image_gc_high_threshold,
                low_threshold_percent: args.image_gc_low_threshold,
                min_age: secs(args.image_minimum_gc_age, "image-minimum-gc-age")
                    .unwrap_or_default(),
                max_age: (args.image_maximum_gc_age > 0.0)
                    .then(|| secs(args.image_maximum_gc_age, "image-maximum-gc-age"))
                    .transpose()?,
            },
            image_period: secs(args.image_gc_period, "image-gc-period")?,
            container: podhost::gc::ContainerGcPolicy {
                min_age: Duration::ZERO,
                max_per_pod_container: args.maximum_dead_containers_per_container,
                max_containers: usize::try_from(args.maximum_dead_containers).ok(),
            },
            container_period: secs(args.container_gc_period, "container-gc-period")?,
        },
        insecure_registries: args.insecure_registries,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    match rt.block_on(podhost::daemon::run(cfg)) {
        Ok(()) => Ok(0),
        Err(e) => {
            // A dead task may have left blocking work behind: it must not hold the exit.
            rt.shutdown_timeout(Duration::from_secs(5));
            eprintln!("error: {e}");
            Ok(e.exit_code())
        }
    }
}

fn get_pods(client: &Client, output: Option<&str>) -> Result<i32> {
    let list: serde_json::Value = client.get_json("/pods")?;
    match output {
        Some("json") => println!("{}", serde_json::to_string_pretty(&list)?),
        Some("yaml") => print!("{}", serde_yaml_ng::to_string(&list)?),
        None | Some("wide") => {
            let pods: Vec<k8s_openapi::api::core::v1::Pod> =
                serde_json::from_value(list.get("items").cloned().unwrap_or_default())?;
            if pods.is_empty() {
                eprintln!("No resources found.");
            } else {
                print!(
                    "{}",
                    render_pods(&pods, output == Some("wide"), chrono::Utc::now())
                );
            }
        }
        Some(other) => bail!("unknown output format {other:?}: use wide, json or yaml"),
    }
    Ok(0)
}

fn get_events(client: &Client, output: Option<&str>) -> Result<i32> {
    let events: Vec<podhost::status::Event> = client.get_json("/events")?;
    match output {
        Some("json") => println!("{}", serde_json::to_string_pretty(&events)?),
        Some("yaml") => print!("{}", serde_yaml_ng::to_string(&events)?),
        None | Some("wide") => {
            if events.is_empty() {
                eprintln!("No events found.");
            } else {
                print!(
                    "{}",
                    podhost::cli::events::render_events(&events, chrono::Utc::now())
                );
            }
        }
        Some(other) => bail!("unknown output format {other:?}: use wide, json or yaml"),
    }
    Ok(0)
}

fn describe(client: &Client, name: &str) -> Result<i32> {
    let path = format!("/pods/{}", percent_encode(name));
    let pod: k8s_openapi::api::core::v1::Pod = client.get_json(&path)?;
    let events: Vec<podhost::status::Event> = client.get_json(&format!("{path}/events"))?;
    print!("{}", render_describe(&pod, &events, chrono::Utc::now()));
    Ok(0)
}

fn logs(client: &Client, pod: &str, flags: &podhost::cli::logs_query::LogsFlags) -> Result<i32> {
    let path = podhost::cli::logs_query::log_query_path(pod, flags)?;
    let mut stdout = std::io::stdout();
    client.request_streaming("GET", &path, None, &mut |chunk| {
        stdout.write_all(chunk)?;
        stdout.flush()
    })?;
    Ok(0)
}

fn exec(
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
    let code = podhost::runtime::exec::exec_in_container(
        Path::new(&target.libcontainer_root),
        &target.container_id,
        command,
    )?;
    Ok(code)
}

/// Streams the daemon's pull progress as one status line on stderr.
fn pull(client: &Client, reference: &str) -> Result<i32> {
    use podhost::image::pull::{ProgressState, PullProgress};
    let body = serde_json::to_vec(&podhost::api::types::PullRequest {
        reference: reference.to_string(),
    })?;
    let mut state = ProgressState::default();
    let mut pending = Vec::new();
    let mut failure: Option<String> = None;
    let mut done: Option<(String, String)> = None;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    client.request_streaming("POST", "/images/pull", Some(&body), &mut |chunk| {
        pending.extend_from_slice(chunk);
        while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            if let Ok(p) = serde_json::from_slice::<PullProgress>(&line) {
                state.apply(&p);
                if let PullProgress::Done { reference, digest } = &p {
                    done = Some((reference.clone(), digest.clone()));
                }
                if tty {
                    eprint!("\r\x1b[K{}", state.line());
                }
            } else if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) {
                failure = v.get("error").and_then(|e| e.as_str()).map(String::from);
            }
        }
        Ok(())
    })?;
    if tty {
        eprintln!();
    }
    if let Some(e) = failure {
        bail!("{e}");
    }
    match done {
        Some((reference, digest)) => {
            eprintln!("{}", state.line());
            println!("{reference}@{digest}");
            Ok(0)
        }
        None => bail!("the daemon ended the pull without a result"),
    }
}

/// Loads through the daemon. Only with an explicit `--root-dir` does a missing daemon
/// (no socket, or nobody listening) mean "load straight into that store"; otherwise
/// it is an error naming the socket, so that an image never lands silently in a store
/// no daemon reads.
fn load(
    client: &Client,
    path: &Path,
    name: Option<String>,
    root_dir: Option<&Path>,
) -> Result<i32> {
    let abs = std::fs::canonicalize(path)
        .with_context(|| format!("{}: no such file or directory", path.display()))?;
    let body = serde_json::to_vec(&LoadRequest {
        path: abs.display().to_string(),
        name: name.clone(),
    })?;
    let refs = match client.request("POST", "/images/load", Some(&body)) {
        Ok(answer) => serde_json::from_slice::<LoadResponse>(&answer.body)?.references,
        Err(ClientError::Connect { socket, source }) if no_daemon(&source) => {
            let Some(root_dir) = root_dir else {
                bail!(
                    "no podhost daemon is running at {} ({source}); start it (or give its \
                     --socket), or load without a daemon straight into its store with \
                     --root-dir DIR (the daemon's --root-dir, default {DEFAULT_ROOT})",
                    socket.display()
                );
            };
            eprintln!(
                "no daemon is running at {}; loading straight into {}",
                socket.display(),
                root_dir.display()
            );
            podhost::image::ImageStore::open(root_dir)?.load_named(&abs, name.as_deref())?
        }
        Err(e) => return Err(e.into()),
    };
    for r in refs {
        println!("Loaded image: {r}");
    }
    Ok(0)
}

/// True when connecting failed because no daemon listens (no socket file, or a
/// stale one), not because one refused us (permissions).
fn no_daemon(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}
