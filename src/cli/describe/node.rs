//! `podhost describe node`: kubectl's `describe node` — name, roles, labels,
//! annotations (podhost's `podhost.io/pod-network` names the pod network in use),
//! taints, conditions, addresses, capacity, allocatable, system info, the pods with
//! their requests and limits, the totals, and the node's events.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::pod::{annotations, describe_events, key_values};
use super::rfc1123z;
use super::tabbed::Tabbed;
use crate::cli::age::age_of;
use crate::model::node::object::{binary_si, millis};
use crate::status::Event;

/// Renders the description of `node`, with the pods it runs and its events.
pub fn render_node(node: &Node, pods: &[Pod], events: &[Event], now: DateTime<Utc>) -> String {
    let mut w = Tabbed::default();
    let meta = &node.metadata;
    let spec = node.spec.clone().unwrap_or_default();
    let status = node.status.clone().unwrap_or_default();
    w.write(
        0,
        &format!("Name:\t{}\n", meta.name.as_deref().unwrap_or_default()),
    );
    let roles = roles(node);
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    w.write(0, &format!("Roles:\t{roles}\n"));
    key_values(&mut w, "Labels", meta.labels.as_ref());
    annotations(&mut w, meta.annotations.as_ref());
    if let Some(t) = &meta.creation_timestamp {
        w.write(0, &format!("CreationTimestamp:\t{}\n", rfc1123z(t)));
    }
    let taints = spec.taints.clone().unwrap_or_default();
    if taints.is_empty() {
        w.write(0, "Taints:\t<none>\n");
    }
    for (i, t) in taints.iter().enumerate() {
        let lead = if i == 0 { "Taints:" } else { "" };
        let value = t.value.as_deref().filter(|v| !v.is_empty());
        let text = match value {
            Some(v) => format!("{}={v}:{}", t.key, t.effect),
            None => format!("{}:{}", t.key, t.effect),
        };
        w.write(0, &format!("{lead}\t{text}\n"));
    }
    w.write(
        0,
        &format!("Unschedulable:\t{}\n", spec.unschedulable.unwrap_or(false)),
    );
    let conditions = status.conditions.clone().unwrap_or_default();
    if !conditions.is_empty() {
        w.write(
            0,
            "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n",
        );
        w.write(
            1,
            "----\t------\t-----------------\t------------------\t------\t-------\n",
        );
        for c in &conditions {
            let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
                t.map(rfc1123z).unwrap_or_default()
            };
            w.write(
                1,
                &format!(
                    "{} \t{} \t{} \t{} \t{} \t{}\n",
                    c.type_,
                    c.status,
                    time(c.last_heartbeat_time.as_ref()),
                    time(c.last_transition_time.as_ref()),
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default()
                ),
            );
        }
    }
    w.write(0, "Addresses:\n");
    for a in status.addresses.iter().flatten() {
        w.write(1, &format!("{}:\t{}\n", a.type_, a.address));
    }
    for (title, list) in [
        ("Capacity", &status.capacity),
        ("Allocatable", &status.allocatable),
    ] {
        let Some(list) = list.as_ref().filter(|l| !l.is_empty()) else {
            continue;
        };
        w.write(0, &format!("{title}:\n"));
        for (name, q) in list {
            w.write(0, &format!("  {name}:\t{}\n", q.0));
        }
    }
    let info = status.node_info.clone().unwrap_or_default();
    w.write(0, "System Info:\n");
    for (label, value) in [
        ("Machine ID", &info.machine_id),
        ("System UUID", &info.system_uuid),
        ("Boot ID", &info.boot_id),
        ("Kernel Version", &info.kernel_version),
        ("OS Image", &info.os_image),
        ("Operating System", &info.operating_system),
        ("Architecture", &info.architecture),
        ("Container Runtime Version", &info.container_runtime_version),
        ("Kubelet Version", &info.kubelet_version),
        ("Kube-Proxy Version", &info.kube_proxy_version),
    ] {
        w.write(0, &format!("  {label}:\t{value}\n"));
    }
    if let Some(cidr) = spec.pod_cidr.as_deref().filter(|c| !c.is_empty()) {
        w.write(0, &format!("PodCIDR:\t{cidr}\n"));
    }
    if let Some(cidrs) = spec.pod_cidrs.as_ref().filter(|c| !c.is_empty()) {
        w.write(0, &format!("PodCIDRs:\t{}\n", cidrs.join(",")));
    }
    let allocatable = status
        .allocatable
        .clone()
        .or(status.capacity.clone())
        .unwrap_or_default();
    let running: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .collect();
    describe_node_resources(&mut w, &running, &allocatable, now);
    describe_events(&mut w, events, now);
    w.finish()
}

