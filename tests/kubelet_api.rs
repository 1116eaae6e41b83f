//! The kubelet API (cluster mode's `--port`) over real TLS: certificates made here with
//! rcgen (a cluster CA, the node's serving certificate, client certificates of that CA
//! and of another), requests with reqwest. Checks who is let in (a verified client
//! certificate's CN and O, or a reviewed bearer token; nobody anonymous; a foreign CA
//! refused in the handshake), that the authorization asks for `nodes/proxy` of this
//! node, and `/containerLogs` with `tailLines`. The reviews are answered by a policy
//! object standing in for the API server's TokenReview and SubjectAccessReview (the
//! real ones are exercised by scripts/cluster-test.sh against a real API server).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodSpec,
};
use podhost::api::kubelet::{AccessReviewer, KubeletApiState, ReviewError, ServingCert};
use podhost::disk::Layout;
use podhost::model::kubelet_auth::{NodeAccess, UserInfo};
use podhost::status::StatusStore;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// Allows `system:masters` and the user of the one good token; records every question.
#[derive(Debug, Default)]
struct Policy {
    asked: Mutex<Vec<(String, NodeAccess)>>,
}

impl AccessReviewer for Policy {
    fn review_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
        let user = (token == "good-token").then(|| UserInfo {
            name: "token-user".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        });
        async move { Ok(user) }.boxed()
    }

    fn review_access<'a>(
        &'a self,
        user: &'a UserInfo,
        access: &'a NodeAccess,
    ) -> BoxFuture<'a, Result<(bool, String), ReviewError>> {
        self.asked
            .lock()
            .unwrap()
            .push((user.name.clone(), access.clone()));
        let allowed = user.groups.iter().any(|g| g == "system:masters");
        async move { Ok((allowed, String::new())) }.boxed()
    }
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
    policy: Arc<Policy>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A kubelet API on a free loopback port with one running pod `default/web` whose
/// container `app` logged three lines.
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
    store.admit(&pod);
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

    let policy = Arc::new(Policy::default());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let task = podhost::api::kubelet::serve(
        addr,
        tls,
        KubeletApiState {
            store,
            port_forward: Arc::new(podhost::daemon::PodPortForwarder::new(layout.clone())),
            layout,
            node_name: "node-1".into(),
            reviewer: policy.clone(),
            podhost_exe: std::path::PathBuf::from(env!("CARGO_BIN_EXE_podhost")),
        },
    )
    .await
    .unwrap();
    Node {
        addr,
        ca,
        policy,
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
    let node = node().await;
    let anonymous = client(&node, None);
    assert_eq!(get(&anonymous, &node, "/healthz").await.0, 401);

    let admin = client(
        &node,
        Some(client_identity(&node.ca, "apiserver", &["system:masters"])),
    );
    assert_eq!(get(&admin, &node, "/healthz").await, (200, "ok\n".into()));
    let (status, pods) = get(&admin, &node, "/pods").await;
    assert_eq!(status, 200);
    assert!(pods.contains("\"web\""), "{pods}");

    let bob = client(&node, Some(client_identity(&node.ca, "bob", &["devs"])));
    let (status, body) = get(&bob, &node, "/containerLogs/default/web/app").await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)\n"
    );
    {
        let asked = node.policy.asked.lock().unwrap();
        let (user, access) = asked.last().unwrap();
        assert_eq!(user, "bob");
        assert_eq!(access.name, "node-1");
        assert_eq!(access.subresource, "proxy");
    }

    let token = anonymous
        .get(format!("https://{}/healthz", node.addr))
        .bearer_auth("good-token")
        .send()
        .await
        .unwrap();
    assert_eq!(token.status().as_u16(), 200);
    let bad_token = anonymous
        .get(format!("https://{}/healthz", node.addr))
        .bearer_auth("bad-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_token.status().as_u16(), 401);

    // A certificate of another CA does not get through the handshake.
    let other = ca("some-other-ca");
    let stranger = client(
        &node,
        Some(client_identity(&other, "apiserver", &["system:masters"])),
    );
    let refused = stranger
        .get(format!("https://{}/healthz", node.addr))
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

#[tokio::test]
async fn container_logs_with_the_api_servers_parameters() {
    let node = node().await;
    let admin = client(
        &node,
        Some(client_identity(&node.ca, "apiserver", &["system:masters"])),
    );
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
}
