//! podhost's cgroup tree on this node: where pods and shims go, and how much is enforced:
//! everything (pure cgroup v2), each container's limits through the v1 hierarchies
//! (v1/hybrid host, as runc does), or nothing (said plainly at start).
//!
//! Full mode layout, under the daemon's delegated subtree `<root>` (its own cgroup, or
//! `--cgroup-root`): `<root>/daemon` (the daemon, a leaf), `<root>/shims` (every shim, a
//! leaf), `<root>/kubepods[/burstable|/besteffort]/pod<uid>/<container>`. cgroup v2 forbids
//! processes in a cgroup whose children have controllers enabled, hence the leaves.
//!
//! v1 mode: `<root>` is the daemon's deepest cgroup plus `/podhost` (or `--cgroup-root`),
//! the same path in every hierarchy; libcontainer's v1 manager creates each container's
//! cgroup `<root>/kubepods/<qos>/pod<uid>/<container>` in every hierarchy and applies
//! its limits there. Pod and QoS-class cgroups get no values of their own (see
//! [`podhost_model_core::cgroup_enforcement::V1_NOT_ENFORCED`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::cgroup_root::{CgroupMode, choose_root, detect_mode};
use super::cgroup_v2::{CgroupV2, MOUNT, REQUIRED};
use super::sys::{Kernel, LinuxKernel};
use podhost_model_core::cgroup_enforcement::HostEnforcement;
use podhost_model_core::qos::QosClass;
use podhost_model_core::resources::{PodCgroupConfig, burstable_qos_weight};

mod resize;

/// How much is enforced on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// cgroup v2: container, pod and QoS-class cgroups with all their limits.
    Full,
    /// cgroup v1/hybrid: each container's memory, CPU and pids limits, through the v1
    /// hierarchies; pod-level and QoS-class cgroups, memory.oom.group and PSI are not.
    V1ContainerLimits {
        /// `memory.memsw.limit_in_bytes` exists: the swap limit can be set with the
        /// memory limit (swap accounting on).
        swap_accounting: bool,
    },
    /// No limit enforced; the reason, as told to the user.
    Unenforced(String),
}

impl Enforcement {
    /// The model's view of it (for events and `podhost validate`).
    pub fn host(&self) -> HostEnforcement {
        match self {
            Self::Full => HostEnforcement::Full,
            Self::V1ContainerLimits { .. } => HostEnforcement::V1ContainerLimits,
            Self::Unenforced(_) => HostEnforcement::Unenforced,
        }
    }
}

/// The v1 controllers limits need, each with a file only a mounted hierarchy of it has
/// (at its root): memory limits, CFS bandwidth (quota), pids.
const V1_REQUIRED: [(&str, &str); 3] = [
    ("memory", "memory.limit_in_bytes"),
    ("cpu", "cpu.cfs_quota_us"),
    ("pids", "cgroup.procs"),
];

/// The node's cgroup tree.
#[derive(Debug)]
pub struct NodeCgroups {
    pub enforcement: Enforcement,
    /// Parent of `kubepods` (and, in full mode, `daemon` and `shims`).
    pub root: String,
    pub pod_pids_limit: Option<i64>,
    v2: CgroupV2,
    /// How the host's cgroups are mounted (seen once, at setup).
    mode: CgroupMode,
    /// CPU requests of the Burstable pods, for the Burstable QoS cgroup's weight.
    burstable: Mutex<HashMap<String, i64>>,
}

impl NodeCgroups {
    /// Inspects the host and sets the tree up. Never fails: whatever cannot be done turns
    /// into unenforced mode with the reason.
    pub fn setup(flag_root: Option<String>, pod_pids_limit: Option<i64>) -> Self {
        Self::setup_with(
            Arc::new(LinuxKernel),
            detect_mode(),
            flag_root,
            pod_pids_limit,
        )
    }

