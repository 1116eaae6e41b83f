//! The file's fields onto `podhost daemon`'s flags. A flag given on the command line
//! keeps its value (flags override the file, as the kubelet's do); every other flag a
//! field maps onto takes the field's value, checked here so that an error names the
//! field (the flags' own range checks follow in `DaemonFlags::into_config`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::{ConfigFile, KubeletConfigError, flag_of, parse_go_duration};
use crate::daemon::flags::DaemonFlags;

struct Applier<'a> {
    file: &'a ConfigFile,
    given: &'a BTreeSet<String>,
}

impl Applier<'_> {
    /// Whether the file's `field` is to be applied: its flag was not given.
    fn take(&self, field: &str) -> bool {
        flag_of(field).is_some_and(|flag| !self.given.contains(flag))
    }

    fn error(&self, field: &str, problem: impl Into<String>) -> KubeletConfigError {
        KubeletConfigError::Field {
            path: self.file.path.clone(),
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    fn seconds(&self, field: &str, text: &str) -> Result<f64, KubeletConfigError> {
        parse_go_duration(text)
            .map(|d| d.as_secs_f64())
            .ok_or_else(|| {
                self.error(
                    field,
                    format!(
                        "{text:?} is not a duration (Go syntax, e.g. \"20s\", \"2m30s\", \"1h\")"
                    ),
                )
            })
    }

    fn percent(&self, field: &str, value: i32) -> Result<u8, KubeletConfigError> {
        u8::try_from(value)
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| self.error(field, format!("{value} is not a percentage (0 to 100)")))
    }
}

