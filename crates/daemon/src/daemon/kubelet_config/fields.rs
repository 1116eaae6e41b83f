//! Every field of `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1, as of
//! Kubernetes 1.34) and what podhost does with it: mapped onto a `podhost daemon` flag,
//! or not implemented (reported once at start, with why). A name not in this table is
//! a typo or a field of another API, and an error (the kubelet is strict too).

/// What podhost does with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Mapped onto the flag with this clap id (the `DaemonFlags` field name).
    Flag(&'static str),
    /// Not implemented: why (shown in the warning and the node event).
    Unsupported(&'static str),
}

use Support::{Flag, Unsupported};

const NO_API_SERVER: &str = "standalone: no API server";
const NO_SECURE_SERVER: &str =
    "no authenticated server; the read-only port and the root-only socket serve instead";
const NO_RESOURCE_MANAGERS: &str = "no CPU/memory/topology/DRA managers";
const NO_ALLOCATABLE: &str = "no node allocatable reservations";

/// The top-level fields. `logging` and `crashLoopBackOff` have sub-fields, in
/// [`LOGGING_FIELDS`] and [`CRASH_LOOP_BACK_OFF_FIELDS`].
pub const FIELDS: &[(&str, Support)] = &[
    ("enableServer", Unsupported(NO_SECURE_SERVER)),
    ("staticPodPath", Flag("pod_manifest_path")),
    ("podLogsDir", Flag("log_dir")),
    (
        "syncFrequency",
        Unsupported("pods are synced on events, not on a period"),
    ),
    ("fileCheckFrequency", Flag("rescan_interval")),
    ("httpCheckFrequency", Flag("http_check_frequency")),
    ("staticPodURL", Flag("manifest_url")),
    ("staticPodURLHeader", Flag("manifest_url_header")),
    ("address", Flag("address")),
    ("port", Unsupported(NO_SECURE_SERVER)),
    ("readOnlyPort", Flag("read_only_port")),
    ("tlsCertFile", Unsupported(NO_SECURE_SERVER)),
    ("tlsPrivateKeyFile", Unsupported(NO_SECURE_SERVER)),
    ("tlsCipherSuites", Unsupported(NO_SECURE_SERVER)),
    ("tlsCurvePreferences", Unsupported(NO_SECURE_SERVER)),
    ("tlsMinVersion", Unsupported(NO_SECURE_SERVER)),
    ("rotateCertificates", Flag("rotate_certificates")),
    ("serverTLSBootstrap", Unsupported(NO_API_SERVER)),
    ("authentication", Unsupported(NO_SECURE_SERVER)),
    ("authorization", Unsupported(NO_SECURE_SERVER)),
    ("registryPullQPS", Unsupported("pulls are not rate-limited")),
    ("registryBurst", Unsupported("pulls are not rate-limited")),
    (
        "imagePullCredentialsVerificationPolicy",
        Unsupported("images on the node are usable by every pod"),
    ),
    (
        "preloadedImagesVerificationAllowlist",
        Unsupported("images on the node are usable by every pod"),
    ),
    ("eventRecordQPS", Unsupported("events are not rate-limited")),
    ("eventBurst", Unsupported("events are not rate-limited")),
    (
        "enableDebuggingHandlers",
        Unsupported("exec, logs and port-forward stay on the root-only socket"),
    ),
    (
        "enableContentionProfiling",
        Unsupported("no profiling endpoints"),
    ),
    (
        "healthzPort",
        Unsupported("/healthz is served on the read-only port"),
    ),
    (
        "healthzBindAddress",
        Unsupported("/healthz is served on the read-only port"),
    ),
    (
        "oomScoreAdj",
        Unsupported("the daemon's oom_score_adj is always -999"),
    ),
    ("clusterDomain", Flag("cluster_domain")),
    ("clusterDNS", Flag("cluster_dns")),
    (
        "streamingConnectionIdleTimeout",
        Unsupported("deprecated, no effect in the kubelet either"),
    ),
    (
        "nodeStatusUpdateFrequency",
        Flag("node_status_update_frequency"),
    ),
    (
        "nodeStatusReportFrequency",
        Flag("node_status_report_frequency"),
    ),
    (
        "nodeLeaseDurationSeconds",
        Flag("node_lease_duration_seconds"),
    ),
    ("imageMinimumGCAge", Flag("image_minimum_gc_age")),
    ("imageMaximumGCAge", Flag("image_maximum_gc_age")),
    (
        "imageGCHighThresholdPercent",
        Flag("image_gc_high_threshold"),
    ),
    ("imageGCLowThresholdPercent", Flag("image_gc_low_threshold")),
    (
        "volumeStatsAggPeriod",
        Unsupported("volume usage is measured when asked"),
    ),
    (
        "kubeletCgroups",
        Unsupported("the daemon runs in the `daemon` leaf of its own cgroup"),
    ),
    (
        "systemCgroups",
        Unsupported("podhost does not move system processes"),
    ),
    ("cgroupRoot", Flag("cgroup_root")),
    (
        "cgroupsPerQOS",
        Unsupported("QoS cgroups are always made (cgroup v2)"),
    ),
    (
        "cgroupDriver",
        Unsupported("podhost writes cgroupfs itself, under its delegated cgroup"),
    ),
    ("cpuManagerPolicy", Unsupported(NO_RESOURCE_MANAGERS)),
    (
        "singleProcessOOMKill",
        Unsupported("memory.oom.group is always set on cgroup v2"),
    ),
    ("cpuManagerPolicyOptions", Unsupported(NO_RESOURCE_MANAGERS)),
    (
        "cpuManagerReconcilePeriod",
        Unsupported(NO_RESOURCE_MANAGERS),
    ),
    (
        "draManagerReconcilePeriod",
        Unsupported(NO_RESOURCE_MANAGERS),
    ),
    ("memoryManagerPolicy", Unsupported(NO_RESOURCE_MANAGERS)),
    ("topologyManagerPolicy", Unsupported(NO_RESOURCE_MANAGERS)),
    ("topologyManagerScope", Unsupported(NO_RESOURCE_MANAGERS)),
    (
        "topologyManagerPolicyOptions",
        Unsupported(NO_RESOURCE_MANAGERS),
    ),
    ("qosReserved", Unsupported(NO_RESOURCE_MANAGERS)),
    (
        "runtimeRequestTimeout",
        Unsupported("no CRI: podhost is its own runtime"),
    ),
    (
        "hairpinMode",
        Unsupported("the built-in bridge sets hairpin on every pod's port"),
    ),
    ("maxPods", Flag("max_pods")),
    ("podCIDR", Flag("pod_cidr")),
    ("podPidsLimit", Flag("pod_pids_limit")),
    ("resolvConf", Flag("resolv_conf")),
    ("runOnce", Flag("runonce")),
    (
        "cpuCFSQuota",
        Unsupported("CPU limits are always enforced with a CFS quota"),
    ),
    (
        "cpuCFSQuotaPeriod",
        Unsupported("the CFS period is the kernel's default, 100ms"),
    ),
    ("nodeStatusMaxImages", Unsupported(NO_API_SERVER)),
    ("maxOpenFiles", Flag("max_open_files")),
    ("contentType", Unsupported(NO_API_SERVER)),
    ("kubeAPIQPS", Unsupported(NO_API_SERVER)),
    ("kubeAPIBurst", Unsupported(NO_API_SERVER)),
    (
        "serializeImagePulls",
        Unsupported("images are pulled in parallel, one pull per image"),
    ),
    (
        "maxParallelImagePulls",
        Unsupported("images are pulled in parallel, one pull per image"),
    ),
    ("evictionHard", Flag("eviction_hard")),
    ("evictionSoft", Flag("eviction_soft")),
    (
        "evictionSoftGracePeriod",
        Flag("eviction_soft_grace_period"),
    ),
    (
        "evictionPressureTransitionPeriod",
        Flag("eviction_pressure_transition_period"),
    ),
    (
        "evictionMaxPodGracePeriod",
        Flag("eviction_max_pod_grace_period"),
    ),
    ("evictionMinimumReclaim", Flag("eviction_minimum_reclaim")),
    (
        "mergeDefaultEvictionSettings",
        Unsupported("evictionHard replaces all the defaults"),
    ),
    (
        "podsPerCore",
        Unsupported("the number of pods is not capped"),
    ),
    ("enableControllerAttachDetach", Unsupported(NO_API_SERVER)),
    (
        "protectKernelDefaults",
        Unsupported("podhost does not check or tune kernel sysctls"),
    ),
    (
        "makeIPTablesUtilChains",
        Unsupported("the bridge uses nftables"),
    ),
    (
        "iptablesMasqueradeBit",
        Unsupported("deprecated, no effect in the kubelet either"),
    ),
    (
        "iptablesDropBit",
        Unsupported("deprecated, no effect in the kubelet either"),
    ),
    (
        "featureGates",
        Unsupported("no feature gates: what podhost implements is on"),
    ),
    (
        "failSwapOn",
        Unsupported("podhost starts with or without swap"),
    ),
    (
        "memorySwap",
        Unsupported("containers get no swap limit of their own"),
    ),
    ("containerLogMaxSize", Flag("container_log_max_size")),
    ("containerLogMaxFiles", Flag("container_log_max_files")),
    (
        "containerLogMaxWorkers",
        Unsupported("each shim rotates its own log as it writes"),
    ),
    (
        "containerLogMonitorInterval",
        Unsupported("each shim rotates its own log as it writes"),
    ),
    (
        "configMapAndSecretChangeDetectionStrategy",
        Unsupported("ConfigMaps and Secrets come from --config-dir, watched"),
    ),
    ("systemReserved", Flag("system_reserved")),
    ("kubeReserved", Flag("kube_reserved")),
    ("reservedSystemCPUs", Unsupported(NO_ALLOCATABLE)),
    (
        "showHiddenMetricsForVersion",
        Unsupported("no hidden metrics"),
    ),
    ("systemReservedCgroup", Unsupported(NO_ALLOCATABLE)),
    ("kubeReservedCgroup", Unsupported(NO_ALLOCATABLE)),
    ("enforceNodeAllocatable", Unsupported(NO_ALLOCATABLE)),
    ("allowedUnsafeSysctls", Flag("allowed_unsafe_sysctls")),
    ("volumePluginDir", Unsupported("no volume plugins")),
    ("providerID", Unsupported(NO_API_SERVER)),
    (
        "kernelMemcgNotification",
        Unsupported("memory is polled by the eviction manager"),
    ),
    ("logging", Flag("log_format")),
    ("enableSystemLogHandler", Unsupported("no /logs endpoint")),
    ("enableSystemLogQuery", Unsupported("no /logs endpoint")),
    (
        "shutdownGracePeriod",
        Unsupported("containers outlive the daemon; no node shutdown manager"),
    ),
    (
        "shutdownGracePeriodCriticalPods",
        Unsupported("containers outlive the daemon; no node shutdown manager"),
    ),
    (
        "shutdownGracePeriodByPodPriority",
        Unsupported("containers outlive the daemon; no node shutdown manager"),
    ),
    ("crashLoopBackOff", Flag("crashloop_max_backoff")),
    ("reservedMemory", Unsupported(NO_RESOURCE_MANAGERS)),
    (
        "enableProfilingHandler",
        Unsupported("no profiling endpoints"),
    ),
    (
        "enableDebugFlagsHandler",
        Unsupported("no profiling endpoints"),
    ),
    ("seccompDefault", Flag("seccomp_default")),
    (
        "memoryThrottlingFactor",
        Unsupported("no memory.high (MemoryQoS)"),
    ),
    (
        "memoryReservationPolicy",
        Unsupported("no memory.min/low (MemoryQoS)"),
    ),
    ("registerWithTaints", Flag("register_with_taints")),
    ("registerNode", Unsupported(NO_API_SERVER)),
    ("tracing", Unsupported("no OpenTelemetry tracing")),
    (
        "localStorageCapacityIsolation",
        Unsupported("emptyDir sizeLimit is always enforced"),
    ),
    (
        "containerRuntimeEndpoint",
        Unsupported("no CRI: podhost is its own runtime"),
    ),
    (
        "imageServiceEndpoint",
        Unsupported("no CRI: podhost is its own runtime"),
    ),
    (
        "failCgroupV1",
        Unsupported(
            "podhost runs on cgroup v1: container limits enforced, what v1 lacks is reported",
        ),
    ),
    (
        "userNamespaces",
        Unsupported("each hostUsers: false pod gets 65536 IDs (--userns-range)"),
    ),
];

/// `logging`'s sub-fields (component-base's LoggingConfiguration).
pub const LOGGING_FIELDS: &[(&str, Support)] = &[
    ("format", Flag("log_format")),
    (
        "flushFrequency",
        Unsupported("log lines are written as they come"),
    ),
    (
        "verbosity",
        Unsupported("use RUST_LOG (e.g. RUST_LOG=debug)"),
    ),
    (
        "vmodule",
        Unsupported("use RUST_LOG (e.g. RUST_LOG=podhost::worker=debug)"),
    ),
    (
        "options",
        Unsupported("no JSON split-stream or text buffering options"),
    ),
];

/// `crashLoopBackOff`'s sub-fields.
pub const CRASH_LOOP_BACK_OFF_FIELDS: &[(&str, Support)] =
    &[("maxContainerRestartPeriod", Flag("crashloop_max_backoff"))];

/// The entry of `name` in `table`.
pub fn lookup(table: &[(&'static str, Support)], name: &str) -> Option<Support> {
    table.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// The field of `table` whose name is nearest to `typo` (a likely misspelling), if one
/// is within a third of its length in edits.
pub fn nearest(table: &[(&'static str, Support)], typo: &str) -> Option<&'static str> {
    podhost_model::spelling::nearest(table.iter().map(|(name, _)| *name), typo)
}