    /// [`NodeCgroups::setup`] through `kernel`, on a host whose cgroups are `mode`.
    pub fn setup_with(
        kernel: Arc<dyn Kernel>,
        mode: CgroupMode,
        flag_root: Option<String>,
        pod_pids_limit: Option<i64>,
    ) -> Self {
        let own = kernel
            .read_file(Path::new("/proc/self/cgroup"))
            .unwrap_or_default();
        let v2 = CgroupV2::with_kernel(MOUNT, kernel);
        let unenforced = |root: String, reason: String| Self {
            enforcement: Enforcement::Unenforced(reason),
            root,
            pod_pids_limit,
            v2: v2.clone(),
            mode,
            burstable: Mutex::new(HashMap::new()),
        };
        if mode == CgroupMode::Legacy {
            let root = flag_root
                .map(|r| r.trim_end_matches('/').to_string())
                .unwrap_or_else(|| choose_root(&own).0);
            return match setup_v1(v2.kernel().as_ref(), &root) {
                Ok(swap_accounting) => Self {
                    enforcement: Enforcement::V1ContainerLimits { swap_accounting },
                    root,
                    pod_pids_limit,
                    v2: v2.clone(),
                    mode,
                    burstable: Mutex::new(HashMap::new()),
                },
                Err(e) => unenforced(root, e.to_string()),
            };
        }
        let own_path = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/")
            .trim_end_matches('/')
            .to_string();
        let root = match flag_root {
            Some(r) => {
                // An explicit root that does not exist yet is created (with controllers
                // enabled on the way down), as systemd creates a service's cgroup.
                let r = r.trim_end_matches('/').to_string();
                if let Err(e) = v2.ensure("", &r) {
                    return unenforced(r.clone(), format!("cannot create --cgroup-root {r}: {e}"));
                }
                r
            }
            None => {
                // Leave our own cgroup free of processes: the daemon moves to a leaf.
                if !own_path.is_empty() {
                    let leaf = format!("{own_path}/daemon");
                    if let Err(e) = v2.move_self(&leaf) {
                        return unenforced(
                            own_path,
                            format!("cannot move the daemon into {leaf}: {e}"),
                        );
                    }
                    if v2.has_processes(&own_path) {
                        return unenforced(
                            own_path.clone(),
                            format!(
                                "the daemon's cgroup {own_path} holds other processes, so it cannot \
                                 delegate controllers; run podhost in a cgroup of its own (e.g. a \
                                 systemd service with Delegate=yes) or pass --cgroup-root"
                            ),
                        );
                    }
                }
                own_path
            }
        };
        let node = Self {
            enforcement: Enforcement::Full,
            root,
            pod_pids_limit,
            v2: v2.clone(),
            mode,
            burstable: Mutex::new(HashMap::new()),
        };
        let kubepods = node.kubepods();
        for rel in [
            format!("{kubepods}/burstable"),
            format!("{kubepods}/besteffort"),
        ] {
            if let Err(e) = v2.ensure(&node.root, &rel) {
                return unenforced(node.root.clone(), format!("cannot create {rel}: {e}"));
            }
        }
        if let Err(e) = v2
            .enable_controllers(&format!("{kubepods}/burstable"))
            .and_then(|_| v2.enable_controllers(&format!("{kubepods}/besteffort")))
        {
            return unenforced(node.root.clone(), format!("cannot enable controllers: {e}"));
        }
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|c| {
                !v2.available(&format!("{kubepods}/besteffort"))
                    .iter()
                    .any(|a| a == c)
            })
            .collect();
        if !missing.is_empty() {
            return unenforced(
                node.root.clone(),
                format!(
                    "cgroup controllers not delegated to podhost: {}",
                    missing.join(", ")
                ),
            );
        }
        let _ = v2.write(&format!("{kubepods}/besteffort"), "cpu.weight", "1");
        let _ = v2.ensure(&node.root, &node.shims());
        node
    }

    pub fn is_full(&self) -> bool {
        self.enforcement == Enforcement::Full
    }

    /// Whether each container's memory, CPU and pids limits are enforced (v2, or v1
    /// through libcontainer's v1 manager).
    pub fn enforces_container_limits(&self) -> bool {
        !matches!(self.enforcement, Enforcement::Unenforced(_))
    }

    /// Whether the limits go through the v1 hierarchies (no `unified` values then).
    pub fn is_v1(&self) -> bool {
        matches!(self.enforcement, Enforcement::V1ContainerLimits { .. })
    }

    /// v1 only: whether the memory+swap limit can be set (`memory.memsw.*` exists).
    pub fn v1_swap_accounting(&self) -> bool {
        matches!(
            self.enforcement,
            Enforcement::V1ContainerLimits {
                swap_accounting: true
            }
        )
    }

    pub fn kubepods(&self) -> String {
        format!("{}/kubepods", self.root)
    }

    pub fn shims(&self) -> String {
        format!("{}/shims", self.root)
    }

    /// `/sys/fs/cgroup/<root>/shims`, where shims move themselves (full mode only).
    pub fn shims_dir(&self) -> Option<std::path::PathBuf> {
        self.is_full().then(|| self.v2.dir(&self.shims()))
    }

    /// The pod's cgroup: Guaranteed pods directly under kubepods, the others under their
    /// QoS class's cgroup (as the kubelet's cgroupfs driver).
    pub fn pod_path(&self, qos: QosClass, uid: &str) -> String {
        match qos {
            QosClass::Guaranteed => format!("{}/pod{uid}", self.kubepods()),
            QosClass::Burstable => format!("{}/burstable/pod{uid}", self.kubepods()),
            QosClass::BestEffort => format!("{}/besteffort/pod{uid}", self.kubepods()),
        }
    }

    pub fn container_path(&self, qos: QosClass, uid: &str, container: &str) -> String {
        format!("{}/{container}", self.pod_path(qos, uid))
    }

    /// The directory whose files count the container's memory and OOM kills: its cgroup
    /// in the unified hierarchy (full mode) or in the v1 memory hierarchy (v1 mode).
    pub fn memory_accounting_dir(
        &self,
        qos: QosClass,
        uid: &str,
        container: &str,
    ) -> Option<PathBuf> {
        let rel = self.container_path(qos, uid, container);
        match self.enforcement {
            Enforcement::Full => Some(self.v2.dir(&rel)),
            Enforcement::V1ContainerLimits { .. } => Some(
                Path::new(MOUNT)
                    .join("memory")
                    .join(rel.trim_start_matches('/')),
            ),
            Enforcement::Unenforced(_) => None,
        }
    }

    /// Creates the pod's cgroup with its values and updates the Burstable QoS weight.
    pub fn setup_pod(
        &self,
        qos: QosClass,
        uid: &str,
        cfg: &PodCgroupConfig,
        cpu_request_milli: i64,
    ) -> Result<(), super::RuntimeError> {
        if !self.is_full() {
            return Ok(());
        }
        let rel = self.pod_path(qos, uid);
        self.v2.ensure(&self.root, &rel)?;
        self.v2.enable_controllers(&rel)?;
        self.v2
            .write(&rel, "cpu.weight", &cfg.cpu_weight.to_string())?;
        if let Some((quota, period)) = cfg.cpu_max {
            self.v2
                .write(&rel, "cpu.max", &format!("{quota} {period}"))?;
        }
        if let Some(m) = cfg.memory_max {
            self.v2.write(&rel, "memory.max", &m.to_string())?;
        }
        if let Some(p) = self.pod_pids_limit.filter(|p| *p > 0) {
            self.v2.write(&rel, "pids.max", &p.to_string())?;
        }
        if qos == QosClass::Burstable {
            self.set_burstable(uid, Some(cpu_request_milli));
        }
        Ok(())
    }

    fn set_burstable(&self, uid: &str, request: Option<i64>) {
        let mut map = self.burstable.lock().unwrap_or_else(|p| p.into_inner());
        match request {
            Some(r) => map.insert(uid.to_string(), r),
            None => map.remove(uid),
        };
        let total: i64 = map.values().sum();
        let weight = burstable_qos_weight(total);
        if let Err(e) = self.v2.write(
            &format!("{}/burstable", self.kubepods()),
            "cpu.weight",
            &weight.to_string(),
        ) {
            tracing::warn!(error = %e, "cannot update the Burstable QoS cgroup");
        }
    }

    /// Removes the pod's cgroups (every hierarchy on a v1/hybrid host).
    pub fn remove_pod(&self, qos: QosClass, uid: &str) {
        let rel = self.pod_path(qos, uid);
        if self.is_full() {
            self.v2.remove_tree(&rel);
            if qos == QosClass::Burstable {
                self.set_burstable(uid, None);
            }
            return;
        }
        // Unenforced on a pure v2 host (controllers not delegated): its one hierarchy is
        // /sys/fs/cgroup itself, whose subdirectories are cgroups, not hierarchies.
        if self.mode == CgroupMode::Unified {
            self.v2.remove_tree(&rel);
            return;
        }
        // v1 (limits or not): libcontainer made the container cgroups in every hierarchy.
        let kernel = self.v2.kernel();
        let Ok(hierarchies) = kernel.subdirs(Path::new(MOUNT)) else {
            return;
        };
        // Each directory under /sys/fs/cgroup is a hierarchy (v1 controllers, unified).
        for h in hierarchies {
            CgroupV2::with_kernel(h, kernel.clone()).remove_tree(&rel);
        }
    }
}

