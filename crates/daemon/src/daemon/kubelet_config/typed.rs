//! The fields of a KubeletConfiguration that podhost implements, typed as the kubelet
//! types them (durations and quantities as strings, checked when mapped to flags).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The implemented fields; every one of them has a `Flag` row in `fields::FIELDS` (a
/// unit test holds the two together). Unknown names are rejected before this is read.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Implemented {
    pub static_pod_path: Option<String>,
    pub pod_logs_dir: Option<String>,
    pub file_check_frequency: Option<String>,
    pub http_check_frequency: Option<String>,
    #[serde(rename = "staticPodURL")]
    pub static_pod_url: Option<String>,
    #[serde(rename = "staticPodURLHeader")]
    pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    pub address: Option<String>,
    pub read_only_port: Option<i32>,
    pub cluster_domain: Option<String>,
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
    #[serde(rename = "imageMinimumGCAge")]
    pub image_minimum_gc_age: Option<String>,
    #[serde(rename = "imageMaximumGCAge")]
    pub image_maximum_gc_age: Option<String>,
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    pub cgroup_root: Option<String>,
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    pub pod_pids_limit: Option<i64>,
    pub resolv_conf: Option<String>,
    pub run_once: Option<bool>,
    pub max_open_files: Option<i64>,
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub eviction_soft: Option<BTreeMap<String, String>>,
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    pub eviction_pressure_transition_period: Option<String>,
    pub eviction_max_pod_grace_period: Option<i32>,
    pub eviction_minimum_reclaim: Option<BTreeMap<String, String>>,
    pub container_log_max_size: Option<String>,
    pub container_log_max_files: Option<i32>,
    pub allowed_unsafe_sysctls: Option<Vec<String>>,
    pub logging: Option<Logging>,
    pub crash_loop_back_off: Option<CrashLoopBackOff>,
    pub seccomp_default: Option<bool>,
    pub kube_reserved: Option<BTreeMap<String, String>>,
    pub system_reserved: Option<BTreeMap<String, String>>,
    pub register_with_taints: Option<Vec<TaintField>>,
    pub max_pods: Option<i32>,
    pub node_status_update_frequency: Option<String>,
    pub node_status_report_frequency: Option<String>,
    pub node_lease_duration_seconds: Option<i32>,
    pub rotate_certificates: Option<bool>,
}

/// A taint of `registerWithTaints`, as the API spells it.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize)]
pub struct TaintField {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    pub effect: String,
}

/// `logging`: only `format` is implemented (the others are reported).
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Logging {
    pub format: Option<String>,
}

/// `crashLoopBackOff`.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrashLoopBackOff {
    pub max_container_restart_period: Option<String>,
}
