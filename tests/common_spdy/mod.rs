//! Replaying what a real kubectl sent over SPDY/3.1 (tests/fixtures/cluster/*.jsonl,
//! recorded by scripts/cluster/record-*-fixture.sh through recording-proxy.py) against
//! the kubelet API over real TLS, serving a real daemon's pods: the recording's
//! connections, the replay in the recording's causal order, the node set up.
//!
//! The daemon serves the kubelet API only in cluster mode (an API server is needed for
//! that), so the test serves it itself with `podhost::api::kubelet::serve` over the
//! daemon's own state directory (its pods' records, its libcontainer root) and with the
//! daemon's own way into pods (`PodPortForwarder`). The access review is decided here
//! (see `ApiServerOnly`).
//!
//! Replay order: kubectl waits for each SYN_REPLY before opening its next stream, and
//! ends streams after the server ended its side. So each client frame is written once
//! the live server has sent as many "milestones" (SYN_REPLYs and stream ends) as the
//! recorded server had before that frame — the recording's causality, not its timing.
//!
//! Why these stay recordings while cluster mode's API exchanges are tested live: they
//! are a client's bytes, not an API server's answers. kubectl's SPDY frames reach a
//! kubelet only through a whole cluster, where scripts/cluster-test.sh drives them live
//! (exec, exec -it, port-forward, over both protocols); the replay checks podhost's
//! handling of those exact frames (zlib header blocks of one compression stream,
//! stream order, resize messages, RST_STREAM, GOAWAY) in seconds, without one. The
//! API server passes the upgraded connection through unchanged, so its version is not
//! in them.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use podhost::api::kubelet::spdy::frame::{self, Frame};
use podhost::api::kubelet::spdy::headers::{self, Inflater};
use podhost::api::kubelet::{AccessReviewer, KubeletApiState, ReviewError, ServingCert};
use podhost::disk::Layout;
use podhost::model::kubelet_auth::{NodeAccess, UserInfo};
use podhost::status::StatusStore;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{TestDaemon, phase, require_root, wait_until};

pub const WAIT: Duration = Duration::from_secs(20);

/// The node name the kubelet API serves as (its authorization's `nodes/proxy` name).
const REVIEWED_NODE: &str = "node-1";

/// The authorization these tests need, decided here: the API server's kubelet client
/// certificate (`system:masters`) may use `nodes/proxy` of this node, nobody else
/// anything. These tests are about the streams; the reviews themselves — the daemon's
/// reviewer asking a live API server through the kubelet's caches — are tested in
/// tests/kubelet_api.rs.
#[derive(Debug)]
struct ApiServerOnly;

impl AccessReviewer for ApiServerOnly {
    fn review_token<'a>(
        &'a self,
        _token: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
        Box::pin(async { Ok(None) })
    }

    fn review_access<'a>(
        &'a self,
        user: &'a UserInfo,
        access: &'a NodeAccess,
    ) -> futures::future::BoxFuture<'a, Result<(bool, String), ReviewError>> {
        let allowed = user.groups.iter().any(|g| g == "system:masters")
            && access.resource == "nodes"
            && access.name == REVIEWED_NODE;
        Box::pin(async move { Ok((allowed, String::new())) })
    }
}

fn reviewer() -> Arc<dyn AccessReviewer> {
    Arc::new(ApiServerOnly)
}

/// One recorded connection.
pub struct Recorded {
    /// The request line kubectl sent to the API server.
    pub request_line: String,
    /// Its `X-Stream-Protocol-Version` offers, in order.
    pub protocols: Vec<String>,
    /// Each client frame and how many server milestones came before it.
    pub client_frames: Vec<(Vec<u8>, usize)>,
}

