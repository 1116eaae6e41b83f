//! `podhost top pods|node`: kubectl top's tables from the daemon's Summary — CPU in
//! millicores rounded up (`12m`), memory as the working set in whole MiB rounded down
//! (`34Mi`), the node's percentages against its CPUs and memory — and, with `--psi`,
//! the pressure kubectl cannot show: cpu/memory/io `some` avg10.

use crate::model::stats::summary::{ContainerStats, PodStats, PsiStats, Summary};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopError {
    /// kubectl's words: a pod or node has no CPU rate yet (one sample, not two).
    #[error("metrics not available yet")]
    NotAvailable,
    #[error("--sort-by must be cpu or memory, not \"{0}\"")]
    BadSort(String),
}

/// How `top` sorts and what it shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopOptions {
    /// `-A`: every namespace's pods, with a NAMESPACE column first.
    pub namespace_column: bool,
    pub containers: bool,
    pub sort_by: Option<SortBy>,
    pub psi: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Cpu,
    Memory,
}

impl std::str::FromStr for SortBy {
    type Err = TopError;
    fn from_str(s: &str) -> Result<Self, TopError> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "memory" => Ok(Self::Memory),
            other => Err(TopError::BadSort(other.to_string())),
        }
    }
}

/// `12m`: nanocores as millicores, rounded up as a Quantity's MilliValue.
pub fn millicores(nano_cores: u64) -> String {
    format!("{}m", nano_cores.div_ceil(1_000_000))
}

/// `34Mi`: bytes in whole MiB, rounded down as kubectl prints memory.
pub fn mebibytes(bytes: u64) -> String {
    format!("{}Mi", bytes / (1024 * 1024))
}

/// `1.25%` (some avg10), or `<none>` where the kernel has no PSI for the cgroup.
fn psi_text(p: Option<&PsiStats>) -> String {
    p.map(|p| format!("{:.2}%", p.some.avg10))
        .unwrap_or_else(|| "<none>".into())
}

/// Columns padded as kubectl top's tabwriter (minimum width 10, padding 3).
fn table(rows: &[Vec<String>]) -> String {
    super::table::align_min(rows, 10)
}

/// One row's numbers: CPU rate and working set.
struct Usage {
    nano_cores: u64,
    working_set: u64,
}

fn container_usage(c: &ContainerStats) -> Option<Usage> {
    Some(Usage {
        nano_cores: c.cpu.as_ref()?.usage_nano_cores?,
        working_set: c.memory.as_ref()?.working_set_bytes?,
    })
}

/// A pod's usage as kubectl sums it: over its containers, each of which needs a rate.
fn pod_usage(p: &PodStats) -> Option<Usage> {
    if p.containers.is_empty() {
        return None;
    }
    p.containers.iter().try_fold(
        Usage {
            nano_cores: 0,
            working_set: 0,
        },
        |acc, c| {
            let u = container_usage(c)?;
            Some(Usage {
                nano_cores: acc.nano_cores + u.nano_cores,
                working_set: acc.working_set + u.working_set,
            })
        },
    )
}

fn sort<T>(rows: &mut [(T, Usage)], by: Option<SortBy>) {
    match by {
        Some(SortBy::Cpu) => rows.sort_by_key(|r| std::cmp::Reverse(r.1.nano_cores)),
        Some(SortBy::Memory) => rows.sort_by_key(|r| std::cmp::Reverse(r.1.working_set)),
        None => {}
    }
}