/// `signal<quantity` pairs as the eviction flags take them (`op` `<` or `=`).
fn signal_list(map: &BTreeMap<String, String>, op: &str) -> String {
    map.iter()
        .map(|(signal, value)| format!("{signal}{op}{}", value.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets the flags that `file` sets and the command line (`given`, clap ids) does not.
pub fn apply(
    file: &ConfigFile,
    flags: &mut DaemonFlags,
    given: &BTreeSet<String>,
) -> Result<(), KubeletConfigError> {
    let a = Applier { file, given };
    let f = &file.fields;
    if let Some(v) = &f.static_pod_path
        && a.take("staticPodPath")
    {
        flags.pod_manifest_path = PathBuf::from(v);
    }
    if let Some(v) = &f.pod_logs_dir
        && a.take("podLogsDir")
    {
        flags.log_dir = PathBuf::from(v);
    }
    if let Some(v) = &f.file_check_frequency
        && a.take("fileCheckFrequency")
    {
        flags.rescan_interval = a.seconds("fileCheckFrequency", v)?;
    }
    if let Some(v) = &f.http_check_frequency
        && a.take("httpCheckFrequency")
    {
        flags.http_check_frequency = a.seconds("httpCheckFrequency", v)?;
    }
    if let Some(v) = &f.static_pod_url
        && a.take("staticPodURL")
    {
        flags.manifest_url = (!v.is_empty()).then(|| v.clone());
    }
    if let Some(headers) = &f.static_pod_url_header
        && a.take("staticPodURLHeader")
    {
        flags.manifest_url_header = headers
            .iter()
            .flat_map(|(name, values)| values.iter().map(move |v| format!("{name}:{v}")))
            .collect();
    }
    apply_read_only_server(&a, flags)?;
    if let Some(v) = &f.cluster_domain
        && a.take("clusterDomain")
    {
        flags.cluster_domain = v.clone();
    }
    if let Some(ips) = &f.cluster_dns
        && a.take("clusterDNS")
    {
        flags.cluster_dns = ips
            .iter()
            .map(|ip| {
                ip.trim()
                    .parse()
                    .map_err(|_| a.error("clusterDNS", format!("{ip:?} is not an IP address")))
            })
            .collect::<Result<_, _>>()?;
    }
    if let Some(v) = &f.image_minimum_gc_age
        && a.take("imageMinimumGCAge")
    {
        flags.image_minimum_gc_age = a.seconds("imageMinimumGCAge", v)?;
    }
    if let Some(v) = &f.image_maximum_gc_age
        && a.take("imageMaximumGCAge")
    {
        flags.image_maximum_gc_age = a.seconds("imageMaximumGCAge", v)?;
    }
    if let Some(v) = f.image_gc_high_threshold_percent
        && a.take("imageGCHighThresholdPercent")
    {
        flags.image_gc_high_threshold = a.percent("imageGCHighThresholdPercent", v)?;
    }
    if let Some(v) = f.image_gc_low_threshold_percent
        && a.take("imageGCLowThresholdPercent")
    {
        flags.image_gc_low_threshold = a.percent("imageGCLowThresholdPercent", v)?;
    }
    if flags.image_gc_low_threshold > flags.image_gc_high_threshold {
        return Err(a.error(
            "imageGCLowThresholdPercent",
            format!(
                "{} is above imageGCHighThresholdPercent ({})",
                flags.image_gc_low_threshold, flags.image_gc_high_threshold
            ),
        ));
    }
    if let Some(v) = &f.cgroup_root
        && a.take("cgroupRoot")
    {
        flags.cgroup_root = (!v.is_empty()).then(|| v.clone());
    }
    if let Some(v) = &f.pod_cidr
        && a.take("podCIDR")
        && !v.is_empty()
    {
        flags.pod_cidr = Some(v.clone());
    }
    if let Some(v) = f.pod_pids_limit
        && a.take("podPidsLimit")
    {
        flags.pod_pids_limit = v;
    }
    if let Some(v) = &f.resolv_conf
        && a.take("resolvConf")
    {
        flags.resolv_conf = v.clone();
    }
    if let Some(v) = f.run_once
        && a.take("runOnce")
    {
        flags.runonce = v;
    }
    if let Some(v) = f.max_open_files
        && a.take("maxOpenFiles")
    {
        if v <= 0 {
            return Err(a.error("maxOpenFiles", format!("{v} must be a positive number")));
        }
        flags.max_open_files = v;
    }
    apply_eviction(&a, flags)?;
    apply_cluster(&a, flags)?;
    if let Some(v) = &f.container_log_max_size
        && a.take("containerLogMaxSize")
    {
        flags.container_log_max_size = v.clone();
    }
    if let Some(v) = f.container_log_max_files
        && a.take("containerLogMaxFiles")
    {
        flags.container_log_max_files = i64::from(v);
    }
    if let Some(v) = &f.allowed_unsafe_sysctls
        && a.take("allowedUnsafeSysctls")
    {
        flags.allowed_unsafe_sysctls = v.clone();
    }
    if let Some(v) = f.logging.as_ref().and_then(|l| l.format.as_ref())
        && a.take("logging.format")
    {
        if !matches!(v.as_str(), "text" | "json") {
            return Err(a.error("logging.format", format!("{v:?} is not text or json")));
        }
        flags.log_format = v.clone();
    }
    if let Some(v) = f
        .crash_loop_back_off
        .as_ref()
        .and_then(|c| c.max_container_restart_period.as_ref())
        && a.take("crashLoopBackOff.maxContainerRestartPeriod")
    {
        let secs = a.seconds("crashLoopBackOff.maxContainerRestartPeriod", v)?;
        if !(1.0..=300.0).contains(&secs) {
            return Err(a.error(
                "crashLoopBackOff.maxContainerRestartPeriod",
                format!("{v} must be between 1s and 300s"),
            ));
        }
        flags.crashloop_max_backoff = secs;
    }
    if let Some(v) = f.seccomp_default
        && a.take("seccompDefault")
    {
        flags.seccomp_default = v;
    }
    Ok(())
}

/// `readOnlyPort` (0 = off, the kubelet's default) and `address`. As in the kubelet,
/// `address` is the kubelet API's (cluster mode) and, when `readOnlyPort` is on, the
/// read-only endpoint's too; alone it opens nothing (see `read_only_addr`), so a
/// kubeadm-style `address: 0.0.0.0` does not publish the read-only endpoint.
fn apply_read_only_server(a: &Applier, flags: &mut DaemonFlags) -> Result<(), KubeletConfigError> {
    let f = &a.file.fields;
    if let Some(port) = f.read_only_port
        && a.take("readOnlyPort")
    {
        flags.read_only_port = match port {
            0 => None,
            1..=65535 => Some(u16::try_from(port).unwrap_or_default()),
            _ => {
                return Err(a.error(
                    "readOnlyPort",
                    format!("{port} is not a port (1 to 65535, or 0 for off)"),
                ));
            }
        };
    }
    if let Some(address) = &f.address
        && a.take("address")
    {
        flags.address = Some(
            address
                .trim()
                .parse()
                .map_err(|_| a.error("address", format!("{address:?} is not an IP address")))?,
        );
    }
    Ok(())
}

fn apply_eviction(a: &Applier, flags: &mut DaemonFlags) -> Result<(), KubeletConfigError> {
    let f = &a.file.fields;
    if let Some(map) = &f.eviction_hard
        && a.take("evictionHard")
    {
        flags.eviction_hard = signal_list(map, "<");
    }
    if let Some(map) = &f.eviction_soft
        && a.take("evictionSoft")
    {
        flags.eviction_soft = signal_list(map, "<");
    }
    if let Some(map) = &f.eviction_soft_grace_period
        && a.take("evictionSoftGracePeriod")
    {
        for (signal, grace) in map {
            a.seconds("evictionSoftGracePeriod", grace).map_err(|_| {
                a.error(
                    "evictionSoftGracePeriod",
                    format!("{signal}: {grace:?} is not a duration (e.g. \"1m30s\")"),
                )
            })?;
        }
        flags.eviction_soft_grace_period = signal_list(map, "=");
    }
    if let Some(v) = &f.eviction_pressure_transition_period
        && a.take("evictionPressureTransitionPeriod")
    {
        let secs = a.seconds("evictionPressureTransitionPeriod", v)?;
        // The kubelet turns 0s into its default, 5m.
        flags.eviction_pressure_transition_period = if secs == 0.0 { 300.0 } else { secs };
    }
    if let Some(v) = f.eviction_max_pod_grace_period
        && a.take("evictionMaxPodGracePeriod")
    {
        flags.eviction_max_pod_grace_period = i64::from(v);
    }
    if let Some(map) = &f.eviction_minimum_reclaim
        && a.take("evictionMinimumReclaim")
    {
        flags.eviction_minimum_reclaim = signal_list(map, "=");
    }
    Ok(())
}

/// The node's registration, heartbeat and admission settings (they matter with
/// `--kubeconfig`).
/// Reservations only lower the allocatable the Node advertises: podhost does not
/// enforce them with cgroups (enforceNodeAllocatable).
fn apply_cluster(a: &Applier, flags: &mut DaemonFlags) -> Result<(), KubeletConfigError> {
    let f = &a.file.fields;
    let c = &mut flags.cluster;
    if let Some(map) = &f.kube_reserved
        && a.take("kubeReserved")
    {
        c.kube_reserved = signal_list(map, "=");
    }
    if let Some(map) = &f.system_reserved
        && a.take("systemReserved")
    {
        c.system_reserved = signal_list(map, "=");
    }
    if let Some(taints) = &f.register_with_taints
        && a.take("registerWithTaints")
    {
        c.register_with_taints = taints
            .iter()
            .map(|t| match &t.value {
                Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
                _ => format!("{}:{}", t.key, t.effect),
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    if let Some(v) = f.max_pods
        && a.take("maxPods")
    {
        c.max_pods = u32::try_from(v)
            .map_err(|_| a.error("maxPods", format!("{v} must not be negative")))?;
    }
    if let Some(v) = &f.node_status_update_frequency
        && a.take("nodeStatusUpdateFrequency")
    {
        c.node_status_update_frequency = a.seconds("nodeStatusUpdateFrequency", v)?;
    }
    if let Some(v) = &f.node_status_report_frequency
        && a.take("nodeStatusReportFrequency")
    {
        c.node_status_report_frequency = a.seconds("nodeStatusReportFrequency", v)?;
    }
    if let Some(v) = f.node_lease_duration_seconds
        && a.take("nodeLeaseDurationSeconds")
    {
        c.node_lease_duration_seconds = u32::try_from(v)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| a.error("nodeLeaseDurationSeconds", format!("{v} must be positive")))?;
    }
    if let Some(v) = f.rotate_certificates
        && a.take("rotateCertificates")
    {
        c.rotate_certificates = v;
    }
    Ok(())
}
