//! The flags of cluster mode (the kubelet's names): `--kubeconfig` switches it on.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use podhost_model::node::{
    NodeLabelError, Reserved, ReservedError, parse_node_labels, parse_taints,
};

/// Cluster-mode settings from the flags.
#[derive(Debug, Clone, Args)]
pub struct ClusterFlags {
    /// A kubeconfig with this node's credentials: podhost registers the node with
    /// that API server and keeps its lease and status (static pods keep running).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// A kubeconfig with bootstrap credentials (a bootstrap token): when --kubeconfig
    /// does not exist or its client certificate has expired, podhost asks the cluster
    /// for a node certificate with it (a CertificateSigningRequest), stores the pair in
    /// --cert-dir and writes --kubeconfig pointing at it.
    #[arg(long, requires = "kubeconfig")]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// Where the node's client certificates are kept (`kubelet-client-current.pem`);
    /// default ROOT/pki.
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,
    /// Ask for a new client certificate at 70–90 % of the current one's lifetime and
    /// use it without restarting.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set,
          default_value_t = false, require_equals = true)]
    pub rotate_certificates: bool,
    /// Record every exchange with the API server to this file (JSON lines).
    #[arg(long)]
    pub kube_record: Option<PathBuf>,
    /// Resources held back for Kubernetes daemons: `cpu=100m,memory=256Mi,
    /// ephemeral-storage=1Gi,pid=1000`.
    #[arg(long, default_value = "")]
    pub kube_reserved: String,
    /// Resources held back for the OS, as --kube-reserved.
    #[arg(long, default_value = "")]
    pub system_reserved: String,
    /// Labels to add to the Node at registration, `key=value,…`.
    #[arg(long, default_value = "")]
    pub node_labels: String,
    /// Taints the Node registers with, `key[=value]:Effect,…`.
    #[arg(long, default_value = "")]
    pub register_with_taints: String,
    /// The node's InternalIP addresses (comma-separated); default: the source
    /// addresses of the host's default routes.
    #[arg(long, value_delimiter = ',')]
    pub node_ip: Vec<IpAddr>,
    /// The pods capacity the Node advertises; a pod from the API server is refused
    /// (OutOfpods) while this many pods are active.
    #[arg(long, default_value_t = podhost_model::node::DEFAULT_MAX_PODS)]
    pub max_pods: u32,
    /// The kubelet API's port (HTTPS, on --address or every address): kubectl logs
    /// and exec through the API server; advertised in the Node's daemonEndpoints.
    #[arg(long, default_value_t = 10250)]
    pub port: u16,
    /// The kubelet API's serving certificate (PEM, leaf first); without it a
    /// self-signed one is made in ROOT/pki.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The key of --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that sign the client certificates the kubelet API accepts
    /// (the API server's --kubelet-client-certificate); without it only bearer tokens
    /// are accepted.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Seconds between computations of the node's status (posted when it changed).
    #[arg(long, default_value_t = 10.0)]
    pub node_status_update_frequency: f64,
    /// Seconds between posts of an unchanged node status.
    #[arg(long, default_value_t = 300.0)]
    pub node_status_report_frequency: f64,
    /// The node Lease's duration in seconds; it is renewed every quarter of it.
    #[arg(long, default_value_t = 40)]
    pub node_lease_duration_seconds: u32,
}

/// Cluster mode's settings in the daemon's config.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub kubeconfig: PathBuf,
    /// `--bootstrap-kubeconfig`, absolute.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `--cert-dir`, absolute (default ROOT/pki).
    pub cert_dir: PathBuf,
    pub rotate_certificates: bool,
    pub record: Option<PathBuf>,
    pub kube_reserved: Reserved,
    pub system_reserved: Reserved,
    pub labels: std::collections::BTreeMap<String, String>,
    pub taints: Vec<podhost_model::node::Taint>,
    pub node_ips: Vec<IpAddr>,
    pub max_pods: u32,
    pub port: u16,
    /// `--tls-cert-file` and `--tls-private-key-file`, when given.
    pub serving_cert: Option<(PathBuf, PathBuf)>,
    pub client_ca: Option<PathBuf>,
    /// Where the kubelet API listens: `--address`, else every address.
    pub address: IpAddr,
    pub status_update_every: Duration,
    pub status_report_every: Duration,
    pub lease_duration: Duration,
}

/// A cluster flag that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterFlagError {
    #[error(transparent)]
    Reserved(#[from] ReservedError),
    #[error(transparent)]
    Labels(#[from] NodeLabelError),
    /// A period that is not a positive number of seconds.
    #[error("--{flag} must be a positive number of seconds, not {value}")]
    Period { flag: &'static str, value: f64 },
}

fn period(flag: &'static str, value: f64) -> Result<Duration, ClusterFlagError> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or(ClusterFlagError::Period { flag, value })
}

impl ClusterFlags {
    /// `None` without `--kubeconfig`; `root_dir` is the default cert dir's parent.
    pub fn into_config(
        self,
        root_dir: &std::path::Path,
    ) -> Result<Option<ClusterConfig>, ClusterFlagError> {
        let Some(kubeconfig) = self.kubeconfig else {
            return Ok(None);
        };
        let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        Ok(Some(ClusterConfig {
            kubeconfig: absolute(kubeconfig),
            bootstrap_kubeconfig: self.bootstrap_kubeconfig.map(absolute),
            cert_dir: absolute(self.cert_dir.unwrap_or_else(|| root_dir.join("pki"))),
            rotate_certificates: self.rotate_certificates,
            record: self.kube_record,
            kube_reserved: Reserved::parse("--kube-reserved", &self.kube_reserved)?,
            system_reserved: Reserved::parse("--system-reserved", &self.system_reserved)?,
            labels: parse_node_labels(&self.node_labels)?,
            taints: parse_taints(&self.register_with_taints)?,
            node_ips: self.node_ip,
            max_pods: self.max_pods,
            port: self.port,
            serving_cert: self.tls_cert_file.zip(self.tls_private_key_file),
            client_ca: self.client_ca_file,
            address: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            status_update_every: period(
                "node-status-update-frequency",
                self.node_status_update_frequency,
            )?,
            status_report_every: period(
                "node-status-report-frequency",
                self.node_status_report_frequency,
            )?,
            lease_duration: period(
                "node-lease-duration-seconds",
                f64::from(self.node_lease_duration_seconds),
            )?,
        }))
    }
}
