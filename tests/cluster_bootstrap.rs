//! TLS bootstrap against the recorded answers of a real control plane
//! (kube-apiserver v1.20.2 with `--enable-bootstrap-token-auth` and kubeadm's RBAC
//! bindings, kube-controller-manager v1.20.2 approving and signing), recorded with
//! `scripts/cluster/record-bootstrap-fixture.sh` as the node `podhost-boot`:
//!
//! - `bootstrap.jsonl`: the CertificateSigningRequest posted with the bootstrap token,
//!   the list and watch of it until the signer's certificate arrived;
//! - `bootstrap-key.pem`: the key that request was made with (a throwaway key of a
//!   cluster that no longer exists), so that the request made here has the recorded
//!   name — the name is a digest of the key, the subject and the usages;
//! - `bootstrap-denied.jsonl`, `bootstrap-denied-key.pem`: a second node's request,
//!   with kubeadm's auto-approval binding removed, denied with `kubectl certificate deny`.
//!
//! `scripts/cluster-test.sh` runs the whole flow (and rotation) against a live server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use podhost::cluster::certs::bootstrap::{Start, decide, initial_pair, request_and_store};
use podhost::cluster::certs::kubeconfig_out;
use podhost::cluster::certs::store::{CURRENT, CertStore, PENDING_KEY};
use podhost::cluster::replay::Replay;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cluster")
        .join(name)
}

/// What the recording's node posted.
fn recorded_post() -> serde_json::Value {
    let text = std::fs::read_to_string(fixture("bootstrap.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["method"], "POST");
    first["request"].clone()
}

#[tokio::test]
async fn a_node_gets_its_certificate_through_a_csr_the_control_plane_signs() {
    let replay = Replay::load(&fixture("bootstrap.jsonl")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = CertStore::new(dir.path().join("pki"));
    // The pending key of a request, as a node restarted mid-request keeps it.
    store
        .keep_pending_key(&std::fs::read_to_string(fixture("bootstrap-key.pem")).unwrap())
        .unwrap();

    let pair = request_and_store(replay.client(), &store, "podhost-boot")
        .await
        .unwrap();

    // What was asked: the recorded request's name (same key), signer and usages.
    let asked = replay.asked();
    let posted = asked
        .iter()
        .find(|e| e.method == "POST")
        .and_then(|e| e.request.clone())
        .unwrap();
    let recorded = recorded_post();
    assert_eq!(posted["metadata"]["name"], recorded["metadata"]["name"]);
    assert!(
        posted["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("node-csr-")
    );
    assert_eq!(
        posted["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    assert_eq!(posted["spec"]["usages"], recorded["spec"]["usages"]);
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());

    // The signer's certificate, for this node, with the key kept.
    let validity = pair.validity("issued").unwrap();
    assert!(validity.not_after > validity.not_before + Duration::from_secs(3600));
    let (_, cert) = x509_parser::pem::parse_x509_pem(&pair.cert_pem).unwrap();
    let cert = cert.parse_x509().unwrap();
    assert_eq!(
        cert.subject().to_string(),
        "O=system:nodes, CN=system:node:podhost-boot"
    );
    assert_eq!(cert.issuer().to_string(), "CN=podhost-local-ca");
    assert_eq!(
        pair.key_pem,
        std::fs::read(fixture("bootstrap-key.pem")).unwrap()
    );

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
    let bootstrap = dir.path().join("bootstrap.kubeconfig");
    std::fs::write(
        &bootstrap,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    \
         server: https://127.0.0.1:6443\n    certificate-authority-data: Q0E=\n\
         users:\n- name: tls-bootstrap-token-user\n  user: {token: podhst.0123456789abcdef}\n\
         contexts:\n- name: b\n  context: {cluster: local, user: tls-bootstrap-token-user}\n\
         current-context: b\n",
    )
    .unwrap();
    let node_kubeconfig = dir.path().join("node.kubeconfig");
    let at = validity.not_before + Duration::from_secs(60);
    assert_eq!(decide(&node_kubeconfig, &store, at), Start::ReuseCertDir);
    kubeconfig_out::write_node_kubeconfig(
        &kubeconfig_out::read(&bootstrap).unwrap(),
        &bootstrap,
        &node_kubeconfig,
        &current,
    )
    .unwrap();
    let written = kubeconfig_out::read(&node_kubeconfig).unwrap();
    let (cluster, user) = kubeconfig_out::current(&written, &node_kubeconfig).unwrap();
    let cluster = cluster.cluster.unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
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
    assert_eq!(decide(&node_kubeconfig, &store, at), Start::KubeconfigValid);
    assert_eq!(initial_pair(&store, &node_kubeconfig, at).unwrap(), pair);
    assert!(CURRENT.ends_with("current.pem"));
}

#[tokio::test]
async fn a_denied_request_is_an_error_that_says_so_and_its_key_is_dropped() {
    let replay = Replay::load(&fixture("bootstrap-denied.jsonl")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = CertStore::new(dir.path().join("pki"));
    store
        .keep_pending_key(&std::fs::read_to_string(fixture("bootstrap-denied-key.pem")).unwrap())
        .unwrap();

    let error = request_and_store(replay.client(), &store, "podhost-denied")
        .await
        .unwrap_err();

    let text = error.to_string();
    assert!(
        matches!(&error, podhost::cluster::certs::CertError::Refused { condition, .. } if condition == "denied"),
        "{text}"
    );
    assert!(
        text.contains("node-csr-") && text.contains("was denied"),
        "{text}"
    );
    // The next request gets a new key (and name); nothing was stored.
    assert!(!store.dir().join(PENDING_KEY).exists());
    assert!(store.load_current().unwrap().is_none());
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}
