//! A small HTTP(S) server for the `--manifest-url` tests: std `TcpListener` on
//! 127.0.0.1 in a thread, answering every GET with the status and body set last, and
//! recording each request's headers. HTTPS through rustls with a certificate signed by
//! a throwaway CA made with the `openssl` command. Stopped (thread joined) on drop.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// One request as received: its header lines, names lowercased.
pub type Headers = Vec<(String, String)>;

struct Answer {
    status: String,
    body: Vec<u8>,
}

pub struct ManifestServer {
    pub addr: SocketAddr,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<Mutex<Vec<Headers>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ManifestServer {
    /// Plain HTTP.
    pub fn http() -> Self {
        Self::start(None)
    }

    /// HTTPS with the certificate and key of `tls` ([`TestCa::server_files`]).
    pub fn https(cert: &Path, key: &Path) -> Self {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("read the server certificate")
            .collect::<Result<_, _>>()
            .expect("parse the server certificate");
        let key = PrivateKeyDer::from_pem_file(key).expect("read the server key");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("the server certificate and key");
        Self::start(Some(Arc::new(config)))
    }

    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let answer = Arc::new(Mutex::new(Answer {
            status: "200 OK".into(),
            body: Vec::new(),
        }));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, r, s) = (answer.clone(), requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
                match &tls {
                    None => serve(conn, &a, &r),
                    Some(config) => {
                        let Ok(session) = rustls::ServerConnection::new(config.clone()) else {
                            continue;
                        };
                        serve(rustls::StreamOwned::new(session, conn), &a, &r);
                    }
                }
            }
        });
        Self {
            addr,
            answer,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// What every following GET gets.
    pub fn set(&self, status: &str, body: &str) {
        *self.answer.lock().unwrap() = Answer {
            status: status.into(),
            body: body.as_bytes().to_vec(),
        };
    }

    /// The headers of every request so far.
    pub fn requests(&self) -> Vec<Headers> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for ManifestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head, records its headers, and answers it (then closes).
fn serve(mut conn: impl Read + Write, answer: &Mutex<Answer>, requests: &Mutex<Vec<Headers>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head);
    let headers = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    requests.lock().unwrap().push(headers);
    let (status, body) = {
        let a = answer.lock().unwrap();
        (a.status.clone(), a.body.clone())
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/yaml\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    let _ = conn.write_all(&response);
    let _ = conn.flush();
}

/// A throwaway CA and a server certificate for 127.0.0.1 it signed (P-256 keys).
pub struct TestCa {
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

impl TestCa {
    /// Makes the files in `dir` with the `openssl` command (the test fails without it).
    pub fn new(dir: &Path) -> Self {
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("the openssl command is needed to make the test certificates");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=podhost test CA",
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            ]
            .concat(),
        );
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ]);
        Self {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
        }
    }
}