/// `top pods`: one row per pod (or per container with `containers`), by name unless
/// sorted. Pods without a CPU rate yet are left out, as the metrics API leaves them
/// out; none at all is [`TopError::NotAvailable`].
pub fn render_pods(summary: &Summary, opts: &TopOptions) -> Result<String, TopError> {
    let mut pods: Vec<&PodStats> = summary.pods.iter().collect();
    pods.sort_by(|a, b| {
        (&a.pod_ref.namespace, &a.pod_ref.name).cmp(&(&b.pod_ref.namespace, &b.pod_ref.name))
    });
    let psi_cells = |cpu: Option<&PsiStats>, mem: Option<&PsiStats>, io: Option<&PsiStats>| {
        vec![psi_text(cpu), psi_text(mem), psi_text(io)]
    };
    let mut header: Vec<String> = if opts.containers {
        vec!["POD".into(), "NAME".into()]
    } else {
        vec!["NAME".into()]
    };
    if opts.namespace_column {
        header.insert(0, "NAMESPACE".into());
    }
    let lead = |p: &PodStats| {
        let mut cells = Vec::new();
        if opts.namespace_column {
            cells.push(p.pod_ref.namespace.clone());
        }
        cells.push(p.pod_ref.name.clone());
        cells
    };
    header.extend(["CPU(cores)".to_string(), "MEMORY(bytes)".to_string()]);
    if opts.psi {
        header.extend(["CPU-PSI", "MEMORY-PSI", "IO-PSI"].map(String::from));
    }
    let mut rows: Vec<(Vec<String>, Usage)> = Vec::new();
    for p in pods {
        if opts.containers {
            let Some(_) = pod_usage(p) else { continue };
            for c in &p.containers {
                let Some(u) = container_usage(c) else {
                    continue;
                };
                let mut cells = lead(p);
                cells.push(c.name.clone());
                cells.extend([millicores(u.nano_cores), mebibytes(u.working_set)]);
                if opts.psi {
                    cells.extend(psi_cells(
                        c.cpu.as_ref().and_then(|x| x.psi.as_ref()),
                        c.memory.as_ref().and_then(|x| x.psi.as_ref()),
                        c.io.as_ref().and_then(|x| x.psi.as_ref()),
                    ));
                }
                rows.push((cells, u));
            }
        } else if let Some(u) = pod_usage(p) {
            let mut cells = lead(p);
            cells.extend([millicores(u.nano_cores), mebibytes(u.working_set)]);
            if opts.psi {
                cells.extend(psi_cells(
                    p.cpu.as_ref().and_then(|x| x.psi.as_ref()),
                    p.memory.as_ref().and_then(|x| x.psi.as_ref()),
                    p.io.as_ref().and_then(|x| x.psi.as_ref()),
                ));
            }
            rows.push((cells, u));
        }
    }
    if rows.is_empty() {
        return Err(TopError::NotAvailable);
    }
    sort(&mut rows, opts.sort_by);
    let mut all = vec![header];
    all.extend(rows.into_iter().map(|(cells, _)| cells));
    Ok(table(&all))
}

