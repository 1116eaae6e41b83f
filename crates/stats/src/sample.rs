//! One pass over the node: every pod with a cgroup and its running containers, read into
//! the Summary and the cadvisor series. Blocking (files, du, a netns thread): it runs on
//! a blocking thread, never on the async workers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerStateRunning, ContainerStatus, PodStatus};

use super::cgroup::{CgroupReader, CgroupSample};
use super::cpu_readings::CpuReadings;
use super::fs::{TreeUsage, filesystem, tree_usage, usage_stats};
use super::{netns, node};
use podhost_disk::Layout;
use podhost_model::k8s_time::from_k8s;
use podhost_model::qos::{pod_resources, qos_class};
use podhost_model::stats::cadvisor::CgroupSeries;
use podhost_model::stats::summary::{
    ContainerStats, CpuStats, FsStats, IoStats, MemoryStats, NodeStats, PodReference, PodStats,
    ProcessStats, RuntimeStats, Summary, VolumeStats,
};
use podhost_runtime::node_cgroups::NodeCgroups;
use podhost_status::StatusStore;
use podhost_volume::plan::EMPTY_DIR_KIND;

/// One sample of the node: the Summary and the same numbers as cadvisor series.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub summary: Summary,
    pub series: Vec<CgroupSeries>,
    pub taken: Instant,
}

/// What sampling reads, and the previous CPU counters (for the rates).
#[derive(Debug)]
pub struct Sampler {
    pub node_name: String,
    pub layout: Layout,
    pub cgroups: Arc<NodeCgroups>,
    pub store: Arc<StatusStore>,
    pub reader: CgroupReader,
    /// When the collector started: the origin of the counters' timestamps.
    epoch: Instant,
    /// The CPU counters' earlier readings by cgroup path (`/` for the node), for rates.
    cpu_readings: Mutex<CpuReadings>,
    /// The cgroups the housekeeping reads, from the pods' records when they last changed.
    cpu_cgroups: Mutex<CpuCgroups>,
}

/// The cgroups whose CPU counters the housekeeping reads, built again only after a pod's
/// record changed: at rest a pass touches this list, not every pod's spec and status.
/// Memory left alone for tens of seconds can be slow to touch again (on the dev VM, a
/// second read of 250 cached manifests took 1.9 ms, the first after 45 s idle 20.8 ms,
/// all of it CPU, none disk), so the idle daemon's periodic work touches little.
#[derive(Debug)]
struct CpuCgroups {
    /// Whether a pod's record changed since the list was built.
    changes: podhost_status::PodChanges,
    /// `None` until built.
    paths: Option<Vec<String>>,
}

/// A running container as its status tells it.
struct RunningContainer {
    name: String,
    started: DateTime<Utc>,
    image: String,
    id: String,
    attempt: u32,
}

/// The statuses of the pod's running containers (init, regular and ephemeral).
fn running_statuses(
    status: &PodStatus,
) -> impl Iterator<Item = (&ContainerStatus, &ContainerStateRunning)> {
    status
        .init_container_statuses
        .iter()
        .chain(&status.container_statuses)
        .chain(&status.ephemeral_container_statuses)
        .flatten()
        .filter_map(|c| Some((c, c.state.as_ref()?.running.as_ref()?)))
}

fn running_containers(status: &PodStatus) -> Vec<RunningContainer> {
    running_statuses(status)
        .map(|(c, running)| RunningContainer {
            name: c.name.clone(),
            started: running
                .started_at
                .as_ref()
                .map(from_k8s)
                .unwrap_or_else(Utc::now),
            image: c.image.clone(),
            id: c
                .container_id
                .as_deref()
                .map(|id| id.rsplit("://").next().unwrap_or(id).to_string())
                .unwrap_or_default(),
            attempt: podhost_model::convert::non_negative_u32(c.restart_count),
        })
        .collect()
}

