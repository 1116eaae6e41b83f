//! What cluster mode gets from kube-controller-manager, against a live control plane
//! (tests/common_apiserver: the pinned kube-apiserver with a bootstrap token and
//! kubeadm's RBAC bindings, and kube-controller-manager approving and signing node
//! client certificates and allocating podCIDRs from 10.244.0.0/16): TLS bootstrap with
//! the bootstrap token — the CSR posted, auto-approved, signed, stored and used — a
//! CSR an administrator denies, and a podCIDR set after registration reaching the node
//! through the watch of its own Node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_apiserver;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use common_apiserver::{ControlPlane, Options, control_plane, eventually};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use podhost::cluster::certs::bootstrap::{Start, decide, initial_pair, request_and_store};
use podhost::cluster::certs::csr::SIGNER;
use podhost::cluster::certs::kubeconfig_out;
use podhost::cluster::certs::store::{CertStore, PENDING_KEY};
use podhost::model::node::{NodeSettings, Reserved, node_object};
use serde_json::json;

const NODES: &[&str] = &["cidr-node"];
const BOOTSTRAP_TOKEN: &str = "podhst.0123456789abcdef";
const CLUSTER_CIDR: &str = "10.244.0.0/16";

fn plane() -> &'static ControlPlane {
    control_plane(&Options {
        nodes: NODES,
        controller_manager: true,
        cluster_cidr: Some(CLUSTER_CIDR),
        bootstrap_token: Some(BOOTSTRAP_TOKEN),
    })
}

const WAIT: Duration = Duration::from_secs(30);

fn settings(name: &str) -> NodeSettings {
    NodeSettings {
        name: name.into(),
        labels: Default::default(),
        taints: Vec::new(),
        kube_reserved: Reserved::default(),
        system_reserved: Reserved::default(),
        eviction_hard: Vec::new(),
        max_pods: 110,
        kubelet_port: 10250,
        kubelet_version: podhost::cluster::KUBELET_VERSION.into(),
    }
}