/// `top node`: the node's CPU against `cpus` cores and its working set against its
/// memory (available + working set, the kubelet's capacity).
pub fn render_node(summary: &Summary, cpus: u64, psi: bool) -> Result<String, TopError> {
    let n = &summary.node;
    let cpu = n.cpu.as_ref().ok_or(TopError::NotAvailable)?;
    let nano = cpu.usage_nano_cores.ok_or(TopError::NotAvailable)?;
    let mem = n.memory.as_ref().ok_or(TopError::NotAvailable)?;
    let ws = mem.working_set_bytes.ok_or(TopError::NotAvailable)?;
    let capacity = ws + mem.available_bytes.unwrap_or(0);
    let cpu_pct = u128::from(nano) * 100 / (u128::from(cpus.max(1)) * 1_000_000_000);
    let mem_pct = u128::from(ws) * 100 / u128::from(capacity.max(1));
    let mut header: Vec<String> = ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
        .map(String::from)
        .to_vec();
    let mut row = vec![
        n.node_name.clone(),
        millicores(nano),
        format!("{cpu_pct}%"),
        mebibytes(ws),
        format!("{mem_pct}%"),
    ];
    if psi {
        header.extend(["CPU-PSI", "MEMORY-PSI", "IO-PSI"].map(String::from));
        row.extend([
            psi_text(cpu.psi.as_ref()),
            psi_text(mem.psi.as_ref()),
            psi_text(n.io.as_ref().and_then(|i| i.psi.as_ref())),
        ]);
    }
    Ok(table(&[header, row]))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::model::stats::summary::{CpuStats, MemoryStats, NodeStats, PodReference, PsiData};

    fn cpu(nano: Option<u64>, avg10: Option<f64>) -> Option<CpuStats> {
        Some(CpuStats {
            time: Utc::now(),
            usage_nano_cores: nano,
            usage_core_nano_seconds: Some(1),
            psi: avg10.map(|a| PsiStats {
                full: PsiData::default(),
                some: PsiData {
                    avg10: a,
                    ..Default::default()
                },
            }),
        })
    }

    fn mem(ws: u64, available: Option<u64>) -> Option<MemoryStats> {
        Some(MemoryStats {
            time: Utc::now(),
            available_bytes: available,
            usage_bytes: Some(ws),
            working_set_bytes: Some(ws),
            rss_bytes: None,
            page_faults: None,
            major_page_faults: None,
            psi: None,
        })
    }

    fn container(name: &str, nano: Option<u64>, ws: u64) -> ContainerStats {
        ContainerStats {
            name: name.into(),
            start_time: Utc::now(),
            cpu: cpu(nano, Some(1.5)),
            memory: mem(ws, None),
            rootfs: None,
            logs: None,
            io: None,
        }
    }

    fn pod(name: &str, containers: Vec<ContainerStats>) -> PodStats {
        PodStats {
            pod_ref: PodReference {
                name: name.into(),
                namespace: "default".into(),
                uid: name.into(),
            },
            start_time: Utc::now(),
            containers,
            cpu: cpu(Some(1), Some(0.25)),
            memory: mem(1, None),
            network: None,
            volumes: vec![],
            ephemeral_storage: None,
            process_stats: None,
            io: None,
        }
    }

    fn summary(pods: Vec<PodStats>) -> Summary {
        Summary {
            node: NodeStats {
                node_name: "node1".into(),
                system_containers: vec![],
                start_time: Utc::now(),
                cpu: cpu(Some(500_000_000), None),
                memory: mem(3 * 1024 * 1024 * 1024, Some(1024 * 1024 * 1024)),
                network: None,
                fs: None,
                runtime: None,
                rlimit: None,
                io: None,
            },
            pods,
        }
    }

    const MI: u64 = 1024 * 1024;

    #[test]
    fn pods_as_kubectl_prints_them() {
        let s = summary(vec![
            pod(
                "web",
                vec![
                    container("a", Some(12_000_001), 30 * MI + 5),
                    container("b", Some(0), 4 * MI),
                ],
            ),
            pod("db", vec![container("m", Some(250_000_000), 100 * MI)]),
            pod("new", vec![container("x", None, MI)]),
        ]);
        let text = render_pods(&s, &TopOptions::default()).unwrap();
        assert_eq!(
            text,
            "NAME      CPU(cores)   MEMORY(bytes)\n\
             db        250m         100Mi\n\
             web       13m          34Mi\n"
        );
        let all = TopOptions {
            namespace_column: true,
            ..TopOptions::default()
        };
        let text = render_pods(&s, &all).unwrap();
        assert_eq!(
            text.lines().next(),
            Some("NAMESPACE   NAME      CPU(cores)   MEMORY(bytes)")
        );
        assert!(
            text.lines().nth(1).unwrap().starts_with("default     db"),
            "{text}"
        );
        let sorted = render_pods(
            &s,
            &TopOptions {
                sort_by: Some(SortBy::Memory),
                containers: true,
                psi: true,
                namespace_column: false,
            },
        )
        .unwrap();
        let lines: Vec<&str> = sorted.lines().collect();
        assert!(lines[0].starts_with("POD       NAME      CPU(cores)   MEMORY(bytes)   CPU-PSI"));
        assert!(lines[1].starts_with("db        m         250m         100Mi           1.50%"));
        assert!(lines[3].contains("<none>"), "{sorted}");
    }

    #[test]
    fn no_rate_yet_is_metrics_not_available() {
        let s = summary(vec![pod("new", vec![container("x", None, MI)])]);
        assert_eq!(
            render_pods(&s, &TopOptions::default()),
            Err(TopError::NotAvailable)
        );
        let mut s = summary(vec![]);
        s.node.cpu = cpu(None, None);
        assert_eq!(render_node(&s, 2, false), Err(TopError::NotAvailable));
    }

    #[test]
    fn node_percentages() {
        let s = summary(vec![]);
        assert_eq!(
            render_node(&s, 2, false).unwrap(),
            "NAME      CPU(cores)   CPU(%)    MEMORY(bytes)   MEMORY(%)\n\
             node1     500m         25%       3072Mi          75%\n"
        );
        assert!(render_node(&s, 2, true).unwrap().contains("<none>"));
    }

    #[test]
    fn sort_by_is_cpu_or_memory() {
        assert_eq!("cpu".parse::<SortBy>(), Ok(SortBy::Cpu));
        assert!(matches!("x".parse::<SortBy>(), Err(TopError::BadSort(_))));
    }
}