impl Sampler {
    pub fn new(
        node_name: String,
        layout: Layout,
        cgroups: Arc<NodeCgroups>,
        store: Arc<StatusStore>,
        reader: CgroupReader,
    ) -> Self {
        Self {
            node_name,
            layout,
            cgroups,
            reader,
            epoch: Instant::now(),
            cpu_readings: Mutex::new(CpuReadings::default()),
            cpu_cgroups: Mutex::new(CpuCgroups {
                changes: store.follow_changes(),
                paths: None,
            }),
            store,
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(0)
    }

    /// Reads only the CPU counters of the node, the pods and their running containers
    /// (the background housekeeping: the rates of a later full sample need them).
    pub fn sample_cpu(&self) {
        let mut cached = self.cpu_cgroups.lock().unwrap_or_else(|p| p.into_inner());
        if cached.changes.take() || cached.paths.is_none() {
            cached.paths = Some(self.cpu_cgroup_paths());
        }
        let mut readings = self.cpu_readings.lock().unwrap_or_else(|p| p.into_inner());
        let mut pass = readings.begin();
        if let Some(usage) = node::cpu_usage_ns() {
            pass.record("/", (usage, self.now_ns()));
        }
        for rel in cached.paths.iter().flatten() {
            if let Some(usage) = self.reader.cpu_usage_ns(rel) {
                pass.record(rel, (usage, self.now_ns()));
            }
        }
        readings.finish(pass);
    }

    /// The cgroups of every pod and of its running containers.
    fn cpu_cgroup_paths(&self) -> Vec<String> {
        let mut cgroups = Vec::new();
        self.store.visit(|rec| {
            let uid = rec.uid();
            let qos = qos_class(&pod_resources(&rec.admitted));
            cgroups.push(self.cgroups.pod_path(qos, uid));
            for (c, _) in running_statuses(&rec.status) {
                cgroups.push(self.cgroups.container_path(qos, uid, &c.name));
            }
        });
        cgroups
    }

    /// Reads everything once.
    pub fn sample(&self) -> Snapshot {
        let taken = Instant::now();
        let at_ns = u64::try_from(taken.duration_since(self.epoch).as_nanos()).unwrap_or(0);
        let now = Utc::now();
        let mut readings = self.cpu_readings.lock().unwrap_or_else(|p| p.into_inner());
        let mut pass = readings.begin();
        let mut cpu = |key: &str, usage: Option<u64>, psi| {
            let usage = usage?;
            Some(CpuStats {
                time: now,
                usage_nano_cores: pass.record(key, (usage, at_ns)),
                usage_core_nano_seconds: Some(usage),
                psi,
            })
        };

        let nodefs = filesystem(&self.layout.root_dir, now);
        let logfs = filesystem(&self.layout.log_dir, now);
        let node_stats = NodeStats {
            node_name: self.node_name.clone(),
            system_containers: vec![],
            start_time: node::boot_time().unwrap_or(now),
            cpu: cpu("/", node::cpu_usage_ns(), node::pressure("cpu")),
            memory: node::memory(now),
            network: node::network(now),
            fs: nodefs.clone(),
            runtime: Some(RuntimeStats {
                image_fs: self.image_fs(now),
            }),
            rlimit: Some(node::rlimit(now)),
            io: node::pressure("io").map(|p| IoStats {
                time: now,
                psi: Some(p),
            }),
        };

        let records = self.store.pods();
        let mut netns_paths = Vec::new();
        let mut pods = Vec::new();
        let mut series = Vec::new();
        let timestamp_ms = now.timestamp_millis();
        for rec in &records {
            let pod = &rec.admitted;
            let uid = rec.uid().to_string();
            let qos = qos_class(&pod_resources(pod));
            let pod_rel = self.cgroups.pod_path(qos, &uid);
            if !self.reader.exists(&pod_rel) {
                continue;
            }
            let namespace = pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let host_network = pod
                .spec
                .as_ref()
                .and_then(|s| s.host_network)
                .unwrap_or(false);
            let net = self.layout.pod_ns_dir(&uid).join("net");
            if !host_network && net.exists() {
                netns_paths.push((uid.clone(), net));
            }
            let pod_sample = self.reader.sample(&pod_rel);
            let mut containers = Vec::new();
            let mut ephemeral = TreeUsage::default();
            for c in running_containers(&rec.status) {
                let rel = self.cgroups.container_path(qos, &uid, &c.name);
                if !self.reader.exists(&rel) {
                    continue;
                }
                let s = self.reader.sample(&rel);
                let upper = self
                    .layout
                    .attempt_dir(&uid, &c.name, c.attempt)
                    .join("upper");
                let rootfs = tree_usage(&upper);
                let logs = self.container_log_dir(&namespace, rec.name(), &uid, &c.name);
                let logs = tree_usage(&logs);
                ephemeral = ephemeral + rootfs.unwrap_or_default() + logs.unwrap_or_default();
                series.push(with_numbers(
                    &s,
                    CgroupSeries {
                        id: rel.clone(),
                        pod: rec.name().to_string(),
                        namespace: namespace.clone(),
                        container: c.name.clone(),
                        image: c.image.clone(),
                        name: c.id.clone(),
                        timestamp_ms,
                        ..Default::default()
                    },
                ));
                containers.push(ContainerStats {
                    name: c.name.clone(),
                    start_time: c.started,
                    cpu: cpu(&rel, s.cpu_usage_ns, s.cpu_psi),
                    memory: Some(memory_stats(&s, now)),
                    rootfs: rootfs.map(|u| usage_stats(u, nodefs.as_ref(), now)),
                    logs: logs.map(|u| usage_stats(u, logfs.as_ref(), now)),
                    io: io_stats(&s, now),
                });
            }
            let volumes = self.empty_dirs(&uid, nodefs.as_ref(), now);
            for v in &volumes {
                ephemeral.bytes = ephemeral.bytes.saturating_add(v.fs.used_bytes.unwrap_or(0));
                ephemeral.inodes = ephemeral
                    .inodes
                    .saturating_add(v.fs.inodes_used.unwrap_or(0));
            }
            series.push(with_numbers(
                &pod_sample,
                CgroupSeries {
                    id: pod_rel.clone(),
                    pod: rec.name().to_string(),
                    namespace: namespace.clone(),
                    timestamp_ms,
                    ..Default::default()
                },
            ));
            pods.push(PodStats {
                pod_ref: PodReference {
                    name: rec.name().to_string(),
                    namespace,
                    uid,
                },
                start_time: pod
                    .status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .map(from_k8s)
                    .unwrap_or(now),
                containers,
                cpu: cpu(&pod_rel, pod_sample.cpu_usage_ns, pod_sample.cpu_psi),
                memory: Some(memory_stats(&pod_sample, now)),
                network: None,
                volumes,
                ephemeral_storage: Some(usage_stats(ephemeral, nodefs.as_ref(), now)),
                process_stats: Some(ProcessStats {
                    process_count: pod_sample.processes,
                }),
                io: io_stats(&pod_sample, now),
            });
        }
        let mut networks = netns::read_pods(netns_paths);
        for (pod, s) in pods
            .iter_mut()
            .zip(series.iter_mut().filter(|s| s.container.is_empty()))
        {
            if let Some(interfaces) = networks.remove(&pod.pod_ref.uid) {
                s.network = interfaces.clone();
                pod.network = node::network_stats(interfaces, now);
            }
        }
        readings.finish(pass);
        Snapshot {
            summary: Summary {
                node: node_stats,
                pods,
            },
            series,
            taken,
        }
    }

    fn container_log_dir(&self, ns: &str, pod: &str, uid: &str, container: &str) -> PathBuf {
        self.layout.pod_log_dir(ns, pod, uid).join(container)
    }

    /// The image store's filesystem, with the store's own usage (blobs and snapshots).
    fn image_fs(&self, now: DateTime<Utc>) -> Option<FsStats> {
        let images = self.layout.root_dir.join("images");
        let fs = filesystem(&images, now).or_else(|| filesystem(&self.layout.root_dir, now))?;
        let used = tree_usage(&images).unwrap_or_default()
            + tree_usage(&self.layout.root_dir.join("snapshots")).unwrap_or_default();
        Some(FsStats {
            used_bytes: Some(used.bytes),
            inodes_used: Some(used.inodes),
            ..fs
        })
    }

    /// The pod's disk emptyDirs (a memory emptyDir is a tmpfs: its own filesystem).
    fn empty_dirs(
        &self,
        uid: &str,
        nodefs: Option<&FsStats>,
        now: DateTime<Utc>,
    ) -> Vec<VolumeStats> {
        let dir = self.layout.pod_volumes_dir(uid).join(EMPTY_DIR_KIND);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return vec![];
        };
        let mut out: Vec<VolumeStats> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let usage = tree_usage(&e.path())?;
                Some(VolumeStats {
                    fs: usage_stats(usage, nodefs, now),
                    name,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

fn memory_stats(s: &CgroupSample, now: DateTime<Utc>) -> MemoryStats {
    MemoryStats {
        time: now,
        available_bytes: s
            .memory_limit
            .zip(s.memory_working_set)
            .map(|(limit, ws)| limit.saturating_sub(ws)),
        usage_bytes: s.memory_usage,
        working_set_bytes: s.memory_working_set,
        rss_bytes: s.memory_rss,
        page_faults: s.page_faults,
        major_page_faults: s.major_page_faults,
        psi: s.memory_psi,
    }
}

fn io_stats(s: &CgroupSample, now: DateTime<Utc>) -> Option<IoStats> {
    s.io_psi.map(|p| IoStats {
        time: now,
        psi: Some(p),
    })
}

/// `labels` (identity) with the numbers of `s`.
fn with_numbers(s: &CgroupSample, labels: CgroupSeries) -> CgroupSeries {
    CgroupSeries {
        cpu_usage_seconds: s.cpu_usage_ns.map(|ns| ns as f64 / 1e9),
        memory_usage_bytes: s.memory_usage,
        memory_working_set_bytes: s.memory_working_set,
        memory_rss: s.memory_rss,
        io: s.io,
        cpu_psi: s.cpu_psi,
        memory_psi: s.memory_psi,
        io_psi: s.io_psi,
        ..labels
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStatus};

    use super::*;
    use crate::CgroupLayout;
    use podhost_runtime::cgroup_root::CgroupMode;
    use podhost_runtime::sys::LinuxKernel;

    fn pod(uid: &str) -> Arc<k8s_openapi::api::core::v1::Pod> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("p-{uid}"), "namespace": "default", "uid": uid},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}
            }))
            .unwrap(),
        )
    }

    fn running(store: &StatusStore, uid: &str) {
        store.update_status(uid, |s| {
            s.container_statuses = Some(vec![ContainerStatus {
                name: "main".into(),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }]);
        });
    }

    fn cached(sampler: &Sampler) -> Vec<String> {
        let cached = sampler.cpu_cgroups.lock().unwrap();
        cached.paths.clone().unwrap_or_default()
    }

    #[test]
    fn the_housekeepings_cgroups_follow_the_pods_changes() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path().join("root"), dir.path().join("logs"));
        let store = Arc::new(StatusStore::load(layout.clone(), "node"));
        // Legacy mode sets nothing up on the host: only the paths are used.
        let cgroups = Arc::new(NodeCgroups::setup_with(
            Arc::new(LinuxKernel),
            CgroupMode::Legacy,
            Some("podhost-sample-test".into()),
            None,
        ));
        let sampler = Sampler::new(
            "node".into(),
            layout,
            cgroups.clone(),
            store.clone(),
            CgroupReader::new(CgroupLayout::detect()),
        );
        let best_effort = podhost_model::qos::QosClass::BestEffort;
        let a = cgroups.pod_path(best_effort, "a");
        let a_main = cgroups.container_path(best_effort, "a", "main");
        let b = cgroups.pod_path(best_effort, "b");

        store.admit(&pod("a"));
        sampler.sample_cpu();
        assert_eq!(cached(&sampler), vec![a.clone()]);

        running(&store, "a");
        store.admit(&pod("b"));
        sampler.sample_cpu();
        assert_eq!(cached(&sampler), vec![a.clone(), a_main.clone(), b.clone()]);

        // Unchanged pods: the list is kept as it is.
        sampler.sample_cpu();
        assert_eq!(cached(&sampler), vec![a.clone(), a_main, b]);

        store.remove("b");
        store.update_status("a", |s| s.container_statuses = None);
        sampler.sample_cpu();
        assert_eq!(cached(&sampler), vec![a]);
    }
}
