//! The resize decisions: unchanged, infeasible, restart, and the order of cgroup writes.

use super::*;

fn alloc(
    cpu: Option<&str>,
    cpu_lim: Option<&str>,
    mem: Option<&str>,
    mem_lim: Option<&str>,
) -> Allocation {
    let map = |pairs: [(&str, Option<&str>); 2]| {
        pairs
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v.to_string())))
            .collect()
    };
    Allocation {
        requests: map([("cpu", cpu), ("memory", mem)]),
        limits: map([("cpu", cpu_lim), ("memory", mem_lim)]),
    }
}

/// Guaranteed: requests = limits.
fn g(cpu: &str, mem: &str) -> Allocation {
    alloc(Some(cpu), Some(cpu), Some(mem), Some(mem))
}

fn wanted(name: &str, allocation: Allocation) -> Wanted {
    Wanted {
        name: name.into(),
        allocation,
        restart_on: RestartOn::default(),
    }
}

fn apply(d: ResizeDecision) -> (Vec<ResizeStep>, Vec<String>) {
    match d {
        ResizeDecision::Apply { steps, restart } => (steps, restart),
        other => panic!("not applied: {other:?}"),
    }
}

const MI: i64 = 1 << 20;

fn mem(name: &str, mi: i64) -> ResizeStep {
    ResizeStep::ContainerMemory {
        name: name.into(),
        limit: Some(mi * MI),
    }
}

#[test]
fn the_same_resources_written_otherwise_are_no_resize() {
    let allocated = vec![("c1".to_string(), g("100m", "64Mi"))];
    let same = [wanted("c1", g("100m", "64Mi"))];
    assert_eq!(
        decide_resize(QosClass::Guaranteed, &allocated, &same, None),
        ResizeDecision::Unchanged
    );
}

#[test]
fn a_net_increase_grows_the_pod_first_and_shrinks_containers_before_growing_others() {
    let allocated = vec![
        ("c1".to_string(), g("20m", "35Mi")),
        ("c2".to_string(), g("22m", "37Mi")),
        ("c3".to_string(), g("24m", "39Mi")),
    ];
    let want = [
        wanted("c1", g("25m", "40Mi")),
        wanted("c2", g("27m", "42Mi")),
        wanted("c3", g("19m", "34Mi")),
    ];
    let (steps, restart) = apply(decide_resize(QosClass::Guaranteed, &allocated, &want, None));
    assert!(restart.is_empty());
    let memory: Vec<&ResizeStep> = steps
        .iter()
        .filter(|s| {
            matches!(
                s,
                ResizeStep::PodMemory(_) | ResizeStep::ContainerMemory { .. }
            )
        })
        .collect();
    assert_eq!(
        memory,
        [
            &ResizeStep::PodMemory(Some(116 * MI)),
            &mem("c3", 34),
            &mem("c1", 40),
            &mem("c2", 42),
        ]
    );
    // Memory first, then CPU; the pod's CPU grows before its containers.
    let first_cpu = steps
        .iter()
        .position(|s| {
            matches!(
                s,
                ResizeStep::PodCpu { .. } | ResizeStep::ContainerCpu { .. }
            )
        })
        .unwrap();
    assert_eq!(first_cpu, 4);
    assert!(matches!(
        steps[4],
        ResizeStep::PodCpu {
            cpu_max: Some((7_100, 100_000)),
            requests_milli: 71,
            ..
        }
    ));
    assert_eq!(
        steps[5],
        ResizeStep::ContainerCpu {
            name: "c3".into(),
            shares: 19,
            cpu_max: Some((1_900, 100_000))
        }
    );
}

#[test]
fn a_net_decrease_shrinks_the_pod_last() {
    let allocated = vec![
        ("c1".to_string(), g("20m", "35Mi")),
        ("c2".to_string(), g("22m", "37Mi")),
    ];
    let want = [
        wanted("c1", g("25m", "40Mi")),
        wanted("c2", g("12m", "27Mi")),
    ];
    let (steps, _) = apply(decide_resize(QosClass::Guaranteed, &allocated, &want, None));
    assert_eq!(steps[0], mem("c2", 27));
    assert_eq!(steps[1], mem("c1", 40));
    assert_eq!(steps[2], ResizeStep::PodMemory(Some(67 * MI)));
    assert!(matches!(steps.last(), Some(ResizeStep::PodCpu { .. })));
}