/// `node-role.kubernetes.io/ROLE` labels and `kubernetes.io/role`, as kubectl finds them.
fn roles(node: &Node) -> Vec<String> {
    let mut roles: Vec<String> = node
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, v)| {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                (!role.is_empty()).then(|| role.to_string())
            } else if k == "kubernetes.io/role" && !v.is_empty() {
                Some(v.clone())
            } else {
                None
            }
        })
        .collect();
    roles.sort();
    roles.dedup();
    roles
}

/// A request and a limit of one resource (`None`: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Amounts {
    request: Option<i64>,
    limit: Option<i64>,
}

impl Amounts {
    fn combine(self, other: Amounts, f: fn(i64, i64) -> i64) -> Amounts {
        let join = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (None, None) => None,
            _ => Some(f(a.unwrap_or(0), b.unwrap_or(0))),
        };
        Amounts {
            request: join(self.request, other.request),
            limit: join(self.limit, other.limit),
        }
    }
}

/// A resource kubectl totals: its name, how its quantities parse and print.
struct Resource {
    name: String,
    parse: fn(&str) -> Option<i64>,
    print: fn(i64) -> String,
}

fn container_amounts(c: &Container, r: &Resource) -> Amounts {
    let get = |list: Option<&std::collections::BTreeMap<String, Quantity>>| {
        list.and_then(|l| l.get(&r.name))
            .and_then(|q| (r.parse)(&q.0))
    };
    let resources = c.resources.as_ref();
    let limit = get(resources.and_then(|x| x.limits.as_ref()));
    Amounts {
        // Unset requests default to the limits, as the API server defaults them.
        request: get(resources.and_then(|x| x.requests.as_ref())).or(limit),
        limit,
    }
}

/// A pod's request and limit as kubectl's `PodRequestsAndLimits` sums them: its
/// containers', or an init container's when larger (it runs alone).
fn pod_amounts(pod: &Pod, r: &Resource) -> Amounts {
    let Some(spec) = pod.spec.as_ref() else {
        return Amounts::default();
    };
    let sum = spec
        .containers
        .iter()
        .map(|c| container_amounts(c, r))
        .fold(Amounts::default(), |a, b| a.combine(b, |x, y| x + y));
    spec.init_containers
        .iter()
        .flatten()
        .map(|c| container_amounts(c, r))
        .fold(sum, |a, b| a.combine(b, i64::max))
}

/// `VALUE (P%)`, the percentage of `of` truncated as kubectl's `int64(fraction)`.
fn with_share(r: &Resource, value: Option<i64>, of: i64) -> String {
    let value = value.unwrap_or(0);
    // Truncated toward zero, as kubectl's int64 of the fraction.
    let share = if of == 0 {
        0
    } else {
        i128::from(value) * 100 / i128::from(of)
    };
    format!("{} ({share}%)", (r.print)(value))
}

fn describe_node_resources(
    w: &mut Tabbed,
    pods: &[&Pod],
    allocatable: &std::collections::BTreeMap<String, Quantity>,
    now: DateTime<Utc>,
) {
    let bytes = |name: &str| Resource {
        name: name.to_string(),
        parse: crate::model::quantity::bytes,
        print: binary_si,
    };
    let cpu = Resource {
        name: "cpu".into(),
        parse: crate::model::quantity::cpu_millis,
        print: millis,
    };
    let memory = bytes("memory");
    let of = |r: &Resource| {
        allocatable
            .get(&r.name)
            .and_then(|q| (r.parse)(&q.0))
            .unwrap_or(0)
    };
    w.write(
        0,
        &format!("Non-terminated Pods:\t({} in total)\n", pods.len()),
    );
    w.write(
        1,
        "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n",
    );
    w.write(
        1,
        "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n",
    );
    for pod in pods {
        let (c, m) = (pod_amounts(pod, &cpu), pod_amounts(pod, &memory));
        w.write(
            1,
            &format!(
                "{}\t{}\t\t{}\t{}\t{}\t{}\t{}\n",
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default(),
                with_share(&cpu, c.request, of(&cpu)),
                with_share(&cpu, c.limit, of(&cpu)),
                with_share(&memory, m.request, of(&memory)),
                with_share(&memory, m.limit, of(&memory)),
                age_of(pod.metadata.creation_timestamp.as_ref(), now)
            ),
        );
    }
    w.write(
        0,
        "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n",
    );
    w.write(1, "Resource\tRequests\tLimits\n");
    w.write(1, "--------\t--------\t------\n");
    let mut totalled = vec![cpu, memory, bytes("ephemeral-storage")];
    totalled.extend(
        allocatable
            .keys()
            .filter(|k| k.starts_with("hugepages-"))
            .map(|k| bytes(k)),
    );
    for r in &totalled {
        let total = pods
            .iter()
            .map(|p| pod_amounts(p, r))
            .fold(Amounts::default(), |a, b| a.combine(b, |x, y| x + y));
        w.write(
            1,
            &format!(
                "{}\t{}\t{}\n",
                r.name,
                with_share(r, total.request, of(r)),
                with_share(r, total.limit, of(r))
            ),
        );
    }
}
