//! `podhost daemon`'s flags and their mapping to [`DaemonConfig`]: every flag's parsing
//! and range check in one place, with errors that name the flag.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{DaemonConfig, NodeNameError, resolve_node_name};
use podhost_disk::DEFAULT_ROOT_DIR;
use podhost_model::backoff::BackoffPolicy;

/// A flag of `podhost daemon` that cannot be used as given.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error(transparent)]
    NodeName(#[from] NodeNameError),
    #[error(transparent)]
    SocketGroup(#[from] podhost_api::AccessError),
    #[error(transparent)]
    LogRotation(#[from] podhost_logs::PolicyError),
    #[error(transparent)]
    UsernsRange(#[from] podhost_runtime::userns::UsernsError),
    #[error("--default-rlimits: {0}")]
    Rlimits(#[source] podhost_model::rlimits::RlimitError),
    #[error(transparent)]
    Sysctls(#[from] podhost_model::sysctl::SysctlError),
    #[error(transparent)]
    Network(#[from] podhost_network::NetworkError),
    #[error(transparent)]
    ManifestUrl(#[from] podhost_source::ManifestUrlError),
    #[error(transparent)]
    Eviction(#[from] crate::eviction::EvictionConfigError),
    #[error(transparent)]
    Cluster(#[from] super::cluster_flags::ClusterFlagError),
    /// A duration flag that is negative, NaN or too large.
    #[error("--{flag} must be a positive number of seconds")]
    Seconds {
        flag: &'static str,
        #[source]
        source: std::time::TryFromFloatSecsError,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DaemonFlags {
    #[arg(long, default_value = "/etc/podhost/manifests")]
    pub pod_manifest_path: PathBuf,
    #[arg(long, default_value = DEFAULT_ROOT_DIR)]
    pub root_dir: PathBuf,
    /// ConfigMap and Secret objects (YAML/JSON files) for pods' configMap/secret
    /// volumes and env; watched, a missing dir is empty.
    #[arg(long, default_value = podhost_source::configdir::DEFAULT_CONFIG_DIR)]
    pub config_dir: PathBuf,
    #[arg(long, default_value = "/var/log/pods")]
    pub log_dir: PathBuf,
    /// Defaults to the host name; trimmed and lowercased, then it must be a DNS-1123
    /// subdomain (as the kubelet's node name).
    #[arg(long)]
    pub node_name: Option<String>,
    /// A group (name or GID) whose members may use the API socket besides root; the
    /// socket is then 0660 root:GROUP instead of 0600 root:root. This is
    /// root-equivalent access: the API execs in any container, starts debug containers
    /// and loads image archives from any host path as root. Name only a group whose
    /// members could be root anyway.
    #[arg(long)]
    pub socket_group: Option<String>,
    /// Parent cgroup for every cgroup podhost creates (default: the daemon's own; the
    /// daemon then moves itself into its `daemon` leaf).
    #[arg(long)]
    pub cgroup_root: Option<String>,
    /// Containers' rlimits unless a pod's `podhost.io/rlimits.<container>` annotation
    /// overrides them, as `name=soft:hard,…`.
    #[arg(long, default_value = "nofile=1048576:1048576")]
    pub default_rlimits: String,
    /// Rotate a container's log before it grows past this size (kubelet's
    /// containerLogMaxSize); 0 or negative turns rotation off.
    #[arg(long, default_value = "10Mi", allow_hyphen_values = true)]
    pub container_log_max_size: String,
    /// Files kept per container log, the current one included (kubelet's
    /// containerLogMaxFiles; at least 2).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub container_log_max_files: i64,
    /// pids.max of every pod cgroup (the kubelet's podPidsLimit); -1 = unlimited.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub pod_pids_limit: i64,
    /// Host IDs for `hostUsers: false` pods, START:LENGTH in multiples of 65536 (one
    /// block of 65536 per pod); default: the kubelet's range, 65536 up.
    #[arg(long, default_value = "65536:4294836224")]
    pub userns_range: String,
    /// First CrashLoopBackOff delay in seconds (kubelet: 10); tests shorten it.
    #[arg(long, default_value_t = 10.0)]
    pub crashloop_initial_backoff: f64,
    /// Longest CrashLoopBackOff delay in seconds (kubelet: 300).
    #[arg(long, default_value_t = 300.0)]
    pub crashloop_max_backoff: f64,
    /// Seconds between authoritative rescans of the manifest dir (kubelet: 20).
    #[arg(long, default_value_t = 20.0)]
    pub rescan_interval: f64,
    /// Registry credentials: a docker config.json (auths, credHelpers, credsStore).
    #[arg(long, default_value = "/root/.docker/config.json")]
    pub image_credentials: PathBuf,
    /// A registry (HOST:PORT) to reach over plain HTTP; repeatable. A registry on this
    /// host's loopback (localhost, 127.0.0.0/8, [::1]) needs none: it is tried over
    /// HTTPS, then over plain HTTP when it answers TLS in plain HTTP.
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// Image GC starts at this disk usage of the image filesystem (kubelet: 85).
    #[arg(long, default_value_t = 85)]
    pub image_gc_high_threshold: u8,
    /// Image GC frees down to this usage (kubelet: 80).
    #[arg(long, default_value_t = 80)]
    pub image_gc_low_threshold: u8,
    /// Images younger than this (seconds) are kept (kubelet: 120).
    #[arg(long, default_value_t = 120.0)]
    pub image_minimum_gc_age: f64,
    /// Unused images idle longer than this (seconds) are deleted; 0 = never (kubelet: 0).
    #[arg(long, default_value_t = 0.0)]
    pub image_maximum_gc_age: f64,
    /// Seconds between image GC passes (kubelet: 300).
    #[arg(long, default_value_t = 300.0)]
    pub image_gc_period: f64,
    /// Seconds between container GC passes (kubelet: 60).
    #[arg(long, default_value_t = 60.0)]
    pub container_gc_period: f64,
    /// Dead instances kept per container (kubelet: 1).
    #[arg(long, default_value_t = 1)]
    pub maximum_dead_containers_per_container: usize,
    /// Dead containers kept on the node in all; -1 = no cap (kubelet: -1).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub maximum_dead_containers: i64,
    /// RuntimeDefault seccomp for containers whose pod names no seccompProfile (the
    /// kubelet's seccompDefault); `--seccomp-default=false` leaves them Unconfined.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", require_equals = true)]
    pub seccomp_default: bool,
    /// Namespaced sysctls pods may set beyond the safe set: names or `prefix*`
    /// patterns, comma-separated (the kubelet's allowedUnsafeSysctls).
    #[arg(long, value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// How pods get their network: `bridge` (podhost's bridge podhost0 with NAT and
    /// hostPorts), `cni` (the plugins of --cni-conf-dir), `none` (loopback only), or
    /// `auto`: cni when --cni-conf-dir holds a config, else bridge.
    #[arg(long, default_value = "auto")]
    pub pod_network: String,
    /// The built-in bridge's pod CIDRs, IPv4 and/or IPv6, comma-separated. Without it:
    /// in cluster mode the Node's spec.podCIDRs (pods wait for them), standalone
    /// 10.86.0.0/16,fd70:6f64:6800::/64.
    #[arg(long)]
    pub pod_cidr: Option<String>,
    /// The cluster's pod address ranges, IPv4 and/or IPv6, comma-separated (as
    /// kube-proxy's and kube-controller-manager's --cluster-cidr): pods' traffic to them
    /// is not masqueraded, so pods on other nodes see the client pod's own address.
    /// Without it only the node's own pod CIDRs are exempt (the CNI bridge plugin's
    /// ipMasq). Each pod CIDR must lie inside the cluster CIDRs of its family.
    #[arg(long)]
    pub cluster_cidr: Option<String>,
    /// The built-in bridge's name. One daemon per bridge: a second daemon on this host
    /// (another --root-dir) needs its own --bridge-name and a --pod-cidr that does not
    /// overlap; it refuses a bridge a running daemon owns.
    #[arg(long, default_value = podhost_network::bridge::DEFAULT_BRIDGE)]
    pub bridge_name: String,
    /// CNI network configurations (the first `.conflist`/`.conf`/`.json` by name).
    #[arg(long, default_value = "/etc/cni/net.d")]
    pub cni_conf_dir: PathBuf,
    /// Where CNI plugins are looked for, in order; repeatable or comma-separated.
    #[arg(long, value_delimiter = ',', default_values = ["/opt/cni/bin", "/usr/lib/cni"])]
    pub cni_bin_dir: Vec<PathBuf>,
    /// The cluster's DNS server IPs, comma-separated (the kubelet's clusterDNS):
    /// ClusterFirst pods' nameservers. Without it, ClusterFirst falls back to Default.
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns: Vec<std::net::IpAddr>,
    /// The cluster's domain (the kubelet's clusterDomain, e.g. cluster.local): the
    /// search domains of ClusterFirst pods and the domain of pods with a subdomain.
    #[arg(long, default_value = "")]
    pub cluster_domain: String,
    /// The host's resolver configuration that Default (and standalone ClusterFirst)
    /// pods get; "" for none (the pods get the node's loopback as nameserver).
    #[arg(long, default_value = podhost_model::dns::DEFAULT_RESOLV_CONF)]
    pub resolv_conf: String,
    // ---- operability (issue 12) ----
    /// A KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file; flags given on the
    /// command line override its fields; SIGHUP re-reads it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve the read-only HTTP endpoints (/healthz /pods /metrics /metrics/cadvisor
    /// /stats/summary) on this port (the kubelet's is 10255); off unless given, 0 = off.
    /// No authentication: every pod's spec, env values included, to whoever reaches it.
    #[arg(long)]
    pub read_only_port: Option<u16>,
    /// In cluster mode, the address of the kubelet API on --port (default: every
    /// address); with --read-only-port, also that endpoint's (default 127.0.0.1). It
    /// never opens the read-only endpoint by itself.
    #[arg(long)]
    pub address: Option<std::net::IpAddr>,
    /// Log line format on stderr: `text` (journald-friendly, no colours when not a tty)
    /// or `json` (one object per line).
    #[arg(long, default_value = "text")]
    pub log_format: String,
    /// Run the manifests' pods, wait until they are Running or finished, print their
    /// status and exit (non-zero if any failed).
    #[arg(long)]
    pub runonce: bool,
    /// With --runonce: seconds to wait for the pods to be Running or finished before
    /// counting the others as failed (image pulls included).
    #[arg(long, default_value_t = 300.0)]
    pub runonce_timeout: f64,
    /// An http(s) URL serving a Pod, a PodList or nothing: a second static pod source.
    #[arg(long)]
    pub manifest_url: Option<String>,
    /// Headers of the --manifest-url requests, `name:value,…`; repeatable (values of
    /// one name accumulate).
    #[arg(long)]
    pub manifest_url_header: Vec<String>,
    /// Seconds between polls of --manifest-url (kubelet: 20).
    #[arg(long, default_value_t = 20.0)]
    pub http_check_frequency: f64,
    /// Hard eviction thresholds, `signal<quantity|percent,…` (kubelet's evictionHard);
    /// setting it replaces all the defaults.
    #[arg(
        long,
        default_value = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%"
    )]
    pub eviction_hard: String,
    /// Soft eviction thresholds (kubelet's evictionSoft), each needs a grace period.
    #[arg(long, default_value = "")]
    pub eviction_soft: String,
    /// `signal=duration,…` grace periods of the soft thresholds.
    #[arg(long, default_value = "")]
    pub eviction_soft_grace_period: String,
    /// Longest grace (seconds) given to a pod evicted for a soft threshold; 0 = the
    /// pod's own terminationGracePeriodSeconds.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub eviction_max_pod_grace_period: i64,
    /// Seconds a node condition stays after its signal went back under the threshold
    /// (kubelet: 300).
    #[arg(long, default_value_t = 300.0)]
    pub eviction_pressure_transition_period: f64,
    /// `signal=quantity|percent,…`: how much beyond a threshold an eviction reclaims.
    #[arg(long, default_value = "")]
    pub eviction_minimum_reclaim: String,
    /// Seconds between eviction checks (kubelet's evictionMonitoringPeriod: 10).
    #[arg(long, default_value_t = 10.0, hide = true)]
    pub eviction_monitoring_period: f64,
    /// The daemon's own RLIMIT_NOFILE (the kubelet's maxOpenFiles), clamped to the hard
    /// limit without CAP_SYS_RESOURCE.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_open_files: i64,
    // ---- cluster mode (issue 13) ----
    #[command(flatten)]
    pub cluster: super::cluster_flags::ClusterFlags,
}

/// `path` made absolute against the working directory: the daemon's paths end up in
/// places read from elsewhere (bundles that libcontainer resolves from the shim, the
/// shim's config, the API's answers), where a relative path means something else.
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

fn secs(value: f64, flag: &'static str) -> Result<Duration, FlagError> {
    Duration::try_from_secs_f64(value).map_err(|source| FlagError::Seconds { flag, source })
}

impl DaemonFlags {
    /// The daemon's settings; `socket` is the global `--socket`.
    pub fn into_config(self, socket: PathBuf) -> Result<DaemonConfig, FlagError> {
        let node_name = resolve_node_name(self.node_name.as_deref())?;
        let socket_access = podhost_api::SocketAccess {
            group: self
                .socket_group
                .as_deref()
                .map(podhost_api::resolve_socket_group)
                .transpose()?,
        };
        let manifest_url = self
            .manifest_url
            .as_deref()
            .map(|url| {
                podhost_source::UrlSource::new(
                    url,
                    &self.manifest_url_header,
                    secs(self.http_check_frequency, "http-check-frequency")?,
                )
                .map_err(FlagError::from)
            })
            .transpose()?;
        let runonce = self
            .runonce
            .then(|| secs(self.runonce_timeout, "runonce-timeout"))
            .transpose()?;
        let read_only = podhost_api::readonly::read_only_addr(self.address, self.read_only_port);
        let cluster = self
            .cluster
            .into_config(&self.root_dir)?
            .map(|mut cluster| {
                if let Some(address) = self.address {
                    cluster.address = address;
                }
                cluster
            });
        if let Some(address) = self.address
            && read_only.is_none()
            && cluster.is_none()
        {
            // Not an error (a shared config file may carry it), but not silent either.
            tracing::warn!(
                %address,
                "--address has no effect: it is the kubelet API's address (cluster mode, \
                 --kubeconfig) and the read-only endpoint's (--read-only-port), and neither \
                 is on"
            );
        }
        Ok(DaemonConfig {
            manifest_url,
            runonce,
            manifest_dir: absolute(self.pod_manifest_path),
            config_dir: absolute(self.config_dir),
            root_dir: absolute(self.root_dir.clone()),
            log_dir: absolute(self.log_dir),
            node_name,
            socket: absolute(socket),
            socket_access,
            cgroup_root: self.cgroup_root,
            pod_pids_limit: (self.pod_pids_limit > 0).then_some(self.pod_pids_limit),
            log_rotation: podhost_logs::RotationPolicy::from_flags(
                &self.container_log_max_size,
                self.container_log_max_files,
            )?,
            userns_range: self.userns_range.parse()?,
            default_rlimits: podhost_model::rlimits::parse_rlimits(&self.default_rlimits)
                .map_err(FlagError::Rlimits)?,
            backoff: BackoffPolicy {
                initial: secs(self.crashloop_initial_backoff, "crashloop-initial-backoff")?,
                max: secs(self.crashloop_max_backoff, "crashloop-max-backoff")?,
            },
            rescan_every: secs(self.rescan_interval, "rescan-interval")?,
            seccomp_default: self.seccomp_default,
            sysctls: podhost_model::sysctl::SysctlAllowlist::new(&self.allowed_unsafe_sysctls)?,
            image_credentials: Some(self.image_credentials),
            gc: crate::gc::runner::GcSettings {
                image: podhost_image::gc::ImageGcPolicy {
                    high_threshold_percent: self.image_gc_high_threshold,
                    low_threshold_percent: self.image_gc_low_threshold,
                    min_age: secs(self.image_minimum_gc_age, "image-minimum-gc-age")
                        .unwrap_or_default(),
                    max_age: (self.image_maximum_gc_age > 0.0)
                        .then(|| secs(self.image_maximum_gc_age, "image-maximum-gc-age"))
                        .transpose()?,
                },
                image_period: secs(self.image_gc_period, "image-gc-period")?,
                container: crate::gc::ContainerGcPolicy {
                    min_age: Duration::ZERO,
                    max_per_pod_container: self.maximum_dead_containers_per_container,
                    max_containers: usize::try_from(self.maximum_dead_containers).ok(),
                },
                container_period: secs(self.container_gc_period, "container-gc-period")?,
            },
            insecure_registries: self.insecure_registries,
            network: podhost_network::NetworkSettings {
                mode: self.pod_network.parse()?,
                bridge_name: self.bridge_name,
                cluster_cidrs: cluster_cidrs(
                    self.cluster_cidr.as_deref(),
                    self.pod_cidr.as_deref(),
                )?,
                pod_cidrs: self.pod_cidr,
                cni_conf_dir: self.cni_conf_dir,
                cni_bin_dirs: self.cni_bin_dir,
            },
            dns: podhost_model::dns::DnsSettings {
                cluster_dns: self.cluster_dns,
                cluster_domain: self.cluster_domain.trim_end_matches('.').to_string(),
                resolv_conf: (!self.resolv_conf.is_empty())
                    .then(|| PathBuf::from(self.resolv_conf)),
            },
            eviction: crate::eviction::EvictionSettings::from_flags(
                &self.eviction_hard,
                &self.eviction_soft,
                &self.eviction_soft_grace_period,
                &self.eviction_minimum_reclaim,
                self.eviction_max_pod_grace_period,
                secs(
                    self.eviction_pressure_transition_period,
                    "eviction-pressure-transition-period",
                )?,
                secs(
                    self.eviction_monitoring_period,
                    "eviction-monitoring-period",
                )?,
            )?,
            read_only,
            max_open_files: u64::try_from(self.max_open_files).unwrap_or(1),
            config_file: None,
            cluster,
        })
    }
}

/// `--cluster-cidr` parsed, and checked against `--pod-cidr` when both are given, so
/// that a pod CIDR outside the cluster's range stops the daemon at start. (A Node's
/// podCIDR, known later, is checked when the bridge starts.) A `--pod-cidr` that does
/// not parse is left to the network's start, which reports it as before.
fn cluster_cidrs(
    flag: Option<&str>,
    pod_cidr: Option<&str>,
) -> Result<Vec<podhost_model::net::Cidr>, FlagError> {
    use podhost_network::bridge::BridgeConfig;
    let Some(flag) = flag else {
        return Ok(Vec::new());
    };
    let cluster =
        BridgeConfig::parse_cluster_cidrs(flag).map_err(podhost_network::NetworkError::from)?;
    if let Some(Ok(pod)) = pod_cidr.map(BridgeConfig::parse_cidrs) {
        BridgeConfig::check_cluster_cidrs(&pod, &cluster)
            .map_err(podhost_network::NetworkError::from)?;
    }
    Ok(cluster)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        flags: DaemonFlags,
    }

    fn config(args: &[&str]) -> Result<DaemonConfig, FlagError> {
        let argv = ["podhost", "--node-name", "node-a"].iter().chain(args);
        Wrapper::try_parse_from(argv)
            .unwrap()
            .flags
            .into_config("/run/x.sock".into())
    }

    #[test]
    fn the_defaults_are_the_kubelets() {
        let cfg = config(&[]).unwrap();
        assert_eq!(cfg.root_dir, PathBuf::from(DEFAULT_ROOT_DIR));
        let relative = config(&["--root-dir", "r", "--log-dir", "l"]).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(relative.root_dir, cwd.join("r"));
        assert_eq!(relative.log_dir, cwd.join("l"));
        assert_eq!(cfg.node_name, "node-a");
        assert_eq!(cfg.socket, PathBuf::from("/run/x.sock"));
        assert_eq!(cfg.backoff.initial, Duration::from_secs(10));
        assert_eq!(cfg.backoff.max, Duration::from_secs(300));
        assert_eq!(cfg.rescan_every, Duration::from_secs(20));
        assert_eq!(cfg.pod_pids_limit, None);
        assert_eq!(cfg.gc.image.max_age, None);
        assert_eq!(cfg.gc.container.max_containers, None);
        assert_eq!(cfg.gc.container.max_per_pod_container, 1);
        assert!(cfg.seccomp_default);
        assert_eq!(cfg.config_dir, PathBuf::from("/etc/podhost/config"));
        assert_eq!(cfg.network.mode, podhost_network::NetworkMode::Auto);
        assert_eq!(cfg.network.cni_conf_dir, PathBuf::from("/etc/cni/net.d"));
        assert_eq!(
            cfg.network.cni_bin_dirs,
            [PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")]
        );
        assert_eq!(cfg.dns, podhost_model::dns::DnsSettings::default());
        assert_eq!(
            cfg.dns.resolv_conf.as_deref(),
            Some(std::path::Path::new("/etc/resolv.conf"))
        );
    }

    #[test]
    fn cluster_cidr_reaches_the_network_settings_and_must_contain_the_pod_cidr() {
        assert!(config(&[]).unwrap().network.cluster_cidrs.is_empty());
        let cfg = config(&[
            "--pod-cidr",
            "10.87.1.0/24,fd87:0:0:1::/64",
            "--cluster-cidr",
            "10.87.0.0/16,fd87::/48",
        ])
        .unwrap();
        let got: Vec<String> = cfg
            .network
            .cluster_cidrs
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["10.87.0.0/16", "fd87::/48"]);
        // Without --pod-cidr the Node's podCIDR is checked when the bridge starts.
        assert!(config(&["--cluster-cidr", "10.87.0.0/16"]).is_ok());
        let err = config(&["--cluster-cidr", "10.87.0.0/16,nope"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--cluster-cidr") && err.contains("\"nope\""),
            "{err}"
        );
        let err = config(&[
            "--pod-cidr",
            "10.86.0.0/16",
            "--cluster-cidr",
            "10.87.0.0/16",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("10.86.0.0/16") && err.contains("(10.87.0.0/16)"),
            "{err}"
        );
    }

    #[test]
    fn eviction_flags_map_to_the_settings_and_hard_replaces_the_defaults() {
        use podhost_model::eviction::{Signal, ThresholdValue};
        let cfg = config(&[]).unwrap();
        assert_eq!(cfg.eviction.thresholds.len(), 4);
        assert_eq!(cfg.eviction.monitoring_period, Duration::from_secs(10));
        assert_eq!(
            cfg.eviction.pressure_transition_period,
            Duration::from_secs(300)
        );
        let cfg = config(&[
            "--eviction-hard=nodefs.available<30%",
            "--eviction-soft=memory.available<1Gi",
            "--eviction-soft-grace-period=memory.available=30s",
            "--eviction-monitoring-period=1",
        ])
        .unwrap();
        let got: Vec<_> = cfg
            .eviction
            .thresholds
            .iter()
            .map(|t| (t.signal, t.value, t.grace))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Signal::NodeFsAvailable,
                    ThresholdValue::Fraction(0.3),
                    Duration::ZERO
                ),
                (
                    Signal::MemoryAvailable,
                    ThresholdValue::Quantity(1 << 30),
                    Duration::from_secs(30)
                ),
            ]
        );
        assert_eq!(cfg.eviction.monitoring_period, Duration::from_secs(1));
        // An empty --eviction-hard turns hard eviction off (and no soft set is given).
        assert!(
            config(&["--eviction-hard="])
                .unwrap()
                .eviction
                .thresholds
                .is_empty()
        );
        let err = config(&["--eviction-hard=memory.available>1"]).unwrap_err();
        assert!(err.to_string().starts_with("--eviction-hard: "), "{err}");
    }

    #[test]
    fn dns_flags_map_to_the_settings() {
        let cfg = config(&[
            "--cluster-dns=10.96.0.10,fd00::10",
            "--cluster-domain=cluster.local.",
            "--resolv-conf=",
        ])
        .unwrap();
        assert_eq!(
            cfg.dns.cluster_dns,
            [
                "10.96.0.10".parse::<std::net::IpAddr>().unwrap(),
                "fd00::10".parse().unwrap()
            ]
        );
        assert_eq!(cfg.dns.cluster_domain, "cluster.local");
        assert_eq!(cfg.dns.resolv_conf, None);
        let argv = ["podhost", "--node-name", "n", "--cluster-dns", "10.0.0.300"];
        let err = Wrapper::try_parse_from(argv).err().unwrap().to_string();
        assert!(err.contains("--cluster-dns"), "{err}");
    }

    #[test]
    fn limits_and_ages_map_to_none_when_off_and_some_when_set() {
        let cfg = config(&[
            "--pod-pids-limit=100",
            "--image-maximum-gc-age=60",
            "--maximum-dead-containers=3",
        ])
        .unwrap();
        assert_eq!(cfg.pod_pids_limit, Some(100));
        assert_eq!(cfg.gc.image.max_age, Some(Duration::from_secs(60)));
        assert_eq!(cfg.gc.container.max_containers, Some(3));
    }

    #[test]
    fn manifest_url_and_runonce_map_to_the_settings() {
        let cfg = config(&[]).unwrap();
        assert!(cfg.manifest_url.is_none() && cfg.runonce.is_none());
        let cfg = config(&[
            "--manifest-url=https://h/p",
            "--manifest-url-header=a:1,b:2",
            "--manifest-url-header=a:3",
            "--http-check-frequency=5",
            "--runonce",
        ])
        .unwrap();
        let url = cfg.manifest_url.unwrap();
        assert_eq!(url.url, "https://h/p");
        assert_eq!(url.period, Duration::from_secs(5));
        assert_eq!(url.headers.get_all("a").iter().count(), 2);
        assert_eq!(cfg.runonce, Some(Duration::from_secs(300)));
        let err = config(&["--manifest-url=ftp://h/p"])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--manifest-url ftp://h/p: scheme"), "{err}");
        let err = config(&["--manifest-url=http://h", "--manifest-url-header=x"])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--manifest-url-header \"x\""), "{err}");
        let err = config(&["--runonce", "--runonce-timeout=-1"]).unwrap_err();
        assert!(err.to_string().starts_with("--runonce-timeout"), "{err}");
    }

    #[test]
    fn a_bad_flag_is_named_in_the_error() {
        let err = config(&["--rescan-interval=-1"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--rescan-interval must be a positive number of seconds"),
            "{err}"
        );
        let err = config(&["--pod-network=flannel"]).unwrap_err();
        assert!(
            err.to_string().starts_with("--pod-network flannel: "),
            "{err}"
        );
        let err = config(&["--default-rlimits=nofile"]).unwrap_err();
        assert!(err.to_string().starts_with("--default-rlimits: "), "{err}");
    }

    #[test]
    fn address_is_the_kubelet_apis_and_only_the_port_opens_the_read_only_endpoint() {
        assert_eq!(config(&[]).unwrap().read_only, None);
        assert_eq!(config(&["--address=0.0.0.0"]).unwrap().read_only, None);
        assert_eq!(
            config(&["--address=0.0.0.0", "--read-only-port=0"])
                .unwrap()
                .read_only,
            None
        );
        assert_eq!(
            config(&["--read-only-port=10255"]).unwrap().read_only,
            Some("127.0.0.1:10255".parse().unwrap())
        );
        assert_eq!(
            config(&["--address=192.0.2.7", "--read-only-port=10255"])
                .unwrap()
                .read_only,
            Some("192.0.2.7:10255".parse().unwrap())
        );
        let cfg = config(&["--kubeconfig=/etc/kubelet.conf", "--address=192.0.2.7"]).unwrap();
        assert_eq!(
            cfg.read_only, None,
            "the kubelet API's address opens nothing else"
        );
        let cluster = cfg.cluster.unwrap();
        assert_eq!(
            std::net::SocketAddr::new(cluster.address, cluster.port),
            "192.0.2.7:10250".parse().unwrap()
        );
    }
}
