//! What a pod asks of its node: the scheduler framework's `Resource` (cpu in
//! millicores; memory, ephemeral-storage and the scalar resources in whole units) and
//! the pod's total as `component-helpers/resource`'s `PodRequests` computes it for the
//! kubelet's admission (`pkg/scheduler/framework/plugins/noderesources/fit.go`,
//! `computePodResourceRequest`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::Quantity;

/// An amount of each resource the node's admission counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
    /// Extended (`example.com/gpu`), hugepages, `*kubernetes.io/*` and attachable-volume
    /// resources, by name, in whole units.
    pub scalar: BTreeMap<String, i64>,
}

/// A resource list as the API spells it (`requests`, `limits`, `overhead`,
/// `allocatable`).
pub type ResourceList = BTreeMap<String, ApiQuantity>;

impl Resources {
    /// The counted resources of `list`, as the scheduler's `Resource.Add` reads a
    /// list: cpu in millicores, the others in whole units rounded up; `pods` and names
    /// that are no scalar resource are left out, as are quantities that do not parse
    /// (the API server has validated them).
    pub fn from_list(list: &ResourceList) -> Self {
        let mut out = Self::default();
        for (name, quantity) in list {
            let Ok(q) = Quantity::parse(&quantity.0) else {
                continue;
            };
            let amount = if name == "cpu" {
                q.milli_value()
            } else {
                q.value()
            };
            let Ok(amount) = amount else { continue };
            out.set(name, amount, |old, new| old.saturating_add(new));
        }
        out
    }

    /// Adds `other` to this.
    pub fn add(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_add);
    }

    /// Raises each resource to at least `other`'s amount.
    pub fn raise_to(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }

    /// Whether nothing at all is asked for (the fit check then counts the pod only).
    pub fn is_empty(&self) -> bool {
        self.cpu_millis == 0
            && self.memory_bytes == 0
            && self.ephemeral_storage_bytes == 0
            && self.scalar.is_empty()
    }

    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64 + Copy) {
        self.cpu_millis = f(self.cpu_millis, other.cpu_millis);
        self.memory_bytes = f(self.memory_bytes, other.memory_bytes);
        self.ephemeral_storage_bytes =
            f(self.ephemeral_storage_bytes, other.ephemeral_storage_bytes);
        for (name, amount) in &other.scalar {
            let entry = self.scalar.entry(name.clone()).or_insert(0);
            *entry = f(*entry, *amount);
        }
    }

    fn set(&mut self, name: &str, amount: i64, f: impl Fn(i64, i64) -> i64) {
        match name {
            "cpu" => self.cpu_millis = f(self.cpu_millis, amount),
            "memory" => self.memory_bytes = f(self.memory_bytes, amount),
            "ephemeral-storage" => {
                self.ephemeral_storage_bytes = f(self.ephemeral_storage_bytes, amount);
            }
            _ if is_scalar_resource(name) => {
                let entry = self.scalar.entry(name.to_string()).or_insert(0);
                *entry = f(*entry, amount);
            }
            _ => {}
        }
    }
}

/// `IsNativeResource`: no domain, or in the `kubernetes.io` domain.
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || is_prefixed_native_resource(name)
}

/// `IsPrefixedNativeResource`: a name in the `kubernetes.io` domain.
fn is_prefixed_native_resource(name: &str) -> bool {
    name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: a domain-qualified name outside `kubernetes.io` and not
/// a quota's `requests.` form (the API server validated the name's syntax).
pub fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name) && !name.starts_with("requests.")
}

/// `IsScalarResourceName`: what the scheduler counts beside cpu, memory and storage.
fn is_scalar_resource(name: &str) -> bool {
    is_extended_resource(name)
        || name.starts_with("hugepages-")
        || is_prefixed_native_resource(name)
        || name.starts_with("attachable-volumes-")
}

/// A container's requests with an unset request taking its limit, as the API server's
/// defaulting does (static pods are defaulted the same way by the kubelet).
fn defaulted_requests(resources: Option<&ResourceRequirements>) -> ResourceList {
    let Some(r) = resources else {
        return ResourceList::new();
    };
    let mut requests = r.requests.clone().unwrap_or_default();
    for (name, limit) in r.limits.iter().flatten() {
        requests
            .entry(name.clone())
            .or_insert_with(|| limit.clone());
    }
    requests
}

fn container_requests(c: &Container) -> Resources {
    Resources::from_list(&defaulted_requests(c.resources.as_ref()))
}