impl Recorded {
    pub fn query(&self) -> Vec<(String, String)> {
        let target = self.request_line.split(' ').nth(1).unwrap();
        let (_, query) = target.split_once('?').unwrap();
        query
            .split('&')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    /// The kubelet's path for `pod`/`container`, with the query the API server makes of
    /// kubectl's (`stdin=true` → `input=1`, ... as the 1.20 API server does).
    pub fn kubelet_target(&self, namespace: &str, pod: &str, container: &str) -> String {
        let mut params = Vec::new();
        for (k, v) in self.query() {
            let on = if v == "true" { "1" } else { "0" };
            match k.as_str() {
                "command" => params.push(format!("command={v}")),
                "stdin" => params.push(format!("input={on}")),
                "stdout" => params.push(format!("output={on}")),
                "stderr" => params.push(format!("error={on}")),
                "tty" => params.push(format!("tty={on}")),
                _ => {}
            }
        }
        format!("/exec/{namespace}/{pod}/{container}?{}", params.join("&"))
    }

    pub fn command(&self) -> String {
        self.query()
            .into_iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every client stream's headers by id (its header blocks inflated in order).
    pub fn stream_headers(&self) -> HashMap<u32, HashMap<String, String>> {
        let mut inflater = Inflater::default();
        let mut all = HashMap::new();
        for (bytes, _) in &self.client_frames {
            if let Some((
                Frame::SynStream {
                    stream, headers: h, ..
                },
                _,
            )) = frame::parse(bytes).unwrap()
            {
                all.insert(stream, inflater.inflate(h).unwrap().into_iter().collect());
            }
        }
        all
    }

    /// The client's stream types by id (its header blocks inflated in order).
    pub fn stream_types(&self) -> HashMap<u32, String> {
        let mut inflater = Inflater::default();
        let mut types = HashMap::new();
        for (bytes, _) in &self.client_frames {
            if let Some((
                Frame::SynStream {
                    stream, headers: h, ..
                },
                _,
            )) = frame::parse(bytes).unwrap()
            {
                let h = inflater.inflate(h).unwrap();
                types.insert(stream, headers::get(&h, "streamtype").unwrap().to_string());
            }
        }
        types
    }
}

/// Server frames that the client's next move may wait for.
fn is_milestone(f: &Frame<'_>) -> bool {
    matches!(f, Frame::SynReply { .. } | Frame::Data { fin: true, .. })
}

/// Splits off an HTTP head (through the blank line) once it is complete.
fn take_head(buf: &mut Vec<u8>) -> Option<String> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head: Vec<u8> = buf.drain(..end).collect();
    Some(String::from_utf8(head).unwrap())
}

/// The connections recorded in `fixture` (relative to the crate), in order.
pub fn load_fixture(fixture: &str) -> Vec<Recorded> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut conns: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for line in text.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        conns
            .entry(row["conn"].as_u64().unwrap())
            .or_default()
            .push(row);
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    conns
        .into_values()
        .map(|rows| {
            let (mut client, mut server) = (Vec::new(), Vec::new());
            let (mut client_head, mut server_head) = (None, None);
            let mut milestones = 0;
            let mut client_frames = Vec::new();
            for row in rows {
                let bytes = b64.decode(row["b64"].as_str().unwrap()).unwrap();
                if row["from"] == "client" {
                    client.extend_from_slice(&bytes);
                    if client_head.is_none() {
                        client_head = take_head(&mut client);
                    }
                    if client_head.is_some() {
                        while let Some((_, used)) = frame::parse(&client).unwrap() {
                            client_frames.push((client.drain(..used).collect(), milestones));
                        }
                    }
                } else {
                    server.extend_from_slice(&bytes);
                    if server_head.is_none() {
                        server_head = take_head(&mut server);
                    }
                    if server_head.is_some() {
                        while let Some((f, used)) = frame::parse(&server).unwrap() {
                            milestones += usize::from(is_milestone(&f));
                            server.drain(..used);
                        }
                    }
                }
            }
            let head = client_head.expect("a recorded request");
            let request_line = head.lines().next().unwrap().to_string();
            let protocols = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .filter(|(k, _)| k.eq_ignore_ascii_case("x-stream-protocol-version"))
                .map(|(_, v)| v.trim().to_string())
                .collect();
            Recorded {
                request_line,
                protocols,
                client_frames,
            }
        })
        .collect()
}

/// What the live server answered on one connection.
#[derive(Debug, Default)]
pub struct Answer {
    pub head: String,
    pub data: HashMap<u32, Vec<u8>>,
    pub finished: Vec<u32>,
    pub go_away: bool,
}

impl Answer {
    pub fn text(&self, types: &HashMap<u32, String>, kind: &str) -> String {
        let id = types
            .iter()
            .find(|(_, t)| t.as_str() == kind)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("no {kind} stream"));
        String::from_utf8_lossy(self.data.get(&id).map_or(&[][..], |d| d)).into_owned()
    }

    pub fn status(&self, types: &HashMap<u32, String>) -> Value {
        let text = self.text(types, "error");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("status {text:?}: {e}"))
    }
}

pub struct Pki {
    ca_der: Vec<u8>,
    client_chain: Vec<CertificateDer<'static>>,
    client_key: Vec<u8>,
}

/// A cluster CA, the node's serving certificate for 127.0.0.1 in `dir`, and a client
/// certificate of the API server's kind (O=system:masters).
fn pki(dir: &std::path::Path) -> (Pki, Arc<rustls::ServerConfig>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "spdy-test-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let serving_key = KeyPair::generate().unwrap();
    let serving = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&serving_key, &issuer)
        .unwrap();
    std::fs::write(dir.join("node.crt"), serving.pem()).unwrap();
    std::fs::write(dir.join("node.key"), serving_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("ca.crt"), ca_cert.pem()).unwrap();
    let tls = podhost::api::kubelet::tls::server_config(
        &ServingCert::Files {
            cert: dir.join("node.crt"),
            key: dir.join("node.key"),
        },
        Some(&dir.join("ca.crt")),
    )
    .unwrap();
    let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver-kubelet-client");
    client_params
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client = client_params.signed_by(&client_key, &issuer).unwrap();
    (
        Pki {
            ca_der: ca_cert.der().to_vec(),
            client_chain: vec![client.der().clone()],
            client_key: client_key.serialize_der(),
        },
        tls,
    )
}

