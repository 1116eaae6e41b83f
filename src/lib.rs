//! podhost: runs Kubernetes static pods on one Linux host without a CRI.
//!
//! The root package: the `podhost` CLI ([`cli`]) and the entry points of the three
//! binaries. The layers are the workspace's crates under `crates/`, whose dependencies
//! are the edges each layer may use (docs/architecture.md, "Crates"). They are
//! re-exported here under their module names (`podhost::model`, `podhost::runtime`, …)
//! for the CLI, the integration tests and the examples.
pub mod cli;

pub use podhost_api as api;
pub use podhost_cluster as cluster;
pub use podhost_daemon::daemon;
pub use podhost_daemon::eviction;
pub use podhost_daemon::gc;
pub use podhost_daemon::oom;
pub use podhost_daemon::worker;
pub use podhost_disk as disk;
pub use podhost_image as image;
pub use podhost_logs as logs;
pub use podhost_metrics as metrics;
pub use podhost_model as model;
pub use podhost_network as network;
pub use podhost_probe as probe;
pub use podhost_rooted as rooted;
pub use podhost_runtime as runtime;
pub use podhost_shim as shim;
pub use podhost_source as source;
pub use podhost_source::configdir;
pub use podhost_stats as stats;
pub use podhost_status as status;
pub use podhost_volume as volume;
