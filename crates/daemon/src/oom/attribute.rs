//! Which pod and container an OOM event belongs to.
//!
//! podhost's cgroups are `<cgroup_root>/kubepods[/burstable|/besteffort]/pod<uid>/<container>`
//! (see `runtime::cgroup_root`). The kernel prints memcg paths from the root of the
//! cgroup2 hierarchy, while `cgroup_root` may be seen from inside a cgroup namespace
//! (`/podhost` for what the kernel calls `/process_api/abc/podhost`). A path therefore
//! matches when the segments before its `kubepods` segment *end with* the root's segments.

use super::event::OomEvent;

/// The pod UID and, when the path is a container's (or below one), the container name
/// of the killed process. Uses `task_memcg` (where the victim ran) and falls back to
/// `oom_memcg` (where the limit was hit). `None` when neither is one of podhost's pods.
pub fn attribute(event: &OomEvent, cgroup_root: &str) -> Option<(String, Option<String>)> {
    let task = match_pod_cgroup(&event.task_memcg, cgroup_root);
    let oom = match_pod_cgroup(&event.oom_memcg, cgroup_root);
    match (task, oom) {
        // The victim's own cgroup is the pod's (e.g. a group kill named the pod):
        // the limit's cgroup may still name the container.
        (Some((uid, None)), Some((oom_uid, container))) if uid == oom_uid => Some((uid, container)),
        (Some(task), _) => Some(task),
        (None, oom) => oom,
    }
}

/// Matches one memcg path against podhost's layout under `cgroup_root`.
pub fn match_pod_cgroup(path: &str, cgroup_root: &str) -> Option<(String, Option<String>)> {
    let segs: Vec<&str> = segments(path).collect();
    let root: Vec<&str> = segments(cgroup_root).collect();
    (0..segs.len())
        .filter(|&k| segs[k] == "kubepods" && segs[..k].ends_with(&root))
        .find_map(|k| pod_below(&segs[k + 1..]))
}

/// `[burstable|besteffort/]pod<uid>[/<container>[/...]]`.
fn pod_below(rest: &[&str]) -> Option<(String, Option<String>)> {
    let rest = match rest.first() {
        Some(&"burstable" | &"besteffort") => &rest[1..],
        _ => rest,
    };
    let uid = rest
        .first()?
        .strip_prefix("pod")
        .filter(|u| !u.is_empty())?;
    Some((uid.to_string(), rest.get(1).map(|c| c.to_string())))
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty() && *s != ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6f1c1a1e-1d7a-4f3e-9f59-7c8e2b7d0a11";

    fn event(oom: &str, task: &str) -> OomEvent {
        OomEvent {
            seq: 1,
            time_usec: 1,
            constraint: Some("CONSTRAINT_MEMCG".into()),
            oom_memcg: oom.into(),
            task_memcg: task.into(),
            victim_pid: 1,
            victim_comm: "x".into(),
            limit_kb: None,
            usage_kb: None,
            group_kill: false,
            system: false,
        }
    }

    fn some(uid: &str, c: Option<&str>) -> Option<(String, Option<String>)> {
        Some((uid.to_string(), c.map(str::to_string)))
    }

    #[test]
    fn every_qos_class_with_and_without_container() {
        let root = "/system.slice/podhost";
        for qos in ["", "/burstable", "/besteffort"] {
            let pod = format!("{root}/kubepods{qos}/pod{UID}");
            let ctr = format!("{pod}/web");
            assert_eq!(
                attribute(&event(&ctr, &ctr), root),
                some(UID, Some("web")),
                "{qos}"
            );
            assert_eq!(
                attribute(&event(&pod, &ctr), root),
                some(UID, Some("web")),
                "{qos}"
            );
            assert_eq!(
                attribute(&event(&pod, &pod), root),
                some(UID, None),
                "{qos}"
            );
            // A group kill named the pod, the limit was the container's.
            assert_eq!(
                attribute(&event(&ctr, &pod), root),
                some(UID, Some("web")),
                "{qos}"
            );
        }
    }

    #[test]
    fn system_oom_uses_the_victims_cgroup() {
        let task = format!("/podhost/kubepods/besteffort/pod{UID}/hog");
        assert_eq!(
            attribute(&event("/", &task), "/podhost"),
            some(UID, Some("hog"))
        );
    }

    #[test]
    fn root_seen_from_a_cgroup_namespace_matches_by_suffix() {
        let path = format!("/process_api/abc/podhost/kubepods/burstable/pod{UID}/app/sub");
        assert_eq!(
            attribute(&event(&path, &path), "/podhost"),
            some(UID, Some("app"))
        );
        assert_eq!(
            attribute(&event(&path, &path), "/process_api/abc/podhost/"),
            some(UID, Some("app"))
        );
        assert_eq!(attribute(&event(&path, &path), "/"), some(UID, Some("app")));
    }

    #[test]
    fn unknown_paths_are_none() {
        let root = "/system.slice/podhost";
        for path in [
            "/",
            "",
            "/oomtest",
            "/system.slice/podhost/shims",
            "/system.slice/podhost/kubepods",
            "/system.slice/podhost/kubepods/burstable",
            "/system.slice/podhost/kubepods/pod",
            "/system.slice/podhost/kubepods/notapod/x",
            "/system.slice/other/kubepods/podabc/web",
            "/kubepods/burstable/podabc/0123456789ab",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podabc.slice",
        ] {
            assert_eq!(attribute(&event(path, path), root), None, "{path}");
        }
    }
}
