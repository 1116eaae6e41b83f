//! `podhost validate`'s host pass: the static table says what podhost honours where the
//! host allows; on a host whose cgroups cannot apply a resource field (cgroup v1, or no
//! usable controllers) that field is reported "not enforced on this host" instead of
//! "honoured", with what is missing.

use super::field_report::FieldReport;
use super::fields::FieldStatus;
use podhost_model::cgroup_enforcement::{
    HostEnforcement, UNENFORCED_REASON, V1_CPU_REQUEST_REASON,
};

/// The container resource fields (after `resources.`) a host may not enforce, with the
/// reason on a host of each kind (`None`: enforced there).
const RESOURCE_FIELDS: &[(&str, Option<&str>, Option<&str>)] = &[
    // (field, on a cgroup v1 host, where nothing is enforced)
    (
        "requests.cpu",
        Some(V1_CPU_REQUEST_REASON),
        Some(UNENFORCED_REASON),
    ),
    ("limits.cpu", None, Some(UNENFORCED_REASON)),
    ("limits.memory", None, Some(UNENFORCED_REASON)),
];

/// Marks each honoured container resource field of `report` that `host` does not
/// enforce as [`FieldStatus::NotEnforced`], with the reason.
pub fn mark_host_enforcement(report: &mut [FieldReport], host: HostEnforcement) {
    if host == HostEnforcement::Full {
        return;
    }
    for r in report.iter_mut() {
        if r.status != FieldStatus::Honoured {
            continue;
        }
        let Some(field) = container_resource_field(&r.path) else {
            continue;
        };
        let reason = RESOURCE_FIELDS
            .iter()
            .find(|(f, _, _)| *f == field)
            .and_then(|(_, v1, none)| match host {
                HostEnforcement::V1ContainerLimits => *v1,
                HostEnforcement::Unenforced => *none,
                HostEnforcement::Full => None,
            });
        if let Some(reason) = reason {
            r.status = FieldStatus::NotEnforced(reason);
        }
    }
}

/// `limits.cpu` of `spec.containers[2].resources.limits.cpu` (and of init containers).
fn container_resource_field(path: &str) -> Option<&str> {
    let rest = path
        .strip_prefix("spec.containers[")
        .or_else(|| path.strip_prefix("spec.initContainers["))?;
    let (index, field) = rest.split_once("].resources.")?;
    index.chars().all(|c| c.is_ascii_digit()).then_some(field)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::field_report::field_report;

    fn report_on(host: HostEnforcement) -> Vec<FieldReport> {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                "requests": {"cpu": "100m", "memory": "32Mi"},
                "limits": {"cpu": "200m", "memory": "64Mi"}}}]}
        });
        let mut report = field_report(&pod);
        mark_host_enforcement(&mut report, host);
        report
    }

    fn status_of<'a>(report: &'a [FieldReport], path: &str) -> &'a FieldStatus {
        &report
            .iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("{path} not reported: {report:?}"))
            .status
    }

    #[test]
    fn a_v1_host_says_the_qos_hierarchy_is_not_enforced_and_the_limits_are() {
        let report = report_on(HostEnforcement::V1ContainerLimits);
        let cpu_request = status_of(&report, "spec.containers[0].resources.requests.cpu");
        assert_eq!(cpu_request.as_str(), "not-enforced");
        assert!(
            cpu_request
                .reason()
                .starts_with("not enforced on this host")
                && cpu_request.reason().contains("QoS"),
            "{cpu_request:?}"
        );
        for honoured in [
            "spec.containers[0].resources.limits.cpu",
            "spec.containers[0].resources.limits.memory",
            "spec.containers[0].resources.requests.memory",
        ] {
            assert_eq!(
                *status_of(&report, honoured),
                FieldStatus::Honoured,
                "{honoured}"
            );
        }
    }

    #[test]
    fn a_host_enforcing_nothing_never_says_honoured_for_limits() {
        let report = report_on(HostEnforcement::Unenforced);
        for path in [
            "spec.containers[0].resources.requests.cpu",
            "spec.containers[0].resources.limits.cpu",
            "spec.containers[0].resources.limits.memory",
        ] {
            let s = status_of(&report, path);
            assert_eq!(*s, FieldStatus::NotEnforced(UNENFORCED_REASON), "{path}");
            assert!(s.reason().starts_with("not enforced on this host"));
        }
    }

    #[test]
    fn a_full_host_keeps_the_table() {
        let report = report_on(HostEnforcement::Full);
        assert!(
            report.iter().all(|r| r.status == FieldStatus::Honoured),
            "{report:?}"
        );
    }

    #[test]
    fn only_container_resource_paths_match() {
        assert_eq!(
            container_resource_field("spec.initContainers[12].resources.limits.cpu"),
            Some("limits.cpu")
        );
        assert_eq!(container_resource_field("spec.resources.limits.cpu"), None);
        assert_eq!(
            container_resource_field("spec.containers[x].resources.limits.cpu"),
            None
        );
    }
}
