//! The daemon's HTTP/JSON API on a unix socket only root (and `--socket-group`) may use
//! (the CLI's only way in; `curl --unix-socket` works too), and the small blocking
//! client the CLI uses.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, disk, logs, metrics,
//! runtime, image, status, stats. It may not: the daemon crate (it reaches the daemon
//! through small traits such as `GcTrigger`), the cluster client, the shim.

mod access;
mod body;
pub mod client;
pub(crate) mod container_logs;
mod ephemeral_target;
mod gc_trigger;
pub mod kubelet;
mod pod_watch;
mod port_forward;
pub mod port_forward_client;
mod port_forward_target;
pub(crate) mod query;
pub mod readonly;
mod request_error;
mod routes;
mod server;
mod socket;
pub mod stats_routes;
pub mod types;

pub use access::{AccessError, SocketAccess, SocketGroup, resolve_socket_group};
pub use ephemeral_target::{EphemeralRefused, EphemeralTarget};
pub use gc_trigger::{GcOutcome, GcTrigger};
pub use port_forward::{PORT_FORWARD_BUFFER, PORT_FORWARD_UPGRADE};
pub use port_forward_target::{PortForwardRefused, PortForwardTarget};
pub use query::{percent_decode, percent_encode};
pub use server::{ApiServer, ApiState, Body, serve};
pub use socket::{ClaimedSocket, SocketError};
