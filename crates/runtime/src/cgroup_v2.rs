//! The small in-house cgroup v2 module: the QoS and pod cgroups (libcontainer manages the
//! container leaves), the daemon's own leaf, and reading `memory.events`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::RuntimeError;
use super::sys::{Kernel, LinuxKernel};

/// Where cgroup2 is mounted on a unified host.
pub const MOUNT: &str = "/sys/fs/cgroup";
/// Controllers podhost enables down its subtree when the parent offers them.
pub const CONTROLLERS: [&str; 6] = ["cpu", "cpuset", "io", "memory", "pids", "hugetlb"];
/// Controllers without which limits cannot be enforced.
pub const REQUIRED: [&str; 3] = ["cpu", "memory", "pids"];

/// A cgroup v2 hierarchy at `mount`, reached through `kernel`.
#[derive(Debug, Clone)]
pub struct CgroupV2 {
    mount: PathBuf,
    kernel: Arc<dyn Kernel>,
}

impl Default for CgroupV2 {
    fn default() -> Self {
        Self::new(MOUNT)
    }
}

fn io(what: &'static str, path: &Path, e: std::io::Error) -> RuntimeError {
    RuntimeError::io(what, path, e)
}

impl CgroupV2 {
    pub fn new(mount: impl Into<PathBuf>) -> Self {
        Self::with_kernel(mount, Arc::new(LinuxKernel))
    }

    /// The hierarchy at `mount` as `kernel` shows it.
    pub fn with_kernel(mount: impl Into<PathBuf>, kernel: Arc<dyn Kernel>) -> Self {
        Self {
            mount: mount.into(),
            kernel,
        }
    }

    /// The kernel this hierarchy is reached through.
    pub fn kernel(&self) -> &Arc<dyn Kernel> {
        &self.kernel
    }

    /// The directory of the cgroup at `rel` (a path like `/a/b`).
    pub fn dir(&self, rel: &str) -> PathBuf {
        self.mount.join(rel.trim_start_matches('/'))
    }

    /// Controllers the cgroup at `rel` offers to its children.
    pub fn available(&self, rel: &str) -> Vec<String> {
        self.kernel
            .read_file(&self.dir(rel).join("cgroup.controllers"))
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    /// Enables podhost's controllers in `rel`'s subtree_control (those it offers).
    pub fn enable_controllers(&self, rel: &str) -> Result<(), RuntimeError> {
        let available = self.available(rel);
        let wanted: Vec<String> = CONTROLLERS
            .iter()
            .filter(|c| available.iter().any(|a| a == *c))
            .map(|c| format!("+{c}"))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let file = self.dir(rel).join("cgroup.subtree_control");
        self.kernel
            .write_file(&file, &wanted.join(" "))
            .map_err(|e| io("enable controllers in", &file, e))
    }

    /// Creates `rel` and its missing ancestors below `base`, enabling controllers in every
    /// cgroup on the way (so `rel` gets them), but not in `rel` itself.
    pub fn ensure(&self, base: &str, rel: &str) -> Result<PathBuf, RuntimeError> {
        let base = base.trim_end_matches('/');
        let rest = rel
            .strip_prefix(base)
            .unwrap_or(rel)
            .trim_start_matches('/');
        let mut current = base.to_string();
        self.enable_controllers(if current.is_empty() { "/" } else { &current })?;
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            current = format!("{current}/{part}");
            let dir = self.dir(&current);
            if !self.kernel.exists(&dir) {
                self.kernel
                    .mkdir(&dir)
                    .map_err(|e| io("create cgroup", &dir, e))?;
            }
            if i + 1 < parts.len() {
                self.enable_controllers(&current)?;
            }
        }
        Ok(self.dir(rel))
    }

    /// Writes one interface file of the cgroup at `rel`.
    pub fn write(&self, rel: &str, file: &str, value: &str) -> Result<(), RuntimeError> {
        let path = self.dir(rel).join(file);
        self.kernel
            .write_file(&path, value)
            .map_err(|e| io("write", &path, e))
    }

