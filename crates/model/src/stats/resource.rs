//! `/metrics/resource`: the kubelet's resource metrics endpoint (Prometheus text 0.0.4),
//! what metrics-server scrapes for `kubectl top` and the HPA. The same names, labels,
//! help texts and millisecond timestamps as the kubelet's `resource_metrics.go`, derived
//! from the Summary so that both endpoints agree.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::summary::{CpuStats, MemoryStats, Summary};

/// The Prometheus text of `summary`.
pub fn resource_metrics(summary: &Summary) -> String {
    let mut out = String::new();
    let node = &summary.node;
    family(
        &mut out,
        "node_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the node in core-seconds",
        "counter",
        cpu_seconds(node.cpu.as_ref())
            .map(|s| (String::new(), s))
            .into_iter(),
    );
    family(
        &mut out,
        "node_memory_working_set_bytes",
        "Current working set of the node in bytes",
        "gauge",
        working_set(node.memory.as_ref())
            .map(|s| (String::new(), s))
            .into_iter(),
    );
    let containers = || {
        summary.pods.iter().flat_map(|p| {
            p.containers.iter().map(move |c| {
                (
                    format!(
                        "container=\"{}\",namespace=\"{}\",pod=\"{}\"",
                        escape(&c.name),
                        escape(&p.pod_ref.namespace),
                        escape(&p.pod_ref.name)
                    ),
                    c,
                )
            })
        })
    };
    family(
        &mut out,
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the container in core-seconds",
        "counter",
        containers().filter_map(|(l, c)| Some((l, cpu_seconds(c.cpu.as_ref())?))),
    );
    family(
        &mut out,
        "container_memory_working_set_bytes",
        "Current working set of the container in bytes",
        "gauge",
        containers().filter_map(|(l, c)| Some((l, working_set(c.memory.as_ref())?))),
    );
    family(
        &mut out,
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds",
        "gauge",
        containers().map(|(l, c)| (l, sample(seconds(c.start_time), c.start_time))),
    );
    let pods = || {
        summary.pods.iter().map(|p| {
            (
                format!(
                    "namespace=\"{}\",pod=\"{}\"",
                    escape(&p.pod_ref.namespace),
                    escape(&p.pod_ref.name)
                ),
                p,
            )
        })
    };
    family(
        &mut out,
        "pod_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the pod in core-seconds",
        "counter",
        pods().filter_map(|(l, p)| Some((l, cpu_seconds(p.cpu.as_ref())?))),
    );
    family(
        &mut out,
        "pod_memory_working_set_bytes",
        "Current working set of the pod in bytes",
        "gauge",
        pods().filter_map(|(l, p)| Some((l, working_set(p.memory.as_ref())?))),
    );
    family(
        &mut out,
        "resource_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        "gauge",
        std::iter::once((String::new(), Sample::untimed(0.0))),
    );
    out
}

/// A value and, as the kubelet gives them, the time it was read.
struct Sample {
    value: f64,
    at_ms: Option<i64>,
}

impl Sample {
    fn untimed(value: f64) -> Self {
        Self { value, at_ms: None }
    }
}

fn sample(value: f64, at: DateTime<Utc>) -> Sample {
    Sample {
        value,
        at_ms: Some(at.timestamp_millis()),
    }
}

fn seconds(t: DateTime<Utc>) -> f64 {
    t.timestamp_micros() as f64 / 1e6
}

fn cpu_seconds(cpu: Option<&CpuStats>) -> Option<Sample> {
    let cpu = cpu?;
    Some(sample(cpu.usage_core_nano_seconds? as f64 / 1e9, cpu.time))
}

fn working_set(memory: Option<&MemoryStats>) -> Option<Sample> {
    let memory = memory?;
    Some(sample(memory.working_set_bytes? as f64, memory.time))
}

fn family(
    out: &mut String,
    name: &str,
    help: &str,
    kind: &str,
    samples: impl Iterator<Item = (String, Sample)>,
) {
    // The kubelet marks these metrics STABLE in their help text.
    let _ = writeln!(out, "# HELP {name} [STABLE] {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, s) in samples {
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        match s.at_ms {
            Some(ms) => writeln!(out, "{name}{labels} {} {ms}", s.value),
            None => writeln!(out, "{name}{labels} {}", s.value),
        }
        .unwrap_or_default();
    }
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Summary as the kubelet serves it (its JSON field names).
    fn summary() -> Summary {
        serde_json::from_value(serde_json::json!({
            "node": {
                "nodeName": "n1",
                "startTime": "2026-11-29T10:00:00Z",
                "cpu": {"time": "2026-11-29T12:00:01Z", "usageCoreNanoSeconds": 2_500_000_000_u64},
                "memory": {"time": "2026-11-29T12:00:02Z", "workingSetBytes": 1_048_576}
            },
            "pods": [{
                "podRef": {"name": "web", "namespace": "team-a", "uid": "u1"},
                "startTime": "2026-11-29T11:00:00Z",
                "containers": [{
                    "name": "app",
                    "startTime": "2026-11-29T11:00:03Z",
                    "cpu": {"time": "2026-11-29T12:00:01Z", "usageCoreNanoSeconds": 500_000_000},
                    "memory": {"time": "2026-11-29T12:00:01Z", "workingSetBytes": 4096}
                }, {
                    "name": "starting",
                    "startTime": "2026-11-29T11:59:59Z"
                }],
                "cpu": {"time": "2026-11-29T12:00:01Z", "usageCoreNanoSeconds": 750_000_000},
                "memory": {"time": "2026-11-29T12:00:01Z", "workingSetBytes": 8192}
            }]
        }))
        .expect("a kubelet Summary")
    }

    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn every_series_metrics_server_reads_with_its_timestamp() {
        let text = resource_metrics(&summary());
        let t1 = 1_795_953_601_000_i64; // 2026-11-29T12:00:01Z in ms
        assert_eq!(
            samples(&text),
            [
                format!("node_cpu_usage_seconds_total 2.5 {t1}"),
                format!("node_memory_working_set_bytes 1048576 {}", t1 + 1000),
                format!(
                    "container_cpu_usage_seconds_total{{container=\"app\",namespace=\"team-a\",pod=\"web\"}} 0.5 {t1}"
                ),
                format!(
                    "container_memory_working_set_bytes{{container=\"app\",namespace=\"team-a\",pod=\"web\"}} 4096 {t1}"
                ),
                format!(
                    "container_start_time_seconds{{container=\"app\",namespace=\"team-a\",pod=\"web\"}} 1795950003 {}",
                    1_795_950_003_000_i64
                ),
                format!(
                    "container_start_time_seconds{{container=\"starting\",namespace=\"team-a\",pod=\"web\"}} 1795953599 {}",
                    1_795_953_599_000_i64
                ),
                format!(
                    "pod_cpu_usage_seconds_total{{namespace=\"team-a\",pod=\"web\"}} 0.75 {t1}"
                ),
                format!(
                    "pod_memory_working_set_bytes{{namespace=\"team-a\",pod=\"web\"}} 8192 {t1}"
                ),
                "resource_scrape_error 0".to_string(),
            ]
        );
        assert!(text.contains(
            "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds\n# TYPE container_cpu_usage_seconds_total counter\n"
        ));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
