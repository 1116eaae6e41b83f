//! Device confinement of every container, on cgroup v1 and v2 alike.
//!
//! libcontainer 0.7 is built without its cgroup v2 device support, and on cgroup v1 it
//! appends its own allow list (console and tun included) after the spec's rules. So
//! podhost applies the rules of `linux.resources.devices` itself, from the shim, between
//! libcontainer's create (the cgroup exists, the init waits) and start:
//! - cgroup v2: an eBPF `BPF_PROG_TYPE_CGROUP_DEVICE` program generated from the rules
//!   ([`program`]), attached to the container's cgroup;
//! - cgroup v1: the devices controller's own files ([`cgroup_v1`]).
//!
//! Both enforce the same meaning, the v1 controller's ([`policy`]). A container whose
//! rules cannot be applied does not start.

mod apply;
mod bpf;
pub mod cgroup_v1;
mod error;
mod insn;
pub mod policy;
pub mod program;
pub mod rules;

pub use apply::{Confinement, confine_container, confine_v1_dir, confine_v2_dir};
pub use error::DevicesError;
pub use rules::{default_rules, privileged_rules};
