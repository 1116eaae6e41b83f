//! The command line as clap parses it: global flags and one variant per command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cli::logs_query::LogsFlags;
use crate::cli::pod_ref::NamespaceFlag;
use crate::daemon::flags::DaemonFlags;

/// The API socket when `--socket` is not given.
pub const DEFAULT_SOCKET: &str = "/run/podhost/podhost.sock";

#[derive(Parser)]
#[command(
    name = "podhost",
    version,
    about = "Runs Kubernetes static pods on this host, without a CRI"
)]
pub struct Cli {
    /// The daemon's API socket [default: /run/podhost/podhost.sock].
    #[arg(long, global = true)]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the node agent: watch the manifest dir and run its pods.
    Daemon(Box<DaemonFlags>),
    /// List pods (or events), as `kubectl get`.
    Get(GetArgs),
    /// Show a pod's (or the node's) details and events, as `kubectl describe`.
    Describe {
        /// `pod` (or `pods`, `po`), `node` (or `nodes`, `no`), or TYPE/NAME.
        resource: String,
        /// The pod: NAME or NAMESPACE/NAME (without it, every pod of the namespace);
        /// the node's name (optional: the daemon has one).
        name: Option<String>,
        #[command(flatten)]
        namespace: NamespaceFlag,
    },
    /// Print a container's logs.
    Logs {
        /// NAME, NAMESPACE/NAME or pod/NAME.
        pod: String,
        #[command(flatten)]
        flags: LogsFlags,
        #[command(flatten)]
        namespace: NamespaceFlag,
    },
    /// Run a command in a running container, as `kubectl exec`.
    Exec {
        /// NAME, NAMESPACE/NAME or pod/NAME.
        pod: String,
        #[command(flatten)]
        namespace: NamespaceFlag,
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// Pass this terminal's (or pipe's) input to the command; without it the
        /// command reads nothing.
        #[arg(short = 'i', long)]
        stdin: bool,
        /// With -i and a terminal: run the command on a terminal of its own (raw
        /// keys, Ctrl-C as SIGINT, window size kept in step).
        #[arg(short = 't', long)]
        tty: bool,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Add an ephemeral debug container to a running pod (its namespaces, and with
    /// --target that container's pid namespace), print its output until it exits, and
    /// exit with its exit code, as `kubectl debug` does.
    Debug {
        /// NAME, NAMESPACE/NAME or pod/NAME.
        pod: String,
        #[command(flatten)]
        namespace: NamespaceFlag,
        #[arg(long)]
        image: String,
        /// The container whose pid namespace to join (its processes are visible).
        #[arg(long)]
        target: Option<String>,
        /// The debug container's name (default debugger-xxxxx).
        #[arg(long = "container", short = 'c')]
        name: Option<String>,
        #[arg(long, value_name = "Always|IfNotPresent|Never")]
        image_pull_policy: Option<String>,
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Forward local ports to a pod's ports, as `kubectl port-forward` does: until
    /// interrupted, or until the pod goes (exit 1).
    PortForward {
        /// NAME, NAMESPACE/NAME or pod/NAME.
        pod: String,
        #[command(flatten)]
        namespace: NamespaceFlag,
        /// LOCAL:REMOTE, REMOTE (the same local port) or :REMOTE (a free local port);
        /// REMOTE may name a container port.
        #[arg(required = true, value_name = "[LOCAL_PORT:]REMOTE_PORT")]
        ports: Vec<String>,
        /// Addresses to listen on (comma separated, repeatable): localhost (127.0.0.1
        /// and ::1) or IP addresses.
        #[arg(long = "address", value_delimiter = ',', default_value = "localhost")]
        addresses: Vec<String>,
    },
    /// Load an OCI image layout dir, oci-archive or docker-archive tar into the image store.
    Load {
        path: PathBuf,
        /// Name the image REF (a full reference, e.g. localhost/busybox:1), for sources
        /// whose image has no name or only a tag; with several images, the one REF or
        /// its tag names.
        #[arg(long, value_name = "REF")]
        name: Option<String>,
        /// The store to load into (the daemon's --root-dir, e.g. /var/lib/podhost):
        /// refused unless the daemon answering at the socket has this root dir; when no
        /// daemon answers, load straight into it. Without it, no daemon is an error.
        #[arg(long)]
        root_dir: Option<PathBuf>,
    },
    /// List the images in the store.
    Images,
    /// Pull an image from a registry into the store (progress and the store on stderr).
    Pull {
        reference: String,
        /// Refuse unless the daemon answering at the socket has this --root-dir.
        #[arg(long)]
        root_dir: Option<PathBuf>,
    },
    /// Remove an image (refused while a pod uses it); the store on stderr.
    Rmi {
        reference: String,
        /// Refuse unless the daemon answering at the socket has this --root-dir.
        #[arg(long)]
        root_dir: Option<PathBuf>,
    },
    /// Run container GC and image GC now; the report on stdout, the store on stderr.
    Gc {
        /// Refuse unless the daemon answering at the socket has this --root-dir.
        #[arg(long)]
        root_dir: Option<PathBuf>,
    },
    /// Show CPU and memory use of the pods or of the node, as `kubectl top`: CPU in
    /// millicores, memory as the working set; --psi adds cpu/memory/io pressure (some,
    /// avg10), which kubectl cannot show.
    Top {
        /// `pods` (or `pod`, `po`) or `node` (or `nodes`, `no`).
        resource: String,
        #[command(flatten)]
        namespace: NamespaceFlag,
        /// Every namespace's pods, with a NAMESPACE column.
        #[arg(short = 'A', long = "all-namespaces")]
        all_namespaces: bool,
        /// One row per container.
        #[arg(long)]
        containers: bool,
        /// Sort by `cpu` or `memory`, highest first.
        #[arg(long, value_name = "cpu|memory")]
        sort_by: Option<String>,
        /// Add the pressure stall columns (cpu, memory, io: some avg10).
        #[arg(long)]
        psi: bool,
        /// Instead of the table: `json` prints the daemon's whole Summary (the kubelet's
        /// /stats/summary), `prometheus` its /metrics/cadvisor text.
        #[arg(short = 'o', long = "output", value_name = "json|prometheus")]
        output: Option<String>,
    },
    /// Check Pod manifests without running them (no daemon needed): every error with
    /// its field path, and for each field set whether podhost honours, ignores or
    /// rejects it. Exit status 1 when any manifest has an error.
    Validate {
        /// Manifest files, or directories whose manifests to check (as the daemon reads
        /// its manifest directory: every non-dot file, not recursively).
        #[arg(required = true, value_name = "FILE|DIR")]
        paths: Vec<PathBuf>,
        /// Output format: json (a stable array of {file, pod, errors, fields}).
        #[arg(short = 'o', long = "output")]
        output: Option<String>,
        /// The node name the pods would run on (their names become <name>-<node>);
        /// default: this host's name, as the daemon's.
        #[arg(long)]
        node_name: Option<String>,
    },
    /// (internal) the per-container process.
    #[command(hide = true)]
    Shim { config: PathBuf },
    /// (internal) libcontainer's delete after a monitored container exited.
    #[command(hide = true)]
    ShimCleanup { config: PathBuf },
    /// (internal) create a pod's shared namespaces.
    #[command(hide = true)]
    Sandbox(crate::cli::commands::helpers::SandboxArgs),
    /// (internal) PID 1 of a pod's shared pid namespace.
    #[command(hide = true)]
    Pause {
        /// The pod's ns dir (informational: shows in `ps` which pod it holds).
        #[arg(long)]
        ns_dir: Option<PathBuf>,
    },
    /// (internal) the createContainer hook that sets volume mounts' propagation.
    #[command(hide = true)]
    MountPropagation {
        #[arg(long)]
        rootfs: PathBuf,
        /// `/DEST=private|slave|shared`, one per volume mount.
        #[arg(last = true)]
        entries: Vec<String>,
    },
    /// (internal) run a command in a container (hooks).
    #[command(hide = true)]
    ExecHelper {
        #[arg(long)]
        libcontainer_root: PathBuf,
        #[arg(long)]
        id: String,
        /// Kill the command and everything it started after this many milliseconds
        /// (exit 124), or on SIGTERM (exec probes' timeoutSeconds).
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// Run the command on a terminal of its own and send the terminal's master to
        /// the unix socket listening here (`kubectl exec -t`).
        #[arg(long, conflicts_with = "timeout_ms")]
        console_socket: Option<PathBuf>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// `get`'s arguments and flags, kubectl's.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// `pods` (or `pod`, `po`) and optionally pod names (NAME or NAMESPACE/NAME), or
    /// `pod/NAME`…; or `events` (or `ev`): the node's and the pods'.
    #[arg(required = true, value_name = "RESOURCE [NAME…]")]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub namespace: NamespaceFlag,
    /// Every namespace, with a NAMESPACE column.
    #[arg(short = 'A', long = "all-namespaces")]
    pub all_namespaces: bool,
    /// Only pods whose labels match (k=v, k!=v, 'k in (a,b)', 'k notin (a,b)', k, !k;
    /// comma separated, all required).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// A LABELS column.
    #[arg(long)]
    pub show_labels: bool,
    /// Tables without their header row.
    #[arg(long)]
    pub no_headers: bool,
    /// Output format: wide, name, json, yaml, jsonpath=TEMPLATE or custom-columns=SPEC
    /// (kubectl's).
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    /// Events: only those about this object (`pod/NAME`, `node/NAME`); without -n, a
    /// pod's in whichever namespace it is.
    #[arg(long = "for", value_name = "TYPE/NAME")]
    pub for_object: Option<String>,
    /// Pods: after the list, a line per change as it happens (with `-o json`, one
    /// watch event per line: `{"type": ADDED|MODIFIED|DELETED, "object": pod}`).
    #[arg(short = 'w', long = "watch")]
    pub watch: bool,
}

impl Command {
    /// The daemon and the helpers it execs, as opposed to the user's commands.
    pub fn is_daemon_side(&self) -> bool {
        matches!(
            self,
            Command::Daemon(_)
                | Command::Shim { .. }
                | Command::ShimCleanup { .. }
                | Command::Sandbox(_)
                | Command::Pause { .. }
                | Command::ExecHelper { .. }
                | Command::MountPropagation { .. }
        )
    }
}
