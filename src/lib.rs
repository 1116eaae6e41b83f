//! podhost: runs Kubernetes static pods on one Linux host without a CRI.
//!
//! # Layering
//!
//! Data flows one way (`docs/architecture.md`, "Data flow"): `source` → `worker` →
//! `runtime`, results into `status`, read by `api` and the CLI. A module uses only the
//! modules below it here; `tests/layering.rs` fails on any other `crate::` path.
//!
//! | module    | what it is                                          | may use                                                        |
//! |-----------|-----------------------------------------------------|----------------------------------------------------------------|
//! | `model`   | pure types and functions (no I/O, no clock)         | nothing of the crate                                           |
//! | `rooted`  | root's only way into container-writable dirs: fd-relative, no symlinks | nothing of the crate                                   |
//! | `metrics` | the Prometheus registry and the health registry     | model                                                          |
//! | `disk`    | on-disk layout, shim records, the atomic-write helper | model                                                        |
//! | `logs`    | CRI log files: write, rotate, read                  | model, disk                                                    |
//! | `image`   | content store, pull, load, unpack, image GC         | model, metrics, disk                                                    |
//! | `source`  | manifests → validated pods                          | model, metrics, disk                                                    |
//! | `configdir` | ConfigMap/Secret objects from `--config-dir`      | model, disk                                                    |
//! | `status`  | pod status and the pods' and node's Events          | model, metrics, disk                                                    |
//! | `runtime` | the kernel: rootfs, spec, namespaces, cgroups, shims | model, rooted, disk, logs                                            |
//! | `oom`     | kernel OOM reports from /dev/kmsg, recent victims   | model, disk, runtime (its fd registration)                     |
//! | `volume`  | pod volumes: plan, emptyDir/hostPath/tmpfs, subPath, content (configMap…), release | model, rooted, disk, runtime (its spec's mount type) |
//! | `shim`    | the per-container process                           | model, rooted, disk, logs, runtime                                    |
//! | `probe`   | probe and hook handlers, the per-container prober   | model, metrics, disk, runtime                                           |
//! | `network` | pod networks: built-in bridge + IPAM + nftables, CNI | model, disk, runtime                                          |
//! | `worker`  | one task per pod: observe, decide, act              | model, rooted, metrics, disk, logs, oom, image, source, configdir, status, runtime, volume, probe, network |
//! | `gc`      | dead containers, pod dirs, logs; drives image GC    | model, rooted, metrics, disk, logs, image, status, runtime             |
//! | `stats`   | node/pod/container statistics: cgroups, /proc, netns, du | model, disk, runtime, status, volume (its emptyDir dir name) |
//! | `api`     | the unix-socket HTTP API and its client; the read-only TCP endpoint | model, metrics, disk, logs, image, status, runtime, stats |
//! | `eviction` | node pressure: signals, conditions, reclaim, evicting one pod | model, metrics, disk, status, runtime, volume, gc |
//! | `cluster` | cluster mode's API side: client, `--kube-record`, Node registration, Lease, node status, the node's pods and their status, mirror pods | model |
//! | `daemon`  | wires everything together (the only one that may)   | all but cli, shim and probe                                    |
//! | `cli`     | arguments, each command's body, what it prints      | model, disk, logs, image, source, status, runtime, api, daemon |
//!
//! Where a lower module needs something of a higher one, it takes a parameter or a
//! small trait instead (`api::GcTrigger`, `gc::runner::GcTargets`).
pub use podhost_api as api;
pub mod cli;
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
