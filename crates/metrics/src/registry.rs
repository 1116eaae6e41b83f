//! The process-wide registry: every metric, registered once under its name.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::labels::{
    ContainerLabels, ContainerStateLabels, ContainerType, ContainerTypeLabels, EvictionLabels,
    ImageSizeLabels, OomLabels, PhaseLabels, ProbeLabels, ProbeSeries, StartErrorLabels,
    image_size_range,
};
use super::render::{Format, to_prometheus_text};
use super::{MetricsError, PodCounts};

/// The kubelet's pod start buckets (0.5 s … 1 h), with finer ones below 0.5 s first:
/// podhost starts pods in tens of milliseconds, which the kubelet's first bucket would
/// hide. A superset of the kubelet's, so its dashboards' quantiles still work.
const POD_START_BUCKETS: [f64; 29] = [
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0,
    120.0, 180.0, 240.0, 300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// The kubelet's image pull buckets (1 s … 1 h), with sub-second ones first (a pull
/// from a registry on the same network).
const IMAGE_PULL_BUCKETS: [f64; 21] = [
    0.1, 0.25, 0.5, 1.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0,
    600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// One sync of a pod worker: deciding is pure and fast, acting spawns tasks.
const POD_SYNC_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub(super) struct Metrics {
    registry: Registry,
    /// Held while the gauges are set and the registry encoded, so that two scrapes
    /// never mix their counts.
    scrape: Mutex<()>,
    /// When each pod not yet Running was first seen.
    seen: Mutex<HashMap<String, Instant>>,
    running_pods: Gauge,
    running_containers: Family<ContainerStateLabels, Gauge>,
    pods: Family<PhaseLabels, Gauge>,
    pod_start: Histogram,
    started_containers: Family<ContainerTypeLabels, Counter>,
    started_container_errors: Family<StartErrorLabels, Counter>,
    container_restarts: Family<ContainerLabels, Counter>,
    oom_kills: Family<OomLabels, Counter>,
    probes: Family<ProbeLabels, Counter>,
    image_pull: HistogramFamily<ImageSizeLabels>,
    image_pulled_bytes: Counter,
    image_gc_freed_bytes: Counter,
    image_gc_deleted: Counter,
    containers_collected: Counter,
    evictions: Family<EvictionLabels, Counter>,
    pod_sync: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

pub(super) fn get() -> &'static Metrics {
    &METRICS
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    fn new() -> Self {
        let mut m = Self {
            registry: Registry::default(),
            scrape: Mutex::new(()),
            seen: Mutex::new(HashMap::new()),
            running_pods: Gauge::default(),
            running_containers: Family::default(),
            pods: Family::default(),
            pod_start: Histogram::new(POD_START_BUCKETS),
            started_containers: Family::default(),
            started_container_errors: Family::default(),
            container_restarts: Family::default(),
            oom_kills: Family::default(),
            probes: Family::default(),
            image_pull: Family::new_with_constructor(|| Histogram::new(IMAGE_PULL_BUCKETS)),
            image_pulled_bytes: Counter::default(),
            image_gc_freed_bytes: Counter::default(),
            image_gc_deleted: Counter::default(),
            containers_collected: Counter::default(),
            evictions: Family::default(),
            pod_sync: Histogram::new(POD_SYNC_BUCKETS),
        };
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "kubelet_running_pods",
            "Number of pods that have a running container",
            self.running_pods.clone(),
        );
        r.register(
            "kubelet_running_containers",
            "Number of containers currently running, exited, or created but never started",
            self.running_containers.clone(),
        );
        r.register(
            "podhost_pods",
            "Number of pods by status.phase",
            self.pods.clone(),
        );
        r.register(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from podhost seeing a pod for the first time to the pod running",
            self.pod_start.clone(),
        );
        r.register(
            "kubelet_started_containers",
            "Cumulative number of containers started",
            self.started_containers.clone(),
        );
        r.register(
            "kubelet_started_containers_errors",
            "Cumulative number of errors when starting containers",
            self.started_container_errors.clone(),
        );
        r.register(
            "podhost_container_restarts",
            "Cumulative number of container restarts (a start after an earlier instance ran)",
            self.container_restarts.clone(),
        );
        r.register(
            "podhost_oom_kills",
            "Cumulative number of kernel OOM kills seen, by scope (pod, system, other)",
            self.oom_kills.clone(),
        );
        r.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result",
            self.probes.clone(),
        );
        r.register(
            "kubelet_image_pull_duration_seconds",
            "Duration in seconds to pull an image, by the image's size range",
            self.image_pull.clone(),
        );
        r.register(
            "podhost_image_pulled_bytes",
            "Cumulative bytes of image layers downloaded (layers already stored are not)",
            self.image_pulled_bytes.clone(),
        );
        r.register(
            "podhost_image_gc_freed_bytes",
            "Cumulative bytes freed by image garbage collection",
            self.image_gc_freed_bytes.clone(),
        );
        r.register(
            "kubelet_image_garbage_collected",
            "Cumulative number of images deleted by image garbage collection",
            self.image_gc_deleted.clone(),
        );
        r.register(
            "podhost_containers_garbage_collected",
            "Cumulative number of dead containers removed by container garbage collection",
            self.containers_collected.clone(),
        );
        r.register(
            "kubelet_evictions",
            "Cumulative number of pod evictions by eviction signal",
            self.evictions.clone(),
        );
        r.register(
            "podhost_pod_sync_duration_seconds",
            "Duration in seconds of one pass of a pod worker's sync loop (decide and act)",
            self.pod_sync.clone(),
        );
    }

    pub(super) fn pod_seen(&self, uid: &str) {
        lock(&self.seen)
            .entry(uid.to_string())
            .or_insert_with(Instant::now);
    }

    pub(super) fn pod_running(&self, uid: &str) {
        if let Some(seen) = lock(&self.seen).remove(uid) {
            self.pod_start.observe(seen.elapsed().as_secs_f64());
        }
    }

    pub(super) fn pod_forgotten(&self, uid: &str) {
        lock(&self.seen).remove(uid);
    }

    pub(super) fn container_started(&self, container_type: ContainerType) {
        let labels = ContainerTypeLabels {
            container_type: container_type.as_str(),
        };
        self.started_containers.get_or_create(&labels).inc();
    }

    pub(super) fn container_start_failed(&self, container_type: ContainerType, code: &str) {
        let labels = StartErrorLabels {
            container_type: container_type.as_str(),
            code: code.to_string(),
        };
        self.started_container_errors.get_or_create(&labels).inc();
    }

    pub(super) fn container_restarted(&self, namespace: &str, pod: &str, container: &str) {
        let labels = ContainerLabels {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            container: container.to_string(),
        };
        self.container_restarts.get_or_create(&labels).inc();
    }

    pub(super) fn oom_kill(&self, system: bool, in_pod: bool) {
        let scope = match (system, in_pod) {
            (true, _) => "system",
            (false, true) => "pod",
            (false, false) => "other",
        };
        self.oom_kills.get_or_create(&OomLabels { scope }).inc();
    }

    pub(super) fn probe_ran(
        &self,
        series: &ProbeSeries,
        probe_type: &'static str,
        result: &'static str,
    ) {
        self.probes
            .get_or_create(&ProbeLabels::of(series, probe_type, result))
            .inc();
    }

    pub(super) fn image_pulled(&self, elapsed: Duration, image_bytes: u64, downloaded: u64) {
        let labels = ImageSizeLabels {
            image_size_in_bytes: image_size_range(image_bytes),
        };
        self.image_pull
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.image_pulled_bytes.inc_by(downloaded);
    }

    pub(super) fn image_gc_freed(&self, bytes: u64, images: usize) {
        self.image_gc_freed_bytes.inc_by(bytes);
        self.image_gc_deleted.inc_by(images as u64);
    }

    pub(super) fn containers_collected(&self, count: usize) {
        self.containers_collected.inc_by(count as u64);
    }

    pub(super) fn eviction(&self, signal: &str) {
        let labels = EvictionLabels {
            eviction_signal: signal.to_string(),
        };
        self.evictions.get_or_create(&labels).inc();
    }

    pub(super) fn pod_sync(&self, elapsed: Duration) {
        self.pod_sync.observe(elapsed.as_secs_f64());
    }

    pub(super) fn render(
        &self,
        counts: &PodCounts,
        format: Format,
    ) -> Result<(String, &'static str), MetricsError> {
        let _one_scrape = lock(&self.scrape);
        self.running_pods.set(counts.running_pods);
        for (state, n) in &counts.containers {
            let labels = ContainerStateLabels {
                container_state: state,
            };
            self.running_containers.get_or_create(&labels).set(*n);
        }
        for (phase, n) in &counts.phases {
            self.pods.get_or_create(&PhaseLabels { phase }).set(*n);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        let body = match format {
            Format::OpenMetrics => text,
            Format::Prometheus => to_prometheus_text(&text),
        };
        Ok((body, format.content_type()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_renders_the_kubelets_names_in_both_formats() {
        let m = Metrics::new();
        m.container_started(ContainerType::Init);
        m.container_restarted("default", "web", "app");
        m.eviction("memory.available");
        m.image_pulled(Duration::from_millis(300), 5 << 20, 1 << 20);
        m.pod_seen("u1");
        m.pod_running("u1");
        m.pod_running("u1");
        let counts = PodCounts::of(std::iter::empty());
        let (text, content_type) = m.render(&counts, Format::Prometheus).unwrap();
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        for line in [
            "# TYPE kubelet_started_containers_total counter",
            "kubelet_started_containers_total{container_type=\"init_container\"} 1",
            "podhost_container_restarts_total{namespace=\"default\",pod=\"web\",container=\"app\"} 1",
            "kubelet_evictions_total{eviction_signal=\"memory.available\"} 1",
            "kubelet_image_pull_duration_seconds_count{image_size_in_bytes=\"0-10MB\"} 1",
            "podhost_image_pulled_bytes_total 1048576",
            "kubelet_pod_start_duration_seconds_count 1",
            "kubelet_running_pods 0",
            "kubelet_running_containers{container_state=\"running\"} 0",
            "podhost_pods{phase=\"Pending\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
        assert!(!text.contains("# EOF"));
        let (om, content_type) = m.render(&counts, Format::OpenMetrics).unwrap();
        assert!(content_type.starts_with("application/openmetrics-text"));
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("# TYPE kubelet_started_containers counter\n"));
    }
}
