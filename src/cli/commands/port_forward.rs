//! `podhost port-forward POD [LOCAL_PORT:]REMOTE_PORT...`, as `kubectl port-forward`:
//! listens on the local addresses (`--address`, default localhost = 127.0.0.1 and ::1)
//! and forwards each accepted connection to the pod's port through the daemon (one
//! upgraded `POST /pods/NAME/portforward` per connection). Runs until SIGINT/SIGTERM
//! (exit 0) or until the pod goes (exit 1 with why). A connection the pod refuses is
//! reported on stderr and closed; the others go on.
//!
//! The only command with a tokio runtime (one thread): it serves many connections at
//! once and, unlike `exec`, never calls libcontainer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Pod;
use tokio::net::{TcpListener, TcpStream};

use crate::api::PORT_FORWARD_BUFFER;
use crate::api::client::{Client, ClientError};
use crate::api::port_forward_client::open_port_forward;
use crate::cli::pod_ref::{NamespaceFlag, PodRef};
use crate::cli::port_forward_spec::{
    ListenAddress, PortPair, listeners_suffice, parse_addresses, parse_pair, pod_lost, show,
};

/// What `podhost port-forward` is asked to do (its arguments).
#[derive(Debug, Clone)]
pub struct PortForwardRequest {
    /// `NAME`, `NAMESPACE/NAME` or `pod/NAME`.
    pub pod: String,
    /// `-n`.
    pub namespace: NamespaceFlag,
    /// `[LOCAL_PORT:]REMOTE_PORT` each.
    pub ports: Vec<String>,
    /// `--address` values (each may be a comma list).
    pub addresses: Vec<String>,
}

/// How often the pod is looked at, to end the command when it goes.
const POD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The pod every connection goes to: its API path and the UID it had at start.
#[derive(Debug)]
struct Target {
    socket: PathBuf,
    /// `NAMESPACE/NAME`, for messages.
    pod: String,
    path: String,
    uid: Option<String>,
}

