use super::*;
use crate::downward::DownwardInputs;
use crate::env::{ConfigLookup, resolve_env};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Secret};

fn port(name: &str, port: i32, protocol: &str) -> ServicePort {
    ServicePort {
        name: name.into(),
        port,
        protocol: protocol.into(),
    }
}

fn entry(ip: &str, ports: Vec<ServicePort>) -> ServiceEntry {
    ServiceEntry {
        cluster_ip: ip.into(),
        ports,
    }
}

/// The master Service, `web-svc` (two named ports) and a headless and an ExternalName
/// Service in `default`; `api` and another `kubernetes` in `team`.
fn cluster() -> ServiceSet {
    let mut services = BTreeMap::new();
    let mut add = |ns: &str, name: &str, e: ServiceEntry| {
        services.insert((ns.to_string(), name.to_string()), e);
    };
    add(
        "default",
        "kubernetes",
        entry("10.96.0.1", vec![port("https", 443, "TCP")]),
    );
    add(
        "default",
        "web-svc",
        entry(
            "10.96.0.20",
            vec![port("http", 80, "TCP"), port("dns-udp", 53, "UDP")],
        ),
    );
    add(
        "default",
        "headless",
        entry("None", vec![port("", 80, "TCP")]),
    );
    add("default", "external", entry("", vec![port("", 80, "TCP")]));
    add("team", "api", entry("10.96.0.30", vec![port("", 8080, "")]));
    ServiceSet {
        synced: true,
        services,
    }
}

fn as_map(vars: &[(String, String)]) -> BTreeMap<&str, &str> {
    vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Expected variables, as (name, value) pairs.
type Vars = &'static [(&'static str, &'static str)];

const MASTER_VARS: Vars = &[
    ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
    ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
    ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
    ("KUBERNETES_PORT_443_TCP_PORT", "443"),
    ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
    ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
    ("KUBERNETES_SERVICE_PORT", "443"),
    ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
];

const WEB_SVC_VARS: Vars = &[
    ("WEB_SVC_PORT", "tcp://10.96.0.20:80"),
    ("WEB_SVC_PORT_53_UDP", "udp://10.96.0.20:53"),
    ("WEB_SVC_PORT_53_UDP_ADDR", "10.96.0.20"),
    ("WEB_SVC_PORT_53_UDP_PORT", "53"),
    ("WEB_SVC_PORT_53_UDP_PROTO", "udp"),
    ("WEB_SVC_PORT_80_TCP", "tcp://10.96.0.20:80"),
    ("WEB_SVC_PORT_80_TCP_ADDR", "10.96.0.20"),
    ("WEB_SVC_PORT_80_TCP_PORT", "80"),
    ("WEB_SVC_PORT_80_TCP_PROTO", "tcp"),
    ("WEB_SVC_SERVICE_HOST", "10.96.0.20"),
    ("WEB_SVC_SERVICE_PORT", "80"),
    ("WEB_SVC_SERVICE_PORT_DNS_UDP", "53"),
    ("WEB_SVC_SERVICE_PORT_HTTP", "80"),
];

/// An unnamed first port with no protocol: TCP, and no `_SERVICE_PORT_<NAME>`.
const TEAM_API_VARS: Vars = &[
    ("API_PORT", "tcp://10.96.0.30:8080"),
    ("API_PORT_8080_TCP", "tcp://10.96.0.30:8080"),
    ("API_PORT_8080_TCP_ADDR", "10.96.0.30"),
    ("API_PORT_8080_TCP_PORT", "8080"),
    ("API_PORT_8080_TCP_PROTO", "tcp"),
    ("API_SERVICE_HOST", "10.96.0.30"),
    ("API_SERVICE_PORT", "8080"),
];

fn expected(groups: &[Vars]) -> BTreeMap<&'static str, &'static str> {
    groups.iter().flat_map(|g| g.iter().copied()).collect()
}

#[test]
fn each_namespace_sees_its_services_and_the_master_service_exactly() {
    let set = cluster();
    // (namespace, enableServiceLinks, the variables expected)
    let cases: &[(&str, bool, &[Vars])] = &[
        // default: kubernetes is one of its services; headless and ExternalName give none.
        ("default", true, &[MASTER_VARS, WEB_SVC_VARS]),
        // Links off: only the master service, even in default.
        ("default", false, &[MASTER_VARS]),
        ("team", true, &[MASTER_VARS, TEAM_API_VARS]),
        ("team", false, &[MASTER_VARS]),
        // A namespace without services still gets the master service.
        ("empty", true, &[MASTER_VARS]),
    ];
    for (namespace, links, groups) in cases {
        let vars = service_env(&set, namespace, *links);
        assert_eq!(
            as_map(&vars),
            expected(groups),
            "namespace {namespace}, links {links}"
        );
        assert_eq!(
            vars.len(),
            as_map(&vars).len(),
            "no name given twice: {vars:?}"
        );
    }
}

#[test]
fn no_master_service_and_no_services_give_nothing() {
    assert!(service_env(&ServiceSet::default(), "default", true).is_empty());
    let mut set = cluster();
    set.services
        .remove(&("default".to_string(), "kubernetes".to_string()));
    let vars = service_env(&set, "team", false);
    assert!(vars.is_empty(), "{vars:?}");
}

#[test]
fn a_services_own_kubernetes_service_hides_the_master_one_only_with_links() {
    let mut set = cluster();
    set.services.insert(
        ("team".into(), "kubernetes".into()),
        entry("10.96.0.99", vec![port("", 8443, "TCP")]),
    );
    let vars = service_env(&set, "team", true);
    let with = as_map(&vars).into_iter().collect::<Vec<_>>();
    assert!(
        with.contains(&("KUBERNETES_SERVICE_HOST", "10.96.0.99")),
        "{with:?}"
    );
    assert!(with.contains(&("KUBERNETES_SERVICE_PORT", "8443")));
    // None of the master's variables left beside it.
    assert!(
        !with
            .iter()
            .any(|(k, _)| *k == "KUBERNETES_SERVICE_PORT_HTTPS")
    );
    let without = service_env(&set, "team", false);
    assert_eq!(
        as_map(&without).get("KUBERNETES_SERVICE_HOST"),
        Some(&"10.96.0.1")
    );
    // A headless `kubernetes` in the namespace hides nothing.
    set.services.insert(
        ("team".into(), "kubernetes".into()),
        entry("None", vec![port("", 8443, "TCP")]),
    );
    assert_eq!(
        as_map(&service_env(&set, "team", true)).get("KUBERNETES_SERVICE_HOST"),
        Some(&"10.96.0.1")
    );
}

#[test]
fn ipv6_cluster_ips_are_bracketed_in_urls_only() {
    let mut set = ServiceSet::default();
    set.services.insert(
        ("default".into(), "kubernetes".into()),
        entry("fd00:10:96::1", vec![port("https", 443, "TCP")]),
    );
    set.services.insert(
        ("default".into(), "media".into()),
        entry("fd00:10:96::7", vec![port("rtp", 5004, "SCTP")]),
    );
    let vars = service_env(&set, "default", true);
    let got = as_map(&vars);
    assert_eq!(got["KUBERNETES_SERVICE_HOST"], "fd00:10:96::1");
    assert_eq!(got["KUBERNETES_PORT"], "tcp://[fd00:10:96::1]:443");
    assert_eq!(got["KUBERNETES_PORT_443_TCP"], "tcp://[fd00:10:96::1]:443");
    assert_eq!(got["KUBERNETES_PORT_443_TCP_ADDR"], "fd00:10:96::1");
    assert_eq!(got["MEDIA_PORT"], "sctp://[fd00:10:96::7]:5004");
    assert_eq!(got["MEDIA_PORT_5004_SCTP_PROTO"], "sctp");
    assert_eq!(got["MEDIA_SERVICE_PORT_RTP"], "5004");
}

#[test]
fn a_service_with_no_port_gives_nothing() {
    let mut set = ServiceSet::default();
    set.services
        .insert(("default".into(), "bare".into()), entry("10.0.0.9", vec![]));
    assert!(service_env(&set, "default", true).is_empty());
}

#[test]
fn entries_are_read_from_services_and_links_default_to_on() {
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.0.0.5", "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
            {"name": "metrics", "port": 9090}
        ]}
    }))
    .unwrap();
    assert_eq!(
        ServiceEntry::of(&svc),
        entry(
            "10.0.0.5",
            vec![port("http", 80, "TCP"), port("metrics", 9090, "")]
        )
    );
    assert_eq!(ServiceEntry::of(&Service::default()), entry("", vec![]));
    let pod = |links: serde_json::Value| -> Pod {
        serde_json::from_value(serde_json::json!({
            "spec": {"containers": [], "enableServiceLinks": links}
        }))
        .unwrap()
    };
    assert!(service_links_enabled(&pod(serde_json::Value::Null)));
    assert!(service_links_enabled(&pod(true.into())));
    assert!(!service_links_enabled(&pod(false.into())));
    assert!(service_links_enabled(&Pod::default()));
}