/// What a daemon would enforce on this host, seen without changing anything (for
/// `podhost validate`): a unified host is taken as fully enforcing (whether podhost's
/// own cgroup gets the controllers delegated is the daemon's to find out and report).
pub fn probe_host() -> HostEnforcement {
    probe_host_with(&LinuxKernel, detect_mode())
}

/// [`probe_host`] through `kernel`, on a host whose cgroups are `mode`.
pub fn probe_host_with(kernel: &dyn Kernel, mode: CgroupMode) -> HostEnforcement {
    match mode {
        CgroupMode::Unified => HostEnforcement::Full,
        CgroupMode::Legacy if missing_v1_controllers(kernel).is_empty() => {
            HostEnforcement::V1ContainerLimits
        }
        CgroupMode::Legacy => HostEnforcement::Unenforced,
    }
}

/// The [`V1_REQUIRED`] controllers not mounted at `/sys/fs/cgroup/<controller>`.
fn missing_v1_controllers(kernel: &dyn Kernel) -> Vec<&'static str> {
    let mount = Path::new(MOUNT);
    V1_REQUIRED
        .iter()
        .filter(|(ctrl, marker)| !kernel.exists(&mount.join(ctrl).join(marker)))
        .map(|(ctrl, _)| *ctrl)
        .collect()
}

