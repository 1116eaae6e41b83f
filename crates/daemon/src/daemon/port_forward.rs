//! The API's `POST /pods/NAME/portforward`: connections into pods, made the way the
//! kubelet (through containerd) makes them: to localhost:PORT inside the pod's network
//! namespace, IPv4 127.0.0.1 first, then ::1. A hostNetwork pod's loopback is the
//! daemon's own. The socket is made by `runtime::netns_connect` on a thread of its own,
//! so no tokio thread ever changes namespace.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::net::TcpStream;

use podhost_api::{PortForwardRefused, PortForwardTarget};
use podhost_disk::Layout;
use podhost_runtime::RuntimeError;
use podhost_status::PodRecord;

/// How long one connect (per address family) may take. The target is the pod's own
/// loopback, so anything but an immediate answer means the pod is wedged.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a connection into a pod was not made; each names the pod, the port and why.
#[derive(Debug, thiserror::Error)]
pub enum PortForwardError {
    /// The pod's network namespace is not (or no longer) pinned: it is starting or
    /// stopping.
    #[error(
        "pod \"{pod}\" has no network namespace at {} (it is starting or stopping); wait until it runs",
        path.display()
    )]
    NoNamespace { pod: String, path: PathBuf },
    /// podhost could not enter the namespace (its own failure, not the pod's).
    #[error("error forwarding port {port} to pod {pod}, uid {uid}: {source}")]
    Enter {
        pod: String,
        uid: String,
        port: u16,
        #[source]
        source: RuntimeError,
    },
    /// Nothing accepted the connection on either loopback address.
    #[error(
        "error forwarding port {port} to pod {pod}, uid {uid}: failed to connect to localhost:{port} inside {place}: IPv4: dial tcp4 127.0.0.1:{port}: {}; IPv6: dial tcp6 [::1]:{port}: {}",
        dial_error(v4),
        dial_error(v6)
    )]
    Connect {
        pod: String,
        uid: String,
        port: u16,
        /// "the pod's network namespace <path>" or "the host's network (hostNetwork)".
        place: String,
        v4: io::Error,
        v6: io::Error,
    },
}

/// A failed connect as Go (and so the kubelet's message) words it: `connect:
/// connection refused`, without Rust's `(os error 111)`.
fn dial_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = nix::errno::Errno::from_raw(code).desc();
            let mut chars = text.chars();
            let first = chars.next().map(|c| c.to_ascii_lowercase());
            format!(
                "connect: {}{}",
                first.into_iter().collect::<String>(),
                chars.as_str()
            )
        }
        None => e.to_string(),
    }
}

impl PortForwardError {
    /// The API answer's status: 409 for a pod not in a state to connect to, 502 for the
    /// pod's port refusing, 500 for podhost's own failure.
    fn status(&self) -> u16 {
        match self {
            Self::NoNamespace { .. } => 409,
            Self::Connect { .. } => 502,
            Self::Enter { .. } => 500,
        }
    }
}

/// Connects into pods through their pinned network namespaces under the root dir.
#[derive(Debug, Clone)]
pub struct PodPortForwarder {
    layout: Layout,
}

impl PodPortForwarder {
    pub fn new(layout: Layout) -> Self {
        Self { layout }
    }

    /// Connects to `port` on the pod's loopback: 127.0.0.1, then ::1.
    pub async fn connect_to_pod(
        &self,
        pod: &PodRecord,
        port: u16,
    ) -> Result<TcpStream, PortForwardError> {
        let (name, uid) = (pod.name().to_string(), pod.uid().to_string());
        let host_network = pod
            .admitted
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let netns = (!host_network).then(|| self.layout.pod_ns_dir(&uid).join("net"));
        if let Some(path) = netns.as_ref().filter(|p| !p.exists()) {
            return Err(PortForwardError::NoNamespace {
                pod: name,
                path: path.clone(),
            });
        }
        let enter_failed = |source| PortForwardError::Enter {
            pod: name.clone(),
            uid: uid.clone(),
            port,
            source,
        };
        let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let v4_error = match connect(netns.as_deref(), v4).await.map_err(enter_failed)? {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port);
        let v6_error = match connect(netns.as_deref(), v6).await.map_err(enter_failed)? {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        Err(PortForwardError::Connect {
            pod: name,
            uid,
            port,
            place: match &netns {
                Some(p) => format!("the pod's network namespace {}", p.display()),
                None => "the host's network (hostNetwork)".into(),
            },
            v4: v4_error,
            v6: v6_error,
        })
    }
}

/// Connects to `addr` inside `netns`, or in the daemon's own network without one.
/// Outer error: podhost's; inner: the connection's.
async fn connect(
    netns: Option<&Path>,
    addr: SocketAddr,
) -> Result<io::Result<TcpStream>, RuntimeError> {
    match netns {
        Some(ns) => {
            podhost_runtime::netns_connect::connect_in_netns(ns, addr, CONNECT_TIMEOUT).await
        }
        None => Ok(
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(r) => r,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            },
        ),
    }
}

impl PortForwardTarget for PodPortForwarder {
    fn connect(
        &self,
        pod: &PodRecord,
        port: u16,
    ) -> BoxFuture<'_, Result<TcpStream, PortForwardRefused>> {
        let pod = pod.clone();
        Box::pin(async move {
            let connected = self.connect_to_pod(&pod, port).await;
            // Interactive protocols through the forward should not wait for Nagle.
            if let Ok(stream) = &connected {
                let _ = stream.set_nodelay(true);
            }
            connected.map_err(|e| {
                tracing::info!(pod = pod.name(), port, error = %e, "port-forward connection refused");
                PortForwardRefused {
                    status: e.status(),
                    message: e.to_string(),
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::dial_error;

    #[test]
    fn connect_errors_read_as_the_kubelets() {
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(dial_error(&refused), "connect: connection refused");
        let unreachable = std::io::Error::from_raw_os_error(libc::ENETUNREACH);
        assert_eq!(dial_error(&unreachable), "connect: network is unreachable");
        let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
        assert_eq!(dial_error(&timeout), "connect timed out");
    }
}