#[tokio::test]
async fn a_node_gets_its_certificate_through_a_csr_the_control_plane_signs() {
    let cp = plane();
    let admin = cp.admin().await;
    let dir = tempfile::tempdir().unwrap();
    let store = CertStore::new(dir.path().join("pki"));
    let bootstrap = cp.bootstrap_kubeconfig();
    let node_kubeconfig = dir.path().join("node.kubeconfig");
    assert_eq!(
        decide(&node_kubeconfig, &store, SystemTime::now()),
        Start::Request
    );

    let client = common_apiserver::client(&bootstrap, None).await;
    let pair = tokio::time::timeout(WAIT, request_and_store(client, &store, "boot-node"))
        .await
        .expect("the certificate within 30 s")
        .unwrap();

    // The request as the control plane has it: the kubelet's signer and usages, asked
    // by the bootstrap token's user, approved by the controller manager.
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let ours: Vec<CertificateSigningRequest> = csrs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.spec.username.as_deref() == Some("system:bootstrap:podhst"))
        .collect();
    assert_eq!(ours.len(), 1, "one request");
    let csr = &ours[0];
    assert!(
        csr.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("node-csr-")
    );
    assert_eq!(csr.spec.signer_name, SIGNER);
    let usages = csr.spec.usages.clone().unwrap();
    assert_eq!(
        usages,
        ["digital signature", "key encipherment", "client auth"]
    );
    let approved = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Approved")
        .expect("approved");
    assert_eq!(approved.reason.as_deref(), Some("AutoApproved"));

    // The signer's certificate, for this node, with the key kept.
    let validity = pair.validity("issued").unwrap();
    assert!(validity.not_after > validity.not_before + Duration::from_secs(3600));
    let (_, cert) = x509_parser::pem::parse_x509_pem(&pair.cert_pem).unwrap();
    let cert = cert.parse_x509().unwrap();
    assert_eq!(
        cert.subject().to_string(),
        "O=system:nodes, CN=system:node:boot-node"
    );
    assert_eq!(cert.issuer().to_string(), "CN=podhost-local-ca");

    // Stored: the current symlink names a private pair file; the pending key is gone.
    let current = store.current_path();
    let target = std::fs::read_link(&current).unwrap();
    assert!(
        target.to_string_lossy().starts_with("kubelet-client-"),
        "{target:?}"
    );
    let mode = std::fs::metadata(store.dir().join(&target))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!store.dir().join(PENDING_KEY).exists());
    assert_eq!(store.load_current().unwrap().as_ref(), Some(&pair));

    // The node's kubeconfig: the bootstrap one's server and CA, the current pair.
    let now = SystemTime::now();
    assert_eq!(decide(&node_kubeconfig, &store, now), Start::ReuseCertDir);
    kubeconfig_out::write_node_kubeconfig(
        &kubeconfig_out::read(&bootstrap).unwrap(),
        &bootstrap,
        &node_kubeconfig,
        &current,
    )
    .unwrap();
    let written = kubeconfig_out::read(&node_kubeconfig).unwrap();
    let (cluster, user) = kubeconfig_out::current(&written, &node_kubeconfig).unwrap();
    assert_eq!(
        cluster.cluster.unwrap().server.as_deref(),
        Some(cp.server.as_str())
    );
    let named = current.display().to_string();
    assert_eq!(user.client_certificate.as_deref(), Some(named.as_str()));
    assert_eq!(user.client_key.as_deref(), Some(named.as_str()));
    assert!(user.token.is_none(), "the bootstrap token stays out");
    assert_eq!(
        std::fs::metadata(&node_kubeconfig)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    // A restart now keeps it: no second bootstrap.
    assert_eq!(
        decide(&node_kubeconfig, &store, now),
        Start::KubeconfigValid
    );
    assert_eq!(initial_pair(&store, &node_kubeconfig, now).unwrap(), pair);

    // The API server takes the certificate as the node: it registers its Node.
    let as_node = common_apiserver::client(&node_kubeconfig, None).await;
    let registered = podhost::cluster::register::register_once(
        &as_node,
        &node_object(
            &common_apiserver::host_facts("boot-node", "192.0.2.4"),
            &settings("boot-node"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(registered.metadata.name.as_deref(), Some("boot-node"));
    let nodes: Api<Node> = Api::all(admin);
    assert!(nodes.get_opt("boot-node").await.unwrap().is_some());
}

/// A second bootstrap token whose group may post node CSRs but has no auto-approval:
/// its request waits until an administrator denies it.
#[tokio::test]
async fn a_denied_request_is_an_error_that_says_so_and_its_key_is_dropped() {
    let cp = plane();
    let admin = cp.admin().await;
    let group = "system:bootstrappers:podhost-manual";
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "kube-system");
    let token_secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "bootstrap-token-manual"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "manual", "token-secret": "fedcba9876543210",
            "usage-bootstrap-authentication": "true", "auth-extra-groups": group}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &token_secret)
        .await
        .unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "podhost-manual-bootstrap"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:node-bootstrapper"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let kubeconfig = cp.token_kubeconfig("manual", "manual.fedcba9876543210");

    let dir = tempfile::tempdir().unwrap();
    let store = CertStore::new(dir.path().join("pki"));
    let client = common_apiserver::client(&kubeconfig, None).await;
    let request = tokio::spawn({
        let store = store.clone();
        async move { request_and_store(client, &store, "denied-node").await }
    });

    // The request appears, pending, its key kept meanwhile; an administrator denies it.
    let csrs: Api<CertificateSigningRequest> = Api::all(admin);
    let name = eventually("the pending request", WAIT, || async {
        csrs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|c| c.spec.username.as_deref() == Some("system:bootstrap:manual"))
            .and_then(|c| c.metadata.name)
    })
    .await;
    assert!(store.dir().join(PENDING_KEY).exists(), "the key kept");
    let denial = json!({"status": {"conditions": [{
        "type": "Denied", "status": "True", "reason": "NotOurs",
        "message": "no such node here"
    }]}});
    csrs.patch_approval(&name, &PatchParams::default(), &Patch::Merge(denial))
        .await
        .unwrap();

    let error = tokio::time::timeout(WAIT, request)
        .await
        .expect("the request ends")
        .unwrap()
        .unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(&error, podhost::cluster::certs::CertError::Refused { condition, reason, .. } if condition == "denied" && reason == "NotOurs"),
        "{text}"
    );
    assert!(
        text.contains(&name) && text.contains("was denied") && text.contains("no such node here"),
        "{text}"
    );
    // The next request gets a new key (and name); nothing was stored.
    assert!(!store.dir().join(PENDING_KEY).exists());
    assert!(store.load_current().unwrap().is_none());
}

#[tokio::test]
async fn a_pod_cidr_set_after_registration_reaches_the_node_through_its_own_node_watch() {
    use podhost::cluster::pod_cidr::{follow, node_pod_cidrs};

    let cp = plane();
    let client = cp.node("cidr-node").await;
    let registered = podhost::cluster::register::register_once(
        &client,
        &node_object(
            &common_apiserver::host_facts("cidr-node", "192.0.2.4"),
            &settings("cidr-node"),
        ),
    )
    .await
    .unwrap();
    assert!(
        node_pod_cidrs(&registered).is_empty(),
        "registered with a podCIDR"
    );
    let own = podhost::cluster::own_node::watch_own_node(client, "cidr-node");
    let (tx, rx) = tokio::sync::watch::channel(None);
    let follower = tokio::spawn(follow(own, tx));
    tokio::time::timeout(WAIT, follower)
        .await
        .expect("the controller manager's podCIDR seen")
        .unwrap();
    let seen = rx.borrow().clone().unwrap();
    let nodes: Api<Node> = Api::all(cp.admin().await);
    let stored = node_pod_cidrs(&nodes.get("cidr-node").await.unwrap());
    assert_eq!(seen, stored);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("10.244.") && seen[0].ends_with("/24"),
        "{seen:?}"
    );
}
