//! A tiny Docker token server (<https://distribution.github.io/distribution/spec/auth/token/>)
//! for a registry started with `auth: token:`, so that registry tests exercise
//! the real bearer flow: the registry answers `401` with
//! `WWW-Authenticate: Bearer realm=…,service=…,scope=…`, the client asks this
//! server for a token with its basic credentials, and the registry verifies the
//! returned JWT against the certificate in its `rootcertbundle`.
//!
//! Plain HTTP/1.1 on 127.0.0.1, one connection at a time (`Connection: close`),
//! served by one thread that stops when the [`TokenServer`] drops. JWTs are
//! RS256, signed by the `openssl` CLI with a key generated per server; the
//! self-signed certificate goes in the header's `x5c` (distribution 2.x checks
//! that chain against its `rootcertbundle`, which is that same certificate).

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The `service` (the JWT's `aud`) the registry is configured with.
pub const SERVICE: &str = "podhost-test";
/// The `issuer` (the JWT's `iss`) the registry trusts.
pub const ISSUER: &str = "podhost-test-issuer";
/// How long a token is valid, in seconds.
const TOKEN_TTL: u64 = 300;
/// How long the accept loop sleeps when nobody connects; bounds how long a drop waits.
const POLL: Duration = Duration::from_millis(10);
/// A client that connects and then sends nothing must not wedge the server.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// A token request is one short request line plus a few headers.
const MAX_HEAD: usize = 16 * 1024;

/// One request the token server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// The user from the `Authorization: Basic` header, whatever its password.
    pub user: Option<String>,
    /// The `service` query parameter.
    pub service: Option<String>,
    /// The `scope` query parameters, as sent.
    pub scopes: Vec<String>,
    /// 200 (token issued), 401 (no or wrong credentials), 400, 404, 405, 500.
    pub status: u16,
    /// The scopes granted, `type:name:action,action` (empty unless 200).
    pub granted: Vec<String>,
}

/// What the server thread shares with the handle.
struct Shared {
    user: String,
    password: String,
    key: PathBuf,
    /// The certificate's DER, standard base64 (the `x5c` entry).
    cert_b64: String,
    requests: Mutex<Vec<TokenRequest>>,
    /// Makes every `jti` unique within the server's life.
    serial: AtomicU64,
}

