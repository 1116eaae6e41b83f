//! Where podhost's cgroups live: under the daemon's own cgroup, never at a hierarchy root.

use std::path::Path;

/// How the host's cgroups are mounted, as far as podhost cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// Only cgroup2 at /sys/fs/cgroup: resources can be enforced (issue 3 brings them).
    Unified,
    /// v1 controllers (with or without an empty cgroup2): limits are not enforced.
    Legacy,
}

/// Detects the host's mode from the filesystem type of /sys/fs/cgroup.
pub fn detect_mode() -> CgroupMode {
    match nix::sys::statfs::statfs("/sys/fs/cgroup") {
        Ok(st) if st.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC => {
            CgroupMode::Unified
        }
        _ => CgroupMode::Legacy,
    }
}

/// Picks the parent for podhost's cgroups from the contents of `/proc/self/cgroup`.
///
/// On a v1/hybrid host the daemon sits at a different path in each hierarchy; the deepest
/// path is used when every other one is a prefix of it (nested in every hierarchy), else
/// the deepest one anyway (the caller warns). The result never is `/` itself: a
/// `podhost` child is always appended, so no process is ever moved to a hierarchy root.
pub fn choose_root(proc_self_cgroup: &str) -> (String, bool) {
    let mut paths: Vec<&str> = proc_self_cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .map(|p| p.trim_end_matches('/'))
        .collect();
    paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let deepest = paths.first().copied().unwrap_or("");
    let nested_everywhere = paths
        .iter()
        .all(|p| p.is_empty() || deepest == *p || deepest.starts_with(&format!("{p}/")));
    (format!("{deepest}/podhost"), nested_everywhere)
}

/// Reads `/proc/self/cgroup` and chooses the root (see [`choose_root`]).
pub fn own_root() -> (String, bool) {
    let text = std::fs::read_to_string(Path::new("/proc/self/cgroup")).unwrap_or_default();
    choose_root(&text)
}

/// The cgroup of one pod and of one of its containers, relative to every hierarchy.
pub fn pod_cgroup(root: &str, uid: &str) -> String {
    format!("{}/kubepods/pod{uid}", root.trim_end_matches('/'))
}

pub fn container_cgroup(root: &str, uid: &str, container: &str) -> String {
    format!("{}/{container}", pod_cgroup(root, uid))
}

/// Removes a pod's cgroup directories in every mounted hierarchy (children first).
pub fn remove_pod_cgroups(root: &str, uid: &str) {
    let rel = pod_cgroup(root, uid);
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for h in hierarchies.flatten() {
        let dir = h.path().join(rel.trim_start_matches('/'));
        if let Ok(children) = std::fs::read_dir(&dir) {
            for c in children.flatten() {
                if c.path().is_dir() {
                    let _ = std::fs::remove_dir(c.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_host_uses_the_deepest_nested_path() {
        let text = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n";
        assert_eq!(
            choose_root(text),
            ("/process_api/abc/podhost".to_string(), true)
        );
    }

    #[test]
    fn conflicting_paths_are_reported() {
        let text = "4:memory:/a/b\n1:cpu:/c\n";
        assert_eq!(choose_root(text), ("/a/b/podhost".to_string(), false));
    }

    #[test]
    fn root_cgroup_still_gets_a_child() {
        assert_eq!(choose_root("0::/\n"), ("/podhost".to_string(), true));
        assert_eq!(
            container_cgroup("/x/podhost", "u1", "web"),
            "/x/podhost/kubepods/podu1/web"
        );
    }
}
