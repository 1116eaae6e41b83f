//! `/metrics/cadvisor`: the Prometheus text format (0.0.4) with cadvisor's metric names
//! and labels (`container`, `id`, `image`, `name`, `namespace`, `pod`), so dashboards
//! written for the kubelet's cadvisor endpoint work unchanged. Pod-level series have
//! `container=""`, as cadvisor's pod cgroups do; network is per pod (one netns).

use std::fmt::Write;

use super::parse::IoBytes;
use super::summary::{InterfaceStats, PsiStats};

/// One cgroup's numbers and identity (a container's, or a pod's with `container` empty).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupSeries {
    /// The cgroup path, cadvisor's `id`.
    pub id: String,
    pub pod: String,
    pub namespace: String,
    pub container: String,
    pub image: String,
    /// The container's ID (cadvisor's `name`).
    pub name: String,
    pub timestamp_ms: i64,
    pub cpu_usage_seconds: Option<f64>,
    pub memory_usage_bytes: Option<u64>,
    pub memory_working_set_bytes: Option<u64>,
    pub memory_rss: Option<u64>,
    pub io: Option<IoBytes>,
    pub cpu_psi: Option<PsiStats>,
    pub memory_psi: Option<PsiStats>,
    pub io_psi: Option<PsiStats>,
    pub network: Vec<InterfaceStats>,
}

type Value = fn(&CgroupSeries) -> Vec<(Option<String>, f64)>;

fn one(v: Option<f64>) -> Vec<(Option<String>, f64)> {
    v.map(|v| vec![(None, v)]).unwrap_or_default()
}

fn bytes(v: Option<u64>) -> Vec<(Option<String>, f64)> {
    one(v.map(|b| b as f64))
}

/// PSI totals are microseconds; cadvisor exports seconds.
fn psi_seconds(p: Option<PsiStats>, full: bool) -> Vec<(Option<String>, f64)> {
    one(p.map(|p| {
        let d = if full { p.full } else { p.some };
        d.total as f64 / 1e6
    }))
}

fn per_interface(
    s: &CgroupSeries,
    pick: fn(&InterfaceStats) -> Option<u64>,
) -> Vec<(Option<String>, f64)> {
    s.network
        .iter()
        .filter_map(|i| pick(i).map(|v| (Some(i.name.clone()), v as f64)))
        .collect()
}

const METRICS: &[(&str, &str, &str, Value)] = &[
    (
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed in seconds.",
        |s| one(s.cpu_usage_seconds),
    ),
    (
        "container_memory_usage_bytes",
        "gauge",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
        |s| bytes(s.memory_usage_bytes),
    ),
    (
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set in bytes.",
        |s| bytes(s.memory_working_set_bytes),
    ),
    (
        "container_memory_rss",
        "gauge",
        "Size of RSS in bytes.",
        |s| bytes(s.memory_rss),
    ),
    (
        "container_fs_reads_bytes_total",
        "counter",
        "Cumulative count of bytes read",
        |s| bytes(s.io.map(|io| io.read)),
    ),
    (
        "container_fs_writes_bytes_total",
        "counter",
        "Cumulative count of bytes written",
        |s| bytes(s.io.map(|io| io.write)),
    ),
    (
        "container_network_receive_bytes_total",
        "counter",
        "Cumulative count of bytes received",
        |s| per_interface(s, |i| i.rx_bytes),
    ),
    (
        "container_network_receive_errors_total",
        "counter",
        "Cumulative count of errors encountered while receiving",
        |s| per_interface(s, |i| i.rx_errors),
    ),
    (
        "container_network_transmit_bytes_total",
        "counter",
        "Cumulative count of bytes transmitted",
        |s| per_interface(s, |i| i.tx_bytes),
    ),
    (
        "container_network_transmit_errors_total",
        "counter",
        "Cumulative count of errors encountered while transmitting",
        |s| per_interface(s, |i| i.tx_errors),
    ),
    (
        "container_pressure_cpu_stalled_seconds_total",
        "counter",
        "Total time duration no tasks in the container could make progress due to CPU congestion.",
        |s| psi_seconds(s.cpu_psi, true),
    ),
    (
        "container_pressure_cpu_waiting_seconds_total",
        "counter",
        "Total time duration tasks in the container have waited due to CPU congestion.",
        |s| psi_seconds(s.cpu_psi, false),
    ),
    (
        "container_pressure_memory_stalled_seconds_total",
        "counter",
        "Total time duration no tasks in the container could make progress due to memory congestion.",
        |s| psi_seconds(s.memory_psi, true),
    ),
    (
        "container_pressure_memory_waiting_seconds_total",
        "counter",
        "Total time duration tasks in the container have waited due to memory congestion.",
        |s| psi_seconds(s.memory_psi, false),
    ),
    (
        "container_pressure_io_stalled_seconds_total",
        "counter",
        "Total time duration no tasks in the container could make progress due to IO congestion.",
        |s| psi_seconds(s.io_psi, true),
    ),
    (
        "container_pressure_io_waiting_seconds_total",
        "counter",
        "Total time duration tasks in the container have waited due to IO congestion.",
        |s| psi_seconds(s.io_psi, false),
    ),
];