    pub fn read(&self, rel: &str, file: &str) -> Option<String> {
        self.kernel.read_file(&self.dir(rel).join(file)).ok()
    }

    /// Whether the cgroup at `rel` has processes of its own.
    pub fn has_processes(&self, rel: &str) -> bool {
        self.read(rel, "cgroup.procs")
            .is_some_and(|p| !p.trim().is_empty())
    }

    /// Moves the calling process into the cgroup at `rel` (created if needed).
    pub fn move_self(&self, rel: &str) -> Result<(), RuntimeError> {
        let dir = self.dir(rel);
        self.kernel
            .mkdir_all(&dir)
            .map_err(|e| io("create cgroup", &dir, e))?;
        let procs = dir.join("cgroup.procs");
        self.kernel
            .write_file(&procs, &std::process::id().to_string())
            .map_err(|e| io("move the process into", &procs, e))
    }

    /// Removes the cgroup at `rel` and everything below it, deepest first; processes
    /// still inside are killed through `cgroup.kill`.
    pub fn remove_tree(&self, rel: &str) {
        fn rm(kernel: &dyn Kernel, dir: &Path) {
            for child in kernel.subdirs(dir).unwrap_or_default() {
                rm(kernel, &child);
            }
            for attempt in 0..5 {
                match kernel.rmdir(dir) {
                    Ok(()) => return,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                    Err(_) if attempt == 0 => {
                        let _ = kernel.write_file(&dir.join("cgroup.kill"), "1");
                    }
                    Err(_) => {}
                }
                std::thread::sleep(std::time::Duration::from_millis(10 << attempt));
            }
            tracing::warn!(cgroup = %dir.display(), "cannot remove cgroup");
        }
        let dir = self.dir(rel);
        if self.kernel.exists(&dir) {
            rm(self.kernel.as_ref(), &dir);
        }
    }
}

/// The counters of `memory.events`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryEvents {
    pub max: u64,
    pub oom: u64,
    pub oom_kill: u64,
    pub oom_group_kill: u64,
}

/// Parses `memory.events` text.
pub fn parse_memory_events(text: &str) -> MemoryEvents {
    let mut ev = MemoryEvents::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse().ok())) else {
            continue;
        };
        match k {
            "max" => ev.max = v,
            "oom" => ev.oom = v,
            "oom_kill" => ev.oom_kill = v,
            "oom_group_kill" => ev.oom_group_kill = v,
            _ => {}
        }
    }
    ev
}

/// Reads `memory.events` of a cgroup directory.
pub fn read_memory_events(cgroup_dir: &Path) -> Option<MemoryEvents> {
    std::fs::read_to_string(cgroup_dir.join("memory.events"))
        .ok()
        .map(|t| parse_memory_events(&t))
}

/// Reads a single-number interface file (`memory.peak`, `memory.max`); `max` → None.
pub fn read_number(cgroup_dir: &Path, file: &str) -> Option<u64> {
    std::fs::read_to_string(cgroup_dir.join(file))
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_events_from_the_vm_capture() {
        let text = "low 0\nhigh 0\nmax 35\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(
            parse_memory_events(text),
            MemoryEvents {
                max: 35,
                oom: 1,
                oom_kill: 1,
                oom_group_kill: 0
            }
        );
    }

    #[test]
    fn ensure_creates_the_path_and_enables_controllers_on_the_way() {
        // A fake hierarchy in a temp dir: plain files stand in for the interface files.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cgroup.controllers"),
            "cpu memory pids io\n",
        )
        .unwrap();
        let cg = CgroupV2::new(dir.path());
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/cgroup.controllers"), "cpu memory pids\n").unwrap();
        let leaf = cg.ensure("/a", "/a/kubepods/podx").unwrap();
        assert!(leaf.is_dir());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/cgroup.subtree_control")).unwrap(),
            "+cpu +memory +pids"
        );
        // kubepods offers nothing in the fake (no controllers file): nothing written.
        assert!(
            !dir.path()
                .join("a/kubepods/podx/cgroup.subtree_control")
                .exists()
        );
    }
}