pub fn run(socket: &Path, req: PortForwardRequest) -> Result<i32> {
    let client = Client::new(socket);
    let pod: Pod = client.get_json(&PodRef::parse(&req.pod, &req.namespace)?.path())?;
    let at = PodRef::of(&pod);
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    if phase != "Running" {
        bail!("unable to forward port because pod is not running. Current status={phase}");
    }
    let pairs = req
        .ports
        .iter()
        .map(|p| parse_pair(p, &pod))
        .collect::<Result<Vec<_>, _>>()?;
    let addresses = parse_addresses(&req.addresses)?;
    let target = Arc::new(Target {
        socket: socket.to_path_buf(),
        pod: at.display(),
        path: at.path(),
        uid: pod.metadata.uid.clone(),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the port-forward's event loop")?;
    let result = runtime.block_on(forward(target, pairs, addresses));
    // Connections still open end with the process.
    runtime.shutdown_background();
    result
}

/// Listens, serves, and waits for an interrupt (0) or the pod's end (an error).
async fn forward(
    target: Arc<Target>,
    pairs: Vec<PortPair>,
    addresses: Vec<ListenAddress>,
) -> Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut serving = 0;
    for pair in &pairs {
        match listen(*pair, &addresses).await {
            Ok((listeners, pair)) => {
                for listener in listeners {
                    serving += 1;
                    tokio::spawn(serve(listener, pair, target.clone()));
                }
            }
            Err(why) => eprintln!("Unable to listen on port {}: {why}", pair.local),
        }
    }
    if serving == 0 {
        let asked: Vec<String> = pairs
            .iter()
            .map(|p| format!("{}:{}", p.local, p.remote))
            .collect();
        bail!(
            "unable to listen on any of the requested ports: [{}]",
            asked.join(" ")
        );
    }
    tokio::select! {
        _ = interrupt.recv() => Ok(0),
        _ = terminate.recv() => Ok(0),
        why = watch_pod(target.clone()) => Err(anyhow!(why)),
    }
}

/// Listens on every address for one pair; local port 0 takes a free port on the first
/// address and the same on the others (as kubectl). Prints each listener.
async fn listen(
    pair: PortPair,
    addresses: &[ListenAddress],
) -> Result<(Vec<TcpListener>, PortPair), String> {
    let mut local = pair.local;
    let mut listeners = Vec::new();
    let mut outcomes = Vec::new();
    let mut errors = Vec::new();
    for address in addresses {
        match TcpListener::bind((address.ip, local)).await {
            Ok(l) => {
                if local == 0 {
                    local = l.local_addr().map(|a| a.port()).unwrap_or(0);
                }
                outcomes.push((address.mode, true));
                listeners.push(l);
            }
            Err(e) => {
                outcomes.push((address.mode, false));
                let family = if address.ip.is_ipv4() { "tcp4" } else { "tcp6" };
                let at = show(std::net::SocketAddr::new(address.ip, local));
                errors.push(format!(
                    "unable to create listener: Error listen {family} {at}: bind: {e}"
                ));
            }
        }
    }
    if !listeners_suffice(&outcomes) {
        return Err(format!(
            "Listeners failed to create with the following errors: [{}]",
            errors.join(" ")
        ));
    }
    let pair = PortPair {
        local,
        remote: pair.remote,
    };
    for l in &listeners {
        if let Ok(addr) = l.local_addr() {
            println!("Forwarding from {} -> {}", show(addr), pair.remote);
        }
    }
    Ok((listeners, pair))
}

/// Accepts connections on one listener, each forwarded on a task of its own.
async fn serve(listener: TcpListener, pair: PortPair, target: Arc<Target>) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                println!("Handling connection for {}", pair.local);
                tokio::spawn(forward_connection(conn, pair, target.clone()));
            }
            Err(e) => {
                // EMFILE and the like: wait for connections to end rather than spin.
                eprintln!("error: accepting a connection for {}: {e}", pair.local);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One local connection to the pod's port: both directions until each ends.
async fn forward_connection(mut conn: TcpStream, pair: PortPair, target: Arc<Target>) {
    let _ = conn.set_nodelay(true);
    let opened = open_port_forward(
        &target.socket,
        &target.path,
        target.uid.as_deref(),
        pair.remote,
    )
    .await;
    let mut pod_stream = match opened {
        Ok(s) => s,
        Err(e) => {
            // kubectl's words; the local connection is closed, the forwarder goes on.
            eprintln!(
                "error: an error occurred forwarding {} -> {}: {e}",
                pair.local, pair.remote
            );
            return;
        }
    };
    let spliced = tokio::io::copy_bidirectional_with_sizes(
        &mut conn,
        &mut pod_stream,
        PORT_FORWARD_BUFFER,
        PORT_FORWARD_BUFFER,
    );
    if let Err(e) = spliced.await {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        if !matches!(e.kind(), ConnectionReset | BrokenPipe) {
            eprintln!("error: forwarding {} -> {}: {e}", pair.local, pair.remote);
        }
    }
}

/// Resolves with why forwarding must end once the pod is removed, replaced or ended.
/// A daemon that does not answer is not the pod's end (it may be restarting).
async fn watch_pod(target: Arc<Target>) -> String {
    let mut warned = false;
    loop {
        tokio::time::sleep(POD_CHECK_INTERVAL).await;
        let (socket, path) = (target.socket.clone(), target.path.clone());
        let looked =
            tokio::task::spawn_blocking(move || Client::new(&socket).get_json::<Pod>(&path)).await;
        match looked {
            Ok(Ok(pod)) => {
                warned = false;
                if let Some(why) = pod_lost(&pod, target.uid.as_deref()) {
                    return why;
                }
            }
            Ok(Err(ClientError::Status { code: 404, .. })) => {
                return format!("lost connection to pod {}: it was removed", target.pod);
            }
            Ok(Err(e)) if !warned => {
                eprintln!("warning: cannot check pod {}: {e}", target.pod);
                warned = true;
            }
            Ok(Err(_)) => {}
            Err(e) => return format!("checking pod {}: {e}", target.pod),
        }
    }
}
