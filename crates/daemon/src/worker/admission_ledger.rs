//! The node's pod admission (the kubelet's `predicateAdmitHandler`): the pods this
//! node has admitted with their requests, and the node they are admitted against. A
//! pod from the API server is admitted only if its requests fit what the active pods
//! leave of the node's allocatable (and the pod count `--max-pods`), its nodeSelector
//! and required node affinity match the node's labels, and it tolerates the node's
//! `NoExecute` taints; otherwise it fails with the kubelet's reason (`OutOfcpu`,
//! `NodeAffinity`, `TaintToleration`, …) and never starts.
//!
//! Static pods (manifest directory or URL) are counted but never rejected for these:
//! the kubelet treats them as critical pods and, where one does not fit, evicts other
//! pods to make room for it (`HandleAdmissionFailure`). podhost does not preempt, so it
//! runs the static pod regardless: the node may then be overcommitted, and pods from
//! the API server are refused until enough of it is free again. Only the OS checks,
//! which no eviction can help, apply to static pods as well.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use k8s_openapi::api::core::v1::Pod;

use super::host_ports::HostPortRegistry;
use super::security::Rejection;
use podhost_model::admission::{
    NodeView, Resources, Unfit, Usage, general_predicates, is_static, os_mismatch, pod_requests,
};

/// The admitted pods' requests by uid, and the node they were admitted against.
#[derive(Debug, Clone)]
pub struct AdmissionLedger {
    node: Arc<RwLock<Arc<NodeView>>>,
    admitted: Arc<Mutex<BTreeMap<String, Resources>>>,
}

impl AdmissionLedger {
    /// A ledger for `node`, with no pod admitted yet.
    pub fn new(node: NodeView) -> Self {
        Self {
            node: Arc::new(RwLock::new(Arc::new(node))),
            admitted: Arc::default(),
        }
    }