/// v1 mode's checks and set-up: the required controllers are mounted, and
/// `<root>/kubepods` can be made in each of their hierarchies. Whether swap accounting is
/// on, or why limits cannot be enforced.
fn setup_v1(kernel: &dyn Kernel, root: &str) -> Result<bool, super::RuntimeError> {
    let mount = Path::new(MOUNT);
    let missing = missing_v1_controllers(kernel);
    if !missing.is_empty() {
        return Err(super::RuntimeError::V1ControllersMissing {
            controllers: missing.join(", "),
        });
    }
    let kubepods = format!("{}/kubepods", root.trim_start_matches('/'));
    for (ctrl, _) in V1_REQUIRED {
        let dir = mount.join(ctrl).join(&kubepods);
        kernel
            .mkdir_all(&dir)
            .map_err(|e| super::RuntimeError::io("cannot create", &dir, e))?;
    }
    Ok(kernel.exists(
        &mount
            .join("memory")
            .join(&kubepods)
            .join("memory.memsw.limit_in_bytes"),
    ))
}

#[cfg(test)]
mod tests {
    use nix::errno::Errno;

    use super::*;
    use crate::sys::recording::{Call, RecordingKernel};

    const OWN: &str = "/system.slice/podhost.service";
    const ALL: &str = "cpuset cpu io memory hugetlb pids rdma";

    fn cg(rel: &str) -> std::path::PathBuf {
        Path::new(MOUNT).join(rel.trim_start_matches('/'))
    }

    /// A unified host where podhost's service cgroup offers `controllers` and holds
    /// `procs` (the daemon's own pid is moved out by setup).
    fn host(controllers: &str, procs: &str) -> Arc<RecordingKernel> {
        let k = Arc::new(RecordingKernel::new());
        k.add_file("/proc/self/cgroup", &format!("0::{OWN}\n"));
        k.add_file(cg(OWN).join("cgroup.controllers"), controllers);
        k.add_file(cg(OWN).join("cgroup.procs"), procs);
        k
    }

    fn setup(k: &Arc<RecordingKernel>, pids: Option<i64>) -> NodeCgroups {
        NodeCgroups::setup_with(k.clone(), CgroupMode::Unified, None, pids)
    }

    fn position(k: &RecordingKernel, call: &Call) -> usize {
        k.calls()
            .iter()
            .position(|c| c == call)
            .unwrap_or_else(|| panic!("{call:?} not made: {:?}", k.effects()))
    }

