//! `podhost daemon`: wires the source, the pod workers, the status store and the API.

mod api_pods;
/// The API's pods as the pod manager runs them (the live cluster tests convert the
/// pods a real API server defaulted).
pub use api_pods::ApiPodCache;
mod cluster_admission;
mod cluster_certs;
mod cluster_events;
pub mod cluster_flags;
mod cluster_mirror;
mod cluster_node;
mod cluster_objects;
mod cluster_pod_status;
mod config_dir;
mod ephemeral_target;
pub mod flags;
mod gc_trigger;
mod host;
pub mod kubelet_api;
pub mod kubelet_config;
mod log_drops;
mod log_drops_watch;
mod manager;
mod network_choice;
mod node_facts;
mod node_name;
mod oom;
mod pod_cidr_report;
mod pod_sources;
mod port_forward;
/// Connections into pods (the kubelet API's tests serve port-forwards with it).
pub use port_forward::PodPortForwarder;
pub mod reload;
mod runonce;
pub mod sd_notify;
mod service_notify;
mod supervise;
mod temp_sweep;

pub use node_name::{NodeNameError, NodeNameOrigin, normalize_node_name, resolve_node_name};
pub use supervise::EXIT_TASK_ENDED;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::worker::Ctx;
use podhost_api::{ApiState, ClaimedSocket, SocketAccess, serve};
use podhost_disk::Layout;
use podhost_image::ImageStore;
use podhost_model::backoff::BackoffPolicy;
use podhost_status::StatusStore;

/// The daemon's settings (flags of `podhost daemon`).
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub manifest_dir: PathBuf,
    /// ConfigMaps and Secrets for pods (`--config-dir`).
    pub config_dir: PathBuf,
    pub root_dir: PathBuf,
    pub log_dir: PathBuf,
    pub node_name: String,
    pub socket: PathBuf,
    /// Who besides root may use the API socket (`--socket-group`).
    pub socket_access: SocketAccess,
    /// Overrides the cgroup parent (default: the daemon's own cgroup on cgroup v2, a
    /// `podhost` child of it on v1/hybrid hosts).
    pub cgroup_root: Option<String>,
    /// Containers' rlimits unless a pod's annotation says otherwise.
    pub default_rlimits: Vec<podhost_model::rlimits::Rlimit>,
    /// `pids.max` of every pod cgroup (the kubelet's podPidsLimit); `None` = unlimited.
    pub pod_pids_limit: Option<i64>,
    /// Host IDs for `hostUsers: false` pods (`--userns-range`).
    pub userns_range: podhost_runtime::userns::IdRange,
    pub backoff: BackoffPolicy,
    /// The authoritative rescan of the manifest dir (kubelet: 20 s).
    pub rescan_every: Duration,
    /// Registry credentials (docker config.json); a missing file means anonymous.
    pub image_credentials: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Image and container GC policies and periods.
    pub gc: crate::gc::runner::GcSettings,
    /// RuntimeDefault seccomp for containers that name no profile.
    pub seccomp_default: bool,
    /// The sysctls pods may set.
    pub sysctls: podhost_model::sysctl::SysctlAllowlist,
    /// Container log rotation (`--container-log-max-size`, `--container-log-max-files`).
    pub log_rotation: podhost_logs::RotationPolicy,
    /// How pods get their network.
    pub network: podhost_network::NetworkSettings,
    /// The pods' DNS (`--cluster-dns`, `--cluster-domain`, `--resolv-conf`).
    pub dns: podhost_model::dns::DnsSettings,
    /// The http static pod source beside the manifest dir (`--manifest-url`).
    pub manifest_url: Option<podhost_source::UrlSource>,
    /// `--runonce`: run the sources' pods once, waiting at most this long for them.
    pub runonce: Option<Duration>,
    /// The eviction manager's thresholds and periods (`--eviction-*`).
    pub eviction: crate::eviction::EvictionSettings,
    /// Where the read-only HTTP endpoint listens (`--address`, `--read-only-port`);
    /// `None`: off.
    pub read_only: Option<std::net::SocketAddr>,
    /// The daemon's own RLIMIT_NOFILE (`--max-open-files`, the kubelet's maxOpenFiles).
    pub max_open_files: u64,
    /// `--config`: the file, for its start-up report and SIGHUP re-reads.
    pub config_file: Option<reload::ReloadSource>,
    /// `--kubeconfig` and the node's registration settings; `None`: static pods only.
    pub cluster: Option<cluster_flags::ClusterConfig>,
}

