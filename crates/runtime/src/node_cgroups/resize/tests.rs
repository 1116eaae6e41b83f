//! Resize steps as cgroup writes on a v2 host and a v1/hybrid host.

use std::sync::Arc;

use super::*;
use crate::cgroup_root::CgroupMode;
use crate::sys::recording::{Call, RecordingKernel};

const OWN: &str = "/podhost.service";

fn cg(rel: &str) -> std::path::PathBuf {
    Path::new(MOUNT).join(rel.trim_start_matches('/'))
}

fn v2_node() -> (Arc<RecordingKernel>, NodeCgroups) {
    let k = Arc::new(RecordingKernel::new());
    k.add_file("/proc/self/cgroup", &format!("0::{OWN}\n"));
    k.add_file(
        cg(OWN).join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids",
    );
    k.add_file(cg(OWN).join("cgroup.procs"), "");
    let node = NodeCgroups::setup_with(k.clone(), CgroupMode::Unified, None, None);
    assert!(node.is_full(), "{:?}", node.enforcement);
    (k, node)
}

fn v1_node(swap: bool) -> (Arc<RecordingKernel>, NodeCgroups) {
    let k = Arc::new(RecordingKernel::new());
    k.add_file("/proc/self/cgroup", "4:memory:/svc\n1:cpu:/svc\n0::/\n");
    for (ctrl, marker) in super::super::V1_REQUIRED {
        k.add_file(cg(&format!("/{ctrl}/{marker}")), "");
    }
    if swap {
        k.add_file(
            cg("/memory/svc/podhost/kubepods/memory.memsw.limit_in_bytes"),
            "",
        );
    }
    let node = NodeCgroups::setup_with(k.clone(), CgroupMode::Legacy, None, None);
    assert!(node.is_v1(), "{:?}", node.enforcement);
    (k, node)
}

fn writes(k: &RecordingKernel, from: usize) -> Vec<(std::path::PathBuf, String)> {
    k.effects()
        .into_iter()
        .skip(from)
        .filter_map(|c| match c {
            Call::WriteFile { path, contents } => Some((path, contents)),
            _ => None,
        })
        .collect()
}

fn file_names(k: &RecordingKernel, from: usize) -> Vec<String> {
    writes(k, from)
        .into_iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn v2_writes_the_container_and_pod_files() {
    let (k, node) = v2_node();
    let before = k.effects().len();
    let steps = [
        ResizeStep::PodMemory(Some(100 << 20)),
        ResizeStep::PodCpu {
            weight: 3,
            cpu_max: Some((7_100, 100_000)),
            requests_milli: 71,
        },
        ResizeStep::ContainerMemory {
            name: "c1".into(),
            limit: None,
        },
        ResizeStep::ContainerCpu {
            name: "c1".into(),
            shares: 1024,
            cpu_max: None,
        },
    ];
    for s in &steps {
        node.apply_resize_step(QosClass::Guaranteed, "u", s)
            .unwrap();
    }
    let pod = cg(&format!("{OWN}/kubepods/podu"));
    assert_eq!(
        writes(&k, before),
        [
            (pod.join("memory.max"), "104857600".to_string()),
            (pod.join("cpu.weight"), "3".to_string()),
            (pod.join("cpu.max"), "7100 100000".to_string()),
            (pod.join("c1/memory.max"), "max".to_string()),
            (pod.join("c1/cpu.weight"), "100".to_string()),
            (pod.join("c1/cpu.max"), "max 100000".to_string()),
        ]
    );
}

#[test]
fn a_memory_limit_below_usage_is_refused_before_any_write() {
    let (k, node) = v2_node();
    let pod = cg(&format!("{OWN}/kubepods/burstable/podu"));
    k.add_file(pod.join("c1/memory.current"), "52428800\n");
    let before = k.effects().len();
    let step = ResizeStep::ContainerMemory {
        name: "c1".into(),
        limit: Some(20 << 20),
    };
    let err = node
        .apply_resize_step(QosClass::Burstable, "u", &step)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "attempting to set container memory limit (20971520) below current usage (52428800)"
    );
    assert!(writes(&k, before).is_empty());
}

#[test]
fn v1_writes_the_memory_and_cpu_hierarchies_and_skips_pod_steps() {
    let (k, node) = v1_node(false);
    let before = k.effects().len();
    let rel = "svc/podhost/kubepods/besteffort/podu/c1";
    let steps = [
        ResizeStep::PodMemory(Some(1)),
        ResizeStep::ContainerMemory {
            name: "c1".into(),
            limit: Some(50 << 20),
        },
        ResizeStep::ContainerCpu {
            name: "c1".into(),
            shares: 25,
            cpu_max: Some((3_500, 100_000)),
        },
    ];
    for s in &steps {
        node.apply_resize_step(QosClass::BestEffort, "u", s)
            .unwrap();
    }
    assert_eq!(
        writes(&k, before),
        [
            (
                cg(&format!("memory/{rel}/memory.limit_in_bytes")),
                "52428800".to_string()
            ),
            (cg(&format!("cpu/{rel}/cpu.shares")), "25".to_string()),
            (
                cg(&format!("cpu/{rel}/cpu.cfs_period_us")),
                "100000".to_string()
            ),
            (
                cg(&format!("cpu/{rel}/cpu.cfs_quota_us")),
                "3500".to_string()
            ),
        ]
    );
}

#[test]
fn v1_with_swap_accounting_keeps_memsw_above_memory() {
    let (k, node) = v1_node(true);
    let rel = "memory/svc/podhost/kubepods/podu/c1";
    k.add_file(cg(&format!("{rel}/memory.limit_in_bytes")), "41943040\n");
    let before = k.effects().len();
    let grow = ResizeStep::ContainerMemory {
        name: "c1".into(),
        limit: Some(50 << 20),
    };
    node.apply_resize_step(QosClass::Guaranteed, "u", &grow)
        .unwrap();
    assert_eq!(
        file_names(&k, before),
        ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]
    );
    let before = k.effects().len();
    let shrink = ResizeStep::ContainerMemory {
        name: "c1".into(),
        limit: Some(30 << 20),
    };
    node.apply_resize_step(QosClass::Guaranteed, "u", &shrink)
        .unwrap();
    assert_eq!(
        file_names(&k, before),
        ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
    );
}