struct NoObjects;

impl ConfigLookup for NoObjects {
    fn config_map(&self, _: &str, _: &str) -> Option<&ConfigMap> {
        None
    }
    fn secret(&self, _: &str, _: &str) -> Option<&Secret> {
        None
    }
}

/// As the worker builds it: the image's env, then the service variables, as the base
/// the container's `envFrom`/`env` go on.
#[test]
fn the_containers_own_env_wins_and_may_refer_to_service_variables() {
    let services = service_env(&cluster(), "default", true);
    let mut base = vec![
        ("PATH".to_string(), "/bin".to_string()),
        // An image variable of the same name gives way to the service's.
        ("WEB_SVC_SERVICE_HOST".to_string(), "from-image".to_string()),
    ];
    base.extend(services);
    let container: Container = serde_yaml_ng::from_str(
        r#"
name: main
env:
- name: KUBERNETES_SERVICE_PORT
  value: "6443"
- name: WEB_URL
  value: http://$(WEB_SVC_SERVICE_HOST):$(WEB_SVC_SERVICE_PORT_HTTP)/
- name: API
  value: $(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)
"#,
    )
    .unwrap();
    let pod = Pod::default();
    let env = resolve_env(
        &base,
        &pod,
        &container,
        &NoObjects,
        &DownwardInputs::default(),
    )
    .unwrap();
    let got = as_map(&env.vars);
    assert_eq!(got["KUBERNETES_SERVICE_PORT"], "6443");
    assert_eq!(got["WEB_SVC_SERVICE_HOST"], "10.96.0.20");
    assert_eq!(got["WEB_URL"], "http://10.96.0.20:80/");
    // The container's own value, defined before, is what a later `$(VAR)` sees.
    assert_eq!(got["API"], "10.96.0.1:6443");
    assert_eq!(got["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
}

#[test]
fn not_synced_is_the_kubelets_message() {
    assert_eq!(
        ServiceEnvError::NotSynced.to_string(),
        "services have not yet been read at least once, cannot construct envvars"
    );
}
