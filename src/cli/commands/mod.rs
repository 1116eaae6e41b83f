//! Each command's body: talks to the daemon through `api::client` (or runs the daemon
//! or a helper), prints through the renderers in `cli/`. Errors are `anyhow` here, at
//! the CLI's edge; `main` prints them and exits 1.

pub mod daemon;
pub mod debug;
pub mod describe;
pub mod exec;
mod exec_tty;
pub mod get;
mod get_watch;
pub mod helpers;
pub mod images;
pub mod load;
pub mod logs;
pub mod port_forward;
pub mod pull;
pub mod store_target;
pub mod top;
pub mod validate;