/// Daemon start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A directory podhost needs could not be created.
    #[error("cannot create {path}: {source}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No cgroup hierarchy is mounted: no container could be created.
    #[error(transparent)]
    NoCgroups(#[from] podhost_runtime::cgroup_mount::CgroupMountError),
    /// Cluster mode cannot start (the kubeconfig).
    #[error(transparent)]
    Cluster(#[from] podhost_cluster::ClusterError),
    /// Another daemon already uses the root dir.
    #[error(
        "another podhost daemon already uses {0} (lock held); stop it or use another --root-dir"
    )]
    Locked(PathBuf),
    /// The user namespace allocations cannot be loaded.
    #[error(transparent)]
    Userns(#[from] podhost_runtime::userns::UsernsError),
    /// The image store could not be opened.
    #[error(transparent)]
    Images(#[from] podhost_image::ImageError),
    /// The API socket path is taken, or could not be bound.
    #[error(transparent)]
    SocketPath(#[from] podhost_api::SocketError),
    /// The API could not be served on the bound socket.
    #[error("cannot serve the API on {path}: {source}")]
    Socket {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The read-only HTTP endpoint cannot listen.
    #[error(transparent)]
    ReadOnly(#[from] podhost_api::readonly::ReadOnlyError),
    /// The kubelet API (cluster mode's --port) cannot start.
    #[error(transparent)]
    KubeletApi(#[from] podhost_api::kubelet::KubeletApiError),
    /// A signal handler (SIGHUP for config reload, SIGTERM/SIGINT for a clean stop)
    /// could not be installed.
    #[error("cannot install the daemon's signal handlers (SIGHUP, SIGTERM, SIGINT): {0}")]
    Signal(#[source] std::io::Error),
    /// A task the daemon cannot run without panicked or ended.
    #[error(
        "the daemon's {task} task {how}; the daemon exits (status {EXIT_TASK_ENDED}) so that \
         the service manager restarts it: containers keep running in their shims and the \
         new daemon adopts them"
    )]
    TaskEnded { task: &'static str, how: String },
    /// `--runonce`: a pod failed or did not come up, or a manifest was unusable.
    #[error(
        "runonce: {failed} of {pods} pods failed or did not come up, {manifest_errors} manifests could not be used (see the table above); the pods are left as they are"
    )]
    RunOnceFailed {
        failed: usize,
        pods: usize,
        manifest_errors: usize,
    },
}

impl DaemonError {
    /// The process's exit status for this error: [`EXIT_TASK_ENDED`] when an essential
    /// task died, 1 for every start-up error.
    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::TaskEnded { .. } => EXIT_TASK_ENDED,
            _ => 1,
        }
    }
}

/// The node's security settings; on an AppArmor host, podhost's default profile is
/// loaded for containers that name none (a node event says so when it cannot be).
fn node_security(cfg: &DaemonConfig, store: &StatusStore) -> crate::worker::security::NodeSecurity {
    let mut node = crate::worker::security::NodeSecurity {
        seccomp_default: cfg.seccomp_default,
        sysctls: cfg.sysctls.clone(),
        ..crate::worker::security::NodeSecurity::new(&cfg.root_dir)
    };
    if node.apparmor_enabled {
        match podhost_runtime::apparmor::load_default_profile() {
            Ok(_) => node.apparmor_default = true,
            Err(e) => store.node_event(
                podhost_status::EventKind::Warning,
                "AppArmorDefaultUnavailable",
                format!("{e}; containers that name no AppArmor profile run without one"),
            ),
        }
    }
    node
}

/// Runs the daemon until SIGTERM/SIGINT. Containers keep running when it stops.
pub async fn run(cfg: DaemonConfig) -> Result<(), DaemonError> {
    // First of all: SIGHUP's default action would end the daemon, and SIGTERM's would
    // skip the cleanup (the socket would stay behind).
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(DaemonError::Signal)?;
    let mut stop_signals = host::StopSignals::install().map_err(DaemonError::Signal)?;
    let notifier = sd_notify::Notifier::from_env()
        .inspect_err(|e| tracing::warn!(error = %e, "systemd notifications are off"))
        .ok()
        .flatten()
        .map(Arc::new);
    // Before anything is written: without a cgroup hierarchy every container would fail.
    podhost_runtime::cgroup_mount::require_cgroup_mount(std::path::Path::new(
        podhost_runtime::cgroup_mount::CGROUP_MOUNT_POINT,
    ))?;
    for dir in [&cfg.root_dir, &cfg.log_dir] {
        std::fs::create_dir_all(dir).map_err(|source| DaemonError::Dir {
            path: dir.clone(),
            source,
        })?;
    }
    let served_socket = cfg.runonce.is_none().then_some(cfg.socket.as_path());
    let _lock = host::lock_root(&cfg.root_dir, served_socket)?;
    // Before anything of this daemon writes: only dead writers' temps can be stale.
    let layout = Layout::new(&cfg.root_dir, &cfg.log_dir);
    temp_sweep::sweep_stale_temps(&layout, &cfg.socket);
    podhost_volume::sweep_orphan_volumes(&layout);
    // Before anything with side effects: a second daemon on this socket stops here.
    // A --runonce run serves no API, so it never competes for a daemon's socket.
    let socket = match cfg.runonce {
        None => Some(ClaimedSocket::claim(
            &cfg.socket,
            cfg.socket_access.clone(),
        )?),
        Some(_) => None,
    };
    host::tune_daemon_process(cfg.max_open_files);
    let cgroups = Arc::new(host::node_cgroups(
        cfg.cgroup_root.clone(),
        cfg.pod_pids_limit,
    ));
    let default_rlimits = host::container_default_rlimits(cfg.default_rlimits.clone());
    let images = Arc::new(ImageStore::open(&cfg.root_dir)?);
    let store = Arc::new(StatusStore::load(layout.clone(), &cfg.node_name));
    host::report_cgroup_enforcement(&cgroups, &store);
    let (images_tx, images_rx) = tokio::sync::watch::channel(0u64);
    let exe = std::env::current_exe().map_err(|source| DaemonError::Dir {
        path: "/proc/self/exe".into(),
        source,
    })?;
    let podhost_exe = exe.clone();
    let puller = podhost_image::pull::Puller::new(
        images.clone(),
        podhost_image::pull::PullOptions {
            insecure_registries: cfg.insecure_registries.clone(),
            credentials_file: cfg.image_credentials.clone(),
        },
    );
    let leases = podhost_image::gc::ImageLeases::new();
    // Read before any pod starts, so that their env and volumes see the objects.
    let (config_objects, config_watcher) =
        podhost_source::configdir::watch(cfg.config_dir.clone(), cfg.rescan_every);
    let ephemeral = crate::worker::ephemeral::EphemeralRegistry::default();
    // Cluster mode: the Node's spec.podCIDRs, read once it is registered, for the
    // bridge's IPAM when --pod-cidr is not given.
    let (node_cidrs_tx, node_cidrs_rx) = tokio::sync::watch::channel(None);
    let network = Arc::new(podhost_network::NodeNetwork::new(
        cfg.network.clone(),
        &cfg.root_dir.join("network"),
        &layout.pods_dir(),
        cfg.cluster.is_some().then(|| node_cidrs_rx.clone()),
    ));
    let (rotation_tx, rotation_rx) = tokio::sync::watch::channel(cfg.log_rotation);
    let node_facts = node_facts::NodeFacts::read(&cfg);
    // Cluster mode's pods read their ConfigMaps and Secrets from the API server; the
    // watches that fill this channel start with the pod watch below.
    let api_objects = (cfg.cluster.is_some() && cfg.runonce.is_none())
        .then(|| tokio::sync::watch::channel(Arc::new(Default::default())));
    // Cluster mode's Services (static pods get their variables too, --runonce included);
    // the watch that fills this channel starts with the node below.
    let api_services = cfg
        .cluster
        .is_some()
        .then(|| tokio::sync::watch::channel(Arc::new(Default::default())));
    let ctx = Arc::new(Ctx {
        layout: layout.clone(),
        store: store.clone(),
        images: images.clone(),
        exe,
        load_command: match cfg.runonce {
            None => format!("podhost load --socket {}", cfg.socket.display()),
            Some(_) => format!("podhost load --root-dir {}", cfg.root_dir.display()),
        },
        cgroups,
        backoff: cfg.backoff,
        default_rlimits,
        can_raise_limits: host::has_cap_sys_resource(),
        memory_capacity: host::memory_capacity(),
        oom_victims: Arc::new(crate::oom::OomVictims::default()),
        puller: puller.clone(),
        leases: leases.clone(),
        images_changed: images_rx,
        security: node_security(&cfg, &store),
        userns: Arc::new(podhost_runtime::userns::UsernsAllocator::open(
            &cfg.root_dir.join("userns"),
            cfg.userns_range,
        )?),
        log_rotation: rotation_rx,
        ephemeral: ephemeral.clone(),
        config_objects: config_objects.clone(),
        api_objects: api_objects.as_ref().map(|(_, rx)| rx.clone()),
        api_services: api_services.as_ref().map(|(_, rx)| rx.clone()),
        host_ips: host::node_host_ips(
            cfg.cluster
                .as_ref()
                .map(|c| c.node_ips.as_slice())
                .unwrap_or_default(),
        ),
        node_capacity: host::node_capacity(&cfg.root_dir),
        network: network.clone(),
        host_ports: crate::worker::host_ports::HostPortRegistry::default(),
        admission: crate::worker::admission_ledger::AdmissionLedger::new(
            node_facts.admission_view(),
        ),
        dns: crate::worker::dns_files::NodeDns::new(cfg.dns.clone()),
    });
    // The pod network starts now (and releases what a killed daemon left); if it
    // cannot, pods that need it retry, as the kubelet's "network not ready".
    let started = network.backend().await;
    if let Ok(backend) = &started {
        network_choice::report(cfg.network.mode, backend, &store);
    }
    let pod_network = network_choice::summary(
        started
            .as_ref()
            .map(|backend| *backend)
            .map_err(|e| e as &dyn std::fmt::Display),
    );
    if let Ok(podhost_network::PodNetwork::Bridge(bridge)) = &started
        && let Some(problem) = bridge.nft_problem()
    {
        store.node_event(
            podhost_status::EventKind::Warning,
            "NftablesUnavailable",
            format!(
                "{problem}; pods get addresses and reach each other, but hostPorts cannot \
                 be published and traffic leaving the host is not masqueraded"
            ),
        );
    }
    if let Err(podhost_network::NetworkError::PodCidrPending) = &started {
        tracing::info!("pods without hostNetwork wait for the Node's spec.podCIDR");
    } else if let Err(e) = started {
        tracing::error!("pod network cannot start: {e}");
        store.node_event(
            podhost_status::EventKind::Warning,
            "NetworkNotReady",
            format!(
                "the pod network ({:?}) cannot start: {e}; pods without hostNetwork wait for it",
                cfg.network.mode
            ),
        );
    }
    let mut essential = supervise::EssentialTasks::default();
    essential.watch("config dir watcher", config_watcher);
    essential.watch(
        "config dir error reporter",
        tokio::spawn(config_dir::report_errors(config_objects, store.clone())),
    );
    let gc = crate::gc::runner::GcRunner::new(
        crate::gc::runner::GcTargets {
            layout: layout.clone(),
            images: images.clone(),
            leases: leases.clone(),
            store: store.clone(),
            userns: ctx.userns.clone(),
        },
        cfg.gc.clone(),
    );
    for (name, loop_task) in gc.spawn_loops() {
        essential.watch(name, loop_task);
    }
    // Node, pod and container statistics (/stats/summary, /metrics/cadvisor, `top`).
    let stats = Arc::new(podhost_stats::Collector::new(
        cfg.node_name.clone(),
        layout.clone(),
        ctx.cgroups.clone(),
        store.clone(),
    ));
    essential.watch(
        "stats housekeeping",
        stats.spawn_housekeeping(podhost_stats::HOUSEKEEPING_INTERVAL),
    );
    // `--config`: its unimplemented fields reported once; SIGHUP re-reads it and
    // publishes what can change live (subscribe to `live_settings` for more).
    if let Some(source) = &cfg.config_file {
        reload::report_at_start(source, &store);
    }
    let (live_settings, _) = tokio::sync::watch::channel(reload::LiveSettings::of(&cfg));
    let (eviction_tx, eviction_settings) = tokio::sync::watch::channel(cfg.eviction.clone());
    tokio::spawn(reload::run(
        hangups,
        cfg.config_file.clone(),
        store.clone(),
        reload::LiveTargets {
            settings: live_settings.clone(),
            log_rotation: rotation_tx,
            gc: gc.clone(),
            eviction: eviction_tx,
        },
        notifier.clone(),
    ));
    // One way into pods for both port-forwards: the local API's and the kubelet API's.
    let port_forwarder: Arc<dyn podhost_api::PortForwardTarget> =
        Arc::new(port_forward::PodPortForwarder::new(layout.clone()));
    // The Node this daemon would register, for `podhost describe node`: created now,
    // annotated with the pod network in use.
    let mut node = podhost_model::node::node_object(&node_facts.host, &node_facts.settings);
    node.metadata.creation_timestamp = Some(podhost_status::k8s_time(chrono::Utc::now()));
    node.metadata
        .annotations
        .get_or_insert_default()
        .insert(network_choice::ANNOTATION.to_string(), pod_network);
    let api = Arc::new(ApiState {
        node: Arc::new(node),
        stats: stats.clone(),
        ephemeral: Arc::new(ephemeral),
        port_forward: port_forwarder.clone(),
        store: store.clone(),
        images: images.clone(),
        layout,
        images_changed: images_tx,
        puller,
        gc: gc.clone(),
        leases,
    });
    let mut server = socket
        .map(|socket| serve(socket, api))
        .transpose()
        .map_err(|source| DaemonError::Socket {
            path: cfg.socket.clone(),
            source,
        })?;
    if let Some(accept_loop) = server.as_mut().and_then(|s| s.take_task()) {
        essential.watch("API server", accept_loop);
    }
    if let Some(addr) = cfg.read_only {
        let state = podhost_api::readonly::ReadOnlyState {
            store: store.clone(),
            health: podhost_metrics::health().clone(),
            stats: stats.clone(),
        };
        essential.watch(
            "read-only HTTP endpoint",
            podhost_api::readonly::serve(addr, state).await?,
        );
    }
    tracing::info!(
        manifests = %cfg.manifest_dir.display(),
        root = %cfg.root_dir.display(),
        socket = %cfg.socket.display(),
        node = %cfg.node_name,
        "podhost daemon started"
    );
    if let Some(oom_task) = oom::start(
        &cfg.root_dir,
        ctx.cgroups.root.clone(),
        store.clone(),
        ctx.oom_victims.clone(),
    ) {
        essential.watch("kernel log OOM watcher", oom_task);
    }
    essential.watch(
        "log drop reporter",
        log_drops::start(store.clone(), ctx.layout.clone()),
    );
    // The eviction manager's orders reach the pod workers through the pod manager.
    let (evictions_tx, evictions) = tokio::sync::mpsc::unbounded_channel();
    essential.watch(
        "eviction manager",
        crate::eviction::spawn(
            eviction_settings,
            crate::eviction::EvictionTargets {
                layout: ctx.layout.clone(),
                store: store.clone(),
                cgroups: ctx.cgroups.clone(),
                gc,
                sources: crate::eviction::signals::SignalSources {
                    root_dir: cfg.root_dir.clone(),
                    image_dir: cfg.root_dir.join("images"),
                },
            },
            evictions_tx,
        ),
    );
    let mut api_source = None;
    if let Some(cluster) = &cfg.cluster {
        let node = cluster_node::start(
            cluster,
            store.clone(),
            node_facts,
            network.clone(),
            images.clone(),
        )
        .await?;
        // The node's own Node as the API server has it: its labels and taints for
        // admission, its spec.podCIDR for the bridge's IPAM.
        let own_node =
            podhost_cluster::own_node::watch_own_node(node.client.clone(), &cfg.node_name);
        tokio::spawn(podhost_cluster::pod_cidr::follow(
            own_node.clone(),
            node_cidrs_tx,
        ));
        tokio::spawn(pod_cidr_report::run(
            network.clone(),
            cfg.network.clone(),
            node_cidrs_rx,
            store.clone(),
        ));
        essential.watch("cluster node (registration, lease, status)", node.task);
        if let Some((services, _)) = api_services {
            essential.watch(
                "Services watch (the containers' service variables)",
                tokio::spawn(podhost_cluster::services::follow_services(
                    node.client.clone(),
                    services,
                )),
            );
        }
        if let Some(rotation) = node.rotation {
            essential.watch("client certificate rotation", rotation);
        }
        let kubelet_api = kubelet_api::start(
            cluster,
            kubelet_api::KubeletApiParts {
                client: node.client.clone(),
                store: store.clone(),
                layout: ctx.layout.clone(),
                node_name: cfg.node_name.clone(),
                root_dir: cfg.root_dir.clone(),
                podhost_exe: podhost_exe.clone(),
                port_forward: port_forwarder.clone(),
                stats: stats.clone(),
            },
        )
        .await?;
        essential.watch("kubelet API (--port)", kubelet_api);
        // The node's and the API pods' events, posted as core/v1 Events.
        let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
        essential.watch(
            "event poster to the API server",
            tokio::spawn(podhost_cluster::events::run(node.client.clone(), events_rx)),
        );
        essential.watch(
            "event follower",
            tokio::spawn(cluster_events::follow(
                store.clone(),
                cfg.node_name.clone(),
                events_tx,
            )),
        );
        if cfg.runonce.is_none() {
            let (ends, ends_rx) = tokio::sync::mpsc::unbounded_channel();
            let pods = podhost_cluster::pods::watch_node_pods(node.client.clone(), &cfg.node_name);
            // One limiter for the client's writes, as the kubelet has one per client.
            let limiter = podhost_cluster::rate::ClientLimiter::kubelet_default();
            tokio::spawn(cluster_admission::run(own_node, ctx.admission.clone()));
            essential.watch(
                "pod status sync to the API server",
                tokio::spawn(cluster_pod_status::run(
                    node.client.clone(),
                    store.clone(),
                    ends_rx,
                    pods.mirrors.clone(),
                    pods.bound.clone(),
                    limiter.clone(),
                )),
            );
            essential.watch(
                "mirror pods of the static pods",
                tokio::spawn(cluster_mirror::run(
                    node.client.clone(),
                    store.clone(),
                    pods.mirrors,
                    node.node_uid,
                    cfg.node_name.clone(),
                    limiter,
                )),
            );
            if let Some((objects, _)) = api_objects {
                essential.watch(
                    "ConfigMap and Secret watches of the API pods",
                    tokio::spawn(cluster_objects::run(
                        node.client.clone(),
                        pods.bound.clone(),
                        objects,
                    )),
                );
            }
            api_source = Some(manager::ApiSource {
                pods: pods.bound,
                ends,
            });
        }
    }
    let (scans, mut runonce) = match cfg.runonce {
        None => (pod_sources::watch_sources(&cfg), None),
        Some(bound) => {
            let scan = pod_sources::read_sources_once(&cfg).await;
            let plan = runonce::Plan::of(&scan);
            let wait = runonce::wait_and_report(store.clone(), plan, bound);
            (pod_sources::hold(scan), Some(tokio::spawn(wait)))
        }
    };
    let (manager_pings, pings) = tokio::sync::mpsc::channel(4);
    // The manager also ends when the manifest watcher dies (its scans stop).
    essential.watch(
        "pod manager",
        tokio::spawn(manager::run(ctx, scans, api_source, pings, evictions)),
    );
    if let Some(n) = &notifier {
        tokio::spawn(service_notify::run(n.clone(), manager_pings, store.clone()));
    }
    let outcome = tokio::select! {
        () = stop_signals.wait() => {
            tracing::info!("stopping the daemon; containers keep running");
            Ok(())
        }
        run = runonce::finished(&mut runonce) => run,
        end = essential.first_end() => {
            tracing::error!(task = end.task, how = %end.how, "an essential task of the daemon ended: exiting so that the service manager restarts the daemon; containers keep running");
            Err(DaemonError::TaskEnded { task: end.task, how: end.how })
        }
    };
    if let Some(n) = &notifier {
        n.send("STOPPING=1");
    }
    essential.abort_all();
    if let Some(server) = server {
        server.stop();
    }
    // What the workers reported last reaches the disk before the process ends.
    let _ = tokio::task::spawn_blocking(move || store.flush()).await;
    outcome
}
