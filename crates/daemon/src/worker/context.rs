//! What every worker shares: paths, stores, the podhost binary, policies.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use podhost_disk::Layout;
use podhost_image::ImageStore;
use podhost_model::backoff::BackoffPolicy;
use podhost_model::dns::{DnsError, DnsSettings, PodHostname};
use podhost_model::grace::pod_grace;
use podhost_model::qos::{QosClass, pod_resources, qos_class};
use podhost_model::restart::RestartPolicy;
use podhost_runtime::node_cgroups::NodeCgroups;
use podhost_status::StatusStore;

/// Shared, read-only context of the workers.
#[derive(Debug)]
pub struct Ctx {
    pub layout: Layout,
    pub store: Arc<StatusStore>,
    pub images: Arc<ImageStore>,
    /// The podhost binary, exec'd as shim and helpers.
    pub exe: PathBuf,
    /// The command that loads an image into this daemon's store, for hints:
    /// `podhost load --socket S` (`--root-dir R` for `--runonce`, which serves no API).
    pub load_command: String,
    /// The node's cgroup tree (and how much it enforces: v2, v1 container limits, nothing).
    pub cgroups: Arc<NodeCgroups>,
    pub backoff: BackoffPolicy,
    /// Containers' default rlimits (`--default-rlimits`, clamped to what the host allows).
    pub default_rlimits: Vec<podhost_model::rlimits::Rlimit>,
    /// CAP_SYS_RESOURCE: hard rlimits can be raised and oom_score_adj lowered.
    pub can_raise_limits: bool,
    /// The node's memory, for the Burstable oom_score_adj.
    pub memory_capacity: i64,
    /// Registry pulls into `images`.
    pub puller: podhost_image::pull::Puller,
    /// Images held by starting and running containers, for image GC.
    pub leases: podhost_image::gc::ImageLeases,
    /// OOM victims named by the kernel (the /dev/kmsg watcher fills it).
    pub oom_victims: Arc<crate::oom::OomVictims>,
    /// Bumped whenever an image is loaded, so waiting containers retry at once.
    pub images_changed: tokio::sync::watch::Receiver<u64>,
    /// The node's security defaults and allowances.
    pub security: super::security::NodeSecurity,
    /// The ID blocks of `hostUsers: false` pods.
    pub userns: Arc<podhost_runtime::userns::UsernsAllocator>,
    /// Container log rotation, handed to every new shim (a config reload changes it).
    pub log_rotation: tokio::sync::watch::Receiver<podhost_logs::RotationPolicy>,
    /// The pods' sync loops that take ephemeral containers (`podhost debug`).
    pub ephemeral: super::ephemeral::EphemeralRegistry,
    /// The `--config-dir` ConfigMaps and Secrets, current.
    pub config_objects: tokio::sync::watch::Receiver<Arc<podhost_source::configdir::ConfigObjects>>,
    /// Cluster mode: the ConfigMaps and Secrets the API pods refer to, from the API
    /// server (the only place an API pod's objects come from; see `config_source`).
    pub api_objects:
        Option<tokio::sync::watch::Receiver<Arc<podhost_model::config_refs::ObjectSet>>>,
    /// Cluster mode: the cluster's Services, for the containers' service variables
    /// (`service_source`); `None` standalone, where there are no Services.
    pub api_services:
        Option<tokio::sync::watch::Receiver<Arc<podhost_model::service_env::ServiceSet>>>,
    /// The node's IPs for the downward API (`status.hostIP(s)`; hostNetwork pods' IPs).
    pub host_ips: Vec<String>,
    /// The limits the downward API reports for containers that set none.
    pub node_capacity: podhost_model::downward::NodeCapacity,
    /// The node's pod network.
    pub network: Arc<podhost_network::NodeNetwork>,
    /// The host ports admitted pods publish.
    pub host_ports: super::host_ports::HostPortRegistry,
    /// The admitted pods' requests and the node they are admitted against.
    pub admission: super::admission_ledger::AdmissionLedger,
    /// `--cluster-dns`, `--cluster-domain`, `--resolv-conf`: the pods' DNS files.
    pub dns: super::dns_files::NodeDns,
}

impl Ctx {
    /// The node's allocatable memory in bytes (as admission sees the node): the size of
    /// a pod's memory-backed volumes when nothing of the pod bounds them lower.
    pub fn allocatable_memory(&self) -> u64 {
        u64::try_from(self.admission.node().allocatable.memory_bytes).unwrap_or(0)
    }
}