/// A TLS connection to the kubelet API with the client certificate.
pub async fn connect(
    addr: SocketAddr,
    pki: &Pki,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(pki.ca_der.clone())).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(
        pki.client_chain.clone(),
        PrivateKeyDer::Pkcs8(pki.client_key.clone().into()),
    )
    .unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap()
}

/// Replays `rec`'s client side on a new connection for `target`; the server's answer.
pub async fn replay(addr: SocketAddr, pki: &Pki, rec: &Recorded, target: &str) -> Answer {
    let tls = connect(addr, pki).await;
    let (mut rd, mut wr) = tokio::io::split(tls);
    let mut request = format!(
        "POST {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
    );
    for p in &rec.protocols {
        request.push_str(&format!("X-Stream-Protocol-Version: {p}\r\n"));
    }
    request.push_str("\r\n");
    wr.write_all(request.as_bytes()).await.unwrap();
    let (milestones_tx, mut milestones) = tokio::sync::watch::channel(0usize);
    let reader = tokio::spawn(async move {
        let mut answer = Answer::default();
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        let mut count = 0;
        loop {
            if answer.head.is_empty()
                && let Some(head) = take_head(&mut buf)
            {
                answer.head = head;
            }
            if !answer.head.is_empty() {
                while let Some((f, used)) = frame::parse(&buf).unwrap() {
                    count += usize::from(is_milestone(&f));
                    match f {
                        Frame::Data { stream, fin, data } => {
                            answer
                                .data
                                .entry(stream)
                                .or_default()
                                .extend_from_slice(data);
                            if fin {
                                answer.finished.push(stream);
                            }
                        }
                        Frame::GoAway { .. } => answer.go_away = true,
                        _ => {}
                    }
                    buf.drain(..used);
                }
                let _ = milestones_tx.send(count);
            }
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        answer
    });
    for (bytes, needed) in &rec.client_frames {
        tokio::time::timeout(WAIT, milestones.wait_for(|n| n >= needed))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{}: the server never sent the {needed} replies/stream ends kubectl had before its next frame",
                    rec.request_line
                )
            })
            .unwrap();
        wr.write_all(bytes).await.unwrap();
    }
    // Like kubectl, keep reading until the server ends the connection (after its
    // GOAWAY), and only then close this side.
    let answer = tokio::time::timeout(WAIT, reader)
        .await
        .expect("the server ends the connection")
        .unwrap();
    let _ = wr.shutdown().await;
    answer
}

/// A daemon running the static pod `manifest` (named `name`), and the kubelet API over
/// its state.
pub struct Setup {
    pub daemon: TestDaemon,
    pub namespace: String,
    pub pod: String,
    pub addr: SocketAddr,
    pub pki: Pki,
    server: tokio::task::JoinHandle<()>,
    _certs: tempfile::TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A daemon running the static pod `manifest` (named `name`), and the kubelet API over
/// its state.
pub async fn setup(name: &str, manifest: &str) -> Setup {
    assert!(require_root());
    let d = TestDaemon::start_on_machine_network(&[]);
    d.write_manifest(&format!("{name}.yaml"), manifest);
    serve_kubelet_api(d, name).await
}

/// The kubelet API over `d`'s state once its static pod `name` runs (`d` on the
/// machine's network, as [`setup`] starts it).
pub async fn serve_kubelet_api(d: TestDaemon, name: &str) -> Setup {
    let pod = d.wait_pod(name, "the pod Running", 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    // The daemon's records on disk, as its kubelet API would read them in memory.
    let layout = Layout::new(d.root.clone(), d.logs.clone());
    let store = wait_until(Duration::from_secs(10), "the pod's record on disk", || {
        let store = StatusStore::load(layout.clone(), &d.node);
        let running = store
            .find_pod(Some(&namespace), &name)
            .ok()
            .is_some_and(|rec| {
                rec.status
                    .container_statuses
                    .as_ref()
                    .into_iter()
                    .flatten()
                    .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            });
        running.then_some(store)
    })
    .expect("the daemon wrote the running pod's record");
    let certs = tempfile::tempdir().unwrap();
    let (pki, tls) = pki(certs.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server = podhost::api::kubelet::serve_listener(
        listener,
        tls,
        KubeletApiState {
            store: Arc::new(store),
            port_forward: Arc::new(podhost::daemon::PodPortForwarder::new(layout.clone())),
            // The statistics paths are tested live (scripts/cluster-test.sh).
            stats: None,
            layout,
            // The node the reviewer allows the API server's certificate on.
            node_name: REVIEWED_NODE.to_string(),
            reviewer: reviewer(),
            podhost_exe: std::path::PathBuf::from(crate::common::BIN),
        },
    );
    Setup {
        daemon: d,
        namespace,
        pod: name,
        addr,
        pki,
        server,
        _certs: certs,
    }
}
