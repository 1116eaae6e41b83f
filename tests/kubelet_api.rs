//! The kubelet API (cluster mode's `--port`) over real TLS: certificates made here with
//! rcgen (the kubelet API's client CA, the node's serving certificate, client
//! certificates of that CA and of another), requests with reqwest. Checks who is let in
//! (a verified client certificate's CN and O, or a reviewed bearer token; nobody
//! anonymous; a foreign CA refused in the handshake), that the authorization asks for
//! `nodes/proxy` of this node, and `/containerLogs` with the API server's parameters.
//! The TokenReviews and SubjectAccessReviews go through the daemon's own reviewer
//! ([`ClusterReviewer`] behind the kubelet's caches, [`CachingReviewer`]) to a live
//! kube-apiserver (tests/common_apiserver) as the node `node-1`: RBAC there decides,
//! and the node's `--kube-record` shows what it asked (each distinct question once).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_apiserver;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use common_apiserver::{ControlPlane, Options, control_plane};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodSpec,
};
use podhost::api::kubelet::{CachingReviewer, KubeletApiState, ServingCert};
use podhost::cluster::record::Exchange;
use podhost::daemon::kubelet_api::ClusterReviewer;
use podhost::disk::Layout;
use podhost::status::StatusStore;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// The node whose reviews these are (the reviews' `nodes/proxy` name).
const NODE: &str = "node-1";

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(&[NODE]))
}

/// The certificate the API server presents to kubelets (its
/// `--kubelet-client-certificate`).
const APISERVER: (&str, &[&str]) = ("kube-apiserver-kubelet-client", &["system:masters"]);
/// A certificate of the kubelet API's client CA that RBAC gives nothing.
const BOB: (&str, &[&str]) = ("bob", &["devs"]);

/// A service account `reader` in `kubelet-api` whose token RBAC lets `get nodes/proxy`
/// (what `kubectl logs` is checked as), and a token of it.
async fn reader_token() -> String {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::Api;
    use kube::api::PostParams;

    let admin = plane().admin().await;
    common_apiserver::namespace(&admin, "kubelet-api").await;
    let post = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "kubelet-api");
    let reader: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "reader"}})).unwrap();
    accounts.create(&post, &reader).await.unwrap();
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "node-proxy-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&post, &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "reader-node-proxy"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "node-proxy-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "kubelet-api"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&post, &binding)
        .await
        .unwrap();
    common_apiserver::service_account_token(&admin, "kubelet-api", "reader").await
}

/// One review the node asked, and the live server's answer: (path end, user, allowed
/// or authenticated).
fn asked(record: &Path) -> Vec<(String, String, bool)> {
    common_apiserver::recorded(record)
        .into_iter()
        .map(|e: Exchange| {
            assert_eq!(e.method, "POST", "{e:?}");
            assert_eq!(e.status, 201, "{e:?}");
            let spec = &e.request.as_ref().unwrap()["spec"];
            let answer: serde_json::Value = serde_json::from_str(&e.response).unwrap();
            let kind = e.path.rsplit('/').next().unwrap().to_string();
            if kind == "subjectaccessreviews" {
                let attributes = &spec["resourceAttributes"];
                assert_eq!(attributes["resource"], "nodes", "{spec}");
                assert_eq!(attributes["subresource"], "proxy", "{spec}");
                assert_eq!(attributes["name"], NODE, "{spec}");
                let user = spec["user"].as_str().unwrap().to_string();
                (kind, user, answer["status"]["allowed"] == true)
            } else {
                let token = spec["token"].as_str().unwrap();
                let short = token.chars().take(12).collect();
                (kind, short, answer["status"]["authenticated"] == true)
            }
        })
        .collect()
}

struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca {
        cert_pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

/// A client identity (certificate then key, PEM) for CN `user` in groups `orgs`.
fn client_identity(ca: &Ca, user: &str, orgs: &[&str]) -> reqwest::Identity {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, user);
    for o in orgs {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    let pem = format!("{}{}", cert.pem(), key.serialize_pem());
    reqwest::Identity::from_pem(pem.as_bytes()).unwrap()
}

struct Node {
    addr: SocketAddr,
    ca: Ca,
    /// The node's `--kube-record`: its reviews and the live server's answers.
    record: std::path::PathBuf,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A kubelet API on a free loopback port with one running pod `default/web` whose
/// container `app` logged three lines, its reviews asked of the live API server as
/// `node-1`.
async fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca("test-cluster-ca");
    // The node's serving certificate, signed by the cluster CA, for 127.0.0.1.
    let serving_key = KeyPair::generate().unwrap();
    let serving = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&serving_key, &ca.issuer)
        .unwrap();
    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    std::fs::write(pki.join("node.crt"), serving.pem()).unwrap();
    std::fs::write(pki.join("node.key"), serving_key.serialize_pem()).unwrap();
    std::fs::write(pki.join("ca.crt"), &ca.cert_pem).unwrap();
    let tls = podhost::api::kubelet::tls::server_config(
        &ServingCert::Files {
            cert: pki.join("node.crt"),
            key: pki.join("node.key"),
        },
        Some(&pki.join("ca.crt")),
    )
    .unwrap();

    let layout = Layout::new(dir.path().join("root"), dir.path().join("logs"));
    let store = Arc::new(StatusStore::load(layout.clone(), "node-1"));
    let mut pod = Pod::default();
    pod.metadata.name = Some("web".into());
    pod.metadata.namespace = Some("default".into());
    pod.metadata.uid = Some("0d8f9a4e-1111-4222-8333-444455556666".into());
    pod.spec = Some(PodSpec {
        containers: vec![Container {
            name: "app".into(),
            ..Container::default()
        }],
        ..PodSpec::default()
    });
    store.admit(&std::sync::Arc::new(pod));
    store.update_status("0d8f9a4e-1111-4222-8333-444455556666", |s| {
        s.container_statuses = Some(vec![ContainerStatus {
            name: "app".into(),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
    });
    let log = layout.container_log(
        "default",
        "web",
        "0d8f9a4e-1111-4222-8333-444455556666",
        "app",
        0,
    );
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(
        &log,
        "2026-01-01T00:00:00.000000001Z stdout F one\n\
         2026-01-01T00:00:00.000000002Z stderr F two\n\
         2026-01-01T00:00:00.000000003Z stdout F three\n",
    )
    .unwrap();

    let record = dir.path().join("reviews.jsonl");
    let client = plane().node_recorded(NODE, &record).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let task = podhost::api::kubelet::serve_listener(
        listener,
        tls,
        KubeletApiState {
            store,
            port_forward: Arc::new(podhost::daemon::PodPortForwarder::new(layout.clone())),
            // The statistics paths are tested live (scripts/cluster-test.sh).
            stats: None,
            layout,
            node_name: NODE.into(),
            // As the daemon wires it: the kubelet's caches in front of the reviews.
            reviewer: Arc::new(CachingReviewer::new(Arc::new(ClusterReviewer { client }))),
            podhost_exe: std::path::PathBuf::from(env!("CARGO_BIN_EXE_podhost")),
        },
    );
    Node {
        addr,
        ca,
        record,
        task,
        _dir: dir,
    }
}

fn client(node: &Node, identity: Option<reqwest::Identity>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(node.ca.cert_pem.as_bytes()).unwrap()]);
    if let Some(id) = identity {
        builder = builder.identity(id);
    }
    builder.build().unwrap()
}

async fn get(client: &reqwest::Client, node: &Node, path: &str) -> (u16, String) {
    let resp = client
        .get(format!("https://{}{path}", node.addr))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test]
async fn client_certificates_of_the_ca_and_reviewed_tokens_only() {
    let token = reader_token().await;
    let node = node().await;
    let anonymous = client(&node, None);
    assert_eq!(get(&anonymous, &node, "/healthz").await.0, 401);

    let (cn, orgs) = APISERVER;
    let apiserver = client(&node, Some(client_identity(&node.ca, cn, orgs)));
    assert_eq!(
        get(&apiserver, &node, "/healthz").await,
        (200, "ok\n".into())
    );
    let (status, pods) = get(&apiserver, &node, "/pods").await;
    assert_eq!(status, 200);
    assert!(pods.contains("\"web\""), "{pods}");

    let (cn, orgs) = BOB;
    let bob = client(&node, Some(client_identity(&node.ca, cn, orgs)));
    let (status, body) = get(&bob, &node, "/containerLogs/default/web/app").await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)\n"
    );

    let by_token = anonymous
        .get(format!("https://{}/healthz", node.addr))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(by_token.status().as_u16(), 200);
    let bad_token = anonymous
        .get(format!("https://{}/healthz", node.addr))
        .bearer_auth("not-a-token-anyone-issued")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_token.status().as_u16(), 401);
    // Each caller was reviewed once, against `nodes/proxy` of node-1, and RBAC
    // answered: the API server's certificate allowed (its second request answered from
    // the cache), bob denied, the reader's token authenticated as the service account
    // and allowed, the made-up token authenticating nobody.
    let short: String = token.chars().take(12).collect();
    let expected = [
        (
            "subjectaccessreviews",
            "kube-apiserver-kubelet-client",
            true,
        ),
        ("subjectaccessreviews", "bob", false),
        ("tokenreviews", short.as_str(), true),
        (
            "subjectaccessreviews",
            "system:serviceaccount:kubelet-api:reader",
            true,
        ),
        ("tokenreviews", "not-a-token-", false),
    ]
    .map(|(k, u, a)| (k.to_string(), u.to_string(), a));
    assert_eq!(asked(&node.record), expected);
    let reader_review = &common_apiserver::recorded(&node.record)[3];
    let groups = &reader_review.request.as_ref().unwrap()["spec"]["groups"];
    assert!(
        groups
            .as_array()
            .unwrap()
            .contains(&"system:serviceaccounts:kubelet-api".into()),
        "the groups of the TokenReview: {groups}"
    );

    // A certificate of another CA does not get through the handshake.
    let other = ca("some-other-ca");
    let (cn, orgs) = APISERVER;
    let stranger = client(&node, Some(client_identity(&other, cn, orgs)));
    let refused = stranger
        .get(format!("https://{}/healthz", node.addr))
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