/// The pod-level resources the kubelet honours (`IsSupportedPodLevelResource`).
const POD_LEVEL_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The pod's requests as the kubelet's admission counts them (`PodRequests`):
///
/// - the regular containers' requests summed, plus every restartable init (sidecar)
///   container's, which runs beside them;
/// - at least, for each regular init container, its own requests plus those of the
///   sidecars started before it (they run while it does);
/// - pod-level `resources.requests` of cpu and memory replace the containers' sum;
/// - plus `overhead` (the RuntimeClass's cost of the sandbox).
pub fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(&container_requests(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            total.add(&own);
            sidecars.add(&own);
            init_peak.raise_to(&sidecars);
        } else {
            let mut while_running = own;
            while_running.add(&sidecars);
            init_peak.raise_to(&while_running);
        }
    }
    total.raise_to(&init_peak);
    let pod_level: ResourceList = defaulted_requests(spec.resources.as_ref())
        .into_iter()
        .filter(|(name, _)| POD_LEVEL_RESOURCES.contains(&name.as_str()))
        .collect();
    let named = Resources::from_list(&pod_level);
    if pod_level.contains_key("cpu") {
        total.cpu_millis = named.cpu_millis;
    }
    if pod_level.contains_key("memory") {
        total.memory_bytes = named.memory_bytes;
    }
    if let Some(overhead) = &spec.overhead {
        total.add(&Resources::from_list(overhead));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn containers_are_summed_and_limits_default_requests() {
        let p = pod(r#"
spec:
  containers:
  - name: a
    resources: {requests: {cpu: 250m, memory: 64Mi, ephemeral-storage: 1Gi}}
  - name: b
    resources: {limits: {cpu: "1", memory: 128Mi, example.com/gpu: "2"}}
  - name: c
"#);
        let r = pod_requests(&p);
        assert_eq!(r.cpu_millis, 1250);
        assert_eq!(r.memory_bytes, 192 << 20);
        assert_eq!(r.ephemeral_storage_bytes, 1 << 30);
        assert_eq!(r.scalar["example.com/gpu"], 2);
    }

    #[test]
    fn an_init_container_counts_as_the_maximum_not_the_sum() {
        let p = pod(r#"
spec:
  initContainers:
  - name: big
    resources: {requests: {cpu: "2", memory: 16Mi}}
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 256Mi}}
"#);
        let r = pod_requests(&p);
        assert_eq!((r.cpu_millis, r.memory_bytes), (2000, 256 << 20));
    }

    #[test]
    fn sidecars_add_to_the_containers_and_to_the_init_containers_after_them() {
        // InitContainerUse(i) = sidecars before i + init i; total = max(containers +
        // all sidecars, every InitContainerUse).
        let p = pod(r#"
spec:
  initContainers:
  - name: first
    resources: {requests: {cpu: "1"}}
  - name: proxy
    restartPolicy: Always
    resources: {requests: {cpu: 300m}}
  - name: migrate
    resources: {requests: {cpu: 900m}}
  containers:
  - name: app
    resources: {requests: {cpu: 100m}}
"#);
        // containers + sidecars = 400m; first = 1000m; migrate + proxy = 1200m.
        assert_eq!(pod_requests(&p).cpu_millis, 1200);
    }

    #[test]
    fn pod_level_requests_replace_the_sum_and_overhead_is_added() {
        let p = pod(r#"
spec:
  resources: {requests: {cpu: "3"}, limits: {memory: 1Gi}}
  overhead: {cpu: 250m, memory: 120Mi}
  containers:
  - name: app
    resources: {requests: {cpu: 100m, memory: 64Mi, hugepages-2Mi: 4Mi}}
"#);
        let r = pod_requests(&p);
        assert_eq!(r.cpu_millis, 3250);
        assert_eq!(r.memory_bytes, (1 << 30) + (120 << 20));
        assert_eq!(r.scalar["hugepages-2Mi"], 4 << 20);
    }

    #[test]
    fn only_scalar_resource_names_are_counted() {
        let list: ResourceList = [
            ("pods", "3"),
            ("nvidia.com/gpu", "1"),
            ("hugepages-1Gi", "1Gi"),
            ("requests.example.com/x", "1"),
            ("example.kubernetes.io/thing", "2"),
            ("attachable-volumes-csi-x", "5"),
            ("bogus", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ApiQuantity(v.to_string())))
        .collect();
        let r = Resources::from_list(&list);
        let names: Vec<&str> = r.scalar.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "attachable-volumes-csi-x",
                "example.kubernetes.io/thing",
                "hugepages-1Gi",
                "nvidia.com/gpu"
            ]
        );
        assert!(is_extended_resource("nvidia.com/gpu"));
        assert!(!is_extended_resource("hugepages-2Mi"));
        assert!(!is_extended_resource("example.kubernetes.io/thing"));
    }
}