/// A running token server; stopped (thread joined, port closed) on drop.
pub struct TokenServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The certificate the registry must trust (`rootcertbundle`).
    pub cert: PathBuf,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TokenServer {
    /// Generates a key and a self-signed certificate in `dir` and starts serving
    /// tokens to `user` / `password` (pull and push on every repository).
    pub fn start(dir: &Path, user: &str, password: &str) -> TokenServer {
        let key = dir.join("token-key.pem");
        let cert = dir.join("token-cert.pem");
        let out = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=podhost-test-token-issuer", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdin(Stdio::null())
            .output()
            .expect("run openssl req");
        assert!(
            out.status.success(),
            "openssl req (token signing key) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pem = fs::read_to_string(&cert).expect("read the token certificate");
        // A PEM body is the standard base64 of the DER that `x5c` wants.
        let cert_b64: String = pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect::<Vec<_>>()
            .concat();
        assert!(!cert_b64.is_empty(), "no certificate in {pem}");

        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the token server");
        // Non-blocking accept so the thread can notice `stop` without a wake-up connection.
        listener
            .set_nonblocking(true)
            .expect("non-blocking token listener");
        let addr = listener
            .local_addr()
            .expect("token server address")
            .to_string();
        let shared = Arc::new(Shared {
            user: user.to_string(),
            password: password.to_string(),
            key,
            cert_b64,
            requests: Mutex::new(Vec::new()),
            serial: AtomicU64::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let shared = shared.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("token-server".into())
                .spawn(move || serve(&listener, &shared, &stop))
                .expect("spawn the token server thread")
        };
        TokenServer {
            addr,
            cert,
            shared,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://ADDR/token`, the realm the registry sends clients to.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// The `auth:` block of the registry's config.yml.
    pub fn registry_auth_block(&self) -> String {
        format!(
            "auth:\n  token:\n    realm: {}\n    service: {SERVICE}\n    issuer: {ISSUER}\n    \
             rootcertbundle: {}\n",
            self.realm(),
            self.cert.display()
        )
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<TokenRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many tokens were issued to `user`.
    pub fn tokens_issued_to(&self, user: &str) -> usize {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.status == 200 && r.user.as_deref() == Some(user))
            .count()
    }

    /// The user of the last request that had an `Authorization` header.
    pub fn last_user(&self) -> Option<String> {
        lock(&self.shared.requests)
            .iter()
            .rev()
            .find_map(|r| r.user.clone())
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            // A panic in the server thread already failed the request it was
            // serving; re-panicking in drop would only abort the test binary.
            let _ = thread.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide its own failure
    // behind a poison panic here.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The accept loop; returns (closing the listener) once `stop` is set.
fn serve(listener: &TcpListener, shared: &Shared, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = handle(stream, shared) {
                    eprintln!("token server: connection failed: {e}");
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!("token server: accept failed: {e}");
                std::thread::sleep(POLL);
            }
        }
    }
}

/// Reads one request, answers it and closes the connection.
fn handle(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    // The listener is non-blocking; the accepted socket must block (with timeouts).
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut head = Vec::new();
    let mut total = 0;
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line)?;
        total += n;
        if n == 0 || total > MAX_HEAD {
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                "request head truncated or too long",
            ));
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let (status, body, record) = answer(&head, shared);
    lock(&shared.requests).push(record);
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Internal Server Error",
    };
    let challenge = if status == 401 {
        "WWW-Authenticate: Basic realm=\"podhost-test-token\"\r\n"
    } else {
        ""
    };
    let mut w = stream;
    write!(
        w,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n{challenge}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    w.flush()
}

/// The status and JSON body for a request head, and what to record of it.
fn answer(head: &[String], shared: &Shared) -> (u16, String, TokenRequest) {
    let error = |code: &str, message: &str| {
        json!({"errors": [{"code": code, "message": message, "detail": null}]}).to_string()
    };
    let mut parts = head.first().map(|l| l.split(' ')).into_iter().flatten();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut service = None;
    let mut scopes = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match percent_decode(k).as_str() {
            "service" => service = Some(percent_decode(v)),
            // Several resources come as several `scope` parameters.
            "scope" => scopes.push(percent_decode(v)),
            _ => {}
        }
    }
    let basic = head.iter().skip(1).find_map(|h| {
        let (name, value) = h.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        let (scheme, cred) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = String::from_utf8(b64_decode(cred.trim())?).ok()?;
        let (u, p) = decoded.split_once(':')?;
        Some((u.to_string(), p.to_string()))
    });
    let mut record = TokenRequest {
        user: basic.as_ref().map(|(u, _)| u.clone()),
        service: service.clone(),
        scopes: scopes.clone(),
        status: 0,
        granted: Vec::new(),
    };
    // Only the GET form: the OAuth2 POST form is for identity (refresh) tokens,
    // which neither podhost nor skopeo-with-a-password uses.
    let (status, body) = if path != "/token" {
        (404, error("NOT_FOUND", "only /token is served"))
    } else if method != "GET" {
        (405, error("UNSUPPORTED", "only GET /token"))
    } else if service.as_deref() != Some(SERVICE) {
        let message = format!("service must be {SERVICE:?}");
        (400, error("INVALID_SERVICE", &message))
    } else {
        match &basic {
            None => (401, error("UNAUTHORIZED", "authentication required")),
            Some((u, p)) if *u != shared.user || *p != shared.password => {
                let message = format!("invalid username or password for {u:?}");
                (401, error("UNAUTHORIZED", &message))
            }
            Some((user, _)) => {
                let access = grant(&scopes);
                record.granted = access.iter().map(scope_string).collect();
                match issue(shared, user, &access) {
                    Ok(body) => (200, body),
                    Err(e) => {
                        eprintln!("token server: {e}");
                        record.granted.clear();
                        (500, error("UNKNOWN", &e))
                    }
                }
            }
        }
    };
    record.status = status;
    (status, body, record)
}

/// `type:name:action,action` of one `access` entry.
fn scope_string(a: &Value) -> String {
    let actions: Vec<&str> = a["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    format!(
        "{}:{}:{}",
        a["type"].as_str().unwrap_or(""),
        a["name"].as_str().unwrap_or(""),
        actions.join(",")
    )
}

/// The `access` claim for an authenticated user's scopes: of what was asked,
/// only `pull` and `push` on repositories (nothing more than was asked).
fn grant(scopes: &[String]) -> Vec<Value> {
    let mut access = Vec::new();
    for scope in scopes {
        // `repository:NAME:ACTIONS`; the name has no ':' (a registry host is not
        // part of it), but split from both ends anyway.
        let Some((kind, rest)) = scope.split_once(':') else {
            continue;
        };
        let Some((name, actions)) = rest.rsplit_once(':') else {
            continue;
        };
        if kind != "repository" || name.is_empty() {
            continue;
        }
        let allowed: Vec<&str> = actions
            .split(',')
            .filter(|a| matches!(*a, "pull" | "push"))
            .collect();
        if !allowed.is_empty() {
            access.push(json!({"type": kind, "name": name, "actions": allowed}));
        }
    }
    access
}

/// The token response body: an RS256 JWT for `user` with `access`.
fn issue(shared: &Shared, user: &str, access: &[Value]) -> Result<String, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| format!("clock before 1970: {e}"))?
        .as_secs();
    let serial = shared.serial.fetch_add(1, Ordering::SeqCst);
    let header = json!({"typ": "JWT", "alg": "RS256", "x5c": [shared.cert_b64]});
    let claims = json!({
        "iss": ISSUER,
        "sub": user,
        "aud": SERVICE,
        "exp": now + TOKEN_TTL,
        "nbf": now,
        "iat": now,
        "jti": format!("{}-{now}-{serial}", std::process::id()),
        "access": access,
    });
    let signing_input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let signature = sign(&shared.key, signing_input.as_bytes())?;
    let jwt = format!("{signing_input}.{}", b64url(&signature));
    let issued_at = chrono::DateTime::from_timestamp(now as i64, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    // Both names: docker reads `token`, OAuth2 clients `access_token`.
    Ok(json!({
        "token": jwt,
        "access_token": jwt,
        "expires_in": TOKEN_TTL,
        "issued_at": issued_at,
    })
    .to_string())
}

