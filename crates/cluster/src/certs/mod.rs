//! The node's client certificate, as the kubelet manages it: TLS bootstrap from
//! `--bootstrap-kubeconfig` (a key made here, a CertificateSigningRequest the control
//! plane approves and signs), the pair kept in `--cert-dir` behind the
//! `kubelet-client-current.pem` symlink, and rotation at a jittered 70–90 % of the
//! certificate's lifetime (`--rotate-certificates`) into a client whose TLS
//! configuration reads the current pair on every new connection.

pub mod bootstrap;
pub mod client;
pub mod csr;
pub mod deadline;
mod error;
pub mod kubeconfig_out;
pub mod pair;
pub mod resolver;
pub mod store;

pub use error::CertError;