#[tokio::test]
async fn container_logs_with_the_api_servers_parameters() {
    let node = node().await;
    let (cn, orgs) = APISERVER;
    let admin = client(&node, Some(client_identity(&node.ca, cn, orgs)));
    assert_eq!(
        get(&admin, &node, "/containerLogs/default/web/app").await,
        (200, "one\ntwo\nthree\n".into())
    );
    assert_eq!(
        get(&admin, &node, "/containerLogs/default/web/app?tailLines=1").await,
        (200, "three\n".into())
    );
    let (status, stamped) = get(
        &admin,
        &node,
        "/containerLogs/default/web/app?timestamps=true&limitBytes=40",
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        stamped.starts_with("2026-01-01T00:00:00.000000001Z one"),
        "{stamped}"
    );
    assert_eq!(stamped.len(), 40);
    let (status, message) = get(
        &admin,
        &node,
        "/containerLogs/default/web/app?previous=true",
    )
    .await;
    assert_eq!(status, 400, "{message}");
    let (status, message) = get(&admin, &node, "/containerLogs/default/nope/app").await;
    assert_eq!(
        (status, message.as_str()),
        (404, "pod \"default/nope\" does not exist\n")
    );
    let (status, _) = get(&admin, &node, "/containerLogs/default/web/other").await;
    assert_eq!(status, 404);
    // Six requests of one certificate, one review: the kubelet's cache answered.
    assert_eq!(
        asked(&node.record),
        [(
            "subjectaccessreviews".to_string(),
            "kube-apiserver-kubelet-client".to_string(),
            true
        )]
    );
}