    /// The node pods are admitted against.
    pub fn node(&self) -> Arc<NodeView> {
        self.node.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Admits later pods against `node` (its labels, taints or allocatable changed);
    /// pods already admitted stay.
    pub fn set_node(&self, node: NodeView) {
        *self.node.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(node);
    }

    /// Admits pod `uid` unless it fails one of the node's checks, and then holds its
    /// requests until [`Self::release`]. `inactive` are the uids of admitted pods that
    /// no longer count: those in a terminal phase and not being deleted (the kubelet's
    /// `filterOutInactivePods`; a deleted pod's containers may still run until its
    /// worker ends). With `already_admitted` (a pod a previous daemon admitted, adopted
    /// now) the pod is counted without a check: a running pod is never refused because
    /// others happened to be re-admitted first.
    ///
    /// On failure nothing is held and the first failure is returned, as the kubelet
    /// reports only that one.
    pub fn admit(
        &self,
        uid: &str,
        pod: &Pod,
        already_admitted: bool,
        inactive: &BTreeSet<String>,
    ) -> Result<(), Unfit> {
        let request = pod_requests(pod);
        let mut admitted = self.lock();
        if !already_admitted {
            if let Some(unfit) = os_mismatch(pod) {
                return Err(unfit);
            }
            if !is_static(pod) {
                let used = usage(&admitted, uid, inactive);
                let node = self.node();
                if let Some(first) = general_predicates(pod, &request, &node, &used)
                    .into_iter()
                    .next()
                {
                    return Err(first);
                }
            }
        }
        admitted.insert(uid.to_string(), request);
        Ok(())
    }

    /// [`Self::admit`] and the host ports' reservation in `ports`, in the kubelet's
    /// order (it reports the first failure): resources, node affinity and node name,
    /// then host ports, then `NoExecute` taints. On success both ledgers hold the pod;
    /// on failure neither does.
    pub fn admit_with_host_ports(
        &self,
        ports: &HostPortRegistry,
        uid: &str,
        name: &str,
        pod: &Pod,
        already_admitted: bool,
        inactive: &BTreeSet<String>,
    ) -> Result<(), Rejection> {
        let general = self.admit(uid, pod, already_admitted, inactive);
        if let Err(unfit) = &general
            && !unfit.comes_after_host_ports()
        {
            return Err(rejection(unfit));
        }
        let published = podhost_model::host_ports::host_ports(pod);
        if let Err(taken) = ports.reserve(uid, name, &published, already_admitted) {
            self.release(uid);
            return Err(taken);
        }
        general.map_err(|unfit| {
            ports.release(uid);
            rejection(&unfit)
        })
    }

    /// An in-place resize of admitted pod `uid` to `resized` (its object with the new
    /// resources): if its new requests fit beside the other active pods, the ledger holds
    /// them from now on; otherwise the first shortage, for the resize's `Deferred`
    /// condition (the kubelet retries it as pods leave).
    pub fn resize(
        &self,
        uid: &str,
        resized: &Pod,
        inactive: &BTreeSet<String>,
    ) -> Result<(), Unfit> {
        let request = pod_requests(resized);
        let mut admitted = self.lock();
        let used = usage(&admitted, uid, inactive);
        let node = self.node();
        let fitted = podhost_model::admission::fit::without_missing_extended(&request, &node);
        let short = podhost_model::admission::fit::insufficient_resources(&fitted, &node, &used);
        if let Some(first) = short.into_iter().next() {
            return Err(first);
        }
        admitted.insert(uid.to_string(), request);
        Ok(())
    }

    /// Frees the pod's requests (its worker has ended, or it was rejected after being
    /// admitted here, by a later check).
    pub fn release(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// What the active admitted pods hold.
    pub fn usage(&self, inactive: &BTreeSet<String>) -> Usage {
        usage(&self.lock(), "", inactive)
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Resources>> {
        // Every change is one insert or remove: a panic cannot leave it half-updated.
        self.admitted.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pod's rejection for `unfit`: the kubelet's reason and message.
fn rejection(unfit: &Unfit) -> Rejection {
    Rejection {
        reason: unfit.reason(),
        message: unfit.to_string(),
    }
}

/// The active admitted pods but `except` (a pod re-admitted is not counted twice).
fn usage(
    admitted: &BTreeMap<String, Resources>,
    except: &str,
    inactive: &BTreeSet<String>,
) -> Usage {
    let mut used = Usage::default();
    for (uid, request) in admitted {
        if uid != except && !inactive.contains(uid) {
            used.add_pod(request);
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use podhost_model::node::parse_taints;

    fn node() -> NodeView {
        NodeView {
            name: "box".into(),
            labels: [("disk".to_string(), "ssd".to_string())].into(),
            taints: parse_taints("maintenance:NoExecute").unwrap(),
            allocatable: Resources {
                cpu_millis: 1000,
                memory_bytes: 1 << 30,
                ephemeral_storage_bytes: 10 << 30,
                ..Resources::default()
            },
            max_pods: 3,
        }
    }

    /// A pod asking `cpu`, from `source` (`api`, `file`), with extra spec lines.
    fn pod(source: &str, cpu: &str, extra: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{annotations: {{kubernetes.io/config.source: {source}}}}}\n\
             spec:\n  tolerations: [{{key: maintenance, operator: Exists}}]\n{extra}  \
             containers:\n  - name: a\n    resources: {{requests: {{cpu: {cpu}}}}}\n"
        ))
        .unwrap()
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    #[test]
    fn api_pods_are_admitted_until_cpu_runs_out_then_again_once_one_is_released() {
        let ledger = AdmissionLedger::new(node());
        ledger
            .admit("a", &pod("api", "600m", ""), false, &none())
            .unwrap();
        let err = ledger
            .admit("b", &pod("api", "500m", ""), false, &none())
            .unwrap_err();
        assert_eq!(err.reason(), "OutOfcpu");
        assert_eq!(
            err.to_string(),
            "Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
        );
        // A rejected pod holds nothing.
        assert_eq!(ledger.usage(&none()).pods, 1);
        ledger
            .admit("c", &pod("api", "400m", ""), false, &none())
            .unwrap();
        ledger.release("a");
        ledger
            .admit("b", &pod("api", "500m", ""), false, &none())
            .unwrap();
        assert_eq!(ledger.usage(&none()).requested.cpu_millis, 900);
    }

    #[test]
    fn a_resize_that_does_not_fit_beside_the_others_is_deferred_and_holds_nothing_new() {
        let ledger = AdmissionLedger::new(node());
        for (uid, cpu) in [("a", "300m"), ("b", "500m")] {
            ledger
                .admit(uid, &pod("api", cpu, ""), false, &none())
                .unwrap();
        }
        let short = ledger
            .resize("a", &pod("api", "600m", ""), &none())
            .unwrap_err();
        assert_eq!(
            short.to_string(),
            "Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000"
        );
        assert_eq!(ledger.usage(&none()).requested.cpu_millis, 800);
        // It fits once b is gone, and is then held at its new size.
        ledger.release("b");
        ledger
            .resize("a", &pod("api", "600m", ""), &none())
            .unwrap();
        assert_eq!(ledger.usage(&none()).requested.cpu_millis, 600);
    }

    #[test]
    fn terminal_pods_do_not_count() {
        let ledger = AdmissionLedger::new(node());
        ledger
            .admit("done", &pod("api", "900m", ""), false, &none())
            .unwrap();
        assert!(
            ledger
                .admit("b", &pod("api", "500m", ""), false, &none())
                .is_err()
        );
        let inactive = BTreeSet::from(["done".to_string()]);
        ledger
            .admit("b", &pod("api", "500m", ""), false, &inactive)
            .unwrap();
    }

    #[test]
    fn the_pod_count_is_max_pods() {
        let ledger = AdmissionLedger::new(node());
        for uid in ["a", "b", "c"] {
            ledger
                .admit(uid, &pod("api", "0", ""), false, &none())
                .unwrap();
        }
        let err = ledger
            .admit("d", &pod("api", "0", ""), false, &none())
            .unwrap_err();
        assert_eq!(err.reason(), "OutOfpods");
        // Re-admitting one of them (a restart of its worker) does not count it twice.
        ledger
            .admit("c", &pod("api", "0", ""), false, &none())
            .unwrap();
    }

    #[test]
    fn static_pods_count_but_are_never_rejected_for_the_nodes_checks() {
        let ledger = AdmissionLedger::new(node());
        let untolerating_hungry: Pod = serde_yaml_ng::from_str(
            "metadata: {annotations: {kubernetes.io/config.source: file}}\n\
             spec:\n  nodeSelector: {disk: hdd}\n  containers:\n  - name: a\n    \
             resources: {requests: {cpu: \"2\"}}\n",
        )
        .unwrap();
        ledger
            .admit("static", &untolerating_hungry, false, &none())
            .unwrap();
        assert_eq!(ledger.usage(&none()).requested.cpu_millis, 2000);
        // The overcommitted node refuses API pods that ask for cpu…
        let err = ledger
            .admit("api", &pod("api", "100m", ""), false, &none())
            .unwrap_err();
        assert_eq!(err.reason(), "OutOfcpu");
        // …but the OS checks apply to static pods too.
        let windows: Pod = serde_yaml_ng::from_str(
            "metadata: {annotations: {kubernetes.io/config.source: file}}\n\
             spec: {os: {name: windows}, containers: []}\n",
        )
        .unwrap();
        assert_eq!(
            ledger
                .admit("w", &windows, false, &none())
                .unwrap_err()
                .reason(),
            "PodOSNotSupported"
        );
    }

    #[test]
    fn affinity_and_taints_reject_api_pods() {
        let ledger = AdmissionLedger::new(node());
        let err = ledger
            .admit(
                "a",
                &pod("api", "0", "  nodeSelector: {disk: hdd}\n"),
                false,
                &none(),
            )
            .unwrap_err();
        assert_eq!(
            (err.reason().as_ref(), err.to_string().as_str()),
            (
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
            )
        );
        let untolerating: Pod = serde_yaml_ng::from_str(
            "metadata: {annotations: {kubernetes.io/config.source: api}}\nspec: {containers: []}\n",
        )
        .unwrap();
        let err = ledger
            .admit("b", &untolerating, false, &none())
            .unwrap_err();
        assert_eq!(err.reason(), "TaintToleration");
        assert_eq!(ledger.usage(&none()).pods, 0);
    }

    #[test]
    fn an_adopted_pod_is_counted_without_a_check() {
        let ledger = AdmissionLedger::new(node());
        ledger
            .admit("new", &pod("api", "800m", ""), false, &none())
            .unwrap();
        ledger
            .admit("old", &pod("api", "800m", ""), true, &none())
            .unwrap();
        assert_eq!(ledger.usage(&none()).requested.cpu_millis, 1600);
        assert!(
            ledger
                .admit("third", &pod("api", "1m", ""), false, &none())
                .is_err()
        );
    }

    /// An API pod asking `cpu` and publishing host port 8080 (TCP).
    fn publishing(cpu: &str, tolerating: bool) -> Pod {
        let tolerations = if tolerating {
            "  tolerations: [{key: maintenance, operator: Exists}]\n"
        } else {
            ""
        };
        serde_yaml_ng::from_str(&format!(
            "metadata: {{annotations: {{kubernetes.io/config.source: api}}}}\n\
             spec:\n{tolerations}  containers:\n  - name: a\n    \
             resources: {{requests: {{cpu: {cpu}}}}}\n    \
             ports: [{{containerPort: 80, hostPort: 8080}}]\n"
        ))
        .unwrap()
    }

    #[test]
    fn host_ports_come_after_resources_and_before_taints() {
        let (ledger, ports) = (AdmissionLedger::new(node()), HostPortRegistry::default());
        let admit = |uid: &str, pod: &Pod| {
            ledger.admit_with_host_ports(&ports, uid, uid, pod, false, &none())
        };
        admit("web", &publishing("600m", true)).unwrap();
        // Short of cpu and of the port: the resources are reported.
        let err = admit("hungry", &publishing("500m", true)).unwrap_err();
        assert_eq!(err.reason, "OutOfcpu");
        // Untolerated taint and a taken port: the port is reported…
        let err = admit("intolerant", &publishing("0", false)).unwrap_err();
        assert_eq!(err.reason, "NodePorts");
        // …and neither ledger holds a rejected pod.
        assert_eq!(ledger.usage(&none()).pods, 1);
        ports.release("web");
        ledger.release("web");
        let err = admit("intolerant", &publishing("0", false)).unwrap_err();
        assert_eq!(err.reason, "TaintToleration");
        assert_eq!(
            err.message,
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
        );
        // The taint's rejection released the port it had reserved on the way.
        admit("web2", &publishing("100m", true)).unwrap();
        assert_eq!(ledger.usage(&none()).pods, 1);
    }

    #[test]
    fn a_taken_port_releases_the_resources_admitted_before_it() {
        let (ledger, ports) = (AdmissionLedger::new(node()), HostPortRegistry::default());
        let admit = |uid: &str, pod: &Pod| {
            ledger.admit_with_host_ports(&ports, uid, uid, pod, false, &none())
        };
        admit("web", &publishing("100m", true)).unwrap();
        assert_eq!(
            admit("second", &publishing("100m", true))
                .unwrap_err()
                .reason,
            "NodePorts"
        );
        assert_eq!(ledger.usage(&none()).requested.cpu_millis, 100);
    }

    #[test]
    fn a_changed_node_applies_to_later_admissions() {
        let ledger = AdmissionLedger::new(node());
        let selective = pod("api", "0", "  nodeSelector: {gpu: \"yes\"}\n");
        assert!(ledger.admit("a", &selective, false, &none()).is_err());
        let mut labelled = node();
        labelled.labels.insert("gpu".into(), "yes".into());
        ledger.set_node(labelled);
        ledger.admit("a", &selective, false, &none()).unwrap();
        assert_eq!(ledger.node().labels["gpu"], "yes");
    }
}
