//! `kubectl exec` over SPDY/3.1, replayed: tests/fixtures/cluster/exec-spdy.jsonl holds
//! the bytes a real kubectl 1.32 sent (KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false, through
//! a 1.20 API server, which passes the upgraded connection through unchanged), recorded
//! by scripts/cluster/record-exec-spdy-fixture.sh. Each recorded connection's client
//! side — its SYN_STREAMs with zlib header blocks of one compression stream, stdin
//! DATA, FIN, resize messages, RST_STREAMs, GOAWAY — is written byte for byte to the
//! kubelet API over real TLS, against a real container of a real daemon (busybox), and
//! the answers are checked: stdout, stderr, the v4 exit status (Success, or
//! NonZeroExitCode with the code), stdin echoed back, and on a terminal `tty` and
//! `stty size` from the recorded resize.
//!
//! The daemon serves the kubelet API only in cluster mode (an API server is needed for
//! that), so the test serves it itself with `podhost::api::kubelet::serve` over the
//! daemon's own state directory (its pods' records, its libcontainer root): the exec
//! path — the SPDY session, `podhost exec-helper`, libcontainer's tenant exec, the pty —
//! is the daemon's. The access review is a stand-in that allows `system:masters` (the
//! real reviews are exercised by scripts/cluster-test.sh).
//!
//! Replay order: kubectl waits for each SYN_REPLY before opening its next stream, and
//! resets its streams only after the status arrived. So each client frame is written
//! once the live server has sent as many "milestones" (SYN_REPLYs and stream ends) as
//! the recorded server had before that frame — the causality of the recording, not its
//! timing. A second test drives the websocket path's terminal with this test's own
//! websocket client (no kubectl bytes there).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::FutureExt;
use futures::future::BoxFuture;
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

use common::{TestDaemon, busybox_pod, phase, require_root, wait_until};

const FIXTURE: &str = "tests/fixtures/cluster/exec-spdy.jsonl";
const WAIT: Duration = Duration::from_secs(20);

/// Allows `system:masters`, as the API server's client certificate is.
#[derive(Debug)]
struct Masters;

impl AccessReviewer for Masters {
    fn review_token<'a>(
        &'a self,
        _token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
        async { Ok(None) }.boxed()
    }

    fn review_access<'a>(
        &'a self,
        user: &'a UserInfo,
        _access: &'a NodeAccess,
    ) -> BoxFuture<'a, Result<(bool, String), ReviewError>> {
        let allowed = user.groups.iter().any(|g| g == "system:masters");
        async move { Ok((allowed, String::new())) }.boxed()
    }
}

/// One recorded connection.
struct Recorded {
    /// The request line kubectl sent to the API server.
    request_line: String,
    /// Its `X-Stream-Protocol-Version` offers, in order.
    protocols: Vec<String>,
    /// Each client frame and how many server milestones came before it.
    client_frames: Vec<(Vec<u8>, usize)>,
}