/// RSASSA-PKCS1-v1_5 with SHA-256 (JWS `RS256`) over `data`, by the openssl CLI.
fn sign(key: &Path, data: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run openssl dgst: {e}"))?;
    // The input is a few hundred bytes; writing it all before reading cannot
    // deadlock on a full pipe.
    child
        .stdin
        .take()
        .ok_or("no stdin for openssl")?
        .write_all(data)
        .map_err(|e| format!("writing to openssl dgst: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for openssl dgst: {e}"))?;
    if !out.status.success() || out.stdout.is_empty() {
        return Err(format!(
            "openssl dgst -sign failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64url without padding (JWS compact serialization).
pub fn b64url(data: &[u8]) -> String {
    b64_encode(data)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// Standard base64 with padding.
pub fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | u32::from(c) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 (padding optional); `None` if it is not base64.
pub fn b64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = u32::try_from(B64.iter().position(|&b| b == c)?).ok()?;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from(acc >> bits).ok()?);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Decodes `%XX` and `+` (form encoding, as reqwest and Go's url package send).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push(u8::try_from(h * 16 + l).unwrap());
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET target` on `addr` with an optional basic `user:password`: (status, body).
    fn get(addr: &str, target: &str, basic: Option<&str>) -> (u16, String) {
        use std::io::Read;
        let mut s = TcpStream::connect(addr).expect("connect to the token server");
        let auth = basic
            .map(|b| format!("Authorization: Basic {}\r\n", b64_encode(b.as_bytes())))
            .unwrap_or_default();
        write!(s, "GET {target} HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        let (head, body) = reply.split_once("\r\n\r\n").expect("a complete response");
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok());
        (status.expect("a status line"), body.to_string())
    }

    /// Issues tokens only to the right user, and stops listening when dropped.
    #[test]
    fn serves_tokens_and_stops_on_drop() {
        super::super::ensure_tools(&[("openssl", "openssl")]);
        let dir = tempfile::tempdir().unwrap();
        let server = TokenServer::start(dir.path(), "alice", "s3cret");
        let addr = server.addr.clone();
        let target = format!("/token?service={SERVICE}&scope=repository%3Abusybox%3Apull%2Cdelete");
        assert_eq!(get(&addr, &target, None).0, 401);
        let (status, body) = get(&addr, &target, Some("alice:wrong"));
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("invalid username or password"), "{body}");
        let (status, body) = get(&addr, &target, Some("alice:s3cret"));
        assert_eq!(status, 200, "{body}");
        let reply: Value = serde_json::from_str(&body).unwrap();
        let jwt = reply["token"].as_str().unwrap();
        assert_eq!(reply["access_token"], reply["token"]);
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3, "{jwt}");
        let b64 = |p: &str| b64_decode(&p.replace('-', "+").replace('_', "/")).unwrap();
        let header: Value = serde_json::from_slice(&b64(parts[0])).unwrap();
        assert_eq!(header["alg"], "RS256");
        let claims: Value = serde_json::from_slice(&b64(parts[1])).unwrap();
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["aud"], SERVICE);
        assert_eq!(
            claims["access"],
            json!([{"type": "repository", "name": "busybox", "actions": ["pull"]}])
        );
        assert_eq!(b64(parts[2]).len(), 256, "an RSA-2048 signature");
        assert_eq!(server.tokens_issued_to("alice"), 1);
        assert_eq!(server.requests().len(), 3);
        assert_eq!(server.last_user().as_deref(), Some("alice"));

        drop(server);
        let refused = TcpStream::connect(&addr).map(|_| ()).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
    }

    #[test]
    fn base64_round_trips() {
        assert_eq!(b64url(b"a"), "YQ");
        assert_eq!(b64url(b"ab"), "YWI");
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(b64_encode(b"a"), "YQ==");
        assert_eq!(b64_encode(b"alice:wrong"), "YWxpY2U6d3Jvbmc=");
        assert_eq!(b64_decode("YWxpY2U6czNjcmV0").unwrap(), b"alice:s3cret");
        assert_eq!(b64_decode("YQ==").unwrap(), b"a");
        assert_eq!(b64_decode("YWI=").unwrap(), b"ab");
        assert!(b64_decode("a!b").is_none());
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(
            percent_decode("repository%3Abusybox%3Apull%2Cpush"),
            "repository:busybox:pull,push"
        );
        assert_eq!(percent_decode("a+b%2"), "a b%2");
    }

    #[test]
    fn grants_only_pull_and_push_on_repositories() {
        let g = grant(&[
            "repository:busybox:pull,push,delete".into(),
            "registry:catalog:*".into(),
            "repository:a/b:pull".into(),
        ]);
        assert_eq!(
            g,
            vec![
                json!({"type": "repository", "name": "busybox", "actions": ["pull", "push"]}),
                json!({"type": "repository", "name": "a/b", "actions": ["pull"]}),
            ]
        );
    }
}
