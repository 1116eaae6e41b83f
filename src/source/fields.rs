//! The Pod fields podhost honours. Everything a manifest sets outside this list is
//! reported as a warning ("… is not honoured yet and is ignored"), never dropped
//! silently. Extend the list when a feature lands; the README's table is checked
//! against it.
//!
//! Syntax: JSON paths with `.` between object keys and `[*]` for every array element.
//! An entry honours its whole subtree (`metadata.labels` honours every label).

/// JSON paths of the Pod fields podhost honours (see the module documentation).
pub const HONOURED_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    // metadata
    "metadata.name",
    "metadata.namespace",
    "metadata.labels",
    "metadata.annotations",
    // Accepted, but replaced by the content hash (see `identity`) so edits are seen.
    "metadata.uid",
    // spec
    "spec.containers[*].name",
    "spec.containers[*].image",
    "spec.containers[*].imagePullPolicy",
    "spec.containers[*].command",
    "spec.containers[*].args",
    "spec.containers[*].env[*].name",
    "spec.containers[*].env[*].value",
    "spec.containers[*].workingDir",
    "spec.containers[*].lifecycle.preStop.exec",
    "spec.containers[*].lifecycle.preStop.sleep",
    "spec.containers[*].terminationMessagePath",
    // CPU and memory are enforced on cgroup v2 (degraded mode says when they are not).
    "spec.containers[*].resources.requests.cpu",
    "spec.containers[*].resources.requests.memory",
    "spec.containers[*].resources.limits.cpu",
    "spec.containers[*].resources.limits.memory",
    "spec.containers[*].terminationMessagePolicy",
    "spec.containers[*].securityContext.runAsUser",
    "spec.containers[*].securityContext.runAsGroup",
    "spec.containers[*].securityContext.runAsNonRoot",
    "spec.containers[*].securityContext.privileged",
    "spec.containers[*].securityContext.allowPrivilegeEscalation",
    "spec.containers[*].securityContext.capabilities",
    "spec.containers[*].securityContext.readOnlyRootFilesystem",
    "spec.containers[*].securityContext.procMount",
    "spec.containers[*].securityContext.appArmorProfile",
    "spec.containers[*].securityContext.seccompProfile",
    // Informational only (nothing is published; with hostNetwork the port is the host's).
    "spec.containers[*].ports",
    "spec.restartPolicy",
    "spec.terminationGracePeriodSeconds",
    "spec.hostNetwork",
    "spec.hostPID",
    "spec.hostIPC",
    // One pid namespace for the pod, held by `podhost pause` as its PID 1.
    "spec.shareProcessNamespace",
    // false: a user namespace of the pod's own (runtime/userns).
    "spec.hostUsers",
    // securityContext, pod level (the container's wins where both have a field).
    "spec.securityContext.runAsUser",
    "spec.securityContext.runAsGroup",
    "spec.securityContext.runAsNonRoot",
    "spec.securityContext.supplementalGroups",
    "spec.securityContext.supplementalGroupsPolicy",
    // Added to the containers' groups; volume ownership comes with volumes.
    "spec.securityContext.fsGroup",
    "spec.securityContext.sysctls",
    "spec.securityContext.appArmorProfile",
    "spec.securityContext.seccompProfile",
    "spec.nodeName",
    "spec.tolerations",
    // Accepted no-op: podhost has no cluster DNS; the host's resolv.conf is used.
    "spec.dnsPolicy",
    "spec.schedulerName",
    "spec.priority",
    // system-node-critical sets the oom_score_adj of a Guaranteed pod.
    "spec.priorityClassName",
    // Accepted no-op: there are no services to link.
    "spec.enableServiceLinks",
];

/// How a JSON path (with `[*]` for array indices) relates to [`HONOURED_FIELDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Honour {
    /// The path is listed: the whole subtree is honoured.
    Whole,
    /// Only some fields below the path are honoured: look inside.
    Partly,
    /// Nothing at or below the path is honoured.
    Not,
}

/// Classifies a pattern path such as `spec.containers[*].env[*]`.
pub(crate) fn honour(pattern: &str) -> Honour {
    let mut partly = false;
    for &entry in HONOURED_FIELDS {
        if entry == pattern {
            return Honour::Whole;
        }
        if let Some(rest) = entry.strip_prefix(pattern)
            && (rest.starts_with('.') || rest.starts_with('['))
        {
            partly = true;
        }
    }
    if partly { Honour::Partly } else { Honour::Not }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(honour("spec"), Honour::Partly);
        assert_eq!(honour("spec.containers"), Honour::Partly);
        assert_eq!(honour("spec.containers[*]"), Honour::Partly);
        assert_eq!(honour("spec.containers[*].image"), Honour::Whole);
        assert_eq!(honour("spec.containers[*].imagePull"), Honour::Not);
        assert_eq!(honour("spec.containers[*].env[*]"), Honour::Partly);
        assert_eq!(honour("spec.containers[*].env[*].valueFrom"), Honour::Not);
        assert_eq!(honour("spec.containers[*].lifecycle"), Honour::Partly);
        assert_eq!(
            honour("spec.containers[*].lifecycle.postStart"),
            Honour::Not
        );
        assert_eq!(honour("spec.volumes"), Honour::Not);
        assert_eq!(honour("metadata.labels"), Honour::Whole);
        assert_eq!(honour("metadata.generateName"), Honour::Not);
    }

    #[test]
    fn entries_are_well_formed() {
        for e in HONOURED_FIELDS {
            assert!(
                !e.is_empty() && !e.starts_with('.') && !e.ends_with('.'),
                "{e}"
            );
            assert!(!e.contains("[]") && !e.contains(".."), "{e}");
        }
        let mut sorted: Vec<_> = HONOURED_FIELDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), HONOURED_FIELDS.len(), "duplicate entry");
    }
}