#[test]
fn adding_a_limit_to_a_burstable_container_never_lifts_the_pod_limit_of_a_partly_limited_pod() {
    let allocated = vec![
        ("c1".to_string(), alloc(Some("20m"), None, None, None)),
        ("c2".to_string(), alloc(None, None, Some("35Mi"), None)),
    ];
    let want = [
        wanted("c1", alloc(Some("25m"), Some("35m"), None, None)),
        wanted("c2", alloc(None, None, Some("30Mi"), Some("50Mi"))),
    ];
    let (steps, _) = apply(decide_resize(QosClass::Burstable, &allocated, &want, None));
    // Not every container has a memory (or CPU) limit: the pod has none, before or after.
    assert!(!steps.iter().any(|s| matches!(s, ResizeStep::PodMemory(_))));
    assert!(steps.contains(&mem("c2", 50)));
    assert!(steps.contains(&ResizeStep::ContainerCpu {
        name: "c1".into(),
        shares: 25,
        cpu_max: Some((3_500, 100_000))
    }));
    // A memory request alone changes no cgroup of c2's CPU.
    assert!(
        !steps
            .iter()
            .any(|s| matches!(s, ResizeStep::ContainerCpu { name, .. } if name == "c2"))
    );
}

#[test]
fn a_resize_below_the_kernels_minimums_is_allocated_without_a_cgroup_write() {
    let allocated = vec![("c1".to_string(), alloc(Some("2m"), Some("10m"), None, None))];
    let want = [wanted("c1", alloc(Some("1m"), Some("5m"), None, None))];
    // Shares 2 and a 1 ms quota before and after: the status changes, no cgroup does.
    let (steps, restart) = apply(decide_resize(QosClass::Burstable, &allocated, &want, None));
    assert_eq!((steps, restart), (vec![], vec![]));
    let want = [wanted("c1", alloc(Some("1m"), Some("20m"), None, None))];
    let (steps, _) = apply(decide_resize(QosClass::Burstable, &allocated, &want, None));
    // Its only container is CPU-limited: the pod's quota grows first.
    assert_eq!(
        steps,
        [
            ResizeStep::PodCpu {
                weight: 1,
                cpu_max: Some((2_000, 100_000)),
                requests_milli: 1
            },
            ResizeStep::ContainerCpu {
                name: "c1".into(),
                shares: 2,
                cpu_max: Some((2_000, 100_000))
            }
        ]
    );
}

#[test]
fn a_restart_container_policy_restarts_instead_of_writing_the_containers_cgroup() {
    let allocated = vec![("c1".to_string(), g("100m", "64Mi"))];
    let mut w = wanted("c1", g("100m", "128Mi"));
    w.restart_on.memory = true;
    let (steps, restart) = apply(decide_resize(
        QosClass::Guaranteed,
        &allocated,
        &[w.clone()],
        None,
    ));
    assert_eq!(restart, ["c1"]);
    assert_eq!(steps, [ResizeStep::PodMemory(Some(128 * MI))]);
    // A CPU-only change of the same container is applied in place.
    let w = Wanted {
        allocation: g("200m", "64Mi"),
        ..w
    };
    let (steps, restart) = apply(decide_resize(QosClass::Guaranteed, &allocated, &[w], None));
    assert!(restart.is_empty());
    assert!(
        steps
            .iter()
            .any(|s| matches!(s, ResizeStep::ContainerCpu { .. }))
    );
}

#[test]
fn requests_beyond_the_nodes_room_are_infeasible_and_named() {
    let allocated = vec![("c1".to_string(), g("100m", "64Mi"))];
    let room = NodeRoom {
        cpu_milli: 2_000,
        memory: 1 << 30,
    };
    let cases = [
        (g("3", "64Mi"), "cpu, requested: 3000, capacity: 2000"),
        (
            g("100m", "2Gi"),
            "memory, requested: 2147483648, capacity: 1073741824",
        ),
    ];
    for (allocation, named) in cases {
        let d = decide_resize(
            QosClass::Guaranteed,
            &allocated,
            &[wanted("c1", allocation)],
            Some(room),
        );
        let ResizeDecision::Infeasible(message) = d else {
            panic!("{d:?}");
        };
        assert!(
            message.starts_with("Node didn't have enough capacity: "),
            "{message}"
        );
        assert!(message.contains(named), "{message}");
    }
}

#[test]
fn the_allocation_reads_the_spec_and_shows_the_status_fields() {
    let c: Container = serde_json::from_value(serde_json::json!({
        "name": "c1",
        "resources": {"requests": {"cpu": "20m"}, "limits": {"memory": "50Mi"}},
        "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    }))
    .unwrap();
    let a = Allocation::of(&c);
    assert_eq!(a, alloc(Some("20m"), None, None, Some("50Mi")));
    assert_eq!(
        RestartOn::of(&c),
        RestartOn {
            cpu: false,
            memory: true
        }
    );
    let r = a.requirements();
    assert_eq!(r.requests.unwrap()["cpu"].0, "20m");
    assert_eq!(r.limits.unwrap()["memory"].0, "50Mi");
    assert_eq!(a.allocated_requests().unwrap().len(), 1);
    assert_eq!(Allocation::default().allocated_requests(), None);
    // Recorded on disk and read back.
    let json = serde_json::to_string(&a).unwrap();
    assert_eq!(serde_json::from_str::<Allocation>(&json).unwrap(), a);
}