    fn writes_under(k: &RecordingKernel, dir: &Path) -> Vec<(String, String)> {
        k.effects()
            .into_iter()
            .filter_map(|c| match c {
                Call::WriteFile { path, contents } if path.parent() == Some(dir) => Some((
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    contents,
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn full_mode_moves_the_daemon_to_a_leaf_before_enabling_controllers() {
        let k = host(ALL, "");
        let node = setup(&k, None);
        assert_eq!(node.enforcement, Enforcement::Full);
        assert_eq!(node.root, OWN);
        let moved = Call::WriteFile {
            path: cg(OWN).join("daemon/cgroup.procs"),
            contents: std::process::id().to_string(),
        };
        let enabled = Call::WriteFile {
            path: cg(OWN).join("cgroup.subtree_control"),
            contents: "+cpu +cpuset +io +memory +pids +hugetlb".into(),
        };
        // cgroup v2: no processes in a cgroup whose children get controllers.
        assert!(position(&k, &moved) < position(&k, &enabled));
    }

    #[test]
    fn full_mode_builds_kubepods_qos_and_shims_with_controllers_down_to_the_qos_level() {
        let k = host(ALL, "");
        setup(&k, None);
        for rel in [
            "kubepods",
            "kubepods/burstable",
            "kubepods/besteffort",
            "shims",
        ] {
            assert!(k.dirs().contains(&cg(&format!("{OWN}/{rel}"))), "{rel}");
        }
        for rel in [
            "",
            "/kubepods",
            "/kubepods/burstable",
            "/kubepods/besteffort",
        ] {
            assert_eq!(
                k.file(cg(&format!("{OWN}{rel}/cgroup.subtree_control")))
                    .as_deref(),
                Some("cpu cpuset io memory pids hugetlb"),
                "{rel}"
            );
        }
        // The shims and the daemon are leaves: processes live there.
        for leaf in ["shims", "daemon"] {
            assert_eq!(
                k.file(cg(&format!("{OWN}/{leaf}/cgroup.subtree_control"))),
                None
            );
        }
        assert_eq!(
            k.file(cg(&format!("{OWN}/kubepods/besteffort/cpu.weight")))
                .as_deref(),
            Some("1")
        );
    }

    #[test]
    fn a_service_cgroup_shared_with_other_processes_degrades_before_making_anything() {
        let k = host(ALL, "1234\n");
        let node = setup(&k, None);
        let Enforcement::Unenforced(reason) = &node.enforcement else {
            panic!("full mode in a shared cgroup");
        };
        assert!(reason.contains("holds other processes") && reason.contains("Delegate=yes"));
        assert!(!k.dirs().contains(&cg(&format!("{OWN}/kubepods"))));
    }

    #[test]
    fn missing_required_controllers_are_named() {
        let k = host("cpu io memory", "");
        let node = setup(&k, None);
        assert_eq!(
            node.enforcement,
            Enforcement::Unenforced("cgroup controllers not delegated to podhost: pids".into())
        );
    }

    /// A v1/hybrid host whose daemon sits in `/svc` of the memory and cpu hierarchies,
    /// with the controllers limits need mounted.
    fn v1_host() -> Arc<RecordingKernel> {
        let k = Arc::new(RecordingKernel::new());
        k.add_file("/proc/self/cgroup", "4:memory:/svc\n1:cpu:/svc\n0::/\n");
        for (ctrl, marker) in V1_REQUIRED {
            k.add_file(cg(&format!("/{ctrl}/{marker}")), "");
        }
        k
    }

    #[test]
    fn a_v1_host_without_the_limit_controllers_is_unenforced_without_touching_cgroups() {
        let k = Arc::new(RecordingKernel::new());
        k.add_file("/proc/self/cgroup", "4:memory:/svc\n1:cpu:/svc\n0::/\n");
        k.add_file(cg("/memory/memory.limit_in_bytes"), "");
        let node = NodeCgroups::setup_with(k.clone(), CgroupMode::Legacy, None, None);
        assert!(!node.enforces_container_limits());
        assert_eq!(node.enforcement.host(), HostEnforcement::Unenforced);
        assert_eq!(
            node.enforcement,
            Enforcement::Unenforced(
                "cgroup v1 host without the cpu, pids controller(s) mounted at /sys/fs/cgroup/<controller>"
                    .into()
            )
        );
        assert_eq!(node.root, "/svc/podhost");
        assert_eq!(
            node.memory_accounting_dir(QosClass::BestEffort, "u", "c"),
            None
        );
        assert!(k.effects().is_empty(), "{:?}", k.effects());
    }

    #[test]
    fn a_v1_host_enforces_container_limits_with_kubepods_in_each_limit_hierarchy() {
        let k = v1_host();
        let node = NodeCgroups::setup_with(k.clone(), CgroupMode::Legacy, None, None);
        assert_eq!(
            node.enforcement,
            Enforcement::V1ContainerLimits {
                swap_accounting: false
            }
        );
        assert!(node.is_v1() && node.enforces_container_limits() && !node.is_full());
        assert!(!node.v1_swap_accounting());
        for ctrl in ["memory", "cpu", "pids"] {
            assert!(
                k.dirs()
                    .contains(&cg(&format!("/{ctrl}/svc/podhost/kubepods"))),
                "{ctrl}"
            );
        }
        // OOM kills and memory are read where the v1 memory controller counts them.
        assert_eq!(
            node.memory_accounting_dir(QosClass::Burstable, "u", "app"),
            Some(cg("/memory/svc/podhost/kubepods/burstable/podu/app"))
        );
        // The shims stay where they are (no v2 leaf to move to).
        assert_eq!(node.shims_dir(), None);
    }

    #[test]
    fn probing_a_v1_host_changes_nothing_and_tells_limits_from_none() {
        let k = v1_host();
        assert_eq!(
            probe_host_with(k.as_ref(), CgroupMode::Legacy),
            HostEnforcement::V1ContainerLimits
        );
        assert!(k.effects().is_empty(), "{:?}", k.effects());
        let bare = RecordingKernel::new();
        assert_eq!(
            probe_host_with(&bare, CgroupMode::Legacy),
            HostEnforcement::Unenforced
        );
    }

    #[test]
    fn v1_swap_accounting_is_seen_in_podhosts_memory_cgroup() {
        let k = v1_host();
        k.add_file(
            cg("/memory/svc/podhost/kubepods/memory.memsw.limit_in_bytes"),
            "",
        );
        let node = NodeCgroups::setup_with(k.clone(), CgroupMode::Legacy, None, None);
        assert!(node.v1_swap_accounting());
    }

    #[test]
    fn a_v1_cgroup_root_that_cannot_be_made_is_unenforced_and_named() {
        let k = v1_host();
        k.fail_nth(1, Errno::EACCES, |c| matches!(c, Call::MkdirAll(_)));
        let node =
            NodeCgroups::setup_with(k.clone(), CgroupMode::Legacy, Some("/ph/".into()), None);
        assert_eq!(node.root, "/ph");
        let Enforcement::Unenforced(reason) = &node.enforcement else {
            panic!("{:?}", node.enforcement);
        };
        assert!(
            reason.contains("cannot create /sys/fs/cgroup/memory/ph/kubepods"),
            "{reason}"
        );
    }

    #[test]
    fn an_explicit_cgroup_root_is_created_and_the_daemon_stays_where_it_is() {
        let k = host(ALL, "99\n");
        k.add_file(cg("/cgroup.controllers"), ALL);
        let node = NodeCgroups::setup_with(
            k.clone(),
            CgroupMode::Unified,
            Some("/podhost/".into()),
            None,
        );
        assert_eq!(node.enforcement, Enforcement::Full);
        assert_eq!(node.root, "/podhost");
        assert!(k.dirs().contains(&cg("/podhost/kubepods/besteffort")));
        assert!(!k.effects().iter().any(|c| matches!(c, Call::MkdirAll(_))));
    }

    #[test]
    fn a_burstable_pod_gets_its_limits_and_raises_the_burstable_weight() {
        let k = host(ALL, "");
        let node = setup(&k, Some(1024));
        let cfg = PodCgroupConfig {
            cpu_weight: 40,
            cpu_max: Some((50_000, 100_000)),
            memory_max: Some(256 << 20),
        };
        node.setup_pod(QosClass::Burstable, "u1", &cfg, 1500)
            .unwrap();
        let pod = cg(&format!("{OWN}/kubepods/burstable/podu1"));
        assert_eq!(
            writes_under(&k, &pod),
            vec![
                (
                    "cgroup.subtree_control".into(),
                    "+cpu +cpuset +io +memory +pids +hugetlb".into()
                ),
                ("cpu.weight".into(), "40".into()),
                ("cpu.max".into(), "50000 100000".into()),
                ("memory.max".into(), "268435456".into()),
                ("pids.max".into(), "1024".into()),
            ]
        );
        assert_eq!(
            k.file(cg(&format!("{OWN}/kubepods/burstable/cpu.weight"))),
            Some(burstable_qos_weight(1500).to_string())
        );
    }

    #[test]
    fn a_guaranteed_pod_without_limits_or_pid_cap_gets_only_its_weight() {
        let k = host(ALL, "");
        let node = setup(&k, Some(0));
        let cfg = PodCgroupConfig {
            cpu_weight: 79,
            cpu_max: None,
            memory_max: None,
        };
        let before = k.file(cg(&format!("{OWN}/kubepods/burstable/cpu.weight")));
        node.setup_pod(QosClass::Guaranteed, "g", &cfg, 2000)
            .unwrap();
        let pod = cg(&format!("{OWN}/kubepods/podg"));
        assert_eq!(
            writes_under(&k, &pod),
            vec![
                (
                    "cgroup.subtree_control".into(),
                    "+cpu +cpuset +io +memory +pids +hugetlb".into()
                ),
                ("cpu.weight".into(), "79".into()),
            ]
        );
        assert_eq!(
            k.file(cg(&format!("{OWN}/kubepods/burstable/cpu.weight"))),
            before
        );
    }

    #[test]
    fn the_burstable_weight_follows_the_sum_of_requests_as_pods_come_and_go() {
        let k = host(ALL, "");
        let node = setup(&k, None);
        let cfg = PodCgroupConfig {
            cpu_weight: 10,
            cpu_max: None,
            memory_max: None,
        };
        let weight = || k.file(cg(&format!("{OWN}/kubepods/burstable/cpu.weight")));
        node.setup_pod(QosClass::Burstable, "a", &cfg, 500).unwrap();
        node.setup_pod(QosClass::Burstable, "b", &cfg, 700).unwrap();
        assert_eq!(weight(), Some(burstable_qos_weight(1200).to_string()));
        node.remove_pod(QosClass::Burstable, "a");
        assert_eq!(weight(), Some(burstable_qos_weight(700).to_string()));
    }

    #[test]
    fn an_unenforced_node_writes_no_pod_cgroup() {
        let k = host("cpu memory", "");
        let node = setup(&k, Some(100));
        let before = k.effects().len();
        let cfg = PodCgroupConfig {
            cpu_weight: 10,
            cpu_max: Some((1, 2)),
            memory_max: Some(1),
        };
        node.setup_pod(QosClass::Guaranteed, "x", &cfg, 0).unwrap();
        assert_eq!(k.effects().len(), before);
    }

    #[test]
    fn a_pod_is_removed_deepest_first_killing_what_still_runs() {
        let k = host(ALL, "");
        let node = setup(&k, None);
        let pod = cg(&format!("{OWN}/kubepods/besteffort/podz"));
        k.add_dir(pod.join("app"));
        // The container's cgroup still has a process the first time.
        k.fail_nth(1, Errno::EBUSY, {
            let app = pod.join("app");
            move |c| *c == Call::Rmdir(app.clone())
        });
        node.remove_pod(QosClass::BestEffort, "z");
        let tail: Vec<Call> = k
            .effects()
            .into_iter()
            .skip_while(|c| !matches!(c, Call::Rmdir(_)))
            .collect();
        assert_eq!(
            tail,
            vec![
                Call::Rmdir(pod.join("app")),
                Call::WriteFile {
                    path: pod.join("app/cgroup.kill"),
                    contents: "1".into()
                },
                Call::Rmdir(pod.join("app")),
                Call::Rmdir(pod.clone()),
            ]
        );
        assert!(!k.dirs().contains(&pod));
    }

    #[test]
    fn a_v1_node_removes_the_pod_from_every_hierarchy() {
        let k = v1_host();
        k.add_file("/proc/self/cgroup", "0::/\n");
        let node = NodeCgroups::setup_with(k.clone(), CgroupMode::Legacy, None, None);
        assert!(node.is_v1());
        let rel = node.pod_path(QosClass::BestEffort, "v");
        for h in ["memory", "cpu,cpuacct", "unified"] {
            k.add_dir(cg(&format!("/{h}{rel}")));
        }
        node.remove_pod(QosClass::BestEffort, "v");
        for h in ["memory", "cpu,cpuacct", "unified"] {
            assert!(!k.dirs().contains(&cg(&format!("/{h}{rel}"))), "{h}");
            assert!(
                k.dirs()
                    .contains(&cg(&format!("/{h}/podhost/kubepods/besteffort")))
            );
        }
    }
}
