//! The service environment variables a container starts with in cluster mode, as the
//! kubelet computes them (kubelet_pods.go `getServiceEnvVarMap`, envvars.go
//! `FromServices`): for a pod in namespace NS, the Services of NS when
//! `enableServiceLinks` is true (the default), and always the `kubernetes` Service of
//! the `default` namespace (the "master service" that gives `KUBERNETES_SERVICE_HOST`,
//! read by client-go's in-cluster config). Only Services with a cluster IP: headless
//! (`None`) and ExternalName (no cluster IP) ones give nothing.
//!
//! The container's own `envFrom`/`env` override these (see `model::env`); standalone
//! podhost has no Services, so no variables.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};

/// The namespace and name of the one Service every pod gets variables for.
const MASTER_SERVICE: (&str, &str) = ("default", "kubernetes");

/// What the variables need of one port of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// Empty for the (only allowed) unnamed port.
    pub name: String,
    pub port: i32,
    /// As the Service gives it (`TCP`, `UDP`, `SCTP`); empty means TCP.
    pub protocol: String,
}

/// What the variables need of one Service: its cluster IP and its ports, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEntry {
    /// `spec.clusterIP`: empty for ExternalName, `None` for headless.
    pub cluster_ip: String,
    pub ports: Vec<ServicePort>,
}

impl ServiceEntry {
    /// The parts of `service` the variables use (the rest is never kept).
    pub fn of(service: &Service) -> Self {
        let spec = service.spec.as_ref();
        Self {
            cluster_ip: spec.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
            ports: spec
                .and_then(|s| s.ports.as_ref())
                .into_iter()
                .flatten()
                .map(|p| ServicePort {
                    name: p.name.clone().unwrap_or_default(),
                    port: p.port,
                    protocol: p.protocol.clone().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// The kubelet's `IsServiceIPSet`: a cluster IP that is neither empty nor `None`.
    fn has_cluster_ip(&self) -> bool {
        !self.cluster_ip.is_empty() && self.cluster_ip != "None"
    }
}

/// The cluster's Services as the node knows them (cluster mode's Services watch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceSet {
    /// Whether the Services have been listed at least once (the kubelet's
    /// `serviceHasSynced`): before that an API pod's containers do not start.
    pub synced: bool,
    /// By (namespace, name).
    pub services: BTreeMap<(String, String), ServiceEntry>,
}

/// Why service variables cannot be built yet: the kubelet's words, a
/// `CreateContainerConfigError` that is retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceEnvError {
    #[error("services have not yet been read at least once, cannot construct envvars")]
    NotSynced,
}

/// `spec.enableServiceLinks`, whose default (the API server's and the kubelet's) is true.
pub fn service_links_enabled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true)
}

/// The variables of the Services a pod in `namespace` sees, each Service's in the
/// kubelet's order, Services by name (the kubelet's map has no order; a name is unique).
pub fn service_env(
    set: &ServiceSet,
    namespace: &str,
    enable_service_links: bool,
) -> Vec<(String, String)> {
    // By Service name: a Service of the pod's own namespace named `kubernetes` hides
    // the master one, as in the kubelet (its map is keyed by name alone).
    let mut chosen: BTreeMap<&str, &ServiceEntry> = BTreeMap::new();
    if enable_service_links {
        for ((ns, name), entry) in &set.services {
            if ns == namespace && entry.has_cluster_ip() {
                chosen.insert(name, entry);
            }
        }
    }
    let master = (MASTER_SERVICE.0.to_string(), MASTER_SERVICE.1.to_string());
    if let Some(entry) = set.services.get(&master)
        && entry.has_cluster_ip()
    {
        chosen.entry(MASTER_SERVICE.1).or_insert(entry);
    }
    let mut vars = Vec::new();
    for (name, entry) in chosen {
        vars.extend(one_service(name, entry));
    }
    vars
}

/// One Service's variables (envvars.go `FromServices` and `makeLinkVariables`).
fn one_service(name: &str, entry: &ServiceEntry) -> Vec<(String, String)> {
    // The API server refuses a Service with a cluster IP and no port; one that got
    // through anyway gives nothing rather than half of its variables.
    let Some(first) = entry.ports.first() else {
        return Vec::new();
    };
    let prefix = env_name(name);
    let ip = &entry.cluster_ip;
    let port_var = format!("{prefix}_SERVICE_PORT");
    let mut vars = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.clone()),
        (port_var.clone(), first.port.to_string()),
    ];
    // Only the first port may be unnamed (API validation); each named one gets its own.
    for p in entry.ports.iter().filter(|p| !p.name.is_empty()) {
        vars.push((
            format!("{port_var}_{}", env_name(&p.name)),
            p.port.to_string(),
        ));
    }
    // Docker links' variables: the first port alone as `<NAME>_PORT`, then each port.
    for (i, p) in entry.ports.iter().enumerate() {
        let protocol = if p.protocol.is_empty() {
            "TCP"
        } else {
            &p.protocol
        };
        let scheme = protocol.to_lowercase();
        let url = format!("{scheme}://{}", host_port(ip, p.port));
        if i == 0 {
            vars.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        vars.push((port_prefix.clone(), url));
        vars.push((format!("{port_prefix}_PROTO"), scheme));
        vars.push((format!("{port_prefix}_PORT"), p.port.to_string()));
        vars.push((format!("{port_prefix}_ADDR"), ip.clone()));
    }
    vars
}

/// A Service or port name as a variable name: upper case, `-` as `_`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// `host:port`, an IPv6 host in brackets (Go's `net.JoinHostPort`, which brackets any
/// host with a colon).
fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests;
