//! Every integration suite in one test binary: one link of podhost's library and its
//! dependencies instead of one per suite (each was ~190 MB; 74 of them filled 14 GB and
//! took most of a clean build's link time). Each suite is a module named after its
//! file: `cargo test --test integration network_bridge::` runs one. tests/lifecycle.rs
//! (run alone in the VM guest) and tests/bad_input.rs (it measures its own process's
//! peak memory) stay binaries of their own.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The shared harnesses.
mod common;
mod common_apiserver;
mod common_bridge;
mod common_cni;
mod common_hostile;
mod common_manifest_url;
mod common_registry;
mod common_spdy;
mod kubectl_habits;
mod source_scan;

// The suites.
mod admission;
mod allocator;
mod api_socket;
mod cgroup_v1_limits;
mod cluster_cert_swap;
mod cluster_kubectl_parity;
mod cluster_live_controllers;
mod cluster_live_node;
mod cluster_live_pods;
mod cluster_pod_updates;
mod cluster_pull_secrets;
mod cluster_resize;
mod config_file;
mod config_volumes;
mod debug;
mod devices;
mod devices_cgroup;
mod docker_archive;
mod docs;
mod error_types;
mod eviction;
mod examples;
mod exec_cli;
mod exec_tty;
mod exit_report;
mod gc;
mod honest_tests;
mod hostile_files;
mod hostile_user;
mod hostile_volumes;
mod hygiene;
mod image_config;
mod image_store;
mod image_store_target;
mod images_cli;
mod kubelet_api;
mod kubelet_exec_spdy;
mod kubelet_port_forward_spdy;
mod limits;
mod log_rotation;
mod manifest_url;
mod manifests;
mod monitor_binary;
mod mount_propagation;
mod network_bridge;
mod network_cni;
mod network_repair;
mod package_deb;
mod pidfd_signals;
mod pod_dns;
mod pod_lifecycle;
mod pod_network;
mod pod_pull;
mod pod_watch;
mod port_forward;
mod power_loss;
mod probes;
mod pull_faults;
mod readonly_http;
mod registry_loopback;
mod registry_pull;
mod reliability;
mod restart_faults;
mod restarts;
mod rooted_confined;
mod runonce;
mod sandbox_thread;
mod seccomp;
mod security_context;
mod shim_binary;
mod stats;
mod supervision;
mod systemd_notify;
mod termination;
mod two_daemons;
mod umoci_skopeo;
mod unpack_hostile;
mod userns;
mod validate_cli;
mod volumes;
