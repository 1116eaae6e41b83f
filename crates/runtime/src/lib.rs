//! The only code that touches the kernel: rootfs, OCI spec, pod namespaces, shims,
//! exec into containers and signals.
//!
//! libcontainer is never called from the tokio daemon (it forks; see
//! docs/architecture.md, "What runs"): the daemon spawns `podhost shim` for a container
//! and `podhost exec-helper` for an exec.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model-core, disk, logs. It may
//! not: Kubernetes API types (the shim links it: no k8s-openapi); libcontainer in the
//! tokio daemon (it forks: the shim and `podhost exec-helper` call it).

pub mod apparmor;
pub mod cgroup_attach_primer;
pub mod cgroup_memory;
pub mod cgroup_mount;
pub mod cgroup_root;
pub mod cgroup_v2;
pub mod console_socket;
pub mod devices;
pub mod error;
pub mod exec;
pub mod exec_deadline;
pub mod exec_lookup;
pub mod helper_exe;
pub mod host_devices;
pub mod log_owner;
pub mod lost;
pub mod mount_propagation;
pub mod netns_connect;
pub mod node_cgroups;
pub mod not_applied;
pub mod overlay;
pub mod pause;
pub mod peer_cred;
pub mod proc_tree;
pub mod process_handle;
pub mod readable_fd;
pub mod rlimit_host;
pub mod sandbox;
pub mod seccomp;
pub mod shim_client;
pub mod shim_config;
pub mod shim_log;
mod shim_log_watch;
pub mod signals;
pub mod spec;
pub mod spec_sysctl;
pub mod sys;
pub mod terminal_fd;
pub mod userns;
pub mod workload;

pub use error::RuntimeError;