/// A label value as the text format wants it (backslash, quote and newline escaped).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The whole exposition: each metric's HELP and TYPE once, then its series. A metric
/// no series has (PSI on cgroup v1) is left out entirely.
pub fn render(series: &[CgroupSeries]) -> String {
    let mut out = String::new();
    for (metric, kind, help, value) in METRICS {
        let mut lines = String::new();
        for s in series {
            for (interface, v) in value(s) {
                let iface = interface
                    .map(|i| format!(",interface=\"{}\"", escape(&i)))
                    .unwrap_or_default();
                let _ = writeln!(
                    lines,
                    "{metric}{{container=\"{}\",id=\"{}\",image=\"{}\"{iface},name=\"{}\",namespace=\"{}\",pod=\"{}\"}} {v} {}",
                    escape(&s.container),
                    escape(&s.id),
                    escape(&s.image),
                    escape(&s.name),
                    escape(&s.namespace),
                    escape(&s.pod),
                    s.timestamp_ms,
                );
            }
        }
        if !lines.is_empty() {
            let _ = writeln!(out, "# HELP {metric} {help}");
            let _ = writeln!(out, "# TYPE {metric} {kind}");
            out.push_str(&lines);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summary::PsiData;

    #[test]
    fn renders_cadvisor_names_labels_and_skips_absent_metrics() {
        let s = CgroupSeries {
            id: "/kubepods/besteffort/podu/web".into(),
            pod: "web-node".into(),
            namespace: "default".into(),
            container: "web".into(),
            image: "busybox:1".into(),
            name: "u-web-0".into(),
            timestamp_ms: 1000,
            cpu_usage_seconds: Some(1.5),
            memory_working_set_bytes: Some(4096),
            cpu_psi: Some(PsiStats {
                full: PsiData {
                    total: 2_000_000,
                    ..Default::default()
                },
                some: PsiData {
                    total: 3_000_000,
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        let pod = CgroupSeries {
            id: "/kubepods/besteffort/podu".into(),
            pod: "web-node".into(),
            namespace: "default".into(),
            network: vec![InterfaceStats {
                name: "eth0".into(),
                rx_bytes: Some(10),
                ..Default::default()
            }],
            timestamp_ms: 1000,
            ..Default::default()
        };
        let text = render(&[s, pod]);
        assert!(text.contains("# TYPE container_cpu_usage_seconds_total counter\n"));
        assert!(text.contains(
            "container_cpu_usage_seconds_total{container=\"web\",id=\"/kubepods/besteffort/podu/web\",image=\"busybox:1\",name=\"u-web-0\",namespace=\"default\",pod=\"web-node\"} 1.5 1000\n"
        ));
        assert!(text.contains("container_memory_working_set_bytes{container=\"web\""));
        assert!(text.contains("container_pressure_cpu_stalled_seconds_total{container=\"web\""));
        assert!(text.contains("} 2 1000\n"));
        assert!(text.contains(
            "container_network_receive_bytes_total{container=\"\",id=\"/kubepods/besteffort/podu\",image=\"\",interface=\"eth0\",name=\"\",namespace=\"default\",pod=\"web-node\"} 10 1000"
        ));
        assert!(!text.contains("container_memory_rss"));
        assert!(!text.contains("container_pressure_io"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
