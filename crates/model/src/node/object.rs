//! Capacity, allocatable and the whole Node object at registration.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo,
    Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Reserved;
use crate::eviction::{Signal, Threshold};

/// What the host is, read once by the daemon (`runtime`/`daemon` read the files).
#[derive(Debug, Clone, PartialEq)]
pub struct HostFacts {
    pub cpus: u32,
    pub memory_bytes: i64,
    /// Size of the filesystem that holds the root dir (the kubelet's nodefs).
    pub ephemeral_storage_bytes: i64,
    /// `/etc/machine-id`.
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid` (empty when unreadable, as on many VMs).
    pub system_uuid: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    pub kernel_version: String,
    /// PRETTY_NAME of `/etc/os-release`.
    pub os_image: String,
    /// GOARCH spelling: amd64, arm64, …
    pub architecture: String,
    pub hostname: String,
    /// The node's InternalIP addresses (`--node-ip`, else the source address of the
    /// default routes).
    pub internal_ips: Vec<String>,
}

/// How this node presents itself (flags and the KubeletConfiguration).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSettings {
    pub name: String,
    /// `--node-labels`, on top of the well-known ones.
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    pub kube_reserved: Reserved,
    pub system_reserved: Reserved,
    /// The hard eviction thresholds: memory.available and nodefs.available are held
    /// back from allocatable too.
    pub eviction_hard: Vec<Threshold>,
    /// `--max-pods` ([`DEFAULT_MAX_PODS`]): the pods capacity, which admission holds
    /// the node's active pods to.
    pub max_pods: u32,
    /// `--port`: where the kubelet API listens (10250).
    pub kubelet_port: i32,
    /// Reported as nodeInfo.kubeletVersion: the Kubernetes API version podhost
    /// implements.
    pub kubelet_version: String,
}

/// The kubelet's default `maxPods`.
pub const DEFAULT_MAX_PODS: u32 = 110;

/// The annotation the kubelet sets so the attach/detach controller manages volumes.
const CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";

/// The node's capacity, as the kubelet reports it from cAdvisor's machine info.
pub fn capacity(host: &HostFacts, settings: &NodeSettings) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(host.cpus.to_string())),
        ("memory".to_string(), Quantity(binary_si(host.memory_bytes))),
        (
            "ephemeral-storage".to_string(),
            Quantity(binary_si(host.ephemeral_storage_bytes)),
        ),
        ("pods".to_string(), Quantity(settings.max_pods.to_string())),
        ("hugepages-1Gi".to_string(), Quantity("0".to_string())),
        ("hugepages-2Mi".to_string(), Quantity("0".to_string())),
    ])
}

/// What the hard eviction thresholds hold back (the kubelet's
/// `hardEvictionReservation`): memory.available and nodefs.available.
pub fn hard_eviction_reserved(thresholds: &[Threshold], host: &HostFacts) -> Reserved {
    let mut reserved = Reserved::default();
    for threshold in thresholds.iter().filter(|t| t.is_hard()) {
        match threshold.signal {
            Signal::MemoryAvailable => {
                reserved.memory_bytes += threshold.value.quantity(host.memory_bytes);
            }
            Signal::NodeFsAvailable => {
                reserved.ephemeral_storage_bytes +=
                    threshold.value.quantity(host.ephemeral_storage_bytes);
            }
            _ => {}
        }
    }
    reserved
}

/// Capacity less kube-reserved, system-reserved and the hard eviction thresholds,
/// never below zero (the kubelet's `GetNodeAllocatableReservation`).
pub fn allocatable(host: &HostFacts, settings: &NodeSettings) -> BTreeMap<String, Quantity> {
    let held = settings
        .kube_reserved
        .plus(&settings.system_reserved)
        .plus(&hard_eviction_reserved(&settings.eviction_hard, host));
    let cpu_millis = (i64::from(host.cpus) * 1000 - held.cpu_millis).max(0);
    let mut allocatable = capacity(host, settings);
    allocatable.insert("cpu".to_string(), Quantity(millis(cpu_millis)));
    allocatable.insert(
        "memory".to_string(),
        Quantity(binary_si((host.memory_bytes - held.memory_bytes).max(0))),
    );
    allocatable.insert(
        "ephemeral-storage".to_string(),
        Quantity(binary_si(
            (host.ephemeral_storage_bytes - held.ephemeral_storage_bytes).max(0),
        )),
    );
    allocatable
}

/// The Node the node agent creates at registration: labels, taints, capacity,
/// allocatable, addresses, nodeInfo and the kubelet endpoint. Conditions come with the
/// first status update ([`super::next_conditions`]).
pub fn node_object(host: &HostFacts, settings: &NodeSettings) -> Node {
    let mut labels = settings.labels.clone();
    for (key, value) in [
        ("kubernetes.io/hostname", settings.name.to_lowercase()),
        ("kubernetes.io/os", "linux".to_string()),
        ("kubernetes.io/arch", host.architecture.clone()),
        ("beta.kubernetes.io/os", "linux".to_string()),
        ("beta.kubernetes.io/arch", host.architecture.clone()),
    ] {
        labels.insert(key.to_string(), value);
    }
    Node {
        metadata: ObjectMeta {
            name: Some(settings.name.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                CONTROLLER_MANAGED_ATTACH_DETACH.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!settings.taints.is_empty()).then(|| settings.taints.clone()),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(capacity(host, settings)),
            allocatable: Some(allocatable(host, settings)),
            addresses: Some(addresses(host)),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: settings.kubelet_port,
                }),
            }),
            node_info: Some(node_info(host, settings)),
            ..NodeStatus::default()
        }),
    }
}

/// InternalIP addresses first, then the Hostname, as the kubelet lists them.
pub fn addresses(host: &HostFacts) -> Vec<NodeAddress> {
    host.internal_ips
        .iter()
        .map(|ip| NodeAddress {
            type_: "InternalIP".to_string(),
            address: ip.clone(),
        })
        .chain(std::iter::once(NodeAddress {
            type_: "Hostname".to_string(),
            address: host.hostname.clone(),
        }))
        .collect()
}

/// nodeInfo: what `kubectl get node -o wide` shows.
pub fn node_info(host: &HostFacts, settings: &NodeSettings) -> NodeSystemInfo {
    NodeSystemInfo {
        architecture: host.architecture.clone(),
        boot_id: host.boot_id.clone(),
        container_runtime_version: format!("podhost://{}", env!("CARGO_PKG_VERSION")),
        kernel_version: host.kernel_version.clone(),
        kube_proxy_version: String::new(),
        kubelet_version: settings.kubelet_version.clone(),
        machine_id: host.machine_id.clone(),
        operating_system: "linux".to_string(),
        os_image: host.os_image.clone(),
        system_uuid: host.system_uuid.clone(),
        ..NodeSystemInfo::default()
    }
}

/// A byte count in the canonical binary-SI form the API server itself would print:
/// the largest power of 1024 that divides it (`16Gi`, `8039648Ki`, `1000`).
pub fn binary_si(bytes: i64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if bytes != 0 {
        for (suffix, shift) in UNITS {
            let unit = 1i64 << shift;
            if bytes % unit == 0 {
                return format!("{}{suffix}", bytes / unit);
            }
        }
    }
    bytes.to_string()
}

/// Millicores in the API's canonical form: whole cores without a suffix.
pub fn millis(millis: i64) -> String {
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}