impl Recorded {
    fn query(&self) -> Vec<(String, String)> {
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
    fn kubelet_target(&self, namespace: &str, pod: &str, container: &str) -> String {
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

    fn command(&self) -> String {
        self.query()
            .into_iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The client's stream types by id (its header blocks inflated in order).
    fn stream_types(&self) -> HashMap<u32, String> {
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

fn load_fixture() -> Vec<Recorded> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
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
struct Answer {
    head: String,
    data: HashMap<u32, Vec<u8>>,
    finished: Vec<u32>,
    go_away: bool,
}

impl Answer {
    fn text(&self, types: &HashMap<u32, String>, kind: &str) -> String {
        let id = types
            .iter()
            .find(|(_, t)| t.as_str() == kind)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("no {kind} stream"));
        String::from_utf8_lossy(self.data.get(&id).map_or(&[][..], |d| d)).into_owned()
    }

    fn status(&self, types: &HashMap<u32, String>) -> Value {
        let text = self.text(types, "error");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("status {text:?}: {e}"))
    }
}

struct Pki {
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
async fn connect(
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
async fn replay(addr: SocketAddr, pki: &Pki, rec: &Recorded, target: &str) -> Answer {
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

/// A daemon with one running busybox pod (`sleep`), and the kubelet API over its state.
struct Setup {
    _daemon: TestDaemon,
    namespace: String,
    pod: String,
    addr: SocketAddr,
    pki: Pki,
    server: tokio::task::JoinHandle<()>,
    _certs: tempfile::TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn setup() -> Setup {
    assert!(require_root());
    let d = TestDaemon::start_on_machine_network(&[]);
    d.write_manifest(
        "execpod.yaml",
        &busybox_pod("execpod", "", "", "sleep 3600"),
    );
    let pod = d.wait_pod("execpod", "execpod Running", 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    // The daemon's records on disk, as its kubelet API would read them in memory.
    let layout = Layout::new(d.root.clone(), d.logs.clone());
    let full = format!("{namespace}/{name}");
    let store = wait_until(Duration::from_secs(10), "the pod's record on disk", || {
        let store = StatusStore::load(layout.clone(), &d.node);
        let running = store.find_by_name(&full).is_some_and(|rec| {
            rec.pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        });
        running.then_some(store)
    })
    .expect("the daemon wrote the running pod's record");
    let certs = tempfile::tempdir().unwrap();
    let (pki, tls) = pki(certs.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let server = podhost::api::kubelet::serve(
        addr,
        tls,
        KubeletApiState {
            store: Arc::new(store),
            layout,
            node_name: d.node.clone(),
            reviewer: Arc::new(Masters),
            podhost_exe: std::path::PathBuf::from(common::BIN),
        },
    )
    .await
    .unwrap();
    Setup {
        _daemon: d,
        namespace,
        pod: name,
        addr,
        pki,
        server,
        _certs: certs,
    }
}

fn find<'a>(recorded: &'a [Recorded], command: &str) -> &'a Recorded {
    recorded
        .iter()
        .find(|r| r.command().contains(command))
        .unwrap_or_else(|| panic!("{FIXTURE} has no exec of {command:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectls_spdy_exec_bytes_replayed_against_a_real_container() {
    let recorded = load_fixture();
    assert_eq!(recorded.len(), 3, "the fixture's three execs");
    let s = setup().await;
    let target = |rec: &Recorded| rec.kubelet_target(&s.namespace, &s.pod, "main");

    // 1. stdin echoed by cat, a line on stderr, exit 3.
    let rec = find(&recorded, "cat");
    let types = rec.stream_types();
    let answer = replay(s.addr, &s.pki, rec, &target(rec)).await;
    assert!(
        answer.head.starts_with("HTTP/1.1 101"),
        "answer: {}",
        answer.head
    );
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("x-stream-protocol-version: v4.channel.k8s.io"),
        "v4 is chosen from kubectl's offers {:?}: {}",
        rec.protocols,
        answer.head
    );
    assert_eq!(
        answer.text(&types, "stdout"),
        "hello spdy\n",
        "stdin came back; the whole answer: {answer:?}, streams {types:?}"
    );
    assert_eq!(answer.text(&types, "stderr"), "to-stderr\n");
    let status = answer.status(&types);
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
    for kind in ["error", "stdout", "stderr"] {
        let id = types.iter().find(|(_, t)| *t == kind).unwrap().0;
        assert!(answer.finished.contains(id), "{kind} stream ended with FIN");
    }
    assert!(answer.go_away, "the server said GOAWAY");

    // 2. stdout only, success.
    let rec = find(&recorded, "echo ok");
    let types = rec.stream_types();
    let answer = replay(s.addr, &s.pki, rec, &target(rec)).await;
    assert_eq!(answer.text(&types, "stdout"), "ok\n");
    assert_eq!(answer.status(&types)["status"], "Success");

    // 3. a terminal: its name in the container and the size kubectl sent (30x100).
    let rec = find(&recorded, "stty");
    let types = rec.stream_types();
    assert!(
        types.values().any(|t| t == "resize"),
        "kubectl opened a resize stream"
    );
    let answer = replay(s.addr, &s.pki, rec, &target(rec)).await;
    let out = answer.text(&types, "stdout");
    let lines: Vec<&str> = out.split("\r\n").collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start_matches("^@").starts_with("/dev/pts/")),
        "tty names a pty of the container: {out:?}"
    );
    assert!(
        lines.contains(&"30 100"),
        "stty size after the resize: {out:?}"
    );
    assert_eq!(answer.status(&types)["status"], "Success");
}

/// The websocket path's terminal, driven by this test's own websocket client (as
/// kubectl 1.30+ would by default): the resize message (channel 4) sent first, then the
/// output of `tty; stty size` on channel 1 and the status on channel 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_exec_with_a_terminal_gets_a_pty_and_its_size() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let s = setup().await;
    let target = format!(
        "/exec/{}/{}/main?command=sh&command=-c&command=tty%3B+stty+size&input=1&output=1&tty=1",
        s.namespace, s.pod
    );
    let mut request = format!("wss://{}{target}", s.addr)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "sec-websocket-protocol",
        "v5.channel.k8s.io".parse().unwrap(),
    );
    let tls = connect(s.addr, &s.pki).await;
    let (mut ws, response) = tokio_tungstenite::client_async(request, tls).await.unwrap();
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "v5.channel.k8s.io"
    );
    let mut resize = vec![4u8];
    resize.extend_from_slice(br#"{"Width":120,"Height":40}"#);
    ws.send(Message::binary(resize)).await.unwrap();
    let (mut stdout, mut status) = (Vec::new(), Vec::new());
    let read = async {
        while let Some(Ok(message)) = ws.next().await {
            match message {
                Message::Binary(b) if b.first() == Some(&1) => stdout.extend_from_slice(&b[1..]),
                Message::Binary(b) if b.first() == Some(&3) => status.extend_from_slice(&b[1..]),
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the exec ends");
    let out = String::from_utf8_lossy(&stdout).into_owned();
    let lines: Vec<&str> = out.split("\r\n").collect();
    assert!(
        lines.iter().any(|l| l.starts_with("/dev/pts/")),
        "tty names a pty of the container: {out:?}"
    );
    assert!(
        lines.contains(&"40 120"),
        "stty size after the resize: {out:?}"
    );
    let status: Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(status["status"], "Success", "{status}");
}
