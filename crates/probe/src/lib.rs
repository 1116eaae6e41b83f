//! Probe and lifecycle-hook handlers (exec, httpGet, tcpSocket, grpc, sleep) and the
//! per-container prober task. What the results mean (thresholds, delays, hold) is
//! decided by the pure `model::probe`; what they cause (restarts, Ready) by the pod-sync
//! core. Here: the I/O.
//!
//! Sockets of pods without hostNetwork are made inside the pod's network namespace
//! (`runtime::netns_connect`); exec goes through `podhost exec-helper`, never
//! libcontainer in the daemon.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, metrics, runtime. It
//! may not: decide what a result means (model) or what it causes (the pod-sync core).

mod error;
mod exec;
mod grpc;
mod http;
mod net;
mod prober;
mod tls;
mod uri;

use std::path::PathBuf;
use std::time::Duration;

pub use error::ProbeError;
pub use prober::{ContainerProbes, ProbeReport, ProbeSpec, ProbedInstance, run_prober};

use podhost_model::probe::{Outcome, ProbeAction};

/// Where a container's handlers run.
#[derive(Debug, Clone)]
pub struct HandlerTarget {
    /// The podhost binary (for `podhost exec-helper`).
    pub exe: PathBuf,
    /// libcontainer's state root and the running instance's id (exec).
    pub libcontainer_root: PathBuf,
    pub container_id: String,
    /// Where sockets are made.
    pub network: PodNetwork,
    /// The pod's IP, where handlers without a `host` connect (the kubelet's default);
    /// `None` for a pod without one (no pod network): its loopback.
    pub pod_ip: Option<std::net::IpAddr>,
}

impl HandlerTarget {
    /// Where a handler without a `host` connects.
    pub fn pod_address(&self) -> std::net::IpAddr {
        self.pod_ip.unwrap_or(net::POD_LOOPBACK)
    }
}

/// The network a pod's probes reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodNetwork {
    /// hostNetwork: the host's own (the pod's address is the host's loopback).
    Host,
    /// The pod's network namespace handle (`SandboxPaths::net`); its loopback is the
    /// pod's address.
    Namespace(PathBuf),
}

/// Runs `action` against the container of `target`, within `timeout` when given (probes
/// always give one; the kubelet runs hooks' exec and httpGet without).
///
/// Failures of the probed thing (a status code, a refused connection, an exit code, the
/// timeout) are `Failure`; podhost's own (the helper cannot start, the namespace is
/// gone) are `Unknown`.
pub async fn run_handler(
    target: &HandlerTarget,
    action: &ProbeAction,
    timeout: Option<Duration>,
) -> Outcome {
    match action {
        ProbeAction::Exec { command } => exec::run(target, command, timeout).await,
        ProbeAction::Sleep(d) => {
            tokio::time::sleep(*d).await;
            Outcome::Success
        }
        ProbeAction::Http(h) => bounded(timeout, "HTTP probe", http::get(target, h, timeout)).await,
        ProbeAction::Tcp { host, port } => {
            bounded(
                timeout,
                "TCP probe",
                net::tcp_probe(target, host.as_deref(), *port, timeout),
            )
            .await
        }
        ProbeAction::Grpc { port, service, tls } => {
            bounded(
                timeout,
                "gRPC probe",
                grpc::check(target, *port, service.as_deref(), *tls, timeout),
            )
            .await
        }
    }
}

/// `work` within `timeout`: a timeout is the probe's failure.
async fn bounded(
    timeout: Option<Duration>,
    what: &str,
    work: impl Future<Output = Outcome>,
) -> Outcome {
    let Some(t) = timeout else {
        return work.await;
    };
    match tokio::time::timeout(t, work).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failure(format!("{what} timed out after {}", humantime(t))),
    }
}

/// `1s`, `1.5s`: durations as Go prints them in the kubelet's messages.
fn humantime(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}
