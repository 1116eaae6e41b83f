//! A small blocking HTTP/1.1 client over the unix socket, for the CLI.
//!
//! Blocking and single-threaded on purpose: `podhost exec` calls libcontainer in the
//! same process afterwards, which must not have other threads (see
//! docs/architecture.md, "What runs").

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Client errors; each names the socket and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon is not listening on the socket.
    #[error(
        "cannot reach the podhost daemon at {socket}: {source} (is `podhost daemon` running? see --socket)"
    )]
    Connect {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The connection failed mid-way.
    #[error("talking to the daemon at {socket}: {source}")]
    Io {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The daemon answered with an error status.
    #[error("{message}")]
    Status { code: u16, message: String },
    /// The answer is not what this CLI understands.
    #[error("unexpected answer from the daemon: {0}")]
    Protocol(String),
}

/// One request's answer: status code and (for non-streamed calls) the body.
pub struct Answer {
    pub code: u16,
    pub body: Vec<u8>,
}

pub struct Client {
    socket: PathBuf,
}

impl Client {
    pub fn new(socket: &Path) -> Self {
        Self {
            socket: socket.to_path_buf(),
        }
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            socket: self.socket.clone(),
            source,
        }
    }

    /// Sends a request and streams a successful answer's body into `sink` as it arrives;
    /// an error status (≥ 400) becomes [`ClientError::Status`] with the daemon's message.
    pub fn request_streaming(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<u16, ClientError> {
        let mut error_body: Option<Vec<u8>> = None;
        let code = self.raw(method, path, body, &mut |code, chunk| {
            if code >= 400 {
                error_body
                    .get_or_insert_with(Vec::new)
                    .extend_from_slice(chunk);
                Ok(())
            } else {
                sink(chunk)
            }
        })?;
        if code >= 400 {
            let out = error_body.unwrap_or_default();
            let message = serde_json::from_slice::<super::types::ApiStatus>(&out)
                .map(|s| s.message)
                .unwrap_or_else(|_| String::from_utf8_lossy(&out).into_owned());
            return Err(ClientError::Status { code, message });
        }
        Ok(code)
    }

    fn raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        sink: &mut dyn FnMut(u16, &[u8]) -> std::io::Result<()>,
    ) -> Result<u16, ClientError> {
        let mut stream =
            UnixStream::connect(&self.socket).map_err(|source| ClientError::Connect {
                socket: self.socket.clone(),
                source,
            })?;
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: podhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .and_then(|_| stream.write_all(body))
            .map_err(|e| self.io(e))?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| self.io(e))?;
        let code: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| ClientError::Protocol(line.trim().to_string()))?;
        let mut chunked = false;
        let mut length: Option<usize> = None;
        loop {
            line.clear();
            reader.read_line(&mut line).map_err(|e| self.io(e))?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let lower = l.to_ascii_lowercase();
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().ok();
            }
        }
        if chunked {
            loop {
                line.clear();
                reader.read_line(&mut line).map_err(|e| self.io(e))?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                    .map_err(|_| ClientError::Protocol(format!("bad chunk size {line:?}")))?;
                if size == 0 {
                    break;
                }
                let mut buf = vec![0; size];
                reader.read_exact(&mut buf).map_err(|e| self.io(e))?;
                sink(code, &buf).map_err(|e| self.io(e))?;
                line.clear();
                reader.read_line(&mut line).map_err(|e| self.io(e))?;
            }
        } else {
            let mut buf = Vec::new();
            match length {
                Some(n) => {
                    buf.resize(n, 0);
                    reader.read_exact(&mut buf).map_err(|e| self.io(e))?;
                }
                None => {
                    reader.read_to_end(&mut buf).map_err(|e| self.io(e))?;
                }
            }
            sink(code, &buf).map_err(|e| self.io(e))?;
        }
        Ok(code)
    }

    /// Sends a request and returns the whole answer; error statuses become `Status` errors.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Answer, ClientError> {
        let mut out = Vec::new();
        let code = self.request_streaming(method, path, body, &mut |b| {
            out.extend_from_slice(b);
            Ok(())
        })?;
        Ok(Answer { code, body: out })
    }

    /// GET and decode JSON.
    pub fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let a = self.request("GET", path, None)?;
        serde_json::from_slice(&a.body).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}
