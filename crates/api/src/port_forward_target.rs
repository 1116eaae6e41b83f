//! `POST /pods/NAME/portforward?port=N` connects to a port inside a pod; how to reach a
//! pod's network is the daemon's knowledge (its namespaces, later its networks), so the
//! API only knows this trait and the daemon wires the real one in.

use futures::future::BoxFuture;
use tokio::net::TcpStream;

use podhost_status::PodRecord;

/// Why a connection into a pod was not made: the HTTP status and the message (it names
/// the pod, the port and the reason).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct PortForwardRefused {
    pub status: u16,
    pub message: String,
}

/// Opens TCP connections to ports of running pods, as the kubelet's port-forward does:
/// to localhost:PORT inside the pod's network namespace.
pub trait PortForwardTarget: Send + Sync + std::fmt::Debug {
    /// Connects to `port` on the loopback of the pod `pod` (the host's for a
    /// hostNetwork pod); the stream is then spliced to the client's.
    fn connect(
        &self,
        pod: &PodRecord,
        port: u16,
    ) -> BoxFuture<'_, Result<TcpStream, PortForwardRefused>>;
}
