//! The daemon's HTTP/JSON API on a root-only unix socket (the CLI's only way in; `curl
//! --unix-socket` works too), and the small blocking client the CLI uses.

pub mod client;
mod query;
mod routes;
mod server;
pub mod types;

pub use query::{percent_decode, percent_encode};
pub use server::{ApiState, serve};