/// The immutable facts of one pod that its worker needs.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    /// The pod as admitted; shared with the manifest source and the manager, which
    /// hold the same immutable value (one copy per pod instead of three).
    pub pod: Arc<Pod>,
    pub host_network: bool,
    /// hostIPC: the host's IPC namespace and /dev/shm.
    pub host_ipc: bool,
    /// hostPID: every container in the host's pid namespace.
    pub host_pid: bool,
    /// shareProcessNamespace: one pid namespace for all the pod's containers.
    pub shared_pid: bool,
    /// hostUsers: false: the pod runs in a user namespace of its own.
    pub own_userns: bool,
    /// Its mapping, once its block is allocated.
    pub userns: Option<podhost_runtime::userns::IdMap>,
    pub grace: Duration,
    pub policy: RestartPolicy,
    pub qos: QosClass,
}

impl PodInfo {
    pub fn from_pod(pod: impl Into<Arc<Pod>>) -> Self {
        let pod: Arc<Pod> = pod.into();
        let spec = pod.spec.clone().unwrap_or_default();
        Self {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            host_network: spec.host_network.unwrap_or(false),
            host_ipc: spec.host_ipc.unwrap_or(false),
            host_pid: spec.host_pid.unwrap_or(false),
            shared_pid: spec.share_process_namespace.unwrap_or(false)
                && !spec.host_pid.unwrap_or(false),
            own_userns: spec.host_users == Some(false),
            userns: None,
            grace: pod_grace(spec.termination_grace_period_seconds),
            policy: RestartPolicy::from_spec(spec.restart_policy.as_deref())
                .unwrap_or(RestartPolicy::Always),
            qos: qos_class(&pod_resources(&pod)),
            pod,
        }
    }

    /// The pod's hostname and domain: `spec.hostname` or its name (cut to 63
    /// characters), `<subdomain>.<namespace>.svc.<cluster domain>`.
    pub fn host_name(&self, dns: &DnsSettings) -> Result<PodHostname, DnsError> {
        let spec = self.pod.spec.as_ref();
        podhost_model::dns::pod_hostname(
            &self.name,
            spec.and_then(|s| s.hostname.as_deref()),
            spec.and_then(|s| s.subdomain.as_deref()),
            &self.namespace,
            &dns.cluster_domain,
        )
    }

    /// The hostname of the pod's UTS namespace: its hostname, or its FQDN with
    /// `setHostnameAsFQDN` (at most 64 characters, else the kubelet's error). A
    /// hostNetwork pod keeps the host's UTS namespace, so the FQDN rule does not apply
    /// (nor does the kubelet check it there).
    pub fn hostname(&self, dns: &DnsSettings) -> Result<String, DnsError> {
        let as_fqdn = !self.host_network
            && self
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.set_hostname_as_fqdn)
                .unwrap_or(false);
        podhost_model::dns::kernel_hostname(&self.host_name(dns)?, as_fqdn)
    }

    /// The namespaces the pod's sandbox holds.
    pub fn sandbox_shape(&self) -> podhost_runtime::sandbox::SandboxShape {
        podhost_runtime::sandbox::SandboxShape {
            host_network: self.host_network,
            host_ipc: self.host_ipc,
            shared_pid: self.shared_pid,
            userns: self.userns,
        }
    }

    /// The pod's IPs as its status reports them (`status.podIPs`): the host's for
    /// hostNetwork pods, its network's once set up, none without a pod network.
    pub fn current_ips(&self, ctx: &Ctx) -> Vec<String> {
        if self.host_network {
            return ctx.host_ips.clone();
        }
        ctx.store
            .get(&self.uid)
            .map(|r| r.status)
            .and_then(|s| s.pod_ips)
            .into_iter()
            .flatten()
            .map(|ip| ip.ip)
            .collect()
    }

    /// What the downward API reports for this pod beside its spec.
    pub fn downward_inputs(&self, ctx: &Ctx) -> podhost_model::downward::DownwardInputs {
        let node = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or_default();
        let mut inputs = podhost_model::downward::DownwardInputs::for_pod(
            node,
            self.host_network,
            &ctx.host_ips,
            ctx.node_capacity,
        );
        inputs.pod_ips = self.current_ips(ctx);
        inputs
    }

    pub fn object(&self, container: &str) -> String {
        format!("pod/{}/{}", self.name, container)
    }
}
